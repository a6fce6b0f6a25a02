/* The setup keys that choose what an estimate reports beside the budget (mb_estimate_json's
 * "modules", "top" and "advice" members; the CLI's --by-module, --depth, --top, --advise):
 *   by_module         0 | 1: the module tree (mb_modules_create)             (default 0)
 *   module_depth      N: its deepest level, 0 every level                    (default 0)
 *   top               N: the largest tensors alive at the allocated peak     (default 0)
 *   advise            never | auto | always (0 | 1): simulated advice; auto when the budget
 *                     does not fit or a given batch is within 10% of the usable memory
 *   advise_trainable  GLOB: what the freezing what-if trains ("" chooses: LoRA adapters, else
 *                     the last top-level module with parameters) */
#include <stdlib.h>
#include <string.h>

#include "budget/setup.h"
#include "util/glob.h"

static int count(mb_setup *s, const char *key, const char *value, int32_t *out) {
  int64_t v = 0;
  int rc = mb_setup_int(s, key, value, 0, 1000000, &v);
  if (rc == MB_OK) *out = (int32_t)v;
  return rc;
}

int mb_setup_report_option(mb_setup *s, const char *key, const char *value, int *rc) {
  mb_report_opts *r = &s->report;
  if (!strcmp(key, "by_module")) {
    *rc = mb_setup_bool(s, key, value, &r->by_module);
  } else if (!strcmp(key, "module_depth")) {
    *rc = count(s, key, value, &r->module_depth);
  } else if (!strcmp(key, "top")) {
    *rc = count(s, key, value, &r->top);
  } else if (!strcmp(key, "advise")) {
    if (!strcmp(value, "never") || !strcmp(value, "0")) r->advise = MB_ADVISE_NEVER;
    else if (!strcmp(value, "auto")) r->advise = MB_ADVISE_AUTO;
    else if (!strcmp(value, "always") || !strcmp(value, "1")) r->advise = MB_ADVISE_ALWAYS;
    else *rc = mb_setup_bad(s, key, value, "one of never, auto, always");
  } else if (!strcmp(key, "advise_trainable")) {
    if (*value && !mb_glob_valid(value)) {
      *rc = mb_setup_bad(s, key, value, "a valid glob");
    } else {
      char *copy = NULL;
      if (*value && !(copy = malloc(strlen(value) + 1))) {
        *rc = MB_E_NOMEM;
        return 1;
      }
      if (copy) strcpy(copy, value);
      free(r->advise_trainable);
      r->advise_trainable = copy;
    }
  } else {
    return 0;
  }
  return 1;
}

void mb_setup_report_free(mb_setup *s) {
  free(s->report.advise_trainable);
  s->report.advise_trainable = NULL;
}
