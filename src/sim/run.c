/* Running a plan at one batch size: infer shapes, size every slot (rounded up to the
 * allocator's block), scan the events for the live-byte peaks. */
#include <stdlib.h>
#include <string.h>

#include "shape/infer.h"
#include "sim/plan.h"

static uint64_t elems(const mb_slot *s, const mb_tinfo *t) {
  if (s->ref < 0 || t[s->ref].rank < 0) return 0;
  const mb_tinfo *x = &t[s->ref];
  uint64_t numel = mb_tinfo_numel(x);
  int32_t r = x->rank;
  switch (s->rule) {
    case MB_SZ_VALUE: return numel;
    case MB_SZ_ROWS: {
      uint64_t row = 1;
      for (int32_t i = s->axis; i < r; i++) row *= (uint64_t)x->dims[i];
      return row ? numel / row : 0;
    }
    case MB_SZ_CHANNELS: return r >= 2 ? (uint64_t)x->dims[1] : 1;
    case MB_SZ_NC: return r >= 2 ? (uint64_t)x->dims[0] * (uint64_t)x->dims[1] : numel;
    case MB_SZ_LSE: {
      if (r < 2 || !x->dims[r - 1] || !x->dims[r - 2]) return numel;
      uint64_t rows = (uint64_t)x->dims[r - 2], lead = numel / (uint64_t)x->dims[r - 1] / rows;
      if (s->axis > 0) rows = (rows + (uint64_t)s->axis - 1) / (uint64_t)s->axis * (uint64_t)s->axis;
      return lead * rows;
    }
    case MB_SZ_TARGET:
      return s->axis < r && x->dims[s->axis] ? numel / (uint64_t)x->dims[s->axis] : numel;
    default: return 0;
  }
}

static uint64_t slot_bytes(const mb_slot *s, const mb_tinfo *t, uint64_t rounding) {
  uint64_t bytes = 0;
  if (s->rule == MB_SZ_ZERO) return 0;
  if (s->rule == MB_SZ_FIXED) bytes = s->fixed;
  else if (mb_dtype_bytes(s->dtype, elems(s, t) * (uint64_t)s->factor, &bytes) != MB_OK) bytes = 0;
  return mb_round_block(bytes, rounding);
}

/* The size of slot sl: one tensor's rounded bytes times the copies it stands for; false when
 * that overflows (a batch absurdly large: the solve counts it as not fitting). */
static bool sized(const mb_slot *sl, const mb_tinfo *t, uint64_t rounding, uint64_t *one, uint64_t *all) {
  *one = slot_bytes(sl, t, rounding);
  if (sl->copies > 1 && *one > (UINT64_C(1) << 62) / sl->copies) return false;
  *all = *one * sl->copies;
  return true;
}

int mb_plan_run(const mb_plan *p, const mb_step *step, int64_t batch, mb_run *r, uint64_t *bytes_out,
                uint64_t *live_out, mb_diag *d) {
  memset(r, 0, sizeof *r);
  /* the model and the teacher at the training batch; the evaluation's forward at its own batch
   * (shapes inferred again, not scaled: sizes need not be linear in the batch) */
  int64_t eval_batch = p->eval_batch < 0 ? batch : p->eval_batch;
  const mb_model *models[3] = {p->model, p->teacher, p->eval_batch && eval_batch != batch ? p->model : NULL};
  const int64_t batches[3] = {batch, batch, eval_batch};
  static const char *const who[3] = {"", "teacher ", "evaluation "};
  mb_shapes *sh[3] = {NULL, NULL, NULL};
  const mb_tinfo *t[3] = {NULL, NULL, NULL};
  for (int k = 0; k < 3 && d->status == MB_OK; k++) {
    if (!models[k]) continue;
    if (mb_shapes_run(models[k], &step->shapes, batches[k], &sh[k]) != MB_OK) {
      mb_fail(d, mb_shapes_status(sh[k]), "%sat batch %lld: %s", who[k], (long long)batches[k],
              mb_shapes_errmsg(sh[k]));
      break;
    }
    t[k] = mb_shapes_tinfo(sh[k]);
    if (k < 2) r->assumed += mb_shapes_assumed(sh[k])->n;
  }
  const mb_tinfo *t_eval = t[2] ? t[2] : t[0];
  r->eval_batch = p->eval_batch ? eval_batch : 0;
  uint64_t *size = d->status == MB_OK ? malloc(((size_t)p->n_slots + 1) * sizeof *size) : NULL;
  if (!size && d->status == MB_OK) mb_fail(d, MB_E_NOMEM, "out of memory");
  for (int32_t i = 0; i < p->n_slots && d->status == MB_OK; i++) {
    const mb_slot *sl = &p->slots[i];
    uint64_t one = 0;
    if (!sized(sl, sl->eval ? t_eval : t[sl->model], step->rounding, &one, &size[i]))
      mb_fail(d, MB_E_LIMIT, "at batch %lld: %u copies of '%s' overflow", (long long)batch, (unsigned)sl->copies,
              sl->name ? sl->name : "a tensor");
    r->tagged[sl->tag] += one;
    if (sl->tag == MB_TAG_TEACHER_CACHE) r->teacher_cache_resident += size[i];
  }
  if (d->status != MB_OK) {
    free(size);
    for (int k = 0; k < 3; k++) mb_shapes_free(sh[k]);
    return d->status;
  }

  uint64_t live = 0, cat[MB_CAT_COUNT] = {0}, teacher_base = 0, eval_base = 0, step_end = 0;
  int prev = MB_PHASE_SETUP;
  bool snap_setup = false, snap_fwd = false;
  for (int32_t i = 0; i < p->n_ev; i++) {
    const mb_event_rec *e = &p->ev[i];
    if (e->phase != prev) {
      if (!snap_setup) {
        memcpy(r->persistent, cat, sizeof cat);
        snap_setup = true;
      }
      if (e->phase == MB_PHASE_TEACHER) teacher_base = live;
      for (int ph = prev + 1; ph <= e->phase; ph++) /* a phase holds at least what it starts with */
        if (live > r->phase_peak[ph]) r->phase_peak[ph] = live;
      for (int ph = prev; ph < e->phase; ph++) r->phase_end[ph] = live;
      if (e->phase == MB_PHASE_EVAL && live > r->eval_peak) {
        r->eval_peak = live;
        memcpy(r->eval_at_peak, cat, sizeof cat);
      }
      if (!snap_fwd && e->phase > MB_PHASE_FORWARD) {
        r->activations = cat[MB_CAT_ACTIVATION];
        snap_fwd = true;
      }
      prev = e->phase;
    }
    if (p->eval_batch && i == p->eval_fwd_first) eval_base = live;
    if (p->eval_batch && i == p->step_end) step_end = live;
    const mb_slot *sl = &p->slots[e->slot];
    uint64_t b = size[e->slot];
    if (e->alloc) {
      live += b;
      cat[sl->category] += b;
    } else {
      live -= b;
      cat[sl->category] -= b;
    }
    if (bytes_out) bytes_out[i] = b;
    if (live_out) live_out[i] = live;
    if (live > r->phase_peak[e->phase]) r->phase_peak[e->phase] = live;
    if (e->phase == MB_PHASE_EVAL) { /* reported beside the step's peaks, not in them */
      if (live > r->eval_peak) {
        r->eval_peak = live;
        memcpy(r->eval_at_peak, cat, sizeof cat);
      }
      if (i >= p->eval_fwd_first && i < p->eval_fwd_end && live - eval_base > r->eval_forward)
        r->eval_forward = live - eval_base;
      continue;
    }
    if (live > r->peak) {
      r->peak = live;
      r->peak_phase = e->phase;
      memcpy(r->at_peak, cat, sizeof cat);
    }
    if (e->phase == MB_PHASE_TEACHER && live - teacher_base > r->teacher_transient)
      r->teacher_transient = live - teacher_base;
    uint64_t first = e->phase < MB_PHASE_OPTIMIZER && !p->states_at_init ? live - cat[MB_CAT_OPTIMIZER] : live;
    if (first > r->first_step_peak) r->first_step_peak = first;
  }
  for (int ph = prev + 1; ph < MB_PHASE_EVAL; ph++) /* phases without events (SGD's step) */
    if (live > r->phase_peak[ph]) r->phase_peak[ph] = live;
  for (int ph = prev; ph < MB_PHASE_COUNT; ph++) r->phase_end[ph] = live;
  /* people log after optimizer.step(), before the evaluation's zero_grad ends the phase */
  if (p->eval_batch) r->phase_end[MB_PHASE_OPTIMIZER] = p->step_end < p->n_ev ? step_end : live;
  if (!snap_setup) memcpy(r->persistent, cat, sizeof cat);
  if (!snap_fwd) r->activations = cat[MB_CAT_ACTIVATION];
  r->inputs = r->persistent[MB_CAT_INPUT] - r->teacher_cache_resident;
  free(size);
  for (int k = 0; k < 3; k++) mb_shapes_free(sh[k]);
  return MB_OK;
}
