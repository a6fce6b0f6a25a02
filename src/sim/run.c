/* Running a plan at one batch size: infer shapes, size every slot (rounded up to the
 * allocator's block), scan the events for the live-byte peaks. */
#include <stdlib.h>
#include <string.h>

#include "shape/infer.h"
#include "sim/lines.h"
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
    case MB_SZ_CONV_WS: {
      uint64_t other = s->ref2 >= 0 && t[s->ref2].rank >= 0 ? mb_tinfo_numel(&t[s->ref2]) : 0;
      return numel + other; /* two tensor sizes: no overflow below 2^62 each */
    }
    default: return 0;
  }
}

static uint64_t slot_bytes(const mb_step *step, const mb_slot *s, const mb_tinfo *t, uint64_t rounding) {
  uint64_t bytes = 0;
  if (s->rule == MB_SZ_ZERO) return 0;
  if (s->rule == MB_SZ_FIXED) bytes = s->fixed;
  else if (mb_dtype_bytes(s->dtype, elems(s, t) * (uint64_t)s->factor, &bytes) != MB_OK) bytes = 0;
  if (s->rule == MB_SZ_CONV_WS) { /* plus the weight's bytes, at most the cap */
    uint64_t sum = bytes > UINT64_MAX - s->fixed ? UINT64_MAX : bytes + s->fixed;
    bytes = sum < step->cudnn_workspace ? sum : step->cudnn_workspace;
  }
  return mb_round_block(bytes, rounding);
}

/* The size of slot sl: one tensor's rounded bytes times the copies it stands for; false when
 * that overflows (a batch absurdly large: the solve counts it as not fitting). */
static bool sized(const mb_step *step, const mb_slot *sl, const mb_tinfo *t, uint64_t *one, uint64_t *all) {
  *one = slot_bytes(step, sl, t, step->rounding);
  if (sl->copies > 1 && *one > (UINT64_C(1) << 62) / sl->copies) return false;
  *all = *one * sl->copies;
  return true;
}

#define UNSIZED UINT64_MAX /* a slot not sized yet (sizes never pass 2^62) */

/* Size slot i into size[i] and add it to the run's tagged sums; false (d says why) when its
 * copies overflow: a batch absurdly large, which the solve counts as not fitting. */
static bool size_slot(const mb_plan *p, int32_t i, const mb_tinfo *const t[3], const mb_tinfo *t_eval,
                      const mb_step *step, int64_t batch, mb_run *r, uint64_t *size, mb_diag *d) {
  const mb_slot *sl = &p->slots[i];
  uint64_t one = 0;
  if (!sized(step, sl, sl->eval ? t_eval : t[sl->model], &one, &size[i])) {
    mb_fail(d, MB_E_LIMIT, "at batch %lld: %u copies of '%s' overflow", (long long)batch, (unsigned)sl->copies,
            sl->name ? sl->name : "a tensor");
    return false;
  }
  r->tagged[sl->tag] += one;
  if (sl->tag == MB_TAG_TEACHER_CACHE) r->teacher_cache_resident += size[i];
  return true;
}

/* The shapes of each graph the run sizes: from lines where they hold them (use_lines), else
 * inferred (and fed to the lines). sh[k] owns inferred shapes. */
static int run_shapes(const mb_plan *p, const mb_step *step, int64_t batch, mb_lines *lines, bool use_lines,
                      mb_shapes *sh[3], const mb_tinfo *t[3], mb_run *r, mb_diag *d) {
  /* the model and the teacher at the training batch; the evaluation's forward at its own batch
   * (shapes inferred again, not scaled: sizes need not be linear in the batch) */
  int64_t eval_batch = p->eval_batch < 0 ? batch : p->eval_batch;
  const mb_model *models[3] = {p->model, p->teacher, p->eval_batch && eval_batch != batch ? p->model : NULL};
  const int64_t batches[3] = {batch, batch, eval_batch};
  static const char *const who[3] = {"", "teacher ", "evaluation "};
  r->eval_batch = p->eval_batch ? eval_batch : 0;
  if (lines && use_lines) {
    char msg[160];
    int rc = MB_OK;
    for (int k = 0; k < 3 && rc == MB_OK; k++)
      if (models[k]) rc = mb_lines_at(lines, k, batches[k], &t[k], msg, sizeof msg);
    if (rc == MB_E_LIMIT) return mb_fail(d, MB_E_LIMIT, "%s", msg);
    if (rc == MB_OK) {
      r->assumed = mb_lines_assumed(lines);
      r->shapes_from_lines = true;
      return MB_OK;
    }
  }
  for (int k = 0; k < 3; k++) {
    t[k] = NULL;
    if (!models[k]) continue;
    if (mb_shapes_run(models[k], &step->shapes, batches[k], &sh[k]) != MB_OK)
      return mb_fail(d, mb_shapes_status(sh[k]), "%sat batch %lld: %s", who[k], (long long)batches[k],
                     mb_shapes_errmsg(sh[k]));
    t[k] = mb_shapes_tinfo(sh[k]);
    if (k < 2) r->assumed += mb_shapes_assumed(sh[k])->n;
  }
  if (lines) mb_lines_feed(lines, t, batches, r->assumed);
  return MB_OK;
}

void mb_plan_seed_lines(const mb_plan *p, mb_lines *lines) {
  if (!p->shapes[0]) return;
  const mb_tinfo *t[3] = {mb_shapes_tinfo(p->shapes[0]), p->shapes[1] ? mb_shapes_tinfo(p->shapes[1]) : NULL, NULL};
  const int64_t batches[3] = {p->shapes_batch, p->shapes_batch, 0};
  int32_t assumed = 0;
  for (int k = 0; k < 2; k++)
    if (p->shapes[k]) assumed += mb_shapes_assumed(p->shapes[k])->n;
  mb_lines_feed(lines, t, batches, assumed);
}

int mb_plan_check_lines(const mb_plan *p, const mb_step *step, int64_t batch, mb_lines *lines, mb_diag *d) {
  mb_shapes *sh[3] = {NULL, NULL, NULL};
  const mb_tinfo *t[3] = {NULL, NULL, NULL};
  mb_run r;
  memset(&r, 0, sizeof r);
  run_shapes(p, step, batch, lines, false, sh, t, &r, d);
  for (int k = 0; k < 3; k++) mb_shapes_free(sh[k]);
  return d->status;
}

int mb_plan_run(const mb_plan *p, const mb_step *step, int64_t batch, mb_run *r, uint64_t *bytes_out,
                uint64_t *live_out, mb_diag *d) {
  return mb_plan_run_lines(p, step, batch, NULL, false, 0, r, bytes_out, live_out, d);
}

int mb_plan_run_lines(const mb_plan *p, const mb_step *step, int64_t batch, mb_lines *lines, bool use_lines,
                      uint64_t stop_above, mb_run *r, uint64_t *bytes_out, uint64_t *live_out, mb_diag *d) {
  memset(r, 0, sizeof *r);
  mb_shapes *sh[3] = {NULL, NULL, NULL};
  const mb_tinfo *t[3] = {NULL, NULL, NULL};
  run_shapes(p, step, batch, lines, use_lines, sh, t, r, d);
  if (!r->shapes_from_lines) stop_above = 0; /* shapes worth inferring are worth a whole run */
  const mb_tinfo *t_eval = t[2] ? t[2] : t[0];
  uint64_t *size = d->status == MB_OK ? malloc(((size_t)p->n_slots + 1) * sizeof *size) : NULL;
  if (!size && d->status == MB_OK) mb_fail(d, MB_E_NOMEM, "out of memory");
  /* a run that may stop sizes each slot when the scan first meets it (a probe far past the
   * device stops within its first layers), and the rest only if it gets to the end */
  for (int32_t i = 0; i < p->n_slots && d->status == MB_OK; i++)
    if (stop_above) size[i] = UNSIZED;
    else size_slot(p, i, t, t_eval, step, batch, r, size, d);
  if (d->status != MB_OK) {
    free(size);
    for (int k = 0; k < 3; k++) mb_shapes_free(sh[k]);
    return d->status;
  }

  uint64_t live = 0, cat[MB_CAT_COUNT] = {0}, teacher_base = 0, eval_base = 0, step_end = 0;
  uint64_t held = 0; /* live bytes of the previous iteration's outputs: activations of no forward */
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
        r->activations = cat[MB_CAT_ACTIVATION] - held;
        snap_fwd = true;
      }
      prev = e->phase;
    }
    if (p->eval_batch && i == p->eval_fwd_first) eval_base = live;
    if (p->eval_batch && i == p->step_end) step_end = live;
    const mb_slot *sl = &p->slots[e->slot];
    if (size[e->slot] == UNSIZED && !size_slot(p, e->slot, t, t_eval, step, batch, r, size, d)) break;
    uint64_t b = size[e->slot];
    if (sl->tag == MB_TAG_LOOP_HELD) held = e->alloc ? held + b : held - b;
    if (e->alloc) {
      live += b;
      cat[sl->category] += b;
      if (stop_above && live > stop_above) { /* a probe that cannot fit: the rest is moot */
        r->stopped = true;
        r->peak = live;
        break;
      }
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
  for (int32_t i = 0; i < p->n_slots && stop_above && !r->stopped && d->status == MB_OK; i++)
    if (size[i] == UNSIZED) size_slot(p, i, t, t_eval, step, batch, r, size, d);
  if (d->status != MB_OK) {
    free(size);
    for (int k = 0; k < 3; k++) mb_shapes_free(sh[k]);
    return d->status;
  }
  for (int ph = prev + 1; ph < MB_PHASE_EVAL; ph++) /* phases without events (SGD's step) */
    if (live > r->phase_peak[ph]) r->phase_peak[ph] = live;
  for (int ph = prev; ph < MB_PHASE_COUNT; ph++) r->phase_end[ph] = live;
  /* people log after optimizer.step(), before the evaluation's zero_grad ends the phase */
  if (p->eval_batch) r->phase_end[MB_PHASE_OPTIMIZER] = p->step_end < p->n_ev ? step_end : live;
  if (!snap_setup) memcpy(r->persistent, cat, sizeof cat);
  if (!snap_fwd) r->activations = cat[MB_CAT_ACTIVATION] - held;
  r->inputs = r->persistent[MB_CAT_INPUT] - r->teacher_cache_resident;
  free(size);
  for (int k = 0; k < 3; k++) mb_shapes_free(sh[k]);
  return MB_OK;
}
