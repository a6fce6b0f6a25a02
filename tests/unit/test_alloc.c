/* The caching allocator model, one rule at a time. Every expected figure is derived by hand
 * from the rule it tests (PyTorch's CUDACachingAllocator.cpp, cited per test), not taken from
 * the model's output. MiB = 1,048,576 bytes. */
#include "alloc/caching.h"
#include "alloc/config.h"
#include "mbtest.h"
#include "membudget/membudget.h"

#define MiB (UINT64_C(1) << 20)

static mb_alloc *make(const char *conf, uint64_t device_total, uint64_t limit) {
  mb_alloc_config c;
  mb_alloc_config_default(&c);
  char err[256] = "";
  if (conf && mb_alloc_config_parse(&c, conf, err, sizeof err) != MB_OK) {
    fprintf(stderr, "bad test config: %s\n", err);
    return NULL;
  }
  c.device_total = device_total;
  c.limit = limit;
  mb_alloc *a = NULL;
  mb_alloc_create(&c, &a);
  return a;
}

static int32_t get(mb_alloc *a, uint64_t size, uint64_t stream) {
  int32_t id = -1;
  int rc = mb_alloc_malloc(a, size, stream, &id);
  CHECK_EQ_I64(rc, MB_OK);
  return id;
}

static void put(mb_alloc *a, int32_t id) { CHECK_EQ_I64(mb_alloc_release(a, id), MB_OK); }

#define ST(a) mb_alloc_get_stats(a)

/* round_size: at least 512 bytes, else the next multiple of 512 */
static void test_rounding(void) {
  mb_alloc_config c;
  mb_alloc_config_default(&c);
  CHECK_EQ_U64(mb_alloc_round(&c, 1), 512);
  CHECK_EQ_U64(mb_alloc_round(&c, 512), 512);
  CHECK_EQ_U64(mb_alloc_round(&c, 513), 1024);
  CHECK_EQ_U64(mb_alloc_round(&c, 1000000), 1954 * 512); /* 1953.125 blocks */
}

/* small pool: requests up to 1 MiB are carved from 2 MiB segments (get_pool,
 * get_allocation_size); a small block splits while 512 bytes remain (should_split) */
static void test_small_pool(void) {
  mb_alloc *a = make(NULL, 0, 0);
  get(a, 4000, 0);                      /* 4096 of a new 2 MiB segment */
  CHECK_EQ_U64(ST(a)->reserved, 2 * MiB);
  CHECK_EQ_U64(ST(a)->allocated, 4096);
  get(a, MiB, 0);                       /* fits the 2 MiB - 4096 left */
  CHECK_EQ_U64(ST(a)->segment_allocs, 1);
  get(a, MiB, 0);                       /* 1 MiB - 4096 left: a second segment */
  CHECK_EQ_U64(ST(a)->segment_allocs, 2);
  CHECK_EQ_U64(ST(a)->reserved, 4 * MiB);
  mb_alloc_free(a);

  a = make(NULL, 0, 0);
  get(a, MiB, 0);                       /* 1 MiB left */
  get(a, MiB - 512, 0);                 /* 512 bytes left: still split off */
  get(a, 512, 0);                       /* and used: no new segment */
  CHECK_EQ_U64(ST(a)->segment_allocs, 1);
  CHECK_EQ_U64(ST(a)->allocated, 2 * MiB);
  mb_alloc_free(a);
}

/* large pool: 1-10 MiB requests take a 20 MiB segment and split it while more than 1 MiB
 * would remain */
static void test_large_pool_20mib(void) {
  mb_alloc *a = make(NULL, 0, 0);
  for (int k = 0; k < 3; k++) get(a, 6 * MiB, 0); /* 20 -> 14 -> 8 -> 2 MiB left */
  CHECK_EQ_U64(ST(a)->segment_allocs, 1);
  CHECK_EQ_U64(ST(a)->reserved, 20 * MiB);
  get(a, 6 * MiB, 0);                   /* 2 MiB is too small: a second 20 MiB segment */
  CHECK_EQ_U64(ST(a)->segment_allocs, 2);
  CHECK_EQ_U64(ST(a)->reserved, 40 * MiB);
  CHECK_EQ_U64(ST(a)->allocated, 24 * MiB);
  mb_alloc_free(a);
}

/* >= 10 MiB: the segment is the request rounded up to 2 MiB; 1 MiB or less left over is not
 * split off, so the block (and memory_allocated) includes it */
static void test_large_rounding_and_no_split(void) {
  mb_alloc *a = make(NULL, 0, 0);
  get(a, 10 * MiB + MiB / 2, 0);        /* 12 MiB segment, 1.5 MiB split off */
  CHECK_EQ_U64(ST(a)->reserved, 12 * MiB);
  CHECK_EQ_U64(ST(a)->allocated, 10 * MiB + MiB / 2);
  get(a, 11 * MiB + MiB / 2, 0);        /* 12 MiB segment, 0.5 MiB stays in the block */
  CHECK_EQ_U64(ST(a)->reserved, 24 * MiB);
  CHECK_EQ_U64(ST(a)->allocated, 10 * MiB + MiB / 2 + 12 * MiB);
  get(a, 19 * MiB, 0);                  /* 20 MiB segment, exactly 1 MiB left: not split */
  CHECK_EQ_U64(ST(a)->allocated, 10 * MiB + MiB / 2 + 32 * MiB);
  get(a, MiB + 512, 0);                 /* the 1.5 MiB piece of the first segment serves it */
  CHECK_EQ_U64(ST(a)->segment_allocs, 3);
  mb_alloc_free(a);
}

/* get_free_block: the smallest cached block that fits (best fit), not the first */
static void test_best_fit(void) {
  mb_alloc *a = make(NULL, 0, 0);
  int32_t x = get(a, 30 * MiB, 0), y = get(a, 24 * MiB, 0);
  put(a, x);
  put(a, y);
  get(a, 22 * MiB, 0);                  /* the 24 MiB block (2 MiB split off) */
  get(a, 29 * MiB, 0);                  /* so the 30 MiB block is still there */
  CHECK_EQ_U64(ST(a)->segment_allocs, 2);
  mb_alloc_free(a);
}

/* per-stream pools: a block freed on one stream is reused only by that stream */
static void test_streams(void) {
  mb_alloc *a = make(NULL, 0, 0);
  put(a, get(a, 8 * MiB, 1));
  get(a, 8 * MiB, 2);                   /* stream 1's free 20 MiB segment is not for stream 2 */
  CHECK_EQ_U64(ST(a)->segment_allocs, 2);
  get(a, 8 * MiB, 1);
  CHECK_EQ_U64(ST(a)->segment_allocs, 2);
  mb_alloc_free(a);
}

/* max_split_size_mb: blocks at least this big are never split, serve no smaller request, and
 * serve a larger one only within max_non_split_rounding (20 MiB) of its size */
static void test_max_split_size(void) {
  mb_alloc *a = make("max_split_size_mb:30", 0, 0);
  put(a, get(a, 40 * MiB, 0));          /* a cached oversize 40 MiB block */
  get(a, 25 * MiB, 0);                  /* below max_split: not from it; a 26 MiB segment */
  CHECK_EQ_U64(ST(a)->segment_allocs, 2);
  CHECK_EQ_U64(ST(a)->reserved, 66 * MiB);
  get(a, 35 * MiB, 0);                  /* 40 < 35 + 20: served whole, not split */
  CHECK_EQ_U64(ST(a)->segment_allocs, 2);
  CHECK_EQ_U64(ST(a)->allocated, 26 * MiB + 40 * MiB);
  mb_alloc_free(a);

  a = make("max_split_size_mb:30", 0, 0);
  put(a, get(a, 60 * MiB, 0));
  get(a, 32 * MiB, 0);                  /* 60 >= 32 + 20: too wasteful, a new segment */
  CHECK_EQ_U64(ST(a)->segment_allocs, 2);
  mb_alloc_free(a);

  a = make("max_split_size_mb:30,max_non_split_rounding_mb:30", 0, 0);
  put(a, get(a, 60 * MiB, 0));
  get(a, 32 * MiB, 0);                  /* 60 < 32 + 30 now */
  CHECK_EQ_U64(ST(a)->segment_allocs, 1);
  mb_alloc_free(a);
}

/* release_available_cached_blocks: when the device has no room, cached oversize blocks are
 * freed (the smallest big enough) and the segment is asked for again */
static void test_release_oversize_on_limit(void) {
  mb_alloc *a = make("max_split_size_mb:30", 0, 80 * MiB);
  put(a, get(a, 60 * MiB, 0));
  get(a, 35 * MiB, 0);                  /* 60 >= 55: not used; 60 + 36 > 80: free the 60 */
  CHECK_EQ_U64(ST(a)->segment_frees, 1);
  CHECK_EQ_U64(ST(a)->retries, 0);
  CHECK_EQ_U64(ST(a)->reserved, 36 * MiB);
  CHECK_EQ_U64(ST(a)->reserved_peak, 60 * MiB);
  mb_alloc_free(a);
}

/* release_cached_blocks + alloc_block(retry): every unsplit cached segment goes, then the
 * segment is tried once more; if that fails too, out of memory */
static void test_release_all_and_oom(void) {
  mb_alloc *a = make(NULL, 0, 50 * MiB);
  int32_t x = get(a, 30 * MiB, 0), y = get(a, 12 * MiB, 0);
  put(a, x);
  put(a, y);
  get(a, 40 * MiB, 0);                  /* 42 + 40 > 50: both cached segments freed, retried */
  CHECK_EQ_U64(ST(a)->segment_frees, 2);
  CHECK_EQ_U64(ST(a)->retries, 1);
  CHECK_EQ_U64(ST(a)->reserved, 40 * MiB);
  int32_t id = 0;
  CHECK_EQ_I64(mb_alloc_malloc(a, 20 * MiB, 0, &id), MB_ALLOC_OOM); /* 40 + 20 > 50, nothing cached */
  CHECK_EQ_U64(ST(a)->ooms, 1);
  mb_alloc_free(a);
}

/* roundup_power2_divisions: above 512 x divisions a request rounds up to the next of N equal
 * steps between powers of two (round_size, roundup_power2_next_division) */
static void test_roundup_power2(void) {
  mb_alloc_config c;
  mb_alloc_config_default(&c);
  char err[256];
  CHECK_EQ_I64(mb_alloc_config_parse(&c, "roundup_power2_divisions:4", err, sizeof err), MB_OK);
  CHECK_EQ_U64(mb_alloc_round(&c, 1200), 1536);              /* below 512 x 4: plain rounding */
  CHECK_EQ_U64(mb_alloc_round(&c, 5 * MiB + 1), 6 * MiB);    /* 4, 5, 6, 7 MiB steps */
  CHECK_EQ_U64(mb_alloc_round(&c, 5 * MiB), 5 * MiB);        /* on a step already */
  CHECK_EQ_U64(mb_alloc_round(&c, 64 * MiB), 64 * MiB);      /* a power of two */
  CHECK_EQ_U64(mb_alloc_round(&c, 100 * MiB), 112 * MiB);    /* 64, 80, 96, 112 MiB */
  mb_alloc *a = make("roundup_power2_divisions:4", 0, 0);
  get(a, 5 * MiB + 1, 0);
  CHECK_EQ_U64(ST(a)->allocated, 6 * MiB);
  mb_alloc_free(a);
  /* per interval: [1 MiB: 2 divisions and below, 64 MiB: 8, above 64 MiB: none] */
  mb_alloc_config_default(&c);
  CHECK_EQ_I64(mb_alloc_config_parse(&c, "roundup_power2_divisions:[1:2,64:8,>:0]", err, sizeof err), MB_OK);
  CHECK_EQ_U64(mb_alloc_round(&c, 3 * MiB + 1), 3 * MiB + 512); /* 2 MiB interval: not named, 0 */
  CHECK_EQ_U64(mb_alloc_round(&c, MiB + 1), MiB + MiB / 2);  /* 1 MiB interval: halves */
  CHECK_EQ_U64(mb_alloc_round(&c, 65 * MiB), 72 * MiB);      /* 64 MiB: eighths */
  CHECK_EQ_U64(mb_alloc_round(&c, 129 * MiB), 129 * MiB);    /* above: plain 512 rounding */
}

/* garbage_collection_threshold: with a memory fraction set and reserved above threshold x
 * allowed, a miss first frees unsplit large cached segments older than the average age
 * (age: the pool's lookups since the block was cached) */
static void test_garbage_collection(void) {
  /* allowed = 1.0 x 100 MiB, threshold 0.8 x 100 = 80 MiB; every large-pool lookup ages */
  mb_alloc *a = make("garbage_collection_threshold:0.8,per_process_memory_fraction:1.0", 100 * MiB, 0);
  int32_t x = get(a, 30 * MiB, 0);      /* lookup 1 (reserved 0: no collection) */
  int32_t y = get(a, 24 * MiB, 0);      /* lookup 2 */
  get(a, 20 * MiB, 2);                  /* lookup 3; kept: reserved 74 */
  put(a, x);                            /* cached at 3 */
  for (int k = 0; k < 3; k++) put(a, get(a, 12 * MiB, 1)); /* lookups 4 (miss: 74 <= 80), 5, 6; 86 */
  put(a, y);                            /* cached at 6; the 12 MiB block at 6 too */
  get(a, 40 * MiB, 0);                  /* lookup 7 misses; reserved 86 > 80: collect 6 MiB */
  /* ages 30 MiB: 4, 24 MiB: 1, 12 MiB: 1; average 2: only the 30 MiB block goes (30 >= 6) */
  CHECK_EQ_U64(ST(a)->segment_frees, 1);
  CHECK_EQ_U64(ST(a)->reserved, 24 * MiB + 20 * MiB + 12 * MiB + 40 * MiB);
  mb_alloc_free(a);
  /* without a memory fraction there is no collection */
  a = make("garbage_collection_threshold:0.5", 100 * MiB, 0);
  x = get(a, 30 * MiB, 0);
  y = get(a, 24 * MiB, 0);
  put(a, x);
  put(a, y);
  get(a, 40 * MiB, 0);
  CHECK_EQ_U64(ST(a)->segment_frees, 0);
  CHECK_EQ_U64(ST(a)->reserved, 94 * MiB);
  mb_alloc_free(a);
}

/* expandable_segments: one segment per stream and pool grows by 20 MiB pages (large pool);
 * a free block before the unmapped tail grows into it; any remainder of 512 bytes splits */
static void test_expandable(void) {
  mb_alloc *a = make("expandable_segments:True", 80 * 1024 * MiB, 0);
  int32_t x = get(a, 6 * MiB, 0);       /* one page mapped: 6 MiB used, 14 MiB free */
  CHECK_EQ_U64(ST(a)->reserved, 20 * MiB);
  int32_t y = get(a, 30 * MiB, 0);      /* the 14 MiB grows by a page: 34 MiB, 30 used */
  CHECK_EQ_U64(ST(a)->reserved, 40 * MiB);
  CHECK_EQ_U64(ST(a)->maps, 2);
  CHECK_EQ_U64(ST(a)->segment_allocs, 0);
  CHECK_EQ_U64(ST(a)->peak_segments, 1); /* one contiguous mapped range */
  CHECK_EQ_U64(ST(a)->peak_cached_free, 4 * MiB);
  put(a, x);
  put(a, y);
  get(a, 38 * MiB, 0);                  /* the merged 40 MiB range serves it */
  CHECK_EQ_U64(ST(a)->reserved, 40 * MiB);
  mb_alloc_free(a);
  /* the same requests without: 20 + 30 MiB in two segments */
  a = make(NULL, 0, 0);
  get(a, 6 * MiB, 0);
  get(a, 30 * MiB, 0);
  CHECK_EQ_U64(ST(a)->reserved, 50 * MiB);
  CHECK_EQ_U64(ST(a)->peak_segments, 2);
  mb_alloc_free(a);
  /* empty_cache unmaps the free pages; a wholly unmapped segment is released */
  a = make("expandable_segments:True", 80 * 1024 * MiB, 0);
  put(a, get(a, 30 * MiB, 0));          /* two pages */
  CHECK_EQ_I64(mb_alloc_empty_cache(a), MB_OK);
  CHECK_EQ_U64(ST(a)->reserved, 0);
  CHECK_EQ_U64(ST(a)->unmaps, 1);
  mb_alloc_free(a);
}

static void test_config_errors(void) {
  mb_alloc_config c;
  char err[256];
  struct { const char *conf, *says; int rc; } bad[] = {
    {"max_split_size_mb:10", "max_split_size_mb: 10 is too small, must be >= 20", MB_E_INVALID_ARG},
    {"max_split_size_mb:abc", "max_split_size_mb: 'abc' is not a whole number", MB_E_INVALID_ARG},
    {"expandable_segments:true", "expandable_segments: 'true' is not True or False", MB_E_INVALID_ARG},
    {"garbage_collection_threshold:1.5", "garbage_collection_threshold: '1.5' is not in (0.0, 1.0)", MB_E_INVALID_ARG},
    {"roundup_power2_divisions:3", "roundup_power2_divisions: '3' is not a power of 2", MB_E_INVALID_ARG},
    {"roundup_power2_divisions:[3:2]", "interval '3' is not a power of 2", MB_E_INVALID_ARG},
    {"roundup_power2_divisions:[1:2", "missing ']'", MB_E_INVALID_ARG},
    {"max_split_sizemb:100", "unrecognized key 'max_split_sizemb'", MB_E_INVALID_ARG},
    {"max_split_size_mb", "expected ':' after 'max_split_size_mb'", MB_E_INVALID_ARG},
    /* whitespace is dropped, as PyTorch's tokenizer does: the two words run together */
    {"max_split_size_mb:100 expandable_segments:True", "'100expandable_segments' is not a whole number", MB_E_INVALID_ARG},
    {"max_split_size_mb:100;expandable_segments:True", "'100;expandable_segments' is not a whole number", MB_E_INVALID_ARG},
    {"max_split_size_mb:100,,", "expected a key, found ','", MB_E_INVALID_ARG},
    {"backend:cudaMallocAsync", "backend:cudaMallocAsync", MB_E_UNSUPPORTED},
    {",", "expected a key", MB_E_INVALID_ARG},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    mb_alloc_config_default(&c);
    err[0] = '\0';
    CHECK_EQ_I64(mb_alloc_config_parse(&c, bad[k].conf, err, sizeof err), bad[k].rc);
    CHECK_CONTAINS(err, bad[k].says);
    CHECK_EQ_U64(c.max_split_size, UINT64_MAX); /* nothing applied on failure */
  }
  mb_alloc_config_default(&c);
  CHECK_EQ_I64(mb_alloc_config_parse(&c, " max_split_size_mb : 128 , expandable_segments:True,"
                                          "pinned_use_cuda_host_register:True,backend:native,"
                                          "expandable_segments_reserve_by_class:[a:1,b:2],", err, sizeof err), MB_OK);
  CHECK_EQ_U64(c.max_split_size, 128 * MiB);
  CHECK(c.expandable);
  /* the 2.15 list semantics (AllocatorConfig tests): the first entry covers the intervals
   * below it, '>' those after the last one named, unnamed ones in between stay 0 */
  mb_alloc_config_default(&c);
  CHECK_EQ_I64(mb_alloc_config_parse(&c, "roundup_power2_divisions:[128:8,256:16,512:1,2048:8,>:2]", err, sizeof err), MB_OK);
  CHECK_EQ_U64(mb_alloc_divisions(&c, 64 * MiB), 8);
  CHECK_EQ_U64(mb_alloc_divisions(&c, 128 * MiB), 8);
  CHECK_EQ_U64(mb_alloc_divisions(&c, 256 * MiB), 16);
  CHECK_EQ_U64(mb_alloc_divisions(&c, 512 * MiB), 1);
  CHECK_EQ_U64(mb_alloc_divisions(&c, 1024 * MiB), 0);
  CHECK_EQ_U64(mb_alloc_divisions(&c, 2048 * MiB), 8);
  CHECK_EQ_U64(mb_alloc_divisions(&c, 4096 * MiB), 2);
}

int main(void) {
  test_rounding();
  test_small_pool();
  test_large_pool_20mib();
  test_large_rounding_and_no_split();
  test_best_fit();
  test_streams();
  test_max_split_size();
  test_release_oversize_on_limit();
  test_release_all_and_oom();
  test_roundup_power2();
  test_garbage_collection();
  test_expandable();
  test_config_errors();
  return mbt_finish("alloc");
}
