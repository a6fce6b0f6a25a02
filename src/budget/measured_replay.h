/* One replay: the simulated step's allocation events at a batch size, run on the device. */
#ifndef MB_BUDGET_MEASURED_REPLAY_H
#define MB_BUDGET_MEASURED_REPLAY_H
#include "cuda/device.h"
#include "sim/plan.h"

/* Fills the device fields of out (fits, allocated/reserved peaks, device_bytes,
 * forward_device_bytes, workspaces, segments, convs, matmuls, seconds); the caller adds the
 * static figures and device_peak. Shape errors at this batch are returned as they are
 * (MB_E_LIMIT: absurdly large); running out of device memory is fits = 0, not an error. Every
 * byte it allocated is freed again before it returns. */
int mb_replay_step(mb_cuda *c, const mb_plan *p, const mb_setup *s, int64_t batch, mb_replay *out, mb_diag *d);
#endif
