/* Live allocations by address: an open-addressing map from a 64-bit address to a 64-bit
 * value, for the readers of recorded request streams (alloc/replay.c, alloc/snapshot_stream.c). */
#ifndef MB_ALLOC_ADDRMAP_H
#define MB_ALLOC_ADDRMAP_H
#include <stddef.h>
#include <stdint.h>

typedef struct mb_addrmap {
  uint64_t *key;
  int64_t *val;
  uint8_t *used;  /* 0 empty, 1 full, 2 deleted */
  size_t cap, n, tomb;
} mb_addrmap;

/* The slot holding k, or SIZE_MAX. */
size_t mb_addrmap_find(const mb_addrmap *m, uint64_t k);
/* Add k (not present) with v; MB_OK or MB_E_NOMEM. */
int mb_addrmap_put(mb_addrmap *m, uint64_t k, int64_t v);
void mb_addrmap_del(mb_addrmap *m, size_t slot);
void mb_addrmap_free(mb_addrmap *m);
#endif
