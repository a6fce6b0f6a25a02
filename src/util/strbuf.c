#include "util/strbuf.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mb_sb_init(mb_strbuf *sb) { memset(sb, 0, sizeof *sb); }

void mb_sb_free(mb_strbuf *sb) {
  free(sb->data);
  mb_sb_init(sb);
}

int mb_sb_failed(const mb_strbuf *sb) { return sb->failed; }

char *mb_sb_reserve(mb_strbuf *sb, size_t n) {
  if (sb->failed) return NULL;
  if (n > SIZE_MAX - sb->len - 1) {
    sb->failed = 1;
    return NULL;
  }
  size_t need = sb->len + n + 1;
  if (need > sb->cap) {
    size_t cap = sb->cap ? sb->cap : 256;
    while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    char *d = realloc(sb->data, cap);
    if (!d) {
      sb->failed = 1;
      return NULL;
    }
    sb->data = d;
    sb->cap = cap;
  }
  return sb->data + sb->len;
}

void mb_sb_append(mb_strbuf *sb, const void *data, size_t n) {
  char *p = mb_sb_reserve(sb, n);
  if (!p) return;
  if (n) memcpy(p, data, n);
  sb->len += n;
  sb->data[sb->len] = '\0';
}

void mb_sb_puts(mb_strbuf *sb, const char *s) { mb_sb_append(sb, s, strlen(s)); }
void mb_sb_putc(mb_strbuf *sb, char c) { mb_sb_append(sb, &c, 1); }

void mb_sb_vprintf(mb_strbuf *sb, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) {
    sb->failed = 1;
    return;
  }
  char *p = mb_sb_reserve(sb, (size_t)n);
  if (!p) return;
  vsnprintf(p, (size_t)n + 1, fmt, ap);
  sb->len += (size_t)n;
}

void mb_sb_printf(mb_strbuf *sb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  mb_sb_vprintf(sb, fmt, ap);
  va_end(ap);
}

char *mb_sb_detach(mb_strbuf *sb) {
  if (sb->failed) {
    mb_sb_free(sb);
    return NULL;
  }
  if (!sb->data) mb_sb_reserve(sb, 0);
  if (sb->failed) return NULL;
  sb->data[sb->len] = '\0';
  char *d = sb->data;
  mb_sb_init(sb);
  return d;
}

/* Length of the valid UTF-8 sequence starting at p (lead byte >= 0x80), or 0. */
static size_t utf8_sequence_length(const unsigned char *p) {
  size_t n;
  uint32_t cp;
  if ((p[0] & 0xE0) == 0xC0) { n = 2; cp = p[0] & 0x1F; }
  else if ((p[0] & 0xF0) == 0xE0) { n = 3; cp = p[0] & 0x0F; }
  else if ((p[0] & 0xF8) == 0xF0) { n = 4; cp = p[0] & 0x07; }
  else return 0;
  for (size_t i = 1; i < n; i++) {
    if ((p[i] & 0xC0) != 0x80) return 0; /* also stops at the terminating NUL */
    cp = (cp << 6) | (p[i] & 0x3F);
  }
  static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min_cp[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

void mb_sb_json_str(mb_strbuf *sb, const char *s) {
  if (!s) {
    mb_sb_puts(sb, "null");
    return;
  }
  mb_sb_putc(sb, '"');
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
      case '"': mb_sb_puts(sb, "\\\""); break;
      case '\\': mb_sb_puts(sb, "\\\\"); break;
      case '\n': mb_sb_puts(sb, "\\n"); break;
      case '\r': mb_sb_puts(sb, "\\r"); break;
      case '\t': mb_sb_puts(sb, "\\t"); break;
      default:
        if (*p < 0x20) {
          mb_sb_printf(sb, "\\u%04x", *p);
        } else if (*p < 0x80) {
          mb_sb_putc(sb, (char)*p);
        } else {
          /* Names come from untrusted files: copy valid UTF-8, replace anything else. */
          size_t n = utf8_sequence_length(p);
          if (n) {
            mb_sb_append(sb, p, n);
            p += n - 1;
          } else {
            mb_sb_puts(sb, "\\ufffd");
          }
        }
    }
  }
  mb_sb_putc(sb, '"');
}

void mb_sb_json_u64(mb_strbuf *sb, uint64_t v) { mb_sb_printf(sb, "%" PRIu64, v); }
void mb_sb_json_i64(mb_strbuf *sb, int64_t v) { mb_sb_printf(sb, "%" PRId64, v); }
