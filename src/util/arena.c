#include "util/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct mb_arena_block {
  mb_arena_block *next;
  size_t used, cap;
  max_align_t data[]; /* payload */
};

enum { ARENA_BLOCK = 64 * 1024, ARENA_ALIGN = _Alignof(max_align_t) };

void mb_arena_init(mb_arena *a) { a->head = NULL; a->total = 0; }

void mb_arena_destroy(mb_arena *a) {
  mb_arena_block *b = a->head;
  while (b) {
    mb_arena_block *next = b->next;
    free(b);
    b = next;
  }
  a->head = NULL;
  a->total = 0;
}

void *mb_arena_alloc(mb_arena *a, size_t size) {
  if (size == 0) size = 1;
  if (size > SIZE_MAX - ARENA_ALIGN) return NULL;
  size = (size + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
  mb_arena_block *b = a->head;
  if (!b || b->cap - b->used < size) {
    size_t cap = size > ARENA_BLOCK ? size : ARENA_BLOCK;
    if (cap > SIZE_MAX - sizeof(mb_arena_block)) return NULL;
    mb_arena_block *nb = malloc(sizeof(mb_arena_block) + cap);
    if (!nb) return NULL;
    nb->used = 0;
    nb->cap = cap;
    /* A large one-off allocation goes behind the head so the head's free space survives. */
    if (b && size > ARENA_BLOCK) {
      nb->next = b->next;
      b->next = nb;
    } else {
      nb->next = b;
      a->head = nb;
    }
    b = nb;
  }
  void *p = (char *)b->data + b->used;
  b->used += size;
  a->total += size;
  memset(p, 0, size);
  return p;
}

void *mb_arena_array(mb_arena *a, size_t n, size_t size) {
  if (size && n > SIZE_MAX / size) return NULL;
  return mb_arena_alloc(a, n * size);
}

char *mb_arena_strndup(mb_arena *a, const char *s, size_t n) {
  char *d = mb_arena_alloc(a, n + 1);
  if (d && n) memcpy(d, s, n);
  return d;
}

char *mb_arena_strdup(mb_arena *a, const char *s) {
  return mb_arena_strndup(a, s ? s : "", s ? strlen(s) : 0);
}
