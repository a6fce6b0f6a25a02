/* membudget measure: the device, and the step replayed on it at a few batch sizes, beside the
 * static figures. Also the measured-mode plumbing estimate --mode measured shares. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/table.h"
#include "util/format.h"

/* Environment variables naming the CUDA libraries, and the setup key each sets. */
static const struct { const char *var, *key; } cuda_env[] = {
  {"MEMBUDGET_CUDA_RUNTIME", "cuda_runtime"}, {"MEMBUDGET_CUDA_DRIVER", "cuda_driver"},
  {"MEMBUDGET_NVML", "nvml_library"},         {"MEMBUDGET_CUBLAS", "cublas_library"},
  {"MEMBUDGET_CUBLASLT", "cublaslt_library"}, {"MEMBUDGET_CUDNN", "cudnn_library"},
};

int mb_cli_cuda_env(mb_setup *setup) {
  for (size_t k = 0; k < sizeof cuda_env / sizeof cuda_env[0]; k++) {
    const char *v = getenv(cuda_env[k].var);
    if (v && mb_setup_set(setup, cuda_env[k].key, v) != MB_OK)
      return mb_cli_usage_error("%s: %s", cuda_env[k].var, mb_setup_errmsg(setup));
  }
  return MB_EXIT_OK;
}

int mb_cli_measure_open(const mb_setup *setup, mb_measure **out) {
  int st = mb_measure_create(setup, out);
  if (st == MB_OK) return MB_EXIT_OK;
  fprintf(stderr, "membudget: measured mode: %s\n", mb_measure_errmsg(*out));
  mb_measure_free(*out);
  *out = NULL;
  return st == MB_E_NO_CUDA ? MB_EXIT_NO_CUDA : st == MB_E_INVALID_ARG ? MB_EXIT_USAGE : MB_EXIT_INPUT;
}

static void print_device(const mb_device_info *v) {
  char a[32], b[32], c[32];
  printf("device    %d: %s", (int)v->ordinal, v->name);
  if (v->gpu) printf(" (%s)", v->gpu);
  printf(", compute capability %d.%d, CUDA runtime %d.%d, driver %d.%d\n", (int)v->cc_major, (int)v->cc_minor,
         (int)v->runtime_version / 1000, (int)v->runtime_version % 1000 / 10, (int)v->driver_version / 1000,
         (int)v->driver_version % 1000 / 10);
  printf("memory    %s total; %s free before the context", mb_fmt_bytes(a, sizeof a, v->total_memory),
         v->free_before ? mb_fmt_bytes(b, sizeof b, v->free_before) : "unknown");
  printf("; other processes hold %s\n", mb_fmt_bytes(c, sizeof c, v->other_processes));
  printf("context   %s (%s)\n", mb_fmt_bytes(a, sizeof a, v->context),
         v->context_measured ? "measured: free memory before and after creating it" : "not measured alone, see notes");
  printf("libraries cuBLAS %s (handle, first GEMM, cuBLASLt handle), cuDNN %s (handle)\n",
         mb_fmt_bytes(a, sizeof a, v->cublas), mb_fmt_bytes(b, sizeof b, v->cudnn));
  printf("free now  %s\n", mb_fmt_bytes(a, sizeof a, v->free_now));
  printf("runtime   %s\n", v->runtime_path);
  if (v->notes[0]) printf("notes     %s\n", v->notes);
}

static void bytes_cell(char *buf, size_t size, uint64_t v) { mb_fmt_bytes(buf, size, v); }

static void print_replays(const mb_replay *r, size_t n) {
  mb_table t;
  mb_table_init(&t, "rrrrrrr");
  const char *head[] = {"batch", "allocated", "reserved", "device peak", "static device peak", "cuDNN workspace",
                        "ms"};
  mb_table_row(&t, head);
  mb_table_rule(&t);
  for (size_t i = 0; i < n; i++) {
    char cells[7][40];
    snprintf(cells[0], sizeof cells[0], "%lld", (long long)r[i].batch);
    bytes_cell(cells[1], sizeof cells[1], r[i].allocated_peak);
    bytes_cell(cells[2], sizeof cells[2], r[i].reserved_peak);
    if (r[i].fits) bytes_cell(cells[3], sizeof cells[3], r[i].device_peak);
    else snprintf(cells[3], sizeof cells[3], "out of memory");
    bytes_cell(cells[4], sizeof cells[4], r[i].static_device_peak);
    bytes_cell(cells[5], sizeof cells[5], r[i].conv_workspace);
    snprintf(cells[6], sizeof cells[6], "%.1f", r[i].seconds * 1e3);
    const char *row[] = {cells[0], cells[1], cells[2], cells[3], cells[4], cells[5], cells[6]};
    mb_table_row(&t, row);
  }
  mb_table_print(&t, stdout, "");
  mb_table_free(&t);
  const mb_replay *lo = NULL, *hi = NULL;
  for (size_t i = 0; i < n; i++) {
    if (!r[i].fits) continue;
    if (!lo || r[i].batch < lo->batch) lo = &r[i];
    if (!hi || r[i].batch > hi->batch) hi = &r[i];
  }
  if (!lo || lo->batch == hi->batch) return;
  char a[32], b[32];
  uint64_t span = (uint64_t)(hi->batch - lo->batch);
  uint64_t mp = hi->device_peak > lo->device_peak ? (hi->device_peak - lo->device_peak) / span : 0;
  uint64_t sp = hi->static_device_peak > lo->static_device_peak ? (hi->static_device_peak - lo->static_device_peak) / span : 0;
  uint64_t mf = lo->device_peak > mp * (uint64_t)lo->batch ? lo->device_peak - mp * (uint64_t)lo->batch : 0;
  uint64_t sf = lo->static_device_peak > sp * (uint64_t)lo->batch ? lo->static_device_peak - sp * (uint64_t)lo->batch : 0;
  printf("\nmeasured  device peak ~ %s + %s per sample\n", mb_fmt_bytes(a, sizeof a, mf), mb_fmt_bytes(b, sizeof b, mp));
  printf("static    device peak ~ %s + %s per sample\n", mb_fmt_bytes(a, sizeof a, sf), mb_fmt_bytes(b, sizeof b, sp));
}

static int add_batches(const char *list, int64_t *batches, size_t *n, size_t cap) {
  const char *p = list;
  while (*p) {
    char *end = NULL;
    errno = 0;
    long long b = strtoll(p, &end, 10);
    if (end == p || b < 1 || errno == ERANGE || (*end && *end != ',') || *n == cap)
      return mb_cli_usage_error("--batch needs integers >= 1 (N or N,M,...; at most %zu)", cap);
    batches[(*n)++] = b;
    p = *end ? end + 1 : end;
  }
  return MB_EXIT_OK;
}

int mb_cmd_measure(int argc, char **argv) {
  enum { MAX_BATCHES = 64 };
  const char *path = NULL;
  int json = 0, rc = MB_EXIT_OK, device_given = 0; /* --gpu/--device-memory: allowed, not needed */
  int64_t batches[MAX_BATCHES];
  size_t n = 0;
  mb_setup *setup = NULL;
  if (mb_setup_create(&setup) != MB_OK) return MB_EXIT_INPUT;
  rc = mb_cli_cuda_env(setup);
  if (rc == MB_EXIT_OK) rc = mb_cli_backend_first(setup, argc, argv);
  for (int i = 1; i < argc && rc == MB_EXIT_OK; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--batch")) {
      if (i + 1 >= argc) rc = mb_cli_usage_error("--batch needs a value");
      else rc = add_batches(argv[++i], batches, &n, MAX_BATCHES);
    } else if (!strcmp(a, "--json")) {
      json = 1;
    } else if (mb_cli_training_flag(setup, argc, argv, &i, &rc, &device_given) ||
               mb_cli_setup_flag(setup, MB_CLI_TRAINABILITY | MB_CLI_DIMS, argc, argv, &i, &rc)) {
      continue;
    } else if (a[0] == '-' && a[1]) {
      rc = mb_cli_usage_error("measure: unknown option '%s'", a);
    } else if (path) {
      rc = mb_cli_usage_error("measure: more than one model given");
    } else {
      path = a;
    }
  }
  if (rc == MB_EXIT_OK && !path) rc = mb_cli_usage_error("measure: no model given");
  if (rc != MB_EXIT_OK) {
    mb_setup_free(setup);
    return rc;
  }
  if (!n) { /* two sizes far enough apart that 2 MiB pages do not hide the per-sample bytes */
    batches[n++] = 1;
    batches[n++] = 8;
  }
  mb_model *m = NULL;
  mb_measure *meas = NULL;
  mb_replay *r = calloc(n, sizeof *r);
  char *doc = NULL;
  mb_device_info v = {.struct_size = sizeof v};
  if (!r) {
    fprintf(stderr, "membudget: out of memory\n");
    rc = MB_EXIT_INPUT;
  } else if (mb_model_load_file_setup(path, setup, &m) != MB_OK) {
    fprintf(stderr, "membudget: %s\n", mb_model_errmsg(m));
    rc = MB_EXIT_INPUT;
  } else if ((rc = mb_cli_measure_open(setup, &meas)) != MB_EXIT_OK) {
    /* the reason is on stderr */
  } else if (json) {
    int st = mb_measure_json(meas, m, setup, batches, n, &doc);
    if (st == MB_OK) fputs(doc, stdout);
    else fprintf(stderr, "membudget: %s: %s\n", path, mb_setup_errmsg(setup));
    rc = st == MB_OK ? MB_EXIT_OK : st == MB_E_NO_CUDA ? MB_EXIT_NO_CUDA : MB_EXIT_INPUT;
  } else {
    int st = MB_OK;
    for (size_t i = 0; i < n && st == MB_OK; i++) {
      r[i].struct_size = sizeof r[i];
      st = mb_measure_run(meas, m, setup, batches[i], &r[i]);
    }
    if (st != MB_OK) {
      fprintf(stderr, "membudget: %s: %s\n", path, mb_setup_errmsg(setup));
      rc = st == MB_E_NO_CUDA ? MB_EXIT_NO_CUDA : MB_EXIT_INPUT;
    } else {
      mb_measure_device(meas, &v);
      printf("model     %s\n", path);
      print_device(&v);
      printf("\n");
      print_replays(r, n);
    }
  }
  mb_free(doc);
  free(r);
  mb_measure_free(meas);
  mb_model_free(m);
  mb_setup_free(setup);
  return rc;
}
