/* Batches of graphs in the setup: per_sample, graph sizes in memory and from CSV, the worst
 * batch (each dim's G largest values summed), the quantile of random batches, the sentences that
 * name them, and the summary's per_graph. Expectations are sums worked out by hand. */
#include <stdio.h>
#include <stdlib.h>

#include "mbtest.h"
#include "membudget/membudget.h"

static mb_setup *new_setup(void) {
  mb_setup *s = NULL;
  CHECK_EQ_I64(mb_setup_create(&s), MB_OK);
  return s;
}

static void test_per_sample(void) {
  mb_setup *s = new_setup();
  CHECK_EQ_I64(mb_setup_num_sample_dims(s), 0);
  CHECK_EQ_I64(mb_setup_set(s, "per_sample", " nodes = 37 , edges=120,graphs=1"), MB_OK);
  CHECK_EQ_I64(mb_setup_num_sample_dims(s), 3);
  CHECK_CONTAINS(mb_setup_sample_dim(s, 0), "nodes");
  CHECK_CONTAINS(mb_setup_sample_dim(s, 2), "graphs");
  CHECK(mb_setup_sample_dim(s, 3) == NULL);
  int64_t v[3] = {0};
  CHECK_EQ_I64(mb_setup_sample_dims_at(s, 256, v, 3), MB_OK);
  CHECK_EQ_I64(v[0], 9472); /* 37 x 256 */
  CHECK_EQ_I64(v[1], 30720);
  CHECK_EQ_I64(v[2], 256);  /* a count of 1: the batch itself */
  CHECK_EQ_I64(mb_setup_sample_dims_at(s, 256, v, 2), MB_E_INVALID_ARG); /* no room */
  char text[256];
  CHECK(mb_setup_describe_batch(s, 2, text, sizeof text) > 0);
  CHECK_CONTAINS(text, "2 graphs of 37 nodes and 120 edges each: 74 nodes, 240 edges, 2 graphs");
  /* bad values keep what was set */
  CHECK_EQ_I64(mb_setup_set(s, "per_sample", "nodes=-1"), MB_E_INVALID_ARG);
  CHECK_CONTAINS(mb_setup_errmsg(s), "nodes: the count '-1' is not an integer >= 1");
  CHECK_EQ_I64(mb_setup_set(s, "per_sample", "=3"), MB_E_INVALID_ARG);
  CHECK_EQ_I64(mb_setup_set(s, "per_sample", "a=1,,b=2"), MB_E_INVALID_ARG);
  CHECK_EQ_I64(mb_setup_set(s, "per_sample", "a=99999999999999999999"), MB_E_INVALID_ARG);
  CHECK_EQ_I64(mb_setup_num_sample_dims(s), 3);
  CHECK_EQ_I64(mb_setup_set(s, "per_sample", ""), MB_OK); /* clears */
  CHECK_EQ_I64(mb_setup_num_sample_dims(s), 0);
  CHECK_EQ_I64(mb_setup_describe_batch(s, 2, text, sizeof text), 0);
  CHECK_EQ_I64(mb_setup_set(s, "batch_unit", "molecules"), MB_OK);
  CHECK_EQ_I64(mb_setup_set(s, "batch_unit", "a-very-long-unit-name"), MB_E_INVALID_ARG);
  CHECK_EQ_I64(mb_setup_set(s, "batch_unit", "9lives"), MB_E_INVALID_ARG);
  mb_setup_free(s);
}

/* (nodes, edges) of six graphs; the one with the most nodes is not the one with the most edges */
static const int64_t SIZES[] = {2, 9, 7, 3, 5, 5, 1, 1, 4, 8, 3, 2};
static const char *const DIMS[] = {"nodes", "edges"};

static void test_worst_batch(void) {
  mb_setup *s = new_setup();
  CHECK_EQ_I64(mb_setup_set_graph_sizes(s, DIMS, 2, SIZES, 6), MB_OK);
  CHECK_EQ_I64(mb_setup_num_sample_dims(s), 2);
  int64_t v[2];
  const int64_t want[7][2] = {{0, 0}, {7, 9}, {12, 17}, {16, 22}, {19, 25}, {21, 27}, {22, 28}};
  for (int g = 1; g <= 6; g++) {
    CHECK_EQ_I64(mb_setup_sample_dims_at(s, g, v, 2), MB_OK);
    CHECK_EQ_I64(v[0], want[g][0]);
    CHECK_EQ_I64(v[1], want[g][1]);
  }
  CHECK_EQ_I64(mb_setup_sample_dims_at(s, 7, v, 2), MB_E_INVALID_ARG);
  CHECK_CONTAINS(mb_setup_errmsg(s), "a batch of 7 graphs: the graph sizes list only 6 graphs");
  char text[512];
  mb_setup_describe_batch(s, 2, text, sizeof text);
  CHECK_CONTAINS(text, "the worst batch: the 2 largest graphs of the 6 in the graph sizes given (each dim's 2 "
                       "largest values summed): 12 nodes, 17 edges");
  /* per_sample counts for a dim the table does not give; the table wins for those it does */
  CHECK_EQ_I64(mb_setup_set(s, "per_sample", "edges=100,graphs=1"), MB_OK);
  int64_t w[3];
  CHECK_EQ_I64(mb_setup_num_sample_dims(s), 3); /* edges, graphs, then nodes */
  CHECK_EQ_I64(mb_setup_sample_dims_at(s, 2, w, 3), MB_OK);
  CHECK_EQ_I64(w[0], 17);
  CHECK_EQ_I64(w[1], 2);
  CHECK_EQ_I64(w[2], 12);
  /* bad tables: nothing changes */
  const int64_t negative[] = {1, -2};
  CHECK_EQ_I64(mb_setup_set_graph_sizes(s, DIMS, 2, negative, 1), MB_E_INVALID_ARG);
  CHECK_CONTAINS(mb_setup_errmsg(s), "graph sizes: graph 1 has edges = -2");
  const char *const twice[] = {"nodes", "nodes"};
  CHECK_EQ_I64(mb_setup_set_graph_sizes(s, twice, 2, SIZES, 6), MB_E_INVALID_ARG);
  CHECK_EQ_I64(mb_setup_set_graph_sizes(s, NULL, 0, SIZES, 6), MB_E_INVALID_ARG);
  CHECK_EQ_I64(mb_setup_sample_dims_at(s, 6, w, 3), MB_OK);
  CHECK_EQ_I64(w[2], 22);
  CHECK_EQ_I64(mb_setup_set_graph_sizes(s, NULL, 0, NULL, 0), MB_OK); /* clears */
  CHECK_EQ_I64(mb_setup_num_sample_dims(s), 2);
  mb_setup_free(s);
}

static void test_quantile(void) {
  mb_setup *s = new_setup();
  CHECK_EQ_I64(mb_setup_set_graph_sizes(s, DIMS, 2, SIZES, 6), MB_OK);
  CHECK_EQ_I64(mb_setup_set(s, "graph_quantile", "0.5"), MB_OK);
  int64_t v[2], again[2];
  /* every batch of all six graphs is the data set */
  CHECK_EQ_I64(mb_setup_sample_dims_at(s, 6, v, 2), MB_OK);
  CHECK_EQ_I64(v[0], 22);
  CHECK_EQ_I64(v[1], 28);
  /* batches of 5 leave one graph out: the point lies between the smallest and the worst batch,
   * and the same seed gives the same point */
  CHECK_EQ_I64(mb_setup_sample_dims_at(s, 5, v, 2), MB_OK);
  CHECK_EQ_I64(mb_setup_sample_dims_at(s, 5, again, 2), MB_OK);
  CHECK_EQ_I64(v[0], again[0]);
  CHECK_EQ_I64(v[1], again[1]);
  CHECK(v[0] >= 22 - 7 && v[0] <= 21 && v[1] >= 28 - 9 && v[1] <= 27);
  /* the whole range at 1.0: among 1000 random single graphs every graph appears, so the point
   * is the largest value of each dim */
  CHECK_EQ_I64(mb_setup_set(s, "graph_quantile", "1"), MB_OK);
  CHECK_EQ_I64(mb_setup_sample_dims_at(s, 1, v, 2), MB_OK);
  CHECK_EQ_I64(v[0], 7);
  CHECK_EQ_I64(v[1], 9);
  char text[512];
  mb_setup_describe_batch(s, 1, text, sizeof text);
  CHECK_CONTAINS(text, "the 1 quantile of 1000 random batches of 1 graphs from the 6 in the graph sizes given "
                       "(seeded with 1 and the batch size): 7 nodes, 9 edges; no dim of at least 1000 of the 1000 "
                       "batches is larger");
  CHECK_EQ_I64(mb_setup_set(s, "graph_quantile", "largest"), MB_OK); /* back to the worst batch */
  CHECK_EQ_I64(mb_setup_sample_dims_at(s, 2, v, 2), MB_OK);
  CHECK_EQ_I64(v[0], 12);
  CHECK_EQ_I64(mb_setup_set(s, "graph_quantile", "-0.5"), MB_E_INVALID_ARG);
  CHECK_EQ_I64(mb_setup_set(s, "graph_batches", "1000001"), MB_E_INVALID_ARG);
  mb_setup_free(s);
}

static void test_csv(void) {
  char path[] = "/tmp/mb_test_graphsXXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  FILE *f = fdopen(fd, "w");
  fputs("nodes,edges\n2,9\n7,3\n5,5\n1,1\n4,8\n3,2\n", f);
  fclose(f);
  mb_setup *s = new_setup();
  CHECK_EQ_I64(mb_setup_set(s, "graph_sizes", path), MB_OK);
  int64_t v[2];
  CHECK_EQ_I64(mb_setup_sample_dims_at(s, 3, v, 2), MB_OK);
  CHECK_EQ_I64(v[0], 16);
  CHECK_EQ_I64(v[1], 22);
  f = fopen(path, "w");
  fputs("nodes,edges\n2,9\n7\n", f);
  fclose(f);
  CHECK_EQ_I64(mb_setup_set(s, "graph_sizes", path), MB_E_INVALID_ARG);
  CHECK_CONTAINS(mb_setup_errmsg(s), "line 3: 1 field, the header names 2");
  CHECK_EQ_I64(mb_setup_sample_dims_at(s, 3, v, 2), MB_OK); /* the table before stays */
  CHECK_EQ_I64(v[0], 16);
  f = fopen(path, "w");
  fclose(f);
  CHECK_EQ_I64(mb_setup_set(s, "graph_sizes", path), MB_E_INVALID_ARG);
  CHECK_CONTAINS(mb_setup_errmsg(s), "is empty");
  remove(path);
  CHECK_EQ_I64(mb_setup_set(s, "graph_sizes", path), MB_E_IO);
  CHECK_EQ_I64(mb_setup_set(s, "graph_sizes", ""), MB_OK); /* clears */
  CHECK_EQ_I64(mb_setup_num_sample_dims(s), 0);
  mb_setup_free(s);
}

static void test_summary(void) {
  mb_budget b = {.struct_size = sizeof b};
  b.dynamic_per_sample = 1024;
  b.batch_size = 2048;
  char line[512];
  mb_budget_summary(&b, line, sizeof line);
  CHECK(strstr(line, "per_graph") == NULL); /* no unit: samples */
  snprintf(b.batch_unit, sizeof b.batch_unit, "graphs");
  mb_budget_summary(&b, line, sizeof line);
  CHECK_CONTAINS(line, "per_sample=1.00 KiB per_graph=1.00 KiB available=unknown batch_size=2048 mode=static)");
  b.struct_size = (uint32_t)offsetof(mb_budget, batch_unit); /* a caller's older struct: no unit */
  mb_budget_summary(&b, line, sizeof line);
  CHECK(strstr(line, "per_graph") == NULL);
}

int main(void) {
  test_per_sample();
  test_worst_batch();
  test_quantile();
  test_csv();
  test_summary();
  return mbt_finish("graphs");
}
