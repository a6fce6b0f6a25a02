/* One input through the snapshot replay (mb_replay_*): shared by the libFuzzer target
 * (fuzz_snapshot.c) and the deterministic replayer (snapshot_replay.c), so an input that once
 * broke the fuzzer is replayed by the same code under the ASan build of the regular tests.
 *
 * Each input runs twice: with default settings and an unlimited device, then on a small device
 * (64 MiB, no context) with expandable segments and a memory fraction with garbage collection,
 * so the release, unmap and out-of-memory paths run too. A failure must come with a known
 * status and a message; a success must render both reports. Then the same bytes go through
 * mb_alloc_diff_create against a two-node model (MatMul, Relu on [batch, 4]) at batch 2: the
 * recorded step read and lined up with the simulated one, under the same invariants. Returns
 * 0, or -1 after printing when an API invariant is broken (memory errors are the
 * sanitizers'). Header-only. */
#ifndef MB_TESTS_FUZZ_SNAPSHOT_EXERCISE_H
#define MB_TESTS_FUZZ_SNAPSHOT_EXERCISE_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "membudget/membudget.h"

static volatile uint64_t mb_fuzz_snapshot_sink;

static int mb_fuzz_snapshot_once(const uint8_t *data, size_t size, const char *const *settings) {
  mb_setup *s = NULL;
  if (mb_setup_create(&s) != MB_OK) return 0; /* out of memory: nothing to check */
  for (int k = 0; settings[k]; k += 2)
    if (mb_setup_set(s, settings[k], settings[k + 1]) != MB_OK) {
      fprintf(stderr, "snapshot fuzz: bad built-in setting %s: %s\n", settings[k], mb_setup_errmsg(s));
      mb_setup_free(s);
      return -1;
    }
  mb_alloc_replay *r = NULL;
  int rc = mb_alloc_replay_create(data, size, s, &r), bad = 0;
  if (rc != MB_OK) {
    const char *msg = mb_alloc_replay_errmsg(r);
    if (rc > 0 || rc < MB_E_RANGE || (r && (!msg || !*msg))) {
      fprintf(stderr, "snapshot fuzz: failure %d without a known status or a message\n", rc);
      bad = -1;
    }
    if (msg) mb_fuzz_snapshot_sink += strlen(msg);
  } else {
    for (int json = 0; json < 2 && !bad; json++) {
      char *out = NULL;
      int k = mb_alloc_replay_report(r, json, &out);
      if (k == MB_E_NOMEM) continue;
      if (k != MB_OK || !out || !*out) {
        fprintf(stderr, "snapshot fuzz: a replay that succeeded has no %s report\n", json ? "JSON" : "text");
        bad = -1;
      }
      if (out) mb_fuzz_snapshot_sink += strlen(out);
      mb_free(out);
    }
  }
  mb_alloc_replay_free(r);
  mb_setup_free(s);
  return bad;
}

/* x[batch, 4] @ w[4, 4] -> Relu -> y: ONNX bytes (onnx.helper, opset 17) */
static const unsigned char mb_fuzz_diff_model[] = {
  0x08, 0x08, 0x12, 0x04, 0x66, 0x75, 0x7a, 0x7a, 0x3a, 0xaf, 0x01, 0x0a, 0x15, 0x0a, 0x01, 0x78,
  0x0a, 0x01, 0x77, 0x12, 0x01, 0x68, 0x1a, 0x02, 0x6d, 0x6d, 0x22, 0x06, 0x4d, 0x61, 0x74, 0x4d,
  0x75, 0x6c, 0x0a, 0x12, 0x0a, 0x01, 0x68, 0x12, 0x01, 0x79, 0x1a, 0x04, 0x72, 0x65, 0x6c, 0x75,
  0x22, 0x04, 0x52, 0x65, 0x6c, 0x75, 0x12, 0x01, 0x67, 0x2a, 0x4b, 0x08, 0x04, 0x08, 0x04, 0x10,
  0x01, 0x22, 0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
  0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
  0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
  0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
  0x00, 0x00, 0x00, 0x42, 0x01, 0x77, 0x5a, 0x18, 0x0a, 0x01, 0x78, 0x12, 0x13, 0x0a, 0x11, 0x08,
  0x01, 0x12, 0x0d, 0x0a, 0x07, 0x12, 0x05, 0x62, 0x61, 0x74, 0x63, 0x68, 0x0a, 0x02, 0x08, 0x04,
  0x62, 0x18, 0x0a, 0x01, 0x79, 0x12, 0x13, 0x0a, 0x11, 0x08, 0x01, 0x12, 0x0d, 0x0a, 0x07, 0x12,
  0x05, 0x62, 0x61, 0x74, 0x63, 0x68, 0x0a, 0x02, 0x08, 0x04, 0x42, 0x04, 0x0a, 0x00, 0x10, 0x11};

static int mb_fuzz_snapshot_diff(const uint8_t *data, size_t size) {
  mb_model *m = NULL;
  mb_setup *s = NULL;
  int bad = 0;
  if (mb_model_load_buffer(mb_fuzz_diff_model, sizeof mb_fuzz_diff_model, &m) != MB_OK) {
    int oom = m && strstr(mb_model_errmsg(m), "out of memory") != NULL;
    if (!oom) fprintf(stderr, "snapshot fuzz: the built-in model does not load: %s\n", m ? mb_model_errmsg(m) : "?");
    mb_model_free(m);
    return oom ? 0 : -1;
  }
  if (mb_setup_create(&s) != MB_OK || mb_setup_set_batch(s, 2) != MB_OK) {
    mb_setup_free(s);
    mb_model_free(m);
    return 0;
  }
  mb_alloc_diff *diff = NULL;
  int rc = mb_alloc_diff_create(data, size, m, s, &diff);
  if (rc != MB_OK) {
    const char *msg = mb_alloc_diff_errmsg(diff);
    if (rc > 0 || rc < MB_E_RANGE || (diff && (!msg || !*msg))) {
      fprintf(stderr, "snapshot fuzz: alloc-diff failure %d without a known status or a message\n", rc);
      bad = -1;
    }
  } else {
    for (int json = 0; json < 2 && !bad; json++) {
      char *out = NULL;
      int k = mb_alloc_diff_report(diff, json, &out);
      if (k != MB_OK && k != MB_E_NOMEM) {
        fprintf(stderr, "snapshot fuzz: an alloc-diff that succeeded has no %s report\n", json ? "JSON" : "text");
        bad = -1;
      }
      if (out) mb_fuzz_snapshot_sink += strlen(out);
      mb_free(out);
    }
  }
  mb_alloc_diff_free(diff);
  mb_setup_free(s);
  mb_model_free(m);
  return bad;
}

static int mb_fuzz_exercise_snapshot(const uint8_t *data, size_t size) {
  static const char *const plain[] = {"alloc_conf", "", NULL};
  static const char *const small[] = {
    "device_memory", "64MiB", "context", "0", "alloc_conf",
    "expandable_segments:True,garbage_collection_threshold:0.5,per_process_memory_fraction:0.9,"
    "max_split_size_mb:20,roundup_power2_divisions:[1:2,>:4]",
    NULL};
  static const char *const limited[] = {"device_memory", "48MiB", "context", "0", "alloc_conf",
                                        "max_split_size_mb:20", NULL};
  if (mb_fuzz_snapshot_once(data, size, plain)) return -1;
  if (mb_fuzz_snapshot_once(data, size, small)) return -1;
  if (mb_fuzz_snapshot_once(data, size, limited)) return -1;
  return mb_fuzz_snapshot_diff(data, size);
}
#endif
