/* The setup keys of measured mode: which CUDA libraries to load and which device to measure.
 * They only name things; src/cuda loads them. Accepted in every build, so a setup is portable
 * between builds with and without CUDA (measured calls then say MB_E_NO_CUDA). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget/setup.h"


int mb_setup_cuda_option(mb_setup *s, const char *key, const char *value, int *rc) {
  if (!strcmp(key, "cuda_device")) {
    char *end = NULL;
    long v = strtol(value, &end, 10);
    if (!*value || *end || v < 0 || v > 1024) {
      snprintf(s->errmsg, sizeof s->errmsg, "cuda_device: '%s' is not a device ordinal (0, 1, ...)", value);
      *rc = MB_E_INVALID_ARG;
    } else {
      s->cuda.device = (int32_t)v;
      *rc = MB_OK;
    }
    return 1;
  }
  for (int k = 0; k < MB_CUDA_LIB_COUNT; k++) {
    if (strcmp(key, mb_cuda_lib_key(k))) continue;
    if (k == MB_CUDA_LIB_RUNTIME && !*value) {
      snprintf(s->errmsg, sizeof s->errmsg, "cuda_runtime: the CUDA runtime cannot be left out");
      *rc = MB_E_INVALID_ARG;
      return 1;
    }
    char *copy = malloc(strlen(value) + 1);
    if (!copy) {
      *rc = MB_E_NOMEM;
      return 1;
    }
    strcpy(copy, value);
    free(s->cuda.lib[k]);
    s->cuda.lib[k] = copy;
    *rc = MB_OK;
    return 1;
  }
  return 0;
}

void mb_setup_cuda_free(mb_setup *s) {
  for (int k = 0; k < MB_CUDA_LIB_COUNT; k++) free(s->cuda.lib[k]);
}
