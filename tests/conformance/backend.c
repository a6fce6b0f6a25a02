/* ONNX's own backend test models (Debian libonnx-testdata): for every test whose ops are all
 * in the operator table, bind test_data_set_0's inputs and check that the inferred dtype and
 * shape of every graph output equal the expected output tensors stored beside the model.
 *
 *   backend DATA_DIR [--known FILE] [--list-failures]
 *
 * Prints "N passed, N failed, N skipped" per suite and in total, and the unsupported ops that
 * caused the skips. With --known, exits 0 only when the failures are exactly the listed ones
 * (a ratchet: fix a test, then remove it from the list). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "budget/setup.h"
#include "membudget/membudget.h"

#define MAX_TESTS 4096
#define MAX_OPS 512

typedef struct counts { int passed, failed, skipped; } counts;
typedef struct op_count { char name[96]; int n; } op_count;

static op_count skipped_ops[MAX_OPS];
static int n_skipped_ops;
static char *failures[MAX_TESTS];
static int n_failures;

static void note_skip(const char *reason) {
  for (int i = 0; i < n_skipped_ops; i++)
    if (!strcmp(skipped_ops[i].name, reason)) { skipped_ops[i].n++; return; }
  if (n_skipped_ops < MAX_OPS) {
    snprintf(skipped_ops[n_skipped_ops].name, sizeof skipped_ops[0].name, "%s", reason);
    skipped_ops[n_skipped_ops++].n = 1;
  }
}

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc(n > 0 ? (size_t)n : 1);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); buf = NULL; }
  fclose(f);
  *len = (size_t)n;
  return buf;
}

static int exists(const char *path) { struct stat st; return stat(path, &st) == 0; }

/* 1 pass, 0 fail, -1 skip; why describes a failure or a skip. */
static int run_test(const char *dir, char *why, size_t why_size) {
  char path[4096];
  snprintf(path, sizeof path, "%.4000s/model.onnx", dir);
  mb_model *m = NULL;
  int rc = mb_model_load_file(path, &m);
  if (rc != MB_OK) {
    snprintf(why, why_size, "load: %s", mb_model_errmsg(m));
    mb_model_free(m);
    return rc == MB_E_UNSUPPORTED ? -1 : 0;
  }
  for (size_t i = 0; i < mb_model_num_outputs(m); i++) {
    mb_tensor_desc d = {.struct_size = sizeof d};
    mb_model_output(m, i, &d);
    if (d.dtype == 0) { snprintf(why, why_size, "non-tensor output"); mb_model_free(m); return -1; }
  }
  for (size_t i = 0; i < mb_model_num_inputs(m); i++) {
    mb_tensor_desc d = {.struct_size = sizeof d};
    mb_model_input(m, i, &d);
    if (d.dtype == 0) { snprintf(why, why_size, "non-tensor input"); mb_model_free(m); return -1; }
  }
  mb_setup *s = NULL;
  mb_setup_create(&s);
  snprintf(path, sizeof path, "%.4000s/test_data_set_0", dir);
  char first[4200];
  snprintf(first, sizeof first, "%s/input_0.pb", path);
  if (exists(first) && mb_setup_bind_input_dir(s, path) != MB_OK) {
    snprintf(why, why_size, "bind: %s", mb_setup_errmsg(s));
    mb_setup_free(s);
    mb_model_free(m);
    return 0;
  }
  mb_shapes *sh = NULL;
  rc = mb_infer_shapes(m, s, &sh);
  int result = 1;
  if (rc != MB_OK) {
    const char *msg = mb_shapes_errmsg(sh);
    const char *op = strstr(msg, ": op ");
    if (rc == MB_E_UNSUPPORTED && op) {
      char name[96];
      if (sscanf(op + 5, "%95s", name) == 1) note_skip(name);
      snprintf(why, why_size, "%s", msg);
      result = -1;
    } else {
      snprintf(why, why_size, "infer: %s", msg);
      result = 0;
    }
  }
  mb_setup *expect = NULL;
  mb_setup_create(&expect);
  for (size_t k = 0; result == 1 && k < mb_model_num_outputs(m); k++) {
    char out_path[4300];
    snprintf(out_path, sizeof out_path, "%s/output_%zu.pb", path, k);
    size_t len;
    char *bytes = read_file(out_path, &len);
    if (!bytes) { snprintf(why, why_size, "missing %.1000s", out_path); result = -1; break; }
    rc = mb_setup_bind_input(expect, k, bytes, len);
    free(bytes);
    if (rc != MB_OK) { snprintf(why, why_size, "expected output %zu: %s", k, mb_setup_errmsg(expect)); result = -1; break; }
    const mb_const_tensor *want = mb_setup_bound_input(expect, k);
    mb_tensor_desc od = {.struct_size = sizeof od};
    mb_model_output(m, k, &od);
    mb_shape_desc got = {.struct_size = sizeof got};
    int found = 0;
    for (size_t i = 0; i < mb_shapes_num_tensors(sh) && !found; i++) {
      mb_shapes_tensor(sh, i, &got);
      found = !strcmp(got.name, od.name);
    }
    if (!found || !got.known) { snprintf(why, why_size, "output '%s' not inferred", od.name); result = 0; break; }
    /* ONNX <= 1.12 test data stores bfloat16 tensors with data type UINT16 */
    int want_dtype = want->dtype == MB_DTYPE_UINT16 && got.dtype == MB_DTYPE_BFLOAT16
                         ? MB_DTYPE_BFLOAT16 : want->dtype;
    int same = got.dtype == want_dtype && got.rank == want->rank;
    for (int32_t a = 0; same && a < got.rank; a++) same = got.dims[a] == want->dims[a];
    if (!same) {
      char g[256] = "", w[256] = "";
      size_t o = 0;
      for (int32_t a = 0; a < got.rank && o < sizeof g; a++) o += (size_t)snprintf(g + o, sizeof g - o, "%s%lld", a ? "," : "", (long long)got.dims[a]);
      o = 0;
      for (int32_t a = 0; a < want->rank && o < sizeof w; a++) o += (size_t)snprintf(w + o, sizeof w - o, "%s%lld", a ? "," : "", (long long)want->dims[a]);
      snprintf(why, why_size, "output '%s': got %s [%s], expected %s [%s]", od.name,
               mb_dtype_name(got.dtype), g, mb_dtype_name(want->dtype), w);
      result = 0;
    }
  }
  mb_setup_free(expect);
  mb_shapes_free(sh);
  mb_setup_free(s);
  mb_model_free(m);
  return result;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }
static int cmp_op(const void *a, const void *b) { return ((const op_count *)b)->n - ((const op_count *)a)->n; }

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: backend DATA_DIR [--known FILE] [--list-failures]\n"); return 2; }
  const char *known_path = NULL;
  int list = 0;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--known") && i + 1 < argc) known_path = argv[++i];
    else if (!strcmp(argv[i], "--list-failures")) list = 1;
  }
  static const char *suites[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};
  counts total = {0, 0, 0};
  for (size_t su = 0; su < sizeof suites / sizeof suites[0]; su++) {
    char sdir[4096];
    snprintf(sdir, sizeof sdir, "%s/%s", argv[1], suites[su]);
    struct dirent **names;
    int n = scandir(sdir, &names, NULL, alphasort);
    if (n < 0) { fprintf(stderr, "backend: cannot read %s\n", sdir); return 2; }
    counts c = {0, 0, 0};
    for (int i = 0; i < n; i++) {
      if (names[i]->d_name[0] == '.') { free(names[i]); continue; }
      char dir[8192], why[2048] = "";
      snprintf(dir, sizeof dir, "%s/%s", sdir, names[i]->d_name);
      int r = run_test(dir, why, sizeof why);
      if (r > 0) c.passed++;
      else if (r < 0) c.skipped++;
      else {
        c.failed++;
        char id[512];
        snprintf(id, sizeof id, "%s/%s", suites[su], names[i]->d_name);
        if (n_failures < MAX_TESTS) failures[n_failures++] = strdup(id);
        if (list) printf("FAIL %s: %s\n", id, why);
      }
      free(names[i]);
    }
    free(names);
    printf("%-18s %d passed, %d failed, %d skipped\n", suites[su], c.passed, c.failed, c.skipped);
    total.passed += c.passed;
    total.failed += c.failed;
    total.skipped += c.skipped;
  }
  qsort(skipped_ops, (size_t)n_skipped_ops, sizeof *skipped_ops, cmp_op);
  printf("skipped (unsupported op or data-dependent shape):");
  for (int i = 0; i < n_skipped_ops; i++) printf(" %s(%d)", skipped_ops[i].name, skipped_ops[i].n);
  printf("\n");
  int rc = 0;
  if (known_path) {
    size_t len;
    char *known = read_file(known_path, &len);
    if (!known) { fprintf(stderr, "backend: cannot read %s\n", known_path); return 2; }
    char *text = realloc(known, len + 1);
    text[len] = '\0';
    qsort(failures, (size_t)n_failures, sizeof *failures, cmp_str);
    /* every failure must be listed, and every listed test must still fail */
    for (int i = 0; i < n_failures; i++) {
      char needle[600];
      snprintf(needle, sizeof needle, "\n%s\n", failures[i]);
      char *hay = malloc(len + 3);
      snprintf(hay, len + 3, "\n%s\n", text);
      if (!strstr(hay, needle)) { printf("NEW FAILURE %s\n", failures[i]); rc = 1; }
      free(hay);
    }
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
      if (!*line || line[0] == '#') continue;
      int still = 0;
      for (int i = 0; i < n_failures && !still; i++) still = !strcmp(failures[i], line);
      if (!still) { printf("NOW PASSES OR SKIPS (remove from %s): %s\n", known_path, line); rc = 1; }
    }
    free(text);
  }
  printf("total: %d passed, %d failed, %d skipped\n", total.passed, total.failed, total.skipped);
  for (int i = 0; i < n_failures; i++) free(failures[i]);
  return rc;
}
