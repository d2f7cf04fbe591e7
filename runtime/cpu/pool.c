/*
 * The thread pool: workers that claim fixed-size pieces of one job at a
 * time, spinning briefly between jobs and sleeping on a condition variable
 * otherwise (docs/cpu-backend.md, "Threads").
 */
#include "cpu_internal.h"

#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#define SPIN_ROUNDS 20000

static void cpu_relax(void) {
#if HAVE_X86
  _mm_pause();
#endif
}

/* Claims the next piece of job g; false when g is over or has none left.
 * Pieces are claimed, not assigned: a thread the system has descheduled
 * holds up only a piece it took, and the caller does whatever is left. */
static bool claim(Pool *p, unsigned g, int64_t *lo, int64_t *hi, TaskFn *fn, void **arg) {
  pthread_mutex_lock(&p->mu);
  bool ok = p->job == g && p->next < p->items;
  if (ok) {
    *lo = p->next;
    *hi = p->next + p->chunk < p->items ? p->next + p->chunk : p->items;
    p->next = *hi;
    *fn = p->fn;
    *arg = p->arg;
  }
  pthread_mutex_unlock(&p->mu);
  return ok;
}

static void work_on(Pool *p, unsigned g, uint32_t tid) {
  int64_t lo, hi;
  TaskFn fn;
  void *arg;
  while (claim(p, g, &lo, &hi, &fn, &arg)) {
    fn(arg, lo, hi, tid);
    atomic_fetch_add(&p->done, hi - lo);
  }
}

static void *worker_main(void *arg) {
  Worker *w = arg;
  Pool *p = w->pool;
  unsigned seen = 0;
  for (;;) {
    unsigned g = atomic_load(&p->gen);
    for (int k = 0; g == seen && k < SPIN_ROUNDS; k++) {
      cpu_relax();
      g = atomic_load(&p->gen);
    }
    if (g == seen) {
      pthread_mutex_lock(&p->mu);
      atomic_fetch_add(&p->sleepers, 1);
      while ((g = atomic_load(&p->gen)) == seen) pthread_cond_wait(&p->cv, &p->mu);
      atomic_fetch_sub(&p->sleepers, 1);
      pthread_mutex_unlock(&p->mu);
    }
    seen = g;
    if (atomic_load(&p->quit)) break;
    work_on(p, g, w->id);
  }
  return NULL;
}

/* Runs fn over [0, items) in pieces of `chunk` items (the last may be
 * shorter), on the caller and the pool's threads; the pieces depend only on
 * items and chunk, so the results do not depend on the thread count. */
void par_for(const CpuProgram *c, int64_t items, int64_t chunk, TaskFn fn, void *arg) {
  Pool *p = &c->ctx->pool; /* the pool's state changes; the program's plan does not */
  if (chunk < 1) chunk = 1;
  if (items <= 0) return;
  if (p->n <= 1 || items <= chunk) {
    for (int64_t lo = 0; lo < items; lo += chunk) fn(arg, lo, lo + chunk < items ? lo + chunk : items, 0);
    return;
  }
  pthread_mutex_lock(&p->mu);
  unsigned g = p->job + 1;
  p->job = g;
  p->fn = fn;
  p->arg = arg;
  p->items = items;
  p->chunk = chunk;
  p->next = 0;
  atomic_store(&p->done, 0);
  pthread_mutex_unlock(&p->mu);
  atomic_store(&p->gen, g);
  if (atomic_load(&p->sleepers) > 0) {
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
  }
  work_on(p, g, 0);
  for (int k = 0; atomic_load(&p->done) < items; k++) {
    if (k < SPIN_ROUNDS) cpu_relax();
    else sched_yield(); /* the piece's thread may be waiting for a core */
  }
}

/* Starts n - 1 workers (the caller is thread 0). */
void pool_start(Pool *p, uint32_t n) {
  p->n = n;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  atomic_init(&p->gen, 0);
  atomic_init(&p->sleepers, 0);
  atomic_init(&p->quit, false);
  atomic_init(&p->done, 0);
  p->th = xcalloc(n, sizeof *p->th);
  p->workers = xcalloc(n, sizeof *p->workers);
  for (uint32_t i = 1; i < n; i++) {
    p->workers[i] = (Worker){p, i};
    if (pthread_create(&p->th[i], NULL, worker_main, &p->workers[i]) != 0) {
      p->n = i; /* run with the threads we got */
      break;
    }
  }
}

void pool_stop(Pool *p) {
  if (!p->th) return;
  atomic_store(&p->quit, true);
  pthread_mutex_lock(&p->mu);
  atomic_fetch_add(&p->gen, 1);
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  for (uint32_t i = 1; i < p->n; i++) pthread_join(p->th[i], NULL);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
  free(p->th);
  free(p->workers);
  p->th = NULL;
}

/* The pool size for a request of `requested` threads (0: ORION_CPU_THREADS, else the online cores). */
uint32_t pool_threads_for(uint32_t requested) {
  if (requested) return requested;
  const char *e = getenv("ORION_CPU_THREADS");
  if (e && *e) {
    long n = strtol(e, NULL, 10);
    if (n >= 1 && n <= 256) return (uint32_t)n;
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n >= 1 && n <= 256 ? (uint32_t)n : 1;
}
