/* Library workspaces at one op's shapes, asked of the libraries themselves: cuDNN's
 * heuristics (the legacy cudnnGet*Algorithm_v7 calls) for a convolution, cuBLASLt's
 * (cublasLtMatmulAlgoGetHeuristic) for a GEMM. */
#ifndef MB_CUDA_WORKSPACE_H
#define MB_CUDA_WORKSPACE_H
#include <stdbool.h>
#include <stdint.h>

#include "cuda/libs.h"
#include "graph/graph.h"
#include "ops/op.h"

#define MB_WS_ALGOS 8

/* Per direction, the workspace of each algorithm the heuristics offer, best first. */
typedef struct mb_ws_list {
  uint64_t bytes[MB_WS_ALGOS];
  int n;
} mb_ws_list;

typedef struct mb_conv_ws {
  mb_ws_list fwd, bwd_data, bwd_filter;
} mb_conv_ws;

/* Conv / ConvTranspose node n with value shapes t, computing in dtype (an mb_dtype). false
 * when it cannot be asked (no cuDNN, an unsupported rank or dtype): why says which. */
bool mb_conv_workspaces(mb_cuda *c, const mb_node *n, const mb_tinfo *t, int32_t dtype, mb_conv_ws *out,
                        char *why, size_t why_size);
/* The largest workspace cuBLASLt's heuristic asks for over the GEMMs of MatMul / Gemm node n
 * (forward, or with backward the two products of its gradients), with at most `limit` bytes
 * allowed (PyTorch's workspace size). false when it cannot be asked. */
bool mb_matmul_workspace(mb_cuda *c, const mb_node *n, const mb_tinfo *t, int32_t dtype, uint64_t limit,
                         bool backward, uint64_t *out);
#endif
