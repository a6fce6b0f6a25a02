/* Signs that a graph was exported for inference, found once at load (see inference.c). */
#ifndef MB_PASSES_INFERENCE_H
#define MB_PASSES_INFERENCE_H
#include <stddef.h>

#include "graph/graph.h"
#include "util/diag.h"

int mb_find_inference_signs(struct mb_model *m, mb_diag *d);
/* The sentence for a sign kind ("" for an unknown kind). */
const char *mb_inference_sign_message(int kind);
/* Every sign of m in one line ("BatchNorm folded into Conv (node 'n' and 19 more); ...") into
 * buf; returns the length it needed. */
size_t mb_inference_signs_describe(const struct mb_model *m, char *buf, size_t size);
#endif
