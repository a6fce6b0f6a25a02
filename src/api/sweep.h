/* A sweep's points (sweep.c), drawn by sweep_svg.c and written as JSON by sweep_json.c. */
#ifndef MB_API_SWEEP_H
#define MB_API_SWEEP_H
#include <stddef.h>
#include <stdint.h>

#include "membudget/membudget.h"

struct mb_sweep {
  char *dim;              /* the swept dim, or NULL: the batch size */
  size_t n;               /* points, by value ascending */
  int64_t *values;
  mb_budget *budgets;     /* budgets[i]: the estimate at values[i] */
  int64_t solved;         /* batch sweep: the solved batch (also a point); -1: a dim sweep whose
                           * points each solved their batch; 0: none */
  uint64_t device_memory, usable_memory;
  char unit[16];          /* what the batch counts ("samples", "graphs") */
};
#endif
