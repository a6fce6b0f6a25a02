/* The aggregation behind `membudget info`, built only on the public API so that the library's
 * JSON and the CLI's table come from one piece of code. */
#ifndef MB_API_INFO_SUMMARY_H
#define MB_API_INFO_SUMMARY_H
#include <stddef.h>
#include <stdint.h>

#include "membudget/membudget.h"
#include "util/strbuf.h"

/* Role classes in the order they are reported. */
typedef enum mb_role_class {
  MB_RC_TRAINABLE_PARAMETER, MB_RC_FROZEN_PARAMETER, MB_RC_TRAINABLE_EMBEDDING,
  MB_RC_FROZEN_EMBEDDING, MB_RC_BUFFER, MB_RC_CONSTANT, MB_RC_COUNT
} mb_role_class;
const char *mb_role_class_name(int rc);

typedef struct mb_info_group {
  int role_class;
  int32_t dtype;
  uint64_t tensors, numel, bytes;
} mb_info_group;

typedef struct mb_info_op {
  const char *domain, *op_type;
  uint64_t count;
} mb_info_op;

#define MB_INFO_TOP 10

typedef struct mb_info_summary {
  mb_accounting acct;
  mb_info_group *groups;   /* sorted by role class, then bytes descending */
  size_t n_groups;
  size_t top[MB_INFO_TOP]; /* initializer indices, largest bytes first */
  size_t n_top;
  size_t *embeddings;      /* initializer indices of embedding tables */
  size_t n_embeddings;
  mb_info_op *ops;         /* main-graph op types, most used first */
  size_t n_ops;
  int *role_class;         /* per initializer */
} mb_info_summary;

int mb_info_summarize(const mb_model *m, const mb_setup *s, mb_info_summary *out);
void mb_info_summary_free(mb_info_summary *sum);
/* "inference_signs": [{"kind": "bn_folded", "node": ..., "count": n, "message": ...}, ...] */
void mb_json_inference_signs(mb_strbuf *sb, const mb_model *m, const char *indent);
#endif
