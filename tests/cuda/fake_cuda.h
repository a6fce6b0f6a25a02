/* What the fake CUDA device (fake_cuda.c) counts, for tests that dlopen it too. */
#ifndef MB_FAKE_CUDA_H
#define MB_FAKE_CUDA_H
#include <stdint.h>

typedef struct fake_cuda_stats {
  int64_t live_allocs, mallocs, frees, failed_mallocs;
  uint64_t live_bytes;            /* device bytes of live cudaMallocs (rounded to the granule) */
  uint64_t peak_used;             /* the most device memory in use at once, everything counted */
  uint64_t memset_bytes;          /* bytes touched by cudaMemset */
  int64_t cublas_handles, cublaslt_handles, cudnn_handles; /* live */
  int64_t host_objects;           /* live cuBLASLt / cuDNN descriptors (host memory) */
  int64_t conv_queries, lt_queries;
  int32_t last_conv_dims[5];      /* the input descriptor of the last convolution query */
  int32_t last_conv_nd;
  int32_t last_conv_pad[3], last_conv_stride[3], last_conv_groups;
  uint64_t last_lt_m, last_lt_n, last_lt_k, last_lt_batch, last_lt_limit;
} fake_cuda_stats;

/* Re-read the FAKE_* variables and start from a fresh device (nothing allocated, no context). */
void fake_cuda_reset(void);
void fake_cuda_stats_get(fake_cuda_stats *out);
typedef void (*fake_cuda_reset_fn)(void);
typedef void (*fake_cuda_stats_fn)(fake_cuda_stats *out);
#endif
