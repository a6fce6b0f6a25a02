/* A tiny test harness: CHECK macros that count, and a closing "N passed, N failed" line. */
#ifndef MB_TEST_H
#define MB_TEST_H
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int mbt_passed, mbt_failed;

#define CHECK(cond)                                                                   \
  do {                                                                                \
    if (cond) mbt_passed++;                                                           \
    else { mbt_failed++; fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); } \
  } while (0)

#define CHECK_EQ_I64(a, b)                                                            \
  do {                                                                                \
    int64_t a_ = (int64_t)(a), b_ = (int64_t)(b);                                     \
    if (a_ == b_) mbt_passed++;                                                       \
    else { mbt_failed++; fprintf(stderr, "%s:%d: %s == %s failed: %" PRId64 " != %" PRId64 "\n", \
                                 __FILE__, __LINE__, #a, #b, a_, b_); }               \
  } while (0)

#define CHECK_EQ_U64(a, b)                                                            \
  do {                                                                                \
    uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b);                                  \
    if (a_ == b_) mbt_passed++;                                                       \
    else { mbt_failed++; fprintf(stderr, "%s:%d: %s == %s failed: %" PRIu64 " != %" PRIu64 "\n", \
                                 __FILE__, __LINE__, #a, #b, a_, b_); }               \
  } while (0)

/* The message must contain every given fragment. */
#define CHECK_CONTAINS(hay, needle)                                                   \
  do {                                                                                \
    const char *h_ = (hay), *n_ = (needle);                                           \
    if (h_ && strstr(h_, n_)) mbt_passed++;                                           \
    else { mbt_failed++; fprintf(stderr, "%s:%d: \"%s\" does not contain \"%s\"\n",   \
                                 __FILE__, __LINE__, h_ ? h_ : "(null)", n_); }       \
  } while (0)

static inline int mbt_finish(const char *suite) {
  printf("%s: %d passed, %d failed\n", suite, mbt_passed, mbt_failed);
  return mbt_failed ? 1 : 0;
}
#endif
