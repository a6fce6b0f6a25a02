/* Events woven into a plan's step after it was emitted: each goes before (pos 2i) or after
 * (pos 2i + 1) event i of the step, in the order added among those at one position. The
 * distributed passes (dist.c, dist_zero3.c) place their collectives' buffers so. */
#ifndef MB_SIM_WEAVE_H
#define MB_SIM_WEAVE_H

#include <stdint.h>

#include "sim/build.h"

typedef struct mb_weave_at {
  int64_t pos;
  int32_t seq;
  mb_event_rec ev;
} mb_weave_at;

typedef struct mb_weave {
  mb_weave_at *at;
  int32_t n, cap;
} mb_weave;

int mb_weave_add(mb_builder *b, mb_weave *w, int64_t pos, int alloc, int phase, int32_t slot);
/* Merges w's events into b's plan; the evaluation's marks (step_end, eval_fwd_first,
 * eval_fwd_end) follow the events they name. w keeps its buffer (free(w->at)). */
int mb_weave_in(mb_builder *b, mb_weave *w);

#endif
