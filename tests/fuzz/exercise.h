/* One input through the whole public API: shared by the libFuzzer target (fuzz_load.c) and the
 * regression replayer (replay.c), so that an input that once crashed the fuzzer is replayed by
 * exactly the same code under the ASan build of the regular tests.
 *
 * mb_fuzz_exercise() loads the bytes with mb_model_load_buffer() and then
 *  - on failure: checks the status is a known negative mb_status with a non-empty message, and
 *    that every accessor is safe (and empty) on the failed handle;
 *  - on success: reads every string, dim and struct every accessor hands out (so ASan sees any
 *    dangling or short array), accounts with no setup and with a freeze + trainable setup,
 *    renders mb_model_info_json() and runs mb_infer_shapes() both ways (batch=2, sequence=7),
 *    probes out-of-range indices, and runs one training-step estimate (mb_fuzz_exercise_estimate);
 * and frees everything. It returns 0, or -1 after printing to stderr when an API invariant is
 * broken (memory errors are left to the sanitizers). Header-only: every function is static. */
#ifndef MB_TESTS_FUZZ_EXERCISE_H
#define MB_TESTS_FUZZ_EXERCISE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "membudget/membudget.h"

/* A sink the optimiser cannot see through: every byte we "read" is folded into it. */
static volatile uint64_t mb_fuzz_sink;

static void mb_fuzz_touch_str(const char *s) {
  if (s) mb_fuzz_sink += strlen(s);
}

static int mb_fuzz_violation(const char *what, int rc, const char *detail) {
  fprintf(stderr, "membudget fuzz: API invariant broken: %s (status %d%s%s)\n", what, rc,
          detail ? ", " : "", detail ? detail : "");
  return -1;
}

static int mb_fuzz_status_ok(int rc) { return rc == MB_OK || (rc <= MB_E_NOMEM && rc >= MB_E_RANGE); }

static void mb_fuzz_touch_desc(const mb_tensor_desc *d) {
  mb_fuzz_touch_str(d->name);
  mb_fuzz_touch_str(mb_dtype_name(d->dtype));
  for (int32_t k = 0; k < d->rank; k++) {
    mb_fuzz_sink += (uint64_t)d->dims[k];
    if (d->dim_params) mb_fuzz_touch_str(d->dim_params[k]);
  }
}

/* Accessors on a handle whose load failed: nothing may crash, everything must be empty. */
static int mb_fuzz_exercise_failed(const mb_model *m, int rc) {
  const char *msg = mb_model_errmsg(m);
  if (!msg || !*msg) return mb_fuzz_violation("failed load without a message", rc, NULL);
  mb_fuzz_touch_str(msg);
  if (!m) return rc == MB_E_NOMEM ? 0 : mb_fuzz_violation("failed load without a handle", rc, msg);
  /* Documented as safe on any handle: the message is the point of a failed handle. */
  mb_fuzz_touch_str(mb_model_producer(m));
  mb_fuzz_sink += (uint64_t)mb_model_ir_version(m);
  for (size_t i = 0; i < mb_model_num_warnings(m); i++) mb_fuzz_touch_str(mb_model_warning(m, i));
  if (mb_model_num_opsets(m) || mb_model_num_initializers(m) || mb_model_num_nodes(m) ||
      mb_model_num_inputs(m) || mb_model_num_outputs(m))
    return mb_fuzz_violation("failed model still reports contents", rc, msg);
  mb_accounting a = {.struct_size = sizeof a};
  if (mb_account(m, NULL, &a) == MB_OK)
    return mb_fuzz_violation("mb_account succeeds on a failed model", rc, msg);
  char *json = NULL;
  if (mb_model_info_json(m, NULL, &json) == MB_OK || json)
    return mb_fuzz_violation("mb_model_info_json succeeds on a failed model", rc, msg);
  return 0;
}

static int mb_fuzz_check_json(const char *json, int rc) {
  if (!json) return mb_fuzz_violation("mb_model_info_json gave MB_OK and NULL", rc, NULL);
  size_t n = strlen(json);
  if (n < 4 || json[0] != '{' || strcmp(json + n - 2, "}\n") != 0)
    return mb_fuzz_violation("mb_model_info_json is not one JSON object", rc, NULL);
  mb_fuzz_sink += n;
  return 0;
}

/* Shape inference at the setup's dim values (NULL: only declared dims). Failing is fine (ops
 * not covered yet, unbound dims); a failure must have a message and hand out nothing. */
static int mb_fuzz_exercise_shapes(const mb_model *m, const mb_setup *setup) {
  mb_shapes *sh = NULL;
  int bad = 0;
  int rc = mb_infer_shapes(m, setup, &sh);
  if (!mb_fuzz_status_ok(rc)) {
    bad = mb_fuzz_violation("mb_infer_shapes: unknown status code", rc, NULL);
  } else if (rc != MB_OK) {
    const char *msg = mb_shapes_errmsg(sh);
    if (!msg || !*msg) bad = mb_fuzz_violation("mb_infer_shapes failed without a message", rc, NULL);
    mb_fuzz_touch_str(msg);
    if (mb_shapes_num_tensors(sh))
      bad = mb_fuzz_violation("failed mb_infer_shapes still reports tensors", rc, msg);
  } else {
    size_t n = mb_shapes_num_tensors(sh);
    for (size_t i = 0; i <= n; i++) {
      mb_shape_desc d = {.struct_size = sizeof d};
      int trc = mb_shapes_tensor(sh, i, &d);
      if (i == n) {
        if (trc != MB_E_RANGE) bad = mb_fuzz_violation("mb_shapes_tensor past the end", trc, NULL);
        continue;
      }
      if (trc != MB_OK || !d.name || d.rank < -1 || (d.rank > 0 && !d.dims)) {
        bad = mb_fuzz_violation("mb_shapes_tensor", trc, d.name);
        continue;
      }
      mb_fuzz_touch_str(d.name);
      mb_fuzz_touch_str(d.producer);
      mb_fuzz_touch_str(d.op_type);
      for (int32_t k = 0; k < d.rank; k++) mb_fuzz_sink += (uint64_t)d.dims[k];
      mb_fuzz_sink += d.nbytes;
    }
  }
  mb_shapes_free(sh);
  return bad;
}

/* A sweep also runs the solved batch, which the estimate at batch 3 did not: a graph whose
 * shapes hold only at some batches (a Split into halves that a Mul broadcasts back) fails
 * there, as the solving estimate does, with the batch in its message. */
static bool fails_at_another_batch(int rc, const char *msg, const int64_t *tried, size_t n) {
  long long at = 0;
  if (rc != MB_E_INVALID_MODEL || sscanf(msg, "at batch %lld:", &at) != 1) return false;
  for (size_t i = 0; i < n; i++)
    if (tried[i] == at) return false;
  return true;
}

/* One training-step estimate at batch 3 under a setup that reaches most of the simulation
 * (autocast, checkpointing every module, the model as its own teacher, eager attention), and
 * its JSON with the trace. Failing is fine with a message; a budget must add up. */
/* Where an estimate succeeds, its timeline and a batch sweep (two sizes and the solved one)
 * must too; a dim sweep over "sequence" may fail (the graph need not have that dim), with a
 * message. Every document is read to its end. */
static int mb_fuzz_exercise_pictures(const mb_model *m, mb_setup *s) {
  int bad = 0;
  char *svg = NULL;
  int rc = mb_timeline_svg(m, s, 0, "fuzz <&>", &svg);
  if (rc == MB_OK && (!svg || strncmp(svg, "<?xml", 5))) bad |= mb_fuzz_violation("mb_timeline_svg", rc, NULL);
  else if (rc != MB_OK && rc != MB_E_NOMEM)
    bad |= mb_fuzz_violation("mb_timeline_svg fails where mb_estimate did not", rc, mb_setup_errmsg(s));
  if (svg) mb_fuzz_sink += strlen(svg);
  mb_free(svg);
  const int64_t values[] = {3, 1};
  for (int k = 0; k < 2; k++) {
    mb_sweep *w = NULL;
    rc = mb_sweep_create(m, s, k ? "sequence" : NULL, values, 2, 1, &w);
    if (!mb_fuzz_status_ok(rc) || (rc != MB_OK && !*mb_setup_errmsg(s))) {
      bad |= mb_fuzz_violation("mb_sweep_create", rc, NULL);
    } else if (rc == MB_OK) {
      char *doc = NULL, *pic = NULL;
      mb_budget b = {.struct_size = sizeof b};
      for (size_t i = 0; i < mb_sweep_num_points(w); i++)
        if (mb_sweep_point(w, i, NULL, &b) != MB_OK) bad |= mb_fuzz_violation("mb_sweep_point", 0, NULL);
      if (mb_sweep_json(w, &doc) == MB_OK) mb_fuzz_sink += strlen(doc);
      if (mb_sweep_svg(w, NULL, &pic) == MB_OK) mb_fuzz_sink += strlen(pic);
      mb_free(doc);
      mb_free(pic);
    } else if (!k && rc != MB_E_NOMEM && !fails_at_another_batch(rc, mb_setup_errmsg(s), values, 2)) {
      bad |= mb_fuzz_violation("a batch sweep fails where mb_estimate did not", rc, mb_setup_errmsg(s));
    }
    mb_sweep_free(w);
  }
  return bad;
}

static int mb_fuzz_exercise_estimate(const mb_model *m) {
  int bad = 0;
  mb_setup *s = NULL;
  if (mb_setup_create(&s) != MB_OK) return 0;
  const char *opts[][2] = {{"precision", "amp-bf16"}, {"checkpoint", "*"}, {"attention", "eager"},
                           {"optimizer", "adamw-8bit"}, {"ema", "1"}, {"device_memory", "1GiB"}};
  for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
    if (mb_setup_set(s, opts[i][0], opts[i][1]) != MB_OK) bad |= mb_fuzz_violation("mb_setup_set", 0, opts[i][0]);
  mb_setup_set_batch(s, 3);
  mb_setup_set_dim(s, "sequence", 7);
  mb_setup_set_teacher(s, m);
  mb_budget b = {.struct_size = sizeof b};
  int rc = mb_estimate(m, s, &b);
  if (!mb_fuzz_status_ok(rc)) {
    bad |= mb_fuzz_violation("mb_estimate: unknown status code", rc, NULL);
  } else if (rc != MB_OK) {
    const char *msg = mb_setup_errmsg(s);
    if (!msg || !*msg) bad |= mb_fuzz_violation("mb_estimate failed without a message", rc, NULL);
    mb_fuzz_touch_str(msg);
  } else {
    if (b.allocated_peak < b.static_bytes || b.reserved_peak < b.allocated_peak ||
        b.device_peak != b.reserved_peak + b.context || b.batch_size != 3)
      bad |= mb_fuzz_violation("mb_estimate: the budget does not add up", rc, NULL);
    char *json = NULL;
    mb_budget again = {.struct_size = sizeof again};
    rc = mb_estimate_json(m, s, 1, &json, &again);
    if (rc == MB_OK) {
      if (!json || json[0] != '{' || again.allocated_peak != b.allocated_peak)
        bad |= mb_fuzz_violation("mb_estimate_json", rc, NULL);
      else mb_fuzz_sink += strlen(json);
    } else if (rc != MB_E_NOMEM) {
      bad |= mb_fuzz_violation("mb_estimate_json fails where mb_estimate did not", rc, mb_setup_errmsg(s));
    }
    mb_free(json);
    bad |= mb_fuzz_exercise_pictures(m, s);
  }
  mb_setup_free(s);
  return bad;
}

static int mb_fuzz_exercise_loaded(const mb_model *m, mb_setup *setup) {
  int bad = 0;
  const char *msg = mb_model_errmsg(m);
  if (!msg || *msg) bad |= mb_fuzz_violation("successful load with a message", 0, msg);
  mb_fuzz_touch_str(mb_model_producer(m));
  mb_fuzz_sink += (uint64_t)mb_model_ir_version(m);

  size_t n = mb_model_num_warnings(m);
  for (size_t i = 0; i < n; i++) {
    const char *w = mb_model_warning(m, i);
    if (!w) bad |= mb_fuzz_violation("NULL warning", 0, NULL);
    mb_fuzz_touch_str(w);
  }
  if (mb_model_warning(m, n)) bad |= mb_fuzz_violation("warning past the end", 0, NULL);

  n = mb_model_num_opsets(m);
  for (size_t i = 0; i <= n; i++) {
    const char *dom = NULL;
    int64_t ver = 0;
    int rc = mb_model_opset(m, i, &dom, &ver);
    if (i < n && (rc != MB_OK || !dom)) bad |= mb_fuzz_violation("mb_model_opset", rc, NULL);
    if (i == n && rc != MB_E_RANGE) bad |= mb_fuzz_violation("mb_model_opset past the end", rc, NULL);
    if (rc == MB_OK) {
      mb_fuzz_touch_str(dom);
      mb_fuzz_sink += (uint64_t)ver;
    }
  }

  for (int io = 0; io < 2; io++) {
    n = io ? mb_model_num_outputs(m) : mb_model_num_inputs(m);
    for (size_t i = 0; i <= n; i++) {
      mb_tensor_desc d = {.struct_size = sizeof d};
      int rc = io ? mb_model_output(m, i, &d) : mb_model_input(m, i, &d);
      if (i == n) {
        if (rc != MB_E_RANGE) bad |= mb_fuzz_violation("input/output past the end", rc, NULL);
        continue;
      }
      if (rc != MB_OK || !d.name || d.rank < -1 || (d.rank > 0 && !d.dims))
        bad |= mb_fuzz_violation(io ? "mb_model_output" : "mb_model_input", rc, NULL);
      else
        mb_fuzz_touch_desc(&d);
    }
  }

  n = mb_model_num_nodes(m);
  for (size_t i = 0; i <= n; i++) {
    const char *op = NULL, *dom = NULL, *name = NULL;
    int rc = mb_model_node(m, i, &op, &dom, &name);
    if (i == n) {
      if (rc != MB_E_RANGE) bad |= mb_fuzz_violation("mb_model_node past the end", rc, NULL);
      continue;
    }
    if (rc != MB_OK || !op || !dom || !name) bad |= mb_fuzz_violation("mb_model_node", rc, NULL);
    mb_fuzz_touch_str(op);
    mb_fuzz_touch_str(dom);
    mb_fuzz_touch_str(name);
  }

  n = mb_model_num_initializers(m);
  for (size_t i = 0; i <= n; i++) {
    mb_initializer_desc d = {.struct_size = sizeof d};
    int rc = mb_model_initializer(m, i, &d);
    int tr = mb_initializer_trainable(m, setup, i);
    if (i == n) {
      if (rc != MB_E_RANGE || tr != MB_E_RANGE)
        bad |= mb_fuzz_violation("initializer past the end", rc, NULL);
      continue;
    }
    if (rc != MB_OK || !d.name || d.rank < 0 || (d.rank > 0 && !d.dims) || tr < 0 || tr > 1)
      bad |= mb_fuzz_violation("mb_model_initializer", rc, d.name);
    if (rc != MB_OK) continue;
    mb_fuzz_touch_str(d.name);
    mb_fuzz_touch_str(d.external_file);
    mb_fuzz_touch_str(mb_role_name(d.role));
    for (int32_t k = 0; k < d.rank; k++) mb_fuzz_sink += (uint64_t)d.dims[k];
    mb_fuzz_sink += d.numel + d.nbytes + (uint64_t)d.num_uses;
  }

  mb_accounting all = {.struct_size = sizeof all}, some = {.struct_size = sizeof some};
  int rc = mb_account(m, NULL, &all);
  if (rc != MB_OK || all.trainable != all.parameters)
    bad |= mb_fuzz_violation("mb_account without a setup", rc, NULL);
  rc = mb_account(m, setup, &some);
  if (rc != MB_OK || some.trainable > some.parameters || some.parameters != all.parameters)
    bad |= mb_fuzz_violation("mb_account with a setup", rc, NULL);

  const mb_setup *setups[2] = {NULL, setup};
  for (int k = 0; k < 2; k++) {
    char *json = NULL;
    rc = mb_model_info_json(m, setups[k], &json);
    if (rc == MB_OK) bad |= mb_fuzz_check_json(json, rc);
    else if (rc != MB_E_NOMEM || json) bad |= mb_fuzz_violation("mb_model_info_json", rc, NULL);
    mb_free(json);
    bad |= mb_fuzz_exercise_shapes(m, setups[k]);
  }
  bad |= mb_fuzz_exercise_estimate(m);
  return bad;
}

/* Returns 0 when every invariant held, -1 otherwise. *status (may be NULL) gets the load's. */
static int mb_fuzz_exercise(const uint8_t *data, size_t size, int *status) {
  mb_model *m = NULL;
  int rc = mb_model_load_buffer(data, size, &m);
  if (status) *status = rc;
  int bad = 0;
  if (!mb_fuzz_status_ok(rc)) {
    bad = mb_fuzz_violation("unknown status code", rc, mb_model_errmsg(m));
  } else if (rc != MB_OK) {
    bad = mb_fuzz_exercise_failed(m, rc);
  } else {
    /* Freeze everything, keep biases and norms trainable: both glob lists are consulted. */
    mb_setup *setup = NULL;
    if (mb_setup_create(&setup) != MB_OK || mb_setup_add_freeze(setup, "*") != MB_OK ||
        mb_setup_add_trainable(setup, "*bias*") != MB_OK ||
        mb_setup_add_trainable(setup, "*[Nn]orm*.weigh?") != MB_OK ||
        mb_setup_set_dim(setup, "batch", 2) != MB_OK ||
        mb_setup_set_dim(setup, "sequence", 7) != MB_OK) {
      bad = mb_fuzz_violation("setup creation", 0, mb_setup_errmsg(setup));
    } else {
      bad = mb_fuzz_exercise_loaded(m, setup);
    }
    mb_setup_free(setup);
  }
  mb_model_free(m);
  return bad;
}

#endif
