/* Tensor-manipulation ops with value propagation: Constant, Shape, Size, Reshape, Transpose,
 * (Un)Squeeze, Concat, Gather, Slice, Expand, ConstantOfShape, Range, Split. These are the
 * Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains exporters emit, and the pads
 * matrix torch's F.pad builds (Reshape to [n, 2], Slice with step -1, Transpose). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/dtype.h"
#include "ops/op.h"

static int oom(mb_op_ctx *c) { return mb_fail(c->d, MB_E_NOMEM, "out of memory"); }

static int constant(mb_op_ctx *c) {
  const mb_const_tensor *t = mb_op_attr_t(c, "value");
  if (t) {
    int rc = mb_op_set(c, 0, t->dtype, t->rank, t->dims);
    if (!rc && t->values && c->out[0]) c->out[0]->val = t->values;
    return rc;
  }
  if (c->d->status) return c->d->status; /* 'value' of another type, or without its tensor */
  const mb_attr *a;
  if ((a = mb_op_attr_typed(c, "value_int", MB_ATTR_INT))) {
    int rc = mb_op_set(c, 0, MB_DTYPE_INT64, 0, NULL);
    return rc ? rc : mb_op_set_ivalues(c, 0, &a->i, 1);
  }
  if ((a = mb_op_attr_typed(c, "value_ints", MB_ATTR_INTS))) {
    int64_t n = (int64_t)a->n_ints;
    int rc = mb_op_set(c, 0, MB_DTYPE_INT64, 1, &n);
    return rc ? rc : mb_op_set_ivalues(c, 0, a->ints, n);
  }
  if ((a = mb_op_attr_typed(c, "value_float", MB_ATTR_FLOAT))) {
    double f = a->f;
    int rc = mb_op_set(c, 0, MB_DTYPE_FLOAT, 0, NULL);
    return rc ? rc : mb_op_set_fvalues(c, 0, &f, 1);
  }
  if ((a = mb_op_attr_typed(c, "value_floats", MB_ATTR_FLOATS))) {
    int64_t n = (int64_t)a->n_floats;
    int rc = mb_op_set(c, 0, MB_DTYPE_FLOAT, 1, &n);
    if (rc || n > MB_SMALL_VALUE_MAX) return rc;
    double *f = mb_arena_array(c->arena, n ? (size_t)n : 1, sizeof *f);
    if (!f) return oom(c);
    for (int64_t k = 0; k < n; k++) f[k] = a->floats[k];
    return mb_op_set_fvalues(c, 0, f, n);
  }
  if ((a = mb_op_attr_typed(c, "value_string", MB_ATTR_STRING))) return mb_op_set(c, 0, MB_DTYPE_STRING, 0, NULL);
  if ((a = mb_op_attr_typed(c, "value_strings", MB_ATTR_STRINGS))) {
    int64_t n = (int64_t)a->n_strings;
    return mb_op_set(c, 0, MB_DTYPE_STRING, 1, &n);
  }
  return c->d->status ? c->d->status : mb_op_fail(c, "Constant without a value attribute");
}

static int shape_op(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  int64_t r = x->rank, start = mb_op_attr_i(c, "start", 0), end = mb_op_attr_i(c, "end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = start < 0 ? 0 : start > r ? r : start;
  end = end < 0 ? 0 : end > r ? r : end;
  int64_t n = end > start ? end - start : 0;
  if ((rc = mb_op_set(c, 0, MB_DTYPE_INT64, 1, &n))) return rc;
  return mb_op_set_ivalues(c, 0, x->dims + start, n);
}

static int size_op(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  int64_t n = (int64_t)mb_tinfo_numel(x);
  if ((rc = mb_op_set(c, 0, MB_DTYPE_INT64, 0, NULL))) return rc;
  return mb_op_set_ivalues(c, 0, &n, 1);
}

/* Row-major element strides of x. */
static void strides_of(const mb_tinfo *x, int64_t *stride) {
  int64_t s = 1;
  for (int32_t a = x->rank - 1; a >= 0; a--) {
    stride[a] = s;
    s *= x->dims[a];
  }
}

/* Values of output 0 (already set) taken from x's known values by a strided walk: element
 * (i_0, ..., i_r-1) of the output is element base + sum i_a * mul[a] of x (Slice, Transpose).
 * Nothing when x's values are unknown or the output is too large to carry values. */
static int strided_values(mb_op_ctx *c, const mb_tinfo *x, int64_t base, const int64_t *mul) {
  if (!x->val || !c->out[0] || (uint64_t)x->val->count != mb_tinfo_numel(x)) return MB_OK;
  const mb_tinfo *y = c->out[0];
  uint64_t n = mb_tinfo_numel(y);
  if (n > MB_SMALL_VALUE_MAX) return MB_OK;
  int64_t *oi = x->val->is_float ? NULL : mb_op_new_ivalues(c, 0, (int64_t)n);
  double *of = x->val->is_float ? mb_op_new_fvalues(c, 0, (int64_t)n) : NULL;
  if (!oi && !of) return c->d->status;
  int64_t idx[MB_MAX_RANK] = {0}, at = base; /* the output coordinates, odometer order */
  for (uint64_t k = 0; k < n; k++) {
    if (oi) oi[k] = x->val->i[at];
    else of[k] = x->val->f[at];
    for (int32_t a = y->rank - 1; a >= 0; a--) {
      at += mul[a];
      if (++idx[a] < y->dims[a]) break;
      at -= idx[a] * mul[a];
      idx[a] = 0;
    }
  }
  return MB_OK;
}

/* Copy values through an op that keeps element order (Reshape, Squeeze, Unsqueeze, Identity). */
static int pass_values(mb_op_ctx *c) {
  if (c->n_out > 0 && c->out[0] && c->in[0] && c->in[0]->val) c->out[0]->val = c->in[0]->val;
  return MB_OK;
}

static int reshape(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  const int64_t *shape;
  int64_t n;
  if (c->opset < 5) {
    uint64_t ns = mb_op_attr_ints(c, "shape", &shape);
    n = (int64_t)ns;
  } else if (!(shape = mb_op_ivalues(c, 1, &n))) {
    return mb_op_fail(c, "the target shape is not known statically");
  }
  if (n > MB_MAX_RANK) return mb_op_fail(c, "target rank %lld is too large", (long long)n);
  bool allowzero = mb_op_attr_i(c, "allowzero", 0) != 0;
  int64_t dims[MB_MAX_RANK];
  int64_t known = 1, infer = -1;
  for (int64_t k = 0; k < n; k++) {
    dims[k] = shape[k];
    if (shape[k] == 0 && !allowzero) {
      if (k >= x->rank) return mb_op_fail(c, "0 in the target shape copies a missing axis %lld", (long long)k);
      dims[k] = x->dims[k];
    }
    if (dims[k] == -1) {
      if (infer >= 0) return mb_op_fail(c, "more than one -1 in the target shape");
      infer = k;
    } else if (dims[k] < 0) {
      return mb_op_fail(c, "invalid target dim %lld", (long long)dims[k]);
    } else if (!mb_mul_i64(known, dims[k], &known)) {
      return mb_op_fail(c, "the target shape overflows");
    }
  }
  uint64_t total = mb_tinfo_numel(x);
  char sx[256];
  if (infer >= 0) {
    if (known == 0 || total % (uint64_t)known)
      return mb_op_fail(c, "cannot reshape %s (%llu elements) with a -1 into %lld-element blocks",
                        mb_shape_str(sx, sizeof sx, x), (unsigned long long)total, (long long)known);
    dims[infer] = (int64_t)(total / (uint64_t)known);
  } else if ((uint64_t)known != total) {
    mb_tinfo target = {.rank = (int32_t)n, .dims = dims};
    char st[256];
    return mb_op_fail(c, "cannot reshape %s (%llu elements) into %s (%lld elements)",
                      mb_shape_str(sx, sizeof sx, x), (unsigned long long)total,
                      mb_shape_str(st, sizeof st, &target), (long long)known);
  }
  if ((rc = mb_op_set(c, 0, x->dtype, (int32_t)n, dims))) return rc;
  return pass_values(c);
}

static int transpose(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  const int64_t *perm;
  uint64_t np = mb_op_attr_ints(c, "perm", &perm);
  int64_t dims[MB_MAX_RANK];
  bool used[MB_MAX_RANK] = {false};
  if (np && np != (uint64_t)x->rank) return mb_op_fail(c, "perm has %llu entries for rank %d", (unsigned long long)np, (int)x->rank);
  for (int32_t k = 0; k < x->rank; k++) {
    int64_t p = np ? perm[k] : x->rank - 1 - k;
    if (p < 0 || p >= x->rank || used[p]) return mb_op_fail(c, "perm is not a permutation");
    used[p] = true;
    dims[k] = x->dims[p];
  }
  if ((rc = mb_op_set(c, 0, x->dtype, x->rank, dims))) return rc;
  /* values: torch's F.pad writes its pads as a [n, 2] matrix, row-reversed by a Slice and
   * transposed to ONNX's begins-then-ends order before the final Reshape to 1-D */
  int64_t stride[MB_MAX_RANK], mul[MB_MAX_RANK];
  strides_of(x, stride);
  for (int32_t k = 0; k < x->rank; k++) mul[k] = stride[np ? perm[k] : x->rank - 1 - k];
  return strided_values(c, x, 0, mul);
}

/* Axes from the attribute (older opsets) or from input 1. n = -1 when absent. */
static int get_axes(mb_op_ctx *c, int64_t attr_until, const int64_t **axes, int64_t *n) {
  if (c->opset < attr_until) {
    *n = (int64_t)mb_op_attr_ints(c, "axes", axes);
    if (!*n && !mb_op_attr_typed(c, "axes", MB_ATTR_INTS)) *n = -1;
    return MB_OK;
  }
  if (c->n_in < 2 || !c->in[1]) { *n = -1; return MB_OK; }
  if (!(*axes = mb_op_ivalues(c, 1, n))) return mb_op_fail(c, "the axes input is not known statically");
  return MB_OK;
}

static int unsqueeze(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  const int64_t *axes;
  int64_t n;
  if ((rc = get_axes(c, 13, &axes, &n))) return rc;
  if (n < 0) return mb_op_fail(c, "Unsqueeze without axes");
  int32_t r = x->rank + (int32_t)n;
  if (r > MB_MAX_RANK) return mb_op_fail(c, "rank too large");
  bool ins[MB_MAX_RANK] = {false};
  for (int64_t k = 0; k < n; k++) {
    int32_t a;
    if ((rc = mb_op_axis(c, axes[k], r, &a))) return rc;
    if (ins[a]) return mb_op_fail(c, "axis %lld repeated", (long long)axes[k]);
    ins[a] = true;
  }
  int64_t dims[MB_MAX_RANK];
  for (int32_t k = 0, j = 0; k < r; k++) dims[k] = ins[k] ? 1 : x->dims[j++];
  if ((rc = mb_op_set(c, 0, x->dtype, r, dims))) return rc;
  return pass_values(c);
}

static int squeeze(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  const int64_t *axes;
  int64_t n;
  if ((rc = get_axes(c, 13, &axes, &n))) return rc;
  bool drop[MB_MAX_RANK] = {false};
  for (int32_t k = 0; k < x->rank; k++) drop[k] = n < 0 && x->dims[k] == 1;
  for (int64_t k = 0; k < n; k++) {
    int32_t a;
    if ((rc = mb_op_axis(c, axes[k], x->rank, &a))) return rc;
    if (x->dims[a] != 1) return mb_op_fail(c, "cannot squeeze axis %d of size %lld", (int)a, (long long)x->dims[a]);
    drop[a] = true;
  }
  int64_t dims[MB_MAX_RANK];
  int32_t r = 0;
  for (int32_t k = 0; k < x->rank; k++) if (!drop[k]) dims[r++] = x->dims[k];
  if ((rc = mb_op_set(c, 0, x->dtype, r, dims))) return rc;
  return pass_values(c);
}

static int concat(mb_op_ctx *c) {
  const mb_tinfo *first;
  int rc = mb_op_input(c, 0, &first);
  if (rc) return rc;
  int32_t axis;
  if ((rc = mb_op_axis(c, mb_op_attr_i(c, "axis", 0), first->rank, &axis))) return rc;
  int64_t dims[MB_MAX_RANK];
  memcpy(dims, first->dims, (size_t)first->rank * sizeof *dims);
  bool values = true, any_float = false;
  int64_t nvals = 0;
  for (int32_t i = 0; i < c->n_in; i++) {
    const mb_tinfo *x;
    if ((rc = mb_op_input(c, i, &x))) return rc;
    if (x->rank != first->rank) return mb_op_fail(c, "input %d has rank %d, input 0 rank %d", (int)i, (int)x->rank, (int)first->rank);
    for (int32_t k = 0; k < x->rank; k++)
      if (k != axis && x->dims[k] != first->dims[k]) {
        char s0[256], si[256];
        return mb_op_fail(c, "input %d %s does not match input 0 %s outside axis %d", (int)i,
                          mb_shape_str(si, sizeof si, x), mb_shape_str(s0, sizeof s0, first), (int)axis);
      }
    if (i && !mb_add_i64(dims[axis], x->dims[axis], &dims[axis]))
      return mb_op_fail(c, "concatenated size overflows");
    if (!x->val) values = false;
    else { nvals += x->val->count; any_float |= x->val->is_float; }
  }
  if ((rc = mb_op_set(c, 0, first->dtype, first->rank, dims))) return rc;
  if (!values || first->rank != 1) return MB_OK;
  int64_t at = 0, n;
  if (any_float) {
    double *o = mb_op_new_fvalues(c, 0, nvals);
    for (int32_t i = 0; o && i < c->n_in; i++) {
      const double *v = mb_op_fvalues(c, i, &n);
      if (!v) return oom(c);
      memcpy(o + at, v, (size_t)n * sizeof *o);
      at += n;
    }
    return c->d->status;
  }
  int64_t *o = mb_op_new_ivalues(c, 0, nvals);
  for (int32_t i = 0; o && i < c->n_in; i++) {
    const int64_t *v = mb_op_ivalues(c, i, &n); /* every input has integer values here */
    memcpy(o + at, v, (size_t)n * sizeof *o);
    at += n;
  }
  return c->d->status;
}

static int gather(mb_op_ctx *c) {
  const mb_tinfo *x, *idx;
  int rc;
  if ((rc = mb_op_input(c, 0, &x)) || (rc = mb_op_input(c, 1, &idx))) return rc;
  int32_t axis;
  if ((rc = mb_op_axis(c, mb_op_attr_i(c, "axis", 0), x->rank, &axis))) return rc;
  bool no_indices = false;
  for (int32_t k = 0; k < idx->rank; k++) no_indices |= idx->dims[k] == 0;
  if (x->rank > 0 && x->dims[axis] == 0 && !no_indices) { /* every index is out of range: an error */
    char sx[300], si[300];
    return mb_op_fail(c, "the data %s has no entries on axis %d for the indices %s", mb_op_input_str(c, 0, sx, sizeof sx),
                      (int)axis, mb_op_input_str(c, 1, si, sizeof si));
  }
  int64_t dims[MB_MAX_RANK];
  int32_t r = 0;
  if (x->rank - 1 + idx->rank > MB_MAX_RANK) return mb_op_fail(c, "rank too large");
  for (int32_t k = 0; k < axis; k++) dims[r++] = x->dims[k];
  for (int32_t k = 0; k < idx->rank; k++) dims[r++] = idx->dims[k];
  for (int32_t k = axis + 1; k < x->rank; k++) dims[r++] = x->dims[k];
  if ((rc = mb_op_set(c, 0, x->dtype, r, dims))) return rc;
  int64_t nx, ni;
  const int64_t *vx = mb_op_ivalues(c, 0, &nx), *vi = mb_op_ivalues(c, 1, &ni);
  if (!vx || !vi || x->rank != 1) return MB_OK;
  int64_t *o = mb_op_new_ivalues(c, 0, ni);
  for (int64_t k = 0; o && k < ni; k++) {
    int64_t j = vi[k] < 0 ? vi[k] + nx : vi[k];
    if (j < 0 || j >= nx)
      return mb_op_fail(c, "index %lld is out of range for %lld elements", (long long)vi[k], (long long)nx);
    o[k] = vx[j];
  }
  return c->d->status;
}

static int64_t clamp(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

static int slice(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  const int64_t *starts, *ends, *axes = NULL, *steps = NULL;
  int64_t ns, ne, na = -1, nst = -1;
  if (c->opset < 10) {
    ns = (int64_t)mb_op_attr_ints(c, "starts", &starts);
    ne = (int64_t)mb_op_attr_ints(c, "ends", &ends);
    na = mb_op_attr_typed(c, "axes", MB_ATTR_INTS) ? (int64_t)mb_op_attr_ints(c, "axes", &axes) : -1;
  } else {
    if (!(starts = mb_op_ivalues(c, 1, &ns)) || !(ends = mb_op_ivalues(c, 2, &ne)))
      return mb_op_fail(c, "starts/ends are not known statically");
    if (c->n_in > 3 && c->in[3] && !(axes = mb_op_ivalues(c, 3, &na)))
      return mb_op_fail(c, "axes are not known statically");
    if (c->n_in > 4 && c->in[4] && !(steps = mb_op_ivalues(c, 4, &nst)))
      return mb_op_fail(c, "steps are not known statically");
  }
  if (ns != ne || (axes && na != ns) || (steps && nst != ns))
    return mb_op_fail(c, "starts, ends, axes and steps differ in length");
  int64_t dims[MB_MAX_RANK], first[MB_MAX_RANK], step[MB_MAX_RANK];
  for (int32_t k = 0; k < x->rank; k++) { dims[k] = x->dims[k]; first[k] = 0; step[k] = 1; }
  for (int64_t k = 0; k < ns; k++) {
    int32_t a;
    if ((rc = mb_op_axis(c, axes ? axes[k] : k, x->rank, &a))) return rc;
    int64_t d = x->dims[a], s = steps ? steps[k] : 1, b = starts[k], e = ends[k];
    if (s == 0) return mb_op_fail(c, "step 0 on axis %d", (int)a);
    if (b < 0) b += d;
    if (e < 0 && e > INT64_MIN / 2) e += d;
    /* ceil(span / |step|) written so that no step, however extreme, overflows */
    if (s > 0) { b = clamp(b, 0, d); e = clamp(e, 0, d); dims[a] = e > b ? (e - b - 1) / s + 1 : 0; }
    else {
      b = clamp(b, 0, d - 1);
      e = clamp(e, -1, d - 1);
      dims[a] = b > e ? (s == INT64_MIN ? 1 : (b - e - 1) / -s + 1) : 0;
    }
    first[a] = b;
    step[a] = s;
  }
  if ((rc = mb_op_set(c, 0, x->dtype, x->rank, dims))) return rc;
  /* values at any rank, not only 1-D: torch's F.pad reverses the rows of its [n, 2] pads
   * matrix with a Slice (axis 0, step -1) */
  int64_t stride[MB_MAX_RANK], mul[MB_MAX_RANK], base = 0;
  strides_of(x, stride);
  for (int32_t a = 0; a < x->rank; a++) {
    base += first[a] * stride[a];
    mul[a] = dims[a] > 1 ? step[a] * stride[a] : 0; /* |step| < dim here: no overflow */
  }
  return strided_values(c, x, base, mul);
}

static int expand(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  int64_t n;
  const int64_t *shape = mb_op_ivalues(c, 1, &n);
  if (!shape) return mb_op_fail(c, "the target shape is not known statically");
  if (n > MB_MAX_RANK) return mb_op_fail(c, "target rank too large");
  mb_tinfo target = {.rank = (int32_t)n, .dims = (int64_t *)shape};
  int32_t r;
  int64_t dims[MB_MAX_RANK];
  if ((rc = mb_op_broadcast(c, x, &target, &r, dims))) return rc;
  if ((rc = mb_op_set(c, 0, x->dtype, r, dims))) return rc;
  /* values: exporters expand scalars into shape vectors and fills (torch 2.x's zero conv bias
   * takes its length from Shape(weight) through an Expand) */
  uint64_t total = mb_tinfo_numel(c->out[0]);
  if (!x->val || total > MB_SMALL_VALUE_MAX) return MB_OK;
  if (x->val->is_float) {
    double *o = mb_op_new_fvalues(c, 0, (int64_t)total);
    for (uint64_t k = 0; o && k < total; k++) o[k] = x->val->f[mb_op_bcast_index(x, r, dims, (int64_t)k)];
  } else {
    int64_t *o = mb_op_new_ivalues(c, 0, (int64_t)total);
    for (uint64_t k = 0; o && k < total; k++) o[k] = x->val->i[mb_op_bcast_index(x, r, dims, (int64_t)k)];
  }
  return c->d->status;
}

static int constant_of_shape(mb_op_ctx *c) {
  int64_t n;
  const int64_t *shape = mb_op_ivalues(c, 0, &n);
  if (!shape) return mb_op_fail(c, "the shape input is not known statically");
  if (n > MB_MAX_RANK) return mb_op_fail(c, "rank too large");
  const mb_const_tensor *value = mb_op_attr_t(c, "value");
  if (c->d->status) return c->d->status; /* 'value' of another type, or without its tensor */
  if (value && value->numel != 1) /* the fill: ONNX's reference refuses any other size */
    return mb_op_fail(c, "attribute 'value' holds %llu elements, the op takes a one-element tensor",
                      (unsigned long long)value->numel);
  int32_t dtype = value ? value->dtype : MB_DTYPE_FLOAT;
  int rc = mb_op_set(c, 0, dtype, (int32_t)n, shape);
  if (rc || !value || !value->values || value->values->is_float) return rc;
  uint64_t total = mb_tinfo_numel(c->out[0]);
  if (total > MB_SMALL_VALUE_MAX) return MB_OK;
  int64_t *o = mb_op_new_ivalues(c, 0, (int64_t)total);
  for (uint64_t k = 0; o && k < total; k++) o[k] = value->values->i[0];
  return c->d->status;
}

static int range(mb_op_ctx *c) {
  if (c->n_in < 3 || !c->in[0]) return mb_op_fail(c, "Range needs start, limit and delta");
  int64_t n0, n1, n2;
  const int64_t *s = mb_op_ivalues(c, 0, &n0), *l = mb_op_ivalues(c, 1, &n1), *d = mb_op_ivalues(c, 2, &n2);
  if (s && l && d && n0 == 1 && n1 == 1 && n2 == 1) {
    if (d[0] == 0) return mb_op_fail(c, "delta is 0");
    int64_t span;
    if (s[0] == INT64_MIN || d[0] == INT64_MIN || !mb_add_i64(l[0], -s[0], &span) ||
        span == INT64_MIN)
      return mb_op_fail(c, "the range overflows");
    int64_t n = span / d[0] + ((span % d[0]) != 0 && (span > 0) == (d[0] > 0));
    if (n < 0) n = 0;
    if (n > (int64_t)(MB_MAX_TENSOR_BYTES / 8)) return mb_op_fail(c, "the range is absurdly long");
    int rc = mb_op_set(c, 0, c->in[0]->dtype, 1, &n);
    if (rc || n > MB_SMALL_VALUE_MAX) return rc;
    int64_t *o = mb_op_new_ivalues(c, 0, n);
    for (int64_t k = 0; o && k < n; k++) o[k] = s[0] + k * d[0];
    return c->d->status;
  }
  /* floating range: ceil((limit - start) / delta) elements */
  const double *fs = mb_op_fvalues(c, 0, &n0), *fl = mb_op_fvalues(c, 1, &n1), *fd = mb_op_fvalues(c, 2, &n2);
  if (!fs || !fl || !fd || n0 != 1 || n1 != 1 || n2 != 1)
    return mb_op_fail(c, "start, limit and delta are not known statically");
  if (fd[0] == 0) return mb_op_fail(c, "delta is 0");
  double count = ceil((fl[0] - fs[0]) / fd[0]);
  if (!(count < 1e15)) return mb_op_fail(c, "range is too long");
  int64_t n = count > 0 ? (int64_t)count : 0;
  return mb_op_set(c, 0, c->in[0]->dtype, 1, &n);
}

static int split(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  int32_t axis;
  if ((rc = mb_op_axis(c, mb_op_attr_i(c, "axis", 0), x->rank, &axis))) return rc;
  const int64_t *sizes = NULL;
  int64_t n = 0;
  if (c->opset < 13) n = (int64_t)mb_op_attr_ints(c, "split", &sizes);
  else if (c->n_in > 1 && c->in[1] && !(sizes = mb_op_ivalues(c, 1, &n)))
    return mb_op_fail(c, "split sizes are not known statically");
  int64_t parts = c->n_out, d = x->dims[axis];
  if (sizes && n != parts) return mb_op_fail(c, "%lld split sizes for %lld outputs", (long long)n, (long long)parts);
  int64_t sum = 0, dims[MB_MAX_RANK];
  memcpy(dims, x->dims, (size_t)x->rank * sizeof *dims);
  for (int64_t k = 0; k < parts; k++) {
    if (sizes) dims[axis] = sizes[k];
    else {
      /* ceil(d / parts) without d + parts - 1, which overflows at INT64_MAX; the last part
       * may be smaller (opset 18) */
      int64_t each = d / parts + (d % parts != 0);
      dims[axis] = k + 1 < parts ? each : d - each * (parts - 1);
      if (dims[axis] < 0) return mb_op_fail(c, "cannot split %lld into %lld parts", (long long)d, (long long)parts);
    }
    if (dims[axis] < 0 || !mb_add_i64(sum, dims[axis], &sum))
      return mb_op_fail(c, "split sizes are negative or overflow");
    if ((rc = mb_op_set(c, (int32_t)k, x->dtype, x->rank, dims))) return rc;
  }
  if (sum != d) return mb_op_fail(c, "split sizes add up to %lld, axis has %lld", (long long)sum, (long long)d);
  return MB_OK;
}

const mb_op_def mb_ops_tensor[] = {
  {"", "Constant", 1, 0, 0, 1, constant, MB_G_NONDIFF},
  {"", "Shape", 1, 1, 1, 1, shape_op, MB_G_NONDIFF},
  {"", "Size", 1, 1, 1, 1, size_op, MB_G_NONDIFF},
  {"", "Reshape", 1, 1, 1, 1, reshape, MB_G_RESHAPE},
  {"", "Reshape", 5, 2, 2, 1, reshape, MB_G_RESHAPE},
  {"", "Transpose", 1, 1, 1, 1, transpose, MB_G_TRANSPOSE},
  {"", "Unsqueeze", 1, 1, 1, 1, unsqueeze, MB_G_VIEW},
  {"", "Unsqueeze", 13, 2, 2, 1, unsqueeze, MB_G_VIEW},
  {"", "Squeeze", 1, 1, 1, 1, squeeze, MB_G_VIEW},
  {"", "Squeeze", 13, 1, 2, 1, squeeze, MB_G_VIEW},
  {"", "Concat", 1, 1, MB_OP_ANY, 1, concat, MB_G_CONCAT},
  {"", "Gather", 1, 2, 2, 1, gather, MB_G_GATHER},
  {"", "Slice", 1, 1, 1, 1, slice, MB_G_SLICE},
  {"", "Slice", 10, 3, 5, 1, slice, MB_G_SLICE},
  {"", "Expand", 8, 2, 2, 1, expand, MB_G_EXPAND},
  {"", "ConstantOfShape", 9, 1, 1, 1, constant_of_shape, MB_G_NONDIFF},
  {"", "Range", 11, 3, 3, 1, range, MB_G_NONDIFF},
  {"", "Split", 2, 1, 1, MB_OP_ANY, split, MB_G_SLICE},
  {"", "Split", 13, 1, 2, MB_OP_ANY, split, MB_G_SLICE},
};
const size_t mb_ops_tensor_count = sizeof mb_ops_tensor / sizeof mb_ops_tensor[0];
