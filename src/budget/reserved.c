/* The step's requests to the caching allocator model and what it reserves.
 *
 * Requests are the plan's alloc/free events in order, on one stream (autograd runs a CUDA
 * op's backward on the stream its forward used), with zero-byte tensors skipped (PyTorch's
 * allocate(0) never reaches the allocator). Each cuDNN convolution call (forward, its backward,
 * a checkpoint's recompute) adds a transient workspace right after its outputs and gradients
 * are allocated: min(cudnn_workspace, the convolution's output bytes), a heuristic allowance
 * for benchmark=False (docs/allocator.md) [unverified].
 *
 * Reserved memory is a steady-state figure: the step is replayed again on the warm cache, its
 * first step's leftovers (the .grad tensors: zero_grad(set_to_none=True)) freed first, until a
 * step makes no new segment (at most MAX_ITERATIONS).
 *
 * The first replay makes the lazy slots (torch.optim's states) where the first
 * optimizer.step() makes them, not at setup: they take blocks the first forward and backward
 * left cached, and those blocks stay split for every later step. On the H100's GPT-2-like step
 * at batch 256 this is the difference between the recorded 55.19 GiB reserved and 49.86 GiB
 * with the same requests but the states made before the first forward (docs/allocator.md). */
#include "budget/reserved.h"

#include <stdlib.h>
#include <string.h>

#include "budget/context.h"
#include "graph/graph.h"

#define MAX_ITERATIONS 4

typedef struct conv_point {
  int32_t after;  /* insert after this event */
  int32_t out;    /* the event allocating the convolution's output (its bytes size the workspace) */
} conv_point;

struct mb_reserve {
  const mb_plan *p;
  mb_alloc *a;
  uint64_t cudnn_cap;
  conv_point *conv;
  int32_t n_conv;
  int32_t first_step;  /* the first event after setup */
  int32_t *live;       /* per slot: its block, -1 none */
  bool *of_step;       /* per slot: allocated by the step, not by setup */
  mb_reserve_event *rec;
  size_t n_rec, cap_rec;
  int32_t iteration, after;
  int err;
};

static bool is_conv(const mb_plan *p, int model, int32_t node) {
  const mb_model *m = model ? p->teacher : p->model;
  if (!m || node < 0 || node >= m->graph->n_nodes) return false;
  const char *op = m->graph->nodes[node].op_type;
  return op && (!strcmp(op, "Conv") || !strcmp(op, "ConvTranspose"));
}

/* After the last allocation of each run of events a convolution node makes. */
static int find_convs(mb_reserve *r, mb_diag *d) {
  const mb_plan *p = r->p;
  r->conv = calloc((size_t)p->n_ev + 1, sizeof *r->conv);
  if (!r->conv) return mb_fail(d, MB_E_NOMEM, "out of memory");
  for (int32_t i = 0; i < p->n_ev; i++) {
    const mb_event_rec *e = &p->ev[i];
    if (!e->alloc || e->node < 0 || !is_conv(p, e->model, e->node)) continue;
    bool last = true; /* the run goes on while the node keeps allocating */
    for (int32_t j = i + 1; j < p->n_ev && p->ev[j].node == e->node && p->ev[j].model == e->model &&
                            p->ev[j].phase == e->phase; j++)
      if (p->ev[j].alloc) last = false;
    if (!last) continue;
    /* the output: the first allocation of the node's first output value (the evaluation's
     * forward: its own, at the evaluation's batch) */
    const mb_model *m = e->model ? p->teacher : p->model;
    const mb_node *n = &m->graph->nodes[e->node];
    bool in_eval = e->phase == MB_PHASE_EVAL;
    int32_t out = -1;
    for (int32_t j = 0; j < p->n_ev && out < 0 && n->n_outputs > 0; j++) {
      const mb_event_rec *x = &p->ev[j];
      if (x->alloc && x->model == e->model && x->node == e->node && p->slots[x->slot].ref == n->outputs[0] &&
          p->slots[x->slot].category == MB_CAT_ACTIVATION && (x->phase == MB_PHASE_EVAL) == in_eval)
        out = j;
    }
    if (out >= 0) r->conv[r->n_conv++] = (conv_point){i, out};
  }
  return MB_OK;
}

int mb_reserve_create(const mb_plan *p, const mb_setup *s, mb_reserve **out, mb_diag *d) {
  const mb_train *tr = &s->train;
  *out = NULL;
  mb_alloc_config c;
  mb_alloc_config_default(&c);
  char err[512];
  int rc = mb_alloc_config_parse(&c, tr->alloc_conf, err, sizeof err);
  if (rc != MB_OK) return mb_fail(d, rc, "%s", err);
  c.device_total = tr->device_memory;
  if (tr->device_memory) {
    uint64_t context = mb_train_context(tr, NULL, 0);
    c.limit = tr->device_memory > context ? tr->device_memory - context : 1;
  }
  mb_reserve *r = calloc(1, sizeof *r);
  if (!r) return mb_fail(d, MB_E_NOMEM, "out of memory");
  r->p = p;
  r->cudnn_cap = tr->cudnn_workspace;
  r->live = malloc(((size_t)p->n_slots + 1) * sizeof *r->live);
  r->of_step = malloc(((size_t)p->n_slots + 1) * sizeof *r->of_step);
  if (!r->live || !r->of_step || mb_alloc_create(&c, &r->a) != MB_OK) {
    mb_reserve_free(r);
    return mb_fail(d, MB_E_NOMEM, "out of memory");
  }
  r->first_step = p->n_ev;
  for (int32_t i = 0; i < p->n_ev; i++)
    if (p->ev[i].phase != MB_PHASE_SETUP) {
      r->first_step = i;
      break;
    }
  if (r->cudnn_cap && find_convs(r, d) != MB_OK) {
    mb_reserve_free(r);
    return d->status;
  }
  *out = r;
  return MB_OK;
}

void mb_reserve_free(mb_reserve *r) {
  if (!r) return;
  mb_alloc_free(r->a);
  free(r->conv);
  free(r->live);
  free(r->of_step);
  free(r->rec);
  free(r);
}

static void record(void *ctx, const mb_alloc_event *e) {
  mb_reserve *r = ctx;
  if (r->n_rec == r->cap_rec) {
    size_t cap = r->cap_rec ? r->cap_rec * 2 : 64;
    mb_reserve_event *grown = realloc(r->rec, cap * sizeof *grown);
    if (!grown) {
      r->err = MB_E_NOMEM;
      return;
    }
    r->rec = grown;
    r->cap_rec = cap;
  }
  r->rec[r->n_rec++] = (mb_reserve_event){r->iteration, r->after, *e};
}

const mb_reserve_event *mb_reserve_events(const mb_reserve *r, size_t *n) {
  *n = r->n_rec;
  return r->rec;
}

/* A request; an out-of-memory one is counted and left unserved (-1). */
static int32_t request(mb_reserve *r, uint64_t bytes, mb_reserved *out) {
  int32_t id = -1;
  int rc = mb_alloc_malloc(r->a, bytes, 0, &id);
  if (rc == MB_ALLOC_OOM) out->ooms++;
  else if (rc != MB_OK) r->err = rc;
  return rc == MB_OK ? id : -1;
}

static void release(mb_reserve *r, int32_t id) {
  if (id >= 0 && mb_alloc_release(r->a, id) != MB_OK) r->err = MB_E_NOMEM;
}

/* The first optimizer.step() makes the lazy slots, in setup's order (parameter by parameter,
 * each one's states in turn, as _init_group does), before its own temporaries. They persist:
 * not the step's, so never freed between steps. */
static void make_lazy(mb_reserve *r, const uint64_t *bytes, mb_reserved *out) {
  const mb_plan *p = r->p;
  for (int32_t i = 0; i < r->first_step && !r->err; i++) {
    const mb_event_rec *e = &p->ev[i];
    if (!e->alloc || !p->slots[e->slot].lazy || !bytes[i]) continue;
    r->after = i;
    release(r, r->live[e->slot]);
    r->live[e->slot] = request(r, bytes[i], out);
  }
  r->after = p->step_first;
}

int mb_reserve_run(mb_reserve *r, const uint64_t *bytes, bool rec, uint64_t give_up_above, mb_reserved *out,
                   mb_diag *d) {
  const mb_plan *p = r->p;
  memset(out, 0, sizeof *out);
  mb_alloc_reset(r->a);
  mb_alloc_observe(r->a, rec ? record : NULL, r);
  r->n_rec = 0;
  r->err = MB_OK;
  for (int32_t s = 0; s < p->n_slots; s++) {
    r->live[s] = -1;
    r->of_step[s] = false;
  }
  const mb_alloc_stats *st = mb_alloc_get_stats(r->a);
  /* a batch-size probe only asks whether it fits: it stops at the first sign it does not */
#define GIVE_UP (give_up_above && (out->ooms || st->reserved > give_up_above))
  for (int32_t it = 1; it <= MAX_ITERATIONS && !r->err && !GIVE_UP; it++) {
    r->iteration = it;
    out->iterations = it;
    uint64_t grown_before = st->segment_allocs + st->maps;
    if (it > 1) /* the next step starts: what the last one left (its .grad tensors) is freed */
      for (int32_t s = 0; s < p->n_slots; s++)
        if (r->of_step[s] && r->live[s] >= 0) {
          release(r, r->live[s]);
          r->live[s] = -1;
        }
    int32_t c = 0;
    for (int32_t i = it == 1 ? 0 : r->first_step; i < p->n_ev && !r->err && !GIVE_UP; i++) {
      const mb_event_rec *e = &p->ev[i];
      r->after = i;
      while (c < r->n_conv && r->conv[c].after < i) c++;
      if (it == 1 && i == p->step_first) make_lazy(r, bytes, out);
      if (it == 1 && i < r->first_step && e->alloc && p->slots[e->slot].lazy) continue; /* made above */
      if (bytes[i]) {
        if (e->alloc) {
          release(r, r->live[e->slot]); /* a storage is allocated once at a time; defensive */
          r->live[e->slot] = request(r, bytes[i], out);
          r->of_step[e->slot] = i >= r->first_step;
        } else {
          release(r, r->live[e->slot]);
          r->live[e->slot] = -1;
        }
      }
      if (c < r->n_conv && r->conv[c].after == i) {
        uint64_t ws = bytes[r->conv[c].out] < r->cudnn_cap ? bytes[r->conv[c].out] : r->cudnn_cap;
        if (ws > out->cudnn_max) out->cudnn_max = ws;
        r->after = -1;
        if (ws) release(r, request(r, ws, out));
      }
    }
    if (it == 1 && p->step_first >= p->n_ev && !GIVE_UP) make_lazy(r, bytes, out); /* a step of no events */
    if (it > 1 && st->segment_allocs + st->maps == grown_before) break; /* steady */
  }
#undef GIVE_UP
  if (r->err) return mb_fail(d, r->err, "out of memory");
  out->reserved_peak = st->reserved_peak;
  out->segments = st->peak_segments;
  out->cached_free = st->peak_cached_free;
  out->largest_free = st->peak_largest_free;
  return MB_OK;
}
