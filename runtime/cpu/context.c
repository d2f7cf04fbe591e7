/*
 * Backend instances (cpu_context_open): each owns a thread pool, shared by
 * every program prepared in it, and a mutex that makes those programs run
 * one at a time. Opening the first instance sets OpenBLAS to one thread
 * (the pool splits each matrix product itself); closing the last restores
 * the count it had then. OpenBLAS's setting is process-wide, so the count of
 * open instances is too.
 */
#include "cpu_internal.h"

#include <cblas.h>
#include <stdlib.h>

static pthread_mutex_t blas_mu = PTHREAD_MUTEX_INITIALIZER;
static uint32_t blas_users; /* open contexts */
static int blas_saved;      /* OpenBLAS's thread count before the first of them */

CpuContext *cpu_context_open(const CpuContextOptions *opt, Diag *d) {
  (void)d; /* nothing can fail yet: fewer threads than asked for are used if the system refuses some */
  CpuContext *ctx = xcalloc(1, sizeof *ctx);
  pthread_mutex_lock(&blas_mu);
  if (blas_users++ == 0) {
    blas_saved = openblas_get_num_threads();
    openblas_set_num_threads(1);
  }
  pthread_mutex_unlock(&blas_mu);
  pthread_mutex_init(&ctx->run_mu, NULL);
  pthread_mutex_init(&ctx->shared_mu, NULL);
  pool_start(&ctx->pool, pool_threads_for(opt ? opt->threads : 0));
  return ctx;
}

void cpu_context_close(CpuContext *ctx) {
  if (!ctx) return;
  pool_stop(&ctx->pool);
  pthread_mutex_destroy(&ctx->run_mu);
  pthread_mutex_destroy(&ctx->shared_mu); /* its programs were freed first: no shared copy is left */
  free(ctx);
  pthread_mutex_lock(&blas_mu);
  if (--blas_users == 0) openblas_set_num_threads(blas_saved);
  pthread_mutex_unlock(&blas_mu);
}

uint32_t cpu_context_threads(const CpuContext *ctx) { return ctx->pool.n; }
