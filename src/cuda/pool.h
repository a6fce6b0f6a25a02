/* Device memory for a replay, handed out as PyTorch's CUDA caching allocator hands it out
 * (c10/cuda/CUDACachingAllocator.cpp; ../shared/docs/training-memory-model.md section 3):
 * requests rounded up to 512 bytes; up to 1 MiB from 2 MiB segments (the small pool), up to
 * 10 MiB from 20 MiB segments, larger ones from a segment of their size rounded up to 2 MiB;
 * the smallest cached free block that fits is reused, split when the rest is worth keeping
 * (>= 512 B small, > 1 MiB large), merged with free neighbours on free; segments are only
 * returned when the device is full (then cached whole segments are released and the request
 * retried) and at the end. One stream, default settings (no max_split_size, no expandable
 * segments). Each new segment is a real cudaMalloc, touched with cudaMemset, after which the
 * device's free memory is read: its lowest value is the measured peak. */
#ifndef MB_CUDA_POOL_H
#define MB_CUDA_POOL_H
#include <stdbool.h>
#include <stdint.h>

#include "cuda/libs.h"

typedef struct mb_pool_block {
  uint64_t offset, size;
  int32_t seg, prev, next;  /* neighbours in the segment, -1 at its ends */
  bool in_use;              /* this array entry is a block (not a recycled one) */
  bool free;
} mb_pool_block;

typedef struct mb_pool_segment {
  void *ptr;                /* NULL once returned to the device */
  uint64_t size;
  bool small;
} mb_pool_segment;

typedef struct mb_pool {
  mb_cuda *cu;
  mb_pool_block *blocks;
  int32_t n_blocks, cap_blocks;
  int32_t *spare;           /* recycled block entries */
  int32_t n_spare;
  mb_pool_segment *segs;
  int32_t n_segs, cap_segs;
  uint64_t allocated, reserved, peak_allocated, peak_reserved;
  uint64_t min_free;        /* the device's lowest free memory seen */
  int64_t mallocs;
} mb_pool;

void mb_pool_init(mb_pool *p, mb_cuda *cu, uint64_t free_now);
/* A block of at least `bytes`; *oom when the device cannot hold it even after releasing the
 * cached segments (then *out is -1 and MB_OK is returned). Other CUDA failures: MB_E_NO_CUDA. */
int mb_pool_alloc(mb_pool *p, uint64_t bytes, int32_t *out, bool *oom, mb_diag *d);
void mb_pool_free(mb_pool *p, int32_t block);
/* cudaFree every segment and forget every block; the pool can be used again. */
void mb_pool_release(mb_pool *p);
void mb_pool_destroy(mb_pool *p);
/* PyTorch's request rounding (round_size). */
uint64_t mb_pool_round(uint64_t bytes);
#endif
