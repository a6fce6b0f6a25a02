/* JSON members of evaluation inside training and the teacher output cache (estimate_json.c). */
#ifndef MB_API_EVAL_JSON_H
#define MB_API_EVAL_JSON_H
#include "budget/setup.h"
#include "membudget/membudget.h"
#include "util/strbuf.h"

/* "eval_batch", "zero_grad", "ema_swap", "eval_keep_outputs", "teacher_cache" of the setup
 * object, each line ending ",\n". */
void mb_json_eval_setup(mb_strbuf *sb, const mb_setup *s);
/* "eval_batch", "eval_peak", ..., "teacher_cache", "eval_at_peak" of the budget object, each
 * line ending ",\n". */
void mb_json_eval_budget(mb_strbuf *sb, const mb_budget *b);
#endif
