/* Where external-data locations point. Weight bytes are never read, so an external file is
 * never opened; but a location is untrusted text that a later tool (or a person) will follow,
 * so a location that escapes the model's directory or names something other than a regular
 * file is refused, and said as such, the way the onnx checker refuses it. */
#ifndef MB_ONNX_EXTERNAL_H
#define MB_ONNX_EXTERNAL_H
#include <sys/types.h>

#include "graph/graph.h"
#include "util/diag.h"

/* Check every external-data location of m (initializers and tensor attributes, subgraphs
 * included). Always: not empty, not absolute, no ".." component. With model_path (a file
 * load): lstat/realpath only, never open: a location that does not exist is fine (a
 * weightless model); one that resolves outside the model's directory, or to a directory,
 * FIFO, device or socket, fails with MB_E_INVALID_MODEL naming the tensor. */
int mb_onnx_check_external(const struct mb_model *m, const char *model_path, mb_diag *d);

/* "a directory", "a FIFO", "a character device", ... for a file type that is not a regular
 * file; NULL for a regular file. */
const char *mb_external_not_a_file(mode_t mode);
#endif
