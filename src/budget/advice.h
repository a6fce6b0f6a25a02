/* Simulated advice (membudget.h, "what would make it fit"): internal layout, shared by the C
 * accessors (advice.c) and the JSON (api/advice_json.c). */
#ifndef MB_BUDGET_ADVICE_H
#define MB_BUDGET_ADVICE_H
#include "budget/setup.h"
#include "sim/plan.h"
#include "util/arena.h"
#include "util/diag.h"
#include "util/strbuf.h"

struct mb_advice {
  mb_arena arena;        /* strings and argv of the lines */
  mb_budget baseline;    /* the setup as given */
  mb_advice_line *lines; /* largest saving first */
  int32_t n, cap;
};

/* The advice for model m under s, whose baseline budget (from plan p, built for s) is base. */
int mb_advice_build(const mb_model *m, mb_setup *s, const mb_plan *p, const mb_budget *base, mb_advice **out,
                    mb_diag *d);

/* The members mb_estimate_json adds when the setup's report keys ask for them: "modules",
 * "top" and "advice", each as ",\n  \"name\": ..." (api/advice_json.c). */
int mb_report_json(const mb_model *m, mb_setup *s, const mb_plan *p, const mb_budget *b, char **extra, mb_diag *d);
#endif
