/* One rank of data-parallel training (sim/dist.h; docs/distributed.md): the sizes of sharded
 * states, DDP's gradient buckets, and the gathers, reduce-scatters and gradient frees of FSDP
 * and DeepSpeed ZeRO woven into the step's events.
 *
 * FSDP2 (torch.distributed.fsdp.fully_shard; _fully_shard/_fsdp_param_group.py,
 * _fsdp_collectives.py), as the CPU truth measured it (docs/distributed-truth.md):
 * - every parameter of a unit is sharded on dim 0, padded to a multiple of the shard count
 *   (FSDPParam._init_sharded_param): a rank holds ceil(dim0 / N) rows;
 * - before a unit runs, foreach_all_gather allocates one output of the unit's padded size and
 *   foreach_all_gather_copy_out copies it into each parameter's unsharded storage; in forward
 *   the output is kept until the next unit's all-gather has been waited on, in backward it goes
 *   after the copy-out;
 * - full_shard frees the unsharded storages after the unit's forward and gathers again for its
 *   backward, where the next unit's gather is prefetched; the root stays gathered until
 *   backward ends unless reshard_root;
 * - after a unit's backward, foreach_reduce copies the unsharded gradients into one
 *   reduce-scatter input, the gradients go, the output (the unit's padded size / N) holds the
 *   sharded .grad tensors until zero_grad; the input is kept until the next reduce-scatter.
 * FSDP1 (fsdp_version 1): flat parameters split evenly, gathered straight into the padded flat
 * parameter, the flat gradient freed after its reduce-scatter, NO_SHARD on one rank.
 * With the CPU backend, gloo's copies that NCCL does not make are added.
 * DDP (torch/csrc/distributed/c10d/reducer.cpp, Reducer::initialize_buckets) allocates one flat
 * tensor per bucket at construction, filled in reverse parameter order, the first bucket
 * closed at 1 MiB and the others at bucket_cap_mb; with gradient_as_bucket_view each .grad is
 * replaced by a view of its bucket once complete.
 * ZeRO (deepspeed 0.19.8, docs/deepspeed.md): stage 1 frees the whole gradients in step(),
 * stages 2 and 3 as the reduction buffer fills; stage 3 gathers each module's own parameters. */
#include <stdlib.h>
#include <string.h>

#include "graph/dtype.h"
#include "graph/origin.h"
#include "sim/build.h"
#include "sim/weave.h"
#include "util/glob.h"

/* The failure of a step that ran out of memory (or the one already reported). */
static int nomem(mb_builder *b) { return b->d->status ? b->d->status : mb_fail(b->d, MB_E_NOMEM, "out of memory"); }

int64_t mb_dist_shard_numel(const mb_dist_opts *o, int32_t n, const int64_t *dims, int rank, int64_t numel) {
  if (n <= 1) return numel;
  if (mb_dist_is_zero(o) || o->fsdp_version == 1) return (numel + n - 1) / n; /* flat buffers */
  if (rank < 1 || dims[0] <= 0) return numel;
  int64_t rest = numel / dims[0];
  return (dims[0] + n - 1) / n * rest;
}

size_t mb_ddp_buckets(const mb_dist_opts *o, const uint64_t *grad_bytes, size_t n, uint64_t *out) {
  const uint64_t first = 1u << 20;
  size_t k = 0;
  uint64_t open = 0;
  for (size_t i = n; i-- > 0;) { /* reverse parameter order */
    open += grad_bytes[i];
    if (open >= (k == 0 ? first : o->bucket_cap)) {
      out[k++] = open;
      open = 0;
    }
  }
  if (open) out[k++] = open;
  return k;
}

/* ---- FSDP units ---- */

/* What is wrapped as a unit: the globs of fsdp_wrap, and the modules whose class fsdp_wrap_class
 * names (their dotted paths, found in the graph's class_hierarchy metadata). */
typedef struct mb_wrapset {
  const mb_dist_opts *o;
  char **paths;
  size_t n;
} wrapset;

static size_t wrapped_prefix(const wrapset *ws, const char *path);

static void wrapset_free(wrapset *ws) {
  for (size_t i = 0; i < ws->n; i++) free(ws->paths[i]);
  free(ws->paths);
  ws->paths = NULL;
  ws->n = 0;
}

static bool names_class(const mb_dist_opts *o, const char *name, size_t len) {
  for (size_t k = 0; k < o->n_wrap_class; k++)
    if (strlen(o->wrap_class[k]) == len && !strncmp(o->wrap_class[k], name, len)) return true;
  return false;
}

/* The modules of the wrapped classes: a node's class_names line i (i >= 1; line 0 is the root)
 * is the class of the module its scope's first i segments name. A class no module has, or a
 * graph without class metadata, is an error: the units would silently be the root alone. */
static int wrapset_init(const mb_builder *b, wrapset *ws) {
  const mb_dist_opts *o = &b->step->dist;
  *ws = (wrapset){o, NULL, 0};
  if (!o->n_wrap_class || (o->strategy != MB_STRATEGY_FSDP && o->strategy != MB_STRATEGY_ZERO3)) return MB_OK;
  const mb_graph *g = b->ms[0].g;
  bool *seen = calloc(o->n_wrap_class, sizeof(bool)), any = false;
  if (!seen) return mb_fail(b->d, MB_E_NOMEM, "out of memory");
  int rc = MB_OK;
  for (int32_t k = 0; k < g->n_nodes && rc == MB_OK; k++) {
    const mb_origin *org = &g->nodes[k].origin;
    if (!org->class_names || !org->scope || org->scope[0] != '/') continue;
    any = true;
    const char *line = strchr(org->class_names, '\n'); /* past the root's */
    const char *seg = org->scope;
    while (line && line[1] && rc == MB_OK) {
      const char *name = line + 1, *eol = strchr(name, '\n');
      if (!eol) break;
      const char *next = strchr(seg + 1, '/'); /* the end of this level's segment */
      if (!next) break;                         /* the last segment is the FX node */
      for (size_t c = 0; c < o->n_wrap_class; c++)
        if (strlen(o->wrap_class[c]) == (size_t)(eol - name) && !strncmp(o->wrap_class[c], name, (size_t)(eol - name)))
          seen[c] = true;
      if (names_class(o, name, (size_t)(eol - name))) {
        char dotted[512];
        bool have = false;
        if (mb_origin_module_of_scope(org->scope, (size_t)(next - org->scope), dotted, sizeof dotted)) {
          for (size_t i = 0; i < ws->n && !have; i++) have = !strcmp(ws->paths[i], dotted);
          char **grown = have ? ws->paths : realloc(ws->paths, (ws->n + 1) * sizeof *grown);
          char *copy = have ? NULL : malloc(strlen(dotted) + 1);
          if (!have && (!grown || !copy)) {
            if (grown) ws->paths = grown;
            free(copy);
            rc = mb_fail(b->d, MB_E_NOMEM, "out of memory");
            break;
          }
          if (!have) {
            strcpy(copy, dotted);
            ws->paths = grown;
            ws->paths[ws->n++] = copy;
          }
        }
      }
      line = eol;
      seg = next;
    }
  }
  if (rc == MB_OK && !any)
    rc = mb_fail(b->d, MB_E_INVALID_ARG,
                 "fsdp_wrap_class: the graph records no module classes (pkg.torch.onnx.class_hierarchy, written by "
                 "torch.onnx.export(..., dynamo=True)); wrap by module path with fsdp_wrap instead");
  for (size_t c = 0; c < o->n_wrap_class && rc == MB_OK; c++)
    if (!seen[c]) rc = mb_fail(b->d, MB_E_INVALID_ARG, "fsdp_wrap_class: no module of class '%s' in the graph", o->wrap_class[c]);
  free(seen);
  if (rc != MB_OK) wrapset_free(ws);
  return rc;
}

/* FSDP1's FlatParameters as model.parameters() lists them: the root's first (registered on the
 * wrapped root module itself, before any child), then each wrapped unit's in module order, i.e.
 * the order of the units' first parameters; each a rank's elements (the flat shard, or the whole
 * flat parameter under NO_SHARD). */
size_t mb_dist_flat_units(const mb_builder *b, uint64_t *numel, size_t cap) {
  const mb_dist_opts *o = &b->step->dist;
  if (o->strategy != MB_STRATEGY_FSDP || o->fsdp_version != 1 || !cap) return 0;
  const mb_model_state *ms = &b->ms[0];
  const mb_graph *g = ms->g;
  int32_t n = mb_dist_shards(o);
  size_t k = 1;
  wrapset ws;
  if (wrapset_init(b, &ws)) return 0;
  numel[0] = 0; /* the root, whatever its place among the graph's parameters */
  for (int32_t v = 0; v < g->n_values; v++) {
    if (!ms->trainable_init[v]) continue;
    const char *name = g->inits[g->values[v].initializer].name;
    size_t len = name ? wrapped_prefix(&ws, name) : 0;
    uint64_t sum = 0;
    bool first = true;
    for (int32_t x = 0; x < g->n_values && first; x++) {
      if (!ms->trainable_init[x]) continue;
      const char *other = g->inits[g->values[x].initializer].name;
      size_t olen = other ? wrapped_prefix(&ws, other) : 0;
      if (olen != len || (len && strncmp(name, other, len))) continue;
      if (x < v) first = false; /* counted with its unit's first parameter */
      sum += (uint64_t)g->inits[g->values[x].initializer].numel;
    }
    if (!first) continue;
    uint64_t mine = (sum + (uint64_t)n - 1) / (uint64_t)n;
    if (!len) numel[0] = mine;
    else if (k < cap) numel[k++] = mine;
  }
  wrapset_free(&ws);
  return k;
}

/* The outermost module of a dotted path (a parameter's module, or a node's) that a wrap glob
 * names; its length in path, 0 for none (the root unit). */
static size_t wrapped_prefix(const wrapset *ws, const char *path) {
  const mb_dist_opts *o = ws->o;
  size_t len = strlen(path);
  if (o->strategy == MB_STRATEGY_ZERO3) return len; /* DeepSpeed gathers each module's own */
  char buf[512];
  for (size_t i = 1; i <= len && i < sizeof buf; i++) {
    if (path[i] != '.' && path[i] != '\0') continue;
    memcpy(buf, path, i);
    buf[i] = '\0';
    for (size_t k = 0; k < o->n_wrap; k++)
      if (mb_glob_match(o->wrap[k], buf)) return i;
    for (size_t k = 0; k < ws->n; k++)
      if (!strcmp(ws->paths[k], buf)) return i;
  }
  return 0;
}

typedef struct units {
  char **name;          /* dotted module path; [0] "" the root */
  int32_t n, cap;
  uint64_t *bytes;      /* unsharded parameter bytes */
  uint64_t *shard;      /* a rank's shard of them: each parameter's dim 0 padded */
  uint64_t *grad_shard; /* the shard of those that train */
  const wrapset *ws;
} units;

static int32_t unit_of(mb_builder *b, units *u, const char *path, size_t len) {
  if (!len) return 0;
  for (int32_t i = 1; i < u->n; i++)
    if (strlen(u->name[i]) == len && !strncmp(u->name[i], path, len)) return i;
  if (u->n == u->cap) return -1;
  char *s = mb_arena_alloc(&b->a, len + 1);
  if (!s) return -1;
  memcpy(s, path, len);
  s[len] = '\0';
  u->name[u->n] = s;
  return u->n++;
}

static int32_t unit_of_node(mb_builder *b, units *u, const mb_node *n) {
  const char *scope = n->origin.scope;
  if (!scope || scope[0] != '/') return 0;
  const char *end = strrchr(scope, '/');
  char dotted[512];
  if (!mb_origin_module_of_scope(scope, (size_t)(end - scope), dotted, sizeof dotted)) return 0;
  return unit_of(b, u, dotted, wrapped_prefix(u->ws, dotted));
}

/* A parameter's unit: by its name's module path when a glob names one, else the unit of the
 * first node that reads it. */
static int32_t unit_of_param(mb_builder *b, units *u, int32_t v, const int32_t *node_unit) {
  const mb_graph *g = b->ms[0].g;
  const char *name = g->inits[g->values[v].initializer].name;
  const char *dot = name ? strrchr(name, '.') : NULL;
  if (dot) {
    char path[512];
    size_t len = (size_t)(dot - name) < sizeof path - 1 ? (size_t)(dot - name) : sizeof path - 1;
    memcpy(path, name, len);
    path[len] = '\0';
    size_t w = wrapped_prefix(u->ws, path);
    if (w) return unit_of(b, u, path, w);
  }
  for (int32_t k = 0; k < g->n_nodes; k++)
    for (int32_t i = 0; i < g->nodes[k].n_inputs; i++)
      if (g->nodes[k].inputs[i] == v) return node_unit[k];
  return 0;
}

static int32_t fixed_slot(mb_builder *b, int cat, uint64_t bytes, const char *name) {
  int32_t s = mb_slot_new(b, 0, MB_SZ_FIXED, cat, -1, 0, name);
  if (s >= 0) b->p->slots[s].fixed = bytes;
  return s;
}

/* The unit's parameters gathered before pos: the all-gather output, the unsharded storages it
 * is copied into, the output freed. Returns the unsharded slot. */
/* Which slots the step itself frees, into freed (n_slots entries, false). */
static void mark_freed(const mb_plan *p, bool *freed) {
  /* an evaluation's zero_grad frees every .grad (emit_eval): not the wrapper's doing, and
   * dist_eval.c drops it where the wrapper freed the .grad already */
  int32_t end = p->eval_batch && p->step_end < p->n_ev ? p->step_end : p->n_ev;
  for (int32_t i = 0; i < end; i++)
    if (!p->ev[i].alloc) freed[p->ev[i].slot] = true;
}

/* The same, calloc'd (NULL when out of memory). */
static bool *freed_by_step(const mb_plan *p) {
  bool *freed = calloc((size_t)p->n_slots + 1, sizeof(bool));
  if (freed) mark_freed(p, freed);
  return freed;
}

/* Event e makes a .grad of the model that the step never frees (autograd's, in backward). */
static bool makes_grad(const mb_plan *p, const mb_event_rec *e, const bool *freed) {
  const mb_slot *sl = &p->slots[e->slot];
  return e->alloc && !e->model && !freed[e->slot] && sl->category == MB_CAT_GRADIENT && sl->rule == MB_SZ_VALUE &&
         e->phase == MB_PHASE_BACKWARD;
}

/* kept: where the all-gather output goes (freed by the caller), or NULL to free it after the
 * copy-out. On the CPU, gloo's all-gather copies through a temporary of the output's size
 * (AsyncAllgatherWork's newLikeFlat; docs/distributed-truth.md), one at a time. */
static int32_t gather(mb_builder *b, mb_weave *w, int64_t pos, int64_t copy_pos, int phase, const units *u, int32_t k,
                      const char *name, int32_t *kept) {
  uint64_t bytes = u->bytes[k];
  int32_t full = fixed_slot(b, MB_CAT_PARAMETER, bytes, name);
  if (full < 0) return -1;
  const mb_dist_opts *o = &b->step->dist;
  if (o->strategy == MB_STRATEGY_ZERO3) /* all-gathered straight into the parameters */
    return mb_weave_add(b, w, pos, 1, phase, full) ? -1 : full;
  uint64_t padded = u->shard[k] * (uint64_t)mb_dist_shards(o);
  /* mixed precision: the fp32 shards are cast to param_dtype first (FSDP1's _mp_shard in
   * pre_unshard, freed in post_unshard; FSDP2's all_gather_inputs, freed after the copy-in) */
  int32_t low = mb_dist_fsdp_mp(o) ? fixed_slot(b, MB_CAT_TEMPORARY, u->shard[k], "FSDP shard in param_dtype") : -2;
  if (low == -1) return -1;
  if (o->fsdp_version == 1) { /* into the padded flat parameter itself (_full_param_padded) */
    if ((low >= 0 && mb_weave_add(b, w, pos, 1, phase, low)) || mb_weave_add(b, w, pos, 1, phase, full)) return -1;
    if (kept) *kept = -1;
    if (b->step->cpu && o->world_size > 1) { /* c10d::allgather_'s chunk list on the CPU */
      int32_t tmp = fixed_slot(b, MB_CAT_TEMPORARY, padded, "gloo all-gather temporary");
      if (tmp < 0 || mb_weave_add(b, w, pos, 1, phase, tmp) || mb_weave_add(b, w, pos, 0, phase, tmp)) return -1;
    }
    if (low >= 0 && mb_weave_add(b, w, pos, 0, phase, low)) return -1;
    return full;
  }
  if (mb_dist_shards(o) <= 1) { /* one rank: wait_for_unshard copies the shards, no all-gather output */
    if (kept) *kept = -1;
    if ((low >= 0 && mb_weave_add(b, w, copy_pos, 1, phase, low)) || mb_weave_add(b, w, copy_pos, 1, phase, full) ||
        (low >= 0 && mb_weave_add(b, w, copy_pos, 0, phase, low)))
      return -1;
    return full;
  }
  int32_t out = fixed_slot(b, MB_CAT_TEMPORARY, padded, "FSDP all-gather output");
  if ((low >= 0 && mb_weave_add(b, w, pos, 1, phase, low)) || out < 0 || mb_weave_add(b, w, pos, 1, phase, out) ||
      (low >= 0 && mb_weave_add(b, w, pos, 0, phase, low)))
    return -1;
  if (b->step->cpu && b->step->dist.world_size > 1) {
    int32_t tmp = fixed_slot(b, MB_CAT_TEMPORARY, padded, "gloo all-gather temporary");
    if (tmp < 0 || mb_weave_add(b, w, pos, 1, phase, tmp) || mb_weave_add(b, w, pos, 0, phase, tmp)) return -1;
  }
  if (mb_weave_add(b, w, copy_pos, 1, phase, full)) return -1;
  if (kept) *kept = out;
  else if (mb_weave_add(b, w, copy_pos, 0, phase, out)) return -1;
  return full;
}

/* Units in the order of key (ascending; -1 last), root included when it has a position. */
static int32_t order_by(const int32_t *key, int32_t n, int32_t *out) {
  int32_t m = 0;
  for (int32_t k = 0; k < n; k++)
    if (key[k] >= 0) out[m++] = k;
  for (int32_t i = 1; i < m; i++)
    for (int32_t j = i; j > 0 && key[out[j]] < key[out[j - 1]]; j--) {
      int32_t t = out[j];
      out[j] = out[j - 1];
      out[j - 1] = t;
    }
  return m;
}

static int zero_grads(mb_builder *b, mb_weave *w);

/* DDP with gradient_as_bucket_view (reducer.cpp, mark_variable_ready_dense: "Let grad point to
 * bucket_view buffer"): each .grad autograd makes after zero_grad(set_to_none=True) is copied
 * into its bucket and replaced by a view of it once it is complete: after the backward of the
 * last node that reads the weight (a tied weight's gradient is a sum of several). */
static int ddp_view_grads(mb_builder *b, mb_weave *w) {
  mb_plan *p = b->p;
  const mb_graph *g = b->ms[0].g;
  int32_t *done = malloc(((size_t)g->n_values + 1) * sizeof(int32_t)); /* last backward event of a reader */
  bool *freed = freed_by_step(p);
  int rc = done && freed ? MB_OK : nomem(b);
  for (int32_t v = 0; v < g->n_values && rc == MB_OK; v++) done[v] = -1;
  for (int32_t i = 0; i < p->n_ev && rc == MB_OK; i++) {
    const mb_event_rec *e = &p->ev[i];
    if (e->phase != MB_PHASE_BACKWARD || e->model || e->node < 0 || e->node >= g->n_nodes) continue;
    for (int32_t k = 0; k < g->nodes[e->node].n_inputs; k++)
      if (g->nodes[e->node].inputs[k] >= 0) done[g->nodes[e->node].inputs[k]] = i;
  }
  for (int32_t i = 0; i < p->n_ev && rc == MB_OK; i++) {
    const mb_event_rec *e = &p->ev[i];
    int32_t kept = mb_dist_accum_grad_value(b, e); /* accumulated: replaced by its view too */
    if (kept >= 0 && done[kept] >= 0) rc = mb_weave_add(b, w, 2 * (int64_t)done[kept] + 1, 0, MB_PHASE_BACKWARD, e->slot);
    if (!makes_grad(p, e, freed)) continue;
    const mb_slot *sl = &p->slots[e->slot];
    int32_t at = sl->ref >= 0 && sl->ref < g->n_values && done[sl->ref] > i ? done[sl->ref] : i;
    rc = mb_weave_add(b, w, 2 * (int64_t)at + 1, 0, MB_PHASE_BACKWARD, e->slot);
  }
  free(done);
  free(freed);
  return rc;
}

/* ZeRO-1, -2, and -3's gradients (and ZeRO-3's gathers, as FSDP's below). */
int mb_dist_events(mb_builder *b) {
  const mb_dist_opts *o = &b->step->dist;
  if (o->strategy == MB_STRATEGY_DDP && o->bucket_view) {
    mb_weave w = {0};
    int rc = ddp_view_grads(b, &w);
    if (rc == MB_OK) rc = mb_weave_in(b, &w);
    free(w.at);
    return rc;
  }
  if (!mb_dist_is_zero(o) || o->world_size <= 1) return mb_dist_fsdp_events(b);
  mb_weave w = {0};
  int rc = zero_grads(b, &w);
  if (rc == MB_OK) rc = mb_weave_in(b, &w);
  free(w.at);
  if (rc == MB_OK && o->strategy == MB_STRATEGY_ZERO3) rc = mb_dist_zero3_events(b); /* dist_zero3.c */
  return rc;
}

static int fsdp_events(mb_builder *b, const wrapset *ws);

/* Where FSDP2's gloo reduce-scatter clone dies on the CPU. Its last reference is dropped by
 * whichever thread lets go last, the caller or gloo's worker (docs/distributed-truth.md, "A race
 * on CPU"); measured on ResNet-18 (dist_truth.py --steps 12 --repeats 3): in about a third of the
 * steps the worker's is last and the clone is still alive at the next unit's copy-out in
 * backward (its own pre_backward). The budget takes that side: freed after the next backward
 * copy-out; at once when none follows. */
static int64_t clone_end(const int64_t *copies, int32_t n, int64_t pos) {
  int64_t end = -1;
  for (int32_t i = 0; i < n; i++)
    if (copies[i] > pos && (end < 0 || copies[i] < end)) end = copies[i];
  return end < 0 ? pos : end;
}

int mb_dist_fsdp_events(mb_builder *b) {
  wrapset ws;
  int rc = wrapset_init(b, &ws);
  if (rc == MB_OK) rc = fsdp_events(b, &ws);
  wrapset_free(&ws);
  return rc;
}

static int fsdp_events(mb_builder *b, const wrapset *ws) {
  const mb_dist_opts *o = &b->step->dist;
  if (o->strategy == MB_STRATEGY_FSDP && o->fsdp_version != 1 &&
      (o->backward_prefetch != MB_PREFETCH_PRE || o->forward_prefetch || !o->limit_all_gathers))
    return mb_fail(b->d, MB_E_INVALID_ARG, "fsdp_backward_prefetch, fsdp_forward_prefetch and fsdp_limit_all_gathers are "
                                           "FullyShardedDataParallel's (fsdp_version 1); fully_shard prefetches one unit");
  int32_t shards = mb_dist_shards(o);
  /* FSDP2 gathers into unsharded copies on one rank too; NO_SHARD does not. ZeRO reaches here
   * only on one rank (mb_dist_events; several: dist_zero3.c), where nothing is partitioned. */
  if (o->strategy != MB_STRATEGY_FSDP || o->sharding == MB_FSDP_NO_SHARD) return MB_OK;
  if (o->fsdp_version == 1 && shards <= 1) return MB_OK; /* FSDP1 runs NO_SHARD on one rank */
  mb_plan *p = b->p;
  mb_model_state *ms = &b->ms[0];
  const mb_graph *g = ms->g;
  units u = {0};
  u.ws = ws;
  u.cap = g->n_nodes + g->n_values + 2; /* a unit per node or parameter at most */
  u.name = mb_arena_array(&b->a, (size_t)u.cap, sizeof(char *));
  int32_t *node_unit = mb_arena_array(&b->a, (size_t)g->n_nodes + 1, sizeof(int32_t));
  int32_t *value_unit = mb_arena_array(&b->a, (size_t)g->n_values + 1, sizeof(int32_t));
  if (!u.name || !node_unit || !value_unit) return nomem(b);
  u.name[u.n++] = "";
  for (int32_t k = 0; k < g->n_nodes; k++)
    if ((node_unit[k] = unit_of_node(b, &u, &g->nodes[k])) < 0) return nomem(b);
  u.bytes = mb_arena_array(&b->a, (size_t)u.cap, sizeof(uint64_t));
  u.shard = mb_arena_array(&b->a, (size_t)u.cap, sizeof(uint64_t));
  u.grad_shard = mb_arena_array(&b->a, (size_t)u.cap, sizeof(uint64_t));
  if (!u.bytes || !u.shard || !u.grad_shard) return nomem(b);
  for (int32_t v = 0; v < g->n_values; v++) {
    value_unit[v] = -1;
    int32_t s = mb_param_slot(b, v);
    if (s < 0) continue;
    if ((value_unit[v] = unit_of_param(b, &u, v, node_unit)) < 0) return nomem(b);
    const mb_const_tensor *ct = &g->inits[g->values[v].initializer];
    uint64_t full = 0, part = 0;
    mb_dtype_bytes(ms->rt[v], (uint64_t)ct->numel, &full);
    mb_dtype_bytes(ms->rt[v], (uint64_t)mb_dist_shard_numel(o, shards, ct->dims, ct->rank, ct->numel), &part);
    u.bytes[value_unit[v]] += full;
    u.shard[value_unit[v]] += part;
    if (ms->trainable_init[v]) u.grad_shard[value_unit[v]] += part;
  }
  /* where each unit runs: its first and last forward and backward events */
  int32_t *first = mb_arena_array(&b->a, (size_t)u.n * 4, sizeof(int32_t));
  if (!first) return nomem(b);
  int32_t *last = first + u.n, *bfirst = first + 2 * u.n, *blast = first + 3 * u.n;
  for (int32_t i = 0; i < 4 * u.n; i++) first[i] = -1;
  int32_t fwd0 = -1, bwd_end = -1;
  for (int32_t i = 0; i < p->n_ev; i++) {
    const mb_event_rec *e = &p->ev[i];
    if (e->phase == MB_PHASE_FORWARD && fwd0 < 0) fwd0 = i;
    if (e->phase == MB_PHASE_BACKWARD) bwd_end = i;
    if (e->model || e->node < 0 || e->node >= g->n_nodes) continue;
    int32_t k = node_unit[e->node];
    if (e->phase == MB_PHASE_FORWARD) {
      if (first[k] < 0) first[k] = i;
      last[k] = i;
    } else if (e->phase == MB_PHASE_BACKWARD) {
      if (bfirst[k] < 0) bfirst[k] = i;
      blast[k] = i;
    }
  }
  if (fwd0 < 0 || bwd_end < 0) return MB_OK; /* nothing trains: no step to shard */
  mb_weave w = {0};
  int rc = MB_OK;
  bool reshard = o->sharding != MB_FSDP_SHARD_GRAD_OP;
  /* backward order of the units: by their first backward event */
  int32_t *order = mb_arena_array(&b->a, (size_t)u.n, sizeof(int32_t));
  int32_t n_order = 0;
  if (!order) return nomem(b);
  for (int32_t k = o->reshard_root && reshard ? 0 : 1; k < u.n; k++)
    if (bfirst[k] >= 0 && u.bytes[k]) order[n_order++] = k;
  for (int32_t i = 1; i < n_order; i++) /* insertion sort: tens of units */
    for (int32_t j = i; j > 0 && bfirst[order[j]] < bfirst[order[j - 1]]; j--) {
      int32_t t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  /* forward, in its order (the root when forward starts): each all-gather output is kept until
   * the next unit's all-gather has been waited on (FSDPParamGroup's comm_ctx.all_gather_state),
   * the last one until forward ends */
  int32_t *fkey = mb_arena_array(&b->a, (size_t)u.n, sizeof(int32_t));
  int32_t *forder = mb_arena_array(&b->a, (size_t)u.n, sizeof(int32_t));
  if (!fkey || !forder) return nomem(b);
  int32_t fwd_end = fwd0;
  for (int32_t i = 0; i < p->n_ev; i++)
    if (p->ev[i].phase == MB_PHASE_FORWARD) fwd_end = i;
  for (int32_t k = 0; k < u.n; k++) fkey[k] = !u.bytes[k] ? -1 : k == 0 ? fwd0 : first[k];
  int32_t n_fwd = order_by(fkey, u.n, forder), root = -2, held = -1;
  /* FSDP1's post-backward hook (_post_backward_hook) runs after autograd has concatenated the
   * unit's flat gradient: it reshards (frees the unsharded flat parameter), prefetches the next
   * unit under BACKWARD_POST, then reduce-scatters; the reduce loop below emits those frees and
   * gathers in that order */
  bool hooks1 = o->fsdp_version == 1;
  int32_t *post_free = mb_arena_array(&b->a, (size_t)u.n, sizeof(int32_t));
  int32_t *post_gather = mb_arena_array(&b->a, (size_t)u.n, sizeof(int32_t));
  if (!post_free || !post_gather) return nomem(b);
  for (int32_t k = 0; k < u.n; k++) post_free[k] = post_gather[k] = -1;
  /* forward_prefetch moves the hook of each prefetched unit after the prefetching unit's
   * backward (dist_hooks1.c); -1: after the unit's own */
  int32_t *hook1 = mb_arena_array(&b->a, (size_t)u.n, sizeof(int32_t));
  if (!hook1) return nomem(b);
  for (int32_t k = 0; k < u.n; k++) hook1[k] = -1;
  if (hooks1 && o->forward_prefetch && (rc = mb_dist_fsdp1_prefetched_hooks(b, forder, n_fwd, fkey, blast, hook1, u.n)))
    return rc;
  for (int32_t i = 0; i < n_fwd && rc == MB_OK; i++) {
    int32_t k = forder[i], out = -1;
    int64_t at = 2 * (int64_t)fkey[k];
    /* FSDP1 forward_prefetch: _pre_forward_prefetch gathers the next unit right after the
     * current one's unshard (_runtime_utils.py, _pre_forward_unshard) */
    if (o->fsdp_version == 1 && o->forward_prefetch && i > 0) at = 2 * (int64_t)fkey[forder[i - 1]];
    int32_t full = gather(b, &w, at, at, MB_PHASE_FORWARD, &u, k, k ? "FSDP unsharded parameters" : "FSDP unsharded parameters (root)",
                          &out);
    if (full < 0) {
      rc = nomem(b);
      break;
    }
    if (held >= 0) rc = mb_weave_add(b, &w, at, 0, MB_PHASE_FORWARD, held);
    held = out;
    if (k == 0 && !(o->reshard_root && reshard)) { /* the root is resharded when backward ends */
      root = full;
    } else if (!reshard && hooks1 && bfirst[k] >= 0 && u.grad_shard[k]) {
      post_free[k] = full;
    } else if (!reshard || bfirst[k] < 0) {
      int64_t end = bfirst[k] >= 0 ? 2 * (int64_t)blast[k] + 1 : 2 * (int64_t)last[k] + 1;
      if (rc == MB_OK) rc = mb_weave_add(b, &w, end, 0, bfirst[k] >= 0 ? MB_PHASE_BACKWARD : MB_PHASE_FORWARD, full);
    } else if (rc == MB_OK) {
      rc = mb_weave_add(b, &w, 2 * (int64_t)last[k] + 1, 0, MB_PHASE_FORWARD, full);
    }
  }
  if (rc == MB_OK && held >= 0) rc = mb_weave_add(b, &w, 2 * (int64_t)fwd_end + 1, 0, MB_PHASE_FORWARD, held);
  int64_t *bgather = mb_arena_array(&b->a, (size_t)u.n + 1, sizeof(int64_t)); /* where backward gathers */
  int32_t n_bgather = 0;
  if (!bgather) return nomem(b);
  /* FSDP2 on the CPU: a backward all-gather output gloo's worker may still hold at its copy-out.
   * dist.all_gather_single(async_op=False) waits and drops the caller's Work handle
   * (distributed_c10d.py), FSDP2 drops its last reference right after the copy-out
   * (wait_for_unshard: `self._all_gather_result = None`); but gloo's _allgather_base hands the
   * worker at::chunk views of the output and AllGather's input (all_gather_copy_in's narrow of the
   * same output) in AsyncAllgatherWork::outputs/inputs, and ProcessGroupGloo::runLoop drops its
   * `work` only when its iteration ends (after execute, FlightRecorder::retire_id, lock.lock()).
   * When the worker is that late, gloo's worker thread frees the output (measured,
   * docs/distributed-truth.md "A race on CPU"): in every late case right after the caller has
   * queued the next all-gather (its enqueue's temporary), before the worker's own temporary of
   * it. The budget takes that side where nothing else waits on gloo in between: the output is
   * freed after the next backward all-gather's temporary (at once when none follows), unless a
   * reduce-scatter lies between the all-gather and its copy-out (the caller then waits on gloo's
   * workers; the late side was never measured there). In practice: the unit the root's
   * pre_backward prefetches. */
  bool late_side = o->fsdp_version != 1 && b->step->cpu && o->world_size > 1;
  int32_t late = -1;
  int64_t late_at = 0;
  /* backward, in its order: each resharded unit gathered again when the unit before it starts
   * its backward (the prefetch), right after that unit's own gather */
  for (int32_t i = 0; i < n_order && rc == MB_OK && reshard; i++) {
    int32_t k = order[i], at = bfirst[i ? order[i - 1] : k];
    if (first[k] < 0) continue;
    int64_t pos = 2 * (int64_t)at;
    /* FSDP1's BackwardPrefetch (_get_handle_to_prefetch): BACKWARD_PRE gathers the next unit in
     * the current one's pre-backward hook, the root's (never resharded) included; BACKWARD_POST
     * after the current one's post-backward reshard, before its reduce-scatter; None in the
     * unit's own pre-backward. A post-backward hook that forward_prefetch moves after this unit's
     * pre-backward prefetches nothing (that _pre_backward_hook gathered the unit and cleared
     * _needs_pre_backward_unshard): gathered in its own pre-backward */
    if (hooks1) {
      if (o->backward_prefetch == MB_PREFETCH_NONE) pos = 2 * (int64_t)bfirst[k];
      else if (o->backward_prefetch == MB_PREFETCH_PRE && !i && order[0] != 0 && bfirst[0] >= 0 && bfirst[0] < bfirst[k])
        pos = 2 * (int64_t)bfirst[0];
      else if (o->backward_prefetch == MB_PREFETCH_POST && i && u.grad_shard[order[i - 1]] &&
               (hook1[order[i - 1]] < 0 || hook1[order[i - 1]] < bfirst[k])) {
        post_gather[order[i - 1]] = k; /* in the previous unit's post-backward hook (reduce loop) */
        continue;
      } else if (o->backward_prefetch == MB_PREFETCH_POST) {
        pos = 2 * (int64_t)bfirst[k];
      }
    }
    /* FSDP2 (_fsdp_param_group.py): the root's pre_backward prefetches the first unit, each unit's
     * the next (_backward_prefetch: post_forward_order[index - 1]); a prefetch only issues the
     * all-gather into its output, the copy-out into the unsharded parameters (and the output's
     * free) waits for the unit's own pre_backward (wait_for_unshard) */
    int64_t copy = pos;
    if (o->fsdp_version != 1) {
      if (!i && order[0] != 0 && bfirst[0] >= 0 && bfirst[0] < bfirst[k]) pos = 2 * (int64_t)bfirst[0];
      copy = 2 * (int64_t)bfirst[k];
    }
    bool rs_between = false; /* a reduce-scatter (post_backward of a unit with gradients) between gather and copy-out */
    for (int32_t j = 1; j < u.n && late_side && !rs_between; j++)
      rs_between = u.grad_shard[j] && blast[j] >= 0 && pos < 2 * (int64_t)blast[j] + 1 && 2 * (int64_t)blast[j] + 1 < copy;
    int32_t out = -1;
    int32_t again = gather(b, &w, pos, copy, MB_PHASE_BACKWARD, &u, k, "FSDP unsharded parameters (backward)",
                           late_side && !rs_between ? &out : NULL);
    if (again < 0 || (late >= 0 && mb_weave_add(b, &w, pos, 0, MB_PHASE_BACKWARD, late))) {
      rc = nomem(b);
      break;
    }
    late = out;
    late_at = copy;
    bgather[n_bgather++] = copy;
    if (hooks1 && u.grad_shard[k]) post_free[k] = again;
    else rc = mb_weave_add(b, &w, 2 * (int64_t)blast[k] + 1, 0, MB_PHASE_BACKWARD, again);
  }
  if (rc == MB_OK && late >= 0) rc = mb_weave_add(b, &w, late_at, 0, MB_PHASE_BACKWARD, late); /* no gather follows */
  /* reduce-scatter after each unit's backward (the root's when backward ends): the gradients
   * copied into one input, freed, the sharded .grad allocated */
  int32_t *grad_at = mb_arena_array(&b->a, (size_t)u.n, sizeof(int32_t));
  bool *freed = mb_arena_array(&b->a, (size_t)p->n_slots + 1, sizeof(bool)); /* by the step itself */
  if ((!grad_at || !freed) && rc == MB_OK) rc = nomem(b);
  if (rc == MB_OK) mark_freed(p, freed);
  /* in backward order; each reduce-scatter input is kept until the next unit's reduce-scatter
   * has been waited on (FSDPParamGroup's reduce_scatter_states), the last one until backward ends */
  int32_t *rorder = mb_arena_array(&b->a, (size_t)u.n, sizeof(int32_t)), n_rs = 0, rs_held = -1;
  if (!rorder && rc == MB_OK) rc = nomem(b);
  for (int32_t k = 0; k < u.n && rc == MB_OK; k++)
    grad_at[k] = !u.grad_shard[k] ? -1 : hook1[k] >= 0 ? hook1[k] : k == 0 || blast[k] < 0 ? bwd_end : blast[k];
  if (rc == MB_OK) n_rs = order_by(grad_at, u.n, rorder);
  /* hooks after the same event: the unit unsharded later in forward first (its split node is
   * the younger), the root's last */
  for (int32_t r = 1; r < n_rs && rc == MB_OK && hooks1 && o->forward_prefetch; r++)
    for (int32_t j = r; j > 0 && grad_at[rorder[j]] == grad_at[rorder[j - 1]] && fkey[rorder[j]] > fkey[rorder[j - 1]]; j--) {
      int32_t t = rorder[j];
      rorder[j] = rorder[j - 1];
      rorder[j - 1] = t;
    }
  for (int32_t r = 0; r < n_rs && rc == MB_OK; r++) {
    int32_t k = rorder[r];
    int64_t pos = 2 * (int64_t)grad_at[k] + 1;
    /* the previous unit's input goes first: post_backward's "FSDP::post_backward_rs_wait" pops
     * the oldest of reduce_scatter_states (at most reduce_scatter_max_input_buffers = 1) before
     * this unit's foreach_reduce allocates its own (_fsdp_param_group.py, torch 2.15) */
    if (rs_held >= 0 && mb_weave_add(b, &w, pos, 0, MB_PHASE_BACKWARD, rs_held)) {
      rc = nomem(b);
      break;
    }
    rs_held = -1;
    /* mixed precision (dist_mp.c): reduce-scattered in reduce_dtype, the .grad shards fp32 (the
     * reduce output cast when reduce_dtype is narrower: _cast_and_view_sharded_grads, FSDP1's
     * _cast_grad_to_param_dtype); FSDP1 casts the flat gradient to reduce_dtype first
     * (_post_backward_hook: flat_param.grad.to(reduce_dtype)), FSDP2 copies into a reduce_dtype
     * input */
    bool mp = mb_dist_fsdp_mp(o);
    int gdt = mb_dist_grad_dtype(o, o->param_dtype);
    uint64_t red = mp ? mb_dist_rebytes(u.grad_shard[k], o->param_dtype, gdt) : u.grad_shard[k];
    uint64_t final = mp ? mb_dist_rebytes(u.grad_shard[k], o->param_dtype, MB_DTYPE_FLOAT) : u.grad_shard[k];
    int32_t in = fixed_slot(b, MB_CAT_TEMPORARY, red * (uint64_t)shards, "FSDP reduce-scatter input");
    if (in < 0 || mb_weave_add(b, &w, pos, 1, MB_PHASE_BACKWARD, in)) {
      rc = nomem(b);
      break;
    }
    /* gloo's reduce_scatter_tensor_coalesced clones its whole input on the CPU: FSDP1 reduces
     * the flat gradient autograd made; FSDP2's foreach_reduce first copies the gradients into
     * its input, clears them (unsharded_grads.clear()) and allocates the output, then calls the
     * collective (_fsdp_collectives.py) */
    bool fsdp1 = o->fsdp_version == 1;
    int32_t clone = b->step->cpu && o->world_size > 1 ? fixed_slot(b, MB_CAT_TEMPORARY, red * (uint64_t)shards,
                                              "gloo reduce-scatter clone") : -2;
    if (clone == -1) {
      rc = nomem(b);
      break;
    }
    /* the unit's unsharded .grad tensors go (each at the latest after it was made) */
    for (int32_t i = 0; i < p->n_ev && rc == MB_OK; i++) {
      const mb_event_rec *e = &p->ev[i];
      if (!makes_grad(p, e, freed)) continue;
      const mb_slot *sl = &p->slots[e->slot];
      /* a weight's .grad names the weight, or the view backward produced it for (a transposed
       * Conv1D weight): then the unit of the node that made it */
      int32_t owner = sl->ref >= 0 && sl->ref < g->n_values && value_unit[sl->ref] >= 0 ? value_unit[sl->ref]
                      : e->node >= 0 && e->node < g->n_nodes                              ? node_unit[e->node]
                                                                                          : 0;
      if (owner != k) continue;
      rc = mb_weave_add(b, &w, i > grad_at[k] ? 2 * (int64_t)i + 1 : pos, 0, MB_PHASE_BACKWARD, e->slot);
    }
    /* gradient accumulation: the unsharded .grad the micro-steps kept goes too (dist_accum.c) */
    for (int32_t i = 0; i < p->n_ev && rc == MB_OK; i++) {
      int32_t v = mb_dist_accum_grad_value(b, &p->ev[i]);
      if (v >= 0 && value_unit[v] == k) rc = mb_weave_add(b, &w, pos, 0, MB_PHASE_BACKWARD, p->ev[i].slot);
    }
    /* FSDP1's hook: reshard, then BACKWARD_POST's prefetch of the next unit */
    if (rc == MB_OK && post_free[k] >= 0) rc = mb_weave_add(b, &w, pos, 0, MB_PHASE_BACKWARD, post_free[k]);
    if (rc == MB_OK && post_gather[k] >= 0) {
      int32_t next = post_gather[k];
      int32_t again = gather(b, &w, pos, pos, MB_PHASE_BACKWARD, &u, next, "FSDP unsharded parameters (backward)", NULL);
      if (again < 0) rc = nomem(b);
      else if (u.grad_shard[next]) post_free[next] = again;
      else rc = mb_weave_add(b, &w, 2 * (int64_t)blast[next] + 1, 0, MB_PHASE_BACKWARD, again);
    }
    if (rc != MB_OK) break;
    /* CPUOffload: the reduce-scatter output is copied to the host, where the .grad shard lives */
    bool host = o->offload == MB_OFFLOAD_PARAMS;
    if (host) p->host_bytes += final;
    bool cast = mp && gdt != MB_DTYPE_FLOAT;
    int32_t shard = fixed_slot(b, cast ? MB_CAT_TEMPORARY : MB_CAT_GRADIENT, host ? 0 : red,
                               cast ? "FSDP reduce-scatter output (reduce dtype)" : "FSDP sharded gradients");
    if (shard < 0 || mb_weave_add(b, &w, pos, 1, MB_PHASE_BACKWARD, shard) ||
        (clone >= 0 && mb_weave_add(b, &w, pos, 1, MB_PHASE_BACKWARD, clone)) ||
        (clone >= 0 && mb_weave_add(b, &w, fsdp1 ? pos : clone_end(bgather, n_bgather, pos), 0, MB_PHASE_BACKWARD, clone))) {
      rc = nomem(b);
      break;
    }
    if (cast) { /* the fp32 .grad shards, the reduce dtype's output gone */
      int32_t f32 = fixed_slot(b, MB_CAT_GRADIENT, host ? 0 : final, "FSDP sharded gradients");
      if (f32 < 0 || mb_weave_add(b, &w, pos, 1, MB_PHASE_BACKWARD, f32) || mb_weave_add(b, &w, pos, 0, MB_PHASE_BACKWARD, shard)) {
        rc = nomem(b);
        break;
      }
    }
    if (o->fsdp_version == 1) { /* FSDP1 frees the flat gradient after the collective */
      if (mb_weave_add(b, &w, pos, 0, MB_PHASE_BACKWARD, in)) {
        rc = nomem(b);
        break;
      }
    } else {
      rs_held = in;
    }
  }
  if (rc == MB_OK && rs_held >= 0) rc = mb_weave_add(b, &w, 2 * (int64_t)bwd_end + 1, 0, MB_PHASE_BACKWARD, rs_held);
  if (rc == MB_OK && root >= 0) rc = mb_weave_add(b, &w, 2 * (int64_t)bwd_end + 1, 0, MB_PHASE_BACKWARD, root);
  if (rc == MB_OK) rc = mb_weave_in(b, &w);
  free(w.at);
  return rc;
}

/* ZeRO's .grad tensors (stage_1_and_2.py, stage3.py): stage 1 reduces after backward and frees
 * them in step(); stages 2 and 3 copy each into the reduction buffer as backward makes it and
 * drop the whole gradients each time the buffer fills (reduce_bucket_size elements), the rest
 * when backward ends. */
static int zero_grads(mb_builder *b, mb_weave *w) {
  const mb_dist_opts *o = &b->step->dist;
  mb_plan *p = b->p;
  const mb_model_state *ms = &b->ms[0];
  bool *freed = freed_by_step(p);
  int32_t *pending = malloc(((size_t)p->n_ev + 1) * sizeof(int32_t));
  int rc = freed && pending ? MB_OK : nomem(b);
  int32_t n_pending = 0, last_bwd = -1, last = (p->eval_batch && p->step_end < p->n_ev ? p->step_end : p->n_ev) - 1;
  int64_t filled = 0;
  for (int32_t i = 0; i < p->n_ev && rc == MB_OK; i++) {
    const mb_event_rec *e = &p->ev[i];
    if (e->phase == MB_PHASE_BACKWARD) last_bwd = i;
    if (!makes_grad(p, e, freed)) continue;
    const mb_slot *sl = &p->slots[e->slot];
    pending[n_pending++] = e->slot;
    if (o->strategy == MB_STRATEGY_ZERO1) continue;
    const mb_tinfo *t = sl->ref >= 0 ? &ms->t[sl->ref] : NULL;
    int64_t numel = 1;
    for (int32_t d = 0; t && d < t->rank; d++) numel *= t->dims[d];
    if ((filled += numel) < o->reduce_bucket_size) continue;
    int32_t flat = -1; /* contiguous_gradients off: the bucket flattened for its reduction */
    if (!o->contiguous_gradients && o->offload == MB_OFFLOAD_NONE) {
      uint64_t bytes = 0;
      mb_dtype_bytes(b->pure ? b->low : MB_DTYPE_FLOAT, (uint64_t)filled, &bytes);
      flat = fixed_slot(b, MB_CAT_TEMPORARY, bytes, "ZeRO flattened gradient bucket");
      if (flat < 0 || mb_weave_add(b, w, 2 * (int64_t)i + 1, 1, MB_PHASE_BACKWARD, flat)) rc = nomem(b);
    }
    for (int32_t k = 0; k < n_pending && rc == MB_OK; k++) rc = mb_weave_add(b, w, 2 * (int64_t)i + 1, 0, MB_PHASE_BACKWARD, pending[k]);
    if (flat >= 0 && rc == MB_OK) rc = mb_weave_add(b, w, 2 * (int64_t)i + 1, 0, MB_PHASE_BACKWARD, flat);
    n_pending = 0;
    filled = 0;
  }
  /* the rest: when backward ends (stages 2, 3) or after the optimizer step (stage 1) */
  int32_t at = o->strategy == MB_STRATEGY_ZERO1 ? last : last_bwd;
  int phase = o->strategy == MB_STRATEGY_ZERO1 ? MB_PHASE_OPTIMIZER : MB_PHASE_BACKWARD; /* step() frees them */
  int32_t flat = -1; /* contiguous_gradients off: the last bucket flattened too (stages 2, 3) */
  if (rc == MB_OK && at >= 0 && filled && o->strategy != MB_STRATEGY_ZERO1 && !o->contiguous_gradients &&
      o->offload == MB_OFFLOAD_NONE) {
    uint64_t bytes = 0;
    mb_dtype_bytes(b->pure ? b->low : MB_DTYPE_FLOAT, (uint64_t)filled, &bytes);
    flat = fixed_slot(b, MB_CAT_TEMPORARY, bytes, "ZeRO flattened gradient bucket");
    if (flat < 0 || mb_weave_add(b, w, 2 * (int64_t)at + 1, 1, phase, flat)) rc = nomem(b);
  }
  for (int32_t k = 0; k < n_pending && rc == MB_OK && at >= 0; k++) rc = mb_weave_add(b, w, 2 * (int64_t)at + 1, 0, phase, pending[k]);
  if (flat >= 0 && rc == MB_OK) rc = mb_weave_add(b, w, 2 * (int64_t)at + 1, 0, phase, flat);
  free(freed);
  free(pending);
  return rc;
}

/* The units as the step's gathers see them, for dist_eval.c. */
int mb_dist_wrapset_new(const mb_builder *b, mb_wrapset **out) {
  *out = calloc(1, sizeof **out);
  if (!*out) return mb_fail(b->d, MB_E_NOMEM, "out of memory");
  int rc = wrapset_init(b, *out);
  if (rc != MB_OK) {
    free(*out);
    *out = NULL;
  }
  return rc;
}

size_t mb_dist_unit_prefix(const mb_wrapset *ws, const char *path) { return wrapped_prefix(ws, path); }

void mb_dist_wrapset_free(mb_wrapset *ws) {
  if (!ws) return;
  wrapset_free(ws);
  free(ws);
}
