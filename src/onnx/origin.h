/* Where a node came from in PyTorch: its module path and, for torch 2.x dynamo exports, the FX
 * node (the aten op eager PyTorch ran) it was translated from.
 *
 * The dynamo exporter writes both in each node's metadata_props (docs/torch2-export.md):
 *   pkg.torch.onnx.name_scopes  ['', 'layer1', 'layer1.0', 'layer1.0.conv1', 'conv2d_1']
 *   pkg.torch.onnx.fx_node      %conv2d_1 : [...] = call_function[target=torch.ops.aten.
 *                               conv2d.default](args = (%max_pool2d, %p_layer1_0_conv1_weight,
 *                               None, [1, 1], [1, 1]), kwargs = {})
 * The TorchScript exporter names nodes by scope instead: "/layer1/layer1.0/conv1/Conv". Both
 * become the same dotted module path ("layer1.0.conv1"), the form users write in PyTorch.
 * This file reads them from the protobuf at conversion; graph/origin.h reads what the IR's
 * mb_origin then says. */
#ifndef MB_ONNX_ORIGIN_H
#define MB_ONNX_ORIGIN_H
#include "graph/graph.h"
#include "onnx.pb-c.h"
#include "util/strmap.h"

#define MB_MEMO_KINDS 4 /* stack_trace, class_hierarchy, name_scopes, fx_node */

/* Interned strings of one model: the many nodes one FX node became share one copy. */
typedef struct mb_interner {
  mb_arena *arena;
  mb_strmap map;     /* string -> index into strs */
  const char **strs;
  int32_t n, cap;
  /* What a metadata entry's text was read as (origin.c's memo_kinds): a torch 2.x export
   * repeats the same texts across the nodes of one FX node and across the layers of a decoder.
   * Keys live in memo_arena, which goes with the interner. */
  mb_arena memo_arena;
  mb_strmap memo[MB_MEMO_KINDS]; /* text -> index into memos (the kinds that keep every text) */
  mb_origin *memos;
  const char **memo_keys;        /* the text each memo was read from */
  int32_t n_memos, cap_memos;
  int32_t last[MB_MEMO_KINDS];   /* the memo each kind used last, -1: none; one memcmp with it */
  size_t last_len[MB_MEMO_KINDS];
} mb_interner;

int mb_interner_init(mb_interner *in, mb_arena *arena);
void mb_interner_free(mb_interner *in);
/* The interned copy of s[0..len), NULL when out of memory. */
const char *mb_intern(mb_interner *in, const char *s, size_t len);

/* Fill n->origin from the node's metadata (unknown fields to the protobuf-c schema, which
 * predates NodeProto.metadata_props) or its TorchScript-style name. MB_OK or MB_E_NOMEM. */
int mb_origin_read(const Onnx__NodeProto *pn, mb_node *n, mb_interner *in);
#endif
