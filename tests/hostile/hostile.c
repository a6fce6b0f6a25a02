/* The adversarial set's driver: every line of manifest.tsv is a model in models/ (made by
 * make_hostile.py), what to put beside it, the options, and the status and message membudget
 * must answer with, at load, shape inference or estimate.
 *
 *   hostile MANIFEST MODELS_DIR
 *
 * Each case runs in a fresh directory under $TMPDIR: DIR/model/model.onnx and, for fixture=,
 * DIR/model/w.bin as a FIFO, a directory, a symlink or a regular file (DIR/outside.bin is a
 * regular file outside the model's directory for symlinks to escape to). A FIFO or device the
 * loader opened would block it or feed it forever: alarm() turns that into a failure. Cases
 * without a fixture or a file limit are also loaded from memory and must fail the same way.
 * Exit 0 when every case answers as written. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "membudget/membudget.h"

static int failures;

/* snprintf whose truncation is a failure (paths here are short; the check keeps -Werror quiet). */
#define PATHF(buf, ...)                                                        \
  do {                                                                         \
    if ((size_t)snprintf(buf, sizeof buf, __VA_ARGS__) >= sizeof buf) {        \
      fprintf(stderr, "hostile: path too long\n");                             \
      exit(2);                                                                 \
    }                                                                          \
  } while (0)

static const struct {
  const char *name;
  int status;
} statuses[] = {{"ok", MB_OK}, {"io", MB_E_IO}, {"parse", MB_E_PARSE},
                {"invalid_model", MB_E_INVALID_MODEL}, {"unsupported", MB_E_UNSUPPORTED},
                {"limit", MB_E_LIMIT}, {"invalid_arg", MB_E_INVALID_ARG}};

static int status_of(const char *name) {
  for (size_t i = 0; i < sizeof statuses / sizeof *statuses; i++)
    if (!strcmp(statuses[i].name, name)) return statuses[i].status;
  return 1; /* never a real status */
}

static char *read_all(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  size_t cap = 0, len = 0, r;
  do {
    if (len == cap) {
      char *b = realloc(buf, cap = cap ? cap * 2 : 4096);
      if (!b) break;
      buf = b;
    }
    r = fread(buf + len, 1, cap - len, f);
    len += r;
  } while (r > 0);
  fclose(f);
  *size = len;
  return buf;
}

static int write_all(const char *path, const char *data, size_t size) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  size_t w = fwrite(data, 1, size, f);
  return fclose(f) == 0 && w == size ? 0 : -1;
}

/* What w.bin is: fifo | dir | file | link:TARGET (TARGET may be "@outside": DIR/outside.bin). */
static int make_fixture(const char *dir, const char *spec) {
  char path[4096], target[4096];
  PATHF(path, "%s/model/w.bin", dir);
  if (!strcmp(spec, "fifo")) return mkfifo(path, 0600);
  if (!strcmp(spec, "dir")) return mkdir(path, 0700);
  if (!strcmp(spec, "file")) return write_all(path, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", 64);
  if (!strncmp(spec, "link:", 5)) {
    if (!strcmp(spec + 5, "@outside")) PATHF(target, "%s/outside.bin", dir);
    else if (!strcmp(spec + 5, "@inside")) {
      char real[4096];
      PATHF(real, "%s/model/real.bin", dir);
      if (write_all(real, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", 64)) return -1;
      PATHF(target, "real.bin");
    } else PATHF(target, "%s", spec + 5);
    return symlink(target, path);
  }
  errno = EINVAL;
  return -1;
}

static void remove_case_dir(const char *dir) {
  const char *names[] = {"model/w.bin", "model/real.bin", "model/model.onnx", "outside.bin"};
  char path[4096];
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    PATHF(path, "%s/%s", dir, names[i]);
    if (unlink(path) != 0 && errno == EISDIR) rmdir(path);
    else rmdir(path); /* w.bin as a directory: unlink fails with EISDIR or EPERM */
  }
  PATHF(path, "%s/model", dir);
  rmdir(path);
  rmdir(dir);
}

/* Load (from the file, or from memory), infer shapes, then estimate at batch 1 on an 80 GiB
 * device: the first failure's status and message, and at which stage. */
static int run(const char *path, const char *data, size_t size, int from_memory, mb_setup *setup,
               char *msg, size_t cap, const char **stage) {
  mb_model *m = NULL;
  int rc = from_memory ? mb_model_load_buffer_setup(data, size, setup, &m)
                       : mb_model_load_file_setup(path, setup, &m);
  *stage = "load";
  snprintf(msg, cap, "%s", rc ? mb_model_errmsg(m) : "");
  if (rc == MB_OK) { /* shapes alone first: what fails there is said at that stage */
    *stage = "shapes";
    mb_shapes *sh = NULL;
    rc = mb_infer_shapes(m, setup, &sh);
    snprintf(msg, cap, "%s", rc ? mb_shapes_errmsg(sh) : "");
    mb_shapes_free(sh);
  }
  if (rc == MB_OK) {
    *stage = "estimate";
    mb_budget b;
    memset(&b, 0, sizeof b);
    b.struct_size = sizeof b;
    rc = mb_estimate(m, setup, &b);
    snprintf(msg, cap, "%s", rc ? mb_setup_errmsg(setup) : "");
  }
  mb_model_free(m);
  return rc;
}

static void check(const char *file, const char *how, int got, const char *got_stage, const char *msg,
                  int want, const char *want_stage, const char *needle) {
  int ok = got == want && !strcmp(got_stage, want_stage) && (!*needle || strstr(msg, needle));
  if (!ok) {
    failures++;
    fprintf(stderr, "FAIL %s (%s): want %s %s \"%s\"; got %s %s \"%s\"\n", file, how, want_stage,
            mb_status_str(want), needle, got_stage, mb_status_str(got), msg);
  }
}

static void run_case(const char *models, char **col, int ncol) {
  const char *file = col[0], *want_stage = col[1], *needle = ncol > 3 ? col[3] : "";
  int want = status_of(col[2]);
  char src[4096], tmpl[4096], path[4096], msg[2048];
  PATHF(src, "%s/%s", models, file);
  size_t size = 0;
  char *data = read_all(src, &size);
  const char *tmp = getenv("TMPDIR");
  PATHF(tmpl, "%s/mb-hostile-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!data || want == 1 || !mkdtemp(tmpl)) {
    failures++;
    fprintf(stderr, "FAIL %s: cannot set up (model, status '%s' or temp dir)\n", file, col[2]);
    free(data);
    return;
  }
  PATHF(path, "%s/model", tmpl);
  mkdir(path, 0700);
  PATHF(path, "%s/outside.bin", tmpl);
  write_all(path, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", 64);
  PATHF(path, "%s/model/model.onnx", tmpl);
  write_all(path, data, size);

  mb_setup *setup = NULL;
  mb_setup_create(&setup);
  mb_setup_set(setup, "device_memory", "80GiB");
  mb_setup_set_batch(setup, 1);
  int file_only = 0;
  char opts[1024];
  snprintf(opts, sizeof opts, "%s", ncol > 4 ? col[4] : "");
  for (char *save = NULL, *tok = strtok_r(opts, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
    char *eq = strchr(tok, '=');
    if (!eq) continue;
    *eq = '\0';
    if (!strcmp(tok, "fixture")) {
      file_only = 1;
      if (make_fixture(tmpl, eq + 1) != 0) {
        failures++;
        fprintf(stderr, "FAIL %s: cannot make fixture %s: %s\n", file, eq + 1, strerror(errno));
      }
    } else {
      if (!strcmp(tok, "limit.file_bytes")) file_only = 1;
      if (mb_setup_set(setup, tok, eq + 1) != MB_OK) {
        failures++;
        fprintf(stderr, "FAIL %s: %s\n", file, mb_setup_errmsg(setup));
      }
    }
  }
  const char *stage;
  alarm(30); /* a FIFO opened for reading blocks forever */
  int got = run(path, data, size, 0, setup, msg, sizeof msg, &stage);
  check(file, "file", got, stage, msg, want, want_stage, needle);
  if (!file_only) {
    got = run(path, data, size, 1, setup, msg, sizeof msg, &stage);
    check(file, "buffer", got, stage, msg, want, want_stage, needle);
  }
  alarm(0);
  printf("%-36s %-8s %-13s %s\n", file, want_stage, col[2], ncol > 4 ? col[4] : "");
  mb_setup_free(setup);
  free(data);
  remove_case_dir(tmpl);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: hostile MANIFEST MODELS_DIR\n");
    return 2;
  }
  FILE *f = fopen(argv[1], "r");
  if (!f) {
    fprintf(stderr, "hostile: cannot open %s: %s\n", argv[1], strerror(errno));
    return 2;
  }
  char line[4096];
  int cases = 0;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = '\0';
    if (!line[0] || line[0] == '#') continue;
    char *col[5] = {0};
    int n = 0;
    for (char *p = line; p && n < 5; n++) { /* tab-separated; empty columns allowed */
      col[n] = p;
      p = strchr(p, '\t');
      if (p) *p++ = '\0';
    }
    if (n < 3) {
      failures++;
      fprintf(stderr, "FAIL manifest line '%s': needs file, stage, status\n", line);
      continue;
    }
    run_case(argv[2], col, n);
    cases++;
  }
  fclose(f);
  printf("%d cases, %d failures\n", cases, failures);
  return failures || cases == 0 ? 1 : 0;
}
