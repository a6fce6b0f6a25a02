/* The emitter: the state sim/emit.c builds a step's event program with, and the slot helpers
 * the passes that emit part of a step share (sim/loop.c). Storages are reference counted
 * (slot.refs): hold adds a reader, release drops one and frees the storage at zero. */
#ifndef MB_SIM_EMITTER_H
#define MB_SIM_EMITTER_H
#include <stdbool.h>
#include <stdint.h>

#include "graph/dtype.h"
#include "sim/build.h"

typedef struct emitter {
  mb_builder *b;
  int phase;
  int32_t *owned_first, *owned_n; /* per trainable weight: its state/master/grad slots in setup */
  int32_t *gslot;     /* student: per value, its gradient's storage (-1 none) */
  int32_t *pgrad;     /* student: per value, the .grad of a trainable initializer */
  int32_t *dup;       /* recompute: original slot -> recomputed slot (-1 none) */
  bool *reached_any;  /* per value: a gradient was delivered to this trainable weight */
  bool *gview;        /* per value: the gradient held for it is a view (a linear weight's),
                       * which the engine cannot add the next one into in place */
  bool *gexp;         /* per value: the gradient held for it is sum's expanded view of a
                       * smaller grad (stride 0: not dense), held in that grad's storage */
  const bool *reached;
  int32_t dup_n;
  /* a .grad kept from earlier micro-steps (persistent_grads) of a weight several nodes read: the
   * incoming gradients meet in its AccumulateGrad's input buffer first (summed as gslot's are),
   * and the sum is added into .grad when the last arrives (held: that buffer, -1 none; due:
   * gradients still to come) */
  int32_t *held, *due;
  bool *held_view;
  struct mb_loop_state *loop; /* what the training loop around the step holds (sim/loop.h) */
} emitter;

static inline mb_slot *slot(emitter *e, int32_t s) { return &e->b->p->slots[s]; }

/* Appends an event: alloc (1) or free (0) of slot s, by node (-1: none); an empty slot makes none. */
int mb_emit_ev(emitter *e, int alloc, int model, int32_t s, int32_t node);
static inline int ev(emitter *e, int alloc, int model, int32_t s, int32_t node) { return mb_emit_ev(e, alloc, model, s, node); }

static inline void hold(emitter *e, int32_t s) {
  if (s >= 0 && slot(e, s)->refs != MB_PERSISTENT) slot(e, s)->refs++;
}

static inline void release(emitter *e, int model, int32_t s, int32_t node) {
  if (s < 0) return;
  mb_slot *sl = slot(e, s);
  if (sl->refs == MB_PERSISTENT || sl->refs <= 0) return;
  if (--sl->refs == 0) ev(e, 0, model, s, node);
}

static inline int32_t map(const emitter *e, int32_t s) {
  return e->dup && s >= 0 && s < e->dup_n && e->dup[s] >= 0 ? e->dup[s] : s;
}

static inline int32_t fresh(emitter *e, int model, int rule, int cat, int32_t ref, int32_t dtype, const char *name) {
  int32_t s = mb_slot_new(e->b, model, rule, cat, ref, dtype, name);
  if (s >= 0) slot(e, s)->refs = 1;
  return s;
}

static inline int32_t fixed(emitter *e, int model, int cat, uint64_t bytes, const char *name, int persistent) {
  int32_t s = mb_slot_new(e->b, model, MB_SZ_FIXED, cat, -1, 0, name);
  if (s < 0) return -1;
  slot(e, s)->fixed = bytes;
  slot(e, s)->refs = persistent ? MB_PERSISTENT : 1;
  ev(e, 1, model, s, -1);
  return s;
}

static inline uint64_t dtype_bytes(int32_t dtype, uint64_t numel) {
  uint64_t bytes = 0;
  mb_dtype_bytes(dtype, numel, &bytes);
  return bytes;
}
#endif
