/* The training loop around the step (sim/loop.h). Sources: torch/nn/utils/clip_grad.py
 * (_get_total_norm: one norm per gradient, their stack, its norm; _clip_grads_with_norm_:
 * max_norm / (total + 1e-6) clamped to 1, multiplied into every gradient in place),
 * torch/amp/grad_scaler.py (the scale and growth tracker made at the first scale(); unscale_:
 * inv_scale = scale.double().reciprocal().float() and a found_inf per device, the gradients
 * unscaled in place; update() drops them), transformers' Trainer.training_step / compute_loss,
 * Lightning's automatic.py (Closure: training_step, zero_grad, backward) and
 * shared/docs/loops-and-losses.md. */
#include "sim/loop.h"

bool mb_loop_keeps_grads(const mb_step *step) {
  return step->eval.zero_grad == MB_ZERO_GRAD_BEFORE_BACKWARD;
}

static const mb_graph *graph_of(const emitter *e) { return e->b->ms[0].g; }

/* A scalar of `bytes` that lives until released (persistent: for the whole run). */
static int32_t scalar(emitter *e, uint64_t bytes, int cat, const char *name, int persistent) {
  return fixed(e, 0, cat, bytes, name, persistent);
}

int mb_loop_init(emitter *e, mb_loop_state *L) {
  mb_builder *b = e->b;
  const mb_graph *g = graph_of(e);
  *L = (mb_loop_state){.prev_loss = -1, .loss = -1, .scaled = -1, .scale_tmp = {-1, -1}};
  L->let_go = mb_arena_array(&b->a, (size_t)g->n_outputs + 1, sizeof(bool));
  L->prev_grads = mb_arena_array(&b->a, (size_t)g->n_values + 1, sizeof(int32_t));
  if (!L->let_go || !L->prev_grads) return mb_fail(b->d, MB_E_NOMEM, "out of memory");
  return MB_OK;
}

int mb_loop_setup(emitter *e, mb_loop_state *L, int32_t loss_dtype) {
  mb_builder *b = e->b;
  const mb_step *step = b->step;
  const mb_model_state *ms = &b->ms[0];
  const mb_graph *g = graph_of(e);
  L->prev_first = b->p->n_slots;
  L->prev_n = 0;
  if (step->loop.grad_scaler &&
      (scalar(e, 4, MB_CAT_OPTIMIZER, "GradScaler scale", 1) < 0 ||
       scalar(e, 4, MB_CAT_OPTIMIZER, "GradScaler growth tracker", 1) < 0))
    return b->d->status;
  if (step->loop.hold != MB_HOLD_NEXT) return b->d->status;
  for (int32_t i = 0; i < g->n_outputs; i++) {
    int32_t o = g->outputs[i];
    bool seen = false; /* two outputs of one storage (a view returned beside its base) */
    for (int32_t j = 0; j < i; j++) seen |= ms->slot_of[g->outputs[j]] == ms->slot_of[o];
    if (seen || ms->slot_of[o] < 0) continue;
    int32_t s = fresh(e, 0, MB_SZ_VALUE, MB_CAT_ACTIVATION, o, ms->rt[o], "outputs of the previous iteration");
    if (s < 0) return b->d->status;
    slot(e, s)->tag = MB_TAG_LOOP_HELD;
    ev(e, 1, 0, s, -1);
    if (!L->prev_n) L->prev_first = s;
    L->prev_n = s - L->prev_first + 1;
  }
  if (b->loss != MB_LOSS_NONE) {
    L->prev_loss = mb_slot_new(b, 0, MB_SZ_FIXED, MB_CAT_ACTIVATION, -1, 0, "loss of the previous iteration");
    if (L->prev_loss < 0) return b->d->status;
    slot(e, L->prev_loss)->fixed = (uint64_t)mb_dtype_bits(loss_dtype) / 8;
    slot(e, L->prev_loss)->tag = MB_TAG_LOOP_HELD;
    slot(e, L->prev_loss)->refs = 1;
    ev(e, 1, 0, L->prev_loss, -1);
  }
  return b->d->status;
}

int mb_loop_prev_grad(emitter *e, mb_loop_state *L, uint64_t bytes) {
  int32_t s = fixed(e, 0, MB_CAT_GRADIENT, bytes, "gradient of the previous step (zero_grad before backward)", 0);
  if (s < 0) return e->b->d->status;
  L->prev_grads[L->n_prev_grads++] = s;
  return MB_OK;
}

void mb_loop_forward_done(emitter *e, mb_loop_state *L) {
  for (int32_t k = 0; k < L->prev_n; k++) release(e, 0, L->prev_first + k, -1);
}

/* Releases the outputs still held; with but_loss, not the one the loss is. */
static void let_go_outputs(emitter *e, mb_loop_state *L, bool but_loss) {
  const mb_builder *b = e->b;
  const mb_graph *g = graph_of(e);
  for (int32_t i = 0; i < g->n_outputs; i++) {
    if (L->let_go[i] || (but_loss && b->loss == MB_LOSS_NONE && g->outputs[i] == b->loss_out)) continue;
    release(e, 0, b->ms[0].slot_of[g->outputs[i]], -1);
    L->let_go[i] = true;
  }
}

int mb_loop_loss_done(emitter *e, mb_loop_state *L, int32_t loss) {
  const mb_step *step = e->b->step;
  L->loss = loss;
  release(e, 0, L->prev_loss, -1);
  if (step->loop.hold == MB_HOLD_LOSS) let_go_outputs(e, L, true);
  if (step->loop.grad_scaler) {
    L->scaled = scalar(e, 4, MB_CAT_ACTIVATION, "loss scaled by GradScaler", 0);
    if (L->scaled < 0) return e->b->d->status;
  }
  return e->b->d->status;
}

void mb_loop_backward_start(emitter *e, mb_loop_state *L) {
  for (int32_t k = 0; k < L->n_prev_grads; k++) release(e, 0, L->prev_grads[k], -1);
}

/* The loss membudget added (the graph's own is an output). */
static void let_go_loss(emitter *e, mb_loop_state *L) {
  if (e->b->loss != MB_LOSS_NONE) release(e, 0, L->loss, -1);
}

void mb_loop_backward_done(emitter *e, mb_loop_state *L) {
  release(e, 0, L->scaled, -1);
  if (e->b->step->loop.hold > MB_HOLD_BACKWARD) return;
  let_go_outputs(e, L, false);
  let_go_loss(e, L);
}

int mb_loop_clip(emitter *e, mb_loop_state *L, int32_t n_grads, uint64_t grad_bytes) {
  mb_builder *b = e->b;
  const mb_step *step = b->step;
  if (step->loop.grad_scaler) { /* unscale_: the double reciprocal is a temporary */
    int32_t dbl = scalar(e, 8, MB_CAT_TEMPORARY, "GradScaler 1/scale (double)", 0);
    L->scale_tmp[0] = scalar(e, 4, MB_CAT_TEMPORARY, "GradScaler inv_scale", 0);
    release(e, 0, dbl, -1);
    L->scale_tmp[1] = scalar(e, 4, MB_CAT_TEMPORARY, "GradScaler found_inf", 0);
    if (dbl < 0 || L->scale_tmp[0] < 0 || L->scale_tmp[1] < 0) return b->d->status;
  }
  if (!(step->loop.max_grad_norm > 0) || n_grads <= 0) return b->d->status;
  int32_t norms = mb_slot_new(b, 0, MB_SZ_FIXED, MB_CAT_TEMPORARY, -1, 0, "clip_grad_norm_: a norm per gradient");
  if (norms < 0) return b->d->status;
  slot(e, norms)->fixed = grad_bytes;
  slot(e, norms)->copies = (uint32_t)n_grads; /* n tensors of one element each */
  slot(e, norms)->refs = 1;
  ev(e, 1, 0, norms, -1);
  int32_t stack = scalar(e, grad_bytes * (uint64_t)n_grads, MB_CAT_TEMPORARY, "clip_grad_norm_: the norms stacked", 0);
  int32_t total = scalar(e, grad_bytes, MB_CAT_TEMPORARY, "clip_grad_norm_: total norm", 0);
  release(e, 0, stack, -1);
  release(e, 0, norms, -1);
  int32_t eps = scalar(e, grad_bytes, MB_CAT_TEMPORARY, "clip_grad_norm_: total + 1e-6", 0);
  int32_t coef = scalar(e, grad_bytes, MB_CAT_TEMPORARY, "clip_grad_norm_: clip_coef", 0);
  release(e, 0, eps, -1);
  int32_t clamped = scalar(e, grad_bytes, MB_CAT_TEMPORARY, "clip_grad_norm_: clip_coef clamped", 0);
  release(e, 0, clamped, -1); /* the gradients are multiplied by it in place */
  release(e, 0, coef, -1);
  release(e, 0, total, -1);
  if (stack < 0 || total < 0 || eps < 0 || coef < 0 || clamped < 0) return b->d->status;
  return b->d->status;
}

void mb_loop_step_done(emitter *e, mb_loop_state *L) {
  release(e, 0, L->scale_tmp[0], -1);
  release(e, 0, L->scale_tmp[1], -1);
  if (e->b->step->loop.hold != MB_HOLD_STEP) return;
  let_go_outputs(e, L, false);
  let_go_loss(e, L);
}

void mb_loop_iteration_done(emitter *e, mb_loop_state *L) {
  if (e->b->step->loop.hold != MB_HOLD_NEXT) return;
  let_go_outputs(e, L, false);
  let_go_loss(e, L);
}
