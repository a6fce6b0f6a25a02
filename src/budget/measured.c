/* Measured mode: the session (libraries, device, context), replays at batch sizes with their
 * static figures beside them, the fixed and per-sample device memory, and the batch size that
 * fits the device's free memory now, by bisection over replays. */
#include "budget/measured.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget/estimate.h"
#include "budget/margin.h"
#include "budget/step.h"
#include "cuda/device.h"
#include "budget/measured_replay.h"
#include "util/checked.h"
#include "util/versioned.h"

#define WS_PRE_HOPPER 8519680u /* the cuBLAS workspace PyTorch uses below sm90 (budget/gpus.c) */
#define WS_HOPPER 33554432u

struct mb_measure {
  int status;          /* MB_OK once the device is open */
  mb_cuda cu;
  mb_device_state dev;
  char errmsg[1536];
};


MB_API int mb_measure_create(const mb_setup *setup, mb_measure **out) {
  if (!out) return MB_E_INVALID_ARG;
  mb_measure *m = calloc(1, sizeof *m);
  *out = m;
  if (!m) return MB_E_NOMEM;
  mb_diag d;
  mb_diag_init(&d);
  if (mb_cuda_load(&m->cu, setup ? &setup->cuda : NULL, &d) == MB_OK)
    mb_cuda_open_device(&m->cu, setup ? setup->cuda.device : 0, &m->dev, &d);
  m->status = d.status;
  snprintf(m->errmsg, sizeof m->errmsg, "%s", d.msg);
  if (d.status != MB_OK) mb_cuda_unload(&m->cu); /* a failed session holds nothing but its message */
  return d.status;
}

MB_API void mb_measure_free(mb_measure *m) {
  if (!m) return;
  mb_cuda_unload(&m->cu);
  free(m);
}

MB_API const char *mb_measure_errmsg(const mb_measure *m) {
  return m ? m->errmsg : "no measuring session";
}

MB_API int mb_measure_device(const mb_measure *m, mb_device_info *out) {
  if (!m || !out) return MB_E_INVALID_ARG;
  if (m->status != MB_OK) return MB_E_NO_CUDA;
  const mb_device_state *st = &m->dev;
  mb_device_info info = {sizeof info, st->ordinal, st->name, st->gpu, st->cc_major, st->cc_minor,
                         st->runtime_version, st->driver_version, st->total, st->free_before,
                         st->free_after_context, st->free_now, st->context, st->cublas, st->cudnn, st->others,
                         st->context_measured, m->cu.path[MB_CUDA_LIB_RUNTIME], m->cu.notes};
  return mb_fill_versioned(out, &info, sizeof info, sizeof info) ? MB_E_INVALID_ARG : MB_OK;
}

/* The caller's setup with what the device says where the caller said nothing: its memory,
 * its GPU-table entry, else the cuBLAS workspace of its architecture. */
static void effective(const mb_measure *m, const mb_setup *s, mb_setup *eff) {
  *eff = *s;
  mb_train *t = &eff->train;
  if (!t->device_memory) t->device_memory = m->dev.total;
  if (t->batch_max > mb_setup_batch_limit(s)) t->batch_max = mb_setup_batch_limit(s); /* graph sizes */
  if (!t->gpu && m->dev.gpu) t->gpu = m->dev.gpu;
  if (!t->gpu && !t->cublas_workspace_set) {
    t->cublas_workspace = m->dev.cc_major >= 9 ? WS_HOPPER : WS_PRE_HOPPER;
    t->cublas_workspace_set = true;
  }
}

static int not_open(const mb_measure *m, mb_diag *d) {
  if (!m) return mb_fail(d, MB_E_INVALID_ARG, "no measuring session (mb_measure_create)");
  return mb_fail(d, MB_E_NO_CUDA, "%s", m->errmsg);
}

/* The static budget at batch b under the effective setup (its figures go beside the measured). */
static int static_at(const mb_plan *p, mb_setup *eff, int64_t b, mb_budget *out, mb_diag *d) {
  int64_t saved = eff->batch;
  eff->batch = b;
  int rc = mb_estimate_plan(p, eff, out, d);
  eff->batch = saved;
  return rc;
}

/* Replay at b with the static figures; a shape that overflows at b does not fit. */
static int replay_at(mb_measure *m, const mb_plan *p, mb_setup *eff, int64_t b, mb_replay *rp, mb_diag *d) {
  memset(rp, 0, sizeof *rp);
  rp->struct_size = sizeof *rp;
  rp->batch = b;
  mb_budget sb;
  mb_diag local;
  mb_diag_init(&local);
  if (static_at(p, eff, b, &sb, &local) == MB_OK) mb_replay_step(&m->cu, p, eff, b, rp, &local);
  if (local.status == MB_E_LIMIT) {
    rp->fits = 0;
    return MB_OK;
  }
  if (local.status != MB_OK) return mb_fail(d, local.status, "%s", local.msg);
  rp->static_allocated_peak = sb.allocated_peak;
  rp->static_reserved_peak = sb.reserved_peak;
  rp->static_device_peak = sb.device_peak;
  rp->device_peak = rp->device_bytes + mb_device_own(&m->dev);
  return MB_OK;
}

static uint64_t usable(const mb_setup *eff) {
  return (uint64_t)((double)eff->train.device_memory * eff->train.utilization);
}

/* utilization x memory less the safety margin (budget/margin.c): the replay replays the
 * simulated request stream, so the static solve's measured misses are its misses too */
static uint64_t room(const mb_plan *p, const mb_setup *eff) {
  mb_margin mg;
  mb_margin_for(p->model->graph, &eff->train, &mg);
  uint64_t u = usable(eff);
  return u - (uint64_t)((double)u * mg.fraction);
}

/* The device's memory in use at the replay's worst point stays within the room. */
static bool fits(const mb_measure *m, const mb_plan *p, const mb_setup *eff, const mb_replay *rp) {
  return rp->fits && m->dev.others + rp->device_peak <= room(p, eff);
}

static int fits_at(mb_measure *m, const mb_plan *p, mb_setup *eff, int64_t b, bool *ok, mb_diag *d) {
  mb_replay rp;
  if (replay_at(m, p, eff, b, &rp, d) != MB_OK) return d->status;
  *ok = fits(m, p, eff, &rp);
  return MB_OK;
}

static int solve(mb_measure *m, const mb_plan *p, mb_setup *eff, int64_t *best, mb_diag *d) {
  const mb_train *tr = &eff->train;
  bool ok = false;
  *best = tr->batch_min;
  if (fits_at(m, p, eff, tr->batch_min, &ok, d) != MB_OK || !ok) return d->status;
  bool top = false;
  if (fits_at(m, p, eff, tr->batch_max, &top, d) != MB_OK) return d->status;
  if (top) {
    *best = tr->batch_max;
  } else {
    int64_t lo = tr->batch_min, hi = tr->batch_max; /* fits(lo), !fits(hi) */
    while (hi - lo > 1) {
      int64_t mid = lo + (hi - lo) / 2;
      bool f = false;
      if (fits_at(m, p, eff, mid, &f, d) != MB_OK) return d->status;
      if (f) lo = mid;
      else hi = mid;
    }
    *best = lo;
  }
  int64_t k = tr->batch_multiple;
  if (k > 1 && *best / k * k >= tr->batch_min) *best = *best / k * k;
  return MB_OK;
}

int mb_measure_budget(mb_measure *m, const mb_model *model, const mb_setup *s, mb_setup *eff, mb_plan **plan,
                      mb_budget *out, mb_diag *d) {
  *plan = NULL;
  if (!m || m->status != MB_OK) return not_open(m, d);
  effective(m, s, eff);
  const mb_train *tr = &eff->train;
  if (tr->batch_min > tr->batch_max)
    return mb_fail(d, MB_E_INVALID_ARG, "batch_min %lld is above batch_max %lld", (long long)tr->batch_min,
                   (long long)tr->batch_max);
  if (mb_setup_plan_build(model, eff, plan, d) != MB_OK) return d->status;
  int64_t b = s->batch;
  if (b < 0 && solve(m, *plan, eff, &b, d) != MB_OK) return d->status;
  mb_replay rp, lo_rp;
  if (static_at(*plan, eff, b, out, d) != MB_OK || replay_at(m, *plan, eff, b, &rp, d) != MB_OK) return d->status;
  /* device memory ~ fixed + per sample x batch, from replays at batch_min and b */
  int64_t lo = tr->batch_min, hi = b > lo ? b : lo + 1;
  mb_replay hi_rp = rp;
  if ((hi != b && replay_at(m, *plan, eff, hi, &hi_rp, d) != MB_OK) || replay_at(m, *plan, eff, lo, &lo_rp, d) != MB_OK)
    return d->status;
  out->mode = MB_MODE_MEASURED;
  out->solved = s->batch < 0;
  out->static_device_peak = out->device_peak;
  out->context = mb_device_own(&m->dev);
  out->other_processes = m->dev.others;
  out->device_memory = tr->device_memory;
  out->usable_memory = usable(eff);
  if (rp.fits) {
    out->allocated_peak = rp.allocated_peak;
    out->reserved_peak = rp.reserved_peak;
    out->device_peak = rp.device_peak;
  } else { /* the device could not hold the replay: a lower bound, all it could have had */
    uint64_t could = mb_sat_sub(tr->device_memory, m->dev.others);
    if (could > out->device_peak) out->device_peak = could;
  }
  out->dynamic_peak = mb_sat_sub(out->allocated_peak, out->static_bytes);
  out->fragmentation = mb_sat_sub(out->reserved_peak, out->allocated_peak);
  out->available = mb_sat_diff(room(*plan, eff), m->dev.others > UINT64_MAX - out->device_peak
                                                    ? UINT64_MAX : m->dev.others + out->device_peak);
  out->fits = fits(m, *plan, eff, &rp);
  out->conv_workspace = rp.conv_workspace;
  out->matmul_workspace = rp.matmul_workspace;
  if (lo_rp.fits && hi_rp.fits) {
    out->measured_per_sample = mb_sat_sub(hi_rp.device_peak, lo_rp.device_peak) / (uint64_t)(hi - lo);
    out->measured_fixed = mb_sat_sub(lo_rp.device_peak, out->measured_per_sample * (uint64_t)lo);
  }
  return MB_OK;
}

int mb_measure_replays(mb_measure *m, const mb_model *model, const mb_setup *s, const int64_t *batches, size_t n,
                       mb_replay *out, mb_diag *d) {
  if (!m || m->status != MB_OK) return not_open(m, d);
  mb_setup eff;
  mb_plan *p = NULL;
  effective(m, s, &eff);
  if (mb_setup_plan_build(model, &eff, &p, d) == MB_OK)
    for (size_t i = 0; i < n && d->status == MB_OK; i++) {
      if (batches[i] < 1) mb_fail(d, MB_E_INVALID_ARG, "batch sizes must be at least 1, not %lld", (long long)batches[i]);
      else replay_at(m, p, &eff, batches[i], &out[i], d);
    }
  mb_plan_free(p);
  return d->status;
}

static int check_call(const mb_model *model, mb_setup *s, const void *out, const char *fn) {
  if (!s) return MB_E_INVALID_ARG;
  s->errmsg[0] = '\0';
  if (!model || !model->graph || !out) {
    snprintf(s->errmsg, sizeof s->errmsg, "%s: model and result are required", fn);
    return MB_E_INVALID_ARG;
  }
  return MB_OK;
}

MB_API int mb_measure_run(mb_measure *m, const mb_model *model, mb_setup *s, int64_t batch, mb_replay *out) {
  int rc = check_call(model, s, out, "mb_measure_run");
  if (rc != MB_OK) return rc;
  uint32_t caller;
  memcpy(&caller, out, sizeof caller);
  if (caller < sizeof(mb_replay)) {
    snprintf(s->errmsg, sizeof s->errmsg, "mb_measure_run: replay.struct_size is not set");
    return MB_E_INVALID_ARG;
  }
  mb_diag d;
  mb_diag_init(&d);
  mb_replay rp;
  if (mb_measure_replays(m, model, s, &batch, 1, &rp, &d) == MB_OK) mb_fill_versioned(out, &rp, sizeof rp, sizeof rp);
  if (d.status != MB_OK) snprintf(s->errmsg, sizeof s->errmsg, "%s", d.msg);
  return d.status;
}

MB_API int mb_measure_estimate(mb_measure *m, const mb_model *model, mb_setup *s, mb_budget *out) {
  int rc = check_call(model, s, out, "mb_measure_estimate");
  if (rc != MB_OK) return rc;
  uint32_t caller;
  memcpy(&caller, out, sizeof caller);
  if (caller < offsetof(mb_budget, at_peak)) {
    snprintf(s->errmsg, sizeof s->errmsg, "mb_measure_estimate: budget.struct_size is not set");
    return MB_E_INVALID_ARG;
  }
  mb_diag d;
  mb_diag_init(&d);
  mb_setup eff;
  mb_plan *p = NULL;
  mb_budget bu;
  if (mb_measure_budget(m, model, s, &eff, &p, &bu, &d) == MB_OK)
    mb_fill_versioned(out, &bu, sizeof bu, offsetof(mb_budget, at_peak));
  mb_plan_free(p);
  if (d.status != MB_OK) snprintf(s->errmsg, sizeof s->errmsg, "%s", d.msg);
  return d.status;
}
