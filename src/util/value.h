/* A read-only tree of plain data values (what JSON and a data-only pickle hold): none, bool,
 * integers, floats, strings, bytes, lists (tuples and sets too) and dicts. The readers build it
 * in an arena the caller owns; nodes may be shared (a pickle's memo), so consumers walk it by
 * path (mb_value_get) and never recurse over it generically. */
#ifndef MB_UTIL_VALUE_H
#define MB_UTIL_VALUE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/arena.h"
#include "util/diag.h"

enum mb_vkind { MB_V_NONE, MB_V_BOOL, MB_V_INT, MB_V_FLOAT, MB_V_STR, MB_V_BYTES, MB_V_LIST, MB_V_DICT };

typedef struct mb_value mb_value;
struct mb_value {
  uint8_t kind;       /* enum mb_vkind */
  uint8_t neg;        /* MB_V_INT: below zero (the value is in i, else in u) */
  uint8_t big;        /* MB_V_INT: outside [-2^63, 2^64): only the sign is kept */
  bool b;             /* MB_V_BOOL */
  union {
    int64_t i;
    uint64_t u;
    double f;         /* MB_V_FLOAT */
  };
  union {
    const char *s;    /* MB_V_STR / MB_V_BYTES: n bytes, NUL-terminated for convenience */
    mb_value **items; /* list: n values; dict: 2n (key, value) */
  };
  size_t n;           /* bytes of s, items of a list, or pairs of a dict */
  size_t cap;         /* list/dict: allocated item slots */
};

/* Reading limits shared by the readers. Nesting deeper than this is refused (a JSON reader
 * recurses; a pickle's MARK stack is bounded the same way). */
#define MB_VALUE_MAX_DEPTH 256

mb_value *mb_value_new(mb_arena *a, int kind);
/* Append to a list; add a key and its value to a dict (a repeated key is kept twice: lookups
 * take the last, as Python's dict would hold). */
int mb_value_push(mb_arena *a, mb_value *list, mb_value *item);
int mb_value_put(mb_arena *a, mb_value *dict, mb_value *key, mb_value *value);

/* The value of a string key in a dict (the last one when repeated), or NULL. */
const mb_value *mb_value_get(const mb_value *dict, const char *key);
/* An integer that fits the type; false otherwise (floats are not integers here). */
bool mb_value_u64(const mb_value *v, uint64_t *out);
bool mb_value_i64(const mb_value *v, int64_t *out);
/* A number as a double (integers included). */
bool mb_value_number(const mb_value *v, double *out);
bool mb_value_is_str(const mb_value *v, const char *s);

/* Parse a whole document. On failure the diag names the offset and the problem. */
int mb_json_parse(const char *data, size_t size, mb_arena *a, mb_value **out, mb_diag *d);
/* A pickle (protocol 2 to 5) of plain data only: objects, globals and reduce calls are refused
 * with an error, never executed. */
int mb_pickle_parse(const unsigned char *data, size_t size, mb_arena *a, mb_value **out, mb_diag *d);
#endif
