/* The built-in GPU table. */
#ifndef MB_BUDGET_GPUS_H
#define MB_BUDGET_GPUS_H
#include <stdint.h>

#include "membudget/membudget.h"

typedef struct mb_gpu {
  const char *name;
  const char *description;
  uint64_t memory;           /* bytes */
  uint64_t cublas_workspace; /* bytes per (handle, stream) */
  int cc;                    /* compute capability, major x 10 + minor (90: Hopper) */
} mb_gpu;

const mb_gpu *mb_gpu_find(const char *name);
/* When the GPU is not known: Hopper's, the larger one, so a solved batch size stays safe. */
uint64_t mb_gpu_default_workspace(void);
#endif
