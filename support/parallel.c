/*
 * parallel_for_two (orion/parallel.h): work items over the caller and one
 * more thread, for the memory-bound passes of a training step (the
 * optimizer, the weight write) that run while the backend's pool is idle.
 */
#define _GNU_SOURCE /* sysconf's _SC_NPROCESSORS_ONLN */
#include "orion/parallel.h"

#include <pthread.h>
#include <stdbool.h>
#include <unistd.h>

typedef struct ParallelJob {
  size_t n, next;
  pthread_mutex_t lock;
  void (*fn)(void *ctx, size_t i);
  void *ctx;
} ParallelJob;

static void *parallel_worker(void *arg) {
  ParallelJob *j = arg;
  for (;;) {
    pthread_mutex_lock(&j->lock);
    size_t i = j->next < j->n ? j->next++ : j->n;
    pthread_mutex_unlock(&j->lock);
    if (i == j->n) return NULL;
    j->fn(j->ctx, i);
  }
}

void parallel_for_two(size_t n, void (*fn)(void *ctx, size_t i), void *ctx) {
  ParallelJob j = {.n = n, .fn = fn, .ctx = ctx};
  pthread_mutex_init(&j.lock, NULL);
  pthread_t helper;
  /* The passes it serves are memory-bound: a second core adds bandwidth,
   * more add little. */
  bool two = n > 1 && sysconf(_SC_NPROCESSORS_ONLN) > 1 && pthread_create(&helper, NULL, parallel_worker, &j) == 0;
  parallel_worker(&j);
  if (two) pthread_join(helper, NULL);
  pthread_mutex_destroy(&j.lock);
}
