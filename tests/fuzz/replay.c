/* Replays inputs through the fuzz target's exercise function (exercise.h) without libFuzzer, so
 * inputs that once crashed run under the plain ASan/UBSan build of the tests (ctest:
 * fuzz_replay). Also a systematic mutator for finding new ones:
 *
 *   mb_fuzz_replay [options] FILE|DIR...     (a DIR means every regular file in it, sorted)
 *     --truncate[=STEP]   also load every prefix of each file (every STEP-th length)
 *     --mutate[=STEP]     also load each file with single bytes replaced (every STEP-th offset)
 *     --shard=I/N         only the I-th of N slices of the prefixes/mutations (run N in parallel)
 *     --slow-ms=MS        a load slower than MS (default 1000) of an input under 1 MiB fails;
 *                         0 turns the check off (ctest: speed is a benchmark's job, see
 *                         bench/README.md; the fuzzing scripts keep the limit)
 *     --timeout-s=S       a load still running after S seconds (default 60) ends the run
 *     --save=DIR          write every input that breaks an invariant, is slow, or crashes there
 *     -q                  print only failures and the summary
 *
 * Exit status: 0 when every input held every invariant in time, 1 otherwise; a memory error
 * aborts through the sanitizer, which first prints (and with --save writes) the input. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "exercise.h"

/* Sanitizer hook (weak: absent in a plain build) to name the input that killed the process. */
extern void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

/* UBSan's default is to _exit() on an error, past any hook; it must abort() instead so that
 * the SIGABRT handler below can name and save the input. clang's runtime reads this hook; GCC's
 * does not see it, so main() also re-executes itself with UBSAN_OPTIONS set when it is unset. */
#define MB_REPLAY_UBSAN_OPTIONS "print_stacktrace=1:abort_on_error=1"
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void) { return MB_REPLAY_UBSAN_OPTIONS; }

typedef struct options {
  size_t truncate_step, mutate_step; /* 0: off */
  size_t shard, n_shards;
  double slow_ms;
  unsigned timeout_s;
  const char *save_dir;
  int quiet;
} options;

typedef struct stats {
  uint64_t inputs, ok, failed, violations, slow;
  uint64_t by_status[16]; /* index -status */
  double max_ms;
  char max_what[600];
} stats;

/* The input being loaded right now, for the death callback. */
static struct {
  const char *file;
  const char *op;
  size_t arg;
  const uint8_t *data;
  size_t size;
  const char *save_dir;
} current;

/* Also called while dying, hence open/write rather than stdio. */
static void save_input(const char *tag, const uint8_t *data, size_t size) {
  if (!current.save_dir) return;
  const char *base = strrchr(current.file, '/');
  base = base ? base + 1 : current.file;
  char path[4096];
  snprintf(path, sizeof path, "%s/%s-%s-%s-%zu", current.save_dir, tag, base, current.op,
           current.arg);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
    return;
  }
  for (size_t done = 0; done < size;) {
    ssize_t w = write(fd, data + done, size - done);
    if (w <= 0) break;
    done += (size_t)w;
  }
  close(fd);
  fprintf(stderr, "saved %s\n", path);
}

static void on_death(void) {
  static volatile sig_atomic_t once;
  if (once++) return;
  fprintf(stderr, "mb_fuzz_replay: died on %s (%s %zu, %zu bytes)\n", current.file, current.op,
          current.arg, current.size);
  save_input("crash", current.data, current.size);
}

static void on_abort(int sig) {
  on_death();
  signal(sig, SIG_DFL);
  raise(sig);
}

/* A load that never ends (or eats memory while trying) must not hang CI: name it and stop. */
static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "FAIL timeout: a load ran past --timeout-s\n";
  if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0) { /* nothing more to do */ }
  fprintf(stderr, "mb_fuzz_replay: timed out on %s (%s %zu, %zu bytes)\n", current.file,
          current.op, current.arg, current.size);
  save_input("timeout", current.data, current.size);
  _exit(1);
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void run_one(const options *o, stats *st, const uint8_t *data, size_t size,
                    const char *op, size_t arg) {
  current.op = op;
  current.arg = arg;
  current.data = data;
  current.size = size;
  int status = 0;
  double t0 = now_ms();
  alarm(o->timeout_s);
  int bad = mb_fuzz_exercise(data, size, &status);
  alarm(0);
  double ms = now_ms() - t0;
  st->inputs++;
  if (status == MB_OK) st->ok++;
  else st->failed++;
  if (status < 0 && -status < 16) st->by_status[-status]++;
  if (ms > st->max_ms) {
    st->max_ms = ms;
    snprintf(st->max_what, sizeof st->max_what, "%s (%s %zu, %zu bytes)", current.file, op, arg,
             size);
  }
  if (bad) {
    st->violations++;
    fprintf(stderr, "FAIL invariant: %s (%s %zu)\n", current.file, op, arg);
    save_input("invariant", data, size);
  }
  if (o->slow_ms > 0 && ms > o->slow_ms && size < (1u << 20)) {
    st->slow++;
    fprintf(stderr, "FAIL slow: %s (%s %zu, %zu bytes) took %.0f ms\n", current.file, op, arg,
            size, ms);
    save_input("slow", data, size);
  }
}

static int read_file(const char *path, uint8_t **data, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  size_t cap = 1 << 16, len = 0;
  uint8_t *buf = malloc(cap);
  while (buf) {
    if (len == cap) {
      uint8_t *b = realloc(buf, cap * 2);
      if (!b) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = b;
      cap *= 2;
    }
    size_t r = fread(buf + len, 1, cap - len, f);
    if (r == 0) break;
    len += r;
  }
  int err = ferror(f) || !buf;
  fclose(f);
  if (err) {
    free(buf);
    return -1;
  }
  *data = buf;
  *size = len;
  return 0;
}

static int mine(const options *o, size_t k) { return o->n_shards <= 1 || k % o->n_shards == o->shard; }

static int replay_file(const options *o, stats *st, const char *path) {
  uint8_t *data = NULL;
  size_t size = 0;
  if (read_file(path, &data, &size) != 0) {
    fprintf(stderr, "cannot read %s\n", path);
    return -1;
  }
  current.file = path;
  uint64_t before = st->inputs;
  run_one(o, st, data, size, "whole", size);
  size_t job = 0;
  if (o->truncate_step) {
    for (size_t len = 0; len < size; len += o->truncate_step)
      if (mine(o, job++)) run_one(o, st, data, len, "truncate", len);
  }
  if (o->mutate_step) {
    static const uint8_t values[] = {0x00, 0x01, 0x7f, 0x80, 0xff};
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) {
      free(data);
      return -1;
    }
    memcpy(copy, data, size);
    for (size_t off = 0; off < size; off += o->mutate_step) {
      if (!mine(o, job++)) continue;
      uint8_t orig = copy[off];
      uint8_t tries[sizeof values + 4];
      size_t n = 0;
      memcpy(tries, values, sizeof values);
      n = sizeof values;
      tries[n++] = (uint8_t)(orig + 1);
      tries[n++] = (uint8_t)(orig - 1);
      tries[n++] = orig ^ 0x80;
      tries[n++] = orig ^ 0x40;
      for (size_t t = 0; t < n; t++) {
        if (tries[t] == orig) continue;
        copy[off] = tries[t];
        run_one(o, st, copy, size, "mutate", off * 256 + tries[t]);
      }
      copy[off] = orig;
    }
    free(copy);
  }
  if (!o->quiet)
    printf("%-60s %8zu bytes  %llu load(s)\n", path, size,
           (unsigned long long)(st->inputs - before));
  free(data);
  return 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int replay_path(const options *o, stats *st, const char *path) {
  struct stat sb;
  if (stat(path, &sb) != 0) {
    fprintf(stderr, "cannot stat %s: %s\n", path, strerror(errno));
    return -1;
  }
  if (!S_ISDIR(sb.st_mode)) return replay_file(o, st, path);
  DIR *dir = opendir(path);
  if (!dir) {
    fprintf(stderr, "cannot open %s: %s\n", path, strerror(errno));
    return -1;
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  int rc = 0;
  for (struct dirent *e; (e = readdir(dir));) {
    if (e->d_name[0] == '.') continue;
    size_t need = strlen(path) + strlen(e->d_name) + 2;
    char *full = malloc(need);
    if (!full) { rc = -1; break; }
    snprintf(full, need, "%s/%s", path, e->d_name);
    if (stat(full, &sb) != 0 || !S_ISREG(sb.st_mode)) {
      free(full);
      continue;
    }
    if (n == cap) {
      cap = cap ? cap * 2 : 32;
      char **g = realloc(names, cap * sizeof *g);
      if (!g) { free(full); rc = -1; break; }
      names = g;
    }
    names[n++] = full;
  }
  closedir(dir);
  if (n) qsort(names, n, sizeof *names, cmp_str);
  for (size_t i = 0; i < n; i++) {
    if (rc == 0 && replay_file(o, st, names[i]) != 0) rc = -1;
    free(names[i]);
  }
  free(names);
  return rc;
}

static size_t parse_step(const char *arg, const char *flag) {
  size_t len = strlen(flag);
  if (arg[len] == '\0') return 1;
  if (arg[len] != '=') return 0;
  char *end = NULL;
  unsigned long long v = strtoull(arg + len + 1, &end, 10);
  return end && *end == '\0' && v > 0 ? (size_t)v : 0;
}

static int usage(void) {
  fprintf(stderr,
          "usage: mb_fuzz_replay [--truncate[=STEP]] [--mutate[=STEP]] [--shard=I/N]\n"
          "                      [--slow-ms=MS] [--timeout-s=S] [--save=DIR] [-q] FILE|DIR...\n");
  return 2;
}

int main(int argc, char **argv) {
  options o = {0, 0, 0, 1, 1000.0, 60, NULL, 0};
  stats st;
  memset(&st, 0, sizeof st);
  int n_paths = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strncmp(a, "--truncate", 10)) {
      if (!(o.truncate_step = parse_step(a, "--truncate"))) return usage();
    } else if (!strncmp(a, "--mutate", 8)) {
      if (!(o.mutate_step = parse_step(a, "--mutate"))) return usage();
    } else if (!strncmp(a, "--shard=", 8)) {
      if (sscanf(a + 8, "%zu/%zu", &o.shard, &o.n_shards) != 2 || o.shard >= o.n_shards)
        return usage();
    } else if (!strncmp(a, "--slow-ms=", 10)) {
      o.slow_ms = atof(a + 10);
    } else if (!strncmp(a, "--timeout-s=", 12)) {
      o.timeout_s = (unsigned)atoi(a + 12);
    } else if (!strncmp(a, "--save=", 7)) {
      o.save_dir = a + 7;
    } else if (!strcmp(a, "-q")) {
      o.quiet = 1;
    } else if (a[0] == '-' && a[1]) {
      return usage();
    } else {
      n_paths++;
    }
  }
  if (!n_paths) return usage();
  if (__sanitizer_set_death_callback && !getenv("UBSAN_OPTIONS")) {
    setenv("UBSAN_OPTIONS", MB_REPLAY_UBSAN_OPTIONS, 1);
    execv("/proc/self/exe", argv); /* on failure, go on without it */
  }
  current.save_dir = o.save_dir;
  current.file = "(none)";
  current.op = "whole";
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(on_death);
  signal(SIGABRT, on_abort);
  signal(SIGALRM, on_alarm);

  int io_errors = 0;
  for (int i = 1; i < argc; i++) {
    if (argv[i][0] == '-' && argv[i][1]) continue;
    if (replay_path(&o, &st, argv[i]) != 0) io_errors++;
  }
  printf("mb_fuzz_replay: %llu loads: %llu ok, %llu failed cleanly", (unsigned long long)st.inputs,
         (unsigned long long)st.ok, (unsigned long long)st.failed);
  for (int s = 1; s < 16; s++)
    if (st.by_status[s])
      printf(" [%s: %llu]", mb_status_str(-s), (unsigned long long)st.by_status[s]);
  printf("; %llu invariant failures, %llu slow (> %.0f ms); slowest %.1f ms: %s\n",
         (unsigned long long)st.violations, (unsigned long long)st.slow, o.slow_ms, st.max_ms,
         st.max_what);
  return (st.violations || st.slow || io_errors || !st.inputs) ? 1 : 0;
}
