/* Estimate speed: a full `mb_estimate` (plan, batch-size bisection over simulated steps,
 * the slope runs) on one model, many times; prints min and median wall time and how many
 * simulated steps one estimate ran. The model is loaded once.
 *
 *   mb_estimate_bench MODEL.onnx [--runs N] [--dim NAME=VALUE]... [--set KEY=VALUE]...  */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "membudget/membudget.h"

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: mb_estimate_bench MODEL.onnx [--runs N] [--dim NAME=VALUE]... [--set KEY=VALUE]...\n");
    return 2;
  }
  int runs = 50, code;
  mb_setup *s = NULL;
  mb_setup_create(&s);
  mb_setup_set(s, "gpu", "h100-80gb");
  mb_model *m = bench_setup(argc, argv, s, &runs, &code);
  if (!m) {
    mb_setup_free(s);
    return code;
  }
  double *t = malloc((size_t)runs * sizeof *t);
  mb_budget b = {.struct_size = sizeof b};
  for (int r = 0; r < runs; r++) {
    double t0 = now_ms();
    int rc = mb_estimate(m, s, &b);
    t[r] = now_ms() - t0;
    if (rc != MB_OK) {
      fprintf(stderr, "%s\n", mb_setup_errmsg(s));
      return 1;
    }
  }
  qsort(t, (size_t)runs, sizeof *t, cmp_double);
  printf("model=%s nodes=%zu runs=%d batch_size=%lld min_ms=%.3f median_ms=%.3f\n", argv[1],
         mb_model_num_nodes(m), runs, (long long)b.batch_size, t[0], t[runs / 2]);
  free(t);
  mb_model_free(m);
  mb_setup_free(s);
  return 0;
}
