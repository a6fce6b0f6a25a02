/* Ops that rearrange or index: Resize/Upsample, Pad, Tile, DepthToSpace/SpaceToDepth, Trilu,
 * CumSum, OneHot, GatherElements, GatherND, Scatter*, TopK, Einsum. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "graph/dtype.h"
#include "ops/op.h"

static int like_input(mb_op_ctx *c) { /* output 0 has input 0's shape and type */
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  return rc ? rc : mb_op_set(c, 0, x->dtype, x->rank, x->dims);
}

/* GroupNormalization: num_groups divides the channels; scale and bias hold one value per group
 * (opset 18) or per channel (opset 21, which fixed the schema): a zero-size one is refused. */
static int group_norm(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  char sx[300], of[400];
  if (x->rank < 2) return mb_op_fail(c, "the input %s has no channel axis", mb_op_input_str(c, 0, sx, sizeof sx));
  int64_t groups = mb_op_attr_i(c, "num_groups", 0);
  if (groups <= 0 || x->dims[1] % groups)
    return mb_op_fail(c, "num_groups %lld does not divide the %lld channels of %s", (long long)groups,
                      (long long)x->dims[1], mb_op_input_str(c, 0, sx, sizeof sx));
  bool per_group = c->opset < 21;
  int64_t n = per_group ? groups : x->dims[1];
  snprintf(of, sizeof of, "one value per %s of %s", per_group ? "group (num_groups)" : "channel",
           mb_op_input_str(c, 0, sx, sizeof sx));
  if ((rc = mb_op_exact_shape(c, 1, 1, &n, "the scale", of)) || (rc = mb_op_exact_shape(c, 2, 1, &n, "the bias", of)))
    return rc;
  return mb_op_set(c, 0, x->dtype, x->rank, x->dims);
}

/* ScatterElements, ScatterND: shaped like the data; the reduction (opset 16, max and min from
 * 18) says which scatter PyTorch ran (sim/plan.c: refine_rule), so it is checked here. */
static int scatter(mb_op_ctx *c) {
  static const char *const reductions[] = {"none", "add", "mul", "max", "min", NULL};
  (void)mb_op_attr_enum(c, "reduction", "none", reductions);
  return like_input(c);
}

static int resize(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  /* Upsample and Resize-10: (X, scales); Resize-11+: (X, roi, scales, sizes) */
  bool old = !strcmp(c->node->op_type, "Upsample") || c->opset < 11;
  int32_t scales_in = old ? 1 : 2, sizes_in = old ? -1 : 3;
  int64_t dims[MB_MAX_RANK], n;
  memcpy(dims, x->dims, (size_t)x->rank * sizeof *dims);
  const int64_t *axes_attr;
  uint64_t na = mb_op_attr_ints(c, "axes", &axes_attr);
  int32_t axes[MB_MAX_RANK];
  int64_t count = na ? (int64_t)na : x->rank;
  if (count > x->rank) return mb_op_fail(c, "%lld axes for rank %d", (long long)count, (int)x->rank);
  for (int64_t k = 0; k < count; k++)
    if ((rc = mb_op_axis(c, na ? axes_attr[k] : k, x->rank, &axes[k]))) return rc;
  const int64_t *sizes = sizes_in >= 0 && c->n_in > sizes_in && c->in[sizes_in] ? mb_op_ivalues(c, sizes_in, &n) : NULL;
  if (sizes_in >= 0 && c->n_in > sizes_in && c->in[sizes_in] && mb_tinfo_numel(c->in[sizes_in]) > 0) {
    if (!sizes) return mb_op_fail(c, "the sizes input is not known statically");
    if (n != count) return mb_op_fail(c, "%lld sizes for %lld axes", (long long)n, (long long)count);
    for (int64_t k = 0; k < count; k++) dims[axes[k]] = sizes[k];
    return mb_op_set(c, 0, x->dtype, x->rank, dims);
  }
  const double *scales = NULL;
  if (old && c->n_in < 2) { /* Upsample-7: scales attribute */
    const float *sc;
    if (mb_op_attr_floats(c, "scales", &sc) != (uint64_t)x->rank) return mb_op_fail(c, "missing scales");
    for (int32_t k = 0; k < x->rank; k++)
      if (!mb_floor_dim((double)x->dims[k] * sc[k], &dims[k]))
        return mb_op_fail(c, "scale %g gives an invalid size", (double)sc[k]);
    return mb_op_set(c, 0, x->dtype, x->rank, dims);
  }
  if (c->n_in <= scales_in || !c->in[scales_in] || !(scales = mb_op_fvalues(c, scales_in, &n)))
    return mb_op_fail(c, "neither scales nor sizes are known statically");
  if (n != count) return mb_op_fail(c, "%lld scales for %lld axes", (long long)n, (long long)count);
  for (int64_t k = 0; k < count; k++) {
    if (!(scales[k] > 0)) return mb_op_fail(c, "scale %g is not positive", scales[k]);
    if (!mb_floor_dim(floor((double)x->dims[axes[k]] * scales[k]), &dims[axes[k]]))
      return mb_op_fail(c, "scale %g gives an invalid size", scales[k]);
  }
  return mb_op_set(c, 0, x->dtype, x->rank, dims);
}

static int pad(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  const int64_t *pads, *axes_v = NULL;
  int64_t n, na = 0;
  if (c->opset < 11) n = (int64_t)mb_op_attr_ints(c, "pads", &pads);
  else if (!(pads = mb_op_ivalues(c, 1, &n))) return mb_op_fail(c, "pads are not known statically");
  if (c->opset >= 18 && c->n_in > 3 && c->in[3] && !(axes_v = mb_op_ivalues(c, 3, &na)))
    return mb_op_fail(c, "axes are not known statically");
  int64_t count = axes_v ? na : x->rank;
  if (n != 2 * count) return mb_op_fail(c, "%lld pads for %lld axes", (long long)n, (long long)count);
  int64_t dims[MB_MAX_RANK];
  memcpy(dims, x->dims, (size_t)x->rank * sizeof *dims);
  for (int64_t k = 0; k < count; k++) {
    int32_t a = (int32_t)k;
    if (axes_v && (rc = mb_op_axis(c, axes_v[k], x->rank, &a))) return rc;
    if (!mb_add_i64(dims[a], pads[k], &dims[a]) || !mb_add_i64(dims[a], pads[k + count], &dims[a]) ||
        dims[a] < 0)
      return mb_op_fail(c, "padding makes axis %d negative or overflows", (int)a);
  }
  return mb_op_set(c, 0, x->dtype, x->rank, dims);
}

static int tile(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  int64_t n;
  const int64_t *rep = mb_op_ivalues(c, 1, &n);
  if (!rep) return mb_op_fail(c, "repeats are not known statically");
  if (n != x->rank) return mb_op_fail(c, "%lld repeats for rank %d", (long long)n, (int)x->rank);
  int64_t dims[MB_MAX_RANK];
  for (int32_t k = 0; k < x->rank; k++) {
    if (rep[k] < 0) return mb_op_fail(c, "negative repeat");
    if (!mb_mul_i64(x->dims[k], rep[k], &dims[k])) return mb_op_fail(c, "tiled size overflows");
  }
  return mb_op_set(c, 0, x->dtype, x->rank, dims);
}

static int depth_space(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  int64_t b = mb_op_attr_i(c, "blocksize", 0);
  if (x->rank != 4 || b <= 0) return mb_op_fail(c, "needs a rank-4 input and a positive blocksize");
  int64_t dims[4] = {x->dims[0], x->dims[1], x->dims[2], x->dims[3]}, bb;
  if (!mb_mul_i64(b, b, &bb)) return mb_op_fail(c, "blocksize %lld is too large", (long long)b);
  if (!strcmp(c->node->op_type, "DepthToSpace")) {
    if (dims[1] % bb) return mb_op_fail(c, "channels %lld not divisible by blocksize^2", (long long)dims[1]);
    dims[1] /= bb;
    if (!mb_mul_i64(dims[2], b, &dims[2]) || !mb_mul_i64(dims[3], b, &dims[3]))
      return mb_op_fail(c, "output size overflows");
  } else {
    if (dims[2] % b || dims[3] % b) return mb_op_fail(c, "spatial dims not divisible by blocksize");
    if (!mb_mul_i64(dims[1], bb, &dims[1])) return mb_op_fail(c, "output size overflows");
    dims[2] /= b;
    dims[3] /= b;
  }
  return mb_op_set(c, 0, x->dtype, 4, dims);
}

static int one_hot(mb_op_ctx *c) {
  const mb_tinfo *idx, *vals;
  int rc;
  if ((rc = mb_op_input(c, 0, &idx)) || (rc = mb_op_input(c, 2, &vals))) return rc;
  int64_t n;
  const double *depth = mb_op_fvalues(c, 1, &n);
  if (!depth || n != 1) return mb_op_fail(c, "depth is not known statically");
  int32_t r = idx->rank + 1, axis;
  if ((rc = mb_op_axis(c, mb_op_attr_i(c, "axis", -1), r, &axis))) return rc;
  int64_t dims[MB_MAX_RANK];
  int64_t dd;
  if (!mb_floor_dim(depth[0], &dd)) return mb_op_fail(c, "depth %g is not a valid size", depth[0]);
  for (int32_t k = 0, j = 0; k < r; k++) dims[k] = k == axis ? dd : idx->dims[j++];
  return mb_op_set(c, 0, vals->dtype, r, dims);
}

static int gather_elements(mb_op_ctx *c) {
  const mb_tinfo *x, *idx;
  int rc;
  if ((rc = mb_op_input(c, 0, &x)) || (rc = mb_op_input(c, 1, &idx))) return rc;
  return mb_op_set(c, 0, x->dtype, idx->rank, idx->dims);
}

static int gather_nd(mb_op_ctx *c) {
  const mb_tinfo *x, *idx;
  int rc;
  if ((rc = mb_op_input(c, 0, &x)) || (rc = mb_op_input(c, 1, &idx))) return rc;
  int64_t bd = mb_op_attr_i(c, "batch_dims", 0);
  if (idx->rank < 1) return mb_op_fail(c, "indices must have rank >= 1");
  int64_t last = idx->dims[idx->rank - 1];
  if (last > x->rank - bd || bd < 0) return mb_op_fail(c, "indices address too many axes");
  int64_t dims[MB_MAX_RANK];
  int32_t r = 0;
  for (int32_t k = 0; k < idx->rank - 1; k++) dims[r++] = idx->dims[k];
  for (int64_t k = bd + last; k < x->rank; k++) dims[r++] = x->dims[k];
  return mb_op_set(c, 0, x->dtype, r, dims);
}

static int top_k(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  int64_t kv, n;
  if (c->opset < 10) kv = mb_op_attr_i(c, "k", -1);
  else {
    const int64_t *k = mb_op_ivalues(c, 1, &n);
    if (!k || n != 1) return mb_op_fail(c, "k is not known statically");
    kv = k[0];
  }
  int32_t axis;
  if ((rc = mb_op_axis(c, mb_op_attr_i(c, "axis", -1), x->rank, &axis))) return rc;
  if (kv < 0 || kv > x->dims[axis]) return mb_op_fail(c, "k = %lld is out of range", (long long)kv);
  int64_t dims[MB_MAX_RANK];
  memcpy(dims, x->dims, (size_t)x->rank * sizeof *dims);
  dims[axis] = kv;
  if ((rc = mb_op_set(c, 0, x->dtype, x->rank, dims))) return rc;
  return mb_op_set(c, 1, MB_DTYPE_INT64, x->rank, dims);
}

/* Einsum: explicit ("ij,jk->ik") or implicit output; "..." broadcasts. */
static int einsum(mb_op_ctx *c) {
  const char *equation = mb_op_attr_s(c, "equation", NULL);
  if (!equation) return mb_op_fail(c, "missing equation");
  int64_t size[128];
  for (int k = 0; k < 128; k++) size[k] = -1;
  int count[128] = {0};
  const char *p = equation;
  int32_t in = 0, ell_rank = 0;
  int64_t ell[MB_MAX_RANK];
  mb_tinfo ellt = {.dims = ell};
  while (*p && !(p[0] == '-' && p[1] == '>')) {
    if (in >= c->n_in || !c->in[in]) return mb_op_fail(c, "equation names more inputs than given");
    const mb_tinfo *x = c->in[in];
    int32_t letters = 0;
    bool has_ell = false;
    for (const char *q = p; *q && *q != ',' && *q != '-'; q++) {
      if (*q == '.') { has_ell = true; q += 2; }
      else if (*q != ' ') letters++;
    }
    int32_t er = has_ell ? x->rank - letters : 0, axis = 0;
    if (er < 0 || (!has_ell && letters != x->rank))
      return mb_op_fail(c, "equation term %d does not match input rank %d", (int)in, (int)x->rank);
    for (; *p && *p != ',' && !(p[0] == '-' && p[1] == '>'); p++) {
      if (*p == ' ') continue;
      if (*p == '.') {
        mb_tinfo part = {.rank = er, .dims = x->dims + axis};
        int32_t r;
        int64_t out[MB_MAX_RANK];
        int rc = mb_op_broadcast(c, &ellt, &part, &r, out);
        if (rc) return rc;
        memcpy(ell, out, (size_t)r * sizeof *ell);
        ell_rank = ellt.rank = r;
        axis += er;
        p += 2;
        continue;
      }
      unsigned char ch = (unsigned char)*p;
      if (ch >= 128) return mb_op_fail(c, "bad equation character");
      int64_t d = x->dims[axis++];
      if (size[ch] >= 0 && size[ch] != d && size[ch] != 1 && d != 1)
        return mb_op_fail(c, "label '%c' has sizes %lld and %lld", ch, (long long)size[ch], (long long)d);
      if (size[ch] < 0 || size[ch] == 1) size[ch] = d;
      count[ch]++;
    }
    if (*p == ',') p++;
    in++;
  }
  int64_t dims[MB_MAX_RANK];
  int32_t r = 0;
  if (p[0] == '-') {
    for (p += 2; *p; p++) {
      if (*p == ' ') continue;
      if (*p == '.') { for (int32_t k = 0; k < ell_rank; k++) dims[r++] = ell[k]; p += 2; continue; }
      unsigned char ch = (unsigned char)*p;
      if (ch >= 128 || size[ch] < 0) return mb_op_fail(c, "output label '%c' is not in any input", *p);
      if (r >= MB_MAX_RANK) return mb_op_fail(c, "rank too large");
      dims[r++] = size[ch];
    }
  } else { /* implicit: ellipsis dims, then labels seen once, alphabetically */
    for (int32_t k = 0; k < ell_rank; k++) dims[r++] = ell[k];
    for (int ch = 0; ch < 128; ch++)
      if (count[ch] == 1 && r < MB_MAX_RANK) dims[r++] = size[ch];
  }
  return mb_op_set(c, 0, c->in[0]->dtype, r, dims);
}

/* Same shape as input 0, dtype from the "dtype" attribute when given. */
static int like_input_dtype(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  return rc ? rc : mb_op_set(c, 0, (int32_t)mb_op_attr_i(c, "dtype", x->dtype), x->rank, x->dims);
}

static int grid_sample(mb_op_ctx *c) { /* X [N, C, D1..Dr], grid [N, O1..Or, r] */
  const mb_tinfo *x, *grid;
  int rc;
  if ((rc = mb_op_input(c, 0, &x)) || (rc = mb_op_input(c, 1, &grid))) return rc;
  if (x->rank < 3 || grid->rank != x->rank || grid->dims[grid->rank - 1] != x->rank - 2)
    return mb_op_fail(c, "grid does not match the input's spatial rank");
  int64_t dims[MB_MAX_RANK] = {x->dims[0], x->dims[1]};
  for (int32_t k = 1; k < grid->rank - 1; k++) dims[k + 1] = grid->dims[k];
  return mb_op_set(c, 0, x->dtype, x->rank, dims);
}

static int det(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  if (x->rank < 2 || x->dims[x->rank - 1] != x->dims[x->rank - 2])
    return mb_op_fail(c, "needs square matrices in the last two axes");
  return mb_op_set(c, 0, x->dtype, x->rank - 2, x->dims);
}

static int roi_align(mb_op_ctx *c) { /* X [N, C, H, W], rois [R, 4] -> [R, C, oh, ow] */
  const mb_tinfo *x, *rois;
  int rc;
  if ((rc = mb_op_input(c, 0, &x)) || (rc = mb_op_input(c, 1, &rois))) return rc;
  if (x->rank != 4 || rois->rank != 2) return mb_op_fail(c, "needs X of rank 4 and rois of rank 2");
  int64_t dims[4] = {rois->dims[0], x->dims[1], mb_op_attr_i(c, "output_height", 1),
                     mb_op_attr_i(c, "output_width", 1)};
  return mb_op_set(c, 0, x->dtype, 4, dims);
}

static int max_unpool(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  int64_t n;
  const int64_t *shape = c->n_in > 2 && c->in[2] ? mb_op_ivalues(c, 2, &n) : NULL;
  if (c->n_in > 2 && c->in[2]) {
    if (!shape || n != x->rank) return mb_op_fail(c, "output_shape is not known statically");
    return mb_op_set(c, 0, x->dtype, x->rank, shape);
  }
  const int64_t *ks, *st, *pads;
  uint64_t nk = mb_op_attr_ints(c, "kernel_shape", &ks), ns = mb_op_attr_ints(c, "strides", &st);
  uint64_t np = mb_op_attr_ints(c, "pads", &pads);
  int32_t nsp = x->rank - 2;
  if (nsp < 1 || nk != (uint64_t)nsp) return mb_op_fail(c, "kernel_shape does not match the input");
  int64_t dims[MB_MAX_RANK] = {x->dims[0], x->dims[1]};
  for (int32_t i = 0; i < nsp; i++) {
    int64_t v;
    if (!mb_mul_i64(x->dims[2 + i] - 1, ns ? st[i] : 1, &v) || !mb_add_i64(v, ks[i], &v) ||
        (np && (!mb_add_i64(v, -pads[i], &v) || !mb_add_i64(v, -pads[i + nsp], &v))) || v < 0)
      return mb_op_fail(c, "output size on spatial axis %d is invalid", (int)i);
    dims[2 + i] = v;
  }
  return mb_op_set(c, 0, x->dtype, x->rank, dims);
}

/* Output sizes that depend on values: known when the values are (bound test inputs,
 * constants); otherwise bounded by the user (mb_op_bound) or, for a bool mask, by its size
 * (mb_op_mask_bound, named in the output); never guessed. */
static int data_dependent(mb_op_ctx *c) { return mb_op_data_dependent(c, "a data-dependent output shape"); }
static bool user_bound(const mb_op_ctx *c, int64_t *n) { return mb_op_bound(c, n); }

static int compress(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  int64_t n;
  const int64_t *cond = mb_op_ivalues(c, 1, &n);
  int64_t bound;
  const mb_attr *axis_attr = mb_op_attr_typed(c, "axis", MB_ATTR_INT);
  int64_t limit = axis_attr ? 0 : (int64_t)mb_tinfo_numel(x), count = 0;
  int32_t axis = 0;
  if (axis_attr && (rc = mb_op_axis(c, axis_attr->i, x->rank, &axis))) return rc;
  if (axis_attr) limit = x->dims[axis];
  if (!cond && !user_bound(c, &bound) && !mb_op_mask_bound(c, c->n_in > 1 ? c->in[1] : NULL, limit, &bound))
    return c->d->status ? c->d->status : data_dependent(c);
  if (cond) for (int64_t k = 0; k < n && k < limit; k++) count += cond[k] != 0;
  else count = bound;
  if (!axis_attr) return mb_op_set(c, 0, x->dtype, 1, &count);
  int64_t dims[MB_MAX_RANK];
  memcpy(dims, x->dims, (size_t)x->rank * sizeof *dims);
  dims[axis] = count;
  return mb_op_set(c, 0, x->dtype, x->rank, dims);
}

static int non_zero(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  int64_t count = 0;
  if (!x->val && !user_bound(c, &count) && !mb_op_mask_bound(c, x, -1, &count))
    return c->d->status ? c->d->status : data_dependent(c);
  for (int64_t k = 0; x->val && k < x->val->count; k++)
    count += x->val->is_float ? x->val->f[k] != 0 : x->val->i[k] != 0;
  int64_t dims[2] = {x->rank, count};
  return mb_op_set(c, 0, MB_DTYPE_INT64, 2, dims);
}

/* NonMaxSuppression -> [selected, 3] int64: selected is only bounded by the user. */
static int non_max_suppression(mb_op_ctx *c) {
  int64_t dims[2] = {0, 3};
  if (!user_bound(c, &dims[0])) return data_dependent(c);
  return mb_op_set(c, 0, MB_DTYPE_INT64, 2, dims);
}

/* Unique -> Y, indices, inverse_indices, counts; the number of unique entries (or slices
 * along axis) is only bounded by the user. */
static int unique(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  int64_t count;
  if (!user_bound(c, &count)) return data_dependent(c);
  const mb_attr *axis_attr = mb_op_attr_typed(c, "axis", MB_ATTR_INT);
  int64_t inverse = (int64_t)mb_tinfo_numel(x);
  if (axis_attr) {
    int32_t axis;
    if ((rc = mb_op_axis(c, axis_attr->i, x->rank, &axis))) return rc;
    int64_t dims[MB_MAX_RANK];
    memcpy(dims, x->dims, (size_t)x->rank * sizeof *dims);
    dims[axis] = count;
    inverse = x->dims[axis];
    rc = mb_op_set(c, 0, x->dtype, x->rank, dims);
  } else {
    rc = mb_op_set(c, 0, x->dtype, 1, &count);
  }
  if (rc || (rc = mb_op_set(c, 1, MB_DTYPE_INT64, 1, &count))) return rc;
  if ((rc = mb_op_set(c, 2, MB_DTYPE_INT64, 1, &inverse))) return rc;
  return mb_op_set(c, 3, MB_DTYPE_INT64, 1, &count);
}

const mb_op_def mb_ops_layout[] = {
  {"", "Resize", 10, 2, 2, 1, resize, MB_G_RESIZE},
  {"", "Resize", 11, 3, 4, 1, resize, MB_G_RESIZE},
  {"", "Resize", 13, 1, 4, 1, resize, MB_G_RESIZE},
  {"", "Upsample", 7, 1, 1, 1, resize, MB_G_RESIZE},
  {"", "Upsample", 9, 2, 2, 1, resize, MB_G_RESIZE},
  {"", "Pad", 1, 1, 1, 1, pad, MB_G_PAD},
  {"", "Pad", 11, 2, 3, 1, pad, MB_G_PAD},
  {"", "Pad", 18, 2, 4, 1, pad, MB_G_PAD},
  {"", "Tile", 6, 2, 2, 1, tile, MB_G_NOTHING},
  {"", "DepthToSpace", 1, 1, 1, 1, depth_space, MB_G_NOTHING},
  {"", "SpaceToDepth", 1, 1, 1, 1, depth_space, MB_G_NOTHING},
  {"", "Trilu", 14, 1, 2, 1, like_input, MB_G_NOTHING},
  {"", "CumSum", 11, 2, 2, 1, like_input, MB_G_CUMSUM},
  {"", "OneHot", 9, 3, 3, 1, one_hot, MB_G_NONDIFF},
  {"", "GatherElements", 11, 2, 2, 1, gather_elements, MB_G_GATHER_ELEMENTS},
  {"", "GatherND", 11, 2, 2, 1, gather_nd, MB_G_INDEX1},
  /* the reduction says which scatter PyTorch ran (plan.c: refine_rule) */
  {"", "ScatterElements", 11, 3, 3, 1, scatter, MB_G_SCATTER},
  {"", "ScatterND", 11, 3, 3, 1, scatter, MB_G_INDEX1},
  {"", "Scatter", 9, 3, 3, 1, like_input, MB_G_INDEX1},
  {"", "TopK", 1, 1, 1, 2, top_k, MB_G_TOPK},
  {"", "TopK", 10, 2, 2, 2, top_k, MB_G_TOPK},
  {"", "Einsum", 12, 1, MB_OP_ANY, 1, einsum, MB_G_EINSUM},
  {"", "GroupNormalization", 18, 3, 3, 1, group_norm, MB_G_GROUPNORM},
  {"", "MeanVarianceNormalization", 9, 1, 1, 1, like_input, MB_G_SAVE_X},
  {"", "ReverseSequence", 10, 2, 2, 1, like_input, MB_G_NOTHING},
  {"", "EyeLike", 9, 1, 1, 1, like_input_dtype, MB_G_NONDIFF},
  {"", "Bernoulli", 15, 1, 1, 1, like_input_dtype, MB_G_NONDIFF},
  {"", "RandomUniformLike", 1, 1, 1, 1, like_input_dtype, MB_G_NONDIFF},
  {"", "RandomNormalLike", 1, 1, 1, 1, like_input_dtype, MB_G_NONDIFF},
  {"", "GridSample", 16, 2, 2, 1, grid_sample, MB_G_DEFAULT},
  {"", "Det", 11, 1, 1, 1, det, MB_G_SAVE_XY},
  {"", "RoiAlign", 10, 3, 3, 1, roi_align, MB_G_INDEX1},
  {"", "MaxUnpool", 9, 2, 3, 1, max_unpool, MB_G_INDEX1},
  {"", "Compress", 9, 2, 2, 1, compress, MB_G_INDEX1},
  {"", "NonZero", 9, 1, 1, 1, non_zero, MB_G_NONDIFF},
  {"", "NonMaxSuppression", 10, 2, 5, 1, non_max_suppression, MB_G_NONDIFF},
  {"", "Unique", 11, 1, 1, 4, unique, MB_G_NONDIFF},
};
const size_t mb_ops_layout_count = sizeof mb_ops_layout / sizeof mb_ops_layout[0];
