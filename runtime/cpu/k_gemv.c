/*
 * Products with few rows on one side (decode: one token), streaming the
 * other operand — an fp16 weight or KV cache read in place, or floats —
 * exactly once, converted in registers (docs/cpu-backend.md, "Linear
 * algebra"). The callers cut the long side into pieces for the pool.
 *
 * Numerics: each output is a float sum of K float products (fp16 elements
 * are exact in float), accumulated in float in an order fixed by K alone
 * (16 lanes summed at the end), so within the usual fp32 reassociation bound
 * K * 2^-24 * sum |s_k h_k| of the exact sum, as sgemm is.
 */
#include "cpu_internal.h"

/* The portable forms: any CPU, any alignment, k in order (the fallback;
 * also called by test_cpu_gemv.c, which runs where AVX-512 is present). */
static inline float elem(const void *h, bool h16, int64_t i) {
  if (!h16) return ((const float *)h)[i];
  uint16_t b;
  memcpy(&b, (const unsigned char *)h + 2 * i, 2);
  return fp16_to_float(b);
}

void gemv_dot_portable(const float *s, int64_t S, int64_t lds, int64_t sk, const void *h, bool h16, int64_t ldh,
                       int64_t L, int64_t K, float *out, int64_t oi, int64_t oj) {
  for (int64_t j = 0; j < L; j++)
    for (int64_t i = 0; i < S; i++) {
      float acc = 0;
      for (int64_t k = 0; k < K; k++) acc += s[i * lds + k * sk] * elem(h, h16, j * ldh + k);
      out[i * oi + j * oj] = acc;
    }
}

void gemv_axpy_portable(const float *s, int64_t S, int64_t lds, const void *h, bool h16, int64_t ldh, int64_t L,
                        int64_t K, float *out, int64_t oi, int64_t oj) {
  for (int64_t i = 0; i < S; i++)
    for (int64_t j = 0; j < L; j++) {
      float acc = 0;
      for (int64_t k = 0; k < K; k++) acc += s[i * lds + k] * elem(h, h16, k * ldh + j);
      out[i * oi + j * oj] = acc;
    }
}

#if HAVE_X86
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,f16c,fma")))

/* 16 elements of h from index i (the first n of them, the rest zero). */
AVX512 static inline __m512 load16(const void *h, bool h16, int64_t i, __mmask16 m) {
  if (h16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)h + i));
  return _mm512_maskz_loadu_ps(m, (const float *)h + i);
}

static inline __mmask16 mask_of(int64_t n) { return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1); }

/* 16 floats sk apart (a conv's [K, P] activations read as rows of P), the lanes past m zero. */
AVX512 static inline __m512 strided16(const float *s, int64_t sk, __mmask16 m) {
  float t[16] = {0};
  for (int e = 0; e < 16 && (m >> e & 1); e++) t[e] = s[e * sk];
  return _mm512_loadu_ps(t);
}

/* The loads of one k step, as macros so that each kernel below is compiled
 * for one storage of h and one layout of s (no test in the inner loop). */
#define LD_H16(p, m) _mm512_cvtph_ps(_mm256_maskz_loadu_epi16((m), (p)))
#define LD_F32(p, m) _mm512_maskz_loadu_ps((m), (p))
#define LD_S1(p, m) _mm512_maskz_loadu_ps((m), (p))
#define LD_SK(p, m) strided16((p), sk, (m))

/* The same k of the next four rows of h (read next): rows are short (a
 * 768-wide row is 24 cache lines), too short for the hardware prefetcher
 * to reach full speed on each. */
#define PREFETCH_NEXT(p, ld)                                                                                    \
  do {                                                                                                          \
    _mm_prefetch((const char *)(p), _MM_HINT_T0), _mm_prefetch((const char *)((p) + (ld)), _MM_HINT_T0);        \
    _mm_prefetch((const char *)((p) + 2 * (ld)), _MM_HINT_T0);                                                  \
    _mm_prefetch((const char *)((p) + 3 * (ld)), _MM_HINT_T0);                                                  \
  } while (0)

/* IB (1 or 2) rows of s against JB (1 or 4) rows of h: IB x JB accumulators
 * of 16 lanes, k in steps of 16 (the last one masked), lanes summed at the
 * end. Every output gets the same operations in the same order whichever
 * kernel computes it, so the blocking never changes a bit. */
#define DOT_KERNEL(NAME, HT, LDH, LDS, SK)                                                                      \
  AVX512 static void NAME(const float *s, int64_t S, int64_t lds, int64_t sk, const HT *h, int64_t ldh,         \
                          int64_t L, int64_t K, float *out, int64_t oi, int64_t oj) {                           \
    (void)sk;                                                                                                   \
    for (int64_t j = 0; j < L;) {                                                                               \
      int64_t jb = L - j >= 4 ? 4 : 1;                                                                          \
      const HT *h0 = h + j * ldh, *h1 = h0 + (jb > 1 ? ldh : 0), *h2 = h1 + (jb > 1 ? ldh : 0),                 \
               *h3 = h2 + (jb > 1 ? ldh : 0);                                                                   \
      for (int64_t i = 0; i < S;) {                                                                             \
        int64_t ib = S - i >= 2 ? 2 : 1;                                                                        \
        const float *s0 = s + i * lds, *s1 = s0 + (ib > 1 ? lds : 0);                                           \
        __m512 a00 = _mm512_setzero_ps(), a01 = a00, a02 = a00, a03 = a00, a10 = a00, a11 = a00, a12 = a00,     \
               a13 = a00;                                                                                       \
        for (int64_t k = 0; k < K; k += 16) {                                                                   \
          __mmask16 m = mask_of(K - k);                                                                         \
          PREFETCH_NEXT(h3 + ldh + k, ldh);                                                                     \
          __m512 v0 = LDH(h0 + k, m), v1 = LDH(h1 + k, m), v2 = LDH(h2 + k, m), v3 = LDH(h3 + k, m);            \
          __m512 x0 = LDS(s0 + k * (SK), m), x1 = LDS(s1 + k * (SK), m);                                        \
          a00 = _mm512_fmadd_ps(x0, v0, a00), a01 = _mm512_fmadd_ps(x0, v1, a01);                               \
          a02 = _mm512_fmadd_ps(x0, v2, a02), a03 = _mm512_fmadd_ps(x0, v3, a03);                               \
          a10 = _mm512_fmadd_ps(x1, v0, a10), a11 = _mm512_fmadd_ps(x1, v1, a11);                               \
          a12 = _mm512_fmadd_ps(x1, v2, a12), a13 = _mm512_fmadd_ps(x1, v3, a13);                               \
        }                                                                                                       \
        float *o = out + i * oi + j * oj;                                                                       \
        o[0] = _mm512_reduce_add_ps(a00);                                                                       \
        if (jb > 1) {                                                                                           \
          o[oj] = _mm512_reduce_add_ps(a01), o[2 * oj] = _mm512_reduce_add_ps(a02);                             \
          o[3 * oj] = _mm512_reduce_add_ps(a03);                                                                \
        }                                                                                                       \
        if (ib > 1) {                                                                                           \
          o[oi] = _mm512_reduce_add_ps(a10);                                                                    \
          if (jb > 1) {                                                                                         \
            o[oi + oj] = _mm512_reduce_add_ps(a11), o[oi + 2 * oj] = _mm512_reduce_add_ps(a12);                 \
            o[oi + 3 * oj] = _mm512_reduce_add_ps(a13);                                                         \
          }                                                                                                     \
        }                                                                                                       \
        i += ib;                                                                                                \
      }                                                                                                         \
      j += jb;                                                                                                  \
    }                                                                                                           \
  }
DOT_KERNEL(dot_h16, uint16_t, LD_H16, LD_S1, 1)
DOT_KERNEL(dot_f32, float, LD_F32, LD_S1, 1)
DOT_KERNEL(dot_h16_strided, uint16_t, LD_H16, LD_SK, sk)
DOT_KERNEL(dot_f32_strided, float, LD_F32, LD_SK, sk)

AVX512 static void dot_avx512(const float *s, int64_t S, int64_t lds, int64_t sk, const void *h, bool h16,
                              int64_t ldh, int64_t L, int64_t K, float *out, int64_t oi, int64_t oj) {
  if (h16 && sk == 1) dot_h16(s, S, lds, sk, h, ldh, L, K, out, oi, oj);
  else if (h16) dot_h16_strided(s, S, lds, sk, h, ldh, L, K, out, oi, oj);
  else if (sk == 1) dot_f32(s, S, lds, sk, h, ldh, L, K, out, oi, oj);
  else dot_f32_strided(s, S, lds, sk, h, ldh, L, K, out, oi, oj);
}

/* Up to 4 rows of s against n (at most AXPY_CHUNK) columns of h, streaming
 * four rows of h at a time along their length: the partial sums live in acc
 * (L1) between row groups. Each column is still one fma chain over k in
 * order from 0, so the bits are those of accumulating k by k in registers. */
#define AXPY_CHUNK 4096
/* One body per (fp16 or float h, rows of s): the compiler keeps hv and sv
 * in registers only when both are constants. The same columns of the next
 * four rows are prefetched as these are read: the four streams restart
 * every four rows, and the hardware prefetcher alone loses about a tenth
 * of the rate there (GPT-2's [768, 3072] x·W measured 17.1 -> 15.4 ms for
 * 40 products, as fast as the rows path on the transposed weights). */
#define AXPY_BODY(H16, IB, NA)                                                                                  \
  do {                                                                                                        \
    int64_t k = 0;                                                                                            \
    for (; k + 4 <= K; k += 4) {                                                                              \
      __m512 sv[NA][4];                                                                                       \
      for (int a = 0; a < (IB); a++)                                                                          \
        for (int r = 0; r < 4; r++) sv[a][r] = _mm512_set1_ps(s[a * lds + k + r]);                            \
      const unsigned char *pf = (const unsigned char *)h + (k + 4 < K ? k + 4 : k) * ldh * ((H16) ? 2 : 4);    \
      for (int64_t v = 0; v < nv; v++) {                                                                      \
        __mmask16 m = mask_of(n - 16 * v);                                                                    \
        PREFETCH_NEXT(pf + 16 * v * ((H16) ? 2 : 4), ldh * ((H16) ? 2 : 4));                                 \
        __m512 h0 = load16(h, H16, (k + 0) * ldh + 16 * v, m), h1 = load16(h, H16, (k + 1) * ldh + 16 * v, m);  \
        __m512 h2 = load16(h, H16, (k + 2) * ldh + 16 * v, m), h3 = load16(h, H16, (k + 3) * ldh + 16 * v, m);  \
        for (int a = 0; a < (IB); a++) {                                                                      \
          __m512 x = _mm512_loadu_ps(acc[a] + 16 * v);                                                        \
          x = _mm512_fmadd_ps(sv[a][0], h0, x);                                                               \
          x = _mm512_fmadd_ps(sv[a][1], h1, x);                                                               \
          x = _mm512_fmadd_ps(sv[a][2], h2, x);                                                               \
          x = _mm512_fmadd_ps(sv[a][3], h3, x);                                                               \
          _mm512_storeu_ps(acc[a] + 16 * v, x);                                                               \
        }                                                                                                     \
      }                                                                                                       \
    }                                                                                                         \
    for (; k < K; k++)                                                                                        \
      for (int64_t v = 0; v < nv; v++) {                                                                      \
        __m512 hv = load16(h, H16, k * ldh + 16 * v, mask_of(n - 16 * v));                                    \
        for (int a = 0; a < (IB); a++) {                                                                      \
          __m512 x = _mm512_loadu_ps(acc[a] + 16 * v);                                                        \
          _mm512_storeu_ps(acc[a] + 16 * v, _mm512_fmadd_ps(_mm512_set1_ps(s[a * lds + k]), hv, x));          \
        }                                                                                                     \
      }                                                                                                       \
  } while (0)

/* Up to 4 rows of s against n (at most AXPY_CHUNK) columns of h, streaming
 * four rows of h at a time along their length: the partial sums live in acc
 * (L1/L2) between row groups. Each column is still one fma chain over k in
 * order from 0, so the bits are those of accumulating k by k in registers. */
AVX512 static void axpy_rows(const float *s, int64_t IB, int64_t lds, const void *h, bool h16, int64_t ldh, int64_t n,
                             int64_t K, float *out, int64_t oi, int64_t oj) {
  static _Thread_local float acc[4][AXPY_CHUNK];
  int64_t nv = (n + 15) / 16;
  for (int a = 0; a < IB; a++) memset(acc[a], 0, (size_t)nv * 16 * sizeof(float));
  if (h16 && IB == 1) AXPY_BODY(true, 1, 1);
  else if (h16 && IB == 2) AXPY_BODY(true, 2, 2);
  else if (h16 && IB == 3) AXPY_BODY(true, 3, 3);
  else if (h16) AXPY_BODY(true, 4, 4);
  else if (IB == 1) AXPY_BODY(false, 1, 1);
  else AXPY_BODY(false, IB, 4);
  for (int a = 0; a < IB; a++)
    for (int64_t e = 0; e < n; e++) out[a * oi + e * oj] = acc[a][e];
}

AVX512 static void axpy_avx512(const float *s, int64_t S, int64_t lds, const void *h, bool h16, int64_t ldh,
                               int64_t L, int64_t K, float *out, int64_t oi, int64_t oj) {
  const unsigned char *hb = h;
  int64_t es = h16 ? 2 : 4;
  for (int64_t j = 0; j < L; j += AXPY_CHUNK)
    for (int64_t i = 0; i < S; i += 4)
      axpy_rows(s + i * lds, S - i < 4 ? S - i : 4, lds, hb + j * es, h16, ldh, L - j < AXPY_CHUNK ? L - j : AXPY_CHUNK,
                K, out + i * oi + j * oj, oi, oj);
}
#endif

void gemv_dot(const float *s, int64_t S, int64_t lds, int64_t sk, const void *h, bool h16, int64_t ldh, int64_t L,
              int64_t K, float *out, int64_t oi, int64_t oj) {
#if HAVE_X86
  if (cpu_features()->avx512) {
    dot_avx512(s, S, lds, sk, h, h16, ldh, L, K, out, oi, oj);
    return;
  }
#endif
  gemv_dot_portable(s, S, lds, sk, h, h16, ldh, L, K, out, oi, oj);
}

void gemv_axpy(const float *s, int64_t S, int64_t lds, const void *h, bool h16, int64_t ldh, int64_t L, int64_t K,
               float *out, int64_t oi, int64_t oj) {
#if HAVE_X86
  if (cpu_features()->avx512) {
    axpy_avx512(s, S, lds, h, h16, ldh, L, K, out, oi, oj);
    return;
  }
#endif
  gemv_axpy_portable(s, S, lds, h, h16, ldh, L, K, out, oi, oj);
}
