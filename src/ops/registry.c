/* Lookup over the family tables. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ops/op.h"
#include "util/strmap.h"

typedef struct family {
  const mb_op_def *defs;
  const size_t *count;
} family;

static const family families[] = {
  {mb_ops_elementwise, &mb_ops_elementwise_count},
  {mb_ops_nn, &mb_ops_nn_count},
  {mb_ops_tensor, &mb_ops_tensor_count},
  {mb_ops_reduce, &mb_ops_reduce_count},
  {mb_ops_layout, &mb_ops_layout_count},
  {mb_ops_quant, &mb_ops_quant_count},
  {mb_ops_loss, &mb_ops_loss_count},
  {mb_ops_rnn, &mb_ops_rnn_count},
  {mb_ops_control, &mb_ops_control_count},
  {mb_ops_sequence, &mb_ops_sequence_count},
};
#define N_FAMILIES (sizeof families / sizeof families[0])

const mb_op_def *mb_op_find(const char *domain, const char *op_type, int64_t opset) {
  const mb_op_def *best = NULL;
  if (!strcmp(domain, "ai.onnx")) domain = "";
  for (size_t f = 0; f < N_FAMILIES; f++)
    for (size_t i = 0; i < *families[f].count; i++) {
      const mb_op_def *d = &families[f].defs[i];
      if (d->op_type[0] != op_type[0] || strcmp(d->op_type, op_type) ||
          strcmp(d->domain, domain) || d->since > opset)
        continue;
      if (!best || d->since > best->since) best = d;
    }
  return best;
}

/* What a resolve remembers: the entry of each op type of the domain "" met so far (every such
 * node has the opset of the model's import of "", so the op type decides the entry), so that a
 * model of tens of thousands of nodes scans the operator table once per op type, not per node.
 * Nodes that name a domain, "ai.onnx" included (its own import, or none), are looked up each. */
typedef struct resolver {
  const mb_strmap *opsets;
  mb_strmap known;         /* op type (the node's own string) -> index into defs */
  const mb_op_def **defs;  /* NULL: unsupported */
  int32_t n, cap;
  bool failed;             /* out of memory: resolve every node afresh */
} resolver;

static const mb_op_def *resolve_op(resolver *r, const mb_node *n) {
  if (n->domain[0] || r->failed) return mb_op_find(n->domain, n->op_type, n->opset);
  int32_t k = mb_strmap_get(&r->known, n->op_type);
  if (k >= 0) return r->defs[k];
  const mb_op_def *def = mb_op_find(n->domain, n->op_type, n->opset);
  if (r->n == r->cap) {
    int32_t cap = r->cap ? r->cap * 2 : 64;
    const mb_op_def **grown = realloc(r->defs, (size_t)cap * sizeof *grown);
    if (!grown) {
      r->failed = true;
      return def;
    }
    r->defs = grown;
    r->cap = cap;
  }
  if (mb_strmap_put(&r->known, n->op_type, r->n, NULL) < 0) {
    r->failed = true;
    return def;
  }
  r->defs[r->n++] = def;
  return def;
}

/* More inputs or outputs than the op takes at the node's opset: onnx.checker refuses it, and the
 * rules would read past what the op defines (or never read the extras, a silent no-op). The
 * count is the node's slots, omitted ("") ones included, as the checker counts them. */
static int check_arity(const mb_node *n, mb_diag *d) {
  const mb_op_def *def = n->op;
  if (def->max_inputs != MB_OP_ANY && n->n_inputs > def->max_inputs)
    return mb_fail(d, MB_E_INVALID_MODEL, "node '%s' (%s): %d inputs, more than the %d the op takes at opset %lld",
                   n->name, n->op_type, (int)n->n_inputs, (int)def->max_inputs, (long long)n->opset);
  if (def->max_outputs != MB_OP_ANY && n->n_outputs > def->max_outputs)
    return mb_fail(d, MB_E_INVALID_MODEL, "node '%s' (%s): %d outputs, more than the %d the op gives at opset %lld",
                   n->name, n->op_type, (int)n->n_outputs, (int)def->max_outputs, (long long)n->opset);
  return MB_OK;
}

static int resolve_graph(resolver *r, const struct mb_model *m, mb_graph *g, mb_diag *d) {
  for (int32_t k = 0; k < g->n_nodes; k++) {
    mb_node *n = &g->nodes[k];
    int32_t i = mb_strmap_get(r->opsets, n->domain);
    n->opset = i >= 0 ? m->opsets[i].version : -1;
    n->op = resolve_op(r, n);
    if (n->op && check_arity(n, d) != MB_OK) return d->status;
    for (int32_t s = 0; s < mb_node_num_subgraphs(n); s++)
      if (resolve_graph(r, m, mb_node_subgraph(n, s), d) != MB_OK) return d->status;
  }
  return MB_OK;
}

/* One map from domain to opset import (the first import of a domain wins, as in
 * mb_model_opset_of), so a file with many imports and many nodes stays linear. */
int mb_ops_resolve_model(struct mb_model *m, mb_diag *d) {
  mb_strmap opsets;
  if (mb_strmap_init(&opsets, (size_t)m->n_opsets) != 0) return mb_fail(d, MB_E_NOMEM, "out of memory");
  for (int32_t i = 0; i < m->n_opsets; i++)
    if (mb_strmap_put(&opsets, m->opsets[i].domain, i, NULL) < 0) {
      mb_strmap_free(&opsets);
      return mb_fail(d, MB_E_NOMEM, "out of memory");
    }
  resolver r = {.opsets = &opsets};
  r.failed = mb_strmap_init(&r.known, 64) != 0;
  int rc = resolve_graph(&r, m, m->graph, d);
  mb_strmap_free(&r.known);
  free(r.defs);
  mb_strmap_free(&opsets);
  return rc;
}

size_t mb_op_count(void) {
  size_t n = 0;
  for (size_t f = 0; f < N_FAMILIES; f++) n += *families[f].count;
  return n;
}

const mb_op_def *mb_op_at(size_t i) {
  for (size_t f = 0; f < N_FAMILIES; f++) {
    if (i < *families[f].count) return &families[f].defs[i];
    i -= *families[f].count;
  }
  return NULL;
}

MB_API size_t mb_ops_num(void) { return mb_op_count(); }

MB_API int mb_ops_get(size_t i, const char **domain, const char **op_type, int *since) {
  const mb_op_def *d = mb_op_at(i);
  if (!d) return MB_E_RANGE;
  if (domain) *domain = d->domain;
  if (op_type) *op_type = d->op_type;
  if (since) *since = d->since;
  return MB_OK;
}

MB_API int mb_ops_arity(size_t i, int *min_inputs, int *max_inputs, int *max_outputs) {
  const mb_op_def *d = mb_op_at(i);
  if (!d) return MB_E_RANGE;
  if (min_inputs) *min_inputs = d->min_inputs;
  if (max_inputs) *max_inputs = d->max_inputs;
  if (max_outputs) *max_outputs = d->max_outputs;
  return MB_OK;
}
