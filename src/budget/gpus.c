/* Common training GPUs: total memory as the driver reports it (nvidia-smi "Total", MiB), the
 * cuBLAS workspace PyTorch allocates per handle (thread) and stream on that architecture
 * (aten/src/ATen/cuda/CublasHandlePool.cpp, parseChosenWorkspaceSize: 4096 KiB x 2 + 16 KiB x 8
 * by default, 4096 KiB x 8 on compute capability 9.x, and on 10.x / 12.x in current PyTorch),
 * and the compute capability (major x 10 + minor), which picks the context table's row.
 * The H100 80GB's and the H200's memory is what a process can have, measured (cudaMemGetInfo's
 * and torch.cuda.get_device_properties' total, driver 580.159.04): nvidia-smi's Total of 81,559
 * MiB holds 480 MiB the driver keeps for itself on the H100 (bench/truth/results/gpu-h100.json),
 * its 143,771 MiB about 615 MiB on the H200 (150,109,880,320 bytes a process can have, not a
 * whole number of MiB; results/gpu-h200.json). The other rows are nvidia-smi's figures, which on
 * those GPUs too may hold such a reserve [unverified]. */
#include "budget/gpus.h"

#include <string.h>

#define MIB(x) ((uint64_t)(x) * 1048576u)
#define WS_PRE_HOPPER 8519680u
#define WS_HOPPER 33554432u

static const mb_gpu gpus[] = {
  {"h100-80gb", "NVIDIA H100 80GB HBM3 (SXM or PCIe)", MIB(81079), WS_HOPPER, 90},
  {"h100-94gb", "NVIDIA H100 NVL 94GB", MIB(95830), WS_HOPPER, 90},
  {"h200", "NVIDIA H200 141GB", UINT64_C(150109880320), WS_HOPPER, 90},
  {"gh200", "NVIDIA GH200 96GB", MIB(97871), WS_HOPPER, 90},
  {"b200", "NVIDIA B200 180GB", MIB(183359), WS_HOPPER, 100},
  {"a100-80gb", "NVIDIA A100 80GB", MIB(81920), WS_PRE_HOPPER, 80},
  {"a100-40gb", "NVIDIA A100 40GB", MIB(40960), WS_PRE_HOPPER, 80},
  {"l40s", "NVIDIA L40S 48GB", MIB(46068), WS_PRE_HOPPER, 89},
  {"l40", "NVIDIA L40 48GB", MIB(46068), WS_PRE_HOPPER, 89},
  {"l4", "NVIDIA L4 24GB", MIB(23034), WS_PRE_HOPPER, 89},
  {"a10g", "NVIDIA A10G 24GB (AWS)", MIB(23028), WS_PRE_HOPPER, 86},
  {"a10", "NVIDIA A10 24GB", MIB(23028), WS_PRE_HOPPER, 86},
  {"a6000", "NVIDIA RTX A6000 48GB", MIB(49140), WS_PRE_HOPPER, 86},
  {"rtx6000-ada", "NVIDIA RTX 6000 Ada 48GB", MIB(49140), WS_PRE_HOPPER, 89},
  {"rtx4090", "NVIDIA GeForce RTX 4090 24GB", MIB(24564), WS_PRE_HOPPER, 89},
  {"rtx3090", "NVIDIA GeForce RTX 3090 24GB", MIB(24576), WS_PRE_HOPPER, 86},
  {"t4", "NVIDIA T4 16GB", MIB(15360), WS_PRE_HOPPER, 75},
  {"v100-16gb", "NVIDIA V100 16GB", MIB(16384), WS_PRE_HOPPER, 70},
  {"v100-32gb", "NVIDIA V100 32GB", MIB(32768), WS_PRE_HOPPER, 70},
};
#define N_GPUS (sizeof gpus / sizeof gpus[0])

const mb_gpu *mb_gpu_find(const char *name) {
  for (size_t i = 0; i < N_GPUS; i++) {
    const char *a = gpus[i].name, *b = name;
    /* case-insensitive, '_' and ' ' taken as '-' */
    for (; *a && *b; a++, b++) {
      char c = *b >= 'A' && *b <= 'Z' ? (char)(*b - 'A' + 'a') : *b;
      if (c == '_' || c == ' ') c = '-';
      if (c != *a) break;
    }
    if (!*a && !*b) return &gpus[i];
  }
  return NULL;
}

uint64_t mb_gpu_default_workspace(void) { return WS_HOPPER; }

MB_API size_t mb_gpu_num(void) { return N_GPUS; }

MB_API int mb_gpu_get(size_t i, const char **name, const char **description, uint64_t *memory) {
  if (i >= N_GPUS) return MB_E_RANGE;
  if (name) *name = gpus[i].name;
  if (description) *description = gpus[i].description;
  if (memory) *memory = gpus[i].memory;
  return MB_OK;
}
