/* Loading: bytes -> wire pass -> protobuf-c unpack of the slim copy -> IR -> checks -> roles.
 * Files are memory-mapped so that the weight payloads the wire pass skips are never read. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graph/check.h"
#include "onnx/convert.h"
#include "onnx/wire.h"
#include "ops/op.h"
#include "passes/inference.h"
#include "passes/roles.h"

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

static int load_bytes(struct mb_model *m, const uint8_t *data, size_t size, mb_diag *d) {
  if (size == 0) return mb_fail(d, MB_E_PARSE, "empty input: not an ONNX model");
  mb_strbuf slim;
  mb_sb_init(&slim);
  int rc = mb_wire_slim_model(data, size, &slim, d);
  if (rc != MB_OK) {
    mb_sb_free(&slim);
    return rc;
  }
  Onnx__ModelProto *pm =
      onnx__model_proto__unpack(NULL, slim.len, (const uint8_t *)(slim.data ? slim.data : ""));
  if (!pm) {
    mb_sb_free(&slim);
    return mb_fail(d, MB_E_PARSE, "not a valid ONNX ModelProto (protobuf-c could not unpack it)");
  }
  rc = mb_convert_model(pm, m, d);
  onnx__model_proto__free_unpacked(pm, NULL); /* protobuf structures never outlive the load */
  mb_sb_free(&slim);
  if (rc == MB_OK) rc = mb_graph_check_model(m, d);
  if (rc == MB_OK) rc = mb_roles_derive(m, d);
  if (rc == MB_OK) rc = mb_ops_resolve_model(m, d);
  if (rc == MB_OK) rc = mb_find_inference_signs(m, d);
  return rc;
}

MB_API int mb_model_load_buffer(const void *data, size_t size, mb_model **out) {
  if (!out) return MB_E_INVALID_ARG;
  struct mb_model *m = *out = model_new();
  if (!m) return MB_E_NOMEM;
  mb_diag d;
  mb_diag_init(&d);
  if (!data && size) mb_fail(&d, MB_E_INVALID_ARG, "NULL buffer");
  else load_bytes(m, data, size, &d);
  return finish(m, &d, "");
}

MB_API int mb_model_load_file(const char *path, mb_model **out) {
  if (!out) return MB_E_INVALID_ARG;
  struct mb_model *m = *out = model_new();
  if (!m) return MB_E_NOMEM;
  mb_diag d;
  mb_diag_init(&d);
  if (!path) {
    mb_fail(&d, MB_E_INVALID_ARG, "NULL path");
    return finish(m, &d, "");
  }
  int fd = open(path, O_RDONLY);
  struct stat st;
  if (fd < 0) {
    mb_fail(&d, MB_E_IO, "cannot open: %s", strerror(errno));
  } else if (fstat(fd, &st) != 0) {
    mb_fail(&d, MB_E_IO, "cannot stat: %s", strerror(errno));
  } else if (S_ISDIR(st.st_mode)) {
    mb_fail(&d, MB_E_IO, "is a directory, not an ONNX file");
  } else if (S_ISREG(st.st_mode)) {
    size_t size = (size_t)st.st_size;
    if ((off_t)size != st.st_size) {
      mb_fail(&d, MB_E_LIMIT, "file too large for this platform");
    } else if (size == 0) {
      mb_fail(&d, MB_E_PARSE, "empty file: not an ONNX model");
    } else {
      void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
      if (map == MAP_FAILED) {
        mb_fail(&d, MB_E_IO, "cannot map: %s", strerror(errno));
      } else {
        /* We touch a few bytes near each tensor header and skip the payloads: readahead would
         * pull megabytes of weights per touch on a cold cache. */
        posix_madvise(map, size, POSIX_MADV_RANDOM);
        load_bytes(m, map, size, &d);
        munmap(map, size);
      }
    }
  } else { /* a pipe or device: read it whole */
    mb_strbuf buf;
    mb_sb_init(&buf);
    for (;;) {
      char *p = mb_sb_reserve(&buf, 1 << 16);
      if (!p) { mb_fail(&d, MB_E_NOMEM, "out of memory"); break; }
      ssize_t r = read(fd, p, 1 << 16);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) { mb_fail(&d, MB_E_IO, "read error: %s", strerror(errno)); break; }
      if (r == 0) break;
      buf.len += (size_t)r;
    }
    if (d.status == MB_OK) load_bytes(m, (const uint8_t *)buf.data, buf.len, &d);
    mb_sb_free(&buf);
  }
  if (fd >= 0) close(fd);
  return finish(m, &d, path);
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
