#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ops/op.h"

int mb_op_fail(mb_op_ctx *c, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return mb_fail(c->d, MB_E_INVALID_MODEL, "node '%s' (%s): %s", c->node->name,
                 c->node->op_type, msg);
}

static const mb_attr *find_attr(const mb_op_ctx *c, const char *name) {
  for (int32_t i = 0; i < c->node->n_attrs; i++)
    if (!strcmp(c->node->attrs[i].name, name)) return &c->node->attrs[i];
  return NULL;
}

/* An attribute the rule reads as one type but the node declares as another (an axis given as
 * a float, a mode given as an int, a value given as a float instead of a tensor): onnx.checker
 * refuses it, and reading the other field would silently take 0, NULL or the default. The
 * failure lands in the context's diag, which inference checks after the rule returns; an
 * attribute without a declared type (0: files older than the type field) is read as it is. */
const mb_attr *mb_op_attr_typed(const mb_op_ctx *c, const char *name, int32_t want) {
  const mb_attr *a = find_attr(c, name);
  if (!a || !a->type || a->type == want) return a;
  if (c->d->status == MB_OK)
    mb_fail(c->d, MB_E_INVALID_MODEL, "node '%s' (%s): attribute '%s' is %s, the op takes %s", c->node->name,
            c->node->op_type, name, mb_attr_type_name(a->type), mb_attr_type_name(want));
  return NULL;
}

int64_t mb_op_attr_i(const mb_op_ctx *c, const char *name, int64_t dflt) {
  const mb_attr *a = mb_op_attr_typed(c, name, MB_ATTR_INT);
  return a ? a->i : dflt;
}

float mb_op_attr_f(const mb_op_ctx *c, const char *name, float dflt) {
  const mb_attr *a = mb_op_attr_typed(c, name, MB_ATTR_FLOAT);
  return a ? a->f : dflt;
}

uint64_t mb_op_attr_ints(const mb_op_ctx *c, const char *name, const int64_t **v) {
  const mb_attr *a = mb_op_attr_typed(c, name, MB_ATTR_INTS);
  *v = a ? a->ints : NULL;
  return a ? a->n_ints : 0;
}

uint64_t mb_op_attr_floats(const mb_op_ctx *c, const char *name, const float **v) {
  const mb_attr *a = mb_op_attr_typed(c, name, MB_ATTR_FLOATS);
  *v = a ? a->floats : NULL;
  return a ? a->n_floats : 0;
}

const char *mb_op_attr_s(const mb_op_ctx *c, const char *name, const char *dflt) {
  const mb_attr *a = mb_op_attr_typed(c, name, MB_ATTR_STRING);
  return a && a->s ? a->s : dflt;
}

const char *mb_op_attr_enum(const mb_op_ctx *c, const char *name, const char *dflt, const char *const *allowed) {
  const char *s = mb_op_attr_s(c, name, dflt);
  for (const char *const *a = allowed; *a; a++)
    if (!strcmp(s, *a)) return s;
  if (c->d->status == MB_OK) {
    char list[256];
    size_t o = 0;
    list[0] = 0;
    for (const char *const *a = allowed; *a && o < sizeof list; a++)
      o += (size_t)snprintf(list + o, sizeof list - o, "%s%s", a == allowed ? "" : ", ", *a);
    mb_fail(c->d, MB_E_INVALID_MODEL, "node '%s' (%s): attribute '%s' is '%.64s', not one of %s", c->node->name,
            c->node->op_type, name, s, list);
  }
  return dflt;
}

/* A TENSOR attribute declared without its tensor is refused too: its value would be a guess. */
const mb_const_tensor *mb_op_attr_t(const mb_op_ctx *c, const char *name) {
  const mb_attr *a = mb_op_attr_typed(c, name, MB_ATTR_TENSOR);
  if (a && !a->t && c->d->status == MB_OK)
    mb_fail(c->d, MB_E_INVALID_MODEL, "node '%s' (%s): attribute '%s' holds no tensor", c->node->name,
            c->node->op_type, name);
  return a ? a->t : NULL;
}

const mb_graph *mb_op_attr_g(const mb_op_ctx *c, const char *name) {
  const mb_attr *a = mb_op_attr_typed(c, name, MB_ATTR_GRAPH);
  return a ? a->g : NULL;
}

int mb_op_input(mb_op_ctx *c, int32_t i, const mb_tinfo **t) {
  if (i >= c->n_in || !c->in[i]) return mb_op_fail(c, "input %d is missing", (int)i);
  if (c->in[i]->rank < 0) return mb_op_fail(c, "the shape of input %d is unknown", (int)i);
  *t = c->in[i];
  return MB_OK;
}

uint64_t mb_tinfo_numel(const mb_tinfo *t) {
  uint64_t n = 1;
  for (int32_t k = 0; k < t->rank; k++) n *= (uint64_t)t->dims[k];
  return n;
}

static int set_tinfo(mb_op_ctx *c, mb_tinfo *t, int32_t i, int32_t dtype, int32_t rank, const int64_t *dims);

int mb_op_set(mb_op_ctx *c, int32_t i, int32_t dtype, int32_t rank, const int64_t *dims) {
  if (i >= c->n_out || !c->out[i]) return MB_OK;
  return set_tinfo(c, c->out[i], i, dtype, rank, dims);
}

mb_tinfo *mb_op_set_seq(mb_op_ctx *c, int32_t i, int32_t dtype, int32_t n) {
  if (i >= c->n_out || !c->out[i]) return NULL;
  if (n < 0 || n > MB_MAX_SEQUENCE) {
    mb_op_fail(c, "a sequence of %d tensors is more than membudget follows (%d)", (int)n, MB_MAX_SEQUENCE);
    return NULL;
  }
  mb_tinfo *t = c->out[i];
  if (set_tinfo(c, t, i, dtype, 0, NULL) != MB_OK) return NULL;
  t->seq = mb_arena_array(c->arena, n ? (size_t)n : 1, sizeof(mb_tinfo));
  if (!t->seq) mb_fail(c->d, MB_E_NOMEM, "out of memory");
  t->seq_len = t->seq ? n : 0;
  return t->seq;
}

int mb_op_set_elem(mb_op_ctx *c, mb_tinfo *e, int32_t dtype, int32_t rank, const int64_t *dims) {
  return set_tinfo(c, e, -1, dtype, rank, dims);
}

static int set_tinfo(mb_op_ctx *c, mb_tinfo *t, int32_t i, int32_t dtype, int32_t rank, const int64_t *dims) {
  if (rank < 0 || rank > MB_MAX_RANK) return mb_op_fail(c, "output %d would have rank %d", (int)i, (int)rank);
  uint64_t numel = 1;
  for (int32_t k = 0; k < rank; k++) {
    if (dims[k] < 0) return mb_op_fail(c, "output %d would have a negative dim on axis %d", (int)i, (int)k);
    if (dims[k] && numel > (MB_MAX_TENSOR_BYTES / 16) / (uint64_t)dims[k])
      return mb_fail(c->d, MB_E_LIMIT, "node '%s' (%s): output %d would have an absurd size",
                     c->node->name, c->node->op_type, (int)i);
    numel *= (uint64_t)dims[k];
  }
  t->dtype = dtype;
  t->rank = rank;
  t->dims = mb_arena_array(c->arena, rank ? (size_t)rank : 1, sizeof(int64_t));
  if (!t->dims) return mb_fail(c->d, MB_E_NOMEM, "out of memory");
  if (rank) memcpy(t->dims, dims, (size_t)rank * sizeof(int64_t));
  t->val = NULL;
  t->seq = NULL;
  t->seq_len = 0;
  return MB_OK;
}

static mb_small_values *new_values(mb_op_ctx *c, int32_t i, int64_t n, bool is_float) {
  if (i >= c->n_out || !c->out[i]) return NULL;
  mb_small_values *sv = mb_arena_alloc(c->arena, sizeof *sv);
  void *data = sv ? mb_arena_array(c->arena, n ? (size_t)n : 1, is_float ? sizeof(double) : sizeof(int64_t)) : NULL;
  if (!data) {
    mb_fail(c->d, MB_E_NOMEM, "out of memory");
    return NULL;
  }
  sv->count = n;
  sv->is_float = is_float;
  if (is_float) sv->f = data;
  else sv->i = data;
  c->out[i]->val = sv;
  return sv;
}

int64_t *mb_op_new_ivalues(mb_op_ctx *c, int32_t i, int64_t n) {
  mb_small_values *sv = new_values(c, i, n, false);
  return sv ? sv->i : NULL;
}

double *mb_op_new_fvalues(mb_op_ctx *c, int32_t i, int64_t n) {
  mb_small_values *sv = new_values(c, i, n, true);
  return sv ? sv->f : NULL;
}

int mb_op_set_ivalues(mb_op_ctx *c, int32_t i, const int64_t *v, int64_t n) {
  int64_t *o = mb_op_new_ivalues(c, i, n);
  if (o && n) memcpy(o, v, (size_t)n * sizeof *o);
  return c->d->status;
}

const int64_t *mb_op_ivalues(const mb_op_ctx *c, int32_t i, int64_t *n) {
  if (i >= c->n_in || !c->in[i] || !c->in[i]->val || c->in[i]->val->is_float) return NULL;
  *n = c->in[i]->val->count;
  return c->in[i]->val->i;
}

const char *mb_shape_str(char *buf, size_t size, const mb_tinfo *t) {
  size_t o = (size_t)snprintf(buf, size, "[");
  for (int32_t k = 0; k < t->rank && o < size; k++)
    o += (size_t)snprintf(buf + o, size - o, "%s%lld", k ? ", " : "", (long long)t->dims[k]);
  if (o < size) snprintf(buf + o, size - o, "]");
  return buf;
}

const char *mb_op_input_str(const mb_op_ctx *c, int32_t i, char *buf, size_t size) {
  const char *name = i < c->n_in && c->node->inputs[i] >= 0 ? c->graph->values[c->node->inputs[i]].name : "";
  char shape[256] = "";
  if (i < c->n_in && c->in[i] && c->in[i]->rank >= 0) mb_shape_str(shape, sizeof shape, c->in[i]);
  snprintf(buf, size, "'%.200s'%s%s", name, shape[0] ? " " : "", shape);
  return buf;
}

int mb_op_exact_shape(mb_op_ctx *c, int32_t i, int32_t rank, const int64_t *dims, const char *what,
                      const char *of) {
  if (i >= c->n_in || !c->in[i] || c->in[i]->rank < 0) return MB_OK; /* omitted or unknown */
  const mb_tinfo *t = c->in[i];
  bool ok = t->rank == rank;
  for (int32_t k = 0; ok && k < rank; k++) ok = t->dims[k] == dims[k];
  if (ok) return MB_OK;
  char st[300], sw[256];
  mb_tinfo want = *t;
  want.rank = rank;
  want.dims = (int64_t *)dims;
  return mb_op_fail(c, "%s %s is not %s, %s", what, mb_op_input_str(c, i, st, sizeof st),
                    mb_shape_str(sw, sizeof sw, &want), of);
}

int mb_op_broadcast(mb_op_ctx *c, const mb_tinfo *a, const mb_tinfo *b, int32_t *rank, int64_t *out) {
  int32_t r = a->rank > b->rank ? a->rank : b->rank;
  for (int32_t k = 0; k < r; k++) {
    int32_t ia = k - (r - a->rank), ib = k - (r - b->rank);
    int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
    if (da == db || db == 1) out[k] = da;
    else if (da == 1) out[k] = db;
    else {
      char sa[256], sb[256];
      return mb_op_fail(c, "shapes %s and %s do not broadcast (axis %d: %lld vs %lld)",
                        mb_shape_str(sa, sizeof sa, a), mb_shape_str(sb, sizeof sb, b), (int)k,
                        (long long)da, (long long)db);
    }
  }
  *rank = r;
  return MB_OK;
}

int mb_op_unidirectional(mb_op_ctx *c, int32_t i, int32_t rank, const int64_t *dims, const char *what) {
  if (i >= c->n_in || !c->in[i] || c->in[i]->rank < 0) return MB_OK; /* omitted or unknown */
  const mb_tinfo *t = c->in[i];
  bool ok = t->rank <= rank;
  for (int32_t k = 0; ok && k < t->rank; k++) {
    int64_t want = dims[rank - t->rank + k], have = t->dims[k];
    ok = have == want || have == 1;
  }
  if (ok) return MB_OK;
  char st[300], sw[256];
  mb_tinfo target = *t; /* the same tensor info, at the target's shape (its own dims untouched) */
  target.rank = rank;
  target.dims = (int64_t *)dims;
  return mb_op_fail(c, "%s %s does not broadcast to %s", what, mb_op_input_str(c, i, st, sizeof st),
                    mb_shape_str(sw, sizeof sw, &target));
}

int mb_op_axis(mb_op_ctx *c, int64_t axis, int32_t rank, int32_t *out) {
  if (axis < -(int64_t)rank || axis >= (int64_t)(rank ? rank : 1))
    return mb_op_fail(c, "axis %lld is out of range for rank %d", (long long)axis, (int)rank);
  *out = (int32_t)(axis < 0 ? axis + rank : axis);
  return MB_OK;
}

const double *mb_op_fvalues(mb_op_ctx *c, int32_t i, int64_t *n) {
  if (i >= c->n_in || !c->in[i] || !c->in[i]->val) return NULL;
  const mb_small_values *v = c->in[i]->val;
  *n = v->count;
  if (v->is_float) return v->f;
  double *f = mb_arena_array(c->arena, v->count ? (size_t)v->count : 1, sizeof *f);
  if (!f) return NULL;
  for (int64_t k = 0; k < v->count; k++) f[k] = (double)v->i[k];
  return f;
}

int mb_op_set_fvalues(mb_op_ctx *c, int32_t i, const double *v, int64_t n) {
  double *o = mb_op_new_fvalues(c, i, n);
  if (o && n) memcpy(o, v, (size_t)n * sizeof *o);
  return c->d->status;
}

bool mb_op_user_dim(const mb_op_ctx *c, const char *name, int64_t *v) {
  const mb_op_dims *dims = c->dims;
  for (size_t i = 0; dims && name && i < dims->n; i++)
    if (!strcmp(dims->names[i], name)) {
      *v = dims->values[i];
      return true;
    }
  return false;
}

const char *mb_op_bound_name(const mb_op_ctx *c) {
  for (int32_t o = 0; o < c->node->n_outputs; o++)
    if (c->node->outputs[o] >= 0) return c->graph->values[c->node->outputs[o]].name;
  return c->node->name;
}

bool mb_op_bound(const mb_op_ctx *c, int64_t *v) {
  if (c->bound_asked) *c->bound_asked = true;
  return mb_op_user_dim(c, mb_op_bound_name(c), v);
}

int mb_op_data_dependent(mb_op_ctx *c, const char *what) {
  return mb_fail(c->d, MB_E_UNSUPPORTED,
                 "node '%s': op %s has %s that is not known statically; bound it with "
                 "--dim '%s=N'", c->node->name, c->node->op_type, what, mb_op_bound_name(c));
}

int64_t mb_op_bcast_index(const mb_tinfo *t, int32_t r, const int64_t *od, int64_t k) {
  int64_t idx = 0, stride = 1;
  for (int32_t ax = r - 1; ax >= 0; ax--) {
    int64_t coord = k % od[ax];
    k /= od[ax];
    int32_t ia = ax - (r - t->rank);
    if (ia >= 0) {
      if (t->dims[ia] != 1) idx += coord * stride;
      stride *= t->dims[ia];
    }
  }
  return idx;
}
