/* Batches of graphs, the setup's side: the keys per_sample, batch_unit, graph_sizes (a CSV
 * file or a table in memory), graph_quantile and graph_batches into the batching model
 * (shape/batching.h), which computes the per-sample dims' values at a batch; and the sentence
 * that describes a batch. docs/estimate.md, "Batches of graphs". */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget/setup.h"
#include "util/format.h"

#define MAX_COUNT (INT64_C(1) << 40)      /* per graph, and a per_sample count */
#define MAX_TOTAL (INT64_C(1) << 50)      /* a dim over a whole table */
#define MAX_DIMS MB_BATCHING_MAX_DIMS
#define MAX_GRAPHS INT64_C(2147483647)    /* graph indices are 32-bit while sampling */
#define MAX_CSV_BYTES (INT64_C(1) << 30)

/* ---- state ---- */

static void free_names(char **names, size_t n) {
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
}

static void sizes_clear(mb_graph_sizes *z) {
  free_names(z->dims, z->n_dims);
  free(z->values);
  free(z->prefix);
  free(z->source);
  memset(z, 0, sizeof *z);
}

static void per_sample_clear(mb_batching *b) {
  free_names(b->names, b->n);
  free(b->counts);
  b->names = NULL;
  b->counts = NULL;
  b->n = 0;
}

void mb_setup_graphs_free(mb_setup *s) {
  mb_batching *b = &s->batching;
  per_sample_clear(b);
  free(b->unit);
  sizes_clear(&b->sizes);
}

static char *dup_n(const char *p, size_t n) {
  char *c = malloc(n + 1);
  if (!c) return NULL;
  memcpy(c, p, n);
  c[n] = '\0';
  return c;
}

static int fail(mb_setup *s, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(mb_setup *s, int rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->errmsg, sizeof s->errmsg, fmt, ap);
  va_end(ap);
  return rc;
}

static const char *trim(const char *p, const char *end, const char **out_end) {
  while (p < end && (*p == ' ' || *p == '\t')) p++;
  while (end > p && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r')) end--;
  *out_end = end;
  return p;
}

/* "37" -> 37: digits only, in [lo, MAX_COUNT] */
static bool parse_count(const char *p, const char *end, int64_t lo, int64_t *out) {
  if (p == end) return false;
  int64_t v = 0;
  for (; p < end; p++) {
    if (*p < '0' || *p > '9') return false;
    v = v * 10 + (*p - '0');
    if (v > MAX_COUNT) return false;
  }
  if (v < lo) return false;
  *out = v;
  return true;
}

/* ---- per_sample ---- */

static int set_per_sample(mb_setup *s, const char *value) {
  mb_batching *b = &s->batching;
  size_t cap = 1;
  for (const char *p = value; *p; p++) cap += *p == ',';
  char **names = calloc(cap, sizeof *names);
  int64_t *counts = calloc(cap, sizeof *counts);
  size_t n = 0;
  int rc = names && counts ? MB_OK : MB_E_NOMEM;
  const char *p = value;
  bool empty = true;
  for (const char *q = value; *q; q++) empty &= *q == ' ' || *q == '\t';
  if (cap > MAX_DIMS && rc == MB_OK) rc = fail(s, MB_E_LIMIT, "per_sample: more than %d dims", MAX_DIMS);
  while (rc == MB_OK && !empty) {
    const char *comma = strchr(p, ','), *end = comma ? comma : p + strlen(p);
    const char *eq = memchr(p, '=', (size_t)(end - p));
    const char *ne, *ve;
    const char *name = trim(p, eq ? eq : end, &ne);
    const char *val = eq ? trim(eq + 1, end, &ve) : NULL;
    int64_t count = 0;
    if (!eq || name == ne) {
      rc = fail(s, MB_E_INVALID_ARG, "per_sample: '%.*s' is not NAME=COUNT (as in nodes=37,edges=120)",
                (int)(end - p), p);
    } else if (!parse_count(val, ve, 1, &count)) {
      rc = fail(s, MB_E_INVALID_ARG, "per_sample: %.*s: the count '%.*s' is not an integer >= 1 (a dim's size "
                "per graph; 1 makes the dim the batch itself)", (int)(ne - name), name, (int)(ve - val), val);
    } else {
      for (size_t k = 0; k < n && rc == MB_OK; k++)
        if (strlen(names[k]) == (size_t)(ne - name) && !memcmp(names[k], name, (size_t)(ne - name)))
          rc = fail(s, MB_E_INVALID_ARG, "per_sample: dim '%s' is given twice", names[k]);
      if (rc == MB_OK && !(names[n] = dup_n(name, (size_t)(ne - name)))) rc = MB_E_NOMEM;
      if (rc == MB_OK) counts[n++] = count;
    }
    if (!comma) break;
    p = comma + 1;
  }
  if (rc != MB_OK) {
    free_names(names, n);
    free(counts);
    return rc;
  }
  per_sample_clear(b);
  if (n) {
    b->names = names;
    b->counts = counts;
    b->n = n;
  } else {
    free(names);
    free(counts);
  }
  return MB_OK;
}

static int set_unit(mb_setup *s, const char *value) {
  size_t n = strlen(value);
  bool ok = n > 0 && n < sizeof ((mb_budget *)0)->batch_unit &&
            ((value[0] >= 'a' && value[0] <= 'z') || (value[0] >= 'A' && value[0] <= 'Z'));
  for (size_t i = 0; ok && i < n; i++) {
    char c = value[i];
    ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  }
  if (!ok)
    return fail(s, MB_E_INVALID_ARG, "batch_unit: '%s' is not a word of at most %d letters, digits, '_' or '-' "
                "(such as graphs)", value, (int)sizeof ((mb_budget *)0)->batch_unit - 1);
  char *c = dup_n(value, n);
  if (!c) return MB_E_NOMEM;
  free(s->batching.unit);
  s->batching.unit = c;
  return MB_OK;
}

/* ---- graph sizes ---- */

static int cmp_desc(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* Validate and store a table (names: n_dims strings, each of length len[k] when len is given). */
static int store_sizes(mb_setup *s, const char *const *names, const size_t *lens, size_t n_dims,
                       const int64_t *counts, int64_t n_graphs, const char *source) {
  if (n_graphs > MAX_GRAPHS)
    return fail(s, MB_E_LIMIT, "graph sizes: %lld graphs is more than membudget samples from (%lld)",
                (long long)n_graphs, (long long)MAX_GRAPHS);
  mb_graph_sizes z = {0};
  z.n_graphs = n_graphs;
  z.n_dims = n_dims;
  z.dims = calloc(n_dims ? n_dims : 1, sizeof *z.dims);
  z.values = malloc((size_t)n_graphs * n_dims * sizeof *z.values + 1);
  z.prefix = malloc((size_t)(n_graphs + 1) * n_dims * sizeof *z.prefix + 1);
  int64_t *col = malloc((size_t)n_graphs * sizeof *col + 1);
  int rc = z.dims && z.values && z.prefix && col ? MB_OK : MB_E_NOMEM;
  if (rc == MB_OK && source && !(z.source = dup_n(source, strlen(source)))) rc = MB_E_NOMEM;
  for (size_t k = 0; k < n_dims && rc == MB_OK; k++) {
    size_t len = lens ? lens[k] : strlen(names[k]);
    if (!len) {
      rc = fail(s, MB_E_INVALID_ARG, "graph sizes: dim %zu has no name", k + 1);
      break;
    }
    for (size_t j = 0; j < k && rc == MB_OK; j++)
      if (strlen(z.dims[j]) == len && !memcmp(z.dims[j], names[k], len))
        rc = fail(s, MB_E_INVALID_ARG, "graph sizes: dim '%s' is named twice", z.dims[j]);
    if (rc == MB_OK && !(z.dims[k] = dup_n(names[k], len))) rc = MB_E_NOMEM;
  }
  for (size_t k = 0; k < n_dims && rc == MB_OK; k++) {
    int64_t *pre = &z.prefix[k * (size_t)(n_graphs + 1)];
    for (int64_t g = 0; g < n_graphs; g++) {
      int64_t v = counts[(size_t)g * n_dims + k];
      if (v < 0 || v > MAX_COUNT) {
        rc = fail(s, MB_E_INVALID_ARG, "graph sizes: graph %lld has %s = %lld: a count is an integer in [0, %lld]",
                  (long long)g + 1, z.dims[k], (long long)v, (long long)MAX_COUNT);
        break;
      }
      col[g] = v;
      z.values[(size_t)g * n_dims + k] = v;
    }
    if (rc != MB_OK) break;
    qsort(col, (size_t)n_graphs, sizeof *col, cmp_desc);
    pre[0] = 0;
    for (int64_t g = 0; g < n_graphs && rc == MB_OK; g++)
      if (__builtin_add_overflow(pre[g], col[g], &pre[g + 1]) || pre[g + 1] > MAX_TOTAL)
        rc = fail(s, MB_E_LIMIT, "graph sizes: the %s of all graphs add up to more than %lld", z.dims[k],
                  (long long)MAX_TOTAL);
  }
  free(col);
  if (rc != MB_OK) {
    sizes_clear(&z);
    return rc;
  }
  sizes_clear(&s->batching.sizes);
  s->batching.sizes = z;
  return MB_OK;
}

MB_API int mb_setup_set_graph_sizes(mb_setup *s, const char *const *dims, size_t n_dims, const int64_t *counts,
                                    size_t n_graphs) {
  if (!s) return MB_E_INVALID_ARG;
  s->errmsg[0] = '\0';
  if (!n_graphs) {
    sizes_clear(&s->batching.sizes);
    return MB_OK;
  }
  if (!dims || !n_dims || !counts)
    return fail(s, MB_E_INVALID_ARG, "graph sizes: the dims (at least one name) and the counts are required");
  for (size_t k = 0; k < n_dims; k++)
    if (!dims[k]) return fail(s, MB_E_INVALID_ARG, "graph sizes: dim %zu has no name", k + 1);
  if (n_dims > MAX_DIMS) return fail(s, MB_E_LIMIT, "graph sizes: %zu dims is more than %d", n_dims, MAX_DIMS);
  return store_sizes(s, dims, NULL, n_dims, counts, (int64_t)n_graphs, NULL);
}

/* A CSV file: a header naming the dims, then one row of counts per graph. Blank lines and lines
 * starting with '#' are skipped; fields may be quoted; CRLF line ends are accepted. */
static int parse_csv(mb_setup *s, const char *path, const char *text, size_t len) {
  const char *p = text, *end = text + len;
  if (len >= 3 && !memcmp(p, "\xEF\xBB\xBF", 3)) p += 3; /* a UTF-8 byte-order mark */
  const char *names[MAX_DIMS];
  size_t lens[MAX_DIMS], n_dims = 0;
  int64_t *counts = NULL, n_graphs = 0, cap = 0;
  int rc = MB_OK;
  long line = 0;
  bool header = false;
  while (p < end && rc == MB_OK) {
    const char *nl = memchr(p, '\n', (size_t)(end - p)), *le = nl ? nl : end, *te;
    line++;
    const char *t = trim(p, le, &te);
    const char *next = nl ? nl + 1 : end;
    if (t == te || *t == '#') {
      p = next;
      continue;
    }
    if (memchr(t, '\0', (size_t)(te - t))) {
      rc = fail(s, MB_E_INVALID_ARG, "graph sizes %s line %ld: not text", path, line);
      break;
    }
    size_t field = 0;
    const char *f = t;
    if (!header) {
      for (;;) {
        const char *comma = memchr(f, ',', (size_t)(te - f)), *fe = comma ? comma : te, *ne;
        const char *nm = trim(f, fe, &ne);
        if (ne - nm >= 2 && *nm == '"' && ne[-1] == '"') nm++, ne--;
        if (field >= MAX_DIMS) {
          rc = fail(s, MB_E_LIMIT, "graph sizes %s: more than %d columns", path, MAX_DIMS);
          break;
        }
        if (nm == ne) {
          rc = fail(s, MB_E_INVALID_ARG, "graph sizes %s line %ld: column %zu of the header has no name (the header "
                    "names the per-sample dims, such as nodes,edges)", path, line, field + 1);
          break;
        }
        names[field] = nm;
        lens[field++] = (size_t)(ne - nm);
        if (!comma) break;
        f = comma + 1;
      }
      n_dims = field;
      header = true;
      p = next;
      continue;
    }
    if (n_graphs == cap) {
      if (n_graphs >= MAX_GRAPHS) {
        rc = fail(s, MB_E_LIMIT, "graph sizes %s: more than %lld graphs", path, (long long)MAX_GRAPHS);
        break;
      }
      cap = cap ? (cap > MAX_GRAPHS / 2 ? MAX_GRAPHS : cap * 2) : 256;
      int64_t *grown = realloc(counts, (size_t)cap * n_dims * sizeof *grown);
      if (!grown) {
        rc = MB_E_NOMEM;
        break;
      }
      counts = grown;
    }
    for (;;) {
      const char *comma = memchr(f, ',', (size_t)(te - f)), *fe = comma ? comma : te, *ve;
      const char *v = trim(f, fe, &ve);
      if (ve - v >= 2 && *v == '"' && ve[-1] == '"') v++, ve--;
      if (field >= n_dims) {
        rc = fail(s, MB_E_INVALID_ARG, "graph sizes %s line %ld: more fields than the header's %zu", path, line, n_dims);
        break;
      }
      int64_t c;
      if (!parse_count(v, ve, 0, &c)) {
        rc = fail(s, MB_E_INVALID_ARG, "graph sizes %s line %ld, column '%.*s': '%.*s' is not a count (an integer "
                  "in [0, %lld])", path, line, (int)lens[field], names[field], (int)(ve - v > 40 ? 40 : ve - v), v,
                  (long long)MAX_COUNT);
        break;
      }
      counts[(size_t)n_graphs * n_dims + field++] = c;
      if (!comma) break;
      f = comma + 1;
    }
    if (rc == MB_OK && field < n_dims)
      rc = fail(s, MB_E_INVALID_ARG, "graph sizes %s line %ld: %zu field%s, the header names %zu", path, line, field,
                field == 1 ? "" : "s", n_dims);
    if (rc == MB_OK) n_graphs++;
    p = next;
  }
  if (rc == MB_OK && !header)
    rc = fail(s, MB_E_INVALID_ARG, "graph sizes %s is empty: it needs a header naming the per-sample dims (such as "
              "nodes,edges) and one row of counts per graph", path);
  else if (rc == MB_OK && !n_graphs)
    rc = fail(s, MB_E_INVALID_ARG, "graph sizes %s has a header but no graphs: one row of counts per graph", path);
  const char *cnames[MAX_DIMS];
  for (size_t k = 0; k < n_dims; k++) cnames[k] = names[k];
  if (rc == MB_OK) rc = store_sizes(s, cnames, lens, n_dims, counts, n_graphs, path);
  free(counts);
  return rc;
}

static int load_csv(mb_setup *s, const char *path) {
  if (!*path) {
    sizes_clear(&s->batching.sizes);
    return MB_OK;
  }
  FILE *f = fopen(path, "rb");
  if (!f) return fail(s, MB_E_IO, "graph sizes %s: %s", path, strerror(errno));
  char *buf = NULL;
  size_t len = 0, cap = 0;
  int rc = MB_OK;
  for (;;) {
    if (len == cap) {
      if ((int64_t)cap >= MAX_CSV_BYTES) {
        rc = fail(s, MB_E_LIMIT, "graph sizes %s: larger than 1 GiB", path);
        break;
      }
      cap = cap ? cap * 2 : 65536;
      char *grown = realloc(buf, cap);
      if (!grown) {
        rc = MB_E_NOMEM;
        break;
      }
      buf = grown;
    }
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (got == 0) {
      if (ferror(f)) rc = fail(s, MB_E_IO, "graph sizes %s: read error", path);
      break;
    }
  }
  fclose(f);
  if (rc == MB_OK) rc = parse_csv(s, path, buf ? buf : "", len);
  free(buf);
  return rc;
}

int mb_setup_graphs_option(mb_setup *s, const char *key, const char *value, int *rc) {
  mb_batching *b = &s->batching;
  if (!strcmp(key, "per_sample")) {
    *rc = set_per_sample(s, value);
  } else if (!strcmp(key, "batch_unit")) {
    *rc = set_unit(s, value);
  } else if (!strcmp(key, "graph_sizes")) {
    *rc = load_csv(s, value);
  } else if (!strcmp(key, "graph_quantile")) {
    char *end = NULL;
    double q = strtod(value, &end);
    if (!*value || !strcmp(value, "largest")) b->quantile = 0;
    else if (*end || !(q > 0 && q <= 1))
      *rc = fail(s, MB_E_INVALID_ARG, "graph_quantile: '%s' is not a fraction in (0, 1] (or 'largest': the worst "
                 "batch)", value);
    else b->quantile = q;
  } else if (!strcmp(key, "graph_batches")) {
    int64_t n = 0;
    if (!parse_count(value, value + strlen(value), 1, &n) || n > 1000000)
      *rc = fail(s, MB_E_INVALID_ARG, "graph_batches: '%s' is not an integer in [1, 1000000]", value);
    else b->batches = n;
  } else {
    return 0;
  }
  return 1;
}

/* ---- the per-sample dims (shape/batching.c computes them) ---- */

MB_API size_t mb_setup_num_sample_dims(const mb_setup *s) {
  return s ? mb_batching_num_sample_dims(&s->batching) : 0;
}

MB_API const char *mb_setup_sample_dim(const mb_setup *s, size_t i) {
  return s ? mb_batching_sample_dim(&s->batching, i) : NULL;
}

int64_t mb_setup_batch_limit(const mb_setup *s) { return mb_batching_limit(s ? &s->batching : NULL); }

int mb_setup_batch_rule(const mb_setup *s) { return mb_batching_rule(s ? &s->batching : NULL); }

const char *mb_setup_batch_unit(const mb_setup *s) { return mb_batching_unit(s ? &s->batching : NULL); }

MB_API int mb_setup_sample_dims_at(mb_setup *s, int64_t batch, int64_t *values, size_t n) {
  if (!s) return MB_E_INVALID_ARG;
  s->errmsg[0] = '\0';
  size_t need = mb_setup_num_sample_dims(s);
  if ((!values && need) || n < need)
    return fail(s, MB_E_INVALID_ARG, "mb_setup_sample_dims_at: room for %zu values is needed", need);
  mb_diag d;
  mb_diag_init(&d);
  if (mb_batching_dims_at(&s->batching, batch, values, &d) != MB_OK) {
    snprintf(s->errmsg, sizeof s->errmsg, "%s", d.msg);
    return d.status;
  }
  return MB_OK;
}

MB_API size_t mb_setup_describe_batch(mb_setup *s, int64_t G, char *buf, size_t size) {
  if (!s) return 0;
  if (buf && size) buf[0] = '\0';
  size_t n = mb_setup_num_sample_dims(s);
  if (!n) return 0;
  int64_t v[2 * MAX_DIMS];
  if (n > 2 * MAX_DIMS || mb_setup_sample_dims_at(s, G, v, 2 * MAX_DIMS) != MB_OK) return 0;
  const mb_batching *b = &s->batching;
  const mb_graph_sizes *z = &b->sizes;
  const char *unit = mb_setup_batch_unit(s);
  char text[4096], num[32], num2[32];
  size_t o = 0;
#define OUT(...) \
  do { if (o < sizeof text) o += (size_t)snprintf(text + o, sizeof text - o, __VA_ARGS__); } while (0)
  mb_fmt_thousands(num, sizeof num, (uint64_t)G);
  const char *from = z->source ? z->source : "the graph sizes given";
  if (z->n_graphs) mb_fmt_thousands(num2, sizeof num2, (uint64_t)z->n_graphs);
  if (z->n_graphs && b->quantile > 0) {
    OUT("the %.6g quantile of %lld random batches of %s %s from the %s in %s (seeded with %llu and the batch "
        "size): ", b->quantile, (long long)mb_batching_num_batches(b), num, unit, num2, from,
        (unsigned long long)MB_BATCHING_QUANTILE_SEED);
  } else if (z->n_graphs && G == z->n_graphs) {
    OUT("the whole data set: all %s %s in %s: ", num, unit, from);
  } else if (z->n_graphs) {
    OUT("the worst batch: the %s largest %s of the %s in %s (each dim's %s largest values summed): ", num, unit,
        num2, from, num);
  } else {
    OUT("%s %s of ", num, unit);
    size_t m = 0;
    for (size_t i = 0; i < b->n; i++) m += b->counts[i] > 1;
    for (size_t i = 0, k = 0; i < b->n; i++) {
      if (b->counts[i] <= 1) continue;
      mb_fmt_thousands(num2, sizeof num2, (uint64_t)b->counts[i]);
      OUT("%s%s %s", k ? (k + 1 == m ? " and " : ", ") : "", num2, b->names[i]);
      k++;
    }
    OUT(" each: ");
  }
  /* the table's dims first, then those growing by a count per graph (said so with a table) */
  for (int pass = 0, k = 0; pass < 2; pass++)
    for (size_t i = 0; i < n; i++) {
      const char *name = mb_setup_sample_dim(s, i);
      bool in_table = mb_batching_column(b, name) >= 0;
      if (in_table != (pass == 0)) continue;
      mb_fmt_thousands(num2, sizeof num2, (uint64_t)v[i]);
      OUT("%s%s %s", k++ ? ", " : "", num2, name);
      int p = mb_batching_per_sample_index(b, name);
      size_t ul = strlen(unit);
      if (z->n_graphs && !in_table && p >= 0) /* "4 per graph": the unit, its plural 's' dropped */
        OUT(" (%lld per %.*s)", (long long)b->counts[p], (int)(ul > 1 && unit[ul - 1] == 's' ? ul - 1 : ul), unit);
    }
  if (z->n_graphs && b->quantile > 0) {
    OUT("; no dim of at least %lld of the %lld batches is larger", (long long)mb_batching_covered_batches(b),
        (long long)mb_batching_num_batches(b));
  }
#undef OUT
  if (o >= sizeof text) o = sizeof text - 1;
  if (buf && size) snprintf(buf, size, "%s", text);
  return o;
}
