/* The step's requests to the caching allocator model and what it reserves.
 *
 * Requests are the plan's alloc/free events in order, on one stream (autograd runs a CUDA
 * op's backward on the stream its forward used), with zero-byte tensors skipped (PyTorch's
 * allocate(0) never reaches the allocator). cuDNN's convolution workspaces are the plan's own
 * transient slots (sim/plan.c, conv_workspaces).
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

struct mb_reserve {
  const mb_plan *p;
  mb_alloc *a;
  int32_t first_step;  /* the first event after setup */
  int32_t *live;       /* per slot: its block, -1 none */
  bool *of_step;       /* per slot: allocated by the step, not by setup */
  mb_reserve_event *rec;
  size_t n_rec, cap_rec;
  int32_t iteration, after;
  int err;
};

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
  *out = r;
  return MB_OK;
}

void mb_reserve_free(mb_reserve *r) {
  if (!r) return;
  mb_alloc_free(r->a);
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
    for (int32_t i = it == 1 ? 0 : r->first_step; i < p->n_ev && !r->err && !GIVE_UP; i++) {
      const mb_event_rec *e = &p->ev[i];
      r->after = i;
      if (it == 1 && i == p->step_first) make_lazy(r, bytes, out);
      if (it == 1 && i < r->first_step && e->alloc && p->slots[e->slot].lazy) continue; /* made above */
      if (bytes[i]) {
        if (e->alloc) {
          release(r, r->live[e->slot]); /* a storage is allocated once at a time; defensive */
          r->live[e->slot] = request(r, bytes[i], out);
          r->of_step[e->slot] = i >= r->first_step;
          if (p->slots[e->slot].rule == MB_SZ_CONV_WS && bytes[i] > out->cudnn_max) out->cudnn_max = bytes[i];
        } else {
          release(r, r->live[e->slot]);
          r->live[e->slot] = -1;
        }
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
