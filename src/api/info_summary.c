#include "api/info_summary.h"

#include <stdlib.h>
#include <string.h>

const char *mb_role_class_name(int rc) {
  static const char *names[MB_RC_COUNT] = {"trainable parameter", "frozen parameter",
                                           "trainable embedding", "frozen embedding", "buffer",
                                           "constant"};
  return rc >= 0 && rc < MB_RC_COUNT ? names[rc] : "unknown";
}

static int classify(int role, int trains) {
  switch (role) {
    case MB_ROLE_PARAMETER: return trains ? MB_RC_TRAINABLE_PARAMETER : MB_RC_FROZEN_PARAMETER;
    case MB_ROLE_EMBEDDING: return trains ? MB_RC_TRAINABLE_EMBEDDING : MB_RC_FROZEN_EMBEDDING;
    case MB_ROLE_BUFFER: return MB_RC_BUFFER;
    default: return MB_RC_CONSTANT;
  }
}

static int cmp_group(const void *a, const void *b) {
  const mb_info_group *x = a, *y = b;
  if (x->role_class != y->role_class) return x->role_class - y->role_class;
  if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
  return x->dtype - y->dtype;
}

static int cmp_op_name(const void *a, const void *b) {
  const mb_info_op *x = a, *y = b;
  int c = strcmp(x->domain, y->domain);
  return c ? c : strcmp(x->op_type, y->op_type);
}

static int cmp_op(const void *a, const void *b) {
  const mb_info_op *x = a, *y = b;
  if (x->count != y->count) return x->count > y->count ? -1 : 1;
  int c = strcmp(x->domain, y->domain);
  return c ? c : strcmp(x->op_type, y->op_type);
}

void mb_info_summary_free(mb_info_summary *sum) {
  free(sum->groups);
  free(sum->embeddings);
  free(sum->ops);
  free(sum->role_class);
  memset(sum, 0, sizeof *sum);
}

int mb_info_summarize(const mb_model *m, const mb_setup *s, mb_info_summary *out) {
  memset(out, 0, sizeof *out);
  out->acct.struct_size = sizeof out->acct;
  int rc = mb_account(m, s, &out->acct);
  if (rc) return rc;
  size_t n = mb_model_num_initializers(m), nn = mb_model_num_nodes(m);
  out->groups = calloc(n + 1, sizeof *out->groups);
  out->embeddings = calloc(n + 1, sizeof *out->embeddings);
  out->role_class = calloc(n + 1, sizeof *out->role_class);
  out->ops = calloc(nn + 1, sizeof *out->ops);
  if (!out->groups || !out->embeddings || !out->role_class || !out->ops) {
    mb_info_summary_free(out);
    return MB_E_NOMEM;
  }
  uint64_t top_bytes[MB_INFO_TOP];
  for (size_t i = 0; i < n; i++) {
    mb_initializer_desc d = {.struct_size = sizeof d};
    mb_model_initializer(m, i, &d);
    int cls = classify(d.role, mb_initializer_trainable(m, s, i) == 1);
    out->role_class[i] = cls;
    size_t g = 0;
    while (g < out->n_groups && !(out->groups[g].role_class == cls && out->groups[g].dtype == d.dtype)) g++;
    if (g == out->n_groups) {
      out->groups[g].role_class = cls;
      out->groups[g].dtype = d.dtype;
      out->n_groups++;
    }
    out->groups[g].tensors++;
    out->groups[g].numel += d.numel;
    out->groups[g].bytes += d.nbytes;
    if (d.role == MB_ROLE_EMBEDDING) out->embeddings[out->n_embeddings++] = i;
    /* insertion into the top list (stable: earlier initializers win ties) */
    size_t pos = out->n_top;
    while (pos > 0 && top_bytes[pos - 1] < d.nbytes) pos--;
    if (pos < MB_INFO_TOP) {
      size_t last = out->n_top < MB_INFO_TOP ? out->n_top : MB_INFO_TOP - 1;
      for (size_t k = last; k > pos; k--) {
        out->top[k] = out->top[k - 1];
        top_bytes[k] = top_bytes[k - 1];
      }
      out->top[pos] = i;
      top_bytes[pos] = d.nbytes;
      if (out->n_top < MB_INFO_TOP) out->n_top++;
    }
  }
  qsort(out->groups, out->n_groups, sizeof *out->groups, cmp_group);
  /* histogram by sorting (domain, op type) pairs: n log n however many distinct ops */
  for (size_t k = 0; k < nn; k++) {
    mb_model_node(m, k, &out->ops[k].op_type, &out->ops[k].domain, NULL);
    out->ops[k].count = 1;
  }
  qsort(out->ops, nn, sizeof *out->ops, cmp_op_name);
  for (size_t k = 0; k < nn; k++) {
    if (out->n_ops && !cmp_op_name(&out->ops[out->n_ops - 1], &out->ops[k])) out->ops[out->n_ops - 1].count++;
    else out->ops[out->n_ops++] = out->ops[k];
  }
  qsort(out->ops, out->n_ops, sizeof *out->ops, cmp_op);
  return MB_OK;
}

void mb_json_inference_signs(mb_strbuf *sb, const mb_model *m, const char *indent) {
  static const char *const kinds[] = {"", "optimized", "bn_folded", "bn_inference", "dropout_inference",
                                      "dropout_removed"};
  mb_sb_puts(sb, "\"inference_signs\": [");
  for (size_t i = 0; i < mb_model_num_inference_signs(m); i++) {
    int kind = 0;
    int64_t count = 0;
    const char *node = NULL, *message = NULL;
    mb_model_inference_sign(m, i, &kind, &node, &count, &message);
    mb_sb_printf(sb, "%s\n%s  {\"kind\": ", i ? "," : "", indent);
    mb_sb_json_str(sb, kind > 0 && kind < 6 ? kinds[kind] : "unknown");
    mb_sb_puts(sb, ", \"node\": ");
    mb_sb_json_str(sb, node);
    mb_sb_printf(sb, ", \"count\": %lld, \"message\": ", (long long)count);
    mb_sb_json_str(sb, message);
    mb_sb_putc(sb, '}');
  }
  mb_sb_printf(sb, "%s]", mb_model_num_inference_signs(m) ? "\n" : "");
  if (mb_model_num_inference_signs(m)) mb_sb_puts(sb, indent);
}
