/* The bytes the wire pass reads, from a buffer in memory or from a regular file.
 *
 * Why not mmap the file: Linux counts every mapped page-cache page as resident, and a file
 * that was just written (or read whole) sits in the page cache as large folios, so touching
 * one byte near a tensor header maps up to 2 MiB around it. With many tensors the load's
 * peak RSS approached the file's size (a fresh 420 MB file of 800 tensors: 416 MB) against
 * 4 MB for its weightless twin. A file is therefore read with pread() through one small
 * window that starts where the parse is: the pass asks for bytes at an offset and skips
 * payloads by offset, so skipped bytes are neither read nor mapped, and the memory a load
 * uses is the window plus the slim copy, whatever the page cache holds.
 *
 * The window grows while the parse reads sequentially (graphs of nodes, value infos) and
 * starts at one page again after a jump over a skipped payload, so each skipped payload costs
 * at most a page or two of reading around its ends. Reads are page-aligned and the
 * descriptor is advised POSIX_FADV_RANDOM, so the kernel does no readahead into payloads.
 * The file is assumed not to change while it is read; if it shrinks, the read fails. */
#ifndef MB_ONNX_READER_H
#define MB_ONNX_READER_H
#include <stddef.h>
#include <stdint.h>

#include "membudget/membudget.h" /* MB_OK */
#include "util/diag.h"
#include "util/strbuf.h"

#define MB_READER_MAX_PEEK 64u          /* most bytes one mb_reader_at call may ask for */
#define MB_READER_WINDOW_MIN 4096u      /* after a jump: one page */
#define MB_READER_WINDOW_MAX (256u << 10)

typedef struct mb_reader {
  const uint8_t *mem; /* buffer source: all the bytes; NULL for a file */
  int fd;             /* file source */
  uint64_t size;      /* bytes in the source */
  uint8_t *win;       /* file source: bytes [win_off, win_off + win_len) of the file */
  uint64_t win_off;
  size_t win_len, win_cap;
  size_t fill;        /* how many bytes the next refill reads */
  uint64_t preads;    /* read calls so far (for the benchmark and the tests) */
  uint64_t bytes_read;
  mb_diag *d;
} mb_reader;

void mb_reader_init_buffer(mb_reader *r, const uint8_t *data, size_t size, mb_diag *d);
/* A regular file of `size` bytes open for reading; the reader does not own fd. */
int mb_reader_init_fd(mb_reader *r, int fd, uint64_t size, mb_diag *d);
void mb_reader_free(mb_reader *r);

/* Slow path of mb_reader_at: refill the window. */
const uint8_t *mb_reader_fill(mb_reader *r, uint64_t off, size_t want, size_t *avail);

/* The bytes at off: a pointer to *avail >= min(want, size - off) of them, valid until the
 * next call on r. want <= MB_READER_MAX_PEEK and off < size. NULL after a read error (d set). */
static inline const uint8_t *mb_reader_at(mb_reader *r, uint64_t off, size_t want,
                                          size_t *avail) {
  if (r->mem) {
    *avail = (size_t)(r->size - off);
    return r->mem + off;
  }
  if (off >= r->win_off && off - r->win_off < r->win_len) {
    size_t have = r->win_len - (size_t)(off - r->win_off);
    if (have >= want || r->win_off + r->win_len == r->size) {
      *avail = have;
      return r->win + (off - r->win_off);
    }
  }
  return mb_reader_fill(r, off, want, avail);
}

/* Slow path of mb_reader_append: bytes outside the window. */
int mb_reader_append_slow(mb_reader *r, uint64_t off, uint64_t n, mb_strbuf *out);

/* Append bytes [off, off + n) of the source to out (off + n <= size). MB_OK, or MB_E_IO /
 * MB_E_NOMEM with d set. */
static inline int mb_reader_append(mb_reader *r, uint64_t off, uint64_t n, mb_strbuf *out) {
  const uint8_t *src = NULL;
  if (n > r->size || off > r->size - n) {
    src = NULL; /* the slow path reports it */
  } else if (r->mem) {
    src = r->mem + off;
  } else if (off >= r->win_off && n <= r->win_len && off - r->win_off <= r->win_len - n) {
    src = r->win + (off - r->win_off); /* most fields lie in the window already */
  }
  if (!src) return mb_reader_append_slow(r, off, n, out);
  mb_sb_append(out, src, (size_t)n);
  return out->failed ? mb_reader_append_slow(r, off, n, out) : MB_OK;
}
#endif
