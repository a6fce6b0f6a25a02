/* A growable byte/string buffer with JSON helpers. Errors are sticky: after an allocation
 * failure every call is a no-op and mb_sb_failed() reports it once at the end. */
#ifndef MB_UTIL_STRBUF_H
#define MB_UTIL_STRBUF_H
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

typedef struct mb_strbuf {
  char *data;
  size_t len, cap;
  int failed;
} mb_strbuf;

void mb_sb_init(mb_strbuf *sb);
void mb_sb_free(mb_strbuf *sb);
int mb_sb_failed(const mb_strbuf *sb);
/* Make room for n more bytes; returns a pointer to them (not yet counted in len) or NULL. */
char *mb_sb_reserve(mb_strbuf *sb, size_t n);
void mb_sb_append(mb_strbuf *sb, const void *data, size_t n);
void mb_sb_puts(mb_strbuf *sb, const char *s);
void mb_sb_putc(mb_strbuf *sb, char c);
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void mb_sb_printf(mb_strbuf *sb, const char *fmt, ...);
#if defined(__GNUC__)
__attribute__((format(printf, 2, 0)))
#endif
void mb_sb_vprintf(mb_strbuf *sb, const char *fmt, va_list ap);
/* Take ownership of the NUL-terminated contents (caller frees with free()). */
char *mb_sb_detach(mb_strbuf *sb);

/* JSON: a quoted, escaped string (NULL prints null). */
void mb_sb_json_str(mb_strbuf *sb, const char *s);
void mb_sb_json_u64(mb_strbuf *sb, uint64_t v);
void mb_sb_json_i64(mb_strbuf *sb, int64_t v);
#endif
