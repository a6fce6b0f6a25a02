/* Read-only accessors of a loaded model. */
#include <string.h>

#include "graph/graph.h"
#include "passes/inference.h"
#include "util/versioned.h"

#define CHECK_MODEL(m) do { if (!(m) || !(m)->graph) return MB_E_INVALID_ARG; } while (0)

MB_API size_t mb_model_num_warnings(const mb_model *m) { return m ? (size_t)m->n_warnings : 0; }
MB_API const char *mb_model_warning(const mb_model *m, size_t i) {
  return m && i < (size_t)m->n_warnings ? m->warnings[i] : NULL;
}
MB_API int64_t mb_model_ir_version(const mb_model *m) { return m ? m->ir_version : 0; }
MB_API const char *mb_model_producer(const mb_model *m) {
  return m && m->producer ? m->producer : "";
}
MB_API size_t mb_model_num_opsets(const mb_model *m) { return m ? (size_t)m->n_opsets : 0; }
MB_API int mb_model_opset(const mb_model *m, size_t i, const char **domain, int64_t *version) {
  CHECK_MODEL(m);
  if (i >= (size_t)m->n_opsets) return MB_E_RANGE;
  if (domain) *domain = m->opsets[i].domain;
  if (version) *version = m->opsets[i].version;
  return MB_OK;
}

MB_API size_t mb_model_num_inputs(const mb_model *m) {
  return m && m->graph ? (size_t)m->graph->n_inputs : 0;
}
MB_API size_t mb_model_num_outputs(const mb_model *m) {
  return m && m->graph ? (size_t)m->graph->n_outputs : 0;
}

static int describe(const mb_model *m, int32_t v, mb_tensor_desc *out) {
  if (!out) return MB_E_INVALID_ARG;
  const mb_value *val = &m->graph->values[v];
  mb_tensor_desc d = {sizeof d, val->name, val->type.dtype, val->type.rank, val->type.dims,
                      (const char *const *)val->type.dim_params};
  return mb_fill_versioned(out, &d, sizeof d, sizeof d) ? MB_E_INVALID_ARG : MB_OK;
}

MB_API int mb_model_input(const mb_model *m, size_t i, mb_tensor_desc *out) {
  CHECK_MODEL(m);
  if (i >= (size_t)m->graph->n_inputs) return MB_E_RANGE;
  return describe(m, m->graph->inputs[i], out);
}

MB_API int mb_model_output(const mb_model *m, size_t i, mb_tensor_desc *out) {
  CHECK_MODEL(m);
  if (i >= (size_t)m->graph->n_outputs) return MB_E_RANGE;
  return describe(m, m->graph->outputs[i], out);
}

MB_API const char *mb_role_name(int role) {
  static const char *names[] = {"parameter", "embedding", "buffer", "constant"};
  return role >= 0 && role <= MB_ROLE_CONSTANT ? names[role] : "unknown";
}

MB_API size_t mb_model_num_initializers(const mb_model *m) {
  return m ? (size_t)m->n_all_inits : 0;
}

MB_API int mb_model_initializer(const mb_model *m, size_t i, mb_initializer_desc *out) {
  CHECK_MODEL(m);
  if (!out) return MB_E_INVALID_ARG;
  if (i >= (size_t)m->n_all_inits) return MB_E_RANGE;
  const mb_init_ref *r = &m->all_inits[i];
  const mb_const_tensor *t = &r->graph->inits[r->index];
  mb_initializer_desc d = {
    .struct_size = sizeof d, .name = t->name, .dtype = t->dtype, .rank = t->rank,
    .dims = t->dims, .numel = t->numel, .nbytes = t->nbytes, .role = r->role,
    .location = t->location, .is_sparse = t->is_sparse,
    .num_uses = r->value >= 0 ? r->graph->values[r->value].num_uses : 0,
    .external_file = t->external_file, .subgraph = r->graph != m->graph,
  };
  return mb_fill_versioned(out, &d, sizeof d, sizeof d) ? MB_E_INVALID_ARG : MB_OK;
}

MB_API size_t mb_model_num_nodes(const mb_model *m) {
  return m && m->graph ? (size_t)m->graph->n_nodes : 0;
}

MB_API int mb_model_node(const mb_model *m, size_t i, const char **op_type, const char **domain,
                         const char **name) {
  CHECK_MODEL(m);
  if (i >= (size_t)m->graph->n_nodes) return MB_E_RANGE;
  const mb_node *n = &m->graph->nodes[i];
  if (op_type) *op_type = n->op_type;
  if (domain) *domain = n->domain;
  if (name) *name = n->name;
  return MB_OK;
}

MB_API int mb_model_node_origin(const mb_model *m, size_t i, const char **module, const char **aten,
                                const char **site) {
  CHECK_MODEL(m);
  if (i >= (size_t)m->graph->n_nodes) return MB_E_RANGE;
  const mb_node *n = &m->graph->nodes[i];
  if (module) *module = n->origin.module;
  if (aten) *aten = n->origin.aten;
  if (site) *site = n->origin.site;
  return MB_OK;
}

MB_API size_t mb_model_num_inference_signs(const mb_model *m) {
  return m && m->graph ? (size_t)m->n_inference_signs : 0;
}

MB_API int mb_model_inference_sign(const mb_model *m, size_t i, int *kind, const char **node,
                                   int64_t *count, const char **message) {
  CHECK_MODEL(m);
  if (i >= (size_t)m->n_inference_signs) return MB_E_RANGE;
  const mb_inference_sign *s = &m->inference_signs[i];
  if (kind) *kind = s->kind;
  if (node) *node = s->node;
  if (count) *count = s->count;
  if (message) *message = mb_inference_sign_message(s->kind);
  return MB_OK;
}
