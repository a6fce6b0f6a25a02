/* Pattern fusion: decomposed ONNX subgraphs that PyTorch ran as one op (GELU, SiLU, LayerNorm,
 * RMSNorm, GroupNorm, Linear, attention) are recognised so the simulation charges the fused
 * op's saved tensors, not the sum over the pieces (docs/training-memory-model.md 2.3). */
#ifndef MB_PASSES_FUSE_H
#define MB_PASSES_FUSE_H
#include <stdbool.h>
#include <stdint.h>

#include "graph/graph.h"
#include "ops/op.h"
#include "util/arena.h"

#define MB_FUSED_MAX_IN 8

typedef struct mb_fused {
  int32_t kind;        /* mb_grad_id of the fused op */
  int32_t last;        /* member node where it runs (the one producing `out`) */
  int32_t n_in;
  int32_t in[MB_FUSED_MAX_IN]; /* external inputs, the primary one(s) first */
  int32_t out;         /* the value it produces */
  int32_t stats_ref;   /* value whose shape sizes its statistics (-1: the primary input) */
  int32_t n_members;
} mb_fused;

typedef struct mb_fusion {
  int32_t *group_of;   /* per node of the main graph: index into groups, or -1 */
  mb_fused *groups;
  int32_t n_groups;
  bool *dead;          /* per node: exported, but not run in eager PyTorch (passes/eager.c) */
  bool *detached;      /* per node: computes on a detached tensor in eager PyTorch, which the
                        * TorchScript exporter does not write (softmax's shift by a max):
                        * autograd records nothing; NULL when none */
} mb_fusion;

typedef struct mb_fuse_options {
  bool fuse_attention;     /* the eager kernel materialises the scores: attention stays as
                            * the exported nodes when false */
  bool sdpa_signature_only; /* without recorded aten ops, fuse only attention that shows the
                             * TorchScript exporter's SDPA (q and k^T both scaled): attention
                             * written in Python runs as its ops */
  bool transformers_eager; /* charge what eager transformers runs where its code takes another
                            * path under export (passes/eager.c) */
  bool cpu;                /* PyTorch's CPU kernels: SDPA with dropout runs the math path */
} mb_fuse_options;

/* Consumers of each value of a graph, in node order: uses[first[v] .. first[v + 1]). */
typedef struct mb_uses {
  int32_t *first;
  int32_t *uses;
} mb_uses;

/* Find the patterns in the main graph. t: inferred shapes (for scalar checks). Memory from
 * the arena. */
int mb_fuse(const mb_graph *g, const mb_tinfo *t, const mb_fuse_options *opt, mb_arena *a,
            mb_fusion *out);

/* The value of the enclosing graph g that output j of If node n passes on in both branches
 * (through Identity, Reshape, Squeeze, Unsqueeze or Flatten: a view), or -1. TorchScript's
 * exports wrap indexing in Ifs that only reshape an outer tensor. */
int32_t mb_if_alias(const mb_graph *g, const mb_node *n, int32_t j);

/* eager.c: Hugging Face transformers build a causal mask and repeat GQA keys and values only
 * when exported; rewrite those SDPA groups to what eager training runs and mark the nodes
 * that then compute nothing eager needs as dead. */
int mb_eager_transformers(const mb_graph *g, const mb_tinfo *t, const mb_uses *u, mb_fusion *f,
                          mb_arena *a);
#endif
