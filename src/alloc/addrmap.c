/* mb_addrmap: linear probing, grown at 3/4 full (deleted slots counted). */
#include "alloc/addrmap.h"

#include <stdlib.h>

#include "membudget/membudget.h"

static size_t slot_of(uint64_t k, size_t cap) {
  k ^= k >> 33;
  k *= UINT64_C(0xff51afd7ed558ccd);
  k ^= k >> 33;
  return (size_t)k & (cap - 1);
}

static int grow(mb_addrmap *m) {
  size_t cap = m->cap ? m->cap * 2 : 1024;
  mb_addrmap g = {calloc(cap, sizeof *g.key), calloc(cap, sizeof *g.val), calloc(cap, 1), cap, 0, 0};
  if (!g.key || !g.val || !g.used) {
    free(g.key);
    free(g.val);
    free(g.used);
    return MB_E_NOMEM;
  }
  for (size_t i = 0; i < m->cap; i++) {
    if (m->used[i] != 1) continue;
    size_t j = slot_of(m->key[i], cap);
    while (g.used[j]) j = (j + 1) & (cap - 1);
    g.used[j] = 1;
    g.key[j] = m->key[i];
    g.val[j] = m->val[i];
    g.n++;
  }
  free(m->key);
  free(m->val);
  free(m->used);
  *m = g;
  return MB_OK;
}

size_t mb_addrmap_find(const mb_addrmap *m, uint64_t k) {
  if (!m->cap) return SIZE_MAX;
  for (size_t j = slot_of(k, m->cap), probes = 0; probes < m->cap; j = (j + 1) & (m->cap - 1), probes++) {
    if (!m->used[j]) return SIZE_MAX;
    if (m->used[j] == 1 && m->key[j] == k) return j;
  }
  return SIZE_MAX;
}

int mb_addrmap_put(mb_addrmap *m, uint64_t k, int64_t v) {
  if ((m->n + m->tomb + 1) * 4 > m->cap * 3 && grow(m) != MB_OK) return MB_E_NOMEM;
  size_t j = slot_of(k, m->cap);
  while (m->used[j] == 1) j = (j + 1) & (m->cap - 1);
  if (m->used[j] == 2) m->tomb--;
  m->used[j] = 1;
  m->key[j] = k;
  m->val[j] = v;
  m->n++;
  return MB_OK;
}

void mb_addrmap_del(mb_addrmap *m, size_t j) {
  m->used[j] = 2;
  m->n--;
  m->tomb++;
}

void mb_addrmap_free(mb_addrmap *m) {
  free(m->key);
  free(m->val);
  free(m->used);
}
