/* A model of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp,
 * DeviceCachingAllocator, PyTorch 2.x; commit 001074d25084 of pytorch/pytorch read for the rules,
 * c10/core/AllocatorConfig of 2.15 for the settings). Given the same stream of requests and
 * frees it makes the same segments: 512-byte rounding (and roundup_power2_divisions), a small
 * pool (requests up to 1 MiB, 2 MiB segments) and a large pool (20 MiB segments below 10 MiB,
 * else rounded to 2 MiB), best fit per stream, the split rules, max_split_size_mb,
 * garbage_collection_threshold, expandable segments, and when a segment cannot be had: free
 * oversize cached blocks, then every unsplit cached segment, then retry. Addresses are
 * synthetic (new segments above old ones), which only matters for ties between free blocks of
 * equal size. One instance is one device; it owns no global state. */
#ifndef MB_ALLOC_CACHING_H
#define MB_ALLOC_CACHING_H
#include <stdbool.h>
#include <stdint.h>

#include "alloc/config.h"

typedef struct mb_alloc mb_alloc;

/* What the allocator did to device memory (the snapshot's segment_* trace actions). */
enum mb_alloc_action { MB_SEG_ALLOC, MB_SEG_FREE, MB_SEG_MAP, MB_SEG_UNMAP, MB_SEG_OOM };
typedef struct mb_alloc_event {
  int action;       /* enum mb_alloc_action */
  uint64_t addr, size, stream;
  bool small;       /* the small pool's */
} mb_alloc_event;
typedef void (*mb_alloc_observer)(void *ctx, const mb_alloc_event *e);
/* The snapshot's name of an action: "segment_alloc", ..., "oom". */
const char *mb_alloc_action_name(int action);

typedef struct mb_alloc_stats {
  uint64_t reserved, reserved_peak;   /* bytes of segments (mapped pages): memory_reserved */
  uint64_t allocated, allocated_peak; /* bytes of handed-out blocks: memory_allocated */
  uint64_t requested, requested_peak; /* bytes asked for by the live requests */
  uint64_t segments;                  /* cudaMalloc'd segments held now */
  /* when reserved first reached its peak: segments (expandable: mapped ranges), and the
   * cached but free bytes in them (the fragmentation), the largest free block */
  uint64_t peak_segments, peak_cached_free, peak_largest_free;
  uint64_t segment_allocs, segment_frees, maps, unmaps; /* device calls over the run */
  uint64_t retries;                   /* mallocs that freed every cached segment to retry */
  uint64_t ooms;                      /* requests that could not be served */
} mb_alloc_stats;

/* Returned by mb_alloc_malloc when the device (or the memory fraction) has no room even after
 * freeing the cache: PyTorch's "CUDA out of memory". Not an error of the model. */
#define MB_ALLOC_OOM 1

int mb_alloc_create(const mb_alloc_config *c, mb_alloc **out);
void mb_alloc_free(mb_alloc *a);
/* Back to an empty device (same settings), keeping the memory for the next run. */
void mb_alloc_reset(mb_alloc *a);
void mb_alloc_observe(mb_alloc *a, mb_alloc_observer fn, void *ctx);

/* A request of `size` bytes on `stream` (any key; requests only reuse blocks of their own
 * stream). On MB_OK *block names the block until it is released. MB_ALLOC_OOM: no room.
 * MB_E_NOMEM: the model itself ran out of memory (then every later call fails too). */
int mb_alloc_malloc(mb_alloc *a, uint64_t size, uint64_t stream, int32_t *block);
/* The block goes back to its pool (PyTorch's free_block: "free_completed"). */
int mb_alloc_release(mb_alloc *a, int32_t block);
/* torch.cuda.empty_cache(): every unsplit cached segment back to the device. */
int mb_alloc_empty_cache(mb_alloc *a);
const mb_alloc_stats *mb_alloc_get_stats(const mb_alloc *a);
/* The rounded size a request of `size` bytes is served with (round_size). */
uint64_t mb_alloc_round(const mb_alloc_config *c, uint64_t size);
#endif
