/* bench/decode's bandwidth limit: a plain read (a sum) of FILE — the
 * package's weight.bin, the bytes a decode step reads — mapped as orion-run
 * maps it, by THREADS threads claiming 1 MiB pieces in turn (as orion's
 * pool claims its pieces, so a thread the loaded machine deschedules holds
 * up one piece, not half the read), best of RUNS; prints
 * "bw SECONDS_PER_READ GB_PER_S". */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PIECE (1 << 17) /* words: 1 MiB */

typedef struct Part {
  const uint64_t *p;
  size_t n;
  atomic_size_t *next;
  uint64_t sum;
} Part;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Eight independent sums so the loop is bound by the loads, not by an add chain. */
static void *sum_part(void *arg) {
  Part *q = arg;
  uint64_t s[8] = {0};
  for (;;) {
    size_t i = atomic_fetch_add(q->next, PIECE);
    if (i >= q->n) break;
    size_t end = i + PIECE < q->n ? i + PIECE : q->n;
    for (; i + 8 <= end; i += 8)
      for (int k = 0; k < 8; k++) s[k] += q->p[i + k];
    for (; i < end; i++) s[0] += q->p[i];
  }
  q->sum = s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 4) return 2;
  int fd = open(argv[1], O_RDONLY);
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) != 0) return 1;
  size_t bytes = (size_t)sb.st_size, n = bytes / 8;
  int threads = atoi(argv[2]) < 16 ? atoi(argv[2]) : 16, runs = atoi(argv[3]);
  const uint64_t *buf = mmap(NULL, bytes, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  if (buf == MAP_FAILED) return 1;
  double best = 1e30;
  uint64_t total = 0;
  for (int r = 0; r < runs; r++) {
    Part part[16];
    pthread_t th[16];
    double t0 = now();
    atomic_size_t next = 0;
    for (int t = 0; t < threads; t++) {
      part[t] = (Part){.p = buf, .n = n, .next = &next};
      pthread_create(&th[t], NULL, sum_part, &part[t]);
    }
    for (int t = 0; t < threads; t++) pthread_join(th[t], NULL), total += part[t].sum;
    double dt = now() - t0;
    if (dt < best) best = dt;
  }
  printf("bw %.6f %.2f %llu\n", best, (double)bytes / best / 1e9, (unsigned long long)(total & 1));
  munmap((void *)(uintptr_t)buf, bytes);
  close(fd);
  return 0;
}
