/* Shape rules on hand-built graphs: broadcasting, value propagation through the
 * Shape -> Gather -> Unsqueeze -> Concat -> Reshape chain, and errors that name the node. */
#include "mbtest.h"
#include "membudget/membudget.h"
#include "pbuild.h"

static mb_shapes *infer(pb *graph, const char *dim, int64_t v, mb_model **mout) {
  pb m = pb_model(graph);
  mb_model *model = NULL;
  CHECK_EQ_I64(mb_model_load_buffer(m.d, m.len, &model), MB_OK);
  pb_free(&m);
  mb_setup *s = NULL;
  mb_setup_create(&s);
  if (dim) mb_setup_set_dim(s, dim, v);
  mb_shapes *sh = NULL;
  mb_infer_shapes(model, s, &sh);
  mb_setup_free(s);
  *mout = model;
  return sh;
}

static int find(const mb_shapes *sh, const char *name, mb_shape_desc *d) {
  for (size_t i = 0; i < mb_shapes_num_tensors(sh); i++) {
    d->struct_size = sizeof *d;
    mb_shapes_tensor(sh, i, d);
    if (!strcmp(d->name, name)) return 1;
  }
  return 0;
}

/* An int64 initializer with values (raw little-endian). */
static void int_init(pb *g, const char *name, const int64_t *v, int n) {
  pb t = {0};
  if (n > 0) pb_int(&t, TENSOR_DIMS, n); /* n == 0: a scalar holding v[0] */
  if (n == 0) n = 1;
  pb_int(&t, TENSOR_DTYPE, 7);
  pb_str(&t, TENSOR_NAME, name);
  pb_bytes(&t, TENSOR_RAW, v, (size_t)n * 8);
  pb_msg(g, GRAPH_INIT, &t);
}

static void test_reshape_chain(void) {
  /* y = Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])) : [b, 3, 4] -> [b, 12] */
  pb g = {0};
  int64_t xd[] = {-1, 3, 4}, zero[] = {0}, minus1[] = {-1}, axes[] = {0};
  pb_value_info(&g, GRAPH_INPUT, "x", 1, xd, 3);
  int_init(&g, "zero", zero, 0); /* scalar index, as exporters write */
  int_init(&g, "minus1", minus1, 1);
  int_init(&g, "axes", axes, 1);
  pb_node(&g, "shape", "Shape", (const char *[]){"x", NULL}, (const char *[]){"s", NULL});
  pb_node(&g, "gather", "Gather", (const char *[]){"s", "zero", NULL}, (const char *[]){"b", NULL});
  pb_node(&g, "unsq", "Unsqueeze", (const char *[]){"b", "axes", NULL}, (const char *[]){"b1", NULL});
  pb_node(&g, "cat", "Concat", (const char *[]){"b1", "minus1", NULL}, (const char *[]){"target", NULL});
  pb_node(&g, "reshape", "Reshape", (const char *[]){"x", "target", NULL}, (const char *[]){"y", NULL});
  int64_t yd[] = {-1, 12};
  pb_value_info(&g, GRAPH_OUTPUT, "y", 1, yd, 2);
  mb_model *m;
  mb_shapes *sh = infer(&g, "batch", 5, &m);
  if (*mb_shapes_errmsg(sh)) fprintf(stderr, "%s\n", mb_shapes_errmsg(sh));
  CHECK(*mb_shapes_errmsg(sh) == 0);
  mb_shape_desc d;
  CHECK(find(sh, "y", &d));
  CHECK_EQ_I64(d.rank, 2);
  CHECK_EQ_I64(d.dims[0], 5);
  CHECK_EQ_I64(d.dims[1], 12);
  CHECK_EQ_U64(d.nbytes, 5 * 12 * 4);
  CHECK(find(sh, "target", &d));
  CHECK_EQ_I64(d.dtype, MB_DTYPE_INT64);
  CHECK_EQ_I64(d.dims[0], 2);
  mb_shapes_free(sh);
  mb_model_free(m);
}

static void test_broadcast_and_matmul_errors(void) {
  pb g = {0};
  int64_t ad[] = {-1, 3, 4}, bd[] = {5, 1};
  pb_value_info(&g, GRAPH_INPUT, "a", 1, ad, 3);
  pb_value_info(&g, GRAPH_INPUT, "b", 1, bd, 2);
  pb_node(&g, "mm", "MatMul", (const char *[]){"a", "b", NULL}, (const char *[]){"y", NULL});
  pb_value_info(&g, GRAPH_OUTPUT, "y", 1, ad, 3);
  mb_model *m;
  mb_shapes *sh = infer(&g, "batch", 2, &m);
  CHECK_CONTAINS(mb_shapes_errmsg(sh), "node 'mm' (MatMul): inner dims differ: 'a' [2, 3, 4] x 'b' [5, 1]");
  CHECK_EQ_U64(mb_shapes_num_tensors(sh), 0);
  mb_shapes_free(sh);
  mb_model_free(m);

  pb g2 = {0};
  int64_t xd[] = {-1, 3, 1}, yd[] = {4, 5};
  pb_value_info(&g2, GRAPH_INPUT, "x", 1, xd, 3);
  pb_value_info(&g2, GRAPH_INPUT, "z", 1, yd, 2);
  pb_node(&g2, "add", "Add", (const char *[]){"x", "z", NULL}, (const char *[]){"y", NULL});
  pb_value_info(&g2, GRAPH_OUTPUT, "y", 1, xd, 3);
  sh = infer(&g2, "batch", 2, &m);
  CHECK_CONTAINS(mb_shapes_errmsg(sh), "node 'add' (Add): shapes [2, 3, 1] and [4, 5] do not broadcast");
  mb_shapes_free(sh);
  mb_model_free(m);
}

static void test_reshape_mismatch(void) {
  pb g = {0};
  int64_t xd[] = {2, 3}, target[] = {4, 2};
  pb_value_info(&g, GRAPH_INPUT, "x", 1, xd, 2);
  int_init(&g, "t", target, 2);
  pb_node(&g, "r", "Reshape", (const char *[]){"x", "t", NULL}, (const char *[]){"y", NULL});
  pb_value_info(&g, GRAPH_OUTPUT, "y", 1, target, 2);
  mb_model *m;
  mb_shapes *sh = infer(&g, NULL, 0, &m);
  CHECK_CONTAINS(mb_shapes_errmsg(sh), "node 'r' (Reshape): cannot reshape [2, 3] (6 elements) into [4, 2] (8 elements)");
  mb_shapes_free(sh);
  mb_model_free(m);
}

static void test_unsupported_op(void) {
  pb g = {0};
  int64_t xd[] = {2, 3};
  pb_value_info(&g, GRAPH_INPUT, "x", 1, xd, 2);
  pb_node(&g, "weird", "FrobnicateTensor", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
  pb_value_info(&g, GRAPH_OUTPUT, "y", 1, xd, 2);
  mb_model *m;
  mb_shapes *sh = infer(&g, NULL, 0, &m);
  CHECK_CONTAINS(mb_shapes_errmsg(sh), "node 'weird': op FrobnicateTensor (domain 'ai.onnx', opset 17) is not supported");
  mb_shapes_free(sh);
  mb_model_free(m);
}

static void test_resize_and_argmax(void) {
  /* Resize by float scales [1, 1, 2, 3], then ArgMax over axis 0 keeping dims */
  int64_t xd[] = {-1, 4, 5, 6};
  float sc[] = {1, 1, 2, 3};
  pb g2 = {0}, t2 = {0};
  pb_value_info(&g2, GRAPH_INPUT, "x", 1, xd, 4);
  pb_int(&t2, TENSOR_DIMS, 4);
  pb_int(&t2, TENSOR_DTYPE, 1);
  pb_str(&t2, TENSOR_NAME, "scales");
  pb_bytes(&t2, TENSOR_RAW, sc, sizeof sc);
  pb_msg(&g2, GRAPH_INIT, &t2);
  pb_node(&g2, "up", "Resize", (const char *[]){"x", "", "scales", NULL}, (const char *[]){"u", NULL});
  pb_node(&g2, "argmax", "ArgMax", (const char *[]){"u", NULL}, (const char *[]){"y", NULL});
  pb_value_info(&g2, GRAPH_OUTPUT, "y", 7, xd, 4);
  mb_model *model;
  mb_shapes *sh = infer(&g2, "batch", 2, &model);
  mb_shape_desc d;
  CHECK(find(sh, "u", &d));
  CHECK_EQ_I64(d.dims[2], 10);
  CHECK_EQ_I64(d.dims[3], 18);
  CHECK(find(sh, "y", &d)); /* ArgMax over axis 0, keepdims */
  CHECK_EQ_I64(d.dtype, MB_DTYPE_INT64);
  CHECK_EQ_I64(d.rank, 4);
  CHECK_EQ_I64(d.dims[0], 1);
  CHECK_EQ_I64(d.dims[1], 4);
  mb_shapes_free(sh);
  mb_model_free(model);
}

static void test_data_dependent_bound(void) {
  pb g = {0};
  int64_t xd[] = {3, 4}, yd[] = {2, -1};
  pb_value_info(&g, GRAPH_INPUT, "x", 1, xd, 2);
  pb_node(&g, "nz", "NonZero", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
  pb_value_info(&g, GRAPH_OUTPUT, "y", 7, yd, 2);
  pb m = pb_model(&g);
  mb_model *model = NULL;
  CHECK_EQ_I64(mb_model_load_buffer(m.d, m.len, &model), MB_OK);
  pb_free(&m);
  mb_shapes *sh = NULL;
  CHECK_EQ_I64(mb_infer_shapes(model, NULL, &sh), MB_E_UNSUPPORTED);
  CHECK_CONTAINS(mb_shapes_errmsg(sh), "node 'nz': op NonZero has a data-dependent output shape");
  CHECK_CONTAINS(mb_shapes_errmsg(sh), "--dim 'y=N'"); /* named after its output */
  mb_shapes_free(sh);
  mb_setup *s = NULL;
  mb_setup_create(&s);
  mb_setup_set_dim(s, "y", 7); /* at most 7 non-zeros: the user's bound, not a guess */
  CHECK_EQ_I64(mb_infer_shapes(model, s, &sh), MB_OK);
  mb_shape_desc d;
  CHECK(find(sh, "y", &d));
  CHECK_EQ_I64(d.dims[0], 2);
  CHECK_EQ_I64(d.dims[1], 7);
  mb_shapes_free(sh);
  mb_setup_free(s);
  mb_model_free(model);
}

static void test_attention(void) {
  /* opset-23 Attention, 3-D form: Q [2, 5, 8*16], K/V [2, 7, 2*16] with 8 query heads over
   * 2 kv heads -> Y [2, 5, 128], present key/value [2, 2, 7, 16], scores [2, 8, 5, 7] */
  pb g = {0}, n = {0}, a1 = {0}, a2 = {0};
  int64_t qd[] = {2, 5, 128}, kd[] = {2, 7, 32};
  pb_value_info(&g, GRAPH_INPUT, "q", 1, qd, 3);
  pb_value_info(&g, GRAPH_INPUT, "k", 1, kd, 3);
  pb_value_info(&g, GRAPH_INPUT, "v", 1, kd, 3);
  const char *ins[] = {"q", "k", "v"}, *outs[] = {"y", "pk", "pv", "qk"};
  for (int i = 0; i < 3; i++) pb_str(&n, NODE_INPUT, ins[i]);
  for (int i = 0; i < 4; i++) pb_str(&n, NODE_OUTPUT, outs[i]);
  pb_str(&n, NODE_NAME, "attn");
  pb_str(&n, NODE_OP, "Attention");
  pb_str(&a1, ATTR_NAME, "q_num_heads");
  pb_int(&a1, 3, 8); /* AttributeProto.i */
  pb_int(&a1, ATTR_TYPE, 2);
  pb_msg(&n, NODE_ATTR, &a1);
  pb_str(&a2, ATTR_NAME, "kv_num_heads");
  pb_int(&a2, 3, 2);
  pb_int(&a2, ATTR_TYPE, 2);
  pb_msg(&n, NODE_ATTR, &a2);
  pb_msg(&g, GRAPH_NODE, &n);
  pb_value_info(&g, GRAPH_OUTPUT, "y", 1, qd, 3);
  /* opset 23 */
  pb m = {0}, op = {0};
  pb_int(&m, MODEL_IR_VERSION, 10);
  pb_str(&op, OPSET_DOMAIN, "");
  pb_int(&op, OPSET_VERSION, 23);
  pb_msg(&m, MODEL_OPSET, &op);
  pb_msg(&m, MODEL_GRAPH, &g);
  mb_model *model = NULL;
  CHECK_EQ_I64(mb_model_load_buffer(m.d, m.len, &model), MB_OK);
  pb_free(&m);
  mb_shapes *sh = NULL;
  CHECK_EQ_I64(mb_infer_shapes(model, NULL, &sh), MB_OK);
  mb_shape_desc d;
  CHECK(find(sh, "y", &d) && d.rank == 3 && d.dims[2] == 128 && d.dims[1] == 5);
  CHECK(find(sh, "pk", &d) && d.rank == 4 && d.dims[1] == 2 && d.dims[2] == 7 && d.dims[3] == 16);
  CHECK(find(sh, "qk", &d) && d.dims[1] == 8 && d.dims[2] == 5 && d.dims[3] == 7);
  mb_shapes_free(sh);
  mb_model_free(model);
}

static void test_conv_transpose_attribute_lengths(void) {
  /* one stride for two spatial axes: refused, not read past the list (fuzzing found the read) */
  pb g = {0}, n = {0}, a = {0};
  int64_t xd[] = {1, 2, 5, 5}, wd[] = {2, 3, 3, 3};
  pb_value_info(&g, GRAPH_INPUT, "x", 1, xd, 4);
  pb_value_info(&g, GRAPH_INPUT, "w", 1, wd, 4);
  pb_str(&n, NODE_INPUT, "x");
  pb_str(&n, NODE_INPUT, "w");
  pb_str(&n, NODE_OUTPUT, "y");
  pb_str(&n, NODE_NAME, "up");
  pb_str(&n, NODE_OP, "ConvTranspose");
  pb_str(&a, ATTR_NAME, "strides");
  pb_int(&a, 8, 2); /* AttributeProto.ints, one entry */
  pb_int(&a, ATTR_TYPE, 7);
  pb_msg(&n, NODE_ATTR, &a);
  pb_msg(&g, GRAPH_NODE, &n);
  pb_value_info(&g, GRAPH_OUTPUT, "y", 1, xd, 4);
  mb_model *m;
  mb_shapes *sh = infer(&g, NULL, 0, &m);
  CHECK_CONTAINS(mb_shapes_errmsg(sh), "node 'up' (ConvTranspose): strides/dilations/pads/output_padding do not match 2 spatial axes");
  mb_shapes_free(sh);
  mb_model_free(m);
}

int main(void) {
  test_conv_transpose_attribute_lengths();
  test_attention();
  test_data_dependent_bound();
  test_unsupported_op();
  test_resize_and_argmax();
  test_reshape_chain();
  test_broadcast_and_matmul_errors();
  test_reshape_mismatch();
  return mbt_finish("shapes");
}
