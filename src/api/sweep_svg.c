/* A sweep drawn as SVG (mb_sweep_svg): the device peak, the reserved and the allocated peak
 * against the swept value, the usable and the device memory as lines, the solved batch marked.
 * x is logarithmic (base 2) when the values span 8x or more; y is linear from 0, or logarithmic
 * when the device peaks span more than 16x (a sweep from batch 1 to 1024). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/sweep.h"
#include "util/format.h"
#include "util/svg.h"

#define PIC_W 1120.0
#define PIC_H 640.0
#define PX0 100.0
#define PX1 820.0
#define PY0 84.0
#define PY1 560.0
#define LEGEND_X 880.0
#define LINE_RANGE 4.0 /* as the timeline: a limit further above the highest point is named, not drawn */

typedef struct axes {
  const mb_sweep *w;
  bool xlog, ylog;
  bool batches;        /* a dim sweep that solved the batch at each value: batch on a right axis */
  double bmax;         /* the right axis's top, in batches */
  double xmin, xmax;   /* values (log2 of them when xlog) at the plot's ends */
  double ymin, ymax;   /* bytes (log2 of them when ylog) */
} axes;

static double xof(const axes *a, double v) {
  double t = a->xlog ? log2(v) : v;
  if (a->xmax <= a->xmin) return (PX0 + PX1) / 2;
  return PX0 + (PX1 - PX0) * (t - a->xmin) / (a->xmax - a->xmin);
}

static double yof(const axes *a, double bytes) {
  double t = a->ylog ? log2(bytes > 1 ? bytes : 1) : bytes;
  return PY1 - (PY1 - PY0) * (t - a->ymin) / (a->ymax - a->ymin);
}

/* "256 MiB", "1.5 GiB": a tick label in the unit that suits `scale` bytes */
static void tick_label(char *buf, size_t size, double bytes, double scale) {
  double unit;
  const char *name = mb_svg_byte_unit(scale, &unit);
  char num[32];
  snprintf(buf, size, "%s %s", mb_svg_fmt_num(num, sizeof num, bytes / unit), name);
}

/* a tick at bytes; linear axes label every tick in the unit of their top */
static void y_tick(mb_svg *svg, const axes *a, double bytes, bool base) {
  char label[48];
  double y = yof(a, bytes);
  mb_svg_line(svg, PX0, y, PX1, y);
  mb_svg_raw(svg, base ? "stroke=\"#555\"" : "stroke=\"#000\" stroke-opacity=\"0.08\"");
  mb_svg_empty(svg);
  tick_label(label, sizeof label, bytes, a->ylog ? bytes : a->ymax);
  mb_svg_text_at(svg, PX0 - 8, y + 4);
  mb_svg_raw(svg, "text-anchor=\"end\" class=\"tick\"");
  mb_svg_attr_u64(svg, "data-bytes", (uint64_t)(bytes + 0.5));
  mb_svg_open(svg);
  mb_svg_content(svg, label);
  mb_svg_close(svg, "text");
}

static void draw_axes(mb_svg *svg, const axes *a) {
  const mb_sweep *w = a->w;
  char num[32], text[160];
  mb_svg_start(svg, "g");
  mb_svg_raw(svg, "class=\"y-axis\" fill=\"#333\"");
  mb_svg_open_block(svg);
  if (a->ylog) { /* powers of two, at most about eight of them */
    int lo = (int)ceil(a->ymin), hi = (int)floor(a->ymax), every = (hi - lo) / 8 + 1;
    for (int e = lo; e <= hi; e++)
      if ((e - lo) % every == 0) y_tick(svg, a, ldexp(1.0, e), e == lo);
  } else {
    double unit;
    mb_svg_byte_unit(a->ymax, &unit);
    double step = mb_svg_nice_step(a->ymax / unit, 6) * unit;
    for (int k = 0; k * step <= a->ymax * (1 + 1e-9); k++) y_tick(svg, a, k * step, k == 0);
  }
  mb_svg_text_at(svg, 24, (PY0 + PY1) / 2);
  snprintf(text, sizeof text, "rotate(-90 24 %s)", mb_svg_fmt_num(num, sizeof num, (PY0 + PY1) / 2));
  mb_svg_raw(svg, "text-anchor=\"middle\"");
  mb_svg_attr(svg, "transform", text);
  mb_svg_open(svg);
  mb_svg_content(svg, a->ylog ? "bytes (log scale)" : "bytes");
  mb_svg_close(svg, "text");
  mb_svg_close(svg, "g");

  mb_svg_start(svg, "g");
  mb_svg_raw(svg, "class=\"x-axis\" fill=\"#333\"");
  mb_svg_open_block(svg);
  mb_svg_line(svg, PX0, PY0, PX0, PY1);
  mb_svg_raw(svg, "stroke=\"#555\"");
  mb_svg_empty(svg);
  /* the swept values themselves, thinned to those whose labels do not touch; the solved batch's
   * label first */
  double *left = malloc((w->n + 1) * sizeof *left), *right = malloc((w->n + 1) * sizeof *right);
  bool *shown = calloc(w->n + 1, sizeof *shown);
  if (left && right && shown) {
    for (size_t i = 0; i < w->n; i++) {
      double x = xof(a, (double)w->values[i]);
      double half = 3.6 * (double)strlen(mb_fmt_thousands(num, sizeof num, (uint64_t)w->values[i]));
      left[i] = x - half;
      right[i] = x + half;
      mb_svg_line(svg, x, PY1, x, PY1 + 5);
      mb_svg_raw(svg, "stroke=\"#555\"");
      mb_svg_empty(svg);
    }
    for (int pass = 0; pass < 2; pass++)
      for (size_t i = 0; i < w->n; i++) {
        bool solved = w->solved > 0 && w->values[i] == w->solved;
        if (solved != (pass == 0)) continue;
        bool clear = true;
        for (size_t j = 0; j < w->n && clear; j++)
          clear = !shown[j] || right[j] + 6 < left[i] || right[i] + 6 < left[j];
        if (!clear) continue;
        shown[i] = true;
        mb_svg_text_at(svg, (left[i] + right[i]) / 2, PY1 + 19);
        mb_svg_raw(svg, solved ? "text-anchor=\"middle\" class=\"tick\" fill=\"#c0392b\"" : "text-anchor=\"middle\" class=\"tick\"");
        mb_svg_attr_i64(svg, "data-value", w->values[i]);
        mb_svg_open(svg);
        mb_svg_content(svg, mb_fmt_thousands(num, sizeof num, (uint64_t)w->values[i]));
        mb_svg_close(svg, "text");
      }
  }
  free(left);
  free(right);
  free(shown);
  if (w->dim) snprintf(text, sizeof text, "%s%s", w->dim, a->xlog ? " (log scale)" : "");
  else snprintf(text, sizeof text, "batch size (%s)%s", w->unit, a->xlog ? ", log scale" : "");
  mb_svg_text(svg, (PX0 + PX1) / 2, PY1 + 44, "middle", "", text);
  mb_svg_close(svg, "g");
}

static double yof_batch(const axes *a, double batch) { return PY1 - (PY1 - PY0) * batch / a->bmax; }

#define BATCH_COLOR "#e8762b"

/* The largest batch that fits at each value, on an axis of its own at the right. */
static void draw_batches(mb_svg *svg, const axes *a) {
  const mb_sweep *w = a->w;
  char num[32], text[96];
  double step = mb_svg_nice_step(a->bmax, 6);
  mb_svg_start(svg, "g");
  mb_svg_raw(svg, "class=\"batch-axis\" fill=\"" BATCH_COLOR "\"");
  mb_svg_open_block(svg);
  mb_svg_line(svg, PX1, PY0, PX1, PY1);
  mb_svg_raw(svg, "stroke=\"" BATCH_COLOR "\"");
  mb_svg_empty(svg);
  for (int k = 0; k * step <= a->bmax * (1 + 1e-9); k++) {
    double y = yof_batch(a, k * step);
    mb_svg_line(svg, PX1, y, PX1 + 5, y);
    mb_svg_raw(svg, "stroke=\"" BATCH_COLOR "\"");
    mb_svg_empty(svg);
    mb_svg_text(svg, PX1 + 8, y + 4, "start", "class=\"batch-tick\"", mb_fmt_thousands(num, sizeof num, (uint64_t)(k * step)));
  }
  mb_svg_start(svg, "path");
  mb_svg_raw(svg, "class=\"series\" data-series=\"batch_size\" fill=\"none\" stroke=\"" BATCH_COLOR "\" stroke-width=\"2\" "
                  "stroke-dasharray=\"5 3\"");
  mb_svg_d_begin(svg);
  for (size_t i = 0; i < w->n; i++)
    mb_svg_d_point(svg, i ? 'L' : 'M', xof(a, (double)w->values[i]), yof_batch(a, (double)w->budgets[i].batch_size));
  mb_svg_d_end(svg, 0);
  mb_svg_empty(svg);
  for (size_t i = 0; i < w->n; i++) {
    double x = xof(a, (double)w->values[i]), y = yof_batch(a, (double)w->budgets[i].batch_size);
    mb_svg_rect(svg, x - 4, y - 4, 8, 8);
    mb_svg_raw(svg, "class=\"batch-point\" stroke=\"#fff\"");
    mb_svg_attr_i64(svg, "data-value", w->values[i]);
    mb_svg_attr_i64(svg, "data-batch", w->budgets[i].batch_size);
    mb_svg_empty(svg);
    snprintf(text, sizeof text, "%lld", (long long)w->budgets[i].batch_size);
    mb_svg_text(svg, x, y - 9, "middle", "font-size=\"11\" stroke=\"#fff\" stroke-width=\"3\" paint-order=\"stroke\"", text);
  }
  mb_svg_close(svg, "g");
}

static uint64_t series_value(const mb_budget *b, int k) {
  return k == 0 ? b->device_peak : k == 1 ? b->reserved_peak : b->allocated_peak;
}

static const char *const series_name[3] = {"device_peak", "reserved_peak", "allocated_peak"};
static const char *const series_label[3] = {"device peak (reserved + context)", "reserved peak", "allocated peak"};
static const char *const series_style[3] = {"stroke=\"#222\" stroke-width=\"2.4\"", "stroke=\"#4e79a7\" stroke-width=\"1.6\"",
                                            "stroke=\"#59a14f\" stroke-width=\"1.6\""};

static void draw_series(mb_svg *svg, const axes *a) {
  const mb_sweep *w = a->w;
  char b[32], text[96];
  for (int k = 2; k >= 0; k--) {
    mb_svg_start(svg, "path");
    mb_svg_raw(svg, "class=\"series\" fill=\"none\" stroke-linejoin=\"round\"");
    mb_svg_attr(svg, "data-series", series_name[k]);
    mb_svg_raw(svg, series_style[k]);
    mb_svg_d_begin(svg);
    for (size_t i = 0; i < w->n; i++)
      mb_svg_d_point(svg, i ? 'L' : 'M', xof(a, (double)w->values[i]), yof(a, (double)series_value(&w->budgets[i], k)));
    mb_svg_d_end(svg, 0);
    mb_svg_empty(svg);
  }
  /* the device peak's points: filled when they fit, red when they do not */
  for (size_t i = 0; i < w->n; i++) {
    const mb_budget *bu = &w->budgets[i];
    double x = xof(a, (double)w->values[i]), y = yof(a, (double)bu->device_peak);
    for (int k = 2; k >= 1; k--) {
      mb_svg_circle(svg, x, yof(a, (double)series_value(bu, k)), 2.5);
      mb_svg_raw(svg, k == 1 ? "fill=\"#4e79a7\"" : "fill=\"#59a14f\"");
      mb_svg_empty(svg);
    }
    mb_svg_circle(svg, x, y, 4.5);
    mb_svg_raw(svg, bu->fits == 0 ? "class=\"point\" fill=\"#c0392b\" stroke=\"#fff\"" : "class=\"point\" fill=\"#222\" stroke=\"#fff\"");
    mb_svg_attr_i64(svg, "data-value", w->values[i]);
    mb_svg_attr_i64(svg, "data-batch", bu->batch_size);
    mb_svg_attr_u64(svg, "data-bytes", bu->device_peak);
    mb_svg_attr(svg, "data-fits", bu->fits < 0 ? "unknown" : bu->fits ? "yes" : "no");
    mb_svg_open(svg);
    snprintf(text, sizeof text, "%s %lld: device peak %s, batch %lld", w->dim ? w->dim : "batch",
             (long long)w->values[i], mb_fmt_bytes(b, sizeof b, bu->device_peak), (long long)bu->batch_size);
    mb_svg_start(svg, "title");
    mb_svg_open(svg);
    mb_svg_content(svg, text);
    mb_svg_close(svg, "title");
    mb_svg_close(svg, "circle");
  }
}

typedef struct hline {
  const char *cls, *style, *what;
  uint64_t bytes;
} hline;

/* Where a limit line's label goes: between two neighbouring points at least 60 units apart,
 * the pair whose device-peak curve passes farthest from the line there (no marker, no curve in
 * the way); at the left end with fewer points. */
static double label_x(const axes *a, double line_y) {
  const mb_sweep *w = a->w;
  double best = PX0 + 6, far = -1;
  for (size_t i = 0; i + 1 < w->n; i++) {
    double x0 = xof(a, (double)w->values[i]), x1 = xof(a, (double)w->values[i + 1]);
    if (x1 - x0 < 60) continue;
    double curve = (yof(a, (double)w->budgets[i].device_peak) + yof(a, (double)w->budgets[i + 1].device_peak)) / 2;
    double gap = fabs(curve - line_y);
    if (gap >= far) {
      far = gap;
      best = (x0 + x1) / 2;
    }
  }
  return best;
}

static void draw_limits(mb_svg *svg, const axes *a, const hline *ln, int n) {
  char b[32], text[160], note[300] = "";
  double last = -1e9;
  int order[2] = {0, 1};
  if (n == 2 && ln[1].bytes > ln[0].bytes) order[0] = 1, order[1] = 0;
  mb_svg_start(svg, "g");
  mb_svg_raw(svg, "class=\"limits\"");
  mb_svg_open_block(svg);
  for (int j = 0; j < n; j++) {
    const hline *h = &ln[order[j]];
    snprintf(text, sizeof text, "%s %s", h->what, mb_fmt_bytes(b, sizeof b, h->bytes));
    double t = a->ylog ? log2((double)(h->bytes ? h->bytes : 1)) : (double)h->bytes;
    if (t > a->ymax || t < a->ymin) {
      size_t used = strlen(note);
      snprintf(note + used, sizeof note - used, "%s%s", used ? ", " : "", text);
      continue;
    }
    double y = yof(a, (double)h->bytes), ty = y - 5;
    if (ty - 10 < last + 2) ty = y + 14;
    last = ty;
    mb_svg_line(svg, PX0, y, PX1, y);
    mb_svg_attr(svg, "class", h->cls);
    mb_svg_raw(svg, h->style);
    mb_svg_attr_u64(svg, "data-bytes", h->bytes);
    mb_svg_empty(svg);
    double lx = label_x(a, y);
    const char *anchor = lx > PX0 + 6 ? "middle" : "start";
    mb_svg_text(svg, lx, ty, anchor, "fill=\"#222\" stroke=\"#fff\" stroke-width=\"3\" paint-order=\"stroke\"", text);
  }
  if (*note) {
    char line[sizeof note + 32];
    snprintf(line, sizeof line, "above the scale: %s", note);
    mb_svg_text(svg, PX1, PY0 - 10, "end", "class=\"off-scale\" fill=\"#555\" font-style=\"italic\"", line);
  }
  mb_svg_close(svg, "g");
}

static void draw_solved(mb_svg *svg, const axes *a) {
  const mb_sweep *w = a->w;
  if (w->solved <= 0) return;
  char text[96];
  double x = xof(a, (double)w->solved);
  mb_svg_start(svg, "g");
  mb_svg_raw(svg, "class=\"solved\"");
  mb_svg_attr_i64(svg, "data-value", w->solved);
  mb_svg_open_block(svg);
  mb_svg_line(svg, x, PY0, x, PY1);
  mb_svg_raw(svg, "stroke=\"#c0392b\" stroke-width=\"1.2\" stroke-dasharray=\"3 3\"");
  mb_svg_empty(svg);
  snprintf(text, sizeof text, "solved: batch %lld", (long long)w->solved);
  bool left = x > PX0 + 0.7 * (PX1 - PX0);
  mb_svg_text(svg, left ? x - 6 : x + 6, PY0 + 14, left ? "end" : "start",
              "fill=\"#c0392b\" font-weight=\"bold\" stroke=\"#fff\" stroke-width=\"3\" paint-order=\"stroke\"", text);
  mb_svg_close(svg, "g");
}

static void draw_legend(mb_svg *svg, const axes *a, const hline *ln, int n_lines) {
  double y = PY0;
  mb_svg_start(svg, "g");
  mb_svg_raw(svg, "class=\"legend\"");
  mb_svg_open_block(svg);
  for (int k = 0; k < 3; k++) {
    mb_svg_line(svg, LEGEND_X, y + 8, LEGEND_X + 22, y + 8);
    mb_svg_raw(svg, series_style[k]);
    mb_svg_empty(svg);
    mb_svg_text(svg, LEGEND_X + 28, y + 12, "start", "fill=\"#222\"", series_label[k]);
    y += 21;
  }
  for (int k = 0; k < n_lines; k++) {
    mb_svg_line(svg, LEGEND_X, y + 8, LEGEND_X + 22, y + 8);
    mb_svg_raw(svg, ln[k].style);
    mb_svg_empty(svg);
    mb_svg_text(svg, LEGEND_X + 28, y + 12, "start", "fill=\"#222\"", ln[k].what);
    y += 21;
  }
  mb_svg_circle(svg, LEGEND_X + 11, y + 8, 4.5);
  mb_svg_raw(svg, "fill=\"#c0392b\"");
  mb_svg_empty(svg);
  mb_svg_text(svg, LEGEND_X + 28, y + 12, "start", "fill=\"#222\"", "does not fit");
  if (a->batches) {
    y += 21;
    mb_svg_line(svg, LEGEND_X, y + 8, LEGEND_X + 22, y + 8);
    mb_svg_raw(svg, "stroke=\"" BATCH_COLOR "\" stroke-width=\"2\" stroke-dasharray=\"5 3\"");
    mb_svg_empty(svg);
    mb_svg_text(svg, LEGEND_X + 28, y + 12, "start", "fill=\"#222\"", "largest batch that fits");
    mb_svg_text(svg, LEGEND_X + 28, y + 27, "start", "fill=\"#666\" font-size=\"11\"", "(right axis)");
  }
  mb_svg_close(svg, "g");
}

MB_API int mb_sweep_svg(const mb_sweep *w, const char *title, char **out) {
  if (!w || !out) return MB_E_INVALID_ARG;
  *out = NULL;
  axes a = {.w = w};
  hline ln[2];
  int n_lines = 0;
  if (w->device_memory) {
    ln[n_lines++] = (hline){"usable", "stroke=\"#c0392b\" stroke-width=\"1.8\" stroke-dasharray=\"7 4\"", "usable",
                            w->usable_memory};
    ln[n_lines++] = (hline){"device-memory", "stroke=\"#555\" stroke-width=\"1.8\"", "device memory", w->device_memory};
  }
  uint64_t lo = UINT64_MAX, hi = 0;
  for (size_t i = 0; i < w->n; i++) {
    uint64_t v = w->budgets[i].device_peak;
    if (v > hi) hi = v;
    if (w->budgets[i].allocated_peak < lo) lo = w->budgets[i].allocated_peak;
  }
  if (!w->n) lo = hi = 1;
  if (lo < 1) lo = 1;
  double top = (double)hi;
  for (int k = 0; k < n_lines; k++)
    if ((double)ln[k].bytes <= LINE_RANGE * (double)hi && (double)ln[k].bytes > top) top = (double)ln[k].bytes;
  if (top < 1) top = 1;
  a.ylog = (double)hi > 16.0 * (double)lo;
  if (a.ylog) {
    a.ymin = floor(log2((double)lo));
    a.ymax = ceil(log2(top * 1.05));
  } else {
    double unit;
    mb_svg_byte_unit(top, &unit);
    double step = mb_svg_nice_step(top / unit, 6) * unit;
    a.ymin = 0;
    a.ymax = ceil(top * 1.04 / step) * step;
  }
  a.batches = w->dim && w->solved < 0;
  if (a.batches) {
    double most = 1;
    for (size_t i = 0; i < w->n; i++)
      if ((double)w->budgets[i].batch_size > most) most = (double)w->budgets[i].batch_size;
    double step = mb_svg_nice_step(most, 6);
    a.bmax = ceil(most * 1.08 / step) * step;
  }
  double v0 = w->n ? (double)w->values[0] : 1, v1 = w->n ? (double)w->values[w->n - 1] : 1;
  a.xlog = v1 >= 8 * v0;
  a.xmin = a.xlog ? log2(v0) : v0;
  a.xmax = a.xlog ? log2(v1) : v1;
  double pad = (a.xmax - a.xmin) * 0.03; /* keep the end points off the axes */
  a.xmin -= pad;
  a.xmax += pad;

  mb_svg svg;
  mb_svg_begin_picture(&svg, PIC_W, PIC_H, "membudget: a sweep", "sweep");
  mb_svg_attr(&svg, "data-dim", w->dim ? w->dim : "");
  mb_svg_attr(&svg, "data-y-scale", a.ylog ? "log2" : "linear");
  mb_svg_attr(&svg, "data-x-scale", a.xlog ? "log2" : "linear");
  mb_svg_open_block(&svg);
  char line[400], batch[64] = "";
  bool same_batch = w->n > 0;
  for (size_t i = 1; i < w->n; i++) same_batch &= w->budgets[i].batch_size == w->budgets[0].batch_size;
  if (w->dim && same_batch) snprintf(batch, sizeof batch, " at batch %lld", (long long)w->budgets[0].batch_size);
  else if (w->dim) snprintf(batch, sizeof batch, ", each at the largest batch that fits");
  snprintf(line, sizeof line, "%s%speak memory against %s%s", title && *title ? title : "", title && *title ? ": " : "",
           w->dim ? w->dim : "the batch size", batch);
  mb_svg_text(&svg, PX0, 30, "start", "font-size=\"17\" font-weight=\"bold\" fill=\"#222\"", line);
  if (w->device_memory) {
    char b1[32], b2[32];
    snprintf(line, sizeof line, "device memory %s, usable %s; a point fits when its device peak is at most usable",
             mb_fmt_bytes(b1, sizeof b1, w->device_memory), mb_fmt_bytes(b2, sizeof b2, w->usable_memory));
    mb_svg_text(&svg, PX0, 52, "start", "font-size=\"12.5\" fill=\"#444\"", line);
  }
  draw_axes(&svg, &a);
  draw_limits(&svg, &a, ln, n_lines);
  draw_solved(&svg, &a);
  draw_series(&svg, &a);
  if (a.batches) draw_batches(&svg, &a);
  draw_legend(&svg, &a, ln, n_lines);
  mb_svg_close(&svg, "g");
  *out = mb_svg_finish(&svg);
  return *out ? MB_OK : MB_E_NOMEM;
}
