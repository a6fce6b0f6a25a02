/* The caching allocator model. Each function names the DeviceCachingAllocator member of
 * c10/cuda/CUDACachingAllocator.cpp (pytorch/pytorch 001074d25084, PyTorch 2.x) whose rule it
 * follows; PyTorch's code was read, not copied. Pools are arrays of block ids kept sorted the
 * way PyTorch's std::set<Block*> is: free blocks by (stream, size, address)
 * (BlockComparatorSize), unmapped pieces of expandable segments by (stream, address)
 * (BlockComparatorAddress). */
#include "alloc/caching.h"

#include <stdlib.h>
#include <string.h>

#include "membudget/membudget.h"

typedef struct blk {
  uint64_t addr, size, requested, stream;
  int64_t gc_base;      /* the pool's get_free_block count when the block was cached */
  int32_t prev, next;   /* neighbours in the same segment, -1 at the ends */
  int32_t seg;          /* expandable segment, or -1 for a cudaMalloc'd one */
  uint8_t small, allocated, mapped, live;
} blk;

typedef struct idset {
  int32_t *ids;
  size_t n, cap;
} idset;

typedef struct pool {
  idset blocks;         /* free mapped blocks */
  idset unmapped;       /* unmapped ranges of expandable segments */
  int64_t calls;        /* get_free_blocks_call_count (garbage collection ages) */
  bool small;
} pool;

typedef struct xseg {   /* an expandable segment: a virtual range mapped page by page */
  uint64_t base, page, size;
} xseg;

struct mb_alloc {
  mb_alloc_config c;
  blk *b;
  int32_t n_b, cap_b;
  int32_t *spare;       /* ids of dead blocks, reused first */
  int32_t n_spare, cap_spare;
  pool pools[2];        /* small, large */
  xseg *xs;
  int32_t n_xs, cap_xs;
  uint64_t next_addr;
  int32_t *scratch;     /* a copy of a pool while it is changed in a loop */
  size_t cap_scratch;
  mb_alloc_stats st;
  mb_alloc_observer observe;
  void *observe_ctx;
  bool any_divisions;   /* roundup_power2_divisions is set somewhere */
  int err;              /* sticky MB_E_NOMEM */
};

#define ALIGN (2 * MB_MIB)
#define FIRST_ADDR (UINT64_C(1) << 40)
#define MAX_REQUEST (UINT64_C(1) << 60) /* PyTorch refuses 1 EB and more (allocate) */

static blk *B(mb_alloc *a, int32_t id) { return &a->b[id]; }

static uint64_t sat_add(uint64_t x, uint64_t y) { return x > UINT64_MAX - y ? UINT64_MAX : x + y; }

/* ---- sorted id sets ---- */

static int cmp_size(const mb_alloc *a, int32_t x, int32_t y) {
  const blk *p = &a->b[x], *q = &a->b[y];
  if (p->stream != q->stream) return p->stream < q->stream ? -1 : 1;
  if (p->size != q->size) return p->size < q->size ? -1 : 1;
  if (p->addr != q->addr) return p->addr < q->addr ? -1 : 1;
  return 0;
}

static int cmp_addr(const mb_alloc *a, int32_t x, int32_t y) {
  const blk *p = &a->b[x], *q = &a->b[y];
  if (p->stream != q->stream) return p->stream < q->stream ? -1 : 1;
  if (p->addr != q->addr) return p->addr < q->addr ? -1 : 1;
  return 0;
}

typedef int (*cmp_fn)(const mb_alloc *, int32_t, int32_t);

/* first position whose block is not below `id` */
static size_t lower(const mb_alloc *a, const idset *s, int32_t id, cmp_fn cmp) {
  size_t lo = 0, hi = s->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (cmp(a, s->ids[mid], id) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* first block of `stream` with at least `size` bytes (a search key, as PyTorch's) */
static size_t lower_key(const mb_alloc *a, const idset *s, uint64_t stream, uint64_t size, bool by_size) {
  size_t lo = 0, hi = s->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const blk *p = &a->b[s->ids[mid]];
    bool below = p->stream < stream || (p->stream == stream && by_size && p->size < size);
    if (below) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static void set_insert(mb_alloc *a, idset *s, int32_t id, cmp_fn cmp) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 64;
    int32_t *grown = realloc(s->ids, cap * sizeof *grown);
    if (!grown) {
      a->err = MB_E_NOMEM;
      return;
    }
    s->ids = grown;
    s->cap = cap;
  }
  size_t at = lower(a, s, id, cmp);
  memmove(s->ids + at + 1, s->ids + at, (s->n - at) * sizeof *s->ids);
  s->ids[at] = id;
  s->n++;
}

static void set_erase_at(idset *s, size_t at) {
  memmove(s->ids + at, s->ids + at + 1, (s->n - at - 1) * sizeof *s->ids);
  s->n--;
}

static void set_erase(mb_alloc *a, idset *s, int32_t id, cmp_fn cmp) {
  size_t at = lower(a, s, id, cmp);
  if (at < s->n && s->ids[at] == id) set_erase_at(s, at);
}

/* ---- blocks ---- */

static pool *pool_of(mb_alloc *a, int32_t id) { return &a->pools[B(a, id)->small ? 0 : 1]; }

static int32_t new_block(mb_alloc *a, uint64_t stream, uint64_t size, uint64_t addr, bool small, int32_t seg) {
  int32_t id;
  if (a->n_spare) {
    id = a->spare[--a->n_spare];
  } else {
    if (a->n_b == a->cap_b) {
      int32_t cap = a->cap_b ? (a->cap_b > INT32_MAX / 2 ? 0 : a->cap_b * 2) : 256;
      blk *grown = cap > 0 ? realloc(a->b, (size_t)cap * sizeof *grown) : NULL;
      if (!grown) {
        a->err = MB_E_NOMEM;
        return -1;
      }
      a->b = grown;
      a->cap_b = cap;
    }
    id = a->n_b++;
  }
  a->b[id] = (blk){.addr = addr, .size = size, .stream = stream, .prev = -1, .next = -1, .seg = seg,
                   .small = small, .mapped = 1, .live = 1};
  return id;
}

static void delete_block(mb_alloc *a, int32_t id) {
  B(a, id)->live = 0;
  if (a->n_spare == a->cap_spare) {
    int32_t cap = a->cap_spare ? (a->cap_spare > INT32_MAX / 2 ? 0 : a->cap_spare * 2) : 256;
    int32_t *grown = cap > 0 ? realloc(a->spare, (size_t)cap * sizeof *grown) : NULL;
    if (!grown) return; /* the id is simply not reused */
    a->spare = grown;
    a->cap_spare = cap;
  }
  a->spare[a->n_spare++] = id;
}

static bool is_split(mb_alloc *a, int32_t id) { return B(a, id)->prev >= 0 || B(a, id)->next >= 0; }

/* BlockPool::insert_into_blocks: cache a free block, remembering the pool's age */
static void insert_into_blocks(mb_alloc *a, int32_t id) {
  pool *p = pool_of(a, id);
  B(a, id)->gc_base = p->calls;
  set_insert(a, &p->blocks, id, cmp_size);
}

static void emit(mb_alloc *a, int action, uint64_t addr, uint64_t size, uint64_t stream, bool small) {
  if (!a->observe) return;
  mb_alloc_event e = {action, addr, size, stream, small};
  a->observe(a->observe_ctx, &e);
}

/* try_merge_blocks: a free neighbour of the same mapping state joins dst */
static uint64_t try_merge(mb_alloc *a, int32_t dst, int32_t src) {
  if (src < 0 || B(a, src)->allocated || B(a, dst)->mapped != B(a, src)->mapped) return 0;
  pool *p = pool_of(a, src);
  if (B(a, src)->mapped) set_erase(a, &p->blocks, src, cmp_size);
  else set_erase(a, &p->unmapped, src, cmp_addr);
  blk *d = B(a, dst), *s = B(a, src);
  if (d->prev == src) { /* [src dst] */
    d->addr = s->addr;
    d->prev = s->prev;
    if (d->prev >= 0) B(a, d->prev)->next = dst;
  } else { /* [dst src] */
    d->next = s->next;
    if (d->next >= 0) B(a, d->next)->prev = dst;
  }
  uint64_t subsumed = s->size;
  d->size += subsumed;
  delete_block(a, src);
  return subsumed;
}

/* ---- sizes ---- */

/* roundup_power2_next_division: the next of `div` equal steps between two powers of two */
static uint64_t next_division(uint64_t size, uint32_t div) {
  if (!(size & (size - 1))) return size;
  uint64_t floor2 = UINT64_C(1) << (63 - __builtin_clzll(size));
  uint64_t step = floor2 >> (31 - __builtin_clz(div));
  if (!step) return floor2 << 1;
  uint64_t down = size & ~(step - 1);
  return down == size ? size : down + step;
}

/* round_size */
static uint64_t round_size(const mb_alloc_config *c, uint64_t size, bool any_divisions) {
  if (size < MB_ALLOC_MIN_BLOCK) return MB_ALLOC_MIN_BLOCK;
  uint32_t div = any_divisions ? mb_alloc_divisions(c, size) : 0;
  if (div > 1 && size > MB_ALLOC_MIN_BLOCK * div) return next_division(size, div);
  return (size + MB_ALLOC_MIN_BLOCK - 1) / MB_ALLOC_MIN_BLOCK * MB_ALLOC_MIN_BLOCK;
}

uint64_t mb_alloc_round(const mb_alloc_config *c, uint64_t size) { return round_size(c, size, true); }

/* get_allocation_size. large_segment_size (2.15) replaces kLargeBuffer; a configured segment
 * smaller than the request falls back to the 2 MiB rounding (our reading, not PyTorch's code) */
static uint64_t allocation_size(const mb_alloc_config *c, uint64_t size) {
  uint64_t round2 = (size + MB_ALLOC_ROUND_LARGE - 1) / MB_ALLOC_ROUND_LARGE * MB_ALLOC_ROUND_LARGE;
  if (size <= MB_ALLOC_SMALL_SIZE) return MB_ALLOC_SMALL_BUFFER;
  if (size < MB_ALLOC_MIN_LARGE_ALLOC) return c->large_segment_size >= size ? c->large_segment_size : round2;
  return round2;
}

static bool fraction_set(const mb_alloc *a) { return a->c.memory_fraction > 0 && a->c.device_total > 0; }

static uint64_t allowed_maximum(const mb_alloc *a) {
  return (uint64_t)(a->c.memory_fraction * (double)a->c.device_total);
}

static bool gc_on(const mb_alloc *a) { return fraction_set(a) && a->c.gc_threshold > 0.0; }

/* ---- finding a cached block ---- */

static uint64_t expandable_size(mb_alloc *a, int32_t id) {
  const blk *x = B(a, id);
  return x->size + (x->next >= 0 && !B(a, x->next)->mapped ? B(a, x->next)->size : 0);
}

/* get_free_block: best fit among the stream's cached blocks, within the oversize rules */
static bool get_free_block(mb_alloc *a, pool *p, uint64_t stream, uint64_t size, int32_t *out) {
  if (gc_on(a)) p->calls++;
  idset *s = &p->blocks;
  size_t at = lower_key(a, s, stream, size, true);
  if (at == s->n || B(a, s->ids[at])->stream != stream) return false;
  if (B(a, s->ids[at])->seg >= 0) {
    if (a->c.expandable) {
      /* a block before an unmapped tail counts as big as it could grow */
      while (B(a, s->ids[at])->seg >= 0 && at + 1 < s->n && B(a, s->ids[at + 1])->stream == stream &&
             expandable_size(a, s->ids[at + 1]) < expandable_size(a, s->ids[at]))
        at++;
    } else {
      do at++;
      while (at < s->n && B(a, s->ids[at])->seg >= 0 && B(a, s->ids[at])->stream == stream);
      if (at == s->n || B(a, s->ids[at])->stream != stream) return false;
    }
  }
  uint64_t have = B(a, s->ids[at])->size;
  if (size < a->c.max_split_size && have >= a->c.max_split_size) return false;
  if (size >= a->c.max_split_size && have >= sat_add(size, a->c.max_non_split_rounding)) return false;
  *out = s->ids[at];
  set_erase_at(s, at);
  return true;
}

/* ---- device memory ---- */

/* release_block: cudaFree a whole cached segment */
static void release_block(mb_alloc *a, int32_t id) {
  blk *x = B(a, id);
  set_erase(a, &pool_of(a, id)->blocks, id, cmp_size);
  a->st.reserved -= x->size;
  a->st.segments--;
  a->st.segment_frees++;
  emit(a, MB_SEG_FREE, x->addr, x->size, x->stream, x->small);
  delete_block(a, id);
}

static bool releasable(mb_alloc *a, int32_t id) { return B(a, id)->seg < 0 && !is_split(a, id); }

/* ExpandableSegment::map through map_block: back [addr, addr + size) of an unmapped block
 * with pages, merge it with free neighbours and cache it */
static bool map_block(mb_alloc *a, int32_t id, uint64_t size) {
  const xseg *xs = &a->xs[B(a, id)->seg];
  uint64_t off = B(a, id)->addr - xs->base;
  uint64_t begin = off / xs->page, end = (off + size + xs->page - 1) / xs->page;
  uint64_t mapped = (end - begin) * xs->page;
  if (!mapped || mapped > UINT64_MAX - a->st.reserved) return false;
  if (a->c.limit && a->st.reserved + mapped > a->c.limit) return false; /* cuMemCreate: no memory */
  pool *p = pool_of(a, id);
  set_erase(a, &p->unmapped, id, cmp_addr);
  B(a, id)->mapped = 1;
  if (mapped < B(a, id)->size) {
    blk x = *B(a, id);
    int32_t rest = new_block(a, x.stream, x.size - mapped, x.addr + mapped, x.small, x.seg);
    if (rest < 0) return false;
    B(a, rest)->mapped = 0;
    B(a, rest)->prev = id;
    B(a, rest)->next = x.next;
    if (x.next >= 0) B(a, x.next)->prev = rest;
    B(a, id)->next = rest;
    B(a, id)->size = mapped;
    set_insert(a, &p->unmapped, rest, cmp_addr);
  }
  uint64_t at = xs->base + begin * xs->page;
  try_merge(a, id, B(a, id)->prev);
  try_merge(a, id, B(a, id)->next);
  insert_into_blocks(a, id);
  a->st.reserved += mapped;
  a->st.maps++;
  emit(a, MB_SEG_MAP, at, mapped, B(a, id)->stream, B(a, id)->small);
  return true;
}

static bool allocatable(mb_alloc *a, int32_t id) { return id >= 0 && !B(a, id)->allocated; }

/* find_expandable_block: the lowest-address run of free and unmapped blocks of the stream with
 * room for size, else a new segment reserving 9/8 of the device's memory */
static int32_t find_expandable_block(mb_alloc *a, pool *p, uint64_t stream, uint64_t size) {
  idset *s = &p->unmapped;
  for (size_t at = lower_key(a, s, stream, 0, false); at < s->n && B(a, s->ids[at])->stream == stream; at++) {
    int32_t c = s->ids[at];
    if (allocatable(a, B(a, c)->prev)) c = B(a, c)->prev;
    uint64_t bytes = 0;
    for (int32_t x = c; bytes < size && allocatable(a, x); x = B(a, x)->next) bytes += B(a, x)->size;
    if (bytes >= size) return c;
  }
  if (a->n_xs == a->cap_xs) {
    int32_t cap = a->cap_xs ? (a->cap_xs > INT32_MAX / 2 ? 0 : a->cap_xs * 2) : 8;
    xseg *grown = cap > 0 ? realloc(a->xs, (size_t)cap * sizeof *grown) : NULL;
    if (!grown) {
      a->err = MB_E_NOMEM;
      return -1;
    }
    a->xs = grown;
    a->cap_xs = cap;
  }
  uint64_t page = p->small ? MB_ALLOC_SMALL_BUFFER : MB_ALLOC_LARGE_BUFFER;
  uint64_t total = a->c.device_total ? a->c.device_total : UINT64_C(1) << 40;
  uint64_t vsize = (total + total / 8 + page - 1) / page * page;
  xseg *xs = &a->xs[a->n_xs];
  xs->base = a->next_addr;
  xs->page = page;
  xs->size = vsize;
  a->next_addr += (vsize + ALIGN - 1) / ALIGN * ALIGN;
  int32_t id = new_block(a, stream, vsize, xs->base, p->small, a->n_xs);
  if (id < 0) return -1;
  a->n_xs++;
  B(a, id)->mapped = 0;
  set_insert(a, s, id, cmp_addr);
  return id;
}

/* try_allocate_expandable_block: map pages until the candidate holds size bytes */
static int32_t allocate_expandable(mb_alloc *a, pool *p, uint64_t stream, uint64_t size) {
  int32_t c = find_expandable_block(a, p, stream, size);
  if (c < 0) return -1;
  if (!B(a, c)->mapped) {
    uint64_t want = B(a, c)->size < size ? B(a, c)->size : size;
    if (!map_block(a, c, want)) return -1;
  }
  while (B(a, c)->size < size) {
    int32_t next = B(a, c)->next;
    if (next < 0 || B(a, next)->mapped) return -1;
    uint64_t rest = size - B(a, c)->size;
    if (!map_block(a, next, rest < B(a, next)->size ? rest : B(a, next)->size)) return -1;
    c = next; /* it took the candidate in */
  }
  set_erase(a, &p->blocks, c, cmp_size);
  return c;
}

/* alloc_block: a new segment from the device (cudaMalloc, or mapping pages) */
static bool alloc_block(mb_alloc *a, pool *p, uint64_t stream, uint64_t size, uint64_t alloc_size, bool retry,
                        int32_t *out) {
  if (retry) a->st.retries++;
  if (alloc_size > UINT64_MAX - a->st.reserved - MB_ALLOC_LARGE_BUFFER) return false; /* absurd: no device has it */
  if (fraction_set(a) && a->st.reserved + alloc_size > allowed_maximum(a)) return false;
  if (a->c.expandable) {
    *out = allocate_expandable(a, p, stream, size);
    return *out >= 0;
  }
  if (a->c.limit && a->st.reserved + alloc_size > a->c.limit) return false; /* cudaMalloc fails */
  int32_t id = new_block(a, stream, alloc_size, a->next_addr, p->small, -1);
  if (id < 0) return false;
  a->next_addr += (alloc_size + ALIGN - 1) / ALIGN * ALIGN;
  a->st.reserved += alloc_size;
  a->st.segments++;
  a->st.segment_allocs++;
  emit(a, MB_SEG_ALLOC, B(a, id)->addr, alloc_size, stream, p->small);
  *out = id;
  return true;
}

/* release_available_cached_blocks: free oversize cached blocks (>= max_split_size) of the
 * stream: the smallest one big enough for the request, else the largest ones until enough */
static bool release_available(mb_alloc *a, pool *p, uint64_t stream, uint64_t size) {
  uint64_t mss = a->c.max_split_size;
  if (mss == UINT64_MAX) return false;
  uint64_t key = size < mss ? mss : size;
  idset *s = &p->blocks;
  size_t at = lower_key(a, s, stream, key, true);
  if (at < s->n && B(a, s->ids[at])->stream == stream) {
    if (!releasable(a, s->ids[at])) return false;
    release_block(a, s->ids[at]);
    return true;
  }
  if (at == 0) return false;
  uint64_t released = 0;
  at--;
  while (released < key && B(a, s->ids[at])->size >= mss && B(a, s->ids[at])->stream == stream &&
         releasable(a, s->ids[at])) {
    int32_t cur = s->ids[at];
    released += B(a, cur)->size;
    bool first = at == 0;
    if (!first) at--;
    release_block(a, cur); /* only positions after `at` move */
    if (first) break;
  }
  return released >= key;
}

/* unmap_block: give the whole free pages of an expandable block back */
static void unmap_block(mb_alloc *a, int32_t id) {
  blk x = *B(a, id);
  const xseg *xs = &a->xs[x.seg];
  uint64_t off = x.addr - xs->base;
  uint64_t begin = (off + xs->page - 1) / xs->page, end = (off + x.size) / xs->page;
  if (begin >= end) return;
  pool *p = pool_of(a, id);
  set_erase(a, &p->blocks, id, cmp_size);
  uint64_t at = xs->base + begin * xs->page, bytes = (end - begin) * xs->page;
  uint64_t before = at - x.addr, after = x.size - before - bytes;
  if (before) {
    int32_t f = new_block(a, x.stream, before, x.addr, x.small, x.seg);
    if (f < 0) return;
    B(a, f)->prev = x.prev;
    B(a, f)->next = id;
    if (x.prev >= 0) B(a, x.prev)->next = f;
    B(a, id)->prev = f;
    insert_into_blocks(a, f);
  }
  if (after) {
    int32_t f = new_block(a, x.stream, after, at + bytes, x.small, x.seg);
    if (f < 0) return;
    B(a, f)->prev = id;
    B(a, f)->next = x.next;
    if (x.next >= 0) B(a, x.next)->prev = f;
    B(a, id)->next = f;
    insert_into_blocks(a, f);
  }
  B(a, id)->addr = at;
  B(a, id)->size = bytes;
  B(a, id)->mapped = 0;
  try_merge(a, id, B(a, id)->prev);
  try_merge(a, id, B(a, id)->next);
  set_insert(a, &p->unmapped, id, cmp_addr);
  a->st.reserved -= bytes;
  a->st.unmaps++;
  emit(a, MB_SEG_UNMAP, at, bytes, x.stream, x.small);
}

static int32_t *copy_ids(mb_alloc *a, const idset *s) {
  if (s->n > a->cap_scratch) {
    int32_t *grown = realloc(a->scratch, s->n * sizeof *grown);
    if (!grown) {
      a->err = MB_E_NOMEM;
      return NULL;
    }
    a->scratch = grown;
    a->cap_scratch = s->n;
  }
  if (s->n) memcpy(a->scratch, s->ids, s->n * sizeof *s->ids);
  return a->scratch;
}

/* release_blocks: every unsplit cached segment of the pool; expandable ones lose their free
 * pages, and a segment left wholly unmapped is gone */
static void release_blocks(mb_alloc *a, pool *p) {
  size_t n = p->blocks.n;
  int32_t *ids = copy_ids(a, &p->blocks);
  if (!ids) return;
  size_t n_unmap = 0;
  for (size_t k = 0; k < n; k++) {
    int32_t id = ids[k];
    if (B(a, id)->seg >= 0) ids[n_unmap++] = id; /* gathered first, as unmapping edits the pool */
    else if (!is_split(a, id)) release_block(a, id);
  }
  for (size_t k = 0; k < n_unmap; k++) {
    int32_t id = ids[k];
    unmap_block(a, id);
    if (!B(a, id)->mapped && !is_split(a, id)) { /* release_expandable_segment */
      set_erase(a, &p->unmapped, id, cmp_addr);
      delete_block(a, id);
    }
  }
}

/* release_cached_blocks (what empty_cache does) */
static bool release_cached(mb_alloc *a) {
  release_blocks(a, &a->pools[1]);
  release_blocks(a, &a->pools[0]);
  return true;
}

/* garbage_collect_cached_blocks: with a memory fraction set, once reserved passes
 * threshold x allowed, free unsplit large cached segments not reused for longer than
 * average, until enough is reclaimed */
static void garbage_collect(mb_alloc *a) {
  uint64_t threshold = (uint64_t)(a->c.gc_threshold * (double)allowed_maximum(a));
  if (a->st.reserved <= threshold) return;
  uint64_t target = a->st.reserved - threshold, reclaimed = 0, total_age = 0;
  pool *p = &a->pools[1];
  int64_t count = 0;
  for (size_t k = 0; k < p->blocks.n; k++) {
    int32_t id = p->blocks.ids[k];
    if (!is_split(a, id)) {
      total_age += (uint64_t)(p->calls - B(a, id)->gc_base);
      count++;
    }
  }
  bool freed = true;
  while (count > 0 && reclaimed < target && freed) {
    double age_threshold = (double)total_age / (double)count;
    freed = false;
    size_t n = p->blocks.n;
    int32_t *ids = copy_ids(a, &p->blocks);
    if (!ids) return;
    for (size_t k = 0; k < n; k++) {
      int32_t id = ids[k];
      uint64_t age = (uint64_t)(p->calls - B(a, id)->gc_base);
      if (releasable(a, id) && (double)age >= age_threshold) {
        freed = true;
        reclaimed += B(a, id)->size;
        total_age -= age;
        count--;
        release_block(a, id);
      }
    }
  }
}

/* ---- requests ---- */

/* should_split */
static bool should_split(mb_alloc *a, int32_t id, uint64_t size) {
  uint64_t remaining = B(a, id)->size - size;
  if (B(a, id)->small || a->c.expandable) return remaining >= MB_ALLOC_MIN_BLOCK;
  return size < a->c.max_split_size && remaining > MB_ALLOC_SMALL_SIZE;
}

/* alloc_found_block: the front of the block is handed out, the rest stays cached */
static int32_t alloc_found_block(mb_alloc *a, int32_t id, uint64_t size, uint64_t orig, bool split) {
  if (split) {
    blk x = *B(a, id);
    int32_t front = new_block(a, x.stream, size, x.addr, x.small, x.seg);
    if (front < 0) return -1;
    B(a, front)->prev = x.prev;
    B(a, front)->next = id;
    if (x.prev >= 0) B(a, x.prev)->next = front;
    B(a, id)->prev = front;
    B(a, id)->addr += size;
    B(a, id)->size -= size;
    insert_into_blocks(a, id);
    id = front;
  }
  blk *x = B(a, id);
  x->allocated = 1;
  x->requested = orig;
  a->st.allocated += x->size;
  a->st.requested += orig;
  if (a->st.allocated > a->st.allocated_peak) a->st.allocated_peak = a->st.allocated;
  if (a->st.requested > a->st.requested_peak) a->st.requested_peak = a->st.requested;
  return id;
}

/* the fragmentation at a new reserved peak: free cached bytes, the largest free block, and
 * the segments (an expandable segment counts each contiguous mapped range, as snapshots do) */
static void note_peak(mb_alloc *a) {
  a->st.reserved_peak = a->st.reserved;
  a->st.peak_cached_free = a->st.reserved - a->st.allocated;
  uint64_t largest = 0, ranges = 0;
  for (int k = 0; k < 2; k++) {
    const idset *s = &a->pools[k].blocks;
    if (!s->n) continue;
    if (B(a, s->ids[0])->stream == B(a, s->ids[s->n - 1])->stream) { /* one stream: sorted by size */
      if (B(a, s->ids[s->n - 1])->size > largest) largest = B(a, s->ids[s->n - 1])->size;
      continue;
    }
    for (size_t i = 0; i < s->n; i++)
      if (B(a, s->ids[i])->size > largest) largest = B(a, s->ids[i])->size;
  }
  if (a->n_xs)
    for (int32_t id = 0; id < a->n_b; id++) {
      const blk *x = B(a, id);
      if (x->live && x->seg >= 0 && x->mapped && (x->prev < 0 || !B(a, x->prev)->mapped)) ranges++;
    }
  a->st.peak_largest_free = largest;
  a->st.peak_segments = a->st.segments + ranges;
}

int mb_alloc_malloc(mb_alloc *a, uint64_t orig, uint64_t stream, int32_t *out) {
  *out = -1;
  if (a->err) return a->err;
  bool too_big = orig >= MAX_REQUEST;
  uint64_t size = too_big ? 0 : round_size(&a->c, orig, a->any_divisions);
  pool *p = &a->pools[size <= MB_ALLOC_SMALL_SIZE ? 0 : 1];
  uint64_t alloc_size = allocation_size(&a->c, size);
  int32_t id = -1;
  bool found = !too_big && get_free_block(a, p, stream, size, &id);
  if (!found && !too_big) {
    if (gc_on(a)) garbage_collect(a);
    found = alloc_block(a, p, stream, size, alloc_size, false, &id) ||
            (release_available(a, p, stream, size) && alloc_block(a, p, stream, size, alloc_size, false, &id)) ||
            (release_cached(a) && alloc_block(a, p, stream, size, alloc_size, true, &id));
  }
  if (a->err) return a->err;
  if (!found) {
    a->st.ooms++;
    emit(a, MB_SEG_OOM, 0, orig, stream, p->small);
    return MB_ALLOC_OOM;
  }
  id = alloc_found_block(a, id, size, orig, should_split(a, id, size));
  if (a->err || id < 0) return a->err ? a->err : MB_E_NOMEM;
  if (a->st.reserved > a->st.reserved_peak) note_peak(a);
  *out = id;
  return MB_OK;
}

int mb_alloc_release(mb_alloc *a, int32_t id) {
  if (a->err) return a->err;
  if (id < 0 || id >= a->n_b || !B(a, id)->live || !B(a, id)->allocated) return MB_E_INVALID_ARG;
  blk *x = B(a, id);
  a->st.allocated -= x->size;
  a->st.requested -= x->requested;
  x->allocated = 0;
  x->requested = 0;
  /* free_block */
  try_merge(a, id, B(a, id)->prev);
  try_merge(a, id, B(a, id)->next);
  insert_into_blocks(a, id);
  return a->err;
}

int mb_alloc_empty_cache(mb_alloc *a) {
  if (a->err) return a->err;
  release_cached(a);
  return a->err;
}

const mb_alloc_stats *mb_alloc_get_stats(const mb_alloc *a) { return &a->st; }

const char *mb_alloc_action_name(int action) {
  static const char *const names[] = {"segment_alloc", "segment_free", "segment_map", "segment_unmap", "oom"};
  return action >= 0 && action <= MB_SEG_OOM ? names[action] : "unknown";
}

void mb_alloc_observe(mb_alloc *a, mb_alloc_observer fn, void *ctx) {
  a->observe = fn;
  a->observe_ctx = ctx;
}

void mb_alloc_reset(mb_alloc *a) {
  a->n_b = 0;
  a->n_spare = 0;
  a->n_xs = 0;
  for (int k = 0; k < 2; k++) {
    a->pools[k].blocks.n = a->pools[k].unmapped.n = 0;
    a->pools[k].calls = 0;
  }
  a->next_addr = FIRST_ADDR;
  memset(&a->st, 0, sizeof a->st);
  a->err = MB_OK;
}

int mb_alloc_create(const mb_alloc_config *c, mb_alloc **out) {
  *out = calloc(1, sizeof **out);
  if (!*out) return MB_E_NOMEM;
  (*out)->c = *c;
  (*out)->pools[0].small = true;
  for (int k = 0; k < MB_ALLOC_INTERVALS; k++) (*out)->any_divisions |= c->roundup_divisions[k] > 1;
  mb_alloc_reset(*out);
  return MB_OK;
}

void mb_alloc_free(mb_alloc *a) {
  if (!a) return;
  free(a->b);
  free(a->spare);
  free(a->xs);
  free(a->scratch);
  for (int k = 0; k < 2; k++) {
    free(a->pools[k].blocks.ids);
    free(a->pools[k].unmapped.ids);
  }
  free(a);
}
