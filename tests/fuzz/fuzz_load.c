/* libFuzzer target: any byte string through mb_model_load_buffer() and, when it loads, through
 * every accessor (see exercise.h). Build: -DMB_FUZZ=ON with clang; run: tests/fuzz/run_fuzz.sh.
 * A broken API invariant aborts, so libFuzzer saves the input like any other crash. */
#include <stdint.h>
#include <stdlib.h>

#include "exercise.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (mb_fuzz_exercise(data, size, NULL) != 0) abort();
  return 0;
}
