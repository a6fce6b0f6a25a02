#include <stdlib.h>
#include <string.h>

#include "graph/check.h"
#include "util/strmap.h"

int32_t mb_node_num_subgraphs(const mb_node *n) {
  int32_t count = 0;
  for (int32_t a = 0; a < n->n_attrs; a++) {
    count += n->attrs[a].g != NULL;
    for (uint64_t j = 0; j < n->attrs[a].n_graphs; j++) count += n->attrs[a].graphs[j] != NULL;
  }
  return count;
}

mb_graph *mb_node_subgraph(const mb_node *n, int32_t i) {
  for (int32_t a = 0; a < n->n_attrs; a++) {
    if (n->attrs[a].g && i-- == 0) return n->attrs[a].g;
    for (uint64_t j = 0; j < n->attrs[a].n_graphs; j++)
      if (n->attrs[a].graphs[j] && i-- == 0) return n->attrs[a].graphs[j];
  }
  return NULL;
}

const mb_attr *mb_node_attr(const mb_node *n, const char *name, int32_t type) {
  for (int32_t a = 0; a < n->n_attrs; a++)
    if (!strcmp(n->attrs[a].name, name))
      return !n->attrs[a].type || n->attrs[a].type == type ? &n->attrs[a] : NULL;
  return NULL;
}

const char *mb_attr_type_name(int32_t type) {
  static const char *const names[] = {"UNDEFINED", "FLOAT", "INT", "STRING", "TENSOR", "GRAPH", "FLOATS",
                                      "INTS", "STRINGS", "TENSORS", "GRAPHS", "SPARSE_TENSOR", "SPARSE_TENSORS",
                                      "TYPE_PROTO", "TYPE_PROTOS"};
  return type >= 0 && type < (int32_t)(sizeof names / sizeof names[0]) ? names[type] : "unknown";
}

int64_t mb_model_opset_of(const struct mb_model *m, const char *domain) {
  if (!domain || !strcmp(domain, "ai.onnx")) domain = "";
  for (int32_t i = 0; i < m->n_opsets; i++)
    if (!strcmp(m->opsets[i].domain, domain)) return m->opsets[i].version;
  return -1;
}

/* ------------------------------------------------------------------ captures */

typedef struct capture_fn {
  /* called for each name that a subgraph of node n reads from the graph holding n */
  int (*fn)(void *ctx, const mb_graph *g, int32_t node, int32_t value);
  void *ctx;
} capture_fn;

/* Walk subgraph sg (nested somewhere below `home`, the graph holding node `node`) and report
 * the captured names that resolve to values of `home` (resolved once by resolve_captures). */
static int walk_captures(const mb_graph *home, int32_t node, const mb_graph *sg, capture_fn *cb,
                         mb_diag *d) {
  for (int32_t v = 0; v < sg->n_values; v++) {
    const mb_value *val = &sg->values[v];
    if (val->kind != MB_VALUE_OUTER || val->outer_levels != sg->depth - home->depth) continue;
    int rc = cb->fn(cb->ctx, home, node, val->outer_index);
    if (rc) return rc;
  }
  for (int32_t k = 0; k < sg->n_nodes; k++)
    for (int32_t i = 0; i < mb_node_num_subgraphs(&sg->nodes[k]); i++) {
      int rc = walk_captures(home, node, mb_node_subgraph(&sg->nodes[k], i), cb, d);
      if (rc) return rc;
    }
  return MB_OK;
}

/* Resolve every captured name of every subgraph to (levels up, value index), with one hash
 * map per graph on the current chain: linear in the model, not in captures x values. */
typedef struct scope_chain {
  const mb_strmap *names;
  const struct scope_chain *up;
} scope_chain;

static int resolve_captures(mb_graph *g, const scope_chain *up, mb_diag *d) {
  mb_strmap names;
  if (mb_strmap_init(&names, (size_t)g->n_values) != 0) return mb_fail(d, MB_E_NOMEM, "out of memory");
  int rc = MB_OK;
  for (int32_t v = 0; v < g->n_values && rc == MB_OK; v++)
    if (g->values[v].kind != MB_VALUE_OUTER && mb_strmap_put(&names, g->values[v].name, v, NULL) < 0)
      rc = mb_fail(d, MB_E_NOMEM, "out of memory");
  for (int32_t v = 0; v < g->n_values && rc == MB_OK; v++) {
    mb_value *val = &g->values[v];
    if (val->kind != MB_VALUE_OUTER) continue;
    int32_t levels = 1, idx = -1;
    for (const scope_chain *c = up; c; c = c->up, levels++)
      if ((idx = mb_strmap_get(c->names, val->name)) >= 0) break;
    if (idx < 0)
      rc = mb_fail(d, MB_E_INVALID_MODEL,
                   "subgraph '%s' consumes '%s', which is not defined in it or in any "
                   "enclosing graph", g->name, val->name);
    val->outer_levels = levels;
    val->outer_index = idx;
  }
  scope_chain here = {&names, up};
  for (int32_t k = 0; k < g->n_nodes && rc == MB_OK; k++)
    for (int32_t i = 0; i < mb_node_num_subgraphs(&g->nodes[k]) && rc == MB_OK; i++)
      rc = resolve_captures(mb_node_subgraph(&g->nodes[k], i), &here, d);
  mb_strmap_free(&names);
  return rc;
}

static int for_each_capture(const mb_graph *g, int32_t node, capture_fn *cb, mb_diag *d) {
  const mb_node *n = &g->nodes[node];
  for (int32_t i = 0; i < mb_node_num_subgraphs(n); i++) {
    int rc = walk_captures(g, node, mb_node_subgraph(n, i), cb, d);
    if (rc) return rc;
  }
  return MB_OK;
}

/* ------------------------------------------------------------------ topological order */

typedef struct edge_list {
  int32_t *from, *to; /* dependency: node `from` must run before node `to` */
  size_t n, cap;
} edge_list;

static int add_edge(edge_list *e, int32_t from, int32_t to) {
  if (e->n == e->cap) {
    size_t cap = e->cap ? e->cap * 2 : 64;
    int32_t *f = realloc(e->from, cap * sizeof *f);
    if (!f) return MB_E_NOMEM;
    e->from = f;
    int32_t *t = realloc(e->to, cap * sizeof *t);
    if (!t) return MB_E_NOMEM;
    e->to = t;
    e->cap = cap;
  }
  e->from[e->n] = from;
  e->to[e->n] = to;
  e->n++;
  return MB_OK;
}

static int capture_edge(void *ctx, const mb_graph *g, int32_t node, int32_t value) {
  mb_value *v = &((mb_graph *)g)->values[value];
  v->num_uses++; /* a subgraph reading a value keeps it alive like a direct input */
  if (v->kind == MB_VALUE_NODE_OUTPUT && v->producer != node)
    return add_edge(ctx, v->producer, node);
  return MB_OK;
}

/* The node list in topological order, as ONNX requires: a cycle and an out-of-order list are
 * each refused with the nodes named (Kahn's algorithm tells the two apart). */
static int check_order(mb_graph *g, mb_diag *d) {
  edge_list e = {0};
  int rc = MB_OK;
  size_t first = 0; /* the first edge that runs backwards */
  capture_fn cb = {capture_edge, &e};
  for (int32_t k = 0; k < g->n_nodes && rc == MB_OK; k++) {
    const mb_node *n = &g->nodes[k];
    for (int32_t i = 0; i < n->n_inputs && rc == MB_OK; i++) {
      int32_t v = n->inputs[i];
      if (v >= 0 && g->values[v].kind == MB_VALUE_NODE_OUTPUT)
        rc = add_edge(&e, g->values[v].producer, k);
    }
    if (rc == MB_OK) rc = for_each_capture(g, k, &cb, d);
  }
  if (rc == MB_E_NOMEM) rc = mb_fail(d, MB_E_NOMEM, "out of memory");
  bool sorted = true;
  for (size_t i = 0; i < e.n && rc == MB_OK; i++) {
    if (e.from[i] == e.to[i]) {
      const mb_node *n = &g->nodes[e.to[i]];
      rc = mb_fail(d, MB_E_INVALID_MODEL, "node '%s' (%s) consumes its own output", n->name,
                   n->op_type);
    }
    if (e.from[i] > e.to[i] && sorted) {
      sorted = false;
      first = i;
    }
  }
  if (rc != MB_OK || sorted) goto done;

  /* Kahn's algorithm over the edge list. */
  int32_t n = g->n_nodes;
  int32_t *indeg = calloc((size_t)n, sizeof *indeg);
  int32_t *order = malloc((size_t)n * sizeof *order);
  int32_t *start = calloc((size_t)n + 1, sizeof *start);
  int32_t *adj = malloc((e.n ? e.n : 1) * sizeof *adj);
  int32_t *where = malloc((size_t)n * sizeof *where);
  if (!indeg || !order || !start || !adj || !where) {
    rc = mb_fail(d, MB_E_NOMEM, "out of memory");
  } else {
    for (size_t i = 0; i < e.n; i++) {
      indeg[e.to[i]]++;
      start[e.from[i] + 1]++;
    }
    for (int32_t k = 0; k < n; k++) start[k + 1] += start[k];
    int32_t *fill = where; /* reuse as a cursor array */
    for (int32_t k = 0; k < n; k++) fill[k] = start[k];
    for (size_t i = 0; i < e.n; i++) adj[fill[e.from[i]]++] = e.to[i];
    int32_t head = 0, tail = 0;
    for (int32_t k = 0; k < n; k++) if (!indeg[k]) order[tail++] = k;
    while (head < tail) {
      int32_t k = order[head++];
      for (int32_t j = start[k]; j < start[k + 1]; j++)
        if (--indeg[adj[j]] == 0) order[tail++] = adj[j];
    }
    if (tail < n) {
      for (int32_t k = 0; k < n; k++) {
        if (indeg[k]) {
          rc = mb_fail(d, MB_E_INVALID_MODEL, "node '%s' (%s) is part of a cycle",
                       g->nodes[k].name, g->nodes[k].op_type);
          break;
        }
      }
    } else {
      /* No cycle, but out of order. ONNX requires the node list in topological order
       * (onnx.checker refuses it otherwise), and the list is the order the step runs in: sorted
       * into some other order it would be a different step, and a different answer. */
      const mb_node *reader = &g->nodes[e.to[first]], *writer = &g->nodes[e.from[first]];
      const char *tensor = "a value its subgraph captures";
      for (int32_t i = 0; i < reader->n_inputs; i++) {
        int32_t v = reader->inputs[i];
        if (v >= 0 && g->values[v].kind == MB_VALUE_NODE_OUTPUT && g->values[v].producer == e.from[first]) {
          tensor = g->values[v].name;
          break;
        }
      }
      rc = mb_fail(d, MB_E_INVALID_MODEL,
                   "node '%s' (%s) reads '%s' before node '%s' (%s) writes it: the node list is not in "
                   "topological order, which ONNX requires (onnx.checker refuses it); export the model again",
                   reader->name, reader->op_type, tensor, writer->name, writer->op_type);
    }
  }
  free(indeg);
  free(order);
  free(start);
  free(adj);
  free(where);
done:
  free(e.from);
  free(e.to);
  return rc;
}

/* ------------------------------------------------------------------ whole model */

static int count_inits(const mb_graph *g) {
  int n = g->n_inits;
  for (int32_t k = 0; k < g->n_nodes; k++)
    for (int32_t i = 0; i < mb_node_num_subgraphs(&g->nodes[k]); i++)
      n += count_inits(mb_node_subgraph(&g->nodes[k], i));
  return n;
}

static int check_graph(struct mb_model *m, mb_graph *g, mb_diag *d) {
  int rc = check_order(g, d);
  if (rc) return rc;
  mb_init_ref *base = &m->all_inits[m->n_all_inits];
  for (int32_t i = 0; i < g->n_inits; i++) {
    base[i].graph = g;
    base[i].index = i;
    base[i].value = -1;
  }
  for (int32_t v = 0; v < g->n_values; v++)
    if (g->values[v].initializer >= 0) base[g->values[v].initializer].value = v;
  m->n_all_inits += g->n_inits;
  for (int32_t k = 0; k < g->n_nodes; k++)
    for (int32_t i = 0; i < mb_node_num_subgraphs(&g->nodes[k]); i++)
      if ((rc = check_graph(m, mb_node_subgraph(&g->nodes[k], i), d))) return rc;
  return MB_OK;
}

int mb_graph_check_model(struct mb_model *m, mb_diag *d) {
  int rc = resolve_captures(m->graph, NULL, d);
  if (rc) return rc;
  int n = count_inits(m->graph);
  m->all_inits = mb_arena_array(&m->arena, (size_t)n + 1, sizeof(mb_init_ref));
  if (!m->all_inits) return mb_fail(d, MB_E_NOMEM, "out of memory");
  m->n_all_inits = 0;
  return check_graph(m, m->graph, d);
}
