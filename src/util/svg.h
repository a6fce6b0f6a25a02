/* A small SVG writer over mb_strbuf: elements, escaped attributes and text, path data and
 * locale-free numbers. Enough for the library's own pictures (the step timeline, sweeps); no
 * plotting dependency.
 *
 * An element is written in three steps: mb_svg_start(tag), attributes, then mb_svg_empty()
 * (`/>`) or mb_svg_open() (`>`, children, mb_svg_close(tag)). Text and attribute values are
 * escaped for XML and made valid UTF-8 (model strings come from files: an invalid byte becomes
 * U+FFFD, a control character a space), so the document always parses. Numbers are written
 * with at most two decimals and a '.' whatever the process's locale. Errors are those of the
 * strbuf: sticky, reported once by mb_svg_finish(). */
#ifndef MB_UTIL_SVG_H
#define MB_UTIL_SVG_H
#include <stddef.h>
#include <stdint.h>

#include "util/strbuf.h"

typedef struct mb_svg {
  mb_strbuf sb;
} mb_svg;

/* The XML declaration and the root <svg> element of width x height user units (its viewBox). */
void mb_svg_begin(mb_svg *s, double width, double height);
/* A picture: mb_svg_begin, its <title>, a white background, and the start of its top group
 * <g class="group_class" (left open for the caller's attributes, then mb_svg_open_block). */
void mb_svg_begin_picture(mb_svg *s, double width, double height, const char *title, const char *group_class);
/* Close the root and hand over the document (free() it: it is what mb_free releases), or NULL
 * when memory ran out (nothing to free then). The writer is empty afterwards. */
char *mb_svg_finish(mb_svg *s);
/* Drop whatever was written (on an error path). */
void mb_svg_discard(mb_svg *s);

void mb_svg_start(mb_svg *s, const char *tag);
void mb_svg_attr(mb_svg *s, const char *name, const char *value); /* escaped */
void mb_svg_attr_num(mb_svg *s, const char *name, double v);
void mb_svg_attr_u64(mb_svg *s, const char *name, uint64_t v);
void mb_svg_attr_i64(mb_svg *s, const char *name, int64_t v);
/* Attributes written as given: literals of the program (` fill="#eee"`), never data. */
void mb_svg_raw(mb_svg *s, const char *attrs);
void mb_svg_empty(mb_svg *s);
void mb_svg_open(mb_svg *s);       /* `>`: for text content */
void mb_svg_open_block(mb_svg *s); /* `>` and a line end: for child elements */
void mb_svg_close(mb_svg *s, const char *tag);
/* Escaped character data inside an open element. */
void mb_svg_content(mb_svg *s, const char *text);

/* Shorthands: a started element with its geometry, to be finished with attributes and
 * mb_svg_empty() (a rect, line or circle) or mb_svg_open() + content + mb_svg_close("text"). */
void mb_svg_rect(mb_svg *s, double x, double y, double w, double h);
void mb_svg_line(mb_svg *s, double x1, double y1, double x2, double y2);
void mb_svg_circle(mb_svg *s, double cx, double cy, double r);
void mb_svg_text_at(mb_svg *s, double x, double y);
/* A whole <text> element: anchor "start", "middle" or "end"; attrs raw (may be ""). */
void mb_svg_text(mb_svg *s, double x, double y, const char *anchor, const char *attrs, const char *text);

/* Path data inside a started <path>: mb_svg_d_begin writes ` d="`, then M/L points (one
 * decimal), then
 * mb_svg_d_end closes the attribute (with Z when close is set). */
void mb_svg_d_begin(mb_svg *s);
void mb_svg_d_point(mb_svg *s, char cmd, double x, double y);
void mb_svg_d_end(mb_svg *s, int close);

/* Axes: a step of 1, 2, 2.5 or 5 x 10^k that cuts range into about `target` parts; the binary
 * unit (TiB, GiB, MiB, KiB, B) to label byte values up to top with, its size in *bytes. */
double mb_svg_nice_step(double range, int target);
const char *mb_svg_byte_unit(double top, double *bytes);

/* A number as the writer prints it: at most two decimals, no exponent, '.' as the point. */
void mb_svg_num(mb_strbuf *sb, double v);
/* The same into buf (at least 24 bytes); returns buf. */
char *mb_svg_fmt_num(char *buf, size_t size, double v);
#endif
