/* Plan building, part one: logical nodes. For each node (or fused pattern) of a model, in
 * order: whether autograd records it, the dtype of every tensor under the precision, the
 * autocast and contiguity copies it makes, the storage of each output (views share their
 * input's), and the storages its backward keeps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/dtype.h"
#include "graph/origin.h"
#include "passes/inference.h"
#include "shape/infer.h"
#include "sim/build.h"
#include "sim/strides.h"
#include "util/glob.h"

#define PERSISTENT MB_PERSISTENT

int mb_slot_new(mb_builder *b, int model, int rule, int category, int32_t ref, int32_t dtype,
                const char *name) {
  mb_plan *p = b->p;
  if (p->n_slots == p->cap_slots) {
    int32_t cap = p->cap_slots ? p->cap_slots * 2 : 1024;
    mb_slot *grown = realloc(p->slots, (size_t)cap * sizeof *grown);
    if (!grown) {
      mb_fail(b->d, MB_E_NOMEM, "out of memory");
      return -1;
    }
    p->slots = grown;
    p->cap_slots = cap;
  }
  mb_slot *sl = &p->slots[p->n_slots];
  memset(sl, 0, sizeof *sl);
  sl->model = model == 1;
  sl->eval = model == MB_MS_EVAL;
  sl->copies = 1;
  sl->rule = (uint8_t)rule;
  sl->category = (uint8_t)category;
  sl->ref = ref;
  sl->ref2 = -1;
  sl->dtype = dtype;
  sl->factor = 1;
  sl->name = name;
  return p->n_slots++;
}

static uint64_t plan_numel(const mb_model_state *ms, int32_t v) {
  if (v < 0 || ms->t[v].rank < 0) return UINT64_MAX;
  return mb_tinfo_numel(&ms->t[v]);
}

static bool is_op(const mb_node *n, const char *op) { return !n->domain[0] && !strcmp(n->op_type, op); }

/* The device dtype of a float tensor under a pure low-precision setup. */
static int32_t device_dtype(const mb_builder *b, int32_t onnx) {
  return b->pure && onnx == MB_DTYPE_FLOAT ? b->low : onnx;
}

/* ---- initializers and graph inputs ---- */

static int category_of_role(int32_t role, int model) {
  if (model == 1) return MB_CAT_TEACHER;
  switch (role) {
    case MB_ROLE_PARAMETER: return MB_CAT_PARAMETER;
    case MB_ROLE_EMBEDDING: return MB_CAT_EMBEDDING;
    default: return MB_CAT_BUFFER;
  }
}

static int bind_leaves(mb_builder *b, int model) {
  mb_model_state *ms = &b->ms[model];
  const mb_graph *g = ms->g;
  int32_t *role = mb_arena_array(&b->a, (size_t)g->n_inits + 1, sizeof(int32_t));
  if (!role) return mb_fail(b->d, MB_E_NOMEM, "out of memory");
  for (int32_t i = 0; i < ms->m->n_all_inits; i++)
    if (ms->m->all_inits[i].graph == g) role[ms->m->all_inits[i].index] = ms->m->all_inits[i].role;
  for (int32_t v = 0; v < g->n_values; v++) {
    const mb_value *val = &g->values[v];
    ms->slot_of[v] = -1;
    if (val->kind == MB_VALUE_INITIALIZER && model == MB_MS_EVAL) { /* the model's own weights */
      const mb_model_state *train = &b->ms[0];
      ms->slot_of[v] = train->slot_of[v];
      ms->rt[v] = train->rt[v];
      ms->rg[v] = train->rg[v]; /* parameters still require grad under no_grad (autocast's cache) */
      ms->trainable_init[v] = train->trainable_init[v];
      ms->host[v] = train->host[v];
    } else if (val->kind == MB_VALUE_INITIALIZER) {
      const mb_const_tensor *ct = &g->inits[val->initializer];
      int32_t r = role[val->initializer];
      ms->rt[v] = device_dtype(b, ct->dtype);
      bool trains = model == 0 && (r == MB_ROLE_PARAMETER || r == MB_ROLE_EMBEDDING) &&
                    mb_trains(&b->step->trains, ct->name);
      ms->rg[v] = ms->trainable_init[v] = trains;
      ms->host[v] = r == MB_ROLE_CONSTANT && ct->numel <= 64;
      bool offloaded = model == 1 && b->step->teacher_offload;
      int rule = ms->host[v] || offloaded ? MB_SZ_ZERO : MB_SZ_FIXED;
      int32_t sl = mb_slot_new(b, model, rule, category_of_role(r, model), v, ms->rt[v], ct->name);
      if (sl < 0) return b->d->status;
      uint64_t bytes = 0;
      mb_dtype_bytes(ms->rt[v], ct->numel, &bytes);
      b->p->slots[sl].fixed = bytes;
      b->p->slots[sl].refs = PERSISTENT;
      b->p->slots[sl].trains = trains;
      ms->slot_of[v] = sl;
    } else if (val->kind == MB_VALUE_INPUT) {
      ms->rt[v] = device_dtype(b, ms->t[v].dtype);
      /* the teacher reads the student's batch; the evaluation has a batch of its own, which its
       * readers reference (emit.c holds it through the forward) */
      int32_t sl = mb_slot_new(b, model, model == 1 ? MB_SZ_ZERO : MB_SZ_VALUE, MB_CAT_INPUT, v,
                               ms->rt[v], val->name);
      if (sl < 0) return b->d->status;
      b->p->slots[sl].refs = model == MB_MS_EVAL ? 0 : PERSISTENT;
      ms->slot_of[v] = sl;
    }
  }
  return MB_OK;
}

/* ---- layout: which views need no copy (sim/strides.h) ---- */

static int32_t node_axis(const mb_node *n, int32_t rank, int64_t dflt) {
  const mb_attr *at = mb_node_attr(n, "axis", MB_ATTR_INT);
  int64_t a = at ? at->i : dflt;
  if (a < 0) a += rank;
  return a >= 0 && a < rank ? (int32_t)a : -1;
}

/* Strides to keep for value o: NULL when contiguous (the common case costs nothing). */
static int64_t *keep_strides(mb_builder *b, const mb_model_state *ms, int32_t o, const int64_t *st) {
  const mb_tinfo *t = &ms->t[o];
  if (!st || t->rank <= 0 || mb_strides_is_contiguous(t->dims, st, t->rank)) return NULL;
  int64_t *k = mb_arena_array(&b->a, (size_t)t->rank, sizeof(int64_t));
  if (k) memcpy(k, st, (size_t)t->rank * sizeof(int64_t));
  return k;
}

static bool is_contiguous(const mb_model_state *ms, int32_t v) {
  return v < 0 || mb_strides_is_contiguous(ms->t[v].dims, ms->strides[v], ms->t[v].rank);
}

/* The strides of view output y of logical node ln (x its input 0) into st; false when no view
 * of x has y's shape: the op copies. */
static bool view_strides(const mb_model_state *ms, const mb_lnode *ln, const mb_node *n, int32_t y,
                         int64_t *st) {
  int32_t x = ln->in[0];
  if (is_op(n, "SequenceAt")) { /* an element of a split: a view of what was split */
    int32_t pn = ms->g->values[x].kind == MB_VALUE_NODE_OUTPUT ? ms->g->values[x].producer : -1;
    if (pn < 0 || !is_op(&ms->g->nodes[pn], "SplitToSequence")) return true;
    x = ms->g->nodes[pn].inputs[0];
  }
  const mb_tinfo *tx = &ms->t[x], *ty = &ms->t[y];
  if (tx->rank < 0 || ty->rank < 0 || tx->rank > 64 || ty->rank > 64) return true;
  int64_t xs[64];
  if (ms->strides[x]) memcpy(xs, ms->strides[x], (size_t)tx->rank * sizeof *xs);
  else mb_strides_contiguous(tx->dims, tx->rank, xs);
  int32_t r = tx->rank;
  if (ln->rule == MB_G_TRANSPOSE || ln->rule == MB_G_TRANSPOSE_LAST2) {
    const mb_attr *at = ln->rule == MB_G_TRANSPOSE ? mb_node_attr(n, "perm", MB_ATTR_INTS) : NULL;
    if (ty->rank != r) return true;
    for (int32_t i = 0; i < r; i++) {
      int64_t q = ln->rule == MB_G_TRANSPOSE_LAST2 ? (i < r - 2 ? i : 2 * r - 3 - i)
                : at && at->n_ints == (uint64_t)r ? at->ints[i] : r - 1 - i;
      st[i] = q >= 0 && q < r ? xs[q] : 0;
    }
    return true;
  }
  if (ln->rule == MB_G_EXPAND) {
    mb_strides_expand(tx->dims, xs, r, ty->dims, ty->rank, st);
    return true;
  }
  /* slices keep the parent's strides (a narrowed view); selects and unbinds drop the axis */
  bool slice = ln->rule == MB_G_SLICE || is_op(n, "SequenceAt");
  if (slice && ty->rank == r) {
    memcpy(st, xs, (size_t)r * sizeof *xs);
    return true;
  }
  if (slice && ty->rank == r - 1) {
    int32_t axis = is_op(n, "Gather") ? node_axis(n, r, 0) : -1;
    if (axis < 0) { /* SequenceAt of an unbind: the axis of the split */
      int32_t sv = ln->in[0];
      int32_t pn = ms->g->values[sv].kind == MB_VALUE_NODE_OUTPUT ? ms->g->values[sv].producer : -1;
      axis = pn >= 0 ? node_axis(&ms->g->nodes[pn], r, 0) : 0;
    }
    for (int32_t i = 0, j = 0; i < r; i++)
      if (i != axis && j < ty->rank) st[j++] = xs[i];
    return true;
  }
  /* reshape, flatten, (un)squeeze, identity: Tensor.view's rule */
  return mb_strides_view(tx->dims, xs, r, ty->dims, ty->rank, st);
}

/* at::matmul folds an operand's leading dims with reshape(): it copies when they cannot merge
 * (a [B, L, H, D] memory read as [B, H, L, D], a narrowed chunk of a fused projection). */
static bool matmul_operand_copies(const mb_model_state *ms, const mb_lnode *ln, int i) {
  int32_t a = ln->in[i], o = ln->in[1 - i];
  if (a < 0 || o < 0 || !ms->strides[a]) return false;
  const mb_tinfo *ta = &ms->t[a];
  int32_t ra = ta->rank, ro = ms->t[o].rank;
  if (ra < 3 || ra > 64) return false;
  int64_t fold[3], st[3];
  int32_t fr;
  if (i == 0 && ro == 2) { /* [..., k] -> [prod(...), k] */
    fold[0] = 1;
    for (int32_t d = 0; d < ra - 1; d++) fold[0] *= ta->dims[d];
    fold[1] = ta->dims[ra - 1];
    fr = 2;
  } else { /* [..., m, k] -> [prod(...), m, k] */
    fold[0] = 1;
    for (int32_t d = 0; d < ra - 2; d++) fold[0] *= ta->dims[d];
    fold[1] = ta->dims[ra - 2];
    fold[2] = ta->dims[ra - 1];
    fr = 3;
  }
  return !mb_strides_view(ta->dims, ms->strides[a], ra, fold, fr, st);
}

/* ---- statistics kept for backward ---- */

static int64_t attr_i(const mb_node *n, const char *name, int64_t dflt) {
  const mb_attr *a = mb_node_attr(n, name, MB_ATTR_INT);
  return a ? a->i : dflt;
}

static const char *attr_s(const mb_node *n, const char *name) {
  const mb_attr *a = mb_node_attr(n, name, MB_ATTR_STRING);
  return a ? a->s : NULL;
}

/* One statistics tensor of a node (half of a pair when `half`). */
static int stats_slot(mb_builder *b, int model, mb_lnode *ln, int stats, bool half) {
  mb_model_state *ms = &b->ms[model];
  const mb_node *n = &ms->g->nodes[ln->node];
  int32_t x = ln->in[0], y = ln->out[0];
  int rule = MB_SZ_VALUE, factor = 1, axis = 0, ref = x;
  int32_t dtype = MB_DTYPE_FLOAT;
  const char *name = "saved statistics";
  int32_t rank = x >= 0 ? ms->t[x].rank : 0;
  switch (stats) {
    case MB_STATS_ROWS2: case MB_STATS_ROWS1: {
      rule = MB_SZ_ROWS;
      factor = stats == MB_STATS_ROWS2 ? 2 : 1;
      int64_t ax = ln->rule == MB_G_LAYERNORM || ln->rule == MB_G_RMSNORM ? attr_i(n, "axis", -1) : -1;
      if (ax < 0) ax += rank;
      axis = ax < 0 ? 0 : (int)ax;
      name = stats == MB_STATS_ROWS2 ? "norm mean and rstd" : "norm rstd";
      break;
    }
    case MB_STATS_CHANNELS2: rule = MB_SZ_CHANNELS; factor = 2; name = "batch norm save_mean and save_invstd"; break;
    case MB_STATS_INSTANCE2: rule = MB_SZ_NC; factor = 2; name = "instance norm statistics"; break;
    case MB_STATS_GROUPS2:
      rule = MB_SZ_NC; factor = 2; name = "group norm mean and rstd";
      if (ln->stats_ref >= 0) ref = ln->stats_ref;
      break;
    case MB_STATS_INDICES_OUT: ref = y; dtype = MB_DTYPE_INT64; name = "max-pool indices"; break;
    case MB_STATS_MASK_IN:
      dtype = b->step->cpu && x >= 0 ? ms->rt[x] : MB_DTYPE_BOOL; /* CPU: the noise, see above */
      name = "dropout mask";
      break;
    case MB_STATS_LSE:
      /* CUDA's memory-efficient kernel (fp32) pads rows to 32; flash (fp16/bf16) and the CPU
       * kernel do not */
      rule = MB_SZ_LSE;
      axis = !b->step->cpu && x >= 0 && ms->rt[x] == MB_DTYPE_FLOAT && ln->in_slot[0] >= 0 &&
             b->p->slots[ln->in_slot[0]].dtype == MB_DTYPE_FLOAT ? 32 : 0;
      name = "attention logsumexp";
      break;
    case MB_STATS_LOGPROB: /* in the dtype the op runs in: its fp32 copy under autocast */
      if (ln->cast_slot[0] >= 0) dtype = b->p->slots[ln->cast_slot[0]].dtype;
      else if (x >= 0) dtype = ms->rt[x];
      name = "log-probabilities (cross-entropy)";
      break;
    case MB_STATS_RNN:
      ref = y; dtype = ms->rt[y];
      factor = is_op(n, "LSTM") ? 4 : is_op(n, "GRU") ? 3 : 1;
      name = "RNN reserve space";
      break;
    default: return -1;
  }
  if (ref < 0) return -1;
  if (half) factor = 1;
  int32_t sl = mb_slot_new(b, model, rule, MB_CAT_ACTIVATION, ref, dtype, name);
  if (sl >= 0) {
    b->p->slots[sl].factor = factor;
    b->p->slots[sl].axis = (int8_t)axis;
  }
  return sl;
}

static void keep(mb_lnode *ln, int32_t slot) {
  if (slot < 0) return;
  for (int32_t i = 0; i < ln->n_saved; i++)
    if (ln->saved[i] == slot) return;
  if (ln->n_saved < MB_LN_MAX_SAVED) ln->saved[ln->n_saved++] = slot;
}

/* ---- one logical node ---- */

static int32_t known_float(const mb_model_state *ms, int32_t v, double *out) {
  if (v < 0 || !ms->t[v].val || ms->t[v].val->count < 1) return 0;
  const mb_small_values *sv = ms->t[v].val;
  *out = sv->is_float ? sv->f[0] : (double)sv->i[0];
  return 1;
}

/* Rule adjustments that depend on the node's inputs, not only its op type, and on the mode:
 * in eval mode (the evaluation's forward) dropout returns its input itself. */
static int refine_rule(const mb_model_state *ms, const mb_node *n, int rule, bool eval) {
  double ratio = -1;
  if (rule == MB_G_DROPOUT && eval) return MB_G_IDENTITY;
  if (rule == MB_G_DROPOUT) {
    if (n->n_inputs > 1 && known_float(ms, n->inputs[1], &ratio) && ratio == 0) return MB_G_IDENTITY;
    if (n->n_inputs > 2 && known_float(ms, n->inputs[2], &ratio) && ratio == 0) return MB_G_IDENTITY;
    if (n->n_inputs == 1 && n->opset < 12) return MB_G_IDENTITY; /* inference-only form */
  }
  /* TorchScript writes scatter (no reduction), scatter_add and PyG's sum/mean aggregation (add),
   * and scatter_reduce's amax/amin/prod (max, min, mul) as ScatterElements */
  if (rule == MB_G_SCATTER) {
    const char *red = attr_s(n, "reduction");
    if (red && !strcmp(red, "add")) return MB_G_SCATTER_ADD;
    if (red && strcmp(red, "none")) return MB_G_SCATTER_REDUCE;
  }
  /* a slice that keeps its whole input: eager indexing returns the tensor itself for a full
   * range (at::indexing::applySlice), and the TorchScript exporter's scatter trims src to the
   * index's shape, which it already has */
  if (rule == MB_G_SLICE && is_op(n, "Slice") && n->n_inputs >= 1 && n->n_outputs >= 1 && n->inputs[0] >= 0 &&
      n->outputs[0] >= 0) {
    const mb_tinfo *x = &ms->t[n->inputs[0]], *y = &ms->t[n->outputs[0]];
    if (x->rank == y->rank && x->rank > 0 && !memcmp(x->dims, y->dims, (size_t)x->rank * sizeof *x->dims))
      return MB_G_IDENTITY;
  }
  if (rule == MB_G_GATHER && n->n_inputs == 2) {
    int32_t data = n->inputs[0], idx = n->inputs[1];
    if (ms->g->values[data].kind != MB_VALUE_INITIALIZER && ms->t[idx].rank == 0) return MB_G_SLICE;
    if (ms->g->values[data].kind != MB_VALUE_INITIALIZER) return MB_G_INDEX1;
  }
  return rule;
}

/* How a new result is laid out: elementwise results like their first full-size input
 * (TensorIterator); CUDA's SDPA kernels write [B, L, H, D] memory and return it as
 * [B, H, L, D], so the transpose(1, 2) after is contiguous; the CPU kernels follow the query's
 * layout; everything else is contiguous. */
static int64_t *result_strides(mb_builder *b, const mb_model_state *ms, const mb_lnode *ln, int32_t o) {
  const mb_tinfo *y = &ms->t[o];
  int64_t st[64];
  if (y->rank <= 1 || y->rank > 64) return NULL;
  bool sdpa = ln->rule == MB_G_FUSED_ATTENTION || ln->rule == MB_G_ATTENTION || ln->rule == MB_G_SDPA;
  if (sdpa && !b->step->cpu && y->rank == 4) {
    static const int32_t blhd[4] = {0, 2, 1, 3};
    mb_strides_dense_order(y->dims, blhd, 4, st);
    return keep_strides(b, ms, o, st);
  }
  bool like_q = sdpa && ln->rule != MB_G_ATTENTION;
  if (!(ln->r->flags & MB_GF_POINTWISE) && !like_q) return NULL;
  for (int32_t i = 0; i < ln->n_in; i++) {
    int32_t v = ln->in[i];
    if (v < 0 || ms->host[v] || ms->t[v].rank != y->rank) continue;
    if (memcmp(ms->t[v].dims, y->dims, (size_t)y->rank * sizeof *y->dims)) continue;
    if (!ms->strides[v]) return NULL;
    mb_strides_dense_like(y->dims, ms->strides[v], y->rank, st);
    return keep_strides(b, ms, o, st);
  }
  return NULL;
}

/* A scatter into a tensor made for it and read by nothing else: eager code fills a fresh
 * zeros tensor in place (PyG's aggregation: src.new_zeros(size).scatter_add_(dim, index, src));
 * the exported graph is functional (ScatterElements makes a new tensor, the zeros die), so
 * the result takes the zeros' storage. */
static bool scatters_in_place(const mb_model_state *ms, const mb_lnode *ln) {
  if (ln->rule != MB_G_SCATTER && ln->rule != MB_G_SCATTER_ADD && ln->rule != MB_G_SCATTER_REDUCE) return false;
  int32_t d = ln->n_in ? ln->in[0] : -1;
  if (d < 0 || ln->in_slot[0] < 0 || ln->cast_slot[0] >= 0 || ms->g->values[d].kind != MB_VALUE_NODE_OUTPUT ||
      ms->g->values[d].num_uses != 1 || ln->n_out < 1 || ln->out[0] < 0)
    return false;
  const mb_tinfo *x = &ms->t[d], *y = &ms->t[ln->out[0]];
  if (x->rank != y->rank || x->dtype != y->dtype || (x->rank > 0 && memcmp(x->dims, y->dims, (size_t)x->rank * sizeof *x->dims)))
    return false;
  int32_t p = ms->g->values[d].producer;
  int32_t gi = ms->fusion.group_of[p];
  if (gi >= 0) return ms->fusion.groups[gi].kind == MB_G_FACTORY;
  return is_op(&ms->g->nodes[p], "ConstantOfShape");
}

/* The per-input and per-output arrays of a logical node, in the builder's arena. */
static int alloc_lnode(mb_builder *b, mb_lnode *ln) {
  mb_arena *a = &b->a;
  ln->in_slot = mb_arena_array(a, (size_t)ln->n_in + 1, sizeof(int32_t));
  ln->cast_slot = mb_arena_array(a, (size_t)ln->n_in + 1, sizeof(int32_t));
  ln->src_slot = mb_arena_array(a, (size_t)ln->n_in + 1, sizeof(int32_t));
  ln->out_slot = mb_arena_array(a, (size_t)ln->n_out + 1, sizeof(int32_t));
  ln->out_new = mb_arena_array(a, (size_t)ln->n_out + 1, sizeof(bool));
  if (!ln->in_slot || !ln->cast_slot || !ln->src_slot || !ln->out_slot || !ln->out_new)
    return mb_fail(b->d, MB_E_NOMEM, "out of memory");
  ln->stats_slot[0] = ln->stats_slot[1] = -1;
  ln->ws_slot[0] = ln->ws_slot[1] = ln->ws_slot[2] = -1;
  ln->r = mb_grad_rule_of(ln->rule);
  return MB_OK;
}

/* Host values: shape arithmetic and Python scalars live on the CPU in PyTorch. */
static bool runs_on_host(const mb_model_state *ms, const mb_node *n, const mb_lnode *ln) {
  bool all_host = true, any_in = false;
  for (int32_t i = 0; i < ln->n_in; i++)
    if (ln->in[i] >= 0) {
      any_in = true;
      all_host &= ms->host[ln->in[i]];
    }
  bool host_op = is_op(n, "Shape") || is_op(n, "Size");
  bool small_out = ln->n_out >= 1 && ln->out[0] >= 0 && plan_numel(ms, ln->out[0]) <= 64;
  return host_op || (is_op(n, "Constant") && small_out) || (any_in && all_host && small_out);
}

/* Does autograd record it? Some float input requires grad, and the op is differentiable and
 * not run on a detached tensor. */
static bool autograd_records(const mb_model_state *ms, const mb_lnode *ln) {
  bool record = false;
  for (int32_t i = 0; i < ln->n_in; i++) {
    int32_t v = ln->in[i];
    if (v >= 0 && ms->rg[v] && mb_dtype_is_float(ms->t[v].dtype)) record = true;
  }
  return record && !(ln->r->flags & MB_GF_NONDIFF) && !ln->detached;
}

/* Input i read through a fresh copy of dtype (or layout) `dtype`: the node reads the copy,
 * made from the storage it read before. */
static int copy_input(mb_builder *b, int model, mb_lnode *ln, int32_t i, int32_t dtype, const char *why) {
  int32_t c = mb_slot_new(b, model, MB_SZ_VALUE, MB_CAT_TEMPORARY, ln->in[i], dtype, why);
  if (c < 0) return b->d->status;
  ln->src_slot[i] = ln->in_slot[i];
  ln->in_slot[i] = ln->cast_slot[i] = c;
  return MB_OK;
}

/* Autocast casts input i of a node to `want`. A trainable weight's cast is cached until
 * autocast exits: one copy per weight, made by the first node that reads it. */
static int autocast_input(mb_builder *b, int model, mb_lnode *ln, int32_t i, int32_t want, wcache *wc,
                          int32_t *n_wc) {
  const mb_model_state *ms = &b->ms[model];
  int32_t v = ln->in[i];
  int32_t src = ms->slot_of[v];
  bool cached = want == b->low && ms->rg[v] && src >= 0 && b->p->slots[src].refs == PERSISTENT;
  if (!cached) return copy_input(b, model, ln, i, want, "autocast copy");
  int32_t k = 0;
  while (k < *n_wc && wc[k].weight_slot != src) k++;
  if (k == *n_wc) {
    int32_t c = mb_slot_new(b, model, MB_SZ_VALUE, MB_CAT_TEMPORARY, v, want, "autocast weight copy");
    if (c < 0) return b->d->status;
    wc[k].weight_slot = src;
    wc[k].copy_slot = c;
    b->p->slots[c].refs = 1; /* held until autocast exits (emit.c) */
    ln->cast_slot[i] = c;
    (*n_wc)++;
  }
  ln->in_slot[i] = wc[k].copy_slot;
  return MB_OK;
}

/* The storage each input is read from, and the dtype of float results under the precision
 * (*out_float): the first float input's, the low dtype of a pure fp16/bf16 setup, or under
 * autocast what the op's autocast rule casts its inputs to (making the casts); an op autocast
 * leaves alone promotes as PyTorch's result_type does, where a float tensor with dimensions
 * wins over a zero-dim one or a Python scalar (TypeProperties.cpp, combine_categories of
 * dimResult over zeroResult and wrappedResult): GPT-2's 0.5 * x keeps bf16 x bf16, though the
 * exporter writes the 0.5 as an fp32 zero-dim constant. */
static int cast_inputs(mb_builder *b, int model, mb_lnode *ln, bool host, wcache *wc, int32_t *n_wc,
                       int32_t *out_float) {
  const mb_model_state *ms = &b->ms[model];
  const mb_grad_rule *r = ln->r;
  int32_t widest = 0, widest_scalar = 0, first_float = 0;
  for (int32_t i = 0; i < ln->n_in; i++) {
    int32_t v = ln->in[i];
    ln->in_slot[i] = v >= 0 ? ms->slot_of[v] : -1;
    ln->cast_slot[i] = ln->src_slot[i] = -1;
    if (v < 0 || !mb_dtype_is_float(ms->rt[v])) continue;
    if (!first_float) first_float = ms->rt[v];
    int32_t *w = ms->t[v].rank == 0 ? &widest_scalar : &widest;
    if (!*w || mb_dtype_bits(ms->rt[v]) > mb_dtype_bits(*w)) *w = ms->rt[v];
  }
  if (!widest) widest = widest_scalar;
  *out_float = first_float ? first_float : MB_DTYPE_FLOAT;
  if (b->pure) *out_float = b->low;
  if (!b->amp || host) return MB_OK;
  int32_t want = r->amp == MB_AMP_LOW ? b->low : r->amp == MB_AMP_FP32 ? MB_DTYPE_FLOAT : 0;
  if (r->amp == MB_AMP_PROMOTE && widest) *out_float = widest;
  if (!want) return MB_OK;
  *out_float = want;
  for (int32_t i = 0; i < ln->n_in; i++) {
    int32_t v = ln->in[i];
    if (v < 0 || !mb_dtype_is_float(ms->rt[v]) || ms->rt[v] == want || ms->host[v]) continue;
    if (autocast_input(b, model, ln, i, want, wc, n_wc) != MB_OK) return b->d->status;
  }
  return MB_OK;
}

/* at::matmul's reshape copies permuted operands whose leading dims cannot merge. */
static int matmul_copies(mb_builder *b, int model, mb_lnode *ln) {
  const mb_model_state *ms = &b->ms[model];
  if (!(ln->r->flags & MB_GF_MATMUL)) return MB_OK;
  for (int i = 0; i < 2 && i < ln->n_in; i++)
    if (ln->cast_slot[i] < 0 && matmul_operand_copies(ms, ln, i) &&
        copy_input(b, model, ln, i, ms->rt[ln->in[i]], "matmul contiguous copy") != MB_OK)
      return b->d->status;
  return MB_OK;
}

/* The storage of each output: a view shares its input's (with the strides the view has), batch
 * norm's running statistics are updated in place, a scatter into a fresh zeros tensor fills it;
 * everything else allocates. Sets each output's device dtype, requires-grad and host flags. */
static int bind_outputs(mb_builder *b, int model, mb_lnode *ln, bool host, int32_t out_float) {
  mb_model_state *ms = &b->ms[model];
  const mb_graph *g = ms->g;
  const mb_node *n = &g->nodes[ln->node];
  const mb_grad_rule *r = ln->r;
  bool view = (r->flags & MB_GF_VIEW) != 0;
  int64_t vst[64];
  bool reshape_copy = false;
  if (view && ln->in[0] >= 0 && ln->out[0] >= 0 && ms->t[ln->out[0]].rank <= 64)
    reshape_copy = !view_strides(ms, ln, n, ln->out[0], vst) && (r->flags & MB_GF_RESHAPE);
  /* .contiguous(): a copy exactly when the input is not laid out contiguously */
  if (ln->rule == MB_G_CONTIGUOUS && ln->in[0] >= 0) reshape_copy = !is_contiguous(ms, ln->in[0]);
  /* a cast to the dtype a tensor has is the tensor itself; not when the cast ends a fused op
   * (new_zeros as ConstantOfShape + CastLike: a fresh tensor) */
  if ((is_op(n, "Cast") || is_op(n, "CastLike")) && ln->rule == MB_G_CAST) {
    int32_t to = ln->out[0] >= 0 ? device_dtype(b, ms->t[ln->out[0]].dtype) : 0;
    if (b->pure && to == MB_DTYPE_FLOAT) to = b->low;
    if (ln->in[0] >= 0 && to == ms->rt[ln->in[0]]) {
      view = true;
      if (ln->out[0] >= 0 && ms->t[ln->out[0]].rank <= 64) view_strides(ms, ln, n, ln->out[0], vst);
    }
    out_float = to;
  }
  for (int32_t j = 0; j < ln->n_out; j++) {
    int32_t o = ln->out[j];
    ln->out_slot[j] = -1;
    ln->out_new[j] = false;
    if (o < 0) continue;
    int32_t od = ms->t[o].dtype;
    ms->rt[o] = mb_dtype_is_float(od) ? out_float : od;
    /* CPU dropout multiplies by a noise tensor of the input's dtype where CUDA's
     * native_dropout keeps a bool mask; that noise is what backward keeps */
    if (j == 1 && ln->rule == MB_G_DROPOUT && b->step->cpu && ln->in[0] >= 0) ms->rt[o] = ms->rt[ln->in[0]];
    ms->rg[o] = ln->record && mb_dtype_is_float(od);
    ms->host[o] = host;
    if (j == 0 && scatters_in_place(ms, ln)) {
      ms->slot_of[o] = ln->in_slot[0]; /* x.new_zeros(size).scatter_add_(dim, index, src) */
    } else if (view && !reshape_copy && ln->in_slot[0] >= 0 && !host) {
      ms->slot_of[o] = ln->in_slot[0];
      ms->rt[o] = ln->in[0] >= 0 ? ms->rt[ln->in[0]] : ms->rt[o];
      /* a split's parts are narrowed views like its first; a sequence keeps its source's */
      int64_t pst[64];
      if (j == 0) ms->strides[o] = keep_strides(b, ms, o, vst);
      else if (ms->t[o].rank <= 64 && view_strides(ms, ln, n, o, pst)) ms->strides[o] = keep_strides(b, ms, o, pst);
    } else if ((r->flags & MB_GF_BN) && j >= 1 && j + 2 < ln->n_in && ln->in[j + 2] >= 0) {
      ms->slot_of[o] = ms->slot_of[ln->in[j + 2]]; /* running stats updated in place */
      ms->rg[o] = false;
    } else {
      int32_t sl = mb_slot_new(b, model, host ? MB_SZ_ZERO : MB_SZ_VALUE,
                               model == 1 ? MB_CAT_TEMPORARY : MB_CAT_ACTIVATION, o, ms->rt[o],
                               g->values[o].name);
      if (sl < 0) return b->d->status;
      ms->slot_of[o] = sl;
      ln->out_new[j] = true;
      if (j == 0) ms->strides[o] = result_strides(b, ms, ln, o);
    }
    ln->out_slot[j] = ms->slot_of[o];
  }
  return MB_OK;
}

/* What backward keeps of a recorded node: the inputs and outputs its autograd rule saves, and
 * the statistics it computes for backward. A failure to make a statistics slot is left in the
 * builder's status (mb_plan_build reads it). */
static void keep_for_backward(mb_builder *b, int model, mb_lnode *ln) {
  const mb_model_state *ms = &b->ms[model];
  const mb_grad_rule *r = ln->r;
  for (int32_t i = 0; i < ln->n_in && i < 4; i++) {
    int32_t v = ln->in[i];
    if (v < 0 || ms->host[v]) continue;
    bool other = false;
    for (int32_t j = 0; j < ln->n_in; j++)
      if (j != i && ln->in[j] >= 0 && ms->rg[ln->in[j]]) other = true;
    if (r->save_in[i] == MB_SAVE_YES || (r->save_in[i] == MB_SAVE_IF_OTHER && other)) keep(ln, ln->in_slot[i]);
  }
  for (int32_t j = 0; j < ln->n_out && j < 8; j++)
    if ((r->save_out >> j) & 1) keep(ln, ln->out_slot[j]);
  for (int32_t k = 0; k < ln->n_saved; k++) /* a kept copy of an activation is an activation */
    for (int32_t i = 0; i < ln->n_in; i++)
      if (ln->saved[k] == ln->cast_slot[i] && ln->src_slot[i] >= 0) b->p->slots[ln->saved[k]].category = MB_CAT_ACTIVATION;
  int stats = r->stats;
  if (ln->rule == MB_G_DROPOUT && (ln->n_out < 2 || ln->out[1] < 0)) stats = MB_STATS_MASK_IN;
  if (ln->rule == MB_G_CROSS_ENTROPY && (ln->n_out < 2 || ln->out[1] < 0)) stats = MB_STATS_LOGPROB;
  if (!stats) return;
  /* norms keep their two statistics (mean and rstd) as two tensors */
  bool two = stats == MB_STATS_ROWS2 || stats == MB_STATS_CHANNELS2 || stats == MB_STATS_INSTANCE2 ||
             stats == MB_STATS_GROUPS2;
  for (int k = 0; k < (two ? 2 : 1); k++) {
    ln->stats_slot[k] = stats_slot(b, model, ln, stats, two);
    keep(ln, ln->stats_slot[k]);
  }
}

/* Forward references: each node reads each of its input storages once, and the storages its
 * copies were made from. Which read is a storage's first in the node is kept for the emitter
 * (ln->first_read), found with a stamp per slot: linear in the node's inputs. */
static int count_reads(mb_builder *b, mb_lnode *ln) {
  int32_t n = 2 * ln->n_in;
  ln->first_read = mb_arena_array(&b->a, (size_t)n + 1, 1);
  if (!ln->first_read) return mb_fail(b->d, MB_E_NOMEM, "out of memory");
  if (b->stamp_cap < b->p->n_slots) {
    int32_t cap = b->p->n_slots * 2 + 64;
    uint32_t *grown = realloc(b->read_stamp, (size_t)cap * sizeof *grown);
    if (!grown) return mb_fail(b->d, MB_E_NOMEM, "out of memory");
    memset(grown + b->stamp_cap, 0, (size_t)(cap - b->stamp_cap) * sizeof *grown);
    b->read_stamp = grown;
    b->stamp_cap = cap;
  }
  if (++b->stamp_gen == 0) { /* wrapped: every stamp is stale again */
    memset(b->read_stamp, 0, (size_t)b->stamp_cap * sizeof *b->read_stamp);
    b->stamp_gen = 1;
  }
  for (int32_t i = 0; i < n; i++) {
    int32_t sl = mb_lnode_read(ln, i);
    bool first = sl >= 0 && b->read_stamp[sl] != b->stamp_gen;
    ln->first_read[i] = first;
    if (sl >= 0) b->read_stamp[sl] = b->stamp_gen;
    if (first && b->p->slots[sl].refs != PERSISTENT) b->p->slots[sl].refs++;
  }
  return MB_OK;
}

/* cuDNN's convolution workspaces. With benchmark off, PyTorch runs the first execution plan of
 * cuDNN's heuristic list that works and allocates exactly plan.getWorkspaceSize() bytes from the
 * caching allocator for the call, freed when the call returns (Conv_v8.cpp: run_single_conv,
 * try_configs, run_conv_plan); a zero size makes no request. A trained convolution makes three
 * calls: forward, backward-data (when its input needs a grad) and backward-filter (when its
 * weight trains). The size is cuDNN's heuristic's, not PyTorch's arithmetic; measured on the
 * H100 and the H200 (cuDNN 9.19, torch 2.11: the snapshots in bench/truth/results), the calls
 * ask for about input + output + weight bytes in the call's dtype, +16 (77 of 231 exactly, the
 * rest around it: 0 for some 1x1 convolutions, 8 x weight for some backward-filter calls), and
 * with that rule the largest batches' phase peaks of ResNet-18, ResNet-50 and the UNet come out
 * within 0.1%. Depthwise convolutions take PyTorch's own kernel (no cuDNN call, no workspace);
 * cudnn_workspace caps each call (0: no workspace). */
static int conv_workspaces(mb_builder *b, int model, mb_lnode *ln, const mb_node *n) {
  const mb_model_state *ms = &b->ms[model];
  if (b->step->cpu || !b->step->cudnn_workspace || n->domain[0] || (!is_op(n, "Conv") && !is_op(n, "ConvTranspose")))
    return MB_OK;
  int32_t x = ln->n_in > 0 ? ln->in[0] : -1, w = ln->n_in > 1 ? ln->in[1] : -1, y = ln->n_out > 0 ? ln->out[0] : -1;
  if (x < 0 || w < 0 || y < 0 || ms->t[x].rank < 3 || ms->t[w].rank < 3) return MB_OK;
  int64_t group = attr_i(n, "group", 1);
  if (group > 1 && group == ms->t[x].dims[1]) return MB_OK; /* depthwise: PyTorch's own kernel */
  int32_t dtype = ln->in_slot[0] >= 0 ? b->p->slots[ln->in_slot[0]].dtype : ms->rt[x];
  uint64_t wbytes = 0;
  if (mb_dtype_bytes(dtype, mb_tinfo_numel(&ms->t[w]), &wbytes) != MB_OK) return MB_OK;
  static const char *const names[3] = {"cuDNN workspace (forward)", "cuDNN workspace (backward data)",
                                       "cuDNN workspace (backward filter)"};
  bool calls[3] = {true, ln->record && ms->rg[x], ln->record && ms->rg[w]};
  for (int k = 0; k < 3; k++) {
    if (!calls[k]) continue;
    int32_t sl = mb_slot_new(b, model, MB_SZ_CONV_WS, MB_CAT_TEMPORARY, y, dtype, names[k]);
    if (sl < 0) return b->d->status;
    b->p->slots[sl].ref2 = x;
    b->p->slots[sl].fixed = wbytes + 16;
    ln->ws_slot[k] = sl;
  }
  return MB_OK;
}

/* One logical node, in the order PyTorch meets it: where it runs, whether autograd records
 * it, the copies its inputs go through, its outputs' storages, what backward keeps of it, and
 * the reads that hold its inputs alive. */
static int build_one(mb_builder *b, int model, mb_lnode *ln, wcache *wc, int32_t *n_wc) {
  mb_model_state *ms = &b->ms[model];
  const mb_node *n = &ms->g->nodes[ln->node];
  if (alloc_lnode(b, ln) != MB_OK) return b->d->status;
  bool host = runs_on_host(ms, n, ln);
  ln->record = autograd_records(ms, ln) && model == 0;
  int32_t out_float;
  if (cast_inputs(b, model, ln, host, wc, n_wc, &out_float) != MB_OK || matmul_copies(b, model, ln) != MB_OK ||
      bind_outputs(b, model, ln, host, out_float) != MB_OK)
    return b->d->status;
  if (ln->record) keep_for_backward(b, model, ln);
  if (!host && conv_workspaces(b, model, ln, n) != MB_OK) return b->d->status;
  return count_reads(b, ln);
}

/* A value computed from a Bernoulli draw alone (through casts and scalings): dropout or
 * stochastic depth written out, as torchvision's stochastic_depth and timm's drop_path are
 * (torch.empty(...).bernoulli_(keep).div_(keep)). */
static bool from_bernoulli(const mb_model_state *ms, int32_t v, int depth) {
  if (v < 0 || depth > 8 || ms->g->values[v].kind != MB_VALUE_NODE_OUTPUT) return false;
  const mb_node *n = &ms->g->nodes[ms->g->values[v].producer];
  if (is_op(n, "Bernoulli") || (n->origin.aten && !strncmp(n->origin.aten, "aten.bernoulli", 14))) return true;
  if (!is_op(n, "Cast") && !is_op(n, "CastLike") && !is_op(n, "Div") && !is_op(n, "Mul")) return false;
  bool any = false;
  for (int32_t i = 0; i < (is_op(n, "CastLike") ? 1 : n->n_inputs); i++) {
    int32_t u = n->inputs[i];
    if (u < 0) continue;
    if (from_bernoulli(ms, u, depth + 1)) any = true;
    else if (ms->g->values[u].kind != MB_VALUE_INITIALIZER && !ms->host[u] && !ms->t[u].val) return false;
  }
  return any;
}

/* In eval mode such code returns its input (`if not training: return input`): the draw is
 * not made, and the product of a tensor and the draw is the tensor itself. */
static bool eval_skips_draw(const mb_model_state *ms, const mb_node *n) {
  if (n->n_outputs < 1) return false;
  for (int32_t j = 0; j < n->n_outputs; j++) {
    int32_t o = n->outputs[j];
    if (o < 0) continue;
    for (int32_t i = 0; i < ms->g->n_outputs; i++)
      if (ms->g->outputs[i] == o) return false;
    if (!from_bernoulli(ms, o, 0)) return false;
  }
  return true;
}

/* The operand a product with a draw keeps in eval mode, or -1. */
static int32_t eval_skips_mask(const mb_model_state *ms, const mb_node *n) {
  if (!is_op(n, "Mul") || n->n_inputs != 2 || n->inputs[0] < 0 || n->inputs[1] < 0) return -1;
  bool r0 = from_bernoulli(ms, n->inputs[0], 0), r1 = from_bernoulli(ms, n->inputs[1], 0);
  return r0 == r1 ? -1 : r0 ? n->inputs[1] : n->inputs[0];
}

static bool if_aliases(const mb_graph *g, const mb_node *n) {
  if (!is_op(n, "If") || n->n_outputs < 1) return false;
  for (int32_t j = 0; j < n->n_outputs; j++)
    if (n->outputs[j] < 0 || mb_if_alias(g, n, j) < 0) return false;
  return true;
}

/* Activation checkpointing: a node belongs to the segment of the outermost module it runs in
 * that a checkpoint glob names. A glob names a module by its PyTorch path ("model.layers.*",
 * "encoder.layer.3") or, starting with '/', by the scope form of TorchScript node names
 * ("/layers.*"). key receives the module's scope prefix. */
static int segment_key(const mb_builder *b, const char *scope, char *key, size_t size) {
  if (!scope || scope[0] != '/' || !b->step->n_checkpoint) return 0;
  size_t end = (size_t)(strrchr(scope, '/') - scope);
  for (size_t i = 1; i <= end && i < size; i++) {
    if (scope[i] != '/') continue;
    memcpy(key, scope, i);
    key[i] = '\0';
    char dotted[512];
    bool have_dotted = mb_origin_module_of_scope(scope, i, dotted, sizeof dotted);
    for (size_t k = 0; k < b->step->n_checkpoint; k++) {
      const char *glob = b->step->checkpoint[k];
      if (glob[0] == '/' ? mb_glob_match(glob, key) : have_dotted && mb_glob_match(glob, dotted)) return 1;
    }
  }
  return 0;
}

static void assign_segments(mb_builder *b, mb_model_state *ms) {
  char key[512], prev[512] = "";
  int32_t seg = -1;
  for (int32_t i = 0; i < ms->n_ln; i++) {
    mb_lnode *ln = &ms->ln[i];
    ln->segment = -1;
    if (segment_key(b, ms->g->nodes[ln->node].origin.scope, key, sizeof key)) {
      if (seg < 0 || strcmp(key, prev)) {
        seg = b->n_segments++;
        snprintf(prev, sizeof prev, "%s", key);
      }
      ln->segment = seg;
    } else if (ln->record) {
      seg = -1; /* a recorded node outside: the segment ends */
    } else if (seg >= 0) {
      ln->segment = -2; /* inside a run, not part of it */
    }
  }
  for (int32_t i = 0; i < ms->n_ln; i++)
    if (ms->ln[i].segment == -2) ms->ln[i].segment = -1;
}

int mb_build_lnodes(mb_builder *b, int model) {
  mb_model_state *ms = &b->ms[model];
  const mb_graph *g = ms->g;
  size_t nv = (size_t)g->n_values + 1;
  ms->slot_of = mb_arena_array(&b->a, nv, sizeof(int32_t));
  ms->rt = mb_arena_array(&b->a, nv, sizeof(int32_t));
  ms->rg = mb_arena_array(&b->a, nv, sizeof(bool));
  ms->host = mb_arena_array(&b->a, nv, sizeof(bool));
  ms->trainable_init = mb_arena_array(&b->a, nv, sizeof(bool));
  ms->strides = mb_arena_array(&b->a, nv, sizeof(int64_t *));
  int32_t n_if_out = 0;
  for (int32_t k = 0; k < g->n_nodes; k++)
    if (is_op(&g->nodes[k], "If")) n_if_out += g->nodes[k].n_outputs;
  ms->ln = mb_arena_array(&b->a, (size_t)g->n_nodes + (size_t)n_if_out + 1, sizeof(mb_lnode));
  wcache *wc = ms->wc = mb_arena_array(&b->a, (size_t)g->n_inits + 1, sizeof(wcache));
  if (!ms->slot_of || !ms->rt || !ms->rg || !ms->host || !ms->trainable_init || !ms->strides || !ms->ln || !wc)
    return mb_fail(b->d, MB_E_NOMEM, "out of memory");
  mb_fuse_options fo = {.fuse_attention = b->step->attention != MB_ATTENTION_EAGER,
                        .sdpa_signature_only = b->step->attention == MB_ATTENTION_AUTO,
                        .transformers_eager = !b->step->transformers_as_exported, .cpu = b->step->cpu};
  if (mb_fuse(g, ms->t, &fo, &b->a, &ms->fusion) != MB_OK)
    return mb_fail(b->d, MB_E_NOMEM, "out of memory");
  if (bind_leaves(b, model) != MB_OK) return b->d->status;
  for (int32_t k = 0; k < g->n_nodes; k++) {
    const mb_node *n = &g->nodes[k];
    int32_t gi = ms->fusion.group_of[k];
    if (ms->fusion.dead && ms->fusion.dead[k]) continue;
    if (model == MB_MS_EVAL && (gi < 0 || ms->fusion.groups[gi].last == k) && eval_skips_draw(ms, n)) continue;
    mb_lnode *ln = &ms->ln[ms->n_ln];
    memset(ln, 0, sizeof *ln);
    ln->node = k;
    ln->stats_ref = -1;
    if (gi >= 0) {
      const mb_fused *f = &ms->fusion.groups[gi];
      if (f->last != k) continue;
      ln->rule = f->kind;
      ln->n_in = f->n_in;
      ln->in = f->in;
      ln->n_out = 1;
      ln->out = &f->out;
      ln->stats_ref = f->stats_ref;
    } else if (if_aliases(g, n)) {
      /* an If whose branches only reshape outer tensors (TorchScript's indexing): each output
       * is a view of the tensor it passes on */
      for (int32_t j = 0; j < n->n_outputs; j++) {
        ln = &ms->ln[ms->n_ln];
        memset(ln, 0, sizeof *ln);
        int32_t *src = mb_arena_array(&b->a, 1, sizeof(int32_t));
        if (!src) return mb_fail(b->d, MB_E_NOMEM, "out of memory");
        *src = mb_if_alias(g, n, j);
        *ln = (mb_lnode){.node = k, .rule = MB_G_RESHAPE, .n_in = 1, .in = src, .n_out = 1, .out = &n->outputs[j],
                         .stats_ref = -1};
        if (build_one(b, model, ln, wc, &ms->n_wc) != MB_OK) return b->d->status;
        ms->n_ln++;
      }
      continue;
    } else if (model == MB_MS_EVAL && eval_skips_mask(ms, n) >= 0) {
      int32_t *src = mb_arena_array(&b->a, 1, sizeof(int32_t));
      if (!src) return mb_fail(b->d, MB_E_NOMEM, "out of memory");
      *src = eval_skips_mask(ms, n);
      *ln = (mb_lnode){.node = k, .rule = MB_G_IDENTITY, .n_in = 1, .in = src, .n_out = 1, .out = &n->outputs[0],
                       .stats_ref = -1};
    } else {
      ln->rule = refine_rule(ms, n, n->op ? n->op->grad : MB_G_DEFAULT, model == MB_MS_EVAL);
      ln->detached = ms->fusion.detached && ms->fusion.detached[k];
      /* CastLike's second input only names the dtype: not read, not kept, no gradient path */
      ln->n_in = is_op(n, "CastLike") && n->n_inputs > 1 ? 1 : n->n_inputs;
      ln->in = n->inputs;
      ln->n_out = n->n_outputs;
      ln->out = n->outputs;
    }
    if (build_one(b, model, ln, wc, &ms->n_wc) != MB_OK) return b->d->status;
    ms->n_ln++;
  }
  if (model == 0) assign_segments(b, ms);
  return MB_OK;
}

/* ---- the plan ---- */

/* A graph that records the aten op of each node (torch 2.x's dynamo exporter) shows every
 * copy PyTorch made (.contiguous() is an aten.clone); a TorchScript graph does not. */
static bool records_aten_ops(const mb_graph *g) {
  for (int32_t k = 0; k < g->n_nodes; k++)
    if (g->nodes[k].origin.fx) return true;
  return false;
}

static int shapes_for_plan(mb_builder *b, int model) {
  mb_model_state *ms = &b->ms[model];
  /* batch 2: structure decisions (broadcasts, views) must not see batch-1 coincidences. A
   * budget at batch 1 of a graph that records its copies is planned at batch 1: PyTorch sees
   * the coincidences too (a size-1 batch dim merges with any other, so at::matmul folds a
   * transposed [1, H, L, D] without a copy). A TorchScript graph hides .contiguous() calls
   * (nn.MultiheadAttention's in torch 1.13 copy at batch 1 too), so batch 2 stays its plan.
   * A graph-size table of one graph allows no batch of two. */
  int64_t batch = b->step->batch_max < 2 || mb_batching_limit(b->step->shapes.batching) < 2 ||
                  (b->step->batch == 1 && records_aten_ops(ms->m->graph)) ? 1 : 2;
  if (model == 0) b->batch = batch;
  if (mb_shapes_run(ms->m, &b->step->shapes, batch, &ms->shapes) != MB_OK)
    return mb_fail(b->d, mb_shapes_status(ms->shapes), "%s%s", model ? "teacher: " : "",
                   mb_shapes_errmsg(ms->shapes));
  ms->g = ms->m->graph;
  ms->t = mb_shapes_tinfo(ms->shapes);
  return MB_OK;
}

/* The evaluation's forward is planned at its own batch (batch 1 of a graph that records its
 * copies at 1, as the training plan is), or shares the training plan's shapes when it runs at
 * the training batch. */
static int shapes_for_eval(mb_builder *b) {
  mb_model_state *ms = &b->ms[MB_MS_EVAL], *train = &b->ms[0];
  ms->m = train->m;
  ms->g = train->g;
  int64_t eb = b->step->eval.batch;
  if (eb < 0) {
    ms->t = train->t;
    return MB_OK;
  }
  int64_t batch =
      (eb == 1 && records_aten_ops(ms->m->graph)) || mb_batching_limit(b->step->shapes.batching) < 2 ? 1 : 2;
  if (mb_shapes_run(ms->m, &b->step->shapes, batch, &ms->shapes) != MB_OK)
    return mb_fail(b->d, mb_shapes_status(ms->shapes), "evaluation: %s", mb_shapes_errmsg(ms->shapes));
  ms->t = mb_shapes_tinfo(ms->shapes);
  return MB_OK;
}

/* Options that need another one to mean anything. */
static int check_eval_options(const mb_step *step, mb_diag *d) {
  const mb_eval_opts *e = &step->eval;
  if (!e->batch && e->ema_swap)
    return mb_fail(d, MB_E_INVALID_ARG, "ema_swap swaps the EMA weights in for an evaluation: give one with "
                   "eval_batch (--eval-batch N, or train for the training batch)");
  if (!e->batch && e->keep_outputs)
    return mb_fail(d, MB_E_INVALID_ARG, "eval_keep_outputs keeps an evaluation's outputs: give one with "
                   "eval_batch (--eval-batch N, or train for the training batch)");
  if (e->ema_swap && !step->ema)
    return mb_fail(d, MB_E_INVALID_ARG, "ema_swap needs EMA weights to swap in: set ema (--ema)");
  if (e->teacher_cache && !step->teacher)
    return mb_fail(d, MB_E_INVALID_ARG, "teacher_cache keeps a teacher's outputs: give a teacher (--teacher)");
  return MB_OK;
}

static int choose_loss(mb_builder *b) {
  const mb_model_state *ms = &b->ms[0];
  const mb_graph *g = ms->g;
  b->loss_out = -1;
  for (int32_t i = 0; i < g->n_outputs && b->loss_out < 0; i++)
    if (mb_dtype_is_float(ms->t[g->outputs[i]].dtype) && ms->t[g->outputs[i]].rank >= 0) b->loss_out = g->outputs[i];
  if (b->loss_out < 0)
    return mb_fail(b->d, MB_E_UNSUPPORTED, "the model has no floating-point output for a loss to read");
  const mb_tinfo *y = &ms->t[b->loss_out];
  const char *name = g->values[b->loss_out].name;
  b->loss = b->step->loss;
  if (b->loss == MB_LOSS_AUTO) b->loss = mb_tinfo_numel(y) <= 1 ? MB_LOSS_NONE : MB_LOSS_CE;
  b->p->loss_in_graph = b->loss == MB_LOSS_NONE;
  if (b->loss == MB_LOSS_NONE && mb_tinfo_numel(y) > 1)
    return mb_fail(b->d, MB_E_INVALID_ARG,
                   "loss none: output '%s' is not a scalar loss (it has %llu elements); use --loss ce or mse",
                   name, (unsigned long long)mb_tinfo_numel(y));
  b->class_axis = (int8_t)(y->rank <= 1 ? 0 : y->rank == 3 ? 2 : 1);
  if (b->loss == MB_LOSS_CE)
    snprintf(b->p->note, sizeof b->p->note,
             "loss: cross-entropy on output '%s', classes on axis %d", name, (int)b->class_axis);
  else if (b->loss == MB_LOSS_MSE)
    snprintf(b->p->note, sizeof b->p->note, "loss: MSE on output '%s'", name);
  else
    snprintf(b->p->note, sizeof b->p->note, "loss: output '%s' is the loss", name);
  return MB_OK;
}

/* A graph exported for inference is not a training step: say what was found and how to export
 * one, unless the caller accepts the graph as it is. */
static int refuse_inference_graph(const mb_model *m, const mb_step *step, mb_diag *d) {
  if (!m->n_inference_signs || step->accept_inference_graph) return MB_OK;
  char found[1024];
  mb_inference_signs_describe(m, found, sizeof found);
  return mb_fail(d, MB_E_UNSUPPORTED,
                 "this graph was exported for inference, not training: %s. Export a training graph "
                 "(the model in train() mode; torch.onnx.export(..., dynamo=True, optimize=False), or "
                 "training=TrainingMode.TRAINING with the TorchScript exporter), or estimate it as it is "
                 "with accept_inference_graph (--accept-inference-graph)", found);
}

int mb_plan_build(const mb_model *m, const mb_step *step, mb_plan **out, mb_diag *d) {
  *out = NULL;
  if (refuse_inference_graph(m, step, d) != MB_OK || mb_shapes_check_sample_dims(m, &step->shapes, d) != MB_OK ||
      check_eval_options(step, d) != MB_OK)
    return d->status;
  mb_plan *p = calloc(1, sizeof *p);
  if (!p) return mb_fail(d, MB_E_NOMEM, "out of memory");
  mb_builder b = {.p = p, .step = step, .d = d};
  mb_arena_init(&b.a);
  int prec = b.step->precision;
  b.amp = prec == MB_PREC_AMP_FP16 || prec == MB_PREC_AMP_BF16;
  b.pure = prec == MB_PREC_FP16 || prec == MB_PREC_BF16;
  b.low = prec == MB_PREC_AMP_FP16 || prec == MB_PREC_FP16 ? MB_DTYPE_FLOAT16
        : prec == MB_PREC_FP32 ? 0 : MB_DTYPE_BFLOAT16;
  if (mb_dist_fsdp_mp(&b.step->dist) && prec == MB_PREC_FP32) { /* FSDP mixed precision: the model runs */
    b.pure = true;                                                /* in param_dtype (sim/dist_mp.c) */
    b.low = b.step->dist.param_dtype;
  }
  p->model = b.ms[0].m = m;
  p->teacher = b.ms[1].m = b.step->teacher;
  int n_models = b.step->teacher ? 2 : 1;
  for (int k = 0; k < n_models && d->status == MB_OK; k++)
    if (shapes_for_plan(&b, k) == MB_OK) mb_build_lnodes(&b, k);
  p->eval_batch = b.step->eval.batch;
  if (d->status == MB_OK && p->eval_batch && shapes_for_eval(&b) == MB_OK) mb_build_lnodes(&b, MB_MS_EVAL);
  if (d->status == MB_OK) choose_loss(&b);
  if (d->status == MB_OK) mb_emit_step(&b);
  if (d->status == MB_OK) mb_dist_events(&b);
  if (d->status == MB_OK) mb_dist_eval_events(&b);
  /* the model's and the teacher's shapes at the plan's batch are a run's too (sim/lines.h) */
  p->shapes_batch = b.batch;
  for (int k = 0; k < 2; k++) p->shapes[k] = b.ms[k].shapes;
  mb_shapes_free(b.ms[MB_MS_EVAL].shapes);
  free(b.read_stamp);
  mb_arena_destroy(&b.a);
  if (d->status != MB_OK) {
    mb_plan_free(p);
    return d->status;
  }
  *out = p;
  return MB_OK;
}

void mb_plan_free(mb_plan *p) {
  if (!p) return;
  for (int k = 0; k < 2; k++) mb_shapes_free(p->shapes[k]);
  free(p->slots);
  free(p->ev);
  free(p);
}
