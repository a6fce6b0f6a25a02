/* Elementwise ops: unary (same shape and type), broadcasting binary and variadic arithmetic,
 * comparisons and logic (bool out), Where, Cast, Clip, Dropout. Arithmetic on known small
 * values (integer, and float where exporters compute sizes in float) is propagated so that
 * exported shape computations resolve. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/dtype.h"
#include "ops/op.h"

/* ONNX Round: halves go to the even neighbour, whatever the FPU's rounding mode. */
static double round_half_even(double v) {
  double f = floor(v), d = v - f;
  return (d > 0.5 || (d == 0.5 && fmod(f, 2) != 0)) ? f + 1 : f;
}

/* Float values through the unary ops that exported size arithmetic uses: timm's "same"
 * padding computes ceil(size / stride) in float (Cast, Div, Ceil, ...). */
static int unary_float_values(mb_op_ctx *c, const mb_small_values *x) {
  const char *op = c->node->op_type;
  int kind = !strcmp(op, "Identity") ? 1 : !strcmp(op, "Neg") ? 2 : !strcmp(op, "Abs") ? 3
           : !strcmp(op, "Ceil") ? 4 : !strcmp(op, "Floor") ? 5 : !strcmp(op, "Round") ? 6 : 0;
  if (!kind) return MB_OK;
  double *o = mb_op_new_fvalues(c, 0, x->count);
  if (!o) return c->d->status;
  for (int64_t k = 0; k < x->count; k++) {
    double v = x->f[k];
    o[k] = kind == 1 ? v : kind == 2 ? -v : kind == 3 ? fabs(v) : kind == 4 ? ceil(v)
         : kind == 5 ? floor(v) : round_half_even(v);
  }
  return MB_OK;
}

static int unary(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  rc = mb_op_set(c, 0, x->dtype, x->rank, x->dims);
  if (rc) return rc;
  if (x->val && x->val->is_float) return unary_float_values(c, x->val);
  int64_t n;
  const int64_t *v = mb_op_ivalues(c, 0, &n);
  const char *op = c->node->op_type;
  if (v && (!strcmp(op, "Identity") || !strcmp(op, "Neg") || !strcmp(op, "Abs"))) {
    int64_t *o = mb_op_new_ivalues(c, 0, n);
    if (!o) return c->d->status;
    for (int64_t k = 0; k < n; k++) /* wraps like the integer kernels do, without UB */
      o[k] = op[0] == 'I' ? v[k] : (op[0] == 'N' || v[k] < 0) ? (int64_t)(0 - (uint64_t)v[k]) : v[k];
  }
  return rc;
}

typedef int64_t (*int_binop)(int64_t a, int64_t b, bool *ok);
static int64_t op_add(int64_t a, int64_t b, bool *ok) { (void)ok; return (int64_t)((uint64_t)a + (uint64_t)b); }
static int64_t op_sub(int64_t a, int64_t b, bool *ok) { (void)ok; return (int64_t)((uint64_t)a - (uint64_t)b); }
static int64_t op_mul(int64_t a, int64_t b, bool *ok) { (void)ok; return (int64_t)((uint64_t)a * (uint64_t)b); }
static int64_t op_div(int64_t a, int64_t b, bool *ok) {
  if (b == 0 || (a == INT64_MIN && b == -1)) { *ok = false; return 0; }
  return a / b;
}
static int64_t op_mod(int64_t a, int64_t b, bool *ok) {
  if (b == 0 || (a == INT64_MIN && b == -1)) { *ok = false; return 0; }
  int64_t m = a % b;
  return (m != 0 && ((m < 0) != (b < 0))) ? m + b : m; /* fmod=0: sign of the divisor */
}
static int64_t op_fmod(int64_t a, int64_t b, bool *ok) {
  if (b == 0) { *ok = false; return 0; }
  return b == -1 ? 0 : a % b; /* fmod=1: C's remainder, the sign of the dividend */
}
static int64_t op_min(int64_t a, int64_t b, bool *ok) { (void)ok; return a < b ? a : b; }
static int64_t op_max(int64_t a, int64_t b, bool *ok) { (void)ok; return a > b ? a : b; }
static int64_t op_eq(int64_t a, int64_t b, bool *ok) { (void)ok; return a == b; }
static int64_t op_lt(int64_t a, int64_t b, bool *ok) { (void)ok; return a < b; }
static int64_t op_gt(int64_t a, int64_t b, bool *ok) { (void)ok; return a > b; }
static int64_t op_le(int64_t a, int64_t b, bool *ok) { (void)ok; return a <= b; }
static int64_t op_ge(int64_t a, int64_t b, bool *ok) { (void)ok; return a >= b; }
static int64_t op_and(int64_t a, int64_t b, bool *ok) { (void)ok; return a && b; }
static int64_t op_or(int64_t a, int64_t b, bool *ok) { (void)ok; return a || b; }
static int64_t op_xor(int64_t a, int64_t b, bool *ok) { (void)ok; return !a != !b; }

typedef struct binop_rule {
  const char *op;
  int_binop fn;
  bool bool_out;
} binop_rule;

static const binop_rule binops[] = {
  {"Add", op_add, false}, {"Sub", op_sub, false}, {"Mul", op_mul, false},
  {"Div", op_div, false}, {"Mod", op_mod, false}, {"Min", op_min, false},
  {"Max", op_max, false}, {"Sum", op_add, false}, {"Pow", NULL, false},
  {"Mean", NULL, false}, {"BitShift", NULL, false},
  {"BitwiseAnd", NULL, false}, {"BitwiseOr", NULL, false}, {"BitwiseXor", NULL, false},
  {"Equal", op_eq, true}, {"Less", op_lt, true}, {"Greater", op_gt, true},
  {"LessOrEqual", op_le, true}, {"GreaterOrEqual", op_ge, true},
  {"And", op_and, true}, {"Or", op_or, true}, {"Xor", op_xor, true},
};

static const binop_rule *find_binop(const char *op) {
  for (size_t i = 0; i < sizeof binops / sizeof binops[0]; i++)
    if (!strcmp(binops[i].op, op)) return &binops[i];
  return NULL;
}

/* Floating arithmetic on known values (window lengths, Resize scales computed in float). */
static int fold_float(mb_op_ctx *c, int32_t r, const int64_t *dims, uint64_t n) {
  const char *op = c->node->op_type;
  int kind = !strcmp(op, "Add") ? 1 : !strcmp(op, "Sub") ? 2 : !strcmp(op, "Mul") ? 3
           : !strcmp(op, "Div") ? 4 : !strcmp(op, "Min") ? 5 : !strcmp(op, "Max") ? 6 : 0;
  /* floating Mod must have fmod=1 (C's fmod); fmod=0 is not defined for floats */
  if (!strcmp(op, "Mod") && mb_op_attr_i(c, "fmod", 0)) kind = 7;
  if (!kind || mb_dtype_class_of(c->out[0]->dtype) != MB_DCLASS_FLOAT) return MB_OK;
  int64_t na, nb;
  const double *a = mb_op_fvalues(c, 0, &na), *b = mb_op_fvalues(c, 1, &nb);
  if (!a || !b) return mb_fail(c->d, MB_E_NOMEM, "out of memory");
  double *o = mb_op_new_fvalues(c, 0, (int64_t)n);
  if (!o) return c->d->status;
  for (uint64_t k = 0; k < n; k++) {
    double x = a[mb_op_bcast_index(c->in[0], r, dims, (int64_t)k)];
    double y = b[mb_op_bcast_index(c->in[1], r, dims, (int64_t)k)];
    o[k] = kind == 1 ? x + y : kind == 2 ? x - y : kind == 3 ? x * y : kind == 4 ? x / y
         : kind == 5 ? (x < y ? x : y) : kind == 6 ? (x > y ? x : y) : fmod(x, y);
  }
  return MB_OK;
}

/* Broadcast all inputs (variadic Sum/Min/Max/Mean included); fold known values. */
static int broadcast_op(mb_op_ctx *c) {
  const binop_rule *rule = find_binop(c->node->op_type);
  const mb_tinfo *first;
  int rc = mb_op_input(c, 0, &first);
  if (rc) return rc;
  mb_tinfo acc = *first;
  int64_t dims[MB_MAX_RANK];
  memcpy(dims, first->dims, (size_t)first->rank * sizeof *dims);
  acc.dims = dims;
  for (int32_t i = 1; i < c->n_in; i++) {
    const mb_tinfo *x;
    if ((rc = mb_op_input(c, i, &x))) return rc;
    int32_t r;
    int64_t out[MB_MAX_RANK];
    if ((rc = mb_op_broadcast(c, &acc, x, &r, out))) return rc;
    memcpy(dims, out, (size_t)r * sizeof *dims);
    acc.rank = r;
  }
  int32_t dtype = rule && rule->bool_out ? MB_DTYPE_BOOL : first->dtype;
  if ((rc = mb_op_set(c, 0, dtype, acc.rank, dims))) return rc;
  /* value folding for two known inputs */
  if (!rule || c->n_in != 2 || !c->out[0] || !c->in[0]->val || !c->in[1]->val) return MB_OK;
  uint64_t n = mb_tinfo_numel(c->out[0]);
  if (n > MB_SMALL_VALUE_MAX) return MB_OK;
  if (c->in[0]->val->is_float || c->in[1]->val->is_float) return fold_float(c, acc.rank, dims, n);
  if (!rule->fn) return MB_OK;
  int_binop fn = rule->fn;
  if (fn == op_mod && mb_op_attr_i(c, "fmod", 0)) fn = op_fmod; /* Mod's two remainders */
  int64_t na, nb;
  const int64_t *a = mb_op_ivalues(c, 0, &na), *b = mb_op_ivalues(c, 1, &nb);
  int64_t *o = mb_op_new_ivalues(c, 0, (int64_t)n);
  if (!o) return c->d->status;
  bool ok = true;
  for (uint64_t k = 0; k < n && ok; k++)
    o[k] = fn(a[mb_op_bcast_index(c->in[0], acc.rank, dims, (int64_t)k)],
                    b[mb_op_bcast_index(c->in[1], acc.rank, dims, (int64_t)k)], &ok);
  if (!ok) c->out[0]->val = NULL; /* division by zero: the values are not known */
  return MB_OK;
}

static int where_op(mb_op_ctx *c) {
  const mb_tinfo *cond, *x, *y;
  int rc;
  if ((rc = mb_op_input(c, 0, &cond)) || (rc = mb_op_input(c, 1, &x)) || (rc = mb_op_input(c, 2, &y)))
    return rc;
  int32_t r1, r2;
  int64_t d1[MB_MAX_RANK], d2[MB_MAX_RANK];
  if ((rc = mb_op_broadcast(c, cond, x, &r1, d1))) return rc;
  mb_tinfo tmp = {.rank = r1, .dims = d1};
  if ((rc = mb_op_broadcast(c, &tmp, y, &r2, d2))) return rc;
  if ((rc = mb_op_set(c, 0, x->dtype, r2, d2))) return rc;
  int64_t nc, nx, ny;
  const int64_t *vc = mb_op_ivalues(c, 0, &nc), *vx = mb_op_ivalues(c, 1, &nx),
                *vy = mb_op_ivalues(c, 2, &ny);
  uint64_t n = mb_tinfo_numel(c->out[0]);
  if (!vc || !vx || !vy || n > MB_SMALL_VALUE_MAX) return MB_OK;
  int64_t *o = mb_op_new_ivalues(c, 0, (int64_t)n);
  if (!o) return c->d->status;
  for (uint64_t k = 0; k < n; k++)
    o[k] = vc[mb_op_bcast_index(cond, r2, d2, (int64_t)k)] ? vx[mb_op_bcast_index(x, r2, d2, (int64_t)k)]
                                                    : vy[mb_op_bcast_index(y, r2, d2, (int64_t)k)];
  return MB_OK;
}

/* Clip's bound i (1: min, 2: max) as a double. Absent: *v is left as the caller's default
 * (opset 11+ inputs, each optional; attributes before). False when given but unknown. */
static bool clip_bound(mb_op_ctx *c, int32_t i, double *v) {
  if (c->opset < 11) {
    const mb_attr *a = mb_op_attr_typed(c, i == 1 ? "min" : "max", MB_ATTR_FLOAT);
    if (a) *v = a->f;
    return true;
  }
  if (i >= c->n_in || !c->in[i]) return true;
  int64_t n;
  const double *f = mb_op_fvalues(c, i, &n);
  if (!f || n != 1) return false;
  *v = f[0];
  return true;
}

/* Clip: min(max(x, min), max), so max wins when min > max. Values fold: timm's "same" padding
 * clamps its pad sizes at 0 with a Clip. Integer values stay integers (int64 bounds are exact
 * in double only up to 2^53, so integer bounds are read as integers). */
static int clip_op(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc || (rc = mb_op_set(c, 0, x->dtype, x->rank, x->dims)) || !x->val) return rc;
  if (x->val->is_float) {
    double lo = -FLT_MAX, hi = FLT_MAX; /* the opset 6 defaults: float's lowest and max */
    if (c->opset >= 11) { lo = -INFINITY; hi = INFINITY; }
    if (!clip_bound(c, 1, &lo) || !clip_bound(c, 2, &hi)) return MB_OK;
    double *o = mb_op_new_fvalues(c, 0, x->val->count);
    for (int64_t k = 0; o && k < x->val->count; k++) {
      double v = x->val->f[k];
      v = v < lo ? lo : v;
      o[k] = v > hi ? hi : v;
    }
    return c->d->status;
  }
  int64_t lo = INT64_MIN, hi = INT64_MAX, n;
  for (int32_t i = 1; i <= 2 && c->opset >= 11; i++) {
    if (i >= c->n_in || !c->in[i]) continue;
    const int64_t *b = mb_op_ivalues(c, i, &n);
    if (!b || n != 1) return MB_OK;
    *(i == 1 ? &lo : &hi) = b[0];
  }
  if (c->opset < 11) return MB_OK; /* float types only before opset 11 */
  int64_t *o = mb_op_new_ivalues(c, 0, x->val->count);
  for (int64_t k = 0; o && k < x->val->count; k++) {
    int64_t v = x->val->i[k];
    v = v < lo ? lo : v;
    o[k] = v > hi ? hi : v;
  }
  return c->d->status;
}

static int not_op(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  return rc ? rc : mb_op_set(c, 0, MB_DTYPE_BOOL, x->rank, x->dims);
}

static int cast_op(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  int32_t to;
  if (!strcmp(c->node->op_type, "CastLike")) {
    if (c->n_in < 2 || !c->in[1]) return mb_op_fail(c, "CastLike needs a target input");
    to = c->in[1]->dtype;
  } else {
    to = (int32_t)mb_op_attr_i(c, "to", 0);
  }
  if (mb_dtype_bits(to) == 0 && to != MB_DTYPE_STRING)
    return mb_op_fail(c, "cast to unknown data type %d", (int)to);
  if ((rc = mb_op_set(c, 0, to, x->rank, x->dims))) return rc;
  int64_t n;
  if (c->in[0]->val && c->in[0]->val->is_float) { /* float values: to float keeps, to int truncates */
    const double *f = mb_op_fvalues(c, 0, &n);
    if (!f) return mb_fail(c->d, MB_E_NOMEM, "out of memory");
    if (mb_dtype_is_float(to)) return mb_op_set_fvalues(c, 0, f, n);
    if (!mb_dtype_is_integer_like(to)) return MB_OK;
    int64_t *o = mb_op_new_ivalues(c, 0, n);
    if (!o) return c->d->status;
    for (int64_t k = 0; k < n; k++)
      o[k] = to == MB_DTYPE_BOOL ? f[k] != 0 : (f[k] > -9e18 && f[k] < 9e18) ? (int64_t)f[k] : 0;
    return MB_OK;
  }
  const int64_t *v = mb_op_ivalues(c, 0, &n);
  if (v && mb_dtype_is_float(to)) {
    const double *f = mb_op_fvalues(c, 0, &n);
    return f ? mb_op_set_fvalues(c, 0, f, n) : mb_fail(c->d, MB_E_NOMEM, "out of memory");
  }
  if (v && mb_dtype_is_integer_like(to)) {
    int64_t *o = mb_op_new_ivalues(c, 0, n);
    if (!o) return c->d->status;
    for (int64_t k = 0; k < n; k++) o[k] = to == MB_DTYPE_BOOL ? v[k] != 0 : v[k];
  }
  return rc;
}

/* PRelu: the slope broadcasts one way into X (opset 7 on); before, it is one value or one per
 * channel. A zero-size slope where X has elements is refused either way. */
static int prelu(mb_op_ctx *c) {
  const mb_tinfo *x, *slope;
  int rc;
  if ((rc = mb_op_input(c, 0, &x)) || (rc = mb_op_input(c, 1, &slope))) return rc;
  if (c->opset >= 7) {
    if ((rc = mb_op_unidirectional(c, 1, x->rank, x->dims, "the slope"))) return rc;
  } else {
    uint64_t n = mb_tinfo_numel(slope);
    if (n != 1 && !(x->rank > 1 && n == (uint64_t)x->dims[1])) {
      char ss[300], sx[300];
      return mb_op_fail(c, "the slope %s is neither one value nor one per channel of %s",
                        mb_op_input_str(c, 1, ss, sizeof ss), mb_op_input_str(c, 0, sx, sizeof sx));
    }
  }
  return unary(c);
}

static int dropout_op(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  if ((rc = mb_op_set(c, 0, x->dtype, x->rank, x->dims))) return rc;
  return mb_op_set(c, 1, MB_DTYPE_BOOL, x->rank, x->dims); /* the mask */
}

#define UNARY(name, grad) {"", name, 1, 1, 1, 1, unary, grad}
const mb_op_def mb_ops_elementwise[] = {
  UNARY("Abs", MB_G_SAVE_X), UNARY("Acos", MB_G_SAVE_X_FP32), UNARY("Acosh", MB_G_SAVE_X), UNARY("Asin", MB_G_SAVE_X_FP32), UNARY("Asinh", MB_G_SAVE_X), UNARY("Atan", MB_G_SAVE_X),
  UNARY("Atanh", MB_G_SAVE_X), UNARY("Ceil", MB_G_NOTHING), UNARY("Celu", MB_G_SAVE_X), {"", "Clip", 1, 1, 1, 1, clip_op, MB_G_SAVE_X}, {"", "Clip", 11, 1, 3, 1, clip_op, MB_G_SAVE_X}, UNARY("Cos", MB_G_SAVE_X), UNARY("Cosh", MB_G_SAVE_X_FP32),
  UNARY("Elu", MB_G_SAVE_X), UNARY("Erf", MB_G_ERF), UNARY("Exp", MB_G_SAVE_Y_FP32), UNARY("Floor", MB_G_NOTHING), UNARY("Gelu", MB_G_SAVE_X), UNARY("HardSigmoid", MB_G_SAVE_X),
  UNARY("HardSwish", MB_G_SAVE_X), UNARY("Identity", MB_G_IDENTITY), UNARY("LeakyRelu", MB_G_SAVE_X), UNARY("Log", MB_G_SAVE_X_FP32), UNARY("Mish", MB_G_SAVE_X),
  UNARY("Neg", MB_G_NOTHING), UNARY("Reciprocal", MB_G_RECIPROCAL), UNARY("Relu", MB_G_SAVE_Y), UNARY("Round", MB_G_NOTHING), UNARY("Selu", MB_G_SAVE_X),
  UNARY("Shrink", MB_G_SAVE_X), UNARY("Sigmoid", MB_G_SAVE_Y), UNARY("Sign", MB_G_NOTHING), UNARY("Sin", MB_G_SAVE_X), UNARY("Sinh", MB_G_SAVE_X_FP32),
  UNARY("Softplus", MB_G_SAVE_X_FP32), UNARY("Softsign", MB_G_SAVE_X), UNARY("Sqrt", MB_G_SQRT), UNARY("Tan", MB_G_SAVE_Y_FP32), UNARY("Tanh", MB_G_SAVE_Y),
  UNARY("ThresholdedRelu", MB_G_SAVE_X), UNARY("BitwiseNot", MB_G_NONDIFF),
  {"", "Not", 1, 1, 1, 1, not_op, MB_G_NONDIFF}, {"", "IsNaN", 9, 1, 1, 1, not_op, MB_G_NONDIFF}, {"", "IsInf", 10, 1, 1, 1, not_op, MB_G_NONDIFF},
  {"", "Add", 1, 2, 2, 1, broadcast_op, MB_G_ADD}, {"", "Sub", 1, 2, 2, 1, broadcast_op, MB_G_SUB},
  {"", "Mul", 1, 2, 2, 1, broadcast_op, MB_G_MUL}, {"", "Div", 1, 2, 2, 1, broadcast_op, MB_G_DIV},
  {"", "Mod", 10, 2, 2, 1, broadcast_op, MB_G_NOTHING}, {"", "Pow", 1, 2, 2, 1, broadcast_op, MB_G_POW},
  {"", "PRelu", 1, 2, 2, 1, prelu, MB_G_PRELU},
  {"", "BitShift", 11, 2, 2, 1, broadcast_op, MB_G_NONDIFF},
  {"", "BitwiseAnd", 18, 2, 2, 1, broadcast_op, MB_G_NONDIFF}, {"", "BitwiseOr", 18, 2, 2, 1, broadcast_op, MB_G_NONDIFF},
  {"", "BitwiseXor", 18, 2, 2, 1, broadcast_op, MB_G_NONDIFF},
  {"", "Min", 1, 1, MB_OP_ANY, 1, broadcast_op, MB_G_MINMAX}, {"", "Max", 1, 1, MB_OP_ANY, 1, broadcast_op, MB_G_MINMAX},
  {"", "Sum", 1, 1, MB_OP_ANY, 1, broadcast_op, MB_G_ADD}, {"", "Mean", 1, 1, MB_OP_ANY, 1, broadcast_op, MB_G_NOTHING},
  {"", "Equal", 1, 2, 2, 1, broadcast_op, MB_G_NONDIFF}, {"", "Less", 1, 2, 2, 1, broadcast_op, MB_G_NONDIFF},
  {"", "Greater", 1, 2, 2, 1, broadcast_op, MB_G_NONDIFF}, {"", "LessOrEqual", 12, 2, 2, 1, broadcast_op, MB_G_NONDIFF},
  {"", "GreaterOrEqual", 12, 2, 2, 1, broadcast_op, MB_G_NONDIFF}, {"", "And", 1, 2, 2, 1, broadcast_op, MB_G_NONDIFF},
  {"", "Or", 1, 2, 2, 1, broadcast_op, MB_G_NONDIFF}, {"", "Xor", 1, 2, 2, 1, broadcast_op, MB_G_NONDIFF},
  {"", "Where", 9, 3, 3, 1, where_op, MB_G_WHERE},
  {"", "Cast", 1, 1, 1, 1, cast_op, MB_G_CAST}, {"", "CastLike", 15, 2, 2, 1, cast_op, MB_G_CAST},
  {"", "Dropout", 1, 1, 1, 2, dropout_op, MB_G_DROPOUT}, {"", "Dropout", 12, 1, 3, 2, dropout_op, MB_G_DROPOUT},
};
const size_t mb_ops_elementwise_count = sizeof mb_ops_elementwise / sizeof mb_ops_elementwise[0];
