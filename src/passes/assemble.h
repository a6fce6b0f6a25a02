/* Assembling a model the ONNX reader has turned into the IR (onnx/load.h): what every loaded
 * model carries beside its graphs, derived once at load because the simulation reads it many
 * times. */
#ifndef MB_PASSES_ASSEMBLE_H
#define MB_PASSES_ASSEMBLE_H
#include "graph/graph.h"
#include "util/diag.h"

/* Each initializer's role (roles.h), each node's opset and operator-table entry
 * (ops/op.h: mb_ops_resolve_model), and the signs of an inference export (inference.h). */
int mb_model_assemble(struct mb_model *m, mb_diag *d);
#endif
