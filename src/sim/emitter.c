#include "sim/emitter.h"

#include <stdlib.h>

int mb_emit_ev(emitter *e, int alloc, int model, int32_t s, int32_t node) {
  mb_plan *p = e->b->p;
  if (s < 0 || p->slots[s].rule == MB_SZ_ZERO) return MB_OK;
  if (p->n_ev == p->cap_ev) {
    int32_t cap = p->cap_ev ? p->cap_ev * 2 : 4096;
    mb_event_rec *grown = realloc(p->ev, (size_t)cap * sizeof *grown);
    if (!grown) return mb_fail(e->b->d, MB_E_NOMEM, "out of memory");
    p->ev = grown;
    p->cap_ev = cap;
  }
  p->ev[p->n_ev++] = (mb_event_rec){(uint8_t)alloc, (uint8_t)e->phase, (uint8_t)model, s, node};
  return MB_OK;
}
