/* Filling caller structs that start with struct_size: write only what fits. */
#ifndef MB_UTIL_VERSIONED_H
#define MB_UTIL_VERSIONED_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Copy the library's full struct `src` into `dst`, whose first uint32_t is the caller's
 * struct_size, keeping that field. Returns 0, or -1 if struct_size is too small to hold even
 * the first version of the struct (min_size). */
static inline int mb_fill_versioned(void *dst, const void *src, size_t full_size, size_t min_size) {
  uint32_t caller_size;
  memcpy(&caller_size, dst, sizeof caller_size);
  if (caller_size < min_size) return -1;
  size_t n = caller_size < full_size ? caller_size : full_size;
  memcpy((char *)dst + sizeof caller_size, (const char *)src + sizeof caller_size,
         n - sizeof caller_size);
  return 0;
}
#endif
