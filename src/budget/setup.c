#include "budget/setup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/glob.h"

MB_API int mb_setup_create(mb_setup **out) {
  if (!out) return MB_E_INVALID_ARG;
  *out = calloc(1, sizeof **out);
  if (!*out) return MB_E_NOMEM;
  mb_arena_init(&(*out)->arena);
  (*out)->batch = -1;
  return MB_OK;
}

static void free_list(char **list, size_t n) {
  for (size_t i = 0; i < n; i++) free(list[i]);
  free(list);
}

MB_API void mb_setup_free(mb_setup *s) {
  if (!s) return;
  free_list(s->freeze, s->n_freeze);
  free_list(s->trainable, s->n_trainable);
  free_list(s->dim_names, s->n_dims);
  free(s->dim_values);
  free(s->batch_dim);
  free(s->bound);
  free(s->is_bound);
  mb_arena_destroy(&s->arena);
  free(s);
}

MB_API const char *mb_setup_errmsg(const mb_setup *s) { return s ? s->errmsg : ""; }

static int add_pattern(mb_setup *s, char ***list, size_t *n, const char *glob) {
  if (!s) return MB_E_INVALID_ARG;
  if (!glob || !mb_glob_valid(glob)) {
    snprintf(s->errmsg, sizeof s->errmsg, "invalid glob pattern '%s'", glob ? glob : "(null)");
    return MB_E_INVALID_ARG;
  }
  char **grown = realloc(*list, (*n + 1) * sizeof *grown);
  if (!grown) return MB_E_NOMEM;
  *list = grown;
  grown[*n] = malloc(strlen(glob) + 1);
  if (!grown[*n]) return MB_E_NOMEM;
  strcpy(grown[*n], glob);
  (*n)++;
  s->errmsg[0] = '\0';
  return MB_OK;
}

MB_API int mb_setup_add_freeze(mb_setup *s, const char *glob) {
  return add_pattern(s, s ? &s->freeze : NULL, s ? &s->n_freeze : NULL, glob);
}

MB_API int mb_setup_add_trainable(mb_setup *s, const char *glob) {
  return add_pattern(s, s ? &s->trainable : NULL, s ? &s->n_trainable : NULL, glob);
}

static bool any_match(char *const *list, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (mb_glob_match(list[i], name)) return true;
  return false;
}

bool mb_setup_trains(const mb_setup *s, const char *name) {
  if (!s) return true;
  if (any_match(s->trainable, s->n_trainable, name)) return true; /* trainable wins */
  return !any_match(s->freeze, s->n_freeze, name);
}

MB_API int mb_setup_set_dim(mb_setup *s, const char *name, int64_t value) {
  if (!s) return MB_E_INVALID_ARG;
  if (!name || !*name || value < 0) {
    snprintf(s->errmsg, sizeof s->errmsg, "a dim needs a name and a value >= 0");
    return MB_E_INVALID_ARG;
  }
  for (size_t i = 0; i < s->n_dims; i++)
    if (!strcmp(s->dim_names[i], name)) {
      s->dim_values[i] = value;
      return MB_OK;
    }
  char **names = realloc(s->dim_names, (s->n_dims + 1) * sizeof *names);
  if (!names) return MB_E_NOMEM;
  s->dim_names = names;
  int64_t *values = realloc(s->dim_values, (s->n_dims + 1) * sizeof *values);
  if (!values) return MB_E_NOMEM;
  s->dim_values = values;
  names[s->n_dims] = malloc(strlen(name) + 1);
  if (!names[s->n_dims]) return MB_E_NOMEM;
  strcpy(names[s->n_dims], name);
  values[s->n_dims++] = value;
  return MB_OK;
}

MB_API int mb_setup_set_batch(mb_setup *s, int64_t batch) {
  if (!s) return MB_E_INVALID_ARG;
  if (batch < 1) {
    snprintf(s->errmsg, sizeof s->errmsg, "the batch size must be at least 1");
    return MB_E_INVALID_ARG;
  }
  s->batch = batch;
  return MB_OK;
}

MB_API int mb_setup_set_batch_dim(mb_setup *s, const char *name) {
  if (!s || !name || !*name) return MB_E_INVALID_ARG;
  char *copy = malloc(strlen(name) + 1);
  if (!copy) return MB_E_NOMEM;
  strcpy(copy, name);
  free(s->batch_dim);
  s->batch_dim = copy;
  return MB_OK;
}
