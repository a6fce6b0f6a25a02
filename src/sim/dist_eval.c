/* An evaluation (eval_batch) after a data-parallel step (docs/distributed.md):
 * - zero_grad(set_to_none=True) before it frees every .grad (emit_eval); where the wrapper freed
 *   a .grad already (FSDP's reduce-scatter, ZeRO's reduction, DDP's bucket views) that second
 *   free is dropped, and FSDP's sharded gradients go there instead;
 * - the forward runs under torch.no_grad() with the parameters still sharded, so FSDP and ZeRO-3
 *   gather each unit (each module: ZeRO-3) before it runs: FULL_SHARD units and ZeRO-3 modules
 *   are released after their forward (FSDPParamGroup.post_forward -> reshard, ZeRO-3's
 *   post-forward release); the root unit (reshard_after_forward None) and SHARD_GRAD_OP units
 *   are not resharded in forward and stay gathered: here until the evaluation ends (torch keeps
 *   them until the next backward). FSDP2 gathers through one all-gather output of the unit's
 *   padded size, freed after the copy-out; FSDP1 into its padded flat parameter. */
#include <stdlib.h>
#include <string.h>

#include "graph/dtype.h"
#include "graph/origin.h"
#include "sim/build.h"
#include "sim/weave.h"

static int nomem(mb_builder *b) { return b->d->status ? b->d->status : mb_fail(b->d, MB_E_NOMEM, "out of memory"); }

/* A node's or parameter's unit: index into names (added when new), 0 the root. */
static int32_t unit_named(mb_builder *b, char **names, int32_t *n, int32_t cap, const char *path, size_t len) {
  if (!len) return 0;
  for (int32_t i = 1; i < *n; i++)
    if (strlen(names[i]) == len && !strncmp(names[i], path, len)) return i;
  if (*n == cap) return -1;
  char *s = mb_arena_alloc(&b->a, len + 1);
  if (!s) return -1;
  memcpy(s, path, len);
  s[len] = '\0';
  names[*n] = s;
  return (*n)++;
}

/* A free at or after the evaluation's start of a slot freed already and not made again since
 * (zero_grad's of a .grad the wrapper freed) goes; the FSDP sharded gradients, which nothing
 * freed, are freed by that zero_grad. */
static int zero_grad_once(mb_builder *b) {
  mb_plan *p = b->p;
  bool *freed = calloc((size_t)p->n_slots + 1, sizeof(bool));
  mb_event_rec *ev = malloc(((size_t)p->n_ev + (size_t)p->n_slots + 1) * sizeof *ev);
  if (!freed || !ev) {
    free(freed);
    free(ev);
    return nomem(b);
  }
  for (int32_t i = 0; i < p->n_ev; i++)
    if (!p->ev[i].alloc) freed[p->ev[i].slot] = true;
  int32_t k = 0, step_end = p->step_end, first = p->eval_fwd_first, end = p->eval_fwd_end;
  bool *seen = calloc((size_t)p->n_slots + 1, sizeof(bool));
  if (!seen) {
    free(freed);
    free(ev);
    return nomem(b);
  }
  for (int32_t i = 0; i < p->n_ev; i++) {
    if (i == p->step_end) {
      step_end = k;
      for (int32_t s = 0; s < p->n_slots; s++) /* zero_grad: the sharded .grad tensors */
        if (!freed[s] && p->slots[s].name && !strcmp(p->slots[s].name, "FSDP sharded gradients") && !p->slots[s].model)
          ev[k++] = (mb_event_rec){0, MB_PHASE_EVAL, 0, s, -1};
    }
    if (i == p->eval_fwd_first) first = k;
    if (i == p->eval_fwd_end) end = k;
    const mb_event_rec *e = &p->ev[i];
    if (!e->alloc && seen[e->slot] && i >= p->step_end) continue; /* freed, not made again since */
    seen[e->slot] = !e->alloc;
    ev[k++] = *e;
  }
  if (p->eval_fwd_end >= p->n_ev) end = k;
  free(p->ev);
  p->ev = ev;
  p->n_ev = p->cap_ev = k;
  p->step_end = step_end;
  p->eval_fwd_first = first;
  p->eval_fwd_end = end;
  free(freed);
  free(seen);
  return MB_OK;
}

/* Units gathered for the evaluation's forward: slot and the first and last eval event of each. */
typedef struct eval_unit {
  uint64_t bytes, padded; /* unsharded parameter bytes; the all-gather's padded size (FSDP) */
  int32_t first, last;
} eval_unit;

/* Each node's unit, and each unit's unsharded and padded parameter bytes. */
static int eval_unit_sizes(mb_builder *b, const mb_wrapset *ws, char **names, int32_t *node_unit,
                           eval_unit *u, int32_t cap, int32_t *n_units) {
  const mb_dist_opts *o = &b->step->dist;
  bool zero3 = o->strategy == MB_STRATEGY_ZERO3 && mb_dist_shards(o) > 1;
  const mb_model_state *ms = &b->ms[0];
  const mb_graph *g = ms->g;
  int32_t n = *n_units, shards = mb_dist_shards(o);
  for (int32_t k = 0; k < g->n_nodes; k++) {
    const char *scope = g->nodes[k].origin.scope, *slash = scope ? strrchr(scope, '/') : NULL;
    char dotted[512];
    node_unit[k] = 0;
    if (scope && scope[0] == '/' && mb_origin_module_of_scope(scope, (size_t)(slash - scope), dotted, sizeof dotted))
      node_unit[k] = unit_named(b, names, &n, cap, dotted, mb_dist_unit_prefix(ws, dotted));
    if (node_unit[k] < 0) return nomem(b);
  }
  for (int32_t k = 0; k < cap; k++) u[k] = (eval_unit){0, 0, -1, -1};
  /* each sharded parameter's unit: its name's module when a glob names it, else its first reader's */
  for (int32_t v = 0; v < g->n_values; v++) {
    int32_t s = mb_param_slot(b, v);
    if (s < 0) continue;
    const mb_const_tensor *ct = &g->inits[g->values[v].initializer];
    if (zero3 && (int64_t)ct->numel <= o->persistence_threshold) continue; /* whole on every rank */
    int32_t unit = -1;
    const char *dot = ct->name ? strrchr(ct->name, '.') : NULL;
    if (dot && (size_t)(dot - ct->name) < 511) {
      char path[512];
      memcpy(path, ct->name, (size_t)(dot - ct->name));
      path[dot - ct->name] = '\0';
      size_t w = mb_dist_unit_prefix(ws, path);
      if (w && (unit = unit_named(b, names, &n, cap, path, w)) < 0) return nomem(b);
    }
    for (int32_t k = 0; k < g->n_nodes && unit < 0; k++)
      for (int32_t i = 0; i < g->nodes[k].n_inputs && unit < 0; i++)
        if (g->nodes[k].inputs[i] == v) unit = node_unit[k];
    if (unit < 0) unit = 0;
    uint64_t full = 0, part = 0;
    mb_dtype_bytes(ms->rt[v], (uint64_t)ct->numel, &full);
    mb_dtype_bytes(ms->rt[v], (uint64_t)mb_dist_shard_numel(o, shards, ct->dims, ct->rank, ct->numel), &part);
    u[unit].bytes += full;
    u[unit].padded += part * (uint64_t)shards;
  }
  *n_units = n;
  return MB_OK;
}

static int gather_units(mb_builder *b) {
  const mb_dist_opts *o = &b->step->dist;
  bool zero3 = o->strategy == MB_STRATEGY_ZERO3 && mb_dist_shards(o) > 1;
  if (!zero3 && !mb_dist_fsdp_reduces(o)) return MB_OK;
  mb_plan *p = b->p;
  const mb_model_state *ms = &b->ms[0];
  const mb_graph *g = ms->g;
  int32_t cap = g->n_nodes + g->n_values + 2, n = 1;
  char **names = mb_arena_array(&b->a, (size_t)cap, sizeof(char *));
  int32_t *node_unit = mb_arena_array(&b->a, (size_t)g->n_nodes + 1, sizeof(int32_t));
  eval_unit *u = mb_arena_array(&b->a, (size_t)cap, sizeof(eval_unit));
  if (!names || !node_unit || !u) return nomem(b);
  names[0] = "";
  mb_wrapset *ws;
  int rc = mb_dist_wrapset_new(b, &ws);
  if (rc != MB_OK) return rc;
  rc = eval_unit_sizes(b, ws, names, node_unit, u, cap, &n);
  mb_dist_wrapset_free(ws);
  if (rc != MB_OK) return rc;
  int32_t eval_last = -1;
  for (int32_t i = 0; i < p->n_ev; i++) {
    const mb_event_rec *e = &p->ev[i];
    if (e->phase != MB_PHASE_EVAL || e->model || e->node < 0 || e->node >= g->n_nodes) continue;
    eval_unit *x = &u[node_unit[e->node]];
    if (x->first < 0) x->first = i;
    x->last = eval_last = i;
  }
  if (eval_last < 0) return MB_OK;
  /* kept gathered to the end: the root (unless resharded after forward) and SHARD_GRAD_OP */
  bool keep_all = !zero3 && o->sharding == MB_FSDP_SHARD_GRAD_OP;
  bool keep_root = !zero3 && !(o->reshard_root && !keep_all);
  /* each unit gathered before its first node runs (FSDP2: through its all-gather output) and
   * released after its last */
  mb_weave w = {0};
  for (int32_t k = 0; k < n && rc == MB_OK; k++) {
    if (!u[k].bytes || u[k].first < 0) continue;
    if (keep_all || (k == 0 && keep_root)) u[k].last = eval_last;
    bool flat = !zero3 && o->fsdp_version == 1;
    int32_t full = mb_slot_new(b, 0, MB_SZ_FIXED, MB_CAT_PARAMETER, -1, 0, "unsharded parameters (evaluation)"), out = -1;
    if (full < 0) {
      rc = nomem(b);
      break;
    }
    p->slots[full].fixed = flat ? u[k].padded : u[k].bytes;
    if (!zero3 && !flat) { /* FSDP2's all-gather output */
      out = mb_slot_new(b, 0, MB_SZ_FIXED, MB_CAT_TEMPORARY, -1, 0, "FSDP all-gather output (evaluation)");
      if (out < 0) {
        rc = nomem(b);
        break;
      }
      p->slots[out].fixed = u[k].padded;
    }
    int64_t before = 2 * (int64_t)u[k].first, after = 2 * (int64_t)u[k].last + 1;
    if (out >= 0) rc = mb_weave_add(b, &w, before, 1, MB_PHASE_EVAL, out);
    if (rc == MB_OK) rc = mb_weave_add(b, &w, before, 1, MB_PHASE_EVAL, full);
    if (rc == MB_OK && out >= 0) rc = mb_weave_add(b, &w, before, 0, MB_PHASE_EVAL, out);
    if (rc == MB_OK) rc = mb_weave_add(b, &w, after, 0, MB_PHASE_EVAL, full);
  }
  if (rc == MB_OK) rc = mb_weave_in(b, &w);
  free(w.at);
  return rc;
}

int mb_dist_eval_events(mb_builder *b) {
  const mb_dist_opts *o = &b->step->dist;
  if (!b->p->eval_batch || o->strategy == MB_STRATEGY_NONE || b->p->step_end >= b->p->n_ev) return MB_OK;
  int rc = zero_grad_once(b);
  return rc == MB_OK ? gather_units(b) : rc;
}
