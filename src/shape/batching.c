#include "shape/batching.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "membudget/membudget.h"

/* ---- the per-sample dims ---- */

int mb_batching_column(const mb_batching *b, const char *name) {
  const mb_graph_sizes *z = &b->sizes;
  for (size_t k = 0; k < z->n_dims; k++)
    if (!strcmp(z->dims[k], name)) return (int)k;
  return -1;
}

int mb_batching_per_sample_index(const mb_batching *b, const char *name) {
  for (size_t k = 0; k < b->n; k++)
    if (!strcmp(b->names[k], name)) return (int)k;
  return -1;
}

size_t mb_batching_num_sample_dims(const mb_batching *b) {
  if (!b) return 0;
  size_t n = b->n;
  for (size_t k = 0; k < b->sizes.n_dims; k++) n += mb_batching_per_sample_index(b, b->sizes.dims[k]) < 0;
  return n;
}

const char *mb_batching_sample_dim(const mb_batching *b, size_t i) {
  if (!b) return NULL;
  if (i < b->n) return b->names[i];
  i -= b->n;
  for (size_t k = 0; k < b->sizes.n_dims; k++)
    if (mb_batching_per_sample_index(b, b->sizes.dims[k]) < 0 && i-- == 0) return b->sizes.dims[k];
  return NULL;
}

int mb_batching_sample_index(const mb_batching *b, const char *name) {
  size_t n = mb_batching_num_sample_dims(b);
  for (size_t i = 0; i < n; i++)
    if (!strcmp(mb_batching_sample_dim(b, i), name)) return (int)i;
  return -1;
}

int64_t mb_batching_limit(const mb_batching *b) {
  return b && b->sizes.n_graphs ? b->sizes.n_graphs : INT64_MAX;
}

int mb_batching_rule(const mb_batching *b) {
  if (!b) return MB_BATCH_PLAIN;
  if (b->sizes.n_graphs) return b->quantile > 0 ? MB_BATCH_QUANTILE : MB_BATCH_LARGEST;
  return b->n ? MB_BATCH_PER_SAMPLE : MB_BATCH_PLAIN;
}

const char *mb_batching_unit(const mb_batching *b) {
  if (b && b->unit) return b->unit;
  return mb_batching_rule(b) == MB_BATCH_PLAIN ? "samples" : "graphs";
}

int64_t mb_batching_num_batches(const mb_batching *b) {
  return b->batches > 0 ? b->batches : MB_BATCHING_DEFAULT_BATCHES;
}

/* The rank of the quantile among the sampled batches: ceil(Q K), at least 1, at most K. */
int64_t mb_batching_covered_batches(const mb_batching *b) {
  int64_t K = mb_batching_num_batches(b);
  double want = b->quantile * (double)K;
  int64_t need = (int64_t)want;
  if ((double)need < want) need++;
  return need < 1 ? 1 : need > K ? K : need;
}

/* ---- random batches ---- */

static uint64_t splitmix(uint64_t *x) {
  uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/* The 128-bit product of a and b as (high, low), portably: the same stream on every platform. */
static uint64_t mul_hi_lo(uint64_t a, uint64_t b, uint64_t *lo) {
  uint64_t a0 = a & 0xffffffffu, a1 = a >> 32, b0 = b & 0xffffffffu, b1 = b >> 32;
  uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
  uint64_t mid = (p00 >> 32) + (p01 & 0xffffffffu) + (p10 & 0xffffffffu);
  *lo = (mid << 32) | (p00 & 0xffffffffu);
  return p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
}

/* uniform in [0, n), unbiased: Lemire's multiply-shift (no division on the usual path) */
static uint64_t below(uint64_t *state, uint64_t n) {
  uint64_t low, high = mul_hi_lo(splitmix(state), n, &low);
  if (low < n) {
    uint64_t threshold = (0 - n) % n;
    while (low < threshold) high = mul_hi_lo(splitmix(state), n, &low);
  }
  return high;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* number of entries of sorted (ascending, n) that are <= v */
static int64_t upper_bound(const int64_t *sorted, int64_t n, int64_t v) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (sorted[mid] <= v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* The quantile point of K random batches of G graphs: per dim, the sum over the batch. A batch
 * is a uniformly random G-subset (what a shuffled loader's full batches are), drawn by a partial
 * Fisher-Yates shuffle (of the G - or the M - G left out - graphs) that is undone afterwards.
 * The point: per dim, an order statistic of the K sums, the same rank r for every dim. Batch b is
 * covered from rank r_b, the largest over the dims of how many sums are <= its own; r is the
 * ceil(Q K)-th smallest r_b, so at least ceil(Q K) batches have no dim above the point. */
static int quantile_point(const mb_batching *bt, int64_t G, int64_t *point, mb_diag *d) {
  const mb_graph_sizes *z = &bt->sizes;
  int64_t M = z->n_graphs, K = mb_batching_num_batches(bt);
  size_t D = z->n_dims;
  bool complement = G > M / 2;
  int64_t k = complement ? M - G : G;
  uint32_t *idx = malloc((size_t)M * sizeof *idx + 1);
  uint32_t *swaps = malloc((size_t)k * sizeof *swaps + 1);
  int64_t *sums = malloc((size_t)K * D * sizeof *sums + 1);
  int64_t *sorted = malloc((size_t)K * D * sizeof *sorted + 1);
  int64_t *rank = malloc((size_t)K * sizeof *rank + 1);
  int64_t total[MB_BATCHING_MAX_DIMS] = {0};
  int rc = idx && swaps && sums && sorted && rank ? MB_OK : mb_fail(d, MB_E_NOMEM, "out of memory");
  if (rc == MB_OK) {
    for (int64_t g = 0; g < M; g++) idx[g] = (uint32_t)g;
    for (size_t j = 0; j < D; j++) total[j] = z->prefix[j * (size_t)(M + 1) + (size_t)M];
    uint64_t state = MB_BATCHING_QUANTILE_SEED ^ ((uint64_t)G * UINT64_C(0xd1b54a32d192ed03));
    for (int64_t b = 0; b < K; b++) {
      int64_t *sum = &sums[(size_t)b * D];
      memset(sum, 0, D * sizeof *sum);
      for (int64_t i = 0; i < k; i++) {
        uint64_t j = (uint64_t)i + below(&state, (uint64_t)(M - i));
        uint32_t t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
        swaps[i] = (uint32_t)j;
        const int64_t *row = &z->values[(size_t)idx[i] * D];
        for (size_t c = 0; c < D; c++) sum[c] += row[c];
      }
      for (int64_t i = k - 1; i >= 0; i--) { /* undo: idx is the identity again */
        uint32_t t = idx[i];
        idx[i] = idx[swaps[i]];
        idx[swaps[i]] = t;
      }
      if (complement)
        for (size_t c = 0; c < D; c++) sum[c] = total[c] - sum[c];
    }
    for (size_t c = 0; c < D; c++) {
      int64_t *col = &sorted[c * (size_t)K];
      for (int64_t b = 0; b < K; b++) col[b] = sums[(size_t)b * D + c];
      qsort(col, (size_t)K, sizeof *col, cmp_i64);
    }
    for (int64_t b = 0; b < K; b++) { /* the rank at which batch b is covered in every dim */
      int64_t r = 0;
      for (size_t c = 0; c < D; c++) {
        int64_t u = upper_bound(&sorted[c * (size_t)K], K, sums[(size_t)b * D + c]);
        if (u > r) r = u;
      }
      rank[b] = r;
    }
    qsort(rank, (size_t)K, sizeof *rank, cmp_i64);
    int64_t r = rank[mb_batching_covered_batches(bt) - 1];
    for (size_t c = 0; c < D; c++) point[c] = sorted[c * (size_t)K + (size_t)(r - 1)];
  }
  free(idx);
  free(swaps);
  free(sums);
  free(sorted);
  free(rank);
  return rc;
}

int mb_batching_dims_at(const mb_batching *b, int64_t G, int64_t *values, mb_diag *d) {
  const mb_graph_sizes *z = &b->sizes;
  size_t n = mb_batching_num_sample_dims(b);
  if (G < 0) return mb_fail(d, MB_E_INVALID_ARG, "a batch of %lld graphs", (long long)G);
  if (z->n_graphs && G > z->n_graphs)
    return mb_fail(d, MB_E_INVALID_ARG, "a batch of %lld graphs: the graph sizes%s%s list only %lld graphs, and a "
                   "loader cannot make a larger batch", (long long)G, z->source ? " in " : "", z->source ? z->source : "",
                   (long long)z->n_graphs);
  int64_t point[MB_BATCHING_MAX_DIMS];
  if (z->n_graphs && b->quantile > 0 && quantile_point(b, G, point, d) != MB_OK) return d->status;
  for (size_t i = 0; i < n; i++) {
    const char *name = mb_batching_sample_dim(b, i);
    int c = mb_batching_column(b, name);
    if (c >= 0 && z->n_graphs) {
      values[i] = b->quantile > 0 ? point[c] : z->prefix[(size_t)c * (size_t)(z->n_graphs + 1) + (size_t)G];
    } else {
      int p = mb_batching_per_sample_index(b, name);
      int64_t v;
      if (p < 0 || __builtin_mul_overflow(b->counts[p], G, &v) || v > (INT64_C(1) << 50))
        return mb_fail(d, MB_E_LIMIT, "per_sample dim '%s' at %lld graphs would be absurdly large", name, (long long)G);
      values[i] = v;
    }
  }
  return MB_OK;
}
