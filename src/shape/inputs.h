/* What shape inference binds a model's graph inputs with: the caller's dims, the batch dim,
 * the per-sample dims of batches of graphs and tensors given for graph inputs. The budget
 * fills it from the setup (budget/shape_inputs.c); it points into the setup, which must
 * outlive it and not change while it is used. */
#ifndef MB_SHAPE_INPUTS_H
#define MB_SHAPE_INPUTS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph/graph.h"
#include "shape/batching.h"

typedef struct mb_shape_inputs {
  char *const *dim_names;       /* symbolic dims and data-dependent bounds by name (--dim) */
  const int64_t *dim_values;
  size_t n_dims;
  const char *batch_dim;        /* the batch dim's name when given, else NULL: the graph's */
  const mb_batching *batching;  /* per-sample dims (batches of graphs); NULL: none */
  const mb_const_tensor *bound; /* bound[k]: a tensor given for graph input k, where is_bound[k] */
  const bool *is_bound;
  size_t n_bound;
  const mb_limits *limits;      /* limit.unroll; NULL: the defaults (util/limits.h) */
} mb_shape_inputs;
#endif
