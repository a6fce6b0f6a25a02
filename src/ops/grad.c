/* The autograd rule table (see grad.h). Each row is what one PyTorch backward node keeps:
 * the SavedVariable members of its generated XxxBackward0 class, by position. */
#include "ops/grad.h"

#include <stddef.h>

#define Y MB_SAVE_YES
#define O MB_SAVE_IF_OTHER
#define FP32 MB_AMP_FP32
#define PW MB_GF_POINTWISE
#define LOW MB_AMP_LOW
#define PROM MB_AMP_PROMOTE

static const mb_grad_rule rules[MB_G_COUNT] = {
  /*                        torch op             flags    save_in    out same stats amp bwd_tmp */
  [MB_G_DEFAULT]        = {"(every input kept)", 0, {Y, Y, Y, Y}, 0, 0, 0, 0, 0},
  [MB_G_NONDIFF]        = {"(no gradient)", MB_GF_NONDIFF, {0}, 0, 0, 0, 0, 0},
  [MB_G_NOTHING]        = {"(keeps nothing)", PW, {0}, 0, 0, 0, 0, 0},
  [MB_G_ADD]            = {"add", PW, {0}, 0, 0xff, 0, PROM, 0},
  /* sub: the minuend gets the grad itself, the subtrahend a negated copy */
  [MB_G_SUB]            = {"sub", PW, {0}, 0, 0x01, 0, PROM, 0},
  [MB_G_VIEW]           = {"view", MB_GF_VIEW | MB_GF_GRAD_VIEW, {0}, 0, 0, 0, 0, 0},
  [MB_G_IDENTITY]       = {"alias", MB_GF_VIEW | MB_GF_GRAD_VIEW, {0}, 0, 0, 0, 0, 0},
  [MB_G_RESHAPE]        = {"reshape", MB_GF_VIEW | MB_GF_GRAD_VIEW | MB_GF_RESHAPE, {0}, 0, 0, 0, 0, 0},
  [MB_G_TRANSPOSE]      = {"permute", MB_GF_VIEW | MB_GF_GRAD_VIEW | MB_GF_TRANSPOSE, {0}, 0, 0, 0, 0, 0},
  /* slice/select/split: views forward; backward writes into a zero tensor of the input's size */
  [MB_G_SLICE]          = {"slice", MB_GF_VIEW, {0}, 0, 0, 0, 0, 0},
  /* cat: backward hands each input a narrow() view of the output grad */
  [MB_G_CONCAT]         = {"cat", MB_GF_GRAD_VIEW, {0}, 0, 0, 0, PROM, 0},
  /* expand: a stride-0 view; backward sums to the input's size */
  [MB_G_EXPAND]         = {"expand", MB_GF_VIEW, {0}, 0, 0x1, 0, 0, 0}, /* sum_to of an unexpanded shape is the grad itself */
  [MB_G_CAST]           = {"_to_copy", PW, {0}, 0, 0, 0, 0, 0},
  [MB_G_SAVE_X]         = {"(keeps input)", PW, {Y}, 0, 0, 0, 0, 0},
  [MB_G_SAVE_X_FP32]    = {"(keeps input, fp32 under autocast)", PW, {Y}, 0, 0, 0, FP32, 0},
  [MB_G_SAVE_Y]         = {"(keeps result)", PW, {0}, 1, 0, 0, 0, 0},
  [MB_G_SAVE_Y_FP32]    = {"(keeps result, fp32 under autocast)", PW, {0}, 1, 0, 0, FP32, 0},
  [MB_G_SAVE_XY]        = {"(keeps input and result)", 0, {Y}, 1, 0, 0, 0, 0},
  /* erf backward: 2/sqrt(pi) * exp(-x*x) * grad, two full-size temporaries */
  [MB_G_ERF]            = {"erf", PW, {Y}, 0, 0, 0, 0, 2},
  [MB_G_SQRT]           = {"sqrt", PW, {0}, 1, 0, 0, 0, 1},
  [MB_G_RECIPROCAL]     = {"reciprocal", PW, {0}, 1, 0, 0, FP32, 1},
  [MB_G_MUL]            = {"mul", PW, {O, O}, 0, 0, 0, PROM, 0},
  /* div: the divisor always; the dividend only for the divisor's grad */
  [MB_G_DIV]            = {"div", PW, {O, Y}, 0, 0, 0, PROM, 0},
  [MB_G_POW]            = {"pow", PW, {Y, O}, 0, 0, 0, FP32, 1},
  [MB_G_MINMAX]         = {"maximum", PW, {Y, Y}, 0, 0, 0, PROM, 0},
  [MB_G_PRELU]          = {"prelu", 0, {Y, Y}, 0, 0, 0, LOW, 0},
  [MB_G_WHERE]          = {"where", PW, {Y}, 0, 0, 0, PROM, 0},
  [MB_G_MATMUL]         = {"matmul", MB_GF_MATMUL | MB_GF_CUBLAS, {O, O}, 0, 0, 0, LOW, 0},
  [MB_G_GEMM]           = {"addmm", MB_GF_CUBLAS, {O, O}, 0, 0, 0, LOW, 0},
  [MB_G_EINSUM]         = {"einsum", MB_GF_CUBLAS, {O, O, O, O}, 0, 0, 0, LOW, 0},
  /* convolution_backward is a multi-output formula: input and weight always (R4) */
  [MB_G_CONV]           = {"convolution", 0, {Y, Y}, 0, 0, 0, LOW, 0},
  [MB_G_MAXPOOL]        = {"max_pool2d_with_indices", 0, {Y}, 0, 0, MB_STATS_INDICES_OUT, 0, 0},
  [MB_G_AVGPOOL]        = {"avg_pool2d", 0, {Y}, 0, 0, 0, 0, 0},
  [MB_G_LPPOOL]         = {"(lp pool)", 0, {Y}, 1, 0, 0, 0, 0},
  /* adaptive_avg_pool to 1x1 is decomposed into mean(): nothing kept */
  [MB_G_GLOBAL_AVGPOOL] = {"mean", 0, {0}, 0, 0, 0, 0, 0},
  [MB_G_GLOBAL_MAXPOOL] = {"adaptive_max_pool2d", 0, {Y}, 0, 0, MB_STATS_INDICES_OUT, 0, 0},
  /* batch norm keeps its input and fp32 save_mean/save_invstd, not its output */
  [MB_G_BATCHNORM]      = {"cudnn_batch_norm", MB_GF_BN, {Y}, 0, 0, MB_STATS_CHANNELS2, 0, 0},
  [MB_G_INSTANCENORM]   = {"instance_norm", 0, {Y}, 0, 0, MB_STATS_INSTANCE2, 0, 0},
  [MB_G_LAYERNORM]      = {"native_layer_norm", 0, {Y}, 0, 0, MB_STATS_ROWS2, FP32, 0},
  [MB_G_GROUPNORM]      = {"native_group_norm", 0, {Y}, 0, 0, MB_STATS_GROUPS2, FP32, 0},
  [MB_G_RMSNORM]        = {"_fused_rms_norm", 0, {Y}, 0, 0, MB_STATS_ROWS1, FP32, 0},
  /* native_dropout keeps its bool mask (ONNX output 1, or MASK_IN when not exported) */
  [MB_G_DROPOUT]        = {"native_dropout", PW, {0}, 2, 0, 0, 0, 0},
  /* embedding / index_select keep the indices */
  [MB_G_GATHER]         = {"embedding", 0, {0, Y}, 0, 0, 0, 0, 0},
  [MB_G_GATHER_ELEMENTS]= {"gather", 0, {Y, Y}, 0, 0, 0, 0, 0},
  [MB_G_INDEX1]         = {"(keeps indices)", 0, {0, Y, Y}, 0, 0, 0, 0, 0},
  /* sum.dim_IntList: self: sum_backward(grad, self.sym_sizes(), dim, keepdim), which is
   * grad.unsqueeze(dim).expand(sizes): a view of the output's grad */
  [MB_G_REDUCE_SUM]     = {"sum", MB_GF_GRAD_EXPAND, {0}, 0, 0, 0, FP32, 0},
  [MB_G_REDUCE_MEAN]    = {"mean", 0, {0}, 0, 0, 0, 0, 0},
  [MB_G_REDUCE_XY]      = {"(reduction keeping input and result)", 0, {Y}, 1, 0, 0, 0, 0},
  [MB_G_REDUCE_X]       = {"(reduction keeping input)", 0, {Y}, 0, 0, 0, 0, 0},
  [MB_G_SOFTMAX]        = {"_softmax", 0, {0}, 1, 0, 0, FP32, 0},
  [MB_G_RESIZE]         = {"upsample", 0, {0}, 0, 0, 0, FP32, 0},
  [MB_G_PAD]            = {"constant_pad_nd", 0, {0}, 0, 0, 0, 0, 0},
  [MB_G_CUMSUM]         = {"cumsum", 0, {0}, 0, 0, 0, FP32, 0},
  [MB_G_TOPK]           = {"topk", 0, {0}, 2, 0, 0, 0, 0},
  [MB_G_RNN]            = {"_cudnn_rnn", MB_GF_CUBLAS, {Y, Y, Y, Y}, 1, 0, MB_STATS_RNN, LOW, 0},
  /* cross_entropy_loss is log_softmax then nll_loss (CompositeImplicitAutograd): LogSoftmax-
   * Backward keeps its result (the log-probabilities, output 1 or MB_STATS_LOGPROB), NllLoss-
   * Backward the target and the class weights, not the scores. nll_loss_backward fills a
   * full-size grad of the log-probabilities (one temporary at input 0's size) before
   * _log_softmax_backward_data makes the scores' grad. Autocast runs both in fp32
   * (autocast_mode.h: log_softmax in AT_FORALL_FP32_SET_OPT_DTYPE, nll_loss in AT_FORALL_FP32). */
  [MB_G_CROSS_ENTROPY]  = {"nll_loss (log_softmax kept)", 0, {0, Y, Y}, 0x2, 0, 0, FP32, 1},
  /* ONNX Attention (opset 23) runs as scaled_dot_product_attention */
  [MB_G_ATTENTION]      = {"_scaled_dot_product_efficient_attention", MB_GF_CUBLAS, {Y, Y, Y, Y}, 1, 0, MB_STATS_LSE, LOW, 0},
  /* clone (and roll): a new contiguous storage; backward hands the grad through */
  [MB_G_COPY]           = {"clone", PW, {0}, 0, 0x01, 0, 0, 0},
  /* clone(memory_format=contiguous_format), what .contiguous() and reshape() trace to: a copy
   * only when the input is not contiguous (plan.c decides from its views) */
  [MB_G_CONTIGUOUS]     = {"contiguous", MB_GF_VIEW | MB_GF_GRAD_VIEW | MB_GF_RESHAPE, {0}, 0, 0, 0, 0, 0},
  /* zeros, ones, full, empty, *_like, new_*, fill, bernoulli, arange: a fresh tensor */
  [MB_G_FACTORY]        = {"(factory)", MB_GF_NONDIFF, {0}, 0, 0, 0, 0, 0},
  /* aten.scaled_dot_product_attention with its arguments in order (q, k, v, attn_mask): the
   * fused kernels keep all four, the output and an fp32 logsumexp */
  [MB_G_SDPA]           = {"_scaled_dot_product_efficient_attention", MB_GF_CUBLAS, {Y, Y, Y, Y}, 1, 0, MB_STATS_LSE, LOW, 0},
  /* masked_fill(self, mask, value): keeps the mask */
  [MB_G_MASKED_FILL]    = {"masked_fill", PW, {0, Y}, 0, 0, 0, 0, 0},
  /* SDPA's math path transposes k as Reshape(merge) Transpose Reshape(split) in ONNX */
  [MB_G_TRANSPOSE_LAST2]= {"transpose", MB_GF_VIEW | MB_GF_GRAD_VIEW | MB_GF_TRANSPOSE, {0}, 0, 0, 0, 0, 0},
  /* ONNX RotaryEmbedding (opset 23): x * cos + rotate(x) * sin; backward needs the caches */
  [MB_G_ROTARY]         = {"(rotary embedding)", PW, {0, Y, Y}, 0, 0, 0, 0, 0},
  /* detach: an alias that autograd does not record; what reads it gets no gradient */
  [MB_G_DETACH]         = {"detach", MB_GF_VIEW | MB_GF_NONDIFF, {0}, 0, 0, 0, 0, 0},
  /* derivatives.yaml, scatter.src: self: grad.scatter(dim, index, 0), src: grad.gather(dim,
   * index); index: non_differentiable. ScatterBackward0 keeps the index alone */
  [MB_G_SCATTER]        = {"scatter", 0, {0, Y, 0}, 0, 0, 0, 0, 0},
  /* scatter_add: self: grad (the grad itself), src: grad.gather(dim, index): the index alone */
  [MB_G_SCATTER_ADD]    = {"scatter_add", 0, {0, Y, 0}, 0, 0x01, 0, 0, 0},
  /* scatter_reduce.two: self, src: scatter_reduce_backward(grad, self, dim, index, src, reduce,
   * include_self, result): keeps self, index, src and the result */
  [MB_G_SCATTER_REDUCE] = {"scatter_reduce", 0, {Y, Y, Y}, 1, 0, 0, 0, 0},
  [MB_G_FUSED_GELU]     = {"gelu", PW, {Y}, 0, 0, 0, 0, 0},
  [MB_G_FUSED_SILU]     = {"silu", PW, {Y}, 0, 0, 0, 0, 0},
  [MB_G_FUSED_LAYERNORM]= {"native_layer_norm", 0, {Y}, 0, 0, MB_STATS_ROWS2, FP32, 0},
  [MB_G_FUSED_RMSNORM]  = {"_fused_rms_norm", 0, {Y}, 0, 0, MB_STATS_ROWS1, FP32, 0},
  [MB_G_FUSED_GROUPNORM]= {"native_group_norm", 0, {Y}, 0, 0, MB_STATS_GROUPS2, FP32, 0},
  /* linear -> addmm: the input only for the weight's grad, the weight only for the input's */
  [MB_G_FUSED_LINEAR]   = {"linear", MB_GF_CUBLAS, {O, O}, 0, 0, 0, LOW, 0},
  /* flash / memory-efficient SDPA: q, k, v, the output and an fp32 logsumexp */
  [MB_G_FUSED_ATTENTION]= {"_scaled_dot_product_efficient_attention", MB_GF_CUBLAS, {Y, Y, Y}, 1, 0, MB_STATS_LSE, LOW, 0},
};

const mb_grad_rule *mb_grad_rule_of(int id) {
  if (id < 0 || id >= MB_G_COUNT) id = MB_G_DEFAULT;
  return &rules[id];
}
