/* A strict JSON reader (RFC 8259) into the value tree. Recursive descent with a depth limit;
 * integers keep their exact value up to 2^64 - 1, other numbers become doubles. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "membudget/membudget.h"
#include "util/datum.h"

typedef struct jreader {
  const char *p, *end, *start;
  mb_arena *a;
  mb_diag *d;
} jreader;

static int jfail(jreader *r, const char *what) {
  return mb_fail(r->d, MB_E_PARSE, "JSON: %s at offset %zu", what, (size_t)(r->p - r->start));
}

static void skip_ws(jreader *r) {
  while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')) r->p++;
}

static int literal(jreader *r, const char *word) {
  size_t n = strlen(word);
  if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n)) return jfail(r, "unexpected character");
  r->p += n;
  return MB_OK;
}

static int hex4(jreader *r, unsigned *out) {
  if (r->end - r->p < 4) return jfail(r, "truncated \\u escape");
  unsigned v = 0;
  for (int k = 0; k < 4; k++) {
    char c = r->p[k];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
    else return jfail(r, "bad \\u escape");
  }
  r->p += 4;
  *out = v;
  return MB_OK;
}

static size_t put_utf8(char *o, unsigned cp) {
  if (cp < 0x80) { o[0] = (char)cp; return 1; }
  if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
  if (cp < 0x10000) {
    o[0] = (char)(0xE0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* r->p is after the opening quote. The decoded string is never longer than its source. */
static int string(jreader *r, mb_datum **out) {
  const char *q = r->p;
  while (q < r->end && *q != '"') q += *q == '\\' && q + 1 < r->end ? 2 : 1;
  if (q >= r->end) return jfail(r, "unterminated string");
  char *buf = mb_arena_alloc(r->a, (size_t)(q - r->p) + 1);
  mb_datum *v = mb_datum_new(r->a, MB_D_STR);
  if (!buf || !v) return mb_fail(r->d, MB_E_NOMEM, "out of memory");
  size_t n = 0;
  while (*r->p != '"') {
    unsigned char c = (unsigned char)*r->p;
    if (c < 0x20) return jfail(r, "control character in string");
    if (c != '\\') {
      buf[n++] = (char)c;
      r->p++;
      continue;
    }
    r->p++;
    char e = *r->p++;
    unsigned cp = 0;
    switch (e) {
      case '"': buf[n++] = '"'; break;
      case '\\': buf[n++] = '\\'; break;
      case '/': buf[n++] = '/'; break;
      case 'b': buf[n++] = '\b'; break;
      case 'f': buf[n++] = '\f'; break;
      case 'n': buf[n++] = '\n'; break;
      case 'r': buf[n++] = '\r'; break;
      case 't': buf[n++] = '\t'; break;
      case 'u':
        if (hex4(r, &cp) != MB_OK) return r->d->status;
        if (cp >= 0xD800 && cp < 0xDC00 && r->end - r->p >= 6 && r->p[0] == '\\' && r->p[1] == 'u') {
          unsigned lo = 0;
          r->p += 2;
          if (hex4(r, &lo) != MB_OK) return r->d->status;
          if (lo >= 0xDC00 && lo < 0xE000) cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          else return jfail(r, "unpaired surrogate");
        } else if (cp >= 0xD800 && cp < 0xE000) {
          return jfail(r, "unpaired surrogate");
        }
        n += put_utf8(buf + n, cp); /* 6 or 12 source bytes give at most 4 */
        break;
      default: return jfail(r, "bad escape");
    }
  }
  r->p++;
  buf[n] = '\0';
  v->s = buf;
  v->n = n;
  *out = v;
  return MB_OK;
}

static int number(jreader *r, mb_datum **out) {
  const char *s = r->p;
  bool neg = false, integral = true;
  if (r->p < r->end && *r->p == '-') { neg = true; r->p++; }
  if (r->p >= r->end || *r->p < '0' || *r->p > '9') return jfail(r, "bad number");
  if (*r->p == '0' && r->p + 1 < r->end && r->p[1] >= '0' && r->p[1] <= '9') return jfail(r, "leading zero");
  while (r->p < r->end && *r->p >= '0' && *r->p <= '9') r->p++;
  if (r->p < r->end && *r->p == '.') {
    integral = false;
    r->p++;
    if (r->p >= r->end || *r->p < '0' || *r->p > '9') return jfail(r, "bad number");
    while (r->p < r->end && *r->p >= '0' && *r->p <= '9') r->p++;
  }
  if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
    integral = false;
    r->p++;
    if (r->p < r->end && (*r->p == '+' || *r->p == '-')) r->p++;
    if (r->p >= r->end || *r->p < '0' || *r->p > '9') return jfail(r, "bad number");
    while (r->p < r->end && *r->p >= '0' && *r->p <= '9') r->p++;
  }
  mb_datum *v = mb_datum_new(r->a, integral ? MB_D_INT : MB_D_FLOAT);
  if (!v) return mb_fail(r->d, MB_E_NOMEM, "out of memory");
  if (integral) {
    uint64_t mag = 0;
    for (const char *q = s + neg; q < r->p; q++) {
      unsigned dgt = (unsigned)(*q - '0');
      if (mag > (UINT64_MAX - dgt) / 10) { v->big = 1; break; }
      mag = mag * 10 + dgt;
    }
    v->neg = neg && (mag || v->big);
    if (v->big) {
      /* only the sign survives */
    } else if (!neg) {
      v->u = mag;
    } else if (mag <= (uint64_t)INT64_MAX + 1) {
      v->i = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
    } else {
      v->big = 1;
    }
  } else {
    char tmp[128];
    size_t len = (size_t)(r->p - s);
    if (len >= sizeof tmp) return jfail(r, "number too long");
    memcpy(tmp, s, len);
    tmp[len] = '\0';
    v->f = strtod(tmp, NULL);
  }
  *out = v;
  return MB_OK;
}

static int value(jreader *r, int depth, mb_datum **out);

static int container(jreader *r, int depth, bool dict, mb_datum **out) {
  mb_datum *c = mb_datum_new(r->a, dict ? MB_D_DICT : MB_D_LIST);
  if (!c) return mb_fail(r->d, MB_E_NOMEM, "out of memory");
  r->p++;
  skip_ws(r);
  char close = dict ? '}' : ']';
  if (r->p < r->end && *r->p == close) {
    r->p++;
    *out = c;
    return MB_OK;
  }
  for (;;) {
    mb_datum *k = NULL, *v = NULL;
    skip_ws(r);
    if (dict) {
      if (r->p >= r->end || *r->p != '"') return jfail(r, "expected a string key");
      r->p++;
      if (string(r, &k) != MB_OK) return r->d->status;
      skip_ws(r);
      if (r->p >= r->end || *r->p != ':') return jfail(r, "expected ':'");
      r->p++;
    }
    if (value(r, depth + 1, &v) != MB_OK) return r->d->status;
    int rc = dict ? mb_datum_put(r->a, c, k, v) : mb_datum_push(r->a, c, v);
    if (rc != MB_OK) return mb_fail(r->d, rc, "out of memory");
    skip_ws(r);
    if (r->p < r->end && *r->p == ',') {
      r->p++;
      continue;
    }
    if (r->p < r->end && *r->p == close) {
      r->p++;
      *out = c;
      return MB_OK;
    }
    return jfail(r, dict ? "expected ',' or '}'" : "expected ',' or ']'");
  }
}

static int value(jreader *r, int depth, mb_datum **out) {
  if (depth > MB_DATUM_MAX_DEPTH) return jfail(r, "nesting too deep");
  skip_ws(r);
  if (r->p >= r->end) return jfail(r, "unexpected end of input");
  mb_datum *v = NULL;
  switch (*r->p) {
    case '{': return container(r, depth, true, out);
    case '[': return container(r, depth, false, out);
    case '"': r->p++; return string(r, out);
    case 't':
    case 'f': {
      bool truth = *r->p == 't';
      if (literal(r, truth ? "true" : "false") != MB_OK) return r->d->status;
      if (!(v = mb_datum_new(r->a, MB_D_BOOL))) return mb_fail(r->d, MB_E_NOMEM, "out of memory");
      v->b = truth;
      *out = v;
      return MB_OK;
    }
    case 'n':
      if (literal(r, "null") != MB_OK) return r->d->status;
      if (!(v = mb_datum_new(r->a, MB_D_NONE))) return mb_fail(r->d, MB_E_NOMEM, "out of memory");
      *out = v;
      return MB_OK;
    default: return number(r, out);
  }
}

int mb_json_parse(const char *data, size_t size, mb_arena *a, mb_datum **out, mb_diag *d) {
  jreader r = {data, data + size, data, a, d};
  *out = NULL;
  if (size >= 3 && !memcmp(data, "\xEF\xBB\xBF", 3)) r.p += 3; /* a UTF-8 byte order mark */
  mb_datum *v = NULL;
  if (value(&r, 0, &v) != MB_OK) return d->status;
  skip_ws(&r);
  if (r.p != r.end) return jfail(&r, "trailing characters after the document");
  *out = v;
  return MB_OK;
}
