/* Counting initializers by role: the static part of the budget. */
#include "budget/setup.h"
#include "graph/graph.h"
#include "util/versioned.h"

static bool role_trains(int32_t role) {
  return role == MB_ROLE_PARAMETER || role == MB_ROLE_EMBEDDING;
}

MB_API int mb_initializer_trainable(const mb_model *m, const mb_setup *s, size_t i) {
  if (!m || !m->graph) return MB_E_INVALID_ARG;
  if (i >= (size_t)m->n_all_inits) return MB_E_RANGE;
  const mb_init_ref *r = &m->all_inits[i];
  return role_trains(r->role) && mb_setup_trains(s, r->graph->inits[r->index].name);
}

static void add(mb_role_total *t, const mb_const_tensor *ct) {
  t->tensors++;
  t->numel += ct->numel;
  t->bytes += ct->nbytes;
}

MB_API int mb_account(const mb_model *m, const mb_setup *s, mb_accounting *out) {
  if (!m || !m->graph || !out) return MB_E_INVALID_ARG;
  mb_accounting a = {.struct_size = sizeof a};
  /* Each initializer is one tensor however many nodes read it, so tied weights count once. */
  for (int32_t i = 0; i < m->n_all_inits; i++) {
    const mb_init_ref *r = &m->all_inits[i];
    const mb_const_tensor *ct = &r->graph->inits[r->index];
    bool trains = role_trains(r->role) && mb_setup_trains(s, ct->name);
    switch (r->role) {
      case MB_ROLE_PARAMETER: add(trains ? &a.trainable_parameters : &a.frozen_parameters, ct); break;
      case MB_ROLE_EMBEDDING: add(trains ? &a.trainable_embeddings : &a.frozen_embeddings, ct); break;
      case MB_ROLE_BUFFER: add(&a.buffers, ct); break;
      default: add(&a.constants, ct); break;
    }
    if (role_trains(r->role)) {
      a.parameters += ct->numel;
      if (trains) a.trainable += ct->numel;
    }
    if (ct->dtype == MB_DTYPE_STRING) a.unknown_size_tensors++;
  }
  return mb_fill_versioned(out, &a, sizeof a, sizeof a) ? MB_E_INVALID_ARG : MB_OK;
}
