/* The step simulation. Building a plan walks one training step once, symbolically: which
 * tensors exist, when each is allocated and freed, and in which category. That order does not
 * depend on the batch size, so it is an event program over "slots" (storages) whose sizes are
 * rules over inferred shapes. Running the plan at a batch size infers shapes, sizes every slot
 * and scans the events for the peaks. A batch-size search is many cheap runs of one plan. */
#ifndef MB_SIM_PLAN_H
#define MB_SIM_PLAN_H
#include <stdbool.h>
#include <stdint.h>

#include "membudget/membudget.h"
#include "sim/lines.h"
#include "sim/step.h"
#include "util/diag.h"

/* How a slot's size follows from the inferred shape of its reference value. */
enum mb_size_rule {
  MB_SZ_ZERO,     /* host values (shapes, Python scalars) and aliases of the student's inputs */
  MB_SZ_FIXED,    /* bytes known without shapes (weights, optimizer states, workspaces) */
  MB_SZ_VALUE,    /* numel(ref) elements of dtype */
  MB_SZ_ROWS,     /* numel(ref) / dims[axis..] product: one per normalised row */
  MB_SZ_CHANNELS, /* dims[1] of ref */
  MB_SZ_NC,       /* dims[0] x dims[1] of ref */
  MB_SZ_LSE,      /* numel(ref) / last dim: one per attention query row */
  MB_SZ_TARGET,   /* numel(ref) / dims[axis]: one class index per prediction */
  MB_SZ_CONV_WS   /* a cuDNN convolution call's workspace: numel(ref) + numel(ref2) elements of
                   * dtype plus fixed bytes (the output, the input and the weight: plan.c),
                   * at most the step's cudnn_workspace */
};

/* Slots that stand for something the budget reports apart (run.c sums their bytes). */
enum mb_slot_tag {
  MB_TAG_NONE,
  MB_TAG_TEACHER_CACHE, /* earlier batches of the teacher's outputs (teacher_cache) */
  MB_TAG_EVAL_OUTPUTS,  /* earlier batches of the evaluation's outputs (eval_keep_outputs) */
  MB_TAG_EMA_STORE,     /* EMAModel.store's copy of a parameter */
  MB_TAG_LOOP_HELD,     /* the previous iteration's outputs and loss the loop still holds */
  MB_TAG_COUNT
};

typedef struct mb_slot {
  uint8_t model;     /* 0: the model, 1: the teacher */
  uint8_t eval;      /* sized at the evaluation's batch, not the training batch */
  uint8_t tag;       /* enum mb_slot_tag */
  uint32_t copies;   /* the slot stands for this many tensors of its size (1 unless said) */
  uint8_t rule;      /* enum mb_size_rule */
  uint8_t category;  /* mb_category */
  int8_t axis;
  int32_t ref;       /* value of that model's main graph */
  int32_t ref2;      /* MB_SZ_CONV_WS: a second value (the convolution's input), else -1 */
  int32_t dtype;     /* element type on the device */
  int32_t factor;    /* element multiplier (2 statistics per row, ...) */
  uint64_t fixed;    /* MB_SZ_FIXED bytes */
  const char *name;
  bool trains;       /* a weight that requires grad */
  bool has_grad;     /* a weight that trains and receives a gradient from the loss */
  bool lazy;         /* an optimizer state torch.optim creates inside the first
                      * optimizer.step() (_init_group), not at setup: where the allocator
                      * places it is then decided by what the first step freed */
  int32_t refs;      /* building only: references still to be released */
} mb_slot;

typedef struct mb_event_rec {
  uint8_t alloc;     /* 1 alloc, 0 free */
  uint8_t phase;     /* mb_phase */
  uint8_t model;
  int32_t slot;
  int32_t node;      /* node index in that model's main graph, or -1 */
} mb_event_rec;

typedef struct mb_plan {
  const mb_model *model, *teacher;
  mb_slot *slots;
  int32_t n_slots, cap_slots;
  mb_event_rec *ev;
  int32_t n_ev, cap_ev;
  bool states_at_init;  /* optimizer states exist on the first step too */
  uint64_t host_bytes;  /* offloaded to host memory (dist offload): not device events */
  int64_t eval_batch;   /* the evaluation phase's batch: 0 none, -1 the training batch */
  int32_t step_end;     /* with an evaluation: its first event, zero_grad's (optimizer.step()
                         * has returned; level_after_optimizer is read there) */
  int32_t eval_fwd_first, eval_fwd_end; /* events of the evaluation batch and its forward */
  int32_t step_first;   /* optimizer.step()'s first event (after clipping): where the first
                         * step creates the lazy slots; n_ev when the step makes none */
  char note[512];       /* what was assumed (loss chosen, ...) */
  bool loss_in_graph;   /* the graph's output is the loss (loss none): the model computes it */
  /* the model's and the teacher's (NULL: none) shapes the plan was built from, at shapes_batch:
   * those of a run at that batch, which a batch-size search starts its lines with */
  mb_shapes *shapes[2];
  int64_t shapes_batch;
} mb_plan;

/* Device bytes of a tensor: rounded up to the allocator's block (rounding <= 1: exact). */
static inline uint64_t mb_round_block(uint64_t bytes, uint64_t rounding) {
  return bytes && rounding > 1 ? (bytes + rounding - 1) / rounding * rounding : bytes;
}

/* Plan one training step of m as step describes it. */
int mb_plan_build(const mb_model *m, const mb_step *step, mb_plan **out, mb_diag *d);
void mb_plan_free(mb_plan *p);

/* What one run at a batch size measured. */
typedef struct mb_run {
  uint64_t phase_peak[MB_PHASE_COUNT];
  uint64_t peak;                      /* allocated peak */
  int32_t peak_phase;
  uint64_t at_peak[MB_CAT_COUNT];
  uint64_t persistent[MB_CAT_COUNT];  /* live at the end of setup */
  uint64_t activations;               /* ACTIVATION live at the end of forward */
  uint64_t inputs;
  uint64_t teacher_transient;
  uint64_t first_step_peak;
  int32_t assumed;                    /* default bounds taken for data-dependent sizes */
  bool shapes_from_lines;             /* shapes came from lines, not inference */
  bool stopped;                       /* the live bytes passed stop_above: the run stopped there
                                       * (peak is that level; the other figures are partial) */
  uint64_t phase_end[MB_PHASE_COUNT]; /* live when the step leaves each phase (after its last
                                       * event; a phase without events: the level it is passed at) */
  /* the evaluation phase (not part of the peaks above) */
  int64_t eval_batch;
  uint64_t eval_peak, eval_forward;
  uint64_t eval_at_peak[MB_CAT_COUNT];
  uint64_t tagged[MB_TAG_COUNT];      /* one copy of each tagged slot, summed */
  uint64_t teacher_cache_resident;    /* tagged teacher-cache bytes allocated in setup */
} mb_run;

/* Run the plan at batch (shapes inferred with step's dims, slots rounded to its allocator
 * block). bytes/live: optional per-event arrays (n_ev entries) for a trace. */
int mb_plan_run(const mb_plan *p, const mb_step *step, int64_t batch, mb_run *r, uint64_t *bytes,
                uint64_t *live, mb_diag *d);
/* The same with shapes as lines in the batch (sim/lines.h): runs that infer shapes feed lines;
 * with use_lines, a run takes its shapes from them where they are fitted. stop_above (0: none):
 * a run with shapes from the lines may stop once the live bytes pass it (a batch-size probe
 * that cannot fit); one that infers them runs whole, to be kept. */
int mb_plan_run_lines(const mb_plan *p, const mb_step *step, int64_t batch, mb_lines *lines, bool use_lines,
                      uint64_t stop_above, mb_run *r, uint64_t *bytes, uint64_t *live, mb_diag *d);
/* Feed lines the shapes the plan was built from (a run's at p->shapes_batch). */
void mb_plan_seed_lines(const mb_plan *p, mb_lines *lines);
/* Infer the shapes of a run at batch and feed them to lines, which checks them: where they
 * hold, a run from the lines at that batch is the inferred one. */
int mb_plan_check_lines(const mb_plan *p, const mb_step *step, int64_t batch, mb_lines *lines, mb_diag *d);
#endif
