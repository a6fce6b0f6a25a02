#include "budget/step.h"

#include "budget/estimate.h"

void mb_setup_step(const mb_setup *s, mb_step *out) {
  const mb_train *t = &s->train;
  *out = (mb_step){
      .optimizer = t->optimizer,
      .precision = t->precision,
      .loss = t->loss,
      .loss_fp32 = t->loss_fp32,
      .master_weights = t->master_weights,
      .ema = t->ema,
      .attention = t->attention,
      .cpu = t->cpu,
      .foreach = t->foreach,
      .grad_sum_copy = t->grad_sum_copy,
      .transformers_as_exported = t->transformers_as_exported,
      .accept_inference_graph = t->accept_inference_graph,
      .trains = {s->freeze, s->n_freeze, s->trainable, s->n_trainable},
      .checkpoint = t->checkpoint,
      .n_checkpoint = t->n_checkpoint,
      .grad_accumulation = t->grad_accumulation,
      .teacher = t->teacher,
      .teacher_offload = t->teacher_offload,
      .eval = t->eval,
      .rounding = t->rounding,
      .workspace = mb_train_workspace(t),
      .cudnn_workspace = t->cudnn_workspace,
      .batch = s->batch,
      .batch_max = t->batch_max,
      .dist = t->dist,
  };
  mb_setup_loop_resolve(t, &out->loop, &out->eval.zero_grad);
  mb_setup_shape_inputs(s, &out->shapes);
}

int mb_setup_plan_build(const mb_model *m, const mb_setup *s, mb_plan **out, mb_diag *d) {
  *out = NULL;
  if (m && m->graph && mb_setup_check_globs(m, s, d) != MB_OK) return d->status;
  mb_step step;
  mb_setup_step(s, &step);
  return mb_plan_build(m, &step, out, d);
}

int mb_setup_plan_run(const mb_plan *p, const mb_setup *s, int64_t batch, mb_run *r, uint64_t *bytes,
                      uint64_t *live, mb_diag *d) {
  mb_step step;
  mb_setup_step(s, &step);
  return mb_plan_run(p, &step, batch, r, bytes, live, d);
}
