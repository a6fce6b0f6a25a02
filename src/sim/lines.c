/* Shapes as integer lines in the batch size (sim/lines.h). */
#include "sim/lines.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"

/* One graph's lines: value v has rank[v] dims, c[off[v] + i] + k[off[v] + i] x batch. With one
 * run seen, c holds its dims and k is unset. */
typedef struct graph_lines {
  int32_t n;
  int state;         /* enum mb_lines_state */
  int64_t batch0;    /* the batch of the first run */
  int32_t *rank, *dtype, *off;
  int64_t *c, *k;
  mb_tinfo *t;       /* shapes at the last batch asked for */
  int64_t *dims;
  int64_t t_batch;   /* that batch, -1: none */
  int32_t *used;     /* the values shapes are asked for (NULL: every value) */
  int32_t n_used;
  /* no value has an absurd size at batches up to ok_to, some value has from absurd_from on
   * (sizes never fall as the batch grows) */
  int64_t ok_to, absurd_from;
} graph_lines;

struct mb_lines {
  graph_lines g[3];
  bool broken;
  int32_t fed, assumed; /* runs fed; the default bounds the first took */
};

mb_lines *mb_lines_new(const int32_t n_values[3]) {
  mb_lines *l = calloc(1, sizeof *l);
  if (!l) return NULL;
  for (int g = 0; g < 3; g++) {
    l->g[g].n = n_values[g] > 0 ? n_values[g] : 0;
    l->g[g].t_batch = -1;
    l->g[g].absurd_from = INT64_MAX;
  }
  return l;
}

int mb_lines_use(mb_lines *l, int g, const bool *used) {
  graph_lines *gl = &l->g[g];
  int32_t n = 0;
  for (int32_t v = 0; v < gl->n; v++) n += used[v];
  free(gl->used);
  gl->used = malloc(((size_t)n + 1) * sizeof *gl->used);
  if (!gl->used) return MB_E_NOMEM;
  gl->n_used = 0;
  for (int32_t v = 0; v < gl->n; v++)
    if (used[v]) gl->used[gl->n_used++] = v;
  return MB_OK;
}

static void graph_free(graph_lines *gl) {
  free(gl->rank);
  free(gl->dtype);
  free(gl->off);
  free(gl->c);
  free(gl->k);
  free(gl->t);
  free(gl->dims);
  free(gl->used);
}

void mb_lines_free(mb_lines *l) {
  if (!l) return;
  for (int g = 0; g < 3; g++) graph_free(&l->g[g]);
  free(l);
}

int mb_lines_state(const mb_lines *l) {
  if (l->broken) return MB_LINES_BROKEN;
  int state = MB_LINES_FITTED, seen = 0;
  for (int g = 0; g < 3; g++) {
    if (l->g[g].state == MB_LINES_EMPTY) continue;
    seen++;
    if (l->g[g].state < state) state = l->g[g].state;
  }
  return seen ? state : MB_LINES_EMPTY;
}

int32_t mb_lines_assumed(const mb_lines *l) { return l->assumed; }

/* The first run of a graph: hold its shapes (false: a kind of value lines do not cover). */
static bool record(graph_lines *gl, const mb_tinfo *t, int64_t batch) {
  size_t total = 0;
  for (int32_t v = 0; v < gl->n; v++) {
    if (t[v].seq || t[v].rank > MB_MAX_RANK) return false; /* sequences: not followed */
    if (t[v].rank > 0) total += (size_t)t[v].rank;
  }
  size_t n = (size_t)gl->n + 1;
  gl->rank = malloc(n * sizeof *gl->rank);
  gl->dtype = malloc(n * sizeof *gl->dtype);
  gl->off = malloc(n * sizeof *gl->off);
  gl->c = malloc((total + 1) * sizeof *gl->c);
  gl->k = calloc(total + 1, sizeof *gl->k);
  gl->t = calloc(n, sizeof *gl->t);
  gl->dims = malloc((total + 1) * sizeof *gl->dims);
  if (!gl->rank || !gl->dtype || !gl->off || !gl->c || !gl->k || !gl->t || !gl->dims) return false;
  int32_t at = 0;
  for (int32_t v = 0; v < gl->n; v++) {
    gl->rank[v] = t[v].rank;
    gl->dtype[v] = t[v].dtype;
    gl->off[v] = at;
    for (int32_t i = 0; i < t[v].rank; i++) gl->c[at + i] = t[v].dims[i];
    if (t[v].rank > 0) at += t[v].rank;
  }
  gl->off[gl->n] = at;
  gl->batch0 = batch;
  gl->state = MB_LINES_ONE;
  return true;
}

static bool same_kind(const graph_lines *gl, const mb_tinfo *t, int32_t v) {
  return !t[v].seq && t[v].rank == gl->rank[v] && t[v].dtype == gl->dtype[v];
}

/* The second run at another batch: the line through both points of each dim, in integers,
 * never falling as the batch grows. */
static bool fit(graph_lines *gl, const mb_tinfo *t, int64_t batch) {
  int64_t run = batch - gl->batch0;
  for (int32_t v = 0; v < gl->n; v++) {
    if (!same_kind(gl, t, v)) return false;
    for (int32_t i = 0; i < gl->rank[v]; i++) {
      int32_t j = gl->off[v] + i;
      int64_t rise = t[v].dims[i] - gl->c[j], k, at0;
      if (rise % run || (k = rise / run) < 0 || __builtin_mul_overflow(k, gl->batch0, &at0)) return false;
      gl->k[j] = k;
      gl->c[j] -= at0;
    }
  }
  gl->state = MB_LINES_FITTED;
  return true;
}

/* A later run: every dim where its line puts it (with one run held: the same dims again). */
static bool check(const graph_lines *gl, const mb_tinfo *t, int64_t batch) {
  for (int32_t v = 0; v < gl->n; v++) {
    if (!same_kind(gl, t, v)) return false;
    for (int32_t i = 0; i < gl->rank[v]; i++) {
      int32_t j = gl->off[v] + i;
      int64_t d;
      if (__builtin_mul_overflow(gl->k[j], batch, &d) || __builtin_add_overflow(d, gl->c[j], &d) || d != t[v].dims[i])
        return false;
    }
  }
  return true;
}

void mb_lines_feed(mb_lines *l, const mb_tinfo *const t[3], const int64_t batches[3], int32_t assumed) {
  if (l->broken) return;
  if (!l->fed++) l->assumed = assumed;
  else if (assumed != l->assumed) l->broken = true;
  for (int g = 0; g < 3 && !l->broken; g++) {
    graph_lines *gl = &l->g[g];
    if (!t[g] || !gl->n) continue;
    int64_t b = batches[g];
    bool ok = true;
    switch (gl->state) {
      case MB_LINES_EMPTY: ok = record(gl, t[g], b); break;
      case MB_LINES_ONE:
        ok = b == gl->batch0 ? check(gl, t[g], b) : fit(gl, t[g], b);
        break;
      default: ok = check(gl, t[g], b); break;
    }
    if (!ok) l->broken = true;
  }
}

/* Value v's dims at batch (false: a dim would overflow or be negative). */
static bool dims_at(const graph_lines *gl, int32_t v, int64_t batch, int64_t *dims) {
  for (int32_t i = 0; i < gl->rank[v]; i++) {
    int32_t j = gl->off[v] + i;
    if (__builtin_mul_overflow(gl->k[j], batch, &dims[i]) || __builtin_add_overflow(dims[i], gl->c[j], &dims[i]) ||
        dims[i] < 0)
      return false;
  }
  return true;
}

/* The bound inference's set_tinfo puts on every output: is any value of absurd size? */
static bool absurd_at(const graph_lines *gl, int64_t batch) {
  int64_t dims[MB_MAX_RANK];
  for (int32_t v = 0; v < gl->n; v++) {
    if (!dims_at(gl, v, batch, dims)) return true;
    uint64_t numel = 1;
    for (int32_t i = 0; i < gl->rank[v]; i++) {
      if (dims[i] && numel > (MB_MAX_TENSOR_BYTES / 16) / (uint64_t)dims[i]) return true;
      numel *= (uint64_t)dims[i];
    }
  }
  return false;
}

int mb_lines_at(mb_lines *l, int g, int64_t batch, const mb_tinfo **out, char *msg, size_t msg_len) {
  graph_lines *gl = &l->g[g];
  *out = NULL;
  if (l->broken || !(gl->state == MB_LINES_FITTED || (gl->state == MB_LINES_ONE && batch == gl->batch0)))
    return MB_E_INVALID_ARG;
  if (gl->t_batch == batch) {
    *out = gl->t;
    return MB_OK;
  }
  if (batch > gl->ok_to && batch < gl->absurd_from) {
    if (absurd_at(gl, batch)) gl->absurd_from = batch;
    else gl->ok_to = batch;
  }
  if (batch >= gl->absurd_from) {
    snprintf(msg, msg_len, "at batch %lld some tensor would have an absurd size", (long long)batch);
    return MB_E_LIMIT;
  }
  gl->t_batch = -1;
  int32_t n = gl->used ? gl->n_used : gl->n;
  for (int32_t u = 0; u < n; u++) {
    int32_t v = gl->used ? gl->used[u] : u;
    mb_tinfo *x = &gl->t[v];
    x->rank = gl->rank[v];
    x->dtype = gl->dtype[v];
    x->dims = gl->dims + gl->off[v];
    if (!dims_at(gl, v, batch, x->dims)) return MB_E_INVALID_ARG; /* checked above: cannot happen */
  }
  gl->t_batch = batch;
  *out = gl->t;
  return MB_OK;
}
