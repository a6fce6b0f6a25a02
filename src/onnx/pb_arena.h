/* A bump allocator for protobuf-c's unpack: the unpacked ModelProto lives only while the load
 * converts it, so its hundreds of thousands of small blocks (a torch 2.x export of a 70B model
 * carries five metadata strings per node) are carved from a few large chunks and released at
 * once, instead of one malloc and one free each (a fifth of that load's time). */
#ifndef MB_ONNX_PB_ARENA_H
#define MB_ONNX_PB_ARENA_H
#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

typedef struct mb_pb_chunk mb_pb_chunk;
typedef struct mb_pb_arena {
  ProtobufCAllocator allocator; /* pass &arena.allocator to unpack; its free does nothing */
  mb_pb_chunk *head;
  size_t used, cap;             /* of the head chunk's payload */
} mb_pb_arena;

void mb_pb_arena_init(mb_pb_arena *a);
/* Every block handed out, released; the arena can be used again. */
void mb_pb_arena_free(mb_pb_arena *a);
#endif
