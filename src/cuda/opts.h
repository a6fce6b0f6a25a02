/* What measured mode is told about its libraries and device (setup keys cuda_device,
 * cuda_runtime, ...: budget/setup_cuda.c). Plain C, without the toolkit's headers, so the setup
 * can hold it in any build. */
#ifndef MB_CUDA_OPTS_H
#define MB_CUDA_OPTS_H
#include <stdint.h>

/* The libraries measured mode loads at run time, in load order. */
enum mb_cuda_lib {
  MB_CUDA_LIB_RUNTIME, MB_CUDA_LIB_DRIVER, MB_CUDA_LIB_NVML, MB_CUDA_LIB_CUBLAS,
  MB_CUDA_LIB_CUBLASLT, MB_CUDA_LIB_CUDNN, MB_CUDA_LIB_COUNT
};

/* lib[k]: NULL searches the usual names; "" does not load an optional library. */
typedef struct mb_cuda_opts {
  char *lib[MB_CUDA_LIB_COUNT];
  int32_t device;
} mb_cuda_opts;

/* The setup key that names library k ("cuda_runtime", ...), for messages. */
static inline const char *mb_cuda_lib_key(int k) {
  static const char *const keys[MB_CUDA_LIB_COUNT] = {
    [MB_CUDA_LIB_RUNTIME] = "cuda_runtime",       [MB_CUDA_LIB_DRIVER] = "cuda_driver",
    [MB_CUDA_LIB_NVML] = "nvml_library",          [MB_CUDA_LIB_CUBLAS] = "cublas_library",
    [MB_CUDA_LIB_CUBLASLT] = "cublaslt_library",  [MB_CUDA_LIB_CUDNN] = "cudnn_library",
  };
  return k >= 0 && k < MB_CUDA_LIB_COUNT ? keys[k] : "?";
}
#endif
