/* The step attributed to PyTorch modules (membudget.h, "where the memory goes"): internal
 * layout, shared by the C accessors (modules.c), the JSON (api/modules_json.c) and the advice
 * (advice.c: which modules to checkpoint, which to train in the freezing what-if). */
#ifndef MB_BUDGET_MODULES_H
#define MB_BUDGET_MODULES_H
#include <stdbool.h>

#include "budget/setup.h"
#include "sim/plan.h"
#include "util/arena.h"
#include "util/diag.h"
#include "util/strbuf.h"

typedef struct mb_module_entry {
  mb_module_info info;   /* the public figures (subtree totals); parent/path in print order */
  const char *name;      /* the last component of the path ("conv1"; "" for a root) */
  int32_t first_node;    /* the first node that runs in it (forward order), INT32_MAX if none */
  uint64_t trainable;    /* trainable parameter and embedding bytes (subtree) */
} mb_module_entry;

struct mb_modules {
  mb_arena arena;
  int64_t batch;
  uint64_t allocated_peak;
  int32_t peak_phase;
  mb_module_entry *mods; /* print order (membudget.h) */
  int32_t n_mods;
  mb_peak_tensor *tensors; /* live at the allocated peak, largest first */
  int32_t n_tensors;
};

/* The tree of plan p's step at batch (the plan built for s). *out is the caller's
 * (mb_modules_free). */
int mb_modules_build(const mb_plan *p, const mb_setup *s, int64_t batch, mb_modules **out, mb_diag *d);

/* `"modules": {...}` (depth: the deepest level written, 0 every level) and `"top": [...]`
 * (the n largest tensors; n 0 writes no member), each as ",\n  \"name\": ..." (api/modules_json.c). */
void mb_modules_json(mb_strbuf *sb, const mb_modules *mods, int32_t depth);
void mb_modules_top_json(mb_strbuf *sb, const mb_modules *mods, int32_t n);
#endif
