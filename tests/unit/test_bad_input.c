/* Bad input is normal input: every case gets a negative status and a message that names the
 * problem (file, node, op, tensor). Run under ASan/UBSan in CI, so crashes and leaks fail too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mbtest.h"
#include "membudget/membudget.h"
#include "pbuild.h"

static int load(const pb *b, char *msg, size_t size) {
  mb_model *m = NULL;
  int rc = mb_model_load_buffer(b->d, b->len, &m);
  snprintf(msg, size, "%s", mb_model_errmsg(m));
  mb_model_free(m);
  return rc;
}

/* x -> Relu -> y, with a W initializer; the base for most cases. */
static pb small_graph(void) {
  pb g = {0};
  int64_t d[] = {-1, 4};
  pb_str(&g, GRAPH_NAME, "g");
  pb_value_info(&g, GRAPH_INPUT, "x", 1, d, 2);
  pb_node(&g, "relu0", "Relu", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
  pb_value_info(&g, GRAPH_OUTPUT, "y", 1, d, 2);
  return g;
}

static void test_files(void) {
  mb_model *m = NULL;
  CHECK_EQ_I64(mb_model_load_file("/nonexistent/model.onnx", &m), MB_E_IO);
  CHECK_CONTAINS(mb_model_errmsg(m), "/nonexistent/model.onnx");
  CHECK_CONTAINS(mb_model_errmsg(m), "No such file");
  mb_model_free(m);

  char path[] = "/tmp/mb_test_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  m = NULL;
  CHECK_EQ_I64(mb_model_load_file(path, &m), MB_E_PARSE); /* empty file */
  CHECK_CONTAINS(mb_model_errmsg(m), "empty");
  mb_model_free(m);
  FILE *f = fdopen(fd, "w");
  fputs("Hello, this is a text file and certainly not an ONNX model.\n", f);
  fclose(f);
  m = NULL;
  CHECK(mb_model_load_file(path, &m) == MB_E_PARSE);
  CHECK_CONTAINS(mb_model_errmsg(m), path);
  mb_model_free(m);
  remove(path);

  m = NULL;
  CHECK_EQ_I64(mb_model_load_file("/tmp", &m), MB_E_IO);
  CHECK_CONTAINS(mb_model_errmsg(m), "directory");
  mb_model_free(m);
  CHECK_EQ_I64(mb_model_load_file("x", NULL), MB_E_INVALID_ARG);
}

/* The limit.* keys: parsed like the other setup keys; 0 restores the default; one past a count
 * fails naming the limit, the count itself loads, through both load calls. */
static void test_limits(void) {
  mb_setup *s = NULL;
  CHECK_EQ_I64(mb_setup_create(&s), MB_OK);
  CHECK_EQ_I64(mb_setup_set(s, "limit.nodes", "-1"), MB_E_INVALID_ARG);
  CHECK_CONTAINS(mb_setup_errmsg(s), "limit.nodes: '-1' is not a count");
  CHECK_EQ_I64(mb_setup_set(s, "limit.subgraph_depth", "65"), MB_E_INVALID_ARG);
  CHECK_CONTAINS(mb_setup_errmsg(s), "up to 64");
  CHECK_EQ_I64(mb_setup_set(s, "limit.attr_bytes", "lots"), MB_E_INVALID_ARG);
  CHECK_EQ_I64(mb_setup_set(s, "limit.attr_bytes", "1KiB"), MB_OK);
  CHECK_EQ_I64(mb_setup_set(s, "limit.nope", "1"), MB_E_INVALID_ARG);
  CHECK_CONTAINS(mb_setup_errmsg(s), "unknown limit 'nope'");

  pb g = small_graph(); /* one node; x and y: 2 tensors */
  pb m = pb_model(&g);
  mb_model *model = NULL;
  CHECK_EQ_I64(mb_setup_set(s, "limit.nodes", "1"), MB_OK);
  CHECK_EQ_I64(mb_setup_set(s, "limit.tensors", "1"), MB_OK);
  CHECK_EQ_I64(mb_model_load_buffer_setup(m.d, m.len, s, &model), MB_E_LIMIT);
  CHECK_CONTAINS(mb_model_errmsg(model), "2 tensors, more than the limit tensors=1");
  mb_model_free(model);
  CHECK_EQ_I64(mb_setup_set(s, "limit.tensors", "0"), MB_OK); /* the default again */
  CHECK_EQ_I64(mb_model_load_buffer_setup(m.d, m.len, s, &model), MB_OK);
  mb_model_free(model);
  CHECK_EQ_I64(mb_setup_set(s, "limit.string_bytes", "4"), MB_OK); /* x's dim "batch" is 5 */
  CHECK_EQ_I64(mb_model_load_buffer_setup(m.d, m.len, s, &model), MB_E_LIMIT);
  CHECK_CONTAINS(mb_model_errmsg(model), "a name or string starting 'batch': 5 bytes, more than the limit string_bytes=4");
  mb_model_free(model);
  CHECK_EQ_I64(mb_model_load_buffer_setup(m.d, m.len, NULL, &model), MB_OK); /* NULL: defaults */
  mb_model_free(model);

  char path[] = "/tmp/mb_test_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0 && write(fd, m.d, m.len) == (ssize_t)m.len);
  close(fd);
  char value[32];
  snprintf(value, sizeof value, "%zu", m.len - 1);
  CHECK_EQ_I64(mb_setup_set(s, "limit.file_bytes", value), MB_OK);
  CHECK_EQ_I64(mb_model_load_file_setup(path, s, &model), MB_E_LIMIT);
  CHECK_CONTAINS(mb_model_errmsg(model), "more than the limit file_bytes=");
  mb_model_free(model);
  snprintf(value, sizeof value, "%zu", m.len);
  CHECK_EQ_I64(mb_setup_set(s, "limit.file_bytes", value), MB_OK);
  CHECK_EQ_I64(mb_setup_set(s, "limit.string_bytes", "0"), MB_OK);
  CHECK_EQ_I64(mb_model_load_file_setup(path, s, &model), MB_OK);
  mb_model_free(model);
  remove(path);
  CHECK_EQ_I64(mb_model_load_file_setup("x", s, NULL), MB_E_INVALID_ARG);
  pb_free(&m);
  mb_setup_free(s);
}

static void test_truncated(void) {
  pb g = small_graph();
  int64_t wd[] = {4, 4};
  pb_init(&g, "W", 1, wd, 2, 64);
  pb m = pb_model(&g);
  char msg[1024];
  CHECK_EQ_I64(load(&m, msg, sizeof msg), MB_OK);
  /* Every proper prefix that cuts a field is an error, never a crash. */
  int errors = 0;
  for (size_t cut = 1; cut < m.len; cut++) {
    pb t = {m.d, cut, cut};
    if (load(&t, msg, sizeof msg) < 0) errors++;
  }
  CHECK(errors > (int)m.len / 2);
  pb half = {m.d, m.len - 3, m.len - 3};
  CHECK(load(&half, msg, sizeof msg) < 0);
  CHECK_CONTAINS(msg, "truncated");
  pb_free(&m);
}

static void test_other_message(void) {
  /* A serialized TensorProto handed over as a model. */
  pb t = {0};
  pb_int(&t, TENSOR_DIMS, 3);
  pb_int(&t, TENSOR_DTYPE, 1);
  pb_str(&t, TENSOR_NAME, "w");
  char msg[1024];
  CHECK_EQ_I64(load(&t, msg, sizeof msg), MB_E_PARSE);
  CHECK_CONTAINS(msg, "ModelProto");
  pb_free(&t);
  /* A serialized GraphProto. */
  pb g = small_graph();
  CHECK_EQ_I64(load(&g, msg, sizeof msg), MB_E_PARSE);
  CHECK_CONTAINS(msg, "is this an ONNX model");
  pb_free(&g);
}

static void test_repeated_single_field(void) {
  /* protobuf would merge two ModelProto.graph fields; protobuf-c does so quadratically */
  pb g1 = small_graph(), g2 = small_graph();
  pb m = pb_model(&g1);
  pb_msg(&m, MODEL_GRAPH, &g2);
  char msg[1024];
  CHECK_EQ_I64(load(&m, msg, sizeof msg), MB_E_PARSE);
  CHECK_CONTAINS(msg, "ModelProto.graph");
  CHECK_CONTAINS(msg, "appears more than once");
  pb_free(&m);
}

static void test_no_graph(void) {
  pb m = {0};
  pb_int(&m, MODEL_IR_VERSION, 8);
  char msg[1024];
  CHECK_EQ_I64(load(&m, msg, sizeof msg), MB_E_INVALID_MODEL);
  CHECK_CONTAINS(msg, "no graph");
  pb_free(&m);
}

static void test_dangling_input(void) {
  pb g = {0};
  int64_t d[] = {2};
  pb_value_info(&g, GRAPH_INPUT, "x", 1, d, 1);
  pb_node(&g, "add0", "Add", (const char *[]){"x", "ghost", NULL}, (const char *[]){"y", NULL});
  pb_value_info(&g, GRAPH_OUTPUT, "y", 1, d, 1);
  pb m = pb_model(&g);
  char msg[1024];
  CHECK_EQ_I64(load(&m, msg, sizeof msg), MB_E_INVALID_MODEL);
  CHECK_CONTAINS(msg, "'ghost'");
  CHECK_CONTAINS(msg, "node 'add0' (Add)");
  pb_free(&m);

  g = small_graph();
  pb_value_info(&g, GRAPH_OUTPUT, "nowhere", 1, d, 1);
  m = pb_model(&g);
  CHECK_EQ_I64(load(&m, msg, sizeof msg), MB_E_INVALID_MODEL);
  CHECK_CONTAINS(msg, "'nowhere' is never produced");
  pb_free(&m);
}

static void test_duplicates(void) {
  int64_t wd[] = {4};
  pb g = small_graph();
  pb_init(&g, "W", 1, wd, 1, 16);
  pb_init(&g, "W", 1, wd, 1, 16);
  pb m = pb_model(&g);
  char msg[1024];
  CHECK_EQ_I64(load(&m, msg, sizeof msg), MB_E_INVALID_MODEL);
  CHECK_CONTAINS(msg, "duplicate tensor name 'W'");
  pb_free(&m);

  g = small_graph(); /* a second node writes y */
  pb_node(&g, "relu1", "Relu", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
  m = pb_model(&g);
  CHECK_EQ_I64(load(&m, msg, sizeof msg), MB_E_INVALID_MODEL);
  CHECK_CONTAINS(msg, "duplicate tensor name 'y'");
  CHECK_CONTAINS(msg, "relu1");
  CHECK_CONTAINS(msg, "relu0");
  pb_free(&m);

  g = small_graph(); /* a node output shadows a graph input */
  pb_node(&g, "relu2", "Relu", (const char *[]){"y", NULL}, (const char *[]){"x", NULL});
  m = pb_model(&g);
  CHECK_EQ_I64(load(&m, msg, sizeof msg), MB_E_INVALID_MODEL);
  CHECK_CONTAINS(msg, "duplicate tensor name 'x'");
  pb_free(&m);
}

static void test_bad_dims(void) {
  char msg[1024];
  int64_t neg[] = {4, -3};
  pb g = small_graph();
  pb_init(&g, "W", 1, neg, 2, -1);
  pb m = pb_model(&g);
  CHECK_EQ_I64(load(&m, msg, sizeof msg), MB_E_INVALID_MODEL);
  CHECK_CONTAINS(msg, "'W' has negative dim -3 on axis 1");
  pb_free(&m);

  int64_t huge[] = {1ll << 40, 1ll << 40}; /* numel 2^80 overflows uint64 */
  g = small_graph();
  pb_init(&g, "big", 1, huge, 2, -1);
  m = pb_model(&g);
  CHECK_EQ_I64(load(&m, msg, sizeof msg), MB_E_LIMIT);
  CHECK_CONTAINS(msg, "'big' declares an absurd size");
  pb_free(&m);

  int64_t absurd[] = {1ll << 30, 1ll << 20, 4}; /* 2^52 floats = 16 PiB: no overflow, absurd */
  g = small_graph();
  pb_init(&g, "absurd", 1, absurd, 3, -1);
  m = pb_model(&g);
  CHECK_EQ_I64(load(&m, msg, sizeof msg), MB_E_LIMIT);
  CHECK_CONTAINS(msg, "'absurd'");
  pb_free(&m);

  int64_t ok[] = {4, 4};
  g = small_graph(); /* raw_data disagrees with dims: 16 floats need 64 bytes */
  pb_init(&g, "W", 1, ok, 2, 60);
  m = pb_model(&g);
  CHECK_EQ_I64(load(&m, msg, sizeof msg), MB_E_INVALID_MODEL);
  CHECK_CONTAINS(msg, "'W': dims need 64 bytes of float but the file holds 60");
  pb_free(&m);

  /* the same with a payload large enough to be dropped by the wire pass */
  int64_t big[] = {100, 100};
  g = small_graph();
  pb_init(&g, "W", 1, big, 2, 39996);
  m = pb_model(&g);
  CHECK_EQ_I64(load(&m, msg, sizeof msg), MB_E_INVALID_MODEL);
  CHECK_CONTAINS(msg, "dims need 40000 bytes of float but the file holds 39996");
  pb_free(&m);

  /* rank beyond the limit */
  int64_t many[70];
  for (int k = 0; k < 70; k++) many[k] = 1;
  g = small_graph();
  pb_init(&g, "deep", 1, many, 70, -1);
  m = pb_model(&g);
  CHECK_EQ_I64(load(&m, msg, sizeof msg), MB_E_LIMIT);
  CHECK_CONTAINS(msg, "'deep': 70 dims, more than the limit rank=64");
  pb_free(&m);

  /* negative dim in a graph input type */
  pb g2 = {0};
  int64_t nd[] = {-1, 4};
  pb_value_info(&g2, GRAPH_INPUT, "x", 1, nd, 2);
  /* patch: declare dim_value -5 by hand */
  pb vi = {0}, ty = {0}, tt = {0}, sh = {0}, dm = {0};
  pb_int(&dm, DIM_VALUE, -5);
  pb_msg(&sh, SHAPE_DIM, &dm);
  pb_int(&tt, TT_ELEM, 1);
  pb_msg(&tt, TT_SHAPE, &sh);
  pb_msg(&ty, TYPE_TENSOR, &tt);
  pb_str(&vi, VI_NAME, "z");
  pb_msg(&vi, VI_TYPE, &ty);
  pb_msg(&g2, GRAPH_INPUT, &vi);
  pb_node(&g2, "r", "Relu", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
  pb_value_info(&g2, GRAPH_OUTPUT, "y", 1, nd, 2);
  m = pb_model(&g2);
  CHECK_EQ_I64(load(&m, msg, sizeof msg), MB_E_INVALID_MODEL);
  CHECK_CONTAINS(msg, "'z' declares negative dim -5");
  pb_free(&m);
}

static void test_external_length(void) {
  pb g = small_graph(), t = {0}, e1 = {0}, e2 = {0};
  pb_int(&t, TENSOR_DIMS, 10);
  pb_int(&t, TENSOR_DTYPE, 1);
  pb_str(&t, TENSOR_NAME, "ext");
  pb_str(&e1, ENTRY_KEY, "location");
  pb_str(&e1, ENTRY_VALUE, "weights.bin");
  pb_msg(&t, TENSOR_EXTERNAL, &e1);
  pb_str(&e2, ENTRY_KEY, "length");
  pb_str(&e2, ENTRY_VALUE, "4000000000");
  pb_msg(&t, TENSOR_EXTERNAL, &e2);
  pb_int(&t, TENSOR_LOCATION, 1);
  pb_msg(&g, GRAPH_INIT, &t);
  pb m = pb_model(&g);
  char msg[1024];
  CHECK_EQ_I64(load(&m, msg, sizeof msg), MB_E_INVALID_MODEL);
  CHECK_CONTAINS(msg, "'ext': external data length 4000000000 does not match");
  pb_free(&m);
}

static void test_cycle(void) {
  pb g = {0};
  int64_t d[] = {2};
  pb_value_info(&g, GRAPH_INPUT, "x", 1, d, 1);
  pb_node(&g, "a", "Add", (const char *[]){"x", "c", NULL}, (const char *[]){"b", NULL});
  pb_node(&g, "b", "Relu", (const char *[]){"b", NULL}, (const char *[]){"c", NULL});
  pb_value_info(&g, GRAPH_OUTPUT, "c", 1, d, 1);
  pb m = pb_model(&g);
  char msg[1024];
  CHECK_EQ_I64(load(&m, msg, sizeof msg), MB_E_INVALID_MODEL);
  CHECK_CONTAINS(msg, "cycle");
  pb_free(&m);
}

static void test_deep_nesting(void) {
  /* Subgraphs nested 40 deep: over the graph-depth limit, refused without recursion blowup. */
  pb inner = {0};
  pb_str(&inner, GRAPH_NAME, "leaf");
  for (int k = 0; k < 40; k++) {
    pb attr = {0}, node = {0}, outer = {0};
    pb_str(&attr, ATTR_NAME, "body");
    pb_int(&attr, ATTR_TYPE, 5);
    pb_msg(&attr, ATTR_G, &inner);
    pb_str(&node, NODE_OP, "Loop");
    pb_str(&node, NODE_NAME, "loop");
    pb_msg(&node, NODE_ATTR, &attr);
    pb_msg(&outer, GRAPH_NODE, &node);
    inner = outer;
  }
  pb m = pb_model(&inner);
  char msg[1024];
  CHECK_EQ_I64(load(&m, msg, sizeof msg), MB_E_LIMIT);
  CHECK_CONTAINS(msg, "33 levels, more than the limit subgraph_depth=32");
  pb_free(&m);

  /* Raw message nesting far past any schema depth (TypeProto.sequence_type chains). */
  pb ty = {0};
  pb_int(&ty, 6, 0); /* denotation-less leaf */
  for (int k = 0; k < 200; k++) {
    pb seq = {0}, outer = {0};
    pb_msg(&seq, 1, &ty);          /* Sequence.elem_type */
    pb_msg(&outer, 4, &seq);       /* TypeProto.sequence_type */
    ty = outer;
  }
  pb vi = {0}, g = {0};
  pb_str(&vi, VI_NAME, "x");
  pb_msg(&vi, VI_TYPE, &ty);
  pb_msg(&g, GRAPH_INPUT, &vi);
  m = pb_model(&g);
  CHECK_EQ_I64(load(&m, msg, sizeof msg), MB_E_LIMIT);
  CHECK_CONTAINS(msg, "nested deeper than");
  pb_free(&m);
}

static void test_wire_errors(void) {
  char msg[1024];
  /* wire type 6 does not exist */
  uint8_t bad_wt[] = {0x0E, 0x01};
  pb b = {bad_wt, sizeof bad_wt, sizeof bad_wt};
  CHECK_EQ_I64(load(&b, msg, sizeof msg), MB_E_PARSE);
  CHECK_CONTAINS(msg, "wire type");
  /* a varint that never ends */
  uint8_t long_varint[12] = {0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  pb c = {long_varint, sizeof long_varint, sizeof long_varint};
  CHECK_EQ_I64(load(&c, msg, sizeof msg), MB_E_PARSE);
  /* field number 0 */
  uint8_t zero_field[] = {0x00, 0x01};
  pb z = {zero_field, sizeof zero_field, sizeof zero_field};
  CHECK_EQ_I64(load(&z, msg, sizeof msg), MB_E_PARSE);
  CHECK_CONTAINS(msg, "invalid field number");
  /* a length prefix far larger than the buffer */
  uint8_t huge_len[] = {0x3A, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F};
  pb h = {huge_len, sizeof huge_len, sizeof huge_len};
  CHECK_EQ_I64(load(&h, msg, sizeof msg), MB_E_PARSE);
  CHECK_CONTAINS(msg, "ModelProto.graph");
  CHECK_CONTAINS(msg, "runs past the end");
  /* NULL buffer with a size */
  mb_model *m = NULL;
  CHECK_EQ_I64(mb_model_load_buffer(NULL, 10, &m), MB_E_INVALID_ARG);
  mb_model_free(m);
  m = NULL;
  CHECK_EQ_I64(mb_model_load_buffer("", 0, &m), MB_E_PARSE);
  mb_model_free(m);
}

static void test_failed_model_is_inert(void) {
  /* Accessors on a failed model answer safely instead of crashing. */
  mb_model *m = NULL;
  mb_model_load_file("/nonexistent", &m);
  CHECK(m != NULL);
  CHECK_EQ_U64(mb_model_num_initializers(m), 0);
  CHECK_EQ_U64(mb_model_num_nodes(m), 0);
  mb_accounting a = {.struct_size = sizeof a};
  CHECK_EQ_I64(mb_account(m, NULL, &a), MB_E_INVALID_ARG);
  char *json = NULL;
  CHECK(mb_model_info_json(m, NULL, &json) < 0);
  CHECK(json == NULL);
  mb_model_free(m);
  mb_model_free(NULL);

  /* A model that fails after its header was converted: nothing on the handle may point into
   * the freed model (found by fuzzing: the producer string outlived the arena). */
  pb g = small_graph();
  int64_t d[] = {2};
  pb_value_info(&g, GRAPH_OUTPUT, "never", 1, d, 1);
  pb mp = pb_model(&g);
  pb_str(&mp, 2, "pytorch"); /* ModelProto.producer_name */
  m = NULL;
  CHECK_EQ_I64(mb_model_load_buffer(mp.d, mp.len, &m), MB_E_INVALID_MODEL);
  CHECK(!strcmp(mb_model_producer(m), ""));
  CHECK_EQ_U64(mb_model_num_opsets(m), 0);
  CHECK_EQ_U64(mb_model_num_warnings(m), 0);
  CHECK_EQ_U64(mb_model_num_inputs(m), 0);
  mb_model_free(m);
  pb_free(&mp);
}

int main(void) {
  test_files();
  test_limits();
  test_truncated();
  test_other_message();
  test_no_graph();
  test_repeated_single_field();
  test_dangling_input();
  test_duplicates();
  test_bad_dims();
  test_external_length();
  test_cycle();
  test_deep_nesting();
  test_wire_errors();
  test_failed_model_is_inert();
  return mbt_finish("bad_input");
}
