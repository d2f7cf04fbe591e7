/*
 * The thread pool: workers that claim fixed-size pieces of one job at a
 * time, spinning (and yielding) for as long as a program's run lasts,
 * briefly between runs, and sleeping on a condition variable otherwise
 * (docs/cpu-backend.md, "Threads").
 */
#include "cpu_internal.h"

#include <sched.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define SPIN_ROUNDS 20000
#define MAX_JOB_PIECES 0x7fffffffLL
/* Inside a run a spinning worker yields its core every RUN_YIELD_PAUSES
 * pauses: on an oversubscribed machine a worker that only pauses used up
 * its share and was descheduled when a job came (GPT-2 decode measured
 * slower spinning than sleeping); one that yields keeps its place. */
#define RUN_YIELD_PAUSES 64

static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void cpu_relax(void) {
#if HAVE_X86
  _mm_pause();
#endif
}

/* Claims the next piece of the current job; false when it has none left.
 * Pieces are claimed, not assigned: a thread the system has descheduled
 * holds up only a piece it took, and the caller does whatever is left. The
 * claim is one compare-and-swap, no lock: a thread descheduled while it
 * held the old mutex made the other one sleep in the kernel until it ran
 * again, and each contended claim was a futex round trip. A thread that
 * read a job's claim word and loses the race to the next job's reset
 * fails its CAS, or (the same bits) claims a piece of the new job, which
 * it then runs as that job's: either way the piece is that job's, once. */
static bool claim(Pool *p, int64_t *lo, int64_t *hi, TaskFn *fn, void **arg) {
  unsigned long long v = atomic_load_explicit(&p->claim, memory_order_acquire);
  for (;;) {
    unsigned long long next = v >> 32, count = v & 0xffffffffu;
    if (next >= count) return false;
    if (atomic_compare_exchange_weak_explicit(&p->claim, &v, v + (1ull << 32), memory_order_acq_rel,
                                              memory_order_acquire)) {
      int64_t piece = p->first + (int64_t)next;
      *lo = piece * p->chunk;
      *hi = *lo + p->chunk < p->items ? *lo + p->chunk : p->items;
      *fn = p->fn;
      *arg = p->arg;
      return true;
    }
  }
}

static void work_on(Pool *p, uint32_t tid) {
  int64_t lo, hi;
  TaskFn fn;
  void *arg;
  while (claim(p, &lo, &hi, &fn, &arg)) {
    fn(arg, lo, hi, tid);
    /* Counted before `done`, so that a caller who sees the job done sees its pieces counted. */
    atomic_fetch_add_explicit(&p->workers[tid].pieces, 1, memory_order_relaxed);
    atomic_fetch_add(&p->done, 1);
  }
}

/* Signals sleeping workers that a job or a run has started. */
static void wake_sleepers(Pool *p) {
  if (atomic_load(&p->sleepers) == 0) return;
  atomic_store_explicit(&p->published_ns, now_ns(), memory_order_relaxed);
  pthread_mutex_lock(&p->mu);
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

static void *worker_main(void *arg) {
  Worker *w = arg;
  Pool *p = w->pool;
  unsigned seen = 0;
  for (;;) {
    unsigned g = atomic_load(&p->gen);
    for (unsigned k = 0, spins = 0; g == seen;) {
      cpu_relax();
      if (atomic_load_explicit(&p->in_run, memory_order_relaxed)) {
        if (++spins % RUN_YIELD_PAUSES == 0) sched_yield();
      } else if (++k >= SPIN_ROUNDS) break;
      g = atomic_load(&p->gen);
    }
    if (g == seen) {
      pthread_mutex_lock(&p->mu);
      atomic_fetch_add(&p->sleepers, 1);
      /* A run's start is seen either here or by pool_run_begin's look at sleepers (both seq_cst). */
      bool woke = false;
      while ((g = atomic_load(&p->gen)) == seen && !atomic_load(&p->in_run)) {
        pthread_cond_wait(&p->cv, &p->mu);
        woke = true;
      }
      atomic_fetch_sub(&p->sleepers, 1);
      pthread_mutex_unlock(&p->mu);
      if (woke) {
        atomic_fetch_add_explicit(&p->wakes, 1, memory_order_relaxed);
        long long dt = now_ns() - atomic_load_explicit(&p->published_ns, memory_order_relaxed);
        if (dt > 0) atomic_fetch_add_explicit(&p->wake_ns, (unsigned long long)dt, memory_order_relaxed);
      }
      if (g == seen) continue; /* a run started: spin until its first job */
    }
    seen = g;
    if (atomic_load(&p->quit)) break;
    work_on(p, w->id);
  }
  return NULL;
}

/* Publishes pieces first .. first + count - 1 of fn over [0, items) and
 * works on them with the pool until all are done. */
static void run_window(Pool *p, int64_t items, int64_t chunk, int64_t first, uint32_t count, TaskFn fn, void *arg) {
  /* The claim word is exhausted here (the last job's pieces all done), so no thread reads these. */
  p->fn = fn;
  p->arg = arg;
  p->items = items;
  p->chunk = chunk;
  p->first = first;
  atomic_store(&p->done, 0);
  atomic_store_explicit(&p->claim, count, memory_order_release);
  unsigned g = atomic_load(&p->gen) + 1;
  atomic_store(&p->gen, g);
  atomic_fetch_add_explicit(&p->jobs, 1, memory_order_relaxed);
  if (atomic_load(&p->sleepers) > 0) atomic_fetch_add_explicit(&p->jobs_asleep, 1, memory_order_relaxed);
  wake_sleepers(p);
  work_on(p, 0);
  if (atomic_load(&p->done) == count) return;
  long long t0 = now_ns();
  for (int k = 0; atomic_load(&p->done) < count; k++) {
    if (k < SPIN_ROUNDS) cpu_relax();
    else sched_yield(); /* the piece's thread may be waiting for a core */
  }
  atomic_fetch_add_explicit(&p->caller_wait_ns, (unsigned long long)(now_ns() - t0), memory_order_relaxed);
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
  int64_t pieces = (items + chunk - 1) / chunk;
  /* The claim word counts 32 bits of pieces: more run as consecutive jobs of the same pieces. */
  for (int64_t first = 0; first < pieces; first += p->max_job_pieces) {
    int64_t count = pieces - first < p->max_job_pieces ? pieces - first : p->max_job_pieces;
    run_window(p, items, chunk, first, (uint32_t)count, fn, arg);
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
  atomic_init(&p->claim, 0);
  p->max_job_pieces = MAX_JOB_PIECES;
  atomic_init(&p->in_run, false);
  atomic_init(&p->jobs, 0);
  atomic_init(&p->jobs_asleep, 0);
  atomic_init(&p->wakes, 0);
  atomic_init(&p->wake_ns, 0);
  atomic_init(&p->published_ns, 0);
  atomic_init(&p->caller_wait_ns, 0);
  p->th = xcalloc(n, sizeof *p->th);
  p->workers = xcalloc(n, sizeof *p->workers);
  for (uint32_t i = 0; i < n; i++) {
    p->workers[i].pool = p;
    p->workers[i].id = i;
    atomic_init(&p->workers[i].pieces, 0);
  }
  for (uint32_t i = 1; i < n; i++) {
    if (pthread_create(&p->th[i], NULL, worker_main, &p->workers[i]) != 0) {
      p->n = i; /* run with the threads we got */
      break;
    }
  }
}

/* A run of a program: its statements' jobs come back to back, ~0.1 ms
 * apart in a decode step, and a worker that slept between two of them woke
 * too late to take a share (it was asleep at 96 % of GPT-2's x·W jobs with
 * the 20,000-pause spin). So inside a run the workers spin without a limit,
 * yielding every RUN_YIELD_PAUSES pauses (pool_run_end lets them sleep
 * again after the usual spin), and a run's start wakes any sleeper once,
 * ahead of its first job. */
void pool_run_begin(Pool *p) {
  if (p->n <= 1) return;
  atomic_store(&p->in_run, true);
  wake_sleepers(p);
}

void pool_run_end(Pool *p) { atomic_store(&p->in_run, false); }

void pool_stats(const Pool *p, PoolStats *out) {
  Pool *q = (Pool *)(uintptr_t)p; /* atomic loads of counters; nothing changes */
  *out = (PoolStats){.jobs = atomic_load(&q->jobs), .jobs_asleep = atomic_load(&q->jobs_asleep),
                     .wakes = atomic_load(&q->wakes), .wake_ms = (double)atomic_load(&q->wake_ns) / 1e6,
                     .caller_wait_ms = (double)atomic_load(&q->caller_wait_ns) / 1e6};
  for (uint32_t i = 0; i < p->n && i < 8; i++) out->pieces[i] = atomic_load(&q->workers[i].pieces);
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
