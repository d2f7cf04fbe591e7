/*
 * bench/amx_gemm: the CPU backend's AMX kernel (runtime/cpu/k_gemm_amx.c)
 * on one thread against its AVX-512 packed GEMM and OpenBLAS sgemm, for
 * one product C[M, N] = A[M, K] B[K, N] with B a weight [N, K] (fp32, or fp16
 * with "h16"), blocked as k_linalg.c's pieces are (PANEL columns by
 * AMX_STEP rows, the weight packed AMX_KC k at a time per piece).
 *
 *   amx_gemm M N K [h16] [REPS]
 *
 * Prints, in GFLOP/s of the fp32 product (2 M N K per run, best of REPS):
 * the AMX kernel alone (packed once), AMX with its per-piece weight packing
 * (as wgemm runs it), the raw tile rate (the first figure times the passes
 * it ran), the AVX-512 packed GEMM with its packing, and sgemm.
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cpu_internal.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static float frand(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: amx_gemm M N K [h16] [REPS]\n");
    return 2;
  }
  int64_t M = atoll(argv[1]), N = atoll(argv[2]), K = atoll(argv[3]);
  bool h16 = argc > 4 && !strcmp(argv[4], "h16");
  int reps = argc > 5 ? atoi(argv[5]) : 5;
  if (M < 1 || N < 1 || K < 1 || reps < 1) return 2;
  if (!gemm_amx_on()) {
    fprintf(stderr, "amx_gemm: no AMX here (or ORION_CPU_AMX=0)\n");
    return 1;
  }
  float *a = malloc(sizeof(float) * (size_t)(M * K)), *w = malloc(sizeof(float) * (size_t)(N * K));
  uint16_t *wh = malloc(2 * (size_t)(N * K));
  float *c = malloc(sizeof(float) * (size_t)(M * N));
  uint32_t seed = 1;
  for (int64_t i = 0; i < M * K; i++) a[i] = frand(&seed);
  for (int64_t i = 0; i < N * K; i++) w[i] = frand(&seed), wh[i] = fp16_from_float(w[i]);
  GemmSrc sa = {.p = a, .si = K, .sk = 1}, sw = {.p = h16 ? (const void *)wh : w, .h16 = h16, .si = K, .sk = 1};
  int64_t nkb = (K + 31) / 32, ga = (M + 31) / 32 * 2;
  size_t ea = (size_t)AMX_PACKED_ELEMS(M, K), eb = (size_t)AMX_PACKED_ELEMS(N, K);
  uint16_t *pa = malloc(2 * ea), *pb = malloc(2 * eb);
  AmxPacked A = {.p = pa, .flags = (uint8_t *)(pa + ga * nkb * AMX_PLANES * AMX_TILE_ELEMS), .gstride = nkb};
  int64_t gb = (N + 31) / 32 * 2;
  AmxPacked B = {.p = pb, .flags = (uint8_t *)(pb + gb * nkb * AMX_PLANES * AMX_TILE_ELEMS), .gstride = nkb};
  gemm_amx_pack_rows(A, sa, 0, M, 0, K); /* touched once before the timing */
  gemm_amx_pack_cols(B, sw, 0, N, 0, K);
  double tp = now();
  gemm_amx_pack_rows(A, sa, 0, M, 0, K);
  double tpa = now() - tp;
  tp = now();
  gemm_amx_pack_cols(B, sw, 0, N, 0, K);
  tp = now() - tp;
  printf("packing: rows %.2f ns, columns %.2f ns an element\n", tpa * 1e9 / (double)(M * K), tp * 1e9 / (double)(N * K));
  int64_t ldt = (N + 31) / 32 * 32;
  float *T = malloc(sizeof(float) * (size_t)((M + 31) / 32 * 32 * ldt));
  double flop = 2.0 * (double)M * (double)N * (double)K, best[4] = {1e30, 1e30, 1e30, 1e30};
  /* the piece's own room, as wgemm has it */
  uint16_t *own = malloc(sizeof(float) * (size_t)AMX_PIECE_FLOATS);
  float *own_t = (float *)(void *)(own + AMX_PACKED_ELEMS(PANEL, AMX_KC));
  float *ap = malloc(sizeof(float) * (size_t)(((M + GEMM_MR - 1) / GEMM_MR) * GEMM_MR * K));
  float *bp = malloc(sizeof(float) * (size_t)GEMM_PIECE_FLOATS);
  for (int r = 0; r < reps; r++) {
    double t = now();
    /* 0: the kernel alone over the whole product, k in AMX_KC blocks */
    for (int64_t k0 = 0; k0 < K; k0 += AMX_KC) {
      int64_t nk = ((K - k0 < AMX_KC ? K - k0 : AMX_KC) + 31) / 32;
      AmxPacked Ak = A, Bk = B;
      Ak.p += (k0 / 32) * AMX_PLANES * AMX_TILE_ELEMS, Ak.flags += k0 / 32;
      Bk.p += (k0 / 32) * AMX_PLANES * AMX_TILE_ELEMS, Bk.flags += k0 / 32;
      for (int64_t m0 = 0; m0 < M; m0 += AMX_STEP) {
        AmxPacked Am = Ak;
        Am.p += (m0 / 16) * nkb * AMX_PLANES * AMX_TILE_ELEMS, Am.flags += (m0 / 16) * nkb;
        gemm_amx_block(Am, Bk, M - m0 < AMX_STEP ? M - m0 : AMX_STEP, N, nk, T + m0 * ldt, ldt, k0 > 0);
      }
    }
    t = now() - t;
    if (t < best[0]) best[0] = t;
    /* 1: pieces of PANEL x AMX_STEP, the weight packed per piece */
    t = now();
    gemm_amx_pack_rows(A, sa, 0, M, 0, K);
    int64_t pg = PANEL / 16;
    AmxPacked P = {.p = own, .flags = (uint8_t *)(own + pg * (AMX_KC / 32) * AMX_PLANES * AMX_TILE_ELEMS),
                   .gstride = AMX_KC / 32};
    for (int64_t o0 = 0; o0 < N; o0 += PANEL)
      for (int64_t m0 = 0; m0 < M; m0 += AMX_STEP) {
        int64_t no = N - o0 < PANEL ? N - o0 : PANEL, nr = M - m0 < AMX_STEP ? M - m0 : AMX_STEP;
        for (int64_t k0 = 0; k0 < K; k0 += AMX_KC) {
          int64_t nk = K - k0 < AMX_KC ? K - k0 : AMX_KC;
          gemm_amx_pack_cols(P, sw, o0, no, k0, nk);
          AmxPacked Am = A;
          Am.p += ((m0 / 16) * nkb + k0 / 32) * AMX_PLANES * AMX_TILE_ELEMS, Am.flags += (m0 / 16) * nkb + k0 / 32;
          gemm_amx_block(Am, P, nr, no, (nk + 31) / 32, own_t, PANEL, k0 > 0);
        }
        for (int64_t i = 0; i < nr; i++) memcpy(c + (m0 + i) * N + o0, own_t + i * PANEL, sizeof(float) * (size_t)no);
      }
    t = now() - t;
    if (t < best[1]) best[1] = t;
    /* 2: the AVX-512 packed GEMM, as k_linalg.c's packed pieces */
    t = now();
    for (int64_t g = 0; g * GEMM_MR < M; g++)
      gemm_pack_rows(ap + g * GEMM_MR * K, sa, g * GEMM_MR, M - g * GEMM_MR < GEMM_MR ? M - g * GEMM_MR : GEMM_MR, 0,
                     K, false);
    for (int64_t o0 = 0; o0 < N; o0 += PANEL)
      for (int64_t m0 = 0; m0 < M; m0 += 40 * GEMM_MR) {
        int64_t no = N - o0 < PANEL ? N - o0 : PANEL, nr = M - m0 < 40 * GEMM_MR ? M - m0 : 40 * GEMM_MR;
        for (int64_t k0 = 0; k0 < K; k0 += GEMM_KC) {
          int64_t nk = K - k0 < GEMM_KC ? K - k0 : GEMM_KC;
          gemm_pack_cols(bp, sw, o0, no, k0, nk, false);
          gemm_block(ap + m0 * K + k0 * GEMM_MR, K * GEMM_MR, bp, nk * GEMM_NR, nr, no, nk, c + m0 * N + o0, N,
                     k0 > 0, false, NULL);
        }
      }
    t = now() - t;
    if (t < best[2]) best[2] = t;
    t = now();
    if (!h16)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)M, (blasint)N, (blasint)K, 1.0f, a, (blasint)K,
                  w, (blasint)K, 0.0f, c, (blasint)N);
    t = now() - t;
    if (t < best[3]) best[3] = t;
  }
  /* the passes the kernel ran: 6 for float pieces, 5 with an fp16 weight */
  int passes = h16 ? 5 : 6;
  printf("M=%lld N=%lld K=%lld %s: amx kernel %.1f (raw %.0f), amx pieces %.1f, avx512 packed %.1f, sgemm %s%.1f "
         "GFLOP/s\n",
         (long long)M, (long long)N, (long long)K, h16 ? "fp16 weight" : "fp32", flop / best[0] / 1e9,
         passes * flop / best[0] / 1e9, flop / best[1] / 1e9, flop / best[2] / 1e9, h16 ? "(fp32 weight) " : "",
         h16 ? 0.0 : flop / best[3] / 1e9);
  free(a), free(w), free(wh), free(c), free(pa), free(pb), free(T), free(own), free(ap), free(bp);
  return 0;
}
