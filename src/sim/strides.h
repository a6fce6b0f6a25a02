/* The stride model: where each tensor's elements lie in its storage, as PyTorch's kernels lay
 * them out. It decides which views PyTorch can make without a copy (a reshape of a transposed
 * tensor, at::matmul folding batch dims, .contiguous()) and how new results are laid out
 * (elementwise results follow their first full-size input; attention kernels have their own).
 * Strides are in elements; a NULL strides pointer means contiguous. */
#ifndef MB_SIM_STRIDES_H
#define MB_SIM_STRIDES_H
#include <stdbool.h>
#include <stdint.h>

/* Row-major strides of dims. */
void mb_strides_contiguous(const int64_t *dims, int32_t rank, int64_t *out);
/* Whether a tensor of these dims and strides is laid out contiguously (size-1 dims do not
 * count; NULL strides are contiguous). */
bool mb_strides_is_contiguous(const int64_t *dims, const int64_t *strides, int32_t rank);
/* The strides of y (yd, yr) as a view of x's memory, as Tensor.view computes them; false
 * when no view exists (the reshape copies). xs NULL: x is contiguous. */
bool mb_strides_view(const int64_t *xd, const int64_t *xs, int32_t xr, const int64_t *yd, int32_t yr,
                     int64_t *out);
/* x broadcast to yd (Expand): stride 0 on broadcast and new leading dims. */
void mb_strides_expand(const int64_t *xd, const int64_t *xs, int32_t xr, const int64_t *yd, int32_t yr,
                       int64_t *out);
/* A dense tensor of dims laid out in the dim order of `like` (strides of a tensor with the same
 * dims): TensorIterator's output for an elementwise op whose first full-size input is `like`. */
void mb_strides_dense_like(const int64_t *dims, const int64_t *like, int32_t rank, int64_t *out);
/* A dense tensor of dims whose memory order is `order` (order[0] outermost): the layout a kernel
 * writes, e.g. {0, 2, 1, 3} for SDPA's [B, L, H, D] output returned as [B, H, L, D]. */
void mb_strides_dense_order(const int64_t *dims, const int32_t *order, int32_t rank, int64_t *out);
#endif
