/* Shape inference for the later stages (the simulation runs it once per batch size). */
#ifndef MB_SHAPE_INFER_H
#define MB_SHAPE_INFER_H
#include <stdint.h>

#include "membudget/membudget.h"
#include "ops/op.h"
#include "shape/inputs.h"

/* Infer every tensor of m's main graph with its inputs bound by `in` (NULL: only declared
 * shapes) and the batch dim set to batch (-1: none). A handle comes back even on failure
 * (its status and message say why). */
int mb_shapes_run(const mb_model *m, const mb_shape_inputs *in, int64_t batch, mb_shapes **out);
/* mb_infer_shapes: the same, after checking that every per-sample dim names a symbolic dim of
 * a graph input (a typo in a dim's name, said as such). */
int mb_shapes_infer(const mb_model *m, const mb_shape_inputs *in, int64_t batch, mb_shapes **out);
/* Per value of the main graph; valid while the handle lives (status MB_OK). */
const mb_tinfo *mb_shapes_tinfo(const mb_shapes *sh);
int mb_shapes_status(const mb_shapes *sh);
/* The default bounds the run took for data-dependent sizes (ops/bounds.c). */
const mb_assumptions *mb_shapes_assumed(const mb_shapes *sh);
/* Every per-sample dim of in is a symbolic dim of one of the model's graph inputs. */
int mb_shapes_check_sample_dims(const mb_model *m, const mb_shape_inputs *in, mb_diag *d);
#endif
