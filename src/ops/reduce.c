/* Reductions: Reduce* (axes as an attribute before opset 18, ReduceSum before 13; an input
 * after), ArgMax/ArgMin. keepdims keeps reduced axes as 1. */
#include <string.h>

#include "graph/dtype.h"
#include "ops/op.h"

static int reduce_to(mb_op_ctx *c, const mb_tinfo *x, const int64_t *axes, int64_t n,
                     bool keep, bool noop_empty, int32_t dtype, int32_t out) {
  bool red[MB_MAX_RANK] = {false};
  if (n <= 0 && !noop_empty) for (int32_t k = 0; k < x->rank; k++) red[k] = true;
  for (int64_t k = 0; k < n; k++) {
    int32_t a;
    int rc = mb_op_axis(c, axes[k], x->rank, &a);
    if (rc) return rc;
    red[a] = true;
  }
  int64_t dims[MB_MAX_RANK];
  int32_t r = 0;
  for (int32_t k = 0; k < x->rank; k++) {
    if (!red[k]) dims[r++] = x->dims[k];
    else if (keep) dims[r++] = 1;
  }
  return mb_op_set(c, out, dtype, r, dims);
}

static int reduce(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  bool input_axes = c->opset >= 18 || (!strcmp(c->node->op_type, "ReduceSum") && c->opset >= 13);
  const int64_t *axes = NULL;
  int64_t n = 0;
  if (!input_axes) n = (int64_t)mb_op_attr_ints(c, "axes", &axes);
  else if (c->n_in > 1 && c->in[1] && !(axes = mb_op_ivalues(c, 1, &n)))
    return mb_op_fail(c, "the axes input is not known statically");
  int rc2 = reduce_to(c, x, axes, n, mb_op_attr_i(c, "keepdims", 1) != 0,
                      mb_op_attr_i(c, "noop_with_empty_axes", 0) != 0, x->dtype, 0);
  /* an integer max whose value sizes tensors (PyG's batch.max() + 1): ops/bounds.c */
  if (rc2 == MB_OK && !strcmp(c->node->op_type, "ReduceMax")) rc2 = mb_op_reduce_max_value(c, x);
  return rc2;
}

static int arg_reduce(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  int64_t axis = mb_op_attr_i(c, "axis", 0);
  return reduce_to(c, x, &axis, 1, mb_op_attr_i(c, "keepdims", 1) != 0, false, MB_DTYPE_INT64, 0);
}

/* axes an attribute up to axes_input - 1, an optional second input from then on */
#define REDUCE(name, grad, axes_input) {"", name, 1, 1, 1, 1, reduce, grad}, {"", name, axes_input, 1, 2, 1, reduce, grad}
const mb_op_def mb_ops_reduce[] = {
  REDUCE("ReduceL1", MB_G_REDUCE_X, 18), REDUCE("ReduceL2", MB_G_REDUCE_XY, 18), REDUCE("ReduceLogSum", MB_G_REDUCE_XY, 18),
  REDUCE("ReduceLogSumExp", MB_G_REDUCE_XY, 18), REDUCE("ReduceMax", MB_G_REDUCE_XY, 18), REDUCE("ReduceMean", MB_G_REDUCE_MEAN, 18),
  REDUCE("ReduceMin", MB_G_REDUCE_XY, 18), REDUCE("ReduceProd", MB_G_REDUCE_XY, 18), REDUCE("ReduceSum", MB_G_REDUCE_SUM, 13),
  REDUCE("ReduceSumSquare", MB_G_REDUCE_X, 18),
  {"", "ArgMax", 1, 1, 1, 1, arg_reduce, MB_G_NONDIFF}, {"", "ArgMin", 1, 1, 1, 1, arg_reduce, MB_G_NONDIFF},
};
const size_t mb_ops_reduce_count = sizeof mb_ops_reduce / sizeof mb_ops_reduce[0];
