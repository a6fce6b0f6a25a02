/* Reserved memory of a simulated step: its allocation events, as requests to the caching
 * allocator model (alloc/caching.h). */
#ifndef MB_BUDGET_RESERVED_H
#define MB_BUDGET_RESERVED_H
#include <stdbool.h>
#include <stdint.h>

#include "alloc/caching.h"
#include "budget/setup.h"
#include "sim/plan.h"
#include "util/diag.h"

typedef struct mb_reserve mb_reserve;

typedef struct mb_reserved {
  uint64_t reserved_peak;
  uint64_t segments, cached_free, largest_free; /* when reserved peaked */
  uint64_t cudnn_max;      /* the largest cuDNN workspace request */
  uint64_t ooms;           /* requests that did not fit the device */
  int32_t iterations;      /* steps replayed until one made no new segment */
} mb_reserved;

/* An allocator event of the replayed step (for the JSON trace). */
typedef struct mb_reserve_event {
  int32_t iteration;       /* 1: the first step replayed, 2: the next, ... */
  int32_t after;           /* the plan event it served (index into p->ev) */
  mb_alloc_event e;
} mb_reserve_event;

/* The allocator settings of the setup (alloc_conf) on the setup's device. */
int mb_reserve_create(const mb_plan *p, const mb_setup *s, mb_reserve **out, mb_diag *d);
void mb_reserve_free(mb_reserve *r);
/* Replay the step whose per-event bytes a plan run gave (mb_plan_run's bytes). With record,
 * the allocator events are kept: mb_reserve_events. With give_up_above > 0 the replay stops as
 * soon as reserved passes it or a request does not fit the device (the figures are then a
 * lower bound: enough to tell that a batch does not fit). */
int mb_reserve_run(mb_reserve *r, const uint64_t *bytes, bool record, uint64_t give_up_above, mb_reserved *out,
                   mb_diag *d);
const mb_reserve_event *mb_reserve_events(const mb_reserve *r, size_t *n);
#endif
