/* Derive each initializer's role (parameter, embedding, buffer, constant) from how the graph
 * uses it. The rules are documented in docs/roles.md. */
#ifndef MB_PASSES_ROLES_H
#define MB_PASSES_ROLES_H
#include "graph/graph.h"
#include "util/diag.h"
int mb_roles_derive(struct mb_model *m, mb_diag *d);
#endif
