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

int mb_plan_run(const mb_plan *p, const mb_setup *s, int64_t batch, mb_run *r, uint64_t *bytes_out,
                uint64_t *live_out, mb_diag *d) {
  memset(r, 0, sizeof *r);
  mb_shapes *sh[2] = {NULL, NULL};
  const mb_model *models[2] = {p->model, p->teacher};
  const mb_tinfo *t[2] = {NULL, NULL};
  for (int k = 0; k < 2 && models[k]; k++) {
    if (mb_shapes_run(models[k], s, batch, &sh[k]) != MB_OK) {
      mb_fail(d, mb_shapes_status(sh[k]), "%sat batch %lld: %s", k ? "teacher " : "", (long long)batch,
              mb_shapes_errmsg(sh[k]));
      mb_shapes_free(sh[0]);
      mb_shapes_free(sh[1]);
      return d->status;
    }
    t[k] = mb_shapes_tinfo(sh[k]);
    r->assumed += mb_shapes_assumed(sh[k])->n;
  }
  uint64_t *size = malloc(((size_t)p->n_slots + 1) * sizeof *size);
  if (!size) {
    mb_shapes_free(sh[0]);
    mb_shapes_free(sh[1]);
    return mb_fail(d, MB_E_NOMEM, "out of memory");
  }
  for (int32_t i = 0; i < p->n_slots; i++) size[i] = slot_bytes(&p->slots[i], t[p->slots[i].model], s->train.rounding);

  uint64_t live = 0, cat[MB_CAT_COUNT] = {0}, teacher_base = 0;
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
      if (!snap_fwd && e->phase > MB_PHASE_FORWARD) {
        r->activations = cat[MB_CAT_ACTIVATION];
        snap_fwd = true;
      }
      prev = e->phase;
    }
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
  for (int ph = prev + 1; ph < MB_PHASE_COUNT; ph++) /* phases without events (SGD's step) */
    if (live > r->phase_peak[ph]) r->phase_peak[ph] = live;
  for (int ph = prev; ph < MB_PHASE_COUNT; ph++) r->phase_end[ph] = live;
  if (!snap_setup) memcpy(r->persistent, cat, sizeof cat);
  if (!snap_fwd) r->activations = cat[MB_CAT_ACTIVATION];
  r->inputs = r->persistent[MB_CAT_INPUT];
  free(size);
  mb_shapes_free(sh[0]);
  mb_shapes_free(sh[1]);
  return MB_OK;
}
