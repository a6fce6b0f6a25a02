#include "onnx/origin.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/wire.h"

/* Bounds on what is kept of untrusted metadata: longer strings are cut, not refused (they
 * only inform the simulation; a cut argument list reads as "unknown"). */
#define MAX_PATH 512
#define MAX_ARGS 1024

/* ------------------------------------------------------------------ interning */

int mb_interner_init(mb_interner *in, mb_arena *arena) {
  memset(in, 0, sizeof *in);
  in->arena = arena;
  return mb_strmap_init(&in->map, 64) == 0 ? MB_OK : MB_E_NOMEM;
}

void mb_interner_free(mb_interner *in) {
  mb_strmap_free(&in->map);
  free(in->strs);
  memset(in, 0, sizeof *in);
}

const char *mb_intern(mb_interner *in, const char *s, size_t len) {
  char stack[MAX_ARGS + 1];
  if (len > MAX_ARGS) len = MAX_ARGS;
  memcpy(stack, s, len);
  stack[len] = '\0';
  int32_t k = mb_strmap_get(&in->map, stack);
  if (k >= 0) return in->strs[k];
  if (in->n == in->cap) {
    int32_t cap = in->cap ? in->cap * 2 : 64;
    const char **grown = realloc(in->strs, (size_t)cap * sizeof *grown);
    if (!grown) return NULL;
    in->strs = grown;
    in->cap = cap;
  }
  const char *copy = mb_arena_strdup(in->arena, stack);
  if (!copy || mb_strmap_put(&in->map, copy, in->n, NULL) < 0) return NULL;
  in->strs[in->n] = copy;
  return in->strs[in->n++];
}

/* ------------------------------------------------------------------ TorchScript names */

/* "/layer1/layer1.0/conv1/Conv": the components before the op name, joined with '.', where a
 * component that extends the previous one ("layer1" then "layer1.0": a Sequential's child)
 * replaces it instead of being appended. */
bool mb_origin_module_of_name(const char *name, char *buf, size_t size) {
  if (!name || name[0] != '/' || size == 0) return false;
  const char *last = strrchr(name, '/');
  size_t len = 0, prev_start = 0;
  buf[0] = '\0';
  for (const char *p = name + 1; p < last;) {
    const char *end = memchr(p, '/', (size_t)(last - p));
    if (!end) end = last;
    size_t n = (size_t)(end - p);
    const char *prev = buf + prev_start;
    size_t prev_len = len - prev_start;
    bool extends = len > 0 && n > prev_len && !strncmp(p, prev, prev_len) && p[prev_len] == '.';
    size_t at = extends ? prev_start : (len ? len + 1 : 0);
    if (n && at + n + 1 < size) {
      if (!extends && len) buf[len] = '.';
      memcpy(buf + at, p, n);
      len = at + n;
      buf[len] = '\0';
      prev_start = at;
    } else if (n) {
      return false; /* too long to be a module path we can use */
    }
    p = end + 1;
  }
  return true;
}

/* ------------------------------------------------------------------ dynamo metadata */

/* The last two entries of a Python list of strings: "['', 'a', 'a.b', 'name']" gives module
 * "a.b" and fx "name". Quotes may be ' or " with backslash escapes. */
static bool parse_scopes(const char *s, size_t len, char *module, char *fx) {
  char item[MAX_PATH];
  const char *end = s + len;
  module[0] = fx[0] = '\0';
  int count = 0;
  for (const char *p = s; p < end; p++) {
    if (*p != '\'' && *p != '"') continue;
    char q = *p++;
    size_t n = 0;
    while (p < end && *p != q) {
      if (*p == '\\' && p + 1 < end) p++;
      if (n + 1 < sizeof item) item[n++] = *p;
      p++;
    }
    if (p >= end) return false; /* unterminated */
    item[n] = '\0';
    memcpy(module, fx, strlen(fx) + 1);
    memcpy(fx, item, n + 1);
    count++;
  }
  /* torch.export marks nodes outside any module with this placeholder scope */
  if (strlen(module) >= 22 && !memcmp(module, "_empty_nn_module_stack", 22)) module[0] = 0;
  return count >= 1;
}

/* "%name : [...] = call_function[target=torch.ops.aten.x.default](args = (...), kwargs = {...})" */
static int parse_fx_node(const char *s, size_t len, mb_node *n, mb_interner *in) {
  const char *end = s + len;
  const char *t = NULL;
  for (const char *p = s; p + 7 <= end; p++)
    if (!memcmp(p, "target=", 7)) {
      t = p + 7;
      break;
    }
  if (!t) return MB_OK;
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
    while (p + kl <= end && memcmp(p, keys[k], kl)) p++;
    if (p + kl > end) break;
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

static int use_entry(const entry *e, mb_node *n, mb_interner *in) {
  if (!e->value) return MB_OK;
  if (key_is(e, "pkg.torch.onnx.name_scopes")) {
    char module[MAX_PATH], fx[MAX_PATH];
    if (!parse_scopes(e->value, e->value_len, module, fx)) return MB_OK;
    if (!(n->origin.module = mb_intern(in, module, strlen(module)))) return MB_E_NOMEM;
    if (!n->origin.fx && !(n->origin.fx = mb_intern(in, fx, strlen(fx)))) return MB_E_NOMEM;
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
  char module[MAX_PATH];
  if (mb_origin_module_of_name(n->name, module, sizeof module) &&
      !(n->origin.module = mb_intern(in, module, strlen(module))))
    return MB_E_NOMEM;
  return MB_OK;
}
