/* membudget alloc-diff: a recorded step's requests beside the simulated step's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

int mb_cmd_alloc_diff(int argc, char **argv) {
  const char *snapshot = NULL, *path = NULL;
  int json = 0, rc = MB_EXIT_OK, have_batch = 0, have_device = 0, ignore_recorded = 0;
  mb_setup *setup = NULL;
  if (mb_setup_create(&setup) != MB_OK) return MB_EXIT_INPUT;
  if ((rc = mb_cli_backend_first(setup, argc, argv)) != MB_EXIT_OK) {
    mb_setup_free(setup);
    return rc;
  }
  for (int i = 1; i < argc && rc == MB_EXIT_OK; i++) {
    const char *a = argv[i];
    if (mb_cli_training_flag(setup, argc, argv, &i, &rc, &have_device)) continue;
    if (!strcmp(a, "--json")) json = 1;
    else if (!strcmp(a, "--ignore-recorded-setup")) ignore_recorded = 1;
    else if (mb_cli_setup_flag(setup, MB_CLI_TRAINABILITY | MB_CLI_DIMS, argc, argv, &i, &rc))
      have_batch |= !strcmp(a, "--batch");
    else if (a[0] == '-' && a[1]) rc = mb_cli_usage_error("alloc-diff: unknown option '%s'", a);
    else if (!snapshot) snapshot = a;
    else if (!path) path = a;
    else rc = mb_cli_usage_error("alloc-diff: give one snapshot and one model");
  }
  if (rc == MB_EXIT_OK && (!snapshot || !path)) rc = mb_cli_usage_error("alloc-diff: give a snapshot and a model");
  if (rc == MB_EXIT_OK && !have_batch)
    rc = mb_cli_usage_error("alloc-diff: give the batch size the snapshot's step ran at (--batch N)");
  size_t size = 0;
  unsigned char *data = rc == MB_EXIT_OK ? mb_cli_slurp(snapshot, &size) : NULL;
  if (rc == MB_EXIT_OK && !data) rc = MB_EXIT_INPUT;
  mb_model *m = NULL;
  mb_alloc_diff *diff = NULL;
  char *report = NULL, recorded[256] = "";
  if (rc == MB_EXIT_OK) {
    if (mb_model_load_file_setup(path, setup, &m) != MB_OK) {
      fprintf(stderr, "membudget: %s\n", mb_model_errmsg(m));
      rc = MB_EXIT_INPUT;
    } else if (!ignore_recorded && mb_setup_apply_recorded(setup, m, recorded, sizeof recorded) != MB_OK) {
      fprintf(stderr, "membudget: %s: %s (--ignore-recorded-setup runs without it)\n", path, mb_setup_errmsg(setup));
      rc = MB_EXIT_INPUT;
    } else if (mb_alloc_diff_create(data, size, m, setup, &diff) != MB_OK) {
      fprintf(stderr, "membudget: %s: %s\n", snapshot, diff ? mb_alloc_diff_errmsg(diff) : "out of memory");
      rc = MB_EXIT_INPUT;
    } else if (mb_alloc_diff_report(diff, json, &report) != MB_OK) {
      fprintf(stderr, "membudget: %s: out of memory\n", snapshot);
      rc = MB_EXIT_INPUT;
    } else {
      if (!json) {
        printf("snapshot  %s\nmodel     %s\n", snapshot, path);
        if (*recorded) printf("recorded from the file: %s\n", recorded);
      }
      fputs(report, stdout);
    }
  }
  (void)have_device;
  mb_free(report);
  mb_alloc_diff_free(diff);
  mb_model_free(m);
  free(data);
  mb_setup_free(setup);
  return rc;
}
