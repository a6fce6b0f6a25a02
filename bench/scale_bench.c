/* Scale: each stage of `membudget estimate` on one (large) model, timed separately, in one
 * process pinned to one CPU. Every run loads the model afresh:
 *
 *   load      mb_model_load_file
 *   shapes    mb_infer_shapes at batch 1 (every tensor of the main graph)
 *   simulate  mb_estimate at batch 1 (the plan, one simulated step replayed through the
 *             allocator model, the slope run): what `membudget estimate --batch 1` does
 *   solve     mb_estimate without a batch size: what `membudget estimate --gpu GPU` does after
 *             loading (the plan, then a simulated step per batch size the search probes)
 *   total     load + solve: the CLI's work without printing
 *
 * Prints one line of key=value pairs per stage: the min and median over the runs of the wall
 * time and of the process's CPU time (CLOCK_PROCESS_CPUTIME_ID, which time spent waiting for
 * a CPU on a shared machine does not inflate), in ms; and the solve's answer.
 *
 *   mb_scale_bench MODEL.onnx [--runs N] [--cpu C] [--only STAGE] [--dim NAME=VALUE]... [--set KEY=VALUE]...
 *
 * --cpu C pins the process to CPU C (sched_setaffinity; default: the CPU it starts on). The
 * setup starts with gpu=h100-80gb; --set overrides it. --only load|shapes|simulate|solve runs
 * that stage alone after the load (for a profiler). */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "membudget/membudget.h"

enum { LOAD, SHAPES, SIMULATE, SOLVE, TOTAL, STAGES };
static const char *const stage_names[STAGES] = {"load", "shapes", "simulate", "solve", "total"};

static int parse_args(int argc, char **argv, mb_setup *s, int *runs, int *cpu, int *only) {
  for (int i = 2; i < argc; i++) {
    char name[256], value[256];
    long long v;
    if (!strcmp(argv[i], "--runs") && i + 1 < argc) {
      *runs = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--cpu") && i + 1 < argc) {
      *cpu = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
      i++;
      for (*only = LOAD; *only < TOTAL && strcmp(argv[i], stage_names[*only]); (*only)++) {
      }
      if (*only == TOTAL) {
        fprintf(stderr, "--only %s: want load, shapes, simulate or solve\n", argv[i]);
        return 2;
      }
    } else if (!strcmp(argv[i], "--dim") && i + 1 < argc) {
      if (sscanf(argv[++i], "%255[^=]=%lld", name, &v) != 2 || mb_setup_set_dim(s, name, v) != MB_OK) {
        fprintf(stderr, "--dim %s: want NAME=VALUE\n", argv[i]);
        return 2;
      }
    } else if (!strcmp(argv[i], "--set") && i + 1 < argc) {
      if (sscanf(argv[++i], "%255[^=]=%255s", name, value) != 2 || mb_setup_set(s, name, value) != MB_OK) {
        fprintf(stderr, "--set %s: %s\n", argv[i], mb_setup_errmsg(s));
        return 2;
      }
    } else {
      fprintf(stderr, "unknown option '%s'\n", argv[i]);
      return 2;
    }
  }
  if (*runs < 1) *runs = 1;
  return 0;
}

static double cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* A stage's clocks: wall and CPU. */
typedef struct clocks {
  double wall, cpu;
} clocks;

static clocks start(void) { return (clocks){now_ms(), cpu_ms()}; }

/* Time since c into w[k] (wall) and w[STAGES + k] (CPU). */
static void stop(clocks c, double *t, int k) {
  t[k] = now_ms() - c.wall;
  t[STAGES + k] = cpu_ms() - c.cpu;
}

static int pin(int cpu) {
  if (cpu < 0) cpu = sched_getcpu();
  if (cpu < 0) return -1;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) return -1;
  return cpu;
}

/* One run of every stage; t[stage] wall and t[STAGES + stage] CPU, in ms. Returns 0, or 1
 * after printing why. */
static int run_once(const char *path, mb_setup *s, int only, double *t, mb_budget *solved, size_t *nodes) {
  mb_model *m = NULL;
  clocks c = start();
  if (mb_model_load_file(path, &m) != MB_OK) {
    fprintf(stderr, "load: %s\n", mb_model_errmsg(m));
    mb_model_free(m);
    return 1;
  }
  stop(c, t, LOAD);
  *nodes = mb_model_num_nodes(m);

  mb_setup_set_batch(s, 1);
  mb_shapes *sh = NULL;
  c = start();
  int rc = only < 0 || only == SHAPES ? mb_infer_shapes(m, s, &sh) : MB_OK;
  stop(c, t, SHAPES);
  if (rc != MB_OK) fprintf(stderr, "shapes: %s\n", sh ? mb_shapes_errmsg(sh) : mb_status_str(rc));
  mb_shapes_free(sh);

  mb_budget one = {.struct_size = sizeof one};
  if (rc == MB_OK) {
    c = start();
    if (only < 0 || only == SIMULATE) rc = mb_estimate(m, s, &one);
    stop(c, t, SIMULATE);
    if (rc != MB_OK) fprintf(stderr, "simulate: %s\n", mb_setup_errmsg(s));
  }

  mb_setup_set_batch(s, 0); /* solve */
  if (rc == MB_OK) {
    c = start();
    if (only < 0 || only == SOLVE) rc = mb_estimate(m, s, solved);
    stop(c, t, SOLVE);
    if (rc != MB_OK) fprintf(stderr, "solve: %s\n", mb_setup_errmsg(s));
  }
  t[TOTAL] = t[LOAD] + t[SOLVE];
  t[STAGES + TOTAL] = t[STAGES + LOAD] + t[STAGES + SOLVE];
  mb_model_free(m);
  return rc != MB_OK;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: mb_scale_bench MODEL.onnx [--runs N] [--cpu C] [--dim NAME=VALUE]... "
                    "[--set KEY=VALUE]...\n");
    return 2;
  }
  int runs = 10, cpu = -1, only = -1;
  mb_setup *s = NULL;
  if (mb_setup_create(&s) != MB_OK) return 1;
  mb_setup_set(s, "gpu", "h100-80gb");
  int code = parse_args(argc, argv, s, &runs, &cpu, &only);
  if (code) {
    mb_setup_free(s);
    return code;
  }
  cpu = pin(cpu);
  if (cpu < 0) fprintf(stderr, "warning: could not pin to one CPU\n");
  double *t = calloc((size_t)runs * 2 * STAGES, sizeof *t);
  mb_budget b = {.struct_size = sizeof b};
  size_t nodes = 0;
  for (int r = 0; r < runs && !code; r++) code = run_once(argv[1], s, only, t + (size_t)r * 2 * STAGES, &b, &nodes);
  if (!code) {
    printf("model=%s nodes=%zu runs=%d cpu=%d batch_size=%lld solved=%d fits=%d device_peak=%llu\n", argv[1],
           nodes, runs, cpu, (long long)b.batch_size, b.solved, b.fits, (unsigned long long)b.device_peak);
    double *col = malloc((size_t)runs * sizeof *col), wall[STAGES][2];
    for (int k = 0; k < 2 * STAGES; k++) {
      for (int r = 0; r < runs; r++) col[r] = t[(size_t)r * 2 * STAGES + (size_t)k];
      qsort(col, (size_t)runs, sizeof *col, cmp_double);
      if (k < STAGES) {
        wall[k][0] = col[0], wall[k][1] = col[runs / 2];
        continue;
      }
      printf("stage=%s min_ms=%.3f median_ms=%.3f cpu_min_ms=%.3f cpu_median_ms=%.3f\n", stage_names[k - STAGES],
             wall[k - STAGES][0], wall[k - STAGES][1], col[0], col[runs / 2]);
    }
    free(col);
  }
  free(t);
  mb_setup_free(s);
  return code;
}
