#include "util/diag.h"

#include <stdarg.h>
#include <stdio.h>

#include "membudget/membudget.h"

void mb_diag_init(mb_diag *d) {
  d->status = MB_OK;
  d->msg[0] = '\0';
}

int mb_fail(mb_diag *d, int status, const char *fmt, ...) {
  if (d->status == MB_OK) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->msg, sizeof d->msg, fmt, ap);
    va_end(ap);
    d->status = status;
  }
  return status;
}
