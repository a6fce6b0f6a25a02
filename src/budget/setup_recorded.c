/* The training setup an exporter recorded in the model file (membudget.hf --save-onnx:
 * ModelProto.metadata_props "membudget.setup.KEY", one value per line; graph.h), applied to the
 * keys a setup leaves unset, so that the file estimates as the export described it without
 * flags: which weights train (freeze and trainable, when the setup names neither), the
 * checkpointed modules (when it names none), the loop (when neither loop nor hold_outputs was
 * given), the example's dim values (NAME=VALUE: each one the setup does not bind). A recorded
 * key this library does not know is refused by name rather than ignored. */
#include <stdio.h>
#include <string.h>

#include "budget/setup.h"

typedef enum { R_FREEZE, R_TRAINABLE, R_CHECKPOINT, R_LOOP, R_DIM, R_UNKNOWN } recorded_key;

static recorded_key key_of(const char *k) {
  static const char *const names[] = {"freeze", "trainable", "checkpoint", "loop", "dim"};
  for (int i = 0; i < R_UNKNOWN; i++)
    if (!strcmp(k, names[i])) return (recorded_key)i;
  return R_UNKNOWN;
}

/* Whether the setup already says what the recorded key would. */
static bool already_set(const mb_setup *s, recorded_key k) {
  switch (k) {
    case R_FREEZE: case R_TRAINABLE: return s->n_freeze || s->n_trainable;
    case R_CHECKPOINT: return s->train.n_checkpoint > 0;
    case R_LOOP: return (s->train.loop_set & (MB_LOOP_SET_PRESET | MB_LOOP_SET_HOLD)) != 0;
    case R_DIM: return false; /* per dim: apply_dim */
    default: return true;
  }
}

/* NAME=VALUE, unless the setup binds NAME (or the batch is that dim); 1 when applied. */
static int apply_dim(mb_setup *s, const char *line, int *rc) {
  const char *eq = strchr(line, '=');
  int64_t v = 0;
  if (!eq || eq == line || !mb_setup_digits(eq + 1, 0, INT64_C(1) << 40, &v)) {
    snprintf(s->errmsg, sizeof s->errmsg, "the model file's recorded dim '%.200s' is not NAME=VALUE", line);
    *rc = MB_E_INVALID_MODEL;
    return 0;
  }
  size_t n = (size_t)(eq - line);
  for (size_t i = 0; i < s->n_dims; i++)
    if (strlen(s->dim_names[i]) == n && !memcmp(s->dim_names[i], line, n)) return 0;
  if (s->batch_dim && strlen(s->batch_dim) == n && !memcmp(s->batch_dim, line, n)) return 0;
  char name[256];
  snprintf(name, sizeof name, "%.*s", (int)(n < 255 ? n : 255), line);
  *rc = mb_setup_set_dim(s, name, v);
  return *rc == MB_OK;
}

/* Applies one value line by line; *lines counts them. */
static int apply(mb_setup *s, recorded_key k, const char *value, int *lines) {
  char line[1024];
  for (const char *p = value; *p;) {
    const char *end = strchr(p, '\n');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n >= sizeof line) {
      snprintf(s->errmsg, sizeof s->errmsg, "the model file's recorded %s has a line over %zu bytes",
               k == R_LOOP ? "loop" : "glob", sizeof line - 1);
      return MB_E_INVALID_MODEL;
    }
    memcpy(line, p, n);
    line[n] = '\0';
    if (n && k == R_DIM) {
      int rc = MB_OK;
      *lines += apply_dim(s, line, &rc);
      if (rc != MB_OK) return rc;
    } else if (n) {
      int rc = k == R_FREEZE ? mb_setup_add_freeze(s, line)
               : k == R_TRAINABLE ? mb_setup_add_trainable(s, line)
               : k == R_CHECKPOINT ? mb_setup_set(s, "checkpoint", line)
                                   : mb_setup_set(s, "loop", line);
      if (rc != MB_OK) {
        char why[1024]; /* the key's own message, after what it came from */
        snprintf(why, sizeof why, "%.1000s", s->errmsg);
        snprintf(s->errmsg, sizeof s->errmsg, "the model file's recorded setup: %s", why);
        return rc;
      }
      ++*lines;
    }
    p += n + (end ? 1 : 0);
  }
  return MB_OK;
}

MB_API int mb_setup_apply_recorded(mb_setup *s, const mb_model *m, char *applied, size_t size) {
  if (!s || !m) return MB_E_INVALID_ARG;
  if (applied && size) applied[0] = '\0';
  s->recorded[0] = '\0';
  for (int32_t i = 0; i < m->n_recorded; i++)
    if (key_of(m->recorded_keys[i]) == R_UNKNOWN) {
      snprintf(s->errmsg, sizeof s->errmsg,
               "the model file records the setup key '%s' (metadata %s%s), which this membudget does not apply",
               m->recorded_keys[i], MB_RECORDED_PREFIX, m->recorded_keys[i]);
      return MB_E_UNSUPPORTED;
    }
  bool skip[R_UNKNOWN];
  for (int k = 0; k < R_UNKNOWN; k++) skip[k] = already_set(s, (recorded_key)k); /* before any applies */
  size_t used = 0;
  for (int32_t i = 0; i < m->n_recorded; i++) {
    recorded_key k = key_of(m->recorded_keys[i]);
    if (skip[k]) continue;
    int lines = 0;
    int rc = apply(s, k, m->recorded_values[i], &lines);
    if (rc != MB_OK) return rc;
    char *out = s->recorded;
    size_t cap = sizeof s->recorded;
    if (lines && used < cap) {
      int n = k == R_LOOP ? snprintf(out + used, cap - used, "%sloop %s", used ? ", " : "", m->recorded_values[i])
              : k == R_DIM ? snprintf(out + used, cap - used, "%sdims (%d)", used ? ", " : "", lines)
                           : snprintf(out + used, cap - used, "%s%s (%d %s)", used ? ", " : "", m->recorded_keys[i],
                                      lines, lines == 1 ? "glob" : "globs");
      if (n > 0) used += (size_t)n < cap - used ? (size_t)n : cap - used - 1;
    }
  }
  if (applied && size) snprintf(applied, size, "%s", s->recorded);
  return MB_OK;
}
