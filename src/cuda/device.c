/* Opening the device, and measuring what the context and the libraries take: free memory
 * before the context (NVML: cudart cannot ask without creating one), after it, after a cuBLAS
 * handle and its first GEMM (kernels load lazily, as users run them: CUDA_MODULE_LOADING is
 * left as the user set it), after a cuBLASLt and a cuDNN handle. */
#include "cuda/device.h"
#include "util/checked.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>


static int mem_free(mb_cuda *c, uint64_t *free_bytes, uint64_t *total, mb_diag *d) {
  size_t f = 0, t = 0;
  cudaError_t e = c->rt.mem_get_info(&f, &t);
  if (e != cudaSuccess) {
    char buf[256];
    return mb_fail(d, MB_E_NO_CUDA, "cudaMemGetInfo failed: %s", mb_cuda_strerror(c, e, buf, sizeof buf));
  }
  *free_bytes = f;
  if (total) *total = t;
  return MB_OK;
}

/* lower-case letters and digits only: "NVIDIA A100-SXM4-80GB" -> "nvidiaa100sxm480gb" */
static void squeeze(char *out, size_t size, const char *s, bool drop_memory_suffix) {
  size_t n = 0, end = strlen(s);
  if (drop_memory_suffix) { /* "h100-80gb" -> "h100": the table's memory is compared apart */
    const char *dash = strrchr(s, '-');
    if (dash && dash[1] && isdigit((unsigned char)dash[1]) && strstr(dash, "gb")) end = (size_t)(dash - s);
  }
  for (size_t i = 0; i < end && n + 1 < size; i++)
    if (isalnum((unsigned char)s[i])) out[n++] = (char)tolower((unsigned char)s[i]);
  out[n] = '\0';
}

const char *mb_gpu_match(const char *device_name, uint64_t total) {
  char dev[256];
  squeeze(dev, sizeof dev, device_name, false);
  const char *best = NULL;
  size_t best_len = 0;
  uint64_t best_gap = UINT64_MAX;
  for (size_t i = 0; i < mb_gpu_num(); i++) {
    const char *name;
    uint64_t memory;
    mb_gpu_get(i, &name, NULL, &memory);
    char token[64];
    squeeze(token, sizeof token, name, true);
    size_t len = strlen(token);
    uint64_t gap = memory > total ? memory - total : total - memory;
    if (!len || !strstr(dev, token) || gap > memory / 10) continue;
    if (len > best_len || (len == best_len && gap < best_gap)) {
      best = name;
      best_len = len;
      best_gap = gap;
    }
  }
  return best;
}

static void context_state(mb_cuda *c, int ordinal, bool *existed) {
  *existed = false;
  if (!mb_cuda_has(c, MB_CUDA_LIB_DRIVER)) return;
  CUdevice dev;
  unsigned flags = 0;
  int active = 0;
  if (c->drv.init(0) != CUDA_SUCCESS || c->drv.device_get(&dev, ordinal) != CUDA_SUCCESS ||
      c->drv.primary_ctx_state(dev, &flags, &active) != CUDA_SUCCESS) {
    mb_cuda_note(c, "the driver could not say whether a context existed; assumed not");
    return;
  }
  *existed = active != 0;
}

static void free_before(mb_cuda *c, const char *bus_id, mb_device_state *st) {
  if (!mb_cuda_has(c, MB_CUDA_LIB_NVML)) return;
  int rc = c->nvml.init();
  if (rc != 0) {
    mb_cuda_note(c, "nvmlInit failed: %s", c->nvml.error_string(rc));
    return;
  }
  c->nvml_on = true;
  mb_nvml_device dev = NULL;
  mb_nvml_memory m;
  if ((rc = c->nvml.device_by_pci_bus_id(bus_id, &dev)) != 0 || (rc = c->nvml.memory_info(dev, &m)) != 0) {
    mb_cuda_note(c, "NVML has no memory figure for device %s: %s", bus_id, c->nvml.error_string(rc));
    return;
  }
  st->free_before = m.free;
}

/* A tiny GEMM on the cuBLAS handle, so the kernels it needs are loaded as a model's first
 * matmul loads them (its buffer is freed again: what stays is handle and kernels). */
static void first_gemm(mb_cuda *c) {
  float *buf3 = NULL;
  if (c->rt.malloc((void **)&buf3, 3 * sizeof(float)) != cudaSuccess) {
    mb_cuda_note(c, "no memory for a first cuBLAS GEMM: its kernels are not counted");
    return;
  }
  const float one = 1.0f, zero = 0.0f;
  c->rt.memset(buf3, 0, 3 * sizeof(float));
  if (c->blas.sgemm(c->blas_handle, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, buf3, 1, buf3 + 1, 1, &zero, buf3 + 2,
                    1) != CUBLAS_STATUS_SUCCESS)
    mb_cuda_note(c, "the first cuBLAS GEMM failed: its kernels are not counted");
  c->rt.synchronize();
  c->rt.free(buf3);
}

/* The library handles, each measured as the drop of free memory while it was created. */
static int create_handles(mb_cuda *c, mb_device_state *st, mb_diag *d) {
  uint64_t f0 = 0, f1 = 0, f2 = 0;
  if (mem_free(c, &f0, NULL, d) != MB_OK) return d->status;
  if (mb_cuda_has(c, MB_CUDA_LIB_CUBLAS)) {
    cublasStatus_t rc = c->blas.create(&c->blas_handle);
    if (rc == CUBLAS_STATUS_SUCCESS) {
      first_gemm(c);
    } else {
      c->blas_handle = NULL;
      mb_cuda_note(c, "cublasCreate failed (status %d): cuBLAS not measured", (int)rc);
    }
  }
  if (mb_cuda_has(c, MB_CUDA_LIB_CUBLASLT) && c->lt.create(&c->lt_handle) != CUBLAS_STATUS_SUCCESS) {
    c->lt_handle = NULL;
    mb_cuda_note(c, "cublasLtCreate failed: matmul workspaces not queried");
  }
  if (mem_free(c, &f1, NULL, d) != MB_OK) return d->status;
  st->cublas = mb_sat_sub(f0, f1);
  if (mb_cuda_has(c, MB_CUDA_LIB_CUDNN)) {
    int rc = c->dnn.create(&c->dnn_handle);
    if (rc != MB_CUDNN_STATUS_SUCCESS) {
      mb_cuda_note(c, "cudnnCreate failed: %s: convolution workspaces not queried", c->dnn.error_string(rc));
      c->dnn_handle = NULL;
    }
  }
  if (mem_free(c, &f2, NULL, d) != MB_OK) return d->status;
  st->cudnn = mb_sat_sub(f1, f2);
  return MB_OK;
}

int mb_cuda_open_device(mb_cuda *c, int ordinal, mb_device_state *st, mb_diag *d) {
  char buf[256];
  memset(st, 0, sizeof *st);
  st->ordinal = ordinal;
  c->device = ordinal;
  c->rt.runtime_version(&st->runtime_version);
  c->rt.driver_version(&st->driver_version);
  int count = 0;
  cudaError_t e = c->rt.get_device_count(&count);
  if (e != cudaSuccess)
    return mb_fail(d, MB_E_NO_CUDA, "no CUDA device: cudaGetDeviceCount of %s (CUDA runtime %d.%d) says %s%s",
                   c->path[MB_CUDA_LIB_RUNTIME], st->runtime_version / 1000, st->runtime_version % 1000 / 10,
                   mb_cuda_strerror(c, e, buf, sizeof buf),
                   st->driver_version ? "" : "; no NVIDIA driver is loaded (cudaDriverGetVersion gives 0)");
  if (count < 1)
    return mb_fail(d, MB_E_NO_CUDA, "no CUDA device: %s finds none", c->path[MB_CUDA_LIB_RUNTIME]);
  if (ordinal >= count)
    return mb_fail(d, MB_E_INVALID_ARG, "cuda_device %d: the CUDA runtime sees %d device%s (0..%d)", ordinal,
                   count, count == 1 ? "" : "s", count - 1);
  _Alignas(16) unsigned char props[8192]; /* more than any CUDA version's cudaDeviceProp */
  memset(props, 0, sizeof props);
  if ((e = c->rt.get_properties(props, ordinal)) != cudaSuccess)
    return mb_fail(d, MB_E_NO_CUDA, "cudaGetDeviceProperties(%d): %s", ordinal, mb_cuda_strerror(c, e, buf, sizeof buf));
  snprintf(st->name, sizeof st->name, "%.255s", (const char *)props);
  c->rt.get_attribute(&st->cc_major, cudaDevAttrComputeCapabilityMajor, ordinal);
  c->rt.get_attribute(&st->cc_minor, cudaDevAttrComputeCapabilityMinor, ordinal);
  char bus_id[64] = "";
  if (c->rt.get_pci_bus_id(bus_id, (int)sizeof bus_id, ordinal) != cudaSuccess) bus_id[0] = '\0';

  bool existed = false;
  context_state(c, ordinal, &existed);
  free_before(c, bus_id, st);
  if ((e = c->rt.set_device(ordinal)) != cudaSuccess || (e = c->rt.free(NULL)) != cudaSuccess)
    return mb_fail(d, MB_E_NO_CUDA, "no usable CUDA device: creating the context on device %d (%s) failed: %s",
                   ordinal, st->name, mb_cuda_strerror(c, e, buf, sizeof buf));
  if (mem_free(c, &st->free_after_context, &st->total, d) != MB_OK) return d->status;
  uint64_t base = st->free_before ? st->free_before : st->total;
  st->context = mb_sat_sub(base, st->free_after_context);
  st->others = mb_sat_sub(st->total, base);
  st->context_measured = st->free_before && !existed;
  if (existed)
    mb_cuda_note(c, "this process had a context on the device before: it counts as memory in use, the "
                    "context is not measured");
  else if (!st->free_before)
    mb_cuda_note(c, "free memory before the context is unknown without NVML: the context figure "
                    "includes what other processes hold");
  if (create_handles(c, st, d) != MB_OK) return d->status;
  if (mem_free(c, &st->free_now, NULL, d) != MB_OK) return d->status;
  st->gpu = mb_gpu_match(st->name, st->total);
  return MB_OK;
}
