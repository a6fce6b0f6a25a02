/* A recorded step's requests, named from their frames. Field names are those of
 * torch/csrc/cuda/Module.cpp (_cuda_memorySnapshot): trace entries "action", "addr", "size",
 * "time_us", "frames" ({"name", "filename", "line"}), and "external_annotations" ({"stage":
 * "START"|"END", "name", "time_us"}) that torch/optim/optimizer.py's profile hook writes. */
#include "alloc/snapshot_stream.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/addrmap.h"
#include "membudget/membudget.h"

/* Work per input byte: a real snapshot shares its frames through the pickle's memo (about 0.2
 * items walked per byte); a tree that shares whole traces asks for far more. */
#define ITEMS_PER_BYTE 8
#define MAX_FRAMES 256

typedef struct reader {
  uint64_t budget;       /* datum items that may still be walked */
  mb_snap_stream *out;
  size_t cap;
  mb_diag *d;
} reader;

static bool spend(reader *r, uint64_t items) {
  if (items > r->budget) {
    mb_fail(r->d, MB_E_LIMIT, "the snapshot asks for more work than its size allows (its trace entries or frames "
                              "are shared many times over); refused");
    return false;
  }
  r->budget -= items;
  return true;
}

static bool starts(const char *s, size_t n, const char *prefix) {
  size_t k = strlen(prefix);
  return n >= k && !memcmp(s, prefix, k);
}

/* the token of s (n bytes) from `at` to the next "::" or '(' */
static mb_snap_name token(const char *s, size_t n, size_t at) {
  size_t e = at;
  while (e < n && s[e] != '(' && !(s[e] == ':' && e + 1 < n && s[e + 1] == ':')) e++;
  return (mb_snap_name){e > at ? s + at : NULL, e - at};
}

static bool name_is(mb_snap_name t, const char *s) { return t.s && t.n == strlen(s) && !memcmp(t.s, s, t.n); }

/* Allocation primitives: an op that only makes the storage its caller asked for. */
static bool primitive(mb_snap_name t) {
  static const char *const names[] = {"empty", "empty_strided", "empty_memory_format", "empty_like", "new_empty",
                                      "new_empty_strided", "resize_", "as_strided"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (name_is(t, names[i])) return true;
  return false;
}

static bool str_of(const mb_datum *v, const char **s, size_t *n) {
  if (!v || v->kind != MB_D_STR) return false;
  *s = v->s;
  *n = v->n;
  return true;
}

/* what the frames (innermost first) say about a request */
static bool name_request(reader *r, const mb_datum *frames, mb_snap_request *q, bool *backward) {
  *backward = false;
  if (!frames || frames->kind != MB_D_LIST) return true;
  size_t nf = frames->n < MAX_FRAMES ? frames->n : MAX_FRAMES;
  if (!spend(r, nf)) return false;
  for (size_t i = 0; i < nf; i++) {
    const mb_datum *f = frames->items[i];
    const char *s = NULL, *file = NULL;
    size_t n = 0, fn = 0;
    if (!f || f->kind != MB_D_DICT || !str_of(mb_datum_get(f, "name"), &s, &n)) continue;
    if (!q->op.s && starts(s, n, "at::_ops::")) {
      mb_snap_name t = token(s, n, strlen("at::_ops::"));
      if (t.s && !primitive(t)) q->op = t;
    }
    if (!q->grad_fn.s && starts(s, n, "torch::autograd::generated::")) {
      mb_snap_name t = token(s, n, strlen("torch::autograd::generated::"));
      if (t.n > 6 && strstr(t.s, "Backward") && (size_t)(strstr(t.s, "Backward") - t.s) < t.n) q->grad_fn = t;
    }
    if (starts(s, n, "torch::autograd::Engine::")) *backward = true;
    if (!q->site.s && str_of(mb_datum_get(f, "filename"), &file, &fn) && fn > 3 && !memcmp(file + fn - 3, ".py", 3) &&
        !strstr(file, "/torch/")) {
      size_t b = fn;
      while (b > 0 && file[b - 1] != '/') b--;
      q->site = (mb_snap_name){file + b, fn - b};
      q->site_fn = (mb_snap_name){s, n};
      mb_datum_u64(mb_datum_get(f, "line"), &q->site_line);
    }
  }
  return true;
}

static bool time_of(const mb_datum *e, uint64_t *t) {
  int64_t i = 0;
  if (mb_datum_u64(mb_datum_get(e, "time_us"), t)) return true;
  if (mb_datum_i64(mb_datum_get(e, "time_us"), &i)) {
    *t = 0;
    return true;
  }
  return false;
}

/* The optimizer steps' spans from the annotations: the last two ends and the last span. */
typedef struct steps {
  uint64_t n_end, end_prev, end_last, start_last;
} steps;

static bool read_steps(reader *r, const mb_datum *root, steps *st) {
  memset(st, 0, sizeof *st);
  const mb_datum *ann = mb_datum_get(root, "external_annotations");
  if (!ann || ann->kind != MB_D_LIST) return true;
  if (!spend(r, ann->n)) return false;
  uint64_t start = 0;
  for (size_t i = 0; i < ann->n; i++) {
    const mb_datum *a = ann->items[i];
    const char *name = NULL;
    size_t n = 0;
    uint64_t t = 0;
    if (!a || a->kind != MB_D_DICT || !str_of(mb_datum_get(a, "name"), &name, &n) ||
        !starts(name, n, "Optimizer.step") || !time_of(a, &t))
      continue;
    if (mb_datum_is_str(mb_datum_get(a, "stage"), "START")) start = t;
    else if (mb_datum_is_str(mb_datum_get(a, "stage"), "END")) {
      st->n_end++;
      st->end_prev = st->end_last;
      st->end_last = t;
      st->start_last = start;
    }
  }
  return true;
}

static int grow(reader *r) {
  mb_snap_stream *o = r->out;
  if (o->n < r->cap) return MB_OK;
  size_t cap = r->cap ? r->cap * 2 : 256;
  mb_snap_request *g = realloc(o->req, cap * sizeof *g);
  if (!g) return mb_fail(r->d, MB_E_NOMEM, "out of memory");
  o->req = g;
  r->cap = cap;
  return MB_OK;
}

static uint64_t count_allocs(const mb_datum *t) {
  uint64_t n = 0;
  for (size_t i = 0; t && t->kind == MB_D_LIST && i < t->n; i++)
    if (t->items[i] && mb_datum_is_str(mb_datum_get(t->items[i], "action"), "alloc")) n++;
  return n;
}

static int read_trace(reader *r, const mb_datum *trace, const steps *st) {
  mb_snap_stream *o = r->out;
  mb_addrmap live = {0};
  uint64_t level = 0;
  bool have_times = st->n_end > 0;
  for (size_t i = 0; i < trace->n && r->d->status == MB_OK; i++) {
    const mb_datum *e = trace->items[i];
    if (!e || e->kind != MB_D_DICT) continue;
    uint64_t t = 0, addr = 0, size = 0;
    if (have_times && time_of(e, &t)) {
      if (t > st->end_last) break;
      if (st->n_end >= 2 && t <= st->end_prev) continue;
    }
    const mb_datum *act = mb_datum_get(e, "action");
    bool is_alloc = mb_datum_is_str(act, "alloc");
    bool is_free = mb_datum_is_str(act, "free_requested") || mb_datum_is_str(act, "free_completed");
    if ((!is_alloc && !is_free) || !mb_datum_u64(mb_datum_get(e, "addr"), &addr)) continue;
    size_t j = mb_addrmap_find(&live, addr);
    if (is_free) {
      if (j == SIZE_MAX) { /* allocated before the step, or its free already requested */
        if (mb_datum_is_str(act, "free_requested")) o->frees_of_older++;
        continue;
      }
      mb_snap_request *q = &o->req[live.val[j]];
      q->free_at = o->n;
      level -= q->size;
      mb_addrmap_del(&live, j);
      continue;
    }
    if (!mb_datum_u64(mb_datum_get(e, "size"), &size)) continue;
    if (j != SIZE_MAX) mb_addrmap_del(&live, j); /* the trace lost its free */
    if (grow(r) != MB_OK) break;
    mb_snap_request *q = &o->req[o->n];
    memset(q, 0, sizeof *q);
    q->size = size;
    q->free_at = MB_SNAP_NOT_FREED;
    bool backward = false;
    if (!name_request(r, mb_datum_get(e, "frames"), q, &backward)) break;
    q->phase = have_times && t >= st->start_last && t <= st->end_last ? MB_SNAP_OPTIMIZER
               : backward                                             ? MB_SNAP_BACKWARD
                                                                      : MB_SNAP_FORWARD;
    if (mb_addrmap_put(&live, addr, (int64_t)o->n) != MB_OK) {
      mb_fail(r->d, MB_E_NOMEM, "out of memory");
      break;
    }
    o->n++;
    level = level > UINT64_MAX - size ? UINT64_MAX : level + size;
    if (level > o->peak_above_start) o->peak_above_start = level;
  }
  mb_addrmap_free(&live);
  return r->d->status;
}

int mb_snap_stream_read(const mb_datum *root, size_t input_bytes, mb_snap_stream *out, mb_diag *d) {
  memset(out, 0, sizeof *out);
  reader r = {.budget = (uint64_t)input_bytes * ITEMS_PER_BYTE + 4096, .out = out, .d = d};
  if (!root || root->kind != MB_D_DICT) return mb_fail(d, MB_E_PARSE, "not a memory snapshot: the top level is not a dict");
  const mb_datum *traces = mb_datum_get(root, "device_traces");
  if (!traces || traces->kind != MB_D_LIST)
    return mb_fail(d, MB_E_PARSE, "not a memory snapshot: no \"device_traces\" list (record it with "
                                  "torch.cuda.memory._record_memory_history() before taking the snapshot)");
  const mb_datum *best = NULL;
  uint64_t most = 0;
  for (size_t i = 0; i < traces->n; i++) {
    const mb_datum *t = traces->items[i];
    if (!t || t->kind != MB_D_LIST || !spend(&r, t->n + 1)) {
      if (d->status != MB_OK) return d->status;
      continue;
    }
    uint64_t n = count_allocs(t);
    if (n > most) {
      most = n;
      best = t;
      out->device = (int32_t)(i > INT32_MAX ? INT32_MAX : i);
    }
  }
  if (!best) return mb_fail(d, MB_E_PARSE, "the snapshot's device traces hold no \"alloc\" request");
  steps st;
  if (!read_steps(&r, root, &st) || !spend(&r, best->n)) return d->status;
  out->steps = st.n_end;
  out->window = st.n_end >= 2 ? 2 : st.n_end == 1 ? 1 : 0;
  if (read_trace(&r, best, &st) != MB_OK) {
    mb_snap_stream_free(out);
    return d->status;
  }
  if (!out->n) return mb_fail(d, MB_E_PARSE, "the snapshot's last step made no request");
  return MB_OK;
}

void mb_snap_stream_free(mb_snap_stream *s) {
  if (!s) return;
  free(s->req);
  s->req = NULL;
  s->n = 0;
}

const char *mb_snap_phase_name(int phase) {
  static const char *const names[MB_SNAP_PHASES] = {"forward", "backward", "optimizer"};
  return phase >= 0 && phase < MB_SNAP_PHASES ? names[phase] : "unknown";
}
