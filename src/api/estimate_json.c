/* The budget as text: the one-line MemoryBudget(...) summary and the JSON document of
 * `membudget estimate --json` (raw byte integers, "schema_version"). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/budget_doc.h"
#include "api/eval_json.h"
#include "api/info_summary.h"
#include "budget/advice.h"
#include "budget/context.h"
#include "budget/estimate.h"
#include "budget/reserved.h"
#include "budget/step.h"
#include "shape/infer.h"
#include "sim/optim.h"
#include "util/format.h"
#include "util/strbuf.h"
#include "util/versioned.h"

#define ESTIMATE_SCHEMA_VERSION 1

static const char *signed_bytes(char *buf, size_t size, int64_t v) {
  if (size < 2) return "";
  buf[0] = '-';
  mb_fmt_bytes(buf + (v < 0), size - 1, v < 0 ? (uint64_t)(-v) : (uint64_t)v);
  return buf;
}

/* " per_graph=1.41 MiB" when the batch counts something else than samples (graphs), from the
 * budget's own size: a caller's older, smaller struct has no unit */
static const char *per_unit(const mb_budget *b, char *buf, size_t size) {
  buf[0] = '\0';
  if (b->struct_size < offsetof(mb_budget, batch_rule)) return buf;
  char unit[sizeof b->batch_unit + 1];
  memcpy(unit, b->batch_unit, sizeof b->batch_unit);
  unit[sizeof b->batch_unit] = '\0';
  size_t n = strlen(unit);
  if (!n || !strcmp(unit, "samples")) return buf;
  if (n > 1 && unit[n - 1] == 's') unit[n - 1] = '\0'; /* graphs -> per_graph */
  char bytes[32];
  snprintf(buf, size, " per_%s=%s", unit, mb_fmt_bytes(bytes, sizeof bytes, b->dynamic_per_sample));
  return buf;
}

MB_API size_t mb_budget_summary(const mb_budget *b, char *buf, size_t size) {
  if (!b) return 0;
  char t[12][32], per[64];
  int n = snprintf(buf, buf ? size : 0,
                   "MemoryBudget(total=%s static=%s [params=%s embed=%s opt=%s grad=%s teacher=%s] "
                   "activation=%s per_sample=%s%s available=%s batch_size=%lld mode=%s)",
                   mb_fmt_bytes(t[0], 32, b->device_peak), mb_fmt_bytes(t[1], 32, b->static_bytes),
                   mb_fmt_bytes(t[2], 32, b->params_trainable + b->params_frozen),
                   mb_fmt_bytes(t[3], 32, b->embeddings), mb_fmt_bytes(t[4], 32, b->optimizer_states),
                   mb_fmt_bytes(t[5], 32, b->gradients), mb_fmt_bytes(t[6], 32, b->teacher_weights),
                   mb_fmt_bytes(t[7], 32, b->dynamic_peak), mb_fmt_bytes(t[8], 32, b->dynamic_per_sample),
                   per_unit(b, per, sizeof per), b->device_memory ? signed_bytes(t[9], 32, b->available) : "unknown",
                   (long long)b->batch_size, b->mode == MB_MODE_MEASURED ? "measured" : "static");
  return n < 0 ? 0 : (size_t)n;
}

static void field(mb_strbuf *sb, const char *key, uint64_t v, int last) {
  mb_sb_printf(sb, "    \"%s\": ", key);
  mb_sb_json_u64(sb, v);
  mb_sb_puts(sb, last ? "\n" : ",\n");
}

static const char *precision_name(int p) {
  static const char *const names[] = {"fp32", "amp-fp16", "amp-bf16", "fp16", "bf16"};
  return p >= 0 && p <= 4 ? names[p] : "fp32";
}

/* per_sample, batch_unit, graph_sizes (null, or the table's size, largest and total per dim),
 * graph_quantile (null: the worst batch), graph_batches */
static void json_batching_setup(mb_strbuf *sb, const mb_setup *s) {
  const mb_batching *b = &s->batching;
  const mb_graph_sizes *z = &b->sizes;
  mb_sb_puts(sb, "    \"per_sample\": {");
  for (size_t i = 0; i < b->n; i++) {
    mb_sb_puts(sb, i ? ", " : "");
    mb_sb_json_str(sb, b->names[i]);
    mb_sb_printf(sb, ": %lld", (long long)b->counts[i]);
  }
  mb_sb_puts(sb, "},\n    \"batch_unit\": ");
  mb_sb_json_str(sb, mb_setup_batch_unit(s));
  mb_sb_puts(sb, ",\n    \"graph_sizes\": ");
  if (!z->n_graphs) {
    mb_sb_puts(sb, "null");
  } else {
    mb_sb_printf(sb, "{\"graphs\": %lld, \"source\": ", (long long)z->n_graphs);
    mb_sb_json_str(sb, z->source);
    const char *what[] = {"dims", "largest", "total"};
    for (int w = 0; w < 3; w++) {
      mb_sb_printf(sb, ", \"%s\": %s", what[w], w ? "{" : "[");
      for (size_t k = 0; k < z->n_dims; k++) {
        const int64_t *pre = &z->prefix[k * (size_t)(z->n_graphs + 1)];
        mb_sb_puts(sb, k ? ", " : "");
        mb_sb_json_str(sb, z->dims[k]);
        if (w == 1) mb_sb_printf(sb, ": %lld", (long long)pre[1]);
        if (w == 2) mb_sb_printf(sb, ": %lld", (long long)pre[z->n_graphs]);
      }
      mb_sb_puts(sb, w ? "}" : "]");
    }
    mb_sb_puts(sb, "}");
  }
  mb_sb_puts(sb, ",\n    \"graph_quantile\": ");
  if (b->quantile > 0) mb_sb_printf(sb, "%.6g", b->quantile);
  else mb_sb_puts(sb, "null");
  mb_sb_printf(sb, ",\n    \"graph_batches\": %lld,\n", (long long)(b->batches > 0 ? b->batches : 1000));
}

/* FSDP's wrapping by class, FSDP1's prefetch options and mixed precision (setup_fsdp.c). */
static const char *fsdp_dtype(int dt) {
  return dt == MB_DTYPE_BFLOAT16 ? "bf16" : dt == MB_DTYPE_FLOAT16 ? "fp16" : "fp32";
}

static void json_fsdp(mb_strbuf *sb, const mb_dist_opts *o) {
  static const char *const prefetch[] = {"pre", "post", "none"};
  mb_sb_puts(sb, "    \"fsdp_wrap_class\": [");
  for (size_t i = 0; i < o->n_wrap_class; i++) {
    if (i) mb_sb_puts(sb, ", ");
    mb_sb_json_str(sb, o->wrap_class[i]);
  }
  mb_sb_printf(sb, "],\n    \"fsdp_version\": %d,\n", o->fsdp_version);
  if (o->fsdp_version == 1)
    mb_sb_printf(sb, "    \"fsdp_backward_prefetch\": \"%s\",\n    \"fsdp_forward_prefetch\": %s,\n"
                     "    \"fsdp_limit_all_gathers\": %s,\n",
                 prefetch[o->backward_prefetch % 3], o->forward_prefetch ? "true" : "false",
                 o->limit_all_gathers ? "true" : "false");
  if (mb_dist_fsdp_mp(o)) {
    int reduce = o->reduce_dtype ? o->reduce_dtype : o->param_dtype;
    mb_sb_printf(sb, "    \"fsdp_param_dtype\": \"%s\",\n    \"fsdp_reduce_dtype\": \"%s\",\n",
                 fsdp_dtype(o->param_dtype), fsdp_dtype(reduce));
  }
}

/* Several ranks: the budget is one rank's, at its own batch size (docs/distributed.md). */
static void json_dist(mb_strbuf *sb, const mb_dist_opts *o) {
  static const char *const strategies[] = {"none", "ddp", "fsdp", "zero1", "zero2", "zero3"};
  static const char *const shardings[] = {"full_shard", "shard_grad_op", "no_shard", "hybrid_shard"};
  mb_sb_printf(sb, "    \"world_size\": %d,\n    \"strategy\": \"%s\",\n    \"shards\": %d,\n", (int)o->world_size,
               strategies[o->strategy % 6], (int)mb_dist_shards(o));
  if (o->strategy == MB_STRATEGY_DDP)
    mb_sb_printf(sb, "    \"gradient_as_bucket_view\": %s,\n    \"bucket_cap_mb\": %llu,\n",
                 o->bucket_view ? "true" : "false", (unsigned long long)(o->bucket_cap >> 20));
  if (o->strategy == MB_STRATEGY_FSDP) {
    mb_sb_printf(sb, "    \"fsdp_sharding\": \"%s\",\n    \"fsdp_wrap\": [", shardings[o->sharding & 3]);
    for (size_t i = 0; i < o->n_wrap; i++) {
      if (i) mb_sb_puts(sb, ", ");
      mb_sb_json_str(sb, o->wrap[i]);
    }
    mb_sb_puts(sb, "],\n");
    json_fsdp(sb, o);
  }
  if (mb_dist_is_zero(o))
    mb_sb_printf(sb, "    \"state_shards\": %d,\n    \"reduce_bucket_size\": %lld,\n", (int)mb_dist_state_shards(o),
                 (long long)o->reduce_bucket_size);
}

static void json_setup(mb_strbuf *sb, const mb_setup *s, const mb_plan *p) {
  const mb_train *tr = &s->train;
  static const char *const losses[] = {"auto", "ce", "mse", "none"};
  mb_sb_puts(sb, "  \"setup\": {\n    \"optimizer\": ");
  mb_sb_json_str(sb, mb_optim_get(tr->optimizer)->name);
  mb_sb_puts(sb, ",\n    \"precision\": ");
  mb_sb_json_str(sb, precision_name(tr->precision));
  mb_sb_printf(sb, ",\n    \"attention\": \"%s\",\n    \"loss\": \"%s\",\n    \"loss_dtype\": \"%s\",\n",
               tr->attention == MB_ATTENTION_EAGER ? "eager" : tr->attention == MB_ATTENTION_FUSED ? "fused" : "auto",
               losses[tr->loss & 3], tr->loss_fp32 ? "fp32" : "auto");
  mb_loop_opts lo;
  int zero_grad = tr->eval.zero_grad;
  mb_setup_loop_resolve(tr, &lo, &zero_grad);
  mb_sb_printf(sb, "    \"loop\": \"%s\",\n    \"loop_description\": ", mb_loop_name(lo.loop));
  mb_sb_json_str(sb, mb_loop_description(lo.loop));
  mb_sb_printf(sb, ",\n    \"hold_outputs\": \"%s\",\n    \"max_grad_norm\": %.6g,\n    \"grad_scaler\": %s,\n",
               mb_hold_name(lo.hold), lo.max_grad_norm, lo.grad_scaler ? "true" : "false");
  mb_sb_printf(sb, "    \"ema\": %s,\n    \"master_weights\": %s,\n    \"teacher\": %s,\n    \"teacher_offload\": %s,\n",
               tr->ema ? "true" : "false", tr->master_weights ? "true" : "false", tr->teacher ? "true" : "false",
               tr->teacher_offload ? "true" : "false");
  mb_sb_printf(sb, "    \"backend\": \"%s\",\n    \"foreach\": %s,\n    \"grad_sum\": \"%s\",\n",
               tr->cpu ? "cpu" : "cuda", tr->foreach ? "true" : "false", tr->grad_sum_copy ? "copy" : "inplace");
  mb_sb_puts(sb, "    \"checkpoint\": [");
  for (size_t i = 0; i < tr->n_checkpoint; i++) {
    if (i) mb_sb_puts(sb, ", ");
    mb_sb_json_str(sb, tr->checkpoint[i]);
  }
  mb_sb_puts(sb, "],\n");
  json_dist(sb, &tr->dist);
  mb_sb_puts(sb, "    \"gpu\": ");
  if (tr->gpu) mb_sb_json_str(sb, tr->gpu);
  else mb_sb_puts(sb, "null");
  mb_sb_printf(sb, ",\n    \"utilization\": %.6g,\n    \"fragmentation\": %.6g,\n", tr->utilization, tr->fragmentation);
  mb_sb_printf(sb, "    \"reserved\": \"%s\",\n    \"alloc_conf\": ",
               tr->reserved_model == MB_RESERVED_ALLOCATOR ? "allocator" : "allowance");
  mb_sb_json_str(sb, tr->alloc_conf ? tr->alloc_conf : "");
  mb_sb_puts(sb, ",\n    \"cublas_workspace\": ");
  mb_sb_json_u64(sb, mb_train_cublas_workspace(tr));
  mb_sb_puts(sb, ",\n    \"cublaslt_workspace\": ");
  mb_sb_json_u64(sb, tr->cublaslt_workspace);
  mb_sb_puts(sb, ",\n    \"cudnn_workspace\": ");
  if (tr->cudnn_workspace == MB_CUDNN_WORKSPACE_AUTO) mb_sb_puts(sb, "\"auto\"");
  else mb_sb_json_u64(sb, tr->cudnn_workspace);
  char rule[256];
  uint64_t context = mb_train_context(tr, rule, sizeof rule);
  mb_sb_puts(sb, ",\n    \"context\": ");
  mb_sb_json_u64(sb, context);
  mb_sb_puts(sb, ",\n    \"context_rule\": ");
  mb_sb_json_str(sb, rule);
  mb_sb_puts(sb, ",\n    \"cuda_version\": ");
  if (tr->cuda_version) mb_sb_printf(sb, "\"%d.%d\"", tr->cuda_version / 100, tr->cuda_version % 100);
  else mb_sb_puts(sb, "null");
  mb_sb_puts(sb, ",\n    \"driver_version\": ");
  if (tr->driver_version) mb_sb_printf(sb, "%d", tr->driver_version);
  else mb_sb_puts(sb, "null");
  mb_sb_printf(sb, ",\n    \"module_loading\": \"%s\"", tr->eager_loading ? "eager" : "lazy");
  mb_sb_puts(sb, ",\n    \"rounding\": ");
  mb_sb_json_u64(sb, tr->rounding);
  mb_sb_printf(sb, ",\n    \"batch_min\": %lld,\n    \"batch_max\": %lld,\n    \"batch_multiple\": %lld,\n",
               (long long)tr->batch_min, (long long)tr->batch_max, (long long)tr->batch_multiple);
  mb_json_eval_setup(sb, s);
  json_batching_setup(sb, s);
  mb_sb_puts(sb, "    \"recorded\": ");  /* what the model file's recorded setup filled in */
  mb_sb_json_str(sb, s->recorded);
  mb_sb_puts(sb, ",\n");
  mb_sb_puts(sb, "    \"note\": ");
  mb_sb_json_str(sb, p->note);
  mb_sb_puts(sb, "\n  },\n");
}

static void json_budget(mb_strbuf *sb, const mb_budget *b) {
  mb_sb_printf(sb, "  \"budget\": {\n    \"mode\": \"%s\",\n", b->mode == MB_MODE_MEASURED ? "measured" : "static");
  mb_sb_printf(sb, "    \"batch_size\": %lld,\n    \"grad_accumulation\": %lld,\n    \"effective_batch_size\": %lld,\n",
               (long long)b->batch_size, (long long)b->grad_accumulation,
               (long long)(b->batch_size * b->grad_accumulation));
  mb_sb_printf(sb, "    \"world_size\": %lld,\n    \"global_batch_size\": %lld,\n    \"host_memory\": %llu,\n",
               (long long)b->world_size, (long long)b->global_batch_size, (unsigned long long)b->host_memory);
  mb_sb_printf(sb, "    \"loop\": \"%s\",\n    \"hold_outputs\": \"%s\",\n    \"loop_held\": %llu,\n"
                   "    \"loss_in_graph\": %s,\n",
               mb_loop_name(b->loop), mb_hold_name(b->hold_outputs), (unsigned long long)b->loop_held,
               b->loss_in_graph ? "true" : "false");
  mb_sb_printf(sb, "    \"solved\": %s,\n    \"fits\": %s,\n    \"peak_phase\": \"%s\",\n", b->solved ? "true" : "false",
               b->fits < 0 ? "null" : b->fits ? "true" : "false", mb_phase_name(b->peak_phase));
  field(sb, "params_trainable", b->params_trainable, 0);
  field(sb, "params_frozen", b->params_frozen, 0);
  field(sb, "embeddings", b->embeddings, 0);
  field(sb, "buffers", b->buffers, 0);
  field(sb, "gradients", b->gradients, 0);
  field(sb, "optimizer_states", b->optimizer_states, 0);
  field(sb, "master_weights", b->master_weights, 0);
  field(sb, "ema", b->ema, 0);
  field(sb, "teacher_weights", b->teacher_weights, 0);
  field(sb, "workspace", b->workspace, 0);
  field(sb, "static", b->static_bytes, 0);
  field(sb, "inputs", b->inputs, 0);
  field(sb, "activations", b->activations, 0);
  field(sb, "teacher_activations", b->teacher_activations, 0);
  field(sb, "dynamic_peak", b->dynamic_peak, 0);
  field(sb, "dynamic_fixed", b->dynamic_fixed, 0);
  field(sb, "dynamic_per_sample", b->dynamic_per_sample, 0);
  field(sb, "forward_peak", b->forward_peak, 0);
  field(sb, "backward_peak", b->backward_peak, 0);
  field(sb, "optimizer_peak", b->optimizer_peak, 0);
  field(sb, "first_step_peak", b->first_step_peak, 0);
  field(sb, "allocated_peak", b->allocated_peak, 0);
  field(sb, "fragmentation", b->fragmentation, 0);
  field(sb, "reserved_peak", b->reserved_peak, 0);
  field(sb, "context", b->context, 0);
  field(sb, "device_peak", b->device_peak, 0);
  field(sb, "device_memory", b->device_memory, 0);
  field(sb, "usable_memory", b->usable_memory, 0);
  mb_sb_printf(sb, "    \"margin\": {\"fraction\": %.6g, \"bytes\": %llu, \"family\": ", b->margin,
               (unsigned long long)b->margin_bytes);
  mb_sb_json_str(sb, b->margin_family);
  mb_sb_puts(sb, ", \"basis\": ");
  mb_sb_json_str(sb, b->margin_basis);
  mb_sb_puts(sb, "},\n");
  mb_sb_printf(sb, "    \"available\": %lld,\n    \"at_peak\": {", (long long)b->available);
  for (int c = 0; c < MB_CAT_COUNT; c++) {
    mb_sb_printf(sb, "%s\"%s\": ", c ? ", " : "", mb_category_name(c));
    mb_sb_json_u64(sb, b->at_peak[c]);
  }
  mb_sb_printf(sb, "},\n    \"reserved_source\": \"%s\",\n    \"allocator_ooms\": %d,\n",
               b->reserved_source == MB_RESERVED_ALLOCATOR ? "allocator" : "allowance", (int)b->allocator_ooms);
  field(sb, "segments", b->segments, 0);
  field(sb, "cached_free", b->cached_free, 0);
  field(sb, "largest_cached_free", b->largest_cached_free, 0);
  field(sb, "cudnn_workspace", b->cudnn_workspace, 0);
  field(sb, "level_after_setup", b->level_after_setup, 0);
  field(sb, "level_after_forward", b->level_after_forward, 0);
  field(sb, "level_after_backward", b->level_after_backward, 0);
  field(sb, "level_after_optimizer", b->level_after_optimizer, 0);
}

static const char *batch_rule_name(int rule) {
  static const char *const names[] = {"plain", "per_sample", "largest", "quantile"};
  return rule >= 0 && rule <= 3 ? names[rule] : "plain";
}

/* The assumed bounds of one model's shapes at the budget's batch size. */
static void json_assumed(mb_strbuf *sb, const mb_shapes *sh, const char *model, bool *first) {
  for (size_t i = 0; i < mb_shapes_num_assumptions(sh); i++) {
    const char *node, *op, *tensor, *why;
    int64_t value;
    mb_shapes_assumption(sh, i, &node, &op, &tensor, &value, &why);
    mb_sb_puts(sb, *first ? "\n      {\"model\": " : ",\n      {\"model\": ");
    *first = false;
    mb_sb_json_str(sb, model);
    mb_sb_puts(sb, ", \"node\": ");
    mb_sb_json_str(sb, node);
    mb_sb_puts(sb, ", \"op_type\": ");
    mb_sb_json_str(sb, op);
    mb_sb_puts(sb, ", \"tensor\": ");
    mb_sb_json_str(sb, tensor);
    mb_sb_printf(sb, ", \"value\": %lld, \"why\": ", (long long)value);
    mb_sb_json_str(sb, why);
    mb_sb_puts(sb, "}");
  }
}

/* batch_unit, batch_rule, batch_limit, the symbolic dims at the answer, the worst-batch
 * sentence, and the default bounds taken there (shapes inferred again at the budget's batch) */
static int json_batching(mb_strbuf *sb, mb_setup *s, const mb_plan *p, const mb_budget *b, mb_diag *d) {
  mb_shapes *sh[2] = {NULL, NULL};
  const mb_model *models[2] = {p->model, p->teacher};
  mb_shape_inputs in;
  mb_setup_shape_inputs(s, &in);
  for (int k = 0; k < 2 && models[k]; k++)
    if (mb_shapes_run(models[k], &in, b->batch_size, &sh[k]) != MB_OK) {
      mb_fail(d, mb_shapes_status(sh[k]), "%s", mb_shapes_errmsg(sh[k]));
      break;
    }
  if (d->status == MB_OK) {
    mb_sb_puts(sb, "    \"batch_unit\": ");
    mb_sb_json_str(sb, mb_setup_batch_unit(s));
    mb_sb_printf(sb, ",\n    \"batch_rule\": \"%s\",\n    \"batch_limit\": %lld,\n    \"dims\": {",
                 batch_rule_name(mb_setup_batch_rule(s)), (long long)b->batch_limit);
    const mb_graph *g = p->model->graph;
    const mb_tinfo *t = mb_shapes_tinfo(sh[0]);
    bool first = true;
    for (int32_t i = 0; i < g->n_inputs; i++) { /* every symbolic dim once, in input order */
      const mb_value *v = &g->values[g->inputs[i]];
      for (int32_t a = 0; a < v->type.rank && a < t[g->inputs[i]].rank; a++) {
        const char *name = v->type.dim_params[a];
        bool seen = !name;
        for (int32_t j = 0; j <= i && !seen; j++) {
          const mb_value *w = &g->values[g->inputs[j]];
          for (int32_t c = 0; c < (j == i ? a : w->type.rank) && !seen; c++)
            seen = w->type.dim_params[c] && !strcmp(w->type.dim_params[c], name);
        }
        if (seen) continue;
        mb_sb_puts(sb, first ? "" : ", ");
        first = false;
        mb_sb_json_str(sb, name);
        mb_sb_printf(sb, ": %lld", (long long)t[g->inputs[i]].dims[a]);
      }
    }
    char sentence[4096];
    mb_setup_describe_batch(s, b->batch_size, sentence, sizeof sentence);
    mb_sb_puts(sb, "},\n    \"worst_batch\": ");
    mb_sb_json_str(sb, sentence);
    mb_sb_puts(sb, ",\n    \"assumed_bounds\": [");
    first = true;
    json_assumed(sb, sh[0], "model", &first);
    if (sh[1]) json_assumed(sb, sh[1], "teacher", &first);
    mb_sb_puts(sb, first ? "]\n  }" : "\n    ]\n  }");
  }
  mb_shapes_free(sh[0]);
  mb_shapes_free(sh[1]);
  return d->status;
}

static void json_trace(mb_strbuf *sb, const mb_plan *p, const uint64_t *bytes, const uint64_t *live) {
  mb_sb_puts(sb, ",\n  \"trace\": [\n");
  for (int32_t i = 0; i < p->n_ev; i++) {
    const mb_event_rec *e = &p->ev[i];
    const mb_slot *s = &p->slots[e->slot];
    const mb_model *m = e->model ? p->teacher : p->model;
    mb_sb_printf(sb, "    {\"event\": \"%s\", \"phase\": \"%s\", \"category\": \"%s\", \"bytes\": ",
                 e->alloc ? "alloc" : "free", mb_phase_name(e->phase), mb_category_name(s->category));
    mb_sb_json_u64(sb, bytes[i]);
    mb_sb_puts(sb, ", \"live\": ");
    mb_sb_json_u64(sb, live[i]);
    mb_sb_puts(sb, ", \"tensor\": ");
    mb_sb_json_str(sb, s->name ? s->name : "");
    mb_sb_puts(sb, ", \"node\": ");
    if (e->node >= 0) mb_sb_json_str(sb, m->graph->nodes[e->node].name);
    else mb_sb_puts(sb, "null");
    mb_sb_printf(sb, ", \"storage\": %d", (int)e->slot);
    mb_sb_puts(sb, i + 1 < p->n_ev ? "},\n" : "}\n");
  }
  mb_sb_puts(sb, "  ]");
}

/* What the allocator model did to device memory during the replayed steps, each event after
 * the trace event whose request caused it ("after", an index into "trace"; cuDNN workspaces
 * are trace events of their own). */
static void json_allocator_trace(mb_strbuf *sb, const mb_reserve *res) {
  size_t n = 0;
  const mb_reserve_event *ev = mb_reserve_events(res, &n);
  mb_sb_puts(sb, ",\n  \"allocator_trace\": [\n");
  for (size_t i = 0; i < n; i++) {
    const mb_reserve_event *x = &ev[i];
    mb_sb_printf(sb, "    {\"event\": \"%s\", \"step\": %d, \"after\": ", mb_alloc_action_name(x->e.action),
                 (int)x->iteration);
    if (x->after >= 0) mb_sb_printf(sb, "%d", (int)x->after);
    else mb_sb_puts(sb, "null");
    mb_sb_printf(sb, ", \"pool\": \"%s\", \"address\": ", x->e.small ? "small" : "large");
    mb_sb_json_u64(sb, x->e.addr);
    mb_sb_puts(sb, ", \"bytes\": ");
    mb_sb_json_u64(sb, x->e.size);
    mb_sb_puts(sb, i + 1 < n ? "},\n" : "}\n");
  }
  mb_sb_puts(sb, "  ]");
}

int mb_budget_document(mb_setup *s, const mb_plan *p, const mb_budget *b, int trace, const char *extra,
                       char **out, mb_diag *d) {
  uint64_t *bytes = NULL, *live = NULL;
  mb_reserve *res = NULL;
  if (trace) {
    bytes = malloc(((size_t)p->n_ev + 1) * sizeof *bytes);
    live = malloc(((size_t)p->n_ev + 1) * sizeof *live);
    mb_run r;
    mb_reserved rr;
    if (!bytes || !live) mb_fail(d, MB_E_NOMEM, "out of memory");
    else if (mb_setup_plan_run(p, s, b->batch_size, &r, bytes, live, d) == MB_OK &&
             s->train.reserved_model == MB_RESERVED_ALLOCATOR && mb_reserve_create(p, s, &res, d) == MB_OK)
      mb_reserve_run(res, bytes, true, 0, &rr, d);
  }
  if (d->status == MB_OK) {
    mb_strbuf sb;
    mb_sb_init(&sb);
    char line[512];
    mb_budget_summary(b, line, sizeof line);
    mb_sb_printf(&sb, "{\n  \"schema_version\": %d,\n", ESTIMATE_SCHEMA_VERSION);
    json_setup(&sb, s, p);
    mb_sb_puts(&sb, "  ");
    mb_json_inference_signs(&sb, p->model, "  ");
    mb_sb_puts(&sb, ",\n");
    json_budget(&sb, b);
    mb_json_eval_budget(&sb, b);
    json_batching(&sb, s, p, b, d);
    mb_sb_puts(&sb, ",\n  \"summary\": ");
    mb_sb_json_str(&sb, line);
    if (extra) mb_sb_puts(&sb, extra);
    if (trace) json_trace(&sb, p, bytes, live);
    if (trace && res) json_allocator_trace(&sb, res);
    mb_sb_puts(&sb, "\n}\n");
    if (mb_sb_failed(&sb)) mb_fail(d, MB_E_NOMEM, "out of memory");
    else if (d->status == MB_OK) *out = mb_sb_detach(&sb);
    mb_sb_free(&sb);
  }
  free(bytes);
  free(live);
  mb_reserve_free(res);
  return d->status;
}

MB_API int mb_estimate_json(const mb_model *m, mb_setup *s, int trace, char **out, mb_budget *budget) {
  if (!s || !out) return MB_E_INVALID_ARG;
  *out = NULL;
  s->errmsg[0] = '\0';
  if (!m || !m->graph) {
    snprintf(s->errmsg, sizeof s->errmsg, "mb_estimate_json: no model");
    return MB_E_INVALID_ARG;
  }
  mb_diag d;
  mb_diag_init(&d);
  mb_plan *p = NULL;
  mb_budget b;
  char *extra = NULL; /* "modules", "top", "advice" when the setup asks (api/advice_json.c) */
  if (mb_setup_plan_build(m, s, &p, &d) == MB_OK && mb_estimate_plan(p, s, &b, &d) == MB_OK &&
      mb_report_json(m, s, p, &b, &extra, &d) == MB_OK &&
      mb_budget_document(s, p, &b, trace, extra, out, &d) == MB_OK && budget &&
      mb_fill_versioned(budget, &b, sizeof b, offsetof(mb_budget, at_peak))) {
    mb_fail(&d, MB_E_INVALID_ARG, "mb_estimate_json: budget.struct_size is not set");
    mb_free(*out);
    *out = NULL;
  }
  free(extra);
  mb_plan_free(p);
  if (d.status != MB_OK) snprintf(s->errmsg, sizeof s->errmsg, "%s", d.msg);
  return d.status;
}
