/* The setup keys of FSDP's wrapping by module class and FSDP1's prefetch options
 * (sim/dist.h; docs/distributed.md):
 *   fsdp_wrap_class          NAME[,NAME...]: every module of these classes is a unit (the
 *                            class name as the exporter records it: BasicBlock, GPT2Block);
 *                            adds, "" clears
 *   fsdp_backward_prefetch   pre | post | none: FSDP1's BackwardPrefetch (default pre)
 *   fsdp_forward_prefetch    0 | 1: FSDP1's forward_prefetch                  (default 0)
 *   fsdp_limit_all_gathers   0 | 1: FSDP1's limit_all_gathers                 (default 1)
 * Mixed precision (FSDP2 MixedPrecisionPolicy, FSDP1 MixedPrecision):
 *   fsdp_param_dtype         fp32 | bf16 | fp16: units gathered and run in it (default: none)
 *   fsdp_reduce_dtype        fp32 | bf16 | fp16: gradients reduced in it   (default: param's)
 *   fsdp_buffer_dtype        fp32 | bf16 | fp16: FSDP1's buffer_dtype       (default: kept) */
#include <stdlib.h>
#include <string.h>

#include "budget/setup.h"
#include "graph/dtype.h"

static const char *const prefetches[] = {"pre", "post", "none", NULL}; /* by enum mb_fsdp_prefetch */
static const char *const dtypes[] = {"fp32", "bf16", "fp16", NULL};
static const int dtype_ids[] = {MB_DTYPE_FLOAT, MB_DTYPE_BFLOAT16, MB_DTYPE_FLOAT16};

void mb_setup_fsdp_defaults(mb_dist_opts *o) {
  o->backward_prefetch = MB_PREFETCH_PRE;
  o->forward_prefetch = false;
  o->limit_all_gathers = true;
}

void mb_setup_fsdp_free(mb_dist_opts *o) {
  for (size_t i = 0; i < o->n_wrap_class; i++) free(o->wrap_class[i]);
  free(o->wrap_class);
  o->wrap_class = NULL;
  o->n_wrap_class = 0;
}

/* A class name as Python spells one: a letter or '_', then letters, digits and '_'. */
static bool class_name(const char *p, size_t n) {
  if (!n || (p[0] >= '0' && p[0] <= '9')) return false;
  for (size_t i = 0; i < n; i++)
    if (!(p[i] == '_' || (p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' && p[i] <= 'Z') || (p[i] >= '0' && p[i] <= '9')))
      return false;
  return true;
}

static int add_classes(mb_setup *s, mb_dist_opts *o, const char *key, const char *value) {
  for (const char *p = value; *p;) {
    const char *end = strchr(p, ',');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (!class_name(p, n) || (end && !end[1])) return mb_setup_bad(s, key, value, "class names separated by commas (BasicBlock,GPT2Block)");
    char **grown = realloc(o->wrap_class, (o->n_wrap_class + 1) * sizeof *grown);
    if (!grown) return MB_E_NOMEM;
    o->wrap_class = grown;
    if (!(grown[o->n_wrap_class] = malloc(n + 1))) return MB_E_NOMEM;
    memcpy(grown[o->n_wrap_class], p, n);
    grown[o->n_wrap_class++][n] = '\0';
    p += n + (end ? 1 : 0);
  }
  return MB_OK;
}

int mb_setup_fsdp_option(mb_setup *s, const char *key, const char *value, int *rc) {
  mb_dist_opts *o = &s->train.dist;
  int k;
  *rc = MB_OK;
  if (!strcmp(key, "fsdp_wrap_class")) {
    if (*value) *rc = add_classes(s, o, key, value);
    else mb_setup_fsdp_free(o);
  } else if (!strcmp(key, "fsdp_backward_prefetch")) {
    if ((*rc = mb_setup_pick(s, key, value, prefetches, &k)) == MB_OK) o->backward_prefetch = k;
  } else if (!strcmp(key, "fsdp_forward_prefetch")) {
    *rc = mb_setup_bool(s, key, value, &o->forward_prefetch);
  } else if (!strcmp(key, "fsdp_limit_all_gathers")) {
    *rc = mb_setup_bool(s, key, value, &o->limit_all_gathers);
  } else if (!strcmp(key, "fsdp_param_dtype") || !strcmp(key, "fsdp_reduce_dtype") || !strcmp(key, "fsdp_buffer_dtype")) {
    if ((*rc = mb_setup_pick(s, key, value, dtypes, &k)) == MB_OK)
      *(key[5] == 'p' ? &o->param_dtype : key[5] == 'r' ? &o->reduce_dtype : &o->buffer_dtype) = dtype_ids[k];
  } else {
    return 0;
  }
  return 1;
}
