/* Limits on untrusted input: one table of names, defaults and ceilings (limits.c), read by the
 * loader (file size, nodes, tensors, a node's inputs and outputs, subgraph depth, rank,
 * attribute and string sizes) and by
 * shape inference (the Loop unroll budget). A caller overrides them with the setup keys
 * limit.NAME (budget/setup.c); docs/limits.md says why each default is what it is.
 * Exceeding one is an error with status MB_E_LIMIT whose message names the limit and its value. */
#ifndef MB_UTIL_LIMITS_H
#define MB_UTIL_LIMITS_H
#include <stdint.h>

#include "util/diag.h"

typedef enum mb_limit_id {
  MB_LIMIT_FILE_BYTES = 0,   /* size of the model file (or of what a pipe delivers) */
  MB_LIMIT_NODES,            /* nodes in the whole model, subgraphs included */
  MB_LIMIT_TENSORS,          /* named tensors defined in the whole model */
  MB_LIMIT_SUBGRAPH_DEPTH,   /* If/Loop/Scan bodies nested in one another */
  MB_LIMIT_RANK,             /* dims of one declared tensor */
  MB_LIMIT_ATTR_BYTES,       /* the values of one attribute (ints, floats, strings) */
  MB_LIMIT_STRING_BYTES,     /* one name, op type, domain, dim name or data location */
  MB_LIMIT_UNROLL,           /* Loop body passes shape inference unrolls in one inference */
  MB_LIMIT_NODE_IO,          /* inputs and outputs of one node */
  MB_LIMIT_COUNT
} mb_limit_id;

/* The deepest subgraph nesting that can be allowed: the wire pass's fixed message-depth bound
 * (onnx/wire.h) is derived from it, so raising subgraph_depth never meets that bound first. */
#define MB_LIMIT_DEPTH_CEILING 64

/* Values as set; 0 means the default. A zeroed struct is the defaults. */
typedef struct mb_limits {
  uint64_t value[MB_LIMIT_COUNT];
} mb_limits;

/* The limit called `name` ("nodes"), or -1. */
int mb_limit_find(const char *name);
const char *mb_limit_name(int id);
uint64_t mb_limit_default(int id);
/* The largest value a limit accepts (a fixed-size array or recursion bound behind it). */
uint64_t mb_limit_ceiling(int id);
/* Whether the limit is a byte size ("64MiB" accepted) rather than a count. */
int mb_limit_is_bytes(int id);
/* The value in force: l's, or the default where l is NULL or holds 0. */
uint64_t mb_limit(const mb_limits *l, int id);

/* Record "WHAT: HAVE UNIT, more than the limit NAME=VALUE (raise it with limit.NAME)" as an
 * MB_E_LIMIT failure; returns MB_E_LIMIT. `what` names the file, graph, node or tensor. */
int mb_limit_fail(mb_diag *d, const mb_limits *l, int id, const char *what, uint64_t have);
/* Fail as above when have exceeds the limit; MB_OK otherwise. */
int mb_limit_check(mb_diag *d, const mb_limits *l, int id, const char *what, uint64_t have);
/* Append " (WHY: the limit NAME=VALUE was reached; raise it with limit.NAME)" to a failure
 * already recorded in d, when a limit that degrades gracefully (unroll) caused it. */
void mb_limit_note(mb_diag *d, int id, uint64_t value, const char *why);
#endif
