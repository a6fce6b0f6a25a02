/* membudget estimate's reports beside the budget: the module tree (--by-module [--depth N]),
 * the largest tensors at the peak (--top N) and what would make it fit (--advise; by default
 * when the budget does not fit or a given batch is within 10% of the usable memory; static mode
 * only: the tree of a measured budget is the simulated step's at its batch). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/report.h"
#include "cli/table.h"
#include "util/format.h"

static int set(mb_setup *s, const char *flag, const char *key, const char *value) {
  if (mb_setup_set(s, key, value) != MB_OK) return mb_cli_usage_error("%s: %s", flag, mb_setup_errmsg(s));
  return MB_EXIT_OK;
}

int mb_cli_report_init(mb_setup *s, mb_cli_report *r) {
  memset(r, 0, sizeof *r);
  r->advise = 1;
  return set(s, "advise", "advise", "auto");
}

int mb_cli_report_flag(mb_setup *s, int argc, char **argv, int *i, int *rc, mb_cli_report *r) {
  const char *a = argv[*i];
  if (!strcmp(a, "--by-module")) {
    r->by_module = 1;
    *rc = set(s, a, "by_module", "1");
  } else if (!strcmp(a, "--advise")) {
    r->advise = 2;
    r->asked = 1;
    *rc = set(s, a, "advise", "always");
  } else if (!strcmp(a, "--no-advise")) {
    r->advise = 0;
    *rc = set(s, a, "advise", "never");
  } else if (!strcmp(a, "--depth") || !strcmp(a, "--top") || !strcmp(a, "--advise-trainable")) {
    if (*i + 1 >= argc) {
      *rc = mb_cli_usage_error("%s needs a value", a);
      return 1;
    }
    const char *v = argv[++*i];
    if (!strcmp(a, "--advise-trainable")) {
      *rc = set(s, a, "advise_trainable", v);
      return 1;
    }
    char *end = NULL;
    long n = strtol(v, &end, 10);
    if (!*v || *end || n < 1 || n > 1000000) {
      *rc = mb_cli_usage_error("%s needs a number >= 1, not '%s'", a, v);
      return 1;
    }
    if (a[2] == 'd') {
      r->depth = (int)n;
      *rc = set(s, a, "module_depth", v);
    } else {
      r->top = (int)n;
      *rc = set(s, a, "top", v);
    }
  } else {
    return 0;
  }
  return 1;
}

static void share(char *buf, size_t size, uint64_t part, uint64_t whole) {
  if (whole) snprintf(buf, size, "%.1f%%", 100.0 * (double)part / (double)whole);
  else snprintf(buf, size, "-");
}

static void print_modules(const mb_modules *mods, int depth, const mb_budget *b) {
  mb_module_info x = {.struct_size = sizeof x};
  uint64_t peak = 0;
  for (size_t i = 0; i < mb_modules_num(mods); i++)
    if (mb_modules_get(mods, i, &x) == MB_OK && x.parent < 0) peak += x.at_peak;
  char h[32];
  printf("\nmodules at batch %lld (parameters; what each keeps for backward at the end of forward; its share of "
         "the allocated peak, %s in %s):\n", (long long)b->batch_size, mb_fmt_bytes(h, sizeof h, peak),
         mb_phase_name(b->peak_phase));
  mb_table tb;
  mb_table_init(&tb, "lrrrr");
  const char *head[] = {"module", "parameters", "kept", "at the peak", "share"};
  mb_table_row(&tb, head);
  mb_table_rule(&tb);
  size_t hidden = 0;
  for (size_t i = 0; i < mb_modules_num(mods); i++) {
    if (mb_modules_get(mods, i, &x) != MB_OK) continue;
    if (depth > 0 && x.depth > depth) continue;
    if (!x.parameters && !x.kept && !x.at_peak) {
      hidden++;
      continue;
    }
    char name[600], p[32], k[32], a[32], s[16];
    if (!x.path)
      snprintf(name, sizeof name, "(no module)");
    else if (x.depth == 0)
      snprintf(name, sizeof name, "%s", x.model == 1 ? "(teacher)" : "(model)");
    else
      snprintf(name, sizeof name, "%*s%s%.500s", 2 * (x.depth > 40 ? 40 : x.depth), "", x.model == 1 ? "teacher:" : "",
               x.path);
    mb_fmt_bytes(p, sizeof p, x.parameters);
    mb_fmt_bytes(k, sizeof k, x.kept);
    mb_fmt_bytes(a, sizeof a, x.at_peak);
    share(s, sizeof s, x.at_peak, peak);
    const char *cells[] = {name, p, k, a, s};
    mb_table_row(&tb, cells);
  }
  mb_table_print(&tb, stdout, "  ");
  mb_table_free(&tb);
  printf("  (no module): optimizer states, master weights, the EMA copy, the batch, workspaces, the loss\n");
  if (hidden) printf("  %zu modules with nothing at the peak, no parameters and nothing kept are left out\n", hidden);
}

static void print_top(const mb_modules *mods, int n) {
  mb_peak_tensor t = {.struct_size = sizeof t};
  printf("\nlargest tensors alive at the allocated peak:\n");
  mb_table tb;
  mb_table_init(&tb, "rllllll");
  const char *head[] = {"bytes", "category", "allocated in", "op", "node", "module", "tensor"};
  mb_table_row(&tb, head);
  mb_table_rule(&tb);
  for (size_t i = 0; i < (size_t)n && i < mb_modules_num_tensors(mods); i++) {
    if (mb_modules_tensor(mods, i, &t) != MB_OK) continue;
    char b[32], mod[520];
    mb_fmt_bytes(b, sizeof b, t.bytes);
    if (!t.module) snprintf(mod, sizeof mod, "-");
    else snprintf(mod, sizeof mod, "%s%.500s", t.model == 1 ? "teacher:" : "", *t.module ? t.module : "(root)");
    const char *op = t.aten ? t.aten : t.op_type ? t.op_type : "-";
    const char *cells[] = {b, mb_category_name(t.category), mb_phase_name(t.phase), op, t.node ? t.node : "-", mod,
                           t.tensor};
    mb_table_row(&tb, cells);
  }
  mb_table_print(&tb, stdout, "  ");
  mb_table_free(&tb);
}

static void print_advice(const mb_advice *a, const mb_budget *b, const char *reason) {
  char x[32], y[32];
  printf("\n%s (%s%s: device peak %s at batch %lld, usable %s); each line a re-run of the simulation:\n",
         b->fits == 0 ? "what would make it fit" : "what would make more room", *reason ? "" : "asked",
         *reason ? reason : "", mb_fmt_bytes(x, sizeof x, b->device_peak), (long long)b->batch_size,
         b->device_memory ? mb_fmt_bytes(y, sizeof y, b->usable_memory) : "unknown");
  size_t n = mb_advice_num(a);
  if (!n) {
    printf("  nothing simulated lowers the device peak\n");
    return;
  }
  mb_table tb;
  mb_table_init(&tb, "lrrrlrl");
  const char *head[] = {"change", "batch", "device peak", "saves", "fits", "largest batch", "flags"};
  mb_table_row(&tb, head);
  mb_table_rule(&tb);
  mb_advice_line l = {.struct_size = sizeof l};
  for (size_t i = 0; i < n; i++) {
    if (mb_advice_get(a, i, &l) != MB_OK) continue;
    char batch[48], peak[32], saves[32], solved[64], title[600];
    if (l.grad_accumulation > 1) snprintf(batch, sizeof batch, "%lld x %lld", (long long)l.batch_size,
                                          (long long)l.grad_accumulation);
    else snprintf(batch, sizeof batch, "%lld", (long long)l.batch_size);
    mb_fmt_bytes(peak, sizeof peak, l.device_peak);
    mb_fmt_bytes(saves, sizeof saves, b->device_peak - l.device_peak);
    if (l.solved_batch < 0) snprintf(solved, sizeof solved, "-");
    else if (l.solved_batch == 0) snprintf(solved, sizeof solved, "none fits");
    else if (l.grad_accumulation > 1) snprintf(solved, sizeof solved, "%lld x %lld", (long long)l.solved_batch,
                                               (long long)l.grad_accumulation);
    else snprintf(solved, sizeof solved, "%lld", (long long)l.solved_batch);
    snprintf(title, sizeof title, "%s%.560s", l.what_if ? "what-if: " : "", l.title);
    const char *cells[] = {title, batch, peak, saves, l.fits < 0 ? "-" : l.fits ? "yes" : "no", solved, l.flags};
    mb_table_row(&tb, cells);
  }
  mb_table_print(&tb, stdout, "  ");
  mb_table_free(&tb);
  for (size_t i = 0; i < n; i++)
    if (mb_advice_get(a, i, &l) == MB_OK && *l.note) printf("  %s: %s\n", mb_advice_kind_name(l.kind), l.note);
}

int mb_cli_print_report(const mb_model *m, mb_setup *s, const mb_budget *b, const mb_cli_report *r) {
  if (r->by_module || r->top) {
    mb_modules *mods = NULL;
    if (mb_modules_create(m, s, b->batch_size, &mods) != MB_OK) {
      fprintf(stderr, "membudget: modules: %s\n", mb_setup_errmsg(s));
      return MB_EXIT_INPUT;
    }
    if (r->by_module) print_modules(mods, r->depth, b);
    if (r->top) print_top(mods, r->top);
    mb_modules_free(mods);
  }
  const char *reason = "";
  int due = mb_advice_due(b, &reason);
  if (b->mode == MB_MODE_STATIC && (r->advise == 2 || (r->advise == 1 && due))) {
    mb_advice *a = NULL;
    if (mb_advise(m, s, &a) != MB_OK) {
      fprintf(stderr, "membudget: advice: %s\n", mb_setup_errmsg(s));
      return MB_EXIT_INPUT;
    }
    print_advice(a, b, reason);
    mb_advice_free(a);
  }
  return MB_EXIT_OK;
}
