#include "onnx/reader.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "membudget/membudget.h"

#define PAGE 4096u /* alignment of window reads; any page size works, this only aligns */

void mb_reader_init_buffer(mb_reader *r, const uint8_t *data, size_t size, mb_diag *d) {
  memset(r, 0, sizeof *r);
  static const uint8_t none[1] = {0};
  r->mem = data ? data : none; /* size 0 never dereferences it */
  r->fd = -1;
  r->size = size;
  r->d = d;
}

int mb_reader_init_fd(mb_reader *r, int fd, uint64_t size, mb_diag *d) {
  memset(r, 0, sizeof *r);
  r->fd = fd;
  r->size = size;
  r->d = d;
  r->fill = MB_READER_WINDOW_MIN; /* grows while the reads are sequential */
  /* a small file needs no more window than its size */
  size_t cap = MB_READER_WINDOW_MAX + 2 * PAGE; /* a read may round up to a page boundary */
  r->win_cap = size < cap ? (size_t)size : cap;
  r->win = malloc(r->win_cap ? r->win_cap : 1);
  if (!r->win) return mb_fail(d, MB_E_NOMEM, "out of memory");
  /* No readahead: it would read payloads the pass skips into the page cache. Advice only;
   * a file system that ignores it costs time, not correctness. */
  (void)posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
  return MB_OK;
}

void mb_reader_free(mb_reader *r) {
  free(r->win);
  r->win = NULL;
}

/* Read exactly n bytes at off into dst. */
static int read_exact(mb_reader *r, uint8_t *dst, uint64_t off, size_t n) {
  r->preads++;
  while (n > 0) {
    ssize_t got = pread(r->fd, dst, n, (off_t)off);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0)
      return mb_fail(r->d, MB_E_IO, "read error at byte %llu: %s", (unsigned long long)off,
                     strerror(errno));
    if (got == 0)
      return mb_fail(r->d, MB_E_IO, "file ended at byte %llu, before its size when opened "
                     "(%llu bytes): changed while being read?", (unsigned long long)off,
                     (unsigned long long)r->size);
    dst += got;
    off += (uint64_t)got;
    n -= (size_t)got;
    r->bytes_read += (uint64_t)got;
  }
  return MB_OK;
}

/* Make the window hold [off, off + need). */
static int refill(mb_reader *r, uint64_t off, size_t need) {
  uint64_t start, win_end = r->win_off + r->win_len;
  size_t keep = 0;
  if (r->win_len && off >= r->win_off && off <= win_end) {
    /* Reading on from the window: keep its unread tail, read what follows, and read more
     * next time (graphs of nodes and value infos are long runs of small fields). */
    if (r->fill < MB_READER_WINDOW_MAX) r->fill *= 2;
    keep = (size_t)(win_end - off);
    memmove(r->win, r->win + (off - r->win_off), keep);
    start = off;
  } else {
    /* A jump past the window skipped a payload: what follows is a header. Read from the
     * page that holds it, one page unless the reads go on. */
    if (r->win_len) r->fill = MB_READER_WINDOW_MIN;
    start = off - off % PAGE;
  }
  uint64_t len = r->fill;
  if (len < off - start + need) len = off - start + need; /* at most PAGE + WINDOW_MAX / 2 */
  len += (PAGE - (start + len) % PAGE) % PAGE;            /* end on a page boundary */
  if (len > r->size - start) len = r->size - start;
  if (len > r->win_cap) /* cannot happen: fill <= WINDOW_MAX, need <= WINDOW_MAX / 2 */
    return mb_fail(r->d, MB_E_INVALID_ARG, "internal: reader window of %zu bytes asked for %llu",
                   r->win_cap, (unsigned long long)len);
  r->win_len = 0; /* invalid until the read succeeds */
  int rc = read_exact(r, r->win + keep, start + keep, (size_t)(len - keep));
  if (rc != MB_OK) return rc;
  r->win_off = start;
  r->win_len = (size_t)len;
  return MB_OK;
}

static int misuse(mb_reader *r, uint64_t off, uint64_t n) {
  return mb_fail(r->d, MB_E_INVALID_ARG, "internal: reader asked for %llu bytes at byte %llu "
                 "of %llu", (unsigned long long)n, (unsigned long long)off,
                 (unsigned long long)r->size);
}

const uint8_t *mb_reader_fill(mb_reader *r, uint64_t off, size_t want, size_t *avail) {
  if (r->mem || off >= r->size || want > MB_READER_MAX_PEEK) {
    misuse(r, off, want);
    return NULL;
  }
  uint64_t rest = r->size - off;
  if (refill(r, off, (size_t)(want < rest ? want : rest)) != MB_OK) return NULL;
  *avail = r->win_len - (size_t)(off - r->win_off);
  return r->win + (off - r->win_off);
}

int mb_reader_append_slow(mb_reader *r, uint64_t off, uint64_t n, mb_strbuf *out) {
  if (n > r->size || off > r->size - n) return misuse(r, off, n);
  if (mb_sb_failed(out) || n > SIZE_MAX - 1) return mb_fail(r->d, MB_E_NOMEM, "out of memory");
  const uint8_t *src = NULL;
  if (r->mem) {
    src = r->mem + off;
  } else if (n <= MB_READER_WINDOW_MAX / 2) {
    int rc = refill(r, off, (size_t)n);
    if (rc != MB_OK) return rc;
    src = r->win + (off - r->win_off);
  }
  if (src) {
    mb_sb_append(out, src, (size_t)n);
    return mb_sb_failed(out) ? mb_fail(r->d, MB_E_NOMEM, "out of memory") : MB_OK;
  }
  /* A long field (a doc string, a big node list): read it straight into the output, which
   * holds it anyway, instead of through the window. */
  char *dst = mb_sb_reserve(out, (size_t)n);
  if (!dst) return mb_fail(r->d, MB_E_NOMEM, "out of memory");
  int rc = read_exact(r, (uint8_t *)dst, off, (size_t)n);
  if (rc != MB_OK) return rc;
  out->len += (size_t)n;
  out->data[out->len] = '\0';
  return MB_OK;
}
