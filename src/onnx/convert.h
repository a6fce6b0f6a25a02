/* Conversion of an unpacked ONNX ModelProto into the graph IR (see graph/graph.h). */
#ifndef MB_ONNX_CONVERT_H
#define MB_ONNX_CONVERT_H
#include "graph/graph.h"
#include "onnx.pb-c.h"
#include "util/diag.h"

/* Fill m (whose arena is ready) from pm. Names every offending node, tensor or dim. */
int mb_convert_model(const Onnx__ModelProto *pm, struct mb_model *m, mb_diag *d);
/* One TensorProto (a test-data input, for instance) into out, allocated in arena. */
int mb_convert_tensor(const Onnx__TensorProto *t, mb_arena *arena, mb_const_tensor *out,
                      mb_diag *d);
#endif
