/* Sequence ops: a value holding a list of tensors. torch 2.x's dynamo exporter writes
 * `split`/`chunk`/`unbind` as SplitToSequence followed by one SequenceAt per element used,
 * and list arguments (torch.stack/cat of a Python list) as SequenceConstruct. A sequence's
 * tinfo carries its elements (op.h); the simulation treats the sequence as a view of what it
 * was made from, and SequenceAt as a view of its element. */
#include <string.h>

#include "ops/op.h"

static int need_seq(mb_op_ctx *c, int32_t i, const mb_tinfo **t) {
  int rc = mb_op_input(c, i, t);
  if (rc) return rc;
  if (!(*t)->seq) return mb_op_fail(c, "input %d is a tensor, not a sequence", (int)i);
  return MB_OK;
}

/* A position input (scalar, negative counts from the end) resolved against n elements;
 * insert: n is a valid position too. *pos = -1 when the input is omitted. */
static int position(mb_op_ctx *c, int32_t i, int32_t n, bool insert, int64_t *pos) {
  *pos = -1;
  if (i >= c->n_in || !c->in[i]) return MB_OK;
  int64_t count;
  const int64_t *v = mb_op_ivalues(c, i, &count);
  if (!v || count != 1) return mb_op_fail(c, "the position is not known statically");
  int64_t p = v[0] < 0 ? v[0] + n : v[0];
  if (p < 0 || p > n || (p == n && !insert))
    return mb_op_fail(c, "position %lld is outside a sequence of %d tensors", (long long)v[0], (int)n);
  *pos = p;
  return MB_OK;
}

static int copy_elem(mb_op_ctx *c, mb_tinfo *dst, const mb_tinfo *src) {
  int rc = mb_op_set_elem(c, dst, src->dtype, src->rank, src->dims);
  if (!rc) dst->val = src->val;
  return rc;
}

static int split_to_sequence(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  int32_t axis;
  if ((rc = mb_op_axis(c, mb_op_attr_i(c, "axis", 0), x->rank, &axis))) return rc;
  bool keepdims = mb_op_attr_i(c, "keepdims", 1) != 0;
  int64_t d = x->dims[axis], n_sizes = 0, chunk = 1;
  const int64_t *sizes = NULL;
  bool have_split = c->n_in > 1 && c->in[1];
  if (have_split) {
    if (!(sizes = mb_op_ivalues(c, 1, &n_sizes))) return mb_op_fail(c, "split sizes are not known statically");
    if (c->in[1]->rank == 0) { /* one chunk size: the last chunk may be smaller */
      chunk = sizes[0];
      sizes = NULL;
      if (chunk <= 0) return mb_op_fail(c, "split size %lld is not positive", (long long)chunk);
    }
  }
  int64_t parts = sizes ? n_sizes : (d + chunk - 1) / chunk;
  if (parts > MB_MAX_SEQUENCE)
    return mb_op_fail(c, "splitting %lld into %lld tensors is more than membudget follows", (long long)d, (long long)parts);
  mb_tinfo *e = mb_op_set_seq(c, 0, x->dtype, (int32_t)parts);
  if (!e) return c->d->status;
  int64_t dims[MB_MAX_RANK], sum = 0;
  for (int64_t k = 0; k < parts; k++) {
    int64_t len = sizes ? sizes[k] : (k + 1 < parts ? chunk : d - chunk * (parts - 1));
    if (len < 0 || !mb_add_i64(sum, len, &sum)) return mb_op_fail(c, "split sizes are negative or overflow");
    memcpy(dims, x->dims, (size_t)x->rank * sizeof *dims);
    dims[axis] = len;
    int32_t r = x->rank;
    if (!have_split && !keepdims) { /* unbind: each element drops the axis */
      memmove(dims + axis, dims + axis + 1, (size_t)(r - axis - 1) * sizeof *dims);
      r--;
    }
    if ((rc = mb_op_set_elem(c, &e[k], x->dtype, r, dims))) return rc;
  }
  if (sum != d) return mb_op_fail(c, "split sizes add up to %lld, axis has %lld", (long long)sum, (long long)d);
  return MB_OK;
}

static int sequence_at(mb_op_ctx *c) {
  const mb_tinfo *s;
  int rc = need_seq(c, 0, &s);
  if (rc) return rc;
  if (s->seq_len == 0) return mb_op_fail(c, "SequenceAt of an empty sequence");
  int64_t pos;
  if ((rc = position(c, 1, s->seq_len, false, &pos))) return rc;
  const mb_tinfo *e = &s->seq[pos < 0 ? 0 : pos];
  if ((rc = mb_op_set(c, 0, e->dtype, e->rank, e->dims))) return rc;
  if (c->out[0]) c->out[0]->val = e->val;
  return MB_OK;
}

static int sequence_construct(mb_op_ctx *c) {
  const mb_tinfo *x;
  int rc = mb_op_input(c, 0, &x);
  if (rc) return rc;
  mb_tinfo *e = mb_op_set_seq(c, 0, x->dtype, c->n_in);
  if (!e) return c->d->status;
  for (int32_t k = 0; k < c->n_in; k++) {
    if ((rc = mb_op_input(c, k, &x))) return rc;
    if ((rc = copy_elem(c, &e[k], x))) return rc;
  }
  return MB_OK;
}

static int sequence_empty(mb_op_ctx *c) {
  mb_tinfo *e = mb_op_set_seq(c, 0, (int32_t)mb_op_attr_i(c, "dtype", 1), 0);
  return e ? MB_OK : c->d->status;
}

static int sequence_insert(mb_op_ctx *c) {
  const mb_tinfo *s, *x;
  int rc;
  if ((rc = need_seq(c, 0, &s)) || (rc = mb_op_input(c, 1, &x))) return rc;
  int64_t pos;
  if ((rc = position(c, 2, s->seq_len, true, &pos))) return rc;
  if (pos < 0) pos = s->seq_len;
  mb_tinfo *e = mb_op_set_seq(c, 0, x->dtype, s->seq_len + 1);
  if (!e) return c->d->status;
  for (int32_t k = 0, j = 0; k <= s->seq_len; k++)
    if ((rc = copy_elem(c, &e[k], k == pos ? x : &s->seq[j++]))) return rc;
  return MB_OK;
}

static int sequence_erase(mb_op_ctx *c) {
  const mb_tinfo *s;
  int rc = need_seq(c, 0, &s);
  if (rc) return rc;
  if (s->seq_len == 0) return mb_op_fail(c, "SequenceErase of an empty sequence");
  int64_t pos;
  if ((rc = position(c, 1, s->seq_len, false, &pos))) return rc;
  if (pos < 0) pos = s->seq_len - 1;
  mb_tinfo *e = mb_op_set_seq(c, 0, s->dtype, s->seq_len - 1);
  if (!e) return c->d->status;
  for (int32_t k = 0, j = 0; k < s->seq_len; k++)
    if (k != pos && (rc = copy_elem(c, &e[j++], &s->seq[k]))) return rc;
  return MB_OK;
}

static int sequence_length(mb_op_ctx *c) {
  const mb_tinfo *s;
  int rc = need_seq(c, 0, &s);
  if (rc) return rc;
  int64_t n = s->seq_len;
  if ((rc = mb_op_set(c, 0, MB_DTYPE_INT64, 0, NULL))) return rc;
  return mb_op_set_ivalues(c, 0, &n, 1);
}

/* concat (new_axis 0) or stack (new_axis 1) of the elements along axis */
static int concat_from_sequence(mb_op_ctx *c) {
  const mb_tinfo *s;
  int rc = need_seq(c, 0, &s);
  if (rc) return rc;
  if (s->seq_len == 0) return mb_op_fail(c, "ConcatFromSequence of an empty sequence");
  bool stack = mb_op_attr_i(c, "new_axis", 0) != 0;
  const mb_tinfo *e0 = &s->seq[0];
  int32_t rank = e0->rank + (stack ? 1 : 0), axis;
  if ((rc = mb_op_axis(c, mb_op_attr_i(c, "axis", 0), rank, &axis))) return rc;
  int64_t dims[MB_MAX_RANK];
  if (rank > MB_MAX_RANK) return mb_op_fail(c, "rank too large");
  for (int32_t i = 0, j = 0; i < rank; i++) dims[i] = stack && i == axis ? s->seq_len : e0->dims[j++];
  if (!stack) dims[axis] = 0;
  for (int32_t k = 0; k < s->seq_len; k++) {
    const mb_tinfo *e = &s->seq[k];
    if (e->rank != e0->rank) return mb_op_fail(c, "sequence elements have ranks %d and %d", (int)e0->rank, (int)e->rank);
    for (int32_t i = 0; i < e->rank; i++) {
      int32_t o = stack && i >= axis ? i + 1 : i;
      if (!stack && i == axis) {
        if (!mb_add_i64(dims[axis], e->dims[i], &dims[axis])) return mb_op_fail(c, "the concatenation overflows");
      } else if (e->dims[i] != dims[o]) {
        return mb_op_fail(c, "sequence elements differ on axis %d (%lld and %lld)", (int)i,
                          (long long)dims[o], (long long)e->dims[i]);
      }
    }
  }
  return mb_op_set(c, 0, e0->dtype, rank, dims);
}

const mb_op_def mb_ops_sequence[] = {
  {"", "SplitToSequence", 11, 1, 2, 1, split_to_sequence, MB_G_SLICE},
  {"", "SequenceAt", 11, 2, 2, 1, sequence_at, MB_G_VIEW},
  {"", "SequenceConstruct", 11, 1, MB_OP_ANY, 1, sequence_construct, MB_G_VIEW},
  {"", "SequenceEmpty", 11, 0, 0, 1, sequence_empty, MB_G_NONDIFF},
  {"", "SequenceInsert", 11, 2, 3, 1, sequence_insert, MB_G_VIEW},
  {"", "SequenceErase", 11, 1, 2, 1, sequence_erase, MB_G_VIEW},
  {"", "SequenceLength", 11, 1, 1, 1, sequence_length, MB_G_NONDIFF},
  {"", "ConcatFromSequence", 11, 1, 1, 1, concat_from_sequence, MB_G_CONCAT},
};
const size_t mb_ops_sequence_count = sizeof mb_ops_sequence / sizeof mb_ops_sequence[0];
