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
