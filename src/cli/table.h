/* Aligned text tables for the CLI: cells are copied, columns sized to their widest cell. */
#ifndef MB_CLI_TABLE_H
#define MB_CLI_TABLE_H
#include <stdio.h>

#define MB_TABLE_MAX_COLS 8

typedef struct mb_table {
  int n_cols;
  char align[MB_TABLE_MAX_COLS]; /* 'l' or 'r' */
  char **cells;                  /* row-major */
  int n_rows, cap_rows;
  int oom;
} mb_table;

/* align: one 'l'/'r' per column, e.g. "lrr". */
void mb_table_init(mb_table *t, const char *align);
/* Add a row of n_cols strings (NULL prints empty). A row of NULL cells is a rule line. */
void mb_table_row(mb_table *t, const char *const *cells);
void mb_table_rule(mb_table *t);
void mb_table_print(const mb_table *t, FILE *out, const char *indent);
void mb_table_free(mb_table *t);
#endif
