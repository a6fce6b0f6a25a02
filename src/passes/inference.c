/* Signs that a graph was exported for inference (membudget.h, mb_inference_sign_kind).
 *
 * What each exporter writes (docs/torch2-export.md, and observed with torch 2.15):
 *   dynamo, optimize=True   onnxscript's rewriter folds BatchNorm into Conv even for a train()
 *                           module and records pkg.onnxscript.rewriter.rule_name on the nodes
 *   dynamo, eval()          BatchNormalization from aten._native_batch_norm_legit_no_training
 *                           (train(): ..._legit_functional), no dropout at all
 *   TorchScript, eval()     BatchNormalization with training_mode 0 (opset >= 14) or a single
 *                           output (older opsets); dropout becomes Identity
 *   Dropout, opset >= 12    inference when its training_mode input is false
 * A dynamo export writes every BatchNormalization without training_mode, in training too: the
 * aten op it came from decides. */
#include "passes/inference.h"

#include <stdio.h>
#include <string.h>

#include "graph/dtype.h"
#include "graph/origin.h"

static bool is(const mb_node *n, const char *op) { return !n->domain[0] && !strcmp(n->op_type, op); }

static bool aten_is(const mb_node *n, const char *prefix) {
  return n->origin.aten && !strncmp(n->origin.aten, prefix, strlen(prefix));
}

static int64_t attr_i(const mb_node *n, const char *name, int64_t dflt) {
  const mb_attr *a = mb_node_attr(n, name, MB_ATTR_INT);
  return a ? a->i : dflt;
}

/* The single known value of an input (a Constant's or a small initializer's), or false. */
static bool known_value(const mb_graph *g, int32_t v, double *out) {
  if (v < 0) return false;
  const mb_small_values *sv = NULL;
  const mb_value *val = &g->values[v];
  if (val->kind == MB_VALUE_INITIALIZER) {
    sv = g->inits[val->initializer].values;
  } else if (val->kind == MB_VALUE_NODE_OUTPUT) {
    const mb_node *p = &g->nodes[val->producer];
    if (!is(p, "Constant")) return false;
    const mb_attr *a = mb_node_attr(p, "value", MB_ATTR_TENSOR);
    if (a && a->t) sv = a->t->values;
  }
  if (!sv || sv->count != 1) return false;
  *out = sv->is_float ? sv->f[0] : (double)sv->i[0];
  return true;
}

static bool bn_inference(const mb_node *n) {
  if (n->origin.aten) return aten_is(n, "aten._native_batch_norm_legit_no_training");
  if (n->opset >= 14) return attr_i(n, "training_mode", 0) == 0;
  return n->n_outputs <= 1;
}

static bool dropout_inference(const mb_graph *g, const mb_node *n) {
  /* dynamo: the aten op decides (the exporter's SDPA decomposition writes its dropout without
   * a training_mode input, in training too) */
  if (n->origin.aten) {
    double train = 1;
    return (aten_is(n, "aten.native_dropout.") || aten_is(n, "aten.dropout.")) &&
           mb_fx_literal(&n->origin, 2, "train", &train) && train == 0;
  }
  /* Only an explicit training_mode false says inference: PyTorch's exporters write the dropout
   * inside scaled_dot_product_attention's decomposition as Dropout(x, ratio), without
   * training_mode, in training too (an eval-mode nn.Dropout is not exported at all) */
  if (n->opset < 12 || n->n_inputs < 3 || n->inputs[2] < 0) return false;
  double train;
  return known_value(g, n->inputs[2], &train) && train == 0;
}

/* TorchScript writes an eval-mode nn.Dropout as Identity in the dropout module's scope. The
 * dynamo exporter (whose nodes name their aten op) writes no node at all for one; its Identity
 * in a dropout module is a training Dropout(p=0)'s clone (torch 2.11 exports torchvision's
 * ViT-B/16, whose dropouts are 0.0, so: seen on the GPU machine). */
static bool dropout_removed(const mb_node *n) {
  if (!is(n, "Identity") || !n->origin.scope || n->origin.aten) return false;
  const char *end = strrchr(n->origin.scope, '/'), *start = end;
  while (start > n->origin.scope && start[-1] != '/') start--;
  for (const char *p = start; p + 4 <= end; p++)
    if (!strncmp(p, "drop", 4) || !strncmp(p, "Drop", 4)) return true;
  return false;
}

static const char *const messages[] = {
  [MB_SIGN_OPTIMIZED] = "rewritten by onnxscript's optimizer (torch.onnx.export's optimize=True)",
  [MB_SIGN_BN_FOLDED] = "BatchNorm folded into Conv (no batch statistics, no activations kept for them)",
  [MB_SIGN_BN_INFERENCE] = "BatchNormalization in inference mode (normalising with running statistics)",
  [MB_SIGN_DROPOUT_INFERENCE] = "Dropout in inference mode",
  [MB_SIGN_DROPOUT_REMOVED] = "Dropout removed (an Identity in a dropout module)",
};

static void note(struct mb_model *m, mb_inference_sign *signs, int kind, const mb_node *n, const char *detail) {
  for (int32_t i = 0; i < m->n_inference_signs; i++)
    if (signs[i].kind == kind) {
      signs[i].count++;
      return;
    }
  mb_inference_sign *s = &signs[m->n_inference_signs++];
  s->kind = kind;
  s->node = n->name;
  s->count = 1;
  s->detail = detail;
}

int mb_find_inference_signs(struct mb_model *m, mb_diag *d) {
  const mb_graph *g = m->graph;
  mb_inference_sign *signs = mb_arena_array(&m->arena, 8, sizeof *signs);
  if (!signs) return mb_fail(d, MB_E_NOMEM, "out of memory");
  m->inference_signs = signs;
  for (int32_t k = 0; k < g->n_nodes; k++) {
    const mb_node *n = &g->nodes[k];
    if (n->origin.rewrite) {
      note(m, signs, MB_SIGN_OPTIMIZED, n, n->origin.rewrite);
      if (strstr(n->origin.rewrite, "FuseBatchNorm")) note(m, signs, MB_SIGN_BN_FOLDED, n, n->origin.rewrite);
    }
    if (is(n, "BatchNormalization") && bn_inference(n)) note(m, signs, MB_SIGN_BN_INFERENCE, n, n->origin.aten);
    if (is(n, "Dropout") && dropout_inference(g, n)) note(m, signs, MB_SIGN_DROPOUT_INFERENCE, n, NULL);
    if (dropout_removed(n)) note(m, signs, MB_SIGN_DROPOUT_REMOVED, n, NULL);
  }
  return MB_OK;
}

const char *mb_inference_sign_message(int kind) {
  return kind > 0 && kind < (int)(sizeof messages / sizeof messages[0]) ? messages[kind] : "";
}

size_t mb_inference_signs_describe(const struct mb_model *m, char *buf, size_t size) {
  size_t len = 0;
  for (int32_t i = 0; i < m->n_inference_signs; i++) {
    const mb_inference_sign *s = &m->inference_signs[i];
    char more[32] = "";
    if (s->count > 1) snprintf(more, sizeof more, " and %d more", (int)(s->count - 1));
    int w = snprintf(buf + len, len < size ? size - len : 0, "%s%s (node '%s'%s)", i ? "; " : "",
                     mb_inference_sign_message(s->kind), s->node, more);
    if (w > 0) len += (size_t)w;
  }
  return len;
}
