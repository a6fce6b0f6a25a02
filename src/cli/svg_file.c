/* Pictures the library drew (mb_timeline_svg, mb_sweep_svg), written to the file a flag names. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

int mb_cli_write_file(const char *flag, const char *path, const char *data) {
  FILE *f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "membudget: %s: cannot write '%s': %s\n", flag, path, strerror(errno));
    return MB_EXIT_INPUT;
  }
  size_t n = strlen(data);
  int err = fwrite(data, 1, n, f) != n ? errno : 0;
  if (fclose(f) != 0 && !err) err = errno ? errno : EIO;
  if (err) {
    fprintf(stderr, "membudget: %s: writing '%s' failed: %s\n", flag, path, strerror(err));
    return MB_EXIT_INPUT;
  }
  return MB_EXIT_OK;
}

/* The model's file name without its directories: the picture's title. */
static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

int mb_cli_timeline(const mb_model *m, mb_setup *s, const mb_budget *measured, const char *model_path,
                    const char *out_path) {
  char *svg = NULL;
  int64_t batch = 0; /* static: the estimate's own batch, given or solved */
  if (measured) {    /* the static step at the measured budget's batch, on the device it measured */
    char bytes[32];
    snprintf(bytes, sizeof bytes, "%llu", (unsigned long long)measured->device_memory);
    if (measured->device_memory) mb_setup_set(s, "device_memory", bytes);
    batch = measured->batch_size;
  }
  if (mb_timeline_svg(m, s, batch, base_name(model_path), &svg) != MB_OK) {
    fprintf(stderr, "membudget: --timeline: %s\n", mb_setup_errmsg(s));
    return MB_EXIT_INPUT;
  }
  int rc = mb_cli_write_file("--timeline", out_path, svg);
  mb_free(svg);
  return rc;
}
