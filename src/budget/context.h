/* What a training process holds on the device outside PyTorch's allocator, and the library
 * workspaces it allocates through it. */
#ifndef MB_BUDGET_CONTEXT_H
#define MB_BUDGET_CONTEXT_H
#include <stddef.h>
#include <stdint.h>

#include "budget/setup.h"

/* The CUDA context in bytes: the `context` option, else the context table's row for the GPU
 * and module loading. rule (may be NULL) receives which row and why. */
uint64_t mb_train_context(const mb_train *tr, char *rule, size_t rule_size);
#endif
