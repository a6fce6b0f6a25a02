/* membudget estimate's lines for evaluation inside training (--eval-batch, --ema-swap,
 * --eval-keep-outputs, --zero-grad) and the teacher output cache (--teacher-cache). */
#include <stdio.h>

#include "cli/estimate_eval.h"
#include "util/format.h"

static void row(mb_table *t, const char *label, uint64_t bytes, uint64_t total) {
  char b[32], h[32], share[16];
  mb_fmt_thousands(b, sizeof b, bytes);
  mb_fmt_bytes(h, sizeof h, bytes);
  if (total) snprintf(share, sizeof share, "%.1f%%", 100.0 * (double)bytes / (double)total);
  else snprintf(share, sizeof share, "-");
  const char *cells[] = {label, b, h, share};
  mb_table_row(t, cells);
}

void mb_cli_eval_rows(mb_table *t, const mb_budget *b, uint64_t total) {
  char label[96];
  if (!b->eval_batch && !b->teacher_cache) return;
  mb_table_rule(t);
  if (b->teacher_cache) row(t, "teacher output cache (all batches)", b->teacher_cache, total);
  if (!b->eval_batch) return;
  snprintf(label, sizeof label, "evaluation at batch %lld (no grad, eval mode):", (long long)b->eval_batch);
  const char *head[] = {label, NULL, NULL, NULL};
  mb_table_row(t, head);
  if (b->eval_at_peak[MB_CAT_GRADIENT]) row(t, "  .grad still allocated", b->eval_at_peak[MB_CAT_GRADIENT], total);
  if (b->ema_stored) row(t, "  EMA store (parameter copies)", b->ema_stored, total);
  row(t, "  batch, forward and outputs (transient)", b->eval_forward, total);
  if (b->eval_outputs) row(t, "  outputs kept", b->eval_outputs, total);
  row(t, "  evaluation peak (allocated)", b->eval_peak, total);
  row(t, "  reserved, steps and evaluations", b->eval_reserved_peak, total);
  row(t, "  evaluation device peak", b->eval_device_peak, total);
}

void mb_cli_eval_line(const mb_budget *b) {
  char x[32], y[32];
  if (!b->eval_batch) return;
  printf("evaluation device peak %s, the step's %s: the %s is the larger\n",
         mb_fmt_bytes(x, sizeof x, b->eval_device_peak), mb_fmt_bytes(y, sizeof y, b->device_peak),
         b->eval_device_peak > b->device_peak ? "evaluation" : "step");
}

void mb_cli_eval_no_fit(const mb_budget *b) {
  char x[32], y[32];
  if (!b->eval_batch || b->eval_device_peak <= b->usable_memory) return;
  fprintf(stderr, "membudget: the evaluation at batch %lld needs %s on the device (usable %s)\n",
          (long long)b->eval_batch, mb_fmt_bytes(x, sizeof x, b->eval_device_peak),
          mb_fmt_bytes(y, sizeof y, b->usable_memory));
}
