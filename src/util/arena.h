/* A bump allocator: everything a loaded model owns lives in one arena and is freed at once. */
#ifndef MB_UTIL_ARENA_H
#define MB_UTIL_ARENA_H
#include <stddef.h>

typedef struct mb_arena_block mb_arena_block;
typedef struct mb_arena {
  mb_arena_block *head;
  size_t total; /* bytes handed out, for limits and statistics */
} mb_arena;

void mb_arena_init(mb_arena *a);
void mb_arena_destroy(mb_arena *a);
/* Zeroed memory aligned for any type; NULL when out of memory. */
void *mb_arena_alloc(mb_arena *a, size_t size);
/* n elements of size each, NULL on overflow or out of memory. */
void *mb_arena_array(mb_arena *a, size_t n, size_t size);
char *mb_arena_strdup(mb_arena *a, const char *s);
char *mb_arena_strndup(mb_arena *a, const char *s, size_t n);
#endif
