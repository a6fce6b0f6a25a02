/* The public model handle: loading (the ONNX reader, then assembly), its message, freeing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget/setup.h"
#include "graph/graph.h"
#include "onnx/external.h"
#include "onnx/load.h"
#include "passes/assemble.h"

static struct mb_model *model_new(void) {
  struct mb_model *m = calloc(1, sizeof *m);
  if (m) mb_arena_init(&m->arena);
  return m;
}

/* Record the outcome on the handle: on failure keep only the message. */
static int finish(struct mb_model *m, mb_diag *d, const char *prefix) {
  m->status = d->status;
  size_t need = strlen(prefix) + strlen(d->msg) + 3;
  m->errmsg = malloc(need);
  if (m->errmsg) {
    if (d->status == MB_OK) m->errmsg[0] = '\0';
    else if (*prefix) snprintf(m->errmsg, need, "%s: %s", prefix, d->msg);
    else snprintf(m->errmsg, need, "%s", d->msg);
  }
  if (d->status != MB_OK) {
    /* A failed model holds only its message: drop the arena and every pointer into it. */
    mb_arena_destroy(&m->arena);
    char *errmsg = m->errmsg;
    int status = m->status;
    memset(m, 0, sizeof *m);
    mb_arena_init(&m->arena);
    m->errmsg = errmsg;
    m->status = status;
  }
  return d->status;
}

/* The limits a load runs under: the setup's limit.* keys, or the defaults. */
static struct mb_model *model_for(const mb_setup *setup) {
  struct mb_model *m = model_new();
  if (m && setup) m->limits = setup->limits;
  return m;
}

MB_API int mb_model_load_buffer_setup(const void *data, size_t size, const mb_setup *setup,
                                      mb_model **out) {
  if (!out) return MB_E_INVALID_ARG;
  struct mb_model *m = *out = model_for(setup);
  if (!m) return MB_E_NOMEM;
  mb_diag d;
  mb_diag_init(&d);
  if (!data && size) mb_fail(&d, MB_E_INVALID_ARG, "NULL buffer");
  else if (mb_onnx_read_buffer(m, data, size, &d) == MB_OK &&
           mb_onnx_check_external(m, NULL, &d) == MB_OK)
    mb_model_assemble(m, &d);
  return finish(m, &d, "");
}

MB_API int mb_model_load_buffer(const void *data, size_t size, mb_model **out) {
  return mb_model_load_buffer_setup(data, size, NULL, out);
}

MB_API int mb_model_load_file_setup(const char *path, const mb_setup *setup, mb_model **out) {
  if (!out) return MB_E_INVALID_ARG;
  struct mb_model *m = *out = model_for(setup);
  if (!m) return MB_E_NOMEM;
  mb_diag d;
  mb_diag_init(&d);
  if (!path) {
    mb_fail(&d, MB_E_INVALID_ARG, "NULL path");
    return finish(m, &d, "");
  }
  if (mb_onnx_read_file(m, path, &d) == MB_OK && mb_onnx_check_external(m, path, &d) == MB_OK)
    mb_model_assemble(m, &d);
  return finish(m, &d, path);
}

MB_API int mb_model_load_file(const char *path, mb_model **out) {
  return mb_model_load_file_setup(path, NULL, out);
}

MB_API void mb_model_free(mb_model *m) {
  if (!m) return;
  mb_arena_destroy(&m->arena);
  free(m->errmsg);
  free(m);
}

MB_API const char *mb_model_errmsg(const mb_model *m) {
  if (!m) return "no model (out of memory)";
  return m->errmsg ? m->errmsg : (m->status ? mb_status_str(m->status) : "");
}
