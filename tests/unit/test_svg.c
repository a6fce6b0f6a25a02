/* The SVG writer (src/util/svg.c) and the pictures' C entry points on bad input. */
#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mbtest.h"
#include "membudget/membudget.h"
#include "util/svg.h"

static void check_num(double v, const char *want) {
  char buf[32];
  mb_svg_fmt_num(buf, sizeof buf, v);
  if (strcmp(buf, want)) fprintf(stderr, "mb_svg_fmt_num(%g) = \"%s\", want \"%s\"\n", v, buf, want);
  CHECK(!strcmp(buf, want));
}

static void test_numbers(void) {
  check_num(0, "0");
  check_num(12, "12");
  check_num(1.5, "1.5");
  check_num(-2.25, "-2.25");
  check_num(0.004, "0");
  check_num(-0.004, "0");
  check_num(99.999, "100");
  check_num(1e12, "1000000000"); /* clamped */
  check_num(NAN, "0");
  /* a host program's locale does not change the decimal point */
  const char *locales[] = {"de_DE.UTF-8", "fr_FR.UTF-8", "de_DE", "C.UTF-8"};
  for (size_t i = 0; i < sizeof locales / sizeof locales[0]; i++)
    if (setlocale(LC_NUMERIC, locales[i])) {
      check_num(1.5, "1.5");
      break;
    }
  setlocale(LC_NUMERIC, "C");
}

static char *element(const char *attr_value, const char *text) {
  mb_svg s;
  mb_svg_begin(&s, 10, 20);
  mb_svg_text_at(&s, 1, 2);
  mb_svg_attr(&s, "data-x", attr_value);
  mb_svg_open(&s);
  mb_svg_content(&s, text);
  mb_svg_close(&s, "text");
  return mb_svg_finish(&s);
}

static void test_escaping(void) {
  char *doc = element("a<b>&\"c'", "x < y & z");
  CHECK(doc != NULL);
  CHECK_CONTAINS(doc, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>");
  CHECK_CONTAINS(doc, "viewBox=\"0 0 10 20\"");
  CHECK_CONTAINS(doc, "data-x=\"a&lt;b&gt;&amp;&quot;c&apos;\"");
  CHECK_CONTAINS(doc, ">x &lt; y &amp; z</text>");
  CHECK(doc && strlen(doc) > 7 && !strcmp(doc + strlen(doc) - 7, "</svg>\n"));
  free(doc);
  /* names come from files: invalid UTF-8 becomes U+FFFD, control characters a space, valid
   * multi-byte characters stay */
  doc = element("\xff|\xe2\x82|\xed\xa0\x80|\x01|\xc3\xa9|\xf0\x9f\x98\x80", "");
  CHECK_CONTAINS(doc, "data-x=\"\xef\xbf\xbd|\xef\xbf\xbd\xef\xbf\xbd|\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd| |"
                      "\xc3\xa9|\xf0\x9f\x98\x80\"");
  free(doc);
}

static void test_path(void) {
  mb_svg s;
  mb_svg_begin(&s, 10, 10);
  mb_svg_start(&s, "path");
  mb_svg_d_begin(&s);
  mb_svg_d_point(&s, 'M', 1.04, 2);
  mb_svg_d_point(&s, 'L', 3.26, -4.5);
  mb_svg_d_end(&s, 1);
  mb_svg_empty(&s);
  char *doc = mb_svg_finish(&s);
  CHECK_CONTAINS(doc, "<path d=\"M1,2L3.3,-4.5Z\"/>");
  free(doc);
}

static void test_timeline_bad_input(void) {
  mb_setup *s = NULL;
  mb_model *m = NULL;
  char *svg = (char *)1;
  CHECK(mb_setup_create(&s) == MB_OK);
  CHECK(mb_timeline_svg(NULL, s, 1, NULL, &svg) == MB_E_INVALID_ARG);
  CHECK(svg == NULL);
  CHECK(mb_timeline_svg(NULL, NULL, 1, NULL, &svg) == MB_E_INVALID_ARG);
  CHECK(mb_model_load_file(MB_MODELS_DIR "/resnet18.onnx", &m) == MB_OK);
  CHECK(mb_timeline_svg(m, s, 1, NULL, NULL) == MB_E_INVALID_ARG);
  /* neither a batch nor a device to solve for */
  CHECK(mb_timeline_svg(m, s, 0, NULL, &svg) == MB_E_INVALID_ARG && svg == NULL);
  CHECK_CONTAINS(mb_setup_errmsg(s), "no device memory");
  /* a batch given to the call is not left in the setup */
  CHECK(mb_timeline_svg(m, s, 2, "resnet18", &svg) == MB_OK && svg);
  CHECK_CONTAINS(svg, "resnet18: one training step at batch 2");
  mb_free(svg);
  mb_budget b = {.struct_size = sizeof b};
  CHECK(mb_estimate(m, s, &b) == MB_E_INVALID_ARG);
  CHECK_CONTAINS(mb_setup_errmsg(s), "no device memory");
  mb_model_free(m);
  mb_setup_free(s);
}

/* A sweep leaves the setup as it found it: its batch size, and the swept dim's own value (or
 * no value, when it had none). */
static void test_sweep_restores_the_setup(void) {
  mb_model *m = NULL;
  mb_setup *s = NULL;
  mb_sweep *w = NULL;
  CHECK(mb_model_load_file(MB_MODELS_DIR "/gpt2_small_like.onnx", &m) == MB_OK);
  CHECK(mb_setup_create(&s) == MB_OK);
  CHECK(mb_setup_set_batch(s, 2) == MB_OK);
  int64_t seqs[] = {64, 32};
  CHECK(mb_sweep_create(m, s, "sequence", seqs, 2, 0, &w) == MB_OK);
  CHECK_EQ_U64(mb_sweep_num_points(w), 2);
  int64_t v = 0;
  mb_budget b32 = {.struct_size = sizeof b32}, b = {.struct_size = sizeof b};
  CHECK(mb_sweep_point(w, 0, &v, &b32) == MB_OK && v == 32 && b32.batch_size == 2);
  CHECK(mb_sweep_point(w, 2, &v, &b) == MB_E_RANGE);
  CHECK(mb_sweep_dim(w) && !strcmp(mb_sweep_dim(w), "sequence") && mb_sweep_solved_batch(w) == 0);
  mb_sweep_free(w);
  /* the dim had no value before: it has none after */
  CHECK(mb_estimate(m, s, &b) == MB_E_INVALID_ARG);
  CHECK_CONTAINS(mb_setup_errmsg(s), "sequence");
  /* with a value of its own, that value comes back; the budget equals the sweep's point */
  CHECK(mb_setup_set_dim(s, "sequence", 128) == MB_OK);
  CHECK(mb_sweep_create(m, s, "sequence", seqs, 2, 0, &w) == MB_OK);
  mb_sweep_free(w);
  mb_budget b128 = {.struct_size = sizeof b128};
  CHECK(mb_estimate(m, s, &b128) == MB_OK && b128.batch_size == 2 && b128.allocated_peak > b32.allocated_peak);
  CHECK(mb_setup_set_dim(s, "sequence", 32) == MB_OK && mb_estimate(m, s, &b) == MB_OK);
  CHECK_EQ_U64(b.device_peak, b32.device_peak);
  /* a batch sweep sets the batch size for the call only */
  int64_t batches[] = {1, 4};
  CHECK(mb_sweep_create(m, s, NULL, batches, 2, 1, &w) == MB_OK); /* no device: no solved point */
  CHECK_EQ_U64(mb_sweep_num_points(w), 2);
  mb_sweep_free(w);
  CHECK(mb_estimate(m, s, &b) == MB_OK && b.batch_size == 2);
  /* bad input */
  w = (mb_sweep *)1;
  CHECK(mb_sweep_create(m, s, NULL, NULL, 0, 0, &w) == MB_E_INVALID_ARG && w == NULL);
  int64_t zero[] = {0};
  CHECK(mb_sweep_create(m, s, NULL, zero, 1, 0, &w) == MB_E_INVALID_ARG);
  CHECK(mb_sweep_create(m, s, "no_such_dim", batches, 2, 0, &w) == MB_E_INVALID_ARG);
  CHECK_CONTAINS(mb_setup_errmsg(s), "no_such_dim");
  CHECK(mb_sweep_create(NULL, s, NULL, batches, 2, 0, &w) == MB_E_INVALID_ARG);
  char *text = NULL;
  CHECK(mb_sweep_json(NULL, &text) == MB_E_INVALID_ARG && mb_sweep_svg(NULL, NULL, &text) == MB_E_INVALID_ARG);
  CHECK(mb_sweep_num_points(NULL) == 0 && mb_sweep_dim(NULL) == NULL);
  mb_sweep_free(NULL);
  /* the default values */
  int64_t vals[16];
  CHECK_EQ_U64(mb_sweep_values(3, 100, 0, vals, 16), 7);
  CHECK(vals[0] == 3 && vals[1] == 4 && vals[6] == 100);
  CHECK_EQ_U64(mb_sweep_values(1, 1000, 4, vals, 16), 4);
  CHECK(vals[1] == 10 && vals[2] == 100);
  CHECK_EQ_U64(mb_sweep_values(1, 1024, 0, NULL, 0), 11);
  CHECK(mb_sweep_values(0, 8, 0, vals, 16) == 0 && mb_sweep_values(8, 1, 0, vals, 16) == 0 &&
        mb_sweep_values(1, 8, 1, vals, 16) == 0);
  CHECK_EQ_U64(mb_sweep_values(1, INT64_MAX, 0, NULL, 0), 64); /* 1, 2, ..., 2^62, and the end */
  CHECK(mb_sweep_values(1, 8, 1 << 30, NULL, 0) == 0);            /* too many points: refused */
  /* nothing to sweep and no device to solve for */
  CHECK(mb_sweep_create(m, s, NULL, batches, 0, 1, &w) == MB_E_INVALID_ARG && !w);
  CHECK_CONTAINS(mb_setup_errmsg(s), "no values to sweep");
  mb_setup_free(s);
  mb_model_free(m);
}

int main(void) {
  test_numbers();
  test_escaping();
  test_path();
  test_timeline_bad_input();
  test_sweep_restores_the_setup();
  return mbt_finish("svg");
}
