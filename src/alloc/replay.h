/* Replaying a recorded request stream through the allocator model: the `device_traces` of
 * torch.cuda.memory._snapshot() (torch/cuda/memory.py documents the structure). "alloc" is a
 * request, "free_completed" returns the block (a "free_requested" block is not reusable before
 * that), "oom" is a request PyTorch could not serve. The segment_alloc / segment_free /
 * segment_map / segment_unmap events PyTorch recorded are what the model must reproduce: they
 * are compared with the model's, request by request (PyTorch records a malloc's segment events
 * before its "alloc"). */
#ifndef MB_ALLOC_REPLAY_H
#define MB_ALLOC_REPLAY_H
#include <stdbool.h>
#include <stdint.h>

#include "alloc/caching.h"
#include "util/diag.h"
#include "util/datum.h"

#define MB_REPLAY_MISMATCHES 10
/* Bounds on the work one snapshot may ask for (docs/limits.md): device traces read, and trace
 * entries walked per input byte (a real snapshot: under 0.01; shared memo references can ask
 * for any number) */
#define MB_REPLAY_MAX_DEVICES 1024
#define MB_REPLAY_ITEMS_PER_BYTE 8

typedef struct mb_seg_event {
  int action;            /* enum mb_alloc_action */
  uint64_t addr, size, stream;
  uint64_t request;      /* the request it served (1-based; 0: none) */
} mb_seg_event;

typedef struct mb_replay_mismatch {
  uint64_t request;      /* 1-based; 0 when after the last request */
  uint64_t size, stream;
  char recorded[160], model[160];
} mb_replay_mismatch;

typedef struct mb_replay_device {
  int32_t device;
  uint64_t entries;       /* trace entries read */
  uint64_t requests, frees;
  uint64_t unknown_frees; /* frees of addresses allocated before the trace began */
  uint64_t reused;        /* an address allocated again without a free_completed */
  uint64_t other;         /* actions that do not change the allocator (snapshot, annotate, ...) */
  mb_alloc_stats model;   /* the model's figures */
  mb_seg_event *segs;     /* the model's segment events, in order */
  uint64_t n_segs;
  /* PyTorch's own segment events in the trace */
  uint64_t rec_events, rec_segment_allocs, rec_ooms;
  int64_t rec_reserved_peak; /* the peak of their running sum (relative to the trace's start) */
  uint64_t windows, matched, mismatched; /* requests where either side made segment events */
  mb_replay_mismatch first[MB_REPLAY_MISMATCHES];
  int n_first;
} mb_replay_device;

typedef struct mb_replay_result {
  mb_replay_device *dev;
  int32_t n_dev;
  char conf_from_snapshot[256]; /* allocator_settings.PYTORCH_CUDA_ALLOC_CONF, if recorded */
} mb_replay_result;

/* The allocator settings the snapshot recorded (its PYTORCH_CUDA_ALLOC_CONF), or NULL. */
const char *mb_snapshot_alloc_conf(const mb_datum *root);
/* Replay every device's trace with config c; input_bytes: the size of the file the tree came
 * from, which bounds the entries walked. */
int mb_replay_snapshot(const mb_datum *root, size_t input_bytes, const mb_alloc_config *c, mb_replay_result *out,
                       mb_diag *d);
void mb_replay_result_free(mb_replay_result *r);
#endif
