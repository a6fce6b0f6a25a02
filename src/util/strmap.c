#include "util/strmap.h"

#include <stdlib.h>
#include <string.h>

/* A seeded multiply-rotate hash over 8-byte words in two independent lanes, finished with a
 * mixer: names come from untrusted files, and a fixed hash lets a crafted file make every
 * insertion collide (quadratic). The seed comes from the table's own address (randomised by
 * ASLR), so no global state. Words, not bytes: the stacks and module paths a torch 2.x export
 * records are interned as keys hundreds of bytes long, tens of thousands of them in a 70B
 * model, and FNV-1a a byte at a time was a tenth of its load. */
static uint64_t mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  return h ^ (h >> 33);
}

static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static uint64_t hash_mem(const mb_strmap *m, const char *s, size_t n) {
  const uint64_t k1 = 0x9e3779b97f4a7c15ull, k2 = 0xc2b2ae3d27d4eb4full;
  uint64_t a = m->seed ^ 1469598103934665603ull, b = rotl(m->seed, 32) ^ (uint64_t)n;
  for (; n >= 16; s += 16, n -= 16) {
    uint64_t w0, w1;
    memcpy(&w0, s, 8);
    memcpy(&w1, s + 8, 8);
    a = rotl((a ^ w0) * k1, 31);
    b = rotl((b ^ w1) * k2, 29);
  }
  uint64_t w0 = 0, w1 = 0;
  memcpy(&w0, s, n < 8 ? n : 8);
  if (n > 8) memcpy(&w1, s + 8, n - 8);
  a = rotl((a ^ w0) * k1, 31);
  b = rotl((b ^ w1 ^ n) * k2, 29);
  return mix(a ^ mix(b));
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

/* The slot of the key s[0..n) (no NUL in it; s need not be terminated there): its own, or the
 * empty one where it would go. */
static size_t find_slot_n(const mb_strmap *m, const char *s, size_t n) {
  size_t i = (size_t)hash_mem(m, s, n) & (m->cap - 1);
  /* no NUL in s[0..n): a key equal to it over n bytes is at least that long */
  while (m->keys[i] && (strncmp(m->keys[i], s, n) != 0 || m->keys[i][n] != '\0')) i = (i + 1) & (m->cap - 1);
  return i;
}

static size_t find_slot(const mb_strmap *m, const char *key) { return find_slot_n(m, key, strlen(key)); }

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

int32_t mb_strmap_get_n(const mb_strmap *m, const char *s, size_t n) {
  if (!m->cap || memchr(s, '\0', n)) return -1; /* a key never holds a NUL */
  size_t i = find_slot_n(m, s, n);
  return m->keys[i] ? m->vals[i] : -1;
}
