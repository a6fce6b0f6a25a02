/* The CUDA context: device memory a PyTorch process holds outside the caching allocator (the
 * driver's context, kernel images, library handles), from a table by GPU generation and module
 * loading. None of these figures was measured by us (no GPU was available); each row says
 * whose measurement it rests on, and docs/allocator.md lists them as [unverified].
 *
 * Lazy module loading (CUDA_MODULE_LOADING=LAZY) needs CUDA 11.7 and a driver of r515 or newer
 * (NVIDIA, CUDA C++ Programming Guide, "Lazy Loading"); PyTorch >= 1.13 sets it itself
 * (pytorch#86509), so every PyTorch 2 wheel (CUDA 11.7 and up) loads lazily unless told not to.
 * Lazily, kernels are loaded as they are first used: the table adds an allowance for the ones a
 * training step loads (cuBLAS, cuDNN, elementwise) on top of the bare context. */
#include "budget/context.h"

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
  uint64_t bare_lazy;   /* the context right after initialisation, lazy loading */
  uint64_t eager;       /* with every kernel image loaded at start */
} ctx_row;

/* bare_lazy sources: Ampere 256 MiB "bare context", RTX 3090, torch 2.7.1+cu128 (InvokeAI
 * issue 9413); Ada 426 MiB, RTX 6000 Ada, torch 2.10+cu130, after mem_get_info (unsloth-zoo
 * PR 1053); the others "~300 MB" with lazy loading, GPU not stated (ptrblck, pytorch issue
 * 107667) [unverified for these generations]. eager sources: 721 MB GTX 1080 with CUDA 10.1 and
 * 1,687 MB RTX 3090 with CUDA 11.1, torch 1.8 (pytorch issue 55277); Ada, Hopper and Blackwell
 * take Ampere's [unverified]. */
static const ctx_row rows[] = {
  {"pre-Ampere", 0, 79, MIB(300), MB(721)},
  {"Ampere", 80, 87, MIB(256), MB(1687)},
  {"Ada", 88, 89, MIB(426), MB(1687)},
  {"Hopper", 90, 99, MIB(300), MB(1687)},
  {"Blackwell", 100, 199, MIB(300), MB(1687)},
};
static const ctx_row unknown = {"unknown GPU", 0, 0, MIB(300), MB(1687)};

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
  uint64_t bytes = eager ? row->eager : row->bare_lazy + LAZY_KERNELS;
  if (rule)
    snprintf(rule, rule_size, "%s, %s loading: %s [unverified]", row->generation, eager ? "eager" : "lazy",
             eager ? "every kernel image at start" : "bare context + 200 MiB of kernels loaded by the step");
  return bytes;
}
