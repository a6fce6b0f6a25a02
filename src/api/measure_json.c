/* Measured mode as JSON: `membudget estimate --mode measured --json` (the estimate's document
 * plus "measured") and `membudget measure --json` (the device and replays). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/budget_doc.h"
#include "budget/advice.h"
#include "budget/measured.h"
#include "util/strbuf.h"
#include "util/versioned.h"

#define MEASURE_SCHEMA_VERSION 1

static void u64(mb_strbuf *sb, const char *key, uint64_t v, const char *after) {
  mb_sb_printf(sb, "\"%s\": ", key);
  mb_sb_json_u64(sb, v);
  mb_sb_puts(sb, after);
}

static void json_device(mb_strbuf *sb, const mb_device_info *v, const char *indent) {
  mb_sb_printf(sb, "{\n%s  \"ordinal\": %d,\n%s  \"name\": ", indent, (int)v->ordinal, indent);
  mb_sb_json_str(sb, v->name);
  mb_sb_printf(sb, ",\n%s  \"gpu\": ", indent);
  if (v->gpu) mb_sb_json_str(sb, v->gpu);
  else mb_sb_puts(sb, "null");
  mb_sb_printf(sb, ",\n%s  \"compute_capability\": \"%d.%d\",\n%s  \"runtime_version\": %d,\n%s  \"driver_version\": %d,\n%s  ",
               indent, (int)v->cc_major, (int)v->cc_minor, indent, (int)v->runtime_version, indent,
               (int)v->driver_version, indent);
  u64(sb, "total_memory", v->total_memory, ",\n");
  mb_sb_printf(sb, "%s  \"free_before\": ", indent);
  if (v->free_before) mb_sb_json_u64(sb, v->free_before);
  else mb_sb_puts(sb, "null");
  mb_sb_printf(sb, ",\n%s  ", indent);
  u64(sb, "free_after_context", v->free_after_context, ",\n");
  mb_sb_printf(sb, "%s  ", indent);
  u64(sb, "free_now", v->free_now, ",\n");
  mb_sb_printf(sb, "%s  ", indent);
  u64(sb, "context", v->context, ",\n");
  mb_sb_printf(sb, "%s  \"context_measured\": %s,\n%s  ", indent, v->context_measured ? "true" : "false", indent);
  u64(sb, "cublas", v->cublas, ",\n");
  mb_sb_printf(sb, "%s  ", indent);
  u64(sb, "cudnn", v->cudnn, ",\n");
  mb_sb_printf(sb, "%s  ", indent);
  u64(sb, "other_processes", v->other_processes, ",\n");
  mb_sb_printf(sb, "%s  \"runtime\": ", indent);
  mb_sb_json_str(sb, v->runtime_path);
  mb_sb_printf(sb, ",\n%s  \"notes\": ", indent);
  mb_sb_json_str(sb, v->notes);
  mb_sb_printf(sb, "\n%s}", indent);
}

static int device_info(const mb_measure *m, mb_device_info *v, mb_diag *d) {
  memset(v, 0, sizeof *v);
  v->struct_size = sizeof *v;
  if (mb_measure_device(m, v) != MB_OK) return mb_fail(d, MB_E_NO_CUDA, "%s", mb_measure_errmsg(m));
  return MB_OK;
}

MB_API int mb_measure_estimate_json(mb_measure *m, const mb_model *model, mb_setup *s, int trace, char **out,
                                    mb_budget *budget) {
  if (!s || !out) return MB_E_INVALID_ARG;
  *out = NULL;
  s->errmsg[0] = '\0';
  if (!model || !model->graph) {
    snprintf(s->errmsg, sizeof s->errmsg, "mb_measure_estimate_json: no model");
    return MB_E_INVALID_ARG;
  }
  mb_diag d;
  mb_diag_init(&d);
  mb_setup eff;
  mb_plan *p = NULL;
  mb_budget b;
  mb_device_info v;
  mb_strbuf extra;
  mb_sb_init(&extra);
  if (mb_measure_budget(m, model, s, &eff, &p, &b, &d) == MB_OK && device_info(m, &v, &d) == MB_OK) {
    mb_sb_puts(&extra, ",\n  \"measured\": {\n    ");
    u64(&extra, "fixed", b.measured_fixed, ",\n    ");
    u64(&extra, "per_sample", b.measured_per_sample, ",\n    ");
    u64(&extra, "static_device_peak", b.static_device_peak, ",\n    ");
    u64(&extra, "other_processes", b.other_processes, ",\n    ");
    u64(&extra, "conv_workspace", b.conv_workspace, ",\n    ");
    u64(&extra, "matmul_workspace", b.matmul_workspace, ",\n    \"device\": ");
    json_device(&extra, &v, "    ");
    mb_sb_puts(&extra, "\n  }");
    char *report = NULL; /* "modules", "top" of the simulated step when asked (api/advice_json.c) */
    if (mb_report_json(model, &eff, p, &b, &report, &d) == MB_OK && report) mb_sb_puts(&extra, report);
    free(report);
    if (d.status == MB_OK && mb_sb_failed(&extra)) mb_fail(&d, MB_E_NOMEM, "out of memory");
    else if (d.status == MB_OK && mb_budget_document(&eff, p, &b, trace, extra.data, out, &d) == MB_OK &&
             budget && mb_fill_versioned(budget, &b, sizeof b, offsetof(mb_budget, at_peak))) {
      mb_fail(&d, MB_E_INVALID_ARG, "mb_measure_estimate_json: budget.struct_size is not set");
      mb_free(*out);
      *out = NULL;
    }
  }
  mb_sb_free(&extra);
  mb_plan_free(p);
  if (d.status != MB_OK) snprintf(s->errmsg, sizeof s->errmsg, "%s", d.msg);
  return d.status;
}

/* fixed + per_sample x batch through the smallest and the largest batch that fit */
static void line_fit(mb_strbuf *sb, const char *key, const mb_replay *r, size_t n, bool measured) {
  const mb_replay *lo = NULL, *hi = NULL;
  for (size_t i = 0; i < n; i++) {
    if (measured && !r[i].fits) continue;
    if (!lo || r[i].batch < lo->batch) lo = &r[i];
    if (!hi || r[i].batch > hi->batch) hi = &r[i];
  }
  mb_sb_printf(sb, ",\n  \"%s\": ", key);
  if (!lo || lo->batch == hi->batch) {
    mb_sb_puts(sb, "null");
    return;
  }
  uint64_t a = measured ? lo->device_peak : lo->static_device_peak, b = measured ? hi->device_peak : hi->static_device_peak;
  uint64_t per = (b > a ? b - a : 0) / (uint64_t)(hi->batch - lo->batch);
  uint64_t fixed = a > per * (uint64_t)lo->batch ? a - per * (uint64_t)lo->batch : 0;
  mb_sb_puts(sb, "{");
  u64(sb, "fixed", fixed, ", ");
  u64(sb, "per_sample", per, "}");
}

MB_API int mb_measure_json(mb_measure *m, const mb_model *model, mb_setup *s, const int64_t *batches, size_t n,
                           char **out) {
  if (!s || !out) return MB_E_INVALID_ARG;
  *out = NULL;
  s->errmsg[0] = '\0';
  if (!model || !model->graph || !batches || !n || n > 1024) {
    snprintf(s->errmsg, sizeof s->errmsg, "mb_measure_json: a model and 1 to 1024 batch sizes are required");
    return MB_E_INVALID_ARG;
  }
  mb_diag d;
  mb_diag_init(&d);
  mb_device_info v;
  mb_replay *r = calloc(n, sizeof *r);
  if (!r) mb_fail(&d, MB_E_NOMEM, "out of memory");
  else if (mb_measure_replays(m, model, s, batches, n, r, &d) == MB_OK && device_info(m, &v, &d) == MB_OK) {
    mb_strbuf sb;
    mb_sb_init(&sb);
    mb_sb_printf(&sb, "{\n  \"schema_version\": %d,\n  \"device\": ", MEASURE_SCHEMA_VERSION);
    json_device(&sb, &v, "  ");
    mb_sb_puts(&sb, ",\n  \"replays\": [");
    for (size_t i = 0; i < n; i++) {
      const mb_replay *x = &r[i];
      mb_sb_printf(&sb, "%s\n    {\"batch\": %lld, \"fits\": %s, ", i ? "," : "", (long long)x->batch,
                   x->fits ? "true" : "false");
      u64(&sb, "allocated_peak", x->allocated_peak, ", ");
      u64(&sb, "reserved_peak", x->reserved_peak, ", ");
      u64(&sb, "device_bytes", x->device_bytes, ", ");
      u64(&sb, "device_peak", x->device_peak, ", ");
      u64(&sb, "forward_device_bytes", x->forward_device_bytes, ",\n     ");
      u64(&sb, "static_allocated_peak", x->static_allocated_peak, ", ");
      u64(&sb, "static_reserved_peak", x->static_reserved_peak, ", ");
      u64(&sb, "static_device_peak", x->static_device_peak, ",\n     ");
      u64(&sb, "conv_workspace", x->conv_workspace, ", ");
      u64(&sb, "matmul_workspace", x->matmul_workspace, ", ");
      mb_sb_printf(&sb, "\"segments\": %lld, \"convs\": %lld, \"matmuls\": %lld, \"seconds\": %.6f}",
                   (long long)x->segments, (long long)x->convs, (long long)x->matmuls, x->seconds);
    }
    mb_sb_puts(&sb, "\n  ]");
    line_fit(&sb, "measured", r, n, true);
    line_fit(&sb, "static", r, n, false);
    mb_sb_puts(&sb, "\n}\n");
    if (mb_sb_failed(&sb)) mb_fail(&d, MB_E_NOMEM, "out of memory");
    else *out = mb_sb_detach(&sb);
    mb_sb_free(&sb);
  }
  free(r);
  if (d.status != MB_OK) snprintf(s->errmsg, sizeof s->errmsg, "%s", d.msg);
  return d.status;
}
