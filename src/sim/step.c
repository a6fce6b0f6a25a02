#include "sim/step.h"

#include "util/glob.h"

static bool any_match(char *const *list, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (mb_glob_match(list[i], name)) return true;
  return false;
}

bool mb_trains(const mb_trains_rule *r, const char *name) {
  if (!r) return true;
  if (any_match(r->trainable, r->n_trainable, name)) return true; /* trainable wins */
  return !any_match(r->freeze, r->n_freeze, name);
}
