/* Whole-model checks after conversion: captured names resolve, no cycles, nodes in
 * topological order, and the flat list of initializers. */
#ifndef MB_GRAPH_CHECK_H
#define MB_GRAPH_CHECK_H
#include "graph/graph.h"
#include "util/diag.h"
int mb_graph_check_model(struct mb_model *m, mb_diag *d);
#endif
