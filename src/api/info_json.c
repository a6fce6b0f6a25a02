/* mb_model_info_json: the `membudget info --json` document. Raw byte integers throughout. */
#include <string.h>

#include "api/info_summary.h"
#include "util/strbuf.h"

#define INFO_SCHEMA_VERSION 1

static void json_shape(mb_strbuf *sb, int32_t rank, const int64_t *dims, const char *const *params) {
  if (rank < 0) {
    mb_sb_puts(sb, "null");
    return;
  }
  mb_sb_putc(sb, '[');
  for (int32_t k = 0; k < rank; k++) {
    if (k) mb_sb_puts(sb, ", ");
    if (params && params[k]) mb_sb_json_str(sb, params[k]);
    else if (dims[k] >= 0) mb_sb_json_i64(sb, dims[k]);
    else mb_sb_puts(sb, "null");
  }
  mb_sb_putc(sb, ']');
}

static void json_tensor(mb_strbuf *sb, const mb_tensor_desc *d) {
  mb_sb_puts(sb, "{\"name\": ");
  mb_sb_json_str(sb, d->name);
  mb_sb_puts(sb, ", \"dtype\": ");
  mb_sb_json_str(sb, mb_dtype_name(d->dtype));
  mb_sb_puts(sb, ", \"shape\": ");
  json_shape(sb, d->rank, d->dims, d->dim_params);
  mb_sb_putc(sb, '}');
}

static void json_total(mb_strbuf *sb, const char *key, const mb_role_total *t) {
  mb_sb_printf(sb, "    \"%s\": {\"tensors\": ", key);
  mb_sb_json_u64(sb, t->tensors);
  mb_sb_puts(sb, ", \"numel\": ");
  mb_sb_json_u64(sb, t->numel);
  mb_sb_puts(sb, ", \"bytes\": ");
  mb_sb_json_u64(sb, t->bytes);
  mb_sb_puts(sb, "},\n");
}

static void json_initializer(mb_strbuf *sb, const mb_model *m, const mb_info_summary *sum,
                             size_t i) {
  static const char *locations[] = {"embedded", "external", "empty"};
  mb_initializer_desc d = {.struct_size = sizeof d};
  mb_model_initializer(m, i, &d);
  mb_sb_puts(sb, "{\"name\": ");
  mb_sb_json_str(sb, d.name);
  mb_sb_puts(sb, ", \"role\": ");
  mb_sb_json_str(sb, mb_role_class_name(sum->role_class[i]));
  mb_sb_puts(sb, ", \"dtype\": ");
  mb_sb_json_str(sb, mb_dtype_name(d.dtype));
  mb_sb_puts(sb, ", \"shape\": ");
  json_shape(sb, d.rank, d.dims, NULL);
  mb_sb_puts(sb, ", \"numel\": ");
  mb_sb_json_u64(sb, d.numel);
  mb_sb_puts(sb, ", \"bytes\": ");
  mb_sb_json_u64(sb, d.nbytes);
  mb_sb_puts(sb, ", \"location\": ");
  mb_sb_json_str(sb, d.location >= 0 && d.location <= 2 ? locations[d.location] : "unknown");
  mb_sb_printf(sb, ", \"uses\": %d, \"sparse\": %s}", (int)d.num_uses, d.is_sparse ? "true" : "false");
}

MB_API int mb_model_info_json(const mb_model *m, const mb_setup *s, char **out_json) {
  if (!m || !out_json) return MB_E_INVALID_ARG;
  *out_json = NULL;
  mb_info_summary sum;
  int rc = mb_info_summarize(m, s, &sum);
  if (rc) return rc;
  mb_strbuf sb;
  mb_sb_init(&sb);
  mb_sb_printf(&sb, "{\n  \"schema_version\": %d,\n  \"membudget_version\": \"%s\",\n",
               INFO_SCHEMA_VERSION, mb_version_string());
  mb_sb_printf(&sb, "  \"ir_version\": %lld,\n  \"producer\": ", (long long)mb_model_ir_version(m));
  mb_sb_json_str(&sb, mb_model_producer(m));
  mb_sb_puts(&sb, ",\n  \"opsets\": [");
  for (size_t i = 0; i < mb_model_num_opsets(m); i++) {
    const char *dom;
    int64_t ver;
    mb_model_opset(m, i, &dom, &ver);
    mb_sb_puts(&sb, i ? ", {\"domain\": " : "{\"domain\": ");
    mb_sb_json_str(&sb, dom);
    mb_sb_printf(&sb, ", \"version\": %lld}", (long long)ver);
  }
  const char *io_keys[2] = {"inputs", "outputs"};
  for (int io = 0; io < 2; io++) {
    mb_sb_printf(&sb, "],\n  \"%s\": [", io_keys[io]);
    size_t cnt = io ? mb_model_num_outputs(m) : mb_model_num_inputs(m);
    for (size_t i = 0; i < cnt; i++) {
      mb_tensor_desc d = {.struct_size = sizeof d};
      if (io) mb_model_output(m, i, &d);
      else mb_model_input(m, i, &d);
      mb_sb_puts(&sb, i ? ",\n    " : "\n    ");
      json_tensor(&sb, &d);
    }
  }
  mb_sb_puts(&sb, "],\n  \"totals\": {\n");
  mb_sb_puts(&sb, "    \"parameters\": ");
  mb_sb_json_u64(&sb, sum.acct.parameters);
  mb_sb_puts(&sb, ",\n    \"trainable\": ");
  mb_sb_json_u64(&sb, sum.acct.trainable);
  mb_sb_puts(&sb, ",\n");
  json_total(&sb, "trainable_parameters", &sum.acct.trainable_parameters);
  json_total(&sb, "frozen_parameters", &sum.acct.frozen_parameters);
  json_total(&sb, "trainable_embeddings", &sum.acct.trainable_embeddings);
  json_total(&sb, "frozen_embeddings", &sum.acct.frozen_embeddings);
  json_total(&sb, "buffers", &sum.acct.buffers);
  json_total(&sb, "constants", &sum.acct.constants);
  mb_sb_puts(&sb, "    \"unknown_size_tensors\": ");
  mb_sb_json_u64(&sb, sum.acct.unknown_size_tensors);
  mb_sb_puts(&sb, "\n  },\n  \"by_role_dtype\": [");
  for (size_t g = 0; g < sum.n_groups; g++) {
    const mb_info_group *gr = &sum.groups[g];
    mb_sb_puts(&sb, g ? ",\n    {\"role\": " : "\n    {\"role\": ");
    mb_sb_json_str(&sb, mb_role_class_name(gr->role_class));
    mb_sb_puts(&sb, ", \"dtype\": ");
    mb_sb_json_str(&sb, mb_dtype_name(gr->dtype));
    mb_sb_puts(&sb, ", \"tensors\": ");
    mb_sb_json_u64(&sb, gr->tensors);
    mb_sb_puts(&sb, ", \"numel\": ");
    mb_sb_json_u64(&sb, gr->numel);
    mb_sb_puts(&sb, ", \"bytes\": ");
    mb_sb_json_u64(&sb, gr->bytes);
    mb_sb_putc(&sb, '}');
  }
  mb_sb_puts(&sb, "],\n  \"embeddings\": [");
  for (size_t k = 0; k < sum.n_embeddings; k++) {
    mb_sb_puts(&sb, k ? ",\n    " : "\n    ");
    json_initializer(&sb, m, &sum, sum.embeddings[k]);
  }
  mb_sb_puts(&sb, "],\n  \"largest_initializers\": [");
  for (size_t k = 0; k < sum.n_top; k++) {
    mb_sb_puts(&sb, k ? ",\n    " : "\n    ");
    json_initializer(&sb, m, &sum, sum.top[k]);
  }
  mb_sb_puts(&sb, "],\n  \"initializers\": [");
  for (size_t k = 0; k < mb_model_num_initializers(m); k++) {
    mb_sb_puts(&sb, k ? ",\n    " : "\n    ");
    json_initializer(&sb, m, &sum, k);
  }
  mb_sb_printf(&sb, "],\n  \"num_nodes\": %zu,\n  \"num_initializers\": %zu,\n  \"op_types\": [",
               mb_model_num_nodes(m), mb_model_num_initializers(m));
  for (size_t k = 0; k < sum.n_ops; k++) {
    mb_sb_puts(&sb, k ? ",\n    {\"domain\": " : "\n    {\"domain\": ");
    mb_sb_json_str(&sb, sum.ops[k].domain);
    mb_sb_puts(&sb, ", \"op_type\": ");
    mb_sb_json_str(&sb, sum.ops[k].op_type);
    mb_sb_puts(&sb, ", \"count\": ");
    mb_sb_json_u64(&sb, sum.ops[k].count);
    mb_sb_putc(&sb, '}');
  }
  mb_sb_puts(&sb, "],\n  \"warnings\": [");
  for (size_t k = 0; k < mb_model_num_warnings(m); k++) {
    mb_sb_puts(&sb, k ? ", " : "");
    mb_sb_json_str(&sb, mb_model_warning(m, k));
  }
  mb_sb_puts(&sb, "],\n  ");
  mb_json_inference_signs(&sb, m, "  ");
  mb_sb_puts(&sb, "\n}\n");
  mb_info_summary_free(&sum);
  *out_json = mb_sb_detach(&sb);
  return *out_json ? MB_OK : MB_E_NOMEM;
}
