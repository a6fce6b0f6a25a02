/* libFuzzer target: any byte string through mb_alloc_replay_create() (pickle or JSON snapshot) and
 * its reports (see snapshot_exercise.h). Build: -DMB_FUZZ=ON with clang; run:
 * TARGET=snapshot tests/fuzz/run_fuzz.sh. A broken API invariant aborts, so libFuzzer keeps it. */
#include <stdint.h>
#include <stdlib.h>

#include "snapshot_exercise.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (mb_fuzz_exercise_snapshot(data, size) != 0) abort();
  return 0;
}
