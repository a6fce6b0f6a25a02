/* Loading real files: the edge-case models from models/make_edge_models.py (expected numbers
 * follow from the dims chosen there) and a few zoo facts that follow from the architectures. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mbtest.h"
#include "membudget/membudget.h"
#include "pbuild.h"

static mb_model *load(const char *rel) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", MB_MODELS_DIR, rel);
  mb_model *m = NULL;
  int rc = mb_model_load_file(path, &m);
  if (rc != MB_OK) fprintf(stderr, "load %s: %s\n", rel, mb_model_errmsg(m));
  CHECK_EQ_I64(rc, MB_OK);
  return m;
}

static int find_init(const mb_model *m, const char *name, mb_initializer_desc *d) {
  for (size_t i = 0; i < mb_model_num_initializers(m); i++) {
    d->struct_size = sizeof *d;
    mb_model_initializer(m, i, d);
    if (!strcmp(d->name, name)) return (int)i;
  }
  return -1;
}

static void test_tied_weights(void) {
  mb_model *m = load("edge/tied_weights.onnx");
  mb_accounting a = {.struct_size = sizeof a};
  CHECK_EQ_I64(mb_account(m, NULL, &a), MB_OK);
  /* emb.weight [100,16] read by Gather and by Transpose->MatMul, plus a [100] bias */
  CHECK_EQ_U64(a.parameters, 100 * 16 + 100);
  CHECK_EQ_U64(a.trainable_embeddings.tensors, 1);
  CHECK_EQ_U64(a.trainable_embeddings.numel, 1600);
  CHECK_EQ_U64(a.trainable_parameters.numel, 100);
  mb_initializer_desc d;
  CHECK(find_init(m, "emb.weight", &d) >= 0);
  CHECK_EQ_I64(d.role, MB_ROLE_EMBEDDING);
  CHECK_EQ_I64(d.num_uses, 2);
  mb_model_free(m);
}

static void test_low_precision(void) {
  mb_model *m = load("edge/fp16_bf16.onnx");
  mb_accounting a = {.struct_size = sizeof a};
  mb_account(m, NULL, &a);
  /* 16-bit weights: 2 bytes per element */
  CHECK_EQ_U64(a.trainable_parameters.bytes, a.trainable_parameters.numel * 2);
  mb_initializer_desc d;
  CHECK(find_init(m, "fc1.weight", &d) >= 0);
  CHECK_EQ_I64(d.dtype, MB_DTYPE_FLOAT16);
  CHECK_EQ_U64(d.nbytes, 32 * 64 * 2);
  mb_model_free(m);
}

static void test_external(void) {
  mb_model *m = load("edge/external_missing.onnx");
  mb_initializer_desc d;
  CHECK(find_init(m, "fc.weight", &d) >= 0);
  CHECK_EQ_I64(d.location, MB_DATA_EXTERNAL);
  CHECK(d.external_file && !strcmp(d.external_file, "external_missing.bin"));
  CHECK_EQ_U64(d.nbytes, 32 * 64 * 4);
  mb_model_free(m);
  m = load("edge/external_present.onnx");
  mb_accounting a = {.struct_size = sizeof a};
  mb_account(m, NULL, &a);
  CHECK_EQ_U64(a.parameters, 64 * 16 + 16);
  CHECK_EQ_U64(a.constants.tensors, 1); /* the Reshape target */
  mb_model_free(m);
}

static void test_subgraphs(void) {
  mb_model *m = load("edge/subgraphs.onnx");
  size_t sub = 0;
  for (size_t i = 0; i < mb_model_num_initializers(m); i++) {
    mb_initializer_desc d = {.struct_size = sizeof d};
    mb_model_initializer(m, i, &d);
    sub += d.subgraph;
  }
  CHECK_EQ_U64(mb_model_num_initializers(m), 6);
  CHECK_EQ_U64(sub, 4);
  mb_model_free(m);
}

static void test_sparse(void) {
  mb_model *m = load("edge/sparse_init.onnx");
  mb_initializer_desc d;
  CHECK(find_init(m, "sparse_W", &d) >= 0);
  CHECK(d.is_sparse);
  CHECK_EQ_U64(d.numel, 64 * 32); /* dense size, what a trainer holds */
  CHECK_EQ_I64(d.role, MB_ROLE_PARAMETER);
  mb_model_free(m);
}

static void test_batchnorm_roles(void) {
  mb_model *m = load("edge/batchnorm_buffers.onnx");
  mb_accounting a = {.struct_size = sizeof a};
  mb_account(m, NULL, &a);
  CHECK_EQ_U64(a.buffers.tensors, 2);      /* running mean and var */
  CHECK_EQ_U64(a.buffers.numel, 8);
  CHECK_EQ_U64(a.constants.tensors, 1);    /* Reshape shape */
  CHECK_EQ_U64(a.trainable_parameters.tensors, 4);
  mb_model_free(m);
}

static void test_all_dtypes(void) {
  mb_model *m = load("edge/all_dtypes.onnx");
  /* [3,5] = 15 elements of each type: packed 4-bit types take ceil(15/2) = 8 bytes */
  static const struct { int dtype; uint64_t bytes; } want[] = {
    {1, 60}, {2, 15}, {3, 15}, {4, 30}, {5, 30}, {6, 60}, {7, 120}, {8, 0}, {9, 15}, {10, 30},
    {11, 120}, {12, 60}, {13, 120}, {14, 120}, {15, 240}, {16, 30}, {17, 15}, {18, 15},
    {19, 15}, {20, 15}, {21, 8}, {22, 8}, {23, 8},
  };
  size_t seen = 0;
  for (size_t i = 0; i < mb_model_num_initializers(m); i++) {
    mb_initializer_desc d = {.struct_size = sizeof d};
    mb_model_initializer(m, i, &d);
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
      if (want[k].dtype == d.dtype) {
        CHECK_EQ_U64(d.nbytes, want[k].bytes);
        seen++;
      }
  }
  CHECK_EQ_U64(seen, 23);
  CHECK(mb_model_num_warnings(m) >= 1); /* the STRING tensor's size is unknown */
  CHECK_CONTAINS(mb_model_warning(m, 0), "strings");
  mb_model_free(m);
}

static void test_freeze_globs(void) {
  mb_model *m = load("resnet18.onnx");
  mb_setup *s = NULL;
  CHECK_EQ_I64(mb_setup_create(&s), MB_OK);
  CHECK_EQ_I64(mb_setup_add_freeze(s, "*"), MB_OK);
  CHECK_EQ_I64(mb_setup_add_trainable(s, "fc.*"), MB_OK);
  mb_accounting a = {.struct_size = sizeof a};
  mb_account(m, s, &a);
  CHECK_EQ_U64(a.trainable, 512 * 1000 + 1000); /* only the classifier trains */
  CHECK_EQ_U64(a.parameters, 11689512);          /* torchvision resnet18 */
  CHECK_EQ_U64(a.frozen_parameters.numel + a.trainable_parameters.numel, 11689512);
  CHECK_EQ_I64(mb_setup_add_freeze(s, "layer[1-"), MB_E_INVALID_ARG);
  CHECK_CONTAINS(mb_setup_errmsg(s), "layer[1-");
  mb_setup_free(s);
  mb_model_free(m);
}

static void test_zoo_facts(void) {
  mb_model *m = load("gpt2_small_like.onnx");
  mb_tensor_desc in = {.struct_size = sizeof in};
  CHECK_EQ_I64(mb_model_input(m, 0, &in), MB_OK);
  CHECK(!strcmp(in.name, "input_ids"));
  CHECK_EQ_I64(in.rank, 2);
  CHECK(in.dim_params[0] && !strcmp(in.dim_params[0], "batch"));
  mb_initializer_desc d;
  CHECK(find_init(m, "wte.weight", &d) >= 0); /* tied with the LM head: stored once */
  CHECK_EQ_I64(d.role, MB_ROLE_EMBEDDING);
  CHECK_EQ_U64(d.numel, 50257ull * 768);
  int64_t version = 0;
  const char *dom = NULL;
  CHECK_EQ_I64(mb_model_opset(m, 0, &dom, &version), MB_OK);
  CHECK_EQ_I64(version, 17);
  CHECK_EQ_I64(mb_model_opset(m, 99, &dom, &version), MB_E_RANGE);
  mb_model_free(m);
}

/* Weight bytes are never read: put the payload on pages that fault when touched. */
static void test_payload_never_read(void) {
  long page = sysconf(_SC_PAGESIZE);
  size_t payload = (size_t)page * 64; /* 64 pages of weights */
  int64_t dims[] = {(int64_t)(payload / 4)};
  pb g = {0};
  int64_t xd[] = {-1, 4};
  pb_value_info(&g, GRAPH_INPUT, "x", 1, xd, 2);
  pb_node(&g, "r", "Relu", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
  pb_value_info(&g, GRAPH_OUTPUT, "y", 1, xd, 2);
  pb_init(&g, "W", 1, dims, 1, (long)payload);
  pb m = pb_model(&g);
  /* locate the payload: it is the last `payload` bytes of the graph, itself last in the model */
  size_t start = m.len - payload;
  size_t first_page = (start + (size_t)page - 1) / (size_t)page * (size_t)page - start;
  /* copy into page-aligned memory, offset so that page boundaries are known */
  size_t total = m.len + (size_t)page * 2;
  uint8_t *mem = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(mem != MAP_FAILED);
  memcpy(mem, m.d, m.len);
  /* protect every whole page inside the payload */
  uint8_t *prot_begin = mem + start + first_page;
  size_t prot_len = ((payload - first_page) / (size_t)page) * (size_t)page;
  CHECK(prot_len >= (size_t)page * 60);
  CHECK_EQ_I64(mprotect(prot_begin, prot_len, PROT_NONE), 0);
  mb_model *model = NULL;
  CHECK_EQ_I64(mb_model_load_buffer(mem, m.len, &model), MB_OK); /* would SIGSEGV if read */
  mb_accounting a = {.struct_size = sizeof a};
  mb_account(model, NULL, &a);
  CHECK_EQ_U64(a.trainable_parameters.bytes, payload);
  mb_model_free(model);
  munmap(mem, total);
  pb_free(&m);
}

static void test_unsorted_nodes(void) {
  /* nodes listed consumer-first: ONNX requires topological order (onnx.checker refuses it),
   * and the list is the order the step runs in, so membudget refuses it too, naming both */
  pb g = {0};
  int64_t d[] = {2};
  pb_value_info(&g, GRAPH_INPUT, "x", 1, d, 1);
  pb_node(&g, "second", "Relu", (const char *[]){"a", NULL}, (const char *[]){"y", NULL});
  pb_node(&g, "first", "Relu", (const char *[]){"x", NULL}, (const char *[]){"a", NULL});
  pb_value_info(&g, GRAPH_OUTPUT, "y", 1, d, 1);
  pb mp = pb_model(&g);
  mb_model *m = NULL;
  CHECK_EQ_I64(mb_model_load_buffer(mp.d, mp.len, &m), MB_E_INVALID_MODEL);
  CHECK(strstr(mb_model_errmsg(m), "node 'second' (Relu) reads 'a' before node 'first' (Relu) writes it") != NULL);
  CHECK(strstr(mb_model_errmsg(m), "not in topological order") != NULL);
  mb_model_free(m);
  pb_free(&mp);
}

int main(void) {
  test_tied_weights();
  test_low_precision();
  test_external();
  test_subgraphs();
  test_sparse();
  test_batchnorm_roles();
  test_all_dtypes();
  test_freeze_globs();
  test_zoo_facts();
  test_payload_never_read();
  test_unsorted_nodes();
  return mbt_finish("models");
}
