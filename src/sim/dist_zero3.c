/* DeepSpeed ZeRO-3's parameter gathers on one rank (deepspeed 0.19.8,
 * runtime/zero/partitioned_param_coordinator.py; docs/distributed.md):
 * - the step is a trace of module uses: each module with partitioned parameters of its own
 *   (those above stage3_param_persistence_threshold), in forward order, then in backward order;
 *   a module's use spans its own nodes and its submodules' (its pre- and post-forward hooks);
 * - fetch_sub_module gathers the module's parameters if they are not available, then prefetches
 *   the modules next in the trace: it pops them off the queue while fewer than
 *   min(stage3_max_live_parameters - available, stage3_prefetch_bucket_size) elements are being
 *   prefetched, gathering each that is not available;
 * - release_sub_module releases them after the use unless a prefetch has already popped a later
 *   use of the module, or the module is used again before stage3_max_reuse_distance elements of
 *   other modules' uses (__params_to_release): with the default 1e9 a model of fewer than about
 *   5e8 parameters keeps every module gathered from its forward until its backward;
 * - whatever is still gathered when backward ends is released.
 * Each gather is one allocation of the module's parameters (all_gather_coalesced). */
#include <stdlib.h>
#include <string.h>

#include "graph/dtype.h"
#include "graph/origin.h"
#include "sim/build.h"
#include "sim/weave.h"

static int nomem(mb_builder *b) { return b->d->status ? b->d->status : mb_fail(b->d, MB_E_NOMEM, "out of memory"); }

typedef struct z3mod {
  const char *path;   /* dotted module path, "" the root */
  uint64_t bytes;     /* its own partitioned parameters, gathered */
  int64_t numel;
  int32_t first[2], last[2]; /* [forward, backward]: its nodes' and its submodules' events */
  int32_t slot;       /* gathered: the slot, else -1 */
  int32_t popped;     /* the latest trace entry of it a prefetch popped (-1 none) */
} z3mod;

typedef struct use {
  int32_t mod, phase; /* phase 0 forward, 1 backward */
} use;

typedef struct point {
  int64_t pos;        /* 2i: before event i; 2i + 1: after it */
  int32_t seq, kind;  /* kind 0 release, 1 fetch */
  int32_t t;          /* trace entry */
} point;

typedef struct z3 {
  mb_builder *b;
  z3mod *m;
  int32_t n_mod;
  use *trace;
  int32_t n_trace;
  mb_weave w;         /* the gathers and releases, woven into the step at the end */
  int64_t available;  /* elements gathered */
} z3;

static int by_point(const void *x, const void *y) {
  const point *a = x, *b = y;
  if (a->pos != b->pos) return a->pos < b->pos ? -1 : 1;
  return (a->seq > b->seq) - (a->seq < b->seq);
}

static int add(z3 *z, int64_t pos, int alloc, int phase, int32_t slot) {
  return mb_weave_add(z->b, &z->w, pos, alloc, phase, slot);
}

static int gather(z3 *z, int32_t k, int64_t pos, int phase) {
  z3mod *m = &z->m[k];
  if (m->slot >= 0) return MB_OK;
  m->slot = mb_slot_new(z->b, 0, MB_SZ_FIXED, MB_CAT_PARAMETER, -1, 0, "ZeRO-3 gathered parameters");
  if (m->slot < 0) return nomem(z->b);
  z->b->p->slots[m->slot].fixed = m->bytes;
  z->available += m->numel;
  return add(z, pos, 1, phase, m->slot);
}

static int release(z3 *z, int32_t k, int64_t pos, int phase) {
  z3mod *m = &z->m[k];
  if (m->slot < 0) return MB_OK;
  int rc = add(z, pos, 0, phase, m->slot);
  m->slot = -1;
  z->available -= m->numel;
  return rc;
}

/* fetch_sub_module for trace entry t at pos; *queue is the prefetch queue's head */
static int fetch(z3 *z, int32_t t, int64_t pos, int32_t *queue) {
  const mb_dist_opts *o = &z->b->step->dist;
  int phase = z->trace[t].phase ? MB_PHASE_BACKWARD : MB_PHASE_FORWARD;
  int rc = gather(z, z->trace[t].mod, pos, phase);
  if (*queue <= t) *queue = t + 1; /* the module's own entries are popped off the queue */
  if (rc != MB_OK || o->prefetch_bucket_size <= 0) return rc;
  int64_t room = o->max_live_parameters - z->available, most = room < o->prefetch_bucket_size ? room : o->prefetch_bucket_size;
  int64_t prefetching = 0;
  while (*queue < z->n_trace && prefetching < most && rc == MB_OK) {
    int32_t q = (*queue)++, k = z->trace[q].mod;
    z->m[k].popped = q;
    if (z->m[k].slot >= 0) continue; /* available: not fetched again */
    prefetching += z->m[k].numel;
    rc = gather(z, k, pos, phase);
  }
  return rc;
}

/* release_sub_module after trace entry t */
static int release_use(z3 *z, int32_t t, int64_t pos) {
  const mb_dist_opts *o = &z->b->step->dist;
  int32_t k = z->trace[t].mod;
  if (z->m[k].popped > t) return MB_OK; /* a prefetch took a later use of it */
  int64_t traversed = 0;
  for (int32_t q = t + 1; q < z->n_trace && traversed < o->max_reuse_distance; q++) {
    if (z->trace[q].mod == k) return MB_OK; /* used again soon: kept */
    traversed += z->m[z->trace[q].mod].numel;
  }
  return release(z, k, pos, z->trace[t].phase ? MB_PHASE_BACKWARD : MB_PHASE_FORWARD);
}

/* The module path of a parameter: its name's, else the module of the first node reading it. */
static int32_t module_index(z3 *z, const char *path, size_t len) {
  for (int32_t i = 0; i < z->n_mod; i++)
    if (strlen(z->m[i].path) == len && !strncmp(z->m[i].path, path, len)) return i;
  char *s = mb_arena_alloc(&z->b->a, len + 1);
  if (!s) return -1;
  memcpy(s, path, len);
  s[len] = '\0';
  z->m[z->n_mod] = (z3mod){s, 0, 0, {-1, -1}, {-1, -1}, -1, -1};
  return z->n_mod++;
}

/* prefix is a module path that contains the module path path (itself, or an ancestor) */
static bool contains(const char *prefix, const char *path) {
  size_t n = strlen(prefix);
  return !n || (!strncmp(prefix, path, n) && (path[n] == '\0' || path[n] == '.'));
}


static int schedule(z3 *z, const char **node_path) {
  mb_builder *b = z->b;
  const mb_plan *p = b->p;
  const mb_graph *g = b->ms[0].g;
  int32_t bwd_end = -1;
  for (int32_t i = 0; i < p->n_ev; i++) {
    const mb_event_rec *e = &p->ev[i];
    int ph = e->phase == MB_PHASE_FORWARD ? 0 : e->phase == MB_PHASE_BACKWARD ? 1 : -1;
    if (ph == 1) bwd_end = i;
    if (ph < 0 || e->model || e->node < 0 || e->node >= g->n_nodes || !node_path[e->node]) continue;
    for (int32_t k = 0; k < z->n_mod; k++)
      if (contains(z->m[k].path, node_path[e->node])) {
        if (z->m[k].first[ph] < 0) z->m[k].first[ph] = i;
        z->m[k].last[ph] = i;
      }
  }
  if (bwd_end < 0) return MB_OK; /* nothing trains */
  /* a module whose forward never runs (MultiheadAttention's out_proj: its weight is read by the
   * attention's own code) is gathered for the nearest enclosing module's use */
  for (int32_t k = 0; k < z->n_mod; k++) {
    if (z->m[k].first[0] >= 0 || z->m[k].first[1] >= 0) continue;
    char up[512];
    size_t len = strlen(z->m[k].path) < sizeof up ? strlen(z->m[k].path) : sizeof up - 1;
    memcpy(up, z->m[k].path, len);
    up[len] = '\0';
    while (z->m[k].first[0] < 0 && z->m[k].first[1] < 0 && up[0]) {
      char *dot = strrchr(up, '.');
      if (dot) *dot = '\0';
      else up[0] = '\0';
      for (int32_t i = 0; i < p->n_ev; i++) {
        const mb_event_rec *e = &p->ev[i];
        int ph = e->phase == MB_PHASE_FORWARD ? 0 : e->phase == MB_PHASE_BACKWARD ? 1 : -1;
        if (ph < 0 || e->model || e->node < 0 || e->node >= g->n_nodes || !node_path[e->node]) continue;
        if (!contains(up, node_path[e->node])) continue;
        if (z->m[k].first[ph] < 0) z->m[k].first[ph] = i;
        z->m[k].last[ph] = i;
      }
    }
  }
  /* the trace: forward uses by their first event, then backward uses */
  z->trace = mb_arena_array(&b->a, (size_t)z->n_mod * 2 + 1, sizeof(use));
  point *pt = malloc(((size_t)z->n_mod * 4 + 1) * sizeof *pt);
  if (!z->trace || !pt) {
    free(pt);
    return nomem(b);
  }
  for (int ph = 0; ph < 2; ph++) {
    int32_t from = z->n_trace;
    for (int32_t k = 0; k < z->n_mod; k++)
      if (z->m[k].first[ph] >= 0 && z->m[k].bytes) z->trace[z->n_trace++] = (use){k, ph};
    for (int32_t i = from + 1; i < z->n_trace; i++) /* insertion sort by first event */
      for (int32_t j = i; j > from && z->m[z->trace[j].mod].first[ph] < z->m[z->trace[j - 1].mod].first[ph]; j--) {
        use t = z->trace[j];
        z->trace[j] = z->trace[j - 1];
        z->trace[j - 1] = t;
      }
  }
  int32_t n_pt = 0;
  for (int32_t t = 0; t < z->n_trace; t++) {
    const z3mod *m = &z->m[z->trace[t].mod];
    int ph = z->trace[t].phase;
    pt[n_pt] = (point){2 * (int64_t)m->first[ph], n_pt, 1, t};
    n_pt++;
    pt[n_pt] = (point){2 * (int64_t)m->last[ph] + 1, n_pt, 0, t};
    n_pt++;
  }
  qsort(pt, (size_t)n_pt, sizeof *pt, by_point);
  int32_t queue = 0;
  int rc = MB_OK;
  for (int32_t i = 0; i < n_pt && rc == MB_OK; i++)
    rc = pt[i].kind ? fetch(z, pt[i].t, pt[i].pos, &queue) : release_use(z, pt[i].t, pt[i].pos);
  for (int32_t k = 0; k < z->n_mod && rc == MB_OK; k++) rc = release(z, k, 2 * (int64_t)bwd_end + 1, MB_PHASE_BACKWARD);
  free(pt);
  return rc == MB_OK ? mb_weave_in(z->b, &z->w) : rc;
}

int mb_dist_zero3_events(mb_builder *b) {
  const mb_dist_opts *o = &b->step->dist;
  if (o->strategy != MB_STRATEGY_ZERO3 || mb_dist_shards(o) <= 1) return MB_OK;
  const mb_model_state *ms = &b->ms[0];
  const mb_graph *g = ms->g;
  z3 z = {.b = b};
  z.m = mb_arena_array(&b->a, (size_t)g->n_values + 1, sizeof(z3mod));
  const char **node_path = mb_arena_array(&b->a, (size_t)g->n_nodes + 1, sizeof(char *));
  if (!z.m || !node_path) return nomem(b);
  for (int32_t k = 0; k < g->n_nodes; k++) {
    const char *scope = g->nodes[k].origin.scope, *slash = scope ? strrchr(scope, '/') : NULL;
    char dotted[512];
    node_path[k] = NULL;
    if (!scope || scope[0] != '/' || !mb_origin_module_of_scope(scope, (size_t)(slash - scope), dotted, sizeof dotted))
      continue;
    size_t len = strlen(dotted);
    char *s = mb_arena_alloc(&b->a, len + 1);
    if (!s) return nomem(b);
    memcpy(s, dotted, len + 1);
    node_path[k] = s;
  }
  for (int32_t v = 0; v < g->n_values; v++) {
    int32_t s = mb_param_slot(b, v);
    if (s < 0) continue;
    const mb_const_tensor *ct = &g->inits[g->values[v].initializer];
    if ((int64_t)ct->numel <= o->persistence_threshold) continue; /* whole on every rank */
    const char *dot = ct->name ? strrchr(ct->name, '.') : NULL, *path = ct->name;
    size_t len = dot ? (size_t)(dot - ct->name) : 0;
    if (!dot) /* no module in the name: the first node reading it */
      for (int32_t k = 0; k < g->n_nodes && !len; k++)
        for (int32_t i = 0; i < g->nodes[k].n_inputs; i++)
          if (g->nodes[k].inputs[i] == v && node_path[k]) {
            path = node_path[k];
            len = strlen(path);
            break;
          }
    int32_t k = module_index(&z, path ? path : "", path ? len : 0);
    if (k < 0) return nomem(b);
    uint64_t bytes = 0;
    mb_dtype_bytes(ms->rt[v], (uint64_t)ct->numel, &bytes);
    z.m[k].bytes += bytes;
    z.m[k].numel += (int64_t)ct->numel;
  }
  int rc = schedule(&z, node_path);
  free(z.w.at);
  return rc;
}
