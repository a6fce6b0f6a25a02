/* The snapshot reader's fuzz regression run, without libFuzzer (ctest: fuzz_snapshot): every
 * file given (directories: every file in them), then every prefix of each and each with single
 * bytes replaced by values that steer a pickle or JSON reader somewhere else (opcodes,
 * brackets, quotes, digits, 0x00, 0xff), all through snapshot_exercise.h.
 *   mb_fuzz_snapshot_replay [--step=N] FILE|DIR... [--step=N] ...
 *     --step=N: every N-th prefix and offset, for the files after it
 * Exit status 0 when every input kept every invariant; a memory error aborts through the
 * sanitizer after the input's description is printed. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "snapshot_exercise.h"

static const char *current = "";

static int run(const uint8_t *data, size_t size, const char *what, size_t at) {
  if (mb_fuzz_exercise_snapshot(data, size) == 0) return 0;
  fprintf(stderr, "FAIL %s (%s %zu)\n", current, what, at);
  return 1;
}

static int one_file(const char *path, size_t step) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "%s: cannot open\n", path);
    return 1;
  }
  static uint8_t buf[1 << 20];
  size_t size = fread(buf, 1, sizeof buf, f);
  fclose(f);
  current = path;
  uint8_t *copy = malloc(size + 1);
  if (!copy) return 1;
  int failed = run(buf, size, "whole", size);
  for (size_t n = 0; n < size; n += step) { /* an allocation of exactly n bytes: ASan sees over-reads */
    uint8_t *exact = malloc(n ? n : 1);
    if (exact) {
      memcpy(exact, buf, n);
      failed |= run(exact, n, "prefix", n);
      free(exact);
    }
  }
  static const uint8_t values[] = {0x00, 0xff, 0x80, '(', ']', '}', '"', ',', '.', 'h', 'j', 'e',
                                   'u', 0x8a, 0x95, '9'};
  for (size_t at = 0; at < size; at += step)
    for (size_t k = 0; k < sizeof values; k++) {
      if (buf[at] == values[k]) continue;
      memcpy(copy, buf, size);
      copy[at] = values[k];
      failed |= run(copy, size, "byte", at);
    }
  free(copy);
  return failed;
}

int main(int argc, char **argv) {
  size_t step = 1;
  int failed = 0, files = 0;
  for (int i = 1; i < argc; i++) {
    if (!strncmp(argv[i], "--step=", 7)) {
      step = (size_t)strtoul(argv[i] + 7, NULL, 10);
      if (!step) step = 1;
      continue;
    }
    struct stat st;
    if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
      struct dirent **names = NULL;
      int n = scandir(argv[i], &names, NULL, alphasort);
      for (int k = 0; k < n; k++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", argv[i], names[k]->d_name);
        if (names[k]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
          failed |= one_file(path, step);
          files++;
        }
        free(names[k]);
      }
      free(names);
    } else {
      failed |= one_file(argv[i], step);
      files++;
    }
  }
  printf("snapshot replay: %d files, %s\n", files, failed ? "FAILED" : "every invariant held");
  return failed;
}
