#include "cli/table.h"

#include <stdlib.h>
#include <string.h>

static const char RULE[] = "\x01rule";

void mb_table_init(mb_table *t, const char *align) {
  memset(t, 0, sizeof *t);
  t->n_cols = (int)strlen(align);
  if (t->n_cols > MB_TABLE_MAX_COLS) t->n_cols = MB_TABLE_MAX_COLS;
  memcpy(t->align, align, (size_t)t->n_cols);
}

static char *dup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

void mb_table_row(mb_table *t, const char *const *cells) {
  if (t->oom) return;
  if (t->n_rows == t->cap_rows) {
    int cap = t->cap_rows ? t->cap_rows * 2 : 16;
    char **c = realloc(t->cells, (size_t)cap * (size_t)t->n_cols * sizeof *c);
    if (!c) { t->oom = 1; return; }
    t->cells = c;
    t->cap_rows = cap;
  }
  for (int k = 0; k < t->n_cols; k++) {
    char *d = dup(cells ? (cells[k] ? cells[k] : "") : RULE);
    if (!d) t->oom = 1;
    t->cells[t->n_rows * t->n_cols + k] = d;
  }
  t->n_rows++;
}

void mb_table_rule(mb_table *t) { mb_table_row(t, NULL); }

void mb_table_print(const mb_table *t, FILE *out, const char *indent) {
  size_t width[MB_TABLE_MAX_COLS] = {0};
  for (int r = 0; r < t->n_rows; r++)
    for (int k = 0; k < t->n_cols; k++) {
      const char *c = t->cells[r * t->n_cols + k];
      if (c && strcmp(c, RULE) && strlen(c) > width[k]) width[k] = strlen(c);
    }
  for (int r = 0; r < t->n_rows; r++) {
    fputs(indent, out);
    const char *first = t->cells[r * t->n_cols];
    if (first && !strcmp(first, RULE)) {
      size_t total = 0;
      for (int k = 0; k < t->n_cols; k++) total += width[k] + (k ? 2 : 0);
      for (size_t i = 0; i < total; i++) fputc('-', out);
      fputc('\n', out);
      continue;
    }
    for (int k = 0; k < t->n_cols; k++) {
      const char *c = t->cells[r * t->n_cols + k];
      if (!c) c = "";
      int pad = (int)(width[k] - strlen(c));
      if (k) fputs("  ", out);
      if (t->align[k] == 'r') fprintf(out, "%*s%s", pad, "", c);
      else if (k + 1 < t->n_cols) fprintf(out, "%s%*s", c, pad, "");
      else fputs(c, out);
    }
    fputc('\n', out);
  }
}

void mb_table_free(mb_table *t) {
  for (int i = 0; i < t->n_rows * t->n_cols; i++) free(t->cells[i]);
  free(t->cells);
  memset(t, 0, sizeof *t);
}
