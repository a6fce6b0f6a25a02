#include "sim/strides.h"

#include <string.h>

void mb_strides_contiguous(const int64_t *dims, int32_t rank, int64_t *out) {
  int64_t s = 1;
  for (int32_t i = rank - 1; i >= 0; i--) {
    out[i] = s;
    s *= dims[i] > 1 ? dims[i] : 1;
  }
}

bool mb_strides_is_contiguous(const int64_t *dims, const int64_t *strides, int32_t rank) {
  if (!strides) return true;
  int64_t expect = 1;
  for (int32_t i = rank - 1; i >= 0; i--) {
    if (dims[i] == 1) continue;
    if (dims[i] == 0) return true;
    if (strides[i] != expect) return false;
    expect *= dims[i];
  }
  return true;
}

/* Tensor.view's rule: x's dims fall into chunks whose elements are evenly spaced (each dim's
 * stride is the next one's times its size); y's dims must split or merge within chunks only. */
bool mb_strides_view(const int64_t *xd, const int64_t *xs, int32_t xr, const int64_t *yd, int32_t yr,
                     int64_t *out) {
  int64_t own[64];
  if (xr > 64 || yr > 64) return false;
  if (!xs) {
    mb_strides_contiguous(xd, xr, own);
    xs = own;
  }
  int64_t numel = 1;
  for (int32_t i = 0; i < xr; i++) numel *= xd[i];
  if (numel == 0 || xr == 0) {
    mb_strides_contiguous(yd, yr, out);
    return true;
  }
  int32_t v = yr - 1;
  int64_t base = xs[xr - 1], chunk = 1, view = 1;
  for (int32_t d = xr - 1; d >= 0; d--) {
    chunk *= xd[d];
    bool chunk_ends = d == 0 || (xd[d - 1] != 1 && xs[d - 1] != chunk * base);
    if (!chunk_ends) continue;
    while (v >= 0 && (view < chunk || yd[v] == 1)) {
      out[v] = view * base;
      view *= yd[v];
      v--;
    }
    if (view != chunk) return false;
    if (d > 0) {
      base = xs[d - 1];
      chunk = view = 1;
    }
  }
  return v == -1;
}

void mb_strides_expand(const int64_t *xd, const int64_t *xs, int32_t xr, const int64_t *yd, int32_t yr,
                       int64_t *out) {
  int64_t own[64];
  if (!xs && xr <= 64) {
    mb_strides_contiguous(xd, xr, own);
    xs = own;
  }
  for (int32_t i = 0; i < yr; i++) {
    int32_t k = i - (yr - xr);
    out[i] = k < 0 || !xs || (xd[k] == 1 && yd[i] != 1) ? 0 : xs[k];
  }
}

void mb_strides_dense_order(const int64_t *dims, const int32_t *order, int32_t rank, int64_t *out) {
  int64_t s = 1;
  for (int32_t i = rank - 1; i >= 0; i--) {
    out[order[i]] = s;
    s *= dims[order[i]] > 1 ? dims[order[i]] : 1;
  }
}

void mb_strides_dense_like(const int64_t *dims, const int64_t *like, int32_t rank, int64_t *out) {
  int32_t order[64];
  if (rank > 64) return;
  /* outermost first: larger stride first, ties in dim order; a size-1 dim's stride means
   * nothing, so it goes outermost where it changes nothing */
  for (int32_t i = 0; i < rank; i++) {
    int32_t d = i, j = i;
    int64_t key = dims[d] == 1 ? INT64_MAX : like[d];
    while (j > 0 && (dims[order[j - 1]] == 1 ? INT64_MAX : like[order[j - 1]]) < key) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = d;
  }
  mb_strides_dense_order(dims, order, rank, out);
}
