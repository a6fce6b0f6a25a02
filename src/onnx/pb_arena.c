#include "onnx/pb_arena.h"

#include <stdint.h>
#include <stdlib.h>

#define ALIGN 16
#define MIN_CHUNK ((size_t)1 << 20)
#define MAX_CHUNK ((size_t)16 << 20) /* chunks double from 1 MiB up to this */

struct mb_pb_chunk {
  mb_pb_chunk *next;
  _Alignas(ALIGN) unsigned char data[]; /* the payload */
};

static void *pb_alloc(void *ctx, size_t size) {
  mb_pb_arena *a = ctx;
  size_t need = (size + ALIGN - 1) & ~(size_t)(ALIGN - 1);
  if (need < size) return NULL; /* overflow */
  if (!a->head || a->cap - a->used < need) {
    size_t cap = a->cap ? a->cap * 2 : MIN_CHUNK;
    if (cap > MAX_CHUNK) cap = MAX_CHUNK;
    if (cap < need) cap = need;
    if (cap > SIZE_MAX - sizeof(mb_pb_chunk)) return NULL;
    mb_pb_chunk *c = malloc(sizeof *c + cap);
    if (!c) return NULL;
    c->next = a->head;
    a->head = c;
    a->cap = cap;
    a->used = 0;
  }
  void *p = a->head->data + a->used;
  a->used += need;
  return p;
}

static void pb_free(void *ctx, void *p) {
  (void)ctx; /* released with the arena */
  (void)p;
}

void mb_pb_arena_init(mb_pb_arena *a) {
  a->allocator.alloc = pb_alloc;
  a->allocator.free = pb_free;
  a->allocator.allocator_data = a;
  a->head = NULL;
  a->used = a->cap = 0;
}

void mb_pb_arena_free(mb_pb_arena *a) {
  while (a->head) {
    mb_pb_chunk *next = a->head->next;
    free(a->head);
    a->head = next;
  }
  a->used = a->cap = 0;
}
