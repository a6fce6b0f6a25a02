/* Losses and the preview training optimizers. A loss is a scalar unless reduction is "none",
 * when it has the target's shape. */
#include <string.h>

#include "ops/op.h"

static int loss(mb_op_ctx *c) {
  const mb_tinfo *x, *target;
  int rc;
  if ((rc = mb_op_input(c, 0, &x)) || (rc = mb_op_input(c, 1, &target))) return rc;
  static const char *const reductions[] = {"none", "sum", "mean", NULL};
  bool none = !strcmp(mb_op_attr_enum(c, "reduction", "mean", reductions), "none");
  if (none) rc = mb_op_set(c, 0, x->dtype, target->rank, target->dims);
  else rc = mb_op_set(c, 0, x->dtype, 0, NULL);
  if (rc) return rc;
  return mb_op_set(c, 1, x->dtype, x->rank, x->dims); /* SoftmaxCrossEntropyLoss log_prob */
}

/* Adagrad (R, T, X.., G.., H..) -> X'.., H'..; Momentum (R, T, X.., G.., V..) -> X'.., V'..;
 * Adam (R, T, X.., G.., V.., H..) -> X'.., V'.., H'..: output group j copies input group
 * 0 (X) for j = 0 and j + 1 otherwise (G has no output). */
static int optimizer(mb_op_ctx *c) {
  int32_t out_groups = !strcmp(c->node->op_type, "Adam") ? 3 : 2;
  int32_t n = (c->n_in - 2) / (out_groups + 1);
  if (n <= 0 || c->n_in != 2 + n * (out_groups + 1) || c->n_out > n * out_groups)
    return mb_op_fail(c, "%d inputs and %d outputs do not form tensor groups", (int)c->n_in, (int)c->n_out);
  for (int32_t k = 0; k < c->n_out; k++) {
    int32_t j = k / n, i = k % n, src = 2 + (j == 0 ? 0 : j + 1) * n + i;
    const mb_tinfo *x;
    int rc = mb_op_input(c, src, &x);
    if (rc || (rc = mb_op_set(c, k, x->dtype, x->rank, x->dims))) return rc;
  }
  return MB_OK;
}

const mb_op_def mb_ops_loss[] = {
  {"", "NegativeLogLikelihoodLoss", 12, 2, 3, 1, loss, MB_G_INDEX1},
  {"", "SoftmaxCrossEntropyLoss", 12, 2, 3, 2, loss, MB_G_CROSS_ENTROPY},
  {"ai.onnx.preview.training", "Adagrad", 1, 5, MB_OP_ANY, MB_OP_ANY, optimizer, MB_G_NONDIFF},
  {"ai.onnx.preview.training", "Momentum", 1, 5, MB_OP_ANY, MB_OP_ANY, optimizer, MB_G_NONDIFF},
  {"ai.onnx.preview.training", "Adam", 1, 6, MB_OP_ANY, MB_OP_ANY, optimizer, MB_G_NONDIFF},
};
const size_t mb_ops_loss_count = sizeof mb_ops_loss / sizeof mb_ops_loss[0];
