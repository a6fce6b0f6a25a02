/* Arithmetic on sizes that never wraps: what a budget subtracts and compares is input-driven
 * (a device's memory, a context, a simulated peak), so it saturates instead. */
#ifndef MB_UTIL_CHECKED_H
#define MB_UTIL_CHECKED_H
#include <stdint.h>

/* a - b, or 0 below it */
static inline uint64_t mb_sat_sub(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

/* a - b as a signed figure (what is available: negative when short), clamped to int64 */
static inline int64_t mb_sat_diff(uint64_t a, uint64_t b) {
  if (a >= b) return a - b > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)(a - b);
  return b - a > (uint64_t)INT64_MAX ? -INT64_MAX : -(int64_t)(b - a);
}
#endif
