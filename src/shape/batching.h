/* Batches of graphs: dims that grow with the batch (per-sample dims) and the values they take
 * at a batch of G graphs: G times a count per graph, or from a data set's graph sizes the worst
 * batch a shuffled loader can make or a quantile of random batches. docs/estimate.md, "Batches
 * of graphs". The budget fills it from the setup keys (budget/setup_graphs.c); shape inference
 * binds the per-sample dims with it at each batch size. */
#ifndef MB_SHAPE_BATCHING_H
#define MB_SHAPE_BATCHING_H
#include <stddef.h>
#include <stdint.h>

#include "util/diag.h"

#define MB_BATCHING_MAX_DIMS 64          /* per-sample dims, and graph-size columns */
#define MB_BATCHING_QUANTILE_SEED UINT64_C(1) /* random batches: seeded with this and the batch size */
#define MB_BATCHING_DEFAULT_BATCHES 1000 /* random batches sampled for a quantile when not given */

/* The sizes of a data set's graphs: one row per graph, a column per per-sample dim. Kept sorted
 * descending per dim with prefix sums, so the worst batch of G graphs is O(1). */
typedef struct mb_graph_sizes {
  char **dims;          /* column names: per-sample dims of the graph */
  size_t n_dims;
  int64_t n_graphs;     /* 0: no table */
  int64_t *values;      /* n_graphs x n_dims, row-major, as given */
  int64_t *prefix;      /* per dim: n_graphs + 1 prefix sums of its values sorted descending */
  char *source;         /* the CSV file they were read from, or NULL (given in memory) */
} mb_graph_sizes;

/* The setup keys per_sample, batch_unit, graph_sizes, graph_quantile, graph_batches. */
typedef struct mb_batching {
  char **names;         /* per_sample dims, in the order given */
  int64_t *counts;      /* per graph (1: the dim is the batch itself) */
  size_t n;
  char *unit;           /* batch_unit, or NULL: "graphs" with per-sample dims, else "samples" */
  mb_graph_sizes sizes;
  double quantile;      /* 0: the worst batch (each dim's G largest values summed) */
  int64_t batches;      /* random batches sampled for a quantile */
} mb_batching;

/* The per-sample dims: per_sample's, then graph-size columns not among them. b may be NULL
 * (none). */
size_t mb_batching_num_sample_dims(const mb_batching *b);
const char *mb_batching_sample_dim(const mb_batching *b, size_t i);
/* The index of a per-sample dim among them, -1 when name is not one. */
int mb_batching_sample_index(const mb_batching *b, const char *name);
/* Where a dim is given: its column in the graph-size table, its index among per_sample's
 * names (for counts); -1 where it is not. */
int mb_batching_column(const mb_batching *b, const char *name);
int mb_batching_per_sample_index(const mb_batching *b, const char *name);
/* Their values for a batch of G graphs (values: mb_batching_num_sample_dims entries). A batch
 * larger than the graph-size table fails with MB_E_INVALID_ARG (a loader cannot make it). */
int mb_batching_dims_at(const mb_batching *b, int64_t G, int64_t *values, mb_diag *d);
/* The largest batch the graph-size table allows (its number of graphs), or INT64_MAX. */
int64_t mb_batching_limit(const mb_batching *b);
/* mb_batch_rule (membudget.h) of b, and what a batch counts ("samples", "graphs"). */
int mb_batching_rule(const mb_batching *b);
const char *mb_batching_unit(const mb_batching *b);
/* The random batches a quantile samples, and how many of them its point covers. */
int64_t mb_batching_num_batches(const mb_batching *b);
int64_t mb_batching_covered_batches(const mb_batching *b);
#endif
