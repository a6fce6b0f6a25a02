/* mb_replay_*: a recorded snapshot (pickle or JSON) through the allocator model, and its
 * report as text or JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/config.h"
#include "alloc/replay.h"
#include "budget/context.h"
#include "budget/setup.h"
#include "util/arena.h"
#include "util/format.h"
#include "util/strbuf.h"
#include "util/datum.h"

#define REPLAY_SCHEMA_VERSION 1
#define TEXT_SEGMENT_LINES 50

struct mb_alloc_replay {
  mb_replay_result res;
  char conf[512];
  const char *conf_source;  /* where the settings came from */
  uint64_t device_memory, context, limit;
  char errmsg[1024];
};

static int setup_config(mb_alloc_replay *r, const mb_setup *s, const mb_datum *root, mb_alloc_config *c, mb_diag *d) {
  mb_alloc_config_default(c);
  bool given = s && s->train.alloc_conf_set;
  const char *recorded = root ? mb_snapshot_alloc_conf(root) : NULL;
  const char *conf = given ? s->train.alloc_conf : recorded && *recorded ? recorded : NULL;
  r->conf_source = given ? "given" : conf ? "recorded in the snapshot" : "PyTorch's defaults";
  snprintf(r->conf, sizeof r->conf, "%s", conf ? conf : "");
  char err[512];
  int rc = mb_alloc_config_parse(c, conf, err, sizeof err);
  if (rc != MB_OK) return mb_fail(d, rc, "%s%s", err, given ? "" : " (the snapshot's PYTORCH_CUDA_ALLOC_CONF)");
  if (s && s->train.device_memory) {
    r->device_memory = s->train.device_memory;
    r->context = mb_train_context(&s->train, NULL, 0);
    r->limit = r->device_memory > r->context ? r->device_memory - r->context : 1;
    c->device_total = r->device_memory;
    c->limit = r->limit;
  }
  return MB_OK;
}

MB_API int mb_alloc_replay_create(const void *data, size_t size, const mb_setup *s, mb_alloc_replay **out) {
  if (!out) return MB_E_INVALID_ARG;
  mb_alloc_replay *r = calloc(1, sizeof *r);
  *out = r;
  if (!r) return MB_E_NOMEM;
  mb_diag d;
  mb_diag_init(&d);
  mb_arena a;
  mb_arena_init(&a);
  mb_datum *root = NULL;
  mb_alloc_config c;
  if (!data || !size) mb_fail(&d, MB_E_PARSE, "the snapshot is empty");
  else mb_data_parse(data, size, &a, &root, &d);
  if (d.status == MB_OK && setup_config(r, s, root, &c, &d) == MB_OK) mb_replay_snapshot(root, size, &c, &r->res, &d);
  mb_arena_destroy(&a);
  if (d.status != MB_OK) {
    snprintf(r->errmsg, sizeof r->errmsg, "%s", d.msg);
    mb_replay_result_free(&r->res);
  }
  return d.status;
}

MB_API void mb_alloc_replay_free(mb_alloc_replay *r) {
  if (!r) return;
  mb_replay_result_free(&r->res);
  free(r);
}

MB_API const char *mb_alloc_replay_errmsg(const mb_alloc_replay *r) { return r ? r->errmsg : ""; }

/* ---- text ---- */

static const char *bytes_h(char *buf, uint64_t v) { return mb_fmt_bytes(buf, 32, v); }

static void text_device(mb_strbuf *sb, const mb_replay_device *d) {
  char a[32], b[32], c[32];
  const mb_alloc_stats *m = &d->model;
  mb_sb_printf(sb, "\ndevice %d: %llu requests, %llu frees", (int)d->device, (unsigned long long)d->requests,
               (unsigned long long)d->frees);
  if (d->unknown_frees)
    mb_sb_printf(sb, " (+%llu of blocks allocated before the trace began)", (unsigned long long)d->unknown_frees);
  mb_sb_puts(sb, "\n");
  if (!d->requests && !d->rec_events) return;
  mb_sb_printf(sb, "  model     reserved peak %s, allocated peak %s (requested %s)\n", bytes_h(a, m->reserved_peak),
               bytes_h(b, m->allocated_peak), bytes_h(c, m->requested_peak));
  mb_sb_printf(sb, "            when reserved peaked: %llu segments, %s cached but free (largest block %s)\n",
               (unsigned long long)m->peak_segments, bytes_h(a, m->peak_cached_free), bytes_h(b, m->peak_largest_free));
  mb_sb_printf(sb, "            %llu cudaMalloc, %llu cudaFree, %llu maps, %llu unmaps; %llu retries; %llu out of memory\n",
               (unsigned long long)m->segment_allocs, (unsigned long long)m->segment_frees,
               (unsigned long long)m->maps, (unsigned long long)m->unmaps, (unsigned long long)m->retries,
               (unsigned long long)m->ooms);
  if (!d->rec_events && !d->rec_ooms) {
    mb_sb_puts(sb, "  recorded  no segment events in the trace: nothing to compare with\n");
  } else {
    mb_sb_printf(sb, "  recorded  %llu segment events (%llu segment_alloc), reserved peak %s over the trace; "
                 "%llu out of memory\n", (unsigned long long)d->rec_events, (unsigned long long)d->rec_segment_allocs,
                 bytes_h(a, d->rec_reserved_peak > 0 ? (uint64_t)d->rec_reserved_peak : 0),
                 (unsigned long long)d->rec_ooms);
    mb_sb_printf(sb, "  compared  %llu requests with segment events: %llu match, %llu differ\n",
                 (unsigned long long)d->windows, (unsigned long long)d->matched, (unsigned long long)d->mismatched);
    for (int i = 0; i < d->n_first; i++) {
      const mb_replay_mismatch *x = &d->first[i];
      if (x->request) mb_sb_printf(sb, "    request %llu (%llu bytes): ", (unsigned long long)x->request,
                                   (unsigned long long)x->size);
      else mb_sb_puts(sb, "    after the last request: ");
      mb_sb_printf(sb, "recorded %s; model %s\n", x->recorded, x->model);
    }
  }
  if (!d->n_segs) return;
  mb_sb_puts(sb, "  segments (model):\n    request  event            address            bytes\n");
  for (uint64_t i = 0; i < d->n_segs && i < TEXT_SEGMENT_LINES; i++) {
    const mb_seg_event *e = &d->segs[i];
    mb_sb_printf(sb, "    %7llu  %-14s  0x%012llx  %14llu  %s\n", (unsigned long long)e->request,
                 mb_alloc_action_name(e->action), (unsigned long long)e->addr, (unsigned long long)e->size,
                 bytes_h(a, e->size));
  }
  if (d->n_segs > TEXT_SEGMENT_LINES)
    mb_sb_printf(sb, "    ... %llu more (--json lists every one)\n", (unsigned long long)(d->n_segs - TEXT_SEGMENT_LINES));
}

static void text_report(mb_strbuf *sb, const mb_alloc_replay *r) {
  char a[32], b[32];
  mb_sb_printf(sb, "settings  %s (%s)\n", *r->conf ? r->conf : "default", r->conf_source);
  if (r->device_memory)
    mb_sb_printf(sb, "device    %s, of which %s for the allocator (less the context)\n", bytes_h(a, r->device_memory),
                 bytes_h(b, r->limit));
  else
    mb_sb_puts(sb, "device    no limit (give --gpu or --device-memory to model running out)\n");
  mb_sb_puts(sb, "addresses are the model's own; only sizes and order are compared\n");
  for (int32_t i = 0; i < r->res.n_dev; i++) text_device(sb, &r->res.dev[i]);
}

/* ---- JSON ---- */

static void kv(mb_strbuf *sb, const char *key, uint64_t v, bool last) {
  mb_sb_printf(sb, "\"%s\": ", key);
  mb_sb_json_u64(sb, v);
  if (!last) mb_sb_puts(sb, ", ");
}

static void json_device(mb_strbuf *sb, const mb_replay_device *d, bool last) {
  const mb_alloc_stats *m = &d->model;
  mb_sb_printf(sb, "    {\"device\": %d, ", (int)d->device);
  kv(sb, "entries", d->entries, false);
  kv(sb, "requests", d->requests, false);
  kv(sb, "frees", d->frees, false);
  kv(sb, "unknown_frees", d->unknown_frees, false);
  kv(sb, "reused_addresses", d->reused, false);
  kv(sb, "other_entries", d->other, true);
  mb_sb_puts(sb, ",\n     \"model\": {");
  kv(sb, "reserved_peak", m->reserved_peak, false);
  kv(sb, "allocated_peak", m->allocated_peak, false);
  kv(sb, "requested_peak", m->requested_peak, false);
  kv(sb, "segments_at_peak", m->peak_segments, false);
  kv(sb, "cached_free_at_peak", m->peak_cached_free, false);
  kv(sb, "largest_free_at_peak", m->peak_largest_free, false);
  kv(sb, "segment_allocs", m->segment_allocs, false);
  kv(sb, "segment_frees", m->segment_frees, false);
  kv(sb, "maps", m->maps, false);
  kv(sb, "unmaps", m->unmaps, false);
  kv(sb, "retries", m->retries, false);
  kv(sb, "ooms", m->ooms, true);
  mb_sb_puts(sb, "},\n     \"recorded\": {");
  kv(sb, "segment_events", d->rec_events, false);
  kv(sb, "segment_allocs", d->rec_segment_allocs, false);
  kv(sb, "ooms", d->rec_ooms, false);
  kv(sb, "reserved_peak", d->rec_reserved_peak > 0 ? (uint64_t)d->rec_reserved_peak : 0, true);
  mb_sb_puts(sb, "},\n     \"comparison\": ");
  if (!d->rec_events && !d->rec_ooms) {
    mb_sb_puts(sb, "null");
  } else {
    mb_sb_puts(sb, "{");
    kv(sb, "requests_compared", d->windows, false);
    kv(sb, "matches", d->matched, false);
    kv(sb, "mismatches", d->mismatched, false);
    mb_sb_puts(sb, "\"first_mismatches\": [");
    for (int i = 0; i < d->n_first; i++) {
      const mb_replay_mismatch *x = &d->first[i];
      mb_sb_puts(sb, i ? ", {" : "{");
      if (x->request) kv(sb, "request", x->request, false);
      else mb_sb_puts(sb, "\"request\": null, ");
      kv(sb, "size", x->size, false);
      mb_sb_puts(sb, "\"recorded\": ");
      mb_sb_json_str(sb, x->recorded);
      mb_sb_puts(sb, ", \"model\": ");
      mb_sb_json_str(sb, x->model);
      mb_sb_puts(sb, "}");
    }
    mb_sb_puts(sb, "]}");
  }
  mb_sb_puts(sb, ",\n     \"segments\": [");
  for (uint64_t i = 0; i < d->n_segs; i++) {
    const mb_seg_event *e = &d->segs[i];
    mb_sb_printf(sb, "%s\n       {\"request\": %llu, \"event\": \"%s\", ", i ? "," : "", (unsigned long long)e->request,
                 mb_alloc_action_name(e->action));
    kv(sb, "address", e->addr, false);
    kv(sb, "size", e->size, false);
    kv(sb, "stream", e->stream, true);
    mb_sb_puts(sb, "}");
  }
  mb_sb_printf(sb, "%s]}%s\n", d->n_segs ? "\n     " : "", last ? "" : ",");
}

static void json_report(mb_strbuf *sb, const mb_alloc_replay *r) {
  mb_sb_printf(sb, "{\n  \"schema_version\": %d,\n  \"alloc_conf\": ", REPLAY_SCHEMA_VERSION);
  mb_sb_json_str(sb, r->conf);
  mb_sb_puts(sb, ",\n  \"alloc_conf_source\": ");
  mb_sb_json_str(sb, r->conf_source);
  mb_sb_puts(sb, ",\n  \"device_memory\": ");
  if (r->device_memory) mb_sb_json_u64(sb, r->device_memory);
  else mb_sb_puts(sb, "null");
  mb_sb_puts(sb, ",\n  \"allocator_limit\": ");
  if (r->device_memory) mb_sb_json_u64(sb, r->limit);
  else mb_sb_puts(sb, "null");
  mb_sb_puts(sb, ",\n  \"devices\": [\n");
  for (int32_t i = 0; i < r->res.n_dev; i++) json_device(sb, &r->res.dev[i], i + 1 == r->res.n_dev);
  mb_sb_puts(sb, "  ]\n}\n");
}

MB_API int mb_alloc_replay_report(const mb_alloc_replay *r, int json, char **out) {
  if (!r || !out) return MB_E_INVALID_ARG;
  *out = NULL;
  if (r->errmsg[0]) return MB_E_INVALID_ARG;
  mb_strbuf sb;
  mb_sb_init(&sb);
  if (json) json_report(&sb, r);
  else text_report(&sb, r);
  if (mb_sb_failed(&sb)) {
    mb_sb_free(&sb);
    return MB_E_NOMEM;
  }
  *out = mb_sb_detach(&sb);
  return MB_OK;
}
