/* The replay. Events are taken in the plan's order; a storage's allocation takes a pool block
 * and its free returns it. The library workspaces are inserted where PyTorch allocates them:
 * after the last allocation a convolution makes (its output in forward, its input and weight
 * gradients in backward), a transient block of the workspace cuDNN's heuristics ask for, freed
 * at once. PyTorch takes the first algorithm whose workspace it can allocate, so a workspace
 * the device cannot hold falls back to the next algorithm's. GEMMs are served by the
 * persistent cuBLAS workspaces the plan already allocates (PyTorch shares them with cuBLASLt):
 * the heuristic is asked and its answer recorded, nothing more is allocated. */
#include "budget/measured_replay.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "budget/estimate.h"
#include "budget/step.h"
#include "cuda/pool.h"
#include "cuda/workspace.h"
#include "shape/infer.h"

enum {
  WS_CONV_FWD = 1,     /* a convolution's forward (or a transposed one's) */
  WS_CONV_DATA = 2,    /* backward: the input's gradient is computed */
  WS_CONV_FILTER = 4,  /* backward: the weight's */
  WS_MM_FWD = 8,
  WS_MM_BWD = 16
};

static bool is_op(const mb_node *n, const char *op) { return !n->domain[0] && !strcmp(n->op_type, op); }

/* The GEMM node whose work runs at node n: itself, or the MatMul a fused Linear's bias Add
 * ends (the plan runs a fused pattern at its last node). */
static const mb_node *gemm_node(const mb_graph *g, const mb_node *n) {
  if (is_op(n, "MatMul") || is_op(n, "Gemm")) return n;
  if (!is_op(n, "Add")) return NULL;
  for (int32_t i = 0; i < n->n_inputs; i++) {
    int32_t v = n->inputs[i];
    int32_t p = v >= 0 ? g->values[v].producer : -1;
    if (p >= 0 && is_op(&g->nodes[p], "MatMul")) return &g->nodes[p];
  }
  return NULL;
}

/* Mark, for each (model, node, phase), the last allocation of its first run of events with the
 * workspace it needs there, and the dtype the op computes in (its first allocation's). */
static int plan_workspaces(const mb_plan *p, uint8_t *flags, int32_t *dtype, mb_diag *d) {
  const mb_model *models[2] = {p->model, p->teacher};
  uint8_t *seen[2] = {NULL, NULL};
  for (int k = 0; k < 2 && models[k]; k++) {
    seen[k] = calloc((size_t)models[k]->graph->n_nodes + 1, 1);
    if (!seen[k]) {
      free(seen[0]);
      return mb_fail(d, MB_E_NOMEM, "out of memory");
    }
  }
  for (int32_t i = 0; i < p->n_ev;) {
    const mb_event_rec *e = &p->ev[i];
    int32_t end = i + 1;
    while (end < p->n_ev && p->ev[end].node == e->node && p->ev[end].model == e->model && p->ev[end].phase == e->phase)
      end++;
    if (e->node >= 0 && !(seen[e->model][e->node] & (1u << e->phase))) {
      seen[e->model][e->node] |= (uint8_t)(1u << e->phase);
      const mb_graph *g = models[e->model]->graph;
      const mb_node *n = &g->nodes[e->node];
      bool conv = is_op(n, "Conv") || is_op(n, "ConvTranspose"), mm = gemm_node(g, n) != NULL;
      bool backward = e->phase == MB_PHASE_BACKWARD;
      int32_t last = -1, first = -1;
      uint8_t f = 0;
      for (int32_t j = i; j < end; j++) {
        if (!p->ev[j].alloc) continue;
        if (first < 0) first = j;
        last = j;
        int cat = p->slots[p->ev[j].slot].category;
        if (cat == MB_CAT_ACT_GRAD) f |= WS_CONV_DATA;
        if (cat == MB_CAT_GRADIENT || cat == MB_CAT_TEMPORARY) f |= WS_CONV_FILTER;
      }
      if (last >= 0 && (conv || mm)) {
        if (conv) flags[last] = backward ? (uint8_t)(f & (WS_CONV_DATA | WS_CONV_FILTER)) : WS_CONV_FWD;
        else flags[last] = backward ? WS_MM_BWD : WS_MM_FWD;
        int32_t t = p->slots[p->ev[first].slot].dtype;
        dtype[last] = t ? t : MB_DTYPE_FLOAT;
      }
    }
    i = end;
  }
  free(seen[0]);
  free(seen[1]);
  return MB_OK;
}

/* A transient workspace: the first algorithm's that the device can hold (0 needs none). */
static int transient(mb_pool *pool, const mb_ws_list *l, mb_replay *out, bool *oom, mb_diag *d) {
  *oom = false;
  for (int i = 0; i < l->n; i++) {
    if (!l->bytes[i]) { /* this algorithm needs none */
      *oom = false;
      return MB_OK;
    }
    int32_t b;
    if (mb_pool_alloc(pool, l->bytes[i], &b, oom, d) != MB_OK) return d->status;
    if (*oom) continue;
    if (l->bytes[i] > out->conv_workspace) out->conv_workspace = l->bytes[i];
    mb_pool_free(pool, b);
    return MB_OK;
  }
  return MB_OK; /* *oom stays set when no algorithm's workspace fits */
}

typedef struct replay_ctx {
  mb_cuda *c;
  const mb_plan *p;
  const mb_tinfo *t[3];    /* the model and the teacher at the batch; the model at the evaluation's */
  uint64_t limit;          /* the cuBLAS workspace size: cuBLASLt may use up to it */
  mb_conv_ws *conv;        /* per node of the model, the teacher and the model's evaluation:
                            * queried once */
  uint8_t *conv_state;     /* 0 not asked, 1 asked, 2 cannot be asked */
  int32_t n_nodes0;        /* where the teacher's nodes start in conv */
  int32_t n_eval0;         /* where the evaluation's start */
} replay_ctx;

static int workspace(replay_ctx *x, mb_pool *pool, const mb_event_rec *e, uint8_t flags, int32_t dtype,
                     mb_replay *out, bool *oom, mb_diag *d) {
  *oom = false;
  const mb_model *m = e->model ? x->p->teacher : x->p->model;
  const mb_graph *g = m->graph;
  const mb_node *n = &g->nodes[e->node];
  bool in_eval = e->phase == MB_PHASE_EVAL; /* the model at the evaluation's batch */
  const mb_tinfo *t = in_eval ? x->t[2] : x->t[e->model];
  if (flags & (WS_MM_FWD | WS_MM_BWD)) {
    uint64_t ws = 0;
    if (mb_matmul_workspace(x->c, gemm_node(g, n), t, dtype, x->limit, flags & WS_MM_BWD, &ws)) {
      out->matmuls++;
      if (ws > out->matmul_workspace) out->matmul_workspace = ws;
    }
    return MB_OK;
  }
  int32_t k = (in_eval ? x->n_eval0 : e->model ? x->n_nodes0 : 0) + e->node;
  if (!x->conv_state[k]) {
    char why[256];
    x->conv_state[k] = mb_conv_workspaces(x->c, n, t, dtype, &x->conv[k], why, sizeof why) ? 1 : 2;
    if (x->conv_state[k] == 1) out->convs++;
  }
  if (x->conv_state[k] != 1) return MB_OK;
  const mb_conv_ws *ws = &x->conv[k];
  if ((flags & WS_CONV_FWD) && transient(pool, &ws->fwd, out, oom, d) != MB_OK) return d->status;
  if (!*oom && (flags & WS_CONV_DATA) && transient(pool, &ws->bwd_data, out, oom, d) != MB_OK) return d->status;
  if (!*oom && (flags & WS_CONV_FILTER) && transient(pool, &ws->bwd_filter, out, oom, d) != MB_OK) return d->status;
  return MB_OK;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int mb_replay_step(mb_cuda *c, const mb_plan *p, const mb_setup *s, int64_t batch, mb_replay *out, mb_diag *d) {
  double start = now();
  mb_run r;
  size_t n_ev = (size_t)p->n_ev + 1;
  uint64_t *bytes = malloc(n_ev * sizeof *bytes);
  uint8_t *flags = calloc(n_ev, 1);
  int32_t *dtype = calloc(n_ev, sizeof *dtype);
  int32_t *block = malloc(((size_t)p->n_slots + 1) * sizeof *block);
  int32_t n0 = p->model->graph->n_nodes, n1 = p->teacher ? p->teacher->graph->n_nodes : 0, n2 = p->eval_batch ? n0 : 0;
  replay_ctx x = {c, p, {NULL, NULL, NULL}, mb_train_workspace(&s->train),
                  calloc((size_t)(n0 + n1 + n2) + 1, sizeof(mb_conv_ws)), calloc((size_t)(n0 + n1 + n2) + 1, 1), n0,
                  n0 + n1};
  mb_shapes *sh[3] = {NULL, NULL, NULL};
  mb_pool pool;
  size_t free_start = 0, total = 0;
  mb_pool_init(&pool, c, 0);
  if (!bytes || !flags || !dtype || !block || !x.conv || !x.conv_state) {
    mb_fail(d, MB_E_NOMEM, "out of memory");
    goto done;
  }
  if (mb_setup_plan_run(p, s, batch, &r, bytes, NULL, d) != MB_OK || plan_workspaces(p, flags, dtype, d) != MB_OK)
    goto done;
  int64_t eval_batch = p->eval_batch < 0 ? batch : p->eval_batch;
  const mb_model *models[3] = {p->model, p->teacher, p->eval_batch && eval_batch != batch ? p->model : NULL};
  const int64_t batches[3] = {batch, batch, eval_batch};
  mb_shape_inputs in;
  mb_setup_shape_inputs(s, &in);
  for (int k = 0; k < 3; k++) {
    if (!models[k]) continue;
    if (mb_shapes_run(models[k], &in, batches[k], &sh[k]) != MB_OK) {
      mb_fail(d, mb_shapes_status(sh[k]), "at batch %lld: %s", (long long)batches[k], mb_shapes_errmsg(sh[k]));
      goto done;
    }
    x.t[k] = mb_shapes_tinfo(sh[k]);
  }
  if (!x.t[2]) x.t[2] = x.t[0];
  for (int32_t i = 0; i < p->n_slots; i++) block[i] = -1;
  cudaError_t e = c->rt.mem_get_info(&free_start, &total);
  if (e != cudaSuccess) {
    char buf[256];
    mb_fail(d, MB_E_NO_CUDA, "cudaMemGetInfo failed: %s", mb_cuda_strerror(c, e, buf, sizeof buf));
    goto done;
  }
  mb_pool_init(&pool, c, free_start);
  out->fits = 1;
  bool forward_done = false;
  for (int32_t i = 0; i < p->n_ev && out->fits; i++) {
    const mb_event_rec *ev = &p->ev[i];
    if (!forward_done && ev->phase > MB_PHASE_LOSS) {
      out->forward_device_bytes = free_start - pool.min_free;
      forward_done = true;
    }
    bool oom = false;
    bool modelled_ws = p->slots[ev->slot].rule == MB_SZ_CONV_WS; /* the device's heuristic asks below */
    if (ev->alloc && !modelled_ws) {
      if (bytes[i] && block[ev->slot] < 0 && mb_pool_alloc(&pool, bytes[i], &block[ev->slot], &oom, d) != MB_OK)
        goto done;
    } else if (!modelled_ws) {
      mb_pool_free(&pool, block[ev->slot]);
      block[ev->slot] = -1;
    }
    if (!oom && flags[i] && workspace(&x, &pool, ev, flags[i], dtype[i], out, &oom, d) != MB_OK) goto done;
    if (oom) out->fits = 0;
  }
  if (!forward_done) out->forward_device_bytes = free_start - pool.min_free;
  out->allocated_peak = pool.peak_allocated;
  out->reserved_peak = pool.peak_reserved;
  out->device_bytes = free_start - pool.min_free;
  out->segments = pool.mallocs;
done:
  mb_pool_destroy(&pool); /* every segment back to the device, error or not */
  cudaError_t sync = c->rt.synchronize();
  if (sync != cudaSuccess && d->status == MB_OK) {
    char buf[256];
    mb_fail(d, MB_E_NO_CUDA, "the device reported an error during the replay: %s",
            mb_cuda_strerror(c, sync, buf, sizeof buf));
  }
  for (int k = 0; k < 3; k++) mb_shapes_free(sh[k]);
  free(bytes);
  free(flags);
  free(dtype);
  free(block);
  free(x.conv);
  free(x.conv_state);
  out->batch = batch;
  out->seconds = now() - start;
  return d->status;
}
