/* Timing and command-line helpers shared by the benchmarks. Header-only. */
#ifndef MB_BENCH_UTIL_H
#define MB_BENCH_UTIL_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "membudget/membudget.h"

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
/* The options the model benchmarks share, from argv[2] on: --runs N, --dim NAME=VALUE (bound in
 * s), --set KEY=VALUE (mb_setup_set). Then loads argv[1]. Returns the model, or NULL after
 * printing why, with *exit_code 2 (usage) or 1 (the model does not load). */
static inline mb_model *bench_setup(int argc, char **argv, mb_setup *s, int *runs, int *exit_code) {
  *exit_code = 2;
  for (int i = 2; i < argc; i++) {
    char name[256], value[256];
    long long v;
    if (!strcmp(argv[i], "--runs") && i + 1 < argc) {
      *runs = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--dim") && i + 1 < argc) {
      if (sscanf(argv[++i], "%255[^=]=%lld", name, &v) != 2 || mb_setup_set_dim(s, name, v) != MB_OK) {
        fprintf(stderr, "--dim %s: want NAME=VALUE\n", argv[i]);
        return NULL;
      }
    } else if (!strcmp(argv[i], "--set") && i + 1 < argc) {
      if (sscanf(argv[++i], "%255[^=]=%255s", name, value) != 2 || mb_setup_set(s, name, value) != MB_OK) {
        fprintf(stderr, "--set %s: %s\n", argv[i], mb_setup_errmsg(s));
        return NULL;
      }
    } else {
      fprintf(stderr, "unknown option '%s'\n", argv[i]);
      return NULL;
    }
  }
  if (*runs < 1) *runs = 1;
  mb_model *m = NULL;
  if (mb_model_load_file(argv[1], &m) != MB_OK) {
    fprintf(stderr, "%s\n", mb_model_errmsg(m));
    mb_model_free(m);
    *exit_code = 1;
    return NULL;
  }
  return m;
}
#endif
