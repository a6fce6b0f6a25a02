/* Reading: bytes -> wire pass -> protobuf-c unpack of the slim copy -> IR -> checks.
 * A file is read through onnx/reader.h (pread of what the pass needs, never a mapping), so
 * the weight payloads the wire pass skips are neither read nor counted in our RSS. */
#include "onnx/load.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graph/check.h"
#include "onnx/convert.h"
#include "onnx/external.h"
#include "onnx/pb_arena.h"
#include "onnx/reader.h"
#include "onnx/wire.h"

/* The wire pass over r, then the slim copy into the IR. */
static int read_model(struct mb_model *m, mb_reader *r, mb_diag *d) {
  if (r->size == 0) return mb_fail(d, MB_E_PARSE, "empty input: not an ONNX model");
  mb_strbuf slim;
  mb_sb_init(&slim);
  int rc = mb_wire_slim_reader(r, &slim, d);
  if (rc != MB_OK) {
    mb_sb_free(&slim);
    return rc;
  }
  mb_pb_arena pba; /* protobuf structures never outlive the load: freed at once */
  mb_pb_arena_init(&pba);
  Onnx__ModelProto *pm =
      onnx__model_proto__unpack(&pba.allocator, slim.len, (const uint8_t *)(slim.data ? slim.data : ""));
  if (!pm) {
    mb_pb_arena_free(&pba);
    mb_sb_free(&slim);
    return mb_fail(d, MB_E_PARSE, "not a valid ONNX ModelProto (protobuf-c could not unpack it)");
  }
  rc = mb_convert_model(pm, m, d);
  mb_pb_arena_free(&pba);
  mb_sb_free(&slim);
  if (rc == MB_OK) rc = mb_graph_check_model(m, d);
  return rc;
}

int mb_onnx_read_buffer(struct mb_model *m, const uint8_t *data, size_t size, mb_diag *d) {
  mb_reader r;
  mb_reader_init_buffer(&r, data, size, d);
  return read_model(m, &r, d);
}

int mb_onnx_read_file(struct mb_model *m, const char *path, mb_diag *d) {
  struct stat st;
  /* A device or socket is refused before it is opened (opening one can block or act). */
  if (stat(path, &st) == 0 && mb_external_not_a_file(st.st_mode) && !S_ISFIFO(st.st_mode))
    return mb_fail(d, MB_E_IO, "is %s, not an ONNX file", mb_external_not_a_file(st.st_mode));
  int fd = open(path, O_RDONLY);
  if (fd < 0) {
    mb_fail(d, MB_E_IO, "cannot open: %s", strerror(errno));
  } else if (fstat(fd, &st) != 0) {
    mb_fail(d, MB_E_IO, "cannot stat: %s", strerror(errno));
  } else if (S_ISDIR(st.st_mode)) {
    mb_fail(d, MB_E_IO, "is a directory, not an ONNX file");
  } else if (S_ISREG(st.st_mode)) {
    size_t size = (size_t)st.st_size;
    if ((off_t)size != st.st_size) {
      mb_fail(d, MB_E_LIMIT, "file too large for this platform");
    } else if (mb_limit_check(d, &m->limits, MB_LIMIT_FILE_BYTES, "the model file", size)) {
    } else if (size == 0) {
      mb_fail(d, MB_E_PARSE, "empty file: not an ONNX model");
    } else {
      mb_reader r;
      if (mb_reader_init_fd(&r, fd, size, d) == MB_OK) read_model(m, &r, d);
      mb_reader_free(&r);
    }
  } else if (!S_ISFIFO(st.st_mode)) {
    mb_fail(d, MB_E_IO, "is %s, not an ONNX file", mb_external_not_a_file(st.st_mode));
  } else { /* a pipe: read it whole, up to limit.file_bytes */
    mb_strbuf buf;
    mb_sb_init(&buf);
    for (;;) {
      char *p = mb_sb_reserve(&buf, 1 << 16);
      if (!p) { mb_fail(d, MB_E_NOMEM, "out of memory"); break; }
      ssize_t r = read(fd, p, 1 << 16);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) { mb_fail(d, MB_E_IO, "read error: %s", strerror(errno)); break; }
      if (r == 0) break;
      buf.len += (size_t)r;
      if (mb_limit_check(d, &m->limits, MB_LIMIT_FILE_BYTES, "what the pipe delivered", buf.len)) break;
    }
    if (d->status == MB_OK) mb_onnx_read_buffer(m, (const uint8_t *)buf.data, buf.len, d);
    mb_sb_free(&buf);
  }
  if (fd >= 0) close(fd);
  return d->status;
}
