/*
 * bench/dw_sgemm.c: the CPU side of docs/training.md's placement (b): the 42
 * weight gradients of the Stories15M-shaped llama's six layers as bare
 * sgemms, dW[out, in] = dY[rows, out]^T . X[rows, in] over 1,024 rows, timed
 * five times (built as build/bench/dw_sgemm):
 *
 *   OPENBLAS_NUM_THREADS=1 /usr/bin/time -f 'cpu %U' build/bench/dw_sgemm
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

int main(void) {
  enum { ROWS = 1024, DIM = 288, HIDDEN = 768, LAYERS = 6, REPS = 5 };
  /* out, in: wq, wk, wv, wo, w1, w3, w2 */
  static const int shapes[7][2] = {{DIM, DIM}, {DIM, DIM}, {DIM, DIM}, {DIM, DIM}, {HIDDEN, DIM}, {HIDDEN, DIM}, {DIM, HIDDEN}};
  float *dy = calloc((size_t)ROWS * HIDDEN, sizeof *dy), *x = calloc((size_t)ROWS * HIDDEN, sizeof *x);
  float *dw = calloc((size_t)HIDDEN * HIDDEN, sizeof *dw);
  if (!dy || !x || !dw) return 1;
  for (int i = 0; i < ROWS * HIDDEN; i++) dy[i] = (float)(i % 7) * 0.1f, x[i] = (float)(i % 5) * 0.1f;
  printf("%d layers' dW sgemms, ms:", LAYERS);
  for (int rep = 0; rep < REPS; rep++) {
    double t0 = now_ms();
    for (int l = 0; l < LAYERS; l++)
      for (int k = 0; k < 7; k++)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, shapes[k][0], shapes[k][1], ROWS, 1.0f, dy, shapes[k][0],
                    x, shapes[k][1], 0.0f, dw, shapes[k][1]);
    printf(" %.1f", now_ms() - t0);
  }
  printf("\n");
  free(dy);
  free(x);
  free(dw);
  return 0;
}
