/* A read-only tree of plain data values (what JSON and a data-only pickle hold): none, bool,
 * integers, floats, strings, bytes, lists (tuples and sets too) and dicts. The readers build it
 * in an arena the caller owns; nodes may be shared (a pickle's memo), so consumers walk it by
 * path (mb_datum_get) and never recurse over it generically. */
#ifndef MB_UTIL_DATUM_H
#define MB_UTIL_DATUM_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/arena.h"
#include "util/diag.h"

enum mb_dkind { MB_D_NONE, MB_D_BOOL, MB_D_INT, MB_D_FLOAT, MB_D_STR, MB_D_BYTES, MB_D_LIST, MB_D_DICT };

typedef struct mb_datum mb_datum;
struct mb_datum {
  uint8_t kind;       /* enum mb_dkind */
  uint8_t neg;        /* MB_D_INT: below zero (the value is in i, else in u) */
  uint8_t big;        /* MB_D_INT: outside [-2^63, 2^64): only the sign is kept */
  bool b;             /* MB_D_BOOL */
  union {
    int64_t i;
    uint64_t u;
    double f;         /* MB_D_FLOAT */
  };
  union {
    const char *s;    /* MB_D_STR / MB_D_BYTES: n bytes, NUL-terminated for convenience */
    mb_datum **items; /* list: n values; dict: 2n (key, value) */
  };
  size_t n;           /* bytes of s, items of a list, or pairs of a dict */
  size_t cap;         /* list/dict: allocated item slots */
};

/* Reading limits shared by the readers. Nesting deeper than this is refused (a JSON reader
 * recurses; a pickle's MARK stack is bounded the same way). */
#define MB_DATUM_MAX_DEPTH 256

mb_datum *mb_datum_new(mb_arena *a, int kind);
/* Append to a list; add a key and its value to a dict (a repeated key is kept twice: lookups
 * take the last, as Python's dict would hold). */
int mb_datum_push(mb_arena *a, mb_datum *list, mb_datum *item);
int mb_datum_put(mb_arena *a, mb_datum *dict, mb_datum *key, mb_datum *value);

/* The value of a string key in a dict (the last one when repeated), or NULL. */
const mb_datum *mb_datum_get(const mb_datum *dict, const char *key);
/* An integer that fits the type; false otherwise (floats are not integers here). */
bool mb_datum_u64(const mb_datum *v, uint64_t *out);
bool mb_datum_i64(const mb_datum *v, int64_t *out);
/* A number as a double (integers included). */
bool mb_datum_number(const mb_datum *v, double *out);
bool mb_datum_is_str(const mb_datum *v, const char *s);

/* Parse a whole document. On failure the diag names the offset and the problem. */
int mb_json_parse(const char *data, size_t size, mb_arena *a, mb_datum **out, mb_diag *d);
/* A pickle (protocol 2 to 5) of plain data only: objects, globals and reduce calls are refused
 * with an error, never executed. */
int mb_pickle_parse(const unsigned char *data, size_t size, mb_arena *a, mb_datum **out, mb_diag *d);
/* A pickle (its first byte 0x80: protocol 2 and later) or JSON, as the first byte says; a
 * protocol 0 or 1 pickle is named as such, not read as broken JSON. */
int mb_data_parse(const unsigned char *data, size_t size, mb_arena *a, mb_datum **out, mb_diag *d);
#endif
