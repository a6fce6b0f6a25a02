/* The JSON of evaluation inside training and the teacher output cache: the setup's keys and
 * the budget's fields (written always, zeros without them). */
#include "api/eval_json.h"

#include "budget/estimate.h"

static const char *zero_grad_name(int z) {
  return z == MB_ZERO_GRAD_ZERO ? "zero" : z == MB_ZERO_GRAD_NONE_AT_START ? "none-at-start"
         : z == MB_ZERO_GRAD_BEFORE_BACKWARD ? "before-backward" : "none";
}

void mb_json_eval_setup(mb_strbuf *sb, const mb_setup *s) {
  const mb_eval_opts *e = &s->train.eval;
  mb_loop_opts lo;
  int zero_grad = e->zero_grad; /* as the loop's preset has it unless zero_grad was given */
  mb_setup_loop_resolve(&s->train, &lo, &zero_grad);
  mb_sb_puts(sb, "    \"eval_batch\": ");
  if (e->batch < 0) mb_sb_puts(sb, "\"train\"");
  else if (e->batch) mb_sb_printf(sb, "%lld", (long long)e->batch);
  else mb_sb_puts(sb, "null");
  mb_sb_printf(sb, ",\n    \"zero_grad\": \"%s\",\n    \"ema_swap\": %s,\n    \"eval_keep_outputs\": %lld,\n",
               zero_grad_name(zero_grad), e->ema_swap ? "true" : "false", (long long)e->keep_outputs);
  mb_sb_printf(sb, "    \"teacher_cache\": %lld,\n", (long long)e->teacher_cache);
}

void mb_json_eval_budget(mb_strbuf *sb, const mb_budget *b) {
  mb_sb_printf(sb, "    \"eval_batch\": %lld,\n", (long long)b->eval_batch);
  const struct {
    const char *key;
    uint64_t v;
  } f[] = {{"eval_peak", b->eval_peak},       {"eval_reserved_peak", b->eval_reserved_peak},
           {"eval_device_peak", b->eval_device_peak}, {"eval_forward", b->eval_forward},
           {"eval_outputs", b->eval_outputs}, {"ema_stored", b->ema_stored},
           {"teacher_cache", b->teacher_cache}};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
    mb_sb_printf(sb, "    \"%s\": ", f[i].key);
    mb_sb_json_u64(sb, f[i].v);
    mb_sb_puts(sb, ",\n");
  }
  mb_sb_puts(sb, "    \"eval_at_peak\": {");
  for (int c = 0; c < MB_CAT_COUNT; c++) {
    mb_sb_printf(sb, "%s\"%s\": ", c ? ", " : "", mb_category_name(c));
    mb_sb_json_u64(sb, b->eval_at_peak[c]);
  }
  mb_sb_puts(sb, "},\n");
}
