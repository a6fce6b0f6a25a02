/* mb_alloc_diff_*: a recorded step's requests (alloc/snapshot_stream.c) lined up with the
 * simulated step's, at the same batch, to show where reality and the estimate part.
 *
 * The simulated requests are the plan's allocations after setup, in order, at the bytes the
 * run gives them (zero-byte tensors skipped, as PyTorch's allocate(0) never reaches the
 * allocator); what a steady-state step does not allocate again (optimizer states, master
 * weights, EMA, cuBLAS workspaces: never freed, made by the first step) is left out, and so are the cuDNN
 * workspaces the reserved model adds (docs/allocator.md). Each phase (forward with the loss,
 * backward, the optimizer step) is lined up on its own: walking the recorded requests in order,
 * each takes the nearest unmatched simulated request of the same size within WINDOW of where
 * the last match left off, one that lives alike first (freed within SHORT requests or not),
 * then of the same size after the allocator's 512-byte rounding.
 * What is left pairs up as "sizes differ" where a recorded and a simulated request stand
 * within NEAR of each other; the rest is missing from the estimate or extra in it. A matched
 * pair's lifetime is counted in matched requests made while it lives, on each side. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/snapshot_stream.h"
#include "budget/setup.h"
#include "budget/step.h"
#include "graph/graph.h"
#include "sim/plan.h"
#include "util/arena.h"
#include "util/datum.h"
#include "util/format.h"
#include "util/strbuf.h"

#define DIFF_SCHEMA_VERSION 1
#define WINDOW 64
#define NEAR 4
#define SHORT 16
#define MAX_GROUPS 256
#define TEXT_GROUPS 12
#define TEXT_PARTINGS 30

struct mb_alloc_diff {
  char *text, *json;
  char errmsg[1024];
};

typedef struct sim_req {
  uint64_t size, free_at;
  int phase;            /* enum mb_snap_phase */
  const char *op, *module; /* the node's op and module, or the slot's category and name */
} sim_req;

typedef struct side {
  size_t n;
  int64_t *partner;     /* the other side's request it matched, -1 none */
  int8_t *kind;         /* enum part */
  size_t *expected;     /* recorded side: the simulated position the walk had reached */
  uint64_t *matched_before; /* matched requests among the first i (n + 1 entries) */
} side;

enum part { P_NONE, P_MATCHED, P_SIZE, P_MISSING, P_EXTRA };

typedef struct group {
  const char *op, *module;
  size_t op_n, module_n;
  int phase;
  uint64_t bytes, count;
} group;

typedef struct groups {
  group g[MAX_GROUPS + 1]; /* the last one: everything past MAX_GROUPS */
  int n;
} groups;

typedef struct differ {
  mb_snap_stream rec;
  sim_req *sim;
  size_t n_sim;
  side r, s;
  uint64_t sim_peak;
  uint64_t counts[5], bytes[5];   /* per enum part: recorded side's (P_EXTRA: the estimate's) */
  uint64_t life_longer_rec, life_longer_sim, life_bytes_rec, life_bytes_sim;
  int64_t batch;
  mb_arena names;      /* the simulated requests' labels */
} differ;

static int sim_phase(int phase) {
  switch (phase) {
  case MB_PHASE_BACKWARD: return MB_SNAP_BACKWARD;
  case MB_PHASE_OPTIMIZER: return MB_SNAP_OPTIMIZER;
  default: return MB_SNAP_FORWARD;
  }
}

static bool made_once(int category) {
  switch (category) {
  case MB_CAT_PARAMETER: case MB_CAT_EMBEDDING: case MB_CAT_BUFFER: case MB_CAT_OPTIMIZER: case MB_CAT_MASTER:
  case MB_CAT_EMA: case MB_CAT_TEACHER: case MB_CAT_WORKSPACE: return true;
  default: return false;
  }
}

/* The simulated step's requests at the setup's batch. */
static int simulate(differ *x, const mb_model *m, mb_setup *s, mb_diag *d) {
  mb_plan *p = NULL;
  uint64_t *bytes = NULL, *live = NULL;
  int64_t *req_of = NULL;
  mb_run run;
  if (mb_setup_plan_build(m, s, &p, d) != MB_OK) return d->status;
  size_t n = (size_t)p->n_ev + 1;
  bytes = malloc(n * sizeof *bytes);
  live = malloc(n * sizeof *live);
  req_of = malloc(((size_t)p->n_slots + 1) * sizeof *req_of);
  x->sim = malloc(n * sizeof *x->sim);
  if (!bytes || !live || !req_of || !x->sim) mb_fail(d, MB_E_NOMEM, "out of memory");
  else mb_setup_plan_run(p, s, x->batch, &run, bytes, live, d);
  for (int32_t i = 0; i < p->n_slots && d->status == MB_OK; i++) req_of[i] = -1;
  bool *freed = d->status == MB_OK ? calloc((size_t)p->n_slots + 1, sizeof *freed) : NULL;
  if (d->status == MB_OK && !freed) mb_fail(d, MB_E_NOMEM, "out of memory");
  for (int32_t i = 0; i < p->n_ev && d->status == MB_OK; i++)
    if (!p->ev[i].alloc && p->ev[i].phase != MB_PHASE_SETUP) freed[p->ev[i].slot] = true;
  uint64_t level = 0;
  for (int32_t i = 0; i < p->n_ev && d->status == MB_OK; i++) {
    const mb_event_rec *e = &p->ev[i];
    const mb_slot *sl = &p->slots[e->slot];
    if (e->phase == MB_PHASE_SETUP || e->phase == MB_PHASE_EVAL || !bytes[i]) continue;
    if (!e->alloc) {
      int64_t q = req_of[e->slot];
      if (q >= 0) {
        x->sim[q].free_at = x->n_sim;
        level -= x->sim[q].size;
        req_of[e->slot] = -1;
      }
      continue;
    }
    if (made_once(sl->category) && !freed[e->slot]) continue; /* the first step's: never freed */
    const mb_model *owner = e->model ? p->teacher : p->model;
    const mb_node *node = e->node >= 0 && owner ? &owner->graph->nodes[e->node] : NULL;
    const char *module = node && node->origin.module && *node->origin.module ? node->origin.module : sl->name;
    x->sim[x->n_sim] = (sim_req){bytes[i], MB_SNAP_NOT_FREED, sim_phase(e->phase),
                                 node && node->op_type ? node->op_type : mb_category_name(sl->category),
                                 module ? module : "?"};
    req_of[e->slot] = (int64_t)x->n_sim++;
    level += bytes[i];
    if (level > x->sim_peak) x->sim_peak = level;
  }
  free(bytes);
  free(live);
  free(req_of);
  free(freed);
  /* the labels point into the model and the plan's slot names: copied, as the plan goes */
  for (size_t i = 0; i < x->n_sim && d->status == MB_OK; i++) {
    sim_req *q = &x->sim[i];
    q->op = mb_arena_strdup(&x->names, q->op);
    q->module = mb_arena_strdup(&x->names, q->module);
    if (!q->op || !q->module) mb_fail(d, MB_E_NOMEM, "out of memory");
  }
  mb_plan_free(p);
  return d->status;
}

static bool side_init(side *sd, size_t n) {
  sd->n = n;
  sd->partner = malloc((n + 1) * sizeof *sd->partner);
  sd->kind = calloc(n + 1, sizeof *sd->kind);
  sd->expected = calloc(n + 1, sizeof *sd->expected);
  sd->matched_before = calloc(n + 2, sizeof *sd->matched_before);
  if (!sd->partner || !sd->kind || !sd->expected || !sd->matched_before) return false;
  for (size_t i = 0; i <= n; i++) sd->partner[i] = -1;
  return true;
}

static void side_free(side *sd) {
  free(sd->partner);
  free(sd->kind);
  free(sd->expected);
  free(sd->matched_before);
}

static uint64_t round512(uint64_t v) { return v > UINT64_MAX - 511 ? v : (v + 511) / 512 * 512; }

/* indices of a phase's requests on one side */
static size_t *phase_list(differ *x, bool recorded, int phase, size_t *n) {
  size_t total = recorded ? x->rec.n : x->n_sim, k = 0;
  size_t *out = malloc((total + 1) * sizeof *out);
  if (!out) return NULL;
  for (size_t i = 0; i < total; i++)
    if ((recorded ? x->rec.req[i].phase : x->sim[i].phase) == phase) out[k++] = i;
  *n = k;
  return out;
}

/* freed within SHORT requests of its own (a temporary, not a saved activation) */
static bool is_short(uint64_t free_at, size_t i) { return free_at != MB_SNAP_NOT_FREED && free_at - i <= SHORT; }

static void pair(differ *x, size_t r, size_t s, int kind) {
  x->r.partner[r] = (int64_t)s;
  x->s.partner[s] = (int64_t)r;
  x->r.kind[r] = x->s.kind[s] = (int8_t)kind;
}

static int line_up(differ *x) {
  for (int ph = 0; ph < MB_SNAP_PHASES; ph++) {
    size_t nr = 0, ns = 0;
    size_t *R = phase_list(x, true, ph, &nr), *S = phase_list(x, false, ph, &ns);
    if (!R || !S) {
      free(R);
      free(S);
      return MB_E_NOMEM;
    }
    for (int exact = 1; exact >= 0; exact--) {
      size_t k = 0;
      for (size_t a = 0; a < nr; a++) {
        size_t r = R[a];
        if (x->r.kind[r] == P_MATCHED) {
          k = (size_t)x->r.expected[r] + 1;
          continue;
        }
        if (exact) x->r.expected[r] = k;
        uint64_t want = x->rec.req[r].size;
        size_t lo = k > WINDOW ? k - WINDOW : 0, hi = k + WINDOW < ns ? k + WINDOW : ns;
        size_t best = SIZE_MAX, dist = SIZE_MAX;
        for (size_t b = lo; b < hi; b++) {
          size_t s = S[b];
          if (x->s.kind[s] != P_NONE) continue;
          bool same = exact ? x->sim[s].size == want : round512(x->sim[s].size) == round512(want);
          /* among equal sizes (a block's many same-shaped tensors) the one that lives alike */
          size_t dd = (b > k ? b - k : k - b) + (is_short(x->rec.req[r].free_at, r) != is_short(x->sim[s].free_at, s) ? WINDOW : 0);
          if (same && dd < dist) {
            best = b;
            dist = dd;
          }
        }
        if (best != SIZE_MAX) {
          pair(x, r, S[best], P_MATCHED);
          x->r.expected[r] = best; /* where this phase's walk stands */
          k = best + 1;
        }
      }
    }
    /* what is left: near pairs differ in size, the rest is missing or extra */
    for (size_t a = 0; a < nr; a++) {
      size_t r = R[a];
      if (x->r.kind[r] != P_NONE) continue;
      size_t k = x->r.expected[r], lo = k > NEAR ? k - NEAR : 0, hi = k + NEAR < ns ? k + NEAR : ns;
      for (size_t b = lo; b < hi && x->r.kind[r] == P_NONE; b++)
        if (x->s.kind[S[b]] == P_NONE) pair(x, r, S[b], P_SIZE);
      if (x->r.kind[r] == P_NONE) x->r.kind[r] = P_MISSING;
    }
    for (size_t b = 0; b < ns; b++)
      if (x->s.kind[S[b]] == P_NONE) x->s.kind[S[b]] = P_EXTRA;
    free(R);
    free(S);
  }
  for (size_t i = 0; i < x->rec.n; i++) x->r.matched_before[i + 1] = x->r.matched_before[i] + (x->r.kind[i] == P_MATCHED);
  for (size_t i = 0; i < x->n_sim; i++) x->s.matched_before[i + 1] = x->s.matched_before[i] + (x->s.kind[i] == P_MATCHED);
  return MB_OK;
}

/* a matched request's lifetime, in matched requests made while it lives */
static uint64_t life(const side *sd, size_t i, uint64_t free_at) {
  size_t end = free_at == MB_SNAP_NOT_FREED || free_at > sd->n ? sd->n : (size_t)free_at;
  return end > i ? sd->matched_before[end] - sd->matched_before[i] : 0;
}

static bool lives_differ(uint64_t a, uint64_t b) {
  uint64_t hi = a > b ? a : b, lo = a > b ? b : a;
  return hi - lo > 4 && hi - lo > hi / 4;
}

static void tally(differ *x) {
  for (size_t r = 0; r < x->rec.n; r++) {
    int k = x->r.kind[r];
    x->counts[k]++;
    x->bytes[k] += x->rec.req[r].size;
    if (k != P_MATCHED) continue;
    size_t s = (size_t)x->r.partner[r];
    uint64_t lr = life(&x->r, r, x->rec.req[r].free_at), ls = life(&x->s, s, x->sim[s].free_at);
    if (!lives_differ(lr, ls)) continue;
    if (lr > ls) {
      x->life_longer_rec++;
      x->life_bytes_rec += x->rec.req[r].size;
    } else {
      x->life_longer_sim++;
      x->life_bytes_sim += x->rec.req[r].size;
    }
  }
  for (size_t s = 0; s < x->n_sim; s++)
    if (x->s.kind[s] == P_EXTRA) {
      x->counts[P_EXTRA]++;
      x->bytes[P_EXTRA] += x->sim[s].size;
    }
}

/* ---- labels and groups ---- */

static void rec_label(const mb_snap_request *q, const char **op, size_t *op_n, const char **mod, size_t *mod_n) {
  mb_snap_name o = q->op.s ? q->op : q->grad_fn;
  *op = o.s ? o.s : "?";
  *op_n = o.s ? o.n : 1;
  mb_snap_name m = q->phase == MB_SNAP_BACKWARD && q->grad_fn.s ? q->grad_fn : q->site;
  *mod = m.s ? m.s : "?";
  *mod_n = m.s ? m.n : 1;
}

static void group_add(groups *gs, const char *op, size_t op_n, const char *mod, size_t mod_n, int phase, uint64_t bytes) {
  int i = 0;
  for (; i < gs->n; i++) {
    group *g = &gs->g[i];
    if (g->phase == phase && g->op_n == op_n && g->module_n == mod_n && !memcmp(g->op, op, op_n) &&
        !memcmp(g->module, mod, mod_n))
      break;
  }
  if (i == gs->n) {
    if (gs->n == MAX_GROUPS) i = MAX_GROUPS; /* "others" */
    else gs->n++;
    group *g = &gs->g[i];
    if (!g->count) *g = (group){i == MAX_GROUPS ? "(others)" : op, i == MAX_GROUPS ? "" : mod,
                                i == MAX_GROUPS ? 8 : op_n, i == MAX_GROUPS ? 0 : mod_n, phase, 0, 0};
  }
  gs->g[i].bytes += bytes;
  gs->g[i].count++;
}

static int by_bytes(const void *a, const void *b) {
  const group *x = a, *y = b;
  return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

static void collect(const differ *x, int kind, groups *gs) {
  memset(gs, 0, sizeof *gs);
  if (kind == P_EXTRA) {
    for (size_t s = 0; s < x->n_sim; s++)
      if (x->s.kind[s] == P_EXTRA)
        group_add(gs, x->sim[s].op, strlen(x->sim[s].op), x->sim[s].module, strlen(x->sim[s].module), x->sim[s].phase,
                  x->sim[s].size);
  } else {
    for (size_t r = 0; r < x->rec.n; r++) {
      if (x->r.kind[r] != kind) continue;
      const char *op, *mod;
      size_t on, mn;
      rec_label(&x->rec.req[r], &op, &on, &mod, &mn);
      group_add(gs, op, on, mod, mn, x->rec.req[r].phase, x->rec.req[r].size);
    }
  }
  int n = gs->n + (gs->g[MAX_GROUPS].count ? 1 : 0);
  if (gs->g[MAX_GROUPS].count && gs->n < MAX_GROUPS) gs->g[gs->n] = gs->g[MAX_GROUPS];
  gs->n = n > MAX_GROUPS ? MAX_GROUPS : n;
  qsort(gs->g, (size_t)gs->n, sizeof gs->g[0], by_bytes);
}

/* ---- text ---- */

static const char *h(char *buf, uint64_t v) { return mb_fmt_bytes(buf, 32, v); }

static void text_groups(mb_strbuf *sb, const char *title, const groups *gs) {
  if (!gs->n) return;
  char b[32];
  mb_sb_printf(sb, "\n%s, by op and where it ran (largest first)\n", title);
  mb_sb_printf(sb, "  %12s  %8s  %-9s  %s\n", "bytes", "requests", "phase", "op  @ module or frame");
  for (int i = 0; i < gs->n && i < TEXT_GROUPS; i++) {
    const group *g = &gs->g[i];
    mb_sb_printf(sb, "  %12s  %8llu  %-9s  %.*s  @ %.*s\n", h(b, g->bytes), (unsigned long long)g->count,
                 mb_snap_phase_name(g->phase), (int)g->op_n, g->op, (int)g->module_n, g->module);
  }
  if (gs->n > TEXT_GROUPS) mb_sb_printf(sb, "  ... %d more (--json lists every one)\n", gs->n - TEXT_GROUPS);
}

static void rec_desc(mb_strbuf *sb, const mb_snap_request *q) {
  const char *op, *mod;
  size_t on, mn;
  rec_label(q, &op, &on, &mod, &mn);
  mb_sb_printf(sb, "%.*s @ %.*s", (int)on, op, (int)mn, mod);
  if (q->site.s && q->phase != MB_SNAP_BACKWARD)
    mb_sb_printf(sb, " (%.*s:%llu)", (int)q->site_fn.n, q->site_fn.s, (unsigned long long)q->site_line);
}

static void text_partings(mb_strbuf *sb, const differ *x) {
  char b1[32], b2[32];
  mb_sb_printf(sb, "\nwhere they part, in step order (the first %d)\n", TEXT_PARTINGS);
  int shown = 0;
  size_t s = 0; /* extra simulated requests are shown where the walk reached them */
  for (size_t r = 0; r <= x->rec.n && shown < TEXT_PARTINGS; r++) {
    size_t until = r < x->rec.n && x->r.partner[r] >= 0 ? (size_t)x->r.partner[r] : (r == x->rec.n ? x->n_sim : s);
    for (; s < until && s < x->n_sim && shown < TEXT_PARTINGS; s++)
      if (x->s.kind[s] == P_EXTRA) {
        mb_sb_printf(sb, "  %-9s  extra     %10s  %s @ %s\n", mb_snap_phase_name(x->sim[s].phase), h(b1, x->sim[s].size),
                     x->sim[s].op, x->sim[s].module);
        shown++;
      }
    if (r == x->rec.n || shown >= TEXT_PARTINGS) break;
    const mb_snap_request *q = &x->rec.req[r];
    int k = x->r.kind[r];
    if (k == P_MATCHED) {
      size_t p = (size_t)x->r.partner[r];
      uint64_t lr = life(&x->r, r, q->free_at), ls = life(&x->s, p, x->sim[p].free_at);
      if (!lives_differ(lr, ls)) continue;
      mb_sb_printf(sb, "  %-9s  lifetime  %10s  ", mb_snap_phase_name(q->phase), h(b1, q->size));
      rec_desc(sb, q);
      mb_sb_printf(sb, ": lives %llu requests, the estimate's %llu (%s @ %s)\n", (unsigned long long)lr,
                   (unsigned long long)ls, x->sim[p].op, x->sim[p].module);
    } else if (k == P_SIZE) {
      size_t p = (size_t)x->r.partner[r];
      mb_sb_printf(sb, "  %-9s  size      %10s  ", mb_snap_phase_name(q->phase), h(b1, q->size));
      rec_desc(sb, q);
      mb_sb_printf(sb, ": the estimate asks %s (%s @ %s)\n", h(b2, x->sim[p].size), x->sim[p].op, x->sim[p].module);
    } else {
      mb_sb_printf(sb, "  %-9s  missing   %10s  ", mb_snap_phase_name(q->phase), h(b1, q->size));
      rec_desc(sb, q);
      mb_sb_putc(sb, '\n');
    }
    shown++;
  }
}

static const char *window_text(int w) {
  return w == 2 ? "the step between the last two optimizer steps' ends"
         : w == 1 ? "up to the only optimizer step's end"
                  : "the whole trace (no optimizer step annotated)";
}

static void text(mb_strbuf *sb, const differ *x) {
  char b1[32], b2[32], n1[32], n2[32];
  uint64_t asked_r = 0, asked_s = 0, per_r[MB_SNAP_PHASES] = {0}, per_s[MB_SNAP_PHASES] = {0};
  for (size_t i = 0; i < x->rec.n; i++) {
    asked_r += x->rec.req[i].size;
    per_r[x->rec.req[i].phase]++;
  }
  for (size_t i = 0; i < x->n_sim; i++) {
    asked_s += x->sim[i].size;
    per_s[x->sim[i].phase]++;
  }
  mb_sb_printf(sb, "recorded  device %d, %s; batch %lld in the estimate\n", (int)x->rec.device,
               window_text(x->rec.window), (long long)x->batch);
  mb_sb_printf(sb, "\n%-22s %16s %16s\n", "", "recorded", "estimate");
  mb_sb_printf(sb, "%-22s %16s %16s\n", "requests", mb_fmt_thousands(n1, sizeof n1, x->rec.n),
               mb_fmt_thousands(n2, sizeof n2, x->n_sim));
  for (int ph = 0; ph < MB_SNAP_PHASES; ph++)
    mb_sb_printf(sb, "  %-20s %16s %16s\n", mb_snap_phase_name(ph), mb_fmt_thousands(n1, sizeof n1, per_r[ph]),
                 mb_fmt_thousands(n2, sizeof n2, per_s[ph]));
  mb_sb_printf(sb, "%-22s %16s %16s\n", "bytes asked", h(b1, asked_r), h(b2, asked_s));
  mb_sb_printf(sb, "%-22s %16s %16s\n", "peak above the start", h(b1, x->rec.peak_above_start), h(b2, x->sim_peak));
  mb_sb_printf(sb, "\nmatched             %s requests (%.1f%% of the recorded), %s\n",
               mb_fmt_thousands(n1, sizeof n1, x->counts[P_MATCHED]),
               x->rec.n ? 100.0 * (double)x->counts[P_MATCHED] / (double)x->rec.n : 0.0, h(b1, x->bytes[P_MATCHED]));
  mb_sb_printf(sb, "sizes differ        %s pairs, %s recorded\n", mb_fmt_thousands(n1, sizeof n1, x->counts[P_SIZE]),
               h(b1, x->bytes[P_SIZE]));
  mb_sb_printf(sb, "missing in estimate %s requests, %s\n", mb_fmt_thousands(n1, sizeof n1, x->counts[P_MISSING]),
               h(b1, x->bytes[P_MISSING]));
  mb_sb_printf(sb, "extra in estimate   %s requests, %s\n", mb_fmt_thousands(n1, sizeof n1, x->counts[P_EXTRA]),
               h(b1, x->bytes[P_EXTRA]));
  mb_sb_printf(sb, "lifetimes differ    recorded longer: %llu (%s); the estimate's longer: %llu (%s)\n",
               (unsigned long long)x->life_longer_rec, h(b1, x->life_bytes_rec), (unsigned long long)x->life_longer_sim,
               h(b2, x->life_bytes_sim));
  groups *gs = malloc(sizeof *gs);
  if (!gs) {
    mb_sb_puts(sb, "(out of memory for the groups)\n");
    return;
  }
  collect(x, P_MISSING, gs);
  text_groups(sb, "missing in the estimate", gs);
  collect(x, P_EXTRA, gs);
  text_groups(sb, "extra in the estimate", gs);
  collect(x, P_SIZE, gs);
  text_groups(sb, "sizes differ (the recorded side)", gs);
  free(gs);
  text_partings(sb, x);
}

/* ---- JSON ---- */

static void json_name(mb_strbuf *sb, const char *s, size_t n) {
  char buf[512];
  snprintf(buf, sizeof buf, "%.*s", (int)(n < sizeof buf - 1 ? n : sizeof buf - 1), s);
  mb_sb_json_str(sb, buf);
}

static void json_groups(mb_strbuf *sb, const char *key, const groups *gs) {
  mb_sb_printf(sb, "  \"%s\": [", key);
  for (int i = 0; i < gs->n; i++) {
    const group *g = &gs->g[i];
    mb_sb_printf(sb, "%s\n    {\"phase\": \"%s\", \"op\": ", i ? "," : "", mb_snap_phase_name(g->phase));
    json_name(sb, g->op, g->op_n);
    mb_sb_puts(sb, ", \"module\": ");
    json_name(sb, g->module, g->module_n);
    mb_sb_printf(sb, ", \"requests\": %llu, \"bytes\": %llu}", (unsigned long long)g->count, (unsigned long long)g->bytes);
  }
  mb_sb_puts(sb, gs->n ? "\n  ]" : "]");
}

static const char *kind_name(int k) {
  static const char *const names[] = {"", "matched", "size", "missing", "extra"};
  return k >= 0 && k <= P_EXTRA ? names[k] : "";
}

static void json(mb_strbuf *sb, const differ *x) {
  mb_sb_printf(sb, "{\n  \"schema_version\": %d,\n  \"device\": %d,\n  \"window\": \"%s\",\n  \"batch\": %lld,\n",
               DIFF_SCHEMA_VERSION, (int)x->rec.device, x->rec.window == 2 ? "between-steps" : x->rec.window ? "to-step" : "trace",
               (long long)x->batch);
  mb_sb_printf(sb, "  \"recorded\": {\"requests\": %zu, \"peak_above_start\": %llu, \"frees_of_older\": %llu},\n",
               x->rec.n, (unsigned long long)x->rec.peak_above_start, (unsigned long long)x->rec.frees_of_older);
  mb_sb_printf(sb, "  \"estimate\": {\"requests\": %zu, \"peak_above_start\": %llu},\n", x->n_sim,
               (unsigned long long)x->sim_peak);
  mb_sb_puts(sb, "  \"summary\": {");
  for (int k = P_MATCHED; k <= P_EXTRA; k++)
    mb_sb_printf(sb, "%s\"%s\": {\"requests\": %llu, \"bytes\": %llu}", k > P_MATCHED ? ", " : "", kind_name(k),
                 (unsigned long long)x->counts[k], (unsigned long long)x->bytes[k]);
  mb_sb_printf(sb, ", \"lifetime_recorded_longer\": %llu, \"lifetime_estimate_longer\": %llu},\n",
               (unsigned long long)x->life_longer_rec, (unsigned long long)x->life_longer_sim);
  groups *gs = malloc(sizeof *gs);
  if (gs) {
    collect(x, P_MISSING, gs);
    json_groups(sb, "missing_by_op", gs);
    mb_sb_puts(sb, ",\n");
    collect(x, P_EXTRA, gs);
    json_groups(sb, "extra_by_op", gs);
    mb_sb_puts(sb, ",\n");
    collect(x, P_SIZE, gs);
    json_groups(sb, "size_by_op", gs);
    mb_sb_puts(sb, ",\n");
    free(gs);
  }
  /* every recorded request in order, with its partner; then the extra simulated ones */
  mb_sb_puts(sb, "  \"recorded_requests\": [");
  for (size_t r = 0; r < x->rec.n; r++) {
    const mb_snap_request *q = &x->rec.req[r];
    const char *op, *mod;
    size_t on, mn;
    rec_label(q, &op, &on, &mod, &mn);
    mb_sb_printf(sb, "%s\n    {\"i\": %zu, \"phase\": \"%s\", \"size\": %llu, \"free_at\": ", r ? "," : "", r,
                 mb_snap_phase_name(q->phase), (unsigned long long)q->size);
    if (q->free_at == MB_SNAP_NOT_FREED) mb_sb_puts(sb, "null");
    else mb_sb_json_u64(sb, q->free_at);
    mb_sb_puts(sb, ", \"op\": ");
    json_name(sb, op, on);
    mb_sb_puts(sb, ", \"module\": ");
    json_name(sb, mod, mn);
    mb_sb_printf(sb, ", \"part\": \"%s\"", kind_name(x->r.kind[r]));
    if (x->r.partner[r] >= 0) {
      size_t p = (size_t)x->r.partner[r];
      mb_sb_printf(sb, ", \"estimate\": {\"i\": %zu, \"size\": %llu, \"op\": ", p, (unsigned long long)x->sim[p].size);
      mb_sb_json_str(sb, x->sim[p].op);
      mb_sb_puts(sb, ", \"module\": ");
      mb_sb_json_str(sb, x->sim[p].module);
      if (x->r.kind[r] == P_MATCHED)
        mb_sb_printf(sb, ", \"life\": %llu, \"recorded_life\": %llu", (unsigned long long)life(&x->s, p, x->sim[p].free_at),
                     (unsigned long long)life(&x->r, r, q->free_at));
      mb_sb_putc(sb, '}');
    }
    mb_sb_putc(sb, '}');
  }
  mb_sb_puts(sb, x->rec.n ? "\n  ],\n  \"extra_requests\": [" : "],\n  \"extra_requests\": [");
  bool first = true;
  for (size_t s = 0; s < x->n_sim; s++) {
    if (x->s.kind[s] != P_EXTRA) continue;
    mb_sb_printf(sb, "%s\n    {\"i\": %zu, \"phase\": \"%s\", \"size\": %llu, \"op\": ", first ? "" : ",", s,
                 mb_snap_phase_name(x->sim[s].phase), (unsigned long long)x->sim[s].size);
    mb_sb_json_str(sb, x->sim[s].op);
    mb_sb_puts(sb, ", \"module\": ");
    mb_sb_json_str(sb, x->sim[s].module);
    mb_sb_putc(sb, '}');
    first = false;
  }
  mb_sb_puts(sb, first ? "]\n}\n" : "\n  ]\n}\n");
}

/* ---- the API ---- */

static void differ_free(differ *x) {
  free(x->sim);
  mb_arena_destroy(&x->names);
  side_free(&x->r);
  side_free(&x->s);
  mb_snap_stream_free(&x->rec);
}

MB_API int mb_alloc_diff_create(const void *data, size_t size, const mb_model *m, mb_setup *s, mb_alloc_diff **out) {
  if (!out) return MB_E_INVALID_ARG;
  mb_alloc_diff *r = calloc(1, sizeof *r);
  *out = r;
  if (!r) return MB_E_NOMEM;
  mb_diag d;
  mb_diag_init(&d);
  differ x = {0};
  mb_arena_init(&x.names);
  mb_arena a;
  mb_arena_init(&a);
  mb_datum *root = NULL;
  if (!m || !s) mb_fail(&d, MB_E_INVALID_ARG, "mb_alloc_diff_create: a model and a setup are required");
  else if (s->batch < 1)
    mb_fail(&d, MB_E_INVALID_ARG, "give the batch size the snapshot's step ran at (setup key batch_size, --batch)");
  else if (!data || !size) mb_fail(&d, MB_E_PARSE, "the snapshot is empty");
  else mb_data_parse(data, size, &a, &root, &d);
  if (d.status == MB_OK) {
    x.batch = s->batch;
    mb_snap_stream_read(root, size, &x.rec, &d);
  }
  if (d.status == MB_OK) simulate(&x, m, s, &d);
  if (d.status == MB_OK && (!side_init(&x.r, x.rec.n) || !side_init(&x.s, x.n_sim) || line_up(&x) != MB_OK))
    mb_fail(&d, MB_E_NOMEM, "out of memory");
  if (d.status == MB_OK) {
    tally(&x);
    mb_strbuf t, j;
    mb_sb_init(&t);
    mb_sb_init(&j);
    text(&t, &x);
    json(&j, &x);
    if (mb_sb_failed(&t) || mb_sb_failed(&j)) {
      mb_sb_free(&t);
      mb_sb_free(&j);
      mb_fail(&d, MB_E_NOMEM, "out of memory");
    } else {
      r->text = mb_sb_detach(&t);
      r->json = mb_sb_detach(&j);
    }
  }
  differ_free(&x);
  mb_arena_destroy(&a);
  if (d.status != MB_OK) snprintf(r->errmsg, sizeof r->errmsg, "%s", d.msg);
  return d.status;
}

MB_API void mb_alloc_diff_free(mb_alloc_diff *r) {
  if (!r) return;
  free(r->text);
  free(r->json);
  free(r);
}

MB_API const char *mb_alloc_diff_errmsg(const mb_alloc_diff *r) { return r ? r->errmsg : ""; }

MB_API int mb_alloc_diff_report(const mb_alloc_diff *r, int as_json, char **out) {
  if (!out) return MB_E_INVALID_ARG;
  *out = NULL;
  const char *src = r ? (as_json ? r->json : r->text) : NULL;
  if (!src) return MB_E_INVALID_ARG;
  size_t n = strlen(src) + 1;
  if (!(*out = malloc(n))) return MB_E_NOMEM;
  memcpy(*out, src, n);
  return MB_OK;
}
