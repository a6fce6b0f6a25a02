/* Control flow: If, Loop and Scan, inferred through their subgraphs "as far as shapes are
 * static". A trip count that is not known statically is bounded by the user. */
#include <string.h>

#include "graph/dtype.h"
#include "ops/op.h"

static const mb_graph *graph_attr(const mb_op_ctx *c, const char *name) { return mb_op_attr_g(c, name); }

static bool same_type(const mb_tinfo *a, const mb_tinfo *b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return false;
  for (int32_t k = 0; k < a->rank; k++)
    if (a->dims[k] != b->dims[k]) return false;
  return true;
}

static int copy_out(mb_op_ctx *c, int32_t o, const mb_tinfo *t) {
  if (!t || t->rank < 0) return mb_op_fail(c, "output %d of the subgraph is not inferred", (int)o);
  int rc = mb_op_set(c, o, t->dtype, t->rank, t->dims);
  if (!rc && o < c->n_out && c->out[o]) c->out[o]->val = t->val;
  return rc;
}

static int if_op(mb_op_ctx *c) {
  const mb_graph *then_g = graph_attr(c, "then_branch"), *else_g = graph_attr(c, "else_branch");
  if (!then_g || !else_g) return mb_op_fail(c, "If needs then_branch and else_branch");
  if (then_g->n_outputs != c->n_out || else_g->n_outputs != c->n_out)
    return mb_op_fail(c, "branches have %d and %d outputs, the node %d", (int)then_g->n_outputs,
                      (int)else_g->n_outputs, (int)c->n_out);
  mb_tinfo **t = mb_arena_array(c->arena, (size_t)c->n_out + 1, sizeof *t);
  mb_tinfo **e = mb_arena_array(c->arena, (size_t)c->n_out + 1, sizeof *e);
  if (!t || !e) return mb_fail(c->d, MB_E_NOMEM, "out of memory");
  int rc;
  if ((rc = c->infer_subgraph(c, then_g, NULL, 0, t)) || (rc = c->infer_subgraph(c, else_g, NULL, 0, e)))
    return rc;
  int64_t n;
  const int64_t *cond = mb_op_ivalues(c, 0, &n);
  for (int32_t o = 0; o < c->n_out; o++) {
    const mb_tinfo *pick = cond && n >= 1 ? (cond[0] ? t[o] : e[o]) : t[o];
    if (!cond && !same_type(t[o], e[o])) {
      char a[256], b[256];
      return mb_op_fail(c, "the branches give output %d as %s and %s and the condition is not "
                        "known statically", (int)o, mb_shape_str(a, sizeof a, t[o]),
                        mb_shape_str(b, sizeof b, e[o]));
    }
    if ((rc = copy_out(c, o, pick))) return rc;
  }
  return MB_OK;
}

/* Loop(M, cond, v...) with body(iter, cond, v...) -> (cond, v..., scan...).
 * With a known trip count (up to MAX_UNROLLED) the body is inferred once per iteration with
 * concrete iteration numbers, so per-iteration slicing resolves and values carry over; the
 * scan outputs must then have the same shape in every iteration. Otherwise one symbolic pass
 * with an unknown iteration number, and the trip count comes from the user (mb_op_bound). */
#define MAX_UNROLLED 1024

static int loop_op(mb_op_ctx *c) {
  const mb_graph *body = graph_attr(c, "body");
  if (!body) return mb_op_fail(c, "Loop needs a body");
  int32_t n_carried = c->n_in - 2;
  if (n_carried < 0 || body->n_inputs != n_carried + 2 || body->n_outputs < n_carried + 1)
    return mb_op_fail(c, "the body's inputs and outputs do not match the node");
  int32_t n_scan = body->n_outputs - 1 - n_carried;
  int64_t trips = -1, n;
  const int64_t *m = c->n_in > 0 ? mb_op_ivalues(c, 0, &n) : NULL;
  if (m && n == 1) trips = m[0];
  else if (!mb_op_bound(c, &trips)) trips = -1;
  if (trips < 0 && n_scan > 0) return mb_op_data_dependent(c, "a trip count");

  static const int64_t no_dims[1] = {0};
  int64_t iter_value = 0, cond_value = 1;
  mb_small_values iter_v = {1, false, &iter_value, NULL}, cond_v = {1, false, &cond_value, NULL};
  /* Unrolled nested Loops multiply: 1024 x 1024 x 1024 passes from a 317-byte model. */
  bool unroll = trips >= 0 && trips <= MAX_UNROLLED && trips <= c->unroll_budget->left;
  /* not unrolled only because earlier Loops spent the budget: said if the symbolic pass fails */
  bool spent = trips >= 0 && trips <= MAX_UNROLLED && !unroll;
  if (unroll) c->unroll_budget->left -= trips;
  mb_tinfo iter = {.dtype = MB_DTYPE_INT64, .dims = (int64_t *)no_dims, .val = unroll ? &iter_v : NULL};
  mb_tinfo cond = {.dtype = MB_DTYPE_BOOL, .dims = (int64_t *)no_dims, .val = unroll ? &cond_v : NULL};
  const mb_tinfo **in = mb_arena_array(c->arena, (size_t)body->n_inputs + 1, sizeof *in);
  mb_tinfo **out = mb_arena_array(c->arena, (size_t)body->n_outputs + 1, sizeof *out);
  mb_tinfo *first_scan = mb_arena_array(c->arena, (size_t)n_scan + 1, sizeof *first_scan);
  if (!in || !out || !first_scan) return mb_fail(c->d, MB_E_NOMEM, "out of memory");
  in[0] = &iter;
  in[1] = &cond;
  for (int32_t i = 0; i < n_carried; i++) {
    if (!c->in[2 + i]) return mb_op_fail(c, "loop-carried input %d is missing", (int)i);
    in[2 + i] = c->in[2 + i];
  }
  int64_t done = 0, passes = unroll ? trips : 1;
  int rc;
  for (int64_t k = 0; k < passes; k++) {
    iter_value = k;
    if ((rc = c->infer_subgraph(c, body, in, body->n_inputs, out))) {
      if (spent) mb_limit_note(c->d, MB_LIMIT_UNROLL, (uint64_t)c->unroll_budget->limit,
                               "this Loop's body was inferred once, not unrolled");
      return rc;
    }
    for (int32_t i = 0; i < n_carried; i++) {
      if (!same_type(out[1 + i], in[2 + i])) {
        char a[256], b[256];
        return mb_op_fail(c, "loop-carried value %d changes shape from %s to %s between "
                          "iterations", (int)i, mb_shape_str(a, sizeof a, in[2 + i]),
                          mb_shape_str(b, sizeof b, out[1 + i]));
      }
      in[2 + i] = out[1 + i];
    }
    for (int32_t j = 0; j < n_scan; j++) {
      const mb_tinfo *per = out[1 + n_carried + j];
      if (k == 0) first_scan[j] = *per;
      else if (!same_type(per, &first_scan[j]))
        return mb_op_fail(c, "scan output %d changes shape between iterations", (int)j);
    }
    done = k + 1;
    const mb_small_values *cv = out[0]->val;
    if (unroll && cv && !cv->is_float && cv->count == 1 && cv->i[0] == 0) break; /* stops here */
  }
  if (!unroll) done = trips;
  for (int32_t i = 0; i < n_carried; i++)
    if ((rc = copy_out(c, i, in[2 + i]))) return rc;
  for (int32_t j = 0; j < n_scan; j++) {
    const mb_tinfo *per = &first_scan[j];
    if (per->rank + 1 > MB_MAX_RANK) return mb_op_fail(c, "scan output rank too large");
    int64_t dims[MB_MAX_RANK];
    dims[0] = done;
    memcpy(dims + 1, per->dims, (size_t)per->rank * sizeof *dims);
    if ((rc = mb_op_set(c, n_carried + j, per->dtype, per->rank + 1, dims))) return rc;
  }
  return MB_OK;
}

/* Scan (opset 9+): N state inputs, M scan inputs sliced along their scan axes. */
static int scan_op(mb_op_ctx *c) {
  const mb_graph *body = graph_attr(c, "body");
  int64_t m_scan = mb_op_attr_i(c, "num_scan_inputs", 0);
  if (!body || m_scan <= 0 || m_scan > c->n_in || c->opset < 9)
    return mb_op_fail(c, "Scan needs a body and num_scan_inputs (opset 9 form)");
  int32_t n_state = c->n_in - (int32_t)m_scan;
  const int64_t *in_axes, *out_axes;
  uint64_t n_in_axes = mb_op_attr_ints(c, "scan_input_axes", &in_axes);
  uint64_t n_out_axes = mb_op_attr_ints(c, "scan_output_axes", &out_axes);
  const mb_tinfo **in = mb_arena_array(c->arena, (size_t)c->n_in + 1, sizeof *in);
  mb_tinfo *slices = mb_arena_array(c->arena, (size_t)m_scan + 1, sizeof *slices);
  mb_tinfo **out = mb_arena_array(c->arena, (size_t)body->n_outputs + 1, sizeof *out);
  if (!in || !slices || !out) return mb_fail(c->d, MB_E_NOMEM, "out of memory");
  int64_t length = -1;
  int rc;
  for (int32_t i = 0; i < c->n_in; i++) {
    const mb_tinfo *x;
    if ((rc = mb_op_input(c, i, &x))) return rc;
    if (i < n_state) { in[i] = x; continue; }
    int32_t j = i - n_state, axis;
    if ((rc = mb_op_axis(c, (uint64_t)j < n_in_axes ? in_axes[j] : 0, x->rank, &axis))) return rc;
    if (length >= 0 && x->dims[axis] != length)
      return mb_op_fail(c, "scan inputs have lengths %lld and %lld", (long long)length, (long long)x->dims[axis]);
    length = x->dims[axis];
    mb_tinfo *sl = &slices[j];
    sl->dtype = x->dtype;
    sl->rank = x->rank - 1;
    sl->dims = mb_arena_array(c->arena, (size_t)x->rank + 1, sizeof(int64_t));
    if (!sl->dims) return mb_fail(c->d, MB_E_NOMEM, "out of memory");
    for (int32_t k = 0, r = 0; k < x->rank; k++) if (k != axis) sl->dims[r++] = x->dims[k];
    in[i] = sl;
  }
  if ((rc = c->infer_subgraph(c, body, in, c->n_in, out))) return rc;
  for (int32_t o = 0; o < body->n_outputs && o < c->n_out; o++) {
    const mb_tinfo *t = out[o];
    if (o < n_state) {
      if ((rc = copy_out(c, o, t))) return rc;
      continue;
    }
    int32_t j = o - n_state, axis;
    if ((rc = mb_op_axis(c, (uint64_t)j < n_out_axes ? out_axes[j] : 0, t->rank + 1, &axis))) return rc;
    int64_t dims[MB_MAX_RANK];
    for (int32_t k = 0, r = 0; k <= t->rank; k++) dims[k] = k == axis ? length : t->dims[r++];
    if ((rc = mb_op_set(c, o, t->dtype, t->rank + 1, dims))) return rc;
  }
  return MB_OK;
}

const mb_op_def mb_ops_control[] = {
  {"", "If", 1, 1, 1, MB_OP_ANY, if_op, MB_G_DEFAULT},
  {"", "Loop", 1, 1, MB_OP_ANY, MB_OP_ANY, loop_op, MB_G_DEFAULT},
  {"", "Loop", 11, 0, MB_OP_ANY, MB_OP_ANY, loop_op, MB_G_DEFAULT},
  {"", "Scan", 9, 1, MB_OP_ANY, MB_OP_ANY, scan_op, MB_G_DEFAULT},
};
const size_t mb_ops_control_count = sizeof mb_ops_control / sizeof mb_ops_control[0];
