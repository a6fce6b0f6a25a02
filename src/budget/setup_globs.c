/* The setup's globs against the model: one that names nothing is a typo, not a choice, and
 * estimating without it would answer a question the user did not ask (issue 30, item 6). A
 * freeze, trainable or advise_trainable glob must match a weight (an initializer's name); a
 * checkpoint or
 * fsdp_wrap glob a module (a dotted module path the graph records, or, for a glob starting
 * with '/', the scope form of a TorchScript node name, as sim/plan.c matches them). The error
 * names the glob and the nearest names the model has. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "budget/setup.h"
#include "graph/graph.h"
#include "graph/origin.h"
#include "util/glob.h"

#define NEAREST 3

/* the bytes before the first wildcard, the part of a glob a near name shares */
static size_t literal_prefix(const char *glob) { return strcspn(glob, "*?["); }

static size_t common(const char *a, size_t n, const char *b) {
  size_t k = 0;
  while (k < n && a[k] && a[k] == b[k]) k++;
  return k;
}

typedef struct nearest {
  char name[NEAREST][160]; /* copies: module paths are built in buffers that change */
  size_t score[NEAREST];
  int n;
} nearest;

static void consider(nearest *nr, const char *glob, const char *name) {
  size_t s = common(glob, literal_prefix(glob), name);
  for (int i = 0; i < nr->n; i++)
    if (!strcmp(nr->name[i], name)) return;
  int at = nr->n;
  while (at > 0 && nr->score[at - 1] < s) at--;
  if (at >= NEAREST) return;
  int last = nr->n < NEAREST ? nr->n : NEAREST - 1;
  for (int i = last; i > at; i--) {
    memcpy(nr->name[i], nr->name[i - 1], sizeof nr->name[i]);
    nr->score[i] = nr->score[i - 1];
  }
  snprintf(nr->name[at], sizeof nr->name[at], "%s", name);
  nr->score[at] = s;
  if (nr->n < NEAREST) nr->n++;
}

static int no_match(mb_diag *d, const char *key, const char *glob, const char *what, const nearest *nr) {
  char near[400] = "";
  size_t len = 0;
  for (int i = 0; i < nr->n && len + 1 < sizeof near; i++)
    len += (size_t)snprintf(near + len, sizeof near - len, "%s'%s'", i ? ", " : "", nr->name[i]);
  if (len >= sizeof near) len = sizeof near - 1;
  return mb_fail(d, MB_E_INVALID_ARG, "%s '%s' matches no %s of the model%s%s%s", key, glob, what,
                 nr->n ? " (nearest: " : " (the graph names none)", near, nr->n ? ")" : "");
}

static int check_weights(const mb_graph *g, const char *key, char *const *globs, size_t n, mb_diag *d) {
  for (size_t k = 0; k < n; k++) {
    nearest nr = {0};
    bool hit = false;
    for (int32_t i = 0; i < g->n_inits && !hit; i++) {
      const char *name = g->inits[i].name;
      if (!name) continue;
      hit = mb_glob_match(globs[k], name);
      consider(&nr, globs[k], name);
    }
    if (!hit) return no_match(d, key, globs[k], "weight", &nr);
  }
  return MB_OK;
}

/* Does glob name a module some node runs in? As the plan matches checkpoint globs: each
 * '/'-prefix of the node's scope, or its dotted module path (mb_origin_module_of_scope); and
 * each dotted prefix of the module path the export recorded. */
static bool dotted_hit(const char *glob, const char *path, nearest *nr) {
  char prefix[512];
  if (nr) consider(nr, glob, path);
  for (size_t i = 0; i < sizeof prefix; i++) {
    if (path[i] != '.' && path[i]) continue;
    memcpy(prefix, path, i);
    prefix[i] = '\0';
    if (mb_glob_match(glob, prefix)) return true;
    if (!path[i]) return false;
  }
  return false;
}

static bool module_hit(const mb_node *node, const char *glob, nearest *nr) {
  const mb_origin *o = &node->origin;
  if (o->scope && o->scope[0] == '/') {
    char key[512], dotted[512];
    size_t end = (size_t)(strrchr(o->scope, '/') - o->scope);
    for (size_t i = 1; i <= end && i < sizeof key; i++) {
      if (o->scope[i] != '/') continue;
      memcpy(key, o->scope, i);
      key[i] = '\0';
      if (glob[0] == '/') {
        if (mb_glob_match(glob, key)) return true;
        if (nr) consider(nr, glob, key);
      } else if (mb_origin_module_of_scope(o->scope, i, dotted, sizeof dotted)) {
        if (mb_glob_match(glob, dotted)) return true;
        if (nr && i == end) consider(nr, glob, dotted);
      }
    }
  }
  if (glob[0] != '/' && o->module && *o->module) return dotted_hit(glob, o->module, nr);
  return false;
}

static int check_modules(const mb_graph *g, const char *key, char *const *globs, size_t n, mb_diag *d) {
  for (size_t k = 0; k < n; k++) {
    nearest nr = {0};
    bool hit = false;
    for (int32_t i = 0; i < g->n_nodes && !hit; i++) hit = module_hit(&g->nodes[i], globs[k], &nr);
    if (!hit) return no_match(d, key, globs[k], "module", &nr);
  }
  return MB_OK;
}

int mb_setup_check_globs(const mb_model *m, const mb_setup *s, mb_diag *d) {
  const mb_graph *g = m->graph;
  const mb_train *t = &s->train;
  if (check_weights(g, "freeze", s->freeze, s->n_freeze, d) != MB_OK ||
      check_weights(g, "trainable", s->trainable, s->n_trainable, d) != MB_OK ||
      check_modules(g, "checkpoint", t->checkpoint, t->n_checkpoint, d) != MB_OK ||
      check_modules(g, "fsdp_wrap", t->dist.wrap, t->dist.n_wrap, d) != MB_OK ||
      (s->report.advise_trainable &&
       check_weights(g, "advise_trainable", (char *const *)&s->report.advise_trainable, 1, d) != MB_OK))
    return d->status;
  return MB_OK;
}
