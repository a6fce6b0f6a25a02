/* Shape inference for one set of dim values: walk the main graph in topological order and
 * apply each node's shape rule from the operator table. Results live in an mb_shapes handle. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget/setup.h"
#include "onnx/dtype.h"
#include "ops/op.h"
#include "shape/infer.h"
#include "membudget/membudget.h"

struct mb_shapes {
  mb_arena arena;
  int status;
  char errmsg[1024];
  char note[512];        /* what the caller should be told ("" if nothing) */
  const mb_model *model;
  mb_tinfo *t;           /* per value of the main graph */
  int32_t n;
  int64_t unroll_budget; /* nested Loops multiply their trip counts: bound the total */
  int64_t batch;         /* the batch size bound to the batch dim (-1: none) */
};

static int64_t bound_dim(const mb_setup *s, const char *name, bool *found) {
  *found = false;
  for (size_t i = 0; s && i < s->n_dims; i++)
    if (!strcmp(s->dim_names[i], name)) {
      *found = true;
      return s->dim_values[i];
    }
  return -1;
}

/* The batch dim: the one named by the caller, else the symbolic dim on axis 0 of the first
 * graph input that has one. NULL when every input is static. */
static const char *batch_dim_name(const mb_graph *g, const mb_setup *s) {
  if (s && s->batch_dim) return s->batch_dim;
  for (int32_t i = 0; i < g->n_inputs; i++) {
    const mb_type *ty = &g->values[g->inputs[i]].type;
    if (ty->rank > 0 && ty->dim_params[0]) return ty->dim_params[0];
  }
  return NULL;
}

/* Graph inputs: declared shapes with symbolic dims bound by name (--dim), the batch dim by
 * the batch size; with fully static inputs and a batch size, axis 0 of every input. */
static int bind_inputs(mb_shapes *sh, const mb_graph *g, const mb_setup *s, mb_diag *d) {
  const char *batch_name = sh->batch >= 0 ? batch_dim_name(g, s) : NULL;
  bool static_batch = sh->batch >= 0 && !batch_name;
  if (static_batch)
    snprintf(sh->note, sizeof sh->note,
             "the graph inputs are fully static: axis 0 of each input is taken as the batch "
             "axis and set to %lld", (long long)s->batch);
  for (int32_t i = 0; i < g->n_inputs; i++) {
    const mb_value *v = &g->values[g->inputs[i]];
    mb_tinfo *t = &sh->t[g->inputs[i]];
    const mb_const_tensor *b = mb_setup_bound_input(s, (size_t)i);
    if (b) { /* a concrete tensor given by the caller */
      t->dtype = b->dtype;
      t->rank = b->rank;
      t->dims = b->dims;
      t->val = b->values;
      continue;
    }
    if (v->type.rank < 0)
      return mb_fail(d, MB_E_INVALID_MODEL, "graph input '%s' declares no shape", v->name);
    t->dtype = v->type.dtype;
    t->rank = v->type.rank;
    t->dims = mb_arena_array(&sh->arena, (size_t)t->rank + 1, sizeof(int64_t));
    if (!t->dims) return mb_fail(d, MB_E_NOMEM, "out of memory");
    for (int32_t k = 0; k < t->rank; k++) {
      const char *p = v->type.dim_params[k];
      bool found = false;
      int64_t val = p ? bound_dim(s, p, &found) : v->type.dims[k];
      if (p && !found && batch_name && !strcmp(p, batch_name)) {
        val = sh->batch;
        found = true;
      }
      if (static_batch && k == 0) val = sh->batch;
      if (p && !found)
        return mb_fail(d, MB_E_INVALID_ARG,
                       "graph input '%s' has symbolic dim '%s' on axis %d: give it a value "
                       "(--dim %s=N)", v->name, p, (int)k, p);
      if (val < 0)
        return mb_fail(d, MB_E_INVALID_ARG, "graph input '%s' has an unknown dim on axis %d",
                       v->name, (int)k);
      t->dims[k] = val;
    }
    uint64_t numel = 1, bytes = 0;
    bool ok = true;
    for (int32_t k = 0; k < t->rank && ok; k++)
      ok = !__builtin_mul_overflow(numel, (uint64_t)t->dims[k], &numel);
    if (!ok || (mb_dtype_bits(t->dtype) && (mb_dtype_bytes(t->dtype, numel, &bytes) != MB_OK ||
                                            bytes > MB_MAX_TENSOR_BYTES)))
      return mb_fail(d, MB_E_LIMIT, "graph input '%s' would have an absurd size at these dims",
                     v->name);
  }
  return MB_OK;
}

static void bind_initializers(mb_tinfo *tinfo, const mb_graph *g) {
  for (int32_t v = 0; v < g->n_values; v++) {
    if (g->values[v].kind != MB_VALUE_INITIALIZER) continue;
    const mb_const_tensor *ct = &g->inits[g->values[v].initializer];
    mb_tinfo *t = &tinfo[v];
    t->dtype = ct->dtype;
    t->rank = ct->rank;
    t->dims = ct->dims;
    t->val = ct->values;
  }
}

/* One graph being inferred: its tensor infos and the frame of the graph around it, so that
 * captured names resolve to the enclosing graph's tensors. */
typedef struct frame {
  const mb_graph *g;
  mb_tinfo *t;
  const struct frame *up;
  mb_shapes *sh;
  const mb_model *m;
  const mb_setup *s;
  mb_diag *d;
} frame;

static int infer_nodes(frame *f);

static int infer_subgraph(mb_op_ctx *c, const mb_graph *g, const mb_tinfo *const *inputs,
                          int32_t n, mb_tinfo **outputs) {
  const frame *outer = c->infer_state;
  frame f = {g, NULL, outer, outer->sh, outer->m, outer->s, outer->d};
  f.t = mb_arena_array(&f.sh->arena, (size_t)g->n_values + 1, sizeof *f.t);
  if (!f.t) return mb_fail(f.d, MB_E_NOMEM, "out of memory");
  for (int32_t v = 0; v < g->n_values; v++) f.t[v].rank = -1;
  bind_initializers(f.t, g);
  if (n != g->n_inputs)
    return mb_op_fail(c, "subgraph '%s' takes %d inputs, the op gives %d", g->name,
                      (int)g->n_inputs, (int)n);
  for (int32_t i = 0; i < n; i++) {
    mb_tinfo *t = &f.t[g->inputs[i]];
    const mb_value *v = &g->values[g->inputs[i]];
    if (inputs[i]) *t = *inputs[i];
    else if (v->type.rank >= 0) { /* an input the op leaves open: its declared type */
      bool concrete = true;
      for (int32_t k = 0; k < v->type.rank; k++) concrete &= v->type.dims[k] >= 0;
      if (!concrete)
        return mb_op_fail(c, "subgraph '%s' input '%s' has no concrete shape", g->name, v->name);
      t->dtype = v->type.dtype;
      t->rank = v->type.rank;
      t->dims = v->type.dims;
    }
  }
  /* captures: the enclosing graphs' tensors, resolved at load */
  for (int32_t v = 0; v < g->n_values; v++) {
    const mb_value *val = &g->values[v];
    if (val->kind != MB_VALUE_OUTER) continue;
    const frame *up = outer;
    for (int32_t l = 1; up && l < val->outer_levels; l++) up = up->up;
    if (!up || val->outer_index < 0)
      return mb_op_fail(c, "subgraph '%s' reads '%s', which is not defined", g->name, val->name);
    f.t[v] = up->t[val->outer_index];
  }
  int rc = infer_nodes(&f);
  if (rc) return rc;
  for (int32_t o = 0; o < g->n_outputs; o++) outputs[o] = &f.t[g->outputs[o]];
  return MB_OK;
}

/* A data-dependent integer scalar (max(batch) over a graph input: the number of graphs a pool
 * reads as max(batch) + 1) has no value the graph can give; the user binds it by the tensor's
 * name like a data-dependent dim (--dim max_1=63), so the sizes computed from it resolve. */
static int bind_unknown_scalars(const frame *f, mb_op_ctx *c) {
  for (int32_t o = 0; o < c->n_out; o++) {
    const mb_tinfo *t = c->out[o];
    if (!t || t->val || t->rank < 0 || t->rank > 1 || mb_tinfo_numel(t) != 1) continue;
    if (mb_dtype_is_float(t->dtype) || !mb_dtype_is_integer_like(t->dtype)) continue;
    bool found = false;
    int64_t v = bound_dim(f->s, f->g->values[c->node->outputs[o]].name, &found);
    if (found && mb_op_set_ivalues(c, o, &v, 1) != MB_OK) return c->d->status;
  }
  return MB_OK;
}

static int infer_nodes(frame *f) {
  const mb_graph *g = f->g;
  mb_diag *d = f->d;
  int32_t max_in = 1, max_out = 1;
  for (int32_t k = 0; k < g->n_nodes; k++) {
    if (g->nodes[k].n_inputs > max_in) max_in = g->nodes[k].n_inputs;
    if (g->nodes[k].n_outputs > max_out) max_out = g->nodes[k].n_outputs;
  }
  const mb_tinfo **in = malloc((size_t)max_in * sizeof *in);
  mb_tinfo **out = malloc((size_t)max_out * sizeof *out);
  int rc = in && out ? MB_OK : mb_fail(d, MB_E_NOMEM, "out of memory");
  for (int32_t k = 0; k < g->n_nodes && rc == MB_OK; k++) {
    const mb_node *n = &g->nodes[k];
    int64_t opset = n->opset;
    const mb_op_def *def = n->op;
    if (!def) {
      rc = mb_fail(d, MB_E_UNSUPPORTED, "node '%s': op %s (domain '%s', opset %lld) is not supported",
                   n->name, n->op_type, n->domain[0] ? n->domain : "ai.onnx", (long long)opset);
      break;
    }
    for (int32_t i = 0; i < n->n_inputs; i++) in[i] = n->inputs[i] >= 0 ? &f->t[n->inputs[i]] : NULL;
    for (int32_t o = 0; o < n->n_outputs; o++) out[o] = n->outputs[o] >= 0 ? &f->t[n->outputs[o]] : NULL;
    int32_t given = 0;
    for (int32_t i = 0; i < n->n_inputs; i++) given += in[i] != NULL;
    if (given < def->min_inputs) {
      rc = mb_fail(d, MB_E_INVALID_MODEL, "node '%s' (%s): needs %d inputs, has %d", n->name,
                   n->op_type, (int)def->min_inputs, (int)given);
      break;
    }
    mb_op_ctx c = {&f->sh->arena, d, n, g, opset, n->n_inputs, n->n_outputs,
                   (const mb_tinfo *const *)in, (mb_tinfo *const *)out, f->s,
                   infer_subgraph, f, &f->sh->unroll_budget};
    rc = def->shape(&c);
    if (rc == MB_OK) rc = bind_unknown_scalars(f, &c);
  }
  free(in);
  free(out);
  return rc;
}

MB_API int mb_infer_shapes(const mb_model *m, const mb_setup *s, mb_shapes **out) {
  return mb_shapes_run(m, s, s ? s->batch : -1, out);
}

const mb_tinfo *mb_shapes_tinfo(const mb_shapes *sh) { return sh->t; }

int mb_shapes_status(const mb_shapes *sh) { return sh ? sh->status : MB_E_NOMEM; }

int mb_shapes_run(const mb_model *m, const mb_setup *s, int64_t batch, mb_shapes **out) {
  if (!out) return MB_E_INVALID_ARG;
  mb_shapes *sh = *out = calloc(1, sizeof *sh);
  if (!sh) return MB_E_NOMEM;
  mb_arena_init(&sh->arena);
  sh->batch = batch;
  mb_diag d;
  mb_diag_init(&d);
  if (!m || !m->graph) {
    mb_fail(&d, MB_E_INVALID_ARG, "no model");
  } else {
    const mb_graph *g = m->graph;
    sh->model = m;
    sh->unroll_budget = 4096; /* body passes; a Loop past it gets one symbolic pass */
    sh->n = g->n_values;
    sh->t = mb_arena_array(&sh->arena, (size_t)g->n_values + 1, sizeof *sh->t);
    if (!sh->t) {
      mb_fail(&d, MB_E_NOMEM, "out of memory");
    } else {
      for (int32_t v = 0; v < g->n_values; v++) sh->t[v].rank = -1;
      bind_initializers(sh->t, g);
      frame f = {g, sh->t, NULL, sh, m, s, &d};
      if (bind_inputs(sh, g, s, &d) == MB_OK) infer_nodes(&f);
    }
  }
  sh->status = d.status;
  snprintf(sh->errmsg, sizeof sh->errmsg, "%s", d.msg);
  return d.status;
}

MB_API void mb_shapes_free(mb_shapes *sh) {
  if (!sh) return;
  mb_arena_destroy(&sh->arena);
  free(sh);
}

MB_API const char *mb_shapes_note(const mb_shapes *sh) { return sh ? sh->note : ""; }

MB_API const char *mb_model_batch_dim(const mb_model *m) {
  return m && m->graph ? batch_dim_name(m->graph, NULL) : NULL;
}

MB_API const char *mb_shapes_errmsg(const mb_shapes *sh) {
  return sh ? sh->errmsg : "out of memory";
}

MB_API size_t mb_shapes_num_tensors(const mb_shapes *sh) {
  return sh && sh->status == MB_OK ? (size_t)sh->n : 0;
}

MB_API int mb_shapes_tensor(const mb_shapes *sh, size_t i, mb_shape_desc *out) {
  if (!sh || !out || sh->status != MB_OK) return MB_E_INVALID_ARG;
  if (i >= (size_t)sh->n) return MB_E_RANGE;
  const mb_graph *g = sh->model->graph;
  const mb_value *v = &g->values[i];
  const mb_tinfo *t = &sh->t[i];
  mb_shape_desc desc = {sizeof desc, v->name, NULL, NULL, t->dtype, t->rank, t->dims, 0, 0};
  if (v->kind == MB_VALUE_NODE_OUTPUT) {
    desc.producer = g->nodes[v->producer].name;
    desc.op_type = g->nodes[v->producer].op_type;
  }
  desc.known = t->rank >= 0;
  if (desc.known && mb_dtype_bits(t->dtype)) mb_dtype_bytes(t->dtype, mb_tinfo_numel(t), &desc.nbytes);
  uint32_t caller = out->struct_size;
  if (caller < sizeof desc) return MB_E_INVALID_ARG;
  *out = desc;
  out->struct_size = caller;
  return MB_OK;
}
