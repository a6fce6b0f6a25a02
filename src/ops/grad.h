/* Autograd rules: what PyTorch keeps for backward when it runs an op, and what its backward
 * allocates. One rule per kind of op; each operator-table entry names its rule (op.h), and the
 * fusion pass gives fused patterns theirs. Sources: derivatives.yaml and the generated
 * SavedVariable lists, summarised in docs/training-memory-model.md section 2. */
#ifndef MB_OPS_GRAD_H
#define MB_OPS_GRAD_H
#include <stdint.h>

/* When input i is kept for backward. */
enum {
  MB_SAVE_NO = 0,
  MB_SAVE_YES,      /* whenever the op is recorded (an input requires grad): R4 */
  MB_SAVE_IF_OTHER  /* only when another input requires grad (mm, mul: R3) */
};

/* Small tensors a backward keeps besides inputs and outputs. Sizes in sim/plan.c. */
enum mb_stats {
  MB_STATS_NONE = 0,
  MB_STATS_ROWS2,       /* 2 fp32 per normalised row: layer norm mean and rstd */
  MB_STATS_ROWS1,       /* 1 fp32 per row: RMS norm rstd */
  MB_STATS_CHANNELS2,   /* 2 fp32 per channel: batch norm save_mean, save_invstd */
  MB_STATS_INSTANCE2,   /* 2 fp32 per (sample, channel): instance norm */
  MB_STATS_GROUPS2,     /* 2 fp32 per (sample, group): group norm */
  MB_STATS_INDICES_OUT, /* int64 per output element: max-pool indices */
  MB_STATS_MASK_IN,     /* 1 byte per input element: a dropout mask with no ONNX output */
  MB_STATS_LSE,         /* fp32 per query row: fused attention logsumexp */
  MB_STATS_RNN,         /* cuDNN RNN reserve space: gates x output elements */
  MB_STATS_LOGPROB      /* input 0's size in the op's dtype: cross-entropy's log-probabilities,
                         * when SoftmaxCrossEntropyLoss has no log_prob output to keep */
};

/* Autocast class (aten/src/ATen/autocast_mode.h). */
enum mb_amp { MB_AMP_KEEP = 0, MB_AMP_LOW, MB_AMP_FP32, MB_AMP_PROMOTE };

#define MB_GF_NONDIFF 0x01u   /* outputs never require grad (comparisons, Shape, random) */
#define MB_GF_VIEW 0x02u      /* every output is a view of input 0: no allocation */
#define MB_GF_GRAD_VIEW 0x04u /* backward hands each input a view of the output grad */
#define MB_GF_CUBLAS 0x08u    /* runs a cuBLAS GEMM (its workspace exists) */
#define MB_GF_BN 0x10u        /* outputs 1.. are running stats updated in place */
#define MB_GF_RESHAPE 0x20u   /* a permuted (non-contiguous) input is copied, not viewed */
#define MB_GF_TRANSPOSE 0x40u /* output 0 is a permuted view */
#define MB_GF_MATMUL 0x80u    /* operands whose batch dims cannot merge are copied (at::matmul) */
#define MB_GF_POINTWISE 0x100u /* elementwise: the output takes the memory layout of its first
                                * full-size input (TensorIterator), a permutation included */
#define MB_GF_GRAD_EXPAND 0x200u /* backward hands input 0 the output grad expanded to its shape
                                  * (sum: a stride-0 view, no new storage) */

typedef struct mb_grad_rule {
  const char *torch;   /* the op autograd records, for traces */
  uint16_t flags;
  uint8_t save_in[4];  /* MB_SAVE_* for inputs 0..3 (others: not saved) */
  uint8_t save_out;    /* bitmask of outputs kept */
  uint8_t grad_same;   /* bitmask of inputs that, shaped like the output, get its grad itself */
  uint8_t stats;       /* enum mb_stats */
  uint8_t amp;         /* enum mb_amp */
  uint8_t bwd_tmp;     /* full-size temporaries its backward holds at once, in units of input 0 */
} mb_grad_rule;

typedef enum mb_grad_id {
  MB_G_DEFAULT = 0, /* an op without a rule: keeps every input (the conservative choice) */
  MB_G_NONDIFF, MB_G_NOTHING, MB_G_ADD, MB_G_SUB, MB_G_VIEW, MB_G_IDENTITY, MB_G_RESHAPE,
  MB_G_TRANSPOSE, MB_G_SLICE, MB_G_CONCAT, MB_G_EXPAND, MB_G_CAST,
  MB_G_SAVE_X, MB_G_SAVE_X_FP32, MB_G_SAVE_Y, MB_G_SAVE_Y_FP32, MB_G_SAVE_XY, MB_G_ERF,
  MB_G_SQRT, MB_G_RECIPROCAL, MB_G_MUL, MB_G_DIV, MB_G_POW, MB_G_MINMAX, MB_G_PRELU, MB_G_WHERE,
  MB_G_MATMUL, MB_G_GEMM, MB_G_EINSUM, MB_G_CONV, MB_G_MAXPOOL, MB_G_AVGPOOL, MB_G_LPPOOL,
  MB_G_GLOBAL_AVGPOOL, MB_G_GLOBAL_MAXPOOL, MB_G_BATCHNORM, MB_G_INSTANCENORM, MB_G_LAYERNORM,
  MB_G_GROUPNORM, MB_G_RMSNORM, MB_G_DROPOUT, MB_G_GATHER, MB_G_GATHER_ELEMENTS, MB_G_INDEX1,
  MB_G_REDUCE_SUM, MB_G_REDUCE_MEAN, MB_G_REDUCE_XY, MB_G_REDUCE_X, MB_G_SOFTMAX, MB_G_RESIZE,
  MB_G_PAD, MB_G_CUMSUM, MB_G_TOPK, MB_G_RNN, MB_G_ATTENTION, MB_G_CROSS_ENTROPY,
  /* aten ops of torch 2.x exports whose ONNX form means something else (passes/aten.c) */
  MB_G_COPY, MB_G_CONTIGUOUS, MB_G_FACTORY, MB_G_SDPA, MB_G_MASKED_FILL, MB_G_TRANSPOSE_LAST2, MB_G_ROTARY,
  MB_G_DETACH,
  /* scatters, told apart by the ONNX reduction or the recorded aten op (plan.c, aten.c) */
  MB_G_SCATTER, MB_G_SCATTER_ADD, MB_G_SCATTER_REDUCE,
  /* fused patterns (passes/fuse.c) */
  MB_G_FUSED_GELU, MB_G_FUSED_SILU, MB_G_FUSED_LAYERNORM, MB_G_FUSED_RMSNORM,
  MB_G_FUSED_GROUPNORM, MB_G_FUSED_LINEAR, MB_G_FUSED_ATTENTION,
  MB_G_COUNT
} mb_grad_id;

const mb_grad_rule *mb_grad_rule_of(int id);
#endif
