/* membudget info: what a model holds, before any training setup. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/info_summary.h"
#include "cli/cli.h"
#include "cli/table.h"
#include "util/format.h"

static void shape_str(char *buf, size_t size, int32_t rank, const int64_t *dims,
                      const char *const *params) {
  if (rank < 0) {
    snprintf(buf, size, "?");
    return;
  }
  size_t o = 0;
  o += (size_t)snprintf(buf + o, size - o, "[");
  for (int32_t k = 0; k < rank && o < size; k++) {
    const char *sep = k ? ", " : "";
    if (params && params[k]) o += (size_t)snprintf(buf + o, size - o, "%s%s", sep, params[k]);
    else if (dims[k] >= 0) o += (size_t)snprintf(buf + o, size - o, "%s%" PRId64, sep, dims[k]);
    else o += (size_t)snprintf(buf + o, size - o, "%s?", sep);
  }
  if (o < size) snprintf(buf + o, size - o, "]");
}

static void print_io(const mb_model *m, int outputs) {
  mb_table t;
  mb_table_init(&t, "lll");
  size_t n = outputs ? mb_model_num_outputs(m) : mb_model_num_inputs(m);
  for (size_t i = 0; i < n; i++) {
    mb_tensor_desc d = {.struct_size = sizeof d};
    if (outputs) mb_model_output(m, i, &d);
    else mb_model_input(m, i, &d);
    char shape[512];
    shape_str(shape, sizeof shape, d.rank, d.dims, d.dim_params);
    const char *row[] = {d.name, mb_dtype_name(d.dtype), shape};
    mb_table_row(&t, row);
  }
  printf("%s\n", outputs ? "outputs" : "inputs");
  mb_table_print(&t, stdout, "  ");
  mb_table_free(&t);
}

static void print_human(const mb_model *m, const char *path, const mb_info_summary *s) {
  char a[32], b[32], c[32], d[32];
  printf("model     %s\n", path);
  printf("producer  %s\n", *mb_model_producer(m) ? mb_model_producer(m) : "(unknown)");
  printf("ir        %" PRId64 "\nopsets   ", mb_model_ir_version(m));
  for (size_t i = 0; i < mb_model_num_opsets(m); i++) {
    const char *dom;
    int64_t ver;
    mb_model_opset(m, i, &dom, &ver);
    printf(" %s %" PRId64, *dom ? dom : "ai.onnx", ver);
  }
  printf("\n\n");
  print_io(m, 0);
  print_io(m, 1);

  printf("\nparameters %s (trainable %s)\n\n", mb_fmt_thousands(a, sizeof a, s->acct.parameters),
         mb_fmt_thousands(b, sizeof b, s->acct.trainable));
  mb_table t;
  mb_table_init(&t, "llrrrr");
  const char *head[] = {"role", "dtype", "tensors", "elements", "bytes", ""};
  mb_table_row(&t, head);
  mb_table_rule(&t);
  uint64_t tensors = 0, numel = 0, bytes = 0;
  for (size_t g = 0; g < s->n_groups; g++) {
    const mb_info_group *gr = &s->groups[g];
    const char *row[] = {mb_role_class_name(gr->role_class), mb_dtype_name(gr->dtype),
                         mb_fmt_thousands(a, sizeof a, gr->tensors),
                         mb_fmt_thousands(b, sizeof b, gr->numel),
                         mb_fmt_thousands(c, sizeof c, gr->bytes),
                         mb_fmt_bytes(d, sizeof d, gr->bytes)};
    mb_table_row(&t, row);
    tensors += gr->tensors;
    numel += gr->numel;
    bytes += gr->bytes;
  }
  mb_table_rule(&t);
  const char *total[] = {"total", "", mb_fmt_thousands(a, sizeof a, tensors),
                         mb_fmt_thousands(b, sizeof b, numel), mb_fmt_thousands(c, sizeof c, bytes),
                         mb_fmt_bytes(d, sizeof d, bytes)};
  mb_table_row(&t, total);
  mb_table_print(&t, stdout, "");
  mb_table_free(&t);

  printf("\nembedding tables\n");
  if (!s->n_embeddings) printf("  (none)\n");
  const char *ihead[] = {"name", "role", "dtype", "shape", "elements", "bytes"};
  mb_table_init(&t, "llllrr");
  mb_table_row(&t, ihead);
  for (size_t k = 0; k < s->n_embeddings + s->n_top; k++) {
    if (k == s->n_embeddings) {
      if (s->n_embeddings) mb_table_print(&t, stdout, "  ");
      mb_table_free(&t);
      printf("\nlargest initializers\n");
      mb_table_init(&t, "llllrr");
      mb_table_row(&t, ihead);
    }
    size_t i = k < s->n_embeddings ? s->embeddings[k] : s->top[k - s->n_embeddings];
    mb_initializer_desc id = {.struct_size = sizeof id};
    mb_model_initializer(m, i, &id);
    char shape[256];
    shape_str(shape, sizeof shape, id.rank, id.dims, NULL);
    const char *row[] = {id.name, mb_role_class_name(s->role_class[i]), mb_dtype_name(id.dtype),
                         shape, mb_fmt_thousands(a, sizeof a, id.numel),
                         mb_fmt_thousands(b, sizeof b, id.nbytes)};
    mb_table_row(&t, row);
  }
  if (s->n_top) mb_table_print(&t, stdout, "  ");
  mb_table_free(&t);

  printf("\nop types (%zu nodes)\n", mb_model_num_nodes(m));
  mb_table_init(&t, "lr");
  for (size_t k = 0; k < s->n_ops; k++) {
    char op[256];
    snprintf(op, sizeof op, "%s%s%s", s->ops[k].domain, *s->ops[k].domain ? "." : "", s->ops[k].op_type);
    const char *row[] = {op, mb_fmt_thousands(a, sizeof a, s->ops[k].count)};
    mb_table_row(&t, row);
  }
  mb_table_print(&t, stdout, "  ");
  mb_table_free(&t);
  for (size_t k = 0; k < mb_model_num_warnings(m); k++)
    fprintf(stderr, "membudget: warning: %s\n", mb_model_warning(m, k));
  for (size_t k = 0; k < mb_model_num_inference_signs(m); k++) {
    const char *node, *message;
    int64_t count;
    mb_model_inference_sign(m, k, NULL, &node, &count, &message);
    fprintf(stderr, "membudget: warning: exported for inference: %s (node '%s'%s); estimate refuses it "
            "without --accept-inference-graph\n", message, node, count > 1 ? " and others" : "");
  }
}

int mb_cmd_info(int argc, char **argv) {
  const char *path = NULL;
  int json = 0, rc = MB_EXIT_OK;
  mb_setup *setup = NULL;
  if (mb_setup_create(&setup) != MB_OK) {
    fprintf(stderr, "membudget: out of memory\n");
    return MB_EXIT_INPUT;
  }
  for (int i = 1; i < argc && rc == MB_EXIT_OK; i++) {
    const char *arg = argv[i];
    if (!strcmp(arg, "--json")) {
      json = 1;
    } else if (mb_cli_setup_flag(setup, MB_CLI_TRAINABILITY, argc, argv, &i, &rc)) {
      continue;
    } else if (arg[0] == '-' && arg[1]) {
      rc = mb_cli_usage_error("info: unknown option '%s'", arg);
    } else if (path) {
      rc = mb_cli_usage_error("info: more than one model given");
    } else {
      path = arg;
    }
  }
  if (rc == MB_EXIT_OK && !path) rc = mb_cli_usage_error("info: no model given");
  if (rc != MB_EXIT_OK) {
    mb_setup_free(setup);
    return rc;
  }

  mb_model *m = NULL;
  if (mb_model_load_file_setup(path, setup, &m) != MB_OK) {
    fprintf(stderr, "membudget: %s\n", mb_model_errmsg(m));
    mb_model_free(m);
    mb_setup_free(setup);
    return MB_EXIT_INPUT;
  }
  if (json) {
    char *doc = NULL;
    if (mb_model_info_json(m, setup, &doc) == MB_OK) {
      fputs(doc, stdout);
    } else {
      fprintf(stderr, "membudget: out of memory\n");
      rc = MB_EXIT_INPUT;
    }
    mb_free(doc);
  } else {
    mb_info_summary s;
    if (mb_info_summarize(m, setup, &s) == MB_OK) {
      print_human(m, path, &s);
      mb_info_summary_free(&s);
    } else {
      fprintf(stderr, "membudget: out of memory\n");
      rc = MB_EXIT_INPUT;
    }
  }
  mb_model_free(m);
  mb_setup_free(setup);
  return rc;
}
