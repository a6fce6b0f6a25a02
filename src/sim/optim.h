/* Optimizers: which state tensors each keeps per parameter and what its step allocates
 * (docs/training-memory-model.md section 5). */
#ifndef MB_SIM_OPTIM_H
#define MB_SIM_OPTIM_H
#include <stdbool.h>
#include <stdint.h>

enum mb_optimizer {
  MB_OPT_SGD, MB_OPT_SGD_MOMENTUM, MB_OPT_ADAM, MB_OPT_ADAMW, MB_OPT_ADAM_AMSGRAD,
  MB_OPT_ADAMW_AMSGRAD, MB_OPT_ADAMW_8BIT, MB_OPT_ADAFACTOR, MB_OPT_LION, MB_OPT_RMSPROP,
  MB_OPT_ADAGRAD, MB_OPT_COUNT
};

typedef struct mb_optim_def {
  const char *name;
  const char *models;     /* the implementation whose memory is modelled */
  int32_t full_states;    /* state tensors shaped like the parameter (state dtype) */
  int32_t layout;         /* MB_OPTIM_PLAIN, _8BIT (bitsandbytes blocks), _FACTORED (Adafactor) */
  int32_t foreach_lists;  /* parameter-sized lists a foreach step allocates (per dtype group) */
  int32_t loop_temps;     /* parameter-sized temporaries of a per-parameter loop (largest one) */
  int32_t single_temps;   /* the same for the foreach=False implementation, when foreach is off */
  bool states_at_init;    /* created in the constructor (Adagrad), so present on step one */
  bool step_tensor;       /* state['step'] = torch.tensor(0.0) per parameter: a 4-byte tensor on
                           * the CPU (not capturable or fused), so device memory only there */
} mb_optim_def;

enum { MB_OPTIM_PLAIN, MB_OPTIM_8BIT, MB_OPTIM_FACTORED };

/* Index of the optimizer called name, or -1. */
int mb_optim_find(const char *name);
const mb_optim_def *mb_optim_get(int id);
/* "sgd, sgd-momentum, ..." for messages. */
const char *mb_optim_names(void);
/* The state tensors of one parameter of numel elements (dims/rank for factored states),
 * state_bytes per element for full states. Writes up to 4 tensor sizes in bytes; returns the
 * count. */
int mb_optim_states(int id, const int64_t *dims, int32_t rank, uint64_t numel, int state_bytes,
                    uint64_t out[4]);
#endif
