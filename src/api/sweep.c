/* Sweeps (mb_sweep_*): budgets at several values of the batch size or of one named dim, each
 * the budget mb_estimate gives at that value.
 *
 * A batch sweep runs every value on one plan: the plan the batch-size solve uses, built with no
 * batch size in the setup (shapes at batch 2, sim/plan.c), which is also the plan an estimate
 * at a given batch size >= 2 builds; batch 1 gets the plan an estimate at batch 1 builds (a
 * dynamo graph is planned at batch 1 there), made only when 1 is swept.
 *
 * A dim sweep plans each value once: a plan's structure depends on the dims' values, not only
 * its sizes (a tensor small enough at one sequence length is held as a host value, another is a
 * device tensor: an arange of 64 elements vs 128; sizes that coincide make expands and reshapes
 * views), so runs at one value on a plan built at another could differ from the estimate there.
 * Each value's plan is then reused for the batch-size solve at that value (about twenty runs). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/sweep.h"
#include "budget/estimate.h"
#include "budget/setup.h"
#include "budget/step.h"
#include "graph/graph.h"
#include "sim/plan.h"
#include "util/strbuf.h"
#include "util/versioned.h"

#define MB_SWEEP_MAX_POINTS 65536

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* Is name a symbolic dim of the model's (or teacher's) inputs, or a tensor a dim value can
 * bound (a data-dependent size)? */
static bool names_a_dim(const mb_model *m, const char *name) {
  if (!m || !m->graph) return false;
  const mb_graph *g = m->graph;
  for (int32_t i = 0; i < g->n_inputs; i++) {
    const mb_value *v = &g->values[g->inputs[i]];
    for (int32_t a = 0; a < v->type.rank; a++)
      if (v->type.dim_params[a] && !strcmp(v->type.dim_params[a], name)) return true;
  }
  for (int32_t k = 0; k < g->n_values; k++)
    if (g->values[k].name && !strcmp(g->values[k].name, name)) return true;
  return false;
}

/* Put "what: " before the failure's message (mb_fail keeps the first message only). */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void prefix_msg(mb_diag *d, const char *fmt, ...) {
  char what[128];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  size_t w = strlen(what), n = strlen(d->msg), cap = sizeof d->msg - 1;
  if (w + 2 >= cap) return;
  if (n > cap - w - 2) n = cap - w - 2;
  memmove(d->msg + w + 2, d->msg, n);
  memcpy(d->msg, what, w);
  d->msg[w] = ':';
  d->msg[w + 1] = ' ';
  d->msg[w + 2 + n] = '\0';
}

/* The budget at batch size b on plan p (the setup's batch set for the call, as mb_estimate
 * with that batch size would have it). */
static int budget_at_batch(const mb_plan *p, mb_setup *s, int64_t b, mb_budget *out, mb_diag *d) {
  int64_t saved = s->batch;
  s->batch = b;
  int rc = mb_estimate_plan(p, s, out, d);
  s->batch = saved;
  return rc;
}

static int batch_sweep(const mb_model *m, mb_setup *s, mb_sweep *w, int add_solved, mb_diag *d) {
  int64_t saved = s->batch;
  mb_plan *p = NULL, *p1 = NULL;
  s->batch = -1; /* the solve's plan */
  mb_setup_plan_build(m, s, &p, d);
  s->batch = saved;
  for (size_t i = 0; i < w->n && d->status == MB_OK; i++) {
    const mb_plan *use = p;
    if (w->values[i] == 1) { /* planned as an estimate at batch 1 plans it */
      s->batch = 1;
      if (!p1) mb_setup_plan_build(m, s, &p1, d);
      s->batch = saved;
      use = p1;
    }
    if (d->status == MB_OK && budget_at_batch(use, s, w->values[i], &w->budgets[i], d) != MB_OK)
      prefix_msg(d, "at batch %lld", (long long)w->values[i]);
  }
  if (d->status == MB_OK && add_solved && s->train.device_memory) {
    mb_budget solved;
    s->batch = -1;
    mb_estimate_plan(p, s, &solved, d);
    s->batch = saved;
    if (d->status == MB_OK) {
      w->solved = solved.batch_size;
      size_t at = 0;
      while (at < w->n && w->values[at] < solved.batch_size) at++;
      if (at == w->n || w->values[at] != solved.batch_size) { /* a point of its own */
        memmove(&w->values[at + 1], &w->values[at], (w->n - at) * sizeof *w->values);
        memmove(&w->budgets[at + 1], &w->budgets[at], (w->n - at) * sizeof *w->budgets);
        w->n++;
      }
      w->values[at] = solved.batch_size;
      w->budgets[at] = solved;
    }
  }
  mb_plan_free(p);
  mb_plan_free(p1);
  return d->status;
}

static int dim_sweep(const mb_model *m, mb_setup *s, mb_sweep *w, mb_diag *d) {
  /* the setup's own value of the dim, if it has one, comes back afterwards */
  size_t had = s->n_dims, before = s->n_dims;
  int64_t old = 0;
  for (size_t k = 0; k < s->n_dims; k++)
    if (!strcmp(s->dim_names[k], w->dim)) {
      had = k;
      old = s->dim_values[k];
    }
  for (size_t i = 0; i < w->n && d->status == MB_OK; i++) {
    int st = mb_setup_set_dim(s, w->dim, w->values[i]);
    if (st != MB_OK) {
      mb_fail(d, st, "%s", st == MB_E_NOMEM ? "out of memory" : s->errmsg);
      break;
    }
    mb_plan *p = NULL;
    if (mb_setup_plan_build(m, s, &p, d) == MB_OK) mb_estimate_plan(p, s, &w->budgets[i], d);
    mb_plan_free(p);
    if (d->status != MB_OK) prefix_msg(d, "at %.64s=%lld", w->dim, (long long)w->values[i]);
    else if (w->budgets[i].solved) w->solved = -1; /* each point has its own solved batch */
  }
  if (had < before) {
    s->dim_values[had] = old;
  } else if (s->n_dims > before) { /* added by the sweep: the last entry */
    free(s->dim_names[--s->n_dims]);
  }
  return d->status;
}


MB_API int mb_sweep_create(const mb_model *m, mb_setup *s, const char *dim, const int64_t *values, size_t n,
                           int add_solved, mb_sweep **out) {
  if (!s || !out) return MB_E_INVALID_ARG;
  *out = NULL;
  s->errmsg[0] = '\0';
  if (!m || !m->graph || (!values && n)) {
    snprintf(s->errmsg, sizeof s->errmsg, "mb_sweep_create: a model and the values to sweep are required");
    return MB_E_INVALID_ARG;
  }
  bool over_dim = dim && *dim;
  if (!n && !(add_solved && !over_dim)) {
    snprintf(s->errmsg, sizeof s->errmsg, "mb_sweep_create: no values to sweep");
    return MB_E_INVALID_ARG;
  }
  for (size_t i = 0; i < n; i++)
    if (values[i] < 1) {
      snprintf(s->errmsg, sizeof s->errmsg, "mb_sweep_create: a swept value must be at least 1, not %lld",
               (long long)values[i]);
      return MB_E_INVALID_ARG;
    }
  if (over_dim && !names_a_dim(m, dim) && !names_a_dim(s->train.teacher, dim)) {
    snprintf(s->errmsg, sizeof s->errmsg,
             "sweep: '%s' is no symbolic dim of the graph inputs (nor a tensor whose size --dim bounds)", dim);
    return MB_E_INVALID_ARG;
  }
  if (n > SIZE_MAX / sizeof(mb_budget) - 2) return MB_E_NOMEM;
  mb_sweep *w = calloc(1, sizeof *w);
  if (!w) return MB_E_NOMEM;
  w->values = malloc((n + 1) * sizeof *w->values);
  w->budgets = calloc(n + 1, sizeof *w->budgets);
  w->dim = over_dim ? malloc(strlen(dim) + 1) : NULL;
  if (!w->values || !w->budgets || (over_dim && !w->dim)) {
    mb_sweep_free(w);
    return MB_E_NOMEM;
  }
  if (over_dim) strcpy(w->dim, dim);
  if (n) memcpy(w->values, values, n * sizeof *values);
  qsort(w->values, n, sizeof *w->values, cmp_i64);
  for (size_t i = 0; i < n; i++) /* unique */
    if (!w->n || w->values[w->n - 1] != w->values[i]) w->values[w->n++] = w->values[i];
  w->solved = 0;
  mb_diag d;
  mb_diag_init(&d);
  if (over_dim) dim_sweep(m, s, w, &d);
  else batch_sweep(m, s, w, add_solved, &d);
  if (d.status == MB_OK && !w->n)
    mb_fail(&d, MB_E_INVALID_ARG, "sweep: no values to sweep, and no device memory to solve the batch size for");
  if (d.status != MB_OK) {
    snprintf(s->errmsg, sizeof s->errmsg, "%s", d.msg);
    mb_sweep_free(w);
    return d.status;
  }
  w->device_memory = s->train.device_memory;
  w->usable_memory = w->n ? w->budgets[0].usable_memory : 0;
  snprintf(w->unit, sizeof w->unit, "%s", mb_setup_batch_unit(s));
  *out = w;
  return MB_OK;
}

MB_API void mb_sweep_free(mb_sweep *w) {
  if (!w) return;
  free(w->values);
  free(w->budgets);
  free(w->dim);
  free(w);
}

MB_API size_t mb_sweep_num_points(const mb_sweep *w) { return w ? w->n : 0; }

MB_API const char *mb_sweep_dim(const mb_sweep *w) { return w ? w->dim : NULL; }

MB_API int64_t mb_sweep_solved_batch(const mb_sweep *w) { return w && w->solved > 0 ? w->solved : 0; }

MB_API int mb_sweep_point(const mb_sweep *w, size_t i, int64_t *value, mb_budget *out) {
  if (!w || !out) return MB_E_INVALID_ARG;
  if (i >= w->n) return MB_E_RANGE;
  if (value) *value = w->values[i];
  return mb_fill_versioned(out, &w->budgets[i], sizeof w->budgets[i], offsetof(mb_budget, at_peak))
           ? MB_E_INVALID_ARG : MB_OK;
}

MB_API size_t mb_sweep_values(int64_t lo, int64_t hi, int points, int64_t *values, size_t cap) {
  if (lo < 1 || hi < lo || points < 0 || points == 1 || points > MB_SWEEP_MAX_POINTS) return 0;
  size_t n = 0;
#define PUT(v)                                        \
  do {                                                \
    int64_t v_ = (v);                                 \
    if (!n || values_last != v_) {                    \
      if (n < cap && values) values[n] = v_;          \
      values_last = v_;                               \
      n++;                                            \
    }                                                 \
  } while (0)
  int64_t values_last = 0;
  if (points == 0) { /* powers of two within the range, and both ends */
    PUT(lo);
    for (int64_t p = 1;; p *= 2) {
      if (p > lo && p < hi) PUT(p);
      if (p > hi / 2) break; /* the next would pass hi (or overflow) */
    }
    PUT(hi);
  } else { /* spread evenly on a log scale */
    double ratio = (double)hi / (double)lo;
    for (int k = 0; k < points; k++) {
      double v = (double)lo * pow(ratio, (double)k / (double)(points - 1));
      int64_t r = k == points - 1 ? hi : (int64_t)(v + 0.5);
      if (r < lo) r = lo;
      if (r > hi) r = hi;
      PUT(r);
    }
  }
#undef PUT
  return n;
}

static void u64_field(mb_strbuf *sb, const char *key, uint64_t v) {
  mb_sb_printf(sb, ", \"%s\": ", key);
  mb_sb_json_u64(sb, v);
}

MB_API int mb_sweep_json(const mb_sweep *w, char **out) {
  if (!w || !out) return MB_E_INVALID_ARG;
  *out = NULL;
  mb_strbuf sb;
  mb_sb_init(&sb);
  mb_sb_puts(&sb, "{\n  \"schema_version\": 1,\n  \"sweep\": ");
  mb_sb_json_str(&sb, w->dim ? "dim" : "batch");
  mb_sb_puts(&sb, ",\n  \"dim\": ");
  if (w->dim) mb_sb_json_str(&sb, w->dim);
  else mb_sb_puts(&sb, "null");
  mb_sb_puts(&sb, ",\n  \"batch_unit\": ");
  mb_sb_json_str(&sb, w->unit);
  mb_sb_puts(&sb, ",\n  \"device_memory\": ");
  mb_sb_json_u64(&sb, w->device_memory);
  mb_sb_puts(&sb, ",\n  \"usable_memory\": ");
  mb_sb_json_u64(&sb, w->usable_memory);
  mb_sb_puts(&sb, ",\n  \"solved_batch\": ");
  if (w->solved > 0) mb_sb_printf(&sb, "%lld", (long long)w->solved);
  else mb_sb_puts(&sb, "null");
  mb_sb_puts(&sb, ",\n  \"points\": [");
  for (size_t i = 0; i < w->n; i++) {
    const mb_budget *b = &w->budgets[i];
    mb_sb_printf(&sb, "%s\n    {\"value\": %lld, \"batch_size\": %lld, \"solved\": %s, \"fits\": %s, \"peak_phase\": \"%s\"",
                 i ? "," : "", (long long)w->values[i], (long long)b->batch_size, b->solved ? "true" : "false",
                 b->fits < 0 ? "null" : b->fits ? "true" : "false", mb_phase_name(b->peak_phase));
    u64_field(&sb, "allocated_peak", b->allocated_peak);
    u64_field(&sb, "reserved_peak", b->reserved_peak);
    u64_field(&sb, "device_peak", b->device_peak);
    mb_sb_printf(&sb, ", \"available\": %lld", (long long)b->available);
    u64_field(&sb, "static", b->static_bytes);
    u64_field(&sb, "activations", b->activations);
    u64_field(&sb, "forward_peak", b->forward_peak);
    u64_field(&sb, "backward_peak", b->backward_peak);
    u64_field(&sb, "optimizer_peak", b->optimizer_peak);
    u64_field(&sb, "level_after_setup", b->level_after_setup);
    u64_field(&sb, "level_after_forward", b->level_after_forward);
    u64_field(&sb, "level_after_backward", b->level_after_backward);
    u64_field(&sb, "level_after_optimizer", b->level_after_optimizer);
    u64_field(&sb, "dynamic_per_sample", b->dynamic_per_sample);
    mb_sb_printf(&sb, ", \"allocator_ooms\": %d}", (int)b->allocator_ooms);
  }
  mb_sb_puts(&sb, w->n ? "\n  ]\n}\n" : "]\n}\n");
  *out = mb_sb_detach(&sb);
  return *out ? MB_OK : MB_E_NOMEM;
}
