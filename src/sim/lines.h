/* Shapes as lines in the batch size. A batch-size search runs one plan at many batches, and on
 * a 70B decoder inferring shapes is two thirds of a run (1.7 of 2.5 ms). In the graphs people
 * export every dim is an integer line in the batch, c + k x batch (batch, batch x sequence,
 * batch x heads), so two runs with inferred shapes at different batches give every later one.
 *
 * The lines are taken only when every value of every graph the plan sizes has the same rank,
 * dtype and kind in both runs and each dim lies on an integer line with k >= 0 through both
 * points; every later run with inferred shapes checks them again and breaks them on the first
 * dim off its line. Shapes from lines are what inference gives wherever that holds, including
 * its refusal of a tensor of absurd size (MB_E_LIMIT). */
#ifndef MB_SIM_LINES_H
#define MB_SIM_LINES_H
#include <stdbool.h>
#include <stdint.h>

#include "ops/op.h"

typedef struct mb_lines mb_lines;

enum mb_lines_state {
  MB_LINES_EMPTY,   /* no run seen */
  MB_LINES_ONE,     /* one run seen: its shapes held */
  MB_LINES_FITTED,  /* lines through two runs */
  MB_LINES_BROKEN   /* a value not on a line: shapes must be inferred */
};

/* Lines for up to three graphs with n_values[g] values each (0: that graph is not run). */
mb_lines *mb_lines_new(const int32_t n_values[3]);
/* Only the values where used[v] (n_values[g] entries) are asked for from graph g: mb_lines_at
 * fills no other (every value still has to be on its line). */
int mb_lines_use(mb_lines *l, int g, const bool *used);
void mb_lines_free(mb_lines *l);
int mb_lines_state(const mb_lines *l);

/* Feed the inferred shapes of one run: t[g] at batches[g] for each graph (NULL: not run), and
 * the default bounds it took. Records, fits, checks or breaks. */
void mb_lines_feed(mb_lines *l, const mb_tinfo *const t[3], const int64_t batches[3], int32_t assumed);
/* The default bounds the first run took (the same number at every batch where lines hold). */
int32_t mb_lines_assumed(const mb_lines *l);

/* The shapes of graph g at batch from fitted lines: valid until the next call for g.
 * MB_E_LIMIT where some value would pass the size inference refuses (sizes never fall as the
 * batch grows, so it is found once per range); MB_E_INVALID_ARG where the lines cannot say. */
int mb_lines_at(mb_lines *l, int g, int64_t batch, const mb_tinfo **out, char *msg, size_t msg_len);
#endif
