/* The module tree and the advice through the C API (under the sanitizers in the asan suite):
 * the tree's totals against the budget, every advice line against a separate mb_estimate with
 * its flags applied to a fresh setup, the setup left as it was, and bad arguments refused. */
#include <stdlib.h>
#include <string.h>

#include "mbtest.h"
#include "membudget/membudget.h"

static mb_model *load(const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", MB_MODELS_DIR, name);
  mb_model *m = NULL;
  if (mb_model_load_file(path, &m) != MB_OK) {
    fprintf(stderr, "%s: %s\n", path, mb_model_errmsg(m));
    mb_model_free(m);
    return NULL;
  }
  return m;
}

static void test_tree(void) {
  mb_model *m = load("resnet18.onnx");
  CHECK(m != NULL);
  if (!m) return;
  mb_setup *s = NULL;
  mb_setup_create(&s);
  mb_setup_set_batch(s, 8);
  mb_budget b = {.struct_size = sizeof b};
  CHECK(mb_estimate(m, s, &b) == MB_OK);
  mb_modules *mods = NULL;
  CHECK(mb_modules_create(m, s, 8, &mods) == MB_OK);
  uint64_t peak = 0, kept = 0, tensors = 0;
  size_t n = mb_modules_num(mods);
  CHECK(n > 60);
  for (size_t i = 0; i < n; i++) {
    mb_module_info x = {.struct_size = sizeof x};
    CHECK(mb_modules_get(mods, i, &x) == MB_OK);
    if (x.parent < 0) {
      peak += x.at_peak;
      kept += x.kept;
    } else {
      mb_module_info p = {.struct_size = sizeof p};
      CHECK(mb_modules_get(mods, (size_t)x.parent, &p) == MB_OK);
      CHECK(x.at_peak <= p.at_peak && x.depth == p.depth + 1);
    }
    if (i == 0) CHECK_EQ_U64(x.parameters, b.params_trainable + b.params_frozen + b.embeddings);
  }
  CHECK_EQ_U64(peak, b.allocated_peak);
  CHECK_EQ_U64(kept, b.activations);
  uint64_t prev = UINT64_MAX;
  for (size_t i = 0; i < mb_modules_num_tensors(mods); i++) {
    mb_peak_tensor t = {.struct_size = sizeof t};
    CHECK(mb_modules_tensor(mods, i, &t) == MB_OK);
    CHECK(t.bytes <= prev);
    prev = t.bytes;
    tensors += t.bytes;
  }
  CHECK_EQ_U64(tensors, b.allocated_peak);
  /* an old caller's smaller struct gets what fits */
  mb_module_info small = {.struct_size = (uint32_t)offsetof(mb_module_info, at_peak_category)};
  CHECK(mb_modules_get(mods, 0, &small) == MB_OK);
  small.struct_size = 4;
  CHECK(mb_modules_get(mods, 0, &small) == MB_E_INVALID_ARG);
  small.struct_size = sizeof small;
  CHECK(mb_modules_get(mods, n, &small) == MB_E_RANGE);
  mb_modules_free(mods);
  mb_setup_free(s);
  mb_model_free(m);
}

/* Apply an advice line's flags to a setup, as the CLI would. */
static int apply_flags(mb_setup *s, const mb_advice_line *l) {
  for (int32_t i = 0; i < l->argc; i++) {
    const char *f = l->argv[i], *v = i + 1 < l->argc ? l->argv[i + 1] : "";
    int rc = MB_OK;
    if (!strcmp(f, "--precision")) rc = mb_setup_set(s, "precision", v);
    else if (!strcmp(f, "--optimizer")) rc = mb_setup_set(s, "optimizer", v);
    else if (!strcmp(f, "--attention")) rc = mb_setup_set(s, "attention", v);
    else if (!strcmp(f, "--foreach")) rc = mb_setup_set(s, "foreach", v);
    else if (!strcmp(f, "--checkpoint")) rc = mb_setup_set(s, "checkpoint", v);
    else if (!strcmp(f, "--grad-accumulation")) rc = mb_setup_set(s, "grad_accumulation", v);
    else if (!strcmp(f, "--batch-min")) rc = mb_setup_set(s, "batch_min", v);
    else if (!strcmp(f, "--batch")) rc = mb_setup_set_batch(s, atoll(v));
    else if (!strcmp(f, "--freeze")) rc = mb_setup_add_freeze(s, v);
    else if (!strcmp(f, "--trainable")) rc = mb_setup_add_trainable(s, v);
    else if (!strcmp(f, "--teacher-offload")) {
      rc = mb_setup_set(s, "teacher_offload", "1");
      continue;
    } else return -1;
    if (rc != MB_OK) return rc;
    i++;
  }
  return MB_OK;
}

static void test_advice(void) {
  mb_model *m = load("resnet18.onnx");
  CHECK(m != NULL);
  if (!m) return;
  mb_setup *s = NULL;
  mb_setup_create(&s);
  mb_setup_set(s, "gpu", "t4");
  mb_setup_set_batch(s, 512);
  mb_budget b = {.struct_size = sizeof b};
  CHECK(mb_estimate(m, s, &b) == MB_OK);
  const char *reason = NULL;
  CHECK(mb_advice_due(&b, &reason) == 1);
  CHECK_CONTAINS(reason, "does not fit");
  mb_advice *a = NULL;
  CHECK(mb_advise(m, s, &a) == MB_OK);
  CHECK(mb_advice_num(a) >= 4);
  for (size_t i = 0; i < mb_advice_num(a); i++) {
    mb_advice_line l = {.struct_size = sizeof l};
    CHECK(mb_advice_get(a, i, &l) == MB_OK);
    CHECK(l.device_peak < b.device_peak);
    mb_setup *t = NULL;
    mb_setup_create(&t);
    mb_setup_set(t, "gpu", "t4");
    mb_setup_set_batch(t, 512);
    CHECK(apply_flags(t, &l) == MB_OK);
    mb_budget at = {.struct_size = sizeof at};
    CHECK(mb_estimate(m, t, &at) == MB_OK);
    CHECK_EQ_U64(at.device_peak, l.device_peak);
    CHECK_EQ_I64(at.batch_size, l.batch_size);
    mb_setup_free(t);
  }
  mb_advice_free(a);
  mb_budget again = {.struct_size = sizeof again};
  CHECK(mb_estimate(m, s, &again) == MB_OK); /* the setup is as it was */
  CHECK_EQ_U64(again.device_peak, b.device_peak);
  mb_setup_free(s);
  mb_model_free(m);
}

static void test_bad_arguments(void) {
  mb_modules *mods = (mb_modules *)1;
  mb_advice *a = (mb_advice *)1;
  CHECK(mb_modules_create(NULL, NULL, 1, &mods) == MB_E_INVALID_ARG);
  mb_setup *s = NULL;
  mb_setup_create(&s);
  CHECK(mb_modules_create(NULL, s, 1, &mods) == MB_E_INVALID_ARG && mods == NULL);
  CHECK(mb_advise(NULL, s, &a) == MB_E_INVALID_ARG && a == NULL);
  CHECK(mb_modules_create(NULL, s, 1, NULL) == MB_E_INVALID_ARG);
  CHECK(mb_advise(NULL, s, NULL) == MB_E_INVALID_ARG);
  CHECK(mb_setup_set(s, "advise", "sometimes") == MB_E_INVALID_ARG);
  CHECK_CONTAINS(mb_setup_errmsg(s), "advise");
  CHECK(mb_setup_set(s, "top", "-1") == MB_E_INVALID_ARG);
  CHECK(mb_setup_set(s, "module_depth", "x") == MB_E_INVALID_ARG);
  CHECK(mb_setup_set(s, "by_module", "2") == MB_E_INVALID_ARG);
  CHECK(mb_setup_set(s, "advise_trainable", "[") == MB_E_INVALID_ARG);
  CHECK(mb_setup_set(s, "advise_trainable", "fc.*") == MB_OK);
  CHECK(mb_setup_set(s, "advise_trainable", "") == MB_OK);
  mb_setup_free(s);
  mb_modules_free(NULL);
  mb_advice_free(NULL);
  CHECK(mb_modules_num(NULL) == 0 && mb_modules_num_tensors(NULL) == 0 && mb_advice_num(NULL) == 0);
  mb_module_info x = {.struct_size = sizeof x};
  mb_peak_tensor t = {.struct_size = sizeof t};
  mb_advice_line l = {.struct_size = sizeof l};
  mb_budget b = {.struct_size = sizeof b};
  CHECK(mb_modules_get(NULL, 0, &x) == MB_E_INVALID_ARG);
  CHECK(mb_modules_tensor(NULL, 0, &t) == MB_E_INVALID_ARG);
  CHECK(mb_advice_get(NULL, 0, &l) == MB_E_INVALID_ARG);
  CHECK(mb_advice_baseline(NULL, &b) == MB_E_INVALID_ARG);
  CHECK(mb_advice_due(NULL, NULL) == 0);
  CHECK(!strcmp(mb_advice_kind_name(0), "unknown") && !strcmp(mb_advice_kind_name(MB_ADVICE_FREEZE), "freeze"));
  CHECK(mb_struct_size(MB_STRUCT_MODULE_INFO) == sizeof(mb_module_info));
  CHECK(mb_struct_size(MB_STRUCT_PEAK_TENSOR) == sizeof(mb_peak_tensor));
  CHECK(mb_struct_size(MB_STRUCT_ADVICE_LINE) == sizeof(mb_advice_line));
}

/* A batch size given and taken back (0): the estimate reports it, then solves again, to the
 * same batch as a setup that never had one. */
static void test_batch_taken_back(void) {
  mb_model *m = load("resnet18.onnx");
  CHECK(m != NULL);
  if (!m) return;
  mb_setup *s = NULL, *fresh = NULL;
  mb_setup_create(&s);
  mb_setup_create(&fresh);
  CHECK(mb_setup_set(s, "gpu", "t4") == MB_OK && mb_setup_set(fresh, "gpu", "t4") == MB_OK);
  mb_budget given = {.struct_size = sizeof given}, back = given, never = given;
  CHECK(mb_setup_set_batch(s, 8) == MB_OK);
  CHECK(mb_estimate(m, s, &given) == MB_OK);
  CHECK(given.solved == 0 && given.batch_size == 8);
  CHECK(mb_setup_set_batch(s, 0) == MB_OK);
  CHECK(mb_estimate(m, s, &back) == MB_OK);
  CHECK(mb_estimate(m, fresh, &never) == MB_OK);
  CHECK(back.solved == 1 && never.solved == 1 && back.batch_size == never.batch_size && back.batch_size > 8);
  CHECK(mb_setup_set_batch(s, -1) == MB_E_INVALID_ARG);
  mb_setup_free(s);
  mb_setup_free(fresh);
  mb_model_free(m);
}

int main(void) {
  test_batch_taken_back();
  test_tree();
  test_advice();
  test_bad_arguments();
  return mbt_finish("report");
}
