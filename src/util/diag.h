/* Error reporting inside the library: one message per operation, written into the caller's
 * diag and later copied onto the handle. No global state. */
#ifndef MB_UTIL_DIAG_H
#define MB_UTIL_DIAG_H
#include <stddef.h>

typedef struct mb_diag {
  int status;      /* MB_OK or the first failure's status */
  char msg[1024];  /* the first failure's message */
} mb_diag;

void mb_diag_init(mb_diag *d);
/* Record a failure (only the first one is kept). Returns status, for `return mb_fail(...)`. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
int mb_fail(mb_diag *d, int status, const char *fmt, ...);
#endif
