/* The solve's safety margin: a share of the usable memory held back where the GPU truth shows
 * the estimate above the largest batch that trains (issue 29, item 4). Taken from a table of
 * measured families (budget/margin.c), printed with the answer and in the JSON; setup key
 * margin gives one instead ("auto": the table; 0: none). */
#ifndef MB_BUDGET_MARGIN_H
#define MB_BUDGET_MARGIN_H
#include "budget/setup.h"
#include "graph/graph.h"

typedef struct mb_margin {
  double fraction;      /* of the usable memory */
  const char *family;   /* the family the graph was recognised as, "" when none */
  const char *basis;    /* why this margin: the measurement it comes from, or why none */
} mb_margin;

/* The margin for this graph under this setup. */
void mb_margin_for(const mb_graph *g, const mb_train *tr, mb_margin *out);
#endif
