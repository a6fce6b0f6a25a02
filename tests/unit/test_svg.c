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

int main(void) {
  test_numbers();
  test_escaping();
  test_path();
  test_timeline_bad_input();
  return mbt_finish("svg");
}
