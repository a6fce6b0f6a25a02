/* Many threads, one model: a loaded model is immutable and the library keeps no global mutable
 * state, so estimates on one shared mb_model from several threads (each with its own setups)
 * must give, byte for byte, the budgets and JSON documents one thread gives.
 *
 *   test_threads [--threads N] [--iters N] [MODELS_DIR]      (default 8 threads x 1000 estimates)
 *
 * First, single-threaded, the reference: every setup of the table below estimated twice (the
 * two must agree: the reference itself is deterministic) and rendered as JSON. Then N threads
 * each run `iters` estimates over the same table, starting at different rows, on the shared
 * models, alternating mb_estimate and mb_estimate_json, and compare each result with the
 * reference. Each thread also loads its own copy of one model, so loading runs concurrently
 * too. Run under ThreadSanitizer by scripts/test.sh (build/tsan, -DMB_TSAN=ON), where a data
 * race fails the test even when the results happen to agree. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "membudget/membudget.h"

#ifndef MB_MODELS_DIR
#define MB_MODELS_DIR "models"
#endif

/* The models every thread shares: a transformer (attention, embeddings, layer norms) and a
 * convolutional network (cuDNN workspaces, batch norm buffers). */
static const char *const model_files[] = {"gpt2_small_like.onnx", "resnet18.onnx"};
enum { N_MODELS = 2 };

/* What the threads estimate: batch sizes, optimizers, precisions and the options that take
 * different paths through the simulation (checkpointing, a teacher, evaluation, the allocator
 * model or the flat allowance, several ranks, the batch-size solve). batch 0: solved. */
typedef struct row {
  int model;
  int64_t batch;
  int64_t sequence; /* the transformer's "sequence" dim (0: the model has none) */
  int teacher;      /* the shared model is also the setup's teacher */
  const char *opts[6][2];
} row;

static const row rows[] = {
    {0, 1, 128, 0, {{"optimizer", "adamw"}}},
    {0, 4, 128, 0, {{"optimizer", "sgd-momentum"}, {"precision", "amp-bf16"}}},
    {0, 16, 128, 0, {{"optimizer", "adafactor"}, {"checkpoint", "*"}, {"attention", "eager"}}},
    {0, 2, 128, 1, {{"optimizer", "lion"}, {"precision", "bf16"}, {"master_weights", "1"}, {"ema", "1"}}},
    {0, 8, 128, 0, {{"optimizer", "adamw-8bit"}, {"eval_batch", "train"}, {"zero_grad", "zero"}}},
    {0, 3, 128, 0, {{"strategy", "fsdp"}, {"world_size", "4"}, {"alloc_conf", "expandable_segments:True"}}},
    {0, 0, 128, 0, {{"gpu", "a100-40gb"}, {"precision", "amp-fp16"}}},
    {1, 32, 0, 0, {{"optimizer", "sgd"}, {"fragmentation", "0.2"}}},
    {1, 8, 0, 0, {{"optimizer", "rmsprop"}, {"precision", "amp-fp16"}, {"backend", "cpu"}}},
    {1, 5, 0, 1, {{"optimizer", "adagrad"}, {"strategy", "ddp"}, {"world_size", "2"}, {"top", "5"}}},
    {1, 0, 0, 0, {{"device_memory", "8GiB"}, {"optimizer", "adam"}, {"batch_multiple", "8"}}},
};
enum { N_ROWS = sizeof rows / sizeof rows[0] };

typedef struct reference {
  mb_budget budget;
  char *json;
} reference;

typedef struct shared {
  mb_model *models[N_MODELS];
  reference ref[N_ROWS];
  char *info_json;               /* mb_model_info_json of models[1], the reference for loads */
  int iters;
} shared;

typedef struct worker {
  const shared *sh;
  int index;
  int errors;     /* results that differ from the reference */
  int failures;   /* calls that failed */
  pthread_t thread;
} worker;

static char models_dir[4096] = MB_MODELS_DIR;

static mb_setup *make_setup(const shared *sh, const row *r) {
  mb_setup *s = NULL;
  if (mb_setup_create(&s) != MB_OK) return NULL;
  for (size_t k = 0; k < 6 && r->opts[k][0]; k++) {
    if (mb_setup_set(s, r->opts[k][0], r->opts[k][1]) != MB_OK) {
      fprintf(stderr, "setup %s=%s: %s\n", r->opts[k][0], r->opts[k][1], mb_setup_errmsg(s));
      mb_setup_free(s);
      return NULL;
    }
  }
  if ((r->batch && mb_setup_set_batch(s, r->batch) != MB_OK) ||
      (r->sequence && mb_setup_set_dim(s, "sequence", r->sequence) != MB_OK) ||
      (r->teacher && mb_setup_set_teacher(s, sh->models[r->model]) != MB_OK)) {
    fprintf(stderr, "setup: %s\n", mb_setup_errmsg(s));
    mb_setup_free(s);
    return NULL;
  }
  return s;
}

/* One estimate of row i into *b (zeroed first, so the comparison sees only what the library
 * wrote) and, when json is not NULL, its JSON document. */
static int estimate(const shared *sh, size_t i, mb_budget *b, char **json) {
  mb_setup *s = make_setup(sh, &rows[i]);
  if (!s) return -1;
  memset(b, 0, sizeof *b);
  b->struct_size = sizeof *b;
  int rc = json ? mb_estimate_json(sh->models[rows[i].model], s, 0, json, b)
                : mb_estimate(sh->models[rows[i].model], s, b);
  if (rc != MB_OK) fprintf(stderr, "row %zu: status %d: %s\n", i, rc, mb_setup_errmsg(s));
  mb_setup_free(s);
  return rc == MB_OK ? 0 : -1;
}

static int load(const char *file, mb_model **m) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", models_dir, file);
  int rc = mb_model_load_file(path, m);
  if (rc != MB_OK) fprintf(stderr, "%s: %s\n", path, mb_model_errmsg(*m));
  return rc == MB_OK ? 0 : -1;
}

static void *work(void *arg) {
  worker *w = arg;
  const shared *sh = w->sh;
  /* a load of our own, while the other threads load or estimate */
  mb_model *own = NULL;
  char *info = NULL;
  if (load(model_files[1], &own) != 0 || mb_model_info_json(own, NULL, &info) != MB_OK) w->failures++;
  else if (strcmp(info, sh->info_json) != 0) w->errors++;
  mb_free(info);
  mb_model_free(own);

  for (int it = 0; it < sh->iters; it++) {
    size_t i = (size_t)(w->index * 3 + it) % N_ROWS; /* threads start at different rows */
    int with_json = (it + w->index) % 2;
    mb_budget b;
    char *json = NULL;
    if (estimate(sh, i, &b, with_json ? &json : NULL) != 0) {
      w->failures++;
    } else if (memcmp(&b, &sh->ref[i].budget, sizeof b) != 0 ||
               (with_json && strcmp(json, sh->ref[i].json) != 0)) {
      if (w->errors++ == 0)
        fprintf(stderr, "thread %d, estimate %d: row %zu differs from the single-threaded %s\n",
                w->index, it, i, with_json && strcmp(json, sh->ref[i].json) ? "JSON" : "budget");
    }
    mb_free(json);
  }
  return NULL;
}

int main(int argc, char **argv) {
  int threads = 8, iters = 1000;
  for (int a = 1; a < argc; a++) {
    if (!strcmp(argv[a], "--threads") && a + 1 < argc) threads = atoi(argv[++a]);
    else if (!strcmp(argv[a], "--iters") && a + 1 < argc) iters = atoi(argv[++a]);
    else if (argv[a][0] != '-') snprintf(models_dir, sizeof models_dir, "%s", argv[a]);
    else {
      fprintf(stderr, "usage: test_threads [--threads N] [--iters N] [MODELS_DIR]\n");
      return 2;
    }
  }
  if (threads < 1 || threads > 256 || iters < 0) {
    fprintf(stderr, "test_threads: 1 to 256 threads, iters >= 0\n");
    return 2;
  }

  static shared sh; /* main's; handed to the threads read-only */
  sh.iters = iters;
  int bad = 0;
  for (int k = 0; k < N_MODELS; k++)
    if (load(model_files[k], &sh.models[k]) != 0) return 1;
  if (mb_model_info_json(sh.models[1], NULL, &sh.info_json) != MB_OK) return 1;

  /* the reference, single-threaded; twice, and the two must agree */
  for (size_t i = 0; i < N_ROWS; i++) {
    mb_budget again;
    char *json2 = NULL;
    if (estimate(&sh, i, &sh.ref[i].budget, &sh.ref[i].json) != 0 || estimate(&sh, i, &again, &json2) != 0)
      return 1;
    if (memcmp(&again, &sh.ref[i].budget, sizeof again) || strcmp(json2, sh.ref[i].json)) {
      fprintf(stderr, "row %zu: two single-threaded estimates differ\n", i);
      bad = 1;
    }
    /* the rows must differ from each other, or the comparison could not tell them apart */
    for (size_t j = 0; j < i; j++)
      if (!strcmp(sh.ref[j].json, sh.ref[i].json)) {
        fprintf(stderr, "rows %zu and %zu give the same JSON\n", j, i);
        bad = 1;
      }
    mb_free(json2);
  }

  worker *ws = calloc((size_t)threads, sizeof *ws);
  if (!ws) return 1;
  int started = 0;
  for (int t = 0; t < threads; t++) {
    ws[t].sh = &sh;
    ws[t].index = t;
    if (pthread_create(&ws[t].thread, NULL, work, &ws[t]) != 0) {
      fprintf(stderr, "pthread_create failed at thread %d\n", t);
      bad = 1;
      break;
    }
    started++;
  }
  int errors = 0, failures = 0;
  for (int t = 0; t < started; t++) {
    pthread_join(ws[t].thread, NULL);
    errors += ws[t].errors;
    failures += ws[t].failures;
  }
  printf("test_threads: %d threads x %d estimates on %d shared models, %d setups: "
         "%d differ from the single-threaded results, %d failed\n",
         started, iters, N_MODELS, (int)N_ROWS, errors, failures);
  free(ws);
  for (size_t i = 0; i < N_ROWS; i++) mb_free(sh.ref[i].json);
  mb_free(sh.info_json);
  for (int k = 0; k < N_MODELS; k++) mb_model_free(sh.models[k]);
  return bad || errors || failures || started != threads ? 1 : 0;
}
