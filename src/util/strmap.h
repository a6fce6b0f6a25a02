/* An open-addressing map from borrowed strings to int32 values (tensor name -> index). */
#ifndef MB_UTIL_STRMAP_H
#define MB_UTIL_STRMAP_H
#include <stddef.h>
#include <stdint.h>

typedef struct mb_strmap {
  const char **keys; /* borrowed; NULL marks an empty slot */
  int32_t *vals;
  size_t cap, len;
  uint64_t seed;     /* per-map hash seed */
} mb_strmap;

int mb_strmap_init(mb_strmap *m, size_t expected); /* 0 ok, -1 out of memory */
void mb_strmap_free(mb_strmap *m);
/* Insert key -> val. Returns 1 if inserted, 0 if the key was present (*existing gets its
 * value, nothing changes), -1 on out of memory. */
int mb_strmap_put(mb_strmap *m, const char *key, int32_t val, int32_t *existing);
/* The value, or -1 when absent. */
int32_t mb_strmap_get(const mb_strmap *m, const char *key);
/* The value of the key s[0..n) (s need not be terminated at n), or -1 when absent (always
 * when s[0..n) holds a NUL: a key never does). */
int32_t mb_strmap_get_n(const mb_strmap *m, const char *s, size_t n);
#endif
