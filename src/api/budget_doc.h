/* The JSON document of an estimate, shared by the static (estimate_json.c) and the measured
 * (measure_json.c) estimates. */
#ifndef MB_API_BUDGET_DOC_H
#define MB_API_BUDGET_DOC_H
#include "budget/setup.h"
#include "sim/plan.h"
#include "util/diag.h"

/* setup, budget, summary (and with trace, every event of the step at b's batch size); extra:
 * more top-level members, written as ",\n  \"name\": ..." (NULL: none). *out is the caller's. */
int mb_budget_document(mb_setup *s, const mb_plan *p, const mb_budget *b, int trace, const char *extra,
                       char **out, mb_diag *d);
#endif
