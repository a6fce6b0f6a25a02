/* Plan building, part two: the event program of one steady-state training step.
 *   setup      weights, buffers, optimizer states, master/EMA/teacher copies, workspaces, batch
 *   teacher    the teacher's forward without grad (its outputs stay for the loss)
 *   forward    outputs allocated; a storage is freed when its last reader ran unless a
 *              recorded node keeps it for backward (or a checkpoint segment keeps its input)
 *   loss       cross-entropy / MSE on the chosen output
 *   backward   reverse order: input grads allocated, kept tensors and the consumed output
 *              grad released; parameter grads stay; checkpointed segments are recomputed first
 *   optimizer  the step's temporaries
 * Storages are reference counted (slot.refs), so views and shared inputs free exactly once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/dtype.h"
#include "sim/build.h"
#include "sim/emitter.h"
#include "sim/loop.h"
#include "sim/optim.h"

/* ---- forward ---- */

/* recompute: allocate mapped storages and release only those (outside inputs are held by the
 * segment, not consumed) */
/* A storage made and let go within one call: a cuDNN workspace. */
static void transient(emitter *e, int model, int32_t sl, int32_t node) {
  if (sl < 0) return;
  ev(e, 1, model, sl, node);
  ev(e, 0, model, sl, node);
}

static int forward_node(emitter *e, int model, const mb_lnode *ln, bool keep_saved, bool recompute) {
  int32_t node = ln->node;
  for (int32_t i = 0; i < ln->n_in; i++)
    if (ln->cast_slot[i] >= 0) ev(e, 1, model, map(e, ln->cast_slot[i]), node);
  for (int32_t j = 0; j < ln->n_out; j++)
    if (ln->out_new[j]) ev(e, 1, model, map(e, ln->out_slot[j]), node);
  for (int k = 0; k < 2; k++)
    if (ln->stats_slot[k] >= 0) ev(e, 1, model, map(e, ln->stats_slot[k]), node);
  transient(e, model, ln->ws_slot[MB_WS_FORWARD], node);
  if (keep_saved)
    for (int32_t k = 0; k < ln->n_saved; k++) hold(e, map(e, ln->saved[k]));
  for (int32_t i = 0; i < 2 * ln->n_in; i++) {
    int32_t s = mb_lnode_read(ln, i);
    if (s < 0 || !ln->first_read[i]) continue; /* a storage read twice is released once */
    if (!recompute || map(e, s) != s) release(e, model, map(e, s), node);
  }
  for (int32_t j = 0; j < ln->n_out; j++)
    if (ln->out_new[j] && slot(e, map(e, ln->out_slot[j]))->refs == 0) ev(e, 0, model, map(e, ln->out_slot[j]), node);
  for (int k = 0; k < 2; k++)
    if (ln->stats_slot[k] >= 0 && slot(e, map(e, ln->stats_slot[k]))->refs == 0)
      ev(e, 0, model, map(e, ln->stats_slot[k]), node);
  return e->b->d->status;
}

typedef struct segment {
  int32_t first, last;  /* lnode range */
  int32_t *inputs;      /* storages read from outside, kept for the recompute */
  int32_t n_inputs;
  bool recomputed;
} segment;

static bool produced_in(const mb_model_state *ms, const segment *sg, int32_t id, int32_t s) {
  for (int32_t i = sg->first; i <= sg->last; i++) {
    const mb_lnode *ln = &ms->ln[i];
    if (ln->segment != id) continue;
    for (int32_t j = 0; j < ln->n_out; j++)
      if (ln->out_new[j] && ln->out_slot[j] == s) return true;
    for (int32_t j = 0; j < ln->n_in; j++)
      if (ln->cast_slot[j] == s) return true;
  }
  return false;
}

static int find_segments(emitter *e, segment **out) {
  mb_builder *b = e->b;
  const mb_model_state *ms = &b->ms[0];
  segment *sg = mb_arena_array(&b->a, (size_t)b->n_segments + 1, sizeof(segment));
  if (!sg) return mb_fail(b->d, MB_E_NOMEM, "out of memory");
  for (int32_t s = 0; s < b->n_segments; s++) sg[s].first = -1;
  for (int32_t i = 0; i < ms->n_ln; i++) {
    int32_t id = ms->ln[i].segment;
    if (id < 0) continue;
    if (sg[id].first < 0) sg[id].first = i;
    sg[id].last = i;
  }
  for (int32_t id = 0; id < b->n_segments; id++) {
    if (sg[id].first < 0) continue;
    int32_t cap = 0;
    for (int32_t i = sg[id].first; i <= sg[id].last; i++) cap += 2 * ms->ln[i].n_in;
    sg[id].inputs = mb_arena_array(&b->a, (size_t)cap + 1, sizeof(int32_t));
    if (!sg[id].inputs) return mb_fail(b->d, MB_E_NOMEM, "out of memory");
    for (int32_t i = sg[id].first; i <= sg[id].last; i++) {
      const mb_lnode *ln = &ms->ln[i];
      if (ln->segment != id) continue;
      for (int32_t j = 0; j < 2 * ln->n_in; j++) {
        int32_t s = mb_lnode_read(ln, j);
        if (s < 0 || slot(e, s)->refs == MB_PERSISTENT || slot(e, s)->rule == MB_SZ_ZERO) continue;
        if (produced_in(ms, &sg[id], id, s)) continue;
        bool seen = false;
        for (int32_t k = 0; k < sg[id].n_inputs; k++) seen |= sg[id].inputs[k] == s;
        if (!seen) sg[id].inputs[sg[id].n_inputs++] = s;
      }
    }
  }
  *out = sg;
  return MB_OK;
}

/* Re-run a checkpointed segment's forward with saving on, into fresh storages. */
static int recompute(emitter *e, segment *sg, int32_t id) {
  mb_builder *b = e->b;
  const mb_model_state *ms = &b->ms[0];
  e->dup_n = b->p->n_slots;
  e->dup = mb_arena_array(&b->a, (size_t)e->dup_n + 1, sizeof(int32_t));
  if (!e->dup) return mb_fail(b->d, MB_E_NOMEM, "out of memory");
  memset(e->dup, 0xff, ((size_t)e->dup_n + 1) * sizeof(int32_t));
  for (int32_t i = sg->first; i <= sg->last; i++) {
    const mb_lnode *ln = &ms->ln[i];
    if (ln->segment != id) continue;
    int32_t made[24], n = 0;
    for (int32_t j = 0; j < ln->n_in && n < 24; j++)
      if (ln->cast_slot[j] >= 0) made[n++] = ln->cast_slot[j];
    for (int32_t j = 0; j < ln->n_out && n < 24; j++)
      if (ln->out_new[j]) made[n++] = ln->out_slot[j];
    for (int k = 0; k < 2; k++)
      if (ln->stats_slot[k] >= 0 && n < 24) made[n++] = ln->stats_slot[k];
    for (int32_t k = 0; k < n; k++) {
      mb_slot copy = *slot(e, made[k]);
      int32_t s = mb_slot_new(b, 0, copy.rule, copy.category, copy.ref, copy.dtype, copy.name);
      if (s < 0) return b->d->status;
      *slot(e, s) = copy;
      slot(e, s)->refs = 0;
      if (made[k] < e->dup_n) e->dup[made[k]] = s;
    }
  }
  for (int32_t i = sg->first; i <= sg->last; i++) {
    const mb_lnode *ln = &ms->ln[i];
    if (ln->segment != id) continue;
    for (int32_t j = 0; j < 2 * ln->n_in; j++) {
      int32_t s = mb_lnode_read(ln, j);
      if (s >= 0 && ln->first_read[j] && map(e, s) != s) slot(e, map(e, s))->refs++;
    }
  }
  for (int32_t i = sg->first; i <= sg->last; i++)
    if (ms->ln[i].segment == id && forward_node(e, 0, &ms->ln[i], true, true) != MB_OK) return b->d->status;
  sg->recomputed = true;
  return MB_OK;
}

/* ---- backward ---- */

/* A second gradient for the same tensor is summed into the first by the engine's input buffer
 * (torch/csrc/autograd/input_buffer.cpp): in place when the first is a dense tensor nothing
 * else references, else as old + new into a fresh tensor before both are freed. PyTorch 1.13
 * and before always did the latter (grad_sum copy). A linear weight's gradient is a view (the
 * transpose of mm's result), so a tied LM head's gradient is summed out of place. The bytes are
 * the same whichever of the three survives, so the copy is a same-sized tensor that lives while
 * both inputs do. */
static void sum_into_first(emitter *e, int32_t v, int32_t c, int32_t node) {
  int32_t sum = -1;
  if (e->b->step->grad_sum_copy || e->gview[v]) {
    sum = fresh(e, 0, MB_SZ_VALUE, slot(e, c)->category, v, slot(e, c)->dtype, "gradient sum (out of place)");
    if (sum >= 0) ev(e, 1, 0, sum, node);
  }
  e->gview[v] = false; /* the sum, or the first summed in place, is a plain tensor */
  release(e, 0, c, node);
  release(e, 0, sum, node);
}

/* expanded: c is an expanded view of a smaller grad (sum's backward). torch 2.x's input buffer
 * adds a new grad into the held one in place when the held one is dense and referenced once,
 * else into the new one when that is, else out of place (input_buffer.cpp: accumulate,
 * can_accumulate_inplace): an expanded grad never takes the add; a dense one takes it. */
static void deliver(emitter *e, const mb_model_state *ms, int32_t v, int32_t c, bool view, bool expanded,
                    bool shared, int32_t node) {
  if (ms->trainable_init[v] && e->due && e->due[v] > 0) { /* into the input buffer (emitter.held) */
    e->reached_any[v] = true;
    if (e->held[v] < 0) {
      e->held[v] = c;
      e->held_view[v] = view || expanded;
    } else if (e->b->step->grad_sum_copy || e->held_view[v]) { /* input_buffer.cpp: out of place */
      int32_t sum = fresh(e, 0, MB_SZ_VALUE, slot(e, c)->category, v, slot(e, c)->dtype, "gradient sum (out of place)");
      if (sum >= 0) ev(e, 1, 0, sum, node);
      release(e, 0, e->held[v], node);
      release(e, 0, c, node);
      e->held[v] = sum;
      e->held_view[v] = false;
    } else {
      release(e, 0, c, node); /* into the held one in place */
    }
    if (--e->due[v] == 0) { /* AccumulateGrad: .grad += the sum, in place */
      release(e, 0, e->held[v], node);
      e->held[v] = -1;
    }
    return;
  }
  if (ms->trainable_init[v]) {
    e->reached_any[v] = true;
    if (e->pgrad[v] < 0 && shared) {
      /* the very tensor another input also receives (add hands its grad to both operands: a
       * position embedding at batch 1, not broadcast) is not AccumulateGrad's to steal: .grad
       * is a clone (accumulate_grad.h, accumulateGrad: use_count above the expected references).
       * A view of a shared grad (cat's narrow slices) is a tensor of its own, stolen whole. */
      int32_t g = fresh(e, 0, MB_SZ_VALUE, MB_CAT_GRADIENT, v, ms->rt[v], ms->g->values[v].name);
      if (g < 0) return;
      ev(e, 1, 0, g, node);
      release(e, 0, c, node);
      c = g;
      view = expanded = false;
    }
    if (e->pgrad[v] < 0) { /* AccumulateGrad steals the first gradient: it becomes .grad */
      e->pgrad[v] = c;
      e->gview[v] = view;
      slot(e, c)->refs = MB_PERSISTENT;
      slot(e, c)->category = MB_CAT_GRADIENT;
    } else {
      sum_into_first(e, v, c, node); /* a weight used twice (tied embeddings) */
    }
  } else if (e->gslot[v] < 0) {
    e->gslot[v] = c;
    e->gview[v] = view;
    e->gexp[v] = expanded;
  } else if (e->gexp[v]) {
    int32_t old = e->gslot[v];
    if (expanded || e->b->step->grad_sum_copy) { /* neither is dense (or 1.13): old + new, a fresh tensor */
      int32_t incoming = c;
      c = fresh(e, 0, MB_SZ_VALUE, slot(e, old)->category, v, ms->rt[v], "gradient sum (out of place)");
      if (c >= 0) ev(e, 1, 0, c, node);
      release(e, 0, incoming, node);
    }
    e->gslot[v] = c; /* the new dense grad takes the old one in place and is the grad now */
    e->gview[v] = view;
    e->gexp[v] = false;
    release(e, 0, old, node);
  } else {
    sum_into_first(e, v, c, node);
  }
}

static bool shapes_equal(const mb_model_state *ms, int32_t a, int32_t b) {
  const mb_tinfo *x = &ms->t[a], *y = &ms->t[b];
  if (x->rank != y->rank || x->rank < 0) return false;
  for (int32_t i = 0; i < x->rank; i++)
    if (x->dims[i] != y->dims[i]) return false;
  return true;
}

/* A fresh storage for the grad of input i of ln (v). */
static int32_t new_grad(emitter *e, const mb_lnode *ln, int32_t i) {
  mb_builder *b = e->b;
  const mb_model_state *ms = &b->ms[0];
  int32_t v = ln->in[i], base = ms->slot_of[v];
  bool of_weight = base >= 0 && slot(e, base)->refs == MB_PERSISTENT;
  int32_t c = fresh(e, 0, MB_SZ_VALUE, of_weight ? MB_CAT_GRADIENT : MB_CAT_ACT_GRAD, v, ms->rt[v],
                    ms->g->values[v].name);
  if (c >= 0) ev(e, 1, 0, c, ln->node);
  return c;
}

/* One backward node as the engine runs it (torch/csrc/autograd/engine.cpp): call_function runs
 * the node, which computes every input grad (a pointwise formula computes a broadcast input's
 * grad at the output's size, grad * other), then validate_outputs sums each broadcast grad to
 * its input's size (sum_to), so every full-size grad lives until the node's last one exists;
 * the node's incoming grads are dropped when call_function returns; evaluate_function releases
 * the saved tensors; only then is each result added to the buffer of the node that needs it,
 * where a second grad for the same tensor is summed. */
static int backward_node(emitter *e, const mb_lnode *ln) {
  mb_builder *b = e->b;
  const mb_model_state *ms = &b->ms[0];
  const mb_grad_rule *r = ln->r;
  int32_t node = ln->node, out0 = ln->n_out ? ln->out[0] : -1;
  int32_t g0 = out0 >= 0 ? e->gslot[out0] : -1;
  size_t n = (size_t)ln->n_in + 1;
  int32_t *grads = mb_arena_array(&b->a, n, sizeof *grads), *full = mb_arena_array(&b->a, n, sizeof *full);
  int32_t *cast = mb_arena_array(&b->a, n, sizeof *cast);
  bool *views = mb_arena_array(&b->a, n, sizeof *views), *expanded = mb_arena_array(&b->a, n, sizeof *expanded);
  bool *itself = mb_arena_array(&b->a, n, sizeof *itself); /* gets the output's grad tensor itself */
  if (!grads || !full || !cast || !views || !expanded || !itself) return mb_fail(b->d, MB_E_NOMEM, "out of memory");
  int32_t n_itself = 0;
  for (int32_t i = 0; i < ln->n_in; i++) {
    int32_t v = ln->in[i];
    grads[i] = full[i] = cast[i] = -1;
    itself[i] = false;
    if (v < 0 || !ms->rg[v] || !mb_dtype_is_float(ms->t[v].dtype)) continue;
    bool same = i < 8 && ((r->grad_same >> i) & 1);
    /* sum's grad is the output's grad expanded: a view, except for a weight, whose .grad
     * AccumulateGrad makes a dense copy of */
    bool expand = (r->flags & MB_GF_GRAD_EXPAND) && !ms->trainable_init[v];
    bool alias = g0 >= 0 && out0 >= 0 &&
                 ((r->flags & MB_GF_GRAD_VIEW) || expand || (same && shapes_equal(ms, v, out0)));
    if (alias) {
      hold(e, g0);
      grads[i] = g0;
      views[i] = (r->flags & MB_GF_TRANSPOSE) != 0;
      expanded[i] = expand && !shapes_equal(ms, v, out0);
      itself[i] = !(r->flags & MB_GF_GRAD_VIEW) && !expand;
      n_itself += itself[i];
      continue;
    }
    if (ln->in_slot[i] >= 0 && ln->in_slot[i] != ms->slot_of[v] &&
        slot(e, ln->in_slot[i])->dtype != ms->rt[v]) {
      /* the grad arrives in the cast's dtype, then _to_copy's backward casts it back */
      cast[i] = fresh(e, 0, MB_SZ_VALUE, MB_CAT_ACT_GRAD, v, slot(e, ln->in_slot[i])->dtype, "grad through autocast");
      if (cast[i] < 0) return b->d->status;
      ev(e, 1, 0, cast[i], node);
      if (i < 2) transient(e, 0, ln->ws_slot[MB_WS_DATA + i], node); /* a convolution's backward call */
    }
    /* not for an input whose grad is the output's grad itself (add's): only its sum is new */
    if ((r->flags & MB_GF_POINTWISE) && !same && out0 >= 0 && ms->t[out0].rank >= 0 && !shapes_equal(ms, v, out0)) {
      full[i] = fresh(e, 0, MB_SZ_VALUE, MB_CAT_ACT_GRAD, out0, ms->rt[out0], "broadcast grad before sum_to");
      if (full[i] < 0) return b->d->status;
      ev(e, 1, 0, full[i], node);
      continue;
    }
    expanded[i] = false;
    if (cast[i] >= 0) continue; /* ToCopyBackward0 makes it, after this node: below */
    if ((grads[i] = new_grad(e, ln, i)) < 0) return b->d->status;
    if (i < 2) transient(e, 0, ln->ws_slot[MB_WS_DATA + i], node); /* a convolution's backward call */
    /* linear's weight gradient is mm's result transposed back: a view */
    views[i] = ln->rule == MB_G_FUSED_LINEAR && i == 1;
  }
  /* formula temporaries, alive together while the node runs */
  int32_t tmps[4], n_tmp = 0;
  /* in the dtype the op ran in: an autocast copy's, when it made one */
  int32_t tmp_dtype = ln->in[0] < 0 ? 0 : ln->cast_slot[0] >= 0 ? slot(e, ln->cast_slot[0])->dtype : ms->rt[ln->in[0]];
  for (int k = 0; k < r->bwd_tmp && k < 4 && ln->in[0] >= 0; k++) {
    int32_t t = fresh(e, 0, MB_SZ_VALUE, MB_CAT_TEMPORARY, ln->in[0], tmp_dtype, "backward temporary");
    if (t < 0) return b->d->status;
    ev(e, 1, 0, t, node);
    tmps[n_tmp++] = t;
  }
  for (int32_t k = 0; k < n_tmp; k++) release(e, 0, tmps[k], node);
  for (int32_t i = 0; i < ln->n_in; i++) { /* validate_outputs: sum_to */
    if (full[i] < 0) continue;
    if ((grads[i] = new_grad(e, ln, i)) < 0) return b->d->status;
    if (cast[i] >= 0) release(e, 0, cast[i], node);
    release(e, 0, full[i], node);
    views[i] = expanded[i] = false;
  }
  for (int32_t j = 0; j < ln->n_out; j++) {
    int32_t o = ln->out[j];
    if (o >= 0 && e->gslot[o] >= 0) {
      release(e, 0, e->gslot[o], node);
      e->gslot[o] = -1;
    }
  }
  for (int32_t k = 0; k < ln->n_saved; k++) release(e, 0, map(e, ln->saved[k]), node);
  /* An input autocast cast gets its grad from the cast's own node, ToCopyBackward0, which the
   * engine runs next: after this node has dropped its incoming grad and its saved tensors (the
   * H200's recording of GPT-2 in AMP: lm_head's fp32 weight grad is made once its bf16 weight
   * copy and the logits' grad are gone). A fresh dense tensor, never a view: a tied weight's
   * second grad is then added into it in place. */
  for (int32_t i = 0; i < ln->n_in; i++) {
    if (cast[i] < 0 || grads[i] >= 0 || full[i] >= 0) continue;
    if ((grads[i] = new_grad(e, ln, i)) < 0) return b->d->status;
    release(e, 0, cast[i], node);
    views[i] = false;
  }
  for (int32_t i = 0; i < ln->n_in; i++)
    if (grads[i] >= 0) deliver(e, ms, ln->in[i], grads[i], views[i], expanded[i], itself[i] && n_itself > 1, node);
  return b->d->status;
}

static bool has_grad(const emitter *e, const mb_lnode *ln) {
  for (int32_t j = 0; j < ln->n_out; j++)
    if (ln->out[j] >= 0 && e->gslot[ln->out[j]] >= 0) return true;
  return false;
}

/* ---- loss ---- */

typedef struct loss_state {
  int32_t cast, logp, value, target;
  int32_t work; /* the dtype the loss is computed in (its value, its grad seed, the log-probs) */
  bool amp_ce;  /* cross_entropy on 16-bit logits under CUDA autocast (amp_cross_entropy) */
} loss_state;

/* F.cross_entropy on 16-bit logits under CUDA autocast. cross_entropy_loss is in no autocast
 * list, so its composite runs: at::log_softmax(self, dim, self.scalar_type()) (LossNLL.cpp,
 * cross_entropy_loss_symint), and log_softmax is fp32_set_opt_dtype (autocast_mode.h:921,
 * torch 2.11), which keeps a dtype the caller passed: the log-probs are 16-bit, kept by
 * LogSoftmaxBackward0 (result_). nll_loss is in the fp32 list (autocast_mode.h:883): cached_cast
 * makes an fp32 copy of the log-probs, which NllLossBackward0 keeps (self_). Measured on the H200
 * (hf-llama-plain-adamw-amp-bf16-b8's snapshot): _log_softmax 125 MiB bf16, _to_copy 250 MiB fp32,
 * then in backward nll_loss_backward 250 MiB fp32, ToCopyBackward0 125 MiB, and
 * _log_softmax_backward_data 125 MiB, the logits' grad. */
static bool amp_cross_entropy(const mb_builder *b) {
  int32_t dt = b->ms[0].rt[b->loss_out];
  return b->loss == MB_LOSS_CE && b->amp && !b->step->loss_fp32 && !b->step->cpu &&
         (dt == MB_DTYPE_BFLOAT16 || dt == MB_DTYPE_FLOAT16);
}

/* The dtype the loss is computed in: the output's in pure fp16/bf16 (unless loss_dtype fp32),
 * else fp32 (autocast runs the losses in fp32). */
static int32_t loss_work_dtype(const mb_builder *b) {
  return b->pure && !b->step->loss_fp32 ? b->ms[0].rt[b->loss_out] : MB_DTYPE_FLOAT;
}

static int loss_forward(emitter *e, loss_state *ls) {
  mb_builder *b = e->b;
  const mb_model_state *ms = &b->ms[0];
  int32_t y = b->loss_out, ys = ms->slot_of[y];
  ls->cast = ls->logp = -1;
  bool upcast = (b->amp || b->step->loss_fp32) && ms->rt[y] != MB_DTYPE_FLOAT;
  int32_t work = ls->work = loss_work_dtype(b);
  if (b->loss == MB_LOSS_NONE) {
    ls->value = ys;
    return MB_OK;
  }
  if ((ls->amp_ce = amp_cross_entropy(b))) {
    ls->logp = fresh(e, 0, MB_SZ_VALUE, MB_CAT_ACTIVATION, y, ms->rt[y], "log_softmax (cross-entropy)");
    ev(e, 1, 0, ls->logp, -1);
    ls->cast = fresh(e, 0, MB_SZ_VALUE, MB_CAT_ACTIVATION, y, MB_DTYPE_FLOAT, "log-probs cast to fp32 for nll_loss");
    ev(e, 1, 0, ls->cast, -1);
    upcast = false;
  }
  if (upcast) {
    ls->cast = fresh(e, 0, MB_SZ_VALUE, MB_CAT_TEMPORARY, y, MB_DTYPE_FLOAT, "loss input cast to fp32");
    ev(e, 1, 0, ls->cast, -1);
  }
  if (b->loss == MB_LOSS_CE && !ls->amp_ce) {
    ls->logp = fresh(e, 0, MB_SZ_VALUE, MB_CAT_ACTIVATION, y, work, "log_softmax (cross-entropy)");
    ev(e, 1, 0, ls->logp, -1);
    if (ls->cast >= 0) release(e, 0, ls->cast, -1);
    ls->cast = -1;
  }
  ls->value = fresh(e, 0, MB_SZ_FIXED, MB_CAT_ACTIVATION, -1, work, "loss");
  slot(e, ls->value)->fixed = (uint64_t)mb_dtype_bits(work) / 8;
  ev(e, 1, 0, ls->value, -1);
  return b->d->status;
}

static int loss_backward(emitter *e, loss_state *ls) {
  mb_builder *b = e->b;
  const mb_model_state *ms = &b->ms[0];
  int32_t y = b->loss_out, work = ls->work;
  int32_t seed = fresh(e, 0, MB_SZ_FIXED, MB_CAT_ACT_GRAD, -1, work, "grad of loss");
  slot(e, seed)->fixed = (uint64_t)mb_dtype_bits(work) / 8;
  ev(e, 1, 0, seed, -1);
  if (b->loss == MB_LOSS_NONE) {
    slot(e, seed)->rule = MB_SZ_VALUE;
    slot(e, seed)->ref = y;
    slot(e, seed)->dtype = ms->rt[y];
    e->gslot[y] = seed;
    return b->d->status;
  }
  int32_t g = seed;
  if (ls->amp_ce) { /* amp_cross_entropy: back through nll_loss, the fp32 cast, log_softmax */
    int32_t g32 = fresh(e, 0, MB_SZ_VALUE, MB_CAT_ACT_GRAD, y, MB_DTYPE_FLOAT, "grad of log_softmax");
    ev(e, 1, 0, g32, -1);
    release(e, 0, seed, -1);
    release(e, 0, ls->cast, -1); /* NllLossBackward0 is done with its fp32 log-probs */
    int32_t g16 = fresh(e, 0, MB_SZ_VALUE, MB_CAT_ACT_GRAD, y, ms->rt[y], "grad through the fp32 cast");
    ev(e, 1, 0, g16, -1);
    release(e, 0, g32, -1);
    int32_t gx = fresh(e, 0, MB_SZ_VALUE, MB_CAT_ACT_GRAD, y, ms->rt[y], "grad of loss input");
    ev(e, 1, 0, gx, -1);
    release(e, 0, g16, -1);
    release(e, 0, ls->logp, -1);
    e->gslot[y] = gx;
    return b->d->status;
  }
  if (b->loss == MB_LOSS_CE) { /* nll_loss_backward fills a full-size grad of the log-probs */
    int32_t glogp = fresh(e, 0, MB_SZ_VALUE, MB_CAT_ACT_GRAD, y, work, "grad of log_softmax");
    ev(e, 1, 0, glogp, -1);
    release(e, 0, g, -1);
    g = glogp;
  }
  int32_t gx = fresh(e, 0, MB_SZ_VALUE, MB_CAT_ACT_GRAD, y, work, "grad of loss input");
  ev(e, 1, 0, gx, -1);
  release(e, 0, g, -1);
  if (ls->logp >= 0) release(e, 0, ls->logp, -1);
  if (ls->cast >= 0) release(e, 0, ls->cast, -1);
  /* the loss itself lives as long as the loop keeps it (sim/loop.c) */
  if (ms->rt[y] != work) { /* back through the fp32 cast */
    int32_t gy = fresh(e, 0, MB_SZ_VALUE, MB_CAT_ACT_GRAD, y, ms->rt[y], "grad of model output");
    ev(e, 1, 0, gy, -1);
    release(e, 0, gx, -1);
    gx = gy;
  }
  e->gslot[y] = gx;
  return b->d->status;
}

/* ---- setup and optimizer ---- */

/* nn.BatchNorm's num_batches_tracked: an int64 buffer per layer that keeps running statistics,
 * which the exporters leave out (its add_ is not part of the graph's computation) */
static int batchnorm_counters(emitter *e) {
  mb_builder *b = e->b;
  for (int m = 0; m < 2; m++) {
    const mb_graph *g = b->ms[m].g;
    if (!g || (m == 1 && !b->step->teacher)) continue;
    for (int32_t k = 0; k < g->n_nodes; k++) {
      const mb_node *n = &g->nodes[k];
      if (n->domain[0] || strcmp(n->op_type, "BatchNormalization") || n->n_inputs < 5 || n->inputs[3] < 0) continue;
      if (g->values[n->inputs[3]].kind != MB_VALUE_INITIALIZER) continue;
      if (fixed(e, m, m ? MB_CAT_TEACHER : MB_CAT_BUFFER, 8, "num_batches_tracked", 1) < 0) return b->d->status;
    }
  }
  return MB_OK;
}

/* .grad tensors that outlive a step: accumulated over micro-batches, or zeroed in place by
 * zero_grad(set_to_none=False) instead of freed. They exist before backward, which adds into
 * them (AccumulateGrad: variable_grad += new_grad). */
/* FSDP1's no_sync() keeps each unit's unsharded flat gradient; the parameters are views of the
 * flat parameter, so backward makes their gradients afresh each micro-step (the unit's cat is
 * added into the flat .grad): the kept gradient is no parameter's .grad (dist.c frees it). */
static bool flat_grads_kept(const mb_step *step) {
  return step->grad_accumulation > 1 && step->dist.fsdp_version == 1 && mb_dist_fsdp_reduces(&step->dist);
}

static bool persistent_grads(const mb_step *step) {
  return (step->grad_accumulation > 1 && !mb_dist_accumulates_in_partition(&step->dist) && !flat_grads_kept(step)) ||
         step->eval.zero_grad == MB_ZERO_GRAD_ZERO;
}

/* Several ranks: what the budget does not model yet is refused, not estimated as one GPU. */
static int dist_supported(const mb_builder *b) {
  const mb_step *step = b->step;
  const mb_dist_opts *o = &step->dist;
  bool zero = mb_dist_is_zero(o);
  if (zero && b->pure && !step->master_weights)
    return mb_fail(b->d, MB_E_INVALID_ARG, "DeepSpeed ZeRO keeps fp32 master weights of fp16/bf16 parameters: "
                                          "add master_weights (--master-weights)");
  if (o->offload != MB_OFFLOAD_NONE && !zero && o->strategy != MB_STRATEGY_FSDP)
    return mb_fail(b->d, MB_E_INVALID_ARG, "offload needs strategy zero1, zero2, zero3 or fsdp");
  if (mb_dist_fsdp_mp_refused(b) != MB_OK) return b->d->status;
  if (o->world_size > 1 && mb_loop_keeps_grads(step))
    return mb_fail(b->d, MB_E_UNSUPPORTED, "zero_grad before-backward (Lightning's closure) on several ranks is not "
                                          "modelled yet");
  if (!zero && (o->strategy != MB_STRATEGY_FSDP || mb_dist_shards(o) <= 1)) return MB_OK;
  const char *what = step->eval.zero_grad == MB_ZERO_GRAD_ZERO ? "zero_grad zero"
                     : step->ema ? "an EMA copy" : !zero && step->master_weights ? "master weights" : NULL;
  if (what)
    return mb_fail(b->d, MB_E_UNSUPPORTED, "strategy %s with %s is not modelled yet", zero ? "zero" : "fsdp", what);
  if (o->offload == MB_OFFLOAD_OPTIMIZER && o->strategy == MB_STRATEGY_FSDP)
    return mb_fail(b->d, MB_E_INVALID_ARG, "offload optimizer: FSDP's CPUOffload moves the parameters too "
                                          "(offload params)");
  if (o->offload == MB_OFFLOAD_PARAMS && (o->strategy == MB_STRATEGY_ZERO1 || o->strategy == MB_STRATEGY_ZERO2))
    return mb_fail(b->d, MB_E_INVALID_ARG, "offload params needs ZeRO-3 (offload_param) or FSDP");
  return MB_OK;
}

/* DeepSpeed ZeRO's own buffers (stage_1_and_2.py setup_buckets, stage3.py
 * _setup_for_real_optimizer; docs/deepspeed.md): the gradient reduction buffer of
 * reduce_bucket_size elements (two with overlap_comm in stages 1 and 2), and the rank's
 * gradient partition that reductions fill (grads_in_partition, grad_partitions_flat_buffer). */
static int zero_buffers(emitter *e, uint64_t grad_part) {
  mb_builder *b = e->b;
  const mb_dist_opts *o = &b->step->dist;
  if (!mb_dist_is_zero(o) || !grad_part) return MB_OK;
  int32_t dt = b->pure ? b->low : MB_DTYPE_FLOAT;
  /* pinned host memory: ZeRO-3's gradient partition (grad_partitions_flat_buffer); ZeRO-1/2's
   * bit16 staging copy of the partition (param_buffer_of_bit16_for_cpu_offload_groups), same size */
  if (o->offload != MB_OFFLOAD_NONE) b->p->host_bytes += grad_part;
  if (o->offload != MB_OFFLOAD_NONE && o->strategy != MB_STRATEGY_ZERO3) {
    /* ZeRO-Offload's gradient staging buffers of the largest parameter's elements, one pinned on
     * the host (temp_grad_buffer_for_cpu_offload), one on the device (..._for_gpu_offload) */
    const mb_graph *g = b->ms[0].g;
    uint64_t largest = 0;
    for (int32_t v = 0; v < g->n_values; v++)
      if (b->ms[0].trainable_init[v] && g->inits[g->values[v].initializer].numel > largest)
        largest = g->inits[g->values[v].initializer].numel;
    b->p->host_bytes += dtype_bytes(dt, largest);
    if (fixed(e, 0, MB_CAT_GRADIENT, dtype_bytes(dt, largest), "ZeRO-Offload gradient staging buffer", 1) < 0)
      return b->d->status;
    /* accumulation: a pinned host buffer per parameter of the partition that the micro-steps
     * add into (accumulated_grads_in_cpu): the partition's size */
    if (b->step->grad_accumulation > 1) b->p->host_bytes += grad_part;
  }
  int overlap = o->overlap_comm >= 0 ? o->overlap_comm : o->strategy == MB_STRATEGY_ZERO3;
  int buffers = o->strategy == MB_STRATEGY_ZERO3 || !overlap ? 1 : 2;
  if (!o->contiguous_gradients && o->offload == MB_OFFLOAD_NONE) /* offload turns it on */
    buffers = 0; /* each reduction flattens its bucket instead (dist.c) */
  for (int i = 0; i < buffers; i++)
    if (fixed(e, 0, MB_CAT_GRADIENT, dtype_bytes(dt, (uint64_t)o->reduce_bucket_size), "ZeRO gradient reduction buffer", 1) < 0)
      return b->d->status;
  if (o->offload == MB_OFFLOAD_NONE && fixed(e, 0, MB_CAT_GRADIENT, grad_part, "ZeRO gradient partition", 1) < 0)
    return b->d->status;
  return MB_OK;
}

/* DDP's gradient buckets (dist.c): with gradient_as_bucket_view too, since zero_grad's
 * set_to_none makes autograd create each .grad again before the reducer points it at its
 * bucket (dist.c frees it there). */
static int ddp_buckets(emitter *e) {
  mb_builder *b = e->b;
  const mb_dist_opts *o = &b->step->dist;
  if (o->strategy != MB_STRATEGY_DDP) return MB_OK;
  const mb_model_state *ms = &b->ms[0];
  const mb_graph *g = ms->g;
  uint64_t *bytes = mb_arena_array(&b->a, (size_t)g->n_values + 1, sizeof(uint64_t));
  uint64_t *bucket = mb_arena_array(&b->a, (size_t)g->n_values + 1, sizeof(uint64_t));
  if (!bytes || !bucket) return mb_fail(b->d, MB_E_NOMEM, "out of memory");
  size_t n = 0;
  for (int32_t v = 0; v < g->n_values; v++)
    if (ms->trainable_init[v]) bytes[n++] = dtype_bytes(ms->rt[v], g->inits[g->values[v].initializer].numel);
  size_t k = mb_ddp_buckets(o, bytes, n, bucket);
  for (size_t i = 0; i < k; i++)
    if (fixed(e, 0, MB_CAT_GRADIENT, bucket[i], "DDP gradient bucket", 1) < 0) return b->d->status;
  return MB_OK;
}

/* A rank's part of a parameter's elements split over shards ranks (all of them for 1). */
static uint64_t rank_numel(const mb_step *step, int32_t shards, const mb_const_tensor *ct) {
  return (uint64_t)mb_dist_shard_numel(&step->dist, shards, ct->dims, ct->rank, ct->numel);
}

/* teacher_cache N: the N - 1 batches of teacher outputs cached by earlier steps (this step's
 * outputs join them: emit_step keeps them to the end). Cached targets are inputs of the step. */
static int teacher_cache(emitter *e) {
  mb_builder *b = e->b;
  int64_t n = b->step->eval.teacher_cache;
  const mb_model_state *ts = &b->ms[1];
  if (!n || !b->step->teacher) return MB_OK;
  for (int32_t i = 0; i < ts->g->n_outputs; i++) {
    int32_t o = ts->g->outputs[i];
    if (o < 0 || ts->host[o] || ts->slot_of[o] < 0 || slot(e, ts->slot_of[o])->rule == MB_SZ_ZERO) continue;
    int32_t s = mb_slot_new(b, 1, MB_SZ_VALUE, MB_CAT_INPUT, o, ts->rt[o], "teacher outputs cached by earlier steps");
    if (s < 0) return b->d->status;
    slot(e, s)->tag = MB_TAG_TEACHER_CACHE;
    slot(e, s)->copies = (uint32_t)(n - 1);
    slot(e, s)->refs = MB_PERSISTENT;
    ev(e, 1, 1, s, -1);
    slot(e, ts->slot_of[o])->category = MB_CAT_INPUT;
  }
  return b->d->status;
}

static int emit_setup(emitter *e, loss_state *ls) {
  mb_builder *b = e->b;
  const mb_step *step = b->step;
  mb_plan *p = b->p;
  int32_t n_fixed = p->n_slots;
  if (dist_supported(b) != MB_OK) return b->d->status;
  /* FSDP and ZeRO-3: a rank holds its shard of every parameter of the model (ZeRO-3 keeps
   * parameters of at most persistence_threshold elements whole) */
  int32_t shards = mb_dist_shards(&step->dist), state_shards = mb_dist_state_shards(&step->dist);
  bool fsdp_mp = mb_dist_fsdp_mp(&step->dist); /* the shards keep the graph's dtype */
  if (shards > 1 || fsdp_mp)
    for (int32_t v = 0; v < b->ms[0].g->n_values; v++) {
      const mb_graph *g0 = b->ms[0].g;
      int32_t s = mb_param_slot(b, v);
      if (s < 0) continue;
      const mb_const_tensor *ct = &g0->inits[g0->values[v].initializer];
      if (step->dist.strategy == MB_STRATEGY_ZERO3 && (int64_t)ct->numel <= step->dist.persistence_threshold) continue;
      p->slots[s].fixed = dtype_bytes(fsdp_mp ? ct->dtype : b->ms[0].rt[v], rank_numel(step, shards, ct));
      if (step->dist.offload == MB_OFFLOAD_PARAMS) { /* the shard lives on the host */
        p->host_bytes += p->slots[s].fixed;
        p->slots[s].fixed = 0;
      }
    }
  uint64_t grad_part = 0; /* ZeRO: the rank's partition of the gradients */
  /* weights and buffers of both models, as bound by plan.c */
  for (int32_t s = 0; s < n_fixed; s++)
    if (p->slots[s].refs == MB_PERSISTENT && p->slots[s].category != MB_CAT_INPUT) ev(e, 1, p->slots[s].model, s, -1);
  const mb_model_state *ms = &b->ms[0];
  const mb_graph *g = ms->g;
  uint64_t largest_teacher_layer = 0;
  /* torch.optim makes a parameter's state in the first step() that sees its gradient
   * (Adam's _init_group: zeros_like per state, parameter by parameter); Adagrad makes it in
   * its constructor and DeepSpeed's ZeRO optimizers at engine initialisation */
  bool lazy_states = !mb_optim_get(step->optimizer)->states_at_init && !mb_dist_is_zero(&step->dist);
  for (int32_t v = 0; v < g->n_values; v++) {
    if (g->values[v].kind != MB_VALUE_INITIALIZER) continue;
    const mb_const_tensor *ct = &g->inits[g->values[v].initializer];
    int32_t dt = ms->rt[v];
    if (ms->trainable_init[v]) {
      e->owned_first[v] = p->n_slots;
      int state_bytes = (step->master_weights && b->pure) || fsdp_mp ? 4 : mb_dtype_bits(dt) / 8;
      uint64_t st[4];
      int64_t sdims[MB_MAX_RANK];
      memcpy(sdims, ct->dims, (size_t)ct->rank * sizeof *sdims);
      uint64_t numel = rank_numel(step, state_shards, ct);
      if (ct->rank > 0 && numel != (uint64_t)ct->numel && !mb_dist_is_zero(&step->dist))
        sdims[0] = (int64_t)(numel / (uint64_t)(ct->numel / ct->dims[0]));
      else if (numel != (uint64_t)ct->numel) { /* a flat partition: Adafactor's factored states see a vector */
        sdims[0] = (int64_t)numel;
        for (int i = 1; i < ct->rank; i++) sdims[i] = 1;
      }
      grad_part += dtype_bytes(dt, numel);
      int n = mb_optim_states(step->optimizer, sdims, ct->rank, (int64_t)numel, state_bytes, st);
      bool host = step->dist.offload != MB_OFFLOAD_NONE; /* states and master on the host */
      for (int k = 0; k < n; k++) {
        if (host) {
          p->host_bytes += st[k];
          continue;
        }
        int32_t s = fixed(e, 0, MB_CAT_OPTIMIZER, st[k], "optimizer state", 1);
        if (s < 0) return b->d->status;
        p->slots[s].lazy = lazy_states;
      }
      if (step->master_weights && b->pure) {
        if (host) p->host_bytes += 2 * numel * 4; /* the master and the fp32 gradients the CPU step reads */
        else if (fixed(e, 0, MB_CAT_MASTER, numel * 4, "fp32 master weight", 1) < 0) return b->d->status;
      }
      if (persistent_grads(step) || flat_grads_kept(step)) { /* accumulated: whole (sim/dist.h) */
        uint64_t kept = step->grad_accumulation > 1 ? (uint64_t)ct->numel : numel;
        int32_t s = fixed(e, 0, MB_CAT_GRADIENT, dtype_bytes(dt, kept), ct->name, 1);
        if (s < 0) return b->d->status;
        if (!flat_grads_kept(step)) e->pgrad[v] = s;
      } else if (mb_loop_keeps_grads(step) && mb_loop_prev_grad(e, e->loop, dtype_bytes(dt, ct->numel)) != MB_OK) {
        return b->d->status;
      }
      e->owned_n[v] = p->n_slots - e->owned_first[v];
    }
    if (step->ema && !ms->host[v] && mb_dtype_is_float(ct->dtype) &&
        fixed(e, 0, MB_CAT_EMA, dtype_bytes(dt, ct->numel), "EMA copy", 1) < 0)
      return b->d->status;
  }
  if (ddp_buckets(e) != MB_OK || zero_buffers(e, grad_part) != MB_OK) return b->d->status;
  /* torch.optim's step counters: a 4-byte tensor per parameter, on the CPU unless the step is
   * capturable or fused, so device memory only when the model trains on the CPU */
  if (step->cpu && mb_optim_get(step->optimizer)->step_tensor)
    for (int32_t v = 0; v < g->n_values; v++)
      if (ms->trainable_init[v] && fixed(e, 0, MB_CAT_OPTIMIZER, 4, "optimizer step", 1) < 0) return b->d->status;
  if (batchnorm_counters(e) != MB_OK) return b->d->status;
  bool gemm = false;
  for (int m = 0; m < 2; m++)
    for (int32_t i = 0; i < b->ms[m].n_ln; i++) gemm |= (b->ms[m].ln[i].r->flags & MB_GF_CUBLAS) != 0;
  if (step->teacher && step->teacher_offload) {
    const mb_model_state *ts = &b->ms[1];
    for (int32_t k = 0; k < ts->g->n_nodes; k++) {
      uint64_t layer = 0;
      const mb_node *n = &ts->g->nodes[k];
      for (int32_t i = 0; i < n->n_inputs; i++) {
        int32_t v = n->inputs[i];
        if (v >= 0 && ts->g->values[v].kind == MB_VALUE_INITIALIZER)
          layer += dtype_bytes(ts->rt[v], ts->g->inits[ts->g->values[v].initializer].numel);
      }
      if (layer > largest_teacher_layer) largest_teacher_layer = layer;
    }
    if (fixed(e, 1, MB_CAT_TEACHER, largest_teacher_layer, "teacher layer on the device", 1) < 0) return b->d->status;
  }
  if (teacher_cache(e) != MB_OK) return b->d->status;
  uint64_t ws = step->workspace;
  if (gemm && ws) {
    /* forward GEMMs run on the main thread, backward ones on autograd's: two handles */
    if (fixed(e, 0, MB_CAT_WORKSPACE, ws, "cuBLAS workspace (forward thread)", 1) < 0 ||
        fixed(e, 0, MB_CAT_WORKSPACE, ws, "cuBLAS workspace (autograd thread)", 1) < 0)
      return b->d->status;
  }
  for (int32_t i = 0; i < g->n_inputs; i++) ev(e, 1, 0, ms->slot_of[g->inputs[i]], -1);
  ls->target = -1;
  if (b->loss == MB_LOSS_CE || b->loss == MB_LOSS_MSE) {
    bool ce = b->loss == MB_LOSS_CE;
    int32_t y = b->loss_out;
    ls->target = mb_slot_new(b, 0, ce ? MB_SZ_TARGET : MB_SZ_VALUE, MB_CAT_INPUT, y,
                             ce ? MB_DTYPE_INT64 : ms->t[y].dtype, ce ? "targets (class indices)" : "targets");
    if (ls->target < 0) return b->d->status;
    slot(e, ls->target)->axis = b->class_axis;
    slot(e, ls->target)->refs = MB_PERSISTENT;
    ev(e, 1, 0, ls->target, -1);
  }
  return mb_loop_setup(e, e->loop, loss_work_dtype(b));
}

static int emit_optimizer(emitter *e) {
  mb_builder *b = e->b;
  const mb_step *step = b->step;
  const mb_optim_def *opt = mb_optim_get(step->optimizer);
  const mb_model_state *ms = &b->ms[0];
  const mb_graph *g = ms->g;
  bool master = step->master_weights && b->pure;
  bool fp32_step = master || mb_dist_fsdp_mp(&step->dist); /* the step runs on fp32 (master or shards) */
  /* foreach groups tensors by dtype; each group's lists are freed before the next group */
  int32_t dtypes[4] = {MB_DTYPE_FLOAT, MB_DTYPE_FLOAT16, MB_DTYPE_BFLOAT16, MB_DTYPE_DOUBLE};
  uint64_t largest = 0;
  int32_t largest_dt = MB_DTYPE_FLOAT;
  b->p->step_first = b->p->n_ev;
  if (step->dist.offload != MB_OFFLOAD_NONE) return MB_OK; /* the step runs on the CPU */
  /* DeepSpeed steps its partition with a fused kernel (FusedAdam): no lists, no temporaries */
  bool zero = mb_dist_is_zero(&step->dist);
  int32_t shards = mb_dist_state_shards(&step->dist);
  int32_t lists = step->foreach && !zero ? opt->foreach_lists : 0;
  int32_t per_weight = lists + (master ? 1 : 0);
  int32_t *list = mb_arena_array(&b->a, (size_t)g->n_values * (size_t)(per_weight + 1) + 1, sizeof(int32_t));
  if (!list) return mb_fail(b->d, MB_E_NOMEM, "out of memory");
  for (int k = 0; k < 4; k++) {
    int32_t n = 0;
    for (int32_t v = 0; v < g->n_values; v++) {
      if (!ms->trainable_init[v] || !e->reached[v] || ms->rt[v] != dtypes[k]) continue;
      uint64_t numel = rank_numel(step, shards, &g->inits[g->values[v].initializer]);
      int32_t sdt = fp32_step ? MB_DTYPE_FLOAT : ms->rt[v];
      if (numel > largest) {
        largest = numel;
        largest_dt = sdt;
      }
      if (master) { /* grads upcast to fp32 for the master step */
        int32_t s = fixed(e, 0, MB_CAT_TEMPORARY, numel * 4, "fp32 gradient for the master step", 0);
        if (s < 0) return b->d->status;
        list[n++] = s;
      }
      for (int l = 0; l < lists; l++) {
        int32_t s = fixed(e, 0, MB_CAT_TEMPORARY, dtype_bytes(sdt, numel), "foreach intermediate", 0);
        if (s < 0) return b->d->status;
        list[n++] = s;
      }
    }
    for (int32_t i = 0; i < n; i++) release(e, 0, list[i], -1);
  }
  int32_t tmps[5], n_tmp = 0;
  int32_t loop = zero ? 0 : opt->loop_temps + (step->foreach ? 0 : opt->single_temps);
  /* The for-loop step (foreach off) binds its result (Adam's denom, RMSprop's avg, Adagrad's std)
   * to a loop variable that lives until the next parameter's is assigned: while parameter i's
   * temporaries exist, parameter i - 1's result is still alive (torch/optim/adam.py
   * _single_tensor_adam: denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)). The
   * parameters in model.parameters() order: FSDP1's FlatParameters, else the graph's. */
  uint64_t prev = 0, bound = 0;
  if (!zero && !step->foreach && opt->single_temps && loop) {
    size_t cap = (size_t)g->n_values + 1;
    uint64_t *flat = mb_arena_array(&b->a, cap, sizeof(uint64_t));
    if (!flat) return mb_fail(b->d, MB_E_NOMEM, "out of memory");
    size_t n_flat = mb_dist_flat_units(b, flat, cap);
    uint64_t last = 0, best = 0;
    int32_t dt = largest_dt;
    for (size_t i = 0; i < (n_flat ? n_flat : (size_t)g->n_values); i++) {
      uint64_t here;
      if (n_flat) {
        here = dtype_bytes(largest_dt, flat[i]);
      } else {
        int32_t v = (int32_t)i;
        if (!ms->trainable_init[v] || !e->reached[v]) continue;
        dt = fp32_step ? MB_DTYPE_FLOAT : ms->rt[v];
        here = dtype_bytes(dt, rank_numel(step, shards, &g->inits[g->values[v].initializer]));
      }
      if (last + (uint64_t)loop * here > best) {
        best = last + (uint64_t)loop * here;
        prev = last;
        bound = here;
      }
      last = here;
    }
  } else {
    bound = dtype_bytes(largest_dt, largest);
  }
  if (prev && loop) {
    tmps[n_tmp] = fixed(e, 0, MB_CAT_TEMPORARY, prev, "optimizer temporary (the previous parameter's, still bound)", 0);
    if (tmps[n_tmp++] < 0) return b->d->status;
  }
  for (int l = 0; l < loop && l < 4 && bound; l++) {
    tmps[n_tmp] = fixed(e, 0, MB_CAT_TEMPORARY, bound, "optimizer temporary", 0);
    if (tmps[n_tmp++] < 0) return b->d->status;
  }
  for (int32_t i = 0; i < n_tmp; i++) release(e, 0, tmps[i], -1);
  return b->d->status;
}

static int by_until(const void *a, const void *b) {
  const mb_hold *x = a, *y = b;
  return (x->until > y->until) - (x->until < y->until);
}

/* ---- evaluation inside training (eval_batch) ----
 * After the step: zero_grad, then diffusers' validation pattern (training_utils.py, EMAModel):
 *   ema.store(model.parameters())    [param.detach().cpu().clone() for each]: a host copy, so
 *                                    device memory only when training on the CPU
 *   ema.copy_to(model.parameters())  param.data.copy_(shadow): in place, the shadows on the device
 *   model.eval(); with torch.no_grad(): for each batch: out = model(x) (kept: eval_keep_outputs)
 *   ema.restore(model.parameters())  copies back in place, drops the stored list
 * The forward is the model's in eval mode at the evaluation's batch (MB_MS_EVAL): nothing is
 * recorded or kept, dropout returns its input, BatchNorm normalises with its running statistics
 * (no batch statistics); autocast caches its weight copies again until it exits. The training
 * batch stays referenced by the loop. */
static int emit_eval(emitter *e) {
  mb_builder *b = e->b;
  const mb_step *step = b->step;
  mb_plan *p = b->p;
  const mb_model_state *ms = &b->ms[0];
  mb_model_state *es = &b->ms[MB_MS_EVAL];
  const mb_graph *g = ms->g;
  e->dup = NULL;
  p->step_end = p->n_ev;
  /* zero_grad(set_to_none=True), the step's last act: every .grad goes (a storage once); FSDP
   * dropped the accumulated unsharded ones at its reduce-scatters already (dist.c) */
  bool reduced = step->grad_accumulation > 1 && mb_dist_fsdp_reduces(&step->dist);
  if (step->eval.zero_grad == MB_ZERO_GRAD_NONE && !reduced) {
    bool *gone = mb_arena_array(&b->a, (size_t)p->n_slots + 1, sizeof(bool));
    if (!gone) return mb_fail(b->d, MB_E_NOMEM, "out of memory");
    for (int32_t v = 0; v < g->n_values; v++) {
      int32_t s = ms->trainable_init[v] && e->reached[v] ? e->pgrad[v] : -1;
      if (s < 0 || gone[s]) continue;
      gone[s] = true;
      ev(e, 0, 0, s, -1);
    }
  }
  e->phase = MB_PHASE_EVAL;
  /* ema.store: a copy of every parameter (model.parameters(): trainable or not) */
  int32_t first_store = p->n_slots, n_store = 0;
  if (step->eval.ema_swap && step->cpu)
    for (int32_t v = 0; v < g->n_values; v++) {
      int32_t w = g->values[v].kind == MB_VALUE_INITIALIZER ? ms->slot_of[v] : -1;
      if (w < 0 || slot(e, w)->rule != MB_SZ_FIXED ||
          (slot(e, w)->category != MB_CAT_PARAMETER && slot(e, w)->category != MB_CAT_EMBEDDING))
        continue;
      int32_t s = fixed(e, 0, MB_CAT_EMA, slot(e, w)->fixed, "EMA store: parameter copy", 0);
      if (s < 0) return b->d->status;
      slot(e, s)->tag = MB_TAG_EMA_STORE;
      n_store++;
    }
  /* outputs kept from the evaluation's earlier batches */
  int64_t keep = step->eval.keep_outputs;
  int32_t first_kept = p->n_slots, n_kept = 0;
  for (int32_t i = 0; i < g->n_outputs && keep > 0; i++) {
    int32_t o = g->outputs[i];
    if (o < 0 || es->host[o] || es->slot_of[o] < 0 || slot(e, es->slot_of[o])->rule == MB_SZ_ZERO) continue;
    int32_t s = fresh(e, MB_MS_EVAL, MB_SZ_VALUE, MB_CAT_ACTIVATION, o, es->rt[o], "evaluation outputs of earlier batches");
    if (s < 0) return b->d->status;
    slot(e, s)->tag = MB_TAG_EVAL_OUTPUTS;
    slot(e, s)->copies = (uint32_t)(keep - 1);
    ev(e, 1, 0, s, -1);
    n_kept++;
  }
  /* the evaluation batch and its forward */
  p->eval_fwd_first = p->n_ev;
  for (int32_t i = 0; i < g->n_inputs; i++) {
    int32_t s = es->slot_of[g->inputs[i]];
    hold(e, s);
    ev(e, 1, 0, s, -1);
  }
  for (int32_t i = 0; i < g->n_outputs; i++) hold(e, es->slot_of[g->outputs[i]]);
  mb_hold *holds = NULL;
  int32_t n_holds = 0, next = 0;
  if (mb_module_holds(b, MB_MS_EVAL, &holds, &n_holds) != MB_OK) return b->d->status;
  if (n_holds > 1) qsort(holds, (size_t)n_holds, sizeof(mb_hold), by_until);
  for (int32_t k = 0; k < n_holds; k++) hold(e, holds[k].slot);
  for (int32_t i = 0; i < es->n_ln; i++) {
    if (forward_node(e, 0, &es->ln[i], false, false) != MB_OK) return b->d->status;
    for (; next < n_holds && holds[next].until == i; next++) release(e, 0, holds[next].slot, es->ln[i].node);
  }
  for (int32_t k = 0; k < es->n_wc; k++) release(e, 0, es->wc[k].copy_slot, -1); /* autocast exits */
  for (int32_t i = 0; i < g->n_inputs; i++) release(e, 0, es->slot_of[g->inputs[i]], -1);
  if (!keep)
    for (int32_t i = 0; i < g->n_outputs; i++) release(e, 0, es->slot_of[g->outputs[i]], -1);
  p->eval_fwd_end = p->n_ev;
  /* the evaluation ends: its outputs go, ema.restore drops the stored copies */
  if (keep)
    for (int32_t i = 0; i < g->n_outputs; i++) release(e, 0, es->slot_of[g->outputs[i]], -1);
  for (int32_t k = 0; k < n_kept; k++) release(e, 0, first_kept + k, -1);
  for (int32_t k = 0; k < n_store; k++) ev(e, 0, 0, first_store + k, -1);
  return b->d->status;
}

int mb_emit_step(mb_builder *b) {
  mb_loop_state loop;
  emitter e = {.b = b, .loop = &loop};
  mb_model_state *ms = &b->ms[0];
  const mb_graph *g = ms->g;
  e.gslot = mb_arena_array(&b->a, (size_t)g->n_values + 1, sizeof(int32_t));
  e.pgrad = mb_arena_array(&b->a, (size_t)g->n_values + 1, sizeof(int32_t));
  e.owned_first = mb_arena_array(&b->a, (size_t)g->n_values + 1, sizeof(int32_t));
  e.owned_n = mb_arena_array(&b->a, (size_t)g->n_values + 1, sizeof(int32_t));
  e.reached_any = mb_arena_array(&b->a, (size_t)g->n_values + 1, sizeof(bool));
  e.gview = mb_arena_array(&b->a, (size_t)g->n_values + 1, sizeof(bool));
  e.gexp = mb_arena_array(&b->a, (size_t)g->n_values + 1, sizeof(bool));
  if (!e.reached_any || !e.gview || !e.gexp) return mb_fail(b->d, MB_E_NOMEM, "out of memory");
  if (!e.gslot || !e.pgrad || !e.owned_first || !e.owned_n) return mb_fail(b->d, MB_E_NOMEM, "out of memory");
  for (int32_t v = 0; v < g->n_values; v++) e.gslot[v] = e.pgrad[v] = -1;
  if (mb_loop_init(&e, &loop) != MB_OK) return b->d->status;
  loss_state ls = {0};
  segment *sg = NULL;
  if (find_segments(&e, &sg) != MB_OK) return b->d->status;

  e.phase = MB_PHASE_SETUP;
  if (emit_setup(&e, &ls) != MB_OK) return b->d->status;

  mb_hold *holds[2] = {NULL, NULL};
  int32_t n_holds[2] = {0, 0}, next;
  for (int k = 0; k < (b->step->teacher ? 2 : 1); k++) {
    if (mb_module_holds(b, k, &holds[k], &n_holds[k]) != MB_OK) return b->d->status;
    if (n_holds[k] > 1) qsort(holds[k], (size_t)n_holds[k], sizeof(mb_hold), by_until);
  }

  if (b->step->teacher) {
    e.phase = MB_PHASE_TEACHER;
    mb_model_state *ts = &b->ms[1];
    for (int32_t i = 0; i < ts->g->n_outputs; i++) hold(&e, ts->slot_of[ts->g->outputs[i]]);
    for (int32_t k = 0; k < n_holds[1]; k++) hold(&e, holds[1][k].slot);
    next = 0;
    for (int32_t i = 0; i < ts->n_ln; i++) {
      if (forward_node(&e, 1, &ts->ln[i], false, false) != MB_OK) return b->d->status;
      for (; next < n_holds[1] && holds[1][next].until == i; next++) release(&e, 1, holds[1][next].slot, ts->ln[i].node);
    }
  }

  e.phase = MB_PHASE_FORWARD;
  for (int32_t i = 0; i < g->n_outputs; i++) hold(&e, ms->slot_of[g->outputs[i]]);
  for (int32_t k = 0; k < n_holds[0]; k++) hold(&e, holds[0][k].slot);
  next = 0;
  for (int32_t i = 0; i < ms->n_ln; i++) {
    const mb_lnode *ln = &ms->ln[i];
    if (ln->segment >= 0 && sg[ln->segment].first == i)
      for (int32_t k = 0; k < sg[ln->segment].n_inputs; k++) hold(&e, sg[ln->segment].inputs[k]);
    if (forward_node(&e, 0, ln, ln->segment < 0, false) != MB_OK) return b->d->status;
    for (; next < n_holds[0] && holds[0][next].until == i; next++) release(&e, 0, holds[0][next].slot, ln->node);
  }
  mb_loop_forward_done(&e, &loop);

  e.phase = MB_PHASE_LOSS;
  if (loss_forward(&e, &ls) != MB_OK || mb_loop_loss_done(&e, &loop, ls.value) != MB_OK) return b->d->status;
  for (int32_t k = 0; k < ms->n_wc; k++) release(&e, 0, ms->wc[k].copy_slot, -1); /* autocast exits */

  e.phase = MB_PHASE_BACKWARD;
  if (persistent_grads(b->step)) { /* weights several nodes read: their input buffers */
    e.held = mb_arena_array(&b->a, (size_t)g->n_values + 1, sizeof(int32_t));
    e.due = mb_arena_array(&b->a, (size_t)g->n_values + 1, sizeof(int32_t));
    e.held_view = mb_arena_array(&b->a, (size_t)g->n_values + 1, sizeof(bool));
    if (!e.held || !e.due || !e.held_view) return mb_fail(b->d, MB_E_NOMEM, "out of memory");
    for (int32_t v = 0; v < g->n_values; v++) e.held[v] = -1;
    for (int32_t i = 0; i < ms->n_ln; i++)
      for (int32_t k = 0; ms->ln[i].record && k < ms->ln[i].n_in; k++) {
        int32_t v = ms->ln[i].in[k];
        if (v >= 0 && ms->trainable_init[v]) e.due[v]++;
      }
    for (int32_t v = 0; v < g->n_values; v++)
      if (e.due[v] < 2) e.due[v] = 0; /* read once: its gradient goes straight into .grad */
  }
  mb_loop_backward_start(&e, &loop);
  if (loss_backward(&e, &ls) != MB_OK) return b->d->status;
  if (b->step->teacher && !b->step->eval.teacher_cache) { /* with a cache they stay: emit_step_end */
    mb_model_state *ts = &b->ms[1];
    for (int32_t i = 0; i < ts->g->n_outputs; i++) release(&e, 1, ts->slot_of[ts->g->outputs[i]], -1);
  }
  bool *done = mb_arena_array(&b->a, (size_t)ms->n_ln + 1, sizeof(bool));
  if (!done) return mb_fail(b->d, MB_E_NOMEM, "out of memory");
  for (int32_t i = ms->n_ln - 1; i >= 0; i--) {
    const mb_lnode *ln = &ms->ln[i];
    int32_t id = ln->segment;
    if (ln->record && has_grad(&e, ln)) {
      if (id >= 0 && !sg[id].recomputed && recompute(&e, &sg[id], id) != MB_OK) return b->d->status;
      if (id < 0) e.dup = NULL;
      if (backward_node(&e, ln) != MB_OK) return b->d->status;
      done[i] = true;
    }
    if (id >= 0 && sg[id].first == i) {
      for (int32_t k = 0; k < sg[id].n_inputs; k++) release(&e, 0, sg[id].inputs[k], -1);
      e.dup = NULL;
    }
  }
  /* kept tensors of nodes whose backward never ran go when the graph is freed */
  for (int32_t i = 0; i < ms->n_ln; i++)
    if (ms->ln[i].record && !done[i] && ms->ln[i].segment < 0)
      for (int32_t k = 0; k < ms->ln[i].n_saved; k++) release(&e, 0, ms->ln[i].saved[k], -1);
  for (int32_t v = 0; v < g->n_values; v++)
    if (e.gslot[v] >= 0) release(&e, 0, e.gslot[v], -1);
  for (int32_t v = 0; e.held && v < g->n_values; v++) /* a reader that made no gradient */
    if (e.held[v] >= 0) release(&e, 0, e.held[v], -1);
  mb_loop_backward_done(&e, &loop);

  /* A weight the loss never reaches gets no .grad, and torch.optim skips weights without
   * one: no state, no master copy, no accumulated grad. Its setup slots become empty. */
  bool *reached = mb_arena_array(&b->a, (size_t)g->n_values + 1, sizeof(bool));
  if (!reached) return mb_fail(b->d, MB_E_NOMEM, "out of memory");
  for (int32_t v = 0; v < g->n_values; v++) {
    if (!ms->trainable_init[v]) continue;
    bool got = persistent_grads(b->step) ? e.reached_any[v] : e.pgrad[v] >= 0;
    reached[v] = got;
    if (got) b->p->slots[ms->slot_of[v]].has_grad = true;
    else for (int32_t k = 0; k < e.owned_n[v]; k++) b->p->slots[e.owned_first[v] + k].rule = MB_SZ_ZERO;
  }
  e.phase = MB_PHASE_OPTIMIZER;
  e.reached = reached;
  int32_t n_grads = 0, grad_dtype = MB_DTYPE_FLOAT;
  for (int32_t v = 0; v < g->n_values; v++)
    if (reached[v]) {
      grad_dtype = ms->rt[v];
      n_grads++;
    }
  if (mb_loop_clip(&e, &loop, n_grads, (uint64_t)mb_dtype_bits(grad_dtype) / 8) != MB_OK ||
      emit_optimizer(&e) != MB_OK)
    return b->d->status;
  mb_loop_step_done(&e, &loop);
  b->p->states_at_init = mb_optim_get(b->step->optimizer)->states_at_init;
  if (b->step->eval.batch && emit_eval(&e) != MB_OK) return b->d->status;
  if (b->step->teacher && b->step->eval.teacher_cache) { /* this step's entry of the cache: the step ends */
    mb_model_state *ts = &b->ms[1];
    for (int32_t i = 0; i < ts->g->n_outputs; i++) release(&e, 1, ts->slot_of[ts->g->outputs[i]], -1);
  }
  mb_loop_iteration_done(&e, &loop);
  return b->d->status;
}
