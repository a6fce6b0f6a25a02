/* membudget estimate's reports beside the budget (report.c): the module tree, the largest
 * tensors at the peak, and the simulated advice. */
#ifndef MB_CLI_REPORT_H
#define MB_CLI_REPORT_H
#include "cli/cli.h"

typedef struct mb_cli_report {
  int by_module, depth, top;
  int advise;   /* 0 never, 1 when due (the default), 2 always */
  int asked;    /* --advise was given */
} mb_cli_report;

/* The defaults (advice when due), also into the setup's report keys for --json. */
int mb_cli_report_init(mb_setup *setup, mb_cli_report *r);
/* --by-module, --depth N, --top N, --advise, --no-advise, --advise-trainable GLOB: if argv[*i]
 * is one, applies it (to r and to the setup's report keys), sets *rc and returns 1. */
int mb_cli_report_flag(mb_setup *setup, int argc, char **argv, int *i, int *rc, mb_cli_report *r);
/* The human reports after the budget table; an exit code. */
int mb_cli_print_report(const mb_model *model, mb_setup *setup, const mb_budget *budget, const mb_cli_report *r);
#endif
