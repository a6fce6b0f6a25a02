/* A snapshot's device traces through the allocator model, with the model's segment decisions
 * compared against the ones PyTorch recorded. Trace entry actions and fields are those
 * torch/csrc/cuda/Module.cpp writes (_cuda_memorySnapshot: "action", "addr" or, for "oom",
 * "device_free", "size", "stream"); the actions are TraceEntry's of CUDACachingAllocator.h. */
#include "alloc/replay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/addrmap.h"
#include "membudget/membudget.h"

/* ---- one device ---- */

typedef struct win_ev {
  int action;
  uint64_t size;
} win_ev;

typedef struct window {
  win_ev *ev;
  size_t n, cap;
} window;

typedef struct replayer {
  mb_replay_device *dev;
  mb_alloc *a;
  window rec, model;     /* segment events since the last request: recorded, and the model's */
  uint64_t seg_cap;
  uint64_t request;      /* the request being served (1-based) */
  int err;
} replayer;

static void win_add(replayer *r, window *w, int action, uint64_t size) {
  if (w->n == w->cap) {
    size_t cap = w->cap ? w->cap * 2 : 16;
    win_ev *grown = realloc(w->ev, cap * sizeof *grown);
    if (!grown) {
      r->err = MB_E_NOMEM;
      return;
    }
    w->ev = grown;
    w->cap = cap;
  }
  w->ev[w->n++] = (win_ev){action, size};
}

static void on_segment(void *ctx, const mb_alloc_event *e) {
  replayer *r = ctx;
  mb_replay_device *d = r->dev;
  win_add(r, &r->model, e->action, e->size);
  if (e->action == MB_SEG_OOM) return;
  if (d->n_segs == r->seg_cap) {
    uint64_t cap = r->seg_cap ? r->seg_cap * 2 : 64;
    mb_seg_event *grown = realloc(d->segs, (size_t)cap * sizeof *grown);
    if (!grown) {
      r->err = MB_E_NOMEM;
      return;
    }
    d->segs = grown;
    r->seg_cap = cap;
  }
  d->segs[d->n_segs++] = (mb_seg_event){e->action, e->addr, e->size, e->stream, r->request};
}

static void describe(char *buf, size_t size, const window *w) {
  size_t len = 0;
  buf[0] = '\0';
  if (!w->n) snprintf(buf, size, "none");
  for (size_t i = 0; i < w->n && len + 1 < size; i++) {
    int k = snprintf(buf + len, size - len, "%s%s %llu", i ? ", " : "", mb_alloc_action_name(w->ev[i].action),
                     (unsigned long long)w->ev[i].size);
    if (k < 0) break;
    len += (size_t)k;
  }
}

/* one request's segment events: the recorded ones against the model's */
static void compare(replayer *r, uint64_t request, uint64_t size, uint64_t stream) {
  mb_replay_device *d = r->dev;
  if (r->rec.n || r->model.n) {
    bool same = r->rec.n == r->model.n;
    for (size_t i = 0; same && i < r->rec.n; i++)
      same = r->rec.ev[i].action == r->model.ev[i].action && r->rec.ev[i].size == r->model.ev[i].size;
    d->windows++;
    if (same) {
      d->matched++;
    } else {
      d->mismatched++;
      if (d->n_first < MB_REPLAY_MISMATCHES) {
        mb_replay_mismatch *m = &d->first[d->n_first++];
        m->request = request;
        m->size = size;
        m->stream = stream;
        describe(m->recorded, sizeof m->recorded, &r->rec);
        describe(m->model, sizeof m->model, &r->model);
      }
    }
  }
  r->rec.n = r->model.n = 0;
}

static int action_of(const mb_datum *v) {
  static const char *const seg[] = {"segment_alloc", "segment_free", "segment_map", "segment_unmap"};
  for (int k = 0; k < 4; k++)
    if (mb_datum_is_str(v, seg[k])) return k;
  return -1;
}

/* an integer field as its 64 bits (streams are recorded as signed int64) */
static bool field(const mb_datum *e, const char *key, uint64_t *out) {
  int64_t i = 0;
  const mb_datum *v = mb_datum_get(e, key);
  if (mb_datum_u64(v, out)) return true;
  if (mb_datum_i64(v, &i)) {
    memcpy(out, &i, sizeof i);
    return true;
  }
  return false;
}

static int entry(replayer *r, mb_addrmap *live, const mb_datum *e, uint64_t index, mb_diag *d) {
  mb_replay_device *dev = r->dev;
  const mb_datum *act = mb_datum_get(e, "action");
  if (!act || act->kind != MB_D_STR)
    return mb_fail(d, MB_E_PARSE, "device %d, trace entry %llu: no \"action\" string", (int)dev->device,
                   (unsigned long long)index);
  uint64_t addr = 0, size = 0, stream = 0;
  bool is_alloc = mb_datum_is_str(act, "alloc"), is_free = mb_datum_is_str(act, "free_completed");
  bool is_oom = mb_datum_is_str(act, "oom");
  int seg = action_of(act);
  if (!is_alloc && !is_free && !is_oom && seg < 0) {
    dev->other++;
    return MB_OK;
  }
  if ((!is_oom && !field(e, "addr", &addr)) || (!is_free && !field(e, "size", &size)))
    return mb_fail(d, MB_E_PARSE, "device %d, trace entry %llu (%.*s): \"addr\" and \"size\" must be integers",
                   (int)dev->device, (unsigned long long)index, (int)(act->n > 40 ? 40 : act->n), act->s);
  field(e, "stream", &stream); /* absent: the default stream */
  if (seg >= 0) {
    dev->rec_events++;
    win_add(r, &r->rec, seg, size);
    return MB_OK;
  }
  if (is_free) {
    size_t j = mb_addrmap_find(live, addr);
    if (j == SIZE_MAX) {
      dev->unknown_frees++;
      return MB_OK;
    }
    int32_t id = (int32_t)live->val[j];
    mb_addrmap_del(live, j);
    dev->frees++;
    return id >= 0 ? mb_alloc_release(r->a, id) : MB_OK;
  }
  r->request++;
  int32_t id = -1;
  int rc = mb_alloc_malloc(r->a, size, stream, &id);
  if (rc < 0) return mb_fail(d, rc, "out of memory");
  if (is_oom) { /* PyTorch could not serve it: neither may the model keep it */
    dev->rec_ooms++;
    win_add(r, &r->rec, MB_SEG_OOM, size);
    if (rc == MB_OK && mb_alloc_release(r->a, id) != MB_OK) return mb_fail(d, MB_E_NOMEM, "out of memory");
  } else {
    dev->requests++;
    size_t j = mb_addrmap_find(live, addr);
    if (j != SIZE_MAX) { /* the trace lost this address's free: take it as freed now */
      dev->reused++;
      if (live->val[j] >= 0 && mb_alloc_release(r->a, (int32_t)live->val[j]) != MB_OK) return mb_fail(d, MB_E_NOMEM, "out of memory");
      mb_addrmap_del(live, j);
    }
    if (mb_addrmap_put(live, addr, rc == MB_OK ? id : -1) != MB_OK) return mb_fail(d, MB_E_NOMEM, "out of memory");
  }
  compare(r, r->request, size, stream);
  return MB_OK;
}

static int replay_device(const mb_datum *trace, const mb_alloc_config *c, mb_replay_device *dev, mb_diag *d) {
  replayer r = {.dev = dev};
  mb_addrmap live = {0};
  if (mb_alloc_create(c, &r.a) != MB_OK) return mb_fail(d, MB_E_NOMEM, "out of memory");
  mb_alloc_observe(r.a, on_segment, &r);
  /* the recorded events' running sum, for their reserved peak */
  int64_t rec_reserved = 0;
  for (size_t i = 0; i < trace->n && d->status == MB_OK; i++) {
    const mb_datum *e = trace->items[i];
    if (!e || e->kind != MB_D_DICT) {
      mb_fail(d, MB_E_PARSE, "device %d, trace entry %zu is not a dict", (int)dev->device, i);
      break;
    }
    dev->entries++;
    int seg = action_of(mb_datum_get(e, "action"));
    uint64_t size = 0;
    if (entry(&r, &live, e, i, d) != MB_OK) break;
    if (r.err) mb_fail(d, r.err, "out of memory");
    if (seg >= 0 && field(e, "size", &size)) {
      int64_t s = size > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)size; /* saturating: sizes are input */
      if (seg == MB_SEG_ALLOC || seg == MB_SEG_MAP) rec_reserved = rec_reserved > INT64_MAX - s ? INT64_MAX : rec_reserved + s;
      else rec_reserved = rec_reserved < INT64_MIN + s ? INT64_MIN : rec_reserved - s;
      if (seg == MB_SEG_ALLOC) dev->rec_segment_allocs++;
      if (rec_reserved > dev->rec_reserved_peak) dev->rec_reserved_peak = rec_reserved;
    }
  }
  if (d->status == MB_OK) compare(&r, 0, 0, 0); /* what the trace recorded after its last request */
  if (d->status == MB_OK && r.err) mb_fail(d, r.err, "out of memory");
  dev->model = *mb_alloc_get_stats(r.a);
  mb_alloc_free(r.a);
  mb_addrmap_free(&live);
  free(r.rec.ev);
  free(r.model.ev);
  return d->status;
}

const char *mb_snapshot_alloc_conf(const mb_datum *root) {
  const mb_datum *v = mb_datum_get(mb_datum_get(root, "allocator_settings"), "PYTORCH_CUDA_ALLOC_CONF");
  if (!v || v->kind != MB_D_STR) v = mb_datum_get(mb_datum_get(root, "allocator_settings"), "PYTORCH_ALLOC_CONF");
  return v && v->kind == MB_D_STR ? v->s : NULL;
}

int mb_replay_snapshot(const mb_datum *root, size_t input_bytes, const mb_alloc_config *c, mb_replay_result *out,
                       mb_diag *d) {
  memset(out, 0, sizeof *out);
  if (!root || root->kind != MB_D_DICT)
    return mb_fail(d, MB_E_PARSE, "not a memory snapshot: the top level is not a dict");
  const mb_datum *traces = mb_datum_get(root, "device_traces");
  if (!traces)
    return mb_fail(d, MB_E_PARSE, "not a memory snapshot: no \"device_traces\" (record it with "
                   "torch.cuda.memory._record_memory_history() before taking the snapshot)");
  if (traces->kind != MB_D_LIST) return mb_fail(d, MB_E_PARSE, "\"device_traces\" is not a list");
  const char *conf = mb_snapshot_alloc_conf(root);
  if (conf) snprintf(out->conf_from_snapshot, sizeof out->conf_from_snapshot, "%s", conf);
  /* work bounded by the input: a pickle's memo can share one trace (or entry) many times, so
   * the entries walked are counted against the file's size, and the devices capped */
  if (traces->n > MB_REPLAY_MAX_DEVICES)
    return mb_fail(d, MB_E_LIMIT, "the snapshot lists %zu device traces; at most %d are read", traces->n,
                   MB_REPLAY_MAX_DEVICES);
  uint64_t walk = 0, budget = (uint64_t)input_bytes * MB_REPLAY_ITEMS_PER_BYTE + 4096;
  for (size_t i = 0; i < traces->n; i++) {
    const mb_datum *t = traces->items[i];
    walk += t && t->kind == MB_D_LIST ? t->n : 0;
    if (walk > budget)
      return mb_fail(d, MB_E_LIMIT, "the snapshot asks for more work than its size allows (its device traces "
                                    "share entries many times over: %llu entries from %zu bytes); refused",
                     (unsigned long long)walk, input_bytes);
  }
  out->dev = calloc(traces->n + 1, sizeof *out->dev);
  if (!out->dev) return mb_fail(d, MB_E_NOMEM, "out of memory");
  for (size_t i = 0; i < traces->n && d->status == MB_OK; i++) {
    const mb_datum *t = traces->items[i];
    mb_replay_device *dev = &out->dev[out->n_dev++];
    dev->device = (int32_t)i;
    if (!t || t->kind != MB_D_LIST) {
      mb_fail(d, MB_E_PARSE, "device_traces[%zu] is not a list", i);
      break;
    }
    replay_device(t, c, dev, d);
  }
  return d->status;
}

void mb_replay_result_free(mb_replay_result *r) {
  if (!r) return;
  for (int32_t i = 0; i < r->n_dev; i++) free(r->dev[i].segs);
  free(r->dev);
  memset(r, 0, sizeof *r);
}
