/* Measured mode on a real GPU (ctest label `gpu`; exit 77, skipped, without one). Checks what
 * must hold on any device: the device's figures are consistent, a replay of resnet18 gives
 * back everything it took, takes at least the segments it holds, asks cuDNN about each of the
 * 20 convolutions, and the solved batch fits. Prints the figures for the record. */
#include <stdlib.h>

#include "mbtest.h"
#include "membudget/membudget.h"

#define MIB (1024ull * 1024ull)

static mb_replay replay(mb_measure *m, const mb_model *model, mb_setup *s, int64_t batch) {
  mb_replay r;
  memset(&r, 0, sizeof r);
  r.struct_size = sizeof r;
  int rc = mb_measure_run(m, model, s, batch, &r);
  CHECK_EQ_I64(rc, MB_OK);
  if (rc != MB_OK) fprintf(stderr, "%s\n", mb_setup_errmsg(s));
  printf("batch %lld: fits %d allocated %llu reserved %llu device %llu (static %llu) conv ws %llu, %.1f ms\n",
         (long long)batch, (int)r.fits, (unsigned long long)r.allocated_peak, (unsigned long long)r.reserved_peak,
         (unsigned long long)r.device_peak, (unsigned long long)r.static_device_peak,
         (unsigned long long)r.conv_workspace, r.seconds * 1e3);
  return r;
}

int main(void) {
  mb_setup *s = NULL;
  mb_measure *m = NULL;
  mb_model *model = NULL;
  mb_setup_create(&s);
  if (mb_measure_create(s, &m) != MB_OK) {
    printf("measure_gpu: no CUDA device (%s); skipped\n", mb_measure_errmsg(m));
    mb_measure_free(m);
    mb_setup_free(s);
    return 77;
  }
  mb_device_info v = {.struct_size = sizeof v};
  CHECK(mb_measure_device(m, &v) == MB_OK);
  printf("device %s (%s) cc %d.%d, total %llu, free before %llu, context %llu (measured %d), cuBLAS %llu, "
         "cuDNN %llu, free now %llu\nnotes: %s\n",
         v.name, v.gpu ? v.gpu : "-", (int)v.cc_major, (int)v.cc_minor, (unsigned long long)v.total_memory,
         (unsigned long long)v.free_before, (unsigned long long)v.context, (int)v.context_measured,
         (unsigned long long)v.cublas, (unsigned long long)v.cudnn, (unsigned long long)v.free_now, v.notes);
  CHECK(v.name[0] != '\0');
  CHECK(v.cc_major >= 5);
  CHECK(v.free_now <= v.free_after_context && v.free_after_context <= v.total_memory);
  CHECK(v.context > 0);
  CHECK(mb_model_load_file(MB_MODELS_DIR "/resnet18.onnx", &model) == MB_OK);
  mb_replay a = replay(m, model, s, 2), b = replay(m, model, s, 16), again = replay(m, model, s, 2);
  CHECK(a.fits && b.fits && again.fits);
  CHECK(a.device_bytes + 2 * MIB >= a.reserved_peak); /* the driver hands out at least what is asked */
  CHECK(a.reserved_peak >= a.allocated_peak && a.allocated_peak >= a.static_allocated_peak);
  CHECK(b.device_bytes > a.device_bytes);
  /* everything went back: the same replay takes the same memory again (other processes on the
   * device could move it; a shared GPU makes this check noisy) */
  CHECK(again.device_bytes <= a.device_bytes + 64 * MIB && a.device_bytes <= again.device_bytes + 64 * MIB);
  if (!strstr(v.notes, "cuDNN")) CHECK_EQ_I64(a.convs, 20);
  mb_budget bu;
  memset(&bu, 0, sizeof bu);
  bu.struct_size = sizeof bu;
  CHECK(mb_measure_estimate(m, model, s, &bu) == MB_OK);
  char line[512];
  mb_budget_summary(&bu, line, sizeof line);
  printf("%s\nstatic device peak at that batch %llu; measured %llu + %llu per sample\n", line,
         (unsigned long long)bu.static_device_peak, (unsigned long long)bu.measured_fixed,
         (unsigned long long)bu.measured_per_sample);
  CHECK(bu.fits == 1 && bu.batch_size >= 1 && bu.available >= 0);
  mb_model_free(model);
  mb_measure_free(m);
  mb_setup_free(s);
  return mbt_finish("measure_gpu");
}
