/* Weaving events into an emitted step (weave.h). */
#include "sim/weave.h"

#include <stdlib.h>

static int nomem(mb_builder *b) { return b->d->status ? b->d->status : mb_fail(b->d, MB_E_NOMEM, "out of memory"); }

int mb_weave_add(mb_builder *b, mb_weave *w, int64_t pos, int alloc, int phase, int32_t slot) {
  if (w->n == w->cap) {
    int32_t cap = w->cap ? w->cap * 2 : 256;
    mb_weave_at *grown = realloc(w->at, (size_t)cap * sizeof *grown);
    if (!grown) return nomem(b);
    w->at = grown;
    w->cap = cap;
  }
  w->at[w->n] = (mb_weave_at){pos, w->n, {(uint8_t)alloc, (uint8_t)phase, 0, slot, -1}};
  w->n++;
  return MB_OK;
}

static int by_pos(const void *x, const void *y) {
  const mb_weave_at *a = x, *b = y;
  if (a->pos != b->pos) return a->pos < b->pos ? -1 : 1;
  return (a->seq > b->seq) - (a->seq < b->seq);
}

int mb_weave_in(mb_builder *b, mb_weave *w) {
  mb_plan *p = b->p;
  if (!w->n) return MB_OK;
  qsort(w->at, (size_t)w->n, sizeof *w->at, by_pos);
  int32_t n = p->n_ev + w->n, k = 0, j = 0;
  mb_event_rec *ev = malloc((size_t)n * sizeof *ev);
  if (!ev) return nomem(b);
  int32_t *marks[4] = {&p->step_end, &p->eval_fwd_first, &p->eval_fwd_end, &p->step_first}, moved[4];
  for (int m = 0; m < 4; m++) moved[m] = *marks[m] >= p->n_ev ? n : *marks[m];
  for (int32_t i = 0; i < p->n_ev; i++) {
    for (int m = 0; m < 4; m++) /* the marked event indices follow their events */
      if (*marks[m] == i) moved[m] = k;
    while (j < w->n && w->at[j].pos == 2 * (int64_t)i) ev[k++] = w->at[j++].ev;
    ev[k++] = p->ev[i];
    while (j < w->n && w->at[j].pos == 2 * (int64_t)i + 1) ev[k++] = w->at[j++].ev;
  }
  while (j < w->n) ev[k++] = w->at[j++].ev;
  free(p->ev);
  p->ev = ev;
  p->n_ev = p->cap_ev = n;
  for (int m = 0; m < 4; m++) *marks[m] = moved[m];
  return MB_OK;
}
