/* The optimizer table (see optim.h). Sources: torch/optim/{sgd,adam,adamw,rmsprop,adagrad,
 * adafactor}.py (state creation and the foreach intermediates, PRs #104780/#105599),
 * bitsandbytes Optimizer8bit.init_state, lion-pytorch. */
#include "sim/optim.h"

#include <stddef.h>
#include <string.h>

static const mb_optim_def table[MB_OPT_COUNT] = {
  /* name            models                                    states layout     foreach loop single init step
   * single: the for-loop step (foreach=False, the default on CPU): Adam's denom is
   * (exp_avg_sq.sqrt() / bc2).add_(eps), two parameter-sized tensors for a moment; RMSprop's
   * and Adagrad's sqrt().add_(eps), one. */
  [MB_OPT_SGD]         = {"sgd", "torch.optim.SGD(momentum=0), foreach", 0, MB_OPTIM_PLAIN, 0, 0, 0, false, false},
  [MB_OPT_SGD_MOMENTUM]= {"sgd-momentum", "torch.optim.SGD(momentum>0), foreach", 1, MB_OPTIM_PLAIN, 0, 0, 0, false, false},
  /* exp_avg, exp_avg_sq; the foreach step allocates exp_avg_sq.sqrt() as one list */
  [MB_OPT_ADAM]        = {"adam", "torch.optim.Adam, foreach", 2, MB_OPTIM_PLAIN, 1, 0, 2, false, true},
  [MB_OPT_ADAMW]       = {"adamw", "torch.optim.AdamW, foreach", 2, MB_OPTIM_PLAIN, 1, 0, 2, false, true},
  [MB_OPT_ADAM_AMSGRAD]= {"adam-amsgrad", "torch.optim.Adam(amsgrad=True), foreach", 3, MB_OPTIM_PLAIN, 1, 0, 2, false, true},
  [MB_OPT_ADAMW_AMSGRAD]={"adamw-amsgrad", "torch.optim.AdamW(amsgrad=True), foreach", 3, MB_OPTIM_PLAIN, 1, 0, 2, false, true},
  /* uint8 states with an fp32 absmax per 256-element block; small tensors keep fp32 states */
  [MB_OPT_ADAMW_8BIT]  = {"adamw-8bit", "bitsandbytes AdamW8bit (blocksize 256)", 2, MB_OPTIM_8BIT, 0, 0, 0, false, false},
  /* row and column second moments for matrices, a full one for vectors; no momentum */
  [MB_OPT_ADAFACTOR]   = {"adafactor", "torch.optim.Adafactor, single-tensor", 1, MB_OPTIM_FACTORED, 0, 2, 0, false, true},
  /* exp_avg; the update is a sign() of a cloned interpolation, one parameter at a time */
  [MB_OPT_LION]        = {"lion", "lion-pytorch Lion", 1, MB_OPTIM_PLAIN, 0, 1, 0, false, false},
  [MB_OPT_RMSPROP]     = {"rmsprop", "torch.optim.RMSprop(momentum=0), foreach", 1, MB_OPTIM_PLAIN, 1, 0, 1, false, true},
  [MB_OPT_ADAGRAD]     = {"adagrad", "torch.optim.Adagrad, foreach", 1, MB_OPTIM_PLAIN, 1, 0, 1, true, true},
};

int mb_optim_find(const char *name) {
  for (int i = 0; i < MB_OPT_COUNT; i++)
    if (!strcmp(table[i].name, name)) return i;
  if (!strcmp(name, "momentum")) return MB_OPT_SGD_MOMENTUM;
  return -1;
}

const mb_optim_def *mb_optim_get(int id) {
  return id >= 0 && id < MB_OPT_COUNT ? &table[id] : &table[MB_OPT_ADAMW];
}

const char *mb_optim_names(void) {
  return "sgd, sgd-momentum, adam, adamw, adam-amsgrad, adamw-amsgrad, adamw-8bit, adafactor, "
         "lion, rmsprop, adagrad";
}

#define BNB_BLOCK 256
#define BNB_MIN_8BIT 4096

int mb_optim_states(int id, const int64_t *dims, int32_t rank, uint64_t numel, int state_bytes,
                    uint64_t out[4]) {
  const mb_optim_def *d = mb_optim_get(id);
  int n = 0;
  switch (d->layout) {
    case MB_OPTIM_8BIT:
      if (numel < BNB_MIN_8BIT) { /* bitsandbytes keeps fp32 states for small tensors */
        out[n++] = numel * 4;
        out[n++] = numel * 4;
      } else {
        uint64_t blocks = (numel + BNB_BLOCK - 1) / BNB_BLOCK;
        out[n++] = numel;      /* state1, uint8 */
        out[n++] = numel;      /* state2, uint8 */
        out[n++] = blocks * 4; /* absmax1 */
        out[n++] = blocks * 4; /* absmax2 */
      }
      break;
    case MB_OPTIM_FACTORED:
      if (rank >= 2 && dims[rank - 1] > 0 && dims[rank - 2] > 0) {
        out[n++] = numel / (uint64_t)dims[rank - 1] * (uint64_t)state_bytes; /* row_var */
        out[n++] = numel / (uint64_t)dims[rank - 2] * (uint64_t)state_bytes; /* col_var */
      } else {
        out[n++] = numel * (uint64_t)state_bytes;
      }
      break;
    default:
      for (int i = 0; i < d->full_states; i++) out[n++] = numel * (uint64_t)state_bytes;
  }
  return n;
}
