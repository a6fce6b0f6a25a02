/* Human formatting at the edges: thousands separators and binary units. */
#ifndef MB_UTIL_FORMAT_H
#define MB_UTIL_FORMAT_H
#include <stddef.h>
#include <stdint.h>
/* "12,345,678" into buf (at least 27 bytes). Returns buf. */
char *mb_fmt_thousands(char *buf, size_t size, uint64_t v);
/* "1.50 GiB", "512 B" into buf (at least 16 bytes). Returns buf. */
char *mb_fmt_bytes(char *buf, size_t size, uint64_t v);
/* The largest size an option may give: 4 EiB (2^62), so that a device's memory, a context and
 * workspaces summed, or a budget's figures subtracted from them, stay within int64. */
#define MB_MAX_SIZE_BYTES 4611686018427387904.0
/* "80GiB", "24GB", "16000 MiB", "8e9", "1024": bytes. Binary units (KiB..TiB, also K/M/G/T),
 * decimal units (KB..TB). Returns 0 on success, -1 on a malformed size or one above
 * MB_MAX_SIZE_BYTES. */
int mb_parse_bytes(const char *s, uint64_t *out);
#endif
