/* The setup keys of training on several GPUs (sim/dist.h; docs/distributed.md):
 *   world_size               N >= 1 ranks                                      (default 1)
 *   strategy                 none | ddp | fsdp                                  (default none)
 *   gradient_as_bucket_view  0 | 1 (DDP)                                        (default 0)
 *   bucket_cap_mb            MiB per DDP bucket, the first bucket 1 MiB         (default 25)
 *   fsdp_sharding            full_shard | shard_grad_op | no_shard | hybrid_shard (default full_shard)
 *   fsdp_wrap                GLOB on module paths: each module it names is a unit; adds one,
 *                            "" clears (the root unit holds every other parameter)
 *   gpus_per_node            N: hybrid_shard's shard group                      (default 8)
 *   fsdp_version             1 | 2: FullyShardedDataParallel or fully_shard      (default 2)
 *   fsdp_reshard_root        0 | 1: the root unit resharded after forward too, as
 *                            fully_shard(model, reshard_after_forward=True) does (default 0:
 *                            torch's None keeps the root gathered until backward ends)
 * DeepSpeed ZeRO (strategy zero1 | zero2 | zero3):
 *   reduce_bucket_size       elements of the gradient reduction buffer          (default 5e8)
 *   overlap_comm             0 | 1: a second buffer in stages 1, 2  (default: 1 in stage 3, else 0)
 *   stage3_param_persistence_threshold  elements: smaller parameters stay whole (default 1e5)
 *   offload                  none | optimizer | params: what lives in host memory (default none) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget/setup.h"

#define MAX_RANKS 65536

static int bad(mb_setup *s, const char *key, const char *value, const char *want) {
  snprintf(s->errmsg, sizeof s->errmsg, "%s: '%s' is not %s", key, value, want);
  return MB_E_INVALID_ARG;
}

/* digits only, in [lo, hi] */
static bool count(const char *value, int64_t lo, int64_t hi, int64_t *out) {
  if (!*value) return false;
  int64_t v = 0;
  for (const char *p = value; *p; p++) {
    if (*p < '0' || *p > '9') return false;
    v = v * 10 + (*p - '0');
    if (v > hi) return false;
  }
  if (v < lo) return false;
  *out = v;
  return true;
}

static int pick(const char *value, const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (!strcmp(value, names[i])) return i;
  return -1;
}

static const char *const strategies[] = {"none", "ddp", "fsdp", "zero1", "zero2", "zero3"};
static const char *const shardings[] = {"full_shard", "shard_grad_op", "no_shard", "hybrid_shard"};

void mb_setup_dist_defaults(mb_dist_opts *o) {
  o->strategy = MB_STRATEGY_NONE;
  o->world_size = 1;
  o->gpus_per_node = 8;
  o->bucket_cap = 25u << 20;
  o->sharding = MB_FSDP_FULL_SHARD;
  o->fsdp_version = 2;
  o->reduce_bucket_size = 500000000;
  o->overlap_comm = -1;
  o->persistence_threshold = 100000;
}

void mb_setup_dist_free(mb_dist_opts *o) {
  for (size_t i = 0; i < o->n_wrap; i++) free(o->wrap[i]);
  free(o->wrap);
  o->wrap = NULL;
  o->n_wrap = 0;
}

static int add_wrap(mb_setup *s, mb_dist_opts *o, const char *glob) {
  if (!*glob) {
    mb_setup_dist_free(o);
    return MB_OK;
  }
  char **list = realloc(o->wrap, (o->n_wrap + 1) * sizeof *list);
  if (!list) return MB_E_NOMEM;
  o->wrap = list;
  if (!(list[o->n_wrap] = malloc(strlen(glob) + 1))) return MB_E_NOMEM;
  strcpy(list[o->n_wrap++], glob);
  (void)s;
  return MB_OK;
}

int mb_setup_dist_option(mb_setup *s, const char *key, const char *value, int *rc) {
  mb_dist_opts *o = &s->train.dist;
  int64_t n = 0;
  int k;
  *rc = MB_OK;
  if (!strcmp(key, "world_size")) {
    if (count(value, 1, MAX_RANKS, &n)) o->world_size = (int32_t)n;
    else *rc = bad(s, key, value, "a number of ranks in [1, 65536]");
  } else if (!strcmp(key, "strategy")) {
    if ((k = pick(value, strategies, 6)) >= 0) o->strategy = k;
    else *rc = bad(s, key, value, "one of none, ddp, fsdp, zero1, zero2, zero3");
  } else if (!strcmp(key, "gradient_as_bucket_view")) {
    if (!strcmp(value, "1") || !strcmp(value, "true") || !strcmp(value, "on")) o->bucket_view = true;
    else if (!strcmp(value, "0") || !strcmp(value, "false") || !strcmp(value, "off")) o->bucket_view = false;
    else *rc = bad(s, key, value, "0 or 1");
  } else if (!strcmp(key, "bucket_cap_mb")) {
    if (count(value, 1, 1 << 20, &n)) o->bucket_cap = (uint64_t)n << 20;
    else *rc = bad(s, key, value, "a whole number of MiB in [1, 1048576]");
  } else if (!strcmp(key, "fsdp_sharding")) {
    if ((k = pick(value, shardings, 4)) >= 0) o->sharding = k;
    else *rc = bad(s, key, value, "one of full_shard, shard_grad_op, no_shard, hybrid_shard");
  } else if (!strcmp(key, "fsdp_wrap")) {
    *rc = add_wrap(s, o, value);
  } else if (!strcmp(key, "fsdp_version")) {
    if (!strcmp(value, "1") || !strcmp(value, "2")) o->fsdp_version = value[0] - '0';
    else *rc = bad(s, key, value, "1 (FullyShardedDataParallel) or 2 (fully_shard)");
  } else if (!strcmp(key, "fsdp_reshard_root")) {
    if (!strcmp(value, "1") || !strcmp(value, "true")) o->reshard_root = true;
    else if (!strcmp(value, "0") || !strcmp(value, "false")) o->reshard_root = false;
    else *rc = bad(s, key, value, "0 or 1");
  } else if (!strcmp(key, "gpus_per_node")) {
    if (count(value, 1, MAX_RANKS, &n)) o->gpus_per_node = (int32_t)n;
    else *rc = bad(s, key, value, "a number of GPUs in [1, 65536]");
  } else if (!strcmp(key, "reduce_bucket_size")) {
    double x = 0;
    char *end = NULL;
    x = strtod(value, &end);
    if (*value && end && !*end && x >= 1 && x <= 1e12) o->reduce_bucket_size = (int64_t)x;
    else *rc = bad(s, key, value, "a number of elements in [1, 1e12] (5e8 is DeepSpeed's default)");
  } else if (!strcmp(key, "offload")) {
    static const char *const offloads[] = {"none", "optimizer", "params"};
    if ((k = pick(value, offloads, 3)) >= 0) o->offload = k;
    else *rc = bad(s, key, value, "one of none, optimizer, params");
  } else if (!strcmp(key, "overlap_comm")) {
    if (!strcmp(value, "1") || !strcmp(value, "true")) o->overlap_comm = 1;
    else if (!strcmp(value, "0") || !strcmp(value, "false")) o->overlap_comm = 0;
    else *rc = bad(s, key, value, "0 or 1");
  } else if (!strcmp(key, "stage3_param_persistence_threshold")) {
    double x = 0;
    char *end = NULL;
    x = strtod(value, &end);
    if (*value && end && !*end && x >= 0 && x <= 1e12) o->persistence_threshold = (int64_t)x;
    else *rc = bad(s, key, value, "a number of elements in [0, 1e12]");
  } else {
    return 0;
  }
  return 1;
}
