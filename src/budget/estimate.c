/* The budget: persistent parts, the peaks of a simulated step, reserved memory (the caching
 * allocator model, or the flat allowance), the context, and the largest batch size that fits
 * (bisection over runs of one plan). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget/context.h"
#include "budget/estimate.h"
#include "budget/gpus.h"
#include "budget/margin.h"
#include "budget/reserved.h"
#include "budget/step.h"
#include "sim/plan.h"
#include "util/checked.h"
#include "util/versioned.h"

#define SEGMENT_ROUND (2u * 1048576u)


/* Persistent parts straight from the plan's weights (batch-independent). */
static void weights(const mb_plan *p, uint64_t rounding, mb_budget *bu) {
  for (int32_t i = 0; i < p->n_slots; i++) {
    const mb_slot *s = &p->slots[i];
    if (s->rule != MB_SZ_FIXED || s->model != 0) continue;
    uint64_t bytes = mb_round_block(s->fixed, rounding);
    if (s->category == MB_CAT_PARAMETER && s->ref >= 0) {
      if (s->trains) bu->params_trainable += bytes;
      else bu->params_frozen += bytes;
    } else if (s->category == MB_CAT_EMBEDDING && s->ref >= 0) {
      bu->embeddings += bytes;
    }
    if (s->has_grad && s->ref >= 0) bu->gradients += bytes;
  }
}

/* What the runs of one estimate share: the plan, the allocator model, per-event bytes, and the
 * last simulated step. A run is a pure function of the batch size, and the search asks for the
 * same batch more than once (the probe of the answer, then its full budget, then the slope's
 * run at batch_min): on a 70B decoder each step is milliseconds of shape inference. */
typedef struct est {
  const mb_plan *p;
  mb_setup *s;
  mb_reserve *res;   /* NULL with the flat allowance */
  uint64_t *bytes;
  uint64_t *step_bytes; /* with an evaluation phase: bytes with the evaluation's events left out */
  int64_t run_batch;    /* the batch of the last successful run, -1: none */
  mb_run run;           /* its result */
  int64_t bytes_batch;  /* the batch whose per-event bytes `bytes` holds, -1: none */
  bool run_inferred;    /* that run inferred its shapes */
  mb_lines *lines;      /* a search's shapes as lines in the batch (NULL: always inferred) */
  bool used_lines;      /* a probe took its shapes from them */
  int64_t probe_batch;  /* the last probe that fit, -1: none; its allocator model's figures: */
  mb_reserved probe_rr, probe_loop;
  int64_t first_batch;  /* batch_min once run whole with inferred shapes, -1: not yet; that run */
  mb_run first_run;
  mb_margin margin;     /* the solve's safety margin (budget/margin.c) */
} est;

/* allowance: fragmentation is that fraction of the reserved peak; segments are 2 MiB */
static uint64_t allowance(const mb_train *tr, uint64_t peak) {
  double reserved = (double)peak / (1.0 - tr->fragmentation);
  uint64_t res = (uint64_t)reserved;
  if ((double)res < reserved) res++;
  if (tr->rounding > 1) res = (res + SEGMENT_ROUND - 1) / SEGMENT_ROUND * SEGMENT_ROUND;
  return res < peak ? peak : res;
}

/* The evaluation's figures: its peak, what it keeps, and reserved memory over a loop of steps
 * and evaluations (the allocator model replays both; the allowance sizes the larger peak). */
static void fill_eval(const est *x, const mb_run *r, const mb_reserved *loop, mb_budget *bu) {
  const mb_train *tr = &x->s->train;
  bu->teacher_cache = r->tagged[MB_TAG_TEACHER_CACHE] * (uint64_t)tr->eval.teacher_cache;
  if (!x->p->eval_batch) return;
  bu->eval_batch = r->eval_batch;
  bu->eval_peak = r->eval_peak;
  bu->eval_forward = r->eval_forward;
  bu->eval_outputs = r->tagged[MB_TAG_EVAL_OUTPUTS] * (uint64_t)tr->eval.keep_outputs;
  bu->ema_stored = r->tagged[MB_TAG_EMA_STORE];
  memcpy(bu->eval_at_peak, r->eval_at_peak, sizeof bu->eval_at_peak);
  uint64_t live = r->eval_peak > r->peak ? r->eval_peak : r->peak;
  uint64_t res = loop ? (loop->reserved_peak > live ? loop->reserved_peak : live) : allowance(tr, live);
  bu->eval_reserved_peak = res;
  bu->eval_device_peak = res + bu->context;
}

static void fill(const est *x, int64_t batch, const mb_run *r, const mb_reserved *rr, const mb_reserved *loop,
                 mb_budget *bu) {
  const mb_plan *p = x->p;
  const mb_train *tr = &x->s->train;
  memset(bu, 0, sizeof *bu);
  bu->struct_size = sizeof *bu;
  bu->mode = MB_MODE_STATIC;
  bu->batch_size = batch;
  bu->grad_accumulation = tr->grad_accumulation;
  bu->world_size = tr->dist.world_size;
  bu->global_batch_size = batch * tr->grad_accumulation * tr->dist.world_size;
  bu->host_memory = x->p->host_bytes;
  mb_loop_opts lo;
  int zero_grad = tr->eval.zero_grad;
  mb_setup_loop_resolve(tr, &lo, &zero_grad);
  bu->loop = lo.loop;
  bu->hold_outputs = lo.hold;
  bu->loop_held = r->tagged[MB_TAG_LOOP_HELD];
  bu->loss_in_graph = p->loss_in_graph;
  bu->peak_phase = r->peak_phase;
  weights(p, tr->rounding, bu);
  bu->buffers = r->persistent[MB_CAT_BUFFER];
  bu->optimizer_states = r->persistent[MB_CAT_OPTIMIZER];
  bu->master_weights = r->persistent[MB_CAT_MASTER];
  bu->ema = r->persistent[MB_CAT_EMA];
  bu->teacher_weights = r->persistent[MB_CAT_TEACHER];
  bu->workspace = r->persistent[MB_CAT_WORKSPACE];
  bu->static_bytes = bu->params_trainable + bu->params_frozen + bu->embeddings + bu->buffers +
                     bu->gradients + bu->optimizer_states + bu->master_weights + bu->ema +
                     bu->teacher_weights + bu->workspace;
  bu->inputs = r->inputs;
  bu->activations = r->activations;
  bu->teacher_activations = r->teacher_transient;
  bu->allocated_peak = r->peak;
  bu->dynamic_peak = mb_sat_sub(r->peak, bu->static_bytes);
  for (int ph = MB_PHASE_SETUP; ph <= MB_PHASE_LOSS; ph++)
    if (r->phase_peak[ph] > bu->forward_peak) bu->forward_peak = r->phase_peak[ph];
  bu->backward_peak = r->phase_peak[MB_PHASE_BACKWARD];
  bu->optimizer_peak = r->phase_peak[MB_PHASE_OPTIMIZER];
  bu->first_step_peak = r->first_step_peak;
  bu->level_after_setup = r->phase_end[MB_PHASE_SETUP];
  bu->level_after_forward = r->phase_end[MB_PHASE_LOSS];
  bu->level_after_backward = r->phase_end[MB_PHASE_BACKWARD];
  bu->level_after_optimizer = r->phase_end[MB_PHASE_OPTIMIZER];
  uint64_t res;
  if (rr) { /* the allocator model: never below the live bytes it was asked for */
    res = rr->reserved_peak > r->peak ? rr->reserved_peak : r->peak;
    bu->reserved_source = MB_RESERVED_ALLOCATOR;
    bu->allocator_ooms = rr->ooms > INT32_MAX ? INT32_MAX : (int32_t)rr->ooms;
    bu->segments = rr->segments;
    bu->cached_free = rr->cached_free;
    bu->largest_cached_free = rr->largest_free;
    bu->cudnn_workspace = rr->cudnn_max;
  } else {
    res = allowance(tr, r->peak);
    bu->reserved_source = MB_RESERVED_ALLOWANCE;
  }
  bu->reserved_peak = res;
  bu->fragmentation = res - r->peak;
  bu->context = mb_train_context(tr, NULL, 0);
  bu->device_peak = res + bu->context;
  memcpy(bu->at_peak, r->at_peak, sizeof bu->at_peak);
  bu->device_memory = tr->device_memory;
  bu->usable_memory = (uint64_t)((double)tr->device_memory * tr->utilization);
  fill_eval(x, r, loop, bu);
  /* the step and its evaluation must both fit */
  uint64_t need = bu->eval_device_peak > bu->device_peak ? bu->eval_device_peak : bu->device_peak;
  bool ooms = bu->allocator_ooms || (loop && loop->ooms);
  bu->margin = x->margin.fraction;
  bu->margin_bytes = (uint64_t)((double)bu->usable_memory * x->margin.fraction);
  snprintf(bu->margin_family, sizeof bu->margin_family, "%s", x->margin.family);
  snprintf(bu->margin_basis, sizeof bu->margin_basis, "%s", x->margin.basis);
  /* what the margin holds back is not there to fit in */
  uint64_t room = bu->usable_memory - bu->margin_bytes;
  bu->available = mb_sat_diff(room, need);
  bu->fits = tr->device_memory ? need <= room && !ooms : -1;
  mb_budget_batching(x->s, r->assumed, bu);
}

/* What a run is for: the budget, a probe of whether the batch fits, or only the allocated
 * figures (the slope) */
enum run_kind { RUN_FULL, RUN_PROBE, RUN_ALLOCATED };

/* One run; shape errors that only mean "this batch is absurdly large" count as not fitting.
 * Probes and the slope take shapes from the search's lines where fitted; the budget's own run
 * infers them, which checks the lines once more at the answer. */
static int eval(est *x, int64_t batch, int kind, mb_budget *bu, mb_diag *d) {
  mb_run r;
  mb_reserved rr = {0}, loop = {0};
  bool reserve = x->res && kind != RUN_ALLOCATED, use_lines = x->lines && kind != RUN_FULL;
  /* a probe: the live bytes or reserved memory above usable - context cannot fit (reserved
   * memory is never below the live bytes, so a run can stop there) */
  uint64_t give_up = 0;
  if (kind == RUN_PROBE && x->s->train.device_memory) {
    uint64_t usable = (uint64_t)((double)x->s->train.device_memory * x->s->train.utilization);
    uint64_t context = mb_train_context(&x->s->train, NULL, 0);
    give_up = usable > context ? usable - context : 1;
  }
  if (x->run_batch == batch && (!reserve || x->bytes_batch == batch) && (use_lines || x->run_inferred)) {
    r = x->run;
  } else if (!reserve && x->first_batch == batch) { /* the slope's run at batch_min: the first probe's */
    r = x->first_run;
  } else {
    x->run_batch = -1;
    if (reserve) x->bytes_batch = -1;
    mb_step step;
    mb_setup_step(x->s, &step);
    if (mb_plan_run_lines(x->p, &step, batch, x->lines, use_lines, give_up, &r, reserve ? x->bytes : NULL, NULL,
                          d) != MB_OK)
      return d->status;
    if (r.shapes_from_lines) x->used_lines = true;
    if (!r.stopped) { /* a stopped run's figures and bytes are partial: never reused */
      x->run_batch = batch;
      x->run = r;
      x->run_inferred = !r.shapes_from_lines;
      if (reserve) x->bytes_batch = batch;
      if (batch == x->s->train.batch_min && !r.shapes_from_lines) {
        x->first_batch = batch;
        x->first_run = r;
      }
    }
  }
  if (give_up && (r.stopped || r.peak > give_up)) {
    memset(bu, 0, sizeof *bu);
    bu->fits = 0;
    return MB_OK;
  }
  /* the answer's budget after its probe: the same shapes (inferred again, on the lines) give
   * the same bytes, and a probe that fits ran the allocator model to the end */
  bool same = reserve && x->probe_batch == batch && !(x->lines && mb_lines_state(x->lines) == MB_LINES_BROKEN);
  if (same) {
    rr = x->probe_rr;
    loop = x->probe_loop;
  } else if (reserve) {
    if (x->step_bytes) /* the step alone: the evaluation's requests left out */
      for (int32_t i = 0; i < x->p->n_ev; i++) x->step_bytes[i] = x->p->ev[i].phase == MB_PHASE_EVAL ? 0 : x->bytes[i];
    if (mb_reserve_run(x->res, x->step_bytes ? x->step_bytes : x->bytes, false, give_up, &rr, d) != MB_OK)
      return d->status;
    if (x->step_bytes && mb_reserve_run(x->res, x->bytes, false, give_up, &loop, d) != MB_OK) return d->status;
  }
  fill(x, batch, &r, reserve ? &rr : NULL, reserve && x->step_bytes ? &loop : NULL, bu);
  if (kind == RUN_PROBE && reserve && !same && bu->fits == 1) {
    x->probe_batch = batch;
    x->probe_rr = rr;
    x->probe_loop = loop;
  }
  return MB_OK;
}

static int fits_at(est *x, int64_t batch, bool *fits, mb_diag *d) {
  mb_budget bu;
  mb_diag local;
  mb_diag_init(&local);
  if (eval(x, batch, RUN_PROBE, &bu, &local) != MB_OK) {
    if (local.status == MB_E_LIMIT) {
      *fits = false;
      return MB_OK;
    }
    return mb_fail(d, local.status, "%s", local.msg);
  }
  *fits = bu.fits == 1;
  return MB_OK;
}

void mb_budget_batching(const mb_setup *s, int32_t assumed, mb_budget *bu) {
  snprintf(bu->batch_unit, sizeof bu->batch_unit, "%s", mb_setup_batch_unit(s));
  bu->batch_rule = mb_setup_batch_rule(s);
  bu->assumed_bounds = assumed;
  int64_t limit = mb_setup_batch_limit(s);
  bu->batch_limit = limit == INT64_MAX ? 0 : limit;
}

/* The peak of the phases whose memory grows with the batch: teacher, forward, loss, backward
 * (the optimizer step's is the weights' alone). */
static uint64_t batch_driven(const mb_budget *b) {
  return b->forward_peak > b->backward_peak ? b->forward_peak : b->backward_peak;
}

/* per_sample: what one more sample adds to the batch-driven peak, from two runs (per graph
 * with per-sample dims; within the graph-size table's count); fixed: the rest of the dynamic
 * peak at the budget's batch. A slope of the overall peak would be near 0 where the optimizer
 * step's temporaries are the peak at both batches, and a blend of two phases where they are
 * at one only: Llama-3-8B in bf16 at batch 1 read 48 KiB per sample at sequence 2048 and
 * 22 GiB at 4096 that way (issue 28). */
static int slope(est *x, mb_budget *bu, mb_diag *d) {
  const mb_train *tr = &x->s->train;
  int64_t lo = tr->batch_min, hi = bu->batch_size > lo ? bu->batch_size : lo + 1;
  int64_t limit = mb_setup_batch_limit(x->s);
  if (hi > limit) { /* the whole table: the slope from the batch below it */
    hi = limit;
    if (lo >= hi) lo = hi - 1;
    if (lo < 1) return MB_OK; /* one graph: no slope */
  }
  mb_budget a, b;
  if (eval(x, lo, RUN_ALLOCATED, &a, d) != MB_OK) return d->status;
  if (hi == bu->batch_size) b = *bu;
  else if (eval(x, hi, RUN_ALLOCATED, &b, d) != MB_OK) return d->status;
  uint64_t rise = mb_sat_sub(batch_driven(&b), batch_driven(&a));
  bu->dynamic_per_sample = rise / (uint64_t)(hi - lo);
  uint64_t n = (uint64_t)bu->batch_size;
  bu->dynamic_fixed = n && bu->dynamic_per_sample > UINT64_MAX / n ? 0 : mb_sat_sub(bu->dynamic_peak, bu->dynamic_per_sample * n);
  return MB_OK;
}

/* The largest batch in [batch_min, batch_max] that fits, by bisection (batch_min when none
 * does), then down to a multiple of batch_multiple; *above: the batch above the bisection's
 * answer, which it found not to fit (-1: none). */
static int search(est *x, int64_t batch_max, int64_t *best, int64_t *above, mb_diag *d) {
  const mb_train *tr = &x->s->train;
  bool ok = false;
  *above = -1;
  if (fits_at(x, tr->batch_min, &ok, d) != MB_OK) return d->status;
  *best = tr->batch_min;
  if (!ok) return MB_OK;
  bool top = false;
  if (fits_at(x, batch_max, &top, d) != MB_OK) return d->status;
  if (top) {
    *best = batch_max;
  } else {
    int64_t lo = tr->batch_min, hi = batch_max; /* fits(lo), !fits(hi) */
    while (hi - lo > 1) {
      int64_t mid = lo + (hi - lo) / 2;
      bool f = false;
      if (fits_at(x, mid, &f, d) != MB_OK) return d->status;
      if (f) lo = mid;
      else hi = mid;
    }
    *best = lo;
    *above = hi;
  }
  int64_t m = tr->batch_multiple;
  if (m > 1 && *best / m * m >= tr->batch_min) *best = *best / m * m;
  return MB_OK;
}

/* The search, and the budget at its answer. Where probes took shapes from lines, the shapes
 * are inferred at both sides of the answer's boundary (the budget's run at the answer, and
 * the batch above it): off their lines there, the search is done again with every probe's
 * shapes inferred. So the answer fits and the batch above it does not, as inference has it. */
static int search_and_fill(est *x, int64_t batch_max, mb_budget *bu, mb_diag *d) {
  int64_t best = 0, above = -1;
  if (search(x, batch_max, &best, &above, d) != MB_OK) return d->status;
  if (x->used_lines && above > 0) {
    mb_step step;
    mb_setup_step(x->s, &step);
    mb_diag local;
    mb_diag_init(&local);
    /* an absurd size there: not fitting, as the probe said */
    if (mb_plan_check_lines(x->p, &step, above, x->lines, &local) != MB_OK && local.status != MB_E_LIMIT)
      return mb_fail(d, local.status, "%s", local.msg);
  }
  if (eval(x, best, RUN_FULL, bu, d) != MB_OK) return d->status;
  if (!x->used_lines || mb_lines_state(x->lines) != MB_LINES_BROKEN) return MB_OK;
  mb_lines_free(x->lines);
  x->lines = NULL;
  x->used_lines = false;
  x->run_batch = x->bytes_batch = x->probe_batch = -1;
  return search_and_fill(x, batch_max, bu, d);
}

static int solve(est *x, mb_budget *bu, mb_diag *d) {
  const mb_setup *s = x->s;
  const mb_train *tr = &s->train;
  if (tr->batch_min > tr->batch_max)
    return mb_fail(d, MB_E_INVALID_ARG, "batch_min %lld is above batch_max %lld",
                   (long long)tr->batch_min, (long long)tr->batch_max);
  if (s->batch >= 0) { /* the budget at the caller's batch size */
    if (eval(x, s->batch, RUN_FULL, bu, d) != MB_OK) return d->status;
    return slope(x, bu, d);
  }
  /* a batch cannot hold more graphs than the graph-size table lists */
  int64_t limit = mb_setup_batch_limit(s), batch_max = tr->batch_max < limit ? tr->batch_max : limit;
  if (tr->batch_min > batch_max)
    return mb_fail(d, MB_E_INVALID_ARG, "batch_min %lld is above the %lld graphs the graph sizes list",
                   (long long)tr->batch_min, (long long)limit);
  if (!tr->device_memory)
    return mb_fail(d, MB_E_INVALID_ARG,
                   "no device memory to solve the batch size for: give a GPU (--gpu) or its memory "
                   "(--device-memory), or a batch size (--batch)");
  if (search_and_fill(x, batch_max, bu, d) != MB_OK) return d->status;
  bu->solved = 1;
  return slope(x, bu, d);
}

/* Lines for the values the plan's slots are sized from (an evaluation's slot from the
 * evaluation's graph, or the model's where it runs at the training batch). */
static mb_lines *new_lines(const mb_plan *p, const int32_t n_values[3]) {
  mb_lines *l = mb_lines_new(n_values);
  bool *used[3] = {NULL, NULL, NULL};
  int rc = l ? MB_OK : MB_E_NOMEM;
  for (int g = 0; g < 3 && rc == MB_OK; g++)
    if (!(used[g] = calloc((size_t)n_values[g] + 1, sizeof *used[g]))) rc = MB_E_NOMEM;
  for (int32_t i = 0; i < p->n_slots && rc == MB_OK; i++) {
    const mb_slot *sl = &p->slots[i];
    if (sl->rule == MB_SZ_ZERO || sl->rule == MB_SZ_FIXED || sl->ref < 0) continue;
    if (sl->eval && n_values[2]) used[2][sl->ref] = true;
    used[sl->eval ? 0 : sl->model][sl->ref] = true;
    if (sl->ref2 >= 0) { /* a cuDNN workspace reads its convolution's input too */
      if (sl->eval && n_values[2]) used[2][sl->ref2] = true;
      used[sl->eval ? 0 : sl->model][sl->ref2] = true;
    }
  }
  for (int g = 0; g < 3 && rc == MB_OK; g++)
    if (n_values[g]) rc = mb_lines_use(l, g, used[g]);
  if (rc == MB_OK) mb_plan_seed_lines(p, l);
  for (int g = 0; g < 3; g++) free(used[g]);
  if (rc != MB_OK) {
    mb_lines_free(l);
    return NULL;
  }
  return l;
}

int mb_estimate_plan(const mb_plan *p, mb_setup *s, mb_budget *bu, mb_diag *d) {
  est x = {.p = p, .s = s, .run_batch = -1, .bytes_batch = -1, .probe_batch = -1, .first_batch = -1};
  mb_margin_for(p->model->graph, &s->train, &x.margin);
  if (s->train.reserved_model == MB_RESERVED_ALLOCATOR) {
    x.bytes = malloc(((size_t)p->n_ev + 1) * sizeof *x.bytes);
    if (p->eval_batch) x.step_bytes = malloc(((size_t)p->n_ev + 1) * sizeof *x.step_bytes);
    if (!x.bytes || (p->eval_batch && !x.step_bytes)) {
      free(x.bytes);
      free(x.step_bytes);
      return mb_fail(d, MB_E_NOMEM, "out of memory");
    }
    if (mb_reserve_create(p, s, &x.res, d) != MB_OK) {
      free(x.bytes);
      free(x.step_bytes);
      return d->status;
    }
  }
  /* a search runs the plan at many batches; per-sample dims (batches of graphs) are sums over
   * a table, not lines */
  mb_shape_inputs in;
  mb_setup_shape_inputs(s, &in);
  if (s->batch < 0 && !mb_batching_num_sample_dims(in.batching)) {
    const int32_t n_values[3] = {p->model->graph->n_values, p->teacher ? p->teacher->graph->n_values : 0,
                                 p->eval_batch ? p->model->graph->n_values : 0};
    x.lines = new_lines(p, n_values); /* none (out of memory): shapes inferred at every probe */
  }
  solve(&x, bu, d);
  mb_lines_free(x.lines);
  mb_reserve_free(x.res);
  free(x.bytes);
  free(x.step_bytes);
  return d->status;
}

MB_API int mb_estimate(const mb_model *m, mb_setup *s, mb_budget *out) {
  if (!s) return MB_E_INVALID_ARG;
  mb_diag d;
  mb_diag_init(&d);
  s->errmsg[0] = '\0';
  if (!m || !m->graph || !out) {
    snprintf(s->errmsg, sizeof s->errmsg, "mb_estimate: model and budget are required");
    return MB_E_INVALID_ARG;
  }
  uint32_t caller;
  memcpy(&caller, out, sizeof caller);
  if (caller < offsetof(mb_budget, at_peak)) {
    snprintf(s->errmsg, sizeof s->errmsg, "mb_estimate: budget.struct_size is not set");
    return MB_E_INVALID_ARG;
  }
  mb_plan *p = NULL;
  mb_budget bu;
  if (mb_setup_plan_build(m, s, &p, &d) == MB_OK) mb_estimate_plan(p, s, &bu, &d);
  mb_plan_free(p);
  if (d.status != MB_OK) {
    snprintf(s->errmsg, sizeof s->errmsg, "%s", d.msg);
    return d.status;
  }
  mb_fill_versioned(out, &bu, sizeof bu, offsetof(mb_budget, at_peak));
  return MB_OK;
}

uint64_t mb_train_cublas_workspace(const mb_train *tr) {
  if (tr->cublas_workspace_set) return tr->cublas_workspace;
  const mb_gpu *gpu = tr->gpu ? mb_gpu_find(tr->gpu) : NULL;
  return gpu ? gpu->cublas_workspace : mb_gpu_default_workspace();
}

/* A separate cuBLASLt workspace (PyTorch builds without TORCH_CUBLASLT_UNIFIED_WORKSPACE) is
 * kept per thread and stream like the cuBLAS one; it is charged with it, thread by thread. */
uint64_t mb_train_workspace(const mb_train *tr) {
  uint64_t cublas = mb_train_cublas_workspace(tr);
  return cublas ? cublas + tr->cublaslt_workspace : 0;
}

/* ---- the trace ---- */

struct mb_trace {
  mb_plan *plan;
  uint64_t *bytes, *live;
};

MB_API int mb_trace_create(const mb_model *m, mb_setup *s, int64_t batch, mb_trace **out) {
  if (!out || !s) return MB_E_INVALID_ARG;
  *out = NULL;
  mb_diag d;
  mb_diag_init(&d);
  if (!m || !m->graph || batch < 1) {
    snprintf(s->errmsg, sizeof s->errmsg, "mb_trace_create: a model and a batch size >= 1 are required");
    return MB_E_INVALID_ARG;
  }
  mb_trace *t = calloc(1, sizeof *t);
  if (!t) return MB_E_NOMEM;
  mb_run r;
  if (mb_setup_plan_build(m, s, &t->plan, &d) == MB_OK) {
    t->bytes = malloc(((size_t)t->plan->n_ev + 1) * sizeof *t->bytes);
    t->live = malloc(((size_t)t->plan->n_ev + 1) * sizeof *t->live);
    if (!t->bytes || !t->live) mb_fail(&d, MB_E_NOMEM, "out of memory");
    else mb_setup_plan_run(t->plan, s, batch, &r, t->bytes, t->live, &d);
  }
  if (d.status != MB_OK) {
    snprintf(s->errmsg, sizeof s->errmsg, "%s", d.msg);
    mb_trace_free(t);
    return d.status;
  }
  *out = t;
  return MB_OK;
}

MB_API void mb_trace_free(mb_trace *t) {
  if (!t) return;
  mb_plan_free(t->plan);
  free(t->bytes);
  free(t->live);
  free(t);
}

MB_API size_t mb_trace_num_events(const mb_trace *t) { return t ? (size_t)t->plan->n_ev : 0; }

MB_API int mb_trace_event(const mb_trace *t, size_t i, mb_event *out) {
  if (!t || !out) return MB_E_INVALID_ARG;
  if (i >= (size_t)t->plan->n_ev) return MB_E_RANGE;
  const mb_event_rec *e = &t->plan->ev[i];
  const mb_slot *s = &t->plan->slots[e->slot];
  const mb_model *m = e->model ? t->plan->teacher : t->plan->model;
  mb_event ev = {sizeof ev, e->alloc, e->phase, s->category, t->bytes[i], t->live[i], s->name,
                 e->node >= 0 ? m->graph->nodes[e->node].name : NULL, e->slot};
  return mb_fill_versioned(out, &ev, sizeof ev, sizeof ev) ? MB_E_INVALID_ARG : MB_OK;
}

/* ---- names ---- */

MB_API const char *mb_phase_name(int phase) {
  static const char *const names[MB_PHASE_COUNT] = {"setup",    "teacher",   "forward", "loss",
                                                     "backward", "optimizer", "eval"};
  return phase >= 0 && phase < MB_PHASE_COUNT ? names[phase] : "unknown";
}

MB_API const char *mb_category_name(int c) {
  static const char *const names[MB_CAT_COUNT] = {
    "parameters", "embeddings", "buffers", "gradients", "optimizer_states", "master_weights", "ema",
    "teacher_weights", "inputs", "activations", "activation_grads", "temporaries", "workspace"};
  return c >= 0 && c < MB_CAT_COUNT ? names[c] : "unknown";
}
