/* The module tree and the largest tensors at the peak as members of `membudget estimate
 * --json` ("modules", "top"; docs/cli.md). */
#include <stdlib.h>

#include "budget/modules.h"

static void categories(mb_strbuf *sb, const uint64_t *cat) {
  mb_sb_puts(sb, "{");
  bool first = true;
  for (int c = 0; c < MB_CAT_COUNT; c++) {
    if (!cat[c]) continue;
    mb_sb_printf(sb, "%s\"%s\": ", first ? "" : ", ", mb_category_name(c));
    mb_sb_json_u64(sb, cat[c]);
    first = false;
  }
  mb_sb_puts(sb, "}");
}

static const char *model_name(int32_t model) { return model == 1 ? "\"teacher\"" : model == 0 ? "\"model\"" : "null"; }

void mb_modules_json(mb_strbuf *sb, const mb_modules *mods, int32_t depth) {
  /* entries deeper than depth are left out; parents are indices into the list written */
  int32_t *index = malloc(((size_t)mods->n_mods + 1) * sizeof *index);
  if (!index) {
    sb->failed = 1; /* the caller reports out of memory */
    return;
  }
  mb_sb_printf(sb, ",\n  \"modules\": {\"batch_size\": %lld, \"allocated_peak\": ", (long long)mods->batch);
  mb_sb_json_u64(sb, mods->allocated_peak);
  mb_sb_printf(sb, ", \"peak_phase\": \"%s\", \"depth\": ", mb_phase_name(mods->peak_phase));
  if (depth > 0) mb_sb_printf(sb, "%d", (int)depth);
  else mb_sb_puts(sb, "null");
  mb_sb_puts(sb, ", \"tree\": [");
  int32_t n = 0;
  for (int32_t i = 0; i < mods->n_mods; i++) {
    const mb_module_info *x = &mods->mods[i].info;
    index[i] = -1;
    if (depth > 0 && x->depth > depth) continue;
    index[i] = n;
    mb_sb_puts(sb, n++ ? ",\n    {\"path\": " : "\n    {\"path\": ");
    mb_sb_json_str(sb, x->path);
    mb_sb_printf(sb, ", \"model\": %s, \"parent\": ", model_name(x->model));
    if (x->parent >= 0 && index[x->parent] >= 0) mb_sb_printf(sb, "%d", (int)index[x->parent]);
    else mb_sb_puts(sb, "null");
    mb_sb_printf(sb, ", \"depth\": %d, \"nodes\": %lld, \"parameters\": ", (int)x->depth, (long long)x->nodes);
    mb_sb_json_u64(sb, x->parameters);
    mb_sb_puts(sb, ", \"kept\": ");
    mb_sb_json_u64(sb, x->kept);
    mb_sb_puts(sb, ", \"at_peak\": ");
    mb_sb_json_u64(sb, x->at_peak);
    mb_sb_puts(sb, ", \"at_peak_categories\": ");
    categories(sb, x->at_peak_category);
    mb_sb_puts(sb, "}");
  }
  mb_sb_puts(sb, n ? "\n  ]}" : "]}");
  free(index);
}

void mb_modules_top_json(mb_strbuf *sb, const mb_modules *mods, int32_t n) {
  if (n <= 0) return;
  mb_sb_puts(sb, ",\n  \"top\": [");
  for (int32_t i = 0; i < n && i < mods->n_tensors; i++) {
    const mb_peak_tensor *t = &mods->tensors[i];
    mb_sb_puts(sb, i ? ",\n    {\"tensor\": " : "\n    {\"tensor\": ");
    mb_sb_json_str(sb, t->tensor);
    mb_sb_puts(sb, ", \"bytes\": ");
    mb_sb_json_u64(sb, t->bytes);
    mb_sb_printf(sb, ", \"category\": \"%s\", \"phase\": \"%s\", \"model\": %s, \"node\": ",
                 mb_category_name(t->category), mb_phase_name(t->phase), model_name(t->model));
    mb_sb_json_str(sb, t->node);
    mb_sb_puts(sb, ", \"op_type\": ");
    mb_sb_json_str(sb, t->op_type);
    mb_sb_puts(sb, ", \"aten\": ");
    mb_sb_json_str(sb, t->aten);
    mb_sb_puts(sb, ", \"module\": ");
    mb_sb_json_str(sb, t->module);
    mb_sb_puts(sb, "}");
  }
  mb_sb_puts(sb, n && mods->n_tensors ? "\n  ]" : "]");
}
