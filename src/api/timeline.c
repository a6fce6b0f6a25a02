/* The step's timeline as SVG (mb_timeline_svg): the allocated bytes after each event of one
 * simulated step, stacked by category, over the events in order; the phases shaded and named;
 * the allocated peak marked with its node and module; lines for the device peak, the usable
 * memory and the device memory.
 *
 * A step can have 100k events and the plot about 850 pixel columns: when there are more events
 * than columns, each column keeps the event with the lowest and the one with the highest live
 * total (in event order), so every spike, the peak among them, stays visible; with fewer events
 * every event is drawn as a step. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget/estimate.h"
#include "budget/setup.h"
#include "budget/step.h"
#include "graph/graph.h"
#include "sim/optim.h"
#include "sim/plan.h"
#include "util/format.h"
#include "util/svg.h"

/* the picture, in user units */
#define PIC_W 1200.0
#define PIC_H 720.0
#define PX0 92.0   /* plot area */
#define PX1 930.0
#define PY0 104.0
#define PY1 640.0
#define LEGEND_X 950.0
/* a limit line more than this times the allocated peak would squash the plot: it is named in
 * a note instead of drawn */
#define LINE_RANGE 4.0

/* bottom to top: what exists all step first, what comes and goes on top */
static const int stack_order[MB_CAT_COUNT] = {
  MB_CAT_PARAMETER, MB_CAT_EMBEDDING, MB_CAT_BUFFER, MB_CAT_MASTER, MB_CAT_EMA, MB_CAT_TEACHER,
  MB_CAT_OPTIMIZER, MB_CAT_WORKSPACE, MB_CAT_INPUT, MB_CAT_GRADIENT, MB_CAT_ACTIVATION,
  MB_CAT_ACT_GRAD, MB_CAT_TEMPORARY};

/* by mb_category */
static const char *const cat_color[MB_CAT_COUNT] = {
  "#4e79a7", /* parameters */
  "#a0cbe8", /* embeddings */
  "#bab0ac", /* buffers */
  "#e15759", /* gradients */
  "#f28e2b", /* optimizer states */
  "#86bcb6", /* master weights */
  "#499894", /* EMA */
  "#d4a6c8", /* teacher weights */
  "#b6992d", /* inputs */
  "#59a14f", /* activations */
  "#b07aa1", /* activation grads */
  "#ff9da7", /* temporaries */
  "#9d7660", /* workspace */
};

static const char *const cat_label[MB_CAT_COUNT] = {
  "parameters", "embeddings", "buffers", "gradients (.grad)", "optimizer states", "master weights",
  "EMA copy", "teacher weights", "input batch and targets", "activations", "activation gradients",
  "temporaries", "cuBLAS workspaces"};

/* what one tensor of each category is, for the peak's label */
static const char *const cat_noun[MB_CAT_COUNT] = {
  "a parameter", "an embedding", "a buffer", "a .grad", "an optimizer state", "a master weight",
  "an EMA copy", "a teacher weight", "the batch", "an activation", "an activation gradient",
  "a temporary", "a cuBLAS workspace"};

/* by mb_phase; phases added later take the last tint */
static const char *const phase_tint[] = {"#ececec", "#fbeedd", "#e3eef9", "#f9e3e8", "#e6f2e1", "#efe6f6",
                                         "#fff6cc"};

typedef struct sample {
  int64_t i; /* event index */
  uint64_t cat[MB_CAT_COUNT];
} sample;

typedef struct picture {
  const mb_plan *p;
  const mb_setup *s;
  const mb_budget *bu;
  const uint64_t *bytes, *live; /* per event: its bytes, the live total after it */
  int64_t n;            /* events */
  sample *smp;
  int64_t n_smp;
  bool steps;           /* every event drawn (n <= columns) */
  uint64_t cat_max[MB_CAT_COUNT];
  int64_t peak_i;       /* first event at the allocated peak, -1: none */
  double ymax;          /* bytes at the top of the plot */
  double unit;          /* bytes per tick-label unit */
  double step;          /* between y ticks, in units */
  const char *unit_name;
} picture;

static double xof(const picture *pc, double i) { return pc->n ? PX0 + (PX1 - PX0) * i / (double)pc->n : PX0; }
static double yof(const picture *pc, double bytes) { return PY1 - (PY1 - PY0) * bytes / pc->ymax; }

/* pass 1: the events to draw; pass 2: the live bytes per category after each of them */
static int take_samples(picture *pc, mb_diag *d) {
  const mb_plan *p = pc->p;
  int64_t n = pc->n, cols = (int64_t)(PX1 - PX0);
  pc->steps = n <= cols;
  int64_t *pick = malloc(((size_t)(pc->steps ? n : 2 * cols) + 1) * sizeof *pick);
  if (!pick) return mb_fail(d, MB_E_NOMEM, "out of memory");
  int64_t n_pick = 0;
  if (pc->steps) {
    for (int64_t i = 0; i < n; i++) pick[n_pick++] = i;
  } else {
    int64_t c = -1, lo = 0, hi = 0;
    for (int64_t i = 0; i <= n; i++) {
      int64_t col = i < n ? i * cols / n : cols;
      if (col != c) {
        if (c >= 0) { /* the column's lowest and highest, in event order */
          pick[n_pick++] = lo < hi ? lo : hi;
          if (lo != hi) pick[n_pick++] = lo < hi ? hi : lo;
        }
        c = col;
        lo = hi = i;
        continue;
      }
      if (pc->live[i] < pc->live[lo]) lo = i;
      if (pc->live[i] > pc->live[hi]) hi = i;
    }
  }
  pc->smp = malloc(((size_t)n_pick + 1) * sizeof *pc->smp);
  if (!pc->smp) {
    free(pick);
    return mb_fail(d, MB_E_NOMEM, "out of memory");
  }
  uint64_t cat[MB_CAT_COUNT] = {0};
  int64_t k = 0;
  pc->peak_i = -1;
  uint64_t peak = 0;
  for (int64_t i = 0; i < n; i++) {
    const mb_event_rec *e = &p->ev[i];
    int c = p->slots[e->slot].category;
    uint64_t b = pc->bytes[i];
    if (e->alloc) cat[c] += b;
    else cat[c] = cat[c] > b ? cat[c] - b : 0;
    if (cat[c] > pc->cat_max[c]) pc->cat_max[c] = cat[c];
    if (e->phase != MB_PHASE_EVAL && pc->live[i] > peak) { /* the step's peak, not the evaluation's */
      peak = pc->live[i];
      pc->peak_i = i;
    }
    if (k < n_pick && pick[k] == i) {
      pc->smp[k].i = i;
      memcpy(pc->smp[k].cat, cat, sizeof cat);
      k++;
    }
  }
  pc->n_smp = k;
  free(pick);
  return MB_OK;
}

static void scale(picture *pc, double top) {
  pc->unit_name = mb_svg_byte_unit(top, &pc->unit);
  double step = mb_svg_nice_step(top / pc->unit, 6);
  if (pc->unit == 1 && step < 1) step = 1;
  double ticks = ceil(top * 1.04 / pc->unit / step);
  if (ticks < 1) ticks = 1;
  pc->step = step;
  pc->ymax = ticks * step * pc->unit;
}

static const char *precision_name(int p) {
  static const char *const names[] = {"fp32", "amp-fp16", "amp-bf16", "fp16", "bf16"};
  return p >= 0 && p <= 4 ? names[p] : "fp32";
}

static void titles(mb_svg *svg, const picture *pc, const char *title) {
  const mb_budget *bu = pc->bu;
  char a[32], r[32], c[32], dp[32], line[512];
  snprintf(line, sizeof line, "%s%sone training step at batch %lld%s%s", title && *title ? title : "",
           title && *title ? ": " : "", (long long)bu->batch_size, strcmp(bu->batch_unit, "samples") ? " " : "",
           strcmp(bu->batch_unit, "samples") ? bu->batch_unit : "");
  if (bu->eval_batch) {
    size_t used = strlen(line);
    snprintf(line + used, sizeof line - used, ", then an evaluation at batch %lld (peak %s)",
             (long long)bu->eval_batch, mb_fmt_bytes(a, sizeof a, bu->eval_peak));
  }
  mb_svg_text(svg, PX0, 28, "start", "font-size=\"17\" font-weight=\"bold\" fill=\"#222\"", line);
  const mb_train *tr = &pc->s->train;
  snprintf(line, sizeof line,
           "allocated peak %s in %s; device peak %s = reserved %s + CUDA context %s; %s, %s",
           mb_fmt_bytes(a, sizeof a, bu->allocated_peak), mb_phase_name(bu->peak_phase),
           mb_fmt_bytes(dp, sizeof dp, bu->device_peak), mb_fmt_bytes(r, sizeof r, bu->reserved_peak),
           mb_fmt_bytes(c, sizeof c, bu->context), mb_optim_get(tr->optimizer)->name, precision_name(tr->precision));
  mb_svg_text(svg, PX0, 48, "start", "font-size=\"12.5\" fill=\"#444\"", line);
}

/* Shaded runs of events of one phase, named above the plot on the first of three rows where
 * the name does not run into the previous one. */
static void phases(mb_svg *svg, const picture *pc) {
  const mb_plan *p = pc->p;
  double row_end[3] = {-1e9, -1e9, -1e9};
  mb_svg_start(svg, "g");
  mb_svg_raw(svg, "class=\"phases\"");
  mb_svg_open_block(svg);
  for (int64_t a = 0; a < pc->n;) {
    int ph = p->ev[a].phase;
    int64_t b = a;
    while (b < pc->n && p->ev[b].phase == ph) b++;
    double x0 = xof(pc, (double)a), x1 = xof(pc, (double)b);
    const char *name = mb_phase_name(ph);
    size_t ntint = sizeof phase_tint / sizeof phase_tint[0];
    mb_svg_rect(svg, x0, PY0, x1 - x0, PY1 - PY0);
    mb_svg_attr(svg, "fill", phase_tint[ph >= 0 && (size_t)ph < ntint ? (size_t)ph : ntint - 1]);
    mb_svg_raw(svg, "class=\"phase\"");
    mb_svg_attr(svg, "data-phase", name);
    mb_svg_attr_i64(svg, "data-first-event", a);
    mb_svg_attr_i64(svg, "data-events", b - a);
    mb_svg_empty(svg);
    double w = 6.8 * (double)strlen(name), cx = (x0 + x1) / 2;
    if (cx - w / 2 < PX0) cx = PX0 + w / 2;
    if (cx + w / 2 > PX1) cx = PX1 - w / 2;
    int row = 0;
    while (row < 2 && (cx - w / 2 < row_end[row] + 6 || (row == 0 && w > x1 - x0 + 4))) row++;
    row_end[row] = cx + w / 2;
    double ty = PY0 - 7 - 15.0 * row;
    if (row) { /* a leader from the band up to its name */
      mb_svg_line(svg, (x0 + x1) / 2, PY0, cx, ty + 3);
      mb_svg_raw(svg, "stroke=\"#888\" stroke-width=\"0.8\"");
      mb_svg_empty(svg);
    }
    mb_svg_text(svg, cx, ty, "middle", "class=\"phase-label\" fill=\"#333\"", name);
    a = b;
  }
  mb_svg_close(svg, "g");
}

static void axes(mb_svg *svg, const picture *pc) {
  char num[32], label[64];
  double step = pc->step;
  mb_svg_start(svg, "g");
  mb_svg_raw(svg, "class=\"y-axis\" fill=\"#333\"");
  mb_svg_open_block(svg);
  for (int k = 0;; k++) {
    double v = k * step;
    if (v * pc->unit > pc->ymax * (1 + 1e-9)) break;
    double y = yof(pc, v * pc->unit);
    mb_svg_line(svg, PX0, y, PX1, y);
    mb_svg_raw(svg, k ? "stroke=\"#000\" stroke-opacity=\"0.08\"" : "stroke=\"#555\"");
    mb_svg_empty(svg);
    snprintf(label, sizeof label, "%s %s", mb_svg_fmt_num(num, sizeof num, v), pc->unit_name);
    mb_svg_text_at(svg, PX0 - 8, y + 4);
    mb_svg_raw(svg, "text-anchor=\"end\" class=\"tick\"");
    mb_svg_attr_u64(svg, "data-bytes", (uint64_t)(v * pc->unit + 0.5));
    mb_svg_open(svg);
    mb_svg_content(svg, label);
    mb_svg_close(svg, "text");
  }
  char rot[64];
  snprintf(rot, sizeof rot, "rotate(-90 22 %s)", mb_svg_fmt_num(num, sizeof num, (PY0 + PY1) / 2));
  mb_svg_text_at(svg, 22, (PY0 + PY1) / 2);
  mb_svg_raw(svg, "text-anchor=\"middle\"");
  mb_svg_attr(svg, "transform", rot);
  mb_svg_open(svg);
  mb_svg_content(svg, "allocated bytes (memory_allocated)");
  mb_svg_close(svg, "text");
  mb_svg_close(svg, "g");

  mb_svg_start(svg, "g");
  mb_svg_raw(svg, "class=\"x-axis\" fill=\"#333\"");
  mb_svg_open_block(svg);
  mb_svg_line(svg, PX0, PY0, PX0, PY1);
  mb_svg_raw(svg, "stroke=\"#555\"");
  mb_svg_empty(svg);
  double xs = mb_svg_nice_step((double)pc->n, 8);
  if (xs < 1) xs = 1;
  for (int k = 0;; k++) {
    double i = k * xs;
    if (i > (double)pc->n) break;
    double x = xof(pc, i);
    mb_svg_line(svg, x, PY1, x, PY1 + 5);
    mb_svg_raw(svg, "stroke=\"#555\"");
    mb_svg_empty(svg);
    mb_svg_text(svg, x, PY1 + 19, "middle", "class=\"tick\"", mb_fmt_thousands(num, sizeof num, (uint64_t)i));
  }
  char line[160];
  snprintf(line, sizeof line, "events of the step in order (allocations and frees, %s in all)",
           mb_fmt_thousands(num, sizeof num, (uint64_t)pc->n));
  mb_svg_text(svg, (PX0 + PX1) / 2, PY1 + 42, "middle", "", line);
  mb_svg_close(svg, "g");
}

/* One filled area per category, from the baseline up to the sum of it and the categories
 * under it; drawn top category first, so each shows as its own band. */
static int layers(mb_svg *svg, const picture *pc, bool *present, mb_diag *d) {
  double *ys = malloc(((size_t)pc->n_smp + 1) * sizeof *ys);
  if (!ys) return mb_fail(d, MB_E_NOMEM, "out of memory");
  mb_svg_start(svg, "g");
  mb_svg_raw(svg, "class=\"layers\"");
  mb_svg_open_block(svg);
  for (int pos = MB_CAT_COUNT - 1; pos >= 0; pos--) {
    int c = stack_order[pos];
    present[c] = pc->cat_max[c] > 0;
    if (!present[c]) continue;
    mb_svg_start(svg, "path");
    mb_svg_raw(svg, "class=\"layer\" stroke=\"none\"");
    mb_svg_attr(svg, "data-category", mb_category_name(c));
    mb_svg_attr(svg, "fill", cat_color[c]);
    for (int64_t k = 0; k < pc->n_smp; k++) {
      uint64_t sum = 0;
      for (int q = 0; q <= pos; q++) sum += pc->smp[k].cat[stack_order[q]];
      ys[k] = yof(pc, (double)sum);
    }
    mb_svg_d_begin(svg);
    mb_svg_d_point(svg, 'M', PX0, PY1);
    double prev = PY1;
    for (int64_t k = 0; k < pc->n_smp; k++) {
      double x = xof(pc, (double)pc->smp[k].i), y = ys[k];
      /* a level that does not change needs no point (the ends of a flat run stay) */
      bool same_before = fabs(y - prev) < 0.05;
      if (pc->steps ? same_before : same_before && k + 1 < pc->n_smp && fabs(ys[k + 1] - y) < 0.05) continue;
      if (pc->steps) mb_svg_d_point(svg, 'L', x, prev);
      mb_svg_d_point(svg, 'L', x, y);
      prev = y;
    }
    mb_svg_d_point(svg, 'L', PX1, prev);
    mb_svg_d_point(svg, 'L', PX1, PY1);
    mb_svg_d_end(svg, 1);
    mb_svg_empty(svg);
  }
  mb_svg_close(svg, "g");
  free(ys);
  return MB_OK;
}

typedef struct hline {
  const char *cls, *style, *what;
  uint64_t bytes;
} hline;

/* The device peak, usable and device memory: drawn when within LINE_RANGE x the allocated peak,
 * named in a note above the plot otherwise. Labels at the right end, pushed apart. */
static void limit_lines(mb_svg *svg, const picture *pc, const hline *ln, int n) {
  char b[32], text[160], note[400] = "";
  double label_y[4];
  int order[4];
  for (int k = 0; k < n; k++) order[k] = k;
  for (int i = 0; i < n; i++) /* by value, highest first */
    for (int j = i + 1; j < n; j++)
      if (ln[order[j]].bytes > ln[order[i]].bytes) {
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
      }
  /* above its line, or below it when the label of the line above is in the way */
  double last = -1e9;
  for (int k = 0; k < n; k++) {
    double line_y = yof(pc, (double)ln[order[k]].bytes), y = line_y - 4;
    if (y - 10 < last + 2) y = line_y + 13;
    if (y - 10 < last + 2) y = last + 13;
    label_y[order[k]] = last = y;
  }
  mb_svg_start(svg, "g");
  mb_svg_raw(svg, "class=\"limits\"");
  mb_svg_open_block(svg);
  for (int k = 0; k < n; k++) {
    const hline *h = &ln[k];
    snprintf(text, sizeof text, "%s %s", h->what, mb_fmt_bytes(b, sizeof b, h->bytes));
    if ((double)h->bytes > pc->ymax) {
      size_t used = strlen(note);
      snprintf(note + used, sizeof note - used, "%s%s", used ? ", " : "", text);
      continue;
    }
    double y = yof(pc, (double)h->bytes);
    mb_svg_line(svg, PX0, y, PX1, y);
    mb_svg_attr(svg, "class", h->cls);
    mb_svg_raw(svg, h->style);
    mb_svg_attr_u64(svg, "data-bytes", h->bytes);
    mb_svg_empty(svg);
    mb_svg_text(svg, PX1 - 4, label_y[k], "end",
                "class=\"limit-label\" fill=\"#222\" stroke=\"#fff\" stroke-width=\"3\" paint-order=\"stroke\"", text);
  }
  if (*note) {
    char line[sizeof note + 32];
    snprintf(line, sizeof line, "above the scale: %s", note);
    mb_svg_text(svg, PX1, 66, "end", "class=\"off-scale\" fill=\"#555\" font-style=\"italic\"", line);
  }
  mb_svg_close(svg, "g");
}

/* The allocated peak: a marker on the top of the stack and what the step was doing there. */
static void peak_marker(mb_svg *svg, const picture *pc, double above) {
  if (pc->peak_i < 0) return;
  const mb_plan *p = pc->p;
  const mb_event_rec *e = &p->ev[pc->peak_i];
  const mb_slot *sl = &p->slots[e->slot];
  const mb_model *m = e->model ? p->teacher : p->model;
  const char *node = e->node >= 0 ? m->graph->nodes[e->node].name : NULL, *module = NULL;
  if (e->node >= 0) mb_model_node_origin(m, (size_t)e->node, &module, NULL, NULL);
  uint64_t bytes = pc->live[pc->peak_i];
  double x = xof(pc, (double)pc->peak_i), y = yof(pc, (double)bytes);
  char b[32], l1[160], l2[600], l3[1024];
  snprintf(l1, sizeof l1, "allocated peak %s (%s)", mb_fmt_bytes(b, sizeof b, bytes), mb_phase_name(e->phase));
  if (node) snprintf(l2, sizeof l2, "%snode %s", e->model ? "teacher " : "", node);
  else snprintf(l2, sizeof l2, "outside the graph's nodes");
  char what[600];
  snprintf(what, sizeof what, "%s %s, %s", e->alloc ? "allocating" : "freeing", sl->name ? sl->name : "a tensor",
           cat_noun[sl->category < MB_CAT_COUNT ? sl->category : MB_CAT_TEMPORARY]);
  if (module) snprintf(l3, sizeof l3, "module %s; %s", *module ? module : "(the model itself)", what);
  else snprintf(l3, sizeof l3, "%s", what);

  mb_svg_start(svg, "g");
  mb_svg_raw(svg, "class=\"peak\"");
  mb_svg_attr_u64(svg, "data-bytes", bytes);
  mb_svg_attr_i64(svg, "data-event", pc->peak_i);
  mb_svg_attr(svg, "data-phase", mb_phase_name(e->phase));
  mb_svg_attr(svg, "data-node", node ? node : "");
  mb_svg_attr(svg, "data-module", module ? module : "");
  mb_svg_attr(svg, "data-tensor", sl->name ? sl->name : "");
  mb_svg_open_block(svg);
  mb_svg_line(svg, x, y, x, PY1);
  mb_svg_raw(svg, "stroke=\"#222\" stroke-width=\"1\" stroke-dasharray=\"2 3\"");
  mb_svg_empty(svg);
  mb_svg_circle(svg, x, y, 5);
  mb_svg_raw(svg, "class=\"peak-marker\" fill=\"#fff\" stroke=\"#222\" stroke-width=\"2\"");
  mb_svg_empty(svg);
  /* the label over the marker, where no layer can be (it is the highest point of the stack),
   * to the side with room; beside it when the peak is at the top of the plot */
  bool left = x > PX0 + 0.62 * (PX1 - PX0);
  double tx = left ? x - 8 : x + 8, ty = y - 42; /* ty: the first line's baseline */
  if (above > 0 && above - 46 > PY0) ty = above - 46; /* over the limit lines too: no text crosses them */
  if (ty - 12 < PY0) {
    tx = left ? x - 12 : x + 12;
    ty = y + 22;
  }
  if (ty + 30 > PY1) ty = PY1 - 34;
  if (ty + 36 < y - 8) { /* a leader from the marker up to its label */
    mb_svg_line(svg, x, y - 6, x, ty + 36);
    mb_svg_raw(svg, "stroke=\"#222\" stroke-width=\"0.8\"");
    mb_svg_empty(svg);
  }
  const char *anchor = left ? "end" : "start";
  const char *halo = "fill=\"#111\" stroke=\"#fff\" stroke-width=\"3.5\" paint-order=\"stroke\"";
  mb_svg_text(svg, tx, ty, anchor, "class=\"peak-label\" font-weight=\"bold\" fill=\"#111\" stroke=\"#fff\" "
                                    "stroke-width=\"3.5\" paint-order=\"stroke\"", l1);
  mb_svg_text(svg, tx, ty + 15, anchor, halo, l2);
  mb_svg_text(svg, tx, ty + 30, anchor, halo, l3);
  mb_svg_close(svg, "g");
}

static void legend(mb_svg *svg, const picture *pc, const bool *present, const hline *ln, int n_lines) {
  char b[32], text[96];
  double y = PY0;
  mb_svg_start(svg, "g");
  mb_svg_raw(svg, "class=\"legend\"");
  mb_svg_open_block(svg);
  mb_svg_text(svg, LEGEND_X, y - 8, "start", "font-weight=\"bold\" fill=\"#222\"", "at the allocated peak");
  for (int pos = MB_CAT_COUNT - 1; pos >= 0; pos--) {
    int c = stack_order[pos];
    if (!present[c]) continue;
    mb_svg_rect(svg, LEGEND_X, y + 2, 14, 14);
    mb_svg_attr(svg, "fill", cat_color[c]);
    mb_svg_empty(svg);
    mb_svg_text(svg, LEGEND_X + 20, y + 13, "start", "fill=\"#222\"", cat_label[c]);
    snprintf(text, sizeof text, "%s", mb_fmt_bytes(b, sizeof b, pc->bu->at_peak[c]));
    mb_svg_text(svg, PIC_W - 12, y + 13, "end", "fill=\"#555\"", text);
    y += 21;
  }
  y += 10;
  for (int k = 0; k < n_lines; k++) {
    mb_svg_line(svg, LEGEND_X, y + 9, LEGEND_X + 14, y + 9);
    mb_svg_raw(svg, ln[k].style);
    mb_svg_empty(svg);
    mb_svg_text(svg, LEGEND_X + 20, y + 13, "start", "fill=\"#222\"", ln[k].what);
    y += 21;
  }
  mb_svg_text(svg, LEGEND_X, y + 14, "start", "fill=\"#666\" font-size=\"11\"", "shaded: the phases of the step");
  mb_svg_close(svg, "g");
}

static int draw(picture *pc, const char *title, char **out, mb_diag *d) {
  if (take_samples(pc, d) != MB_OK) return d->status;
  const mb_budget *bu = pc->bu;
  hline ln[3];
  int n_lines = 0;
  ln[n_lines++] = (hline){"device-peak", "stroke=\"#222\" stroke-width=\"1.5\" stroke-dasharray=\"1 3\"",
                          "device peak", bu->device_peak};
  if (bu->device_memory) {
    ln[n_lines++] = (hline){"usable", "stroke=\"#c0392b\" stroke-width=\"1.8\" stroke-dasharray=\"7 4\"",
                            "usable", bu->usable_memory};
    ln[n_lines++] = (hline){"device-memory", "stroke=\"#555\" stroke-width=\"1.8\"", "device memory",
                            bu->device_memory};
  }
  double top = (double)(bu->eval_peak > bu->allocated_peak ? bu->eval_peak : bu->allocated_peak);
  for (int k = 0; k < n_lines; k++)
    if ((double)ln[k].bytes <= LINE_RANGE * (double)bu->allocated_peak && (double)ln[k].bytes > top)
      top = (double)ln[k].bytes;
  if (top < 1) top = 1;
  scale(pc, top);

  mb_svg svg;
  mb_svg_begin_picture(&svg, PIC_W, PIC_H, "membudget: live memory over one training step", "timeline");
  mb_svg_attr_i64(&svg, "data-batch", bu->batch_size);
  mb_svg_attr_i64(&svg, "data-events", pc->n);
  mb_svg_attr_u64(&svg, "data-allocated-peak", bu->allocated_peak);
  mb_svg_attr_u64(&svg, "data-device-peak", bu->device_peak);
  mb_svg_attr_num(&svg, "data-plot-top", PY0);
  mb_svg_attr_num(&svg, "data-plot-bottom", PY1);
  mb_svg_attr_u64(&svg, "data-plot-max-bytes", (uint64_t)(pc->ymax + 0.5));
  mb_svg_open_block(&svg);
  titles(&svg, pc, title);
  bool present[MB_CAT_COUNT] = {false};
  phases(&svg, pc);
  axes(&svg, pc);
  if (layers(&svg, pc, present, d) != MB_OK) {
    mb_svg_discard(&svg);
    return d->status;
  }
  limit_lines(&svg, pc, ln, n_lines);
  /* the highest limit line drawn over the peak, if its label fits above it */
  double above = 0;
  for (int k = 0; k < n_lines; k++) {
    double ly = yof(pc, (double)ln[k].bytes);
    if ((double)ln[k].bytes <= pc->ymax && ln[k].bytes >= bu->allocated_peak && (above == 0 || ly - 14 < above))
      above = ly - 14; /* its label sits above it */
  }
  peak_marker(&svg, pc, above);
  legend(&svg, pc, present, ln, n_lines);
  mb_svg_close(&svg, "g");
  *out = mb_svg_finish(&svg);
  if (!*out) return mb_fail(d, MB_E_NOMEM, "out of memory");
  return MB_OK;
}

MB_API int mb_timeline_svg(const mb_model *m, mb_setup *s, int64_t batch, const char *title, char **out) {
  if (!s || !out) return MB_E_INVALID_ARG;
  *out = NULL;
  s->errmsg[0] = '\0';
  if (!m || !m->graph) {
    snprintf(s->errmsg, sizeof s->errmsg, "mb_timeline_svg: no model");
    return MB_E_INVALID_ARG;
  }
  mb_diag d;
  mb_diag_init(&d);
  int64_t saved = s->batch;
  if (batch > 0) s->batch = batch; /* as an estimate at that batch plans and runs it */
  mb_plan *p = NULL;
  mb_budget bu;
  uint64_t *bytes = NULL, *live = NULL;
  picture pc = {0};
  if (mb_setup_plan_build(m, s, &p, &d) == MB_OK && mb_estimate_plan(p, s, &bu, &d) == MB_OK) {
    bytes = malloc(((size_t)p->n_ev + 1) * sizeof *bytes);
    live = malloc(((size_t)p->n_ev + 1) * sizeof *live);
    mb_run r;
    if (!bytes || !live) mb_fail(&d, MB_E_NOMEM, "out of memory");
    else if (mb_setup_plan_run(p, s, bu.batch_size, &r, bytes, live, &d) == MB_OK) {
      pc = (picture){.p = p, .s = s, .bu = &bu, .bytes = bytes, .live = live, .n = p->n_ev};
      draw(&pc, title, out, &d);
    }
  }
  s->batch = saved;
  free(pc.smp);
  free(bytes);
  free(live);
  mb_plan_free(p);
  if (d.status != MB_OK) snprintf(s->errmsg, sizeof s->errmsg, "%s", d.msg);
  return d.status;
}
