/* torch 2.x exports: each ONNX node records the FX node (the aten op eager PyTorch ran) it was
 * translated from (onnx/origin.h). This table says how to simulate an aten op when the exporter
 * wrote it as several ONNX nodes (linear as Transpose + MatMul, SDPA as some twenty nodes,
 * conv2d with a zero bias built from Shape + Expand) or as one ONNX node whose meaning differs
 * from the aten op's (clone as Identity, zeros as an Expand of a scalar). The nodes of one FX
 * node are then run as one logical op with the table's autograd rule. Ops missing from the
 * table keep their ONNX nodes' own rules: most aten ops become one ONNX node of the same
 * meaning. */
#ifndef MB_PASSES_ATEN_H
#define MB_PASSES_ATEN_H
#include <stdbool.h>
#include <stdint.h>

typedef struct mb_aten_rule {
  const char *op;   /* the target without its overload: "aten.linear" */
  uint8_t grad;     /* mb_grad_id the FX node runs as */
  bool single;      /* also when it became one ONNX node (whose ONNX meaning differs) */
} mb_aten_rule;

/* The rule for an FX target ("aten.linear.default"), or NULL. */
const mb_aten_rule *mb_aten_rule_of(const char *target);
#endif
