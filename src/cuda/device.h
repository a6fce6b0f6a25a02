/* The device of a measuring session: what it is, and what its context and the libraries cost. */
#ifndef MB_CUDA_DEVICE_H
#define MB_CUDA_DEVICE_H
#include <stdbool.h>
#include <stdint.h>

#include "cuda/libs.h"

typedef struct mb_device_state {
  int ordinal;
  char name[256];
  const char *gpu;              /* GPU-table entry, or NULL */
  int cc_major, cc_minor, runtime_version, driver_version;
  uint64_t total;
  uint64_t free_before;         /* NVML, before the context; 0 if unknown */
  uint64_t free_after_context, free_now;
  uint64_t context;             /* base - free_after_context, base = free_before or total */
  uint64_t cublas, cudnn;
  uint64_t others;              /* total - base */
  bool context_measured;
} mb_device_state;

/* Open device `ordinal` of the loaded runtime: MB_E_NO_CUDA (with the runtime's own words) when
 * there is no driver or device, MB_E_INVALID_ARG for an ordinal the runtime does not have. */
int mb_cuda_open_device(mb_cuda *c, int ordinal, mb_device_state *st, mb_diag *d);
/* The session's memory outside the allocator: context and library handles. */
static inline uint64_t mb_device_own(const mb_device_state *st) {
  return st->context + st->cublas + st->cudnn;
}
/* The GPU-table entry for a device name and total memory (largest name match within 10% of
 * the memory), or NULL. */
const char *mb_gpu_match(const char *device_name, uint64_t total);
#endif
