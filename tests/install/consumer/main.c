/* A program outside the tree, built against an installed membudget. */
#include <membudget/membudget.h>
#include <stdio.h>

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  mb_model *m = NULL;
  if (mb_model_load_file(argv[1], &m) != MB_OK) {
    fprintf(stderr, "%s\n", mb_model_errmsg(m));
    mb_model_free(m);
    return 1;
  }
  mb_accounting a = {.struct_size = sizeof a};
  mb_account(m, NULL, &a);
  printf("%llu\n", (unsigned long long)a.parameters);
  mb_model_free(m);
  return mb_version_number() == MB_VERSION_NUMBER ? 0 : 1;
}
