/* The step description: what the simulation reads about how one training step runs (the
 * precision, the optimizer, what trains, checkpoint segments, the teacher, the evaluation, the
 * allocator's rounding and the workspaces, the dims shapes are inferred with). The budget
 * builds it from the setup (budget/step.c); its strings and lists point into the setup, which
 * must outlive it and not change while it is used. */
#ifndef MB_SIM_STEP_H
#define MB_SIM_STEP_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "membudget/membudget.h"
#include "shape/inputs.h"
#include "sim/dist.h"

enum mb_precision { MB_PREC_FP32, MB_PREC_AMP_FP16, MB_PREC_AMP_BF16, MB_PREC_FP16, MB_PREC_BF16 };
enum mb_loss { MB_LOSS_AUTO, MB_LOSS_CE, MB_LOSS_MSE, MB_LOSS_NONE };

/* Which kernel SDPA runs: auto charges the fused kernel where the graph shows
 * scaled_dot_product_attention (the dynamo exporter's aten op, the TorchScript exporter's
 * q and k^T both scaled by sqrt(scale)) and attention written in Python as the ops it is;
 * fused charges every attention pattern as the fused kernel (what SDPA would keep); eager
 * charges SDPA as its math path. */
typedef enum mb_attention_mode { MB_ATTENTION_AUTO = 0, MB_ATTENTION_FUSED, MB_ATTENTION_EAGER } mb_attention_mode;

/* Evaluation inside training and the teacher output cache (budget/setup_eval.c). zero_grad:
 * set_to_none after the step, set_to_none=False, set_to_none at the start of the next step,
 * or set_to_none after the next step's forward, before its backward (Lightning's closure). */
enum mb_zero_grad { MB_ZERO_GRAD_NONE, MB_ZERO_GRAD_ZERO, MB_ZERO_GRAD_NONE_AT_START, MB_ZERO_GRAD_BEFORE_BACKWARD };
typedef struct mb_eval_opts {
  int64_t batch;            /* 0: no evaluation phase; -1: at the training batch; else its size */
  int zero_grad;            /* enum mb_zero_grad */
  bool ema_swap;            /* EMAModel.store() + copy_to() around the evaluation */
  int64_t keep_outputs;     /* batches of outputs the evaluation keeps */
  int64_t teacher_cache;    /* batches of teacher outputs kept on the device */
} mb_eval_opts;

/* The training loop around the step (budget/setup_loop.c; sim/loop.c). hold: when the loop
 * lets go of the model's outputs (`out`) and the loss: once the loss is computed, all but the
 * loss, and the loss when backward ends (MB_HOLD_LOSS: transformers' Trainer); both when
 * backward ends; after optimizer.step() and zero_grad(); or when the next iteration rebinds
 * them, so the previous ones are alive during the next forward (MB_HOLD_NEXT). */
/* (enum mb_loop and enum mb_hold_outputs are public: membudget.h) */
typedef struct mb_loop_opts {
  int loop;                 /* enum mb_loop: the preset the others default to */
  int hold;                 /* enum mb_hold_outputs */
  double max_grad_norm;     /* > 0: clip_grad_norm_(parameters, max_grad_norm) after backward */
  bool grad_scaler;         /* fp16: torch.amp.GradScaler scales the loss and unscales the grads */
} mb_loop_opts;

/* Which weights train: a name matching a trainable glob trains (trainable wins), else one
 * matching a freeze glob does not, else it trains. */
typedef struct mb_trains_rule {
  char *const *freeze;
  size_t n_freeze;
  char *const *trainable;
  size_t n_trainable;
} mb_trains_rule;

/* Whether a parameter or embedding called `name` trains under r (NULL: everything trains). */
bool mb_trains(const mb_trains_rule *r, const char *name);

typedef struct mb_step {
  int optimizer;            /* enum mb_optimizer (sim/optim.h) */
  int precision;            /* enum mb_precision */
  int loss;                 /* enum mb_loss */
  /* the loss reads the model's output cast to fp32 whatever the precision (Hugging Face's
   * causal-LM loss does logits.float()); otherwise only under autocast */
  bool loss_fp32;
  bool master_weights, ema;
  int32_t attention;        /* mb_attention_mode */
  bool cpu;                 /* PyTorch's CPU kernels and allocator (truth runs) */
  bool foreach;             /* the optimizer's foreach (multi-tensor) implementation */
  bool grad_sum_copy;       /* autograd sums a tensor's gradients out of place (PyTorch <= 1.13) */
  bool transformers_as_exported; /* charge HF models' export-only paths (passes/eager.c) */
  bool accept_inference_graph;   /* simulate a graph with inference-export signs anyway */
  mb_trains_rule trains;    /* which of the model's parameters and embeddings train */
  char *const *checkpoint;  /* activation checkpointing: globs on module paths */
  size_t n_checkpoint;
  int64_t grad_accumulation;
  const mb_model *teacher;  /* a frozen model run before the student, or NULL */
  bool teacher_offload;     /* its weights stream in layer by layer instead of staying */
  mb_eval_opts eval;
  mb_loop_opts loop;        /* resolved: the preset's values where no key overrode them */
  uint64_t rounding;        /* the allocator's block: device bytes round up to it (<= 1: exact) */
  uint64_t workspace;       /* bytes of one thread's GEMM workspaces (cuBLAS's and cuBLASLt's) */
  uint64_t cudnn_workspace; /* the most one cuDNN convolution call's workspace takes; 0: none */
  int64_t batch;            /* the batch size asked for; -1 when the budget solves for one */
  int64_t batch_max;        /* the largest batch size a solve may try */
  mb_shape_inputs shapes;   /* what shape inference binds the graph inputs with */
  mb_dist_opts dist;        /* several GPUs: what one rank holds (its globs point into the setup) */
} mb_step;
#endif
