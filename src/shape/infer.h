/* Shape inference for the later stages (the simulation runs it once per batch size). */
#ifndef MB_SHAPE_INFER_H
#define MB_SHAPE_INFER_H
#include <stdint.h>

#include "membudget/membudget.h"
#include "ops/op.h"

/* Like mb_infer_shapes, with the batch size given here instead of in the setup (-1: none). */
int mb_shapes_run(const mb_model *m, const mb_setup *s, int64_t batch, mb_shapes **out);
/* Per value of the main graph; valid while the handle lives (status MB_OK). */
const mb_tinfo *mb_shapes_tinfo(const mb_shapes *sh);
int mb_shapes_status(const mb_shapes *sh);
/* The default bounds the run took for data-dependent sizes (ops/bounds.c). */
const mb_assumptions *mb_shapes_assumed(const mb_shapes *sh);
/* Every per-sample dim of the setup is a symbolic dim of one of the model's graph inputs. */
int mb_shapes_check_sample_dims(const mb_model *m, const mb_setup *s, mb_diag *d);
#endif
