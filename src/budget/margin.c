/* The safety margins, one row per family and precision whose solved batch the GPU truth found
 * above the largest batch that trains. Each margin is the least share of the usable memory
 * that brings every measured solve of the family at or below the largest batch that may train
 * (bench/truth/margins.py derives them from bench/truth/results/gpu-*.json's max_batch
 * searches, taking a failure in the search's own process as the bound where no fresh process
 * tried the batches above; tests/python/test_margins.py holds the table to what it derives).
 * A family without such a measurement keeps no margin, and says so.
 *
 * A family is recognised by the ops its graph holds: scatters (a graph network), convolutions
 * with or without attention (a vision transformer, a convolutional network), attention without
 * convolutions (a transformer); attention is its softmax or a fused Attention node. */
#include "budget/margin.h"

#include <stdbool.h>
#include <string.h>

enum family { F_NONE, F_GRAPH, F_VIT, F_CNN, F_TRANSFORMER, F_COUNT };
enum prec_class { P_FP32, P_MIXED, P_HALF, P_COUNT };

static const char *const family_names[F_COUNT] = {"", "graph network", "vision transformer",
                                                  "convolutional network", "transformer"};

typedef struct margin_row {
  int family, prec;
  double fraction;
  /* sized as mb_budget's copy of it, so a longer text is a compile error, not cut short */
  char basis[sizeof ((mb_budget *)0)->margin_basis];
} margin_row;

static const margin_row rows[] = {
  {F_CNN, P_FP32, 0.0, "none needed: ResNet-50 solved 959 on the H100 where 961 trained, 1701 on the H200 where "
                       "1711 did (gpu-h100.json, gpu-h200.json)"},
  {F_VIT, P_FP32, 0.014, "ViT-B/16 solved 648 on the H100 where 636 trained, 1159 on the H200 where 1140 failed "
                         "(gpu-h100.json, gpu-h200.json)"},
  {F_TRANSFORMER, P_FP32, 0.0, "none needed: the GPT-2-like decoder solved 364 on the H100 where 364 trained, 648 "
                               "on the H200 where 649 failed (gpu-h100.json, gpu-h200.json)"},
  {F_TRANSFORMER, P_MIXED, 0.167, "the Llama in AMP bf16 solved 1162 on the H200, where 966 failed: an extra "
                                  "logits-sized segment comes and goes with the batch (gpu-h200.json)"},
};

static bool has_op(const mb_graph *g, const char *const *ops) {
  for (int32_t i = 0; i < g->n_nodes; i++)
    for (const char *const *o = ops; *o; o++)
      if (g->nodes[i].op_type && !strcmp(g->nodes[i].op_type, *o)) return true;
  return false;
}

static int family_of(const mb_graph *g) {
  static const char *const scatters[] = {"ScatterElements", "ScatterND", "ScatterReduce", NULL};
  static const char *const convs[] = {"Conv", "ConvTranspose", NULL};
  static const char *const softmax[] = {"Softmax", "Attention", NULL};
  if (has_op(g, scatters)) return F_GRAPH;
  bool conv = has_op(g, convs), attn = has_op(g, softmax);
  return conv && attn ? F_VIT : conv ? F_CNN : attn ? F_TRANSFORMER : F_NONE;
}

static int prec_of(const mb_train *tr) {
  switch (tr->precision) {
  case MB_PREC_FP32: return P_FP32;
  case MB_PREC_AMP_FP16: case MB_PREC_AMP_BF16: return P_MIXED;
  default: return P_HALF;
  }
}

void mb_margin_for(const mb_graph *g, const mb_train *tr, mb_margin *out) {
  int f = family_of(g), p = prec_of(tr);
  out->family = family_names[f];
  if (tr->margin >= 0) {
    out->fraction = tr->margin;
    out->basis = "given (setup key margin)";
    return;
  }
  out->fraction = 0;
  if (tr->cpu) {
    out->basis = "none: the margins are the GPU truth's, and the backend is cpu";
    return;
  }
  if (f == F_NONE) {
    out->basis = "none: not a family the GPU truth measured the largest batch of";
    return;
  }
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
    if (rows[i].family == f && rows[i].prec == p) {
      out->fraction = rows[i].fraction;
      out->basis = rows[i].basis;
      return;
    }
  out->basis = p == P_FP32 ? "none: no largest batch of this family measured in fp32"
               : p == P_MIXED ? "none: no largest batch of this family measured in mixed precision"
                              : "none: no largest batch of this family measured in half precision";
}
