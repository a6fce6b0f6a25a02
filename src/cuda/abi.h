/* The few cuDNN and NVML declarations measured mode calls, written out here because their
 * headers are not part of every CUDA toolkit (cuDNN and the NVML headers ship separately).
 * The layouts are those of cudnn_cnn_v9.h / cudnn_ops_v9.h / cudnn_graph_v9.h (the same in
 * cuDNN 8) and nvml.h; tests/unit/test_cuda_abi.c checks them against cudnn.h where it is
 * installed. Everything else (cudart, cuBLAS, cuBLASLt, the driver) comes from the toolkit's
 * own headers. */
#ifndef MB_CUDA_ABI_H
#define MB_CUDA_ABI_H
#include <stddef.h>

/* ---- cuDNN (legacy convolution API: descriptors and the _v7 heuristics) ---- */
typedef struct mb_cudnn_context *mb_cudnn_handle;
typedef struct mb_cudnn_tensor *mb_cudnn_tensor_desc;
typedef struct mb_cudnn_filter *mb_cudnn_filter_desc;
typedef struct mb_cudnn_conv *mb_cudnn_conv_desc;

enum {
  MB_CUDNN_STATUS_SUCCESS = 0,
  MB_CUDNN_DATA_FLOAT = 0, MB_CUDNN_DATA_HALF = 2, MB_CUDNN_DATA_BFLOAT16 = 9,
  MB_CUDNN_TENSOR_NCHW = 0,
  MB_CUDNN_CROSS_CORRELATION = 1,
  MB_CUDNN_DEFAULT_MATH = 0, MB_CUDNN_TENSOR_OP_MATH = 1
};

/* cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t: the three share this layout. */
typedef struct mb_cudnn_perf {
  int algo;
  int status;
  float time;
  size_t memory;      /* the workspace this algorithm needs, bytes */
  int determinism;
  int math_type;
  int reserved[3];
} mb_cudnn_perf;

typedef struct mb_cudnn_fns {
  int (*create)(mb_cudnn_handle *);
  int (*destroy)(mb_cudnn_handle);
  const char *(*error_string)(int);
  int (*create_tensor)(mb_cudnn_tensor_desc *);
  int (*set_tensor_nd)(mb_cudnn_tensor_desc, int dtype, int nb_dims, const int dims[], const int strides[]);
  int (*destroy_tensor)(mb_cudnn_tensor_desc);
  int (*create_filter)(mb_cudnn_filter_desc *);
  int (*set_filter_nd)(mb_cudnn_filter_desc, int dtype, int format, int nb_dims, const int dims[]);
  int (*destroy_filter)(mb_cudnn_filter_desc);
  int (*create_conv)(mb_cudnn_conv_desc *);
  int (*set_conv_nd)(mb_cudnn_conv_desc, int n, const int pad[], const int stride[], const int dilation[],
                     int mode, int compute_type);
  int (*set_conv_groups)(mb_cudnn_conv_desc, int groups);
  int (*set_conv_math)(mb_cudnn_conv_desc, int math_type);
  int (*destroy_conv)(mb_cudnn_conv_desc);
  int (*fwd_algos)(mb_cudnn_handle, mb_cudnn_tensor_desc x, mb_cudnn_filter_desc w, mb_cudnn_conv_desc,
                   mb_cudnn_tensor_desc y, int requested, int *returned, mb_cudnn_perf *results);
  int (*bwd_data_algos)(mb_cudnn_handle, mb_cudnn_filter_desc w, mb_cudnn_tensor_desc dy, mb_cudnn_conv_desc,
                        mb_cudnn_tensor_desc dx, int requested, int *returned, mb_cudnn_perf *results);
  int (*bwd_filter_algos)(mb_cudnn_handle, mb_cudnn_tensor_desc x, mb_cudnn_tensor_desc dy, mb_cudnn_conv_desc,
                          mb_cudnn_filter_desc dw, int requested, int *returned, mb_cudnn_perf *results);
} mb_cudnn_fns;

/* ---- NVML (free memory before this process has a context) ---- */
typedef struct mb_nvml_device_st *mb_nvml_device;
typedef struct mb_nvml_memory {
  unsigned long long total, free, used;
} mb_nvml_memory;

typedef struct mb_nvml_fns {
  int (*init)(void);
  int (*shutdown)(void);
  int (*device_by_pci_bus_id)(const char *bus_id, mb_nvml_device *out);
  int (*memory_info)(mb_nvml_device, mb_nvml_memory *out);
  const char *(*error_string)(int);
} mb_nvml_fns;
#endif
