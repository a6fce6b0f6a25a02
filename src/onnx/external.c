/* External-data locations: checked by text, then by lstat/realpath, never opened. */
/* realpath() is XSI, beyond the _POSIX_C_SOURCE the build defines. */
#define _XOPEN_SOURCE 700
#include "onnx/external.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "membudget/membudget.h"

const char *mb_external_not_a_file(mode_t mode) {
  if (S_ISREG(mode)) return NULL;
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

typedef struct walk {
  mb_diag *d;
  const char *dir;      /* the model's directory ("." for a bare file name), or NULL */
  char dir_real[PATH_MAX];
  bool have_dir_real;
  const char *last_ok;  /* the last location found fine: exporters repeat one file name */
} walk;

/* The text alone: what the ONNX spec allows (a relative POSIX path inside the directory). */
static const char *bad_text(const char *loc) {
  if (!*loc) return "is empty";
  if (loc[0] == '/' || loc[0] == '\\') return "is an absolute path";
  for (const char *p = loc; *p;) {
    size_t n = strcspn(p, "/\\"); /* '\\' too: the file may be read on Windows */
    if (n == 2 && p[0] == '.' && p[1] == '.') return "climbs out of the model's directory with '..'";
    p += n;
    if (*p) p++;
  }
  return NULL;
}

static int refuse(walk *w, const char *what, const char *tensor, const char *loc, const char *why) {
  return mb_fail(w->d, MB_E_INVALID_MODEL,
                 "%s '%s': external data location '%s' %s; membudget never opens it", what, tensor,
                 loc, why);
}

/* On disk: lstat and realpath, no open. */
static int check_on_disk(walk *w, const char *what, const char *tensor, const char *loc) {
  char full[PATH_MAX];
  if ((size_t)snprintf(full, sizeof full, "%s/%s", w->dir, loc) >= sizeof full)
    return refuse(w, what, tensor, loc, "makes a path longer than PATH_MAX");
  struct stat st;
  if (lstat(full, &st) != 0) return MB_OK; /* absent (or unreadable): a weightless model */
  char real[PATH_MAX];
  if (!realpath(full, real)) { /* a dangling symlink (absent too), or a magic /proc link */
    if (stat(full, &st) != 0) return MB_OK;
    return refuse(w, what, tensor, loc, "resolves to something with no path (a /proc link to a "
                  "pipe or socket?), outside the model's directory");
  }
  if (!w->have_dir_real) {
    if (!realpath(w->dir, w->dir_real)) return MB_OK;
    w->have_dir_real = true;
  }
  size_t n = strlen(w->dir_real);
  bool inside = !strncmp(real, w->dir_real, n) && (real[n] == '/' || (n == 1 && w->dir_real[0] == '/'));
  if (!inside) {
    char why[PATH_MAX + 64];
    snprintf(why, sizeof why, "resolves to '%s', outside the model's directory", real);
    return refuse(w, what, tensor, loc, why);
  }
  if (stat(real, &st) != 0) return MB_OK;
  const char *kind = mb_external_not_a_file(st.st_mode);
  if (kind) {
    char why[64];
    snprintf(why, sizeof why, "is %s, not a regular file", kind);
    return refuse(w, what, tensor, loc, why);
  }
  return MB_OK;
}

static int check_tensor(walk *w, const char *what, const mb_const_tensor *t) {
  if (!t || t->location != MB_DATA_EXTERNAL || !t->external_file) return MB_OK;
  const char *loc = t->external_file;
  if (w->last_ok && !strcmp(w->last_ok, loc)) return MB_OK;
  const char *why = bad_text(loc);
  if (why) return refuse(w, what, t->name, loc, why);
  if (w->dir && check_on_disk(w, what, t->name, loc) != MB_OK) return w->d->status;
  w->last_ok = loc;
  return MB_OK;
}

static int check_graph(walk *w, const mb_graph *g) {
  for (int32_t k = 0; g && k < g->n_inits; k++)
    if (check_tensor(w, "initializer", &g->inits[k]) != MB_OK) return w->d->status;
  for (int32_t k = 0; g && k < g->n_nodes; k++) {
    const mb_node *n = &g->nodes[k];
    for (int32_t a = 0; a < n->n_attrs; a++)
      if (check_tensor(w, "tensor attribute", n->attrs[a].t) != MB_OK) return w->d->status;
    for (int32_t s = 0; s < mb_node_num_subgraphs(n); s++)
      if (check_graph(w, mb_node_subgraph(n, s)) != MB_OK) return w->d->status;
  }
  return MB_OK;
}

int mb_onnx_check_external(const struct mb_model *m, const char *model_path, mb_diag *d) {
  walk *w = calloc(1, sizeof *w); /* PATH_MAX buffers: off the stack */
  if (!w) return mb_fail(d, MB_E_NOMEM, "out of memory");
  w->d = d;
  char *dir = NULL;
  if (model_path) {
    const char *slash = strrchr(model_path, '/');
    size_t len = slash ? (size_t)(slash - model_path) : 1;
    dir = malloc(len + 1);
    if (!dir) {
      free(w);
      return mb_fail(d, MB_E_NOMEM, "out of memory");
    }
    if (!slash) strcpy(dir, ".");
    else if (len == 0) strcpy(dir, "/");
    else memcpy(dir, model_path, len), dir[len] = '\0';
    w->dir = dir;
  }
  int rc = check_graph(w, m->graph);
  free(dir);
  free(w);
  return rc;
}
