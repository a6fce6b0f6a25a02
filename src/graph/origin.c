/* Reading an IR node's origin (graph/graph.h's mb_origin): the module path a TorchScript-style
 * scope names, and the FX call's arguments as dynamo wrote them. */
#include "graph/origin.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ TorchScript names */

/* "/layer1/layer1.0/conv1/Conv": the components before the op name, joined with '.', where a
 * component that extends the previous one ("layer1" then "layer1.0": a Sequential's child)
 * replaces it instead of being appended. */
bool mb_origin_module_of_scope(const char *scope, size_t len, char *buf, size_t size) {
  if (!scope || scope[0] != '/' || size == 0) return false;
  const char *last = scope + len;
  size_t out = 0, prev_start = 0;
  buf[0] = '\0';
  for (const char *p = scope + 1; p < last;) {
    const char *end = memchr(p, '/', (size_t)(last - p));
    if (!end) end = last;
    size_t n = (size_t)(end - p);
    const char *prev = buf + prev_start;
    size_t prev_len = out - prev_start;
    bool extends = out > 0 && n > prev_len && !strncmp(p, prev, prev_len) && p[prev_len] == '.';
    size_t at = extends ? prev_start : (out ? out + 1 : 0);
    if (n && at + n + 1 < size) {
      if (!extends && out) buf[out] = '.';
      memcpy(buf + at, p, n);
      out = at + n;
      buf[out] = '\0';
      prev_start = at;
    } else if (n) {
      return false; /* too long to be a module path we can use */
    }
    p = end + 1;
  }
  return true;
}

bool mb_origin_module_of_name(const char *name, char *buf, size_t size) {
  if (!name || name[0] != '/') return false;
  return mb_origin_module_of_scope(name, (size_t)(strrchr(name, '/') - name), buf, size);
}

/* ------------------------------------------------------------------ FX names */

char mb_fx_names(const char *arg, size_t n, const char *name) {
  if (strlen(name) == n && !memcmp(arg, name, n)) return '=';
  if (n < 3 || arg[1] != '_' || (arg[0] != 'p' && arg[0] != 'b' && arg[0] != 'c')) return 0;
  const char *a = arg + 2, *end = arg + n;
  for (; *name && a < end; name++, a++)
    if (*a != (isalnum((unsigned char)*name) ? *name : '_')) return 0;
  return !*name && a == end ? arg[0] : 0;
}

bool mb_fx_next_arg(const char **p, const char **tok, size_t *len) {
  const char *s = *p;
  if (!s) return false;
  while (*s && *s != '%') s++;
  if (!*s) {
    *p = s;
    return false;
  }
  const char *t = ++s;
  while (isalnum((unsigned char)*s) || *s == '_') s++;
  *tok = t;
  *len = (size_t)(s - t);
  *p = s;
  return true;
}

static bool parse_literal(const char *s, size_t n, double *value) {
  while (n && (*s == ' ')) s++, n--;
  while (n && s[n - 1] == ' ') n--;
  if (n == 4 && !memcmp(s, "True", 4)) return *value = 1, true;
  if (n == 5 && !memcmp(s, "False", 5)) return *value = 0, true;
  char buf[64];
  if (!n || n >= sizeof buf) return false;
  memcpy(buf, s, n);
  buf[n] = '\0';
  char *end;
  *value = strtod(buf, &end);
  return end == buf + n;
}

/* Item `want` of a bracketed, comma-separated list ("(a, [b, c], d)"): start and length. */
static bool list_item(const char *s, int want, const char **item, size_t *len) {
  if (!s || (*s != '(' && *s != '{')) return false;
  int depth = 0, k = 0;
  const char *start = s + 1;
  for (const char *p = s; *p; p++) {
    if (*p == '\'' || *p == '"') {
      char q = *p;
      for (p++; *p && *p != q; p++)
        if (*p == '\\' && p[1]) p++;
      if (!*p) return false;
      continue;
    }
    if (*p == '(' || *p == '[' || *p == '{') depth++;
    bool close = *p == ')' || *p == ']' || *p == '}';
    if (close) depth--;
    if ((*p == ',' && depth == 1) || (close && depth == 0)) {
      if (k == want) {
        *item = start;
        *len = (size_t)(p - start);
        return *len > 0;
      }
      k++;
      start = p + 1;
    }
    if (close && depth == 0) break;
  }
  return false;
}

bool mb_fx_literal(const mb_origin *o, int pos, const char *kw, double *value) {
  const char *item;
  size_t len;
  if (pos >= 0 && list_item(o->args, pos, &item, &len)) return parse_literal(item, len, value);
  if (!kw || !o->kwargs) return false;
  size_t kl = strlen(kw);
  for (int k = 0; list_item(o->kwargs, k, &item, &len); k++) {
    while (len && *item == ' ') item++, len--;
    if (len > kl + 1 && !memcmp(item, kw, kl) && item[kl] == ':') return parse_literal(item + kl + 1, len - kl - 1, value);
  }
  return false;
}
