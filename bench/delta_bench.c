/*
 * The measuring half of bench/delta: on a compiled package, in one process,
 * times a plain write of the weight file's bytes (write + fsync, on the same
 * disk), loading (orion_open + cpu_prepare), a patch of every weight from
 * memory, a patch of the weights whose names start with a prefix (one layer),
 * and the runtime reload after each (orion_reload_weights +
 * cpu_reload_weights). Prints one "name ms" line per figure; bench/delta
 * computes and prints the ratios.
 *
 *   delta_bench PACKAGE LAYER_PREFIX RUNS
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "orion/cpu.h"
#include "orion/fp16.h"
#include "orion/patch.h"
#include "orion/runtime.h"

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void die(Diag *d, const char *what) {
  (void)d;
  fprintf(stderr, "delta_bench: %s failed\n", what);
  exit(1);
}

/* New values for every weight: small random fp16, different for each round. */
static PatchTensor *new_values(const Package *pkg, const char *prefix, uint32_t round, uint32_t *n, uint64_t *bytes) {
  PatchTensor *t = xcalloc(1024 * 64, sizeof *t);
  *n = 0;
  *bytes = 0;
  uint64_t state = 0x1234 + round;
  for (uint32_t f = 0; f < pkg->nfunctions; f++)
    for (uint32_t k = 0; k < pkg->functions[f].nweights; k++) {
      const PkgTensor *w = &pkg->functions[f].weights[k];
      if (w->dtype != ORION_DT_FP16 || (prefix && strncmp(w->name, prefix, strlen(prefix)))) continue;
      uint64_t count = w->bytes / 2;
      uint16_t *data = xmalloc(w->bytes);
      for (uint64_t i = 0; i < count; i++) data[i] = (uint16_t)(0x2000 + (splitmix64(&state) & 0x0FFF));
      t[*n] = (PatchTensor){.name = w->name, .origin = "memory", .dtype = ORION_DT_FP16, .rank = w->rank, .data = data,
                            .nbytes = w->bytes};
      memcpy(t[*n].dims, w->dims, sizeof w->dims);
      (*n)++;
      *bytes += w->bytes;
    }
  return t;
}

static void free_values(PatchTensor *t, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) free((void *)(uintptr_t)t[i].data);
  free(t);
}

static double plain_write(const char *dir, uint64_t bytes) {
  char path[4096];
  snprintf(path, sizeof path, "%s/plain-write.bin", dir);
  uint8_t *buf = xmalloc(bytes);
  memset(buf, 1, bytes); /* in memory already, like an optimizer's buffers */
  double t0 = now_ms();
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  for (uint64_t off = 0; off < bytes;) {
    ssize_t w = write(fd, buf + off, bytes - off);
    if (w <= 0) exit(1);
    off += (uint64_t)w;
  }
  fsync(fd);
  close(fd);
  double ms = now_ms() - t0;
  unlink(path);
  free(buf);
  return ms;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: delta_bench PACKAGE LAYER_PREFIX RUNS\n");
    return 2;
  }
  const char *pkg_path = argv[1], *prefix = argv[2];
  int runs = atoi(argv[3]);
  SourceSet sources;
  srcset_init(&sources);
  Diag d;
  diag_init(&d, &sources);
  d.program = "delta_bench";
  Package pkg;
  if (!package_read(pkg_path, &pkg, &d)) die(&d, "reading the manifest");
  char *dir = xstrdup(pkg_path);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = 0;
  else strcpy(dir, ".");

  double t0 = now_ms();
  OrionProgram *p = orion_open(pkg_path, NULL, &d);
  if (!p) die(&d, "orion_open");
  CpuProgram *cpu = cpu_prepare(p, 0, CPU_NUMERICS_ANE, &d);
  if (!cpu) die(&d, "cpu_prepare");
  printf("load %.2f\n", now_ms() - t0);

  double best_copy = 0, best_full = 0, best_full_reload = 0, best_layer = 0, best_layer_reload = 0;
  uint64_t full_bytes = 0, layer_bytes = 0;
  double best_split[2] = {0, 0}; /* the full patch's checking and writing */
  for (int r = 0; r < runs; r++) {
    uint32_t n;
    PatchTensor *all = new_values(&pkg, NULL, (uint32_t)r, &n, &full_bytes);
    PatchStats st;
    PatchOptions po = {.stats = &st};
    sync();
    double copy = plain_write(dir, pkg.weights_size);
    sync();
    double a = now_ms();
    if (!package_patch(pkg_path, all, n, &po, &d)) die(&d, "the full patch");
    double b = now_ms();
    if (r == 0 || st.validate_ms + st.commit_ms < best_split[0] + best_split[1]) {
      best_split[0] = st.validate_ms;
      best_split[1] = st.commit_ms;
    }
    bool changed;
    if (!orion_reload_weights(p, NULL, &changed, &d) || !changed || !cpu_reload_weights(cpu, &d)) die(&d, "reload");
    double c = now_ms();
    free_values(all, n);
    PatchTensor *layer = new_values(&pkg, prefix, (uint32_t)r + 1000, &n, &layer_bytes);
    if (!n) die(&d, "finding the layer's weights");
    sync();
    double e = now_ms();
    if (!package_patch(pkg_path, layer, n, &po, &d)) die(&d, "the layer patch");
    double f = now_ms();
    if (!orion_reload_weights(p, NULL, &changed, &d) || !cpu_reload_weights(cpu, &d)) die(&d, "reload");
    double g = now_ms();
    free_values(layer, n);
    if (r == 0 || copy < best_copy) best_copy = copy;
    if (r == 0 || b - a < best_full) best_full = b - a;
    if (r == 0 || c - b < best_full_reload) best_full_reload = c - b;
    if (r == 0 || f - e < best_layer) best_layer = f - e;
    if (r == 0 || g - f < best_layer_reload) best_layer_reload = g - f;
  }
  printf("full_check %.2f\nfull_write %.2f\n", best_split[0], best_split[1]);
  printf("weights_bytes %llu\nfull_bytes %llu\nlayer_bytes %llu\n", (unsigned long long)pkg.weights_size,
         (unsigned long long)full_bytes, (unsigned long long)layer_bytes);
  printf("copy %.2f\nfull_patch %.2f\nfull_reload %.2f\nlayer_patch %.2f\nlayer_reload %.2f\n", best_copy,
         best_full, best_full_reload, best_layer, best_layer_reload);
  cpu_free(cpu);
  orion_close(p);
  package_free(&pkg);
  free(dir);
  srcset_free(&sources);
  return 0;
}
