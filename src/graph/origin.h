/* What an IR node's origin (mb_origin, graph/graph.h) says: the dotted module path a
 * TorchScript-style scope names, and the arguments of the FX call dynamo translated the node
 * from. Read by the passes (roles, fusion, inference signs) and the simulation (checkpoint
 * segments); filled at conversion by onnx/origin.c. */
#ifndef MB_GRAPH_ORIGIN_H
#define MB_GRAPH_ORIGIN_H
#include <stdbool.h>
#include <stddef.h>

#include "graph/graph.h"

/* Does the FX name `arg` (n bytes: "x", "p_fc_weight") name the value called `name` ("x",
 * "fc.weight")? torch.export names a parameter's placeholder p_<path, non-alphanumerics as
 * '_'>, a buffer's b_<...>, a lifted tensor constant's c_<...>. Returns '=' for the same name,
 * 'p', 'b' or 'c' for a placeholder of that kind, 0 otherwise. */
char mb_fx_names(const char *arg, size_t n, const char *name);
/* The next "%name" token of FX arguments at or after *p: sets *tok and *len and moves *p past
 * it; false when there is none. */
bool mb_fx_next_arg(const char **p, const char **tok, size_t *len);

/* A literal argument of the FX call: positional argument `pos` or keyword `kw` (either may be
 * unused: -1 / NULL). Numbers, True/False (1/0). False when absent or not a literal. */
bool mb_fx_literal(const mb_origin *o, int pos, const char *kw, double *value);

/* The module path of a TorchScript-style node name ("/encoder/layer.0/attention/self/query/
 * MatMul" -> "encoder.layer.0.attention.self.query") into buf; false when the name has no
 * scope. */
bool mb_origin_module_of_name(const char *name, char *buf, size_t size);
/* The same for the first len bytes of a scope (mb_origin.scope), cut at a '/'. */
bool mb_origin_module_of_scope(const char *scope, size_t len, char *buf, size_t size);
#endif
