/* What the training loop around the step keeps alive and does besides the step itself
 * (mb_step.loop and eval.zero_grad), emitted at the points of the step where it matters:
 *
 *   for batch in loader:                  # MB_HOLD_NEXT: last iteration's out and loss live on
 *       out = model(batch)                #   until this rebinds out (and loss, below)
 *       loss = loss_fn(out, target)       # MB_HOLD_LOSS: out goes here (Trainer's compute_loss
 *       [opt.zero_grad()]                 #   returns the loss alone); Lightning's zero_grad
 *       loss.backward()                   # MB_HOLD_BACKWARD: out and loss go when it returns
 *       [clip_grad_norm_(params, max)]    #   (GradScaler: unscale_ first)
 *       opt.step(); opt.zero_grad()
 *       [del out, loss]                   # MB_HOLD_STEP
 *
 * The graph's outputs are what the loop binds to `out` (a Hugging Face ModelOutput: its loss,
 * logits and the rest), the loss is the graph's own (an output) or the one membudget adds. */
#ifndef MB_SIM_LOOP_H
#define MB_SIM_LOOP_H
#include <stdbool.h>
#include <stdint.h>

#include "sim/emitter.h"

typedef struct mb_loop_state {
  int32_t prev_first, prev_n; /* MB_HOLD_NEXT: the previous iteration's outputs, from setup */
  int32_t prev_loss;          /* and its loss (-1: the loss is one of the outputs) */
  int32_t *prev_grads;        /* zero_grad before backward: the previous step's .grad tensors */
  int32_t n_prev_grads;
  bool *let_go;               /* per graph output: released already */
  int32_t loss;               /* the loss value's storage (an output's when the graph has it) */
  int32_t scaled, scale_tmp[2]; /* GradScaler: scale(loss); unscale_'s inv_scale, found_inf */
} mb_loop_state;

/* Whether the loop keeps each weight's .grad of the previous step until its backward. */
bool mb_loop_keeps_grads(const mb_step *step);
/* Before anything is emitted. */
int mb_loop_init(emitter *e, mb_loop_state *L);
/* Setup (after the batch): the previous iteration's outputs and loss (loss_dtype: the dtype the
 * loss is computed in), GradScaler's scale and growth tracker. */
int mb_loop_setup(emitter *e, mb_loop_state *L, int32_t loss_dtype);
/* Setup, per trainable weight when mb_loop_keeps_grads: its previous .grad (of bytes). */
int mb_loop_prev_grad(emitter *e, mb_loop_state *L, uint64_t bytes);
/* out = model(x) has returned: the previous outputs go. */
void mb_loop_forward_done(emitter *e, mb_loop_state *L);
/* The loss exists (its storage: loss): the previous loss goes; MB_HOLD_LOSS lets go of the
 * outputs but the loss; GradScaler scales it. */
int mb_loop_loss_done(emitter *e, mb_loop_state *L, int32_t loss);
/* Backward starts: zero_grad before backward frees the previous .grad tensors. */
void mb_loop_backward_start(emitter *e, mb_loop_state *L);
/* Backward has returned: MB_HOLD_LOSS and MB_HOLD_BACKWARD let go of what is left. */
void mb_loop_backward_done(emitter *e, mb_loop_state *L);
/* Between backward and optimizer.step(): GradScaler.unscale_, clip_grad_norm_ over the n_grads
 * .grad tensors (grad_bytes: one element's size). */
int mb_loop_clip(emitter *e, mb_loop_state *L, int32_t n_grads, uint64_t grad_bytes);
/* optimizer.step() and zero_grad() are done: MB_HOLD_STEP lets go; GradScaler's temporaries go. */
void mb_loop_step_done(emitter *e, mb_loop_state *L);
/* The iteration ends (after any evaluation): MB_HOLD_NEXT's outputs become the next one's
 * previous outputs, so this step's go here. */
void mb_loop_iteration_done(emitter *e, mb_loop_state *L);
#endif
