/* Binding graph inputs to concrete tensors (ONNX test-data files input_0.pb, input_1.pb, ...):
 * their shapes, and the values of small numeric ones, feed shape inference. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget/setup.h"
#include "onnx.pb-c.h"
#include "onnx/convert.h"
#include "onnx/wire.h"

const mb_const_tensor *mb_setup_bound_input(const mb_setup *s, size_t k) {
  return s && k < s->n_bound && s->is_bound[k] ? &s->bound[k] : NULL;
}

MB_API int mb_setup_bind_input(mb_setup *s, size_t position, const void *tensor_pb, size_t size) {
  if (!s || (!tensor_pb && size)) return MB_E_INVALID_ARG;
  if (position > 4096) {
    snprintf(s->errmsg, sizeof s->errmsg, "input position %zu is out of range", position);
    return MB_E_INVALID_ARG;
  }
  if (position >= s->n_bound) {
    mb_const_tensor *b = realloc(s->bound, (position + 1) * sizeof *b);
    if (!b) return MB_E_NOMEM;
    s->bound = b;
    bool *ib = realloc(s->is_bound, (position + 1) * sizeof *ib);
    if (!ib) return MB_E_NOMEM;
    s->is_bound = ib;
    for (size_t k = s->n_bound; k <= position; k++) {
      memset(&s->bound[k], 0, sizeof s->bound[k]);
      s->is_bound[k] = false;
    }
    s->n_bound = position + 1;
  }
  mb_diag d;
  mb_diag_init(&d);
  mb_strbuf slim;
  mb_sb_init(&slim);
  int rc = mb_wire_slim_tensor(tensor_pb, size, &slim, &d);
  if (rc == MB_OK) {
    Onnx__TensorProto *t =
        onnx__tensor_proto__unpack(NULL, slim.len, (const uint8_t *)(slim.data ? slim.data : ""));
    if (!t) rc = mb_fail(&d, MB_E_PARSE, "not a valid TensorProto");
    else {
      rc = mb_convert_tensor(t, &s->arena, &s->bound[position], &d);
      onnx__tensor_proto__free_unpacked(t, NULL);
    }
  }
  mb_sb_free(&slim);
  if (rc == MB_OK) {
    s->is_bound[position] = true;
    s->errmsg[0] = '\0';
  } else {
    snprintf(s->errmsg, sizeof s->errmsg, "input %zu: %.1000s", position, d.msg);
  }
  return rc;
}

MB_API int mb_setup_bind_input_dir(mb_setup *s, const char *dir) {
  if (!s || !dir) return MB_E_INVALID_ARG;
  int bound = 0;
  for (size_t k = 0;; k++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/input_%zu.pb", dir, k);
    FILE *f = fopen(path, "rb");
    if (!f) break;
    mb_strbuf buf;
    mb_sb_init(&buf);
    char chunk[65536];
    size_t r;
    while ((r = fread(chunk, 1, sizeof chunk, f)) > 0) mb_sb_append(&buf, chunk, r);
    int err = ferror(f);
    fclose(f);
    int rc = err ? MB_E_IO : mb_sb_failed(&buf) ? MB_E_NOMEM
                 : mb_setup_bind_input(s, k, buf.data ? buf.data : "", buf.len);
    mb_sb_free(&buf);
    if (rc != MB_OK) {
      char msg[sizeof s->errmsg];
      snprintf(msg, sizeof msg, "%.400s: %.1000s", path, rc == MB_E_IO ? "read error" : s->errmsg);
      snprintf(s->errmsg, sizeof s->errmsg, "%s", msg);
      return rc;
    }
    bound++;
  }
  if (!bound) {
    snprintf(s->errmsg, sizeof s->errmsg, "%s: no input_0.pb found", dir);
    return MB_E_IO;
  }
  return MB_OK;
}
