/* The plain-data value tree: construction and path access. */
#include "util/datum.h"

#include <string.h>

#include "membudget/membudget.h"

mb_datum *mb_datum_new(mb_arena *a, int kind) {
  mb_datum *v = mb_arena_alloc(a, sizeof *v);
  if (v) v->kind = (uint8_t)kind;
  return v;
}

/* Room for `more` item slots in a list or dict; arrays grow by doubling in the arena. */
static int grow(mb_arena *a, mb_datum *c, size_t used, size_t more) {
  if (used + more <= c->cap) return MB_OK;
  size_t cap = c->cap ? c->cap : 8;
  while (cap < used + more) {
    if (cap > SIZE_MAX / sizeof(mb_datum *) / 4) return MB_E_LIMIT;
    cap *= 2;
  }
  mb_datum **grown = mb_arena_array(a, cap, sizeof *grown);
  if (!grown) return MB_E_NOMEM;
  if (used) memcpy(grown, c->items, used * sizeof *grown);
  c->items = grown;
  c->cap = cap;
  return MB_OK;
}

int mb_datum_push(mb_arena *a, mb_datum *list, mb_datum *item) {
  int rc = grow(a, list, list->n, 1);
  if (rc == MB_OK) list->items[list->n++] = item;
  return rc;
}

int mb_datum_put(mb_arena *a, mb_datum *dict, mb_datum *key, mb_datum *value) {
  int rc = grow(a, dict, 2 * dict->n, 2);
  if (rc != MB_OK) return rc;
  dict->items[2 * dict->n] = key;
  dict->items[2 * dict->n + 1] = value;
  dict->n++;
  return MB_OK;
}

const mb_datum *mb_datum_get(const mb_datum *d, const char *key) {
  if (!d || d->kind != MB_D_DICT) return NULL;
  size_t len = strlen(key);
  for (size_t k = d->n; k-- > 0;) {
    const mb_datum *kv = d->items[2 * k];
    if (kv && kv->kind == MB_D_STR && kv->n == len && !memcmp(kv->s, key, len)) return d->items[2 * k + 1];
  }
  return NULL;
}

bool mb_datum_u64(const mb_datum *v, uint64_t *out) {
  if (!v || v->kind != MB_D_INT || v->neg || v->big) return false;
  *out = v->u;
  return true;
}

bool mb_datum_i64(const mb_datum *v, int64_t *out) {
  if (!v || v->kind != MB_D_INT || v->big) return false;
  if (v->neg) *out = v->i;
  else if (v->u <= (uint64_t)INT64_MAX) *out = (int64_t)v->u;
  else return false;
  return true;
}

bool mb_datum_number(const mb_datum *v, double *out) {
  if (!v) return false;
  if (v->kind == MB_D_FLOAT) *out = v->f;
  else if (v->kind == MB_D_INT && !v->big) *out = v->neg ? (double)v->i : (double)v->u;
  else if (v->kind == MB_D_BOOL) *out = v->b ? 1.0 : 0.0;
  else return false;
  return true;
}

bool mb_datum_is_str(const mb_datum *v, const char *s) {
  size_t len = strlen(s);
  return v && v->kind == MB_D_STR && v->n == len && !memcmp(v->s, s, len);
}
