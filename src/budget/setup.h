/* The training setup handle (internal layout). */
#ifndef MB_BUDGET_SETUP_H
#define MB_BUDGET_SETUP_H
#include <stdbool.h>
#include "graph/graph.h"
#include "cuda/opts.h"
#include "membudget/membudget.h"
#include "shape/batching.h"
#include "shape/inputs.h"
#include "sim/dist.h"
#include "sim/step.h"
#include "util/arena.h"
#include "util/diag.h"

/* cuDNN's convolution workspace per call when not given: a heuristic allowance (docs/allocator.md) */
/* cudnn_workspace "auto": each convolution call asks what cuDNN's heuristic asks (sim/plan.c) */
#define MB_CUDNN_WORKSPACE_AUTO UINT64_MAX

/* How the model is trained (mb_setup_set keys; defaults in setup.c). The options the
 * simulation reads go to it as a step description (sim/step.h, built in step.c), whose enums
 * (precision, loss, attention, zero_grad) and evaluation options these fields use. */
typedef struct mb_train {
  int optimizer;            /* enum mb_optimizer (sim/optim.h) */
  int precision;            /* enum mb_precision */
  int loss;                 /* enum mb_loss */
  bool loss_fp32;           /* the loss reads the output cast to fp32 (loss_dtype fp32) */
  bool master_weights, ema, teacher_offload;
  int32_t attention;    /* mb_attention_mode */
  bool cpu;                 /* backend cpu: PyTorch's CPU kernels and allocator (truth runs) */
  bool foreach;             /* the optimizer's foreach (multi-tensor) implementation */
  bool grad_sum_copy;       /* autograd sums a tensor's gradients out of place (PyTorch <= 1.13) */
  bool transformers_as_exported; /* charge HF models' export-only paths (passes/eager.c) */
  bool accept_inference_graph;   /* estimate a graph with inference-export signs anyway */
  char **checkpoint;        /* globs on module paths */
  size_t n_checkpoint;
  int64_t grad_accumulation, batch_min, batch_max, batch_multiple;
  uint64_t device_memory;   /* 0: not given */
  double utilization, fragmentation;
  double margin;            /* the solve's safety margin, a share of the usable memory held
                             * back; -1: the measured table's (budget/margin.c) */
  uint64_t context;
  uint64_t cublas_workspace;
  bool cublas_workspace_set; /* else from the GPU, else the default */
  uint64_t rounding;
  /* the caching allocator and what sits beside it (budget/reserved.c, budget/context.c) */
  int reserved_model;       /* mb_reserved_source: the allocator model or the flat allowance */
  char *alloc_conf;         /* PYTORCH_CUDA_ALLOC_CONF (validated when set), or NULL */
  bool alloc_conf_set;      /* given, even empty (a replay then ignores the snapshot's own) */
  uint64_t cublaslt_workspace; /* a separate cuBLASLt workspace per thread; 0: shares cuBLAS's */
  uint64_t cudnn_workspace; /* the most one convolution call's workspace takes; AUTO: no cap */
  bool context_set;         /* context was given; else the context table decides */
  int cuda_version;         /* major x 100 + minor (1208); 0: not given (PyTorch 2 wheels: >= 11.7) */
  int driver_version;       /* the driver's major (550); 0: not given */
  bool eager_loading;       /* CUDA_MODULE_LOADING=EAGER */
  const char *gpu;          /* table name, or NULL */
  const mb_model *teacher;
  mb_eval_opts eval;
  bool zero_grad_set;        /* zero_grad was given; else the loop's preset decides */
  mb_loop_opts loop;         /* the loop around the step (setup_loop.c): its preset, and the */
  unsigned loop_set;         /* MB_LOOP_SET_* keys given explicitly, which win over it */
  int grad_scaler;           /* -1 auto (under fp16), 0 or 1 */
  mb_dist_opts dist;         /* several GPUs: what one rank holds (setup_dist.c) */
} mb_train;
#define MB_LOOP_SET_HOLD 1u
#define MB_LOOP_SET_CLIP 2u
#define MB_LOOP_SET_PRESET 4u  /* the loop key itself */


/* What mb_estimate_json reports beside the budget (setup keys by_module, module_depth, top,
 * advise, advise_trainable; setup_report.c). */
enum mb_advise_when { MB_ADVISE_NEVER = 0, MB_ADVISE_AUTO = 1, MB_ADVISE_ALWAYS = 2 };
typedef struct mb_report_opts {
  bool by_module;           /* the module tree (budget/modules.c) */
  int32_t module_depth;     /* its deepest level reported; 0: every level */
  int32_t top;              /* the largest tensors alive at the peak to list; 0: none */
  int32_t advise;           /* enum mb_advise_when: simulated advice (budget/advice.c) */
  char *advise_trainable;   /* the glob the freezing what-if trains, or NULL: chosen from the graph */
} mb_report_opts;

struct mb_setup {
  char **freeze;
  char **trainable;
  size_t n_freeze, n_trainable;
  char **dim_names;     /* named dim values, e.g. batch=8 */
  int64_t *dim_values;
  size_t n_dims;
  int64_t batch;        /* -1: not set; else the batch size for the batch dim */
  char *batch_dim;      /* the batch dim's name when given explicitly, else NULL (automatic) */
  mb_arena arena;       /* bound graph-input tensors live here */
  mb_const_tensor *bound;  /* bound[k]: graph input k (rank 0 with dtype 0 = not bound) */
  bool *is_bound;
  size_t n_bound;
  mb_train train;
  mb_cuda_opts cuda;
  mb_batching batching; /* batches of graphs: per-sample dims, graph sizes (setup_graphs.c) */
  char errmsg[1536];
  char recorded[256];   /* what mb_setup_apply_recorded took from the model file ("": nothing) */
  mb_report_opts report;
  mb_limits limits;     /* the limit.* keys (setup_limits.c); zero: the defaults */
};

/* Whether a parameter or embedding called `name` trains under s (NULL: everything trains). */
bool mb_setup_trains(const mb_setup *s, const char *name);
/* Every freeze/trainable glob matches a weight of m, every checkpoint/fsdp_wrap glob a module;
 * else MB_E_INVALID_ARG naming the glob and the nearest names (budget/setup_globs.c). */
int mb_setup_check_globs(const mb_model *m, const mb_setup *s, mb_diag *d);
/* setup_cuda.c: the measured-mode keys of mb_setup_set. Returns 1 and sets *rc when key is
 * one of them, else 0. */
int mb_setup_cuda_option(mb_setup *s, const char *key, const char *value, int *rc);
void mb_setup_cuda_free(mb_setup *s);
/* The setup key naming library k ("cuda_runtime", ...). */
/* setup_graphs.c: the batching keys of mb_setup_set (per_sample, batch_unit, graph_sizes,
 * graph_quantile, graph_batches). Returns 1 and sets *rc when key is one of them, else 0. */
int mb_setup_graphs_option(mb_setup *s, const char *key, const char *value, int *rc);
void mb_setup_graphs_free(mb_setup *s);
/* setup_eval.c: the keys eval_batch, zero_grad, ema_swap, eval_keep_outputs, teacher_cache.
 * Returns 1 and sets *rc when key is one of them, else 0. */
/* The parsers of mb_setup_set's values (setup.c), shared by the key families: each failure
 * writes "KEY: 'VALUE' is not WANT" to the setup's message and returns MB_E_INVALID_ARG. */
int mb_setup_bad(mb_setup *s, const char *key, const char *value, const char *want);
int mb_setup_pick(mb_setup *s, const char *key, const char *value, const char *const *names, int *out); /* names: NULL-ended */
int mb_setup_bool(mb_setup *s, const char *key, const char *value, bool *out); /* 1|true|on, 0|false|off */
int mb_setup_int(mb_setup *s, const char *key, const char *value, int64_t lo, int64_t hi, int64_t *out);
/* digits only (no sign, no space), in [lo, hi]; no message */
bool mb_setup_digits(const char *value, int64_t lo, int64_t hi, int64_t *out);
/* a validated glob appended to a list */
int mb_setup_add_pattern(mb_setup *s, char ***list, size_t *n, const char *glob);
int mb_setup_eval_option(mb_setup *s, const char *key, const char *value, int *rc);
/* setup_loop.c: the keys loop, hold_outputs, max_grad_norm, grad_scaler (1 when key is one of
 * them); the loop the step runs in, the preset's values where no key overrode them, and the
 * zero_grad it implies unless zero_grad was given; the names the output uses. */
int mb_setup_loop_option(mb_setup *s, const char *key, const char *value, int *rc);
void mb_setup_loop_resolve(const mb_train *t, mb_loop_opts *out, int *zero_grad);
int mb_setup_dist_option(mb_setup *s, const char *key, const char *value, int *rc);
void mb_setup_dist_defaults(mb_dist_opts *o);
void mb_setup_dist_free(mb_dist_opts *o);
int mb_setup_fsdp_option(mb_setup *s, const char *key, const char *value, int *rc);
void mb_setup_fsdp_defaults(mb_dist_opts *o);
void mb_setup_fsdp_free(mb_dist_opts *o);
/* The setup's batching (shape/batching.h): the largest batch its graph-size table allows, its
 * mb_batch_rule and what batch_size counts ("samples", "graphs"). */
int64_t mb_setup_batch_limit(const mb_setup *s);
int mb_setup_batch_rule(const mb_setup *s);
const char *mb_setup_batch_unit(const mb_setup *s);
/* setup_report.c: the report keys of mb_setup_set (by_module, module_depth, top, advise,
 * advise_trainable). Returns 1 and sets *rc when key is one of them, else 0. */
int mb_setup_report_option(mb_setup *s, const char *key, const char *value, int *rc);
/* setup_limits.c: the limit.NAME keys (util/limits.h). Returns 1 and sets *rc when key is one
 * of them, else 0. */
int mb_setup_limits_option(mb_setup *s, const char *key, const char *value, int *rc);
void mb_setup_report_free(mb_setup *s);
/* The tensor bound to graph input k, or NULL. */
const mb_const_tensor *mb_setup_bound_input(const mb_setup *s, size_t k);
/* shape_inputs.c: the setup as shape inference's inputs (pointers into s). */
void mb_setup_shape_inputs(const mb_setup *s, mb_shape_inputs *out);
#endif
