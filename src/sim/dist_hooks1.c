/* Where FSDP1's post-backward hook runs when forward_prefetch=True (sim/build.h,
 * docs/distributed-truth.md): the backward event after which autograd reaches a unit's flat
 * parameter. Source lines: torch 2.15 (bench/truth/.venv2), torch/distributed/fsdp/.
 *
 * The hook (_runtime_utils.py:1464-1467, _register_post_backward_hook) is a hook of the flat
 * parameter's AccumulateGrad, which autograd runs right after SplitWithSizesBackward0, the node
 * that concatenates the unit's flat gradient: AccumulateGrad's sequence number is UINT64_MAX
 * (torch/csrc/autograd/node.h, NOTE [ Sequence Number]). That split and the parameters' views are
 * made when the unit is unsharded in forward (_flat_param.py:1520-1521, _use_unsharded_flat_param
 * -> _use_unsharded_views; :1920, torch.split). Autograd's ready queue runs the highest sequence
 * number first (engine.h, ReadyQueue::CompareNodeTaskTime), so the split waits for the backward of
 * every node made after it in forward.
 *
 * Without forward_prefetch a unit is unsharded in its own pre-forward: its hook follows its own
 * nodes' backward (dist.c). With it, _pre_forward_unshard (_runtime_utils.py:434) calls
 * _prefetch_handle(FORWARD), which unshards the next unit of the pre-forward order right after
 * the current one, before the current unit's forward runs: the next unit's views are older than
 * the current unit's nodes, and its hook waits for the current unit's backward too (for the unit
 * the root prefetches, for the root's first nodes: the end of backward). Measured
 * (docs/distributed-truth.md): ResNet-18's layer4.1 concatenates its flat gradient after
 * layer4.0's backward, GPT-2's h.0 after the embeddings'. */
#include <stdlib.h>

#include "sim/build.h"

int mb_dist_fsdp1_prefetched_hooks(const mb_builder *b, const int32_t *forder, int32_t n_fwd, const int32_t *fkey,
                                   const int32_t *blast, int32_t *hook, int32_t n_units) {
  const mb_plan *p = b->p;
  const mb_graph *g = b->ms[0].g;
  for (int32_t k = 0; k < n_units; k++) hook[k] = -1;
  if (n_fwd < 2 || p->n_ev <= 0) return MB_OK;
  /* made[n]: the event where node n first runs (its forward: where its autograd node is made);
   * latest[i]: the last backward event of the nodes made at event i or later */
  int32_t *made = malloc(((size_t)g->n_nodes + 1) * sizeof(int32_t));
  int32_t *latest = malloc(((size_t)p->n_ev + 1) * sizeof(int32_t));
  if (!made || !latest) {
    free(made);
    free(latest);
    return b->d->status ? b->d->status : mb_fail(b->d, MB_E_NOMEM, "out of memory");
  }
  for (int32_t n = 0; n < g->n_nodes; n++) made[n] = -1;
  for (int32_t i = 0; i <= p->n_ev; i++) latest[i] = -1;
  for (int32_t i = 0; i < p->n_ev; i++) {
    const mb_event_rec *e = &p->ev[i];
    if (e->model || e->node < 0 || e->node >= g->n_nodes) continue;
    if (made[e->node] < 0) made[e->node] = i;
    if (e->phase == MB_PHASE_BACKWARD && made[e->node] < i && latest[made[e->node]] < i) latest[made[e->node]] = i;
  }
  for (int32_t i = p->n_ev; i-- > 0;)
    if (latest[i + 1] > latest[i]) latest[i] = latest[i + 1];
  /* forder[i] is unsharded by forder[i - 1]'s _pre_forward_prefetch, before that unit's first
   * node (dist.c's forward loop gathers it there) */
  for (int32_t i = 1; i < n_fwd; i++) {
    int32_t k = forder[i], by = fkey[forder[i - 1]];
    if (by < 0 || blast[k] < 0) continue;
    hook[k] = latest[by] > blast[k] ? latest[by] : blast[k];
  }
  free(made);
  free(latest);
  return MB_OK;
}
