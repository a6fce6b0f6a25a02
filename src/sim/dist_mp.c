/* FSDP mixed precision (sim/dist.h: param_dtype, reduce_dtype; docs/distributed.md): FSDP2's
 * MixedPrecisionPolicy and FSDP1's MixedPrecision. The model runs in param_dtype (plan.c makes
 * the step "pure" in it), the shards and optimizer states keep the graph's fp32 (emit.c), and
 * dist.c sizes the gathers in param_dtype and the reduce-scatters in reduce_dtype; these are the
 * rules it asks. */
#include <string.h>

#include "graph/dtype.h"
#include "sim/build.h"

int mb_dist_fsdp_mp_refused(const mb_builder *b) {
  const mb_dist_opts *o = &b->step->dist;
  if (o->strategy != MB_STRATEGY_FSDP) {
    if (o->param_dtype || o->reduce_dtype || o->buffer_dtype)
      return mb_fail(b->d, MB_E_INVALID_ARG, "fsdp_param_dtype, fsdp_reduce_dtype and fsdp_buffer_dtype need strategy fsdp");
    return MB_OK;
  }
  if (!mb_dist_fsdp_mp(o)) {
    if ((o->reduce_dtype && o->reduce_dtype != MB_DTYPE_FLOAT) || (o->buffer_dtype && o->buffer_dtype != MB_DTYPE_FLOAT))
      return mb_fail(b->d, MB_E_UNSUPPORTED, "FSDP mixed precision without a low fsdp_param_dtype is not modelled yet");
    return MB_OK;
  }
  if (b->step->precision != MB_PREC_FP32)
    return mb_fail(b->d, MB_E_INVALID_ARG, "fsdp_param_dtype: FSDP casts the fp32 model itself; leave precision at fp32");
  if (b->step->master_weights)
    return mb_fail(b->d, MB_E_INVALID_ARG, "fsdp_param_dtype: the fp32 shards are the master weights; drop master_weights");
  if (o->sharding == MB_FSDP_NO_SHARD || (o->fsdp_version == 1 && mb_dist_shards(o) <= 1))
    return mb_fail(b->d, MB_E_UNSUPPORTED, "FSDP mixed precision with no_shard (FSDP1 on one rank is no_shard) is not "
                                           "modelled yet");
  const mb_graph *g = b->ms[0].g;
  /* BatchNorm: FSDP1 keeps it in fp32 as units of its own (_wrap_utils.py,
   * _override_module_mixed_precision, with casts around it); PyTorch's CPU batch_norm refuses a
   * bf16 input with FSDP2's fp32 running statistics (measured: "expected scalar type BFloat16
   * but found Float") */
  for (int32_t k = 0; k < g->n_nodes; k++)
    if (!g->nodes[k].domain[0] && !strcmp(g->nodes[k].op_type, "BatchNormalization") &&
        (o->fsdp_version == 1 || b->step->cpu))
      return mb_fail(b->d, MB_E_UNSUPPORTED,
                     o->fsdp_version == 1 ? "FSDP1 mixed precision with BatchNormalization (node '%s'): FSDP1 runs BatchNorm "
                                            "modules in fp32 as units of their own; not modelled yet"
                                          : "FSDP2 mixed precision with BatchNormalization (node '%s') on the CPU: PyTorch's "
                                            "CPU batch_norm refuses the bf16 input with fp32 running statistics",
                     g->nodes[k].name ? g->nodes[k].name : "?");
  for (int32_t v = 0; v < g->n_values; v++)
    if (b->ms[0].trainable_init[v] && g->inits[g->values[v].initializer].dtype != MB_DTYPE_FLOAT)
      return mb_fail(b->d, MB_E_UNSUPPORTED, "fsdp_param_dtype: parameter '%s' is not fp32 in the graph",
                     g->inits[g->values[v].initializer].name ? g->inits[g->values[v].initializer].name : "?");
  return MB_OK;
}

int mb_dist_grad_dtype(const mb_dist_opts *o, int computed) {
  if (!mb_dist_fsdp_mp(o)) return computed;
  return o->reduce_dtype ? o->reduce_dtype : o->param_dtype;
}

uint64_t mb_dist_rebytes(uint64_t bytes, int from, int to) {
  int f = mb_dtype_bits(from), t = mb_dtype_bits(to);
  return f >= 8 && t >= 8 ? bytes / (uint64_t)(f / 8) * (uint64_t)(t / 8) : bytes; /* whole elements */
}
