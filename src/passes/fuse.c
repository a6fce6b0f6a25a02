/* Pattern fusion (see fuse.h). Matchers work on structure, not on constant values: a pattern
 * is accepted when its internal tensors are read only inside it and the other inputs are
 * scalars or weights. Elementwise "islands" grown from one input cover GELU (erf and tanh
 * forms), SiLU, decomposed LayerNorm and RMSNorm whatever order the exporter wrote them in. */
#include "passes/fuse.h"

#include <string.h>

#include "graph/dtype.h"
#include "graph/origin.h"
#include "passes/aten.h"

typedef struct matcher {
  const mb_graph *g;
  const mb_tinfo *t;
  int32_t *first_use;  /* per value: CSR offsets into uses */
  int32_t *uses;       /* consumer node per (value, use) */
  int32_t *group_of;
  mb_fused *groups;
  int32_t n_groups, cap;
  const mb_fuse_options *opt;
} matcher;

static bool is(const mb_node *n, const char *op) { return !strcmp(n->op_type, op) && !n->domain[0]; }

static int32_t n_consumers(const matcher *m, int32_t v) {
  return m->first_use[v + 1] - m->first_use[v];
}

/* The one node reading v, or -1 (also when a subgraph captures v or it is a graph output). */
static int32_t sole_consumer(const matcher *m, int32_t v) {
  if (v < 0 || n_consumers(m, v) != 1 || m->g->values[v].num_uses != 1) return -1;
  for (int32_t i = 0; i < m->g->n_outputs; i++)
    if (m->g->outputs[i] == v) return -1;
  int32_t k = m->uses[m->first_use[v]];
  return m->group_of[k] < 0 ? k : -1;
}

static uint64_t numel(const matcher *m, int32_t v) {
  if (v < 0 || m->t[v].rank < 0) return UINT64_MAX;
  return mb_tinfo_numel(&m->t[v]);
}

static bool is_scalar(const matcher *m, int32_t v) { return numel(m, v) <= 1; }

/* A weight, or a view of one (Unsqueeze/Reshape/Transpose of an initializer). */
static bool is_weight(const matcher *m, int32_t v) {
  for (int depth = 0; v >= 0 && depth < 4; depth++) {
    const mb_value *val = &m->g->values[v];
    if (val->kind == MB_VALUE_INITIALIZER) return true;
    if (val->kind != MB_VALUE_NODE_OUTPUT) return false;
    const mb_node *p = &m->g->nodes[val->producer];
    if (is(p, "Constant")) return true;
    if (!is(p, "Unsqueeze") && !is(p, "Reshape") && !is(p, "Transpose") && !is(p, "Cast")) return false;
    v = p->inputs[0];
  }
  return false;
}

static void add_input(mb_fused *f, int32_t v) {
  if (v < 0) return;
  for (int32_t i = 0; i < f->n_in; i++)
    if (f->in[i] == v) return;
  if (f->n_in < MB_FUSED_MAX_IN) f->in[f->n_in++] = v;
}

static int commit(matcher *m, mb_fused *f, const int32_t *members, int32_t n) {
  if (f->n_in >= MB_FUSED_MAX_IN) return 0; /* too many inputs to describe: leave it unfused */
  if (m->n_groups == m->cap) return 0;
  int32_t id = m->n_groups++;
  f->n_members = n;
  m->groups[id] = *f;
  for (int32_t i = 0; i < n; i++) m->group_of[members[i]] = id;
  return 1;
}

/* ---- attention: MatMul(q, kT) [scale] [mask] Softmax [Dropout] MatMul(., v) ---- */
/* The scaled operand of `Mul(x, scalar)` that only the attention's first MatMul reads (torch
 * 2.x's TorchScript export scales q and k^T by sqrt(scale) each): x and the Mul, else v itself. */
static int32_t unscaled(matcher *m, int32_t v, int32_t mm, int32_t *mul) {
  *mul = -1;
  if (v < 0 || m->g->values[v].kind != MB_VALUE_NODE_OUTPUT) return v;
  int32_t p = m->g->values[v].producer;
  const mb_node *x = &m->g->nodes[p];
  if (!is(x, "Mul") || x->n_inputs != 2 || m->group_of[p] >= 0 || sole_consumer(m, v) != mm) return v;
  if (!is_scalar(m, x->inputs[1]) || is_scalar(m, x->inputs[0])) return v;
  *mul = p;
  return x->inputs[0];
}

/* The Where(IsNaN(s), 0, s) PyTorch 2's SDPA decomposition puts after its softmax (_safe_softmax):
 * the Where, or -1. */
static int32_t safe_softmax_where(matcher *m, int32_t softmax) {
  int32_t s = m->g->nodes[softmax].outputs[0];
  if (n_consumers(m, s) != 2 || m->g->values[s].num_uses != 2) return -1;
  int32_t nan = -1, where = -1;
  for (int32_t u = m->first_use[s]; u < m->first_use[s + 1]; u++) {
    const mb_node *x = &m->g->nodes[m->uses[u]];
    if (is(x, "IsNaN")) nan = m->uses[u];
    else if (is(x, "Where") && x->n_inputs == 3 && x->inputs[2] == s) where = m->uses[u];
  }
  if (nan < 0 || where < 0 || m->g->nodes[where].inputs[0] != m->g->nodes[nan].outputs[0]) return -1;
  if (sole_consumer(m, m->g->nodes[nan].outputs[0]) != where) return -1;
  return where;
}

static void match_attention(matcher *m, int32_t k) {
  const mb_graph *g = m->g;
  const mb_node *mm1 = &g->nodes[k];
  if (!is(mm1, "MatMul") || mm1->n_inputs != 2 || is_weight(m, mm1->inputs[1])) return;
  if (m->t[mm1->outputs[0]].rank < 3) return;
  /* at most 9 nodes before the last step, which adds up to 3 (softmax, IsNaN, Where), then
   * the two scaling Muls */
  int32_t members[16] = {k}, n = 1, extra[4], n_extra = 0;
  int32_t cur = mm1->outputs[0], c = sole_consumer(m, cur);
  enum { SCALE, MASK, SOFTMAX, DROPOUT, DONE } stage = SCALE;
  int32_t mm2 = -1;
  double dropout = 0;
  while (c >= 0 && n < 10 && mm2 < 0) {
    const mb_node *x = &g->nodes[c];
    int32_t other = -1;
    if (stage <= SCALE && (is(x, "Div") || is(x, "Mul")) && x->n_inputs == 2) {
      other = x->inputs[0] == cur ? x->inputs[1] : x->inputs[0];
      if (!is_scalar(m, other)) return;
      stage = MASK;
    } else if (stage <= MASK && (is(x, "Add") || is(x, "Where"))) {
      for (int32_t i = 0; i < x->n_inputs; i++)
        if (x->inputs[i] != cur && n_extra < 4) extra[n_extra++] = x->inputs[i];
      stage = SOFTMAX;
    } else if (is(x, "Cast")) {
      /* an upcast around the softmax (softmax(dtype=float32)) */
    } else if (stage <= SOFTMAX && is(x, "Softmax")) {
      stage = DROPOUT;
      int32_t where = safe_softmax_where(m, c);
      if (where >= 0) { /* the safe softmax's IsNaN and Where belong to it */
        members[n++] = c;
        members[n++] = g->values[g->nodes[where].inputs[0]].producer;
        c = where;
        x = &g->nodes[c];
      } else if (n_consumers(m, x->outputs[0]) != 1) {
        return;
      }
    } else if (stage == DROPOUT && is(x, "Dropout")) {
      if (x->n_outputs > 1 && x->outputs[1] >= 0 && n_consumers(m, x->outputs[1]) > 0) return;
      for (int32_t i = 1; i < x->n_inputs; i++)
        if (x->inputs[i] >= 0 && n_extra < 4) extra[n_extra++] = x->inputs[i];
      const mb_tinfo *r = x->n_inputs > 1 && x->inputs[1] >= 0 ? &m->t[x->inputs[1]] : NULL;
      dropout = r && r->val && r->val->count == 1 ? (r->val->is_float ? r->val->f[0] : (double)r->val->i[0]) : 0.5;
      stage = DONE;
    } else if (stage >= DROPOUT && is(x, "MatMul") && x->inputs[0] == cur) {
      mm2 = c;
    } else {
      return;
    }
    if (other >= 0 && n_extra < 4) extra[n_extra++] = other;
    members[n++] = c;
    if (mm2 >= 0) break;
    cur = x->outputs[0];
    c = sole_consumer(m, cur);
  }
  if (mm2 < 0) return;
  /* the CPU kernels do not fuse attention with dropout: it runs as the math path */
  if (m->opt->cpu && dropout > 0) return;
  int32_t mul_q, mul_k;
  int32_t q = unscaled(m, mm1->inputs[0], k, &mul_q), kt = unscaled(m, mm1->inputs[1], k, &mul_k);
  /* torch.onnx writes F.scaled_dot_product_attention with q and k^T each scaled by sqrt(scale);
   * attention written in Python (scores / sqrt(d), or q * scale alone) is eager PyTorch */
  if (m->opt->sdpa_signature_only && (mul_q < 0 || mul_k < 0)) return;
  if (mul_q >= 0) members[n++] = mul_q;
  if (mul_k >= 0) members[n++] = mul_k;
  mb_fused f = {.kind = MB_G_FUSED_ATTENTION, .last = mm2, .out = g->nodes[mm2].outputs[0],
                .stats_ref = -1};
  add_input(&f, q);
  add_input(&f, kt);
  add_input(&f, g->nodes[mm2].inputs[1]);
  if (f.n_in != 3) return; /* q, k and v must be distinct tensors */
  int32_t scale_q = mul_q >= 0 ? g->nodes[mul_q].inputs[1] : -2;
  int32_t scale_k = mul_k >= 0 ? g->nodes[mul_k].inputs[1] : -2;
  for (int32_t i = 0; i < n_extra; i++) /* the scales are folded into the kernel */
    if (extra[i] != scale_q && extra[i] != scale_k) add_input(&f, extra[i]);
  commit(m, &f, members, n);
}

/* ---- linear: MatMul(x, W or W^T) + Add(bias), as nn.Linear on a 3-D input exports ---- */
static void match_linear(matcher *m, int32_t k) {
  const mb_graph *g = m->g;
  const mb_node *mm = &g->nodes[k];
  if (!is(mm, "MatMul") || mm->n_inputs != 2) return;
  int32_t w = mm->inputs[1];
  if (!is_weight(m, w) || m->t[w].rank != 2) return;
  int32_t a = sole_consumer(m, mm->outputs[0]);
  if (a < 0 || !is(&g->nodes[a], "Add") || g->nodes[a].n_inputs != 2) return;
  const mb_node *add = &g->nodes[a];
  int32_t b = add->inputs[0] == mm->outputs[0] ? add->inputs[1] : add->inputs[0];
  if (!is_weight(m, b) || m->t[b].rank != 1) return;
  mb_fused f = {.kind = MB_G_FUSED_LINEAR, .last = a, .out = add->outputs[0], .stats_ref = -1};
  add_input(&f, mm->inputs[0]);
  add_input(&f, w);
  add_input(&f, b);
  int32_t members[2] = {k, a};
  commit(m, &f, members, 2);
}

/* ---- group norm as torch.onnx writes it: Reshape InstanceNorm Reshape Mul Add ---- */
static void match_group_norm(matcher *m, int32_t k) {
  const mb_graph *g = m->g;
  const mb_node *r1 = &g->nodes[k];
  if (!is(r1, "Reshape")) return;
  int32_t in = sole_consumer(m, r1->outputs[0]);
  if (in < 0 || !is(&g->nodes[in], "InstanceNormalization")) return;
  int32_t r2 = sole_consumer(m, g->nodes[in].outputs[0]);
  if (r2 < 0 || !is(&g->nodes[r2], "Reshape")) return;
  int32_t mul = sole_consumer(m, g->nodes[r2].outputs[0]);
  if (mul < 0 || !is(&g->nodes[mul], "Mul")) return;
  int32_t add = sole_consumer(m, g->nodes[mul].outputs[0]);
  if (add < 0 || !is(&g->nodes[add], "Add")) return;
  mb_fused f = {.kind = MB_G_FUSED_GROUPNORM, .last = add, .out = g->nodes[add].outputs[0],
                .stats_ref = r1->outputs[0]};
  int32_t members[5] = {k, in, r2, mul, add};
  add_input(&f, r1->inputs[0]);
  for (int32_t i = 0; i < 5; i++) {
    const mb_node *x = &g->nodes[members[i]];
    for (int32_t j = 0; j < x->n_inputs; j++) {
      int32_t v = x->inputs[j];
      bool internal = false;
      for (int32_t q = 0; q < i; q++) internal |= g->nodes[members[q]].outputs[0] == v;
      if (!internal) add_input(&f, v);
    }
  }
  commit(m, &f, members, 5);
}

/* ---- elementwise islands: GELU, SiLU, LayerNorm, RMSNorm ---- */
static const char *const island_ops[] = {"Mul", "Add", "Sub", "Div", "Pow", "Erf", "Tanh", "Sqrt",
                                         "Reciprocal", "ReduceMean", "Sigmoid", "Cast"};
enum { I_MUL, I_ADD, I_SUB, I_DIV, I_POW, I_ERF, I_TANH, I_SQRT, I_RECIP, I_MEAN, I_SIGMOID,
       I_CAST, I_N };
#define ISLAND_MAX 14
#define ISLAND_WINDOW 48

static int island_op(const mb_node *n) {
  if (n->domain[0] || n->n_outputs != 1) return -1;
  for (int i = 0; i < I_N; i++)
    if (!strcmp(n->op_type, island_ops[i])) return i;
  return -1;
}

static bool in_list(const int32_t *v, int32_t n, int32_t x) {
  for (int32_t i = 0; i < n; i++)
    if (v[i] == x) return true;
  return false;
}

static void match_island(matcher *m, int32_t x, int32_t start) {
  const mb_graph *g = m->g;
  if (!mb_dtype_is_float(m->t[x].dtype) || is_weight(m, x)) return;
  int32_t members[ISLAND_MAX], n = 0, internal[ISLAND_MAX], count[I_N] = {0};
  int32_t since = 0;
  for (int32_t k = start; k < g->n_nodes && n < ISLAND_MAX && since < ISLAND_WINDOW; k++, since++) {
    const mb_node *node = &g->nodes[k];
    if (m->group_of[k] >= 0) continue;
    int op = island_op(node);
    bool touches = false, ok = op >= 0;
    for (int32_t i = 0; i < node->n_inputs; i++) {
      int32_t v = node->inputs[i];
      bool inside = v == x || in_list(internal, n, v);
      touches |= inside;
      if (!inside && v >= 0 && !is_scalar(m, v) && !is_weight(m, v)) ok = false;
    }
    if (!touches) continue;
    if (!ok) continue; /* another reader of x or of an internal value: checked below */
    members[n] = k;
    internal[n] = node->outputs[0];
    count[op]++;
    n++;
    since = 0;
  }
  /* Shrink from the end until exactly the last member's output leaves the island. */
  while (n >= 2) {
    bool closed = true;
    for (int32_t i = 0; i < n - 1 && closed; i++) {
      int32_t v = internal[i];
      int32_t inside = 0;
      for (int32_t u = m->first_use[v]; u < m->first_use[v + 1]; u++)
        inside += in_list(members, n, m->uses[u]);
      closed = inside == n_consumers(m, v) && g->values[v].num_uses == inside && inside > 0;
      for (int32_t o = 0; o < g->n_outputs && closed; o++) closed = g->outputs[o] != v;
    }
    if (closed) break;
    count[island_op(&g->nodes[members[n - 1]])]--;
    n--;
  }
  int32_t kind = -1;
  if (n == 2 && count[I_SIGMOID] == 1 && count[I_MUL] == 1)
    kind = MB_G_FUSED_SILU;
  else if (n >= 4 && count[I_ERF] + count[I_TANH] == 1 && !count[I_MEAN] && !count[I_SIGMOID])
    kind = MB_G_FUSED_GELU;
  else if (count[I_MEAN] == 2 && count[I_SUB] == 1 && count[I_SQRT] + count[I_RECIP] >= 1 &&
           g->nodes[members[0]].opset < 17)
    kind = MB_G_FUSED_LAYERNORM;
  /* Only the exporter's own decompositions are one op in PyTorch: torch.onnx writes nn.LayerNorm
   * decomposed before opset 17 (LayerNormalization after), so a LayerNorm island in a newer graph
   * is Python code. No exporter decomposes an RMSNorm: its island is Python code (Hugging Face's
   * LlamaRMSNorm, T5LayerNorm: pow, mean, rsqrt, mul), run op by op, keeping x and x * rstd. */
  if (kind < 0) return;
  /* GELU: torch.onnx writes F.gelu as x * (1 + erf(x / sqrt 2)) * 0.5, or for the tanh form
   * 0.5 * (x * (1 + tanh(...))): the last Mul scales by 0.5. The same formula written in Python
   * (Hugging Face's NewGELUActivation: 0.5 * x * (1 + tanh(... pow(x, 3) ...))) multiplies
   * 0.5 * x first and runs as separate ops, each keeping its own tensors: not fused. */
  if (kind == MB_G_FUSED_GELU) {
    const mb_node *last = &g->nodes[members[n - 1]];
    if (!is(last, "Mul") || last->n_inputs != 2 || (!is_scalar(m, last->inputs[0]) && !is_scalar(m, last->inputs[1])))
      return;
  }
  /* SiLU: the Mul must read x and the sigmoid of x. */
  if (kind == MB_G_FUSED_SILU) {
    const mb_node *mul = &g->nodes[members[1]];
    if (!is(mul, "Mul") || !is(&g->nodes[members[0]], "Sigmoid")) return;
    if (!in_list(mul->inputs, mul->n_inputs, x)) return;
  }
  mb_fused f = {.kind = kind, .last = members[n - 1], .out = internal[n - 1], .stats_ref = -1};
  add_input(&f, x);
  for (int32_t i = 0; i < n; i++) {
    const mb_node *node = &g->nodes[members[i]];
    for (int32_t j = 0; j < node->n_inputs; j++)
      if (!in_list(internal, n, node->inputs[j])) add_input(&f, node->inputs[j]);
  }
  commit(m, &f, members, n);
}

/* ---- TorchScript: If outputs that pass an outer tensor on, and detached shifts ---- */

static const mb_graph *branch(const mb_node *n, const char *name) {
  const mb_attr *a = mb_node_attr(n, name, MB_ATTR_GRAPH);
  return a ? a->g : NULL;
}

static int32_t branch_source(const mb_graph *bg, int32_t j) {
  if (!bg || j >= bg->n_outputs) return -1;
  int32_t v = bg->outputs[j];
  for (int depth = 0; v >= 0 && depth < 8; depth++) {
    const mb_value *val = &bg->values[v];
    if (val->kind == MB_VALUE_OUTER) return val->outer_levels == 1 ? val->outer_index : -1;
    if (val->kind != MB_VALUE_NODE_OUTPUT) return -1;
    const mb_node *x = &bg->nodes[val->producer];
    if (!is(x, "Identity") && !is(x, "Reshape") && !is(x, "Squeeze") && !is(x, "Unsqueeze") && !is(x, "Flatten"))
      return -1;
    v = x->inputs[0];
  }
  return -1;
}

int32_t mb_if_alias(const mb_graph *g, const mb_node *n, int32_t j) {
  if (!is(n, "If") || j < 0 || j >= n->n_outputs) return -1;
  int32_t a = branch_source(branch(n, "then_branch"), j), b = branch_source(branch(n, "else_branch"), j);
  return a >= 0 && a == b && a < g->n_values ? a : -1;
}

/* PyG's softmax over edges subtracts each group's maximum, taken on src.detach(); the
 * TorchScript exporter drops the detach and writes the maximum as ScatterElements(max) (a
 * ReduceMin fill first, Ifs around), gathered back and subtracted: Sub(x, Gather(max(x))). Walk
 * up from the subtrahend through the ops such a chain is made of: when it reaches x and holds a
 * max or min scatter, every float op on it ran detached. */
static void mark_detached_shifts(matcher *m, mb_fusion *out, mb_arena *a) {
  const mb_graph *g = m->g;
  static const char *const chain_ops[] = {"ScatterElements", "If", "Gather", "Squeeze", "Unsqueeze", "Reshape",
                                          "Identity", "Expand", "ReduceMin", "ReduceMax", "Add", "ConstantOfShape",
                                          "Cast", "Shape", "Concat", "Constant", "Size", "Equal", "Slice"};
  enum { MAX_CHAIN = 64 };
  for (int32_t k = 0; k < g->n_nodes; k++) {
    const mb_node *s = &g->nodes[k];
    if (!is(s, "Sub") || s->n_inputs != 2 || !mb_dtype_is_float(m->t[s->outputs[0]].dtype)) continue;
    int32_t x = s->inputs[0], queue[MAX_CHAIN], visited[MAX_CHAIN], nq = 0, nv = 0;
    bool ok = true, touches = false, max = false;
    queue[nq++] = s->inputs[1];
    for (int32_t qi = 0; qi < nq && ok; qi++) {
      int32_t v = queue[qi];
      if (v < 0) continue;
      if (v == x) {
        touches = true;
        continue;
      }
      if (!mb_dtype_is_float(m->t[v].dtype)) continue; /* indices and shapes carry no gradient */
      if (g->values[v].kind != MB_VALUE_NODE_OUTPUT) continue; /* inputs, initializers: indices, constants */
      int32_t p = g->values[v].producer;
      bool seen = false;
      for (int32_t i = 0; i < nv; i++) seen |= visited[i] == p;
      if (seen) continue;
      const mb_node *pn = &g->nodes[p];
      bool allowed = false;
      for (size_t i = 0; i < sizeof chain_ops / sizeof chain_ops[0]; i++) allowed |= is(pn, chain_ops[i]);
      if (!allowed || nv == MAX_CHAIN) {
        ok = false;
        break;
      }
      visited[nv++] = p;
      if (is(pn, "ScatterElements")) {
        const mb_attr *red = mb_node_attr(pn, "reduction", MB_ATTR_STRING);
        if (red && red->s && (!strcmp(red->s, "max") || !strcmp(red->s, "min"))) max = true;
      }
      if (is(pn, "If")) { /* what the output read passes on */
        int32_t src = -1;
        for (int32_t j = 0; j < pn->n_outputs; j++)
          if (pn->outputs[j] == v) src = mb_if_alias(g, pn, j);
        if (src < 0 || nq == MAX_CHAIN) ok = false;
        else queue[nq++] = src;
        nv--; /* an If is visited once per output */
        continue;
      }
      for (int32_t i = 0; i < pn->n_inputs && ok; i++) {
        if (nq == MAX_CHAIN) ok = false;
        else queue[nq++] = pn->inputs[i];
      }
    }
    if (!ok || !touches || !max) continue;
    if (!out->detached) {
      out->detached = mb_arena_array(a, (size_t)g->n_nodes + 1, sizeof(bool));
      if (!out->detached) return;
    }
    for (int32_t i = 0; i < nv; i++) {
      const mb_node *pn = &g->nodes[visited[i]];
      if (pn->n_outputs >= 1 && pn->outputs[0] >= 0 && mb_dtype_is_float(m->t[pn->outputs[0]].dtype))
        out->detached[visited[i]] = true;
    }
  }
}

/* ---- torch 2.x: the ONNX nodes of one FX node run as that aten op ---- */

static bool is_constant_node(const mb_graph *g, int32_t v) {
  if (v < 0 || g->values[v].kind != MB_VALUE_NODE_OUTPUT) return false;
  return is(&g->nodes[g->values[v].producer], "Constant");
}

/* Order f->in by the FX call's arguments (the autograd rule's input positions are the aten
 * op's); inputs the arguments do not name keep their order after those that are. */
static void order_by_args(const mb_graph *g, const char *args, mb_fused *f) {
  int32_t ordered[MB_FUSED_MAX_IN], n = 0;
  bool used[MB_FUSED_MAX_IN] = {false};
  const char *p = args, *tok;
  size_t len;
  while (mb_fx_next_arg(&p, &tok, &len))
    for (int32_t i = 0; i < f->n_in; i++)
      if (!used[i] && mb_fx_names(tok, len, g->values[f->in[i]].name)) {
        used[i] = true;
        ordered[n++] = f->in[i];
        break;
      }
  for (int32_t i = 0; i < f->n_in; i++)
    if (!used[i]) ordered[n++] = f->in[i];
  memcpy(f->in, ordered, (size_t)n * sizeof *ordered);
}

/* SDPA's math path, as the exporter writes it (softmax, then IsNaN and Where: _safe_softmax),
 * runs node by node; the safe softmax is one op that keeps its result. */
static void fuse_safe_softmax(matcher *m, int32_t first, int32_t end) {
  const mb_graph *g = m->g;
  for (int32_t k = first; k < end; k++) {
    if (!is(&g->nodes[k], "Softmax")) continue;
    int32_t y = g->nodes[k].outputs[0], nan = -1, where = -1;
    for (int32_t j = k + 1; j < end; j++) {
      const mb_node *x = &g->nodes[j];
      if (is(x, "IsNaN") && x->inputs[0] == y) nan = j;
      if (is(x, "Where") && nan >= 0 && x->inputs[0] == g->nodes[nan].outputs[0] && x->inputs[2] == y) where = j;
    }
    if (where < 0) continue;
    mb_fused f = {.kind = MB_G_SOFTMAX, .last = where, .out = g->nodes[where].outputs[0], .stats_ref = -1};
    add_input(&f, g->nodes[k].inputs[0]);
    int32_t members[3] = {k, nan, where};
    commit(m, &f, members, 3);
  }
}

/* ... and transposes k as Reshape([-1, L, D]) Transpose([0, 2, 1]) Reshape([.., D, L]): one
 * transpose(-2, -1), a view. */
static void fuse_key_transpose(matcher *m, int32_t first, int32_t end) {
  const mb_graph *g = m->g;
  for (int32_t k = first; k + 2 < end; k++) {
    const mb_node *r1 = &g->nodes[k];
    if (!is(r1, "Reshape") || m->group_of[k] >= 0) continue;
    int32_t t = sole_consumer(m, r1->outputs[0]);
    if (t < 0 || !is(&g->nodes[t], "Transpose")) continue;
    int32_t r2 = sole_consumer(m, g->nodes[t].outputs[0]);
    if (r2 < 0 || !is(&g->nodes[r2], "Reshape")) continue;
    const mb_tinfo *x = &m->t[r1->inputs[0]], *y = &m->t[g->nodes[r2].outputs[0]];
    if (x->rank < 2 || y->rank != x->rank) continue;
    bool swapped = x->dims[x->rank - 1] == y->dims[y->rank - 2] && x->dims[x->rank - 2] == y->dims[y->rank - 1];
    for (int32_t i = 0; i + 2 < x->rank; i++) swapped &= x->dims[i] == y->dims[i];
    if (!swapped) continue;
    mb_fused f = {.kind = MB_G_TRANSPOSE_LAST2, .last = r2, .out = g->nodes[r2].outputs[0], .stats_ref = -1};
    add_input(&f, r1->inputs[0]);
    int32_t members[3] = {k, t, r2};
    commit(m, &f, members, 3);
  }
}

/* Nodes [first, end) came from one FX node. */
static void fuse_fx_run(matcher *m, int32_t first, int32_t end) {
  const mb_graph *g = m->g;
  const mb_origin *o = &g->nodes[first].origin;
  const mb_aten_rule *rule = mb_aten_rule_of(o->aten);
  if (!rule) return;
  if (rule->grad == MB_G_SDPA) {
    double dropout = 0;
    mb_fx_literal(o, 4, "dropout_p", &dropout);
    if (!m->opt->fuse_attention || (m->opt->cpu && dropout > 0)) { /* the math path */
      fuse_safe_softmax(m, first, end);
      fuse_key_transpose(m, first, end);
      return;
    }
  }
  int32_t members[64], n = 0;
  for (int32_t k = first; k < end; k++) {
    if (is(&g->nodes[k], "Constant")) continue; /* constants are shared with other FX nodes */
    if (n == 64 || m->group_of[k] >= 0) return;
    members[n++] = k;
  }
  if (n == 0 || (n == 1 && !rule->single)) return;
  mb_fused f = {.kind = rule->grad, .last = members[n - 1], .out = -1, .stats_ref = -1};
  if (f.kind == MB_G_COPY && o->kwargs && strstr(o->kwargs, "contiguous_format")) f.kind = MB_G_CONTIGUOUS;
  for (int32_t i = 0; i < n; i++) {
    const mb_node *x = &g->nodes[members[i]];
    for (int32_t j = 0; j < x->n_inputs; j++) {
      int32_t v = x->inputs[j];
      if (v < 0 || is_constant_node(g, v)) continue;
      int32_t pn = g->values[v].kind == MB_VALUE_NODE_OUTPUT ? g->values[v].producer : -1;
      if (pn < first || pn >= end) add_input(&f, v);
    }
    for (int32_t j = 0; j < x->n_outputs; j++) { /* exactly one value may leave the group */
      int32_t v = x->outputs[j];
      if (v < 0) continue;
      int32_t inside = 0;
      for (int32_t u = m->first_use[v]; u < m->first_use[v + 1]; u++)
        inside += m->uses[u] >= first && m->uses[u] < end;
      bool leaves = inside < g->values[v].num_uses;
      for (int32_t q = 0; q < g->n_outputs; q++) leaves |= g->outputs[q] == v;
      if (!leaves) continue;
      if (f.out >= 0) return;
      f.out = v;
    }
  }
  if (f.out < 0) return;
  order_by_args(g, o->args, &f);
  commit(m, &f, members, n);
}

static bool has_fx(const mb_graph *g) {
  for (int32_t k = 0; k < g->n_nodes; k++)
    if (g->nodes[k].origin.fx) return true;
  return false;
}

static void fuse_fx(matcher *m) {
  const mb_graph *g = m->g;
  for (int32_t k = 0; k < g->n_nodes;) {
    const char *fx = g->nodes[k].origin.fx;
    int32_t end = k + 1;
    while (fx && end < g->n_nodes && g->nodes[end].origin.fx == fx) end++;
    if (fx) fuse_fx_run(m, k, end);
    k = end;
  }
}

int mb_fuse(const mb_graph *g, const mb_tinfo *t, const mb_fuse_options *opt, mb_arena *a, mb_fusion *out) {
  bool fuse_attention = opt->fuse_attention;
  memset(out, 0, sizeof *out);
  matcher m = {.g = g, .t = t, .opt = opt};
  m.first_use = mb_arena_array(a, (size_t)g->n_values + 2, sizeof(int32_t));
  m.group_of = mb_arena_array(a, (size_t)g->n_nodes + 1, sizeof(int32_t));
  m.cap = g->n_nodes + 1;
  m.groups = mb_arena_array(a, (size_t)m.cap, sizeof(mb_fused));
  int64_t total = 0;
  for (int32_t k = 0; k < g->n_nodes; k++) total += g->nodes[k].n_inputs;
  m.uses = mb_arena_array(a, (size_t)total + 1, sizeof(int32_t));
  if (!m.first_use || !m.group_of || !m.groups || !m.uses) return MB_E_NOMEM;
  /* CSR of consumers per value */
  for (int32_t k = 0; k < g->n_nodes; k++)
    for (int32_t i = 0; i < g->nodes[k].n_inputs; i++)
      if (g->nodes[k].inputs[i] >= 0) m.first_use[g->nodes[k].inputs[i] + 1]++;
  for (int32_t v = 0; v < g->n_values; v++) m.first_use[v + 1] += m.first_use[v];
  int32_t *fill = mb_arena_array(a, (size_t)g->n_values + 1, sizeof(int32_t));
  if (!fill) return MB_E_NOMEM;
  memcpy(fill, m.first_use, (size_t)g->n_values * sizeof(int32_t));
  for (int32_t k = 0; k < g->n_nodes; k++) {
    m.group_of[k] = -1;
    for (int32_t i = 0; i < g->nodes[k].n_inputs; i++) {
      int32_t v = g->nodes[k].inputs[i];
      if (v >= 0) m.uses[fill[v]++] = k;
    }
  }
  if (has_fx(g)) { /* the recorded aten ops say what PyTorch ran: no pattern guessing */
    fuse_fx(&m);
    out->group_of = m.group_of;
    out->groups = m.groups;
    out->n_groups = m.n_groups;
    mb_uses u = {m.first_use, m.uses};
    return opt->transformers_eager ? mb_eager_transformers(g, t, &u, out, a) : MB_OK;
  }
  if (fuse_attention)
    for (int32_t k = 0; k < g->n_nodes; k++)
      if (m.group_of[k] < 0) match_attention(&m, k);
  for (int32_t k = 0; k < g->n_nodes; k++) /* SDPA's math path: the safe softmax is one op */
    if (m.group_of[k] < 0 && is(&g->nodes[k], "Softmax")) fuse_safe_softmax(&m, k, g->n_nodes < k + 4 ? g->n_nodes : k + 4);
  for (int32_t k = 0; k < g->n_nodes; k++)
    if (m.group_of[k] < 0) match_linear(&m, k);
  for (int32_t k = 0; k < g->n_nodes; k++)
    if (m.group_of[k] < 0) match_group_norm(&m, k);
  /* islands grow from each node's output (and from graph inputs, at node 0) */
  for (int32_t i = 0; i < g->n_inputs; i++) match_island(&m, g->inputs[i], 0);
  for (int32_t k = 0; k < g->n_nodes; k++) /* group outputs too: GELU after a Linear */
    if (g->nodes[k].n_outputs >= 1 && g->nodes[k].outputs[0] >= 0)
      match_island(&m, g->nodes[k].outputs[0], k + 1);
  mark_detached_shifts(&m, out, a);
  out->group_of = m.group_of;
  out->groups = m.groups;
  out->n_groups = m.n_groups;
  return MB_OK;
}
