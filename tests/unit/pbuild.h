/* Build protobuf messages by hand for tests: the ONNX files a real exporter would never write. */
#ifndef MB_TEST_PBUILD_H
#define MB_TEST_PBUILD_H
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct pb {
  uint8_t *d;
  size_t len, cap;
} pb;

static inline void pb_raw(pb *b, const void *p, size_t n) {
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + n) cap *= 2;
    b->d = realloc(b->d, cap);
    b->cap = cap;
  }
  if (n) memcpy(b->d + b->len, p, n);
  b->len += n;
}
static inline void pb_varint(pb *b, uint64_t v) {
  uint8_t t[10];
  size_t n = 0;
  do { t[n++] = (uint8_t)((v & 0x7F) | (v >= 0x80 ? 0x80 : 0)); v >>= 7; } while (v);
  pb_raw(b, t, n);
}
static inline void pb_int(pb *b, uint32_t field, int64_t v) { pb_varint(b, field << 3); pb_varint(b, (uint64_t)v); }
static inline void pb_bytes(pb *b, uint32_t field, const void *p, size_t n) {
  pb_varint(b, (field << 3) | 2);
  pb_varint(b, n);
  pb_raw(b, p, n);
}
static inline void pb_str(pb *b, uint32_t field, const char *s) { pb_bytes(b, field, s, strlen(s)); }
/* Append sub as a nested message and free it. */
static inline void pb_msg(pb *b, uint32_t field, pb *sub) {
  pb_bytes(b, field, sub->d, sub->len);
  free(sub->d);
  memset(sub, 0, sizeof *sub);
}
static inline void pb_free(pb *b) { free(b->d); memset(b, 0, sizeof *b); }

/* ONNX field numbers used by the tests. */
enum {
  MODEL_IR_VERSION = 1, MODEL_GRAPH = 7, MODEL_OPSET = 8,
  OPSET_DOMAIN = 1, OPSET_VERSION = 2,
  GRAPH_NODE = 1, GRAPH_NAME = 2, GRAPH_INIT = 5, GRAPH_INPUT = 11, GRAPH_OUTPUT = 12,
  NODE_INPUT = 1, NODE_OUTPUT = 2, NODE_NAME = 3, NODE_OP = 4, NODE_ATTR = 5,
  ATTR_NAME = 1, ATTR_G = 6, ATTR_TYPE = 20,
  TENSOR_DIMS = 1, TENSOR_DTYPE = 2, TENSOR_NAME = 8, TENSOR_RAW = 9,
  TENSOR_EXTERNAL = 13, TENSOR_LOCATION = 14,
  ENTRY_KEY = 1, ENTRY_VALUE = 2,
  VI_NAME = 1, VI_TYPE = 2, TYPE_TENSOR = 1, TT_ELEM = 1, TT_SHAPE = 2, SHAPE_DIM = 1,
  DIM_VALUE = 1, DIM_PARAM = 2
};

/* A float tensor value_info with the given dims (-1 = symbolic "batch"). */
static inline void pb_value_info(pb *b, uint32_t field, const char *name, int elem,
                                 const int64_t *dims, int rank) {
  pb vi = {0}, ty = {0}, tt = {0}, sh = {0};
  for (int k = 0; k < rank; k++) {
    pb dm = {0};
    if (dims[k] < 0) pb_str(&dm, DIM_PARAM, "batch");
    else pb_int(&dm, DIM_VALUE, dims[k]);
    pb_msg(&sh, SHAPE_DIM, &dm);
  }
  pb_int(&tt, TT_ELEM, elem);
  pb_msg(&tt, TT_SHAPE, &sh);
  pb_msg(&ty, TYPE_TENSOR, &tt);
  pb_str(&vi, VI_NAME, name);
  pb_msg(&vi, VI_TYPE, &ty);
  pb_msg(b, field, &vi);
}

/* A node with up to 4 inputs and 2 outputs (NULL ends each list). */
static inline void pb_node(pb *graph, const char *name, const char *op, const char *const *in,
                           const char *const *out) {
  pb n = {0};
  for (int i = 0; in && in[i]; i++) pb_str(&n, NODE_INPUT, in[i]);
  for (int i = 0; out && out[i]; i++) pb_str(&n, NODE_OUTPUT, out[i]);
  pb_str(&n, NODE_NAME, name);
  pb_str(&n, NODE_OP, op);
  pb_msg(graph, GRAPH_NODE, &n);
}

/* An initializer; raw_len < 0 means no data at all (weightless stand-in). */
static inline void pb_init(pb *graph, const char *name, int dtype, const int64_t *dims, int rank,
                           long raw_len) {
  pb t = {0};
  for (int k = 0; k < rank; k++) pb_int(&t, TENSOR_DIMS, dims[k]);
  pb_int(&t, TENSOR_DTYPE, dtype);
  pb_str(&t, TENSOR_NAME, name);
  if (raw_len >= 0) {
    void *z = calloc(1, (size_t)raw_len + 1);
    pb_bytes(&t, TENSOR_RAW, z, (size_t)raw_len);
    free(z);
  }
  pb_msg(graph, GRAPH_INIT, &t);
}

/* Wrap a graph into a ModelProto (IR 8, opset 17) and free the graph. */
static inline pb pb_model(pb *graph) {
  pb m = {0}, op = {0};
  pb_int(&m, MODEL_IR_VERSION, 8);
  pb_str(&op, OPSET_DOMAIN, "");
  pb_int(&op, OPSET_VERSION, 17);
  pb_msg(&m, MODEL_OPSET, &op);
  pb_msg(&m, MODEL_GRAPH, graph);
  return m;
}
#endif
