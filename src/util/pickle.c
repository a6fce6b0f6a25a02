/* A reader for pickles of plain data (protocols 2 to 5), as `pickle.dump` writes a dict of
 * lists, strings and numbers: the opcodes of Python's Lib/pickle.py that build such values.
 * Anything that would name a global, call a constructor or use an extension (GLOBAL, REDUCE,
 * BUILD, NEWOBJ, PERSID, ...) is refused with an error naming it: nothing is ever executed.
 * Every read is bounds-checked; the stack, the MARK stack and the memo are bounded by the
 * input (memo indices must come in order, as Python's pickler writes them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "membudget/membudget.h"
#include "util/datum.h"

typedef struct preader {
  const unsigned char *data;
  size_t size, pos, op_at;
  unsigned char op;
  mb_arena *a;
  mb_diag *d;
  mb_datum **stack;
  size_t n_stack, cap_stack;
  size_t *marks;
  size_t n_marks;
  mb_datum **memo;
  size_t n_memo, cap_memo;
} preader;

static const char *op_name(unsigned char op) {
  switch (op) {
    case 0x80: return "PROTO"; case 0x95: return "FRAME"; case '}': return "EMPTY_DICT";
    case ']': return "EMPTY_LIST"; case ')': return "EMPTY_TUPLE"; case '(': return "MARK";
    case 'u': return "SETITEMS"; case 's': return "SETITEM"; case 'e': return "APPENDS";
    case 'a': return "APPEND"; case 't': return "TUPLE"; case 0x85: return "TUPLE1";
    case 0x86: return "TUPLE2"; case 0x87: return "TUPLE3"; case 'N': return "NONE";
    case 0x88: return "NEWTRUE"; case 0x89: return "NEWFALSE"; case 'J': return "BININT";
    case 'K': return "BININT1"; case 'M': return "BININT2"; case 0x8a: return "LONG1";
    case 0x8b: return "LONG4"; case 'G': return "BINFLOAT"; case 'X': return "BINUNICODE";
    case 0x8c: return "SHORT_BINUNICODE"; case 0x8d: return "BINUNICODE8";
    case 'C': return "SHORT_BINBYTES"; case 'B': return "BINBYTES"; case 0x8e: return "BINBYTES8";
    case 0x96: return "BYTEARRAY8"; case 'U': return "SHORT_BINSTRING"; case 'T': return "BINSTRING";
    case 'q': return "BINPUT"; case 'r': return "LONG_BINPUT"; case 0x94: return "MEMOIZE";
    case 'h': return "BINGET"; case 'j': return "LONG_BINGET"; case '0': return "POP";
    case '2': return "DUP"; case '1': return "POP_MARK"; case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS"; case 0x91: return "FROZENSET"; case '.': return "STOP";
    case 'c': return "GLOBAL"; case 0x93: return "STACK_GLOBAL"; case 'R': return "REDUCE";
    case 'b': return "BUILD"; case 'i': return "INST"; case 'o': return "OBJ";
    case 0x81: return "NEWOBJ"; case 0x92: return "NEWOBJ_EX"; case 0x82: return "EXT1";
    case 0x83: return "EXT2"; case 0x84: return "EXT4"; case 'P': return "PERSID";
    case 'Q': return "BINPERSID"; case 0x97: return "NEXT_BUFFER"; case 0x98: return "READONLY_BUFFER";
    case 'I': return "INT"; case 'L': return "LONG"; case 'S': return "STRING";
    case 'V': return "UNICODE"; case 'F': return "FLOAT"; case 'd': return "DICT";
    case 'l': return "LIST"; case 'p': return "PUT"; case 'g': return "GET";
    default: return NULL;
  }
}

static int pfail(preader *r, int status, const char *what) {
  const char *name = op_name(r->op);
  if (name)
    return mb_fail(r->d, status, "pickle: %s (opcode %s at offset %zu)", what, name, r->op_at);
  return mb_fail(r->d, status, "pickle: %s (byte 0x%02x at offset %zu)", what, r->op, r->op_at);
}

static int nomem(preader *r) { return mb_fail(r->d, MB_E_NOMEM, "out of memory"); }

/* n bytes of argument, or NULL when the input ends first */
static const unsigned char *take(preader *r, size_t n) {
  if (n > r->size - r->pos) {
    pfail(r, MB_E_PARSE, "truncated input");
    return NULL;
  }
  const unsigned char *p = r->data + r->pos;
  r->pos += n;
  return p;
}

static bool le_uint(preader *r, size_t n, uint64_t *out) {
  const unsigned char *p = take(r, n);
  if (!p) return false;
  uint64_t v = 0;
  for (size_t k = n; k-- > 0;) v = v << 8 | p[k];
  *out = v;
  return true;
}

static int push(preader *r, mb_datum *v) {
  if (!v) return nomem(r);
  if (r->n_stack == r->cap_stack) {
    size_t cap = r->cap_stack ? r->cap_stack * 2 : 64;
    mb_datum **grown = realloc(r->stack, cap * sizeof *grown);
    if (!grown) return nomem(r);
    r->stack = grown;
    r->cap_stack = cap;
  }
  r->stack[r->n_stack++] = v;
  return MB_OK;
}

static mb_datum *pop(preader *r) {
  size_t floor = r->n_marks ? r->marks[r->n_marks - 1] : 0;
  if (r->n_stack <= floor) {
    pfail(r, MB_E_PARSE, "stack underflow");
    return NULL;
  }
  return r->stack[--r->n_stack];
}

static mb_datum *top(preader *r) {
  size_t floor = r->n_marks ? r->marks[r->n_marks - 1] : 0;
  if (r->n_stack <= floor) {
    pfail(r, MB_E_PARSE, "stack underflow");
    return NULL;
  }
  return r->stack[r->n_stack - 1];
}

/* The items above the last MARK: stack[*first .. n_stack); the mark is popped. */
static int pop_mark(preader *r, size_t *first) {
  if (!r->n_marks) return pfail(r, MB_E_PARSE, "no MARK to pop");
  *first = r->marks[--r->n_marks];
  return MB_OK;
}

static int integer(preader *r, const unsigned char *p, size_t n) {
  mb_datum *v = mb_datum_new(r->a, MB_D_INT);
  if (!v) return nomem(r);
  bool neg = n && (p[n - 1] & 0x80);
  /* two's complement little endian; drop sign-extension bytes, then see what is left */
  size_t len = n;
  while (len > 0 && p[len - 1] == (neg ? 0xFF : 0x00)) len--;
  if (!neg) {
    if (len > 8) v->big = 1;
    for (size_t k = len; k-- > 0 && !v->big;) v->u = v->u << 8 | p[k];
  } else {
    v->neg = 1;
    bool fits = len < 8 || (len == 8 && (p[7] & 0x80));
    if (!fits) v->big = 1;
    else {
      uint64_t bits = UINT64_MAX;
      for (size_t k = len; k-- > 0;) bits = bits << 8 | p[k];
      memcpy(&v->i, &bits, sizeof bits);
    }
  }
  return push(r, v);
}

static int text(preader *r, size_t n, int kind) {
  const unsigned char *p = take(r, n);
  if (!p) return r->d->status;
  mb_datum *v = mb_datum_new(r->a, kind);
  char *s = mb_arena_strndup(r->a, (const char *)p, n);
  if (!v || !s) return nomem(r);
  v->s = s;
  v->n = n;
  return push(r, v);
}

static int sized_text(preader *r, size_t width, int kind) {
  uint64_t n = 0;
  if (!le_uint(r, width, &n)) return r->d->status;
  if (n > r->size - r->pos) return pfail(r, MB_E_PARSE, "truncated input");
  return text(r, (size_t)n, kind);
}

static int memo_put(preader *r, uint64_t index) {
  mb_datum *v = top(r);
  if (!v) return r->d->status;
  /* Python's pickler numbers memo entries 0, 1, 2, ...: a later index may only overwrite */
  if (index > r->n_memo) return pfail(r, MB_E_PARSE, "memo index out of order");
  if (index == r->n_memo) {
    if (r->n_memo == r->cap_memo) {
      size_t cap = r->cap_memo ? r->cap_memo * 2 : 64;
      mb_datum **grown = realloc(r->memo, cap * sizeof *grown);
      if (!grown) return nomem(r);
      r->memo = grown;
      r->cap_memo = cap;
    }
    r->n_memo++;
  }
  r->memo[index] = v;
  return MB_OK;
}

static int memo_get(preader *r, uint64_t index) {
  if (index >= r->n_memo) return pfail(r, MB_E_PARSE, "memo index not defined");
  return push(r, r->memo[index]);
}

static int make_tuple(preader *r, size_t first) {
  mb_datum *t = mb_datum_new(r->a, MB_D_LIST);
  if (!t) return nomem(r);
  for (size_t k = first; k < r->n_stack; k++)
    if (mb_datum_push(r->a, t, r->stack[k]) != MB_OK) return nomem(r);
  r->n_stack = first;
  return push(r, t);
}

static int fixed_tuple(preader *r, size_t n) {
  size_t floor = r->n_marks ? r->marks[r->n_marks - 1] : 0;
  if (r->n_stack < floor + n) return pfail(r, MB_E_PARSE, "stack underflow");
  return make_tuple(r, r->n_stack - n);
}

/* APPEND(S) / ADDITEMS: items stack[first..] into the list below them */
static int append_items(preader *r, size_t first) {
  size_t floor = r->n_marks ? r->marks[r->n_marks - 1] : 0;
  if (first == 0 || first - 1 < floor) return pfail(r, MB_E_PARSE, "stack underflow");
  mb_datum *list = r->stack[first - 1];
  if (list->kind != MB_D_LIST) return pfail(r, MB_E_PARSE, "appending to something that is not a list");
  for (size_t k = first; k < r->n_stack; k++)
    if (mb_datum_push(r->a, list, r->stack[k]) != MB_OK) return nomem(r);
  r->n_stack = first;
  return MB_OK;
}

static int set_items(preader *r, size_t first) {
  size_t floor = r->n_marks ? r->marks[r->n_marks - 1] : 0;
  if (first == 0 || first - 1 < floor) return pfail(r, MB_E_PARSE, "stack underflow");
  mb_datum *dict = r->stack[first - 1];
  if (dict->kind != MB_D_DICT) return pfail(r, MB_E_PARSE, "setting items of something that is not a dict");
  if ((r->n_stack - first) % 2) return pfail(r, MB_E_PARSE, "odd number of items for a dict");
  for (size_t k = first; k < r->n_stack; k += 2)
    if (mb_datum_put(r->a, dict, r->stack[k], r->stack[k + 1]) != MB_OK) return nomem(r);
  r->n_stack = first;
  return MB_OK;
}

static int step(preader *r, bool *stop) {
  uint64_t n = 0;
  size_t first = 0;
  const unsigned char *p;
  mb_datum *v;
  switch (r->op) {
    case 0x80: /* PROTO */
      if (!(p = take(r, 1))) return r->d->status;
      if (p[0] < 2 || p[0] > 5) return pfail(r, MB_E_UNSUPPORTED, "only pickle protocols 2 to 5 are read");
      return MB_OK;
    case 0x95: /* FRAME: a length hint for buffering; the opcodes follow inline */
      return le_uint(r, 8, &n) ? MB_OK : r->d->status;
    case '.': *stop = true; return MB_OK;
    case '(':
      if (r->n_marks >= MB_DATUM_MAX_DEPTH) return pfail(r, MB_E_LIMIT, "nesting too deep");
      r->marks[r->n_marks++] = r->n_stack;
      return MB_OK;
    case '}': return push(r, mb_datum_new(r->a, MB_D_DICT));
    case ']':
    case 0x8f: return push(r, mb_datum_new(r->a, MB_D_LIST));
    case ')': return push(r, mb_datum_new(r->a, MB_D_LIST));
    case 'N': return push(r, mb_datum_new(r->a, MB_D_NONE));
    case 0x88:
    case 0x89:
      if (!(v = mb_datum_new(r->a, MB_D_BOOL))) return nomem(r);
      v->b = r->op == 0x88;
      return push(r, v);
    case 'J': return (p = take(r, 4)) ? integer(r, p, 4) : r->d->status;
    case 'K':
      if (!(p = take(r, 1))) return r->d->status;
      return integer(r, (const unsigned char[]){p[0], 0}, 2);
    case 'M':
      if (!(p = take(r, 2))) return r->d->status;
      return integer(r, (const unsigned char[]){p[0], p[1], 0}, 3);
    case 0x8a:
      if (!le_uint(r, 1, &n)) return r->d->status;
      return (p = take(r, (size_t)n)) ? integer(r, p, (size_t)n) : r->d->status;
    case 0x8b:
      if (!le_uint(r, 4, &n)) return r->d->status;
      if (n & 0x80000000u) return pfail(r, MB_E_PARSE, "negative LONG4 length");
      return (p = take(r, (size_t)n)) ? integer(r, p, (size_t)n) : r->d->status;
    case 'G': {
      if (!(p = take(r, 8))) return r->d->status;
      uint64_t bits = 0;
      for (int k = 0; k < 8; k++) bits = bits << 8 | p[k]; /* big endian */
      if (!(v = mb_datum_new(r->a, MB_D_FLOAT))) return nomem(r);
      memcpy(&v->f, &bits, sizeof bits);
      return push(r, v);
    }
    case 0x8c: return sized_text(r, 1, MB_D_STR);
    case 'X': return sized_text(r, 4, MB_D_STR);
    case 0x8d: return sized_text(r, 8, MB_D_STR);
    case 'U': return sized_text(r, 1, MB_D_STR);
    case 'T': return sized_text(r, 4, MB_D_STR);
    case 'C': return sized_text(r, 1, MB_D_BYTES);
    case 'B': return sized_text(r, 4, MB_D_BYTES);
    case 0x8e:
    case 0x96: return sized_text(r, 8, MB_D_BYTES);
    case 0x94: return memo_put(r, r->n_memo);
    case 'q': return le_uint(r, 1, &n) ? memo_put(r, n) : r->d->status;
    case 'r': return le_uint(r, 4, &n) ? memo_put(r, n) : r->d->status;
    case 'h': return le_uint(r, 1, &n) ? memo_get(r, n) : r->d->status;
    case 'j': return le_uint(r, 4, &n) ? memo_get(r, n) : r->d->status;
    case '0': return pop(r) ? MB_OK : r->d->status;
    case '2': return (v = top(r)) ? push(r, v) : r->d->status;
    case '1':
      if (pop_mark(r, &first) != MB_OK) return r->d->status;
      r->n_stack = first;
      return MB_OK;
    case 'a':
      if (r->n_stack < 1) return pfail(r, MB_E_PARSE, "stack underflow");
      return append_items(r, r->n_stack - 1);
    case 'e':
    case 0x90:
      if (pop_mark(r, &first) != MB_OK) return r->d->status;
      return append_items(r, first);
    case 's':
      if (r->n_stack < 2) return pfail(r, MB_E_PARSE, "stack underflow");
      return set_items(r, r->n_stack - 2);
    case 'u':
      if (pop_mark(r, &first) != MB_OK) return r->d->status;
      return set_items(r, first);
    case 't':
    case 0x91:
      if (pop_mark(r, &first) != MB_OK) return r->d->status;
      return make_tuple(r, first);
    case 0x85: return fixed_tuple(r, 1);
    case 0x86: return fixed_tuple(r, 2);
    case 0x87: return fixed_tuple(r, 3);
    default:
      if (op_name(r->op))
        return pfail(r, MB_E_UNSUPPORTED,
                     "not plain data: objects, globals and protocol 0/1 opcodes are not read");
      return pfail(r, MB_E_PARSE, "unknown opcode");
  }
}

int mb_pickle_parse(const unsigned char *data, size_t size, mb_arena *a, mb_datum **out, mb_diag *d) {
  *out = NULL;
  size_t marks[MB_DATUM_MAX_DEPTH];
  preader r = {.data = data, .size = size, .a = a, .d = d, .marks = marks};
  bool stop = false;
  while (!stop && d->status == MB_OK) {
    if (r.pos >= r.size) {
      mb_fail(d, MB_E_PARSE, "pickle: truncated input (no STOP opcode at offset %zu)", r.pos);
      break;
    }
    r.op_at = r.pos;
    r.op = r.data[r.pos++];
    step(&r, &stop);
  }
  if (d->status == MB_OK) {
    r.op = '.';
    r.op_at = r.pos - 1;
    if (r.n_marks) pfail(&r, MB_E_PARSE, "MARK left open at STOP");
    else if (!r.n_stack) pfail(&r, MB_E_PARSE, "empty stack at STOP");
    else *out = r.stack[r.n_stack - 1];
  }
  free(r.stack);
  free(r.memo);
  return d->status;
}

int mb_data_parse(const unsigned char *data, size_t size, mb_arena *a, mb_datum **out, mb_diag *d) {
  *out = NULL;
  if (!data || !size) return mb_fail(d, MB_E_PARSE, "the input is empty");
  if (data[0] == 0x80) return mb_pickle_parse(data, size, a, out, d);
  /* protocol 0 and 1 pickles start with an opcode JSON never does: MARK, EMPTY_DICT/LIST,
   * GLOBAL, DICT, LIST, INT, STRING, UNICODE, NONE, EMPTY_TUPLE */
  if (strchr("(}]cdlISVN)", data[0]))
    return mb_fail(d, MB_E_PARSE, "a pickle of protocol 0 or 1, which this reader does not take: write it with "
                                  "protocol 2 or later (torch.cuda.memory._dump_snapshot writes 4)");
  return mb_json_parse((const char *)data, size, a, out, d);
}
