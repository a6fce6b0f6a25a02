/* What would make it fit: each candidate change to the setup simulated for real (a plan built
 * with the change, the budget at the baseline's batch size, and the batch-size solve), kept
 * when it lowers the device peak. membudget.h, "what would make it fit", lists the changes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget/advice.h"
#include "budget/estimate.h"
#include "budget/gpus.h"
#include "budget/modules.h"
#include "budget/step.h"
#include "sim/optim.h"
#include "util/format.h"
#include "util/glob.h"
#include "util/versioned.h"

#define MAX_GLOBS 16
#define MAX_ARGS (2 * MAX_GLOBS + 8)
#define MAX_ACCUMULATION_TRIES 12
#define MAX_NAME 1100 /* a module path (origin.c cuts them at 512) with a glob around it */
#define MAX_GLOB (2 * MAX_NAME + 16)

typedef struct variant {
  int kind;
  char title[512], note[512];
  bool what_if;
  int precision, attention, optimizer, teacher_offload, foreach; /* -1: unchanged */
  int64_t accumulation;                                 /* 0: unchanged */
  int64_t micro;                                        /* 0: the baseline's batch */
  int64_t batch_min;                                    /* 0: unchanged */
  char *ckpt[MAX_GLOBS];
  int n_ckpt;
  char *freeze, *trainable;
  int strategy;                                         /* -1: unchanged */
  char *wrap[MAX_GLOBS];                                /* fsdp_wrap globs (borrowed) */
  int n_wrap;
  const char *argv[MAX_ARGS];
  int argc;
} variant;

typedef struct saved {
  mb_train train;
  int64_t batch;
  char **freeze, **trainable;
  size_t n_freeze, n_trainable;
} saved;

#define MAX_SINGLES 12

typedef struct ctx {
  const mb_model *m;
  mb_setup *s;
  const mb_budget *base;
  mb_advice *out;
  mb_diag *d;
  variant blocks; /* the checkpoint line's blocks: FSDP's units in the sharding line */
  variant singles[MAX_SINGLES]; /* the lines of one change each (no what-ifs): pairs() joins them */
  int n_singles;
  bool single_fits;             /* one of them fits at the baseline's batch */
} ctx;

MB_API const char *mb_advice_kind_name(int kind) {
  static const char *const names[] = {"", "precision", "checkpoint", "optimizer", "attention",
                                      "grad_accumulation", "teacher_offload", "freeze", "shard", "foreach",
                                      "combined"};
  return kind >= 1 && kind <= MB_ADVICE_COMBINED ? names[kind] : "unknown";
}

MB_API int mb_advice_due(const mb_budget *b, const char **reason) {
  const char *why = "";
  if (b && b->struct_size >= offsetof(mb_budget, at_peak)) {
    if (b->fits == 0) why = "does not fit";
    else if (b->fits == 1 && !b->solved && b->available < (int64_t)(b->usable_memory / 10))
      why = "within 10% of the usable memory";
  }
  if (reason) *reason = why;
  return *why != '\0';
}

/* ---- variants ---- */

static void init_variant(variant *v, int kind) {
  memset(v, 0, sizeof *v);
  v->kind = kind;
  v->precision = v->attention = v->optimizer = v->teacher_offload = v->foreach = v->strategy = -1;
}

/* flag, and its value unless NULL (a switch) */
static void arg(ctx *c, variant *v, const char *flag, const char *value) {
  if (v->argc + 2 > MAX_ARGS) return;
  v->argv[v->argc++] = flag;
  if (value) v->argv[v->argc++] = mb_arena_strdup(&c->out->arena, value);
}

static void apply(mb_setup *s, const variant *v, saved *sv, char **ckpt, char **fr, char **tr) {
  sv->train = s->train;
  sv->batch = s->batch;
  sv->freeze = s->freeze;
  sv->trainable = s->trainable;
  sv->n_freeze = s->n_freeze;
  sv->n_trainable = s->n_trainable;
  mb_train *t = &s->train;
  if (v->precision >= 0) t->precision = v->precision;
  if (v->attention >= 0) t->attention = v->attention;
  if (v->optimizer >= 0) t->optimizer = v->optimizer;
  if (v->teacher_offload >= 0) t->teacher_offload = v->teacher_offload != 0;
  if (v->foreach >= 0) t->foreach = v->foreach != 0;
  if (v->accumulation > 0) t->grad_accumulation = v->accumulation;
  if (v->batch_min > 0) t->batch_min = v->batch_min;
  if (v->strategy >= 0) {
    t->dist.strategy = v->strategy;
    t->dist.wrap = (char **)v->wrap; /* borrowed: restore() puts the setup's own list back */
    t->dist.n_wrap = (size_t)v->n_wrap;
  }
  if (v->n_ckpt && ckpt) { /* the setup's globs, then the variant's (borrowed, not owned) */
    if (t->n_checkpoint) memcpy(ckpt, t->checkpoint, t->n_checkpoint * sizeof *ckpt);
    memcpy(ckpt + t->n_checkpoint, v->ckpt, (size_t)v->n_ckpt * sizeof *ckpt);
    t->checkpoint = ckpt;
    t->n_checkpoint += (size_t)v->n_ckpt;
  }
  if (v->freeze && fr) {
    if (s->n_freeze) memcpy(fr, s->freeze, s->n_freeze * sizeof *fr);
    fr[s->n_freeze++] = v->freeze;
    s->freeze = fr;
  }
  if (v->trainable && tr) {
    if (s->n_trainable) memcpy(tr, s->trainable, s->n_trainable * sizeof *tr);
    tr[s->n_trainable++] = v->trainable;
    s->trainable = tr;
  }
}

static void restore(mb_setup *s, const saved *sv) {
  s->train = sv->train;
  s->batch = sv->batch;
  s->freeze = sv->freeze;
  s->trainable = sv->trainable;
  s->n_freeze = sv->n_freeze;
  s->n_trainable = sv->n_trainable;
}

/* The budget with the change at its batch (at) and, with a device memory, solved (sol).
 * Returns MB_OK, or the status of a failed simulation (the line is then left out). */
static int simulate(ctx *c, const variant *v, mb_budget *at, mb_budget *sol, bool *solved) {
  mb_setup *s = c->s;
  char **ckpt = malloc((s->train.n_checkpoint + MAX_GLOBS + 1) * sizeof *ckpt);
  char **fr = malloc((s->n_freeze + 2) * sizeof *fr), **tr = malloc((s->n_trainable + 2) * sizeof *tr);
  if (!ckpt || !fr || !tr) {
    free(ckpt);
    free(fr);
    free(tr);
    return mb_fail(c->d, MB_E_NOMEM, "out of memory");
  }
  saved sv;
  apply(s, v, &sv, ckpt, fr, tr);
  mb_diag d;
  mb_diag_init(&d);
  mb_plan *p = NULL;
  *solved = false;
  if (mb_setup_plan_build(c->m, s, &p, &d) == MB_OK) {
    s->batch = v->micro > 0 ? v->micro : c->base->batch_size;
    if (mb_estimate_plan(p, s, at, &d) == MB_OK && s->train.device_memory) {
      s->batch = -1;
      if (mb_estimate_plan(p, s, sol, &d) == MB_OK) *solved = true;
    }
  }
  mb_plan_free(p);
  restore(s, &sv);
  free(ckpt);
  free(fr);
  free(tr);
  if (d.status == MB_E_NOMEM) return mb_fail(c->d, MB_E_NOMEM, "out of memory");
  return d.status;
}

static int add_line(ctx *c, const variant *v, const mb_budget *at, const mb_budget *sol, bool solved) {
  mb_advice *a = c->out;
  if (a->n == a->cap) {
    int32_t cap = a->cap ? a->cap * 2 : 8;
    mb_advice_line *grown = realloc(a->lines, (size_t)cap * sizeof *grown);
    if (!grown) return mb_fail(c->d, MB_E_NOMEM, "out of memory");
    a->lines = grown;
    a->cap = cap;
  }
  mb_advice_line *l = &a->lines[a->n];
  memset(l, 0, sizeof *l);
  l->struct_size = sizeof *l;
  l->kind = v->kind;
  l->title = mb_arena_strdup(&a->arena, v->title);
  l->note = mb_arena_strdup(&a->arena, v->note);
  const char **argv = mb_arena_array(&a->arena, (size_t)v->argc + 1, sizeof *argv);
  mb_strbuf sb;
  mb_sb_init(&sb);
  for (int i = 0; argv && i < v->argc; i++) {
    argv[i] = v->argv[i];
    const char *x = v->argv[i] ? v->argv[i] : "";
    bool quote = strpbrk(x, "*?[]\\ '\"$!;&|<>(){}") != NULL;
    mb_sb_puts(&sb, i ? " " : "");
    if (!quote) {
      mb_sb_puts(&sb, x);
      continue;
    }
    mb_sb_putc(&sb, '\'');
    for (const char *q = x; *q; q++) mb_sb_puts(&sb, *q == '\'' ? "'\\''" : (char[2]){*q, 0});
    mb_sb_putc(&sb, '\'');
  }
  char *flags = mb_sb_failed(&sb) ? NULL : mb_sb_detach(&sb);
  l->flags = flags ? mb_arena_strdup(&a->arena, flags) : NULL;
  free(flags);
  mb_sb_free(&sb);
  if (!l->title || !l->note || !argv || !l->flags) return mb_fail(c->d, MB_E_NOMEM, "out of memory");
  l->argc = v->argc;
  l->argv = argv;
  l->what_if = v->what_if;
  l->fits = at->fits;
  l->batch_size = at->batch_size;
  l->grad_accumulation = at->grad_accumulation;
  l->allocated_peak = at->allocated_peak;
  l->device_peak = at->device_peak;
  l->available = at->available;
  l->solved_batch = !c->s->train.device_memory ? -1 : solved && sol->fits == 1 ? sol->batch_size : 0;
  l->solved_device_peak = solved ? sol->device_peak : 0;
  a->n++;
  if (!v->what_if && v->kind != MB_ADVICE_COMBINED) c->single_fits |= at->fits == 1;
  return MB_OK;
}

/* A change that simulated, kept for pairs() whether or not it lowered the device peak alone:
 * one that lowers a phase which is not the peak gives nothing alone and may be half a pair. */
static void remember(ctx *c, const variant *v) {
  if (!v->what_if && c->n_singles < MAX_SINGLES) c->singles[c->n_singles++] = *v;
}

/* Simulate a variant and keep it when it lowers the device peak. */
static int consider(ctx *c, const variant *v) {
  mb_budget at, sol;
  bool solved;
  int rc = simulate(c, v, &at, &sol, &solved);
  if (rc == MB_E_NOMEM) return rc;
  if (rc == MB_OK) remember(c, v);
  if (rc != MB_OK || at.device_peak >= c->base->device_peak) return MB_OK; /* no better, or not simulated */
  return add_line(c, v, &at, &sol, solved);
}

/* ---- the changes ---- */

/* fp16/bf16 parameters: ZeRO then needs the fp32 master weights (sim/emit.c refuses it) */
static bool b_pure_half(const mb_train *t) { return t->precision == MB_PREC_FP16 || t->precision == MB_PREC_BF16; }

static int precision(ctx *c) {
  const mb_train *t = &c->s->train;
  if (t->precision != MB_PREC_FP32) return MB_OK;
  const mb_gpu *gpu = t->gpu ? mb_gpu_find(t->gpu) : NULL;
  bool bf16 = !gpu || gpu->cc >= 80; /* bf16 tensor cores from Ampere on */
  variant v;
  init_variant(&v, MB_ADVICE_PRECISION);
  v.precision = bf16 ? MB_PREC_AMP_BF16 : MB_PREC_AMP_FP16;
  snprintf(v.title, sizeof v.title, "mixed precision (%s autocast)", bf16 ? "bf16" : "fp16");
  if (!bf16) snprintf(v.note, sizeof v.note, "%s has no bf16: fp16 autocast wants a GradScaler", gpu->name);
  else if (!gpu) snprintf(v.note, sizeof v.note, "bf16 needs an Ampere or newer GPU; amp-fp16 otherwise");
  arg(c, &v, "--precision", bf16 ? "amp-bf16" : "amp-fp16");
  return consider(c, &v);
}

static int optimizer(ctx *c) {
  int o = c->s->train.optimizer;
  if (o != MB_OPT_ADAM && o != MB_OPT_ADAMW && o != MB_OPT_ADAM_AMSGRAD && o != MB_OPT_ADAMW_AMSGRAD) return MB_OK;
  variant v;
  init_variant(&v, MB_ADVICE_OPTIMIZER);
  v.optimizer = MB_OPT_ADAMW_8BIT;
  snprintf(v.title, sizeof v.title, "8-bit AdamW");
  snprintf(v.note, sizeof v.note, "bitsandbytes.optim.AdamW8bit: both states in 8 bits (fp32 for tensors under "
           "4096 elements)");
  arg(c, &v, "--optimizer", "adamw-8bit");
  return consider(c, &v);
}

/* torch.optim's for-loop step (foreach=False): the temporaries of one parameter at a time, not
 * a parameter-sized list (sim/optim.c) */
static int for_loop_step(ctx *c) {
  const mb_train *t = &c->s->train;
  if (!t->foreach || !mb_optim_get(t->optimizer)->foreach_lists) return MB_OK;
  variant v;
  init_variant(&v, MB_ADVICE_FOREACH);
  v.foreach = 0;
  snprintf(v.title, sizeof v.title, "the for-loop optimizer step (foreach=False)");
  snprintf(v.note, sizeof v.note, "torch.optim's %s(..., foreach=False): one parameter's temporaries at a time "
           "instead of a list of them all; the step runs slower", mb_optim_get(t->optimizer)->name);
  arg(c, &v, "--foreach", "0");
  return consider(c, &v);
}

/* b's changes added to a's (false when both change the same thing) */
static bool join(variant *a, const variant *b) {
#define BOTH(f) (a->f >= 0 && b->f >= 0)
  if (BOTH(precision) || BOTH(attention) || BOTH(optimizer) || BOTH(teacher_offload) || BOTH(foreach) ||
      BOTH(strategy) || (a->accumulation && b->accumulation) || (a->n_ckpt && b->n_ckpt) ||
      a->argc + b->argc > MAX_ARGS)
    return false;
#undef BOTH
#define TAKE(f) if (b->f >= 0) a->f = b->f
  TAKE(precision); TAKE(attention); TAKE(optimizer); TAKE(teacher_offload); TAKE(foreach); TAKE(strategy);
#undef TAKE
  if (b->accumulation) {
    a->accumulation = b->accumulation;
    a->micro = b->micro;
    a->batch_min = b->batch_min;
  }
  for (int i = 0; i < b->n_ckpt; i++) a->ckpt[a->n_ckpt++] = b->ckpt[i];
  for (int i = 0; i < b->n_wrap; i++) a->wrap[a->n_wrap++] = b->wrap[i];
  for (int i = 0; i < b->argc; i++) a->argv[a->argc++] = b->argv[i];
  size_t n = strlen(a->title);
  snprintf(a->title + n, sizeof a->title - n, " + %s", b->title);
  snprintf(a->note, sizeof a->note, "two changes together: no one alone fits");
  a->kind = MB_ADVICE_COMBINED;
  return true;
}

/* When no single change fits, each pair of them, simulated together: the pairs that fit. */
static int pairs(ctx *c) {
  if (c->single_fits || c->base->fits != 0) return MB_OK;
  for (int i = 0; i < c->n_singles; i++)
    for (int j = i + 1; j < c->n_singles; j++) {
      variant v = c->singles[i];
      if (!join(&v, &c->singles[j])) continue;
      mb_budget at, sol;
      bool solved;
      int rc = simulate(c, &v, &at, &sol, &solved);
      if (rc == MB_E_NOMEM) return rc;
      if (rc == MB_OK && at.fits == 1 && (rc = add_line(c, &v, &at, &sol, solved)) != MB_OK) return rc;
    }
  return MB_OK;
}

static int attention(ctx *c) {
  if (c->s->train.attention == MB_ATTENTION_FUSED) return MB_OK;
  variant v;
  init_variant(&v, MB_ADVICE_ATTENTION);
  v.attention = MB_ATTENTION_FUSED;
  snprintf(v.title, sizeof v.title, "fused attention (scaled_dot_product_attention)");
  snprintf(v.note, sizeof v.note, "attention run as its ops switched to F.scaled_dot_product_attention (Hugging "
           "Face: attn_implementation=\"sdpa\"): no scores kept");
  arg(c, &v, "--attention", "fused");
  return consider(c, &v);
}

static int teacher_offload(ctx *c) {
  const mb_train *t = &c->s->train;
  if (!t->teacher || t->teacher_offload) return MB_OK;
  variant v;
  init_variant(&v, MB_ADVICE_TEACHER_OFFLOAD);
  v.teacher_offload = 1;
  snprintf(v.title, sizeof v.title, "teacher weights offloaded to the CPU");
  snprintf(v.note, sizeof v.note, "one teacher layer resident at a time");
  arg(c, &v, "--teacher-offload", NULL);
  return consider(c, &v);
}

/* The next factor of batch above k: up to 4096, then batch itself (a micro-batch of 1). */
static int64_t next_factor(int64_t batch, int64_t k) {
  for (k++; k <= batch && k <= 4096; k++)
    if (batch % k == 0) return k;
  return k <= batch ? batch : 0;
}

/* Gradient accumulation keeping the effective batch: the micro-batch divided by the smallest
 * factor whose budget fits (every factor tried failing: the last one tried), the steps
 * multiplied by it. Only for a batch that was given, or a minimum that does not fit. */
static int accumulation(ctx *c) {
  const mb_budget *base = c->base;
  int64_t batch = base->batch_size, steps = c->s->train.grad_accumulation;
  if (batch < 2 || (base->solved && base->fits != 0)) return MB_OK;
  variant v, best;
  mb_budget at, sol, best_at, best_sol;
  memset(&best, 0, sizeof best);
  memset(&best_at, 0, sizeof best_at);
  memset(&best_sol, 0, sizeof best_sol);
  bool solved = false, best_solved = false, have = false;
  int tries = 0;
  for (int64_t k = next_factor(batch, 1); k > 0 && tries < MAX_ACCUMULATION_TRIES; k = next_factor(batch, k)) {
    if (steps > INT64_MAX / k || steps * k > (1 << 20)) break; /* grad_accumulation's range */
    tries++;
    init_variant(&v, MB_ADVICE_GRAD_ACCUMULATION);
    v.micro = batch / k;
    v.accumulation = steps * k;
    if (c->s->train.batch_min > v.micro) v.batch_min = v.micro; /* the solve may go down to it */
    int rc = simulate(c, &v, &at, &sol, &solved);
    if (rc == MB_E_NOMEM) return rc;
    if (rc != MB_OK) break;
    best = v;
    best_at = at;
    best_sol = sol;
    best_solved = solved;
    have = true;
    if (at.fits != 0) break; /* fits, or no device memory: the smallest factor */
  }
  if (!have || best_at.device_peak >= base->device_peak) return MB_OK;
  char micro[32], total[32], eff[32];
  snprintf(micro, sizeof micro, "%lld", (long long)best.micro);
  snprintf(total, sizeof total, "%lld", (long long)best.accumulation);
  snprintf(eff, sizeof eff, "%lld", (long long)(batch * steps));
  snprintf(best.title, sizeof best.title, "gradient accumulation: batch %s x %s steps", micro, total);
  snprintf(best.note, sizeof best.note, "the same %s %.16s per optimizer step in %s micro-batches", eff,
           base->batch_unit[0] ? base->batch_unit : "samples", total);
  arg(c, &best, "--batch", micro);
  arg(c, &best, "--grad-accumulation", total);
  if (best.batch_min) arg(c, &best, "--batch-min", micro);
  return add_line(c, &best, &best_at, &best_sol, best_solved);
}

/* ---- checkpointing: the repeated blocks of the module tree ---- */

typedef struct tree {
  const mb_modules *mods;
  int32_t *first, *kids; /* children of entry i: kids[first[i] .. first[i + 1]) */
} tree;

static int tree_init(tree *t, const mb_modules *mods) {
  int32_t n = mods->n_mods;
  t->mods = mods;
  t->first = calloc((size_t)n + 2, sizeof *t->first);
  t->kids = malloc(((size_t)n + 1) * sizeof *t->kids);
  int32_t *fill = calloc((size_t)n + 1, sizeof *fill);
  if (!t->first || !t->kids || !fill) {
    free(fill);
    return MB_E_NOMEM;
  }
  for (int32_t i = 0; i < n; i++)
    if (mods->mods[i].info.parent >= 0) t->first[mods->mods[i].info.parent + 1]++;
  for (int32_t i = 1; i <= n; i++) t->first[i] += t->first[i - 1];
  for (int32_t i = 0; i < n; i++) { /* in print order: largest first */
    int32_t p = mods->mods[i].info.parent;
    if (p >= 0) t->kids[t->first[p] + fill[p]++] = i;
  }
  free(fill);
  return MB_OK;
}

static void tree_free(tree *t) {
  free(t->first);
  free(t->kids);
}

/* The length of a name without its trailing digits; -1 when it has none ("layer_3": 6). */
static int stem(const char *name) {
  int n = (int)strlen(name), k = n;
  while (k > 0 && name[k - 1] >= '0' && name[k - 1] <= '9') k--;
  return k < n ? k : -1;
}

typedef struct group {
  int32_t container, first_member; /* a member: prefix = its name's stem */
  int32_t members;
  uint64_t kept;
  bool all, outer, inner;
} group;

/* s with glob characters escaped into buf */
static void escape(char *buf, size_t size, const char *s, size_t len) {
  size_t o = 0;
  for (size_t i = 0; i < len && s[i] && o + 2 < size; i++) {
    if (strchr("*?[]\\", s[i])) buf[o++] = '\\';
    buf[o++] = s[i];
  }
  buf[o] = '\0';
}

static void group_glob(const tree *t, const group *g, char *buf, size_t size) {
  const mb_module_entry *box = &t->mods->mods[g->container], *m = &t->mods->mods[g->first_member];
  char path[MAX_NAME], prefix[MAX_NAME];
  escape(path, sizeof path, box->info.path, strlen(box->info.path));
  escape(prefix, sizeof prefix, m->name, (size_t)stem(m->name));
  const char *dot = *box->info.path ? "." : "";
  if (g->all) snprintf(buf, size, "%s%s*", path, dot);
  else snprintf(buf, size, "%s%s%s[0-9]*", path, dot, prefix);
}

static bool same_stem(const char *a, const char *b) {
  int x = stem(a), y = stem(b);
  return x >= 0 && x == y && !strncmp(a, b, (size_t)x);
}

static bool has_children(const tree *t, int32_t e) { return t->first[e + 1] > t->first[e]; }

/* Containers of at least two modules named alike with a number (layers.0, layers.1;
 * encoder_layer_0, encoder_layer_1; ResNet's layer1 .. layer4) that hold submodules of their
 * own (conv1 and conv2 of a block are layers, not blocks) and keep at least 2% of what the
 * model keeps: the repeated blocks. */
static int find_groups(const tree *t, group **out, int32_t *n_out) {
  const mb_modules *M = t->mods;
  group *gs = NULL;
  int32_t n = 0, cap = 0;
  uint64_t floor = M->mods[0].info.kept / 50;
  for (int32_t e = 0; e < M->n_mods; e++) {
    if (M->mods[e].info.model != 0) continue;
    int32_t a = t->first[e], z = t->first[e + 1];
    for (int32_t i = a; i < z; i++) {
      const char *name = M->mods[t->kids[i]].name;
      bool seen = stem(name) < 0 || !has_children(t, t->kids[i]);
      for (int32_t j = a; j < i && !seen; j++)
        seen = has_children(t, t->kids[j]) && same_stem(M->mods[t->kids[j]].name, name);
      if (seen) continue;
      group g = {e, t->kids[i], 0, 0, false, true, true};
      int32_t alike = 0;
      for (int32_t j = i; j < z; j++)
        if (same_stem(M->mods[t->kids[j]].name, name)) {
          alike++;
          if (!has_children(t, t->kids[j])) continue;
          g.members++;
          g.kept += M->mods[t->kids[j]].info.kept;
        }
      if (g.members < 2 || !g.kept || g.kept < floor) continue;
      g.all = alike == z - a && g.members == alike;
      if (n == cap) {
        cap = cap ? 2 * cap : 16;
        group *grown = realloc(gs, (size_t)cap * sizeof *grown);
        if (!grown) {
          free(gs);
          return MB_E_NOMEM;
        }
        gs = grown;
      }
      gs[n++] = g;
    }
  }
  /* outer: no ancestor of its container is a block; inner: no block holds another's container */
  for (int32_t i = 0; i < n; i++)
    for (int32_t up = M->mods[gs[i].container].info.parent, below = gs[i].container; up >= 0;
         below = up, up = M->mods[up].info.parent)
      for (int32_t j = 0; j < n; j++)
        if (gs[j].container == up && has_children(t, below) &&
            same_stem(M->mods[below].name, M->mods[gs[j].first_member].name)) {
          gs[i].outer = false;
          gs[j].inner = false;
        }
  *out = gs;
  *n_out = n;
  return MB_OK;
}

static int by_kept(const void *pa, const void *pb) {
  const group *x = pa, *y = pb;
  return x->kept > y->kept ? -1 : x->kept < y->kept;
}

static int checkpoint_variant(ctx *c, const tree *t, group *gs, int32_t n, bool outer, variant *v) {
  init_variant(v, MB_ADVICE_CHECKPOINT);
  qsort(gs, (size_t)n, sizeof *gs, by_kept);
  int32_t blocks = 0;
  uint64_t kept = 0;
  char list[400] = "";
  for (int32_t i = 0; i < n && v->n_ckpt < MAX_GLOBS; i++) {
    if (outer ? !gs[i].outer : !gs[i].inner) continue;
    char glob[MAX_GLOB];
    group_glob(t, &gs[i], glob, sizeof glob);
    if (!(v->ckpt[v->n_ckpt++] = mb_arena_strdup(&c->out->arena, glob))) return MB_E_NOMEM;
    arg(c, v, "--checkpoint", glob);
    blocks += gs[i].members;
    kept += gs[i].kept;
    size_t len = strlen(list);
    if (len + strlen(glob) + 8 < sizeof list) snprintf(list + len, sizeof list - len, "%s%s", len ? ", " : "", glob);
    else if (!strstr(list, ", ...")) snprintf(list + len, sizeof list - len, ", ...");
  }
  char k[32];
  snprintf(v->title, sizeof v->title, "activation checkpointing of %d blocks (%s)", (int)blocks, list);
  snprintf(v->note, sizeof v->note, "they keep %s at the end of forward now; their forward runs again in backward",
           mb_fmt_bytes(k, sizeof k, kept));
  return MB_OK;
}

/* No repeated blocks: the top-level modules that keep the most (below a chain of single
 * wrappers), each by its path. */
static int top_level_variant(ctx *c, const tree *t, variant *v) {
  const mb_modules *M = t->mods;
  init_variant(v, MB_ADVICE_CHECKPOINT);
  int32_t node = 0; /* the model's root */
  for (;;) {
    int32_t only = -1, keeping = 0;
    for (int32_t i = t->first[node]; i < t->first[node + 1]; i++)
      if (M->mods[t->kids[i]].info.kept) {
        keeping++;
        only = t->kids[i];
      }
    if (keeping != 1) break;
    node = only;
  }
  uint64_t total = M->mods[node].info.kept, kept = 0;
  char list[400] = "";
  for (int32_t i = t->first[node]; i < t->first[node + 1] && v->n_ckpt < MAX_GLOBS; i++) {
    const mb_module_info *x = &M->mods[t->kids[i]].info;
    if (!x->kept || x->kept < total / 10) continue;
    char glob[MAX_NAME];
    escape(glob, sizeof glob, x->path, strlen(x->path));
    if (!(v->ckpt[v->n_ckpt++] = mb_arena_strdup(&c->out->arena, glob))) return MB_E_NOMEM;
    arg(c, v, "--checkpoint", glob);
    kept += x->kept;
    size_t len = strlen(list);
    if (len + strlen(glob) + 8 < sizeof list) snprintf(list + len, sizeof list - len, "%s%s", len ? ", " : "", glob);
    else if (!strstr(list, ", ...")) snprintf(list + len, sizeof list - len, ", ...");
  }
  char k[32];
  snprintf(v->title, sizeof v->title, "activation checkpointing of %d modules (%s)", v->n_ckpt, list);
  snprintf(v->note, sizeof v->note, "they keep %s at the end of forward now; their forward runs again in backward",
           mb_fmt_bytes(k, sizeof k, kept));
  return MB_OK;
}

/* Outer blocks and inner blocks (a stage of blocks of layers) simulated both; the one with the
 * lower device peak at the batch is the line. */
static int checkpoint(ctx *c, const mb_modules *mods) {
  tree t;
  if (tree_init(&t, mods) != MB_OK) {
    tree_free(&t);
    return mb_fail(c->d, MB_E_NOMEM, "out of memory");
  }
  group *gs = NULL;
  int32_t n = 0;
  variant cand[2];
  int n_cand = 0, rc = find_groups(&t, &gs, &n);
  if (rc == MB_OK && n) {
    bool differ = false;
    for (int32_t i = 0; i < n; i++) differ |= gs[i].outer != gs[i].inner;
    rc = checkpoint_variant(c, &t, gs, n, true, &cand[n_cand++]);
    if (rc == MB_OK && differ) rc = checkpoint_variant(c, &t, gs, n, false, &cand[n_cand++]);
  } else if (rc == MB_OK) {
    rc = top_level_variant(c, &t, &cand[0]);
    n_cand = cand[0].n_ckpt ? 1 : 0;
  }
  free(gs);
  tree_free(&t);
  if (rc != MB_OK) return mb_fail(c->d, rc, "out of memory");
  mb_budget at[2], sol[2];
  bool solved[2], ok[2] = {false, false};
  int best = -1;
  for (int i = 0; i < n_cand; i++) {
    rc = simulate(c, &cand[i], &at[i], &sol[i], &solved[i]);
    if (rc == MB_E_NOMEM) return rc;
    ok[i] = rc == MB_OK;
    if (ok[i] && (best < 0 || at[i].device_peak < at[best].device_peak)) best = i;
  }
  if (best >= 0) remember(c, &cand[best]);
  if (best < 0 || at[best].device_peak >= c->base->device_peak) return MB_OK;
  c->blocks = cand[best];
  return add_line(c, &cand[best], &at[best], &sol[best], solved[best]);
}

/* ---- sharding over the ranks the setup already has (world_size) ---- */

/* FSDP2 with the checkpoint line's blocks as units (or the whole model as one), and ZeRO-3
 * (DeepSpeed gathers module by module), over the same ranks: both simulated, the one with the
 * lower device peak is the line. */
static int shard(ctx *c) {
  const mb_dist_opts *o = &c->s->train.dist;
  if (o->world_size <= 1 || (o->strategy != MB_STRATEGY_NONE && o->strategy != MB_STRATEGY_DDP)) return MB_OK;
  const mb_train *t = &c->s->train;
  char n[16];
  snprintf(n, sizeof n, "%d", (int)o->world_size);
  variant cand[2], *v = &cand[0];
  int n_cand = 1;
  init_variant(v, MB_ADVICE_SHARD);
  v->strategy = MB_STRATEGY_FSDP;
  arg(c, v, "--strategy", "fsdp");
  for (int i = 0; i < c->blocks.n_ckpt && i < MAX_GLOBS; i++) {
    v->wrap[v->n_wrap++] = c->blocks.ckpt[i];
    arg(c, v, "--fsdp-wrap", c->blocks.ckpt[i]);
  }
  snprintf(v->title, sizeof v->title, "FSDP (fully_shard) over %s GPUs%s", n, v->n_wrap ? ", a unit per block" : "");
  snprintf(v->note, sizeof v->note, "parameters, gradients and optimizer states sharded %s ways; each unit gathered "
           "for its forward and backward", n);
  if (!b_pure_half(t) || t->master_weights) {
    v = &cand[n_cand++];
    init_variant(v, MB_ADVICE_SHARD);
    v->strategy = MB_STRATEGY_ZERO3;
    arg(c, v, "--strategy", "zero3");
    snprintf(v->title, sizeof v->title, "DeepSpeed ZeRO-3 over %s GPUs", n);
    snprintf(v->note, sizeof v->note, "states, gradients and parameters partitioned; each module gathered as it runs; "
             "a %lld-element gradient reduction buffer", (long long)o->reduce_bucket_size);
  }
  mb_budget at[2], sol[2];
  bool solved[2];
  int best = -1;
  for (int i = 0; i < n_cand; i++) {
    int rc = simulate(c, &cand[i], &at[i], &sol[i], &solved[i]);
    if (rc == MB_E_NOMEM) return rc;
    if (rc == MB_OK && (best < 0 || at[i].device_peak < at[best].device_peak)) best = i;
  }
  if (best >= 0) remember(c, &cand[best]);
  if (best < 0 || at[best].device_peak >= c->base->device_peak) return MB_OK;
  return add_line(c, &cand[best], &at[best], &sol[best], solved[best]);
}

/* ---- freezing: a what-if ---- */

static int freeze(ctx *c, const mb_modules *mods) {
  mb_setup *s = c->s;
  const char *glob = s->report.advise_trainable;
  char head[MAX_NAME + 4];
  bool lora = false;
  if (!glob && (s->n_freeze || s->n_trainable)) return MB_OK; /* the setup already says what trains */
  if (!glob) {
    const mb_graph *g = c->m->graph;
    for (int32_t v = 0; v < g->n_values && !lora; v++)
      lora = g->values[v].kind == MB_VALUE_INITIALIZER && g->values[v].name &&
             mb_glob_match("*lora_*", g->values[v].name) && mb_setup_trains(s, g->values[v].name);
    if (lora) glob = "*lora_*";
  }
  if (!glob) { /* the last module in forward order that has trainable parameters */
    tree t;
    if (tree_init(&t, mods) != MB_OK) {
      tree_free(&t);
      return mb_fail(c->d, MB_E_NOMEM, "out of memory");
    }
    const mb_modules *M = mods;
    int32_t node = 0, pick = -1;
    for (;;) {
      int32_t with = 0, only = -1;
      for (int32_t i = t.first[node]; i < t.first[node + 1]; i++)
        if (M->mods[t.kids[i]].trainable) {
          with++;
          only = t.kids[i];
        }
      if (with != 1) break;
      node = only;
    }
    /* the last child with trainable parameters; while that holds most of them (the blocks of
     * an encoder without a head), its own last such child: the last block */
    for (int depth = 0; depth < 64; depth++) {
      int32_t last = -1;
      for (int32_t i = t.first[node]; i < t.first[node + 1]; i++) {
        const mb_module_entry *x = &M->mods[t.kids[i]];
        bool tiny = x->trainable * 1000 < M->mods[0].trainable; /* a final norm: no head */
        if (x->trainable && !tiny && (last < 0 || x->first_node > M->mods[last].first_node)) last = t.kids[i];
      }
      if (last < 0) break;
      pick = node = last;
      if (M->mods[last].trainable * 2 <= M->mods[0].trainable) break;
    }
    if (pick >= 0 && M->mods[pick].trainable < M->mods[0].trainable) {
      char path[MAX_NAME];
      escape(path, sizeof path, M->mods[pick].info.path, strlen(M->mods[pick].info.path));
      snprintf(head, sizeof head, "%s.*", path);
      glob = head;
    }
    tree_free(&t);
    if (!glob) return MB_OK;
  }
  variant v;
  init_variant(&v, MB_ADVICE_FREEZE);
  v.what_if = true;
  v.freeze = mb_arena_strdup(&c->out->arena, "*");
  v.trainable = mb_arena_strdup(&c->out->arena, glob);
  if (!v.freeze || !v.trainable) return mb_fail(c->d, MB_E_NOMEM, "out of memory");
  if (lora) {
    snprintf(v.title, sizeof v.title, "train only the LoRA adapters (%.400s)", glob);
    snprintf(v.note, sizeof v.note, "a what-if: the base model frozen, as peft's get_peft_model sets it up, changes "
             "what the model learns");
  } else {
    snprintf(v.title, sizeof v.title, "train only %.400s", glob);
    snprintf(v.note, sizeof v.note, "a what-if: everything else frozen (LoRA-style fine-tuning) changes what the "
             "model learns");
  }
  arg(c, &v, "--freeze", "*");
  arg(c, &v, "--trainable", glob);
  return consider(c, &v);
}

/* ---- the advice ---- */

static int by_saving(const void *pa, const void *pb) {
  const mb_advice_line *x = pa, *y = pb;
  if (x->device_peak != y->device_peak) return x->device_peak < y->device_peak ? -1 : 1;
  return (x->kind > y->kind) - (x->kind < y->kind);
}

int mb_advice_build(const mb_model *m, mb_setup *s, const mb_plan *p, const mb_budget *base, mb_advice **out,
                    mb_diag *d) {
  *out = NULL;
  mb_advice *a = calloc(1, sizeof *a);
  if (!a) return mb_fail(d, MB_E_NOMEM, "out of memory");
  mb_arena_init(&a->arena);
  a->baseline = *base;
  ctx c = {.m = m, .s = s, .base = &a->baseline, .out = a, .d = d};
  mb_modules *mods = NULL;
  if (mb_modules_build(p, s, base->batch_size, &mods, d) == MB_OK && precision(&c) == MB_OK &&
      checkpoint(&c, mods) == MB_OK && optimizer(&c) == MB_OK && for_loop_step(&c) == MB_OK &&
      attention(&c) == MB_OK && accumulation(&c) == MB_OK && teacher_offload(&c) == MB_OK && shard(&c) == MB_OK &&
      pairs(&c) == MB_OK && freeze(&c, mods) == MB_OK && a->n > 1)
    qsort(a->lines, (size_t)a->n, sizeof *a->lines, by_saving); /* (no lines: NULL, which qsort may not take) */
  mb_modules_free(mods);
  if (d->status != MB_OK) {
    mb_advice_free(a);
    return d->status;
  }
  *out = a;
  return MB_OK;
}

MB_API int mb_advise(const mb_model *m, mb_setup *s, mb_advice **out) {
  if (!out || !s) return MB_E_INVALID_ARG;
  *out = NULL;
  s->errmsg[0] = '\0';
  if (!m || !m->graph) {
    snprintf(s->errmsg, sizeof s->errmsg, "mb_advise: no model");
    return MB_E_INVALID_ARG;
  }
  mb_diag d;
  mb_diag_init(&d);
  mb_plan *p = NULL;
  mb_budget base;
  if (mb_setup_plan_build(m, s, &p, &d) == MB_OK && mb_estimate_plan(p, s, &base, &d) == MB_OK)
    mb_advice_build(m, s, p, &base, out, &d);
  mb_plan_free(p);
  if (d.status != MB_OK) snprintf(s->errmsg, sizeof s->errmsg, "%s", d.msg);
  return d.status;
}

MB_API void mb_advice_free(mb_advice *a) {
  if (!a) return;
  free(a->lines);
  mb_arena_destroy(&a->arena);
  free(a);
}

MB_API int mb_advice_baseline(const mb_advice *a, mb_budget *out) {
  if (!a || !out) return MB_E_INVALID_ARG;
  return mb_fill_versioned(out, &a->baseline, sizeof a->baseline, offsetof(mb_budget, at_peak)) ? MB_E_INVALID_ARG
                                                                                                 : MB_OK;
}

MB_API size_t mb_advice_num(const mb_advice *a) { return a ? (size_t)a->n : 0; }

MB_API int mb_advice_get(const mb_advice *a, size_t i, mb_advice_line *out) {
  if (!a || !out) return MB_E_INVALID_ARG;
  if (i >= (size_t)a->n) return MB_E_RANGE;
  return mb_fill_versioned(out, &a->lines[i], sizeof a->lines[i], sizeof a->lines[i]) ? MB_E_INVALID_ARG : MB_OK;
}
