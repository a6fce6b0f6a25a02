/* Shapes as lines in the batch size (sim/lines.h): what is fitted, what breaks the lines, the
 * shapes they give, and the absurd-size refusal they share with inference. Every expected dim
 * is the formula the synthetic graph is written from. */
#include <stdbool.h>
#include <stdlib.h>

#include "graph/graph.h"
#include "mbtest.h"
#include "sim/lines.h"

/* A synthetic graph of four values: a host scalar shape (rank 1, [3]), an activation
 * [b, 4096], a flattened one [b x 4096 + 8], an unknown value (rank -1). `quad` makes the
 * third b x b instead (the similarity matrix of a contrastive loss, flattened). */
enum { NV = 4 };
typedef struct graph_at {
  mb_tinfo t[NV];
  int64_t dims[NV][2];
} graph_at;

static void make(graph_at *g, int64_t b, bool quad) {
  static const int32_t ranks[NV] = {1, 2, 1, -1};
  for (int v = 0; v < NV; v++) g->t[v] = (mb_tinfo){.dtype = 1, .rank = ranks[v], .dims = g->dims[v]};
  g->dims[0][0] = 3;
  g->dims[1][0] = b;
  g->dims[1][1] = 4096;
  g->dims[2][0] = quad ? b * b : b * 4096 + 8;
}

static void feed(mb_lines *l, int64_t b, bool quad) {
  graph_at g;
  make(&g, b, quad);
  const mb_tinfo *t[3] = {g.t, NULL, NULL};
  const int64_t batches[3] = {b, b, 0};
  mb_lines_feed(l, t, batches, 0);
}

static const int32_t one_graph[3] = {NV, 0, 0};

static void test_two_runs_give_every_batch(void) {
  mb_lines *l = mb_lines_new(one_graph);
  CHECK(l != NULL);
  CHECK_EQ_I64(mb_lines_state(l), MB_LINES_EMPTY);
  feed(l, 2, false);
  CHECK_EQ_I64(mb_lines_state(l), MB_LINES_ONE);
  const mb_tinfo *t = NULL;
  char msg[160];
  /* one run: its own batch only */
  CHECK_EQ_I64(mb_lines_at(l, 0, 2, &t, msg, sizeof msg), MB_OK);
  CHECK_EQ_I64(t[2].dims[0], 2 * 4096 + 8);
  CHECK_EQ_I64(mb_lines_at(l, 0, 3, &t, msg, sizeof msg), MB_E_INVALID_ARG);
  feed(l, 1, false);
  CHECK_EQ_I64(mb_lines_state(l), MB_LINES_FITTED);
  CHECK_EQ_I64(mb_lines_at(l, 0, 1000, &t, msg, sizeof msg), MB_OK);
  CHECK_EQ_I64(t[0].rank, 1);
  CHECK_EQ_I64(t[0].dims[0], 3);
  CHECK_EQ_I64(t[1].dims[0], 1000);
  CHECK_EQ_I64(t[1].dims[1], 4096);
  CHECK_EQ_I64(t[2].dims[0], 1000 * 4096 + 8);
  CHECK_EQ_I64(t[3].rank, -1);
  /* a third run on the lines is a check that holds: they still give every batch */
  feed(l, 777, false);
  CHECK_EQ_I64(mb_lines_state(l), MB_LINES_FITTED);
  CHECK_EQ_I64(mb_lines_at(l, 0, 5, &t, msg, sizeof msg), MB_OK);
  CHECK_EQ_I64(t[2].dims[0], 5 * 4096 + 8);
  mb_lines_free(l);
}

static void test_a_dim_off_its_line_breaks_them(void) {
  /* b x b through batches 2 and 1 (4 and 1) is the line 3b - 2: only a third run shows it */
  mb_lines *l = mb_lines_new(one_graph);
  feed(l, 2, true);
  feed(l, 1, true);
  CHECK_EQ_I64(mb_lines_state(l), MB_LINES_FITTED);
  const mb_tinfo *t = NULL;
  char msg[160];
  CHECK_EQ_I64(mb_lines_at(l, 0, 10, &t, msg, sizeof msg), MB_OK);
  CHECK_EQ_I64(t[2].dims[0], 28); /* the line's, not 100: why the search checks its answer */
  feed(l, 10, true);
  CHECK_EQ_I64(mb_lines_state(l), MB_LINES_BROKEN);
  CHECK_EQ_I64(mb_lines_at(l, 0, 10, &t, msg, sizeof msg), MB_E_INVALID_ARG);
  mb_lines_free(l);

  /* through batches 1 and 4 (1 and 16): a rise of 15 over 3 batches is the line 5b - 4, but
   * through 1 and 3 (1 and 9) it is 4b - 3 */
  l = mb_lines_new(one_graph);
  feed(l, 1, true);
  feed(l, 3, true);
  CHECK_EQ_I64(mb_lines_state(l), MB_LINES_FITTED);
  feed(l, 4, true);
  CHECK_EQ_I64(mb_lines_state(l), MB_LINES_BROKEN);
  mb_lines_free(l);
}

/* Two runs, at batches 1 and 4, with dim 0 of value v set to d1 and then d4: broken? */
static bool breaks(int32_t v, int64_t d1, int64_t d4) {
  mb_lines *l = mb_lines_new(one_graph);
  const int64_t batch[2] = {1, 4}, dim[2] = {d1, d4};
  for (int k = 0; k < 2; k++) {
    graph_at g;
    make(&g, batch[k], false);
    g.dims[v][0] = dim[k];
    const mb_tinfo *ts[3] = {g.t, NULL, NULL};
    const int64_t b[3] = {batch[k], batch[k], 0};
    mb_lines_feed(l, ts, b, 0);
  }
  const mb_tinfo *t = NULL;
  char msg[160];
  bool broken = mb_lines_state(l) == MB_LINES_BROKEN;
  if (broken) CHECK_EQ_I64(mb_lines_at(l, 0, 4, &t, msg, sizeof msg), MB_E_INVALID_ARG);
  mb_lines_free(l);
  return broken;
}

static void test_what_is_not_a_line(void) {
  CHECK(!breaks(1, 1, 4)); /* b itself, as make() has it */
  CHECK(breaks(1, 1, 2));  /* ceil(b / 2): a rise of 1 over 3 batches is no whole step */
  CHECK(breaks(0, 9, 6));  /* a dim that falls as the batch grows */
  mb_lines *l;
  graph_at g;
  const mb_tinfo *ts[3] = {g.t, NULL, NULL};
  const int64_t b1[3] = {1, 1, 0}, b4[3] = {4, 4, 0};

  /* a rank that changes, a dtype that changes */
  for (int what = 0; what < 2; what++) {
    l = mb_lines_new(one_graph);
    feed(l, 1, false);
    make(&g, 4, false);
    if (what) g.t[1].dtype = 2;
    else g.t[3].rank = 0;
    mb_lines_feed(l, ts, b4, 0);
    CHECK_EQ_I64(mb_lines_state(l), MB_LINES_BROKEN);
    mb_lines_free(l);
  }

  /* a sequence: not followed */
  l = mb_lines_new(one_graph);
  make(&g, 1, false);
  mb_tinfo elem = {.dtype = 1, .rank = 0};
  g.t[3] = (mb_tinfo){.dtype = 1, .rank = 0, .seq = &elem, .seq_len = 1};
  mb_lines_feed(l, ts, b1, 0);
  CHECK_EQ_I64(mb_lines_state(l), MB_LINES_BROKEN);
  mb_lines_free(l);

  /* a different number of default bounds taken */
  l = mb_lines_new(one_graph);
  make(&g, 1, false);
  mb_lines_feed(l, ts, b1, 1);
  make(&g, 4, false);
  mb_lines_feed(l, ts, b4, 2);
  CHECK_EQ_I64(mb_lines_state(l), MB_LINES_BROKEN);
  mb_lines_free(l);
}

static void test_absurd_sizes_are_refused_as_inference_does(void) {
  mb_lines *l = mb_lines_new(one_graph);
  feed(l, 1, false);
  feed(l, 2, false);
  const mb_tinfo *t = NULL;
  char msg[160];
  /* inference refuses a tensor of more than 2^50 / 16 elements: [b, 4096] passes it above
   * b = 2^46 / 2^12 = 2^34 */
  int64_t edge = (INT64_C(1) << 46) / 4096;
  CHECK_EQ_I64(mb_lines_at(l, 0, edge + 1, &t, msg, sizeof msg), MB_E_LIMIT);
  CHECK_CONTAINS(msg, "absurd size");
  /* the third value, b x 4096 + 8, passes it first: at 2^34 - 1 neither does */
  CHECK_EQ_I64(mb_lines_at(l, 0, edge - 1, &t, msg, sizeof msg), MB_OK);
  CHECK_EQ_I64(t[1].dims[0], edge - 1);
  CHECK_EQ_I64(mb_lines_at(l, 0, edge, &t, msg, sizeof msg), MB_E_LIMIT);
  CHECK_EQ_I64(mb_lines_at(l, 0, 5, &t, msg, sizeof msg), MB_OK);
  mb_lines_free(l);
  /* a dim whose line overflows int64 */
  l = mb_lines_new(one_graph);
  feed(l, 1, false);
  feed(l, 2, false);
  CHECK_EQ_I64(mb_lines_at(l, 0, INT64_MAX / 2, &t, msg, sizeof msg), MB_E_LIMIT);
  mb_lines_free(l);
}

static void test_only_the_values_asked_for_are_filled(void) {
  mb_lines *l = mb_lines_new(one_graph);
  bool used[NV] = {false, true, false, false};
  CHECK_EQ_I64(mb_lines_use(l, 0, used), MB_OK);
  feed(l, 1, false);
  feed(l, 2, false);
  const mb_tinfo *t = NULL;
  char msg[160];
  CHECK_EQ_I64(mb_lines_at(l, 0, 64, &t, msg, sizeof msg), MB_OK);
  CHECK_EQ_I64(t[1].dims[0], 64);
  CHECK(t[2].dims == NULL); /* never filled */
  mb_lines_free(l);
}

static void test_a_graph_at_a_fixed_batch(void) {
  /* the evaluation's graph (g = 2) runs at its own batch, the same in every run: one run gives
   * it, at that batch */
  const int32_t n[3] = {NV, 0, NV};
  mb_lines *l = mb_lines_new(n);
  graph_at a, e;
  for (int64_t b = 1; b <= 2; b++) {
    make(&a, b, false);
    make(&e, 16, false);
    const mb_tinfo *t[3] = {a.t, NULL, e.t};
    const int64_t batches[3] = {b, b, 16};
    mb_lines_feed(l, t, batches, 0);
  }
  CHECK_EQ_I64(mb_lines_state(l), MB_LINES_ONE); /* the evaluation's graph: one batch seen */
  const mb_tinfo *t = NULL;
  char msg[160];
  CHECK_EQ_I64(mb_lines_at(l, 2, 16, &t, msg, sizeof msg), MB_OK);
  CHECK_EQ_I64(t[1].dims[0], 16);
  CHECK_EQ_I64(mb_lines_at(l, 0, 9, &t, msg, sizeof msg), MB_OK);
  CHECK_EQ_I64(t[1].dims[0], 9);
  mb_lines_free(l);
}

int main(void) {
  test_two_runs_give_every_batch();
  test_a_dim_off_its_line_breaks_them();
  test_what_is_not_a_line();
  test_absurd_sizes_are_refused_as_inference_does();
  test_only_the_values_asked_for_are_filled();
  test_a_graph_at_a_fixed_batch();
  return mbt_finish("lines");
}
