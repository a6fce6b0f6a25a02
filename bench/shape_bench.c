/* Shape-inference speed: infer every tensor of a model at one set of dims, many times, and
 * print the median time per call and per thousand nodes (the model is loaded once).
 *
 *   mb_shape_bench MODEL.onnx [--runs N] [--dim NAME=VALUE]... [--set KEY=VALUE]...   */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "membudget/membudget.h"

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: mb_shape_bench MODEL.onnx [--runs N] [--dim NAME=VALUE]... [--set KEY=VALUE]...\n");
    return 2;
  }
  int runs = 200, code;
  mb_setup *s = NULL;
  mb_setup_create(&s);
  mb_model *m = bench_setup(argc, argv, s, &runs, &code);
  if (!m) {
    mb_setup_free(s);
    return code;
  }
  double *t = malloc((size_t)runs * sizeof *t);
  for (int r = 0; r < runs; r++) {
    mb_shapes *sh = NULL;
    double t0 = now_ms();
    int rc = mb_infer_shapes(m, s, &sh);
    t[r] = now_ms() - t0;
    if (rc != MB_OK) {
      fprintf(stderr, "%s\n", mb_shapes_errmsg(sh));
      return 1;
    }
    mb_shapes_free(sh);
  }
  qsort(t, (size_t)runs, sizeof *t, cmp_double);
  size_t nodes = mb_model_num_nodes(m);
  double median = t[runs / 2];
  printf("model=%s nodes=%zu runs=%d min_ms=%.4f median_ms=%.4f median_ms_per_1000_nodes=%.4f\n",
         argv[1], nodes, runs, t[0], median, median * 1000.0 / (double)nodes);
  free(t);
  mb_model_free(m);
  mb_setup_free(s);
  return 0;
}
