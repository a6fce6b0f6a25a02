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
 *   offload                  none | optimizer | params: what lives in host memory (default none)
 *   stage3_prefetch_bucket_size  elements ZeRO-3 gathers ahead of use           (default 5e7)
 *   stage3_max_live_parameters   gathered elements above which no prefetch       (default 1e9)
 *   stage3_max_reuse_distance    a module used again within this many elements stays gathered (1e9)
 *   allgather_bucket_size    ZeRO-1/2 parameter all-gather bucket (elements)    (default 5e8)
 *   contiguous_gradients     0 | 1: ZeRO's reduction buffer                     (default 1) */
#include <stdlib.h>
#include <string.h>

#include "budget/setup.h"

#define MAX_RANKS 65536

/* a count of elements written as an integer or in exponent form (DeepSpeed's configs say 5e8) */
static int elements(mb_setup *s, const char *key, const char *value, double lo, int64_t *out) {
  char *end = NULL;
  double x = strtod(value, &end);
  if (!*value || *end || !(x >= lo && x <= 1e12)) return mb_setup_bad(s, key, value, "a number of elements up to 1e12");
  *out = (int64_t)x;
  return MB_OK;
}

/* by enum mb_strategy, mb_fsdp_sharding, mb_offload */
static const char *const strategies[] = {"none", "ddp", "fsdp", "zero1", "zero2", "zero3", NULL};
static const char *const shardings[] = {"full_shard", "shard_grad_op", "no_shard", "hybrid_shard", NULL};
static const char *const offloads[] = {"none", "optimizer", "params", NULL};

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
  o->prefetch_bucket_size = 50000000;
  o->max_live_parameters = 1000000000;
  o->max_reuse_distance = 1000000000;
  o->allgather_bucket_size = 500000000;
  o->contiguous_gradients = true;
}

void mb_setup_dist_free(mb_dist_opts *o) {
  for (size_t i = 0; i < o->n_wrap; i++) free(o->wrap[i]);
  free(o->wrap);
  o->wrap = NULL;
  o->n_wrap = 0;
}

int mb_setup_dist_option(mb_setup *s, const char *key, const char *value, int *rc) {
  mb_dist_opts *o = &s->train.dist;
  int64_t n = 0;
  int k;
  *rc = MB_OK;
  if (!strcmp(key, "world_size") || !strcmp(key, "gpus_per_node")) {
    if ((*rc = mb_setup_int(s, key, value, 1, MAX_RANKS, &n)) == MB_OK)
      *(key[0] == 'w' ? &o->world_size : &o->gpus_per_node) = (int32_t)n;
  } else if (!strcmp(key, "strategy")) {
    if ((*rc = mb_setup_pick(s, key, value, strategies, &k)) == MB_OK) o->strategy = k;
  } else if (!strcmp(key, "gradient_as_bucket_view")) {
    *rc = mb_setup_bool(s, key, value, &o->bucket_view);
  } else if (!strcmp(key, "bucket_cap_mb")) {
    if ((*rc = mb_setup_int(s, key, value, 1, 1 << 20, &n)) == MB_OK) o->bucket_cap = (uint64_t)n << 20;
  } else if (!strcmp(key, "fsdp_sharding")) {
    if ((*rc = mb_setup_pick(s, key, value, shardings, &k)) == MB_OK) o->sharding = k;
  } else if (!strcmp(key, "fsdp_wrap")) {
    if (*value) *rc = mb_setup_add_pattern(s, &o->wrap, &o->n_wrap, value);
    else mb_setup_dist_free(o);
  } else if (!strcmp(key, "fsdp_version")) {
    if ((*rc = mb_setup_int(s, key, value, 1, 2, &n)) == MB_OK) o->fsdp_version = (int)n;
  } else if (!strcmp(key, "fsdp_reshard_root")) {
    *rc = mb_setup_bool(s, key, value, &o->reshard_root);
  } else if (!strcmp(key, "offload")) {
    if ((*rc = mb_setup_pick(s, key, value, offloads, &k)) == MB_OK) o->offload = k;
  } else if (!strcmp(key, "overlap_comm")) {
    bool on = false;
    if ((*rc = mb_setup_bool(s, key, value, &on)) == MB_OK) o->overlap_comm = on;
  } else if (!strcmp(key, "reduce_bucket_size")) {
    *rc = elements(s, key, value, 1, &o->reduce_bucket_size);
  } else if (!strcmp(key, "stage3_param_persistence_threshold")) {
    *rc = elements(s, key, value, 0, &o->persistence_threshold);
  } else if (!strcmp(key, "stage3_prefetch_bucket_size")) {
    *rc = elements(s, key, value, 0, &o->prefetch_bucket_size);
  } else if (!strcmp(key, "stage3_max_live_parameters")) {
    *rc = elements(s, key, value, 0, &o->max_live_parameters);
  } else if (!strcmp(key, "stage3_max_reuse_distance")) {
    *rc = elements(s, key, value, 0, &o->max_reuse_distance);
  } else if (!strcmp(key, "allgather_bucket_size")) {
    *rc = elements(s, key, value, 1, &o->allgather_bucket_size);
  } else if (!strcmp(key, "contiguous_gradients")) {
    *rc = mb_setup_bool(s, key, value, &o->contiguous_gradients);
  } else {
    return 0;
  }
  return 1;
}
