#include "passes/assemble.h"

#include "ops/op.h"
#include "passes/inference.h"
#include "passes/roles.h"

int mb_model_assemble(struct mb_model *m, mb_diag *d) {
  int rc = mb_roles_derive(m, d);
  if (rc == MB_OK) rc = mb_ops_resolve_model(m, d);
  if (rc == MB_OK) rc = mb_find_inference_signs(m, d);
  return rc;
}
