/*
 * bench/sgemm_floor: the "sgemm floor" of a training step (bench/train): the
 * matrix products of a model's forward and backward, with the shapes and
 * transpose flags a step has, run as plain OpenBLAS sgemm calls at a given
 * thread count and nothing else (no element-wise ops, no softmax, no
 * optimizer). A step cannot be faster than this with fp32 sgemm on this
 * machine; how close PyTorch's step is to it says how much room there is.
 *
 *   sgemm_floor llama|gpt2 DIM LAYERS HEADS HIDDEN VOCAB SEQ BATCH THREADS REPS
 *
 * HIDDEN 0: 4 x DIM (GPT-2). Prints one line: the median over REPS of the
 * forward's and the backward's milliseconds (wall), the step's GFLOP, the
 * thread count and the median CPU time of a step (all threads).
 */
#include <cblas.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct Gemm {
  bool ta, tb;   /* op(A) = A^T, op(B) = B^T */
  int m, n, k;   /* C[m,n] = op(A)[m,k] op(B)[k,n] */
  int count;     /* how many of it a step runs */
  bool backward;
} Gemm;

typedef struct Shapes {
  Gemm g[64];
  int n;
} Shapes;

static void add(Shapes *s, bool ta, bool tb, int m, int n, int k, int count, bool backward) {
  if (s->n >= (int)(sizeof s->g / sizeof *s->g)) {
    fprintf(stderr, "sgemm_floor: too many shapes\n");
    exit(1);
  }
  s->g[s->n++] = (Gemm){ta, tb, m, n, k, count, backward};
}

/* A linear layer y[t, out] = x[t, in] W[out, in]^T, `count` of them, and its
 * backward: dx = dy W, dW = dy^T x (dx not needed for the first layer's
 * input, which is an embedding: still made, as both orion and PyTorch do). */
static void linear(Shapes *s, int tokens, int in, int out, int count) {
  add(s, false, true, tokens, out, in, count, false);
  add(s, false, false, tokens, in, out, count, true);
  add(s, true, false, out, in, tokens, count, true);
}

/* Attention per (batch, head): S = Q K^T, O = P V; backward dP = dO V^T,
 * dV = P^T dO, dQ = dS K, dK = dS^T Q. */
static void attention(Shapes *s, int seq, int head_dim, int count) {
  add(s, false, true, seq, seq, head_dim, count, false);
  add(s, false, false, seq, head_dim, seq, count, false);
  add(s, false, true, seq, seq, head_dim, count, true);
  add(s, true, false, seq, head_dim, seq, count, true);
  add(s, false, false, seq, head_dim, seq, count, true);
  add(s, true, false, seq, head_dim, seq, count, true);
}

static double clock_ms(clockid_t id) {
  struct timespec t;
  clock_gettime(id, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc != 11 || (strcmp(argv[1], "llama") && strcmp(argv[1], "gpt2"))) {
    fprintf(stderr, "usage: sgemm_floor llama|gpt2 DIM LAYERS HEADS HIDDEN VOCAB SEQ BATCH THREADS REPS\n");
    return 2;
  }
  bool llama = !strcmp(argv[1], "llama");
  int dim = atoi(argv[2]), layers = atoi(argv[3]), heads = atoi(argv[4]), hidden = atoi(argv[5]);
  int vocab = atoi(argv[6]), seq = atoi(argv[7]), batch = atoi(argv[8]), threads = atoi(argv[9]), reps = atoi(argv[10]);
  if (hidden == 0) hidden = 4 * dim;
  if (dim <= 0 || layers <= 0 || heads <= 0 || dim % heads || vocab <= 0 || seq <= 0 || batch <= 0 || threads <= 0 ||
      reps <= 0 || reps > 100) {
    fprintf(stderr, "sgemm_floor: bad dimensions\n");
    return 2;
  }
  int tokens = seq * batch;
  Shapes s = {0};
  if (llama) {
    linear(&s, tokens, dim, dim, 4 * layers);       /* wq, wk, wv, wo */
    linear(&s, tokens, dim, hidden, 2 * layers);    /* w1, w3 (SwiGLU) */
    linear(&s, tokens, hidden, dim, layers);        /* w2 */
  } else {
    linear(&s, tokens, dim, 3 * dim, layers);       /* fused qkv */
    linear(&s, tokens, dim, dim, layers);           /* attention projection */
    linear(&s, tokens, dim, hidden, layers);        /* fc */
    linear(&s, tokens, hidden, dim, layers);        /* fc projection */
  }
  attention(&s, seq, dim / heads, batch * heads * layers);
  linear(&s, tokens, dim, vocab, 1); /* the (tied) classifier */
  openblas_set_num_threads(threads);
  /* One buffer set, as large as the largest operand: the floor is the arithmetic, not the allocator. */
  size_t big = 0;
  double flop = 0;
  for (int i = 0; i < s.n; i++) {
    const Gemm *g = &s.g[i];
    size_t a = (size_t)g->m * g->k, b = (size_t)g->k * g->n, c = (size_t)g->m * g->n;
    big = a > big ? a : big, big = b > big ? b : big, big = c > big ? c : big;
    flop += 2.0 * g->m * g->n * g->k * g->count;
  }
  float *A = malloc(big * sizeof *A), *B = malloc(big * sizeof *B), *C = malloc(big * sizeof *C);
  if (!A || !B || !C) {
    fprintf(stderr, "sgemm_floor: out of memory\n");
    return 1;
  }
  for (size_t i = 0; i < big; i++) A[i] = (float)(i % 7) * 0.01f, B[i] = (float)(i % 5) * 0.01f, C[i] = 0;
  /* Wall time, and the process's CPU time besides: on a loaded machine the
   * wall time is what the scheduler gave, the CPU time what the work took. */
  double fwd[100], bwd[100], cpu[100];
  for (int r = 0; r < reps; r++) {
    double t[2] = {0, 0}, c0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
    for (int i = 0; i < s.n; i++) {
      const Gemm *g = &s.g[i];
      int lda = g->ta ? g->m : g->k, ldb = g->tb ? g->k : g->n;
      double a = clock_ms(CLOCK_MONOTONIC);
      for (int c = 0; c < g->count; c++)
        cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans, g->tb ? CblasTrans : CblasNoTrans, g->m, g->n,
                    g->k, 1.0f, A, lda, B, ldb, 0.0f, C, g->n);
      t[g->backward] += clock_ms(CLOCK_MONOTONIC) - a;
    }
    fwd[r] = t[0], bwd[r] = t[1], cpu[r] = clock_ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
  }
  qsort(fwd, (size_t)reps, sizeof *fwd, cmp_double);
  qsort(bwd, (size_t)reps, sizeof *bwd, cmp_double);
  qsort(cpu, (size_t)reps, sizeof *cpu, cmp_double);
  printf("forward_ms %.1f backward_ms %.1f gflop %.1f threads %d cpu_ms %.1f\n", fwd[reps / 2], bwd[reps / 2],
         flop / 1e9, threads, cpu[reps / 2]);
  free(A);
  free(B);
  free(C);
  return 0;
}
