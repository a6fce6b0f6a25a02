/* Neural-network ops: convolution, pooling, normalisation, Gemm/MatMul, Flatten, Softmax. */
#include <stdio.h>
#include <string.h>

#include "ops/op.h"

static int same_shape(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  return rc ? rc : mb_op_set(c, 0, x->dtype, x->rank, x->dims);
}

const char *const mb_auto_pads[] = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID", NULL};

/* Spatial output sizes shared by Conv and the pools. */
static int spatial(mb_op_ctx *c, const mb_tinfo *x, const int64_t *kernel, int32_t nsp,
                   bool ceil_mode, int64_t *out) {
  const int64_t *strides, *dil, *pads;
  uint64_t ns = mb_op_attr_ints(c, "strides", &strides);
  uint64_t nd = mb_op_attr_ints(c, "dilations", &dil);
  uint64_t np = mb_op_attr_ints(c, "pads", &pads);
  if ((ns && ns != (uint64_t)nsp) || (nd && nd != (uint64_t)nsp) || (np && np != 2 * (uint64_t)nsp))
    return mb_op_fail(c, "strides/dilations/pads do not match %d spatial axes", (int)nsp);
  const char *auto_pad = mb_op_attr_enum(c, "auto_pad", "NOTSET", mb_auto_pads);
  for (int32_t i = 0; i < nsp; i++) {
    int64_t in = x->dims[2 + i], s = ns ? strides[i] : 1, d = nd ? dil[i] : 1, k = kernel[i];
    if (s <= 0 || d <= 0 || k <= 0)
      return mb_op_fail(c, "non-positive stride, dilation or kernel on spatial axis %d", (int)i);
    int64_t span, padded = in;
    if (!mb_mul_i64(d, k - 1, &span) || !mb_add_i64(span, 1, &span) ||
        (np && (!mb_add_i64(padded, pads[i], &padded) || !mb_add_i64(padded, pads[i + nsp], &padded))))
      return mb_op_fail(c, "kernel, dilation or pads overflow on spatial axis %d", (int)i);
    if (!strcmp(auto_pad, "SAME_UPPER") || !strcmp(auto_pad, "SAME_LOWER")) {
      out[i] = in / s + (in % s != 0);
    } else if (!strcmp(auto_pad, "VALID")) {
      out[i] = in >= span ? (in - span) / s + 1 : 0;
    } else {
      if (padded < span)
        return mb_op_fail(c, "kernel extent %lld exceeds the padded input %lld on spatial axis %d",
                          (long long)span, (long long)padded, (int)i);
      out[i] = (padded - span) / s + 1 + (ceil_mode && (padded - span) % s != 0);
      /* a last window that would start entirely in the end padding is dropped */
      if (ceil_mode && (out[i] - 1) * s >= in + (np ? pads[i] : 0)) out[i]--;
    }
  }
  return MB_OK;
}

/* A convolution's kernel: the weight's spatial dims (w->dims + 2), each at least 1 (a kernel
 * with no elements has no output size: ONNX's shape inference refuses it), and kernel_shape,
 * when given, the same (it "should be inferred from W"). */
static int conv_kernel(mb_op_ctx *c, const mb_tinfo *w, int32_t wi, int32_t nsp, const int64_t **kernel) {
  const int64_t *ks;
  uint64_t nk = mb_op_attr_ints(c, "kernel_shape", &ks);
  if (nk && nk != (uint64_t)nsp) return mb_op_fail(c, "kernel_shape does not match %d spatial axes", (int)nsp);
  char sw[300];
  for (int32_t i = 0; i < nsp; i++) {
    if (w->dims[2 + i] < 1)
      return mb_op_fail(c, "the weight %s has no kernel elements on spatial axis %d",
                        mb_op_input_str(c, wi, sw, sizeof sw), (int)i);
    if (nk && ks[i] != w->dims[2 + i])
      return mb_op_fail(c, "kernel_shape %lld on spatial axis %d does not match the weight %s", (long long)ks[i],
                        (int)i, mb_op_input_str(c, wi, sw, sizeof sw));
  }
  *kernel = w->dims + 2;
  return MB_OK;
}

int mb_op_conv_shape(mb_op_ctx *c, const mb_tinfo *x, const mb_tinfo *w, int32_t wi, int32_t dtype) {
  int rc;
  if (x->rank < 3 || w->rank != x->rank)
    return mb_op_fail(c, "input rank %d and weight rank %d do not make a convolution", (int)x->rank, (int)w->rank);
  int32_t nsp = x->rank - 2;
  int64_t group = mb_op_attr_i(c, "group", 1);
  int64_t in_ch;
  if (group <= 0 || !mb_mul_i64(w->dims[1], group, &in_ch) || x->dims[1] != in_ch)
    return mb_op_fail(c, "input has %lld channels but weight expects %lld x group %lld",
                      (long long)x->dims[1], (long long)w->dims[1], (long long)group);
  const int64_t *kernel;
  if ((rc = conv_kernel(c, w, wi, nsp, &kernel))) return rc;
  int64_t dims[MB_MAX_RANK];
  dims[0] = x->dims[0];
  dims[1] = w->dims[0];
  if ((rc = spatial(c, x, kernel, nsp, false, dims + 2))) return rc;
  return mb_op_set(c, 0, dtype, x->rank, dims);
}

/* Conv: the bias, when given, has one value per output channel (M, the weight's dim 0). */
static int conv(mb_op_ctx *c) {
  const mb_tinfo *x, *w;
  int rc;
  if ((rc = mb_op_input(c, 0, &x)) || (rc = mb_op_input(c, 1, &w))) return rc;
  if ((rc = mb_op_conv_shape(c, x, w, 1, x->dtype))) return rc;
  return mb_op_exact_shape(c, 2, 1, w->dims, "the bias", "one value per output channel of the weight");
}

static bool pads_bad(const int64_t *pads, int32_t i, int32_t nsp) { /* -pads must not overflow */
  return pads && (pads[i] == INT64_MIN || pads[i + nsp] == INT64_MIN);
}

static int conv_transpose(mb_op_ctx *c) {
  const mb_tinfo *x, *w;
  int rc;
  if ((rc = mb_op_input(c, 0, &x)) || (rc = mb_op_input(c, 1, &w))) return rc;
  if (x->rank < 3 || w->rank != x->rank) return mb_op_fail(c, "input/weight ranks do not match");
  int32_t nsp = x->rank - 2;
  int64_t group = mb_op_attr_i(c, "group", 1);
  int64_t dims[MB_MAX_RANK];
  dims[0] = x->dims[0];
  if (group <= 0 || !mb_mul_i64(w->dims[1], group, &dims[1]))
    return mb_op_fail(c, "group %lld is invalid for the weight", (long long)group);
  char sw[300], sx[300];
  if (x->dims[1] != w->dims[0]) /* W is (C x M/group x k...): its dim 0 is the input's channels */
    return mb_op_fail(c, "the weight %s does not take the %lld channels of %s", mb_op_input_str(c, 1, sw, sizeof sw),
                      (long long)x->dims[1], mb_op_input_str(c, 0, sx, sizeof sx));
  const int64_t *kernel;
  if ((rc = conv_kernel(c, w, 1, nsp, &kernel))) return rc;
  if ((rc = mb_op_exact_shape(c, 2, 1, dims + 1, "the bias", "one value per output channel"))) return rc;
  const int64_t *os, *strides, *dil, *pads, *opad;
  uint64_t nos = mb_op_attr_ints(c, "output_shape", &os);
  uint64_t ns = mb_op_attr_ints(c, "strides", &strides), nd = mb_op_attr_ints(c, "dilations", &dil);
  uint64_t np = mb_op_attr_ints(c, "pads", &pads), nop = mb_op_attr_ints(c, "output_padding", &opad);
  bool same = !strncmp(mb_op_attr_enum(c, "auto_pad", "NOTSET", mb_auto_pads), "SAME", 4);
  uint64_t u = (uint64_t)nsp;
  if ((ns && ns != u) || (nd && nd != u) || (np && np != 2 * u) || (nop && nop != u))
    return mb_op_fail(c, "strides/dilations/pads/output_padding do not match %d spatial axes", (int)nsp);
  for (int32_t i = 0; i < nsp; i++) {
    int64_t s = ns ? strides[i] : 1, d = nd ? dil[i] : 1, k = kernel[i];
    if (k < 1 || pads_bad(np ? pads : NULL, i, nsp))
      return mb_op_fail(c, "kernel or pads out of range on spatial axis %d", (int)i);
    int64_t v = 0, t;
    bool ok = true;
    if (nos) {
      if (nos < (uint64_t)nsp) return mb_op_fail(c, "output_shape has too few entries");
      v = os[nos - (uint64_t)nsp + (uint64_t)i];
    } else if (same) {
      ok = mb_mul_i64(x->dims[2 + i], s, &v);
    } else {
      ok = mb_mul_i64(s, x->dims[2 + i] - 1, &v) && mb_add_i64(v, nop ? opad[i] : 0, &v) &&
           mb_mul_i64(k - 1, d, &t) && mb_add_i64(v, t, &v) && mb_add_i64(v, 1, &v) &&
           (!np || (mb_add_i64(v, -pads[i], &v) && mb_add_i64(v, -pads[i + nsp], &v)));
    }
    if (!ok || v < 0) return mb_op_fail(c, "output size on spatial axis %d is invalid", (int)i);
    dims[2 + i] = v;
  }
  return mb_op_set(c, 0, x->dtype, x->rank, dims);
}

static int pool(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  const int64_t *ks;
  uint64_t nk = mb_op_attr_ints(c, "kernel_shape", &ks);
  if (x->rank < 3 || nk != (uint64_t)(x->rank - 2))
    return mb_op_fail(c, "kernel_shape has %llu entries for an input of rank %d",
                      (unsigned long long)nk, (int)x->rank);
  int64_t dims[MB_MAX_RANK];
  dims[0] = x->dims[0];
  dims[1] = x->dims[1];
  if ((rc = spatial(c, x, ks, x->rank - 2, mb_op_attr_i(c, "ceil_mode", 0) != 0, dims + 2))) return rc;
  if ((rc = mb_op_set(c, 0, x->dtype, x->rank, dims))) return rc;
  return mb_op_set(c, 1, MB_DTYPE_INT64, x->rank, dims); /* MaxPool indices */
}

static int global_pool(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  int64_t dims[MB_MAX_RANK];
  for (int32_t k = 0; k < x->rank; k++) dims[k] = k < 2 ? x->dims[k] : 1;
  return mb_op_set(c, 0, x->dtype, x->rank, dims);
}

/* A norm's per-channel inputs (inputs first..last): each is [C], C the input's dim 1 (1 for a
 * rank-1 input, as ONNX's shape inference unifies it). A zero-size one where C > 0 is refused;
 * a zero-channel input with zero-size statistics is consistent, and is left alone. */
static int per_channel(mb_op_ctx *c, const mb_tinfo *x, int32_t first, int32_t last, const char *const *what) {
  int64_t ch = x->rank > 1 ? x->dims[1] : 1;
  char of[300], sx[300];
  snprintf(of, sizeof of, "one value per channel of %s", mb_op_input_str(c, 0, sx, sizeof sx));
  for (int32_t i = first; i <= last; i++) {
    int rc = mb_op_exact_shape(c, i, 1, &ch, what[i - first], of);
    if (rc) return rc;
  }
  return MB_OK;
}

static int instance_norm(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  static const char *const what[] = {"the scale", "the bias"};
  if ((rc = per_channel(c, x, 1, 2, what))) return rc;
  return mb_op_set(c, 0, x->dtype, x->rank, x->dims);
}

static int batch_norm(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  if (c->opset >= 14) (void)mb_op_attr_i(c, "training_mode", 0); /* read at load (passes/inference.c) */
  static const char *const what[] = {"the scale", "the bias", "the mean", "the variance"};
  if (c->opset < 9 && mb_op_attr_i(c, "spatial", 1) == 0) { /* per activation: (C x D1 x ... x Dn) */
    char of[300], sx[300];
    snprintf(of, sizeof of, "the dims of %s after the batch (spatial 0)", mb_op_input_str(c, 0, sx, sizeof sx));
    for (int32_t i = 1; i <= 4 && x->rank > 1; i++)
      if ((rc = mb_op_exact_shape(c, i, x->rank - 1, x->dims + 1, what[i - 1], of))) return rc;
  } else if ((rc = per_channel(c, x, 1, 4, what))) {
    return rc;
  }
  if ((rc = mb_op_set(c, 0, x->dtype, x->rank, x->dims))) return rc;
  int64_t ch = x->rank > 1 ? x->dims[1] : 1;
  for (int32_t o = 1; o < c->n_out && o < 5; o++) {
    const mb_tinfo *stat = c->n_in > 3 && c->in[3] ? c->in[3] : x;
    if ((rc = mb_op_set(c, o, stat->dtype, 1, &ch))) return rc;
  }
  return MB_OK;
}

static int layer_norm(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  int32_t axis;
  if ((rc = mb_op_axis(c, mb_op_attr_i(c, "axis", -1), x->rank, &axis))) return rc;
  if ((rc = mb_op_unidirectional(c, 1, x->rank - axis, x->dims + axis, "the scale")) ||
      (rc = mb_op_unidirectional(c, 2, x->rank - axis, x->dims + axis, "the bias")))
    return rc;
  if ((rc = mb_op_set(c, 0, x->dtype, x->rank, x->dims))) return rc;
  int64_t dims[MB_MAX_RANK];
  for (int32_t k = 0; k < x->rank; k++) dims[k] = k < axis ? x->dims[k] : 1;
  int32_t stash = (int32_t)mb_op_attr_i(c, "stash_type", MB_DTYPE_FLOAT);
  if ((rc = mb_op_set(c, 1, stash, x->rank, dims))) return rc;
  return mb_op_set(c, 2, stash, x->rank, dims);
}

/* RMSNormalization (opset 23): Y shaped like X (the inverse RMS is not an output). */
static int rms_norm(mb_op_ctx *c) {
  const mb_tinfo *x, *scale;
  int rc;
  if ((rc = mb_op_input(c, 0, &x)) || (rc = mb_op_input(c, 1, &scale))) return rc;
  int32_t axis;
  if ((rc = mb_op_axis(c, mb_op_attr_i(c, "axis", -1), x->rank, &axis))) return rc;
  if ((rc = mb_op_unidirectional(c, 1, x->rank - axis, x->dims + axis, "the scale"))) return rc;
  return mb_op_set(c, 0, x->dtype, x->rank, x->dims);
}

/* RotaryEmbedding (opset 23): X is [B, heads, seq, head] or [B, seq, hidden] (num_heads says
 * how to split hidden); the caches and position ids only index; Y is shaped like X. */
static int rotary_embedding(mb_op_ctx *c) {
  const mb_tinfo *x, *cos, *sin;
  int rc;
  if ((rc = mb_op_input(c, 0, &x)) || (rc = mb_op_input(c, 1, &cos)) || (rc = mb_op_input(c, 2, &sin))) return rc;
  if (x->rank != 3 && x->rank != 4) return mb_op_fail(c, "the input has rank %d, not 3 or 4", (int)x->rank);
  if (x->rank == 3 && mb_op_attr_i(c, "num_heads", 0) <= 0)
    return mb_op_fail(c, "a rank-3 input needs the num_heads attribute");
  return mb_op_set(c, 0, x->dtype, x->rank, x->dims);
}

static int gemm(mb_op_ctx *c) {
  const mb_tinfo *a, *b;
  int rc;
  if ((rc = mb_op_input(c, 0, &a)) || (rc = mb_op_input(c, 1, &b))) return rc;
  if (a->rank != 2 || b->rank != 2) return mb_op_fail(c, "Gemm needs rank-2 inputs, got %d and %d", (int)a->rank, (int)b->rank);
  bool ta = mb_op_attr_i(c, "transA", 0) != 0, tb = mb_op_attr_i(c, "transB", 0) != 0;
  int64_t m = a->dims[ta ? 1 : 0], k1 = a->dims[ta ? 0 : 1];
  int64_t k2 = b->dims[tb ? 1 : 0], n = b->dims[tb ? 0 : 1];
  if (k1 != k2) {
    char sa[300], sb[300];
    return mb_op_fail(c, "inner dims differ: A %s%s, B %s%s", mb_op_input_str(c, 0, sa, sizeof sa),
                      ta ? " (transposed)" : "", mb_op_input_str(c, 1, sb, sizeof sb), tb ? " (transposed)" : "");
  }
  int64_t dims[2] = {m, n};
  if ((rc = mb_op_unidirectional(c, 2, 2, dims, "C"))) return rc;
  return mb_op_set(c, 0, a->dtype, 2, dims);
}

int mb_op_matmul_shape(mb_op_ctx *c, const mb_tinfo *a, const mb_tinfo *b, int32_t ai, int32_t bi, int32_t dtype) {
  int rc;
  if (a->rank == 0 || b->rank == 0) return mb_op_fail(c, "MatMul of a scalar");
  /* promote 1-D operands, as numpy.matmul does */
  int64_t ad[MB_MAX_RANK + 1], bd[MB_MAX_RANK + 1];
  int32_t ar = a->rank, br = b->rank;
  memcpy(ad, a->dims, (size_t)ar * sizeof *ad);
  memcpy(bd, b->dims, (size_t)br * sizeof *bd);
  if (ar == 1) { ad[1] = ad[0]; ad[0] = 1; ar = 2; }
  if (br == 1) { bd[1] = 1; br = 2; }
  if (ad[ar - 1] != bd[br - 2]) { /* both zero is numpy's product of no terms: zeros, valid */
    char sa[300], sb[300];
    return mb_op_fail(c, "inner dims differ: %s x %s", mb_op_input_str(c, ai, sa, sizeof sa),
                      mb_op_input_str(c, bi, sb, sizeof sb));
  }
  mb_tinfo ba = {.rank = ar - 2, .dims = ad}, bb = {.rank = br - 2, .dims = bd};
  int32_t r;
  int64_t dims[MB_MAX_RANK + 2];
  if ((rc = mb_op_broadcast(c, &ba, &bb, &r, dims))) return rc;
  if (a->rank > 1) dims[r++] = ad[ar - 2];
  if (b->rank > 1) dims[r++] = bd[br - 1];
  return mb_op_set(c, 0, dtype, r, dims);
}

static int matmul(mb_op_ctx *c) {
  const mb_tinfo *a, *b;
  int rc;
  if ((rc = mb_op_input(c, 0, &a)) || (rc = mb_op_input(c, 1, &b))) return rc;
  return mb_op_matmul_shape(c, a, b, 0, 1, a->dtype);
}

static int flatten(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  int64_t axis = mb_op_attr_i(c, "axis", 1);
  if (axis < 0) axis += x->rank;
  if (axis < 0 || axis > x->rank) return mb_op_fail(c, "axis %lld out of range", (long long)axis);
  int64_t dims[2] = {1, 1};
  for (int32_t k = 0; k < x->rank; k++)
    if (!mb_mul_i64(dims[k < axis ? 0 : 1], x->dims[k], &dims[k < axis ? 0 : 1]))
      return mb_op_fail(c, "flattened size overflows");
  return mb_op_set(c, 0, x->dtype, 2, dims);
}

/* Attention (opset 23): Q, K, V as [B, heads, seq, head] or [B, seq, heads * head] with
 * q_num_heads / kv_num_heads; optional past key/value extend the sequence. Outputs: Y,
 * present_key, present_value, qk_matmul_output. */
static int attention(mb_op_ctx *c) {
  const mb_tinfo *q, *k, *v;
  int rc;
  if ((rc = mb_op_input(c, 0, &q)) || (rc = mb_op_input(c, 1, &k)) || (rc = mb_op_input(c, 2, &v)))
    return rc;
  if (q->rank != k->rank || q->rank != v->rank || (q->rank != 3 && q->rank != 4))
    return mb_op_fail(c, "Q, K and V must all have rank 3 or all rank 4");
  int64_t b = q->dims[0], hq, hkv, sq, skv, dq, dv;
  if (q->rank == 4) {
    hq = q->dims[1]; sq = q->dims[2]; dq = q->dims[3];
    hkv = k->dims[1]; skv = k->dims[2]; dv = v->dims[3];
    if (k->dims[3] != dq || v->dims[1] != hkv || v->dims[2] != skv)
      return mb_op_fail(c, "K and V do not match Q's head size or each other");
  } else {
    hq = mb_op_attr_i(c, "q_num_heads", 0);
    hkv = mb_op_attr_i(c, "kv_num_heads", 0);
    if (hq <= 0 || hkv <= 0 || q->dims[2] % hq || k->dims[2] % hkv || v->dims[2] % hkv)
      return mb_op_fail(c, "3-D inputs need q_num_heads and kv_num_heads dividing the hidden sizes");
    sq = q->dims[1]; skv = k->dims[1]; dq = q->dims[2] / hq; dv = v->dims[2] / hkv;
    if (k->dims[2] / hkv != dq) return mb_op_fail(c, "K's head size differs from Q's");
  }
  if (hq % hkv) return mb_op_fail(c, "%lld query heads do not group over %lld kv heads", (long long)hq, (long long)hkv);
  int64_t past = 0;
  if (c->n_in > 4 && c->in[4]) {
    if (c->in[4]->rank != 4) return mb_op_fail(c, "past_key must have rank 4");
    past = c->in[4]->dims[2];
  }
  int64_t total = past + skv;
  if (q->rank == 4) {
    int64_t y[4] = {b, hq, sq, dv};
    if ((rc = mb_op_set(c, 0, q->dtype, 4, y))) return rc;
  } else {
    int64_t y[3] = {b, sq, hq * dv};
    if ((rc = mb_op_set(c, 0, q->dtype, 3, y))) return rc;
  }
  int64_t pk[4] = {b, hkv, total, dq}, pv[4] = {b, hkv, total, dv}, qk[4] = {b, hq, sq, total};
  if ((rc = mb_op_set(c, 1, k->dtype, 4, pk)) || (rc = mb_op_set(c, 2, v->dtype, 4, pv))) return rc;
  return mb_op_set(c, 3, q->dtype, 4, qk);
}

const mb_op_def mb_ops_nn[] = {
  {"", "Attention", 23, 3, 6, 4, attention, MB_G_ATTENTION},
  {"", "Attention", 24, 3, 7, 4, attention, MB_G_ATTENTION},
  {"", "Conv", 1, 2, 3, 1, conv, MB_G_CONV},
  {"", "ConvTranspose", 1, 2, 3, 1, conv_transpose, MB_G_CONV},
  {"", "MaxPool", 1, 1, 1, 1, pool, MB_G_MAXPOOL},
  {"", "MaxPool", 8, 1, 1, 2, pool, MB_G_MAXPOOL},
  {"", "AveragePool", 1, 1, 1, 1, pool, MB_G_AVGPOOL},
  {"", "LpPool", 1, 1, 1, 1, pool, MB_G_LPPOOL},
  {"", "GlobalAveragePool", 1, 1, 1, 1, global_pool, MB_G_GLOBAL_AVGPOOL},
  {"", "GlobalMaxPool", 1, 1, 1, 1, global_pool, MB_G_GLOBAL_MAXPOOL},
  {"", "GlobalLpPool", 2, 1, 1, 1, global_pool, MB_G_LPPOOL},
  {"", "BatchNormalization", 1, 5, 5, 5, batch_norm, MB_G_BATCHNORM},
  {"", "BatchNormalization", 14, 5, 5, 3, batch_norm, MB_G_BATCHNORM},
  {"", "InstanceNormalization", 1, 3, 3, 1, instance_norm, MB_G_INSTANCENORM},
  {"", "LayerNormalization", 17, 2, 3, 3, layer_norm, MB_G_LAYERNORM},
  {"", "RMSNormalization", 23, 2, 2, 1, rms_norm, MB_G_RMSNORM},
  {"", "RotaryEmbedding", 23, 3, 4, 1, rotary_embedding, MB_G_ROTARY},
  {"", "LRN", 1, 1, 1, 1, same_shape, MB_G_SAVE_XY},
  {"", "Gemm", 1, 3, 3, 1, gemm, MB_G_GEMM},
  {"", "Gemm", 11, 2, 3, 1, gemm, MB_G_GEMM},
  {"", "MatMul", 1, 2, 2, 1, matmul, MB_G_MATMUL},
  {"", "Flatten", 1, 1, 1, 1, flatten, MB_G_RESHAPE},
  {"", "Softmax", 1, 1, 1, 1, same_shape, MB_G_SOFTMAX},
  {"", "LogSoftmax", 1, 1, 1, 1, same_shape, MB_G_SOFTMAX},
  {"", "Hardmax", 1, 1, 1, 1, same_shape, MB_G_NONDIFF},
};
const size_t mb_ops_nn_count = sizeof mb_ops_nn / sizeof mb_ops_nn[0];
