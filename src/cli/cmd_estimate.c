/* membudget estimate: the budget of one training step and the batch size that fits. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/report.h"
#include "cli/estimate_eval.h"
#include "cli/table.h"
#include "util/format.h"

/* Flags that take a value and set one setup option. */
static const struct { const char *flag, *key; } value_flags[] = {
  {"--optimizer", "optimizer"},     {"--precision", "precision"},
  {"--attention", "attention"},     {"--loss", "loss"},
  {"--loss-dtype", "loss_dtype"},
  {"--checkpoint", "checkpoint"},   {"--gpu", "gpu"},
  {"--device-memory", "device_memory"}, {"--utilization", "utilization"}, {"--margin", "margin"},
  {"--utilisation", "utilization"}, {"--batch-min", "batch_min"},
  {"--batch-max", "batch_max"},     {"--multiple-of", "batch_multiple"},
  {"--grad-accumulation", "grad_accumulation"}, {"--context", "context"},
  {"--fragmentation", "fragmentation"}, {"--cublas-workspace", "cublas_workspace"},
  {"--rounding", "rounding"},       {"--backend", "backend"},
  {"--foreach", "foreach"},         {"--grad-sum", "grad_sum"},
  {"--transformers", "transformers"}, {"--cuda-device", "cuda_device"},
  {"--reserved", "reserved"},       {"--alloc-conf", "alloc_conf"},
  {"--cublaslt-workspace", "cublaslt_workspace"}, {"--cudnn-workspace", "cudnn_workspace"},
  {"--cuda-version", "cuda_version"}, {"--driver-version", "driver_version"},
  {"--module-loading", "module_loading"},
  {"--eval-batch", "eval_batch"}, {"--eval-keep-outputs", "eval_keep_outputs"},
  {"--zero-grad", "zero_grad"}, {"--teacher-cache", "teacher_cache"},
  {"--loop", "loop"}, {"--hold-outputs", "hold_outputs"}, {"--max-grad-norm", "max_grad_norm"},
  {"--grad-scaler", "grad_scaler"},
  {"--world-size", "world_size"}, {"--strategy", "strategy"}, {"--bucket-cap-mb", "bucket_cap_mb"},
  {"--fsdp-sharding", "fsdp_sharding"}, {"--fsdp-wrap", "fsdp_wrap"}, {"--gpus-per-node", "gpus_per_node"}, {"--offload", "offload"},
  {"--fsdp-reshard-root", "fsdp_reshard_root"}, {"--fsdp-version", "fsdp_version"},
  {"--fsdp-wrap-class", "fsdp_wrap_class"}, {"--fsdp-backward-prefetch", "fsdp_backward_prefetch"},
  {"--fsdp-forward-prefetch", "fsdp_forward_prefetch"}, {"--fsdp-limit-all-gathers", "fsdp_limit_all_gathers"},
  {"--fsdp-param-dtype", "fsdp_param_dtype"}, {"--fsdp-reduce-dtype", "fsdp_reduce_dtype"},
  {"--fsdp-buffer-dtype", "fsdp_buffer_dtype"},
  {"--reduce-bucket-size", "reduce_bucket_size"}, {"--overlap-comm", "overlap_comm"},
  {"--stage3-param-persistence-threshold", "stage3_param_persistence_threshold"},
  {"--stage3-prefetch-bucket-size", "stage3_prefetch_bucket_size"},
  {"--stage3-max-live-parameters", "stage3_max_live_parameters"},
  {"--stage3-max-reuse-distance", "stage3_max_reuse_distance"},
  {"--allgather-bucket-size", "allgather_bucket_size"}, {"--contiguous-gradients", "contiguous_gradients"},
};
/* Flags without a value that switch an option on. */
static const struct { const char *flag, *key; } switch_flags[] = {
  {"--ema", "ema"}, {"--master-weights", "master_weights"}, {"--teacher-offload", "teacher_offload"},
  {"--accept-inference-graph", "accept_inference_graph"}, {"--ema-swap", "ema_swap"},
  {"--gradient-as-bucket-view", "gradient_as_bucket_view"},
};

typedef struct row {
  const char *label;
  uint64_t bytes;
} row;

static void add_row(mb_table *t, const char *label, uint64_t bytes, uint64_t total) {
  char b[32], h[32], share[16];
  mb_fmt_thousands(b, sizeof b, bytes);
  mb_fmt_bytes(h, sizeof h, bytes);
  if (total) snprintf(share, sizeof share, "%.1f%%", 100.0 * (double)bytes / (double)total);
  else snprintf(share, sizeof share, "-");
  const char *cells[] = {label, b, h, share};
  mb_table_row(t, cells);
}

/* The default bounds one model's shapes took at the budget's batch size. */
static void print_assumed_of(mb_setup *s, const mb_model *m, const char *who, int *header) {
  mb_shapes *sh = NULL;
  if (m && mb_infer_shapes(m, s, &sh) == MB_OK) {
    for (size_t i = 0; i < mb_shapes_num_assumptions(sh); i++) {
      const char *node, *op, *tensor, *why;
      int64_t value;
      char v[32];
      mb_shapes_assumption(sh, i, &node, &op, &tensor, &value, &why);
      if (!(*header)++)
        printf("\nassumed bounds (data-dependent sizes no --dim gave; --dim TENSOR=N overrides one):\n");
      printf("  %s%s = %s  node '%s' (%s): %s\n", who, tensor, mb_fmt_thousands(v, sizeof v, (uint64_t)value), node,
             op, why);
    }
  }
  mb_shapes_free(sh);
}

/* Shapes at the budget's batch size; a solved batch is taken back afterwards, so that what is
 * printed next (the module tree, the advice) still sees a solved budget. */
static void print_assumed(mb_setup *s, const mb_model *m, const mb_model *teacher, const mb_budget *b) {
  if (!b->assumed_bounds || mb_setup_set_batch(s, b->batch_size) != MB_OK) return;
  int header = 0;
  print_assumed_of(s, m, "", &header);
  print_assumed_of(s, teacher, "teacher: ", &header);
  if (b->solved) mb_setup_set_batch(s, 0);
}

static void print_human(const char *path, const mb_model *m, const mb_model *teacher, mb_setup *s,
                        const mb_budget *b, const char *summary, const char *recorded) {
  char x[32], y[32], z[32];
  bool units = strcmp(b->batch_unit, "samples") != 0; /* "graphs": per_sample / graph sizes */
  char unit[sizeof b->batch_unit + 1] = "", per[40] = "  per sample";
  if (units) {
    snprintf(unit, sizeof unit, "%s", b->batch_unit);
    size_t n = strlen(unit);
    snprintf(per, sizeof per, "  per %.*s", (int)(n > 1 && unit[n - 1] == 's' ? n - 1 : n), unit);
  }
  printf("model    %s\n", path);
  for (size_t i = 0; i < mb_model_num_inference_signs(m); i++) {
    const char *node, *message;
    int64_t count;
    mb_model_inference_sign(m, i, NULL, &node, &count, &message);
    printf("WARNING  estimated as it is, though exported for inference: %s (node '%s'%s)\n", message, node,
           count > 1 ? " and others" : "");
  }
  if (b->device_memory)
    printf("device   %s x %.2f = %s usable\n", mb_fmt_bytes(x, sizeof x, b->device_memory),
           (double)b->usable_memory / (double)b->device_memory, mb_fmt_bytes(y, sizeof y, b->usable_memory));
  else
    printf("device   not given (--gpu or --device-memory)\n");
  if (b->device_memory && b->margin > 0)
    printf("margin   %.1f%% of the usable memory held back (%s): %s; --margin 0 answers without it\n",
           100.0 * b->margin, mb_fmt_bytes(x, sizeof x, b->margin_bytes), b->margin_basis);
  if (b->world_size > 1)
    printf("ranks    %lld: the budget is one rank's at its batch; global batch %lld = %lld x %lld accumulation x %lld ranks\n",
           (long long)b->world_size, (long long)b->global_batch_size, (long long)b->batch_size,
           (long long)b->grad_accumulation, (long long)b->world_size);
  printf("batch    %lld%s%s%s", (long long)b->batch_size, units ? " " : "", unit,
         b->solved ? (b->batch_limit && b->batch_size == b->batch_limit ? " (solved: every graph of the graph sizes fits)"
                                                                        : " (solved: the largest that fits)")
                   : "");
  if (b->grad_accumulation > 1)
    printf(" x %lld accumulation steps = %lld per optimizer step", (long long)b->grad_accumulation,
           (long long)(b->batch_size * b->grad_accumulation));
  printf("\n");
  printf("loop     %s: %s (hold_outputs %s; --loop, --hold-outputs)\n", mb_loop_name(b->loop),
         mb_loop_description(b->loop), mb_hold_name(b->hold_outputs));
  printf("loss     %s\n", b->loss_in_graph ? "the model's own: the graph's output is the loss"
                                           : "added on the model's output (--loss)");
  if (*recorded) printf("recorded from the file: %s (--ignore-recorded-setup to estimate without)\n", recorded);
  char sentence[4096];
  if (units && mb_setup_describe_batch(s, b->batch_size, sentence, sizeof sentence)) printf("         %s\n", sentence);
  printf("\n");
  mb_table t;
  mb_table_init(&t, "lrrr");
  const char *head[] = {"component", "bytes", "", "share"};
  mb_table_row(&t, head);
  mb_table_rule(&t);
  uint64_t total = b->device_peak;
  row persistent[] = {
    {"parameters (trainable)", b->params_trainable}, {"parameters (frozen)", b->params_frozen},
    {"embeddings", b->embeddings}, {"buffers", b->buffers}, {"gradients", b->gradients},
    {"optimizer states", b->optimizer_states}, {"master weights", b->master_weights},
    {"EMA copy", b->ema}, {"teacher weights", b->teacher_weights}, {"cuBLAS workspaces", b->workspace},
  };
  for (size_t i = 0; i < sizeof persistent / sizeof persistent[0]; i++)
    if (persistent[i].bytes || i < 2) add_row(&t, persistent[i].label, persistent[i].bytes, total);
  add_row(&t, "static total", b->static_bytes, total);
  mb_table_rule(&t);
  add_row(&t, "input batch and targets", b->inputs, total);
  if (b->loop_held) add_row(&t, "last iteration's outputs (the loop holds)", b->loop_held, total);
  add_row(&t, "activations kept at end of forward", b->activations, total);
  if (b->teacher_activations) add_row(&t, "teacher forward (transient)", b->teacher_activations, total);
  add_row(&t, "dynamic part of the peak", b->dynamic_peak, total);
  add_row(&t, per, b->dynamic_per_sample, 0);
  mb_table_rule(&t);
  /* the step in order, as memory_allocated() / max_memory_allocated() logged between phases */
  add_row(&t, "after setup", b->level_after_setup, total);
  add_row(&t, "forward peak (with the loss)", b->forward_peak, total);
  add_row(&t, "after forward and loss", b->level_after_forward, total);
  add_row(&t, "backward peak", b->backward_peak, total);
  add_row(&t, "after backward", b->level_after_backward, total);
  add_row(&t, "optimizer step peak", b->optimizer_peak, total);
  add_row(&t, "after optimizer step", b->level_after_optimizer, total);
  add_row(&t, "first step peak", b->first_step_peak, total);
  mb_table_rule(&t);
  add_row(&t, "allocated peak", b->allocated_peak, total);
  bool model = b->reserved_source == MB_RESERVED_ALLOCATOR && b->mode != MB_MODE_MEASURED;
  if (model && b->cudnn_workspace) add_row(&t, "  cuDNN workspace (largest conv)", b->cudnn_workspace, total);
  add_row(&t, b->mode == MB_MODE_MEASURED ? "reserved, not allocated"
              : model ? "reserved - allocated (allocator)" : "fragmentation allowance", b->fragmentation, total);
  add_row(&t, "reserved peak", b->reserved_peak, total);
  add_row(&t, b->mode == MB_MODE_MEASURED ? "context and libraries (measured)" : "CUDA context", b->context, total);
  add_row(&t, "device peak", b->device_peak, total);
  if (b->host_memory) add_row(&t, "host memory (offloaded; not on the device)", b->host_memory, total);
  mb_cli_eval_rows(&t, b, total);
  mb_table_print(&t, stdout, "");
  mb_table_free(&t);
  if (model) {
    printf("\nallocator: %llu segments when reserved peaked, %s of them cached but free (largest block %s)",
           (unsigned long long)b->segments, mb_fmt_bytes(x, sizeof x, b->cached_free),
           mb_fmt_bytes(y, sizeof y, b->largest_cached_free));
    if (b->allocator_ooms) printf("; %d requests found no room on the device", (int)b->allocator_ooms);
    printf("\n");
    if (b->cached_free > b->reserved_peak / 20)
      printf("  the cached free blocks are fragmentation the step's own request stream leaves: it follows the sizes\n"
             "  and order of the blocks freed before the peak, so it need not grow with the batch or the sequence\n");
  }
  print_assumed(s, m, teacher, b);
  printf("\n");
  mb_cli_eval_line(b);
  printf("peak in %s (loop %s, outputs held until %s); ", mb_phase_name(b->peak_phase), mb_loop_name(b->loop),
         mb_hold_name(b->hold_outputs));
  if (b->fits < 0) printf("no device memory given\n");
  else if (b->fits) printf("fits with %s to spare\n", mb_fmt_bytes(z, sizeof z, (uint64_t)b->available));
  else if (b->available < 0) printf("does NOT fit: short by %s\n", mb_fmt_bytes(z, sizeof z, (uint64_t)(-b->available)));
  else printf("does NOT fit: %d requests find no room, though the peak is %s under the usable memory (fragmentation)\n",
              (int)b->allocator_ooms, mb_fmt_bytes(z, sizeof z, (uint64_t)b->available));
  if (b->peak_phase == MB_PHASE_OPTIMIZER && b->dynamic_per_sample)
    printf("the optimizer step's temporaries are the peak: each sample more adds %s to the backward peak (%s now), "
           "not to this one, until that passes it\n", mb_fmt_bytes(x, sizeof x, b->dynamic_per_sample),
           mb_fmt_bytes(y, sizeof y, b->backward_peak > b->forward_peak ? b->backward_peak : b->forward_peak));
  printf("%s\n", summary);
}

/* "does not fit" on stderr with the shortfall and the biggest parts at the peak. */
static void explain_no_fit(const mb_budget *b) {
  char x[32], y[32], z[32];
  const char *at = b->solved ? "even at the minimum" : "at";
  uint64_t peak = b->eval_device_peak > b->device_peak ? b->eval_device_peak : b->device_peak;
  char m[64] = "";
  if (b->margin_bytes) {
    char mb[32];
    snprintf(m, sizeof m, " less the %s safety margin", mb_fmt_bytes(mb, sizeof mb, b->margin_bytes));
  }
  if (b->available < 0)
    fprintf(stderr, "membudget: does not fit %s batch %lld: device peak %s > usable %s%s (short by %s)\n", at,
            (long long)b->batch_size, mb_fmt_bytes(x, sizeof x, peak), mb_fmt_bytes(y, sizeof y, b->usable_memory), m,
            mb_fmt_bytes(z, sizeof z, (uint64_t)(-b->available)));
  else /* every byte fits, but the caching allocator finds no free block for some requests */
    fprintf(stderr, "membudget: does not fit %s batch %lld: %d requests find no room on the device (device peak %s, "
            "usable %s: fragmentation)\n", at, (long long)b->batch_size, (int)b->allocator_ooms,
            mb_fmt_bytes(x, sizeof x, peak), mb_fmt_bytes(y, sizeof y, b->usable_memory));
  int order[MB_CAT_COUNT];
  for (int c = 0; c < MB_CAT_COUNT; c++) order[c] = c;
  for (int i = 0; i < MB_CAT_COUNT; i++)
    for (int j = i + 1; j < MB_CAT_COUNT; j++)
      if (b->at_peak[order[j]] > b->at_peak[order[i]]) {
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
      }
  fprintf(stderr, "membudget: biggest parts at the peak:");
  for (int i = 0; i < 3 && b->at_peak[order[i]]; i++)
    fprintf(stderr, "%s %s %s", i ? "," : "", mb_category_name(order[i]), mb_fmt_bytes(x, sizeof x, b->at_peak[order[i]]));
  fprintf(stderr, ", CUDA context %s\n", mb_fmt_bytes(x, sizeof x, b->context));
  mb_cli_eval_no_fit(b);
}

static int set(mb_setup *s, const char *flag, const char *key, const char *value) {
  if (mb_setup_set(s, key, value) != MB_OK) return mb_cli_usage_error("%s: %s", flag, mb_setup_errmsg(s));
  return MB_EXIT_OK;
}

/* --backend sets the defaults other options adjust (mb_setup_set's "backend"), so the command
 * line applies it first, wherever it is written: `--foreach 1 --backend cpu` keeps foreach. */
int mb_cli_backend_first(mb_setup *s, int argc, char **argv) {
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], "--backend")) return set(s, argv[i], "backend", argv[i + 1]);
  return MB_EXIT_OK;
}

int mb_cli_training_flag(mb_setup *s, int argc, char **argv, int *i, int *rc, int *device_given) {
  const char *a = argv[*i];
  for (size_t k = 0; k < sizeof value_flags / sizeof value_flags[0]; k++)
    if (!strcmp(a, value_flags[k].flag)) {
      if (*i + 1 >= argc) *rc = mb_cli_usage_error("%s needs a value", a);
      else if (!strcmp(value_flags[k].key, "backend")) ++*i; /* applied first (mb_cli_backend_first) */
      else *rc = set(s, a, value_flags[k].key, argv[++*i]);
      if (!strcmp(value_flags[k].key, "gpu") || !strcmp(value_flags[k].key, "device_memory")) *device_given = 1;
      return 1;
    }
  for (size_t k = 0; k < sizeof switch_flags / sizeof switch_flags[0]; k++)
    if (!strcmp(a, switch_flags[k].flag)) {
      *rc = set(s, a, switch_flags[k].key, "1");
      return 1;
    }
  return 0;
}

/* The measured budget's own lines: what was measured, beside the static figures. */
static void print_measured(const mb_budget *b) {
  char x[32], y[32], z[32];
  printf("measured: the step replayed on the device; static estimate's device peak at this batch %s\n",
         mb_fmt_bytes(x, sizeof x, b->static_device_peak));
  printf("measured: device peak ~ %s + %s per sample", mb_fmt_bytes(x, sizeof x, b->measured_fixed),
         mb_fmt_bytes(y, sizeof y, b->measured_per_sample));
  printf("; other processes hold %s", mb_fmt_bytes(z, sizeof z, b->other_processes));
  if (b->conv_workspace) printf("; largest cuDNN workspace %s", mb_fmt_bytes(x, sizeof x, b->conv_workspace));
  printf("\n");
}

/* The static estimate, or with a measuring session the measured one. */
static int estimate(mb_measure *meas, const mb_model *m, mb_setup *s, int json, int trace, char **doc, mb_budget *b) {
  if (meas) return json ? mb_measure_estimate_json(meas, m, s, trace, doc, b) : mb_measure_estimate(meas, m, s, b);
  return json ? mb_estimate_json(m, s, trace, doc, b) : mb_estimate(m, s, b);
}

int mb_cmd_estimate(int argc, char **argv) {
  const char *path = NULL, *teacher_path = NULL, *timeline = NULL;
  int json = 0, trace = 0, rc = MB_EXIT_OK, have_batch = 0, have_device = 0, measured = 0, ignore_recorded = 0;
  char recorded[256] = "";
  mb_setup *setup = NULL;
  mb_cli_report report;
  if (mb_setup_create(&setup) != MB_OK) return MB_EXIT_INPUT;
  if ((rc = mb_cli_cuda_env(setup)) != MB_EXIT_OK || (rc = mb_cli_backend_first(setup, argc, argv)) != MB_EXIT_OK ||
      (rc = mb_cli_report_init(setup, &report)) != MB_EXIT_OK) {
    mb_setup_free(setup);
    return rc;
  }
  for (int i = 1; i < argc && rc == MB_EXIT_OK; i++) {
    const char *a = argv[i];
    if (mb_cli_training_flag(setup, argc, argv, &i, &rc, &have_device)) continue;
    if (mb_cli_report_flag(setup, argc, argv, &i, &rc, &report)) continue;
    if (!strcmp(a, "--json")) json = 1;
    else if (!strcmp(a, "--trace")) trace = 1;
    else if (!strcmp(a, "--ignore-recorded-setup")) ignore_recorded = 1;
    else if (!strcmp(a, "--timeline")) {
      if (i + 1 >= argc || !argv[i + 1][0]) rc = mb_cli_usage_error("--timeline needs a file name (step.svg)");
      else timeline = argv[++i];
    }
    else if (!strcmp(a, "--mode")) {
      if (i + 1 >= argc || (strcmp(argv[i + 1], "static") && strcmp(argv[i + 1], "measured")))
        rc = mb_cli_usage_error("--mode needs static or measured");
      else measured = !strcmp(argv[++i], "measured");
    } else if (!strcmp(a, "--teacher")) {
      if (i + 1 >= argc) rc = mb_cli_usage_error("--teacher needs a model");
      else teacher_path = argv[++i];
    } else if (mb_cli_setup_flag(setup, MB_CLI_TRAINABILITY | MB_CLI_DIMS, argc, argv, &i, &rc)) {
      have_batch |= !strcmp(a, "--batch");
    } else if (a[0] == '-' && a[1]) {
      rc = mb_cli_usage_error("estimate: unknown option '%s'", a);
    } else if (path) {
      rc = mb_cli_usage_error("estimate: more than one model given");
    } else {
      path = a;
    }
  }
  if (rc == MB_EXIT_OK && !path) rc = mb_cli_usage_error("estimate: no model given");
  if (rc == MB_EXIT_OK && trace && !json) rc = mb_cli_usage_error("--trace goes with --json");
  if (rc == MB_EXIT_OK && measured && report.asked)
    rc = mb_cli_usage_error("--advise re-runs the simulation: static mode only");
  if (rc == MB_EXIT_OK && !have_batch && !have_device && !measured) /* measured: the device's own */
    rc = mb_cli_usage_error("estimate: give a GPU (--gpu NAME) or its memory (--device-memory SIZE) "
                            "to solve the batch size for, or a batch size (--batch N)");
  if (rc != MB_EXIT_OK) {
    mb_setup_free(setup);
    return rc;
  }
  mb_model *m = NULL, *teacher = NULL;
  mb_measure *meas = NULL;
  mb_budget b = {.struct_size = sizeof b};
  char *doc = NULL;
  int st = MB_OK;
  if (mb_model_load_file_setup(path, setup, &m) != MB_OK) {
    fprintf(stderr, "membudget: %s\n", mb_model_errmsg(m));
    rc = MB_EXIT_INPUT;
  } else if (teacher_path && mb_model_load_file_setup(teacher_path, setup, &teacher) != MB_OK) {
    fprintf(stderr, "membudget: teacher: %s\n", mb_model_errmsg(teacher));
    rc = MB_EXIT_INPUT;
  } else if (!ignore_recorded && mb_setup_apply_recorded(setup, m, recorded, sizeof recorded) != MB_OK) {
    fprintf(stderr, "membudget: %s: %s (--ignore-recorded-setup estimates without it)\n", path, mb_setup_errmsg(setup));
    rc = MB_EXIT_INPUT;
  } else if (measured && (rc = mb_cli_measure_open(setup, &meas)) != MB_EXIT_OK) {
    /* the reason is on stderr */
  } else if (mb_setup_set_teacher(setup, teacher), (st = estimate(meas, m, setup, json, trace, &doc, &b)) != MB_OK) {
    fprintf(stderr, "membudget: %s: %s\n", path, mb_setup_errmsg(setup));
    rc = st == MB_E_NO_CUDA ? MB_EXIT_NO_CUDA : MB_EXIT_INPUT;
  } else {
    char summary[512];
    mb_budget_summary(&b, summary, sizeof summary);
    if (json) fputs(doc, stdout);
    else print_human(path, m, teacher, setup, &b, summary, recorded);
    if (!json && b.mode == MB_MODE_MEASURED) print_measured(&b);
    if (!json) rc = mb_cli_print_report(m, setup, &b, &report);
    if (b.fits == 0 && rc == MB_EXIT_OK) {
      explain_no_fit(&b);
      rc = MB_EXIT_NO_FIT;
    }
    int trc = timeline ? mb_cli_timeline(m, setup, meas ? &b : NULL, path, timeline) : MB_EXIT_OK;
    if (trc != MB_EXIT_OK) rc = trc;
  }
  mb_free(doc);
  mb_measure_free(meas);
  mb_model_free(teacher);
  mb_model_free(m);
  mb_setup_free(setup);
  return rc;
}

int mb_cmd_gpus(int argc, char **argv) {
  (void)argv;
  if (argc > 1) return mb_cli_usage_error("gpus takes no arguments");
  mb_table t;
  mb_table_init(&t, "lrl");
  const char *head[] = {"name", "memory", "description"};
  mb_table_row(&t, head);
  for (size_t i = 0; i < mb_gpu_num(); i++) {
    const char *name, *desc;
    uint64_t mem;
    char b[32];
    mb_gpu_get(i, &name, &desc, &mem);
    const char *cells[] = {name, mb_fmt_bytes(b, sizeof b, mem), desc};
    mb_table_row(&t, cells);
  }
  mb_table_print(&t, stdout, "");
  mb_table_free(&t);
  return MB_EXIT_OK;
}
