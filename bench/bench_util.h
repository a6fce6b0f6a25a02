/* Timing helpers shared by the benchmarks. Header-only. */
#ifndef MB_BENCH_UTIL_H
#define MB_BENCH_UTIL_H
#include <time.h>

static inline double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* qsort comparator for doubles (medians of run times). */
static inline int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
#endif
