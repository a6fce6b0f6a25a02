/* The setup keys of evaluation inside training and of the teacher output cache:
 *   eval_batch         N | train | "" / 0 (none)
 *   zero_grad          none | zero | none-at-start
 *   ema_swap           0 | 1
 *   eval_keep_outputs  K >= 0
 *   teacher_cache      N >= 0
 * What they mean for the step is in sim/emit.c (emit_eval) and docs/estimate.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget/setup.h"

#define MAX_BATCH (INT64_C(1) << 40)
#define MAX_KEPT (1 << 20)

static int bad(mb_setup *s, const char *key, const char *value, const char *want) {
  snprintf(s->errmsg, sizeof s->errmsg, "%s: '%s' is not %s", key, value, want);
  return MB_E_INVALID_ARG;
}

/* digits only, in [lo, hi] */
static bool count(const char *value, int64_t lo, int64_t hi, int64_t *out) {
  if (!*value) return false;
  int64_t v = 0;
  for (const char *p = value; *p; p++) {
    if (*p < '0' || *p > '9') return false;
    v = v * 10 + (*p - '0');
    if (v > hi) return false;
  }
  if (v < lo) return false;
  *out = v;
  return true;
}

int mb_setup_eval_option(mb_setup *s, const char *key, const char *value, int *rc) {
  mb_eval_opts *e = &s->train.eval;
  int64_t n = 0;
  *rc = MB_OK;
  if (!strcmp(key, "eval_batch")) {
    if (!*value || !strcmp(value, "none")) e->batch = 0;
    else if (!strcmp(value, "train")) e->batch = -1;
    else if (count(value, 0, MAX_BATCH, &n)) e->batch = n;
    else *rc = bad(s, key, value, "a batch size, 'train' (the training batch) or 0 (no evaluation)");
  } else if (!strcmp(key, "zero_grad")) {
    if (!strcmp(value, "none")) e->zero_grad = MB_ZERO_GRAD_NONE;
    else if (!strcmp(value, "zero")) e->zero_grad = MB_ZERO_GRAD_ZERO;
    else if (!strcmp(value, "none-at-start")) e->zero_grad = MB_ZERO_GRAD_NONE_AT_START;
    else *rc = bad(s, key, value, "one of none, zero, none-at-start");
  } else if (!strcmp(key, "ema_swap")) {
    if (!strcmp(value, "1") || !strcmp(value, "true") || !strcmp(value, "on")) e->ema_swap = true;
    else if (!strcmp(value, "0") || !strcmp(value, "false") || !strcmp(value, "off")) e->ema_swap = false;
    else *rc = bad(s, key, value, "0 or 1");
  } else if (!strcmp(key, "eval_keep_outputs")) {
    if (count(value, 0, MAX_KEPT, &n)) e->keep_outputs = n;
    else *rc = bad(s, key, value, "a number of batches in [0, 1048576]");
  } else if (!strcmp(key, "teacher_cache")) {
    if (count(value, 0, MAX_KEPT, &n)) e->teacher_cache = n;
    else *rc = bad(s, key, value, "a number of batches in [0, 1048576]");
  } else {
    return 0;
  }
  return 1;
}
