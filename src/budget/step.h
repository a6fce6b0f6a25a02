/* The setup as the simulation reads it: the step description (sim/step.h), and plans built
 * and run from a setup. Each call describes the setup as it is at that moment: callers that
 * change it between calls (a what-if, a sweep) get the change. */
#ifndef MB_BUDGET_STEP_H
#define MB_BUDGET_STEP_H
#include "budget/setup.h"
#include "sim/plan.h"
#include "sim/step.h"
#include "util/diag.h"

/* The step description of s (pointers into s). */
void mb_setup_step(const mb_setup *s, mb_step *out);
/* mb_plan_build and mb_plan_run with the step description of s. */
int mb_setup_plan_build(const mb_model *m, const mb_setup *s, mb_plan **out, mb_diag *d);
int mb_setup_plan_run(const mb_plan *p, const mb_setup *s, int64_t batch, mb_run *r, uint64_t *bytes,
                      uint64_t *live, mb_diag *d);
#endif
