/* membudget shapes: every tensor's dtype, shape and bytes at given dim values.
 * membudget ops: the operator table. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/table.h"
#include "util/format.h"
#include "util/strbuf.h"

static void dims_str(char *buf, size_t size, const mb_shape_desc *d) {
  if (!d->known) { snprintf(buf, size, "?"); return; }
  size_t o = (size_t)snprintf(buf, size, "[");
  for (int32_t k = 0; k < d->rank && o < size; k++)
    o += (size_t)snprintf(buf + o, size - o, "%s%" PRId64, k ? ", " : "", d->dims[k]);
  if (o < size) snprintf(buf + o, size - o, "]");
}

/* --dim NAME=VALUE into the setup. */
int mb_cli_parse_dim(mb_setup *setup, const char *arg) {
  const char *eq = strchr(arg, '=');
  char *end = NULL;
  if (!eq || eq == arg) return mb_cli_usage_error("--dim wants NAME=VALUE, got '%s'", arg);
  errno = 0;
  long long v = strtoll(eq + 1, &end, 10);
  if (!*(eq + 1) || *end || v < 0 || errno == ERANGE)
    return mb_cli_usage_error("--dim %s: the value must be an integer from 0 to %lld", arg, (long long)INT64_MAX);
  char name[256];
  snprintf(name, sizeof name, "%.*s", (int)(eq - arg), arg);
  return mb_setup_set_dim(setup, name, v) == MB_OK ? MB_EXIT_OK : mb_cli_usage_error("--dim %s: %s", arg, mb_setup_errmsg(setup));
}

/* The batches-of-graphs flags and their setup keys (--graph-sizes reads a file: below). */
static const char *graph_flag(const char *flag) {
  static const char *const flags[][2] = {{"--per-sample", "per_sample"}, {"--batch-unit", "batch_unit"},
                                         {"--graph-quantile", "graph_quantile"}, {"--graph-batches", "graph_batches"}};
  for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++)
    if (!strcmp(flag, flags[k][0])) return flags[k][1];
  return NULL;
}

int mb_cli_parse_limit(mb_setup *setup, const char *arg) {
  const char *eq = strchr(arg, '=');
  char key[96];
  if (!eq || eq == arg || (size_t)(eq - arg) + 7 > sizeof key) return mb_cli_usage_error("--limit needs NAME=VALUE, not '%s'", arg);
  snprintf(key, sizeof key, "limit.%.*s", (int)(eq - arg), arg);
  if (mb_setup_set(setup, key, eq + 1) != MB_OK) return mb_cli_usage_error("--limit: %s", mb_setup_errmsg(setup));
  return MB_EXIT_OK;
}

int mb_cli_setup_flag(mb_setup *setup, int which, int argc, char **argv, int *i, int *rc) {
  const char *a = argv[*i], *value = *i + 1 < argc ? argv[*i + 1] : NULL;
  if ((which & MB_CLI_TRAINABILITY) && (!strcmp(a, "--freeze") || !strcmp(a, "--trainable"))) {
    int st = value ? (a[2] == 'f' ? mb_setup_add_freeze(setup, value) : mb_setup_add_trainable(setup, value)) : 0;
    if (!value) *rc = mb_cli_usage_error("%s needs a GLOB", a);
    else if (st != MB_OK) *rc = mb_cli_usage_error("%s: %s", a, mb_setup_errmsg(setup));
  } else if ((which & MB_CLI_DIMS) && !strcmp(a, "--batch")) {
    char *end = NULL;
    errno = 0;
    long long b = value ? strtoll(value, &end, 10) : 0;
    if (!value || !*value || *end || b < 1 || errno == ERANGE || mb_setup_set_batch(setup, b) != MB_OK)
      *rc = mb_cli_usage_error("--batch needs an integer from 1 to %lld, not '%s'", (long long)INT64_MAX,
                               value ? value : "");
  } else if ((which & MB_CLI_DIMS) && !strcmp(a, "--batch-dim")) {
    if (!value || mb_setup_set_batch_dim(setup, value) != MB_OK) *rc = mb_cli_usage_error("--batch-dim needs a dim name");
  } else if ((which & MB_CLI_DIMS) && !strcmp(a, "--dim")) {
    *rc = value ? mb_cli_parse_dim(setup, value) : mb_cli_usage_error("--dim needs NAME=VALUE");
  } else if ((which & MB_CLI_DIMS) && !strcmp(a, "--graph-sizes")) {
    if (!value) *rc = mb_cli_usage_error("--graph-sizes needs a CSV file");
    else if (mb_setup_set(setup, "graph_sizes", value) != MB_OK) { /* the file's fault: an input error */
      fprintf(stderr, "membudget: %s\n", mb_setup_errmsg(setup));
      *rc = MB_EXIT_INPUT;
    }
  } else if (!strcmp(a, "--limit")) { /* every command that loads: limit.NAME */
    *rc = value ? mb_cli_parse_limit(setup, value) : mb_cli_usage_error("--limit needs NAME=VALUE");
  } else if ((which & MB_CLI_DIMS) && graph_flag(a)) {
    if (!value) *rc = mb_cli_usage_error("%s needs a value", a);
    else if (mb_setup_set(setup, graph_flag(a), value) != MB_OK)
      *rc = mb_cli_usage_error("%s: %s", a, mb_setup_errmsg(setup));
  } else {
    return 0;
  }
  (*i)++;
  return 1;
}

/* The default bounds inference took for data-dependent sizes, on stderr with the notes. */
static void note_assumed(const mb_shapes *sh) {
  for (size_t i = 0; i < mb_shapes_num_assumptions(sh); i++) {
    const char *node, *op, *tensor, *why;
    int64_t value;
    mb_shapes_assumption(sh, i, &node, &op, &tensor, &value, &why);
    fprintf(stderr, "membudget: assumed: %s = %" PRId64 " (node '%s', %s): %s; --dim '%s=N' overrides\n", tensor,
            value, node, op, why, tensor);
  }
}

int mb_cmd_shapes(int argc, char **argv) {
  const char *path = NULL;
  int json = 0, rc = MB_EXIT_OK;
  mb_setup *setup = NULL;
  if (mb_setup_create(&setup) != MB_OK) return MB_EXIT_INPUT;
  for (int i = 1; i < argc && rc == MB_EXIT_OK; i++) {
    if (!strcmp(argv[i], "--json")) json = 1;
    else if (mb_cli_setup_flag(setup, MB_CLI_DIMS, argc, argv, &i, &rc)) continue;
    else if (!strcmp(argv[i], "--input-data")) {
      if (i + 1 >= argc) rc = mb_cli_usage_error("--input-data needs a DIR");
      else if (mb_setup_bind_input_dir(setup, argv[++i]) != MB_OK) {
        fprintf(stderr, "membudget: %s\n", mb_setup_errmsg(setup));
        rc = MB_EXIT_INPUT;
      }
    }
    else if (argv[i][0] == '-' && argv[i][1]) rc = mb_cli_usage_error("shapes: unknown option '%s'", argv[i]);
    else if (path) rc = mb_cli_usage_error("shapes: more than one model given");
    else path = argv[i];
  }
  if (rc == MB_EXIT_OK && !path) rc = mb_cli_usage_error("shapes: no model given");
  if (rc != MB_EXIT_OK) { mb_setup_free(setup); return rc; }
  mb_model *m = NULL;
  mb_shapes *sh = NULL;
  if (mb_model_load_file_setup(path, setup, &m) != MB_OK) {
    fprintf(stderr, "membudget: %s\n", mb_model_errmsg(m));
    rc = MB_EXIT_INPUT;
  } else if (mb_infer_shapes(m, setup, &sh) != MB_OK) {
    fprintf(stderr, "membudget: %s: %s\n", path, mb_shapes_errmsg(sh));
    rc = MB_EXIT_INPUT;
  } else if (json) {
    if (*mb_shapes_note(sh)) fprintf(stderr, "membudget: note: %s\n", mb_shapes_note(sh));
    note_assumed(sh);
    mb_strbuf sb;
    mb_sb_init(&sb);
    mb_sb_puts(&sb, "{\n  \"schema_version\": 1,\n  \"tensors\": [");
    for (size_t i = 0; i < mb_shapes_num_tensors(sh); i++) {
      mb_shape_desc d = {.struct_size = sizeof d};
      mb_shapes_tensor(sh, i, &d);
      mb_sb_puts(&sb, i ? ",\n    {\"name\": " : "\n    {\"name\": ");
      mb_sb_json_str(&sb, d.name);
      mb_sb_puts(&sb, ", \"producer\": ");
      mb_sb_json_str(&sb, d.producer);
      mb_sb_puts(&sb, ", \"op_type\": ");
      mb_sb_json_str(&sb, d.op_type);
      mb_sb_puts(&sb, ", \"dtype\": ");
      mb_sb_json_str(&sb, d.known ? mb_dtype_name(d.dtype) : NULL);
      mb_sb_puts(&sb, ", \"shape\": ");
      if (!d.known) mb_sb_puts(&sb, "null");
      else {
        mb_sb_putc(&sb, '[');
        for (int32_t k = 0; k < d.rank; k++) mb_sb_printf(&sb, "%s%" PRId64, k ? ", " : "", d.dims[k]);
        mb_sb_putc(&sb, ']');
      }
      mb_sb_printf(&sb, ", \"bytes\": %" PRIu64 "}", d.nbytes);
    }
    mb_sb_puts(&sb, "]\n}\n");
    char *doc = mb_sb_detach(&sb);
    if (doc) fputs(doc, stdout);
    free(doc);
  } else {
    if (*mb_shapes_note(sh)) fprintf(stderr, "membudget: note: %s\n", mb_shapes_note(sh));
    note_assumed(sh);
    mb_table t;
    mb_table_init(&t, "lllllr");
    const char *head[] = {"tensor", "node", "op", "dtype", "shape", "bytes"};
    mb_table_row(&t, head);
    mb_table_rule(&t);
    for (size_t i = 0; i < mb_shapes_num_tensors(sh); i++) {
      mb_shape_desc d = {.struct_size = sizeof d};
      mb_shapes_tensor(sh, i, &d);
      char shape[512], bytes[32];
      dims_str(shape, sizeof shape, &d);
      const char *row[] = {d.name, d.producer ? d.producer : "", d.op_type ? d.op_type : "",
                           d.known ? mb_dtype_name(d.dtype) : "?", shape,
                           mb_fmt_thousands(bytes, sizeof bytes, d.nbytes)};
      mb_table_row(&t, row);
    }
    mb_table_print(&t, stdout, "");
    mb_table_free(&t);
  }
  mb_shapes_free(sh);
  mb_model_free(m);
  mb_setup_free(setup);
  return rc;
}

int mb_cmd_ops(int argc, char **argv) {
  (void)argv;
  if (argc > 1) return mb_cli_usage_error("ops takes no arguments");
  mb_table t;
  mb_table_init(&t, "lllll");
  const char *head[] = {"domain", "op", "opsets", "inputs", "outputs"};
  mb_table_row(&t, head);
  size_t n = mb_ops_num();
  for (size_t i = 0; i < n; i++) {
    const char *dom, *op;
    int since, until = 0;
    mb_ops_get(i, &dom, &op, &since);
    /* an entry holds until the next entry of the same op starts */
    for (size_t j = 0; j < n; j++) {
      const char *d2, *o2;
      int s2;
      mb_ops_get(j, &d2, &o2, &s2);
      if (s2 > since && !strcmp(o2, op) && !strcmp(d2, dom) && (!until || s2 - 1 < until)) until = s2 - 1;
    }
    char range[32], ins[32], outs[32];
    if (until == since) snprintf(range, sizeof range, "%d", since);
    else if (until) snprintf(range, sizeof range, "%d-%d", since, until);
    else snprintf(range, sizeof range, "%d+", since);
    /* inputs: those that must be given, then the most slots ("1-3", "2", "1+": any number) */
    int min_in, max_in, max_out;
    mb_ops_arity(i, &min_in, &max_in, &max_out);
    if (max_in < 0) snprintf(ins, sizeof ins, "%d+", min_in);
    else if (max_in == min_in) snprintf(ins, sizeof ins, "%d", min_in);
    else snprintf(ins, sizeof ins, "%d-%d", min_in, max_in);
    if (max_out < 0) snprintf(outs, sizeof outs, "any");
    else snprintf(outs, sizeof outs, "%d", max_out);
    const char *row[] = {*dom ? dom : "ai.onnx", op, range, ins, outs};
    mb_table_row(&t, row);
  }
  mb_table_print(&t, stdout, "");
  mb_table_free(&t);
  return MB_EXIT_OK;
}
