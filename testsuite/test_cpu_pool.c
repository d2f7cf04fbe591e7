/*
 * The CPU backend's thread pool (runtime/cpu/pool.c): every piece of a job
 * runs exactly once, inside a run (pool_run_begin .. pool_run_end, where the
 * workers spin) and outside it (where they sleep); a run's start wakes a
 * sleeping worker and its end lets it sleep again; a run that ends, or a pool
 * that stops, while a worker spins does not hang; the hand-off counters
 * (pool_stats) count every piece once. Waits are on the pool's own state
 * (its count of sleepers), never on time; a hang is the test's timeout.
 * Reads the backend's internal header for the pool.
 */
#include <criterion/criterion.h>
#include <sched.h>
#include <stdlib.h>

#include "cpu_internal.h"

/* A pool driven through par_for, which reaches it by the program's context. */
typedef struct Rig {
  CpuContext ctx;
  CpuProgram prog;
} Rig;

static Rig *rig_start(uint32_t threads) {
  Rig *r = calloc(1, sizeof *r);
  cr_assert(r);
  r->prog.ctx = &r->ctx;
  pool_start(&r->ctx.pool, threads);
  cr_assert_eq(r->ctx.pool.n, threads, "the system refused a thread");
  return r;
}

static void rig_stop(Rig *r) {
  pool_stop(&r->ctx.pool);
  free(r);
}

/* Until `want` workers are asleep on the pool's condition variable. */
static void wait_sleepers(Pool *p, unsigned want) {
  while (atomic_load(&p->sleepers) != want) sched_yield();
}

/* Counts, per item, the times a piece covered it, and records the pieces' bounds. */
typedef struct Tally {
  int64_t chunk;
  atomic_int *hits;  /* per item */
  atomic_int *piece; /* per piece: times run */
  atomic_int bad;    /* pieces not [k * chunk, min((k + 1) * chunk, items)) */
  int64_t items;
} Tally;

static void tally_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  Tally *t = arg;
  int64_t k = lo / t->chunk;
  int64_t end = (k + 1) * t->chunk < t->items ? (k + 1) * t->chunk : t->items;
  if (lo % t->chunk != 0 || hi != end || tid >= 8) atomic_fetch_add(&t->bad, 1);
  atomic_fetch_add(&t->piece[k], 1);
  for (int64_t i = lo; i < hi; i++) atomic_fetch_add(&t->hits[i], 1);
}

static uint64_t pieces_total(const Pool *p) {
  PoolStats st;
  pool_stats(p, &st);
  uint64_t n = 0;
  for (int i = 0; i < 8; i++) n += st.pieces[i];
  return n;
}

/* One par_for over `items` in pieces of `chunk`: each item once, each piece once, and the counters agree. */
static void run_once(Rig *r, int64_t items, int64_t chunk) {
  Tally t = {.chunk = chunk, .items = items};
  int64_t npieces = (items + chunk - 1) / chunk;
  t.hits = calloc((size_t)items, sizeof *t.hits);
  t.piece = calloc((size_t)npieces, sizeof *t.piece);
  atomic_init(&t.bad, 0);
  uint64_t before = pieces_total(&r->ctx.pool);
  par_for(&r->prog, items, chunk, tally_task, &t);
  cr_assert_eq(atomic_load(&t.bad), 0, "a piece had bounds other than the fixed ones");
  for (int64_t i = 0; i < items; i++)
    cr_assert_eq(atomic_load(&t.hits[i]), 1, "item %lld ran %d times", (long long)i, atomic_load(&t.hits[i]));
  for (int64_t k = 0; k < npieces; k++) cr_assert_eq(atomic_load(&t.piece[k]), 1);
  /* A job of one piece runs on the caller, outside the pool's counters. */
  uint64_t counted = npieces > 1 && r->ctx.pool.n > 1 ? (uint64_t)npieces : 0;
  cr_assert_eq(pieces_total(&r->ctx.pool) - before, counted);
  free(t.hits);
  free(t.piece);
}

Test(cpu_pool, every_piece_runs_once_inside_and_outside_a_run) {
  for (uint32_t threads = 1; threads <= 3; threads++) {
    Rig *r = rig_start(threads);
    run_once(r, 1000, 7);
    run_once(r, 5, 7); /* one piece */
    pool_run_begin(&r->ctx.pool);
    for (int k = 0; k < 50; k++) run_once(r, 1 + 37 * k, 1 + k % 9);
    pool_run_end(&r->ctx.pool);
    run_once(r, 4096, 128);
    PoolStats st;
    pool_stats(&r->ctx.pool, &st);
    cr_assert_leq(st.jobs_asleep, st.jobs);
    if (threads == 1) cr_assert_eq(st.jobs, 0, "one thread: nothing is handed off");
    rig_stop(r);
  }
}

/* A worker asleep before a run is woken by the run's start (no job yet), and sleeps again after its end. */
Test(cpu_pool, a_run_wakes_a_sleeping_worker_and_it_sleeps_after_the_run, .timeout = 60) {
  Rig *r = rig_start(2);
  Pool *p = &r->ctx.pool;
  wait_sleepers(p, 1); /* past its first spin */
  run_once(r, 64, 4);  /* published to a sleeper: counted as such, and all pieces run */
  PoolStats st;
  pool_stats(p, &st);
  cr_assert_eq(st.jobs, 1);
  cr_assert_eq(st.jobs_asleep, 1);
  wait_sleepers(p, 1);
  pool_run_begin(p);
  wait_sleepers(p, 0); /* would hang if the start of a run did not wake it */
  cr_assert(atomic_load(&p->in_run));
  run_once(r, 64, 4);
  pool_run_end(p);
  cr_assert(!atomic_load(&p->in_run));
  wait_sleepers(p, 1); /* would hang if it kept spinning after the run */
  pool_stats(p, &st);
  cr_assert_eq(st.jobs, 2);
  cr_assert_geq(st.wakes, 1);
  rig_stop(r);
}

/* Runs that end while the workers spin, empty runs, and a pool stopped right after a run's end, many times over. */
Test(cpu_pool, runs_ending_while_workers_spin_do_not_hang, .timeout = 120) {
  for (int round = 0; round < 200; round++) {
    Rig *r = rig_start(2 + (uint32_t)(round % 2));
    Pool *p = &r->ctx.pool;
    for (int k = 0; k < 5; k++) {
      pool_run_begin(p);
      if (k % 2 == 0) run_once(r, 3 + round % 17, 2);
      pool_run_end(p);
    }
    if (round % 3 == 0) pool_run_begin(p); /* a pool may stop with its last run's spin still on */
    rig_stop(r);
  }
}

/* Jobs back to back, each with its own task state, pieces and chunk: a
 * worker still looking at one job's claim word when the next is published
 * runs no piece twice, none with the other job's state, and none of the
 * finished job. Without the lock the claim is one compare-and-swap on the
 * word the caller resets for each job. */
Test(cpu_pool, back_to_back_jobs_each_run_their_own_pieces_once, .timeout = 120) {
  for (uint32_t threads = 2; threads <= 3; threads++) {
    Rig *r = rig_start(threads);
    for (int k = 0; k < 3000; k++) {
      if (k == 1500) pool_run_begin(&r->ctx.pool);
      run_once(r, 2 + k % 23, 1 + k % 4);
    }
    pool_run_end(&r->ctx.pool);
    rig_stop(r);
  }
}

/* A job of more pieces than one claim word holds runs as consecutive
 * windows of the same fixed pieces (max_job_pieces is 2^31 - 1 outside
 * tests): every piece once, with its bounds, and counted once. */
Test(cpu_pool, a_job_larger_than_a_claim_word_runs_in_windows_of_the_same_pieces) {
  for (uint32_t threads = 1; threads <= 3; threads++) {
    Rig *r = rig_start(threads);
    r->ctx.pool.max_job_pieces = 3;
    run_once(r, 1000, 7);  /* 143 pieces: 48 windows, the last of 2 */
    run_once(r, 21, 7);    /* exactly one window */
    run_once(r, 22, 7);    /* one window and a window of one piece */
    rig_stop(r);
  }
}
