/* Gradient accumulation under the data-parallel wrappers (sim/dist.h, docs/distributed.md):
 * which tensors the emitted step keeps across micro-steps and where a wrapper lets them go.
 *
 * The step simulated is the last micro-step of an optimizer step, the one that syncs: it starts
 * with the .grad tensors the earlier micro-steps accumulated (emit.c makes them at setup, whole:
 * FSDP2's unsharded parameters' .grad under set_requires_gradient_sync(False), FSDP1's unsharded
 * flat gradient under no_sync(), DDP's .grad under no_sync(), ZeRO-1's until the boundary), and
 * backward adds into them in place. Its peak is the cycle's: the earlier micro-steps hold the
 * same tensors with nothing reduced. */
#include <string.h>

#include "sim/build.h"

int32_t mb_dist_accum_grad_value(const mb_builder *b, const mb_event_rec *e) {
  if (b->step->grad_accumulation <= 1 || !e->alloc || e->model || e->phase != MB_PHASE_SETUP) return -1;
  const mb_slot *sl = &b->p->slots[e->slot];
  if (sl->category != MB_CAT_GRADIENT || sl->rule != MB_SZ_FIXED || !sl->name) return -1;
  const mb_model_state *ms = &b->ms[0];
  const mb_graph *g = ms->g;
  for (int32_t v = 0; v < g->n_values; v++) {
    if (!ms->trainable_init[v]) continue;
    const char *name = g->inits[g->values[v].initializer].name;
    if (name && !strcmp(name, sl->name)) return v;
  }
  return -1;
}
