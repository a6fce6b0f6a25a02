/* The setup as shape inference's inputs (shape/inputs.h), and the public mb_infer_shapes. */
#include "budget/setup.h"
#include "shape/infer.h"

void mb_setup_shape_inputs(const mb_setup *s, mb_shape_inputs *out) {
  *out = (mb_shape_inputs){.dim_names = s->dim_names, .dim_values = s->dim_values, .n_dims = s->n_dims,
                           .batch_dim = s->batch_dim, .batching = &s->batching, .bound = s->bound,
                           .is_bound = s->is_bound, .n_bound = s->n_bound,
                           .limits = &s->limits};
}

MB_API int mb_infer_shapes(const mb_model *m, const mb_setup *s, mb_shapes **out) {
  mb_shape_inputs in;
  if (s) mb_setup_shape_inputs(s, &in);
  return mb_shapes_infer(m, s ? &in : NULL, s ? s->batch : -1, out);
}
