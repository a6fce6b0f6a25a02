#include "passes/roles.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "graph/dtype.h"
#include "graph/origin.h"
#include "util/strmap.h"

/* What an input position of an op means for a constant tensor that feeds it:
 *   'W' a weight (Conv/Gemm/MatMul operands, normalisation scale and bias)
 *   'R' state that is not trained (BatchNormalization running mean/var, RNN initial state)
 *   'S' a shape-carrying or control input (Reshape shape, Slice bounds, Resize scales, ...)
 *   'G' the table of a Gather (an embedding when the indices depend on a graph input)
 *   'x' an activation: no meaning of its own
 * The last character repeats for variadic inputs. Ops absent from the table are 'x'. */
typedef struct position_rule {
  const char *op_type;
  const char *positions;
} position_rule;

static const position_rule position_rules[] = {
  {"BatchNormalization", "xWWRR"},
  {"Clip", "xSS"},
  {"ConstantOfShape", "S"},
  {"Conv", "xWW"},
  {"ConvTranspose", "xWW"},
  {"CumSum", "xS"},
  {"Dropout", "xSS"},
  {"Einsum", "W"},
  {"Expand", "xS"},
  {"Gather", "GS"},
  {"GatherElements", "xS"},
  {"GatherND", "xS"},
  {"Gemm", "WWW"},
  {"GroupNormalization", "xWW"},
  {"GRU", "xWWWSR"},
  {"InstanceNormalization", "xWW"},
  {"LayerNormalization", "xWW"},
  {"LSTM", "xWWWSRRW"},
  {"MatMul", "WW"},
  {"OneHot", "SSS"},
  {"Pad", "xSSS"},
  {"PRelu", "xW"},
  {"Range", "SSS"},
  {"ReduceL1", "xS"}, {"ReduceL2", "xS"}, {"ReduceLogSum", "xS"}, {"ReduceLogSumExp", "xS"},
  {"ReduceMax", "xS"}, {"ReduceMean", "xS"}, {"ReduceMin", "xS"}, {"ReduceProd", "xS"},
  {"ReduceSum", "xS"}, {"ReduceSumSquare", "xS"},
  {"Reshape", "xS"},
  {"Resize", "xSSS"},
  {"RMSNormalization", "xW"},
  {"RNN", "xWWWSR"},
  {"ScatterElements", "xSx"},
  {"ScatterND", "xSx"},
  {"Slice", "xSSSS"},
  {"Split", "xS"},
  {"Squeeze", "xS"},
  {"Tile", "xS"},
  {"TopK", "xS"},
  {"Trilu", "xS"},
  {"Unsqueeze", "xS"},
  {"Upsample", "xS"},
};

/* Ops that pass a constant through unchanged in meaning (a transposed or reshaped weight is
 * still that weight): follow them from input 0 to their consumers. */
static const char *const transparent_ops[] = {
  "Cast", "CastLike", "Expand", "Flatten", "Identity", "Reshape", "Squeeze", "Transpose",
  "Unsqueeze",
};

static char position_kind(const mb_node *n, int32_t input) {
  if (n->domain[0]) return 'x';
  for (size_t i = 0; i < sizeof position_rules / sizeof position_rules[0]; i++) {
    if (strcmp(position_rules[i].op_type, n->op_type)) continue;
    const char *p = position_rules[i].positions;
    size_t len = strlen(p);
    return p[(size_t)input < len ? (size_t)input : len - 1];
  }
  return 'x';
}

static bool is_transparent(const mb_node *n) {
  if (n->domain[0]) return false;
  for (size_t i = 0; i < sizeof transparent_ops / sizeof transparent_ops[0]; i++)
    if (!strcmp(transparent_ops[i], n->op_type)) return true;
  return false;
}

enum { USE_W = 1, USE_R = 2, USE_S = 4, USE_EMBED = 8, USE_OTHER = 16 };

typedef struct role_ctx {
  mb_graph *g;
  bool *dynamic;      /* per value: depends on a graph input */
  int32_t *stack;     /* values to visit */
  uint32_t *seen;     /* visit stamp per value, so no clearing between initializers */
  uint32_t stamp;
  int32_t *first;     /* consumers of value v: use[first[v] .. first[v+1]) */
  int32_t *use_node, *use_input;
} role_ctx;

static void free_ctx(role_ctx *c) {
  free(c->dynamic); free(c->stack); free(c->seen);
  free(c->first); free(c->use_node); free(c->use_input);
  memset(c, 0, sizeof *c);
}

/* Allocate the per-graph arrays and index the consumers of every value. */
static bool init_ctx(role_ctx *c, mb_graph *g) {
  size_t nv = (size_t)g->n_values + 1, nu = 1;
  for (int32_t k = 0; k < g->n_nodes; k++) nu += (size_t)g->nodes[k].n_inputs;
  c->g = g;
  c->dynamic = malloc(nv * sizeof *c->dynamic);
  c->stack = malloc(nv * sizeof *c->stack);
  c->seen = calloc(nv, sizeof *c->seen);
  c->first = calloc(nv + 1, sizeof *c->first);
  c->use_node = malloc(nu * sizeof *c->use_node);
  c->use_input = malloc(nu * sizeof *c->use_input);
  if (!c->dynamic || !c->stack || !c->seen || !c->first || !c->use_node || !c->use_input)
    return false;
  for (int32_t k = 0; k < g->n_nodes; k++)
    for (int32_t i = 0; i < g->nodes[k].n_inputs; i++)
      if (g->nodes[k].inputs[i] >= 0) c->first[g->nodes[k].inputs[i] + 1]++;
  for (size_t v = 0; v < nv; v++) c->first[v + 1] += c->first[v];
  int32_t *fill = c->stack; /* scratch cursor */
  for (size_t v = 0; v + 1 < nv; v++) fill[v] = c->first[v];
  for (int32_t k = 0; k < g->n_nodes; k++)
    for (int32_t i = 0; i < g->nodes[k].n_inputs; i++) {
      int32_t v = g->nodes[k].inputs[i];
      if (v < 0) continue;
      c->use_node[fill[v]] = k;
      c->use_input[fill[v]++] = i;
    }
  return true;
}

/* Gather's indices are shape arithmetic (Gather(Shape(x), 0)) unless they pick rows of a
 * floating weight: then they are an index tensor on the device, a buffer of the module
 * (torchvision Swin's relative_position_index into its bias table). */
static bool indexes_a_weight(const mb_graph *g, const mb_node *n, int32_t input) {
  if (strcmp(n->op_type, "Gather") || input != 1 || n->n_inputs < 2 || n->inputs[0] < 0) return false;
  const mb_value *data = &g->values[n->inputs[0]];
  return data->kind == MB_VALUE_INITIALIZER && mb_dtype_is_float(g->inits[data->initializer].dtype);
}

/* Which uses a constant value reaches, following transparent ops. */
static unsigned collect_uses(role_ctx *c, int32_t start) {
  mb_graph *g = c->g;
  unsigned uses = 0;
  int32_t top = 0;
  uint32_t stamp = ++c->stamp;
  c->stack[top++] = start;
  c->seen[start] = stamp;
  while (top > 0) {
    int32_t v = c->stack[--top];
    for (int32_t u = c->first[v]; u < c->first[v + 1]; u++) {
      const mb_node *n = &g->nodes[c->use_node[u]];
      int32_t i = c->use_input[u];
      {
        if (i == 0 && is_transparent(n)) {
          for (int32_t o = 0; o < n->n_outputs; o++) {
            int32_t ov = n->outputs[o];
            if (ov >= 0 && c->seen[ov] != stamp) {
              c->seen[ov] = stamp;
              c->stack[top++] = ov;
            }
          }
          continue;
        }
        switch (position_kind(n, i)) {
          case 'W': uses |= USE_W; break;
          case 'R': uses |= USE_R; break;
          case 'S': uses |= indexes_a_weight(g, n, i) ? USE_OTHER : USE_S; break;
          case 'G': {
            int32_t idx = n->n_inputs > 1 ? n->inputs[1] : -1;
            uses |= (idx >= 0 && c->dynamic[idx]) ? USE_EMBED : USE_W;
            break;
          }
          default: uses |= USE_OTHER;
        }
      }
    }
  }
  return uses;
}

static int32_t decide(const mb_const_tensor *t, unsigned uses) {
  mb_dtype_class cls = mb_dtype_class_of(t->dtype);
  if (cls == MB_DCLASS_STRING || cls == MB_DCLASS_UNKNOWN) return MB_ROLE_CONSTANT;
  if (uses & USE_R) return MB_ROLE_BUFFER;
  if (cls == MB_DCLASS_FLOAT || cls == MB_DCLASS_COMPLEX) {
    if (uses & USE_EMBED) return MB_ROLE_EMBEDDING;
    if (uses & USE_W) return MB_ROLE_PARAMETER;
    if (uses == USE_S) return MB_ROLE_CONSTANT;
    return t->numel > 1 ? MB_ROLE_PARAMETER : MB_ROLE_CONSTANT;
  }
  /* integers and bools */
  if (uses == USE_S || t->numel <= 1) return MB_ROLE_CONSTANT;
  return MB_ROLE_BUFFER;
}

/* Values that depend on a graph input, in topological order. */
static void mark_dynamic(mb_graph *g, bool *dynamic) {
  for (int32_t v = 0; v < g->n_values; v++)
    dynamic[v] = g->values[v].kind == MB_VALUE_INPUT || g->values[v].kind == MB_VALUE_OUTER;
  for (int32_t k = 0; k < g->n_nodes; k++) {
    const mb_node *n = &g->nodes[k];
    bool dyn = false;
    for (int32_t i = 0; i < n->n_inputs; i++) if (n->inputs[i] >= 0 && dynamic[n->inputs[i]]) dyn = true;
    for (int32_t o = 0; o < n->n_outputs; o++) if (n->outputs[o] >= 0) dynamic[n->outputs[o]] = dyn;
  }
}

/* torch 2.x exports say what each initializer is: FX arguments name a parameter p_<name>, a
 * buffer b_<name>, a lifted tensor constant c_<name> (onnx/origin.h). kind[i] gets 'p', 'b' or
 * 'c' for initializer i of g, 0 where no FX argument names it. */
static bool placeholder_kinds(const mb_graph *g, char *kind) {
  memset(kind, 0, (size_t)g->n_inits + 1);
  bool any = false;
  for (int32_t k = 0; k < g->n_nodes && !any; k++) any = g->nodes[k].origin.args != NULL;
  if (!any) return true;
  /* mangled initializer name -> index */
  mb_strmap map;
  char *names = NULL;
  size_t total = 1;
  for (int32_t i = 0; i < g->n_inits; i++) total += strlen(g->inits[i].name) + 1;
  if (mb_strmap_init(&map, (size_t)g->n_inits) != 0 || !(names = malloc(total))) {
    mb_strmap_free(&map);
    return false;
  }
  char *w = names;
  for (int32_t i = 0; i < g->n_inits; i++) {
    const char *src = g->inits[i].name;
    char *dst = w;
    for (; *src; src++) *w++ = isalnum((unsigned char)*src) ? *src : '_';
    *w++ = '\0';
    if (mb_strmap_put(&map, dst, i, NULL) < 0) {
      mb_strmap_free(&map);
      free(names);
      return false;
    }
  }
  const char *last = NULL;
  char tok[512];
  for (int32_t k = 0; k < g->n_nodes; k++) {
    const char *p = g->nodes[k].origin.args, *t;
    size_t len;
    if (!p || p == last) continue; /* nodes of one FX node share the string */
    last = p;
    while (mb_fx_next_arg(&p, &t, &len)) {
      if (len < 3 || len >= sizeof tok || t[1] != '_' || !strchr("pbc", t[0])) continue;
      memcpy(tok, t + 2, len - 2);
      tok[len - 2] = '\0';
      int32_t i = mb_strmap_get(&map, tok);
      if (i >= 0 && mb_fx_names(t, len, g->inits[i].name)) kind[i] = t[0];
    }
  }
  mb_strmap_free(&map);
  free(names);
  return true;
}

/* What the export says wins over what the graph's shape suggests: a buffer that feeds a
 * weight position (a rotary embedding's inv_freq) does not train. */
static int32_t apply_placeholder(int32_t role, char kind, const mb_const_tensor *t) {
  switch (kind) {
    case 'b': case 'c': return role == MB_ROLE_CONSTANT ? role : MB_ROLE_BUFFER;
    case 'p': return role == MB_ROLE_EMBEDDING || !mb_dtype_is_float(t->dtype) ? role : MB_ROLE_PARAMETER;
    default: return role;
  }
}

int mb_roles_derive(struct mb_model *m, mb_diag *d) {
  mb_graph *current = NULL;
  role_ctx c = {0};
  char *kind = NULL;
  int rc = MB_OK;
  for (int32_t i = 0; i < m->n_all_inits; i++) {
    mb_init_ref *r = &m->all_inits[i];
    if (r->graph != current) {
      free_ctx(&c);
      free(kind);
      current = r->graph;
      kind = malloc((size_t)current->n_inits + 1);
      if (!kind || !init_ctx(&c, current) || !placeholder_kinds(current, kind)) {
        rc = mb_fail(d, MB_E_NOMEM, "out of memory");
        break;
      }
      mark_dynamic(current, c.dynamic);
    }
    unsigned uses = r->value >= 0 ? collect_uses(&c, r->value) : 0;
    const mb_const_tensor *t = &r->graph->inits[r->index];
    r->role = apply_placeholder(decide(t, uses), kind[r->index], t);
  }
  free_ctx(&c);
  free(kind);
  return rc;
}
