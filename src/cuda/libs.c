/* Loading the CUDA libraries by name at run time. A library named by the setup is the only
 * one tried; otherwise the usual sonames (the runtime's own major version first for the
 * libraries that must match it), then the toolkit this library was built against. */
#include "cuda/libs.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#ifndef MB_CUDA_LIBDIR
#define MB_CUDA_LIBDIR ""
#endif

typedef struct symbol {
  const char *name, *alt; /* alt: an older or newer name of the same entry point, or NULL */
  size_t offset;          /* of the function pointer in mb_cuda */
} symbol;

#define SYM(field, name) {name, NULL, offsetof(mb_cuda, field)}
static const symbol runtime_syms[] = {
  SYM(rt.get_device_count, "cudaGetDeviceCount"), SYM(rt.set_device, "cudaSetDevice"),
  SYM(rt.malloc, "cudaMalloc"), SYM(rt.free, "cudaFree"), SYM(rt.memset, "cudaMemset"),
  SYM(rt.mem_get_info, "cudaMemGetInfo"), SYM(rt.synchronize, "cudaDeviceSynchronize"),
  SYM(rt.get_attribute, "cudaDeviceGetAttribute"), SYM(rt.get_pci_bus_id, "cudaDeviceGetPCIBusId"),
  SYM(rt.runtime_version, "cudaRuntimeGetVersion"), SYM(rt.driver_version, "cudaDriverGetVersion"),
  SYM(rt.error_name, "cudaGetErrorName"), SYM(rt.error_string, "cudaGetErrorString"),
  SYM(rt.get_last_error, "cudaGetLastError"),
  {"cudaGetDeviceProperties_v2", "cudaGetDeviceProperties", offsetof(mb_cuda, rt.get_properties)},
  {NULL, NULL, 0}};
static const symbol driver_syms[] = {
  SYM(drv.init, "cuInit"), SYM(drv.device_get, "cuDeviceGet"),
  SYM(drv.primary_ctx_state, "cuDevicePrimaryCtxGetState"), {NULL, NULL, 0}};
static const symbol nvml_syms[] = {
  {"nvmlInit_v2", "nvmlInit", offsetof(mb_cuda, nvml.init)}, SYM(nvml.shutdown, "nvmlShutdown"),
  {"nvmlDeviceGetHandleByPciBusId_v2", "nvmlDeviceGetHandleByPciBusId",
   offsetof(mb_cuda, nvml.device_by_pci_bus_id)},
  SYM(nvml.memory_info, "nvmlDeviceGetMemoryInfo"), SYM(nvml.error_string, "nvmlErrorString"),
  {NULL, NULL, 0}};
static const symbol cublas_syms[] = {
  SYM(blas.create, "cublasCreate_v2"), SYM(blas.destroy, "cublasDestroy_v2"),
  SYM(blas.sgemm, "cublasSgemm_v2"), {NULL, NULL, 0}};
static const symbol cublaslt_syms[] = {
  SYM(lt.create, "cublasLtCreate"), SYM(lt.destroy, "cublasLtDestroy"),
  SYM(lt.desc_create, "cublasLtMatmulDescCreate"), SYM(lt.desc_destroy, "cublasLtMatmulDescDestroy"),
  SYM(lt.desc_set, "cublasLtMatmulDescSetAttribute"),
  SYM(lt.layout_create, "cublasLtMatrixLayoutCreate"), SYM(lt.layout_destroy, "cublasLtMatrixLayoutDestroy"),
  SYM(lt.layout_set, "cublasLtMatrixLayoutSetAttribute"),
  SYM(lt.pref_create, "cublasLtMatmulPreferenceCreate"), SYM(lt.pref_destroy, "cublasLtMatmulPreferenceDestroy"),
  SYM(lt.pref_set, "cublasLtMatmulPreferenceSetAttribute"),
  SYM(lt.heuristic, "cublasLtMatmulAlgoGetHeuristic"), {NULL, NULL, 0}};
static const symbol cudnn_syms[] = {
  SYM(dnn.create, "cudnnCreate"), SYM(dnn.destroy, "cudnnDestroy"),
  SYM(dnn.error_string, "cudnnGetErrorString"),
  SYM(dnn.create_tensor, "cudnnCreateTensorDescriptor"), SYM(dnn.set_tensor_nd, "cudnnSetTensorNdDescriptor"),
  SYM(dnn.destroy_tensor, "cudnnDestroyTensorDescriptor"),
  SYM(dnn.create_filter, "cudnnCreateFilterDescriptor"), SYM(dnn.set_filter_nd, "cudnnSetFilterNdDescriptor"),
  SYM(dnn.destroy_filter, "cudnnDestroyFilterDescriptor"),
  SYM(dnn.create_conv, "cudnnCreateConvolutionDescriptor"),
  SYM(dnn.set_conv_nd, "cudnnSetConvolutionNdDescriptor"),
  SYM(dnn.set_conv_groups, "cudnnSetConvolutionGroupCount"),
  SYM(dnn.set_conv_math, "cudnnSetConvolutionMathType"),
  SYM(dnn.destroy_conv, "cudnnDestroyConvolutionDescriptor"),
  SYM(dnn.fwd_algos, "cudnnGetConvolutionForwardAlgorithm_v7"),
  SYM(dnn.bwd_data_algos, "cudnnGetConvolutionBackwardDataAlgorithm_v7"),
  SYM(dnn.bwd_filter_algos, "cudnnGetConvolutionBackwardFilterAlgorithm_v7"), {NULL, NULL, 0}};
#undef SYM

/* Per library: what it is called in messages, its symbols, and its file names. "%d" is the
 * runtime's major version (libraries built for another CUDA major do not mix with it). */
static const struct {
  const char *what;
  const symbol *syms;
  const char *names[6];
} libs[MB_CUDA_LIB_COUNT] = {
  [MB_CUDA_LIB_RUNTIME] = {"the CUDA runtime (libcudart)", runtime_syms,
                           {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so", NULL}},
  [MB_CUDA_LIB_DRIVER] = {"the CUDA driver (libcuda)", driver_syms, {"libcuda.so.1", NULL}},
  [MB_CUDA_LIB_NVML] = {"NVML (libnvidia-ml)", nvml_syms, {"libnvidia-ml.so.1", NULL}},
  [MB_CUDA_LIB_CUBLAS] = {"cuBLAS", cublas_syms, {"libcublas.so.%d", "libcublas.so", NULL}},
  [MB_CUDA_LIB_CUBLASLT] = {"cuBLASLt", cublaslt_syms, {"libcublasLt.so.%d", "libcublasLt.so", NULL}},
  [MB_CUDA_LIB_CUDNN] = {"cuDNN", cudnn_syms, {"libcudnn.so.9", "libcudnn.so.8", "libcudnn.so", NULL}},
};

void mb_cuda_note(mb_cuda *c, const char *fmt, ...) {
  size_t n = strlen(c->notes);
  if (n && n + 2 < sizeof c->notes) {
    memcpy(c->notes + n, "; ", 3);
    n += 2;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->notes + n, sizeof c->notes - n, fmt, ap);
  va_end(ap);
}

const char *mb_cuda_strerror(const mb_cuda *c, cudaError_t e, char *buf, size_t size) {
  const char *name = c->rt.error_name ? c->rt.error_name(e) : NULL;
  const char *text = c->rt.error_string ? c->rt.error_string(e) : NULL;
  snprintf(buf, size, "%s (%s)", name ? name : "cudaError", text ? text : "no description");
  return buf;
}

/* Bind every symbol of lib k; on a missing one, say which and return false. */
static bool bind(mb_cuda *c, int k, void *h, char *why, size_t why_size) {
  for (const symbol *s = libs[k].syms; s->name; s++) {
    void *p = dlsym(h, s->name);
    if (!p && s->alt) p = dlsym(h, s->alt);
    if (!p) {
      snprintf(why, why_size, "%s lacks %s", c->path[k], s->name);
      return false;
    }
    memcpy((char *)c + s->offset, &p, sizeof p); /* POSIX: a dlsym'd object pointer is the function */
  }
  return true;
}

/* Forget the pointers of lib k (a failed bind leaves some pointing into an unloaded file). */
static void unbind(mb_cuda *c, int k) {
  void *null = NULL;
  for (const symbol *s = libs[k].syms; s->name; s++) memcpy((char *)c + s->offset, &null, sizeof null);
}

/* pattern with "%d" replaced by the runtime's major version (not a printf format: the table is
 * data, and -Wformat-nonliteral rightly refuses formats that are not literals). */
static void expand(char *out, size_t size, const char *pattern, int major) {
  const char *at = strstr(pattern, "%d");
  if (!at) snprintf(out, size, "%s", pattern);
  else snprintf(out, size, "%.*s%d%s", (int)(at - pattern), pattern, major, at + 2);
}

static void append(char *buf, size_t size, const char *text) {
  size_t n = strlen(buf);
  snprintf(buf + n, size - n, "%s%s", n ? "; " : "", text);
}

/* Try the candidates of library k; true when one loads with all its symbols. `tried` collects
 * "name: why" for each failure. */
static bool open_lib(mb_cuda *c, int k, const char *given, int major, char *tried, size_t tried_size) {
  char names[8][256];
  int n = 0;
  if (given) {
    snprintf(names[n++], sizeof names[0], "%s", given);
  } else {
    for (int i = 0; libs[k].names[i] && n < 6; i++) {
      if (strstr(libs[k].names[i], "%d") && major <= 0) continue;
      expand(names[n++], sizeof names[0], libs[k].names[i], major);
    }
    /* the toolkit this was built against, for systems where it is not in the loader's path */
    const char *base = libs[k].names[0];
    if (MB_CUDA_LIBDIR[0] && k != MB_CUDA_LIB_DRIVER && k != MB_CUDA_LIB_NVML && n < 8) {
      char file[128];
      expand(file, sizeof file, base, major);
      snprintf(names[n++], sizeof names[0], "%s/%s", MB_CUDA_LIBDIR, file);
    }
  }
  for (int i = 0; i < n; i++) {
    dlerror();
    void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    char why[512];
    if (!h) {
      const char *e = dlerror();
      snprintf(why, sizeof why, "%s", e ? e : names[i]);
      append(tried, tried_size, why);
      continue;
    }
    snprintf(c->path[k], sizeof c->path[k], "%s", names[i]);
    if (bind(c, k, h, why, sizeof why)) {
      c->dl[k] = h;
      return true;
    }
    append(tried, tried_size, why); /* left loaded, as every CUDA library is (mb_cuda_unload) */
    unbind(c, k);
  }
  c->path[k][0] = '\0';
  return false;
}

int mb_cuda_load(mb_cuda *c, const mb_cuda_opts *o, mb_diag *d) {
  char tried[1024] = "";
  if (!open_lib(c, MB_CUDA_LIB_RUNTIME, o ? o->lib[MB_CUDA_LIB_RUNTIME] : NULL, 0, tried, sizeof tried))
    return mb_fail(d, MB_E_NO_CUDA,
                   "no CUDA: could not load %s (tried: %s); set the setup key cuda_runtime "
                   "(CLI: MEMBUDGET_CUDA_RUNTIME) to its path", libs[MB_CUDA_LIB_RUNTIME].what, tried);
  int version = 0;
  c->rt.runtime_version(&version);
  int major = version / 1000;
  for (int k = MB_CUDA_LIB_RUNTIME + 1; k < MB_CUDA_LIB_COUNT; k++) {
    const char *given = o ? o->lib[k] : NULL;
    if (given && !*given) {
      mb_cuda_note(c, "%s left out (%s=\"\")", libs[k].what, mb_cuda_lib_key(k));
      continue;
    }
    tried[0] = '\0';
    if (!open_lib(c, k, given, major, tried, sizeof tried))
      mb_cuda_note(c, "%s not loaded (%s)", libs[k].what, tried);
  }
  return MB_OK;
}

/* The libraries stay loaded: the CUDA runtime and its libraries are not made to be unloaded
 * (their static C++ state and exit handlers, the primary context they retain), and no CUDA
 * user unloads them (PyTorch does not). A session gives back what is its own: its handles.
 * Another session, or PyTorch in the same process, finds the libraries and the context there;
 * dlopen counts the references, so nothing grows. */
void mb_cuda_unload(mb_cuda *c) {
  if (c->dnn_handle) c->dnn.destroy(c->dnn_handle);
  if (c->lt_handle) c->lt.destroy(c->lt_handle);
  if (c->blas_handle) c->blas.destroy(c->blas_handle);
  if (c->nvml_on) c->nvml.shutdown();
  c->dnn_handle = NULL;
  c->lt_handle = NULL;
  c->blas_handle = NULL;
  c->nvml_on = false;
  for (int k = 0; k < MB_CUDA_LIB_COUNT; k++) c->dl[k] = NULL;
}
