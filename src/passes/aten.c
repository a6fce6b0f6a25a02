#include "passes/aten.h"

#include <stddef.h>
#include <string.h>

#include "ops/grad.h"

/* Sources: the ops' derivatives.yaml entries (what their backward keeps) and how the exporter
 * writes each op with optimize=False (docs/torch2-export.md). */
static const mb_aten_rule rules[] = {
  {"aten.linear", MB_G_FUSED_LINEAR, false},          /* Transpose(W) MatMul [Add(b)] */
  {"aten.scaled_dot_product_attention", MB_G_SDPA, true},
  {"aten.silu", MB_G_FUSED_SILU, false},              /* Sigmoid Mul */
  {"aten.gelu", MB_G_FUSED_GELU, false},
  {"aten.rsqrt", MB_G_SAVE_Y, false},                 /* Sqrt Reciprocal: keeps its result */
  {"aten.softmax", MB_G_SOFTMAX, false},              /* Softmax [Cast] */
  {"aten._softmax", MB_G_SOFTMAX, false},
  {"aten.log_softmax", MB_G_SAVE_Y, false},
  {"aten._log_softmax", MB_G_SAVE_Y, false},
  {"aten.layer_norm", MB_G_FUSED_LAYERNORM, false},
  {"aten.native_layer_norm", MB_G_FUSED_LAYERNORM, false},
  {"aten.group_norm", MB_G_FUSED_GROUPNORM, false},
  {"aten.native_group_norm", MB_G_FUSED_GROUPNORM, false},
  {"aten.rms_norm", MB_G_FUSED_RMSNORM, false},
  {"aten.conv1d", MB_G_CONV, false},                  /* Shape Expand CastLike Expand Conv */
  {"aten.conv2d", MB_G_CONV, false},
  {"aten.conv3d", MB_G_CONV, false},
  {"aten.convolution", MB_G_CONV, false},
  {"aten.conv_transpose1d", MB_G_CONV, false},
  {"aten.conv_transpose2d", MB_G_CONV, false},
  {"aten.conv_transpose3d", MB_G_CONV, false},
  /* Identity in ONNX. A contiguous_format clone (.contiguous(), reshape()) is re-ruled by
   * fuse.c: the export decided from fake-tensor strides, plan.c decides from the kernels'. */
  {"aten.clone", MB_G_COPY, true},
  {"aten.roll", MB_G_COPY, false},                    /* Slice Slice Concat */
  {"aten.mm", MB_G_GEMM, true},                       /* MatMul without at::matmul's folding */
  {"aten.bmm", MB_G_GEMM, true},
  {"aten.masked_fill", MB_G_MASKED_FILL, false},      /* CastLike Where */
  {"aten.index", MB_G_INDEX1, false},                 /* Transposes, GatherND */
  {"aten.gather", MB_G_GATHER_ELEMENTS, false},       /* Cast GatherElements */
  /* ScatterElements, whose reduction does not tell scatter_add from scatter_reduce(sum);
   * scatter_reduce with include_self=False fills the written rows first: two ScatterElements */
  {"aten.scatter", MB_G_SCATTER, true},
  {"aten.scatter_add", MB_G_SCATTER_ADD, true},
  {"aten.scatter_reduce", MB_G_SCATTER_REDUCE, true},
  /* index_put (what torch.export makes of index_add): values: grad.index(indices), self: grad
   * itself when accumulating: the indices alone are kept. Transposes, ScatterND */
  {"aten.index_put", MB_G_SCATTER_ADD, false},
  {"aten.detach", MB_G_DETACH, true},                 /* Identity: a gradient stop */
  {"aten.stack", MB_G_CONCAT, false},                 /* Unsqueeze... Concat */
  /* factories: an Expand of a scalar in ONNX (a view), a fresh tensor in PyTorch */
  {"aten.zeros", MB_G_FACTORY, true},
  {"aten.ones", MB_G_FACTORY, true},
  {"aten.full", MB_G_FACTORY, true},
  {"aten.empty", MB_G_FACTORY, true},
  {"aten.zeros_like", MB_G_FACTORY, true},
  {"aten.ones_like", MB_G_FACTORY, true},
  {"aten.full_like", MB_G_FACTORY, true},
  {"aten.empty_like", MB_G_FACTORY, true},
  {"aten.rand_like", MB_G_FACTORY, true},
  {"aten.randn_like", MB_G_FACTORY, true},
  {"aten.new_zeros", MB_G_FACTORY, true},
  {"aten.new_ones", MB_G_FACTORY, true},
  {"aten.new_full", MB_G_FACTORY, true},
  {"aten.new_empty", MB_G_FACTORY, true},
  {"aten.fill", MB_G_FACTORY, true},
  {"aten.scalar_tensor", MB_G_FACTORY, true},
  {"aten.bernoulli", MB_G_FACTORY, true},             /* RandomUniformLike Less Cast */
  {"aten.arange", MB_G_FACTORY, true},
};

const mb_aten_rule *mb_aten_rule_of(const char *target) {
  if (!target) return NULL;
  const char *dot = strrchr(target, '.');
  size_t n = dot && dot != target ? (size_t)(dot - target) : strlen(target);
  for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
    if (strlen(rules[i].op) == n && !memcmp(rules[i].op, target, n)) return &rules[i];
  return NULL;
}
