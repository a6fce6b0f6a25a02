/* Module arguments live until the module returns.
 *
 * A tensor passed to a module's forward is referenced by the caller (`x = self.layer1(x)`
 * keeps the old x in the caller's frame, nn.Sequential's loop variable does the same) until
 * the call returns, however early the callee reads it for the last time. With grad most such
 * tensors are kept for backward anyway; in a frozen or no-grad forward (a frozen backbone, a
 * teacher) this is what decides the transient peak: ResNet's maxpool output stays alive
 * through all of layer1.
 *
 * Modules are the call scopes of each node (mb_origin.scope: the TorchScript node name
 * "/layer1/layer1.0/conv1/Conv" runs in /layer1/layer1.0/conv1; torch 2.x's name_scopes give
 * the same chain). A value produced in scope P and read by a node in scope C enters the module
 * M: the common prefix of P and C plus C's next component. It is held until the last node of
 * M, which is contiguous in execution (and so in node) order. Graphs without scopes get no
 * extension. */
#include <stdlib.h>
#include <string.h>

#include "sim/build.h"

static const char *lnode_name(const mb_model_state *ms, int32_t i) {
  const char *n = ms->g->nodes[ms->ln[i].node].origin.scope;
  return n && n[0] == '/' ? n : NULL;
}

/* Length of the scope of a node name: up to (not including) its last '/'. */
static size_t scope_len(const char *name) {
  const char *slash = strrchr(name, '/');
  return slash ? (size_t)(slash - name) : 0;
}

/* The module a value produced by node `pn` enters when node `cn` reads it, as a prefix length
 * of cn; 0 when it enters none (same scope, or reads from an enclosing scope's value). */
static size_t entered_module(const char *pn, const char *cn) {
  size_t ps = scope_len(pn), cs = scope_len(cn), common = 0;
  for (size_t i = 1; i <= ps && i <= cs; i++) { /* common prefix at component boundaries */
    if (pn[i - 1] != cn[i - 1]) break;
    if ((i == ps || pn[i] == '/') && (i == cs || cn[i] == '/')) common = i;
  }
  if (common >= cs) return 0;
  const char *next = strchr(cn + common + 1, '/');
  size_t m = next ? (size_t)(next - cn) : cs;
  return m <= cs ? m : 0;
}


/* ---- Python locals ----
 * A tensor a module's forward binds to a local (`h = self.mid(h)`) lives until that local is
 * bound again or the forward returns, however early its last reader ran: UNet's
 * `h = blk(torch.cat([h, skip]))` keeps the old h through all of blk. torch 2.x exports record
 * each node's stack (mb_origin.frames): the module forwards from the root to the node's own,
 * each with its line and the local its statement assigns. Without stacks nothing is held. */

typedef struct frame_info {
  int32_t index;              /* its position in the stack */
  long line, c0, c1;          /* c0 == c1: no caret line (the expression is the whole line) */
  const char *target;
  size_t target_len;
} frame_info;

typedef struct frame_rec {
  const char *fn, *file, *target;
  size_t fn_len, file_len, target_len, offset; /* offset: of its line in the frames text */
  long line, c0, c1;
  bool forward;  /* a module's forward */
} frame_rec;

enum { MAX_STACK = 128, MAX_LEVELS = 64 };

/* The frames of a recorded stack (origin.c: "fn:line:c0:c1:target:file\n" each), outermost
 * first; -1 when malformed. */
static int32_t parse_frames(const char *frames, frame_rec *fr) {
  int32_t n = 0;
  for (const char *p = frames; *p && n < MAX_STACK;) {
    const char *eol = strchr(p, '\n');
    if (!eol) return -1;
    const char *f[6];
    size_t fl[6];
    const char *q = p;
    for (int k = 0; k < 6; k++) { /* the file is the rest of the line */
      const char *c = k < 5 ? memchr(q, ':', (size_t)(eol - q)) : eol;
      if (!c) return -1;
      f[k] = q;
      fl[k] = (size_t)(c - q);
      q = c + 1;
    }
    fr[n] = (frame_rec){f[0], f[5], f[4], fl[0], fl[5], fl[4], (size_t)(p - frames), strtol(f[1], NULL, 10),
                        strtol(f[2], NULL, 10), strtol(f[3], NULL, 10), fl[0] == 7 && !memcmp(f[0], "forward", 7)};
    n++;
    p = eol + 1;
  }
  return n;
}

static bool fn_is(const frame_rec *f, const char *name) {
  return f->fn_len == strlen(name) && !memcmp(f->fn, name, f->fn_len);
}

static bool torch_module(const char *mod, size_t ml) { return ml >= 6 && !memcmp(mod, "torch.", 6); }
static bool torch_file(const frame_rec *f) { return f->file_len >= 6 && !memcmp(f->file, "torch/", 6); }

/* A recorded stack and its module classes, read once for every lnode that shares them (the
 * strings are interned, so equal texts are one pointer): a 70B decoder has tens of thousands of
 * lnodes and a few hundred distinct stacks, and local_holds asks for a frame of each lnode at
 * every level. */
typedef struct stack_info {
  const char *frames, *classes; /* the key */
  int32_t n;                    /* frames in fr, -1 when malformed */
  frame_rec *fr;
  int32_t n_cls;                /* lines of classes; -1 without classes */
  const char *mods[64];         /* the first 64 lines (frame_at wants no more) */
  size_t ml[64];
  int32_t by_level_for;         /* the scope depth by_level was found for, -1: none */
  int32_t by_level[MAX_LEVELS]; /* frame_at's frame of each level at that depth, -1: none */
} stack_info;

typedef struct stacks {
  stack_info *info;   /* distinct (frames, classes) pairs */
  int32_t n, cap;
  int32_t *of_lnode;  /* lnode -> index into info, -1 without frames */
  int32_t *levels;    /* lnode -> scope_levels of its scope, -1 without one */
} stacks;

static int32_t scope_levels(const char *scope);

static int read_stack(stack_info *si, const char *frames, const char *classes) {
  frame_rec fr[MAX_STACK];
  si->frames = frames;
  si->classes = classes;
  si->by_level_for = -1;
  si->n = parse_frames(frames, fr);
  si->fr = NULL;
  if (si->n > 0) {
    si->fr = malloc((size_t)si->n * sizeof *si->fr);
    if (!si->fr) return MB_E_NOMEM;
    memcpy(si->fr, fr, (size_t)si->n * sizeof *si->fr);
  }
  si->n_cls = -1;
  if (!classes) return MB_OK;
  si->n_cls = 0;
  for (const char *c = classes; *c; c++) si->n_cls += *c == '\n';
  const char *c = classes;
  for (int32_t k = 0; k < si->n_cls && k < 64; k++) {
    const char *eol = strchr(c, '\n');
    si->mods[k] = c;
    si->ml[k] = (size_t)(eol - c);
    c = eol + 1;
  }
  return MB_OK;
}

static void stacks_free(stacks *st) {
  for (int32_t i = 0; i < st->n; i++) free(st->info[i].fr);
  free(st->info);
  free(st->of_lnode);
  free(st->levels);
  memset(st, 0, sizeof *st);
}

/* Every lnode's stack, read once per distinct (frames, classes) pair, and its scope's depth. */
static int stacks_read(const mb_model_state *ms, stacks *st) {
  memset(st, 0, sizeof *st);
  size_t cap = 16;
  while (cap < 2 * (size_t)ms->n_ln + 1) cap *= 2;
  int32_t *table = malloc(cap * sizeof *table); /* open addressing: index into info, -1 empty */
  st->of_lnode = malloc(((size_t)ms->n_ln + 1) * sizeof *st->of_lnode);
  st->levels = malloc(((size_t)ms->n_ln + 1) * sizeof *st->levels);
  if (!table || !st->of_lnode || !st->levels) {
    free(table);
    return MB_E_NOMEM;
  }
  for (size_t i = 0; i < cap; i++) table[i] = -1;
  int rc = MB_OK;
  for (int32_t i = 0; i < ms->n_ln && rc == MB_OK; i++) {
    const mb_origin *o = &ms->g->nodes[ms->ln[i].node].origin;
    st->of_lnode[i] = -1;
    st->levels[i] = o->scope ? scope_levels(o->scope) : -1;
    if (!o->frames) continue;
    uint64_t h = ((uint64_t)(uintptr_t)o->frames * 0x9e3779b97f4a7c15ull) ^ (uint64_t)(uintptr_t)o->classes;
    h *= 0xff51afd7ed558ccdull;
    size_t slot = (size_t)(h >> 32) & (cap - 1);
    while (table[slot] >= 0 &&
           (st->info[table[slot]].frames != o->frames || st->info[table[slot]].classes != o->classes))
      slot = (slot + 1) & (cap - 1);
    if (table[slot] < 0) {
      if (st->n == st->cap) {
        int32_t c2 = st->cap ? st->cap * 2 : 64;
        stack_info *grown = realloc(st->info, (size_t)c2 * sizeof *grown);
        if (!grown) {
          rc = MB_E_NOMEM;
          break;
        }
        st->info = grown;
        st->cap = c2;
      }
      rc = read_stack(&st->info[st->n], o->frames, o->classes);
      st->n++;
      table[slot] = st->n - 1;
    }
    st->of_lnode[i] = table[slot];
  }
  free(table);
  return rc;
}

/* Frame `level` (0 = the root module's forward) of a node's recorded stack: the forward of the
 * module at that level; false when the stack has none. The stack holds the forwards of the
 * modules it runs in, innermost last, and wrappers outside the root (membudget's output
 * selector, the exporter's own); a strict (dynamo) export leaves out the frames of torch's own
 * modules (nn.Sequential, nn.Embedding, in files under torch/). So with the module classes
 * known (origin.classes) the levels take the forwards from the innermost, except that a torch
 * module whose next frame is not in torch's files has none; without classes the forwards are
 * matched to the module levels from the innermost. */
static int32_t frame_index(const stack_info *si, int32_t levels, int32_t level) {
  const frame_rec *fr = si->fr;
  int32_t n = si->n;
  if (n < 0) return -1;
  int32_t want = -1;
  if (si->n_cls >= 0 && si->n_cls == levels) {
    if (levels > 64) return -1;
    int32_t j = n - 1;
    for (int32_t l = levels - 1; l >= level; l--) {
      while (j >= 0 && !fr[j].forward) j--;
      bool frameless = j < 0 || (torch_module(si->mods[l], si->ml[l]) && !torch_file(&fr[j]));
      if (l == level) want = frameless ? -1 : j;
      if (!frameless) j--;
    }
  } else {
    int32_t count = 0;
    for (int32_t k = 0; k < n; k++) count += fr[k].forward;
    int32_t nth = count - levels + level; /* the innermost forward is the innermost level */
    if (nth < 0 || level >= levels) return -1;
    for (int32_t k = 0, seen = 0; k < n; k++)
      if (fr[k].forward && seen++ == nth) want = k;
  }
  return want;
}

static bool frame_at(stack_info *si, int32_t levels, int32_t level, frame_info *fi) {
  int32_t want;
  if (levels <= MAX_LEVELS && level >= 0 && level < levels) { /* every level's, once per stack and depth */
    if (si->by_level_for != levels) {
      for (int32_t l = 0; l < levels; l++) si->by_level[l] = frame_index(si, levels, l);
      si->by_level_for = levels;
    }
    want = si->by_level[level];
  } else {
    want = frame_index(si, levels, level);
  }
  if (want < 0) return false;
  const frame_rec *fr = si->fr;
  fi->index = want;
  fi->line = fr[want].line;
  fi->c0 = fr[want].c0;
  fi->c1 = fr[want].c1;
  fi->target = fr[want].target;
  fi->target_len = fr[want].target_len;
  return true;
}

/* The number of modules a scope runs in (its components before the node's own name), and the
 * length of the prefix naming the module at `level` (1 = the root's first child). */
static int32_t scope_levels(const char *scope) {
  int32_t n = 0;
  for (const char *p = scope; *p; p++) n += *p == '/';
  return n; /* "/a/b/node": the root, a, b */
}

static size_t level_prefix(const char *scope, int32_t level) {
  size_t len = 0;
  for (int32_t k = 0; k < level; k++) {
    const char *next = strchr(scope + len + 1, '/');
    if (!next) return strlen(scope);
    len = (size_t)(next - scope);
  }
  return len;
}

typedef struct stmt {
  int32_t first, last;      /* lnodes of one execution of one statement */
  long line, c0, c1;        /* c0, c1: the caret columns of its last lnode's frame */
  const char *target;
  size_t target_len;
} stmt;

/* The last component of a scope prefix of length len ("/features/1/0" -> "0"). */
static const char *last_component(const char *scope, size_t len, size_t *n) {
  size_t i = len;
  while (i > 0 && scope[i - 1] != '/') i--;
  *n = len - i;
  return scope + i;
}

/* Two items of one container, told by their names: "0" and "3", "layer1.0" and "layer1.1". */
static bool container_items(const char *a, size_t an, const char *b, size_t bn) {
  size_t ad = an, bd = bn;
  while (ad > 0 && a[ad - 1] >= '0' && a[ad - 1] <= '9') ad--;
  while (bd > 0 && b[bd - 1] >= '0' && b[bd - 1] <= '9') bd--;
  return ad < an && bd < bn && ad == bd && !memcmp(a, b, ad) && (ad == 0 || a[ad - 1] == '.');
}

/* Did the execution st already run what lnode q runs: the same op in the module itself (own),
 * or a call of the same child module or of another item of its container? */
static bool made_before(const mb_model_state *ms, const stacks *sk, const stmt *st, int32_t q, int32_t level, bool own,
                        size_t child) {
  const mb_origin *cur = &ms->g->nodes[ms->ln[q].node].origin;
  size_t cn;
  const char *cc = last_component(cur->scope, child, &cn);
  for (int32_t i = st->first; i <= st->last; i++) {
    const mb_origin *o = &ms->g->nodes[ms->ln[i].node].origin;
    if (!o->scope) continue;
    bool o_own = sk->levels[i] == level + 1;
    if (own && o_own && o->fx && cur->fx && !strcmp(o->fx, cur->fx)) return true;
    if (own || o_own) continue;
    size_t on, ol = level_prefix(o->scope, level + 1);
    const char *oc = last_component(o->scope, ol, &on);
    if ((on == cn && !memcmp(oc, cc, cn)) || container_items(oc, on, cc, cn)) return true;
  }
  return false;
}

/* Does lnode q (at `level`, frame fi) continue the statement execution st, whose last lnode
 * is prev? Python evaluates a statement's sub-expressions inner before outer and left to
 * right, so within one execution each expression the traceback's carets mark encloses the
 * previous one or lies right of it; one inside or left of the previous starts the next
 * execution (`for conv in convs: h = F.elu(conv(h))`: conv's call, then elu's around it, then
 * the next conv's inside it). The same expression again is the same call when it is one op or
 * one child module's call. Without carets (Python before 3.11, an expression that is the whole
 * line, or an exporter that records none, as torch 2.x's dynamo exporter does): the same line,
 * and nothing this execution already did again: no op of the module itself that it already
 * ran after a child call, no child module it already called, nor another item of that child's
 * container (`for blk in blocks: h = blk(h)` runs the line once per block; `h =
 * self.conv1(F.silu(self.norm1(x)))` is norm1, silu and conv1 in one execution, as is `x = x +
 * self.stochastic_depth(self.attn(self.norm1(x)))`; `for _ in range(n): h =
 * self.lin(F.relu(h))` is relu, lin, then relu again: the next execution). */
static bool same_execution(const mb_model_state *ms, const stacks *sk, const stmt *st, int32_t q, int32_t level,
                           const frame_info *fi) {
  if (st->line != fi->line) return false;
  const mb_origin *prev = &ms->g->nodes[ms->ln[st->last].node].origin, *cur = &ms->g->nodes[ms->ln[q].node].origin;
  bool own = sk->levels[q] == level + 1, prev_own = sk->levels[st->last] == level + 1;
  size_t child = level_prefix(cur->scope, level + 1), pchild = level_prefix(prev->scope, level + 1);
  bool same_child = !own && !prev_own && pchild == child && !strncmp(prev->scope, cur->scope, child);
  if (st->c1 > st->c0 && fi->c1 > fi->c0) {
    if (fi->c0 == st->c0 && fi->c1 == st->c1)
      return own && prev_own ? cur->fx == prev->fx : own != prev_own || same_child;
    bool inside = fi->c0 >= st->c0 && fi->c1 <= st->c1, left = fi->c1 <= st->c0;
    return !inside && !left;
  }
  if (same_child || (own && prev_own)) return true;
  return !made_before(ms, sk, st, q, level, own, child);
}

/* Hold each bound local's storage until it is rebound or its module returns. */
static int local_holds(mb_builder *b, mb_model_state *ms, stacks *sk, const int32_t *producer, int32_t *until,
                       int32_t *n) {
  int32_t max_levels = 0;
  for (int32_t i = 0; i < ms->n_ln; i++) {
    const mb_origin *o = &ms->g->nodes[ms->ln[i].node].origin;
    if (o->frames && o->scope && sk->levels[i] > max_levels) max_levels = sk->levels[i];
  }
  stmt *st = max_levels ? malloc((size_t)ms->n_ln * sizeof *st) : NULL;
  if (max_levels && !st) return mb_fail(b->d, MB_E_NOMEM, "out of memory");
  for (int32_t level = 0; level < max_levels; level++) {
    /* regions: runs of lnodes inside one call of the module at this level */
    for (int32_t i = 0; i < ms->n_ln;) {
      const mb_origin *o = &ms->g->nodes[ms->ln[i].node].origin;
      if (!o->scope || !o->frames || sk->levels[i] <= level) {
        i++;
        continue;
      }
      size_t plen = level_prefix(o->scope, level);
      int32_t end = i, n_st = 0, depth = -1;
      while (end < ms->n_ln) {
        const mb_origin *q = &ms->g->nodes[ms->ln[end].node].origin;
        if (!q->scope || !q->frames || sk->levels[end] <= level || strncmp(q->scope, o->scope, plen) ||
            q->scope[plen] != '/')
          break;
        frame_info fi;
        if (!frame_at(&sk->info[sk->of_lnode[end]], sk->levels[end], level, &fi)) break;
        /* the module's forward at another depth of the stack: a forward the first one called
         * (`return loss(super().forward(x))`) has returned, or another has begun */
        if (depth >= 0 && fi.index != depth) break;
        depth = fi.index;
        if (n_st && same_execution(ms, sk, &st[n_st - 1], end, level, &fi)) {
          st[n_st - 1].last = end;
          st[n_st - 1].c0 = fi.c0;
          st[n_st - 1].c1 = fi.c1;
        } else {
          st[n_st++] = (stmt){end, end, fi.line, fi.c0, fi.c1, fi.target, fi.target_len};
        }
        end++;
      }
      if (end == i) end = i + 1;
      for (int32_t k = 0; k < n_st; k++) {
        if (!st[k].target_len) continue;
        const mb_lnode *ln = &ms->ln[st[k].last];
        int32_t v = ln->n_out ? ln->out[0] : -1;
        if (v < 0 || ms->host[v] || producer[v] < 0) continue;
        int32_t s = ms->slot_of[v];
        if (s < 0 || b->p->slots[s].refs == MB_PERSISTENT) continue;
        int32_t hold_end = end - 1; /* the module returns */
        for (int32_t r = k + 1; r < n_st; r++)
          if (st[r].target_len == st[k].target_len && !memcmp(st[r].target, st[k].target, st[k].target_len)) {
            hold_end = st[r].last; /* bound again once that statement ran */
            break;
          }
        if (hold_end > until[s]) {
          if (until[s] < 0) (*n)++;
          until[s] = hold_end;
        }
      }
      i = end;
    }
  }
  free(st);
  return MB_OK;
}

/* ---- PyTorch Geometric's message passing ----
 * MessagePassing.propagate (and edge_updater) first calls collect, which lifts the node
 * tensors to the edges (`x_j = self._index_select(x, edge_index_j)`) and returns them in a
 * tuple that propagate keeps in `kwargs` until it returns (torch_geometric/nn/conv/
 * propagate.jinja, collect.jinja): x_j lives through message, aggregate and update even when
 * no backward keeps it (GCNConv's x_j when the edge weights need no grad). Each local that a
 * statement of collect binds is held until the propagate call's last node. */
static bool passes_messages(const frame_rec *fr, int32_t n, int32_t *k) {
  for (int32_t i = 0; i + 1 < n; i++)
    if ((fn_is(&fr[i], "propagate") || fn_is(&fr[i], "edge_updater")) && fr[i + 1].fn_len >= 7 &&
        !memcmp(fr[i + 1].fn + fr[i + 1].fn_len - 7, "collect", 7)) {
      *k = i;
      return true;
    }
  return false;
}

/* Does lnode j run inside the same propagate call (frame k of frames, text before it `key`)? */
static bool in_call(const mb_model_state *ms, int32_t j, const char *key, size_t key_len, const char *fn, size_t fn_len,
                    const char *mod, size_t mod_len) {
  const mb_origin *o = &ms->g->nodes[ms->ln[j].node].origin;
  if (!o->frames || !o->scope || strncmp(o->scope, mod, mod_len) || o->scope[mod_len] != '/') return false;
  if (strncmp(o->frames, key, key_len)) return false;
  const char *p = o->frames + key_len;
  return !strncmp(p, fn, fn_len) && p[fn_len] == ':';
}

static void message_passing_holds(mb_builder *b, mb_model_state *ms, const stacks *sk, const int32_t *producer,
                                  int32_t *until, int32_t *n_holds) {
  for (int32_t i = 0; i < ms->n_ln;) {
    const mb_origin *o = &ms->g->nodes[ms->ln[i].node].origin;
    const stack_info *si = o->frames && o->scope ? &sk->info[sk->of_lnode[i]] : NULL;
    const frame_rec *fr = si ? si->fr : NULL;
    int32_t n = si ? si->n : -1, k;
    if (n < 0 || !passes_messages(fr, n, &k)) {
      i++;
      continue;
    }
    const char *key = o->frames, *fn = fr[k].fn, *mod = o->scope;
    size_t key_len = fr[k].offset, fn_len = fr[k].fn_len, mod_len = scope_len(o->scope);
    int32_t end = i;
    while (end + 1 < ms->n_ln && in_call(ms, end + 1, key, key_len, fn, fn_len, mod, mod_len)) end++;
    /* collect's statements: the last lnode of each run of one line binds its target */
    for (int32_t j = i; j <= end; j++) {
      const stack_info *qs = &sk->info[sk->of_lnode[j]];
      const frame_rec *qf = qs->fr;
      int32_t qn = qs->n;
      if (qn <= k + 1 || qf[k].fn_len != fn_len || memcmp(qf[k].fn, fn, fn_len) || qf[k + 1].fn_len < 7 ||
          memcmp(qf[k + 1].fn + qf[k + 1].fn_len - 7, "collect", 7) || !qf[k + 1].target_len)
        continue;
      if (j < end) {
        const stack_info *ns = &sk->info[sk->of_lnode[j + 1]];
        const frame_rec *nf = ns->fr;
        int32_t nn = ns->n;
        if (nn > k + 1 && nf[k + 1].line == qf[k + 1].line && fn_is(&nf[k + 1], "collect") == fn_is(&qf[k + 1], "collect"))
          continue; /* the statement goes on */
      }
      const mb_lnode *ln = &ms->ln[j];
      int32_t v = ln->n_out ? ln->out[0] : -1;
      if (v < 0 || ms->host[v] || producer[v] < 0) continue;
      int32_t s = ms->slot_of[v];
      if (s < 0 || b->p->slots[s].refs == MB_PERSISTENT) continue;
      if (end > until[s]) {
        if (until[s] < 0) (*n_holds)++;
        until[s] = end;
      }
    }
    i = end + 1;
  }
}

int mb_module_holds(mb_builder *b, int model, mb_hold **out, int32_t *n_out) {
  mb_model_state *ms = &b->ms[model];
  const mb_graph *g = ms->g;
  *out = NULL;
  *n_out = 0;
  int32_t *producer = mb_arena_array(&b->a, (size_t)g->n_values + 1, sizeof(int32_t));
  int32_t *until = mb_arena_array(&b->a, (size_t)b->p->n_slots + 1, sizeof(int32_t));
  if (!producer || !until) return mb_fail(b->d, MB_E_NOMEM, "out of memory");
  for (int32_t v = 0; v < g->n_values; v++) producer[v] = -1;
  for (int32_t s = 0; s < b->p->n_slots; s++) until[s] = -1;
  for (int32_t i = 0; i < ms->n_ln; i++)
    for (int32_t j = 0; j < ms->ln[i].n_out; j++)
      if (ms->ln[i].out[j] >= 0) producer[ms->ln[i].out[j]] = i;

  int32_t n = 0;
  /* the last module run scanned: lnodes up to run_end are in the module run_name[0..run_len)
   * (a layer's inputs enter it at many nodes; scanning to its end for each was quadratic) */
  const char *run_name = NULL;
  size_t run_len = 0;
  int32_t run_end = -1;
  for (int32_t c = 0; c < ms->n_ln; c++) {
    const char *cn = lnode_name(ms, c);
    if (!cn) continue;
    const mb_lnode *ln = &ms->ln[c];
    for (int32_t k = 0; k < ln->n_in; k++) {
      int32_t v = ln->in[k];
      if (v < 0 || producer[v] < 0 || ms->host[v]) continue;
      int32_t s = ms->slot_of[v];
      if (s < 0 || b->p->slots[s].refs == MB_PERSISTENT) continue;
      const char *pn = lnode_name(ms, producer[v]);
      size_t m = pn ? entered_module(pn, cn) : 0;
      if (!m) continue;
      int32_t end = c;
      if (c <= run_end && m == run_len && !strncmp(cn, run_name, m)) {
        end = run_end; /* inside the module run found last: it ends where that one did */
      } else {
        for (int32_t j = c + 1; j < ms->n_ln; j++) { /* the module's nodes; unscoped ones are skipped */
          const char *jn = lnode_name(ms, j);
          if (!jn) continue;
          if (strncmp(jn, cn, m) != 0 || jn[m] != '/') break;
          end = j;
        }
        run_name = cn;
        run_len = m;
        run_end = end;
      }
      if (end > until[s]) {
        if (until[s] < 0) n++;
        until[s] = end;
      }
    }
  }
  stacks sk;
  if (stacks_read(ms, &sk) != MB_OK) {
    stacks_free(&sk);
    return mb_fail(b->d, MB_E_NOMEM, "out of memory");
  }
  int rc = local_holds(b, ms, &sk, producer, until, &n);
  if (rc == MB_OK) message_passing_holds(b, ms, &sk, producer, until, &n);
  stacks_free(&sk);
  if (rc != MB_OK) return b->d->status;
  if (!n) return MB_OK;
  mb_hold *h = mb_arena_array(&b->a, (size_t)n, sizeof(mb_hold));
  if (!h) return mb_fail(b->d, MB_E_NOMEM, "out of memory");
  int32_t k = 0;
  for (int32_t s = 0; s < b->p->n_slots && k < n; s++)
    if (until[s] >= 0) h[k++] = (mb_hold){.slot = s, .until = until[s]};
  *out = h;
  *n_out = k;
  return MB_OK;
}
