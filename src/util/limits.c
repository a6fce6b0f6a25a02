/* The table of input limits (util/limits.h). Why each default is what it is: docs/limits.md. */
#include "util/limits.h"

#include <stdio.h>
#include <string.h>

#include "membudget/membudget.h"

typedef struct limit_def {
  const char *name;
  uint64_t dflt, ceiling;
  const char *unit; /* what `have` counts, in messages */
} limit_def;

static const limit_def defs[MB_LIMIT_COUNT] = {
    [MB_LIMIT_FILE_BYTES] = {"file_bytes", 4ull << 30, UINT64_MAX, "bytes"},
    [MB_LIMIT_NODES] = {"nodes", 1000000, INT32_MAX / 2, "nodes"},
    [MB_LIMIT_TENSORS] = {"tensors", 4000000, INT32_MAX / 2, "tensors"},
    [MB_LIMIT_SUBGRAPH_DEPTH] = {"subgraph_depth", 32, MB_LIMIT_DEPTH_CEILING, "levels"},
    [MB_LIMIT_RANK] = {"rank", 64, 64, "dims"}, /* 64 = MB_MAX_RANK: stack arrays in ops/ */
    [MB_LIMIT_ATTR_BYTES] = {"attr_bytes", 16ull << 20, UINT64_MAX, "bytes"},
    [MB_LIMIT_STRING_BYTES] = {"string_bytes", 1ull << 20, UINT64_MAX, "bytes"},
    [MB_LIMIT_UNROLL] = {"unroll", 4096, 1ull << 30, "body passes"},
    [MB_LIMIT_NODE_IO] = {"node_io", 100000, INT32_MAX / 4, "inputs and outputs"},
};

int mb_limit_find(const char *name) {
  for (int i = 0; name && i < MB_LIMIT_COUNT; i++)
    if (!strcmp(defs[i].name, name)) return i;
  return -1;
}

const char *mb_limit_name(int id) { return id >= 0 && id < MB_LIMIT_COUNT ? defs[id].name : "?"; }
uint64_t mb_limit_default(int id) { return id >= 0 && id < MB_LIMIT_COUNT ? defs[id].dflt : 0; }
uint64_t mb_limit_ceiling(int id) { return id >= 0 && id < MB_LIMIT_COUNT ? defs[id].ceiling : 0; }
int mb_limit_is_bytes(int id) { return id >= 0 && id < MB_LIMIT_COUNT && !strcmp(defs[id].unit, "bytes"); }

uint64_t mb_limit(const mb_limits *l, int id) {
  if (id < 0 || id >= MB_LIMIT_COUNT) return 0;
  return l && l->value[id] ? l->value[id] : defs[id].dflt;
}

int mb_limit_fail(mb_diag *d, const mb_limits *l, int id, const char *what, uint64_t have) {
  const char *name = mb_limit_name(id);
  uint64_t value = mb_limit(l, id);
  char how[160];
  if (value >= mb_limit_ceiling(id)) snprintf(how, sizeof how, "the most membudget allows");
  else snprintf(how, sizeof how, "raise it with the setup key limit.%s or --limit %s=N", name, name);
  return mb_fail(d, MB_E_LIMIT, "%s: %llu %s, more than the limit %s=%llu (%s)", what,
                 (unsigned long long)have, id >= 0 && id < MB_LIMIT_COUNT ? defs[id].unit : "",
                 name, (unsigned long long)value, how);
}

int mb_limit_check(mb_diag *d, const mb_limits *l, int id, const char *what, uint64_t have) {
  return have > mb_limit(l, id) ? mb_limit_fail(d, l, id, what, have) : MB_OK;
}

void mb_limit_note(mb_diag *d, int id, uint64_t value, const char *why) {
  if (d->status == MB_OK) return;
  size_t len = strlen(d->msg);
  const char *name = mb_limit_name(id);
  snprintf(d->msg + len, sizeof d->msg - len, " (%s: the limit %s=%llu was reached; raise it with "
           "limit.%s or --limit %s=N)", why, name, (unsigned long long)value, name, name);
}
