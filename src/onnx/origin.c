#include "onnx/origin.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/origin.h"
#include "onnx/wire.h"

/* Bounds on what is kept of untrusted metadata: longer strings are cut, not refused (they
 * only inform the simulation; a cut argument list reads as "unknown"). */
#define MAX_PATH 512
#define MAX_ARGS 1024
#define MAX_FRAMES 4096 /* a recorded stack, one short line per frame */

/* ------------------------------------------------------------------ interning */

int mb_interner_init(mb_interner *in, mb_arena *arena) {
  memset(in, 0, sizeof *in);
  in->arena = arena;
  mb_arena_init(&in->memo_arena);
  int bad = mb_strmap_init(&in->map, 64);
  for (int k = 0; k < MB_MEMO_KINDS; k++) {
    in->last[k] = -1;
    bad |= mb_strmap_init(&in->memo[k], 16);
  }
  if (bad) {
    mb_interner_free(in);
    return MB_E_NOMEM;
  }
  return MB_OK;
}

void mb_interner_free(mb_interner *in) {
  mb_strmap_free(&in->map);
  for (int k = 0; k < MB_MEMO_KINDS; k++) mb_strmap_free(&in->memo[k]);
  mb_arena_destroy(&in->memo_arena);
  free(in->strs);
  free(in->memos);
  free(in->memo_keys);
  memset(in, 0, sizeof *in);
}

/* s[0..len) cut at limit and at its first NUL (a C string's end), interned: looked up in
 * place, copied only the first time. */
static const char *intern_upto(mb_interner *in, const char *s, size_t len, size_t limit) {
  if (limit > MAX_FRAMES) limit = MAX_FRAMES;
  if (len > limit) len = limit;
  len = strnlen(s, len);
  int32_t k = mb_strmap_get_n(&in->map, s, len); /* a memchr for NUL again: cheap beside the hash */
  if (k >= 0) return in->strs[k];
  if (in->n == in->cap) {
    int32_t cap = in->cap ? in->cap * 2 : 64;
    const char **grown = realloc(in->strs, (size_t)cap * sizeof *grown);
    if (!grown) return NULL;
    in->strs = grown;
    in->cap = cap;
  }
  const char *copy = mb_arena_strndup(in->arena, s, len);
  if (!copy || mb_strmap_put(&in->map, copy, in->n, NULL) < 0) return NULL;
  in->strs[in->n] = copy;
  return in->strs[in->n++];
}

const char *mb_intern(mb_interner *in, const char *s, size_t len) { return intern_upto(in, s, len, MAX_ARGS); }

/* ------------------------------------------------------------------ dynamo metadata */

/* The first occurrence of needle[0..n) (n >= 1) in [p, end), or NULL: memchr for its first
 * byte, so a stack trace or an FX node is not compared byte by byte. */
static const char *find(const char *p, const char *end, const char *needle, size_t n) {
  while (p && (size_t)(end - p) >= n) {
    p = memchr(p, needle[0], (size_t)(end - p) - n + 1);
    if (!p) return NULL;
    if (!memcmp(p, needle, n)) return p;
    p++;
  }
  return NULL;
}

/* The items of a Python list of strings ("['', 'a', 'a.b', 'name']"), quotes ' or " with
 * backslash escapes: calls item(ctx, text, len) for each; false when malformed. */
static bool each_item(const char *s, size_t len, bool (*item)(void *, const char *, size_t), void *ctx) {
  char buf[MAX_PATH];
  const char *end = s + len;
  for (const char *p = s; p < end; p++) {
    if (*p != '\'' && *p != '"') continue;
    char q = *p++;
    size_t n = 0;
    while (p < end && *p != q) {
      if (*p == '\\' && p + 1 < end) p++;
      if (n + 1 < sizeof buf) buf[n++] = *p;
      p++;
    }
    if (p >= end) return false; /* unterminated */
    buf[n] = '\0';
    if (!item(ctx, buf, n)) return false;
  }
  return true;
}

/* name_scopes: the called modules (full dotted paths) from the root, then the FX node. Kept:
 * the innermost module, the FX node's name, and the call chain as a TorchScript-style scope
 * "/model/layers.0/self_attn/<fx>" (each module named relative to its caller). */
typedef struct scopes {
  char prev[MAX_PATH], last[MAX_PATH]; /* the item before the last, the last */
  char scope[MAX_PATH];
  size_t scope_len;
  bool overflow;
} scopes;

static bool add_scope_item(void *ctx, const char *item, size_t n) {
  scopes *sc = ctx;
  memcpy(sc->prev, sc->last, strlen(sc->last) + 1);
  memcpy(sc->last, item, n + 1);
  /* a module the previous item called: its path relative to the caller's */
  const char *rel = item;
  size_t pl = strlen(sc->prev);
  if (pl && n > pl && !strncmp(item, sc->prev, pl) && item[pl] == '.') rel = item + pl + 1;
  if (!n) return true; /* the root module */
  size_t rl = strlen(rel);
  if (sc->scope_len + rl + 2 >= sizeof sc->scope) {
    sc->overflow = true;
    return true;
  }
  sc->scope[sc->scope_len++] = '/';
  memcpy(sc->scope + sc->scope_len, rel, rl + 1);
  sc->scope_len += rl;
  return true;
}

/* class_hierarchy: the module classes from the root, then the FX node's target. Kept: the
 * modules that define the classes, one per line ("torch_geometric.nn.conv.gat_conv\n"), the
 * target's line dropped (last_len: the length of the last line written). */
typedef struct classes {
  char buf[MAX_FRAMES];
  size_t len, last_len;
  bool overflow;
} classes;

static bool add_class_item(void *ctx, const char *item, size_t n) {
  classes *cl = ctx;
  const char *dot = NULL;
  for (size_t i = 0; i < n; i++)
    if (item[i] == '.') dot = item + i;
  size_t ml = dot ? (size_t)(dot - item) : n;
  if (cl->len + ml + 2 >= sizeof cl->buf) {
    cl->overflow = true;
    return true;
  }
  memcpy(cl->buf + cl->len, item, ml);
  cl->buf[cl->len + ml] = '\n';
  cl->len += ml + 1;
  cl->last_len = ml + 1;
  return true;
}

/* class_hierarchy again: the class names alone ("BasicBlock"), one per line, the target's line
 * dropped: what FSDP's wrapping by module class matches (sim/dist.c). */
static bool add_class_name(void *ctx, const char *item, size_t n) {
  classes *cl = ctx;
  size_t start = 0;
  for (size_t i = 0; i < n; i++)
    if (item[i] == '.') start = i + 1;
  size_t ml = n - start;
  if (cl->len + ml + 2 >= sizeof cl->buf) {
    cl->overflow = true;
    return true;
  }
  memcpy(cl->buf + cl->len, item + start, ml);
  cl->buf[cl->len + ml] = '\n';
  cl->len += ml + 1;
  cl->last_len = ml + 1;
  return true;
}

static bool is_placeholder_scope(const char *m) {
  /* torch.export marks nodes outside any module with this placeholder scope */
  return strlen(m) >= 22 && !memcmp(m, "_empty_nn_module_stack", 22);
}

/* "%name : [...] = call_function[target=torch.ops.aten.x.default](args = (...), kwargs = {...})" */
static int parse_fx_node(const char *s, size_t len, mb_node *n, mb_interner *in) {
  const char *end = s + len;
  const char *t = find(s, end, "target=", 7);
  if (!t) return MB_OK;
  t += 7;
  const char *te = t;
  while (te < end && *te != ']' && *te != '(') te++;
  if (te - t > 10 && !memcmp(t, "torch.ops.", 10)) t += 10;
  if (!(n->origin.aten = mb_intern(in, t, (size_t)(te - t)))) return MB_E_NOMEM;
  /* args = ( ... ), kwargs = { ... } : balanced brackets, quotes skipped */
  static const char *const keys[2] = {"args = ", "kwargs = "};
  const char **dst[2] = {&n->origin.args, &n->origin.kwargs};
  const char *p = te;
  for (int k = 0; k < 2; k++) {
    size_t kl = strlen(keys[k]);
    p = find(p, end, keys[k], kl);
    if (!p) break;
    p += kl;
    const char *a = p;
    int depth = 0;
    for (; p < end; p++) {
      if (*p == '\'' || *p == '"') {
        char q = *p;
        for (p++; p < end && *p != q; p++)
          if (*p == '\\') p++;
        continue;
      }
      if (*p == '(' || *p == '[' || *p == '{') depth++;
      if ((*p == ')' || *p == ']' || *p == '}') && --depth == 0) {
        p++;
        break;
      }
    }
    if (!(*dst[k] = mb_intern(in, a, (size_t)(p - a)))) return MB_E_NOMEM;
  }
  return MB_OK;
}

/* The names a Python statement binds: "h" for `h = f(x)` and `h += x`, "" for a return, an
 * expression, a tuple target or an attribute/subscript target (only plain locals are followed). */
static size_t statement_target(const char *src, size_t n, char *out, size_t size) {
  while (n && (*src == ' ' || *src == '\t')) src++, n--;
  size_t i = 0;
  while (i < n && (isalnum((unsigned char)src[i]) || src[i] == '_')) i++;
  if (i == 0 || isdigit((unsigned char)src[0]) || i + 1 >= size) return 0;
  size_t j = i;
  if (j < n && src[j] == ':') { /* an annotation: `h: Tensor = ...` */
    while (j < n && src[j] != '=') j++;
  }
  while (j < n && src[j] == ' ') j++;
  bool aug = j + 1 < n && strchr("+-*/@%&|^", src[j]) && src[j + 1] == '=';
  bool assign = j < n && src[j] == '=' && (j + 1 >= n || src[j + 1] != '=');
  if (!aug && !assign) return 0;
  static const char *const keywords[] = {"return", "yield", "if", "elif", "while", "for", "assert", "del"};
  for (size_t k = 0; k < sizeof keywords / sizeof keywords[0]; k++)
    if (strlen(keywords[k]) == i && !memcmp(src, keywords[k], i)) return 0;
  memcpy(out, src, i);
  out[i] = '\0';
  return i;
}

/* Where a frame's file is, in the form a module path names it: the part after site-packages/
 * or dist-packages/ ("torch_geometric/nn/conv/gat_conv.py"), else the last four components. */
static void file_key(const char *file, size_t n, const char **key, size_t *kl) {
  static const char *const roots[] = {"site-packages/", "dist-packages/"};
  *key = file;
  *kl = n;
  for (int r = 0; r < 2; r++) {
    size_t rl = strlen(roots[r]);
    for (size_t i = n; i >= rl; i--)
      if (!memcmp(file + i - rl, roots[r], rl)) {
        *key = file + i;
        *kl = n - i;
        return;
      }
  }
  int seen = 0;
  for (size_t i = n; i > 0; i--)
    if (file[i - 1] == '/' && ++seen == 4) {
      *key = file + i;
      *kl = n - i;
      return;
    }
}

/* The columns a traceback's caret line marks under the source line ("    ^^^^^" or "~~~~^~~~"):
 * [c0, c1), or 0, 0 when the line is not a caret line (Python prints none when the expression
 * is the whole line, and none before 3.11). */
static void caret_span(const char *p, const char *end, long *c0, long *c1) {
  *c0 = *c1 = 0;
  const char *eol = p;
  bool marks = false;
  while (eol < end && *eol != '\n') {
    if (*eol == '^' || *eol == '~') marks = true;
    else if (*eol != ' ' && *eol != '\r') return;
    eol++;
  }
  if (!marks) return;
  const char *a = p, *b = eol;
  while (a < b && (*a == ' ')) a++;
  while (b > a && (b[-1] == ' ' || b[-1] == '\r')) b--;
  *c0 = (long)(a - p);
  *c1 = (long)(b - p);
}

/* Appends "fn:LINE:C0:C1:target:file\n" to buf[*len..size) (each text up to its first NUL),
 * as snprintf would; false, leaving *len, when it does not fit with a terminator. */
static bool put_frame(char *buf, size_t size, size_t *len, const char *fn, size_t fnl, const long num[3],
                      const char *target, size_t tl, const char *file, size_t kl) {
  char digits[3][24];
  size_t dl[3];
  for (int k = 0; k < 3; k++) {
    char tmp[24];
    unsigned long v = num[k] < 0 ? 0ul - (unsigned long)num[k] : (unsigned long)num[k];
    size_t n = 0;
    do tmp[n++] = (char)('0' + v % 10);
    while ((v /= 10) && n < sizeof tmp);
    dl[k] = 0;
    if (num[k] < 0) digits[k][dl[k]++] = '-';
    while (n) digits[k][dl[k]++] = tmp[--n];
  }
  fnl = strnlen(fn, fnl);
  tl = strnlen(target, tl);
  kl = strnlen(file, kl);
  size_t need = fnl + dl[0] + dl[1] + dl[2] + tl + kl + 6;
  if (need >= size - *len) return false;
  char *o = buf + *len;
  memcpy(o, fn, fnl), o += fnl, *o++ = ':';
  for (int k = 0; k < 3; k++) memcpy(o, digits[k], dl[k]), o += dl[k], *o++ = ':';
  memcpy(o, target, tl), o += tl, *o++ = ':';
  memcpy(o, file, kl), o += kl, *o++ = '\n';
  *o = '\0';
  *len += need;
  return true;
}

/* A Python stack trace ('File "/a/b/c.py", line 9, in f', the source line, and in Python 3.11+
 * a caret line under the expression being evaluated; outermost first) kept as: site, the
 * innermost frame as "b/c.py:f"; frames, every frame as "f:LINE:C0:C1:target:FILE\n" (the
 * caret columns, target as statement_target gives it, the file as file_key gives it: last, as
 * it may hold a ':'), which sim/scopes.c reads to follow Python locals. */
static int parse_stack(const char *s, size_t len, mb_node *n, mb_interner *in) {
  const char *end = s + len, *last_file = NULL, *last_q = NULL, *last_fn = NULL;
  size_t last_fnl = 0;
  char frames[MAX_FRAMES];
  size_t fl = 0;
  bool overflow = false;
  for (const char *p = find(s, end, "File \"", 6); p; p = find(p + 1, end, "File \"", 6)) {
    const char *file = p + 6, *q = memchr(file, '"', (size_t)(end - file));
    if (!q) break;
    long line = 0;
    const char *r = q;
    if (r + 8 <= end && !memcmp(r, "\", line ", 8)) line = strtol(r + 8, NULL, 10);
    const char *eol = memchr(q, '\n', (size_t)(end - q)), *fn;
    if (!eol) eol = end;
    if ((fn = find(q, eol, ", in ", 5))) fn += 5;
    size_t fnl = fn ? (size_t)(eol - fn) : 0;
    while (fnl && (fn[fnl - 1] == '\r' || fn[fnl - 1] == ' ')) fnl--;
    const char *src = eol < end ? eol + 1 : end, *src_end = memchr(src, '\n', (size_t)(end - src));
    if (!src_end) src_end = end;
    long c0 = 0, c1 = 0;
    if (src_end < end) caret_span(src_end + 1, end, &c0, &c1);
    char target[128];
    size_t tl = statement_target(src, (size_t)(src_end - src), target, sizeof target);
    const char *key;
    size_t kl;
    file_key(file, (size_t)(q - file), &key, &kl);
    if (!put_frame(frames, sizeof frames, &fl, fn ? fn : "", fnl, (long[3]){line, c0, c1}, target, tl, key, kl))
      overflow = true;
    last_file = file;
    last_q = q;
    last_fn = fn;
    last_fnl = fnl;
    p = q;
  }
  if (!last_file) return MB_OK;
  if (!overflow && !(n->origin.frames = intern_upto(in, frames, fl, MAX_FRAMES))) return MB_E_NOMEM;
  /* site: the innermost file's last two path components and its function */
  const char *file = last_file;
  int seen = 0;
  for (const char *p = last_q; p > last_file; p--)
    if (p[-1] == '/' && ++seen == 2) {
      file = p;
      break;
    }
  char buf[MAX_PATH];
  size_t flen = (size_t)(last_q - file);
  if (flen + last_fnl + 2 >= sizeof buf) return MB_OK;
  memcpy(buf, file, flen);
  buf[flen] = ':';
  if (last_fnl) memcpy(buf + flen + 1, last_fn, last_fnl);
  buf[flen + 1 + last_fnl] = '\0';
  n->origin.site = mb_intern(in, buf, flen + 1 + last_fnl);
  return n->origin.site ? MB_OK : MB_E_NOMEM;
}

typedef struct entry {
  const char *key, *value;
  size_t key_len, value_len;
} entry;

/* A StringStringEntryProto's two length-delimited fields, read with bounds checks; false on
 * anything malformed (the wire pass validated the structure, so that is not expected). */
static bool read_entry(const uint8_t *p, size_t len, entry *e) {
  const uint8_t *end = p + len;
  memset(e, 0, sizeof *e);
  while (p < end) {
    uint64_t tag, n;
    size_t k = mb_wire_varint(p, end, &tag);
    if (!k || (tag & 7) != 2) return false;
    p += k;
    if (!(k = mb_wire_varint(p, end, &n)) || n > (uint64_t)(end - p - k)) return false;
    p += k;
    if ((tag >> 3) == 1) e->key = (const char *)p, e->key_len = (size_t)n;
    if ((tag >> 3) == 2) e->value = (const char *)p, e->value_len = (size_t)n;
    p += n;
  }
  return e->key != NULL;
}

static bool key_is(const entry *e, const char *k) {
  size_t n = strlen(k);
  return e->key_len == n && !memcmp(e->key, k, n);
}

static int parse_entry(const entry *e, mb_node *n, mb_interner *in) {
  if (!e->value) return MB_OK;
  if (key_is(e, "pkg.torch.onnx.class_hierarchy")) {
    scopes sc = {0};
    if (each_item(e->value, e->value_len, add_scope_item, &sc) &&
        !(n->origin.cls = mb_intern(in, sc.prev, strlen(sc.prev))))
      return MB_E_NOMEM;
    classes cl = {0};
    if (each_item(e->value, e->value_len, add_class_item, &cl) && !cl.overflow && cl.len > cl.last_len &&
        !(n->origin.classes = intern_upto(in, cl.buf, cl.len - cl.last_len, MAX_FRAMES)))
      return MB_E_NOMEM;
    classes names = {0};
    if (each_item(e->value, e->value_len, add_class_name, &names) && !names.overflow && names.len > names.last_len &&
        !(n->origin.class_names = intern_upto(in, names.buf, names.len - names.last_len, MAX_FRAMES)))
      return MB_E_NOMEM;
  } else if (key_is(e, "pkg.torch.onnx.name_scopes")) {
    scopes sc = {0};
    if (!each_item(e->value, e->value_len, add_scope_item, &sc) || !sc.last[0]) return MB_OK;
    const char *module = is_placeholder_scope(sc.prev) ? "" : sc.prev;
    if (!(n->origin.module = mb_intern(in, module, strlen(module)))) return MB_E_NOMEM;
    if (!n->origin.fx && !(n->origin.fx = mb_intern(in, sc.last, strlen(sc.last)))) return MB_E_NOMEM;
    if (!sc.overflow && !is_placeholder_scope(sc.prev) &&
        !(n->origin.scope = mb_intern(in, sc.scope, sc.scope_len)))
      return MB_E_NOMEM;
  } else if (key_is(e, "pkg.onnxscript.rewriter.rule_name")) {
    if (!(n->origin.rewrite = mb_intern(in, e->value, e->value_len))) return MB_E_NOMEM;
  } else if (key_is(e, "pkg.torch.onnx.stack_trace")) {
    return parse_stack(e->value, e->value_len, n, in);
  } else if (key_is(e, "pkg.torch.onnx.fx_node")) {
    const char *s = e->value, *end = s + e->value_len, *p = s;
    if (p < end && *p == '%') {
      p++;
      const char *q = p;
      while (q < end && *q != ' ') q++;
      if (!(n->origin.fx = mb_intern(in, p, (size_t)(q - p)))) return MB_E_NOMEM;
    }
    return parse_fx_node(s, e->value_len, n, in);
  }
  return MB_OK;
}

/* The fields `from` sets, set in `to`. mb_origin is all string pointers. */
static void merge_origin(mb_origin *to, const mb_origin *from) {
  _Static_assert(sizeof(mb_origin) % sizeof(const char *) == 0, "mb_origin holds only string pointers");
  enum { FIELDS = sizeof(mb_origin) / sizeof(const char *) };
  const char *f[FIELDS], *t[FIELDS];
  memcpy(f, from, sizeof f);
  memcpy(t, to, sizeof t);
  for (int k = 0; k < FIELDS; k++)
    if (f[k]) t[k] = f[k];
  memcpy(to, t, sizeof t);
}

/* Entries read from their text alone (nothing the node already holds changes what they set,
 * except that name_scopes names the FX node only when fx_node did not), so what one text set is
 * kept and set again for the next node with the same text. A torch 2.x export repeats them: the
 * nodes one FX node became are consecutive and share all four, and the 80 layers of a 70B
 * decoder repeat each layer's few dozen stacks and class lists 80 times. Reading them afresh was
 * most of its load. `hashed`: every text read is kept (few distinct); otherwise only the last
 * one is compared (one per FX node). Texts holding a NUL are read each time. The wire pass's
 * repeat markers (wire.h, mb_wire_repeat_keys) name keys of this table: one it lacked would be
 * dropped, so keep the two lists together (test_metadata_repeats.py compares the answers). */
static const struct {
  const char *key;
  bool hashed, fx_if_unset; /* fx_if_unset: sets fx only when the node has none (parse_entry) */
} memo_kinds[MB_MEMO_KINDS] = {
  {"pkg.torch.onnx.stack_trace", true, false},
  {"pkg.torch.onnx.class_hierarchy", true, false},
  {"pkg.torch.onnx.name_scopes", false, true},
  {"pkg.torch.onnx.fx_node", false, false},
};

static void apply_memo(int kind, mb_origin *to, const mb_origin *memo) {
  const char *fx = to->fx;
  merge_origin(to, memo);
  if (memo_kinds[kind].fx_if_unset && fx) to->fx = fx;
}

static int use_entry(const entry *e, mb_node *n, mb_interner *in) {
  int kind = -1;
  if (key_is(e, MB_WIRE_REPEAT_KEY)) { /* the wire pass's "as the previous node" (wire.h) */
    for (int k = 0; k < MB_MEMO_KINDS && e->value && kind < 0; k++)
      if (e->value_len == strlen(memo_kinds[k].key) && !memcmp(e->value, memo_kinds[k].key, e->value_len))
        kind = k;
    if (kind >= 0 && in->last[kind] >= 0) apply_memo(kind, &n->origin, &in->memos[in->last[kind]]);
    return MB_OK;
  }
  for (int k = 0; k < MB_MEMO_KINDS && e->value && kind < 0; k++)
    if (key_is(e, memo_kinds[k].key)) kind = k;
  if (kind < 0) return parse_entry(e, n, in);
  int32_t k = in->last[kind];
  if (k < 0 || in->last_len[kind] != e->value_len || memcmp(in->memo_keys[k], e->value, e->value_len))
    k = memo_kinds[kind].hashed ? mb_strmap_get_n(&in->memo[kind], e->value, e->value_len) : -1;
  if (k >= 0) {
    in->last[kind] = k;
    in->last_len[kind] = e->value_len;
    apply_memo(kind, &n->origin, &in->memos[k]);
    return MB_OK;
  }
  mb_node fresh;
  memset(&fresh, 0, sizeof fresh);
  int rc = parse_entry(e, &fresh, in);
  if (rc != MB_OK) return rc;
  apply_memo(kind, &n->origin, &fresh.origin);
  if (memchr(e->value, '\0', e->value_len)) return MB_OK;
  if (in->n_memos == in->cap_memos) {
    int32_t cap = in->cap_memos ? in->cap_memos * 2 : 64;
    mb_origin *grown = realloc(in->memos, (size_t)cap * sizeof *grown);
    if (!grown) return MB_E_NOMEM;
    in->memos = grown;
    const char **keys = realloc(in->memo_keys, (size_t)cap * sizeof *keys);
    if (!keys) return MB_E_NOMEM;
    in->memo_keys = keys;
    in->cap_memos = cap;
  }
  const char *key = mb_arena_strndup(&in->memo_arena, e->value, e->value_len);
  if (!key || (memo_kinds[kind].hashed && mb_strmap_put(&in->memo[kind], key, in->n_memos, NULL) < 0))
    return MB_E_NOMEM;
  in->memo_keys[in->n_memos] = key;
  in->memos[in->n_memos] = fresh.origin;
  in->last[kind] = in->n_memos++;
  in->last_len[kind] = e->value_len;
  return MB_OK;
}

int mb_origin_read(const Onnx__NodeProto *pn, mb_node *n, mb_interner *in) {
  memset(&n->origin, 0, sizeof n->origin);
  int rc = MB_OK;
#ifdef MB_NODE_METADATA_KNOWN
  for (size_t k = 0; k < pn->n_metadata_props && rc == MB_OK; k++) {
    const Onnx__StringStringEntryProto *kv = pn->metadata_props[k];
    if (!kv || !kv->key) continue;
    entry e = {kv->key, kv->value, strlen(kv->key), kv->value ? strlen(kv->value) : 0};
    rc = use_entry(&e, n, in);
  }
#else
  /* the generated schema predates NodeProto.metadata_props (field 9): protobuf-c keeps it
   * among the unknown fields */
  for (size_t k = 0; k < pn->base.n_unknown_fields && rc == MB_OK; k++) {
    const ProtobufCMessageUnknownField *u = &pn->base.unknown_fields[k];
    entry e;
    uint64_t body;
    if (u->tag != 9 || u->wire_type != PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED) continue;
    /* protobuf-c keeps a length-delimited unknown field with its length prefix */
    size_t pre = mb_wire_varint(u->data, u->data + u->len, &body);
    if (!pre || body != u->len - pre) continue;
    if (read_entry(u->data + pre, (size_t)body, &e)) rc = use_entry(&e, n, in);
  }
#endif
  if (rc != MB_OK || n->origin.module) return rc;
  if (n->name && n->name[0] == '/' && !(n->origin.scope = n->name)) return MB_E_NOMEM;
  char module[MAX_PATH];
  if (mb_origin_module_of_name(n->name, module, sizeof module) &&
      !(n->origin.module = mb_intern(in, module, strlen(module))))
    return MB_E_NOMEM;
  return MB_OK;
}
