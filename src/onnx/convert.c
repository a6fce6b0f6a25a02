/* protobuf-c ModelProto -> membudget graph IR. Every name, dim and size from the file is
 * checked here; nothing downstream has to distrust the IR. */
#include "onnx/convert.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/dtype.h"
#include "onnx/origin.h"
#include "onnx/wire.h"
#include "util/strmap.h"

typedef struct conv {
  mb_arena *arena;   /* where everything converted lives */
  mb_diag *d;
  /* warnings collect in a growable array, copied into the arena at the end */
  const char **warnings;
  int32_t n_warnings, cap_warnings;
  mb_interner *origins; /* module paths and FX strings shared by many nodes */
  const mb_limits *limits; /* the load's limits (util/limits.h); NULL: the defaults */
  uint64_t n_nodes, n_tensors; /* so far, over every graph: what limit.nodes/tensors bound */
} conv;

#define ARENA (c->arena)
#define OOM() mb_fail(c->d, MB_E_NOMEM, "out of memory")

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static int warn(conv *c, const char *fmt, ...) {
  if (c->n_warnings == c->cap_warnings) {
    int32_t cap = c->cap_warnings ? c->cap_warnings * 2 : 8;
    const char **w = mb_arena_array(ARENA, (size_t)cap, sizeof *w);
    if (!w) return OOM();
    if (c->n_warnings) memcpy(w, c->warnings, (size_t)c->n_warnings * sizeof *w);
    c->warnings = w;
    c->cap_warnings = cap;
  }
  char buf[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  const char *s = mb_arena_strdup(ARENA, buf);
  if (!s) return OOM();
  c->warnings[c->n_warnings++] = s;
  return MB_OK;
}

/* Every name, op type, domain, dim name and location goes through here: limit.string_bytes. */
static const char *dup_str(conv *c, const char *s) {
  size_t n = s ? strlen(s) : 0;
  if (n > mb_limit(c->limits, MB_LIMIT_STRING_BYTES)) {
    char what[96];
    snprintf(what, sizeof what, "a name or string starting '%.32s'", s);
    mb_limit_fail(c->d, c->limits, MB_LIMIT_STRING_BYTES, what, n);
    return NULL; /* callers report out of memory, but the first failure is the one kept */
  }
  return mb_arena_strdup(ARENA, s ? s : "");
}

/* ------------------------------------------------------------------ tensors */

static double half_to_double(uint16_t h) {
  int e = (h >> 10) & 0x1F, f = h & 0x3FF;
  double v = e == 0 ? ldexp(f, -24) : e == 31 ? (f ? NAN : INFINITY) : ldexp(f + 1024, e - 25);
  return (h & 0x8000) ? -v : v;
}

static double bf16_to_double(uint16_t b) {
  uint32_t bits = (uint32_t)b << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* Little-endian load of n bytes (the ONNX raw_data byte order). */
static uint64_t load_le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

/* Decode the values of a small numeric tensor whose data is still in the slim copy. */
static int decode_small_values(conv *c, const Onnx__TensorProto *t, mb_const_tensor *ct) {
  int dt = ct->dtype;
  mb_dtype_class cls = mb_dtype_class_of(dt);
  if (ct->numel > MB_SMALL_VALUE_MAX || ct->location != MB_DATA_EMBEDDED) return MB_OK;
  if (cls != MB_DCLASS_INT && cls != MB_DCLASS_BOOL && cls != MB_DCLASS_FLOAT) return MB_OK;
  int bits = mb_dtype_bits(dt);
  if (bits < 8 || (cls == MB_DCLASS_FLOAT && bits != 16 && bits != 32 && bits != 64)) return MB_OK;
  int64_t n = (int64_t)ct->numel;
  mb_small_values *sv = mb_arena_alloc(ARENA, sizeof *sv);
  if (!sv) return OOM();
  sv->count = n;
  sv->is_float = cls == MB_DCLASS_FLOAT;
  if (sv->is_float) sv->f = mb_arena_array(ARENA, (size_t)n, sizeof(double));
  else sv->i = mb_arena_array(ARENA, (size_t)n, sizeof(int64_t));
  if (!sv->f && !sv->i) return OOM();
  bool is_signed = dt == MB_DTYPE_INT8 || dt == MB_DTYPE_INT16 || dt == MB_DTYPE_INT32 ||
                   dt == MB_DTYPE_INT64;
  if (t->has_raw_data) {
    int sz = bits / 8;
    if (t->raw_data.len != (size_t)n * (size_t)sz) return MB_OK; /* size checked elsewhere */
    for (int64_t k = 0; k < n; k++) {
      uint64_t u = load_le(t->raw_data.data + k * sz, sz);
      if (sv->is_float) {
        if (dt == MB_DTYPE_FLOAT16) sv->f[k] = half_to_double((uint16_t)u);
        else if (dt == MB_DTYPE_BFLOAT16) sv->f[k] = bf16_to_double((uint16_t)u);
        else if (dt == MB_DTYPE_FLOAT) {
          uint32_t b = (uint32_t)u;
          float f;
          memcpy(&f, &b, sizeof f);
          sv->f[k] = f;
        } else if (dt == MB_DTYPE_DOUBLE) {
          double f;
          memcpy(&f, &u, sizeof f);
          sv->f[k] = f;
        } else {
          return MB_OK; /* float8 and friends: no values */
        }
      } else if (is_signed && sz < 8) {
        uint64_t sign = 1ull << (sz * 8 - 1);
        sv->i[k] = (int64_t)((u ^ sign) - sign);
      } else {
        sv->i[k] = (int64_t)u;
      }
    }
    ct->values = sv;
    return MB_OK;
  }
  /* Typed fields. */
  if (dt == MB_DTYPE_FLOAT && t->n_float_data == (size_t)n) {
    for (int64_t k = 0; k < n; k++) sv->f[k] = t->float_data[k];
  } else if (dt == MB_DTYPE_DOUBLE && t->n_double_data == (size_t)n) {
    for (int64_t k = 0; k < n; k++) sv->f[k] = t->double_data[k];
  } else if (dt == MB_DTYPE_INT64 && t->n_int64_data == (size_t)n) {
    for (int64_t k = 0; k < n; k++) sv->i[k] = t->int64_data[k];
  } else if ((dt == MB_DTYPE_UINT64 || dt == MB_DTYPE_UINT32) && t->n_uint64_data == (size_t)n) {
    for (int64_t k = 0; k < n; k++) sv->i[k] = (int64_t)t->uint64_data[k];
  } else if (t->n_int32_data == (size_t)n && !sv->is_float) {
    for (int64_t k = 0; k < n; k++) sv->i[k] = t->int32_data[k];
  } else if (t->n_int32_data == (size_t)n && (dt == MB_DTYPE_FLOAT16 || dt == MB_DTYPE_BFLOAT16)) {
    for (int64_t k = 0; k < n; k++) {
      uint16_t b = (uint16_t)t->int32_data[k];
      sv->f[k] = dt == MB_DTYPE_FLOAT16 ? half_to_double(b) : bf16_to_double(b);
    }
  } else {
    return MB_OK;
  }
  ct->values = sv;
  return MB_OK;
}

/* Sum of the byte lengths the wire pass dropped for one field of a tensor. */
static uint64_t dropped_bytes(const Onnx__TensorProto *t, uint32_t field, bool *any) {
  uint64_t total = 0;
  for (size_t k = 0; k < t->base.n_unknown_fields; k++) {
    const ProtobufCMessageUnknownField *u = &t->base.unknown_fields[k];
    if (u->tag != MB_WIRE_DROPPED_BASE + field || u->wire_type != PROTOBUF_C_WIRE_TYPE_VARINT)
      continue;
    uint64_t v;
    if (mb_wire_varint(u->data, u->data + u->len, &v)) {
      total += v;
      *any = true;
    }
  }
  return total;
}

/* Fill dtype, dims, numel and bytes; `what` names the tensor for messages. */
static int tensor_shape(conv *c, int32_t dtype, const int64_t *dims, size_t n_dims,
                        const char *what, mb_const_tensor *ct) {
  const char *name = ct->name;
  if (n_dims > mb_limit(c->limits, MB_LIMIT_RANK)) {
    char who[300];
    snprintf(who, sizeof who, "%s '%s'", what, name);
    return mb_limit_fail(c->d, c->limits, MB_LIMIT_RANK, who, n_dims);
  }
  ct->dtype = dtype;
  if (ct->dtype <= 0 || !strcmp(mb_dtype_name(ct->dtype), "unknown"))
    return mb_fail(c->d, MB_E_UNSUPPORTED, "%s '%s' has unknown data type %d", what, name,
                   (int)ct->dtype);
  ct->rank = (int32_t)n_dims;
  ct->dims = mb_arena_array(ARENA, n_dims ? n_dims : 1, sizeof(int64_t));
  if (!ct->dims) return OOM();
  uint64_t numel = 1;
  bool overflow = false, zero = false;
  for (size_t k = 0; k < n_dims; k++) {
    if (dims[k] < 0)
      return mb_fail(c->d, MB_E_INVALID_MODEL, "%s '%s' has negative dim %lld on axis %zu", what,
                     name, (long long)dims[k], k);
    ct->dims[k] = dims[k];
    if (!dims[k]) zero = true;
    else if (numel > UINT64_MAX / (uint64_t)dims[k]) overflow = true;
    else numel *= (uint64_t)dims[k];
  }
  if (zero) {
    numel = 0;
    overflow = false;
  }
  ct->numel = numel;
  if (ct->dtype == MB_DTYPE_STRING) {
    ct->nbytes = 0;
    return warn(c, "%s '%s' holds strings: its size is unknown and counted as 0 bytes", what,
                name);
  }
  if (overflow || mb_dtype_bytes(ct->dtype, numel, &ct->nbytes) != MB_OK ||
      ct->nbytes > MB_MAX_TENSOR_BYTES)
    return mb_fail(c->d, MB_E_LIMIT,
                   "%s '%s' declares an absurd size (dims multiply past %llu bytes)", what, name,
                   (unsigned long long)MB_MAX_TENSOR_BYTES);
  return MB_OK;
}

/* Find where the data is and check that embedded data has the size the dims declare. */
static int tensor_data(conv *c, const Onnx__TensorProto *t, const char *what, mb_const_tensor *ct) {
  const char *name = ct->name;
  /* Where the data is. */
  bool dropped = false;
  uint64_t raw_dropped = dropped_bytes(t, 9, &dropped);
  uint64_t f32_dropped = dropped_bytes(t, 4, &dropped);
  uint64_t f64_dropped = dropped_bytes(t, 10, &dropped);
  (void)dropped_bytes(t, 5, &dropped);
  (void)dropped_bytes(t, 6, &dropped);
  (void)dropped_bytes(t, 7, &dropped);
  (void)dropped_bytes(t, 11, &dropped);
  bool has_typed = t->n_float_data || t->n_int32_data || t->n_string_data || t->n_int64_data ||
                   t->n_double_data || t->n_uint64_data;
  if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
    ct->location = MB_DATA_EXTERNAL;
    for (size_t k = 0; k < t->n_external_data; k++) {
      const Onnx__StringStringEntryProto *e = t->external_data[k];
      if (!e || !e->key) continue;
      if (!strcmp(e->key, "location") && e->value) {
        ct->external_file = dup_str(c, e->value);
        if (!ct->external_file) return OOM();
      } else if (!strcmp(e->key, "length") && e->value && ct->dtype != MB_DTYPE_STRING) {
        char *endp = NULL;
        errno = 0;
        unsigned long long len = strtoull(e->value, &endp, 10);
        bool number = endp && *endp == '\0' && *e->value && *e->value != '-';
        if (number && (errno == ERANGE || len != ct->nbytes)) /* the text, not a clamped value */
          return mb_fail(c->d, MB_E_INVALID_MODEL,
                         "%s '%s': external data length %.40s does not match its dims and type "
                         "(%llu bytes)", what, name, e->value, (unsigned long long)ct->nbytes);
      }
    }
    if (!ct->external_file)
      return mb_fail(c->d, MB_E_INVALID_MODEL, "%s '%s' has external data without a location",
                     what, name);
  } else if (t->has_raw_data || dropped || has_typed) {
    ct->location = MB_DATA_EMBEDDED;
    uint64_t have = 0;
    bool check = true;
    if (t->has_raw_data || raw_dropped) have = t->raw_data.len + raw_dropped;
    else if (t->n_float_data || f32_dropped) have = (uint64_t)t->n_float_data * 4 + f32_dropped,
             check = ct->dtype == MB_DTYPE_FLOAT || ct->dtype == MB_DTYPE_COMPLEX64;
    else if (t->n_double_data || f64_dropped) have = (uint64_t)t->n_double_data * 8 + f64_dropped,
             check = ct->dtype == MB_DTYPE_DOUBLE || ct->dtype == MB_DTYPE_COMPLEX128;
    else check = false; /* varint-packed fields: counting them would mean reading them */
    if (check && ct->dtype != MB_DTYPE_STRING && have != ct->nbytes)
      return mb_fail(c->d, MB_E_INVALID_MODEL,
                     "%s '%s': dims need %llu bytes of %s but the file holds %llu", what, name,
                     (unsigned long long)ct->nbytes, mb_dtype_name(ct->dtype),
                     (unsigned long long)have);
  } else {
    ct->location = MB_DATA_EMPTY; /* declared without data: a weightless stand-in */
  }
  return decode_small_values(c, t, ct);
}

static int convert_dense(conv *c, const Onnx__TensorProto *t, const char *what, mb_const_tensor *ct) {
  ct->name = dup_str(c, t->name);
  if (!ct->name) return OOM();
  int rc = tensor_shape(c, t->has_data_type ? t->data_type : 0, t->dims, t->n_dims, what, ct);
  return rc ? rc : tensor_data(c, t, what, ct);
}

static int convert_sparse(conv *c, const Onnx__SparseTensorProto *s, const char *what,
                          mb_const_tensor *ct) {
  if (!s->values)
    return mb_fail(c->d, MB_E_INVALID_MODEL, "sparse %s without values", what);
  /* The stored values are checked against their own dims (the non-zeros)... */
  mb_const_tensor stored;
  memset(&stored, 0, sizeof stored);
  int rc = convert_dense(c, s->values, what, &stored);
  if (rc) return rc;
  /* ...and the tensor is counted at its dense size: that is what a trainer holds. */
  ct->name = stored.name;
  rc = tensor_shape(c, stored.dtype, s->dims, s->n_dims, what, ct);
  ct->location = stored.location;
  ct->external_file = stored.external_file;
  ct->is_sparse = true;
  return rc;
}

/* ------------------------------------------------------------------ types */

static int convert_type(conv *c, const Onnx__TypeProto *tp, const char *name, mb_type *ty) {
  ty->rank = -1;
  if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
    return MB_OK; /* sequences, maps, optionals: no tensor type to record */
  const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
  ty->dtype = tt->has_elem_type ? tt->elem_type : 0;
  if (ty->dtype != 0 && (ty->dtype < 0 || !strcmp(mb_dtype_name(ty->dtype), "unknown")))
    return mb_fail(c->d, MB_E_UNSUPPORTED, "tensor '%s' declares unknown data type %d", name,
                   (int)ty->dtype);
  if (!tt->shape) return MB_OK;
  size_t r = tt->shape->n_dim;
  if (r > mb_limit(c->limits, MB_LIMIT_RANK)) {
    char who[300];
    snprintf(who, sizeof who, "tensor '%s'", name);
    return mb_limit_fail(c->d, c->limits, MB_LIMIT_RANK, who, r);
  }
  ty->rank = (int32_t)r;
  ty->dims = mb_arena_array(ARENA, r ? r : 1, sizeof(int64_t));
  ty->dim_params = mb_arena_array(ARENA, r ? r : 1, sizeof(char *));
  if (!ty->dims || !ty->dim_params) return OOM();
  for (size_t k = 0; k < r; k++) {
    const Onnx__TensorShapeProto__Dimension *dm = tt->shape->dim[k];
    ty->dims[k] = -1;
    if (!dm) continue;
    if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
      if (dm->dim_value < 0)
        return mb_fail(c->d, MB_E_INVALID_MODEL, "tensor '%s' declares negative dim %lld on axis %zu",
                       name, (long long)dm->dim_value, k);
      ty->dims[k] = dm->dim_value;
    } else if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
               dm->dim_param && *dm->dim_param) {
      ty->dim_params[k] = dup_str(c, dm->dim_param);
      if (!ty->dim_params[k]) return OOM();
    }
  }
  return MB_OK;
}

/* ------------------------------------------------------------------ graphs */

static int convert_graph(conv *c, const Onnx__GraphProto *pg, mb_graph *parent, int depth,
                         mb_graph **out);

typedef struct scope {
  mb_graph *g;
  mb_strmap names; /* name -> value index */
  int32_t cap_values;
} scope;

static const char *describe_value(const mb_graph *g, int32_t v, char *buf, size_t size) {
  const mb_value *val = &g->values[v];
  switch (val->kind) {
    case MB_VALUE_INPUT: return "a graph input";
    case MB_VALUE_INITIALIZER: return "an initializer";
    case MB_VALUE_NODE_OUTPUT: {
      const mb_node *n = &g->nodes[val->producer];
      snprintf(buf, size, "the output of node '%s' (%s)", n->name, n->op_type);
      return buf;
    }
    default: return "a captured outer value";
  }
}

/* definer_node: the node producing `name` (NULL for inputs and initializers); only used to
 * describe a duplicate, so no message is formatted on the normal path. */
static int add_value(conv *c, scope *s, const char *name, int32_t kind, int32_t *out_index,
                     const mb_node *definer_node) {
  mb_graph *g = s->g;
  if (g->n_values == s->cap_values)
    return mb_fail(c->d, MB_E_INVALID_MODEL, "internal: value table full");
  int32_t idx = g->n_values, existing = -1;
  int rc = mb_strmap_put(&s->names, name, idx, &existing);
  if (rc < 0) return OOM();
  if (rc == 0) {
    char buf[300], definer[300];
    if (definer_node)
      snprintf(definer, sizeof definer, "produced by node '%s' (%s)", definer_node->name,
               definer_node->op_type);
    else
      snprintf(definer, sizeof definer, "%s",
               kind == MB_VALUE_INITIALIZER ? "an initializer" : "a graph input");
    return mb_fail(c->d, MB_E_INVALID_MODEL, "duplicate tensor name '%s': %s, and already %s",
                   name, definer, describe_value(g, existing, buf, sizeof buf));
  }
  mb_value *v = &g->values[g->n_values++];
  v->name = name;
  v->kind = kind;
  v->producer = -1;
  v->initializer = -1;
  v->type.rank = -1;
  *out_index = idx;
  return MB_OK;
}

static int convert_attr(conv *c, const Onnx__AttributeProto *pa, mb_graph *g, int depth,
                        mb_attr *a) {
  a->name = dup_str(c, pa->name);
  if (!a->name) return OOM();
  a->type = pa->has_type ? (int32_t)pa->type : 0;
  a->f = pa->f;
  a->i = pa->i;
  if (pa->has_s) {
    a->s = mb_arena_strndup(ARENA, (const char *)pa->s.data, pa->s.len);
    if (!a->s) return OOM();
    a->s_len = pa->s.len;
  }
  if (pa->n_floats) {
    a->floats = mb_arena_array(ARENA, pa->n_floats, sizeof(float));
    if (!a->floats) return OOM();
    memcpy(a->floats, pa->floats, pa->n_floats * sizeof(float));
    a->n_floats = pa->n_floats;
  }
  if (pa->n_ints) {
    a->ints = mb_arena_array(ARENA, pa->n_ints, sizeof(int64_t));
    if (!a->ints) return OOM();
    memcpy(a->ints, pa->ints, pa->n_ints * sizeof(int64_t));
    a->n_ints = pa->n_ints;
  }
  a->n_strings = pa->n_strings;
  a->n_tensors = pa->n_tensors;
  if (pa->t || pa->sparse_tensor) {
    a->t = mb_arena_alloc(ARENA, sizeof *a->t);
    if (!a->t) return OOM();
    int rc = pa->t ? convert_dense(c, pa->t, "tensor attribute", a->t)
                   : convert_sparse(c, pa->sparse_tensor, "tensor attribute", a->t);
    if (rc) return rc;
  }
  if (pa->g) {
    int rc = convert_graph(c, pa->g, g, depth + 1, &a->g);
    if (rc) return rc;
  }
  if (pa->n_graphs) {
    a->graphs = mb_arena_array(ARENA, pa->n_graphs, sizeof(mb_graph *));
    if (!a->graphs) return OOM();
    for (size_t k = 0; k < pa->n_graphs; k++) {
      if (!pa->graphs[k]) continue;
      int rc = convert_graph(c, pa->graphs[k], g, depth + 1, &a->graphs[k]);
      if (rc) return rc;
    }
    a->n_graphs = pa->n_graphs;
  }
  return MB_OK;
}

/* Resolve a name consumed in this graph: a local value, or (in a subgraph) a capture. */
/* consumer: the node reading `name`, or NULL when it is a graph output. */
static int resolve_input(conv *c, scope *s, const char *name, const mb_node *consumer,
                         int32_t *out) {
  if (!name || !*name) {
    *out = -1; /* omitted optional input */
    return MB_OK;
  }
  int32_t v = mb_strmap_get(&s->names, name);
  if (v >= 0) {
    *out = v;
    return MB_OK;
  }
  if (!s->g->parent) {
    char desc[300];
    if (consumer) snprintf(desc, sizeof desc, "node '%s' (%s)", consumer->name, consumer->op_type);
    else snprintf(desc, sizeof desc, "graph output of '%s'", s->g->name);
    return mb_fail(c->d, MB_E_INVALID_MODEL,
                   "%s consumes '%s', which no node produces and which is not a graph input or "
                   "initializer", desc, name);
  }
  /* Captured from an enclosing graph; checked once the enclosing graph is complete. */
  const char *nm = dup_str(c, name);
  if (!nm) return OOM();
  return add_value(c, s, nm, MB_VALUE_OUTER, out, NULL);
}

/* limit.nodes and limit.tensors count every graph of the model, before anything is built. */
static int count_graph(conv *c, const Onnx__GraphProto *pg, const char *name) {
  uint64_t defined = (uint64_t)pg->n_input + pg->n_initializer + pg->n_sparse_initializer;
  for (size_t k = 0; k < pg->n_node; k++)
    if (pg->node[k]) defined += pg->node[k]->n_output;
  c->n_nodes += pg->n_node;
  c->n_tensors += defined;
  char who[300];
  snprintf(who, sizeof who, "the model, counted up to graph '%.200s'", name);
  int rc = mb_limit_check(c->d, c->limits, MB_LIMIT_NODES, who, c->n_nodes);
  return rc ? rc : mb_limit_check(c->d, c->limits, MB_LIMIT_TENSORS, who, c->n_tensors);
}

/* limit.attr_bytes: the values one attribute holds in memory (a tensor attribute's payload is
 * not counted: it is never kept). */
static int check_attr_size(conv *c, const Onnx__AttributeProto *pa, const mb_node *n) {
  uint64_t bytes = (uint64_t)pa->n_ints * sizeof(int64_t) + (uint64_t)pa->n_floats * sizeof(float) +
                   (pa->has_s ? pa->s.len : 0);
  for (size_t k = 0; k < pa->n_strings; k++) bytes += pa->strings[k].len;
  if (bytes <= mb_limit(c->limits, MB_LIMIT_ATTR_BYTES)) return MB_OK;
  char who[400];
  snprintf(who, sizeof who, "attribute '%.100s' of node '%.100s' (%.60s)", pa->name ? pa->name : "",
           n->name, n->op_type);
  return mb_limit_fail(c->d, c->limits, MB_LIMIT_ATTR_BYTES, who, bytes);
}

static int by_name(const void *x, const void *y) {
  return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* onnx.checker refuses a node that names an attribute twice (which one a reader takes would be
 * its own choice). Sorted, so a node of many attributes costs n log n. */
static int check_attr_names(conv *c, const mb_node *n) {
  if (n->n_attrs < 2) return MB_OK;
  const char **names = malloc((size_t)n->n_attrs * sizeof *names);
  if (!names) return OOM();
  for (int32_t i = 0; i < n->n_attrs; i++) names[i] = n->attrs[i].name ? n->attrs[i].name : "";
  qsort(names, (size_t)n->n_attrs, sizeof *names, by_name);
  int rc = MB_OK;
  for (int32_t i = 1; i < n->n_attrs && rc == MB_OK; i++)
    if (!strcmp(names[i - 1], names[i]))
      rc = mb_fail(c->d, MB_E_INVALID_MODEL, "node '%s' (%s): attribute '%.100s' is given twice", n->name, n->op_type,
                   names[i]);
  free(names);
  return rc;
}

/* onnx.checker's rule for an attribute's value: it sits in the one field its declared type names
 * (an INT attribute holding a graph would still be walked as a subgraph, a STRING one holding
 * an int read as an absent string), and in at most one field. */
static int check_attr_fields(conv *c, const Onnx__AttributeProto *pa, const mb_node *n) {
  const struct {
    bool set;
    int32_t type;
  } field[] = {{pa->has_f, MB_ATTR_FLOAT}, {pa->has_i, MB_ATTR_INT}, {pa->has_s, MB_ATTR_STRING},
               {pa->t != NULL, MB_ATTR_TENSOR}, {pa->g != NULL, MB_ATTR_GRAPH},
               {pa->sparse_tensor != NULL, MB_ATTR_SPARSE_TENSOR}, {pa->tp != NULL, MB_ATTR_TYPE_PROTO},
               {pa->n_floats > 0, MB_ATTR_FLOATS}, {pa->n_ints > 0, MB_ATTR_INTS},
               {pa->n_strings > 0, MB_ATTR_STRINGS}, {pa->n_tensors > 0, MB_ATTR_TENSORS},
               {pa->n_graphs > 0, MB_ATTR_GRAPHS}, {pa->n_sparse_tensors > 0, MB_ATTR_SPARSE_TENSORS},
               {pa->n_type_protos > 0, MB_ATTR_TYPE_PROTOS}};
  int32_t first = 0;
  for (size_t k = 0; k < sizeof field / sizeof field[0]; k++) {
    if (!field[k].set) continue;
    if (pa->has_type && (int32_t)pa->type != field[k].type)
      return mb_fail(c->d, MB_E_INVALID_MODEL, "node '%s' (%s): attribute '%.100s' is declared %s but holds a %s value",
                     n->name, n->op_type, pa->name ? pa->name : "", mb_attr_type_name((int32_t)pa->type),
                     mb_attr_type_name(field[k].type));
    if (first)
      return mb_fail(c->d, MB_E_INVALID_MODEL, "node '%s' (%s): attribute '%.100s' holds values in two fields, %s and %s",
                     n->name, n->op_type, pa->name ? pa->name : "", mb_attr_type_name(first),
                     mb_attr_type_name(field[k].type));
    first = field[k].type;
  }
  return MB_OK;
}

static int convert_graph(conv *c, const Onnx__GraphProto *pg, mb_graph *parent, int depth,
                         mb_graph **out) {
  if (depth > 0 && (uint64_t)depth > mb_limit(c->limits, MB_LIMIT_SUBGRAPH_DEPTH)) {
    char who[300];
    snprintf(who, sizeof who, "subgraph '%.120s' nested in '%.120s'", pg->name ? pg->name : "",
             parent && parent->name ? parent->name : "");
    return mb_limit_fail(c->d, c->limits, MB_LIMIT_SUBGRAPH_DEPTH, who, (uint64_t)depth);
  }
  mb_graph *g = mb_arena_alloc(ARENA, sizeof *g);
  if (!g) return OOM();
  *out = g;
  g->name = dup_str(c, pg->name);
  if (!g->name) return OOM(); /* or past limit.string_bytes: that failure is the one kept */
  g->parent = parent;
  g->depth = depth;

  /* Upper bound on values: every definition plus every consumed name (captures). */
  uint64_t cap = (uint64_t)pg->n_input + pg->n_initializer + pg->n_sparse_initializer;
  for (size_t k = 0; k < pg->n_node; k++)
    if (pg->node[k]) cap += (uint64_t)pg->node[k]->n_output + pg->node[k]->n_input;
  cap += pg->n_output;
  if (cap > INT32_MAX / 2)
    return mb_fail(c->d, MB_E_LIMIT, "graph '%s' has too many tensors", g->name);
  if (pg->n_node > INT32_MAX / 2)
    return mb_fail(c->d, MB_E_LIMIT, "graph '%s' has too many nodes", g->name);
  int rc = count_graph(c, pg, g->name);
  if (rc) return rc;

  scope s = {g, {0}, (int32_t)cap};
  g->values = mb_arena_array(ARENA, cap ? cap : 1, sizeof(mb_value));
  g->inits = mb_arena_array(ARENA, pg->n_initializer + pg->n_sparse_initializer + 1,
                            sizeof(mb_const_tensor));
  g->nodes = mb_arena_array(ARENA, pg->n_node + 1, sizeof(mb_node));
  g->inputs = mb_arena_array(ARENA, pg->n_input + 1, sizeof(int32_t));
  g->outputs = mb_arena_array(ARENA, pg->n_output + 1, sizeof(int32_t));
  if (!g->values || !g->inits || !g->nodes || !g->inputs || !g->outputs) return OOM();
  if (mb_strmap_init(&s.names, (size_t)cap) != 0) return OOM();

  /* Initializers, dense then sparse. */
  size_t n_init = pg->n_initializer + pg->n_sparse_initializer;
  for (size_t k = 0; k < n_init && rc == MB_OK; k++) {
    mb_const_tensor *ct = &g->inits[g->n_inits];
    if (k < pg->n_initializer) {
      if (!pg->initializer[k]) continue;
      rc = convert_dense(c, pg->initializer[k], "initializer", ct);
    } else {
      const Onnx__SparseTensorProto *sp = pg->sparse_initializer[k - pg->n_initializer];
      if (!sp) continue;
      rc = convert_sparse(c, sp, "sparse initializer", ct);
    }
    if (rc) break;
    if (!*ct->name) {
      rc = mb_fail(c->d, MB_E_INVALID_MODEL, "an initializer of graph '%s' has no name", g->name);
      break;
    }
    int32_t v;
    rc = add_value(c, &s, ct->name, MB_VALUE_INITIALIZER, &v, NULL);
    if (rc) break;
    g->values[v].initializer = g->n_inits++;
  }

  /* Graph inputs; an input that names an initializer (IR < 4 style) is not a real input. */
  for (size_t k = 0; k < pg->n_input && rc == MB_OK; k++) {
    const Onnx__ValueInfoProto *vi = pg->input[k];
    if (!vi) continue;
    const char *name = dup_str(c, vi->name);
    if (!name) { rc = OOM(); break; }
    int32_t v = mb_strmap_get(&s.names, name);
    if (v >= 0 && g->values[v].kind == MB_VALUE_INITIALIZER) {
      rc = convert_type(c, vi->type, name, &g->values[v].type);
      continue;
    }
    if (!*name) { rc = mb_fail(c->d, MB_E_INVALID_MODEL, "graph '%s' has an input without a name", g->name); break; }
    rc = add_value(c, &s, name, MB_VALUE_INPUT, &v, NULL);
    if (rc) break;
    rc = convert_type(c, vi->type, name, &g->values[v].type);
    g->inputs[g->n_inputs++] = v;
  }

  /* Nodes: outputs first (nodes may come in any order), then inputs. */
  for (size_t k = 0; k < pg->n_node && rc == MB_OK; k++) {
    const Onnx__NodeProto *pn = pg->node[k];
    mb_node *n = &g->nodes[g->n_nodes++];
    if (!pn) { rc = mb_fail(c->d, MB_E_INVALID_MODEL, "empty node in graph '%s'", g->name); break; }
    n->name = dup_str(c, pn->name);
    n->op_type = dup_str(c, pn->op_type);
    n->domain = dup_str(c, (pn->domain && !strcmp(pn->domain, "ai.onnx")) ? "" : pn->domain);
    if (!n->name || !n->op_type || !n->domain) { rc = OOM(); break; }
    if (c->origins && mb_origin_read(pn, n, c->origins) != MB_OK) { rc = OOM(); break; }
    if (!*n->op_type) {
      rc = mb_fail(c->d, MB_E_INVALID_MODEL, "node '%s' has no op_type", n->name);
      break;
    }
    char who[400];
    snprintf(who, sizeof who, "node '%.200s' (%.100s)", n->name, n->op_type);
    if ((rc = mb_limit_check(c->d, c->limits, MB_LIMIT_NODE_IO, who, (uint64_t)pn->n_input + pn->n_output)) != MB_OK)
      break;
    n->n_inputs = (int32_t)pn->n_input;
    n->n_outputs = (int32_t)pn->n_output;
    n->inputs = mb_arena_array(ARENA, pn->n_input + 1, sizeof(int32_t));
    n->outputs = mb_arena_array(ARENA, pn->n_output + 1, sizeof(int32_t));
    n->attrs = mb_arena_array(ARENA, pn->n_attribute + 1, sizeof(mb_attr));
    if (!n->inputs || !n->outputs || !n->attrs) { rc = OOM(); break; }
    for (size_t o = 0; o < pn->n_output && rc == MB_OK; o++) {
      n->outputs[o] = -1;
      if (!pn->output[o] || !*pn->output[o]) continue;
      const char *name = dup_str(c, pn->output[o]);
      if (!name) { rc = OOM(); break; }
      int32_t v;
      rc = add_value(c, &s, name, MB_VALUE_NODE_OUTPUT, &v, n);
      if (rc) break;
      g->values[v].producer = (int32_t)k;
      n->outputs[o] = v;
    }
  }
  for (size_t k = 0; k < pg->n_node && rc == MB_OK; k++) {
    const Onnx__NodeProto *pn = pg->node[k];
    mb_node *n = &g->nodes[k];
    for (size_t a = 0; a < pn->n_attribute && rc == MB_OK; a++) {
      if (!pn->attribute[a]) continue;
      if ((rc = check_attr_size(c, pn->attribute[a], n)) || (rc = check_attr_fields(c, pn->attribute[a], n))) break;
      rc = convert_attr(c, pn->attribute[a], g, depth, &n->attrs[n->n_attrs++]);
    }
    if (rc == MB_OK) rc = check_attr_names(c, n);
    for (size_t i = 0; i < pn->n_input && rc == MB_OK; i++) {
      rc = resolve_input(c, &s, pn->input[i], n, &n->inputs[i]);
      if (rc == MB_OK && n->inputs[i] >= 0) g->values[n->inputs[i]].num_uses++;
    }
  }

  /* Outputs and value_info. */
  for (size_t k = 0; k < pg->n_output && rc == MB_OK; k++) {
    const Onnx__ValueInfoProto *vi = pg->output[k];
    if (!vi) continue;
    int32_t v;
    if (!vi->name || !*vi->name) {
      rc = mb_fail(c->d, MB_E_INVALID_MODEL, "graph '%s' has an output without a name", g->name);
      break;
    }
    if (mb_strmap_get(&s.names, vi->name) < 0 && !parent) {
      rc = mb_fail(c->d, MB_E_INVALID_MODEL, "graph output '%s' is never produced", vi->name);
      break;
    }
    rc = resolve_input(c, &s, vi->name, NULL, &v);
    if (rc) break;
    g->outputs[g->n_outputs++] = v;
    mb_type *ty = &g->values[v].type;
    if (ty->rank < 0 && !ty->dtype) rc = convert_type(c, vi->type, vi->name, ty);
  }
  for (size_t k = 0; k < pg->n_value_info && rc == MB_OK; k++) {
    const Onnx__ValueInfoProto *vi = pg->value_info[k];
    if (!vi || !vi->name) continue;
    int32_t v = mb_strmap_get(&s.names, vi->name);
    if (v < 0 || g->values[v].type.dtype || g->values[v].type.rank >= 0) continue;
    mb_type ty;
    memset(&ty, 0, sizeof ty);
    /* Intermediate annotations are hints: a bad one is ignored, not fatal. */
    mb_diag saved = *c->d;
    if (convert_type(c, vi->type, vi->name, &ty) == MB_OK) g->values[v].type = ty;
    else *c->d = saved;
  }
  mb_strmap_free(&s.names);
  return rc;
}

int mb_convert_tensor(const Onnx__TensorProto *t, mb_arena *arena, mb_const_tensor *out,
                      mb_diag *d) {
  conv cc = {arena, d, NULL, 0, 0, NULL, NULL, 0, 0};
  memset(out, 0, sizeof *out);
  return convert_dense(&cc, t, "tensor", out);
}

static int convert_model(conv *c, const Onnx__ModelProto *pm, struct mb_model *m);

int mb_convert_model(const Onnx__ModelProto *pm, struct mb_model *m, mb_diag *d) {
  mb_interner origins;
  if (mb_interner_init(&origins, &m->arena) != MB_OK) return mb_fail(d, MB_E_NOMEM, "out of memory");
  conv cc = {&m->arena, d, NULL, 0, 0, &origins, &m->limits, 0, 0};
  conv *c = &cc;
  int rc = convert_model(c, pm, m);
  mb_interner_free(&origins);
  return rc;
}

/* The newest IR version accepted: ONNX 1.18 writes 11; room for the next few. */
#define MB_MAX_IR_VERSION 16
/* Opset imports read: the duplicate check compares each with those before it. */
#define MB_MAX_OPSET_IMPORTS 1024

static int convert_model(conv *c, const Onnx__ModelProto *pm, struct mb_model *m) {
  mb_diag *d = c->d;
  if (!pm->graph) return mb_fail(d, MB_E_INVALID_MODEL, "the model has no graph");
  m->ir_version = pm->has_ir_version ? pm->ir_version : 0;
  /* IR versions are 1..11 as of ONNX 1.18; a value past any a writer could know is corruption,
   * not a newer format (onnx.checker refuses both) */
  if (pm->has_ir_version && (pm->ir_version < 1 || pm->ir_version > MB_MAX_IR_VERSION))
    return mb_fail(d, MB_E_INVALID_MODEL, "ir_version %lld is not an ONNX IR version (1 to %d)",
                   (long long)pm->ir_version, MB_MAX_IR_VERSION);
  char producer[256];
  snprintf(producer, sizeof producer, "%s%s%s", pm->producer_name ? pm->producer_name : "",
           pm->producer_version && *pm->producer_version ? " " : "",
           pm->producer_version ? pm->producer_version : "");
  m->producer = dup_str(c, producer);
  if (pm->n_opset_import > MB_MAX_OPSET_IMPORTS) /* a model imports a handful of domains */
    return mb_fail(d, MB_E_INVALID_MODEL, "opset_import lists %zu domains; at most %d are read", pm->n_opset_import,
                   MB_MAX_OPSET_IMPORTS);
  m->opsets = mb_arena_array(ARENA, pm->n_opset_import + 1, sizeof(mb_opset));
  if (!m->producer || !m->opsets) return OOM();
  for (size_t k = 0; k < pm->n_opset_import; k++) {
    const Onnx__OperatorSetIdProto *op = pm->opset_import[k];
    if (!op) continue;
    const char *dom = op->domain && strcmp(op->domain, "ai.onnx") ? op->domain : "";
    for (int32_t j = 0; j < m->n_opsets; j++) /* opset imports are few: a handful of domains */
      if (!strcmp(m->opsets[j].domain, dom))
        return mb_fail(d, MB_E_INVALID_MODEL, "opset_import lists the domain '%s' twice (versions %lld and %lld)",
                       *dom ? dom : "ai.onnx", (long long)m->opsets[j].version,
                       (long long)(op->has_version ? op->version : 0));
    m->opsets[m->n_opsets].domain = dup_str(c, dom);
    m->opsets[m->n_opsets].version = op->has_version ? op->version : 0;
    if (!m->opsets[m->n_opsets].domain) return OOM();
    m->n_opsets++;
  }
  if (m->ir_version == 0) {
    int rc = warn(c, "the model declares no IR version");
    if (rc) return rc;
  }
  if (mb_model_opset_of(m, "") < 0) {
    int rc = warn(c, "the model imports no opset for the default domain (ai.onnx)");
    if (rc) return rc;
  }
  m->recorded_keys = mb_arena_array(ARENA, pm->n_metadata_props + 1, sizeof(char *));
  m->recorded_values = mb_arena_array(ARENA, pm->n_metadata_props + 1, sizeof(char *));
  if (!m->recorded_keys || !m->recorded_values) return OOM();
  size_t prefix = strlen(MB_RECORDED_PREFIX);
  for (size_t k = 0; k < pm->n_metadata_props; k++) {
    const Onnx__StringStringEntryProto *kv = pm->metadata_props[k];
    if (!kv || !kv->key || !kv->value || strncmp(kv->key, MB_RECORDED_PREFIX, prefix)) continue;
    m->recorded_keys[m->n_recorded] = dup_str(c, kv->key + prefix);
    m->recorded_values[m->n_recorded] = dup_str(c, kv->value);
    if (!m->recorded_keys[m->n_recorded] || !m->recorded_values[m->n_recorded]) return OOM();
    m->n_recorded++;
  }
  int rc = convert_graph(c, pm->graph, NULL, 0, &m->graph);
  m->warnings = c->warnings;
  m->n_warnings = c->n_warnings;
  return rc;
}
