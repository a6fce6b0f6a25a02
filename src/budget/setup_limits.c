/* The limit.NAME keys of mb_setup_set: the input limits of util/limits.h. The load-time ones
 * reach the loader through mb_model_load_file_setup (api/model_load.c), the unroll budget
 * reaches shape inference through the setup's shape inputs (shape_inputs.c). */
#include <stdio.h>
#include <string.h>

#include "budget/setup.h"
#include "util/format.h"

int mb_setup_limits_option(mb_setup *s, const char *key, const char *value, int *rc) {
  if (strncmp(key, "limit.", 6) != 0) return 0;
  int id = mb_limit_find(key + 6);
  if (id < 0) {
    char names[256] = "";
    for (int i = 0; i < MB_LIMIT_COUNT; i++)
      snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", mb_limit_name(i));
    snprintf(s->errmsg, sizeof s->errmsg, "unknown limit '%s': the limits are %s", key + 6, names);
    *rc = MB_E_INVALID_ARG;
    return 1;
  }
  uint64_t v = 0, ceiling = mb_limit_ceiling(id);
  int64_t n = 0;
  bool ok;
  if (mb_limit_is_bytes(id)) ok = mb_parse_bytes(value, &v) == 0;
  else ok = mb_setup_digits(value, 0, INT64_MAX, &n), v = (uint64_t)n;
  if (!ok || v > ceiling) {
    char want[160];
    snprintf(want, sizeof want, "%s up to %llu (0: the default, %llu)",
             mb_limit_is_bytes(id) ? "a size such as 64MiB" : "a count", (unsigned long long)ceiling,
             (unsigned long long)mb_limit_default(id));
    *rc = mb_setup_bad(s, key, value, want);
    return 1;
  }
  s->limits.value[id] = v;
  *rc = MB_OK;
  return 1;
}
