/* The requests of one recorded training step: a snapshot's device trace
 * (torch.cuda.memory._snapshot() after _record_memory_history()) read as the program made its
 * requests, for lining them up with a simulated step (api/alloc_diff.c).
 *
 * The step: the requests after the last but one "Optimizer.step" annotation ended, up to the
 * end of the last (external_annotations, which torch.optim records since 2.1); with one, from
 * the trace's start; with none, the whole trace. A request's free is its "free_requested" (the
 * program dropped it; "free_completed" follows once its stream is done with it). Each request
 * is named from its frames (PyTorch records C++ and Python stacks by default): the innermost
 * aten op (at::_ops::<op>) that is not an allocation primitive, the autograd function whose
 * backward made it, and the innermost Python frame outside torch itself. */
#ifndef MB_ALLOC_SNAPSHOT_STREAM_H
#define MB_ALLOC_SNAPSHOT_STREAM_H
#include <stddef.h>
#include <stdint.h>

#include "util/datum.h"
#include "util/diag.h"

#define MB_SNAP_NOT_FREED UINT64_MAX

enum mb_snap_phase { MB_SNAP_FORWARD, MB_SNAP_BACKWARD, MB_SNAP_OPTIMIZER, MB_SNAP_PHASES };

typedef struct mb_snap_name {
  const char *s;  /* into the snapshot's datum tree; NULL: unknown */
  size_t n;
} mb_snap_name;

typedef struct mb_snap_request {
  uint64_t size;     /* the bytes asked for (the trace's "size": before the allocator's rounding) */
  uint64_t free_at;  /* the requests made before its free, or MB_SNAP_NOT_FREED in the step */
  int phase;         /* enum mb_snap_phase */
  mb_snap_name op;   /* "addmm" */
  mb_snap_name grad_fn; /* "AddmmBackward0" (a backward's request), else NULL */
  mb_snap_name site; /* the Python frame: its file's base name and function, as two names */
  mb_snap_name site_fn;
  uint64_t site_line;
} mb_snap_request;

typedef struct mb_snap_stream {
  mb_snap_request *req;
  size_t n;
  int32_t device;       /* the device trace read: the one with the most requests */
  uint64_t steps;       /* Optimizer.step annotations that ended */
  int window;           /* 2: between the last two steps' ends, 1: up to the only one, 0: the whole trace */
  uint64_t frees_of_older; /* frees in the step of blocks allocated before it */
  uint64_t peak_above_start; /* the step's live bytes above its start, at their peak */
} mb_snap_stream;

/* Read the step. input_bytes: the size of the file the tree came from; a tree that asks for
 * more work than that allows (a pickle's memo shares one list many times) is refused. */
int mb_snap_stream_read(const mb_datum *root, size_t input_bytes, mb_snap_stream *out, mb_diag *d);
void mb_snap_stream_free(mb_snap_stream *s);
const char *mb_snap_phase_name(int phase);
#endif
