/* A fake CUDA device for testing measured mode without a GPU: one shared library exporting
 * the entry points src/cuda loads from libcudart, libcuda, NVML, cuBLAS, cuBLASLt and cuDNN
 * (give its path for every cuda_* setup key, or MEMBUDGET_CUDA_* variable). Device memory is
 * bookkeeping only: cudaMalloc hands out addresses nothing may dereference, rounded up to a
 * granule, and fails with cudaErrorMemoryAllocation when the device is full.
 *
 * Configured by environment variables, read at the first call and by fake_cuda_reset() (bytes
 * are plain integers):
 *   FAKE_CUDA_DEVICES (1; 0: cudaErrorNoDevice), FAKE_CUDA_NAME ("Fake GPU"), FAKE_CUDA_CC
 *   ("9.0"), FAKE_CUDA_TOTAL (4 GiB), FAKE_CUDA_OTHERS (0: held by other processes),
 *   FAKE_CUDA_CONTEXT (300 MiB, taken when the context is created), FAKE_CUDA_CONTEXT_EXISTS
 *   (0; 1: the context exists before the first call), FAKE_CUDA_GRANULE (2 MiB),
 *   FAKE_CUBLAS_HANDLE (4 MiB), FAKE_CUBLAS_KERNELS (8 MiB, at the first GEMM),
 *   FAKE_CUBLASLT_HANDLE (2 MiB), FAKE_CUDNN_HANDLE (6 MiB), FAKE_CUBLASLT_WS (0: the
 *   workspace cuBLASLt's heuristic asks for, at most the preference's limit),
 *   FAKE_CUDNN_WS_FWD, FAKE_CUDNN_WS_FWD_ALT, FAKE_CUDNN_WS_DATA, FAKE_CUDNN_WS_FILTER (0): the
 *   workspaces of cuDNN's first and second forward algorithm and of its backward ones (each
 *   list starts with an unsupported algorithm, which must be skipped).
 * A device is process-global, so this test double keeps its state in statics. */
#include <cublasLt.h>
#include <cublas_api.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/abi.h"
#include "fake_cuda.h"

#define EXPORT __attribute__((visibility("default")))
#define MIB (1024ull * 1024ull)

typedef struct alloc {
  uintptr_t ptr;
  uint64_t size; /* rounded to the granule */
} alloc;

static struct {
  bool ready;
  int devices, cc_major, cc_minor;
  char name[256];
  uint64_t total, others, context, granule, blas_handle, blas_kernels, lt_handle, dnn_handle;
  uint64_t lt_ws, ws_fwd, ws_fwd_alt, ws_data, ws_filter;
  bool context_active, kernels_loaded;
  uint64_t handles_bytes, alloc_bytes;
  alloc *allocs;
  int64_t n_allocs, cap_allocs;
  uintptr_t next;
  cudaError_t last;
  fake_cuda_stats st;
} F;

static uint64_t env_u64(const char *name, uint64_t dflt) {
  const char *v = getenv(name);
  return v && *v ? strtoull(v, NULL, 10) : dflt;
}

EXPORT void fake_cuda_reset(void) {
  free(F.allocs);
  memset(&F, 0, sizeof F);
  F.ready = true;
  F.devices = (int)env_u64("FAKE_CUDA_DEVICES", 1);
  const char *name = getenv("FAKE_CUDA_NAME");
  snprintf(F.name, sizeof F.name, "%s", name ? name : "Fake GPU");
  const char *cc = getenv("FAKE_CUDA_CC");
  if (!cc || sscanf(cc, "%d.%d", &F.cc_major, &F.cc_minor) != 2) F.cc_major = 9, F.cc_minor = 0;
  F.total = env_u64("FAKE_CUDA_TOTAL", 4096 * MIB);
  F.others = env_u64("FAKE_CUDA_OTHERS", 0);
  F.context = env_u64("FAKE_CUDA_CONTEXT", 300 * MIB);
  F.context_active = env_u64("FAKE_CUDA_CONTEXT_EXISTS", 0) != 0;
  F.granule = env_u64("FAKE_CUDA_GRANULE", 2 * MIB);
  F.blas_handle = env_u64("FAKE_CUBLAS_HANDLE", 4 * MIB);
  F.blas_kernels = env_u64("FAKE_CUBLAS_KERNELS", 8 * MIB);
  F.lt_handle = env_u64("FAKE_CUBLASLT_HANDLE", 2 * MIB);
  F.dnn_handle = env_u64("FAKE_CUDNN_HANDLE", 6 * MIB);
  F.lt_ws = env_u64("FAKE_CUBLASLT_WS", 0);
  F.ws_fwd = env_u64("FAKE_CUDNN_WS_FWD", 0);
  F.ws_fwd_alt = env_u64("FAKE_CUDNN_WS_FWD_ALT", 0);
  F.ws_data = env_u64("FAKE_CUDNN_WS_DATA", 0);
  F.ws_filter = env_u64("FAKE_CUDNN_WS_FILTER", 0);
  F.next = (uintptr_t)0x7f0000000000ull;
}

static void ready(void) {
  if (!F.ready) fake_cuda_reset();
}

static uint64_t used(void) {
  return F.others + (F.context_active ? F.context : 0) + F.handles_bytes + F.alloc_bytes;
}

static void note_use(void) {
  if (used() > F.st.peak_used) F.st.peak_used = used();
}

static void context(void) {
  ready();
  F.context_active = true;
  note_use();
}

static void take(uint64_t *counter, uint64_t bytes) {
  *counter += bytes;
  note_use();
}

EXPORT void fake_cuda_stats_get(fake_cuda_stats *out) {
  ready();
  *out = F.st;
  out->live_allocs = F.n_allocs;
  out->live_bytes = F.alloc_bytes;
}

/* ---------------------------------------------------------------- cudart */

static cudaError_t fail(cudaError_t e) {
  F.last = e;
  return e;
}

EXPORT cudaError_t cudaGetDeviceCount(int *count) {
  ready();
  *count = F.devices;
  return F.devices ? cudaSuccess : fail(cudaErrorNoDevice);
}

EXPORT cudaError_t cudaSetDevice(int device) {
  ready();
  if (device < 0 || device >= F.devices) return fail(cudaErrorInvalidDevice);
  context(); /* CUDA 12+: cudaSetDevice initialises the primary context */
  return cudaSuccess;
}

EXPORT cudaError_t cudaMalloc(void **ptr, size_t size) {
  context();
  *ptr = NULL;
  uint64_t r = (size + F.granule - 1) / F.granule * F.granule;
  if (used() + r > F.total) {
    F.st.failed_mallocs++;
    return fail(cudaErrorMemoryAllocation);
  }
  if (F.n_allocs == F.cap_allocs) {
    int64_t cap = F.cap_allocs ? F.cap_allocs * 2 : 64;
    alloc *grown = realloc(F.allocs, (size_t)cap * sizeof *grown);
    if (!grown) return fail(cudaErrorMemoryAllocation);
    F.allocs = grown;
    F.cap_allocs = cap;
  }
  F.allocs[F.n_allocs++] = (alloc){F.next, r};
  *ptr = (void *)F.next;
  F.next += r + F.granule; /* a gap: an access past the end would not land in a neighbour */
  F.st.mallocs++;
  take(&F.alloc_bytes, r);
  return cudaSuccess;
}

static int64_t find(const void *ptr) {
  for (int64_t i = 0; i < F.n_allocs; i++)
    if ((uintptr_t)ptr >= F.allocs[i].ptr && (uintptr_t)ptr < F.allocs[i].ptr + F.allocs[i].size) return i;
  return -1;
}

EXPORT cudaError_t cudaFree(void *ptr) {
  context();
  if (!ptr) return cudaSuccess;
  int64_t i = find(ptr);
  if (i < 0 || F.allocs[i].ptr != (uintptr_t)ptr) return fail(cudaErrorInvalidValue);
  F.alloc_bytes -= F.allocs[i].size;
  F.allocs[i] = F.allocs[--F.n_allocs];
  F.st.frees++;
  return cudaSuccess;
}

EXPORT cudaError_t cudaMemset(void *ptr, int value, size_t count) {
  (void)value;
  context();
  int64_t i = find(ptr);
  if (i < 0 || (uintptr_t)ptr + count > F.allocs[i].ptr + F.allocs[i].size) return fail(cudaErrorInvalidValue);
  F.st.memset_bytes += count;
  return cudaSuccess;
}

EXPORT cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total) {
  context();
  *free_bytes = (size_t)(F.total - used());
  *total = (size_t)F.total;
  return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceSynchronize(void) {
  context();
  return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device) {
  ready();
  if (device < 0 || device >= F.devices) return fail(cudaErrorInvalidDevice);
  if (attr == cudaDevAttrComputeCapabilityMajor) *value = F.cc_major;
  else if (attr == cudaDevAttrComputeCapabilityMinor) *value = F.cc_minor;
  else return fail(cudaErrorInvalidValue);
  return cudaSuccess;
}

EXPORT cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device) {
  ready();
  if (device < 0 || device >= F.devices) return fail(cudaErrorInvalidDevice);
  snprintf(prop->name, sizeof prop->name, "%s", F.name);
  return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceGetPCIBusId(char *bus, int len, int device) {
  ready();
  if (device < 0 || device >= F.devices) return fail(cudaErrorInvalidDevice);
  snprintf(bus, (size_t)len, "0000:%02X:00.0", device + 1);
  return cudaSuccess;
}

EXPORT cudaError_t cudaRuntimeGetVersion(int *v) {
  *v = 13000;
  return cudaSuccess;
}

EXPORT cudaError_t cudaDriverGetVersion(int *v) {
  *v = 13000;
  return cudaSuccess;
}

EXPORT const char *cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    default: return "cudaErrorUnknown";
  }
}

EXPORT const char *cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    default: return "fake error";
  }
}

EXPORT cudaError_t cudaGetLastError(void) {
  cudaError_t e = F.last;
  F.last = cudaSuccess;
  return e;
}

/* ---------------------------------------------------------------- driver */

EXPORT CUresult cuInit(unsigned int flags) {
  (void)flags;
  ready();
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *dev, int ordinal) {
  ready();
  if (ordinal < 0 || ordinal >= F.devices) return CUDA_ERROR_INVALID_DEVICE;
  *dev = ordinal;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active) {
  (void)dev;
  ready();
  *flags = 0;
  *active = F.context_active;
  return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- NVML */

EXPORT int nvmlInit_v2(void) {
  ready();
  return 0;
}
EXPORT int nvmlShutdown(void) { return 0; }
EXPORT int nvmlDeviceGetHandleByPciBusId_v2(const char *bus, mb_nvml_device *dev) {
  ready();
  int d = 0;
  if (sscanf(bus, "0000:%x:00.0", (unsigned *)&d) != 1 || d < 1 || d > F.devices) return 6; /* NOT_FOUND */
  *dev = (mb_nvml_device)(uintptr_t)d;
  return 0;
}
EXPORT int nvmlDeviceGetMemoryInfo(mb_nvml_device dev, mb_nvml_memory *m) {
  (void)dev;
  m->total = F.total;
  m->used = used();
  m->free = F.total - used();
  return 0;
}
EXPORT const char *nvmlErrorString(int rc) { return rc ? "Not Found" : "Success"; }

/* ---------------------------------------------------------------- cuBLAS */

EXPORT cublasStatus_t cublasCreate_v2(cublasHandle_t *h) {
  context();
  take(&F.handles_bytes, F.blas_handle);
  F.st.cublas_handles++;
  *h = (cublasHandle_t)malloc(16);
  return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasDestroy_v2(cublasHandle_t h) {
  free(h);
  F.handles_bytes -= F.blas_handle;
  F.st.cublas_handles--;
  return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                     const float *alpha, const float *a, int lda, const float *b, int ldb,
                                     const float *beta, float *c, int ldc) {
  (void)h, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)lda, (void)ldb, (void)beta, (void)ldc;
  if (find(a) < 0 || find(b) < 0 || find(c) < 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (!F.kernels_loaded) { /* lazy loading: a first GEMM loads its kernels, and they stay */
    F.kernels_loaded = true;
    take(&F.handles_bytes, F.blas_kernels);
  }
  return CUBLAS_STATUS_SUCCESS;
}

/* ---------------------------------------------------------------- cuBLASLt */

typedef struct fake_layout {
  uint64_t rows, cols;
  int32_t batch;
} fake_layout;

static void *host_object(size_t size) {
  void *p = calloc(1, size);
  if (p) F.st.host_objects++;
  return p;
}

static void host_free(void *p) {
  if (p) F.st.host_objects--;
  free(p);
}

EXPORT cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) {
  context();
  take(&F.handles_bytes, F.lt_handle);
  F.st.cublaslt_handles++;
  *h = (cublasLtHandle_t)malloc(16);
  return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
  free(h);
  F.handles_bytes -= F.lt_handle;
  F.st.cublaslt_handles--;
  return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t c, cudaDataType_t s) {
  (void)c, (void)s;
  *d = (cublasLtMatmulDesc_t)host_object(16);
  return CUBLAS_STATUS_SUCCESS;
}
EXPORT cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
  host_free(d);
  return CUBLAS_STATUS_SUCCESS;
}
EXPORT cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a,
                                                     const void *buf, size_t size) {
  (void)d, (void)a, (void)buf, (void)size;
  return CUBLAS_STATUS_SUCCESS;
}
EXPORT cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType type, uint64_t rows,
                                                 uint64_t cols, int64_t ld) {
  (void)type, (void)ld;
  fake_layout *f = host_object(sizeof *f);
  f->rows = rows;
  f->cols = cols;
  f->batch = 1;
  *l = (cublasLtMatrixLayout_t)f;
  return CUBLAS_STATUS_SUCCESS;
}
EXPORT cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
  host_free(l);
  return CUBLAS_STATUS_SUCCESS;
}
EXPORT cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t a,
                                                       const void *buf, size_t size) {
  if (a == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT && size == sizeof(int32_t))
    memcpy(&((fake_layout *)(void *)l)->batch, buf, size);
  return CUBLAS_STATUS_SUCCESS;
}
EXPORT cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
  *p = (cublasLtMatmulPreference_t)host_object(sizeof(uint64_t));
  return CUBLAS_STATUS_SUCCESS;
}
EXPORT cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
  host_free(p);
  return CUBLAS_STATUS_SUCCESS;
}
EXPORT cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                           cublasLtMatmulPreferenceAttributes_t a, const void *buf,
                                                           size_t size) {
  if (a == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES && size == sizeof(uint64_t)) memcpy(p, buf, size);
  return CUBLAS_STATUS_SUCCESS;
}
EXPORT cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t op,
                                                     cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                                     cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                                     cublasLtMatmulPreference_t pref, int requested,
                                                     cublasLtMatmulHeuristicResult_t results[], int *returned) {
  (void)h, (void)op, (void)c;
  if (requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
  const fake_layout *la = (const void *)a, *lb = (const void *)b, *ld = (const void *)d;
  uint64_t limit;
  memcpy(&limit, pref, sizeof limit);
  F.st.lt_queries++;
  F.st.last_lt_m = ld->rows;
  F.st.last_lt_n = ld->cols;
  F.st.last_lt_k = la->cols;
  F.st.last_lt_batch = (uint64_t)lb->batch;
  F.st.last_lt_limit = limit;
  memset(&results[0], 0, sizeof results[0]);
  results[0].workspaceSize = F.lt_ws < limit ? F.lt_ws : limit;
  results[0].state = CUBLAS_STATUS_SUCCESS;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

/* ---------------------------------------------------------------- cuDNN */

typedef struct fake_desc {
  int nd, dims[8], pad[3], stride[3], groups;
} fake_desc;

EXPORT int cudnnCreate(mb_cudnn_handle *h) {
  context();
  take(&F.handles_bytes, F.dnn_handle);
  F.st.cudnn_handles++;
  *h = (mb_cudnn_handle)malloc(16);
  return 0;
}
EXPORT int cudnnDestroy(mb_cudnn_handle h) {
  free(h);
  F.handles_bytes -= F.dnn_handle;
  F.st.cudnn_handles--;
  return 0;
}
EXPORT const char *cudnnGetErrorString(int rc) { return rc ? "CUDNN_STATUS_BAD_PARAM" : "CUDNN_STATUS_SUCCESS"; }

static int create_desc(void **out) {
  *out = host_object(sizeof(fake_desc));
  return 0;
}
static int destroy_desc(void *d) {
  host_free(d);
  return 0;
}
EXPORT int cudnnCreateTensorDescriptor(mb_cudnn_tensor_desc *d) { return create_desc((void **)d); }
EXPORT int cudnnDestroyTensorDescriptor(mb_cudnn_tensor_desc d) { return destroy_desc(d); }
EXPORT int cudnnCreateFilterDescriptor(mb_cudnn_filter_desc *d) { return create_desc((void **)d); }
EXPORT int cudnnDestroyFilterDescriptor(mb_cudnn_filter_desc d) { return destroy_desc(d); }
EXPORT int cudnnCreateConvolutionDescriptor(mb_cudnn_conv_desc *d) { return create_desc((void **)d); }
EXPORT int cudnnDestroyConvolutionDescriptor(mb_cudnn_conv_desc d) { return destroy_desc(d); }

EXPORT int cudnnSetTensorNdDescriptor(mb_cudnn_tensor_desc d, int dtype, int nd, const int dims[], const int strides[]) {
  (void)dtype;
  fake_desc *f = (fake_desc *)(void *)d;
  if (nd < 4 || nd > 5) return 3; /* BAD_PARAM: cuDNN wants 4 or more dims */
  for (int i = nd - 1, s = 1; i >= 0; s *= dims[i], i--)
    if (strides[i] != s) return 3; /* the library describes packed tensors */
  f->nd = nd;
  memcpy(f->dims, dims, (size_t)nd * sizeof *dims);
  return 0;
}
EXPORT int cudnnSetFilterNdDescriptor(mb_cudnn_filter_desc d, int dtype, int format, int nd, const int dims[]) {
  (void)dtype, (void)format;
  fake_desc *f = (fake_desc *)(void *)d;
  f->nd = nd;
  memcpy(f->dims, dims, (size_t)nd * sizeof *dims);
  return nd >= 4 && nd <= 5 ? 0 : 3;
}
EXPORT int cudnnSetConvolutionNdDescriptor(mb_cudnn_conv_desc d, int n, const int pad[], const int stride[],
                                           const int dilation[], int mode, int compute) {
  (void)dilation, (void)mode, (void)compute;
  fake_desc *f = (fake_desc *)(void *)d;
  if (n < 2 || n > 3) return 3;
  f->nd = n;
  memcpy(f->pad, pad, (size_t)n * sizeof *pad);
  memcpy(f->stride, stride, (size_t)n * sizeof *stride);
  return 0;
}
EXPORT int cudnnSetConvolutionGroupCount(mb_cudnn_conv_desc d, int groups) {
  ((fake_desc *)(void *)d)->groups = groups;
  return 0;
}
EXPORT int cudnnSetConvolutionMathType(mb_cudnn_conv_desc d, int math) {
  (void)d, (void)math;
  return 0;
}

static void record(const void *x, const void *conv) {
  const fake_desc *fx = x, *fc = conv;
  F.st.conv_queries++;
  F.st.last_conv_nd = fx->nd;
  memcpy(F.st.last_conv_dims, fx->dims, sizeof F.st.last_conv_dims);
  memcpy(F.st.last_conv_pad, fc->pad, sizeof F.st.last_conv_pad);
  memcpy(F.st.last_conv_stride, fc->stride, sizeof F.st.last_conv_stride);
  F.st.last_conv_groups = fc->groups;
}

/* an unsupported algorithm first (it must be skipped), then `first` and `second` */
static int answer(uint64_t first, uint64_t second, int requested, int *returned, mb_cudnn_perf *r) {
  mb_cudnn_perf all[3] = {{7, 9, 0.1f, (size_t)1 << 40, 0, 0, {0}}, {0, 0, 0.2f, first, 0, 0, {0}},
                          {1, 0, 0.3f, second, 0, 0, {0}}};
  *returned = requested < 3 ? requested : 3;
  memcpy(r, all, (size_t)*returned * sizeof *r);
  return 0;
}

EXPORT int cudnnGetConvolutionForwardAlgorithm_v7(mb_cudnn_handle h, mb_cudnn_tensor_desc x, mb_cudnn_filter_desc w,
                                                  mb_cudnn_conv_desc c, mb_cudnn_tensor_desc y, int requested,
                                                  int *returned, mb_cudnn_perf *r) {
  (void)h, (void)w, (void)y;
  record(x, c);
  return answer(F.ws_fwd, F.ws_fwd_alt, requested, returned, r);
}
EXPORT int cudnnGetConvolutionBackwardDataAlgorithm_v7(mb_cudnn_handle h, mb_cudnn_filter_desc w,
                                                       mb_cudnn_tensor_desc dy, mb_cudnn_conv_desc c,
                                                       mb_cudnn_tensor_desc dx, int requested, int *returned,
                                                       mb_cudnn_perf *r) {
  (void)h, (void)w, (void)dy, (void)c, (void)dx;
  return answer(F.ws_data, 0, requested, returned, r);
}
EXPORT int cudnnGetConvolutionBackwardFilterAlgorithm_v7(mb_cudnn_handle h, mb_cudnn_tensor_desc x,
                                                         mb_cudnn_tensor_desc dy, mb_cudnn_conv_desc c,
                                                         mb_cudnn_filter_desc dw, int requested, int *returned,
                                                         mb_cudnn_perf *r) {
  (void)h, (void)x, (void)dy, (void)c, (void)dw;
  return answer(F.ws_filter, 0, requested, returned, r);
}

/* The bookkeeping goes with the library when the last dlclose unloads it. */
__attribute__((destructor)) static void fake_cuda_unload(void) { free(F.allocs); }
