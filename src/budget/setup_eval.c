/* The setup keys of evaluation inside training and of the teacher output cache:
 *   eval_batch         N | train | "" / 0 (none)
 *   zero_grad          none | zero | none-at-start | before-backward
 *   ema_swap           0 | 1
 *   eval_keep_outputs  K >= 0
 *   teacher_cache      N >= 0
 * What they mean for the step is in sim/emit.c (emit_eval) and docs/estimate.md. */
#include <string.h>

#include "budget/setup.h"

#define MAX_BATCH (INT64_C(1) << 40)
#define MAX_KEPT (1 << 20)

int mb_setup_eval_option(mb_setup *s, const char *key, const char *value, int *rc) {
  mb_eval_opts *e = &s->train.eval;
  int64_t n = 0;
  *rc = MB_OK;
  int k = 0;
  static const char *const zero_grads[] = {"none", "zero", "none-at-start", "before-backward", NULL}; /* enum mb_zero_grad */
  if (!strcmp(key, "eval_batch")) {
    if (!*value || !strcmp(value, "none")) e->batch = 0;
    else if (!strcmp(value, "train")) e->batch = -1;
    else if (mb_setup_digits(value, 0, MAX_BATCH, &n)) e->batch = n;
    else *rc = mb_setup_bad(s, key, value, "a batch size, 'train' (the training batch) or 0 (no evaluation)");
  } else if (!strcmp(key, "zero_grad")) {
    if ((*rc = mb_setup_pick(s, key, value, zero_grads, &k)) == MB_OK) {
      e->zero_grad = k;
      s->train.zero_grad_set = true;
    }
  } else if (!strcmp(key, "ema_swap")) {
    *rc = mb_setup_bool(s, key, value, &e->ema_swap);
  } else if (!strcmp(key, "eval_keep_outputs")) {
    if (mb_setup_digits(value, 0, MAX_KEPT, &n)) e->keep_outputs = n;
    else *rc = mb_setup_bad(s, key, value, "a number of batches in [0, 1048576]");
  } else if (!strcmp(key, "teacher_cache")) {
    if (mb_setup_digits(value, 0, MAX_KEPT, &n)) e->teacher_cache = n;
    else *rc = mb_setup_bad(s, key, value, "a number of batches in [0, 1048576]");
  } else {
    return 0;
  }
  return 1;
}
