/* Internal state of plan building, shared by plan.c (logical nodes: what each op reads,
 * writes and keeps) and emit.c (the event program of a step). */
#ifndef MB_SIM_BUILD_H
#define MB_SIM_BUILD_H
#include "graph/graph.h"
#include "ops/grad.h"
#include "ops/op.h"
#include "passes/fuse.h"
#include "sim/plan.h"
#include "sim/step.h"
#include "util/arena.h"

#define MB_LN_MAX_SAVED 12

/* A logical node: one ONNX node, or one fused pattern run at its last member. */
enum { MB_WS_FORWARD, MB_WS_DATA, MB_WS_FILTER };

typedef struct mb_lnode {
  int32_t node;           /* ONNX node index (the last member of a fused pattern) */
  int32_t rule;           /* mb_grad_id */
  const mb_grad_rule *r;
  int32_t n_in, n_out;
  const int32_t *in;      /* value indices, -1 for omitted */
  const int32_t *out;
  int32_t *in_slot;       /* storage each input is read from (a cast copy where autocast casts) */
  int32_t *cast_slot;     /* per input: the cast/contiguous copy this node made, or -1 */
  int32_t *src_slot;      /* per input: the storage a copy was made from (read too), or -1 */
  uint8_t *first_read;    /* per read (mb_lnode_read, 2 n_in): 1 for the first of its storage in
                           * this node (a node may read one storage twice); set by count_reads */
  int32_t *out_slot;      /* per output: its storage (-1 omitted) */
  bool *out_new;          /* per output: a storage this node allocates (not a view) */
  int32_t stats_slot[2];  /* fp32 statistics / masks / indices kept for backward (norms keep
                           * mean and rstd as two tensors), -1 when unused */
  int32_t ws_slot[3];     /* a cuDNN convolution's transient workspaces (MB_WS_FORWARD, _DATA,
                           * _FILTER), -1 when the call asks for none */
  int32_t saved[MB_LN_MAX_SAVED];
  int32_t n_saved;
  bool record;            /* autograd records it: some input requires grad */
  bool detached;          /* it runs on a detached tensor (mb_fusion.detached): never recorded */
  int32_t segment;        /* activation-checkpoint segment, or -1 */
  int32_t stats_ref;
} mb_lnode;

typedef struct wcache {
  int32_t weight_slot, copy_slot;
} wcache;

typedef struct mb_model_state {
  const mb_model *m;
  const mb_graph *g;
  const mb_tinfo *t;      /* plan-time shapes (batch 2) for structure decisions */
  mb_shapes *shapes;
  int32_t *slot_of;       /* per value: storage slot, or -1 */
  int32_t *rt;            /* per value: dtype on the device under the precision */
  bool *rg;               /* per value: requires grad */
  bool *host;             /* per value: a host value in PyTorch (shapes, Python scalars) */
  bool *trainable_init;   /* per value: an initializer that trains */
  int64_t **strides;      /* per value: its strides when not contiguous (sim/strides.h), else
                           * NULL */
  mb_lnode *ln;
  int32_t n_ln;
  mb_fusion fusion;
  wcache *wc;             /* autocast weight copies made during forward */
  int32_t n_wc;
} mb_model_state;

typedef struct mb_builder {
  mb_plan *p;
  const mb_step *step;
  mb_diag *d;
  mb_arena a;             /* scratch for building */
  mb_model_state ms[3];   /* the model, the teacher, the model in eval mode (MB_MS_EVAL) */
  int32_t low;            /* fp16/bf16 dtype of the precision, 0 under fp32 */
  bool amp, pure;
  int32_t loss_out;       /* the model output the loss reads */
  int loss;               /* enum mb_loss, resolved */
  int8_t class_axis;
  int32_t n_segments;
  int64_t batch;          /* the batch the model's shapes were inferred at */
  uint32_t *read_stamp;   /* per slot: the node generation that last read it (count_reads: a
                           * node's duplicate reads found in linear time, not pairwise) */
  int32_t stamp_cap;
  uint32_t stamp_gen;
} mb_builder;

/* The slot of the trained model's value v when it is a parameter or an embedding of fixed size
 * (what the strategies shard, gather and reduce), else -1. */
static inline int32_t mb_param_slot(const mb_builder *b, int32_t v) {
  const mb_graph *g = b->ms[0].g;
  int32_t s = g->values[v].kind == MB_VALUE_INITIALIZER ? b->ms[0].slot_of[v] : -1;
  if (s < 0 || b->p->slots[s].rule != MB_SZ_FIXED) return -1;
  int cat = b->p->slots[s].category;
  return cat == MB_CAT_PARAMETER || cat == MB_CAT_EMBEDDING ? s : -1;
}

/* Storage i of the ones a node reads: its inputs (0..n_in-1), then the sources of its copies. */
static inline int32_t mb_lnode_read(const mb_lnode *ln, int32_t i) {
  return i < ln->n_in ? ln->in_slot[i] : ln->src_slot[i - ln->n_in];
}

/* ms[] index of the model's evaluation forward (eval_batch): the same graph, no grad, eval
 * mode, its slots sized at the evaluation's batch; events name the model's nodes (model 0) */
#define MB_MS_EVAL 2

/* plan.c: model is an ms[] index (MB_MS_EVAL makes a slot of the model sized at the
 * evaluation's batch) */
int mb_slot_new(mb_builder *b, int model, int rule, int category, int32_t ref, int32_t dtype,
                const char *name);
int mb_build_lnodes(mb_builder *b, int model);
#define MB_PERSISTENT (1 << 30)
/* scopes.c: storages passed into a module, held until its last node (index into ms->ln) */
typedef struct mb_hold {
  int32_t slot, until;
} mb_hold;
int mb_module_holds(mb_builder *b, int model, mb_hold **out, int32_t *n_out);
/* emit.c */
int mb_emit_step(mb_builder *b);
/* dist.c: FSDP's gathers and reduce-scatters woven into the emitted step */
int mb_dist_fsdp_events(mb_builder *b);
/* dist.c: ZeRO's and FSDP's events woven into the emitted step */
int mb_dist_events(mb_builder *b);
/* dist_accum.c: the trainable initializer whose accumulated .grad event e makes at setup
 * (grad_accumulation > 1), else -1 */
int32_t mb_dist_accum_grad_value(const mb_builder *b, const mb_event_rec *e);
/* dist_zero3.c: ZeRO-3's gathers and releases of each module's parameters (prefetch, max live
 * parameters, reuse distance) woven into the emitted step */
int mb_dist_zero3_events(mb_builder *b);
/* dist_eval.c: an evaluation after a data-parallel step: zero_grad's frees once, FSDP's and
 * ZeRO-3's gathers for its forward */
int mb_dist_eval_events(mb_builder *b);
/* dist.c: what FSDP wraps as units (fsdp_wrap globs, fsdp_wrap_class classes found in the
 * graph: an error names a class no module has); the length of the module path prefix of path
 * that is one unit (0: the root) */
typedef struct mb_wrapset mb_wrapset;
int mb_dist_wrapset_new(const mb_builder *b, mb_wrapset **out);
size_t mb_dist_unit_prefix(const mb_wrapset *ws, const char *path);
void mb_dist_wrapset_free(mb_wrapset *ws);
/* dist.c: FSDP1's flat parameters (a rank's elements of each) in model.parameters() order, at
 * most cap; returns how many (0 without FSDP1): a for-loop optimizer step's temporaries are per
 * FlatParameter */
size_t mb_dist_flat_units(const mb_builder *b, uint64_t *numel, size_t cap);
/* dist_hooks1.c: FSDP1 with forward_prefetch: for each unit the previous one in forward order
 * (forder, n_fwd; fkey: its first forward event) prefetches, the backward event after which its
 * post-backward hook runs (blast: each unit's last backward event); -1 for the other units */
int mb_dist_fsdp1_prefetched_hooks(const mb_builder *b, const int32_t *forder, int32_t n_fwd, const int32_t *fkey,
                                   const int32_t *blast, int32_t *hook, int32_t n_units);
/* dist_mp.c: FSDP mixed precision. The error for what is not modelled (MB_OK otherwise); the
 * dtype gradients are reduce-scattered in (computed: autograd's); bytes of one dtype in another. */
int mb_dist_fsdp_mp_refused(const mb_builder *b);
int mb_dist_grad_dtype(const mb_dist_opts *o, int computed);
uint64_t mb_dist_rebytes(uint64_t bytes, int from, int to);
#endif
