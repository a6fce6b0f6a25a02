/* Measured mode in a library built without the CUDA toolkit (MB_WITH_CUDA=OFF, or no toolkit
 * found): every call says so. */
#include <stdio.h>
#include <stdlib.h>

#include "budget/measured.h"

#define NO_CUDA "measured mode is not available: this libmembudget was built without CUDA support " \
                "(the CUDA toolkit was not found, or MB_WITH_CUDA=OFF)"

struct mb_measure {
  char errmsg[256];
};

MB_API int mb_measure_create(const mb_setup *setup, mb_measure **out) {
  (void)setup;
  if (!out) return MB_E_INVALID_ARG;
  *out = calloc(1, sizeof **out);
  if (!*out) return MB_E_NOMEM;
  snprintf((*out)->errmsg, sizeof (*out)->errmsg, "%s", NO_CUDA);
  return MB_E_NO_CUDA;
}

MB_API void mb_measure_free(mb_measure *m) { free(m); }
MB_API const char *mb_measure_errmsg(const mb_measure *m) { return m ? m->errmsg : NO_CUDA; }
MB_API int mb_measure_device(const mb_measure *m, mb_device_info *out) {
  (void)m;
  (void)out;
  return MB_E_NO_CUDA;
}

static int no_cuda(mb_setup *s) {
  if (s) snprintf(s->errmsg, sizeof s->errmsg, "%s", NO_CUDA);
  return MB_E_NO_CUDA;
}

MB_API int mb_measure_run(mb_measure *m, const mb_model *model, mb_setup *s, int64_t batch, mb_replay *out) {
  (void)m, (void)model, (void)batch, (void)out;
  return no_cuda(s);
}

MB_API int mb_measure_estimate(mb_measure *m, const mb_model *model, mb_setup *s, mb_budget *out) {
  (void)m, (void)model, (void)out;
  return no_cuda(s);
}

int mb_measure_budget(mb_measure *m, const mb_model *model, const mb_setup *s, mb_setup *eff, mb_plan **plan,
                      mb_budget *out, mb_diag *d) {
  (void)m, (void)model, (void)s, (void)eff, (void)out;
  *plan = NULL;
  return mb_fail(d, MB_E_NO_CUDA, "%s", NO_CUDA);
}

int mb_measure_replays(mb_measure *m, const mb_model *model, const mb_setup *s, const int64_t *batches, size_t n,
                       mb_replay *out, mb_diag *d) {
  (void)m, (void)model, (void)s, (void)batches, (void)n, (void)out;
  return mb_fail(d, MB_E_NO_CUDA, "%s", NO_CUDA);
}
