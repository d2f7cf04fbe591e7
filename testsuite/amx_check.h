/*
 * What the AMX tests share (test_cpu_gemm_amx.c, test_cpu_matmul_amx.c):
 * the skip where the CPU or the OS lacks AMX, and a product on the AMX
 * path's own blocks over both operands packed whole, the reference the
 * streamed and fused forms must give bit for bit. Needs cpu_internal.h.
 */
#ifndef ORION_TEST_AMX_CHECK_H
#define ORION_TEST_AMX_CHECK_H

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

#define SKIP_WITHOUT_AMX()                                                                                            \
  do {                                                                                                                \
    if (!gemm_amx_on()) cr_skip_test("the CPU or the OS has no AMX-BF16 (or ORION_CPU_AMX=0)");                     \
  } while (0)

static inline AmxPacked packed_alloc(int64_t n, int64_t K) {
  int64_t nkb = (K + 31) / 32, groups = (n + 31) / 32 * 2;
  uint16_t *p = calloc((size_t)AMX_PACKED_ELEMS(n, K), sizeof(uint16_t));
  return (AmxPacked){.p = p, .flags = (uint8_t *)(p + groups * nkb * AMX_PLANES * AMX_TILE_ELEMS), .gstride = nkb};
}

static inline AmxPacked at_kb(AmxPacked d, int64_t kb) {
  d.p += kb * AMX_PLANES * AMX_TILE_ELEMS, d.flags += kb;
  return d;
}

/* C[M, N] = A B on the AMX path's blocks, A's element (m, k) and B's (k, n) from sources (b's "rows" are n),
 * both packed whole, k in blocks of AMX_KC as the pieces run them. */
static inline void amx_product(GemmSrc a, GemmSrc b, int64_t M, int64_t N, int64_t K, float *C) {
  AmxPacked A = packed_alloc(M, K), B = packed_alloc(N, K);
  gemm_amx_pack_rows(A, a, 0, M, 0, K);
  gemm_amx_pack_cols(B, b, 0, N, 0, K);
  int64_t ldt = (N + 31) / 32 * 32;
  float *T = malloc(sizeof(float) * (size_t)((M + 31) / 32 * 32 * ldt));
  for (int64_t k0 = 0; k0 < K; k0 += AMX_KC) {
    int64_t nk = K - k0 < AMX_KC ? K - k0 : AMX_KC;
    gemm_amx_block(at_kb(A, k0 / 32), at_kb(B, k0 / 32), M, N, (nk + 31) / 32, T, ldt, k0 > 0);
  }
  for (int64_t m = 0; m < M; m++) memcpy(C + m * N, T + m * ldt, sizeof(float) * (size_t)N);
  free(T), free(A.p), free(B.p);
}

#endif
