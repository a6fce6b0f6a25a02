/* Where the memory goes, by PyTorch module: one run of the plan at a batch size, each tensor
 * attributed to a module (membudget.h, "where the memory goes"), rolled up into a tree of
 * subtree totals: parameters, what forward keeps for backward, and the share of the allocated
 * peak. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget/modules.h"
#include "budget/step.h"
#include "sim/plan.h"
#include "util/strmap.h"
#include "util/versioned.h"

#define MAX_NAME_PATH 1024 /* a longer initializer name is not taken as a module path */
#define NONE (-1)

typedef struct ent {
  const char *path, *name;
  int32_t model, parent, depth, first_node;
  int64_t nodes;
  uint64_t params, trainable, kept, at_peak, cat[MB_CAT_COUNT];
} ent;

typedef struct live_tensor {
  int32_t slot, ev, entry;
  uint64_t bytes;
} live_tensor;

typedef struct builder {
  const mb_plan *p;
  mb_modules *out;
  mb_diag *d;
  mb_strmap map;        /* "<model digit><path>" -> entry */
  ent *e;
  int32_t n, cap;
  int32_t root[2];      /* the model's and the teacher's root */
  const mb_graph *g[2];
  int32_t *node_entry[2];  /* per node */
  int32_t *weight_entry[2]; /* per value: the module of an initializer, -1 unknown */
  mb_strmap init_names[2]; /* initializer name -> value */
  ent none;             /* what belongs to no module */
} builder;

static int32_t add_entry(builder *b, int32_t model, const char *key, size_t path_len, int32_t parent) {
  if (b->n == b->cap) {
    int32_t cap = b->cap ? b->cap * 2 : 256;
    ent *grown = realloc(b->e, (size_t)cap * sizeof *grown);
    if (!grown) return mb_fail(b->d, MB_E_NOMEM, "out of memory"), NONE;
    b->e = grown;
    b->cap = cap;
  }
  char *k = mb_arena_strndup(&b->out->arena, key, path_len + 1);
  if (!k || mb_strmap_put(&b->map, k, b->n, NULL) < 0) return mb_fail(b->d, MB_E_NOMEM, "out of memory"), NONE;
  ent *x = &b->e[b->n];
  memset(x, 0, sizeof *x);
  x->path = k + 1;
  const char *dot = strrchr(x->path, '.');
  x->name = dot ? dot + 1 : x->path;
  x->model = model;
  x->parent = parent;
  x->depth = parent >= 0 ? b->e[parent].depth + 1 : 0;
  x->first_node = INT32_MAX;
  return b->n++;
}

/* The entry of a module path (len bytes of path), made with every missing ancestor: "a.b.c"
 * under "a.b" under "a" under the root "". Iterative: paths come from untrusted files. */
static int32_t entry_of(builder *b, int32_t model, const char *path, size_t len) {
  char stack[MAX_NAME_PATH + 2];
  if (len > MAX_NAME_PATH) len = MAX_NAME_PATH; /* origin.c already cuts module paths at 512 */
  stack[0] = (char)('0' + model);
  memcpy(stack + 1, path, len);
  stack[len + 1] = '\0';
  int32_t found = mb_strmap_get(&b->map, stack);
  if (found >= 0) return found;
  int32_t parent = b->root[model];
  for (size_t i = 0; i <= len; i++) {
    if (i < len && path[i] != '.') continue;
    char c = stack[i + 1];
    stack[i + 1] = '\0';
    int32_t at = mb_strmap_get(&b->map, stack);
    if (at < 0) at = add_entry(b, model, stack, i, parent);
    stack[i + 1] = c;
    if (at < 0) return NONE;
    parent = at;
  }
  return parent;
}

/* The deepest module both a and b run in. */
static int32_t common(const builder *b, int32_t x, int32_t y) {
  if (x < 0) return y;
  if (y < 0) return x;
  while (b->e[x].depth > b->e[y].depth) x = b->e[x].parent;
  while (b->e[y].depth > b->e[x].depth) y = b->e[y].parent;
  while (x != y) {
    x = b->e[x].parent;
    y = b->e[y].parent;
  }
  return x;
}

/* Does an initializer's name spell a module path and a last component, as PyTorch's
 * state_dict names do ("layer1.0.conv1.weight")? Names the exporters made up
 * ("onnx::MatMul_12") or without a module ("class_token") do not. */
static bool is_dotted_path(const char *name) {
  size_t len = strlen(name);
  if (!len || len > MAX_NAME_PATH || !strchr(name, '.')) return false;
  char prev = '.';
  for (const char *c = name; *c; c++) {
    bool word = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_' ||
                *c == '-';
    if (*c == '.' ? prev == '.' : !word) return false;
    prev = *c;
  }
  return prev != '.';
}

static int index_model(builder *b, int32_t k, const mb_model *m) {
  const mb_graph *g = m->graph;
  b->g[k] = g;
  b->root[k] = add_entry(b, k, k ? "1" : "0", 0, -1);
  b->node_entry[k] = malloc(((size_t)g->n_nodes + 1) * sizeof(int32_t));
  b->weight_entry[k] = malloc(((size_t)g->n_values + 1) * sizeof(int32_t));
  if (b->root[k] < 0 || !b->node_entry[k] || !b->weight_entry[k] ||
      mb_strmap_init(&b->init_names[k], (size_t)g->n_inits + 1) != 0)
    return mb_fail(b->d, MB_E_NOMEM, "out of memory");
  for (int32_t n = 0; n < g->n_nodes; n++) {
    const char *mod = g->nodes[n].origin.module;
    int32_t at = entry_of(b, k, mod ? mod : "", mod ? strlen(mod) : 0);
    if (at < 0) return b->d->status;
    b->node_entry[k][n] = at;
    b->e[at].nodes++;
    if (n < b->e[at].first_node) b->e[at].first_node = n;
  }
  /* an initializer belongs to the module its name says, else to the innermost module running
   * every node that reads it */
  for (int32_t v = 0; v < g->n_values; v++) b->weight_entry[k][v] = NONE;
  for (int32_t n = 0; n < g->n_nodes; n++)
    for (int32_t i = 0; i < g->nodes[n].n_inputs; i++) {
      int32_t v = g->nodes[n].inputs[i];
      if (v >= 0 && v < g->n_values && g->values[v].kind == MB_VALUE_INITIALIZER)
        b->weight_entry[k][v] = common(b, b->weight_entry[k][v], b->node_entry[k][n]);
    }
  for (int32_t v = 0; v < g->n_values; v++) {
    if (g->values[v].kind != MB_VALUE_INITIALIZER) continue;
    const char *name = g->values[v].name;
    if (name && mb_strmap_put(&b->init_names[k], name, v, NULL) < 0) return mb_fail(b->d, MB_E_NOMEM, "out of memory");
    if (name && is_dotted_path(name)) {
      int32_t at = entry_of(b, k, name, (size_t)(strrchr(name, '.') - name));
      if (at < 0) return b->d->status;
      b->weight_entry[k][v] = at;
    } else if (b->weight_entry[k][v] < 0) {
      b->weight_entry[k][v] = b->root[k];
    }
  }
  return MB_OK;
}

static bool is_weight_category(int c) {
  return c == MB_CAT_PARAMETER || c == MB_CAT_EMBEDDING || c == MB_CAT_BUFFER || c == MB_CAT_GRADIENT ||
         c == MB_CAT_TEACHER;
}

/* The module of the tensor allocated by event i. */
static int32_t attribute(const builder *b, int32_t i) {
  const mb_event_rec *e = &b->p->ev[i];
  const mb_slot *sl = &b->p->slots[e->slot];
  int k = e->model ? 1 : 0;
  const mb_graph *g = b->g[k];
  if (!g) return NONE;
  if (e->node >= 0 && e->node < g->n_nodes) return b->node_entry[k][e->node];
  int32_t v = sl->ref;
  if (is_weight_category(sl->category) && v >= 0 && v < g->n_values && g->values[v].kind == MB_VALUE_INITIALIZER)
    return b->weight_entry[k][v];
  if (sl->category == MB_CAT_GRADIENT && sl->name) { /* .grad made before the step (accumulation) */
    v = mb_strmap_get(&b->init_names[k], sl->name);
    if (v >= 0) return b->weight_entry[k][v];
  }
  return k ? b->root[1] : NONE;
}

static ent *at(builder *b, int32_t entry) { return entry >= 0 ? &b->e[entry] : &b->none; }

/* Parameters and embeddings on the device, as the budget counts them (estimate.c, weights);
 * the teacher's weights are all MB_CAT_TEACHER, so its parameters are told by their role. */
static int count_parameters(builder *b, const mb_setup *s) {
  int32_t *role[2] = {NULL, NULL};
  for (int k = 0; k < 2; k++) {
    const mb_graph *g = b->g[k];
    if (!g) continue;
    const mb_model *m = k ? b->p->teacher : b->p->model;
    if (!(role[k] = malloc(((size_t)g->n_values + 1) * sizeof(int32_t)))) {
      free(role[0]);
      return mb_fail(b->d, MB_E_NOMEM, "out of memory");
    }
    for (int32_t v = 0; v < g->n_values; v++) role[k][v] = -1;
    for (int32_t i = 0; i < m->n_all_inits; i++)
      if (m->all_inits[i].graph == g && m->all_inits[i].value >= 0 && m->all_inits[i].value < g->n_values)
        role[k][m->all_inits[i].value] = m->all_inits[i].role;
  }
  for (int32_t i = 0; i < b->p->n_slots; i++) {
    const mb_slot *sl = &b->p->slots[i];
    int k = sl->model ? 1 : 0;
    const mb_graph *g = b->g[k];
    if (!g || sl->rule != MB_SZ_FIXED || sl->ref < 0 || sl->ref >= g->n_values) continue;
    if (g->values[sl->ref].kind != MB_VALUE_INITIALIZER) continue;
    bool param = k ? role[k][sl->ref] == MB_ROLE_PARAMETER || role[k][sl->ref] == MB_ROLE_EMBEDDING
                   : sl->category == MB_CAT_PARAMETER || sl->category == MB_CAT_EMBEDDING;
    if (!param) continue;
    uint64_t bytes = mb_round_block(sl->fixed, s->train.rounding);
    ent *x = at(b, b->weight_entry[k][sl->ref]);
    x->params += bytes;
    if (sl->trains) x->trainable += bytes;
  }
  free(role[0]);
  free(role[1]);
  return MB_OK;
}

/* "layers.2" before "layers.10" */
static int natural_cmp(const char *a, const char *b) {
  while (*a && *b) {
    if (*a >= '0' && *a <= '9' && *b >= '0' && *b <= '9') {
      const char *x = a, *y = b;
      while (*x == '0') x++;
      while (*y == '0') y++;
      size_t nx = 0, ny = 0;
      while (x[nx] >= '0' && x[nx] <= '9') nx++;
      while (y[ny] >= '0' && y[ny] <= '9') ny++;
      if (nx != ny) return nx < ny ? -1 : 1;
      int c = strncmp(x, y, nx);
      if (c) return c;
      a = x + nx;
      b = y + ny;
      continue;
    }
    if (*a != *b) return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
    a++;
    b++;
  }
  return *a ? 1 : *b ? -1 : 0;
}

static int cmp_u64_desc(uint64_t x, uint64_t y) { return x > y ? -1 : x < y ? 1 : 0; }

/* qsort has no context argument: the entries are sorted through a pointer to each */
static int by_size(const void *pa, const void *pb) {
  const ent *x = *(const ent *const *)pa, *y = *(const ent *const *)pb;
  int c = cmp_u64_desc(x->at_peak, y->at_peak);
  if (!c) c = cmp_u64_desc(x->kept, y->kept);
  if (!c) c = cmp_u64_desc(x->params, y->params);
  return c ? c : natural_cmp(x->path, y->path);
}

static int by_bytes(const void *pa, const void *pb) {
  const live_tensor *x = pa, *y = pb;
  int c = cmp_u64_desc(x->bytes, y->bytes);
  return c ? c : (x->ev > y->ev) - (x->ev < y->ev);
}

static void fill_info(mb_module_info *o, const ent *x, int32_t parent) {
  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->model = x->model;
  o->parent = parent;
  o->depth = x->depth;
  o->path = x->path;
  o->nodes = x->nodes;
  o->parameters = x->params;
  o->kept = x->kept;
  o->at_peak = x->at_peak;
  memcpy(o->at_peak_category, x->cat, sizeof o->at_peak_category);
}

/* Subtree totals, then the entries in print order (depth first, siblings largest first). */
static int arrange(builder *b) {
  mb_modules *M = b->out;
  for (int32_t i = b->n - 1; i >= 0; i--) { /* a parent is made before its children */
    int32_t p = b->e[i].parent;
    if (p < 0) continue;
    ent *x = &b->e[i], *y = &b->e[p];
    y->nodes += x->nodes;
    y->params += x->params;
    y->trainable += x->trainable;
    y->kept += x->kept;
    y->at_peak += x->at_peak;
    for (int c = 0; c < MB_CAT_COUNT; c++) y->cat[c] += x->cat[c];
    if (x->first_node < y->first_node) y->first_node = x->first_node;
  }
  size_t n = (size_t)b->n + 1;
  int32_t *first = calloc(n + 1, sizeof *first), *fill = calloc(n + 1, sizeof *fill);
  const ent **kids = malloc(n * sizeof *kids);
  int32_t *stack = malloc(n * sizeof *stack), *new_index = malloc(n * sizeof *new_index);
  M->mods = mb_arena_array(&M->arena, n, sizeof *M->mods);
  if (!first || !fill || !kids || !stack || !new_index || !M->mods) {
    mb_fail(b->d, MB_E_NOMEM, "out of memory");
  } else {
    for (int32_t i = 0; i < b->n; i++)
      if (b->e[i].parent >= 0) first[b->e[i].parent + 1]++;
    for (size_t i = 1; i <= n; i++) first[i] += first[i - 1];
    for (int32_t i = 0; i < b->n; i++) {
      int32_t p = b->e[i].parent;
      if (p >= 0) kids[first[p] + fill[p]++] = &b->e[i];
    }
    for (int32_t i = 0; i < b->n; i++)
      if (first[i + 1] > first[i]) qsort(kids + first[i], (size_t)(first[i + 1] - first[i]), sizeof *kids, by_size);
    int32_t top = 0, out = 0;
    for (int k = 1; k >= 0; k--)
      if (b->root[k] >= 0) stack[top++] = b->root[k];
    while (top > 0) {
      int32_t i = stack[--top];
      const ent *x = &b->e[i];
      new_index[i] = out;
      mb_module_entry *o = &M->mods[out++];
      fill_info(&o->info, x, x->parent >= 0 ? new_index[x->parent] : -1);
      o->name = x->name;
      o->first_node = x->first_node;
      o->trainable = x->trainable;
      for (int32_t c = first[i + 1] - 1; c >= first[i]; c--) stack[top++] = (int32_t)(kids[c] - b->e);
    }
    mb_module_entry *o = &M->mods[out++];
    b->none.path = NULL;
    b->none.name = NULL;
    b->none.model = -1;
    b->none.first_node = INT32_MAX;
    fill_info(&o->info, &b->none, -1);
    o->first_node = INT32_MAX;
    M->n_mods = out;
    for (int32_t t = 0; t < M->n_tensors; t++) {
      mb_peak_tensor *pt = &M->tensors[t];
      int32_t old = pt->module_index;
      pt->module_index = old >= 0 ? new_index[old] : out - 1;
      pt->module = old >= 0 ? b->e[old].path : NULL;
    }
  }
  free(first);
  free(fill);
  free(kids);
  free(stack);
  free(new_index);
  return b->d->status;
}

/* what forward keeps (the previous iteration's outputs a loop holds are no forward's) */
static void snapshot_kept(builder *b, const int32_t *alloc_at, const uint64_t *bytes) {
  for (int32_t s = 0; s < b->p->n_slots; s++)
    if (alloc_at[s] >= 0 && b->p->slots[s].category == MB_CAT_ACTIVATION && b->p->slots[s].tag != MB_TAG_LOOP_HELD)
      at(b, attribute(b, alloc_at[s]))->kept += bytes[alloc_at[s]];
}

static int snapshot_peak(builder *b, const int32_t *alloc_at, const uint64_t *bytes) {
  mb_modules *M = b->out;
  live_tensor *lt = malloc(((size_t)b->p->n_slots + 1) * sizeof *lt);
  if (!lt) return mb_fail(b->d, MB_E_NOMEM, "out of memory");
  int32_t n = 0;
  for (int32_t s = 0; s < b->p->n_slots; s++) {
    int32_t i = alloc_at[s];
    if (i < 0) continue;
    int32_t entry = attribute(b, i);
    ent *x = at(b, entry);
    int c = b->p->slots[s].category;
    x->at_peak += bytes[i];
    if (c >= 0 && c < MB_CAT_COUNT) x->cat[c] += bytes[i];
    lt[n++] = (live_tensor){s, i, entry, bytes[i]};
  }
  qsort(lt, (size_t)n, sizeof *lt, by_bytes);
  M->tensors = mb_arena_array(&M->arena, (size_t)n + 1, sizeof *M->tensors);
  if (!M->tensors) {
    free(lt);
    return mb_fail(b->d, MB_E_NOMEM, "out of memory");
  }
  for (int32_t t = 0; t < n; t++) {
    const mb_event_rec *e = &b->p->ev[lt[t].ev];
    const mb_slot *sl = &b->p->slots[lt[t].slot];
    const mb_graph *g = b->g[e->model ? 1 : 0];
    const mb_node *node = g && e->node >= 0 && e->node < g->n_nodes ? &g->nodes[e->node] : NULL;
    mb_peak_tensor *pt = &M->tensors[t];
    pt->struct_size = sizeof *pt;
    pt->category = sl->category;
    pt->phase = e->phase;
    pt->model = e->model ? 1 : 0;
    pt->bytes = lt[t].bytes;
    pt->tensor = mb_arena_strdup(&M->arena, sl->name ? sl->name : "");
    pt->node = node ? mb_arena_strdup(&M->arena, node->name) : NULL;
    pt->op_type = node ? mb_arena_strdup(&M->arena, node->op_type) : NULL;
    pt->aten = node && node->origin.aten ? mb_arena_strdup(&M->arena, node->origin.aten) : NULL;
    pt->module_index = lt[t].entry; /* arrange() maps it to print order */
    if (!pt->tensor || (node && (!pt->node || !pt->op_type))) {
      free(lt);
      return mb_fail(b->d, MB_E_NOMEM, "out of memory");
    }
  }
  M->n_tensors = n;
  free(lt);
  return MB_OK;
}

/* Walk the events: what is live when forward ends (kept) and at the allocated peak. */
static int walk(builder *b, const mb_run *r, const uint64_t *bytes, const uint64_t *live) {
  const mb_plan *p = b->p;
  int32_t *alloc_at = malloc(((size_t)p->n_slots + 1) * sizeof *alloc_at);
  if (!alloc_at) return mb_fail(b->d, MB_E_NOMEM, "out of memory");
  for (int32_t s = 0; s < p->n_slots; s++) alloc_at[s] = -1;
  int32_t peak = -1;
  for (int32_t i = 0; i < p->n_ev && peak < 0; i++)
    if (live[i] == r->peak && r->peak > 0) peak = i; /* the first time the live total peaks */
  bool kept = false;
  for (int32_t i = 0; i < p->n_ev && b->d->status == MB_OK; i++) {
    const mb_event_rec *e = &p->ev[i];
    if (!kept && e->phase > MB_PHASE_FORWARD) { /* as mb_plan_run takes budget.activations */
      snapshot_kept(b, alloc_at, bytes);
      kept = true;
    }
    alloc_at[e->slot] = e->alloc ? i : -1;
    if (i == peak) snapshot_peak(b, alloc_at, bytes);
  }
  if (!kept) snapshot_kept(b, alloc_at, bytes);
  if (peak < 0 && b->d->status == MB_OK) {
    b->out->tensors = mb_arena_array(&b->out->arena, 1, sizeof *b->out->tensors);
    if (!b->out->tensors) mb_fail(b->d, MB_E_NOMEM, "out of memory");
  }
  free(alloc_at);
  return b->d->status;
}

int mb_modules_build(const mb_plan *p, const mb_setup *s, int64_t batch, mb_modules **out, mb_diag *d) {
  *out = NULL;
  mb_modules *M = calloc(1, sizeof *M);
  if (!M) return mb_fail(d, MB_E_NOMEM, "out of memory");
  mb_arena_init(&M->arena);
  M->batch = batch;
  builder b = {.p = p, .out = M, .d = d, .root = {NONE, NONE}};
  uint64_t *bytes = malloc(((size_t)p->n_ev + 1) * sizeof *bytes);
  uint64_t *live = malloc(((size_t)p->n_ev + 1) * sizeof *live);
  mb_run r;
  if (!bytes || !live || mb_strmap_init(&b.map, 1024) != 0) mb_fail(d, MB_E_NOMEM, "out of memory");
  else if (mb_setup_plan_run(p, s, batch, &r, bytes, live, d) == MB_OK && index_model(&b, 0, p->model) == MB_OK &&
           (!p->teacher || index_model(&b, 1, p->teacher) == MB_OK)) {
    M->allocated_peak = r.peak;
    M->peak_phase = r.peak_phase;
    if (count_parameters(&b, s) == MB_OK && walk(&b, &r, bytes, live) == MB_OK) arrange(&b);
  }
  for (int k = 0; k < 2; k++) {
    free(b.node_entry[k]);
    free(b.weight_entry[k]);
    mb_strmap_free(&b.init_names[k]);
  }
  mb_strmap_free(&b.map);
  free(b.e);
  free(bytes);
  free(live);
  if (d->status != MB_OK) {
    mb_modules_free(M);
    return d->status;
  }
  *out = M;
  return MB_OK;
}

/* ---- the public accessors ---- */

MB_API int mb_modules_create(const mb_model *m, mb_setup *s, int64_t batch, mb_modules **out) {
  if (!out || !s) return MB_E_INVALID_ARG;
  *out = NULL;
  s->errmsg[0] = '\0';
  if (!m || !m->graph || batch < 1) {
    snprintf(s->errmsg, sizeof s->errmsg, "mb_modules_create: a model and a batch size >= 1 are required");
    return MB_E_INVALID_ARG;
  }
  mb_diag d;
  mb_diag_init(&d);
  mb_plan *p = NULL;
  if (mb_setup_plan_build(m, s, &p, &d) == MB_OK) mb_modules_build(p, s, batch, out, &d);
  mb_plan_free(p);
  if (d.status != MB_OK) snprintf(s->errmsg, sizeof s->errmsg, "%s", d.msg);
  return d.status;
}

MB_API void mb_modules_free(mb_modules *m) {
  if (!m) return;
  mb_arena_destroy(&m->arena);
  free(m);
}

MB_API size_t mb_modules_num(const mb_modules *m) { return m ? (size_t)m->n_mods : 0; }

MB_API int mb_modules_get(const mb_modules *m, size_t i, mb_module_info *out) {
  if (!m || !out) return MB_E_INVALID_ARG;
  if (i >= (size_t)m->n_mods) return MB_E_RANGE;
  return mb_fill_versioned(out, &m->mods[i].info, sizeof m->mods[i].info, offsetof(mb_module_info, at_peak_category))
             ? MB_E_INVALID_ARG
             : MB_OK;
}

MB_API size_t mb_modules_num_tensors(const mb_modules *m) { return m ? (size_t)m->n_tensors : 0; }

MB_API int mb_modules_tensor(const mb_modules *m, size_t i, mb_peak_tensor *out) {
  if (!m || !out) return MB_E_INVALID_ARG;
  if (i >= (size_t)m->n_tensors) return MB_E_RANGE;
  return mb_fill_versioned(out, &m->tensors[i], sizeof m->tensors[i], sizeof m->tensors[i]) ? MB_E_INVALID_ARG
                                                                                            : MB_OK;
}
