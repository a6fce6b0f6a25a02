/* The training setup handle (internal layout). */
#ifndef MB_BUDGET_SETUP_H
#define MB_BUDGET_SETUP_H
#include <stdbool.h>
#include "graph/graph.h"
#include "membudget/membudget.h"
#include "util/arena.h"

struct mb_setup {
  char **freeze;
  char **trainable;
  size_t n_freeze, n_trainable;
  char **dim_names;     /* named dim values, e.g. batch=8 */
  int64_t *dim_values;
  size_t n_dims;
  int64_t batch;        /* -1: not set; else the batch size for the batch dim */
  char *batch_dim;      /* the batch dim's name when given explicitly, else NULL (automatic) */
  mb_arena arena;       /* bound graph-input tensors live here */
  mb_const_tensor *bound;  /* bound[k]: graph input k (rank 0 with dtype 0 = not bound) */
  bool *is_bound;
  size_t n_bound;
  char errmsg[1536];
};

/* Whether a parameter or embedding called `name` trains under s (NULL: everything trains). */
bool mb_setup_trains(const mb_setup *s, const char *name);
/* The tensor bound to graph input k, or NULL. */
const mb_const_tensor *mb_setup_bound_input(const mb_setup *s, size_t k);
#endif
