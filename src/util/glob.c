#include "util/glob.h"

#include <stddef.h>

/* Match one bracket class at p (just past '['); sets *end past ']' . */
static bool class_match(const char *p, char c, const char **end) {
  bool negate = (*p == '!' || *p == '^');
  if (negate) p++;
  bool hit = false;
  bool first = true;
  while (*p && (first || *p != ']')) {
    char lo = *p;
    if (lo == '\\' && p[1]) lo = *++p;
    char hi = lo;
    if (p[1] == '-' && p[2] && p[2] != ']') {
      hi = p[2];
      if (hi == '\\' && p[3]) { hi = p[3]; p++; }
      p += 2;
    }
    if ((unsigned char)c >= (unsigned char)lo && (unsigned char)c <= (unsigned char)hi) hit = true;
    p++;
    first = false;
  }
  *end = *p == ']' ? p + 1 : p;
  return hit != negate;
}

bool mb_glob_valid(const char *p) {
  if (!p) return false;
  for (; *p; p++) {
    if (*p == '\\') {
      if (!p[1]) return false;
      p++;
    } else if (*p == '[') {
      const char *q = p + 1;
      if (*q == '!' || *q == '^') q++;
      if (*q == ']') q++;
      while (*q && *q != ']') {
        if (*q == '\\' && q[1]) q++;
        q++;
      }
      if (!*q) return false;
      p = q;
    }
  }
  return true;
}

/* Iterative matcher with single-star backtracking: linear in practice, no recursion. */
bool mb_glob_match(const char *p, const char *t) {
  const char *star_p = NULL, *star_t = NULL;
  while (*t) {
    if (*p == '*') {
      while (*p == '*') p++;
      if (!*p) return true;
      star_p = p;
      star_t = t;
      continue;
    }
    const char *next = p + 1;
    bool ok;
    if (*p == '?') {
      ok = true;
    } else if (*p == '[') {
      ok = class_match(p + 1, *t, &next);
    } else if (*p == '\\' && p[1]) {
      ok = p[1] == *t;
      next = p + 2;
    } else {
      ok = *p && *p == *t;
    }
    if (ok) {
      p = next;
      t++;
    } else if (star_p) {
      p = star_p;
      t = ++star_t;
    } else {
      return false;
    }
  }
  while (*p == '*') p++;
  return *p == '\0';
}
