/* Where a model's own code runs differently under export than in eager training, charge what
 * eager training runs.
 *
 * Hugging Face transformers (5.x, transformers/masking_utils.py and
 * integrations/sdpa_attention.py) check torch.compiler.is_exporting():
 *   - exported, they always build the causal mask and pass it to SDPA; in eager training
 *     without padding (query length == key length, no padded token) they skip it
 *     (_ignore_causal_mask_sdpa) and call SDPA with is_causal=True;
 *   - with a mask, GQA keys and values are repeated to every query head (repeat_kv: expand,
 *     then a reshape that copies); without one, SDPA is called with enable_gqa=True on the
 *     unrepeated tensors (use_gqa_in_sdpa, head dims up to 256).
 * The exported graph says which SDPA nodes are transformers' (the module class of each node)
 * and whether a mask depends on anything but shapes (a padding mask reads a graph input's
 * values; a causal mask only the sequence length). A shape-only mask is dropped from the
 * SDPA, the SDPA reads the tensors repeat_kv started from, and the nodes that then feed
 * nothing (the mask's construction, the repeats) are dead: eager never ran them. */
#include <stdlib.h>
#include <string.h>

#include "graph/dtype.h"
#include "passes/fuse.h"

#define MAX_HEAD_DIM 256 /* use_gqa_in_sdpa: larger head dims fall back to repeated k/v */

static bool is(const mb_node *n, const char *op) { return !n->domain[0] && !strcmp(n->op_type, op); }

static bool aten_is(const mb_node *n, const char *op) {
  size_t len = strlen(op);
  return n->origin.aten && !strncmp(n->origin.aten, op, len) && n->origin.aten[len] == '.';
}

static bool from_transformers(const mb_node *n) {
  return n->origin.cls && !strncmp(n->origin.cls, "transformers.", 13);
}

/* Values computed from shapes and constants alone (no graph input's or weight's values). */
static bool *shape_only_values(const mb_graph *g, mb_arena *a) {
  bool *so = mb_arena_array(a, (size_t)g->n_values + 1, sizeof(bool));
  if (!so) return NULL;
  for (int32_t k = 0; k < g->n_nodes; k++) {
    const mb_node *n = &g->nodes[k];
    bool only = true;
    if (!is(n, "Shape") && !is(n, "Size"))
      for (int32_t i = 0; i < n->n_inputs; i++)
        if (n->inputs[i] >= 0 && !so[n->inputs[i]]) only = false;
    for (int32_t o = 0; o < n->n_outputs; o++)
      if (n->outputs[o] >= 0) so[n->outputs[o]] = only;
  }
  return so;
}

static const mb_node *producer(const mb_graph *g, int32_t v) {
  return v >= 0 && g->values[v].kind == MB_VALUE_NODE_OUTPUT ? &g->nodes[g->values[v].producer] : NULL;
}

/* repeat_kv's output (x[:, :, None].expand(...).reshape(...)): the tensor it repeated, or -1.
 * The reshape became clone + _unsafe_view; the indexing, slices and unsqueezes are views. */
static int32_t unrepeated(const mb_graph *g, const mb_tinfo *t, int32_t v) {
  const mb_node *view = producer(g, v), *clone, *expand;
  if (!view || !aten_is(view, "aten._unsafe_view")) return -1;
  if (!(clone = producer(g, view->inputs[0])) || !aten_is(clone, "aten.clone")) return -1;
  if (!(expand = producer(g, clone->inputs[0])) || !aten_is(expand, "aten.expand")) return -1;
  int32_t x = expand->inputs[0];
  if (t[x].rank < 0 || mb_tinfo_numel(&t[x]) >= mb_tinfo_numel(&t[expand->outputs[0]])) return -1;
  for (int depth = 0; depth < 8; depth++) { /* back through the views to the stored tensor */
    const mb_node *p = producer(g, x);
    if (!p || !(aten_is(p, "aten.slice") || aten_is(p, "aten.unsqueeze") || aten_is(p, "aten.view")))
      break;
    x = p->inputs[0];
  }
  int32_t r = t[x].rank;
  return r == 4 && t[x].dims[3] <= MAX_HEAD_DIM ? x : -1;
}

/* Nodes that compute nothing a live node, group or graph output reads. */
static int mark_dead(const mb_graph *g, const mb_uses *u, mb_fusion *f, mb_arena *a) {
  bool *need = mb_arena_array(a, (size_t)g->n_values + 1, sizeof(bool));
  f->dead = mb_arena_array(a, (size_t)g->n_nodes + 1, sizeof(bool));
  if (!need || !f->dead) return MB_E_NOMEM;
  for (int32_t i = 0; i < g->n_outputs; i++) need[g->outputs[i]] = true;
  for (int32_t v = 0; v < g->n_values; v++) /* a subgraph reads what it captures by name */
    if (g->values[v].num_uses > u->first[v + 1] - u->first[v]) need[v] = true;
  for (int32_t k = g->n_nodes - 1; k >= 0; k--) {
    const mb_node *n = &g->nodes[k];
    int32_t gi = f->group_of[k];
    bool live = false;
    if (gi >= 0) {
      const mb_fused *grp = &f->groups[gi];
      live = need[grp->out];
      if (live && grp->last == k)
        for (int32_t i = 0; i < grp->n_in; i++) need[grp->in[i]] = true;
    } else {
      for (int32_t o = 0; o < n->n_outputs && !live; o++) live = n->outputs[o] >= 0 && need[n->outputs[o]];
      live |= n->n_outputs == 0 || mb_node_num_subgraphs(n) > 0;
      if (live)
        for (int32_t i = 0; i < n->n_inputs; i++)
          if (n->inputs[i] >= 0) need[n->inputs[i]] = true;
    }
    f->dead[k] = !live;
  }
  return MB_OK;
}

int mb_eager_transformers(const mb_graph *g, const mb_tinfo *t, const mb_uses *u, mb_fusion *f,
                          mb_arena *a) {
  bool *so = NULL, changed = false;
  for (int32_t gi = 0; gi < f->n_groups; gi++) {
    mb_fused *grp = &f->groups[gi];
    const mb_node *last = &g->nodes[grp->last];
    if (grp->kind != MB_G_SDPA || grp->n_in < 4 || !from_transformers(last)) continue;
    int32_t mask = grp->in[3];
    if (!mb_dtype_is_float(t[mask].dtype) && t[mask].dtype != MB_DTYPE_BOOL) continue;
    if (!so && !(so = shape_only_values(g, a))) return MB_E_NOMEM;
    if (!so[mask]) continue; /* a padding mask: eager passes it too */
    memmove(grp->in + 3, grp->in + 4, (size_t)(grp->n_in - 4) * sizeof grp->in[0]);
    grp->n_in--;
    changed = true;
    int32_t k = unrepeated(g, t, grp->in[1]), v = unrepeated(g, t, grp->in[2]);
    if (k >= 0 && v >= 0) {
      grp->in[1] = k;
      grp->in[2] = v;
    }
  }
  return changed ? mark_dead(g, u, f, a) : MB_OK;
}
