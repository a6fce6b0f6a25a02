#include "util/format.h"

#include <inttypes.h>
#include <stdio.h>

char *mb_fmt_thousands(char *buf, size_t size, uint64_t v) {
  char digits[24];
  int n = snprintf(digits, sizeof digits, "%" PRIu64, v);
  size_t o = 0;
  for (int i = 0; i < n && o + 1 < size; i++) {
    if (i > 0 && (n - i) % 3 == 0 && o + 2 < size) buf[o++] = ',';
    buf[o++] = digits[i];
  }
  if (size) buf[o < size ? o : size - 1] = '\0';
  return buf;
}

char *mb_fmt_bytes(char *buf, size_t size, uint64_t v) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (v < 1024) {
    snprintf(buf, size, "%" PRIu64 " B", v);
    return buf;
  }
  double x = (double)v;
  int u = 0;
  while (x >= 1024.0 && u < 6) {
    x /= 1024.0;
    u++;
  }
  snprintf(buf, size, "%.2f %s", x, units[u]);
  return buf;
}
