/*
 * The packed GEMM of products with many rows (prefill, training): operands
 * packed into the layout the microkernel reads — an fp16 weight converted
 * to float while it is packed, straight from the weight file — and an
 * AVX-512 12 x 32 microkernel (docs/cpu-backend.md, "Linear algebra").
 * k_linalg.c cuts the products into pieces and packs the activations once
 * per product; this file packs and multiplies blocks.
 *
 * Numerics: every output is its start value (zero, or the bias) followed by
 * one fused multiply-add per k, k = 0, 1, ..., K-1 in order, whatever the
 * blocking, the piece or the thread. So the result is within the fp32
 * reassociation bound K * 2^-24 * sum |a_k b_k| of the exact sum, and the
 * portable form (fmaf in the same order) gives the same bits.
 */
#include "cpu_internal.h"

#include <math.h>

static void pack_rows_portable(float *dst, GemmSrc s, int64_t i0, int64_t n, int64_t k0, int64_t nk) {
  for (int64_t g = 0; g * GEMM_MR < n; g++) {
    float *d = dst + g * nk * GEMM_MR;
    for (int64_t i = 0; i < GEMM_MR; i++) {
      int64_t row = g * GEMM_MR + i;
      if (row >= n) {
        for (int64_t k = 0; k < nk; k++) d[k * GEMM_MR + i] = 0;
        continue;
      }
      for (int64_t k = 0; k < nk; k++) d[k * GEMM_MR + i] = gemm_src_at(s, i0 + row, k0 + k);
    }
  }
}

static void pack_cols_portable(float *dst, GemmSrc s, int64_t j0, int64_t n, int64_t k0, int64_t nk) {
  for (int64_t p = 0; p * GEMM_NR < n; p++) {
    float *d = dst + p * nk * GEMM_NR;
    for (int64_t k = 0; k < nk; k++)
      for (int64_t j = 0; j < GEMM_NR; j++) {
        int64_t col = p * GEMM_NR + j;
        d[k * GEMM_NR + j] = col < n ? gemm_src_at(s, j0 + col, k0 + k) : 0;
      }
  }
}

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

#if HAVE_X86
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,f16c,fma")))

/* 16 elements of a source row from p (the first m of them, the rest zero). */
AVX512 static inline __m512 row16(const void *p, bool h16, __mmask16 m) {
  if (h16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
  return _mm512_maskz_loadu_ps(m, p);
}

/* A 16 x 16 transpose in registers: t[k] = (r[0][k], ..., r[15][k]). Pairs of
 * rows interleaved, then groups of four (each 128-bit lane holding four rows
 * at one k), then the lanes gathered across groups. */
AVX512 static inline __attribute__((always_inline)) void transpose16(const __m512 r[16], __m512 t[16]) {
  __m512 p[16], q[16];
  for (int i = 0; i < 16; i += 2) p[i] = _mm512_unpacklo_ps(r[i], r[i + 1]), p[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  for (int g = 0; g < 4; g++) {
    const __m512 *t0 = p + 4 * g;
    q[4 * g + 0] = _mm512_shuffle_ps(t0[0], t0[2], 0x44);
    q[4 * g + 1] = _mm512_shuffle_ps(t0[0], t0[2], 0xEE);
    q[4 * g + 2] = _mm512_shuffle_ps(t0[1], t0[3], 0x44);
    q[4 * g + 3] = _mm512_shuffle_ps(t0[1], t0[3], 0xEE);
  }
  /* q[4g + c], lane L: rows 4g..4g+3 at k = 4L + c. */
  for (int c = 0; c < 4; c++) {
    __m512 v = _mm512_shuffle_f32x4(q[c], q[4 + c], 0x88), w = _mm512_shuffle_f32x4(q[8 + c], q[12 + c], 0x88);
    __m512 v2 = _mm512_shuffle_f32x4(q[c], q[4 + c], 0xDD), w2 = _mm512_shuffle_f32x4(q[8 + c], q[12 + c], 0xDD);
    t[c] = _mm512_shuffle_f32x4(v, w, 0x88);
    t[8 + c] = _mm512_shuffle_f32x4(v, w, 0xDD);
    t[4 + c] = _mm512_shuffle_f32x4(v2, w2, 0x88);
    t[12 + c] = _mm512_shuffle_f32x4(v2, w2, 0xDD);
  }
}

AVX512 void gemm_transpose16(const __m512 r[16], __m512 t[16]) { transpose16(r, t); }

/* Columns whose k run contiguously (a weight [N, K], sk == 1): 16 rows by 16
 * k loaded (fp16 converted), transposed in registers and written k-major, so
 * the weight is read once, in order. */
AVX512 static void pack_cols_transposed(float *dst, GemmSrc s, int64_t j0, int64_t n, int64_t k0, int64_t nk) {
  int64_t es = s.h16 ? 2 : 4;
  for (int64_t p = 0; p * GEMM_NR < n; p++) {
    float *d = dst + p * nk * GEMM_NR;
    for (int64_t k = 0; k < nk; k += 16) {
      int64_t kn = min64(16, nk - k);
      __mmask16 m = gemm_lanes(kn);
      for (int64_t h = 0; h < GEMM_NR; h += 16) {
        __m512 r[16], t[16];
        for (int64_t j = 0; j < 16; j++) {
          int64_t col = p * GEMM_NR + h + j;
          r[j] = col < n ? row16((const unsigned char *)s.p + ((j0 + col) * s.si + k0 + k) * es, s.h16, m)
                         : _mm512_setzero_ps();
        }
        transpose16(r, t);
        for (int64_t kk = 0; kk < kn; kk++) _mm512_storeu_ps(d + (k + kk) * GEMM_NR + h, t[kk]);
      }
    }
  }
}

/* Rows whose k run contiguously (activations [R, K], a conv's weight [O, C]):
 * 12 rows (and 4 of zeros) by 16 k transposed in registers, each k's 12
 * values stored together. */
AVX512 static void pack_rows_transposed(float *dst, GemmSrc s, int64_t i0, int64_t n, int64_t k0, int64_t nk) {
  int64_t es = s.h16 ? 2 : 4;
  for (int64_t g = 0; g * GEMM_MR < n; g++) {
    float *d = dst + g * nk * GEMM_MR;
    for (int64_t k = 0; k < nk; k += 16) {
      int64_t kn = min64(16, nk - k);
      __m512 r[16], t[16];
      for (int64_t i = 0; i < 16; i++) {
        int64_t row = g * GEMM_MR + i;
        r[i] = i < GEMM_MR && row < n
                   ? row16((const unsigned char *)s.p + ((i0 + row) * s.si + k0 + k) * es, s.h16, gemm_lanes(kn))
                   : _mm512_setzero_ps();
      }
      transpose16(r, t);
      for (int64_t kk = 0; kk < kn; kk++) _mm512_mask_storeu_ps(d + (k + kk) * GEMM_MR, 0x0fff, t[kk]);
    }
  }
}

/* Rows contiguous along m (si == 1: a transposed x, as dy^T in a weight's
 * gradient dy^T x): each k's 12 rows are one masked load. */
AVX512 static void pack_rows_along(float *dst, GemmSrc s, int64_t i0, int64_t n, int64_t k0, int64_t nk) {
  int64_t es = s.h16 ? 2 : 4;
  for (int64_t g = 0; g * GEMM_MR < n; g++) {
    float *d = dst + g * nk * GEMM_MR;
    __mmask16 m = gemm_lanes(min64(GEMM_MR, n - g * GEMM_MR));
    const unsigned char *col = (const unsigned char *)s.p + (i0 + g * GEMM_MR + k0 * s.sk) * es;
    for (int64_t k = 0; k < nk; k++) _mm512_mask_storeu_ps(d + k * GEMM_MR, 0x0fff, row16(col + k * s.sk * es, s.h16, m));
  }
}

/* Columns contiguous along n (activations [K, P] as a conv reads them). */
AVX512 static void pack_cols_along(float *dst, GemmSrc s, int64_t j0, int64_t n, int64_t k0, int64_t nk) {
  int64_t es = s.h16 ? 2 : 4;
  for (int64_t p = 0; p * GEMM_NR < n; p++) {
    float *d = dst + p * nk * GEMM_NR;
    int64_t cols = min64(GEMM_NR, n - p * GEMM_NR);
    __mmask16 m0 = gemm_lanes(cols), m1 = gemm_lanes(cols - 16);
    for (int64_t k = 0; k < nk; k++) {
      const unsigned char *row = (const unsigned char *)s.p + ((k0 + k) * s.sk + j0 + p * GEMM_NR) * es;
      _mm512_storeu_ps(d + k * GEMM_NR, row16(row, s.h16, m0));
      _mm512_storeu_ps(d + k * GEMM_NR + 16, row16(row + 16 * es, s.h16, m1));
    }
  }
}

#define GEMM_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define GEMM_DECL(i) __m512 lo##i = _mm512_setzero_ps(), hi##i = _mm512_setzero_ps();
#define GEMM_LOAD(i)                                                                                                  \
  if (i < mr) lo##i = _mm512_maskz_loadu_ps(m0, C + i * ldc), hi##i = _mm512_maskz_loadu_ps(m1, C + i * ldc + 16);
#define GEMM_FMA(i)                                                                                                   \
  {                                                                                                                   \
    __m512 a = _mm512_set1_ps(A[i]);                                                                                  \
    lo##i = _mm512_fmadd_ps(a, b0, lo##i);                                                                            \
    hi##i = _mm512_fmadd_ps(a, b1, hi##i);                                                                            \
  }
#define GEMM_STORE(i)                                                                                                 \
  if (i < mr) _mm512_mask_storeu_ps(C + i * ldc, m0, lo##i), _mm512_mask_storeu_ps(C + i * ldc + 16, m1, hi##i);

/* C[mr, nr] (+)= A[mr, kc] B[kc, nr] from one group of packed rows and one
 * panel of packed columns; the 24 sums stay in registers over the kc. */
AVX512 static void kernel_avx512(int64_t kc, const float *A, const float *B, float *C, int64_t ldc, int64_t mr,
                                 int64_t nr, bool acc) {
  __mmask16 m0 = gemm_lanes(nr), m1 = gemm_lanes(nr - 16);
  GEMM_ROWS(GEMM_DECL)
  if (acc) {
    GEMM_ROWS(GEMM_LOAD)
  }
  for (int64_t k = 0; k < kc; k++, A += GEMM_MR, B += GEMM_NR) {
    __m512 b0 = _mm512_loadu_ps(B), b1 = _mm512_loadu_ps(B + 16);
    GEMM_ROWS(GEMM_FMA)
  }
  GEMM_ROWS(GEMM_STORE)
}
#endif

/* The same sums without AVX-512: one fmaf per k, in order, so the same bits. */
static void kernel_portable(int64_t kc, const float *A, const float *B, float *C, int64_t ldc, int64_t mr, int64_t nr,
                            bool acc) {
  for (int64_t i = 0; i < mr; i++)
    for (int64_t j = 0; j < nr; j++) {
      float c = acc ? C[i * ldc + j] : 0.0f;
      for (int64_t k = 0; k < kc; k++) c = fmaf(A[k * GEMM_MR + i], B[k * GEMM_NR + j], c);
      C[i * ldc + j] = c;
    }
}

bool gemm_packed_fast(void) { return HAVE_X86 && cpu_features()->avx512; }

void gemm_pack_rows(float *dst, GemmSrc s, int64_t i0, int64_t n, int64_t k0, int64_t nk, bool portable) {
#if HAVE_X86
  if (!portable && (s.sk == 1 || s.si == 1) && gemm_packed_fast()) {
    if (s.sk == 1) pack_rows_transposed(dst, s, i0, n, k0, nk);
    else pack_rows_along(dst, s, i0, n, k0, nk);
    return;
  }
#endif
  pack_rows_portable(dst, s, i0, n, k0, nk);
}

void gemm_pack_cols(float *dst, GemmSrc s, int64_t j0, int64_t n, int64_t k0, int64_t nk, bool portable) {
#if HAVE_X86
  if (!portable && gemm_packed_fast()) {
    if (s.sk == 1) pack_cols_transposed(dst, s, j0, n, k0, nk);
    else if (s.si == 1) pack_cols_along(dst, s, j0, n, k0, nk);
    else pack_cols_portable(dst, s, j0, n, k0, nk);
    return;
  }
#endif
  pack_cols_portable(dst, s, j0, n, k0, nk);
}

void gemm_block(const float *Ap, int64_t ags, const float *Bp, int64_t bps, int64_t M, int64_t N, int64_t kc,
                float *C, int64_t ldc, bool acc, bool portable, const GemmPrefetch *pf) {
  bool fast = !portable && gemm_packed_fast();
  /* The next block's source lines, a share before each microkernel call: the packing that reads them is bound by
   * memory latency (32 rows read 32 bytes at a time), the kernel by arithmetic. */
  int64_t per_row = pf ? (pf->bytes + 63) / 64 : 0, lines = pf ? pf->rows * per_row : 0;
  int64_t calls = ((M + GEMM_MR - 1) / GEMM_MR) * ((N + GEMM_NR - 1) / GEMM_NR), share = calls ? (lines + calls - 1) / calls : 0;
  int64_t row = 0, line = 0; /* the next line to prefetch */
  /* Panels outer, row groups inner: a panel's kc x 32 floats stay in L1 while the groups stream past. */
  for (int64_t n0 = 0; n0 < N; n0 += GEMM_NR) {
    const float *B = Bp + (n0 / GEMM_NR) * bps;
    int64_t nr = min64(GEMM_NR, N - n0);
    for (int64_t m0 = 0; m0 < M; m0 += GEMM_MR) {
      const float *A = Ap + (m0 / GEMM_MR) * ags;
      int64_t mr = min64(GEMM_MR, M - m0);
      for (int64_t e = 0; e < share && pf && row < pf->rows; e++) {
        __builtin_prefetch(pf->p + row * pf->ld + line * 64, 0, 2); /* into L2: L1 holds the panel */
        if (++line == per_row) line = 0, row++;
      }
#if HAVE_X86
      if (fast) {
        kernel_avx512(kc, A, B, C + m0 * ldc + n0, ldc, mr, nr, acc);
        continue;
      }
#endif
      kernel_portable(kc, A, B, C + m0 * ldc + n0, ldc, mr, nr, acc);
    }
  }
}
