/* Shell-style globs on tensor names: `*` any run (including '.' and '/'), `?` one character,
 * `[abc]`, `[a-z]`, `[!abc]` classes, `\` escapes the next character. */
#ifndef MB_UTIL_GLOB_H
#define MB_UTIL_GLOB_H
#include <stdbool.h>
/* true when the pattern is well formed (every '[' closed, no trailing '\'). */
bool mb_glob_valid(const char *pattern);
bool mb_glob_match(const char *pattern, const char *text);
#endif
