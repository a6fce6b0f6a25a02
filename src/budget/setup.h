/* The training setup handle (internal layout). */
#ifndef MB_BUDGET_SETUP_H
#define MB_BUDGET_SETUP_H
#include <stdbool.h>
#include "membudget/membudget.h"

struct mb_setup {
  char **freeze;
  char **trainable;
  size_t n_freeze, n_trainable;
  char **dim_names;     /* named dim values, e.g. batch=8 */
  int64_t *dim_values;
  size_t n_dims;
  char errmsg[256];
};

/* Whether a parameter or embedding called `name` trains under s (NULL: everything trains). */
bool mb_setup_trains(const mb_setup *s, const char *name);
#endif
