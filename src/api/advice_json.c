/* What `membudget estimate --json` reports beside the budget when the setup's report keys ask
 * for it (budget/setup_report.c): the module tree ("modules"), the largest tensors at the peak
 * ("top") and the simulated advice ("advice"); docs/cli.md. */
#include <stdlib.h>

#include "budget/advice.h"
#include "budget/modules.h"

static void json_fits(mb_strbuf *sb, int32_t fits) { mb_sb_puts(sb, fits < 0 ? "null" : fits ? "true" : "false"); }

static void json_line(mb_strbuf *sb, const mb_advice_line *l, const mb_budget *base, bool first) {
  mb_sb_puts(sb, first ? "\n      {\"kind\": \"" : ",\n      {\"kind\": \"");
  mb_sb_puts(sb, mb_advice_kind_name(l->kind));
  mb_sb_puts(sb, "\", \"title\": ");
  mb_sb_json_str(sb, l->title);
  mb_sb_puts(sb, ", \"note\": ");
  mb_sb_json_str(sb, l->note);
  mb_sb_printf(sb, ", \"what_if\": %s, \"flags\": [", l->what_if ? "true" : "false");
  for (int32_t i = 0; i < l->argc; i++) {
    mb_sb_puts(sb, i ? ", " : "");
    mb_sb_json_str(sb, l->argv[i]);
  }
  mb_sb_puts(sb, "], \"command\": ");
  mb_sb_json_str(sb, l->flags);
  mb_sb_printf(sb, ", \"batch_size\": %lld, \"grad_accumulation\": %lld, \"effective_batch_size\": %lld",
               (long long)l->batch_size, (long long)l->grad_accumulation,
               (long long)(l->batch_size * l->grad_accumulation));
  mb_sb_puts(sb, ", \"allocated_peak\": ");
  mb_sb_json_u64(sb, l->allocated_peak);
  mb_sb_puts(sb, ", \"device_peak\": ");
  mb_sb_json_u64(sb, l->device_peak);
  mb_sb_puts(sb, ", \"saves\": ");
  mb_sb_json_u64(sb, base->device_peak - l->device_peak);
  mb_sb_puts(sb, ", \"fits\": ");
  json_fits(sb, l->fits);
  mb_sb_printf(sb, ", \"available\": %lld, \"solved_batch\": ", (long long)l->available);
  if (l->solved_batch >= 0) mb_sb_printf(sb, "%lld", (long long)l->solved_batch);
  else mb_sb_puts(sb, "null");
  mb_sb_puts(sb, ", \"solved_device_peak\": ");
  if (l->solved_batch >= 0) mb_sb_json_u64(sb, l->solved_device_peak);
  else mb_sb_puts(sb, "null");
  mb_sb_puts(sb, "}");
}

static void json_advice(mb_strbuf *sb, int when, const char *reason, int due, const mb_budget *b, const mb_advice *a) {
  mb_sb_printf(sb, ",\n  \"advice\": {\"asked\": \"%s\", \"due\": %s, \"reason\": ",
               when == MB_ADVISE_ALWAYS ? "always" : "auto", due ? "true" : "false");
  if (due) mb_sb_json_str(sb, reason);
  else mb_sb_puts(sb, "null");
  mb_sb_printf(sb, ",\n    \"baseline\": {\"batch_size\": %lld, \"grad_accumulation\": %lld, \"device_peak\": ",
               (long long)b->batch_size, (long long)b->grad_accumulation);
  mb_sb_json_u64(sb, b->device_peak);
  mb_sb_puts(sb, ", \"allocated_peak\": ");
  mb_sb_json_u64(sb, b->allocated_peak);
  mb_sb_puts(sb, ", \"fits\": ");
  json_fits(sb, b->fits);
  mb_sb_printf(sb, ", \"available\": %lld, \"solved\": %s},\n    \"lines\": [", (long long)b->available,
               b->solved ? "true" : "false");
  for (int32_t i = 0; a && i < a->n; i++) json_line(sb, &a->lines[i], b, i == 0);
  mb_sb_puts(sb, a && a->n ? "\n    ]}" : "]}");
}

int mb_report_json(const mb_model *m, mb_setup *s, const mb_plan *p, const mb_budget *b, char **extra, mb_diag *d) {
  *extra = NULL;
  const mb_report_opts r = s->report;
  if (!r.by_module && !r.top && r.advise == MB_ADVISE_NEVER) return MB_OK;
  mb_strbuf sb;
  mb_sb_init(&sb);
  if (r.by_module || r.top) {
    mb_modules *mods = NULL;
    if (mb_modules_build(p, s, b->batch_size, &mods, d) == MB_OK) {
      if (r.by_module) mb_modules_json(&sb, mods, r.module_depth);
      mb_modules_top_json(&sb, mods, r.top);
    }
    mb_modules_free(mods);
  }
  if (d->status == MB_OK && r.advise != MB_ADVISE_NEVER && b->mode == MB_MODE_STATIC) { /* simulated only */
    const char *reason = "";
    int due = mb_advice_due(b, &reason);
    mb_advice *a = NULL;
    if (r.advise == MB_ADVISE_ALWAYS || due) mb_advice_build(m, s, p, b, &a, d);
    if (d->status == MB_OK) json_advice(&sb, r.advise, reason, due, b, a);
    mb_advice_free(a);
  }
  if (d->status == MB_OK) {
    *extra = mb_sb_detach(&sb);
    if (!*extra) mb_fail(d, MB_E_NOMEM, "out of memory");
  }
  mb_sb_free(&sb);
  return d->status;
}
