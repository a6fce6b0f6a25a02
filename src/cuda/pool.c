#include "cuda/pool.h"

#include <stdlib.h>
#include <string.h>

#define MB (1024u * 1024u)
#define MIN_BLOCK 512u
#define SMALL_SIZE (1u * MB)      /* kSmallSize */
#define SMALL_BUFFER (2u * MB)    /* kSmallBuffer */
#define MIN_LARGE_ALLOC (10u * MB) /* kMinLargeAlloc */
#define LARGE_BUFFER (20u * MB)   /* kLargeBuffer */
#define ROUND_LARGE (2u * MB)     /* kRoundLarge */

uint64_t mb_pool_round(uint64_t bytes) {
  return bytes < MIN_BLOCK ? MIN_BLOCK : (bytes + MIN_BLOCK - 1) / MIN_BLOCK * MIN_BLOCK;
}

static uint64_t segment_size(uint64_t rounded) {
  if (rounded <= SMALL_SIZE) return SMALL_BUFFER;
  if (rounded < MIN_LARGE_ALLOC) return LARGE_BUFFER;
  return (rounded + ROUND_LARGE - 1) / ROUND_LARGE * ROUND_LARGE;
}

void mb_pool_init(mb_pool *p, mb_cuda *cu, uint64_t free_now) {
  memset(p, 0, sizeof *p);
  p->cu = cu;
  p->min_free = free_now;
}

static int32_t new_block(mb_pool *p, mb_diag *d) {
  if (p->n_spare) return p->spare[--p->n_spare];
  if (p->n_blocks == p->cap_blocks) {
    int32_t cap = p->cap_blocks ? p->cap_blocks * 2 : 256;
    mb_pool_block *grown = realloc(p->blocks, (size_t)cap * sizeof *grown);
    int32_t *spare = realloc(p->spare, (size_t)cap * sizeof *spare);
    if (spare) p->spare = spare;
    if (!grown || !spare) {
      if (grown) p->blocks = grown;
      mb_fail(d, MB_E_NOMEM, "out of memory");
      return -1;
    }
    p->blocks = grown;
    p->cap_blocks = cap;
  }
  return p->n_blocks++;
}

static void drop_block(mb_pool *p, int32_t i) {
  p->blocks[i].in_use = false;
  p->spare[p->n_spare++] = i;
}

static bool is_small(const mb_pool *p, const mb_pool_block *b) { return p->segs[b->seg].small; }

static uintptr_t address(const mb_pool *p, const mb_pool_block *b) {
  return (uintptr_t)p->segs[b->seg].ptr + (uintptr_t)b->offset;
}

/* get_free_block: the smallest free block of the pool that fits, lowest address on a tie */
static int32_t best_fit(const mb_pool *p, uint64_t size, bool small) {
  int32_t best = -1;
  for (int32_t i = 0; i < p->n_blocks; i++) {
    const mb_pool_block *b = &p->blocks[i];
    if (!b->in_use || !b->free || b->size < size || is_small(p, b) != small) continue;
    if (best < 0 || b->size < p->blocks[best].size ||
        (b->size == p->blocks[best].size && address(p, b) < address(p, &p->blocks[best])))
      best = i;
  }
  return best;
}

static void read_free(mb_pool *p) {
  size_t f = 0, t = 0;
  if (p->cu->rt.mem_get_info(&f, &t) == cudaSuccess && f < p->min_free) p->min_free = f;
}

/* cudaFree the segments whose memory is all one free block (release_cached_blocks). */
static void release_cached(mb_pool *p) {
  for (int32_t i = 0; i < p->n_blocks; i++) {
    mb_pool_block *b = &p->blocks[i];
    if (!b->in_use || !b->free || b->prev >= 0 || b->next >= 0) continue;
    mb_pool_segment *s = &p->segs[b->seg];
    if (!s->ptr) continue;
    p->cu->rt.free(s->ptr);
    s->ptr = NULL;
    p->reserved -= s->size;
    drop_block(p, i);
  }
}

static int new_segment(mb_pool *p, uint64_t size, bool small, int32_t *block, bool *oom, mb_diag *d) {
  char buf[256];
  *block = -1;
  if (p->n_segs == p->cap_segs) {
    int32_t cap = p->cap_segs ? p->cap_segs * 2 : 64;
    mb_pool_segment *grown = realloc(p->segs, (size_t)cap * sizeof *grown);
    if (!grown) return mb_fail(d, MB_E_NOMEM, "out of memory");
    p->segs = grown;
    p->cap_segs = cap;
  }
  void *ptr = NULL;
  cudaError_t e = p->cu->rt.malloc(&ptr, (size_t)size);
  if (e == cudaErrorMemoryAllocation) { /* as PyTorch does: give back the cache, try once more */
    p->cu->rt.get_last_error();
    release_cached(p);
    e = p->cu->rt.malloc(&ptr, (size_t)size);
    if (e == cudaErrorMemoryAllocation) {
      p->cu->rt.get_last_error();
      *oom = true;
      return MB_OK;
    }
  }
  if (e != cudaSuccess)
    return mb_fail(d, MB_E_NO_CUDA, "cudaMalloc of %llu bytes failed: %s", (unsigned long long)size,
                   mb_cuda_strerror(p->cu, e, buf, sizeof buf));
  p->mallocs++;
  if ((e = p->cu->rt.memset(ptr, 0, (size_t)size)) != cudaSuccess) {
    p->cu->rt.free(ptr);
    return mb_fail(d, MB_E_NO_CUDA, "cudaMemset of a new segment failed: %s", mb_cuda_strerror(p->cu, e, buf, sizeof buf));
  }
  int32_t b = new_block(p, d);
  if (b < 0) {
    p->cu->rt.free(ptr);
    return d->status;
  }
  p->segs[p->n_segs] = (mb_pool_segment){ptr, size, small};
  p->blocks[b] = (mb_pool_block){0, size, p->n_segs, -1, -1, true, true};
  p->n_segs++;
  p->reserved += size;
  if (p->reserved > p->peak_reserved) p->peak_reserved = p->reserved;
  read_free(p);
  *block = b;
  return MB_OK;
}

int mb_pool_alloc(mb_pool *p, uint64_t bytes, int32_t *out, bool *oom, mb_diag *d) {
  *out = -1;
  *oom = false;
  uint64_t size = mb_pool_round(bytes);
  bool small = size <= SMALL_SIZE;
  int32_t b = best_fit(p, size, small);
  if (b < 0 && (new_segment(p, segment_size(size), small, &b, oom, d) != MB_OK || *oom)) return d->status;
  uint64_t rest = p->blocks[b].size - size;
  if (small ? rest >= MIN_BLOCK : rest > SMALL_SIZE) { /* should_split */
    int32_t r = new_block(p, d);
    if (r < 0) return d->status;
    mb_pool_block *blk = &p->blocks[b];
    p->blocks[r] = (mb_pool_block){blk->offset + size, rest, blk->seg, b, blk->next, true, true};
    if (blk->next >= 0) p->blocks[blk->next].prev = r;
    blk->next = r;
    blk->size = size;
  }
  p->blocks[b].free = false;
  p->allocated += p->blocks[b].size; /* an unsplit block counts whole, as allocated_bytes does */
  if (p->allocated > p->peak_allocated) p->peak_allocated = p->allocated;
  *out = b;
  return MB_OK;
}

/* Merge block `from` into its free neighbour `into` (adjacent in the same segment). */
static void merge(mb_pool *p, int32_t into, int32_t from) {
  mb_pool_block *a = &p->blocks[into], *b = &p->blocks[from];
  if (b->offset < a->offset) { /* b precedes a */
    a->offset = b->offset;
    a->prev = b->prev;
    if (b->prev >= 0) p->blocks[b->prev].next = into;
  } else {
    a->next = b->next;
    if (b->next >= 0) p->blocks[b->next].prev = into;
  }
  a->size += b->size;
  drop_block(p, from);
}

void mb_pool_free(mb_pool *p, int32_t i) {
  if (i < 0 || i >= p->n_blocks || !p->blocks[i].in_use || p->blocks[i].free) return;
  mb_pool_block *b = &p->blocks[i];
  p->allocated -= b->size;
  b->free = true;
  int32_t prev = b->prev, next = b->next;
  if (next >= 0 && p->blocks[next].free) merge(p, i, next);
  if (prev >= 0 && p->blocks[prev].free) merge(p, i, prev);
}

void mb_pool_release(mb_pool *p) {
  for (int32_t s = 0; s < p->n_segs; s++)
    if (p->segs[s].ptr) p->cu->rt.free(p->segs[s].ptr);
  p->n_segs = 0;
  p->n_blocks = 0;
  p->n_spare = 0;
  p->allocated = p->reserved = 0;
}

void mb_pool_destroy(mb_pool *p) {
  mb_pool_release(p);
  free(p->blocks);
  free(p->spare);
  free(p->segs);
  memset(p, 0, sizeof *p);
}
