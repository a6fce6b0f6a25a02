/* The CUDA libraries of measured mode, loaded at run time (dlopen) so that one build runs with
 * or without a GPU: every entry point is a function pointer in a per-session mb_cuda, never a
 * static. Prototypes come from the toolkit's headers (__typeof__ of the declared function), so a
 * pointer cannot disagree with the function it is loaded from. */
#ifndef MB_CUDA_LIBS_H
#define MB_CUDA_LIBS_H
#include <stdbool.h>
#include <stdint.h>

#include <cublasLt.h>
#include <cublas_api.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "cuda/abi.h"
#include "cuda/opts.h"
#include "membudget/membudget.h"
#include "util/diag.h"

typedef struct mb_cudart_fns {
  __typeof__(cudaGetDeviceCount) *get_device_count;
  __typeof__(cudaSetDevice) *set_device;
  __typeof__(cudaMalloc) *malloc;
  __typeof__(cudaFree) *free;
  __typeof__(cudaMemset) *memset;
  __typeof__(cudaMemGetInfo) *mem_get_info;
  __typeof__(cudaDeviceSynchronize) *synchronize;
  __typeof__(cudaDeviceGetAttribute) *get_attribute;
  __typeof__(cudaDeviceGetPCIBusId) *get_pci_bus_id;
  __typeof__(cudaRuntimeGetVersion) *runtime_version;
  __typeof__(cudaDriverGetVersion) *driver_version;
  __typeof__(cudaGetErrorName) *error_name;
  __typeof__(cudaGetErrorString) *error_string;
  __typeof__(cudaGetLastError) *get_last_error;
  /* cudaDeviceProp grows between CUDA versions (and is cudaGetDeviceProperties_v2 in 12.x): it
   * is only read for its first field, the name, from a buffer larger than any version's. */
  cudaError_t (*get_properties)(void *prop, int device);
} mb_cudart_fns;

typedef struct mb_cudrv_fns {
  __typeof__(cuInit) *init;
  __typeof__(cuDeviceGet) *device_get;
  __typeof__(cuDevicePrimaryCtxGetState) *primary_ctx_state;
} mb_cudrv_fns;

typedef struct mb_cublas_fns {
  __typeof__(cublasCreate_v2) *create;
  __typeof__(cublasDestroy_v2) *destroy;
  __typeof__(cublasSgemm_v2) *sgemm;
} mb_cublas_fns;

typedef struct mb_cublaslt_fns {
  __typeof__(cublasLtCreate) *create;
  __typeof__(cublasLtDestroy) *destroy;
  __typeof__(cublasLtMatmulDescCreate) *desc_create;
  __typeof__(cublasLtMatmulDescDestroy) *desc_destroy;
  __typeof__(cublasLtMatmulDescSetAttribute) *desc_set;
  __typeof__(cublasLtMatrixLayoutCreate) *layout_create;
  __typeof__(cublasLtMatrixLayoutDestroy) *layout_destroy;
  __typeof__(cublasLtMatrixLayoutSetAttribute) *layout_set;
  __typeof__(cublasLtMatmulPreferenceCreate) *pref_create;
  __typeof__(cublasLtMatmulPreferenceDestroy) *pref_destroy;
  __typeof__(cublasLtMatmulPreferenceSetAttribute) *pref_set;
  __typeof__(cublasLtMatmulAlgoGetHeuristic) *heuristic;
} mb_cublaslt_fns;

/* One measuring session's libraries and handles. */
typedef struct mb_cuda {
  void *dl[MB_CUDA_LIB_COUNT];            /* dlopen handles; NULL: not loaded */
  char path[MB_CUDA_LIB_COUNT][256];      /* the name each was loaded by */
  mb_cudart_fns rt;
  mb_cudrv_fns drv;
  mb_nvml_fns nvml;
  mb_cublas_fns blas;
  mb_cublaslt_fns lt;
  mb_cudnn_fns dnn;
  cublasHandle_t blas_handle;
  cublasLtHandle_t lt_handle;
  mb_cudnn_handle dnn_handle;
  bool nvml_on;                           /* nvmlInit succeeded: shut it down */
  int device;
  char notes[1024];                       /* what is not measured, and why */
} mb_cuda;

/* Load the runtime (required: MB_E_NO_CUDA naming every file tried when it cannot be loaded)
 * and the optional libraries (a note when one is missing). */
int mb_cuda_load(mb_cuda *c, const mb_cuda_opts *o, mb_diag *d);
/* Destroy the library handles (the libraries stay loaded: libs.c says why); c may be partly
 * loaded. */
void mb_cuda_unload(mb_cuda *c);
static inline bool mb_cuda_has(const mb_cuda *c, int lib) { return c->dl[lib] != NULL; }
/* Append "; "-separated text to c->notes. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void mb_cuda_note(mb_cuda *c, const char *fmt, ...);
/* "cudaErrorMemoryAllocation (out of memory)" for a runtime error code, into buf. */
const char *mb_cuda_strerror(const mb_cuda *c, cudaError_t e, char *buf, size_t size);
#endif
