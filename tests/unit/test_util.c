/* The small utilities: globs, data type sizes, the string map, number formatting. */
#include "mbtest.h"
#include "membudget/membudget.h"
#include "util/format.h"
#include "util/glob.h"
#include "util/strmap.h"

static void test_glob(void) {
  CHECK(mb_glob_match("*", "anything.at/all"));
  CHECK(mb_glob_match("text_encoder.*", "text_encoder.layer.0.weight"));
  CHECK(!mb_glob_match("text_encoder.*", "unet.text_encoder.weight"));
  CHECK(mb_glob_match("*lora*", "blocks.3.attn.lora_A.weight"));
  CHECK(mb_glob_match("layer?.*", "layer4.0.conv1.weight"));
  CHECK(!mb_glob_match("layer?.*", "layer10.weight"));
  CHECK(mb_glob_match("layer[1-3].*", "layer2.x"));
  CHECK(!mb_glob_match("layer[1-3].*", "layer4.x"));
  CHECK(mb_glob_match("layer[!1-3].*", "layer4.x"));
  CHECK(mb_glob_match("a\\*b", "a*b"));
  CHECK(!mb_glob_match("a\\*b", "axb"));
  CHECK(mb_glob_match("*.bias", ".bias"));
  CHECK(!mb_glob_match("", "x"));
  CHECK(mb_glob_match("", ""));
  CHECK(mb_glob_match("**a**b**", "xxaxxbxx"));
  CHECK(mb_glob_valid("layer[0-9]*"));
  CHECK(!mb_glob_valid("layer[0-9"));
  CHECK(!mb_glob_valid("trailing\\"));
  /* pathological backtracking stays fast */
  char text[4001];
  memset(text, 'a', 4000);
  text[4000] = '\0';
  CHECK(!mb_glob_match("*a*a*a*a*a*a*a*b", text));
}

static void test_dtypes(void) {
  uint64_t b = 0;
  CHECK_EQ_I64(mb_dtype_bytes(MB_DTYPE_FLOAT, 10, &b), MB_OK);
  CHECK_EQ_U64(b, 40);
  CHECK_EQ_I64(mb_dtype_bytes(MB_DTYPE_BFLOAT16, 3, &b), MB_OK);
  CHECK_EQ_U64(b, 6);
  CHECK_EQ_I64(mb_dtype_bytes(MB_DTYPE_INT4, 15, &b), MB_OK);
  CHECK_EQ_U64(b, 8);
  CHECK_EQ_I64(mb_dtype_bytes(MB_DTYPE_FLOAT4E2M1, 16, &b), MB_OK);
  CHECK_EQ_U64(b, 8);
  CHECK_EQ_I64(mb_dtype_bytes(MB_DTYPE_FLOAT8E5M2, 7, &b), MB_OK);
  CHECK_EQ_U64(b, 7);
  CHECK_EQ_I64(mb_dtype_bytes(MB_DTYPE_COMPLEX128, 2, &b), MB_OK);
  CHECK_EQ_U64(b, 32);
  CHECK_EQ_I64(mb_dtype_bytes(MB_DTYPE_STRING, 2, &b), MB_E_UNSUPPORTED);
  CHECK_EQ_I64(mb_dtype_bytes(999, 2, &b), MB_E_UNSUPPORTED);
  CHECK_EQ_I64(mb_dtype_bytes(MB_DTYPE_DOUBLE, UINT64_MAX / 4, &b), MB_E_LIMIT);
  CHECK(!strcmp(mb_dtype_name(MB_DTYPE_BFLOAT16), "bfloat16"));
  CHECK(!strcmp(mb_dtype_name(-1), "unknown"));
}

static void test_strmap(void) {
  mb_strmap m;
  CHECK_EQ_I64(mb_strmap_init(&m, 2), 0);
  char keys[1000][8];
  for (int i = 0; i < 1000; i++) {
    snprintf(keys[i], sizeof keys[i], "k%d", i);
    CHECK_EQ_I64(mb_strmap_put(&m, keys[i], i, NULL), 1);
  }
  int32_t old = -1;
  CHECK_EQ_I64(mb_strmap_put(&m, "k7", 99, &old), 0);
  CHECK_EQ_I64(old, 7);
  CHECK_EQ_I64(mb_strmap_get(&m, "k999"), 999);
  CHECK_EQ_I64(mb_strmap_get(&m, "missing"), -1);
  mb_strmap_free(&m);
}

static void test_format(void) {
  char buf[32];
  CHECK(!strcmp(mb_fmt_thousands(buf, sizeof buf, 0), "0"));
  CHECK(!strcmp(mb_fmt_thousands(buf, sizeof buf, 999), "999"));
  CHECK(!strcmp(mb_fmt_thousands(buf, sizeof buf, 1000), "1,000"));
  CHECK(!strcmp(mb_fmt_thousands(buf, sizeof buf, 11689512), "11,689,512"));
  CHECK(!strcmp(mb_fmt_thousands(buf, sizeof buf, UINT64_MAX), "18,446,744,073,709,551,615"));
  CHECK(!strcmp(mb_fmt_bytes(buf, sizeof buf, 512), "512 B"));
  CHECK(!strcmp(mb_fmt_bytes(buf, sizeof buf, 1536), "1.50 KiB"));
  CHECK(!strcmp(mb_fmt_bytes(buf, sizeof buf, 46758048), "44.59 MiB"));
}

static void test_version(void) {
  CHECK_EQ_I64(mb_version_number(), MB_VERSION_NUMBER);
  CHECK(!strcmp(mb_version_string(), MB_VERSION_STRING));
  CHECK(!strcmp(mb_status_str(MB_E_INVALID_MODEL), "invalid model"));
  CHECK_EQ_U64(mb_struct_size(MB_STRUCT_ACCOUNTING), sizeof(mb_accounting));
  CHECK_EQ_U64(mb_struct_size(12345), 0);
  /* an old caller with a shorter struct gets only what fits */
  mb_tensor_desc d;
  memset(&d, 0xAB, sizeof d);
  d.struct_size = 4; /* smaller than any version: refused */
  CHECK_EQ_I64(mb_model_input(NULL, 0, &d), MB_E_INVALID_ARG);
}

int main(void) {
  test_glob();
  test_dtypes();
  test_strmap();
  test_format();
  test_version();
  return mbt_finish("util");
}
