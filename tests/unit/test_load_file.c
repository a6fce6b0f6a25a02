/* Loading from a file (src/onnx/reader.c: pread through a window) against loading the same
 * bytes from a buffer, and what loading a file with embedded weights costs in memory and
 * page-cache reads.
 *
 * 1. Every committed model, every prefix of a synthetic one whose fields straddle the
 *    reader's window and page boundaries, and mutants of one, load from a file exactly as
 *    from a buffer: the same status, the same message, the same `info` JSON.
 * 2. Peak RSS: a model with 64 MiB of embedded weights in 128 tensors, loaded in a fresh
 *    process, peaks within MAX_EXTRA_KIB of its weightless twin (the same tensors without
 *    data) when the file was just written (its page cache in large folios: mapping it once
 *    cost ~1.5 MiB per tensor header touched), after it was read whole (warm) and after it
 *    was dropped from the page cache (cold).
 * 3. Weight pages are never read: after a cold load, mincore() on a fresh mapping finds at
 *    most a page at each end of each payload in the page cache, not its interior. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mbtest.h"
#include "membudget/membudget.h"
#include "onnx/reader.h"
#include "pbuild.h"

#define N_TENSORS 128
#define PAYLOAD (512u << 10) /* bytes of raw_data per tensor: 64 MiB in all */
#define MAX_EXTRA_KIB 3072   /* "a few MB" over the weightless twin */

static char dir[64];

static void path_in_dir(char *out, size_t n, const char *name) {
  snprintf(out, n, "%s/%s", dir, name);
}

static int write_all(int fd, const void *p, size_t n) {
  const uint8_t *b = p;
  while (n) {
    ssize_t w = write(fd, b, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    b += w;
    n -= (size_t)w;
  }
  return 0;
}

static int write_file(const char *path, const void *p, size_t n) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return -1;
  int rc = write_all(fd, p, n);
  return close(fd) == 0 ? rc : -1;
}

/* ------------------------------------------------------------------ 1. file == buffer */

/* Load `bytes` from a buffer and from the file `path` holding them: same outcome. */
static void check_same(const char *path, const uint8_t *bytes, size_t len) {
  mb_model *mb = NULL, *mf = NULL;
  int rb = mb_model_load_buffer(bytes, len, &mb);
  int rf = mb_model_load_file(path, &mf);
  CHECK_EQ_I64(rf, rb);
  if (rb != MB_OK || rf != MB_OK) {
    /* the file's message is the buffer's, after the path */
    const char *eb = mb_model_errmsg(mb), *ef = mb_model_errmsg(mf);
    size_t lb = strlen(eb), lf = strlen(ef);
    int same = lf >= lb && !strcmp(ef + lf - lb, eb);
    if (!same) fprintf(stderr, "%s: file says \"%s\", buffer says \"%s\"\n", path, ef, eb);
    CHECK(same);
  } else {
    char *jb = NULL, *jf = NULL;
    CHECK_EQ_I64(mb_model_info_json(mb, NULL, &jb), MB_OK);
    CHECK_EQ_I64(mb_model_info_json(mf, NULL, &jf), MB_OK);
    int same = jb && jf && !strcmp(jb, jf);
    if (!same) fprintf(stderr, "%s: info JSON differs between file and buffer\n", path);
    CHECK(same);
    free(jb);
    free(jf);
  }
  mb_model_free(mb);
  mb_model_free(mf);
}

static uint8_t *read_whole(const char *path, size_t *len) {
  int fd = open(path, O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    if (fd >= 0) close(fd);
    return NULL;
  }
  uint8_t *b = malloc((size_t)st.st_size + 1);
  size_t got = 0;
  while (b && got < (size_t)st.st_size) {
    ssize_t r = read(fd, b + got, (size_t)st.st_size - got);
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(fd);
  *len = got;
  return b;
}

static void test_committed_models(void) {
  static const char *const dirs[] = {"", "edge", "torch2", "gnn"};
  int files = 0;
  for (size_t k = 0; k < sizeof dirs / sizeof dirs[0]; k++) {
    char dpath[1024];
    snprintf(dpath, sizeof dpath, "%s/%s", MB_MODELS_DIR, dirs[k]);
    DIR *dh = opendir(dpath);
    if (!dh) continue;
    struct dirent *e;
    while ((e = readdir(dh))) {
      size_t n = strlen(e->d_name);
      if (n < 5 || strcmp(e->d_name + n - 5, ".onnx")) continue;
      char path[2048];
      snprintf(path, sizeof path, "%s/%s", dpath, e->d_name);
      size_t len = 0;
      uint8_t *bytes = read_whole(path, &len);
      CHECK(bytes != NULL);
      if (bytes) check_same(path, bytes, len);
      free(bytes);
      files++;
    }
    closedir(dh);
  }
  CHECK(files >= 10);
}

/* A model whose fields cross the window in every way: a long doc string (read straight
 * into the slim copy), kept payloads and names across page boundaries, dropped payloads of
 * every payload kind (raw, packed floats, packed varints), many nodes (sequential reads
 * that grow the window to its maximum), then every prefix of it at a stride, and the
 * same bytes with a length pointing past the end. */
static pb straddling_model(void) {
  pb g = {0};
  int64_t xd[] = {-1, 8};
  pb_value_info(&g, GRAPH_INPUT, "x", 1, xd, 2);
  char name[64], prev[64] = "x";
  for (int i = 0; i < 3000; i++) { /* ~100 KiB of nodes */
    snprintf(name, sizeof name, "relu_output_with_a_long_name_%d", i);
    pb_node(&g, name, "Relu", (const char *[]){prev, NULL}, (const char *[]){name, NULL});
    memcpy(prev, name, sizeof prev);
  }
  pb_value_info(&g, GRAPH_OUTPUT, prev, 1, xd, 2);
  size_t doc = (MB_READER_WINDOW_MAX * 3) / 2;
  char *s = malloc(doc);
  memset(s, 'd', doc);
  pb_bytes(&g, 10 /* GraphProto.doc_string */, s, doc);
  free(s);
  for (int i = 0; i < 40; i++) {
    /* sizes around the keep limit and the page size, with odd name lengths */
    long sizes[] = {1, 4093, 4096, 4100, 9000, 70001};
    long raw = sizes[i % 6] / 4 * 4;
    int64_t dims[] = {raw / 4};
    snprintf(name, sizeof name, "w%0*d", 1 + i % 7, i);
    if (i % 3 == 0) {
      pb_init(&g, name, 1, dims, 1, raw);
    } else { /* float_data (packed fixed32) or int64_data (packed varints) */
      pb t = {0};
      pb_int(&t, TENSOR_DIMS, dims[0]);
      int packed_varints = i % 3 == 2;
      pb_int(&t, TENSOR_DTYPE, packed_varints ? 7 : 1);
      pb_str(&t, TENSOR_NAME, name);
      pb p = {0};
      for (long k = 0; k < dims[0]; k++) {
        if (packed_varints) pb_varint(&p, (uint64_t)(k * 131) & 0x3FFF);
        else pb_raw(&p, "\0\0\x80\x3f", 4);
      }
      pb_bytes(&t, packed_varints ? 7 : 4, p.d, p.len);
      pb_free(&p);
      pb_msg(&g, GRAPH_INIT, &t);
    }
  }
  return pb_model(&g);
}

static void test_straddling_and_prefixes(void) {
  pb m = straddling_model();
  char path[128];
  path_in_dir(path, sizeof path, "straddle.onnx");
  CHECK_EQ_I64(write_file(path, m.d, m.len), 0);
  check_same(path, m.d, m.len);
  mb_model *model = NULL;
  CHECK_EQ_I64(mb_model_load_file(path, &model), MB_OK);
  CHECK_EQ_U64(mb_model_num_initializers(model), 40);
  mb_model_free(model);
  /* prefixes: every error is the buffer's error (truncation found at the same byte) */
  size_t stride = m.len / 97 + 1, n = 0;
  for (size_t cut = 1; cut < m.len; cut += stride, n++) {
    CHECK_EQ_I64(write_file(path, m.d, cut), 0);
    check_same(path, m.d, cut);
  }
  CHECK(n >= 90);
  /* the model's first length (the opset import's) claims 2^40 bytes */
  uint8_t *bad = malloc(m.len + 16);
  size_t k = 0;
  bad[k++] = 0x08, bad[k++] = 8;                          /* ir_version 8 */
  bad[k++] = (MODEL_GRAPH << 3) | 2;                      /* graph, length 2^40 */
  for (int i = 0; i < 5; i++) bad[k++] = 0x80;
  bad[k++] = 0x20;
  memcpy(bad + k, m.d, m.len);
  CHECK_EQ_I64(write_file(path, bad, k + m.len), 0);
  check_same(path, bad, k + m.len);
  CHECK_EQ_I64(mb_model_load_file(path, &model), MB_E_PARSE);
  CHECK_CONTAINS(mb_model_errmsg(model), "runs past the end");
  mb_model_free(model);
  free(bad);
  unlink(path);
  pb_free(&m);
}

/* Mutants of a committed model larger than the window (bert_base_like, 212 KB): each has a
 * few bytes overwritten (a random value, or 0x80/0xFF that make varints run on), and loads
 * from a file exactly as from a buffer. Deterministic: a fixed xorshift seed. */
static void test_mutants(void) {
  char src[1024], path[128];
  snprintf(src, sizeof src, "%s/bert_base_like.onnx", MB_MODELS_DIR);
  path_in_dir(path, sizeof path, "mutant.onnx");
  size_t len = 0;
  uint8_t *orig = read_whole(src, &len);
  CHECK(orig != NULL && len > MB_READER_WINDOW_MAX / 2);
  if (!orig) return;
  uint8_t *m = malloc(len);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  int failed_loads = 0;
  for (int i = 0; i < 60; i++) {
    memcpy(m, orig, len);
    for (int k = 0; k < 1 + i % 3; k++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      static const uint8_t special[] = {0x80, 0xFF, 0x00};
      m[x % len] = (i % 2) ? special[(x >> 32) % 3] : (uint8_t)(x >> 40);
    }
    CHECK_EQ_I64(write_file(path, m, len), 0);
    check_same(path, m, len);
    mb_model *model = NULL;
    failed_loads += mb_model_load_buffer(m, len, &model) != MB_OK;
    mb_model_free(model);
  }
  printf("mutants: %d of 60 fail to load, each the same way from a file\n", failed_loads);
  CHECK(failed_loads > 0); /* the mutations reach the structure */
  unlink(path);
  free(m);
  free(orig);
}

/* ------------------------------------------------------------------ 2-3. embedded weights */

/* N_TENSORS float initializers of PAYLOAD bytes each, embedded in raw_data or (twin) with
 * no data; written in 1 MiB pieces so that nothing near the file's size is ever in memory.
 * payload_at[i]: where tensor i's bytes start. */
static int write_weights_model(const char *path, int embedded, uint64_t *payload_at) {
  pb g = {0};
  int64_t xd[] = {-1, 4};
  pb_value_info(&g, GRAPH_INPUT, "x", 1, xd, 2);
  pb_node(&g, "r", "Relu", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
  pb_value_info(&g, GRAPH_OUTPUT, "y", 1, xd, 2);
  pb heads[N_TENSORS];
  uint64_t graph_len = g.len;
  for (int i = 0; i < N_TENSORS; i++) {
    pb t = {0};
    char name[32];
    snprintf(name, sizeof name, "layers.%d.weight", i);
    pb_int(&t, TENSOR_DIMS, PAYLOAD / 4);
    pb_int(&t, TENSOR_DTYPE, 1);
    pb_str(&t, TENSOR_NAME, name);
    uint64_t tlen = t.len;
    if (embedded) {
      pb_varint(&t, (TENSOR_RAW << 3) | 2);
      pb_varint(&t, PAYLOAD);
      tlen = t.len + PAYLOAD;
    }
    heads[i] = (pb){0};
    pb_varint(&heads[i], (GRAPH_INIT << 3) | 2);
    pb_varint(&heads[i], tlen);
    pb_raw(&heads[i], t.d, t.len);
    pb_free(&t);
    graph_len += heads[i].len + (embedded ? PAYLOAD : 0);
  }
  pb m = {0}, op = {0};
  pb_int(&m, MODEL_IR_VERSION, 8);
  pb_str(&op, OPSET_DOMAIN, "");
  pb_int(&op, OPSET_VERSION, 17);
  pb_msg(&m, MODEL_OPSET, &op);
  pb_varint(&m, (MODEL_GRAPH << 3) | 2);
  pb_varint(&m, graph_len);
  pb_raw(&m, g.d, g.len);
  pb_free(&g);
  uint8_t *chunk = malloc(1u << 20);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  int rc = chunk && fd >= 0 ? write_all(fd, m.d, m.len) : -1;
  uint64_t at = m.len;
  for (uint32_t k = 0; chunk && k < (1u << 20); k++) chunk[k] = (uint8_t)(k * 2654435761u >> 24);
  for (int i = 0; i < N_TENSORS; i++) {
    if (rc == 0) rc = write_all(fd, heads[i].d, heads[i].len);
    at += heads[i].len;
    payload_at[i] = at;
    for (size_t done = 0; embedded && rc == 0 && done < PAYLOAD; done += 1u << 20) {
      size_t n = PAYLOAD - done < (1u << 20) ? PAYLOAD - done : (1u << 20);
      rc = write_all(fd, chunk, n);
    }
    at += embedded ? PAYLOAD : 0;
    pb_free(&heads[i]);
  }
  if (fd >= 0 && close(fd) != 0) rc = -1;
  free(chunk);
  pb_free(&m);
  return rc;
}

/* Peak RSS (KiB) of a fresh process that loads path once; -1 if the load failed. */
static long child_peak_kib(const char *path) {
  pid_t pid = fork();
  if (pid == 0) {
    mb_model *m = NULL;
    int rc = mb_model_load_file(path, &m);
    mb_accounting a = {.struct_size = sizeof a};
    if (rc == MB_OK) rc = mb_account(m, NULL, &a);
    if (rc != MB_OK) fprintf(stderr, "%s: %s\n", path, mb_model_errmsg(m));
    int ok = rc == MB_OK && a.parameters == (uint64_t)N_TENSORS * PAYLOAD / 4;
    mb_model_free(m);
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  struct rusage ru;
  if (pid < 0 || wait4(pid, &status, 0, &ru) != pid) return -1;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return ru.ru_maxrss;
}

static int drop_from_cache(const char *path) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) return -1;
  int rc = fdatasync(fd) == 0 && posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0 ? 0 : -1;
  close(fd);
  return rc;
}

static void read_through(const char *path) {
  int fd = open(path, O_RDONLY);
  static uint8_t buf[1 << 16];
  while (fd >= 0 && read(fd, buf, sizeof buf) > 0) {}
  if (fd >= 0) close(fd);
}

/* Pages of [off, off + len) of the file now in the page cache (mincore on a fresh mapping,
 * which itself faults nothing in); -1 on error. */
static long cached_pages(const char *path, uint64_t off, uint64_t len) {
  long page = sysconf(_SC_PAGESIZE);
  int fd = open(path, O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return -1;
  uint64_t first = off / (uint64_t)page, last = (off + len + (uint64_t)page - 1) / (uint64_t)page;
  size_t npages = ((size_t)st.st_size + (size_t)page - 1) / (size_t)page;
  unsigned char *vec = malloc(npages);
  long n = -1;
  if (vec && mincore(map, (size_t)st.st_size, vec) == 0) {
    n = 0;
    for (uint64_t p = first; p < last && p < npages; p++) n += vec[p] & 1;
  }
  free(vec);
  munmap(map, (size_t)st.st_size);
  return n;
}

static void test_embedded_weights(void) {
  char emb[128], twin[128];
  path_in_dir(emb, sizeof emb, "embedded.onnx");
  path_in_dir(twin, sizeof twin, "weightless.onnx");
  static uint64_t at[N_TENSORS], twin_at[N_TENSORS];
  CHECK_EQ_I64(write_weights_model(twin, 0, twin_at), 0);
  long twin_kib = child_peak_kib(twin);
  CHECK(twin_kib > 0);

  /* fresh: written a moment ago, still dirty in the page cache */
  CHECK_EQ_I64(write_weights_model(emb, 1, at), 0);
  long fresh = child_peak_kib(emb);
  /* warm: read whole, as after a copy */
  read_through(emb);
  long warm = child_peak_kib(emb);
  printf("peak RSS: weightless twin %ld KiB; %u MiB embedded: fresh %ld KiB, warm %ld KiB\n",
         twin_kib, (N_TENSORS * PAYLOAD) >> 20, fresh, warm);
  CHECK(fresh > 0 && fresh <= twin_kib + MAX_EXTRA_KIB);
  CHECK(warm > 0 && warm <= twin_kib + MAX_EXTRA_KIB);

  /* cold: written back and dropped; then what the load brought into the page cache */
  long payload_pages = (long)(N_TENSORS * (PAYLOAD / 4096));
  uint64_t span = at[N_TENSORS - 1] + PAYLOAD - at[0];
  long before = drop_from_cache(emb) == 0 ? cached_pages(emb, at[0], span) : -1;
  if (before < 0 || before > payload_pages / 100) {
    /* tmpfs and some overlay file systems keep every page: nothing to observe there */
    printf("cold case skipped: the page cache kept %ld of %ld payload pages after "
           "POSIX_FADV_DONTNEED\n", before, payload_pages);
  } else {
    long cold = child_peak_kib(emb);
    CHECK(cold > 0 && cold <= twin_kib + MAX_EXTRA_KIB);
    long interior = 0, ends = 0;
    for (int i = 0; i < N_TENSORS; i++) {
      /* the reads around a header may reach into the payload's first two pages, and the
       * read after it starts in its last page: allow those */
      interior += cached_pages(emb, at[i] + 2 * 4096, PAYLOAD - 3 * 4096);
      ends += cached_pages(emb, at[i], PAYLOAD);
    }
    ends -= interior;
    printf("cold: peak RSS %ld KiB; payload pages read: %ld at the ends, %ld inside, of %ld "
           "(%ld cached before)\n", cold, ends, interior, payload_pages, before);
    CHECK(interior <= N_TENSORS / 16); /* a stray page is no failure, a readahead is */
    CHECK(interior + ends <= 3 * N_TENSORS);
  }
  unlink(emb);
  unlink(twin);
}

int main(void) {
  /* in the working directory (the build tree), not /tmp: tmpfs has no cold page cache */
  snprintf(dir, sizeof dir, "mb-load-file-XXXXXX");
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  test_committed_models();
  test_straddling_and_prefixes();
  test_mutants();
  test_embedded_weights();
  rmdir(dir);
  return mbt_finish("load_file");
}
