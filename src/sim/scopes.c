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

/* Frame `level` (0 = the root module's forward) of the forward frames in frames: line and
 * target; false when the stack has no such frame. Non-forward frames (helper functions) are
 * skipped; the forwards are matched to the module levels from the innermost. */
static bool frame_at(const char *frames, int32_t levels, int32_t level, long *line, const char **target,
                     size_t *target_len) {
  int32_t count = 0;
  for (const char *p = frames; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p))
    if (!strncmp(p, "forward:", 8)) count++;
  int32_t want = count - levels + level; /* the innermost forward is the innermost level */
  if (want < 0 || level >= levels) return false;
  int32_t k = 0;
  for (const char *p = frames; *p;) {
    const char *eol = strchr(p, '\n');
    if (!eol) return false;
    if (!strncmp(p, "forward:", 8) && k++ == want) {
      char *rest;
      *line = strtol(p + 8, &rest, 10);
      if (*rest != ':') return false;
      *target = rest + 1;
      *target_len = (size_t)(eol - rest - 1);
      return true;
    }
    p = eol + 1;
  }
  return false;
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
  long line;
  const char *target;
  size_t target_len;
} stmt;

/* Hold each bound local's storage until it is rebound or its module returns. */
static int local_holds(mb_builder *b, mb_model_state *ms, const int32_t *producer, int32_t *until, int32_t *n) {
  int32_t max_levels = 0;
  for (int32_t i = 0; i < ms->n_ln; i++) {
    const mb_origin *o = &ms->g->nodes[ms->ln[i].node].origin;
    if (o->frames && o->scope && scope_levels(o->scope) > max_levels) max_levels = scope_levels(o->scope);
  }
  stmt *st = max_levels ? malloc((size_t)ms->n_ln * sizeof *st) : NULL;
  if (max_levels && !st) return mb_fail(b->d, MB_E_NOMEM, "out of memory");
  for (int32_t level = 0; level < max_levels; level++) {
    /* regions: runs of lnodes inside one call of the module at this level */
    for (int32_t i = 0; i < ms->n_ln;) {
      const mb_origin *o = &ms->g->nodes[ms->ln[i].node].origin;
      if (!o->scope || !o->frames || scope_levels(o->scope) <= level) {
        i++;
        continue;
      }
      size_t plen = level_prefix(o->scope, level);
      int32_t end = i, n_st = 0;
      while (end < ms->n_ln) {
        const mb_origin *q = &ms->g->nodes[ms->ln[end].node].origin;
        if (!q->scope || !q->frames || scope_levels(q->scope) <= level || strncmp(q->scope, o->scope, plen) ||
            q->scope[plen] != '/')
          break;
        long line;
        const char *t;
        size_t tl;
        if (!frame_at(q->frames, scope_levels(q->scope), level, &line, &t, &tl)) break;
        /* one statement execution: the same line, and no return from a child call into
         * another one (`for blk in blocks: h = blk(h)` runs the line once per block, while
         * `h = blk(torch.cat([h, s]))` runs cat in the module itself, then blk) */
        bool own = scope_levels(q->scope) == level + 1; /* a node of this module itself */
        size_t child = level_prefix(q->scope, level + 1);
        bool same = n_st && st[n_st - 1].line == line;
        if (same) {
          const char *prev = ms->g->nodes[ms->ln[st[n_st - 1].last].node].origin.scope;
          bool prev_own = scope_levels(prev) == level + 1;
          size_t pchild = level_prefix(prev, level + 1);
          same = prev_own ? true : !own && pchild == child && !strncmp(prev, q->scope, child);
        }
        if (same) st[n_st - 1].last = end;
        else st[n_st++] = (stmt){end, end, line, t, tl};
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
      for (int32_t j = c + 1; j < ms->n_ln; j++) { /* the module's nodes; unscoped ones are skipped */
        const char *jn = lnode_name(ms, j);
        if (!jn) continue;
        if (strncmp(jn, cn, m) != 0 || jn[m] != '/') break;
        end = j;
      }
      if (end > until[s]) {
        if (until[s] < 0) n++;
        until[s] = end;
      }
    }
  }
  if (local_holds(b, ms, producer, until, &n) != MB_OK) return b->d->status;
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
