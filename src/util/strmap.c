#include "util/strmap.h"

#include <stdlib.h>
#include <string.h>

/* FNV-1a started from a per-map seed and finished with a mixer: names come from untrusted
 * files, and a fixed hash lets a crafted file make every insertion collide (quadratic). The
 * seed comes from the table's own address (randomised by ASLR), so no global state. */
static uint64_t hash_str(const mb_strmap *m, const char *s) {
  uint64_t h = 1469598103934665603ull ^ m->seed;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  return h ^ (h >> 33);
}

int mb_strmap_init(mb_strmap *m, size_t expected) {
  size_t cap = 16;
  while (cap < expected * 2 + 1) {
    if (cap > SIZE_MAX / 4) return -1;
    cap *= 2;
  }
  m->keys = calloc(cap, sizeof *m->keys);
  m->vals = calloc(cap, sizeof *m->vals);
  m->cap = cap;
  m->len = 0;
  uint64_t a = (uint64_t)(uintptr_t)m->keys;
  m->seed = (a * 0x9e3779b97f4a7c15ull) ^ (a >> 29);
  if (!m->keys || !m->vals) {
    mb_strmap_free(m);
    return -1;
  }
  return 0;
}

void mb_strmap_free(mb_strmap *m) {
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}

static size_t find_slot(const mb_strmap *m, const char *key) {
  size_t i = (size_t)hash_str(m, key) & (m->cap - 1);
  while (m->keys[i] && strcmp(m->keys[i], key) != 0) i = (i + 1) & (m->cap - 1);
  return i;
}

static int grow(mb_strmap *m) {
  mb_strmap bigger;
  if (mb_strmap_init(&bigger, m->cap) != 0) return -1;
  for (size_t i = 0; i < m->cap; i++) {
    if (!m->keys[i]) continue;
    size_t j = find_slot(&bigger, m->keys[i]);
    bigger.keys[j] = m->keys[i];
    bigger.vals[j] = m->vals[i];
  }
  bigger.len = m->len;
  mb_strmap_free(m);
  *m = bigger;
  return 0;
}

int mb_strmap_put(mb_strmap *m, const char *key, int32_t val, int32_t *existing) {
  if ((m->len + 1) * 2 > m->cap && grow(m) != 0) return -1;
  size_t i = find_slot(m, key);
  if (m->keys[i]) {
    if (existing) *existing = m->vals[i];
    return 0;
  }
  m->keys[i] = key;
  m->vals[i] = val;
  m->len++;
  return 1;
}

int32_t mb_strmap_get(const mb_strmap *m, const char *key) {
  if (!m->cap) return -1;
  size_t i = find_slot(m, key);
  return m->keys[i] ? m->vals[i] : -1;
}
