/* where_it_goes: one training step of an ONNX model on a GPU, through the C API.
 *
 *     where_it_goes MODEL.onnx GPU STEP.svg
 *
 * Loads the model, solves the largest batch size that fits the GPU (a name from `membudget
 * gpus`), prints the budget's summary line, its peaks, the step as a training loop logs it, the
 * top-level modules, the three largest tensors at the peak and the simulated advice, and draws
 * the step into STEP.svg. Every status is checked and every handle freed. docs/c-api.md walks
 * through it; `membudget estimate MODEL --gpu GPU --by-module --top 3 --advise` prints the same.
 */
#include <stdio.h>
#include <string.h>

#include <membudget/membudget.h>

#define TOP_TENSORS 3

/* Bytes as people read them, with the CLI's units ("57.89 GiB"). */
static const char *human(char buf[32], uint64_t bytes) {
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) {
    snprintf(buf, 32, "%llu B", (unsigned long long)bytes);
    return buf;
  }
  double x = (double)bytes / 1024.0;
  int u = 0;
  while (x >= 1024.0 && u < 5) {
    x /= 1024.0;
    u++;
  }
  snprintf(buf, 32, "%.2f %s", x, units[u]);
  return buf;
}

/* A failed call: its status, and the message the handle that holds it kept. */
static int failed(const char *what, int status, const char *message) {
  fprintf(stderr, "where_it_goes: %s: %s%s%s\n", what, mb_status_str(status),
          *message ? ": " : "", message);
  return 1;
}

/* The step's peaks, each beside the PyTorch counter it predicts, and the phases as a training
 * loop logs them: torch.cuda.memory_allocated() between the phases, the peaks inside them. */
static void print_peaks(const mb_budget *b) {
  char h[32], h2[32];
  printf("\npeaks (bytes):\n");
  printf("  allocated peak   %16llu  %10s  torch.cuda.max_memory_allocated()\n",
         (unsigned long long)b->allocated_peak, human(h, b->allocated_peak));
  printf("  reserved peak    %16llu  %10s  torch.cuda.max_memory_reserved()\n",
         (unsigned long long)b->reserved_peak, human(h, b->reserved_peak));
  printf("  CUDA context     %16llu  %10s\n", (unsigned long long)b->context, human(h, b->context));
  printf("  device peak      %16llu  %10s  reserved + context: what nvidia-smi shows\n",
         (unsigned long long)b->device_peak, human(h, b->device_peak));
  /* fits: 1 or 0 with a device memory (-1 without one); available is signed, < 0 when short */
  if (b->fits == 1)
    printf("  fits in %s usable with %s to spare; the allocated peak is in %s\n",
           human(h, b->usable_memory), human(h2, (uint64_t)b->available),
           mb_phase_name(b->peak_phase));
  else
    printf("  does NOT fit in %s usable (available %lld bytes; %d requests found no room)\n",
           human(h, b->usable_memory), (long long)b->available, (int)b->allocator_ooms);

  const struct { const char *label; uint64_t bytes; } step[] = {
    {"after setup", b->level_after_setup},
    {"forward peak (with the loss)", b->forward_peak},
    {"after forward and loss", b->level_after_forward},
    {"backward peak", b->backward_peak},
    {"after backward", b->level_after_backward},
    {"optimizer step peak", b->optimizer_peak},
    {"after optimizer step", b->level_after_optimizer},
  };
  printf("\nthe step as a training loop logs it (allocated bytes):\n");
  for (size_t i = 0; i < sizeof step / sizeof step[0]; i++)
    printf("  %-29s %16llu  %10s\n", step[i].label, (unsigned long long)step[i].bytes,
           human(h, step[i].bytes));
}

/* The roots of the module tree and their children (depth 1), then the "no module" entry. The
 * figures are subtree totals: a root's children add up to at most the root. */
static int print_modules(const mb_modules *mods, const mb_budget *b) {
  printf("\nmodules at batch %lld, depth 1 (parameters; kept for backward; at the allocated"
         " peak):\n", (long long)b->batch_size);
  for (size_t i = 0; i < mb_modules_num(mods); i++) {
    mb_module_info m = {.struct_size = sizeof m};
    int st = mb_modules_get(mods, i, &m);
    if (st != MB_OK) return failed("mb_modules_get", st, "");
    if (m.depth > 1) continue;
    char name[64], p[32], k[32], a[32];
    if (!m.path) snprintf(name, sizeof name, "(no module)");
    else if (m.depth == 0) snprintf(name, sizeof name, "(%s)", m.model == 1 ? "teacher" : "model");
    else snprintf(name, sizeof name, "  %s%.50s", m.model == 1 ? "teacher:" : "", m.path);
    printf("  %-20s %10s %10s %10s %5.1f%%\n", name, human(p, m.parameters), human(k, m.kept),
           human(a, m.at_peak), 100.0 * (double)m.at_peak / (double)b->allocated_peak);
  }
  return 0;
}

/* The largest tensors alive at the allocated peak (the list is sorted largest first). */
static int print_top(const mb_modules *mods) {
  printf("\nthe %d largest tensors at the allocated peak (bytes, category, phase, module,"
         " tensor):\n", TOP_TENSORS);
  for (size_t i = 0; i < TOP_TENSORS && i < mb_modules_num_tensors(mods); i++) {
    mb_peak_tensor t = {.struct_size = sizeof t};
    int st = mb_modules_tensor(mods, i, &t);
    if (st != MB_OK) return failed("mb_modules_tensor", st, "");
    char h[32];
    /* module: NULL for no module (optimizer states, the batch, ...), "" for the model's root */
    const char *module = !t.module ? "-" : *t.module ? t.module : "(root)";
    printf("  %12llu  %10s  %-12s %-9s %-10s %s\n", (unsigned long long)t.bytes, human(h, t.bytes),
           mb_category_name(t.category), mb_phase_name(t.phase), module, t.tensor);
  }
  return 0;
}

/* Each advice line is the step simulated again with one change to the setup: what it is, its
 * device peak at the baseline's batch (or a smaller micro-batch) and the largest batch that fits
 * with it, the `membudget estimate` flags that make the change, and a note when there is one. */
static int print_advice(const mb_advice *adv, const mb_budget *b) {
  const char *reason = "";
  int due = mb_advice_due(b, &reason);
  printf("\nadvice (%s), each line the step simulated again with one change:\n",
         due ? reason : "asked for; not due");
  if (!mb_advice_num(adv)) printf("  nothing simulated lowers the device peak\n");
  for (size_t i = 0; i < mb_advice_num(adv); i++) {
    mb_advice_line l = {.struct_size = sizeof l};
    int st = mb_advice_get(adv, i, &l);
    if (st != MB_OK) return failed("mb_advice_get", st, "");
    char h[32];
    printf("  %s: %s%s\n", mb_advice_kind_name(l.kind), l.what_if ? "what-if: " : "", l.title);
    printf("    device peak %s at batch %lld", human(h, l.device_peak), (long long)l.batch_size);
    if (l.grad_accumulation > 1) printf(" x %lld steps", (long long)l.grad_accumulation);
    if (l.solved_batch > 0) printf("; largest batch that fits %lld", (long long)l.solved_batch);
    else if (l.solved_batch == 0) printf("; no batch fits"); /* -1: no device memory */
    printf("\n    %s\n", l.flags);
    if (*l.note) printf("    note: %s\n", l.note);
  }
  return 0;
}

static int write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  if (!f) {
    perror(path);
    return 1;
  }
  size_t n = strlen(text);
  int bad = fwrite(text, 1, n, f) != n;
  if (fclose(f) != 0) bad = 1;
  if (bad) perror(path);
  return bad;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: where_it_goes MODEL.onnx GPU STEP.svg\n");
    return 2;
  }
  const char *path = argv[1], *gpu = argv[2], *svg_path = argv[3];
  /* Every handle starts NULL and every *_free accepts NULL: one exit path frees them all. */
  mb_model *model = NULL;
  mb_setup *setup = NULL;
  mb_modules *mods = NULL;
  mb_advice *adv = NULL;
  char *svg = NULL;
  mb_budget b = {.struct_size = sizeof b}; /* the library writes only what fits in it */
  int rc = 1, st;

  /* A failed load still hands back a model whose message names the file, node or tensor. */
  if ((st = mb_model_load_file(path, &model)) != MB_OK) {
    failed(path, st, mb_model_errmsg(model));
    goto done;
  }
  if ((st = mb_setup_create(&setup)) != MB_OK) {
    failed("mb_setup_create", st, "");
    goto done;
  }
  /* Calls that take a setup leave their messages in it. */
  if ((st = mb_setup_set(setup, "gpu", gpu)) != MB_OK) {
    failed("mb_setup_set", st, mb_setup_errmsg(setup));
    goto done;
  }
  /* No batch size in the setup: mb_estimate solves for the largest that fits. */
  if ((st = mb_estimate(model, setup, &b)) != MB_OK) {
    failed("mb_estimate", st, mb_setup_errmsg(setup));
    goto done;
  }
  char line[512];
  mb_budget_summary(&b, line, sizeof line);
  printf("model      %s\n", path);
  printf("batch      %lld%s\n", (long long)b.batch_size,
         b.solved ? " (solved: the largest that fits)" : "");
  printf("%s\n", line);
  print_peaks(&b);

  /* The module tree needs a batch size: the one just solved. */
  if ((st = mb_modules_create(model, setup, b.batch_size, &mods)) != MB_OK) {
    failed("mb_modules_create", st, mb_setup_errmsg(setup));
    goto done;
  }
  if (print_modules(mods, &b) || print_top(mods)) goto done;

  /* mb_advise always simulates (mb_advice_due says whether the CLI's rules would ask). It changes
   * the setup during the call and restores it; the setup has no batch, so it solves again. */
  if ((st = mb_advise(model, setup, &adv)) != MB_OK) {
    failed("mb_advise", st, mb_setup_errmsg(setup));
    goto done;
  }
  if (print_advice(adv, &b)) goto done;

  /* The picture at the solved batch, titled with the file name as the CLI titles it. */
  const char *slash = strrchr(path, '/');
  if ((st = mb_timeline_svg(model, setup, b.batch_size, slash ? slash + 1 : path, &svg)) != MB_OK) {
    failed("mb_timeline_svg", st, mb_setup_errmsg(setup));
    goto done;
  }
  if (write_file(svg_path, svg)) goto done;
  printf("\ntimeline   %s (%zu bytes of SVG)\n", svg_path, strlen(svg));
  rc = 0;

done:
  mb_free(svg); /* the caller's char *: released with mb_free */
  mb_advice_free(adv);
  mb_modules_free(mods);
  mb_setup_free(setup);
  mb_model_free(model);
  return rc;
}
