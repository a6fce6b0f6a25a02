/* Quantization ops: (De)QuantizeLinear, DynamicQuantizeLinear and the integer / QLinear
 * variants of Conv and MatMul, whose shapes follow their float counterparts. */
#include "ops/op.h"

static int input_type(const mb_op_ctx *c, int32_t i, int32_t dflt) {
  return i < c->n_in && c->in[i] ? c->in[i]->dtype : dflt;
}

static int quantize(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  int32_t to = (int32_t)mb_op_attr_i(c, "output_dtype", 0);
  if (!to) to = input_type(c, 2, MB_DTYPE_UINT8);
  return mb_op_set(c, 0, to, x->rank, x->dims);
}

static int dequantize(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  return rc ? rc : mb_op_set(c, 0, input_type(c, 1, MB_DTYPE_FLOAT), x->rank, x->dims);
}

static int dynamic_quantize(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc || (rc = mb_op_set(c, 0, MB_DTYPE_UINT8, x->rank, x->dims))) return rc;
  if ((rc = mb_op_set(c, 1, MB_DTYPE_FLOAT, 0, NULL))) return rc;
  return mb_op_set(c, 2, MB_DTYPE_UINT8, 0, NULL);
}

static int conv_integer(mb_op_ctx *c) {
  const mb_tinfo *x, *w;
  int rc;
  if ((rc = mb_op_input(c, 0, &x)) || (rc = mb_op_input(c, 1, &w))) return rc;
  return mb_op_conv_shape(c, x, w, 1, MB_DTYPE_INT32);
}

static int qlinear_conv(mb_op_ctx *c) { /* x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp */
  const mb_tinfo *x, *w;
  int rc;
  if ((rc = mb_op_input(c, 0, &x)) || (rc = mb_op_input(c, 3, &w))) return rc;
  return mb_op_conv_shape(c, x, w, 3, input_type(c, 7, x->dtype));
}

static int matmul_integer(mb_op_ctx *c) {
  const mb_tinfo *a, *b;
  int rc;
  if ((rc = mb_op_input(c, 0, &a)) || (rc = mb_op_input(c, 1, &b))) return rc;
  return mb_op_matmul_shape(c, a, b, 0, 1, MB_DTYPE_INT32);
}

static int qlinear_matmul(mb_op_ctx *c) { /* a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp */
  const mb_tinfo *a, *b;
  int rc;
  if ((rc = mb_op_input(c, 0, &a)) || (rc = mb_op_input(c, 3, &b))) return rc;
  return mb_op_matmul_shape(c, a, b, 0, 3, input_type(c, 7, a->dtype));
}

const mb_op_def mb_ops_quant[] = {
  {"", "QuantizeLinear", 10, 2, 3, 1, quantize, MB_G_NONDIFF},
  {"", "DequantizeLinear", 10, 2, 3, 1, dequantize, MB_G_NONDIFF},
  {"", "DynamicQuantizeLinear", 11, 1, 1, 3, dynamic_quantize, MB_G_NONDIFF},
  {"", "ConvInteger", 10, 2, 4, 1, conv_integer, MB_G_NONDIFF},
  {"", "QLinearConv", 10, 8, 9, 1, qlinear_conv, MB_G_NONDIFF},
  {"", "MatMulInteger", 10, 2, 4, 1, matmul_integer, MB_G_NONDIFF},
  {"", "QLinearMatMul", 10, 8, 8, 1, qlinear_matmul, MB_G_NONDIFF},
};
const size_t mb_ops_quant_count = sizeof mb_ops_quant / sizeof mb_ops_quant[0];
