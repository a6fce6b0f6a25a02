/* The plain-data readers: JSON and pickle into the datum tree. Pickles are hand-assembled from
 * the opcodes of Python's Lib/pickle.py, so every expected value is the opcode's definition. */
#include "mbtest.h"
#include "membudget/membudget.h"
#include "util/datum.h"

static mb_datum *json(mb_arena *a, const char *s, mb_diag *d) {
  mb_datum *v = NULL;
  mb_diag_init(d);
  mb_json_parse(s, strlen(s), a, &v, d);
  return v;
}

static mb_datum *pick(mb_arena *a, const unsigned char *p, size_t n, mb_diag *d) {
  mb_datum *v = NULL;
  mb_diag_init(d);
  mb_pickle_parse(p, n, a, &v, d);
  return v;
}

static void test_json(void) {
  mb_arena a;
  mb_arena_init(&a);
  mb_diag d;
  mb_datum *v = json(&a, " {\"a\": [1, -2, 18446744073709551615, 18446744073709551616, 1.5e3, true, null],"
                         " \"s\": \"x\\u00e9\\ud83d\\ude00\\n\", \"a\": 7} ", &d);
  CHECK_EQ_I64(d.status, MB_OK);
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  CHECK(mb_datum_u64(mb_datum_get(v, "a"), &u) && u == 7); /* the last of a repeated key */
  const mb_datum *list = v->items[1];
  CHECK_EQ_U64(list->n, 7);
  CHECK(mb_datum_i64(list->items[1], &i) && i == -2);
  CHECK(mb_datum_u64(list->items[2], &u) && u == UINT64_MAX);
  CHECK(list->items[3]->big && !mb_datum_u64(list->items[3], &u));
  CHECK(mb_datum_number(list->items[4], &f) && f == 1500.0);
  CHECK(list->items[5]->kind == MB_D_BOOL && list->items[5]->b);
  CHECK(list->items[6]->kind == MB_D_NONE);
  const mb_datum *s = mb_datum_get(v, "s");
  CHECK(s && s->n == 1 + 2 + 4 + 1 && !memcmp(s->s, "x\xc3\xa9\xf0\x9f\x98\x80\n", 8));
  struct { const char *doc, *says; } bad[] = {
    {"{\"a\": 1,}", "expected a string key"}, {"[1 2]", "expected ',' or ']'"}, {"01", "leading zero"},
    {"\"\\x\"", "bad escape"}, {"\"\\ud800\"", "unpaired surrogate"}, {"[1] x", "trailing characters"},
    {"\"abc", "unterminated string"}, {"tru", "unexpected character"}, {"-", "bad number"},
    {"\"a\nb\"", "control character"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    json(&a, bad[k].doc, &d);
    CHECK_EQ_I64(d.status, MB_E_PARSE);
    CHECK_CONTAINS(d.msg, bad[k].says);
  }
  char deep[1200];
  memset(deep, '[', sizeof deep - 1);
  deep[sizeof deep - 1] = '\0';
  json(&a, deep, &d);
  CHECK_CONTAINS(d.msg, "nesting too deep");
  mb_arena_destroy(&a);
}

static void test_pickle(void) {
  mb_arena a;
  mb_arena_init(&a);
  mb_diag d;
  uint64_t u = 0;
  int64_t i = 0;
  /* {"k": [255, 65535, -1, 2**63, -(2**63), 1.0, "s"]} with protocol-4 opcodes:
   * PROTO 4, EMPTY_DICT, MEMOIZE, SHORT_BINUNICODE "k", EMPTY_LIST, MARK, BININT1 255,
   * BININT2 65535, BININT -1, LONG1 9 bytes 2**63, LONG1 8 bytes -(2**63), BINFLOAT 1.0,
   * SHORT_BINUNICODE "s", APPENDS, SETITEM, STOP */
  static const unsigned char p4[] = {
    0x80, 4, '}', 0x94, 0x8c, 1, 'k', ']', '(', 'K', 0xff, 'M', 0xff, 0xff, 'J', 0xff, 0xff, 0xff, 0xff,
    0x8a, 9, 0, 0, 0, 0, 0, 0, 0, 0x80, 0, 0x8a, 8, 0, 0, 0, 0, 0, 0, 0, 0x80,
    'G', 0x3f, 0xf0, 0, 0, 0, 0, 0, 0, 0x8c, 1, 's', 'e', 's', '.'};
  mb_datum *v = pick(&a, p4, sizeof p4, &d);
  CHECK_EQ_I64(d.status, MB_OK);
  const mb_datum *k = mb_datum_get(v, "k");
  CHECK(k && k->kind == MB_D_LIST && k->n == 7);
  if (k && k->n == 7) {
    CHECK(mb_datum_u64(k->items[0], &u) && u == 255);
    CHECK(mb_datum_u64(k->items[1], &u) && u == 65535);
    CHECK(mb_datum_i64(k->items[2], &i) && i == -1);
    CHECK(mb_datum_u64(k->items[3], &u) && u == UINT64_C(1) << 63);
    CHECK(mb_datum_i64(k->items[4], &i) && i == INT64_MIN);
    CHECK(k->items[5]->kind == MB_D_FLOAT && k->items[5]->f == 1.0);
    CHECK(k->items[6]->kind == MB_D_STR && k->items[6]->n == 1);
  }
  /* a shared value through the memo: [x, x] with BINPUT / BINGET (protocol 2) */
  static const unsigned char memo[] = {0x80, 2, ']', 'q', 0, '(', 0x8c, 2, 'h', 'i', 'q', 1, 'h', 1, 'e', '.'};
  v = pick(&a, memo, sizeof memo, &d);
  CHECK_EQ_I64(d.status, MB_OK);
  CHECK(v && v->n == 2 && v->items[0] == v->items[1]);
  struct { const unsigned char *p; size_t n; int rc; const char *says; } bad[] = {
    {(const unsigned char *)"\x80\x04}\x94h\x05.", 7, MB_E_PARSE, "memo index not defined"},
    {(const unsigned char *)"\x80\x04}q\x05.", 6, MB_E_PARSE, "memo index out of order"},
    {(const unsigned char *)"\x80\x04" "cos\nsystem\n.", 13, MB_E_UNSUPPORTED, "opcode GLOBAL at offset 2"},
    {(const unsigned char *)"\x80\x04N\x85R.", 6, MB_E_UNSUPPORTED, "opcode REDUCE"},
    {(const unsigned char *)"\x80\x04X\xff\xff\xff\x7f", 7, MB_E_PARSE, "truncated input"},
    {(const unsigned char *)"\x80\x04\x8b\xff\xff\xff\xff", 7, MB_E_PARSE, "negative LONG4 length"},
    {(const unsigned char *)"\x80\x04u.", 4, MB_E_PARSE, "no MARK to pop"},
    {(const unsigned char *)"\x80\x04(N}s.", 6, MB_E_PARSE, "stack underflow"},
    {(const unsigned char *)"\x80\x04NNNs.", 6, MB_E_PARSE, "not a dict"},
    {(const unsigned char *)"\x80\x04(NNNt", 7, MB_E_PARSE, "no STOP opcode"},
  };
  for (size_t j = 0; j < sizeof bad / sizeof bad[0]; j++) {
    pick(&a, bad[j].p, bad[j].n, &d);
    CHECK_EQ_I64(d.status, bad[j].rc);
    CHECK_CONTAINS(d.msg, bad[j].says);
  }
  mb_arena_destroy(&a);
}

int main(void) {
  test_json();
  test_pickle();
  return mbt_finish("datum");
}
