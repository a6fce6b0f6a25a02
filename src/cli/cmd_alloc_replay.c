/* membudget alloc-replay: a recorded allocator request stream through the allocator model. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

unsigned char *mb_cli_slurp(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "membudget: %s: %s\n", path, strerror(errno));
    return NULL;
  }
  size_t cap = 1 << 16, n = 0;
  unsigned char *buf = malloc(cap);
  while (buf) {
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    unsigned char *grown = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
    if (!grown) {
      free(buf);
      buf = NULL;
      break;
    }
    buf = grown;
    cap *= 2;
  }
  if (!buf) fprintf(stderr, "membudget: %s: out of memory\n", path);
  else if (ferror(f)) {
    fprintf(stderr, "membudget: %s: read error\n", path);
    free(buf);
    buf = NULL;
  }
  fclose(f);
  *size = n;
  return buf;
}

static const struct { const char *flag, *key; } value_flags[] = {
  {"--alloc-conf", "alloc_conf"}, {"--gpu", "gpu"}, {"--device-memory", "device_memory"},
  {"--context", "context"}, {"--cuda-version", "cuda_version"}, {"--driver-version", "driver_version"},
  {"--module-loading", "module_loading"},
};

int mb_cmd_alloc_replay(int argc, char **argv) {
  const char *path = NULL;
  int json = 0, rc = MB_EXIT_OK;
  mb_setup *setup = NULL;
  if (mb_setup_create(&setup) != MB_OK) return MB_EXIT_INPUT;
  for (int i = 1; i < argc && rc == MB_EXIT_OK; i++) {
    const char *a = argv[i];
    bool done = false;
    for (size_t k = 0; k < sizeof value_flags / sizeof value_flags[0] && !done; k++)
      if (!strcmp(a, value_flags[k].flag)) {
        done = true;
        if (i + 1 >= argc) rc = mb_cli_usage_error("%s needs a value", a);
        else if (mb_setup_set(setup, value_flags[k].key, argv[++i]) != MB_OK)
          rc = mb_cli_usage_error("%s: %s", a, mb_setup_errmsg(setup));
      }
    if (done) continue;
    if (!strcmp(a, "--json")) json = 1;
    else if (a[0] == '-' && a[1]) rc = mb_cli_usage_error("alloc-replay: unknown option '%s'", a);
    else if (path) rc = mb_cli_usage_error("alloc-replay: more than one snapshot given");
    else path = a;
  }
  if (rc == MB_EXIT_OK && !path) rc = mb_cli_usage_error("alloc-replay: no snapshot given");
  size_t size = 0;
  unsigned char *data = rc == MB_EXIT_OK ? mb_cli_slurp(path, &size) : NULL;
  if (rc == MB_EXIT_OK && !data) rc = MB_EXIT_INPUT;
  mb_alloc_replay *r = NULL;
  char *report = NULL;
  if (rc == MB_EXIT_OK) {
    if (mb_alloc_replay_create(data, size, setup, &r) != MB_OK) {
      fprintf(stderr, "membudget: %s: %s\n", path, r ? mb_alloc_replay_errmsg(r) : "out of memory");
      rc = MB_EXIT_INPUT;
    } else if (mb_alloc_replay_report(r, json, &report) != MB_OK) {
      fprintf(stderr, "membudget: %s: out of memory\n", path);
      rc = MB_EXIT_INPUT;
    } else {
      if (!json) printf("snapshot  %s\n", path);
      fputs(report, stdout);
    }
  }
  mb_free(report);
  mb_alloc_replay_free(r);
  free(data);
  mb_setup_free(setup);
  return rc;
}
