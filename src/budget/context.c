/* The CUDA context: device memory a PyTorch process holds outside the caching allocator (the
 * driver's context, kernel images, library handles), from a table by GPU generation and module
 * loading. Hopper's lazy figures were measured by us on an H100 (bench/truth/results/gpu-h100.json);
 * every other row says whose measurement it rests on, and docs/allocator.md lists them as
 * [unverified].
 *
 * Lazy module loading (CUDA_MODULE_LOADING=LAZY) needs CUDA 11.7 and a driver of r515 or newer
 * (NVIDIA, CUDA C++ Programming Guide, "Lazy Loading"); PyTorch >= 1.13 sets it itself
 * (pytorch#86509), so every PyTorch 2 wheel (CUDA 11.7 and up) loads lazily unless told not to.
 * Lazily, kernels are loaded as they are first used: the table adds an allowance for the ones a
 * training step loads (cuBLAS, cuDNN, elementwise) on top of the bare context. */
#include "budget/context.h"

#include <stdbool.h>
#include <stdio.h>

#include "budget/gpus.h"

#define MIB(x) ((uint64_t)(x) * 1048576u)
#define MB(x) ((uint64_t)(x) * 1000000u)
/* kernels a training step loads lazily: "+100-300 MiB once cuDNN/cuBLAS kernels used by the
 * model are loaded" (shared notes, training-memory-model.md 4.1) [unverified] */
#define LAZY_KERNELS MIB(200)

typedef struct ctx_row {
  const char *generation;
  int cc_min, cc_max;
  uint64_t bare_lazy;    /* the context right after initialisation, lazy loading */
  uint64_t lazy_kernels; /* what a training step's kernels and library handles add to it */
  uint64_t eager;        /* with every kernel image loaded at start */
  bool measured;         /* the lazy and eager figures are our own measurement */
} ctx_row;

/* bare_lazy sources: Ampere 256 MiB "bare context", RTX 3090, torch 2.7.1+cu128 (InvokeAI
 * issue 9413); Ada 426 MiB, RTX 6000 Ada, torch 2.10+cu130, after mem_get_info (unsloth-zoo
 * PR 1053); the others "~300 MB" with lazy loading, GPU not stated (ptrblck, pytorch issue
 * 107667) [unverified for these generations]. eager sources: 721 MB GTX 1080 with CUDA 10.1 and
 * 1,687 MB RTX 3090 with CUDA 11.1, torch 1.8 (pytorch issue 55277); Ada, Hopper and Blackwell
 * take Ampere's [unverified].
 * Hopper, measured on an H100 80GB HBM3 (driver 580.159.04, CUDA 13.0, torch 2.11.0+cu130): the
 * bare context through cudart alone takes 552,402,944 bytes (NVML used and cudaMemGetInfo agree);
 * a PyTorch process after two training steps holds 742 MiB outside its allocator's reserved
 * segments (the median of 189 steps; 742 to 760 with cuBLAS, 630 for a UNet of convolutions
 * alone), so the step's kernels and handles add 742 MiB - 552,402,944 bytes. An H200 (same
 * driver and versions, results/gpu-h200.json) measured the same to the byte: a bare context of
 * 552,402,944 bytes, and a median of 742 MiB (630 to 760) over 116 steps. With
 * CUDA_MODULE_LOADING=EAGER both held 2,097 MiB outside the reserved segments after a ResNet-18
 * training step (gpu_truth.py's context probe; 1,259 MiB after the context alone). */
#define HOPPER_BARE 552402944u
static const ctx_row rows[] = {
  {"pre-Ampere", 0, 79, MIB(300), LAZY_KERNELS, MB(721), false},
  {"Ampere", 80, 87, MIB(256), LAZY_KERNELS, MB(1687), false},
  {"Ada", 88, 89, MIB(426), LAZY_KERNELS, MB(1687), false},
  {"Hopper", 90, 99, HOPPER_BARE, MIB(742) - HOPPER_BARE, MIB(2097), true},
  {"Blackwell", 100, 199, MIB(300), LAZY_KERNELS, MB(1687), false},
};
static const ctx_row unknown = {"unknown GPU", 0, 0, MIB(300), LAZY_KERNELS, MB(1687), false};

uint64_t mb_train_context(const mb_train *tr, char *rule, size_t rule_size) {
  if (tr->context_set) {
    if (rule) snprintf(rule, rule_size, tr->cpu ? "none (backend cpu)" : "given");
    return tr->context;
  }
  const mb_gpu *gpu = tr->gpu ? mb_gpu_find(tr->gpu) : NULL;
  const ctx_row *row = &unknown;
  for (size_t i = 0; gpu && i < sizeof rows / sizeof rows[0]; i++)
    if (gpu->cc >= rows[i].cc_min && gpu->cc <= rows[i].cc_max) row = &rows[i];
  bool eager = tr->eager_loading || (tr->cuda_version && tr->cuda_version < 1107) ||
               (tr->driver_version && tr->driver_version < 515);
  uint64_t bytes = eager ? row->eager : row->bare_lazy + row->lazy_kernels;
  if (rule)
    snprintf(rule, rule_size, "%s, %s loading: %s%s", row->generation, eager ? "eager" : "lazy",
             eager ? "every kernel image at start"
                   : row->measured ? "bare context + the step's kernels and handles"
                                   : "bare context + 200 MiB of kernels loaded by the step",
             row->measured ? ", measured on an H100 and an H200" : " [unverified]");
  return bytes;
}
