#include "budget/setup.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/config.h"
#include "budget/gpus.h"
#include "sim/optim.h"
#include "util/format.h"
#include "util/glob.h"

/* backend sets the defaults of the options that differ between CUDA and CPU PyTorch; options
 * set after it override them. */
static void set_backend(mb_train *t, bool cpu) {
  t->cpu = cpu;
  t->foreach = !cpu;               /* torch.optim picks foreach only when every param is on CUDA */
  t->rounding = cpu ? 1 : 512;     /* the CPU allocator hands out exact sizes */
  t->fragmentation = cpu ? 0 : 0.1; /* and caches nothing: the allowance, at 0 */
  t->reserved_model = cpu ? MB_RESERVED_ALLOWANCE : MB_RESERVED_ALLOCATOR;
  t->context = 0;
  t->context_set = cpu;            /* CUDA's from the context table */
  t->cudnn_workspace = cpu ? 0 : MB_CUDNN_WORKSPACE_AUTO;
  t->cublaslt_workspace = 0;
  t->cublas_workspace = 0;
  t->cublas_workspace_set = cpu;   /* no cuBLAS */
}

MB_API int mb_setup_create(mb_setup **out) {
  if (!out) return MB_E_INVALID_ARG;
  *out = calloc(1, sizeof **out);
  if (!*out) return MB_E_NOMEM;
  mb_arena_init(&(*out)->arena);
  (*out)->batch = -1;
  mb_train *t = &(*out)->train;
  t->optimizer = MB_OPT_ADAMW;
  t->precision = MB_PREC_FP32;
  t->loss = MB_LOSS_AUTO;
  t->grad_accumulation = 1;
  t->batch_min = 1;
  t->batch_max = 65536;
  t->batch_multiple = 1;
  t->utilization = 0.9;
  t->margin = -1;
  t->loop.loop = MB_LOOP_PLAIN;
  t->grad_scaler = -1;
  set_backend(t, false); /* the CUDA defaults: foreach, rounding, allowance, context, cuBLAS */
  mb_setup_dist_defaults(&t->dist);
  mb_setup_fsdp_defaults(&t->dist);
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
  free_list(s->train.checkpoint, s->train.n_checkpoint);
  mb_setup_dist_free(&s->train.dist);
  mb_setup_fsdp_free(&s->train.dist);
  free(s->train.alloc_conf);
  free(s->bound);
  free(s->is_bound);
  mb_setup_cuda_free(s);
  mb_setup_graphs_free(s);
  mb_setup_report_free(s);
  mb_arena_destroy(&s->arena);
  free(s);
}

MB_API const char *mb_setup_errmsg(const mb_setup *s) { return s ? s->errmsg : ""; }

int mb_setup_add_pattern(mb_setup *s, char ***list, size_t *n, const char *glob) {
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
  return mb_setup_add_pattern(s, s ? &s->freeze : NULL, s ? &s->n_freeze : NULL, glob);
}

MB_API int mb_setup_add_trainable(mb_setup *s, const char *glob) {
  return mb_setup_add_pattern(s, s ? &s->trainable : NULL, s ? &s->n_trainable : NULL, glob);
}

bool mb_setup_trains(const mb_setup *s, const char *name) {
  if (!s) return true;
  mb_trains_rule rule = {s->freeze, s->n_freeze, s->trainable, s->n_trainable};
  return mb_trains(&rule, name);
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
  if (batch < 0) {
    snprintf(s->errmsg, sizeof s->errmsg, "the batch size must be at least 1 (0: none, solve for it)");
    return MB_E_INVALID_ARG;
  }
  s->batch = batch ? batch : -1; /* 0 takes a batch size back: mb_estimate solves again */
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

/* ---- training options by name (mb_setup_set) ---- */

int mb_setup_bad(mb_setup *s, const char *key, const char *value, const char *want) {
  snprintf(s->errmsg, sizeof s->errmsg, "%s: '%s' is not %s", key, value, want);
  return MB_E_INVALID_ARG;
}

int mb_setup_pick(mb_setup *s, const char *key, const char *value, const char *const *names, int *out) {
  char want[256] = "one of";
  for (int i = 0; names[i]; i++) {
    if (!strcmp(value, names[i])) {
      *out = i;
      return MB_OK;
    }
    snprintf(want + strlen(want), sizeof want - strlen(want), "%s %s", i ? "," : "", names[i]);
  }
  return mb_setup_bad(s, key, value, want);
}

int mb_setup_bool(mb_setup *s, const char *key, const char *value, bool *out) {
  if (!strcmp(value, "1") || !strcmp(value, "true") || !strcmp(value, "on")) *out = true;
  else if (!strcmp(value, "0") || !strcmp(value, "false") || !strcmp(value, "off")) *out = false;
  else return mb_setup_bad(s, key, value, "0 or 1");
  return MB_OK;
}

bool mb_setup_digits(const char *value, int64_t lo, int64_t hi, int64_t *out) {
  if (!*value) return false;
  int64_t v = 0;
  for (const char *p = value; *p; p++) {
    if (*p < '0' || *p > '9') return false;
    int digit = *p - '0';
    if (v > (hi - digit) / 10) return false; /* checked before it is multiplied: no overflow */
    v = v * 10 + digit;
  }
  if (v < lo) return false;
  *out = v;
  return true;
}

int mb_setup_int(mb_setup *s, const char *key, const char *value, int64_t lo, int64_t hi, int64_t *out) {
  char *end = NULL;
  errno = 0;
  long long v = strtoll(value, &end, 10);
  if (!*value || *end || errno == ERANGE || v < lo || v > hi) {
    char want[96];
    snprintf(want, sizeof want, "an integer in [%lld, %lld]", (long long)lo, (long long)hi);
    return mb_setup_bad(s, key, value, want);
  }
  *out = v;
  return MB_OK;
}

static int parse_fraction(mb_setup *s, const char *key, const char *value, double lo, double hi, double *out) {
  char *end = NULL;
  double v = strtod(value, &end);
  if (!*value || *end || !(v > lo && v <= hi)) return mb_setup_bad(s, key, value, "a fraction in range");
  *out = v;
  return MB_OK;
}

static int parse_size(mb_setup *s, const char *key, const char *value, uint64_t *out) {
  if (mb_parse_bytes(value, out) != 0)
    return mb_setup_bad(s, key, value, "a size such as 80GiB, 24GB or 1024, at most 4 EiB");
  return MB_OK;
}

static const char *const precisions[] = {"fp32", "amp-fp16", "amp-bf16", "fp16", "bf16", NULL};
static const char *const losses[] = {"auto", "ce", "mse", "none", NULL};
static const char *const loss_dtypes[] = {"auto", "fp32", NULL};
static const char *const attentions[] = {"auto", "fused", "eager", NULL};
static const char *const backends[] = {"cuda", "cpu", NULL};
static const char *const grad_sums[] = {"inplace", "copy", NULL};
static const char *const transformers_paths[] = {"eager", "as-exported", NULL};
static const char *const reserved_models[] = {"allocator", "allowance", NULL};
static const char *const loadings[] = {"lazy", "eager", NULL};

/* "12.8" -> 1208 */
static int parse_version(mb_setup *s, const char *key, const char *value, int *out) {
  char *end = NULL;
  long major = strtol(value, &end, 10), minor = 0;
  if (end == value || major < 1 || major > 99) return mb_setup_bad(s, key, value, "a version such as 12.8");
  if (*end == '.') {
    const char *m = end + 1;
    minor = strtol(m, &end, 10);
    if (end == m || minor < 0 || minor > 99) return mb_setup_bad(s, key, value, "a version such as 12.8");
  }
  if (*end) return mb_setup_bad(s, key, value, "a version such as 12.8");
  *out = (int)(major * 100 + minor);
  return MB_OK;
}

/* "550" or "550.54.15" -> 550 */
static int parse_driver(mb_setup *s, const char *key, const char *value, int *out) {
  char *end = NULL;
  long major = strtol(value, &end, 10);
  if (end == value || major < 1 || major > 9999 || (*end && *end != '.'))
    return mb_setup_bad(s, key, value, "a driver version such as 550 or 550.54.15");
  *out = (int)major;
  return MB_OK;
}

static int set_alloc_conf(mb_setup *s, const char *value) {
  mb_alloc_config c;
  mb_alloc_config_default(&c);
  char err[512];
  int rc = mb_alloc_config_parse(&c, value, err, sizeof err);
  if (rc != MB_OK) {
    snprintf(s->errmsg, sizeof s->errmsg, "%s", err);
    return rc;
  }
  char *copy = NULL;
  if (*value) {
    if (!(copy = malloc(strlen(value) + 1))) return MB_E_NOMEM;
    strcpy(copy, value);
  }
  free(s->train.alloc_conf);
  s->train.alloc_conf = copy;
  s->train.alloc_conf_set = true;
  return MB_OK;
}


MB_API int mb_setup_set(mb_setup *s, const char *key, const char *value) {
  if (!s) return MB_E_INVALID_ARG;
  if (!key || !value) {
    snprintf(s->errmsg, sizeof s->errmsg, "mb_setup_set: key and value are required");
    return MB_E_INVALID_ARG;
  }
  mb_train *t = &s->train;
  int rc = MB_OK, choice = 0;
  int64_t n = 0;
  s->errmsg[0] = '\0';
  if (!strcmp(key, "optimizer")) {
    int id = mb_optim_find(value);
    if (id < 0) {
      char want[256];
      snprintf(want, sizeof want, "one of %s", mb_optim_names());
      return mb_setup_bad(s, key, value, want);
    }
    t->optimizer = id;
  } else if (!strcmp(key, "precision")) {
    if ((rc = mb_setup_pick(s, key, value, precisions, &choice)) == MB_OK) t->precision = choice;
  } else if (!strcmp(key, "loss")) {
    if ((rc = mb_setup_pick(s, key, value, losses, &choice)) == MB_OK) t->loss = choice;
  } else if (!strcmp(key, "loss_dtype")) {
    if ((rc = mb_setup_pick(s, key, value, loss_dtypes, &choice)) == MB_OK) t->loss_fp32 = choice == 1;
  } else if (!strcmp(key, "attention")) {
    if ((rc = mb_setup_pick(s, key, value, attentions, &choice)) == MB_OK) t->attention = (int32_t)choice;
  } else if (!strcmp(key, "backend")) {
    if ((rc = mb_setup_pick(s, key, value, backends, &choice)) == MB_OK) set_backend(t, choice == 1);
  } else if (!strcmp(key, "grad_sum")) {
    if ((rc = mb_setup_pick(s, key, value, grad_sums, &choice)) == MB_OK) t->grad_sum_copy = choice == 1;
  } else if (!strcmp(key, "transformers")) {
    if ((rc = mb_setup_pick(s, key, value, transformers_paths, &choice)) == MB_OK) t->transformers_as_exported = choice == 1;
  } else if (!strcmp(key, "accept_inference_graph")) {
    rc = mb_setup_bool(s, key, value, &t->accept_inference_graph);
  } else if (!strcmp(key, "foreach")) {
    rc = mb_setup_bool(s, key, value, &t->foreach);
  } else if (!strcmp(key, "master_weights")) {
    rc = mb_setup_bool(s, key, value, &t->master_weights);
  } else if (!strcmp(key, "ema")) {
    rc = mb_setup_bool(s, key, value, &t->ema);
  } else if (!strcmp(key, "teacher_offload")) {
    rc = mb_setup_bool(s, key, value, &t->teacher_offload);
  } else if (!strcmp(key, "checkpoint")) {
    rc = mb_setup_add_pattern(s, &t->checkpoint, &t->n_checkpoint, value);
  } else if (!strcmp(key, "grad_accumulation")) {
    if ((rc = mb_setup_int(s, key, value, 1, 1 << 20, &n)) == MB_OK) t->grad_accumulation = n;
  } else if (!strcmp(key, "batch_min")) {
    if ((rc = mb_setup_int(s, key, value, 1, INT64_C(1) << 40, &n)) == MB_OK) t->batch_min = n;
  } else if (!strcmp(key, "batch_max")) {
    if ((rc = mb_setup_int(s, key, value, 1, INT64_C(1) << 40, &n)) == MB_OK) t->batch_max = n;
  } else if (!strcmp(key, "batch_multiple")) {
    if ((rc = mb_setup_int(s, key, value, 1, 1 << 20, &n)) == MB_OK) t->batch_multiple = n;
  } else if (!strcmp(key, "gpu")) {
    const mb_gpu *gpu = mb_gpu_find(value);
    if (!gpu) {
      char want[640] = "a known GPU:";
      for (size_t i = 0; i < mb_gpu_num(); i++) {
        const char *name;
        mb_gpu_get(i, &name, NULL, NULL);
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s %s", i ? "," : "", name);
      }
      return mb_setup_bad(s, key, value, want);
    }
    t->gpu = gpu->name;
    t->device_memory = gpu->memory;
  } else if (!strcmp(key, "device_memory")) {
    rc = parse_size(s, key, value, &t->device_memory);
    if (rc == MB_OK && t->device_memory == 0) return mb_setup_bad(s, key, value, "a size above 0");
  } else if (!strcmp(key, "context")) {
    rc = parse_size(s, key, value, &t->context);
    t->context_set = rc == MB_OK;
  } else if (!strcmp(key, "reserved")) {
    if ((rc = mb_setup_pick(s, key, value, reserved_models, &choice)) == MB_OK) t->reserved_model = choice;
  } else if (!strcmp(key, "alloc_conf")) {
    rc = set_alloc_conf(s, value);
  } else if (!strcmp(key, "cublaslt_workspace")) {
    rc = parse_size(s, key, value, &t->cublaslt_workspace);
  } else if (!strcmp(key, "cudnn_workspace")) {
    if (!strcmp(value, "auto")) t->cudnn_workspace = MB_CUDNN_WORKSPACE_AUTO;
    else rc = parse_size(s, key, value, &t->cudnn_workspace);
  } else if (!strcmp(key, "cuda_version")) {
    rc = parse_version(s, key, value, &t->cuda_version);
  } else if (!strcmp(key, "driver_version")) {
    rc = parse_driver(s, key, value, &t->driver_version);
  } else if (!strcmp(key, "module_loading")) {
    if ((rc = mb_setup_pick(s, key, value, loadings, &choice)) == MB_OK) t->eager_loading = choice == 1;
  } else if (!strcmp(key, "cublas_workspace")) {
    rc = parse_size(s, key, value, &t->cublas_workspace);
    t->cublas_workspace_set = rc == MB_OK;
  } else if (!strcmp(key, "rounding")) {
    if ((rc = mb_setup_int(s, key, value, 1, 1 << 24, &n)) == MB_OK) t->rounding = (uint64_t)n;
  } else if (!strcmp(key, "utilization")) {
    rc = parse_fraction(s, key, value, 0.0, 1.0, &t->utilization);
  } else if (!strcmp(key, "margin")) {
    double m = 0;
    if (!strcmp(value, "auto")) t->margin = -1;
    else if (!strcmp(value, "0")) t->margin = 0;
    else if ((rc = parse_fraction(s, key, value, 0.0, 0.5, &m)) == MB_OK) t->margin = m;
  } else if (!strcmp(key, "fragmentation")) {
    double f = 0;
    if (!strcmp(value, "0")) t->fragmentation = 0;
    else if ((rc = parse_fraction(s, key, value, 0.0, 0.9, &f)) == MB_OK) t->fragmentation = f;
    if (rc == MB_OK) t->reserved_model = MB_RESERVED_ALLOWANCE; /* the allowance is what it sizes */
  } else if (!mb_setup_cuda_option(s, key, value, &rc) && !mb_setup_graphs_option(s, key, value, &rc) &&
             !mb_setup_report_option(s, key, value, &rc) && !mb_setup_eval_option(s, key, value, &rc) &&
             !mb_setup_loop_option(s, key, value, &rc) &&
             !mb_setup_dist_option(s, key, value, &rc) && !mb_setup_fsdp_option(s, key, value, &rc) &&
             !mb_setup_limits_option(s, key, value, &rc)) {
    snprintf(s->errmsg, sizeof s->errmsg, "unknown setup option '%s'", key);
    return MB_E_INVALID_ARG;
  }
  return rc;
}

MB_API int mb_setup_set_teacher(mb_setup *s, const mb_model *teacher) {
  if (!s) return MB_E_INVALID_ARG;
  s->train.teacher = teacher;
  return MB_OK;
}
