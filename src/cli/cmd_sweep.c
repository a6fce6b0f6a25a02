/* membudget sweep: the peaks at several batch sizes, or at several values of one dim (a
 * sequence length), as a table, JSON (--json) or a picture (--svg). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/table.h"
#include "util/format.h"

#define MAX_VALUES 4096

/* What is swept: "A..B" (a range: default points, or --points N) or "A,B,C" (these values). */
typedef struct spec {
  bool given, range;
  int64_t lo, hi;
  int64_t values[MAX_VALUES];
  size_t n;
  char dim[256];         /* "" for the batch size */
} spec;

static bool is_spec(const char *v) { return strstr(v, "..") || strchr(v, ','); }

static bool parse_count(const char *s, const char *end, int64_t *out) {
  if (s == end) return false;
  int64_t v = 0;
  for (const char *p = s; p < end; p++) {
    if (*p < '0' || *p > '9' || v > (INT64_MAX - 9) / 10) return false;
    v = v * 10 + (*p - '0');
  }
  *out = v;
  return v >= 1;
}

static int parse_spec(spec *sp, const char *flag, const char *name, const char *v) {
  if (sp->given) return mb_cli_usage_error("sweep: one swept value at a time (%s %s is a second)", flag, v);
  sp->given = true;
  snprintf(sp->dim, sizeof sp->dim, "%s", name);
  const char *dots = strstr(v, "..");
  if (dots) {
    sp->range = true;
    if (!parse_count(v, dots, &sp->lo) || !parse_count(dots + 2, v + strlen(v), &sp->hi) || sp->hi < sp->lo)
      return mb_cli_usage_error("%s: a range is LOW..HIGH with integers 1 <= LOW <= HIGH, not '%s'", flag, v);
    return MB_EXIT_OK;
  }
  for (const char *p = v;;) {
    const char *comma = strchr(p, ',');
    const char *end = comma ? comma : p + strlen(p);
    if (sp->n == MAX_VALUES) return mb_cli_usage_error("%s: at most %d values", flag, MAX_VALUES);
    if (!parse_count(p, end, &sp->values[sp->n++]))
      return mb_cli_usage_error("%s: a list is integers >= 1 separated by commas, not '%s'", flag, v);
    if (!comma) break;
    p = comma + 1;
  }
  return MB_EXIT_OK;
}

static const char *fits_text(const mb_budget *b, char *buf, size_t size) {
  char x[32];
  if (b->fits < 0) return "-";
  if (b->fits) return "yes";
  snprintf(buf, size, "NO (short by %s)", mb_fmt_bytes(x, sizeof x, (uint64_t)(-b->available)));
  return buf;
}

static void print_table(const char *path, const mb_sweep *w, const spec *sp, int points) {
  char x[32], y[32];
  size_t n = mb_sweep_num_points(w);
  mb_budget b = {.struct_size = sizeof b};
  int64_t value;
  printf("model    %s\n", path);
  if (n && mb_sweep_point(w, 0, &value, &b) == MB_OK && b.device_memory)
    printf("device   %s x %.2f = %s usable\n", mb_fmt_bytes(x, sizeof x, b.device_memory),
           (double)b.usable_memory / (double)b.device_memory, mb_fmt_bytes(y, sizeof y, b.usable_memory));
  printf("sweep    %s", sp->dim[0] ? sp->dim : "batch size");
  if (sp->range) {
    printf(" %lld..%lld: ", (long long)sp->lo, (long long)sp->hi);
    if (points) printf("%d values spread on a log scale", points);
    else printf("the powers of two and both ends");
  } else {
    printf(": the values given");
  }
  int64_t solved = mb_sweep_solved_batch(w);
  if (solved) printf(", and the solved batch size (%lld)", (long long)solved);
  printf("\n\n");
  bool dim = sp->dim[0] != 0;
  mb_table t;
  mb_table_init(&t, dim ? "rrrrrll" : "rrrrll");
  const char *head_dim[] = {sp->dim, "batch", "allocated peak", "reserved peak", "device peak", "peak in", "fits"};
  const char *head_batch[] = {"batch", "allocated peak", "reserved peak", "device peak", "peak in", "fits"};
  mb_table_row(&t, dim ? head_dim : head_batch);
  mb_table_rule(&t);
  for (size_t i = 0; i < n; i++) {
    if (mb_sweep_point(w, i, &value, &b) != MB_OK) continue;
    char v[32], bs[40], a[32], r[32], d[32], f[64], fits[160];
    snprintf(v, sizeof v, "%lld", (long long)value);
    snprintf(bs, sizeof bs, "%lld%s", (long long)b.batch_size, dim && b.solved ? " (solved)" : "");
    snprintf(fits, sizeof fits, "%s%s", fits_text(&b, f, sizeof f),
             !dim && b.solved ? "  <- solved: the largest that fits" : "");
    const char *cells_dim[] = {v, bs, mb_fmt_bytes(a, sizeof a, b.allocated_peak), mb_fmt_bytes(r, sizeof r, b.reserved_peak),
                               mb_fmt_bytes(d, sizeof d, b.device_peak), mb_phase_name(b.peak_phase), fits};
    const char *cells_batch[] = {v, cells_dim[2], cells_dim[3], cells_dim[4], cells_dim[5], fits};
    mb_table_row(&t, dim ? cells_dim : cells_batch);
  }
  mb_table_print(&t, stdout, "");
  mb_table_free(&t);
}

/* The model's file name without its directories: the picture's title. */
static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

int mb_cmd_sweep(int argc, char **argv) {
  const char *path = NULL, *teacher_path = NULL, *svg_path = NULL;
  int json = 0, rc = MB_EXIT_OK, have_device = 0, points = 0, have_batch = 0;
  spec *sp = calloc(1, sizeof *sp);
  mb_setup *setup = NULL;
  if (!sp || mb_setup_create(&setup) != MB_OK) {
    free(sp);
    return MB_EXIT_INPUT;
  }
  if ((rc = mb_cli_backend_first(setup, argc, argv)) != MB_EXIT_OK) {
    mb_setup_free(setup);
    free(sp);
    return rc;
  }
  for (int i = 1; i < argc && rc == MB_EXIT_OK; i++) {
    const char *a = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--batch") && value && is_spec(value)) {
      rc = parse_spec(sp, a, "", value);
      i++;
    } else if (!strcmp(a, "--dim") && value && strchr(value, '=') && is_spec(strchr(value, '=') + 1)) {
      const char *eq = strchr(value, '=');
      char name[256];
      snprintf(name, sizeof name, "%.*s", (int)(eq - value), value);
      rc = eq == value ? mb_cli_usage_error("--dim wants NAME=LOW..HIGH, got '%s'", value) : parse_spec(sp, a, name, eq + 1);
      i++;
    } else if (mb_cli_training_flag(setup, argc, argv, &i, &rc, &have_device)) {
      continue;
    } else if (!strcmp(a, "--json")) {
      json = 1;
    } else if (!strcmp(a, "--svg")) {
      if (!value || !*value) rc = mb_cli_usage_error("--svg needs a file name (sweep.svg)");
      else svg_path = argv[++i];
    } else if (!strcmp(a, "--points")) {
      char *end = NULL;
      long p = value ? strtol(value, &end, 10) : 0;
      if (!value || !*value || *end || p < 2 || p > MAX_VALUES) rc = mb_cli_usage_error("--points needs an integer from 2 to %d", MAX_VALUES);
      else points = (int)p;
      i++;
    } else if (!strcmp(a, "--teacher")) {
      if (!value) rc = mb_cli_usage_error("--teacher needs a model");
      else teacher_path = argv[++i];
    } else if (mb_cli_setup_flag(setup, MB_CLI_TRAINABILITY | MB_CLI_DIMS, argc, argv, &i, &rc)) {
      have_batch |= !strcmp(a, "--batch");
    } else if (a[0] == '-' && a[1]) {
      rc = mb_cli_usage_error("sweep: unknown option '%s'", a);
    } else if (path) {
      rc = mb_cli_usage_error("sweep: more than one model given");
    } else {
      path = a;
    }
  }
  if (rc == MB_EXIT_OK && !path) rc = mb_cli_usage_error("sweep: no model given");
  if (rc == MB_EXIT_OK && !sp->given)
    rc = mb_cli_usage_error("sweep: give what to sweep: --batch LOW..HIGH (or a list 1,8,64) or --dim NAME=LOW..HIGH");
  if (rc == MB_EXIT_OK && points && !sp->range) rc = mb_cli_usage_error("--points goes with a range LOW..HIGH");
  if (rc == MB_EXIT_OK && !sp->dim[0] && have_batch)
    rc = mb_cli_usage_error("sweep: --batch is what is swept: give it once, as LOW..HIGH or a list");
  if (rc == MB_EXIT_OK && sp->dim[0] && !have_batch && !have_device)
    rc = mb_cli_usage_error("sweep --dim: give a batch size (--batch N), or a GPU (--gpu NAME) or its memory "
                            "(--device-memory SIZE) to solve the batch size at each value");
  if (rc == MB_EXIT_OK && sp->range) {
    sp->n = mb_sweep_values(sp->lo, sp->hi, points, sp->values, MAX_VALUES);
    if (sp->n > MAX_VALUES) rc = mb_cli_usage_error("sweep: at most %d values", MAX_VALUES);
  }
  mb_model *m = NULL, *teacher = NULL;
  mb_sweep *w = NULL;
  if (rc == MB_EXIT_OK) {
    if (mb_model_load_file_setup(path, setup, &m) != MB_OK) {
      fprintf(stderr, "membudget: %s\n", mb_model_errmsg(m));
      rc = MB_EXIT_INPUT;
    } else if (teacher_path && mb_model_load_file_setup(teacher_path, setup, &teacher) != MB_OK) {
      fprintf(stderr, "membudget: teacher: %s\n", mb_model_errmsg(teacher));
      rc = MB_EXIT_INPUT;
    } else if (mb_setup_set_teacher(setup, teacher),
               mb_sweep_create(m, setup, sp->dim, sp->values, sp->n, 1, &w) != MB_OK) {
      fprintf(stderr, "membudget: %s: %s\n", path, mb_setup_errmsg(setup));
      rc = MB_EXIT_INPUT;
    } else {
      char *doc = NULL;
      if (json) {
        if (mb_sweep_json(w, &doc) == MB_OK) fputs(doc, stdout);
        else rc = MB_EXIT_INPUT;
      } else {
        print_table(path, w, sp, points);
      }
      mb_free(doc);
      if (svg_path) {
        char *svg = NULL;
        int st = mb_sweep_svg(w, base_name(path), &svg);
        int wrc = st == MB_OK ? mb_cli_write_file("--svg", svg_path, svg) : MB_EXIT_INPUT;
        if (st != MB_OK) fprintf(stderr, "membudget: --svg: %s\n", mb_status_str(st));
        if (wrc != MB_EXIT_OK) rc = wrc;
        mb_free(svg);
      }
    }
  }
  mb_sweep_free(w);
  mb_model_free(teacher);
  mb_model_free(m);
  mb_setup_free(setup);
  free(sp);
  return rc;
}
