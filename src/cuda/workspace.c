#include "cuda/workspace.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

static int64_t attr_ints_at(const mb_node *n, const char *name, int32_t i, int64_t dflt) {
  const mb_attr *a = mb_node_attr(n, name, MB_ATTR_INTS);
  return a && (uint64_t)i < a->n_ints ? a->ints[i] : dflt;
}

static const mb_tinfo *value(const mb_node *n, const mb_tinfo *t, bool output, int32_t i) {
  int32_t nv = output ? n->n_outputs : n->n_inputs;
  if (i >= nv) return NULL;
  int32_t v = output ? n->outputs[i] : n->inputs[i];
  return v >= 0 && t[v].rank >= 0 ? &t[v] : NULL;
}

static bool cudnn_dtype(int32_t dtype, int *out) {
  switch (dtype) {
    case MB_DTYPE_FLOAT: *out = MB_CUDNN_DATA_FLOAT; return true;
    case MB_DTYPE_FLOAT16: *out = MB_CUDNN_DATA_HALF; return true;
    case MB_DTYPE_BFLOAT16: *out = MB_CUDNN_DATA_BFLOAT16; return true;
    default: return false;
  }
}

/* dims as cuDNN wants them: ints, at least 4 (a 1-d convolution gets a unit height first, as
 * PyTorch does), and packed NCHW strides */
static bool dims4(const mb_tinfo *x, int *dims, int *strides, int *nd) {
  int r = x->rank, k = 0;
  if (r < 3 || r > 5) return false;
  for (int i = 0; i < r; i++) {
    if (x->dims[i] < 1 || x->dims[i] > INT_MAX) return false;
    if (r == 3 && i == 2) dims[k++] = 1;
    dims[k++] = (int)x->dims[i];
  }
  *nd = k;
  if (strides) {
    long long s = 1;
    for (int i = k - 1; i >= 0; i--) {
      if (s > INT_MAX) return false;
      strides[i] = (int)s;
      s *= dims[i];
    }
  }
  return true;
}

static void collect(const mb_cudnn_perf *perf, int got, mb_ws_list *out) {
  out->n = 0;
  for (int i = 0; i < got && out->n < MB_WS_ALGOS; i++)
    if (perf[i].status == MB_CUDNN_STATUS_SUCCESS) out->bytes[out->n++] = perf[i].memory;
}

bool mb_conv_workspaces(mb_cuda *c, const mb_node *n, const mb_tinfo *t, int32_t dtype, mb_conv_ws *out,
                        char *why, size_t why_size) {
  memset(out, 0, sizeof *out);
  if (!c->dnn_handle) {
    snprintf(why, why_size, "no cuDNN");
    return false;
  }
  bool transpose = !strcmp(n->op_type, "ConvTranspose");
  /* the convolution's geometry: a transposed convolution is the backward of the convolution
   * from its output to its input */
  const mb_tinfo *x = value(n, t, transpose, 0), *w = value(n, t, false, 1), *y = value(n, t, !transpose, 0);
  int type = 0;
  if (!x || !w || !y || !cudnn_dtype(dtype, &type)) {
    snprintf(why, why_size, "shapes or data type not known to cuDNN");
    return false;
  }
  int xd[5], xs[5], yd[5], ys[5], wd[5], nx = 0, ny = 0, nw = 0;
  if (!dims4(x, xd, xs, &nx) || !dims4(y, yd, ys, &ny) || !dims4(w, wd, NULL, &nw) || nx != ny || nx != nw) {
    snprintf(why, why_size, "rank %d or a dim beyond int", (int)x->rank);
    return false;
  }
  int sp = nx - 2, off = x->rank == 3 ? 1 : 0; /* attribute index = cuDNN spatial index - off */
  int pad[3], stride[3], dil[3];
  const mb_attr *ap = mb_node_attr(n, "auto_pad", MB_ATTR_STRING);
  bool same = ap && ap->s && !strncmp(ap->s, "SAME", 4), valid = ap && ap->s && !strcmp(ap->s, "VALID");
  for (int i = 0; i < sp; i++) {
    int a = i - off;
    stride[i] = a < 0 ? 1 : (int)attr_ints_at(n, "strides", a, 1);
    dil[i] = a < 0 ? 1 : (int)attr_ints_at(n, "dilations", a, 1);
    if (a < 0 || valid) pad[i] = 0;
    else if (same) { /* cuDNN pads symmetrically: half of what SAME needs */
      long long need = (long long)(yd[i + 2] - 1) * stride[i] + (long long)(wd[i + 2] - 1) * dil[i] + 1 - xd[i + 2];
      pad[i] = need > 0 ? (int)(need / 2) : 0;
    } else pad[i] = (int)attr_ints_at(n, "pads", a, 0);
  }
  const mb_attr *group = mb_node_attr(n, "group", MB_ATTR_INT);
  int groups = (int)(group ? group->i : 1);
  mb_cudnn_tensor_desc xdesc = NULL, ydesc = NULL;
  mb_cudnn_filter_desc wdesc = NULL;
  mb_cudnn_conv_desc cdesc = NULL;
  mb_cudnn_perf perf[MB_WS_ALGOS];
  int got = 0, rc = 0;
  bool ok = (rc = c->dnn.create_tensor(&xdesc)) == 0 && (rc = c->dnn.create_tensor(&ydesc)) == 0 &&
            (rc = c->dnn.create_filter(&wdesc)) == 0 && (rc = c->dnn.create_conv(&cdesc)) == 0 &&
            (rc = c->dnn.set_tensor_nd(xdesc, type, nx, xd, xs)) == 0 &&
            (rc = c->dnn.set_tensor_nd(ydesc, type, ny, yd, ys)) == 0 &&
            (rc = c->dnn.set_filter_nd(wdesc, type, MB_CUDNN_TENSOR_NCHW, nw, wd)) == 0 &&
            (rc = c->dnn.set_conv_nd(cdesc, sp, pad, stride, dil, MB_CUDNN_CROSS_CORRELATION, MB_CUDNN_DATA_FLOAT)) == 0 &&
            (rc = c->dnn.set_conv_groups(cdesc, groups)) == 0 &&
            (rc = c->dnn.set_conv_math(cdesc, type == MB_CUDNN_DATA_FLOAT ? MB_CUDNN_DEFAULT_MATH
                                                                          : MB_CUDNN_TENSOR_OP_MATH)) == 0;
  if (ok && (rc = c->dnn.fwd_algos(c->dnn_handle, xdesc, wdesc, cdesc, ydesc, MB_WS_ALGOS, &got, perf)) == 0)
    collect(perf, got, &out->fwd);
  if (ok && rc == 0 && (rc = c->dnn.bwd_data_algos(c->dnn_handle, wdesc, ydesc, cdesc, xdesc, MB_WS_ALGOS, &got, perf)) == 0)
    collect(perf, got, &out->bwd_data);
  if (ok && rc == 0 &&
      (rc = c->dnn.bwd_filter_algos(c->dnn_handle, xdesc, ydesc, cdesc, wdesc, MB_WS_ALGOS, &got, perf)) == 0)
    collect(perf, got, &out->bwd_filter);
  if (cdesc) c->dnn.destroy_conv(cdesc);
  if (wdesc) c->dnn.destroy_filter(wdesc);
  if (ydesc) c->dnn.destroy_tensor(ydesc);
  if (xdesc) c->dnn.destroy_tensor(xdesc);
  if (rc != 0) {
    snprintf(why, why_size, "cuDNN: %s", c->dnn.error_string(rc));
    return false;
  }
  if (transpose) { /* its forward is the geometry's backward-data, and the other way round */
    mb_ws_list f = out->fwd;
    out->fwd = out->bwd_data;
    out->bwd_data = f;
  }
  return true;
}

/* ---- GEMMs ---- */

static bool lt_type(int32_t dtype, cudaDataType_t *out) {
  switch (dtype) {
    case MB_DTYPE_FLOAT: *out = CUDA_R_32F; return true;
    case MB_DTYPE_FLOAT16: *out = CUDA_R_16F; return true;
    case MB_DTYPE_BFLOAT16: *out = CUDA_R_16BF; return true;
    default: return false;
  }
}

static cublasLtMatrixLayout_t layout(mb_cuda *c, cudaDataType_t type, uint64_t rows, uint64_t cols, uint64_t batch) {
  cublasLtMatrixLayout_t l = NULL;
  if (c->lt.layout_create(&l, type, rows, cols, (int64_t)rows) != CUBLAS_STATUS_SUCCESS) return NULL;
  if (batch > 1) {
    int32_t count = batch > INT32_MAX ? INT32_MAX : (int32_t)batch;
    int64_t stride = (int64_t)(rows * cols);
    c->lt.layout_set(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count);
    c->lt.layout_set(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride);
  }
  return l;
}

/* Column-major D (m x n) = A (m x k) B (k x n), `batch` times: the heuristic's first answer. */
static bool gemm_ws(mb_cuda *c, uint64_t m, uint64_t n, uint64_t k, uint64_t batch, cudaDataType_t type,
                    uint64_t limit, uint64_t *out) {
  if (!m || !n || !k) {
    *out = 0;
    return true;
  }
  cublasLtMatmulDesc_t desc = NULL;
  cublasLtMatmulPreference_t pref = NULL;
  cublasLtMatrixLayout_t a = layout(c, type, m, k, batch), b = layout(c, type, k, n, batch),
                         d = layout(c, type, m, n, batch);
  cublasLtMatmulHeuristicResult_t result;
  int got = 0;
  memset(&result, 0, sizeof result);
  bool ok = a && b && d && c->lt.desc_create(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
            c->lt.pref_create(&pref) == CUBLAS_STATUS_SUCCESS &&
            c->lt.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &limit, sizeof limit) == CUBLAS_STATUS_SUCCESS &&
            c->lt.heuristic(c->lt_handle, desc, a, b, d, d, pref, 1, &result, &got) == CUBLAS_STATUS_SUCCESS && got > 0;
  if (pref) c->lt.pref_destroy(pref);
  if (desc) c->lt.desc_destroy(desc);
  if (d) c->lt.layout_destroy(d);
  if (b) c->lt.layout_destroy(b);
  if (a) c->lt.layout_destroy(a);
  if (ok) *out = result.workspaceSize;
  return ok;
}

static uint64_t numel(const mb_tinfo *x) {
  uint64_t v = 1;
  for (int32_t i = 0; i < x->rank; i++) v *= (uint64_t)x->dims[i];
  return v;
}

bool mb_matmul_workspace(mb_cuda *c, const mb_node *n, const mb_tinfo *t, int32_t dtype, uint64_t limit,
                         bool backward, uint64_t *out) {
  *out = 0;
  cudaDataType_t type;
  if (!c->lt_handle || !lt_type(dtype, &type)) return false;
  const mb_tinfo *a = value(n, t, false, 0), *b = value(n, t, false, 1), *y = value(n, t, true, 0);
  if (!a || !b || !y || a->rank < 1 || b->rank < 1) return false;
  /* row-major Y [rows x cols] = A [rows x inner] B [inner x cols], as column-major
   * Y^T = B^T A^T: m = cols, n = rows, k = inner */
  uint64_t rows, cols, inner, batch = 1;
  if (!strcmp(n->op_type, "Gemm")) {
    if (a->rank != 2 || b->rank != 2) return false;
    const mb_attr *ta_attr = mb_node_attr(n, "transA", MB_ATTR_INT), *tb_attr = mb_node_attr(n, "transB", MB_ATTR_INT);
    bool ta = ta_attr && ta_attr->i, tb = tb_attr && tb_attr->i;
    rows = (uint64_t)a->dims[ta ? 1 : 0];
    inner = (uint64_t)a->dims[ta ? 0 : 1];
    cols = (uint64_t)b->dims[tb ? 0 : 1];
  } else {
    inner = (uint64_t)a->dims[a->rank - 1];
    cols = b->rank == 1 ? 1 : (uint64_t)b->dims[b->rank - 1];
    if (b->rank <= 2) { /* a weight: at::matmul folds A's leading dims into the rows */
      rows = inner ? numel(a) / inner : 0;
    } else {
      rows = a->rank == 1 ? 1 : (uint64_t)a->dims[a->rank - 2];
      batch = rows && cols ? numel(y) / (rows * cols) : 0;
    }
  }
  uint64_t ws = 0, w;
  bool ok = gemm_ws(c, cols, rows, inner, batch, type, limit, &w);
  if (ok) ws = w;
  if (ok && backward) { /* dA = dY B^T (inner x rows), dB = A^T dY (cols x inner) */
    ok = gemm_ws(c, inner, rows, cols, batch, type, limit, &w);
    if (ok && w > ws) ws = w;
    ok = ok && gemm_ws(c, cols, inner, rows, batch, type, limit, &w);
    if (ok && w > ws) ws = w;
  }
  *out = ws;
  return ok;
}
