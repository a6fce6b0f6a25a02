/* Training on several GPUs: what one rank holds. The step simulated is one rank's at its own
 * (per-rank) batch size; the strategy decides which of the model's states are split across the
 * ranks and which transient buffers the wrapper adds. docs/distributed.md has the model and
 * the PyTorch sources each rule comes from. */
#ifndef MB_SIM_DIST_H
#define MB_SIM_DIST_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum mb_strategy {
  MB_STRATEGY_NONE, /* one process, or data parallel without a wrapper the budget models */
  MB_STRATEGY_DDP,  /* torch.nn.parallel.DistributedDataParallel */
  MB_STRATEGY_FSDP, /* torch.distributed.fsdp.fully_shard (FSDP2) per wrapped module + root */
  MB_STRATEGY_ZERO1, /* DeepSpeed ZeRO stage 1: optimizer states (and fp32 master) partitioned */
  MB_STRATEGY_ZERO2, /* ... and gradients */
  MB_STRATEGY_ZERO3  /* ... and parameters, gathered module by module */
};

enum mb_fsdp_sharding {
  MB_FSDP_FULL_SHARD,     /* parameters gathered per unit for its forward, again for backward */
  MB_FSDP_SHARD_GRAD_OP,  /* gathered once: kept from the unit's forward to its backward */
  MB_FSDP_NO_SHARD,       /* nothing sharded (as DDP without its buckets) */
  MB_FSDP_HYBRID_SHARD    /* FULL_SHARD within a node of gpus_per_node ranks */
};

typedef struct mb_dist_opts {
  int strategy;             /* enum mb_strategy */
  int32_t world_size;       /* ranks in all (>= 1) */
  int32_t gpus_per_node;    /* HYBRID_SHARD's shard group (default 8) */
  /* DDP */
  bool bucket_view;         /* gradient_as_bucket_view: the .grad tensors are views of buckets */
  uint64_t bucket_cap;      /* bucket_cap_mb in bytes (default 25 MiB; the first bucket 1 MiB) */
  /* FSDP */
  int sharding;             /* enum mb_fsdp_sharding */
  int fsdp_version;         /* 2: fully_shard (default); 1: FullyShardedDataParallel's flat
                             * parameters (no all-gather output beside them, the reduce-scatter
                             * input freed at once, NO_SHARD on one rank) */
  bool reshard_root;        /* fully_shard(root, reshard_after_forward=True): the root unit is
                             * resharded after forward too (torch's default None keeps it) */
  char **wrap;              /* module path globs wrapped as units (fully_shard each) */
  size_t n_wrap;
  /* DeepSpeed ZeRO */
  int64_t reduce_bucket_size;   /* elements of the gradient reduction buffer (default 5e8) */
  int overlap_comm;             /* a second reduction buffer: 1, 0, -1 the stage's default */
  int64_t persistence_threshold; /* ZeRO-3: parameters of at most this many elements stay whole */
  int offload;                  /* enum mb_offload: what lives in host memory */
  /* DeepSpeed ZeRO's gather and reduction knobs, by DeepSpeed's config names (dist_zero3.c) */
  int64_t prefetch_bucket_size; /* stage3_prefetch_bucket_size: elements gathered ahead (5e7) */
  int64_t max_live_parameters;  /* stage3_max_live_parameters: gathered elements that allow a
                                 * prefetch (1e9) */
  int64_t max_reuse_distance;   /* stage3_max_reuse_distance: a module's parameters used again
                                 * within this many elements of the trace stay gathered (1e9) */
  int64_t allgather_bucket_size; /* ZeRO-1/2 (5e8): no device memory with all_gather_into_tensor */
  bool contiguous_gradients;    /* the reduction buffer; off: each reduction flattens its bucket */
  /* FSDP, continued (budget/setup_fsdp.c) */
  char **wrap_class;        /* module class names wrapped as units (FSDP1's ModuleWrapPolicy,
                             * FSDP2's fully_shard on each instance): matched against the
                             * exporter's class_hierarchy */
  size_t n_wrap_class;
  int backward_prefetch;    /* enum mb_fsdp_prefetch: when FSDP1 gathers the next unit in backward */
  bool forward_prefetch;    /* FSDP1: the next unit gathered when a unit's forward starts */
  bool limit_all_gathers;   /* FSDP1's rate limiter (default on; see docs/distributed.md) */
  /* FSDP mixed precision (MixedPrecisionPolicy / MixedPrecision): MB_DTYPE_* or 0 (not set) */
  int param_dtype;          /* units gathered and computed in it; the shards stay the graph's */
  int reduce_dtype;         /* gradients reduce-scattered in it (0: param_dtype) */
  int buffer_dtype;         /* FSDP1: buffers cast to it (0: kept) */
} mb_dist_opts;

/* FSDP with a param_dtype other than the graph's: bf16/fp16 compute on fp32 shards. */
static inline bool mb_dist_fsdp_mp(const mb_dist_opts *o) {
  return o->strategy == MB_STRATEGY_FSDP && o->param_dtype != 0 && o->param_dtype != 1 /* MB_DTYPE_FLOAT */;
}

enum mb_fsdp_prefetch {
  MB_PREFETCH_PRE,  /* BackwardPrefetch.BACKWARD_PRE: at the current unit's pre-backward */
  MB_PREFETCH_POST, /* BACKWARD_POST: after the current unit's post-backward reshard */
  MB_PREFETCH_NONE  /* None: each unit gathered at its own pre-backward */
};

enum mb_offload {
  MB_OFFLOAD_NONE,
  MB_OFFLOAD_OPTIMIZER, /* ZeRO-Offload: fp32 master, optimizer states and the gradient partition
                         * on the host, the optimizer step on the CPU */
  MB_OFFLOAD_PARAMS     /* also the parameters (ZeRO-3 offload_param; FSDP CPUOffload, which
                         * keeps the sharded parameters, gradients and the step on the CPU) */
};

static inline bool mb_dist_is_zero(const mb_dist_opts *o) {
  return o->strategy >= MB_STRATEGY_ZERO1 && o->strategy <= MB_STRATEGY_ZERO3;
}

/* How many ranks share one copy of the parameters (1: every rank holds them whole). */
static inline int32_t mb_dist_shards(const mb_dist_opts *o) {
  if (o->world_size <= 1) return 1;
  if (o->strategy == MB_STRATEGY_ZERO3) return o->world_size;
  if (o->strategy != MB_STRATEGY_FSDP || o->sharding == MB_FSDP_NO_SHARD) return 1;
  if (o->sharding == MB_FSDP_HYBRID_SHARD && o->gpus_per_node < o->world_size) return o->gpus_per_node;
  return o->world_size;
}

/* How many ranks share the optimizer states and fp32 master weights. */
static inline int32_t mb_dist_state_shards(const mb_dist_opts *o) {
  return mb_dist_is_zero(o) && o->world_size > 1 ? o->world_size : mb_dist_shards(o);
}

/* Gradient accumulation (grad_accumulation > 1): ZeRO-2 and -3 reduce every micro-step into the
 * rank's gradient partition, which accumulates (stage_1_and_2.py copy_grads_in_partition,
 * stage3.py partition_grads): no .grad outlives a micro-step. The others keep whole .grad
 * tensors across the micro-steps before the last: DDP's no_sync(), ZeRO-1 (reduced only at the
 * accumulation boundary), FSDP2 without gradient sync (the unsharded parameters' .grad) and
 * FSDP1's no_sync() (the unsharded flat gradient). */
static inline bool mb_dist_accumulates_in_partition(const mb_dist_opts *o) {
  return o->world_size > 1 && (o->strategy == MB_STRATEGY_ZERO2 || o->strategy == MB_STRATEGY_ZERO3);
}

/* FSDP reduce-scatters each unit's gradients after its backward (dist.c): the unsharded .grad
 * kept across micro-steps goes there in the last one. FSDP1 runs NO_SHARD on one rank. */
static inline bool mb_dist_fsdp_reduces(const mb_dist_opts *o) {
  return o->strategy == MB_STRATEGY_FSDP && o->sharding != MB_FSDP_NO_SHARD &&
         !(o->fsdp_version == 1 && mb_dist_shards(o) <= 1);
}

/* A rank's elements of a tensor split over shards ranks: FSDP splits dim 0, padded to a
 * multiple of the shard count; ZeRO splits its flat buffer evenly (numel / shards, rounded up). */
int64_t mb_dist_shard_numel(const mb_dist_opts *o, int32_t shards, const int64_t *dims, int rank, int64_t numel);
/* DDP's buckets over the trainable parameters' gradient bytes (in parameter order): writes at
 * most n sizes into out and returns how many. */
size_t mb_ddp_buckets(const mb_dist_opts *o, const uint64_t *grad_bytes, size_t n, uint64_t *out);
#endif
