/* Reading an ONNX model into the IR: bytes -> wire pass -> protobuf-c unpack of the slim copy
 * -> IR (convert.c) -> the IR's own checks (graph/check.h). What the operator table and the
 * passes add to a loaded model is passes/assemble.h's job; the public mb_model_load_* run both
 * (api/model_load.c). */
#ifndef MB_ONNX_LOAD_H
#define MB_ONNX_LOAD_H
#include <stddef.h>
#include <stdint.h>

#include "graph/graph.h"
#include "util/diag.h"

/* Fill m (its arena ready, otherwise empty) from a serialized ModelProto. */
int mb_onnx_read_buffer(struct mb_model *m, const uint8_t *data, size_t size, mb_diag *d);
/* The same from a file: read with pread() through onnx/reader.h, so that the weight
 * payloads the wire pass skips are never read (nor mapped, nor resident); a pipe or device
 * is read whole. */
int mb_onnx_read_file(struct mb_model *m, const char *path, mb_diag *d);
#endif
