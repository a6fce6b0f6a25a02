/* membudget estimate's lines for the evaluation phase and the teacher output cache. */
#ifndef MB_CLI_ESTIMATE_EVAL_H
#define MB_CLI_ESTIMATE_EVAL_H
#include <stdint.h>

#include "cli/table.h"
#include "membudget/membudget.h"

/* The table's rows (nothing without an evaluation phase or a teacher cache). */
void mb_cli_eval_rows(mb_table *t, const mb_budget *b, uint64_t total);
/* One line comparing the evaluation's device peak with the step's. */
void mb_cli_eval_line(const mb_budget *b);
/* On stderr, when the evaluation is what does not fit. */
void mb_cli_eval_no_fit(const mb_budget *b);
#endif
