/* Internal entry points of the budget stage. */
#ifndef MB_BUDGET_ESTIMATE_H
#define MB_BUDGET_ESTIMATE_H
#include "budget/setup.h"
#include "sim/plan.h"
#include "util/diag.h"

/* Bytes per cuBLAS workspace: the option, else the GPU's, else the larger default. */
uint64_t mb_train_cublas_workspace(const mb_train *tr);
/* Bytes per thread's GEMM workspaces: cuBLAS's, plus a separate cuBLASLt one if set. */
uint64_t mb_train_workspace(const mb_train *tr);
/* The batching fields of a budget (unit, rule, limit) and the count of default bounds taken. */
void mb_budget_batching(const mb_setup *s, int32_t assumed, mb_budget *bu);
/* The budget at the setup's batch size, or the solved one. */
int mb_estimate_plan(const mb_plan *p, mb_setup *s, mb_budget *out, mb_diag *d);
#endif
