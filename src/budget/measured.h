/* Measured mode for the api stage (src/api/measure_json.c). Built from src/budget/measured.c
 * with the CUDA toolkit, from src/budget/measured_none.c without it (every call: MB_E_NO_CUDA). */
#ifndef MB_BUDGET_MEASURED_H
#define MB_BUDGET_MEASURED_H
#include "budget/setup.h"
#include "sim/plan.h"
#include "util/diag.h"

/* The budget in measured mode (see mb_measure_estimate). *eff receives the setup it was
 * computed with (the caller's, with the device's memory and GPU-table entry filled in; a
 * shallow copy, valid while s is); *plan the plan, which the caller frees with mb_plan_free. */
int mb_measure_budget(mb_measure *m, const mb_model *model, const mb_setup *s, mb_setup *eff, mb_plan **plan,
                      mb_budget *out, mb_diag *d);
/* A replay at each of batches[0..n). */
int mb_measure_replays(mb_measure *m, const mb_model *model, const mb_setup *s, const int64_t *batches, size_t n,
                       mb_replay *out, mb_diag *d);
#endif
