#include "util/svg.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Coordinates far outside any picture are clamped: the document stays valid and bounded. */
#define SVG_NUM_LIMIT 1e9

/* v with at most `decimals` (1 or 2) decimals, trailing zeros dropped */
static void num(mb_strbuf *sb, double v, int decimals) {
  long long scale = decimals == 1 ? 10 : 100;
  if (!(v == v)) v = 0; /* NaN */
  if (v > SVG_NUM_LIMIT) v = SVG_NUM_LIMIT;
  if (v < -SVG_NUM_LIMIT) v = -SVG_NUM_LIMIT;
  long long units = (long long)(v * (double)scale + (v < 0 ? -0.5 : 0.5));
  const char *sign = units < 0 ? "-" : "";
  if (units < 0) units = -units;
  long long whole = units / scale, frac = units % scale;
  if (!frac) mb_sb_printf(sb, "%s%lld", sign, whole);
  else if (scale == 10) mb_sb_printf(sb, "%s%lld.%lld", sign, whole, frac);
  else if (frac % 10 == 0) mb_sb_printf(sb, "%s%lld.%lld", sign, whole, frac / 10);
  else mb_sb_printf(sb, "%s%lld.%02lld", sign, whole, frac);
}

void mb_svg_num(mb_strbuf *sb, double v) { num(sb, v, 2); }

char *mb_svg_fmt_num(char *buf, size_t size, double v) {
  mb_strbuf sb;
  mb_sb_init(&sb);
  mb_svg_num(&sb, v);
  snprintf(buf, size, "%s", sb.failed || !sb.data ? "0" : sb.data);
  mb_sb_free(&sb);
  return buf;
}

/* The length of a valid UTF-8 sequence at p (n bytes left), or 0 if it is not one. */
static size_t utf8_len(const unsigned char *p, size_t n) {
  unsigned c = p[0];
  size_t len;
  unsigned min;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) len = 2, min = 0x80;
  else if (c >= 0xE0 && c <= 0xEF) len = 3, min = 0x800;
  else if (c >= 0xF0 && c <= 0xF4) len = 4, min = 0x10000;
  else return 0;
  if (n < len) return 0;
  unsigned cp = c & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
  for (size_t i = 1; i < len; i++) {
    if ((p[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (p[i] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  if (cp == 0xFFFE || cp == 0xFFFF) return 0; /* not XML characters */
  return len;
}

static void escaped(mb_strbuf *sb, const char *text) {
  const unsigned char *p = (const unsigned char *)(text ? text : "");
  size_t n = strlen((const char *)p);
  for (size_t i = 0; i < n;) {
    unsigned char c = p[i];
    switch (c) {
      case '&': mb_sb_puts(sb, "&amp;"); i++; continue;
      case '<': mb_sb_puts(sb, "&lt;"); i++; continue;
      case '>': mb_sb_puts(sb, "&gt;"); i++; continue;
      case '"': mb_sb_puts(sb, "&quot;"); i++; continue;
      case '\'': mb_sb_puts(sb, "&apos;"); i++; continue;
      default: break;
    }
    if (c < 0x20) { /* XML 1.0 has no control characters but tab and line ends: a space */
      mb_sb_putc(sb, ' ');
      i++;
      continue;
    }
    size_t len = utf8_len(p + i, n - i);
    if (!len) {
      mb_sb_puts(sb, "\xEF\xBF\xBD"); /* U+FFFD for a byte that starts no valid sequence */
      i++;
      continue;
    }
    mb_sb_append(sb, p + i, len);
    i += len;
  }
}

void mb_svg_begin(mb_svg *s, double width, double height) {
  mb_sb_init(&s->sb);
  mb_sb_puts(&s->sb, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\"");
  mb_svg_attr_num(s, "width", width);
  mb_svg_attr_num(s, "height", height);
  mb_sb_puts(&s->sb, " viewBox=\"0 0 ");
  mb_svg_num(&s->sb, width);
  mb_sb_putc(&s->sb, ' ');
  mb_svg_num(&s->sb, height);
  mb_sb_puts(&s->sb, "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n");
}

void mb_svg_begin_picture(mb_svg *s, double width, double height, const char *title, const char *group_class) {
  mb_svg_begin(s, width, height);
  mb_svg_start(s, "title");
  mb_svg_open(s);
  mb_svg_content(s, title);
  mb_svg_close(s, "title");
  mb_svg_rect(s, 0, 0, width, height);
  mb_svg_raw(s, "fill=\"#fff\"");
  mb_svg_empty(s);
  mb_svg_start(s, "g");
  mb_svg_attr(s, "class", group_class);
}

char *mb_svg_finish(mb_svg *s) {
  mb_sb_puts(&s->sb, "</svg>\n");
  return mb_sb_detach(&s->sb); /* NULL (and freed) after a failed allocation */
}

void mb_svg_discard(mb_svg *s) { mb_sb_free(&s->sb); }

void mb_svg_start(mb_svg *s, const char *tag) {
  mb_sb_putc(&s->sb, '<');
  mb_sb_puts(&s->sb, tag);
}

void mb_svg_attr(mb_svg *s, const char *name, const char *value) {
  mb_sb_printf(&s->sb, " %s=\"", name);
  escaped(&s->sb, value);
  mb_sb_putc(&s->sb, '"');
}

void mb_svg_attr_num(mb_svg *s, const char *name, double v) {
  mb_sb_printf(&s->sb, " %s=\"", name);
  mb_svg_num(&s->sb, v);
  mb_sb_putc(&s->sb, '"');
}

void mb_svg_attr_u64(mb_svg *s, const char *name, uint64_t v) {
  mb_sb_printf(&s->sb, " %s=\"%" PRIu64 "\"", name, v);
}

void mb_svg_attr_i64(mb_svg *s, const char *name, int64_t v) {
  mb_sb_printf(&s->sb, " %s=\"%" PRId64 "\"", name, v);
}

void mb_svg_raw(mb_svg *s, const char *attrs) {
  if (attrs && *attrs) {
    if (attrs[0] != ' ') mb_sb_putc(&s->sb, ' ');
    mb_sb_puts(&s->sb, attrs);
  }
}

void mb_svg_empty(mb_svg *s) { mb_sb_puts(&s->sb, "/>\n"); }
void mb_svg_open(mb_svg *s) { mb_sb_putc(&s->sb, '>'); }
void mb_svg_open_block(mb_svg *s) { mb_sb_puts(&s->sb, ">\n"); }

void mb_svg_close(mb_svg *s, const char *tag) {
  mb_sb_puts(&s->sb, "</");
  mb_sb_puts(&s->sb, tag);
  mb_sb_puts(&s->sb, ">\n");
}

void mb_svg_content(mb_svg *s, const char *text) { escaped(&s->sb, text); }

void mb_svg_rect(mb_svg *s, double x, double y, double w, double h) {
  mb_svg_start(s, "rect");
  mb_svg_attr_num(s, "x", x);
  mb_svg_attr_num(s, "y", y);
  mb_svg_attr_num(s, "width", w > 0 ? w : 0);
  mb_svg_attr_num(s, "height", h > 0 ? h : 0);
}

void mb_svg_line(mb_svg *s, double x1, double y1, double x2, double y2) {
  mb_svg_start(s, "line");
  mb_svg_attr_num(s, "x1", x1);
  mb_svg_attr_num(s, "y1", y1);
  mb_svg_attr_num(s, "x2", x2);
  mb_svg_attr_num(s, "y2", y2);
}

void mb_svg_circle(mb_svg *s, double cx, double cy, double r) {
  mb_svg_start(s, "circle");
  mb_svg_attr_num(s, "cx", cx);
  mb_svg_attr_num(s, "cy", cy);
  mb_svg_attr_num(s, "r", r);
}

void mb_svg_text_at(mb_svg *s, double x, double y) {
  mb_svg_start(s, "text");
  mb_svg_attr_num(s, "x", x);
  mb_svg_attr_num(s, "y", y);
}

void mb_svg_text(mb_svg *s, double x, double y, const char *anchor, const char *attrs, const char *text) {
  mb_svg_text_at(s, x, y);
  if (anchor && strcmp(anchor, "start")) mb_svg_attr(s, "text-anchor", anchor);
  mb_svg_raw(s, attrs);
  mb_svg_open(s);
  mb_svg_content(s, text);
  mb_svg_close(s, "text");
}

void mb_svg_d_begin(mb_svg *s) { mb_sb_puts(&s->sb, " d=\""); }

void mb_svg_d_point(mb_svg *s, char cmd, double x, double y) {
  mb_sb_putc(&s->sb, cmd);
  num(&s->sb, x, 1); /* a tenth of a unit: finer than any screen shows, half the bytes */
  mb_sb_putc(&s->sb, ',');
  num(&s->sb, y, 1);
}

void mb_svg_d_end(mb_svg *s, int close) { mb_sb_puts(&s->sb, close ? "Z\"" : "\""); }

double mb_svg_nice_step(double range, int target) {
  if (!(range > 0) || target < 1) return 1;
  double raw = range / target, mag = pow(10.0, floor(log10(raw))), f = raw / mag;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * mag;
}

const char *mb_svg_byte_unit(double top, double *bytes) {
  static const struct { const char *name; double bytes; } units[] = {
    {"TiB", 1099511627776.0}, {"GiB", 1073741824.0}, {"MiB", 1048576.0}, {"KiB", 1024.0}, {"B", 1.0}};
  size_t u = 0;
  while (u + 1 < sizeof units / sizeof units[0] && top < units[u].bytes) u++;
  *bytes = units[u].bytes;
  return units[u].name;
}
