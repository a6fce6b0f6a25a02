/* Recurrent layers: RNN, GRU, LSTM. X is [seq, batch, input] (layout 0) or
 * [batch, seq, input] (layout 1); W is [directions, gates * hidden, input]. */
#include <string.h>

#include "ops/op.h"

static int recurrent(mb_op_ctx *c) {
  const mb_tinfo *x, *w;
  int rc;
  if ((rc = mb_op_input(c, 0, &x)) || (rc = mb_op_input(c, 1, &w))) return rc;
  if (x->rank != 3 || w->rank != 3) return mb_op_fail(c, "X and W must have rank 3");
  const char *op = c->node->op_type;
  int64_t gates = !strcmp(op, "LSTM") ? 4 : !strcmp(op, "GRU") ? 3 : 1;
  int64_t hidden = mb_op_attr_i(c, "hidden_size", w->dims[1] / gates);
  static const char *const directions[] = {"forward", "reverse", "bidirectional", NULL};
  int64_t ndir = !strcmp(mb_op_attr_enum(c, "direction", "forward", directions), "bidirectional") ? 2 : 1;
  int64_t rows;
  if (hidden <= 0 || !mb_mul_i64(gates, hidden, &rows))
    return mb_op_fail(c, "hidden_size %lld is invalid", (long long)hidden);
  if (w->dims[0] != ndir || w->dims[1] != rows)
    return mb_op_fail(c, "W has dims [%lld, %lld, ...], expected [%lld, %lld, ...]",
                      (long long)w->dims[0], (long long)w->dims[1], (long long)ndir,
                      (long long)rows);
  bool batch_first = mb_op_attr_i(c, "layout", 0) != 0;
  int64_t seq = x->dims[batch_first ? 1 : 0], batch = x->dims[batch_first ? 0 : 1];
  int64_t y[4], h[3];
  if (batch_first) {
    y[0] = batch; y[1] = seq; y[2] = ndir; y[3] = hidden;
    h[0] = batch; h[1] = ndir; h[2] = hidden;
  } else {
    y[0] = seq; y[1] = ndir; y[2] = batch; y[3] = hidden;
    h[0] = ndir; h[1] = batch; h[2] = hidden;
  }
  if ((rc = mb_op_set(c, 0, x->dtype, 4, y))) return rc;
  if ((rc = mb_op_set(c, 1, x->dtype, 3, h))) return rc;
  return mb_op_set(c, 2, x->dtype, 3, h); /* LSTM Y_c */
}

const mb_op_def mb_ops_rnn[] = {
  {"", "RNN", 1, 3, 6, 2, recurrent, MB_G_RNN},
  {"", "GRU", 1, 3, 6, 2, recurrent, MB_G_RNN},
  {"", "LSTM", 1, 3, 8, 3, recurrent, MB_G_RNN},
};
const size_t mb_ops_rnn_count = sizeof mb_ops_rnn / sizeof mb_ops_rnn[0];
