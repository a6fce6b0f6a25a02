/* Measured mode against the fake CUDA device (tests/cuda/fake_cuda.c): the session's device
 * figures, the failures (no device, no runtime, a bad ordinal), the pool's segment rules, the
 * GPU-table match, and replays of resnet18 (workspace queries, out of memory, nothing left on
 * the device, no descriptor leaked). Every expected figure follows from the fake's settings by
 * hand; the pool's from PyTorch's allocator rules (../shared/docs/training-memory-model.md 3.3,
 * whose examples are used as they stand). */
#include <dlfcn.h>
#include <stdlib.h>

#include "budget/setup.h"
#include "cuda/device.h"
#include "cuda/pool.h"
#include "fake_cuda.h"
#include "mbtest.h"
#include "membudget/membudget.h"

#define MIB (1024ull * 1024ull)
static const char *FAKE = MB_FAKE_CUDA;
static fake_cuda_reset_fn fake_reset;
static fake_cuda_stats_fn fake_stats;

static const char *const lib_keys[] = {"cuda_runtime", "cuda_driver", "nvml_library", "cublas_library",
                                       "cublaslt_library", "cudnn_library"};

static void env(const char *name, unsigned long long v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%llu", v);
  setenv(name, buf, 1);
}

/* The fake's defaults for these tests: 4 GiB, others 100 MiB, context 300 MiB, cuBLAS 4 MiB +
 * 8 MiB of kernels, cuBLASLt 2 MiB, cuDNN 6 MiB, 2 MiB pages. */
static void fake_defaults(void) {
  static const char *const vars[] = {"FAKE_CUDA_DEVICES", "FAKE_CUDA_NAME", "FAKE_CUDA_CC", "FAKE_CUDA_CONTEXT_EXISTS",
                                     "FAKE_CUDNN_WS_FWD", "FAKE_CUDNN_WS_FWD_ALT", "FAKE_CUDNN_WS_DATA",
                                     "FAKE_CUDNN_WS_FILTER", "FAKE_CUBLASLT_WS"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
  env("FAKE_CUDA_TOTAL", 4096 * MIB);
  env("FAKE_CUDA_OTHERS", 100 * MIB);
  env("FAKE_CUDA_CONTEXT", 300 * MIB);
  fake_reset();
}

static mb_setup *fake_setup(void) {
  mb_setup *s = NULL;
  mb_setup_create(&s);
  for (size_t k = 0; k < sizeof lib_keys / sizeof lib_keys[0]; k++) CHECK(mb_setup_set(s, lib_keys[k], FAKE) == MB_OK);
  return s;
}

static mb_device_info device(mb_measure *m) {
  mb_device_info v;
  memset(&v, 0, sizeof v);
  v.struct_size = sizeof v;
  CHECK(mb_measure_device(m, &v) == MB_OK);
  return v;
}

static void test_device_figures(void) {
  fake_defaults();
  mb_setup *s = fake_setup();
  mb_measure *m = NULL;
  CHECK(mb_measure_create(s, &m) == MB_OK);
  mb_device_info v = device(m);
  CHECK_CONTAINS(v.name, "Fake GPU");
  CHECK(v.gpu == NULL);
  CHECK_EQ_I64(v.cc_major, 9);
  CHECK_EQ_U64(v.total_memory, 4096 * MIB);
  CHECK_EQ_U64(v.free_before, 3996 * MIB);        /* 4096 - 100 held by others */
  CHECK_EQ_U64(v.free_after_context, 3696 * MIB); /* - 300 of context */
  CHECK_EQ_U64(v.context, 300 * MIB);
  CHECK_EQ_I64(v.context_measured, 1);
  CHECK_EQ_U64(v.cublas, 14 * MIB);               /* handle 4 + first GEMM's kernels 8 + cuBLASLt 2 */
  CHECK_EQ_U64(v.cudnn, 6 * MIB);
  CHECK_EQ_U64(v.free_now, 3676 * MIB);
  CHECK_EQ_U64(v.other_processes, 100 * MIB);
  CHECK_CONTAINS(v.runtime_path, "fake_cuda");
  CHECK(v.notes[0] == '\0');
  fake_cuda_stats st;
  fake_stats(&st);
  CHECK_EQ_I64(st.live_allocs, 0); /* the first GEMM's buffer is freed again */
  CHECK_EQ_I64(st.cublas_handles, 1);
  mb_measure_free(m);
  fake_stats(&st);
  CHECK_EQ_I64(st.cublas_handles + st.cublaslt_handles + st.cudnn_handles, 0);
  mb_setup_free(s);
}

static void test_context_existed(void) {
  fake_defaults();
  setenv("FAKE_CUDA_CONTEXT_EXISTS", "1", 1);
  fake_reset();
  mb_setup *s = fake_setup();
  mb_measure *m = NULL;
  CHECK(mb_measure_create(s, &m) == MB_OK);
  mb_device_info v = device(m);
  CHECK_EQ_U64(v.free_before, 3696 * MIB); /* the context was already there */
  CHECK_EQ_U64(v.context, 0);
  CHECK_EQ_I64(v.context_measured, 0);
  CHECK_EQ_U64(v.other_processes, 400 * MIB); /* counted as in use */
  CHECK_CONTAINS(v.notes, "had a context");
  mb_measure_free(m);
  mb_setup_free(s);
}

static void test_without_nvml(void) {
  fake_defaults();
  mb_setup *s = fake_setup();
  CHECK(mb_setup_set(s, "nvml_library", "") == MB_OK);
  mb_measure *m = NULL;
  CHECK(mb_measure_create(s, &m) == MB_OK);
  mb_device_info v = device(m);
  CHECK_EQ_U64(v.free_before, 0);
  CHECK_EQ_U64(v.context, 400 * MIB); /* total - free after the context: others included */
  CHECK_EQ_I64(v.context_measured, 0);
  CHECK_EQ_U64(v.other_processes, 0);
  CHECK_CONTAINS(v.notes, "NVML (libnvidia-ml) left out");
  CHECK_CONTAINS(v.notes, "unknown without NVML");
  mb_measure_free(m);
  mb_setup_free(s);
}

static void test_failures(void) {
  fake_defaults();
  setenv("FAKE_CUDA_DEVICES", "0", 1);
  fake_reset();
  mb_setup *s = fake_setup();
  mb_measure *m = NULL;
  CHECK(mb_measure_create(s, &m) == MB_E_NO_CUDA);
  CHECK_CONTAINS(mb_measure_errmsg(m), "no CUDA device");
  CHECK_CONTAINS(mb_measure_errmsg(m), "cudaErrorNoDevice");
  CHECK_CONTAINS(mb_measure_errmsg(m), FAKE);
  /* every call on the failed session says the same */
  mb_model *model = NULL;
  CHECK(mb_model_load_file(MB_MODELS_DIR "/resnet18.onnx", &model) == MB_OK);
  mb_replay r = {.struct_size = sizeof r};
  CHECK(mb_measure_run(m, model, s, 2, &r) == MB_E_NO_CUDA);
  CHECK_CONTAINS(mb_setup_errmsg(s), "cudaErrorNoDevice");
  mb_budget b = {.struct_size = sizeof b};
  CHECK(mb_measure_estimate(m, model, s, &b) == MB_E_NO_CUDA);
  mb_device_info v = {.struct_size = sizeof v};
  CHECK(mb_measure_device(m, &v) == MB_E_NO_CUDA);
  mb_measure_free(m);

  fake_defaults();
  CHECK(mb_setup_set(s, "cuda_device", "3") == MB_OK);
  CHECK(mb_measure_create(s, &m) == MB_E_INVALID_ARG);
  CHECK_CONTAINS(mb_measure_errmsg(m), "cuda_device 3: the CUDA runtime sees 1 device (0..0)");
  mb_measure_free(m);
  CHECK(mb_setup_set(s, "cuda_device", "0") == MB_OK);
  CHECK(mb_setup_set(s, "cuda_device", "-1") == MB_E_INVALID_ARG);
  CHECK(mb_setup_set(s, "cuda_runtime", "") == MB_E_INVALID_ARG);

  CHECK(mb_setup_set(s, "cuda_runtime", "/nonexistent/libcudart.so.13") == MB_OK);
  CHECK(mb_measure_create(s, &m) == MB_E_NO_CUDA);
  CHECK_CONTAINS(mb_measure_errmsg(m), "could not load the CUDA runtime (libcudart)");
  CHECK_CONTAINS(mb_measure_errmsg(m), "/nonexistent/libcudart.so.13");
  CHECK_CONTAINS(mb_measure_errmsg(m), "cuda_runtime");
  mb_measure_free(m);

  /* a file without the runtime's entry points */
  CHECK(mb_setup_set(s, "cuda_runtime", "libm.so.6") == MB_OK);
  CHECK(mb_measure_create(s, &m) == MB_E_NO_CUDA);
  CHECK_CONTAINS(mb_measure_errmsg(m), "libm.so.6 lacks cudaGetDeviceCount");
  mb_measure_free(m);

  /* an optional library missing is a note, not a failure */
  CHECK(mb_setup_set(s, "cuda_runtime", FAKE) == MB_OK);
  CHECK(mb_setup_set(s, "cudnn_library", "/nonexistent/libcudnn.so.9") == MB_OK);
  CHECK(mb_measure_create(s, &m) == MB_OK);
  CHECK_CONTAINS(device(m).notes, "cuDNN not loaded (/nonexistent/libcudnn.so.9");
  CHECK_EQ_U64(device(m).cudnn, 0);
  mb_measure_free(m);
  CHECK(mb_measure_create(NULL, NULL) == MB_E_INVALID_ARG);
  mb_measure_free(NULL);
  mb_model_free(model);
  mb_setup_free(s);
}

static void test_pool(void) {
  fake_defaults();
  mb_setup *s = fake_setup();
  mb_measure *m = NULL;
  CHECK(mb_measure_create(s, &m) == MB_OK); /* the fake's context exists now */
  mb_cuda c;
  memset(&c, 0, sizeof c);
  mb_diag d;
  mb_diag_init(&d);
  CHECK(mb_cuda_load(&c, &s->cuda, &d) == MB_OK);
  mb_pool p;
  mb_pool_init(&p, &c, 0);
  fake_cuda_stats st0, st;
  fake_stats(&st0);
  int32_t a, b, e, f, g;
  bool oom = false;
  CHECK_EQ_U64(mb_pool_round(1), 512);
  CHECK_EQ_U64(mb_pool_round(1200), 1536);
  /* "a 4 KB tensor takes a 4 KiB block from a 2 MiB segment" */
  CHECK(mb_pool_alloc(&p, 4096, &a, &oom, &d) == MB_OK && !oom);
  CHECK_EQ_U64(p.reserved, 2 * MIB);
  CHECK_EQ_U64(p.allocated, 4096);
  CHECK(mb_pool_alloc(&p, 100, &b, &oom, &d) == MB_OK); /* same segment */
  CHECK_EQ_U64(p.reserved, 2 * MIB);
  /* "a 6.4 MB tensor reserves a 20 MiB segment (the remainder is split off as a free block)" */
  CHECK(mb_pool_alloc(&p, 6400000, &e, &oom, &d) == MB_OK);
  CHECK_EQ_U64(p.reserved, 22 * MIB);
  /* a second one fits the split-off remainder: no new segment */
  CHECK(mb_pool_alloc(&p, 6400000, &f, &oom, &d) == MB_OK);
  CHECK_EQ_U64(p.reserved, 22 * MIB);
  /* "an 11.5 MiB request gets a 12 MiB segment and is not split: allocated grows by 12 MiB" */
  uint64_t before = p.allocated;
  CHECK(mb_pool_alloc(&p, 11 * MIB + MIB / 2, &g, &oom, &d) == MB_OK);
  CHECK_EQ_U64(p.reserved, 34 * MIB);
  CHECK_EQ_U64(p.allocated - before, 12 * MIB);
  /* "a 10.5 MiB request gets a 12 MiB segment and the 1.5 MiB remainder is split off" */
  int32_t h;
  before = p.allocated;
  CHECK(mb_pool_alloc(&p, 10 * MIB + MIB / 2, &h, &oom, &d) == MB_OK);
  CHECK_EQ_U64(p.reserved, 46 * MIB);
  CHECK_EQ_U64(p.allocated - before, 10 * MIB + MIB / 2);
  /* freed blocks merge with their free neighbours and are reused: the two 6.4 MB blocks and
   * the rest of their 20 MiB segment become one block that holds a 15 MiB request */
  mb_pool_free(&p, e);
  mb_pool_free(&p, f);
  int32_t i;
  CHECK(mb_pool_alloc(&p, 15 * MIB, &i, &oom, &d) == MB_OK);
  CHECK_EQ_U64(p.reserved, 46 * MIB);
  CHECK_EQ_U64(p.peak_reserved, 46 * MIB);
  CHECK_EQ_I64(p.mallocs, 4);
  /* the fake saw exactly those segments, each touched whole */
  fake_stats(&st);
  CHECK_EQ_U64(st.live_bytes - st0.live_bytes, 46 * MIB);
  CHECK_EQ_U64(st.memset_bytes - st0.memset_bytes, 46 * MIB);
  /* a request the device cannot hold: the cache is given back first, then oom */
  int32_t big;
  CHECK(mb_pool_alloc(&p, 8000 * MIB, &big, &oom, &d) == MB_OK);
  CHECK(oom && big < 0);
  mb_pool_destroy(&p);
  fake_stats(&st);
  CHECK_EQ_I64(st.live_allocs, 0);
  mb_cuda_unload(&c);
  (void)a, (void)b, (void)g, (void)h, (void)i;
  mb_measure_free(m);
  mb_setup_free(s);
}

static void test_gpu_match(void) {
  CHECK(mb_gpu_match("NVIDIA H100 80GB HBM3", 81559 * MIB) && !strcmp(mb_gpu_match("NVIDIA H100 80GB HBM3", 81559 * MIB), "h100-80gb"));
  CHECK(!strcmp(mb_gpu_match("NVIDIA H100 NVL", 95830 * MIB), "h100-94gb"));
  CHECK(!strcmp(mb_gpu_match("NVIDIA A100-SXM4-80GB", 81920 * MIB), "a100-80gb"));
  CHECK(!strcmp(mb_gpu_match("NVIDIA A100-SXM4-40GB", 40536 * MIB), "a100-40gb"));
  CHECK(!strcmp(mb_gpu_match("NVIDIA GH200 480GB", 97871 * MIB), "gh200"));
  /* the name and total memory an H200 reported (bench/truth/results/gpu-h200.json) */
  CHECK(mb_gpu_match("NVIDIA H200", UINT64_C(150109880320)) && !strcmp(mb_gpu_match("NVIDIA H200", UINT64_C(150109880320)), "h200"));
  CHECK(!strcmp(mb_gpu_match("NVIDIA A10G", 23028 * MIB), "a10g"));
  CHECK(!strcmp(mb_gpu_match("NVIDIA L40S", 46068 * MIB), "l40s"));
  CHECK(!strcmp(mb_gpu_match("NVIDIA L4", 23034 * MIB), "l4"));
  CHECK(!strcmp(mb_gpu_match("NVIDIA RTX 6000 Ada Generation", 49140 * MIB), "rtx6000-ada"));
  CHECK(!strcmp(mb_gpu_match("Tesla T4", 15360 * MIB), "t4"));
  CHECK(mb_gpu_match("Fake GPU", 4096 * MIB) == NULL);
  CHECK(mb_gpu_match("NVIDIA H100 80GB HBM3", 16384 * MIB) == NULL); /* the memory disagrees */
}

static mb_replay replay(mb_measure *m, const mb_model *model, mb_setup *s, int64_t batch) {
  mb_replay r;
  memset(&r, 0, sizeof r);
  r.struct_size = sizeof r;
  int rc = mb_measure_run(m, model, s, batch, &r);
  CHECK(rc == MB_OK);
  if (rc != MB_OK) fprintf(stderr, "mb_measure_run: %s\n", mb_setup_errmsg(s));
  return r;
}

static void test_resnet_replay(void) {
  fake_defaults();
  env("FAKE_CUDNN_WS_FWD", 3 * MIB);
  env("FAKE_CUDNN_WS_DATA", 5 * MIB);
  env("FAKE_CUDNN_WS_FILTER", 7 * MIB);
  env("FAKE_CUBLASLT_WS", 64 * MIB); /* more than the 32 MiB limit: capped */
  fake_reset();
  mb_setup *s = fake_setup();
  mb_measure *m = NULL;
  mb_model *model = NULL;
  CHECK(mb_measure_create(s, &m) == MB_OK);
  CHECK(mb_model_load_file(MB_MODELS_DIR "/resnet18.onnx", &model) == MB_OK);
  fake_cuda_stats before, after;
  fake_stats(&before);
  mb_replay r = replay(m, model, s, 2);
  fake_stats(&after);
  CHECK_EQ_I64(r.fits, 1);
  CHECK_EQ_I64(r.batch, 2);
  CHECK_EQ_I64(r.convs, 20);                         /* resnet18's 20 convolutions, each asked once */
  CHECK_EQ_I64(after.conv_queries - before.conv_queries, 20);
  CHECK_EQ_U64(r.conv_workspace, 7 * MIB);           /* the largest: backward filter */
  CHECK_EQ_U64(r.matmul_workspace, 32 * MIB);        /* sm90 without a table entry: 32 MiB limit */
  CHECK_EQ_U64(after.last_lt_limit, 32 * MIB);
  CHECK(r.matmuls >= 2);                             /* fc forward and backward */
  int32_t dims[4] = {2, 512, 7, 7};                  /* layer4.1.conv2's input, the last asked */
  CHECK(after.last_conv_nd == 4 && !memcmp(after.last_conv_dims, dims, sizeof dims));
  CHECK(after.last_conv_pad[0] == 1 && after.last_conv_stride[0] == 1 && after.last_conv_groups == 1);
  /* every segment is whole 2 MiB pages, so the device lost exactly the reserved peak */
  CHECK_EQ_U64(r.device_bytes, r.reserved_peak);
  CHECK_EQ_U64(r.device_peak, r.device_bytes + (300 + 14 + 6) * MIB);
  CHECK_EQ_I64(r.segments, after.mallocs - before.mallocs);
  CHECK(r.reserved_peak >= r.allocated_peak && r.allocated_peak >= r.static_allocated_peak);
  CHECK(r.forward_device_bytes <= r.device_bytes && r.forward_device_bytes > 0);
  CHECK_EQ_U64(after.memset_bytes - before.memset_bytes, r.reserved_peak); /* no segment released */
  CHECK_EQ_I64(after.live_allocs, 0);
  CHECK_EQ_I64(after.host_objects, 0);               /* every descriptor destroyed */

  /* sm80: the cuBLAS workspace limit is 8.125 MiB (PyTorch's default before Hopper) */
  mb_measure_free(m);
  setenv("FAKE_CUDA_CC", "8.0", 1);
  fake_reset();
  CHECK(mb_measure_create(s, &m) == MB_OK);
  r = replay(m, model, s, 2);
  fake_stats(&after);
  CHECK_EQ_U64(r.matmul_workspace, 8519680);
  CHECK_EQ_U64(after.last_lt_limit, 8519680);

  /* a workspace the device cannot hold falls back to the next algorithm */
  mb_measure_free(m);
  unsetenv("FAKE_CUDA_CC");
  env("FAKE_CUDNN_WS_FWD", 100000 * MIB);
  env("FAKE_CUDNN_WS_FWD_ALT", 1 * MIB);
  env("FAKE_CUDNN_WS_DATA", 0);
  env("FAKE_CUDNN_WS_FILTER", 0);
  fake_reset();
  CHECK(mb_measure_create(s, &m) == MB_OK);
  r = replay(m, model, s, 2);
  CHECK_EQ_I64(r.fits, 1);
  CHECK_EQ_U64(r.conv_workspace, 1 * MIB); /* the second algorithm's */
  mb_measure_free(m);
  mb_model_free(model);
  mb_setup_free(s);
}

static void test_out_of_memory_and_solve(void) {
  fake_defaults();
  env("FAKE_CUDA_TOTAL", 1024 * MIB);
  fake_reset();
  mb_setup *s = fake_setup();
  mb_measure *m = NULL;
  mb_model *model = NULL;
  CHECK(mb_measure_create(s, &m) == MB_OK);
  CHECK(mb_model_load_file(MB_MODELS_DIR "/resnet18.onnx", &model) == MB_OK);
  mb_replay r = replay(m, model, s, 4096); /* far more than 1 GiB */
  CHECK_EQ_I64(r.fits, 0);
  fake_cuda_stats st;
  fake_stats(&st);
  CHECK(st.failed_mallocs >= 1);
  CHECK_EQ_I64(st.live_allocs, 0);
  /* the solved batch fits, one more does not (utilization 0.9 of 1 GiB, others counted) */
  mb_budget b;
  memset(&b, 0, sizeof b);
  b.struct_size = sizeof b;
  CHECK(mb_measure_estimate(m, model, s, &b) == MB_OK);
  CHECK_EQ_I64(b.mode, MB_MODE_MEASURED);
  CHECK_EQ_I64(b.solved, 1);
  CHECK_EQ_I64(b.fits, 1);
  CHECK_EQ_U64(b.device_memory, 1024 * MIB);
  CHECK_EQ_U64(b.usable_memory, (uint64_t)(1024.0 * MIB * 0.9));
  CHECK_EQ_U64(b.other_processes, 100 * MIB);
  CHECK_EQ_U64(b.context, 320 * MIB);
  CHECK(b.batch_size >= 1 && b.batch_size < 4096);
  /* the safety margin (budget/margin.c) is held back in measured mode too */
  uint64_t room = b.usable_memory - b.margin_bytes;
  CHECK_EQ_U64(b.margin_bytes, (uint64_t)((double)b.usable_memory * b.margin));
  CHECK_EQ_I64(b.available, (int64_t)room - (int64_t)(100 * MIB) - (int64_t)b.device_peak);
  mb_replay at = replay(m, model, s, b.batch_size), next = replay(m, model, s, b.batch_size + 1);
  CHECK_EQ_U64(at.device_peak, b.device_peak);
  CHECK(at.fits && 100 * MIB + at.device_peak <= room);
  CHECK(!next.fits || 100 * MIB + next.device_peak > room);
  CHECK(b.static_device_peak == at.static_device_peak);
  CHECK(b.measured_per_sample > 0);
  char line[512];
  mb_budget_summary(&b, line, sizeof line);
  CHECK_CONTAINS(line, "mode=measured");
  /* an older caller's smaller budget gets the fields it knows */
  mb_budget small;
  memset(&small, 0xAB, sizeof small);
  small.struct_size = (uint32_t)offsetof(mb_budget, measured_fixed);
  CHECK(mb_measure_estimate(m, model, s, &small) == MB_OK);
  CHECK_EQ_I64(small.batch_size, b.batch_size);
  CHECK_EQ_U64(small.measured_fixed, 0xABABABABABABABABull); /* untouched */
  mb_replay bad = {.struct_size = 8};
  CHECK(mb_measure_run(m, model, s, 2, &bad) == MB_E_INVALID_ARG);
  CHECK(mb_measure_run(m, model, s, 0, &r) == MB_E_INVALID_ARG);
  CHECK_EQ_U64(mb_struct_size(MB_STRUCT_REPLAY), sizeof(mb_replay));
  CHECK_EQ_U64(mb_struct_size(MB_STRUCT_DEVICE_INFO), sizeof(mb_device_info));
  fake_stats(&st);
  CHECK_EQ_I64(st.live_allocs, 0);
  mb_measure_free(m);
  mb_model_free(model);
  mb_setup_free(s);
}

int main(void) {
  void *h = dlopen(FAKE, RTLD_NOW | RTLD_LOCAL); /* held, so its state lives across sessions */
  if (!h) {
    fprintf(stderr, "cannot load the fake CUDA library %s: %s\n", FAKE, dlerror());
    return 1;
  }
  void *reset = dlsym(h, "fake_cuda_reset"), *stats = dlsym(h, "fake_cuda_stats_get");
  memcpy(&fake_reset, &reset, sizeof reset);
  memcpy(&fake_stats, &stats, sizeof stats);
  test_device_figures();
  test_context_existed();
  test_without_nvml();
  test_failures();
  test_pool();
  test_gpu_match();
  test_resnet_replay();
  test_out_of_memory_and_solve();
  dlclose(h);
  return mbt_finish("measure");
}
