/* Default bounds for data-dependent sizes, derived from the graph where the user gives no
 * --dim: never a silent guess, each is recorded (mb_op_assume) and named in the output, and a
 * --dim under the same name overrides it. Two rules, both upper bounds:
 * - a NonZero or Compress over a bool mask keeps at most as many entries as the mask has
 *   (PyG's remove_self_loops / dropout_edge: a mask over the edges keeps at most every edge);
 * - the number of graphs PyTorch Geometric computes as batch.max() + 1 (global pooling with no
 *   size given): ReduceMax over the `batch` vector, a 1-D integer graph input holding each
 *   node's graph index, is the number of graphs - 1 when the batch counts graphs (per-sample
 *   dims) and at most the node count - 1 otherwise. It applies only when that value feeds
 *   nothing but sizes that grow with it (ConstantOfShape, Expand, Range, Tile, through
 *   Reshape/Gather/Cast/Add/Concat...), so a larger value can only make tensors larger. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/op.h"

int mb_op_assume(mb_op_ctx *c, int64_t value, const char *fmt, ...) {
  mb_assumptions *a = c->assumed;
  if (!a) return MB_OK;
  char why[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  if (a->n == a->cap) {
    int32_t cap = a->cap ? a->cap * 2 : 8;
    mb_assumption *grown = realloc(a->items, (size_t)cap * sizeof *grown);
    if (!grown) return mb_fail(c->d, MB_E_NOMEM, "out of memory");
    a->items = grown;
    a->cap = cap;
  }
  mb_assumption *x = &a->items[a->n];
  x->node = c->node->name;
  x->op_type = c->node->op_type;
  x->tensor = mb_op_bound_name(c);
  x->value = value;
  x->why = mb_arena_strdup(c->arena, why);
  if (!x->why) return mb_fail(c->d, MB_E_NOMEM, "out of memory");
  a->n++;
  return MB_OK;
}

bool mb_op_mask_bound(mb_op_ctx *c, const mb_tinfo *mask, int64_t limit, int64_t *count) {
  if (!mask || mask->rank < 0 || mask->dtype != MB_DTYPE_BOOL) return false;
  int64_t n = (int64_t)mb_tinfo_numel(mask);
  if (limit >= 0 && limit < n) n = limit;
  char shape[128];
  if (mb_op_assume(c, n, "%s over a bool mask of shape %s keeps at most its %lld elements", c->node->op_type,
                   mb_shape_str(shape, sizeof shape, mask), (long long)n) != MB_OK)
    return false;
  *count = n;
  return true;
}

/* ---- ReduceMax(batch) + 1: the number of graphs ---- */

static bool is_op(const mb_node *n, const char *op) { return !n->domain[0] && !strcmp(n->op_type, op); }

/* The values of a constant (initializer or Constant node output), or NULL. */
static const mb_small_values *const_values(const mb_graph *g, int32_t v) {
  const mb_value *val = &g->values[v];
  if (val->kind == MB_VALUE_INITIALIZER) return g->inits[val->initializer].values;
  if (val->kind != MB_VALUE_NODE_OUTPUT) return NULL;
  const mb_node *p = &g->nodes[val->producer];
  if (!is_op(p, "Constant")) return NULL;
  const mb_attr *a = mb_node_attr(p, "value", MB_ATTR_TENSOR);
  return a && a->t ? a->t->values : NULL;
}

/* every value of constant v is > 0 (strict) or >= 0 */
static bool const_sign(const mb_graph *g, int32_t v, bool strict) {
  const mb_small_values *sv = v >= 0 ? const_values(g, v) : NULL;
  if (!sv || !sv->count) return false;
  for (int64_t k = 0; k < sv->count; k++) {
    double x = sv->is_float ? sv->f[k] : (double)sv->i[k];
    if (strict ? !(x > 0) : !(x >= 0)) return false;
  }
  return true;
}

/* Input i of node n carries a value derived from the ReduceMax: does a larger value only make
 * sizes larger? Returns 1 when n passes it on (its output is derived too), 0 when n takes it
 * as a size that grows with it, -1 when neither. */
static int monotone_use(const mb_graph *g, const mb_node *n, int32_t i, const bool *derived) {
  int32_t other = n->n_inputs == 2 ? n->inputs[1 - i] : -1;
  bool other_free = other < 0 || !derived[other];
  if (i == 0 && (is_op(n, "Reshape") || is_op(n, "Squeeze") || is_op(n, "Unsqueeze") || is_op(n, "Flatten") ||
                 is_op(n, "Identity") || is_op(n, "Cast") || is_op(n, "CastLike") || is_op(n, "Slice") ||
                 is_op(n, "Expand")))
    return 1;
  if (i == 0 && is_op(n, "Gather") && other_free) return 1; /* picks elements; the indices are not derived */
  if (is_op(n, "Concat") || is_op(n, "Add") || is_op(n, "Max") || is_op(n, "Min")) return 1;
  if (i == 0 && is_op(n, "Sub") && other_free) return 1;
  if (is_op(n, "Mul") && other_free && const_sign(g, other, false)) return 1;
  if (i == 0 && is_op(n, "Div") && other_free && const_sign(g, other, true)) return 1;
  /* sizes: a larger value, a larger tensor */
  if ((i == 0 && is_op(n, "ConstantOfShape")) || (i == 1 && (is_op(n, "Expand") || is_op(n, "Tile"))))
    return 0;
  if (i == 1 && is_op(n, "Range") && n->n_inputs >= 3 && n->inputs[0] >= 0 && !derived[n->inputs[0]] &&
      n->inputs[2] >= 0 && !derived[n->inputs[2]] && const_sign(g, n->inputs[2], true))
    return 0;
  return -1;
}

/* Everything v's value reaches is a size that grows with it, through ops that keep the order. */
static bool feeds_sizes_only(mb_op_ctx *c, int32_t v) {
  const mb_graph *g = c->graph;
  bool *derived = calloc((size_t)g->n_values + 1, sizeof *derived);
  int32_t *uses = calloc((size_t)g->n_values + 1, sizeof *uses);
  bool ok = derived && uses;
  if (ok) derived[v] = true;
  for (int32_t k = 0; ok && k < g->n_nodes; k++) { /* topological order: derivation flows forward */
    const mb_node *n = &g->nodes[k];
    bool pass = false;
    for (int32_t i = 0; ok && i < n->n_inputs; i++) {
      int32_t u = n->inputs[i];
      if (u < 0 || !derived[u]) continue;
      uses[u]++;
      int r = monotone_use(g, n, i, derived);
      if (r < 0) ok = false;
      pass |= r == 1;
    }
    for (int32_t o = 0; ok && pass && o < n->n_outputs; o++)
      if (n->outputs[o] >= 0) derived[n->outputs[o]] = true;
  }
  for (int32_t u = 0; ok && u < g->n_values; u++) /* read elsewhere: a subgraph's capture */
    if (derived[u] && uses[u] != g->values[u].num_uses) ok = false;
  free(derived);
  free(uses);
  return ok;
}

/* x indexes an initializer table somewhere (embedding ids): its values are ids, not graphs. */
static bool indexes_a_table(const mb_graph *g, int32_t x) {
  for (int32_t k = 0; k < g->n_nodes; k++) {
    const mb_node *n = &g->nodes[k];
    if ((is_op(n, "Gather") || is_op(n, "GatherElements") || is_op(n, "GatherND")) && n->n_inputs >= 2 &&
        n->inputs[1] == x && n->inputs[0] >= 0 && g->values[n->inputs[0]].kind == MB_VALUE_INITIALIZER)
      return true;
  }
  return false;
}

int mb_op_reduce_max_value(mb_op_ctx *c, const mb_tinfo *x) {
  mb_tinfo *y = c->n_out > 0 ? c->out[0] : NULL;
  if (!y || y->val || y->rank < 0 || mb_tinfo_numel(y) != 1) return MB_OK;
  if (y->dtype != MB_DTYPE_INT64 && y->dtype != MB_DTYPE_INT32) return MB_OK;
  int64_t v;
  if (mb_op_user_dim(c, mb_op_bound_name(c), &v)) return mb_op_set_ivalues(c, 0, &v, 1); /* --dim wins */
  const mb_graph *g = c->graph;
  int32_t in = c->node->inputs[0];
  const mb_value *val = in >= 0 ? &g->values[in] : NULL;
  if (!val || g->parent || val->kind != MB_VALUE_INPUT || x->rank != 1 || val->type.rank != 1 ||
      !val->type.dim_params || !val->type.dim_params[0] || x->dims[0] < 1)
    return MB_OK;
  if (indexes_a_table(g, in) || !feeds_sizes_only(c, c->node->outputs[0])) return MB_OK;
  const char *dim = val->type.dim_params[0];
  const mb_op_dims *dims = c->dims;
  int k = -1;
  for (size_t i = 0; dims && i < dims->n_per_sample && k < 0; i++)
    if (!strcmp(dims->per_sample[i], dim)) k = (int)i;
  bool graphs = k >= 0 && c->batch >= 1;
  if (graphs && dims->is_batch[k]) graphs = false; /* a dim that is the batch itself holds no node per entry */
  if (graphs && c->batch > x->dims[0]) graphs = false; /* more graphs than nodes: at most the nodes */
  int64_t value = graphs ? c->batch - 1 : x->dims[0] - 1;
  int rc = mb_op_set_ivalues(c, 0, &value, 1);
  if (rc != MB_OK) return rc;
  if (graphs)
    return mb_op_assume(c, value,
                        "ReduceMax of graph input '%s' [%s], PyTorch Geometric's batch vector (each node's graph "
                        "index, 0 to graphs - 1): a batch of %lld %s makes it %lld, so the number of graphs "
                        "computed as its max + 1 is %lld", val->name, dim, (long long)c->batch,
                        dims->unit, (long long)value, (long long)c->batch);
  return mb_op_assume(c, value,
                      "ReduceMax of graph input '%s' [%s = %lld], taken as PyTorch Geometric's batch vector (each "
                      "node's graph index): at most %lld, so the number of graphs computed as its max + 1 is at "
                      "most the %lld nodes", val->name, dim, (long long)x->dims[0], (long long)value,
                      (long long)x->dims[0]);
}
