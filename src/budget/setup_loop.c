/* The setup keys of the training loop around the step (sim/loop.h says what each means):
 *   loop            plain | trainer | lightning | accelerate: a preset of the keys below
 *   hold_outputs    loss | backward | step | next
 *   max_grad_norm   0 (no clipping) or the max_norm of clip_grad_norm_
 *   grad_scaler     auto | 0 | 1 (auto: under amp-fp16 and fp16, as every preset's loop uses one)
 * and zero_grad (setup_eval.c). A key given explicitly wins over the preset's value, whichever
 * was set first. The presets, from each framework's source (shared/docs/loops-and-losses.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget/setup.h"

static const struct loop_preset {
  const char *name;
  int hold, zero_grad;
  double max_grad_norm;
  const char *what;
} presets[] = {
  [MB_LOOP_PLAIN] = {"plain", MB_HOLD_NEXT, MB_ZERO_GRAD_NONE, 0,
                     "a loop of its own: out and loss live until the next iteration rebinds them"},
  [MB_LOOP_TRAINER] = {"trainer", MB_HOLD_LOSS, MB_ZERO_GRAD_NONE, 1.0,
                       "transformers' Trainer: compute_loss keeps only the loss, clip_grad_norm_(1.0), "
                       "zero_grad after the step"},
  [MB_LOOP_LIGHTNING] = {"lightning", MB_HOLD_LOSS, MB_ZERO_GRAD_BEFORE_BACKWARD, 0,
                         "Lightning's automatic optimization: training_step returns the loss, zero_grad "
                         "runs after it, before backward"},
  [MB_LOOP_ACCELERATE] = {"accelerate", MB_HOLD_NEXT, MB_ZERO_GRAD_NONE, 0,
                          "Accelerate: the user's own loop (accelerator.backward), out and loss live "
                          "until the next iteration rebinds them"},
};
#define N_PRESETS (sizeof presets / sizeof presets[0])

static const char *const holds[] = {"loss", "backward", "step", "next", NULL}; /* enum mb_hold_outputs */

MB_API const char *mb_loop_name(int loop) { return loop >= 0 && (size_t)loop < N_PRESETS ? presets[loop].name : "?"; }
MB_API const char *mb_loop_description(int loop) {
  return loop >= 0 && (size_t)loop < N_PRESETS ? presets[loop].what : "";
}
MB_API const char *mb_hold_name(int hold) { return hold >= 0 && hold <= MB_HOLD_NEXT ? holds[hold] : "?"; }

int mb_setup_loop_option(mb_setup *s, const char *key, const char *value, int *rc) {
  mb_train *t = &s->train;
  int k = 0;
  *rc = MB_OK;
  if (!strcmp(key, "loop")) {
    char want[128] = "one of";
    for (size_t i = 0; i < N_PRESETS; i++) {
      if (!strcmp(value, presets[i].name)) {
        t->loop.loop = (int)i;
        t->loop_set |= MB_LOOP_SET_PRESET;
        return 1;
      }
      snprintf(want + strlen(want), sizeof want - strlen(want), "%s %s", i ? "," : "", presets[i].name);
    }
    *rc = mb_setup_bad(s, key, value, want);
  } else if (!strcmp(key, "hold_outputs")) {
    if ((*rc = mb_setup_pick(s, key, value, holds, &k)) == MB_OK) {
      t->loop.hold = k;
      t->loop_set |= MB_LOOP_SET_HOLD;
    }
  } else if (!strcmp(key, "max_grad_norm")) {
    char *end = NULL;
    double v = strtod(value, &end);
    if (!*value || *end || !(v >= 0 && v <= 1e30)) {
      *rc = mb_setup_bad(s, key, value, "a norm >= 0 (0: no clipping)");
    } else {
      t->loop.max_grad_norm = v;
      t->loop_set |= MB_LOOP_SET_CLIP;
    }
  } else if (!strcmp(key, "grad_scaler")) {
    static const char *const scalers[] = {"0", "1", "auto", NULL};
    if ((*rc = mb_setup_pick(s, key, value, scalers, &k)) == MB_OK) {
      t->grad_scaler = k == 2 ? -1 : k;
    }
  } else {
    return 0;
  }
  return 1;
}

void mb_setup_loop_resolve(const mb_train *t, mb_loop_opts *out, int *zero_grad) {
  const struct loop_preset *p = &presets[t->loop.loop >= 0 && (size_t)t->loop.loop < N_PRESETS ? t->loop.loop : 0];
  out->loop = t->loop.loop;
  out->hold = t->loop_set & MB_LOOP_SET_HOLD ? t->loop.hold : p->hold;
  out->max_grad_norm = t->loop_set & MB_LOOP_SET_CLIP ? t->loop.max_grad_norm : p->max_grad_norm;
  bool fp16 = t->precision == MB_PREC_AMP_FP16 || t->precision == MB_PREC_FP16;
  out->grad_scaler = fp16 && t->grad_scaler != 0;
  if (!t->zero_grad_set) *zero_grad = p->zero_grad;
}
