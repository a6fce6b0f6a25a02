/* libFuzzer target: shapes plus estimate on real loaded models under a fuzzed training setup.
 * fuzz_load.c mutates the model, so what loads is mostly tiny; here the models are the zoo's
 * (loaded once, shared by every input, as a caller would) and the input is the setup:
 *
 *   byte 0     which model (mod the table below); bit 4: the JSON with its trace
 *   then lines "key=value" for mb_setup_set, plus
 *              "batch=N" (mb_setup_set_batch), "dim NAME=N" (mb_setup_set_dim),
 *              "freeze=GLOB", "trainable=GLOB", "teacher=" (the model is its own teacher)
 *
 * Then mb_infer_shapes, mb_estimate and mb_estimate_json. Bad keys and values must fail with a
 * message; an estimate that succeeds must add up and agree with its JSON twin. A broken
 * invariant aborts so that libFuzzer keeps the input. Seeds: tests/fuzz/corpus/estimate/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "membudget/membudget.h"

#ifndef MB_FUZZ_MODELS_DIR
#define MB_FUZZ_MODELS_DIR "models"
#endif

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Small models that reach different parts of the simulation: convolutions and batch norm, a
 * transformer with attention and tied embeddings, a graph network with per-sample dims, fp16
 * and bf16 initializers, control flow in subgraphs. */
static const char *const files[] = {"resnet18.onnx", "gpt2_small_like.onnx", "gnn/gat.torchscript.onnx",
                                    "edge/fp16_bf16.onnx", "edge/tied_weights.onnx", "edge/subgraphs.onnx"};
enum { N_FILES = sizeof files / sizeof files[0] };
static mb_model *models[N_FILES]; /* the fuzzer's own state: loaded once, read-only after */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  for (size_t i = 0; i < N_FILES; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", MB_FUZZ_MODELS_DIR, files[i]);
    if (mb_model_load_file(path, &models[i]) != MB_OK) {
      fprintf(stderr, "fuzz_estimate: %s: %s\n", path, mb_model_errmsg(models[i]));
      exit(1);
    }
  }
  return 0;
}

static void broken(const char *what, int rc, const mb_setup *s) {
  fprintf(stderr, "membudget fuzz: API invariant broken: %s (status %d: %s)\n", what, rc,
          s ? mb_setup_errmsg(s) : "");
  abort();
}

/* One "key=value" line (NUL-terminated, '=' at eq) into the setup; failing is fine with a
 * message. */
static void apply(mb_setup *s, const mb_model *m, char *line, char *eq) {
  *eq = 0;
  const char *key = line, *value = eq + 1;
  int rc;
  if (!strcmp(key, "batch")) rc = mb_setup_set_batch(s, strtoll(value, NULL, 10));
  else if (!strncmp(key, "dim ", 4)) rc = mb_setup_set_dim(s, key + 4, strtoll(value, NULL, 10));
  else if (!strcmp(key, "freeze")) rc = mb_setup_add_freeze(s, value);
  else if (!strcmp(key, "trainable")) rc = mb_setup_add_trainable(s, value);
  else if (!strcmp(key, "teacher")) rc = mb_setup_set_teacher(s, m);
  else rc = mb_setup_set(s, key, value);
  if (rc != MB_OK && !*mb_setup_errmsg(s)) broken("a setup call failed without a message", rc, s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > 4096) return -1; /* -1: not added to the corpus */
  const mb_model *m = models[data[0] % N_FILES];
  int trace = (data[0] >> 4) & 1;
  char *text = malloc(size);
  mb_setup *s = NULL;
  if (!text || mb_setup_create(&s) != MB_OK) abort();
  memcpy(text, data + 1, size - 1);
  text[size - 1] = 0;
  for (char *line = text, *next; line; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = 0;
    char *eq = strchr(line, '=');
    if (eq) apply(s, m, line, eq);
  }

  mb_shapes *sh = NULL;
  int rc = mb_infer_shapes(m, s, &sh);
  if (rc != MB_OK && !*mb_shapes_errmsg(sh)) broken("mb_infer_shapes failed without a message", rc, NULL);
  mb_shapes_free(sh);

  mb_budget b = {.struct_size = sizeof b}, again = {.struct_size = sizeof again};
  rc = mb_estimate(m, s, &b);
  if (rc != MB_OK) {
    if (!*mb_setup_errmsg(s)) broken("mb_estimate failed without a message", rc, s);
  } else {
    if (b.allocated_peak < b.static_bytes || b.reserved_peak < b.allocated_peak ||
        b.device_peak != b.reserved_peak + b.context || b.batch_size < 1)
      broken("mb_estimate: the budget does not add up", rc, s);
    char *json = NULL;
    rc = mb_estimate_json(m, s, trace, &json, &again);
    if (rc == MB_OK && (!json || json[0] != '{' || again.allocated_peak != b.allocated_peak ||
                        again.batch_size != b.batch_size))
      broken("mb_estimate_json disagrees with mb_estimate", rc, s);
    if (rc != MB_OK && rc != MB_E_NOMEM) broken("mb_estimate_json fails where mb_estimate did not", rc, s);
    mb_free(json);
  }
  mb_setup_free(s);
  free(text);
  return 0;
}

#ifdef MB_FUZZ_ESTIMATE_REPLAY
/* Without libFuzzer (ctest: fuzz_estimate_replay): every file named, or every regular file in
 * each directory named, through the same function, in the regular test builds. A broken
 * invariant aborts; a memory error is the sanitizer's. */
#include <dirent.h>

static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "fuzz_estimate: cannot open %s\n", path);
    return 1;
  }
  static uint8_t buf[4097];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  LLVMFuzzerTestOneInput(buf, n);
  return 0;
}

int main(int argc, char **argv) {
  LLVMFuzzerInitialize(&argc, &argv);
  int bad = 0, count = 0;
  for (int a = 1; a < argc; a++) {
    DIR *d = opendir(argv[a]);
    if (!d) {
      bad |= replay_file(argv[a]);
      count++;
      continue;
    }
    for (struct dirent *e; (e = readdir(d));) {
      if (e->d_name[0] == '.') continue;
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", argv[a], e->d_name);
      bad |= replay_file(path);
      count++;
    }
    closedir(d);
  }
  printf("fuzz_estimate: %d inputs replayed\n", count);
  return bad || !count;
}
#endif
