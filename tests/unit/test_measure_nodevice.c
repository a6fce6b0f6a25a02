/* Measured mode with the real CUDA runtime where there is no device (the CI machines): every
 * measured call is MB_E_NO_CUDA and the message says what the runtime said. Exits 77 (skip)
 * where a device is present: tests/unit/test_measure_gpu.c covers that case. */
#include <stdlib.h>

#include "mbtest.h"
#include "membudget/membudget.h"

int main(void) {
  mb_setup *s = NULL;
  mb_measure *m = NULL;
  mb_model *model = NULL;
  CHECK(mb_setup_create(&s) == MB_OK);
  int rc = mb_measure_create(s, &m);
  if (rc == MB_OK) {
    printf("measure_nodevice: a CUDA device is present; skipped\n");
    mb_measure_free(m);
    mb_setup_free(s);
    return 77;
  }
  CHECK_EQ_I64(rc, MB_E_NO_CUDA);
  const char *why = mb_measure_errmsg(m);
#if MB_HAVE_CUDA
  /* either the runtime was not found (the files tried are named) or it found no device (its
   * own error name is quoted) */
  CHECK(strstr(why, "could not load the CUDA runtime (libcudart)") || strstr(why, "cudaGetDeviceCount"));
  CHECK_CONTAINS(why, "libcudart");
  CHECK((mb_features() & MB_FEATURE_CUDA) != 0);
#else
  CHECK_CONTAINS(why, "built without CUDA support");
  CHECK((mb_features() & MB_FEATURE_CUDA) == 0);
#endif
  CHECK(mb_model_load_file(MB_MODELS_DIR "/resnet18.onnx", &model) == MB_OK);
  mb_replay r = {.struct_size = sizeof r};
  CHECK_EQ_I64(mb_measure_run(m, model, s, 2, &r), MB_E_NO_CUDA);
  CHECK(!strcmp(mb_setup_errmsg(s), why));
  mb_budget b = {.struct_size = sizeof b};
  CHECK_EQ_I64(mb_measure_estimate(m, model, s, &b), MB_E_NO_CUDA);
  char *doc = NULL;
  int64_t batches[2] = {1, 8};
  CHECK_EQ_I64(mb_measure_json(m, model, s, batches, 2, &doc), MB_E_NO_CUDA);
  CHECK(doc == NULL);
  CHECK_EQ_I64(mb_measure_estimate_json(m, model, s, 0, &doc, &b), MB_E_NO_CUDA);
  CHECK(doc == NULL);
  mb_device_info v = {.struct_size = sizeof v};
  CHECK_EQ_I64(mb_measure_device(m, &v), MB_E_NO_CUDA);
  CHECK(!strcmp(mb_status_str(MB_E_NO_CUDA), "no CUDA device"));
  mb_model_free(model);
  mb_measure_free(m);
  mb_setup_free(s);
  return mbt_finish("measure_nodevice");
}
