/* Shape inference for one set of dim values: walk the main graph in topological order and
 * apply each node's shape rule from the operator table. Results live in an mb_shapes handle. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "membudget/membudget.h"
#include "ops/op.h"
#include "shape/infer.h"

struct mb_shapes {
  mb_arena arena;
  int status;
  char errmsg[1024];
  char note[512];        /* what the caller should be told ("" if nothing) */
  const mb_model *model;
  mb_tinfo *t;           /* per value of the main graph */
  int32_t n;
  mb_unroll unroll_budget; /* nested Loops multiply their trip counts: bound the total */
  int64_t batch;         /* the batch size bound to the batch dim (-1: none) */
  mb_assumptions assumed; /* default bounds taken for data-dependent sizes (ops/bounds.c) */
  mb_op_dims op_dims;    /* the inputs' dims as the shape rules read them */
};

static int64_t bound_dim(const mb_shape_inputs *in, const char *name, bool *found) {
  *found = false;
  for (size_t i = 0; in && i < in->n_dims; i++)
    if (!strcmp(in->dim_names[i], name)) {
      *found = true;
      return in->dim_values[i];
    }
  return -1;
}

/* The batch dim: the one named by the caller, else the symbolic dim on axis 0 of the first
 * graph input that has one. NULL when every input is static. */
static const char *batch_dim_name(const mb_graph *g, const mb_shape_inputs *in) {
  if (in && in->batch_dim) return in->batch_dim;
  for (int32_t i = 0; i < g->n_inputs; i++) {
    const mb_type *ty = &g->values[g->inputs[i]].type;
    if (ty->rank > 0 && ty->dim_params[0]) return ty->dim_params[0];
  }
  return NULL;
}

static const mb_const_tensor *bound_input(const mb_shape_inputs *in, size_t k) {
  return in && k < in->n_bound && in->is_bound[k] ? &in->bound[k] : NULL;
}

/* The inputs' dims as the shape rules read them (ops/op.h): the named values, and each
 * per-sample dim with whether it is the batch itself. */
static int op_dims(mb_shapes *sh, const mb_shape_inputs *in, mb_diag *d) {
  mb_op_dims *o = &sh->op_dims;
  if (!in) return MB_OK;
  o->names = (const char *const *)in->dim_names;
  o->values = in->dim_values;
  o->n = in->n_dims;
  const mb_batching *b = in->batching;
  size_t n = mb_batching_num_sample_dims(b);
  if (!n) return MB_OK;
  const char **names = mb_arena_array(&sh->arena, n, sizeof *names);
  bool *is_batch = mb_arena_array(&sh->arena, n, sizeof *is_batch);
  if (!names || !is_batch) return mb_fail(d, MB_E_NOMEM, "out of memory");
  bool per_sample_rule = mb_batching_rule(b) == MB_BATCH_PER_SAMPLE;
  for (size_t k = 0; k < n; k++) {
    names[k] = mb_batching_sample_dim(b, k);
    is_batch[k] = k < b->n && b->counts[k] == 1 && per_sample_rule;
  }
  o->per_sample = names;
  o->is_batch = is_batch;
  o->n_per_sample = n;
  o->unit = mb_batching_unit(b);
  return MB_OK;
}

/* Graph inputs: declared shapes with symbolic dims bound by name (--dim), the batch dim by
 * the batch size; with fully static inputs and a batch size, axis 0 of every input. */
static int bind_inputs(mb_shapes *sh, const mb_graph *g, const mb_shape_inputs *in, mb_diag *d) {
  /* per-sample dims (batches of graphs): their values for this batch, under the batching rule */
  const mb_batching *batching = in ? in->batching : NULL;
  size_t n_sample = mb_batching_num_sample_dims(batching);
  int64_t *sample = NULL;
  if (n_sample && sh->batch >= 0) {
    sample = mb_arena_array(&sh->arena, n_sample, sizeof *sample);
    if (!sample) return mb_fail(d, MB_E_NOMEM, "out of memory");
    if (mb_batching_dims_at(batching, sh->batch, sample, d) != MB_OK) return d->status;
  }
  const char *batch_name = sh->batch >= 0 ? batch_dim_name(g, in) : NULL;
  bool static_batch = sh->batch >= 0 && !batch_name;
  if (static_batch)
    snprintf(sh->note, sizeof sh->note,
             "the graph inputs are fully static: axis 0 of each input is taken as the batch "
             "axis and set to %lld", (long long)sh->batch);
  for (int32_t i = 0; i < g->n_inputs; i++) {
    const mb_value *v = &g->values[g->inputs[i]];
    mb_tinfo *t = &sh->t[g->inputs[i]];
    const mb_const_tensor *b = bound_input(in, (size_t)i);
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
      int64_t val = p ? bound_dim(in, p, &found) : v->type.dims[k];
      int si = p && n_sample ? mb_batching_sample_index(batching, p) : -1;
      if (si >= 0 && found)
        return mb_fail(d, MB_E_INVALID_ARG,
                       "dim '%s' grows with the batch (per-sample dims: per_sample, graph sizes) and is also "
                       "given a value (--dim %s=%lld): give one or the other", p, p, (long long)val);
      if (si >= 0 && !sample)
        return mb_fail(d, MB_E_INVALID_ARG,
                       "graph input '%s' has dim '%s' on axis %d, which grows with the batch (per-sample "
                       "dims): give the batch size (--batch N)", v->name, p, (int)k);
      if (si >= 0) {
        val = sample[si];
        found = true;
      }
      if (p && !found && batch_name && !strcmp(p, batch_name)) {
        val = sh->batch;
        found = true;
      }
      if (static_batch && k == 0) val = sh->batch;
      if (p && !found && n_sample)
        return mb_fail(d, MB_E_INVALID_ARG,
                       "graph input '%s' has symbolic dim '%s' on axis %d: give it a value (--dim %s=N), "
                       "or, if it grows with the batch, make it a per-sample dim (per_sample %s=COUNT; "
                       "%s=1 when it counts graphs)", v->name, p, (int)k, p, p, p);
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
  mb_diag *d;
} frame;

static int infer_nodes(frame *f);

static int infer_subgraph(mb_op_ctx *c, const mb_graph *g, const mb_tinfo *const *inputs,
                          int32_t n, mb_tinfo **outputs) {
  const frame *outer = c->infer_state;
  frame f = {g, NULL, outer, outer->sh, outer->m, outer->d};
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

/* An integer output of one element whose value inference could not know (a ReduceMax, a count
 * read from data) takes the value the user gave under its name (--dim NAME=N), as a
 * data-dependent size does; rules that bound a size under that name (NonZero, Loop) set
 * bound_asked and are left alone. */
static int bind_values(mb_op_ctx *c) {
  for (int32_t o = 0; o < c->n_out; o++) {
    mb_tinfo *t = c->out[o];
    if (!t || t->val || t->rank < 0 || t->seq || mb_tinfo_numel(t) != 1) continue;
    if (t->dtype != MB_DTYPE_INT64 && t->dtype != MB_DTYPE_INT32) continue;
    int64_t v;
    if (mb_op_user_dim(c, c->graph->values[c->node->outputs[o]].name, &v)) {
      int rc = mb_op_set_ivalues(c, o, &v, 1);
      if (rc != MB_OK) return rc;
    }
  }
  return MB_OK;
}

/* Where the values of v were lost: the first tensor on the way back from v (through small
 * tensors whose values are unknown) that is an integer of one element computed from a tensor
 * too large to carry values, or from data. -1 if none. */
static int32_t lost_value(const frame *f, int32_t v, int depth, int *steps) {
  const mb_graph *g = f->g;
  const mb_tinfo *t = &f->t[v];
  if (depth > 64 || ++*steps > 4096 || t->rank < 0 || t->val || mb_tinfo_numel(t) > MB_SMALL_VALUE_MAX) return -1;
  if (g->values[v].kind != MB_VALUE_NODE_OUTPUT) return -1;
  const mb_node *p = &g->nodes[g->values[v].producer];
  if (!strcmp(p->op_type, "Shape") || !strcmp(p->op_type, "Size")) return -1;
  for (int32_t i = 0; i < p->n_inputs; i++) {
    int32_t u = p->inputs[i];
    if (u < 0) continue;
    int32_t r = lost_value(f, u, depth + 1, steps);
    if (r >= 0) return r;
  }
  bool integer = t->dtype == MB_DTYPE_INT64 || t->dtype == MB_DTYPE_INT32;
  return integer && mb_tinfo_numel(t) == 1 ? v : -1;
}

/* A rule that failed because an input's values are not known statically: say which tensor the
 * values were lost at and how to bound it (--dim NAME=N gives an integer scalar its value). */
static void explain_unknown(const frame *f, const mb_node *n, mb_diag *d) {
  if (d->status != MB_E_INVALID_MODEL || !strstr(d->msg, "not known statically")) return;
  const mb_graph *g = f->g;
  int steps = 0; /* a bounded walk: shape arithmetic is small, a crafted graph need not be */
  for (int32_t i = 0; i < n->n_inputs; i++) {
    int32_t u = n->inputs[i];
    int32_t src = u >= 0 ? lost_value(f, u, 0, &steps) : -1;
    if (src < 0) continue;
    const mb_node *p = &g->nodes[g->values[src].producer];
    const char *first = p->n_inputs > 0 && p->inputs[0] >= 0 ? g->values[p->inputs[0]].name : NULL;
    size_t len = strlen(d->msg);
    snprintf(d->msg + len, sizeof d->msg - len,
             ": it follows from the value of '%s' (node '%s', %s%s%s%s), which depends on the data; bound it "
             "with --dim '%s=N'", g->values[src].name, p->name, p->op_type, first ? " of '" : "",
             first ? first : "", first ? "'" : "", g->values[src].name);
    d->status = MB_E_UNSUPPORTED;
    return;
  }
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
    bool bound_asked = false;
    mb_op_ctx c = {&f->sh->arena, d, n, g, opset, n->n_inputs, n->n_outputs,
                   (const mb_tinfo *const *)in, (mb_tinfo *const *)out, &f->sh->op_dims,
                   infer_subgraph, f, &f->sh->unroll_budget, f->sh->batch, &f->sh->assumed,
                   &bound_asked};
    rc = def->shape(&c);
    if (rc == MB_OK && d->status != MB_OK) rc = d->status; /* an attribute of the wrong type (ops/op_util.c) */
    if (rc == MB_OK && !bound_asked) rc = bind_values(&c);
    else if (rc != MB_OK) explain_unknown(f, n, d);
  }
  free(in);
  free(out);
  return rc;
}

int mb_shapes_infer(const mb_model *m, const mb_shape_inputs *in, int64_t batch, mb_shapes **out) {
  mb_diag d;
  mb_diag_init(&d);
  if (out && mb_shapes_check_sample_dims(m, in, &d) != MB_OK) { /* a typo in a dim's name, said as such */
    mb_shapes *sh = *out = calloc(1, sizeof *sh);
    if (!sh) return MB_E_NOMEM;
    mb_arena_init(&sh->arena);
    sh->status = d.status;
    snprintf(sh->errmsg, sizeof sh->errmsg, "%s", d.msg);
    return d.status;
  }
  return mb_shapes_run(m, in, batch, out);
}

const mb_tinfo *mb_shapes_tinfo(const mb_shapes *sh) { return sh->t; }

int mb_shapes_status(const mb_shapes *sh) { return sh ? sh->status : MB_E_NOMEM; }

int mb_shapes_run(const mb_model *m, const mb_shape_inputs *in, int64_t batch, mb_shapes **out) {
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
    /* body passes (limit.unroll); a Loop past it gets one symbolic pass */
    sh->unroll_budget.limit = sh->unroll_budget.left =
        (int64_t)mb_limit(in ? in->limits : NULL, MB_LIMIT_UNROLL);
    sh->n = g->n_values;
    sh->t = mb_arena_array(&sh->arena, (size_t)g->n_values + 1, sizeof *sh->t);
    if (!sh->t) {
      mb_fail(&d, MB_E_NOMEM, "out of memory");
    } else {
      for (int32_t v = 0; v < g->n_values; v++) sh->t[v].rank = -1;
      bind_initializers(sh->t, g);
      frame f = {g, sh->t, NULL, sh, m, &d};
      if (op_dims(sh, in, &d) == MB_OK && bind_inputs(sh, g, in, &d) == MB_OK) infer_nodes(&f);
    }
  }
  sh->status = d.status;
  snprintf(sh->errmsg, sizeof sh->errmsg, "%s", d.msg);
  return d.status;
}

MB_API void mb_shapes_free(mb_shapes *sh) {
  if (!sh) return;
  free(sh->assumed.items);
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

MB_API size_t mb_shapes_num_assumptions(const mb_shapes *sh) {
  return sh && sh->status == MB_OK ? (size_t)sh->assumed.n : 0;
}

MB_API int mb_shapes_assumption(const mb_shapes *sh, size_t i, const char **node, const char **op_type,
                                const char **tensor, int64_t *value, const char **why) {
  if (!sh || sh->status != MB_OK) return MB_E_INVALID_ARG;
  if (i >= (size_t)sh->assumed.n) return MB_E_RANGE;
  const mb_assumption *a = &sh->assumed.items[i];
  if (node) *node = a->node;
  if (op_type) *op_type = a->op_type;
  if (tensor) *tensor = a->tensor;
  if (value) *value = a->value;
  if (why) *why = a->why;
  return MB_OK;
}

const mb_assumptions *mb_shapes_assumed(const mb_shapes *sh) { return &sh->assumed; }

int mb_shapes_check_sample_dims(const mb_model *m, const mb_shape_inputs *in, mb_diag *d) {
  const mb_batching *batching = in ? in->batching : NULL;
  size_t n = mb_batching_num_sample_dims(batching);
  if (!n || !m || !m->graph) return MB_OK;
  const mb_graph *g = m->graph;
  for (size_t i = 0; i < n; i++) {
    const char *name = mb_batching_sample_dim(batching, i);
    bool found = false;
    for (int32_t k = 0; k < g->n_inputs && !found; k++) {
      const mb_type *ty = &g->values[g->inputs[k]].type;
      for (int32_t a = 0; a < ty->rank && !found; a++) found = ty->dim_params[a] && !strcmp(ty->dim_params[a], name);
    }
    if (found) continue;
    char have[512] = "";
    size_t o = 0;
    for (int32_t k = 0; k < g->n_inputs; k++) {
      const mb_value *v = &g->values[g->inputs[k]];
      for (int32_t a = 0; a < v->type.rank; a++) {
        const char *p = v->type.dim_params[a];
        if (!p || strstr(have, p)) continue;
        if (o < sizeof have) o += (size_t)snprintf(have + o, sizeof have - o, "%s%s", o ? ", " : "", p);
      }
    }
    return mb_fail(d, MB_E_INVALID_ARG,
                   "per-sample dim '%s' (per_sample or graph sizes) is not a symbolic dim of any graph input; "
                   "the inputs' symbolic dims are: %s", name, o ? have : "none (every input is static)");
  }
  return MB_OK;
}
