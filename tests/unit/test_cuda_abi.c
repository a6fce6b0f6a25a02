/* src/cuda/abi.h declares the cuDNN structures and constants measured mode uses by hand (cuDNN
 * is not part of every toolkit); here they are checked against cudnn.h where it is installed. */
#include <cudnn.h>
#include <stddef.h>
#include <stdio.h>

#include "cuda/abi.h"

#define SAME_LAYOUT(T)                                                                              \
  _Static_assert(sizeof(T) == sizeof(mb_cudnn_perf), #T " size");                                   \
  _Static_assert(offsetof(T, status) == offsetof(mb_cudnn_perf, status), #T " status");             \
  _Static_assert(offsetof(T, memory) == offsetof(mb_cudnn_perf, memory), #T " memory");             \
  _Static_assert(offsetof(T, mathType) == offsetof(mb_cudnn_perf, math_type), #T " mathType")

SAME_LAYOUT(cudnnConvolutionFwdAlgoPerf_t);
SAME_LAYOUT(cudnnConvolutionBwdDataAlgoPerf_t);
SAME_LAYOUT(cudnnConvolutionBwdFilterAlgoPerf_t);
/* as ints: the two sides are different enum types */
#define SAME(a, b) _Static_assert((int)(a) == (int)(b), #a)
SAME(CUDNN_STATUS_SUCCESS, MB_CUDNN_STATUS_SUCCESS);
SAME(CUDNN_DATA_FLOAT, MB_CUDNN_DATA_FLOAT);
SAME(CUDNN_DATA_HALF, MB_CUDNN_DATA_HALF);
SAME(CUDNN_DATA_BFLOAT16, MB_CUDNN_DATA_BFLOAT16);
SAME(CUDNN_TENSOR_NCHW, MB_CUDNN_TENSOR_NCHW);
SAME(CUDNN_CROSS_CORRELATION, MB_CUDNN_CROSS_CORRELATION);
SAME(CUDNN_DEFAULT_MATH, MB_CUDNN_DEFAULT_MATH);
SAME(CUDNN_TENSOR_OP_MATH, MB_CUDNN_TENSOR_OP_MATH);

int main(void) {
  printf("cuda_abi: checked against cuDNN %d.%d.%d at compile time\n", CUDNN_MAJOR, CUDNN_MINOR, CUDNN_PATCHLEVEL);
  return 0;
}
