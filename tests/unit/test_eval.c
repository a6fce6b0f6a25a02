/* Evaluation inside training and the teacher output cache through the C API: the setup keys
 * (good and bad values), the budget's appended fields and their bookkeeping, a caller's older
 * mb_budget that ends before them, the JSON, the trace's eval phase, and options that need
 * another one. The byte figures themselves are derived by hand in
 * tests/python/test_estimate_eval.py. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "mbtest.h"
#include "membudget/membudget.h"

static mb_setup *new_setup(void) {
  mb_setup *s = NULL;
  CHECK_EQ_I64(mb_setup_create(&s), MB_OK);
  return s;
}

static mb_model *load(const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", MB_MODELS_DIR, name);
  mb_model *m = NULL;
  CHECK_EQ_I64(mb_model_load_file(path, &m), MB_OK);
  return m;
}

static void test_keys(void) {
  mb_setup *s = new_setup();
  const char *good[][2] = {{"eval_batch", "64"}, {"eval_batch", "train"}, {"eval_batch", "0"}, {"eval_batch", ""},
                           {"eval_batch", "none"}, {"zero_grad", "none"}, {"zero_grad", "zero"},
                           {"zero_grad", "none-at-start"}, {"ema_swap", "1"}, {"ema_swap", "off"},
                           {"eval_keep_outputs", "0"}, {"eval_keep_outputs", "1048576"}, {"teacher_cache", "3"}};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) CHECK_EQ_I64(mb_setup_set(s, good[i][0], good[i][1]), MB_OK);
  const char *bad[][2] = {{"eval_batch", "-1"}, {"eval_batch", "8x"}, {"eval_batch", "99999999999999999999"},
                          {"eval_batch", "2199023255553"}, {"zero_grad", "None"}, {"zero_grad", ""},
                          {"ema_swap", "2"}, {"eval_keep_outputs", "1048577"}, {"eval_keep_outputs", " 1"},
                          {"teacher_cache", "-3"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CHECK_EQ_I64(mb_setup_set(s, bad[i][0], bad[i][1]), MB_E_INVALID_ARG);
    CHECK_CONTAINS(mb_setup_errmsg(s), bad[i][0]);
  }
  mb_setup_free(s);
}

static void test_budget(void) {
  CHECK(!strcmp(mb_phase_name(MB_PHASE_EVAL), "eval"));
  CHECK(!strcmp(mb_phase_name(MB_PHASE_COUNT), "unknown"));
  mb_model *m = load("resnet18.onnx");
  mb_setup *s = new_setup();
  CHECK_EQ_I64(mb_setup_set_batch(s, 4), MB_OK);
  CHECK_EQ_I64(mb_setup_set(s, "gpu", "a100-80gb"), MB_OK);
  mb_budget plain = {.struct_size = sizeof plain};
  CHECK_EQ_I64(mb_estimate(m, s, &plain), MB_OK);
  CHECK_EQ_I64(plain.eval_batch, 0);
  CHECK_EQ_U64(plain.eval_peak, 0);
  CHECK_EQ_U64(plain.eval_device_peak, 0);
  CHECK_EQ_I64(mb_setup_set(s, "eval_batch", "32"), MB_OK);
  CHECK_EQ_I64(mb_setup_set(s, "eval_keep_outputs", "3"), MB_OK);
  CHECK_EQ_I64(mb_setup_set(s, "ema", "1"), MB_OK);
  CHECK_EQ_I64(mb_setup_set(s, "ema_swap", "1"), MB_OK);
  mb_budget b = {.struct_size = sizeof b};
  CHECK_EQ_I64(mb_estimate(m, s, &b), MB_OK);
  CHECK_EQ_I64(b.eval_batch, 32);
  uint64_t sum = 0;
  for (int c = 0; c < MB_CAT_COUNT; c++) sum += b.eval_at_peak[c];
  CHECK_EQ_U64(sum, b.eval_peak);
  CHECK_EQ_U64(b.eval_at_peak[MB_CAT_GRADIENT], 0); /* zero_grad set them to None */
  CHECK_EQ_U64(b.ema_stored, 0);                     /* on CUDA, a host copy */
  CHECK_EQ_U64(b.eval_outputs, 3 * 32 * 1000 * 4);   /* [32, 1000] fp32 logits: 128,000 B, whole blocks */
  CHECK(b.eval_reserved_peak >= b.eval_peak && b.eval_reserved_peak >= b.allocated_peak);
  CHECK_EQ_U64(b.eval_device_peak, b.eval_reserved_peak + b.context);
  uint64_t need = b.eval_device_peak > b.device_peak ? b.eval_device_peak : b.device_peak;
  /* the safety margin (budget/margin.c) is held back from what is available */
  CHECK_EQ_U64(b.margin_bytes, (uint64_t)((double)b.usable_memory * b.margin));
  CHECK_EQ_I64(b.available, (int64_t)(b.usable_memory - b.margin_bytes) - (int64_t)need);
  /* the step's own figures are those without the evaluation (the EMA copy aside) */
  CHECK_EQ_U64(b.backward_peak, plain.backward_peak + b.ema);
  /* a caller built before these fields: the library writes only what its struct holds */
  unsigned char raw[sizeof(mb_budget)];
  memset(raw, 0xab, sizeof raw);
  uint32_t old = (uint32_t)offsetof(mb_budget, eval_batch);
  memcpy(raw, &old, sizeof old);
  CHECK_EQ_I64(mb_estimate(m, s, (mb_budget *)(void *)raw), MB_OK);
  for (size_t i = old; i < sizeof raw; i++) CHECK(raw[i] == 0xab);
  /* JSON and trace */
  char *json = NULL;
  CHECK_EQ_I64(mb_estimate_json(m, s, 0, &json, NULL), MB_OK);
  CHECK_CONTAINS(json, "\"eval_batch\": 32,");
  CHECK_CONTAINS(json, "\"zero_grad\": \"none\"");
  CHECK_CONTAINS(json, "\"eval_at_peak\": {\"parameters\": ");
  mb_free(json);
  mb_trace *t = NULL;
  CHECK_EQ_I64(mb_trace_create(m, s, 4, &t), MB_OK);
  size_t n = mb_trace_num_events(t), in_eval = 0;
  uint64_t top = 0;
  for (size_t i = 0; i < n; i++) {
    mb_event e = {.struct_size = sizeof e};
    CHECK_EQ_I64(mb_trace_event(t, i, &e), MB_OK);
    if (e.phase != MB_PHASE_EVAL) continue;
    in_eval++;
    if (e.live > top) top = e.live;
  }
  CHECK(in_eval > 0);
  CHECK_EQ_U64(top, b.eval_peak);
  mb_trace_free(t);
  mb_setup_free(s);
  mb_model_free(m);
}

static void test_needs(void) {
  mb_model *m = load("resnet18.onnx");
  mb_setup *s = new_setup();
  mb_budget b = {.struct_size = sizeof b};
  CHECK_EQ_I64(mb_setup_set_batch(s, 2), MB_OK);
  CHECK_EQ_I64(mb_setup_set(s, "ema_swap", "1"), MB_OK);
  CHECK_EQ_I64(mb_estimate(m, s, &b), MB_E_INVALID_ARG);
  CHECK_CONTAINS(mb_setup_errmsg(s), "eval_batch");
  CHECK_EQ_I64(mb_setup_set(s, "eval_batch", "train"), MB_OK);
  CHECK_EQ_I64(mb_estimate(m, s, &b), MB_E_INVALID_ARG);
  CHECK_CONTAINS(mb_setup_errmsg(s), "set ema");
  CHECK_EQ_I64(mb_setup_set(s, "ema_swap", "0"), MB_OK);
  CHECK_EQ_I64(mb_setup_set(s, "teacher_cache", "4"), MB_OK);
  CHECK_EQ_I64(mb_estimate(m, s, &b), MB_E_INVALID_ARG);
  CHECK_CONTAINS(mb_setup_errmsg(s), "give a teacher");
  mb_model *teacher = load("resnet50.onnx");
  CHECK_EQ_I64(mb_setup_set_teacher(s, teacher), MB_OK);
  CHECK_EQ_I64(mb_estimate(m, s, &b), MB_OK);
  CHECK_EQ_I64(b.eval_batch, 2);
  CHECK_EQ_U64(b.teacher_cache, 4 * 8192); /* [2, 1000] fp32: 8,000 B, 16 blocks of 512 */
  mb_setup_free(s);
  mb_model_free(teacher);
  mb_model_free(m);
}

int main(void) {
  test_keys();
  test_budget();
  test_needs();
  return mbt_finish("eval");
}
