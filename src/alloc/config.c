/* PYTORCH_CUDA_ALLOC_CONF, read as PyTorch 2.x reads it. Source: c10/core/AllocatorConfig.h
 * (ConfigTokenizer) and AllocatorConfig.cpp (parseArgs, parseMaxSplitSize,
 * parseRoundUpPower2Divisions, ...) of PyTorch 2.15 and main; the CUDA-only keys from
 * c10/cuda/CUDAAllocatorConfig.h (getKeys). The string is a comma-separated list of
 * `key:value`, a value being one token or a bracketed list; whitespace is ignored. */
#include "alloc/config.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "membudget/membudget.h"

void mb_alloc_config_default(mb_alloc_config *c) {
  memset(c, 0, sizeof *c);
  c->max_split_size = UINT64_MAX;
  c->max_non_split_rounding = MB_ALLOC_LARGE_BUFFER;
  c->large_segment_size = MB_ALLOC_LARGE_BUFFER;
}

#define MAX_TOKENS 256
#define TOKEN_LEN 64

typedef struct tokens {
  char tok[MAX_TOKENS][TOKEN_LEN];
  size_t n;
  char *err;
  size_t err_size;
} tokens;

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int fail(tokens *t, int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (t->err && t->err_size) vsnprintf(t->err, t->err_size, fmt, ap);
  va_end(ap);
  return status;
}

/* ConfigTokenizer: ',' ':' '[' ']' are tokens of their own, runs of other characters are one */
static int tokenize(tokens *t, const char *s) {
  size_t len = 0;
  bool in_word = false;
  for (; *s; s++) {
    char ch = *s;
    if (isspace((unsigned char)ch)) continue;
    bool punct = ch == ',' || ch == ':' || ch == '[' || ch == ']';
    if (punct || !in_word) {
      if (t->n == MAX_TOKENS) return fail(t, MB_E_INVALID_ARG, "alloc_conf: more than %d tokens", MAX_TOKENS);
      t->n++;
      len = 0;
    }
    if (len + 1 >= TOKEN_LEN) return fail(t, MB_E_INVALID_ARG, "alloc_conf: '%.20s...' is too long", t->tok[t->n - 1]);
    t->tok[t->n - 1][len++] = ch;
    t->tok[t->n - 1][len] = '\0';
    in_word = !punct;
  }
  return MB_OK;
}

static bool is(const tokens *t, size_t i, const char *s) { return i < t->n && !strcmp(t->tok[i], s); }

static bool parse_u64(const char *s, uint64_t *out) {
  if (!*s || !isdigit((unsigned char)*s)) return false;
  uint64_t v = 0;
  for (; *s; s++) {
    if (!isdigit((unsigned char)*s)) return false;
    unsigned d = (unsigned)(*s - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

static bool parse_double(const char *s, double *out) {
  char *end = NULL;
  double v = strtod(s, &end);
  if (!*s || *end) return false;
  *out = v;
  return true;
}

static bool pow2(uint64_t v) { return v && !(v & (v - 1)); }

static unsigned log2_floor(uint64_t v) {
  unsigned k = 0;
  while (v >>= 1) k++;
  return k;
}

/* the value token of `key` at t->tok[*i]; *i moves onto it */
static int value_of(tokens *t, size_t *i, const char *key) {
  if (!is(t, *i + 1, ":")) return fail(t, MB_E_INVALID_ARG, "alloc_conf: expected ':' after '%s'", key);
  *i += 2;
  if (*i >= t->n || is(t, *i, ",")) return fail(t, MB_E_INVALID_ARG, "alloc_conf: %s needs a value", key);
  return MB_OK;
}

static int megabytes(tokens *t, size_t i, const char *key, uint64_t min_mb, uint64_t *out) {
  uint64_t mb = 0;
  if (!parse_u64(t->tok[i], &mb))
    return fail(t, MB_E_INVALID_ARG, "alloc_conf: %s: '%s' is not a whole number of MiB", key, t->tok[i]);
  if (mb < min_mb)
    return fail(t, MB_E_INVALID_ARG, "alloc_conf: %s: %s is too small, must be >= %llu", key, t->tok[i],
                (unsigned long long)min_mb);
  *out = mb > UINT64_MAX / MB_MIB ? UINT64_MAX / MB_MIB * MB_MIB : mb * MB_MIB;
  return MB_OK;
}

static int boolean(tokens *t, size_t i, const char *key, bool *out) {
  if (is(t, i, "True")) *out = true;
  else if (is(t, i, "False")) *out = false;
  else return fail(t, MB_E_INVALID_ARG, "alloc_conf: %s: '%s' is not True or False", key, t->tok[i]);
  return MB_OK;
}

/* roundup_power2_divisions:N (every interval) or [MB:N,MB:N,>:N]: an interval key is a power
 * of two in MiB naming [key, 2 x key); the first entry also covers every interval below it,
 * '>' every interval after the last one named (semantics of AllocatorConfig's tests in 2.15) */
static int divisions(tokens *t, size_t *i, mb_alloc_config *c) {
  const char *key = "roundup_power2_divisions";
  uint64_t v = 0;
  if (!is(t, *i, "[")) {
    if (!parse_u64(t->tok[*i], &v) || !pow2(v))
      return fail(t, MB_E_INVALID_ARG, "alloc_conf: %s: '%s' is not a power of 2", key, t->tok[*i]);
    for (int k = 0; k < MB_ALLOC_INTERVALS; k++) c->roundup_divisions[k] = (uint32_t)(v > 1u << 30 ? 1u << 30 : v);
    return MB_OK;
  }
  uint32_t table[MB_ALLOC_INTERVALS] = {0};
  bool first = true;
  int last = -1;
  for (;;) {
    (*i)++;
    if (*i >= t->n) return fail(t, MB_E_INVALID_ARG, "alloc_conf: %s: missing ']'", key);
    if (is(t, *i, "]")) break;
    const char *interval = t->tok[*i];
    if (!is(t, *i + 1, ":") || *i + 2 >= t->n)
      return fail(t, MB_E_INVALID_ARG, "alloc_conf: %s: expected INTERVAL:DIVISIONS at '%s'", key, interval);
    *i += 2;
    if (!parse_u64(t->tok[*i], &v) || (v && !pow2(v)))
      return fail(t, MB_E_INVALID_ARG, "alloc_conf: %s: divisions '%s' are not 0 or a power of 2", key, t->tok[*i]);
    uint32_t div = (uint32_t)(v > 1u << 30 ? 1u << 30 : v);
    if (!strcmp(interval, ">")) {
      for (int k = last + 1; k < MB_ALLOC_INTERVALS; k++) table[k] = div;
    } else {
      uint64_t mb = 0;
      if (!parse_u64(interval, &mb) || !pow2(mb))
        return fail(t, MB_E_INVALID_ARG, "alloc_conf: %s: interval '%s' is not a power of 2 (MiB)", key, interval);
      int idx = (int)log2_floor(mb);
      if (idx >= MB_ALLOC_INTERVALS) idx = MB_ALLOC_INTERVALS - 1;
      if (first)
        for (int k = 0; k < idx; k++) table[k] = div;
      table[idx] = div;
      last = idx;
      first = false;
    }
    if (*i + 1 >= t->n) return fail(t, MB_E_INVALID_ARG, "alloc_conf: %s: missing ']'", key);
    if (!is(t, *i + 1, "]")) {
      if (!is(t, *i + 1, ",")) return fail(t, MB_E_INVALID_ARG, "alloc_conf: %s: expected ',' or ']'", key);
      (*i)++;
    }
  }
  memcpy(c->roundup_divisions, table, sizeof table);
  return MB_OK;
}

/* keys PyTorch accepts that do not change device segments: host (pinned) memory, locking,
 * OOM behaviour, the virtual-address reserve of expandable segments */
static const char *const no_effect[] = {
  "release_lock_on_cudamalloc", "release_lock_on_hipmalloc", "pinned_use_cuda_host_register",
  "pinned_use_hip_host_register", "pinned_num_register_threads", "pinned_use_background_threads",
  "pinned_reserve_segment_size_mb", "pinned_free_catch_all", "pinned_max_round_threshold",
  "pinned_max_cached_size", "graph_capture_record_stream_reuse", "throw_on_cudamalloc_oom",
  "expandable_segments_reserve", "expandable_segments_reserve_by_class",
  "expandable_segments_handle_type", NULL};

static int skip_value(tokens *t, size_t *i, const char *key) {
  if (value_of(t, i, key) != MB_OK) return MB_E_INVALID_ARG;
  if (!is(t, *i, "[")) return MB_OK;
  while (*i < t->n && !is(t, *i, "]")) (*i)++;
  if (*i >= t->n) return fail(t, MB_E_INVALID_ARG, "alloc_conf: %s: missing ']'", key);
  return MB_OK;
}

static int one_key(tokens *t, size_t *i, mb_alloc_config *c) {
  const char *key = t->tok[*i];
  if (!strcmp(key, ",") || !strcmp(key, ":") || !strcmp(key, "[") || !strcmp(key, "]"))
    return fail(t, MB_E_INVALID_ARG, "alloc_conf: expected a key, found '%s'", key);
  for (int k = 0; no_effect[k]; k++)
    if (!strcmp(key, no_effect[k])) return skip_value(t, i, key);
  if (value_of(t, i, key) != MB_OK) return MB_E_INVALID_ARG;
  const char *val = t->tok[*i];
  double f = 0;
  if (!strcmp(key, "max_split_size_mb")) return megabytes(t, *i, key, MB_ALLOC_LARGE_BUFFER / MB_MIB, &c->max_split_size);
  if (!strcmp(key, "max_non_split_rounding_mb"))
    return megabytes(t, *i, key, MB_ALLOC_LARGE_BUFFER / MB_MIB, &c->max_non_split_rounding);
  if (!strcmp(key, "large_segment_size_mb")) return megabytes(t, *i, key, 1, &c->large_segment_size);
  if (!strcmp(key, "expandable_segments")) return boolean(t, *i, key, &c->expandable);
  if (!strcmp(key, "roundup_power2_divisions")) return divisions(t, i, c);
  if (!strcmp(key, "garbage_collection_threshold")) {
    if (!parse_double(val, &f) || !(f > 0.0 && f < 1.0))
      return fail(t, MB_E_INVALID_ARG, "alloc_conf: %s: '%s' is not in (0.0, 1.0)", key, val);
    c->gc_threshold = f;
    return MB_OK;
  }
  if (!strcmp(key, "per_process_memory_fraction")) {
    if (!parse_double(val, &f) || !(f > 0.0 && f <= 1.0))
      return fail(t, MB_E_INVALID_ARG, "alloc_conf: %s: '%s' is not in (0.0, 1.0]", key, val);
    c->memory_fraction = f;
    return MB_OK;
  }
  if (!strcmp(key, "backend")) {
    if (!strcmp(val, "native")) return MB_OK;
    if (!strcmp(val, "cudaMallocAsync"))
      return fail(t, MB_E_UNSUPPORTED, "alloc_conf: backend:cudaMallocAsync hands memory to CUDA's own pool "
                  "allocator, which membudget does not model (use backend:native)");
    return fail(t, MB_E_INVALID_ARG, "alloc_conf: backend: '%s' is not native or cudaMallocAsync", val);
  }
  return fail(t, MB_E_INVALID_ARG, "alloc_conf: unrecognized key '%s'", key);
}

int mb_alloc_config_parse(mb_alloc_config *c, const char *conf, char *err, size_t err_size) {
  tokens *t = calloc(1, sizeof *t);
  if (!t) return MB_E_NOMEM;
  t->err = err;
  t->err_size = err_size;
  mb_alloc_config next = *c;
  int rc = conf ? tokenize(t, conf) : MB_OK;
  for (size_t i = 0; rc == MB_OK && i < t->n; i++) {
    rc = one_key(t, &i, &next);
    if (rc == MB_OK && i + 1 < t->n) {
      if (!is(t, ++i, ",")) rc = fail(t, MB_E_INVALID_ARG, "alloc_conf: expected ',' before '%s'", t->tok[i]);
    }
  }
  if (rc == MB_OK) *c = next;
  free(t);
  return rc;
}

uint32_t mb_alloc_divisions(const mb_alloc_config *c, uint64_t size) {
  /* the interval of size: log2(size) - log2(1 MiB), clamped to the table */
  int idx = size ? (int)log2_floor(size) - 20 : 0;
  if (idx < 0) idx = 0;
  if (idx >= MB_ALLOC_INTERVALS) idx = MB_ALLOC_INTERVALS - 1;
  return c->roundup_divisions[idx];
}
