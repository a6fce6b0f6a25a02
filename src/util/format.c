#include "util/format.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int mb_parse_bytes(const char *s, uint64_t *out) {
  static const struct { const char *unit; double scale; } units[] = {
    {"", 1}, {"B", 1}, {"K", 1024.0}, {"KIB", 1024.0}, {"M", 1048576.0}, {"MIB", 1048576.0},
    {"G", 1073741824.0}, {"GIB", 1073741824.0}, {"T", 1099511627776.0},
    {"TIB", 1099511627776.0}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
  };
  if (!s || !*s) return -1;
  char *end = NULL;
  double v = strtod(s, &end);
  if (end == s || !(v >= 0)) return -1;
  while (*end == ' ') end++;
  char unit[8];
  size_t n = 0;
  for (; *end && n < sizeof unit - 1; end++) unit[n++] = (char)(*end >= 'a' && *end <= 'z' ? *end - 32 : *end);
  if (*end) return -1;
  unit[n] = '\0';
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
    if (!strcmp(unit, units[i].unit)) {
      double bytes = v * units[i].scale;
      if (!(bytes <= MB_MAX_SIZE_BYTES)) return -1; /* sums of sizes stay within int64 */
      *out = (uint64_t)(bytes + 0.5);
      return 0;
    }
  return -1;
}
