/* The caching allocator's settings: PYTORCH_CUDA_ALLOC_CONF (PYTORCH_ALLOC_CONF), parsed as
 * PyTorch 2.x parses it (c10/core/AllocatorConfig.{h,cpp}: ConfigTokenizer, parseArgs), plus
 * the device it runs on. */
#ifndef MB_ALLOC_CONFIG_H
#define MB_ALLOC_CONFIG_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MB_MIB (UINT64_C(1) << 20)
/* c10/core/AllocatorConfig.h (2.15) / CUDACachingAllocator.cpp constants */
#define MB_ALLOC_MIN_BLOCK UINT64_C(512)          /* kMinBlockSize: every size rounds up to it */
#define MB_ALLOC_SMALL_SIZE (1 * MB_MIB)          /* kSmallSize: the largest small-pool request */
#define MB_ALLOC_SMALL_BUFFER (2 * MB_MIB)        /* kSmallBuffer: a small-pool segment */
#define MB_ALLOC_MIN_LARGE_ALLOC (10 * MB_MIB)    /* kMinLargeAlloc: below it, 20 MiB segments */
#define MB_ALLOC_ROUND_LARGE (2 * MB_MIB)         /* kRoundLarge: larger segments round to it */
#define MB_ALLOC_LARGE_BUFFER (20 * MB_MIB)       /* kLargeBuffer */
/* roundup_power2_divisions has one entry per power-of-two interval from 1 MiB to 64 GiB
 * (kRoundUpPowerOfTwoIntervals) */
#define MB_ALLOC_INTERVALS 16

typedef struct mb_alloc_config {
  uint64_t max_split_size;         /* blocks at least this big are never split (UINT64_MAX: all) */
  uint64_t max_non_split_rounding; /* an unsplittable cached block serves requests this much smaller */
  uint64_t large_segment_size;     /* the segment for 1-10 MiB requests */
  uint32_t roundup_divisions[MB_ALLOC_INTERVALS]; /* per interval; 0 or 1: plain 512-byte rounding */
  double gc_threshold;             /* garbage_collection_threshold; 0: off */
  double memory_fraction;          /* per_process_memory_fraction; 0: not set */
  bool expandable;                 /* expandable_segments */
  /* the device (not part of the string) */
  uint64_t device_total;           /* the GPU's memory: expandable address space, memory fraction */
  uint64_t limit;                  /* bytes cudaMalloc can still hand out; 0: unlimited */
} mb_alloc_config;

void mb_alloc_config_default(mb_alloc_config *c);
/* Apply a PYTORCH_CUDA_ALLOC_CONF string ("max_split_size_mb:128,expandable_segments:True")
 * on top of c. Returns MB_OK, or MB_E_INVALID_ARG / MB_E_UNSUPPORTED with a message naming
 * the key and value in err. Keys that only concern host (pinned) memory or locking are
 * accepted and change nothing. */
int mb_alloc_config_parse(mb_alloc_config *c, const char *conf, char *err, size_t err_size);
/* The divisions roundup_power2_divisions gives a request of `size` bytes. */
uint32_t mb_alloc_divisions(const mb_alloc_config *c, uint64_t size);
#endif
