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

/* The scalar forms: any CPU, any alignment. */
static inline float elem(const void *h, bool h16, int64_t i) {
  if (!h16) return ((const float *)h)[i];
  uint16_t b;
  memcpy(&b, (const unsigned char *)h + 2 * i, 2);
  return fp16_to_float(b);
}

static void dot_scalar(const float *s, int64_t S, int64_t lds, int64_t sk, const void *h, bool h16, int64_t ldh, int64_t L,
                       int64_t K, float *out, int64_t oi, int64_t oj) {
  for (int64_t j = 0; j < L; j++)
    for (int64_t i = 0; i < S; i++) {
      float acc = 0;
      for (int64_t k = 0; k < K; k++) acc += s[i * lds + k * sk] * elem(h, h16, j * ldh + k);
      out[i * oi + j * oj] = acc;
    }
}

static void axpy_scalar(const float *s, int64_t S, int64_t lds, const void *h, bool h16, int64_t ldh, int64_t L,
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

/* JB rows of h against IB rows of s: IB x JB float accumulators of 16 lanes. */
#define DOT_BLOCK(IB, JB)                                                                                          \
  AVX512 static void dot_##IB##x##JB(const float *s, int64_t lds, int64_t sk, const void *h, bool h16, int64_t ldh, int64_t K, \
                                     float *out, int64_t oi, int64_t oj) {                                         \
    __m512 acc[IB][JB];                                                                                            \
    for (int a = 0; a < IB; a++)                                                                                   \
      for (int b = 0; b < JB; b++) acc[a][b] = _mm512_setzero_ps();                                                \
    for (int64_t k = 0; k < K; k += 16) {                                                                          \
      __mmask16 m = mask_of(K - k);                                                                                \
      __m512 hv[JB];                                                                                               \
      for (int b = 0; b < JB; b++) hv[b] = load16(h, h16, b * ldh + k, m);                                         \
      for (int a = 0; a < IB; a++) {                                                                               \
        __m512 sv = sk == 1 ? _mm512_maskz_loadu_ps(m, s + a * lds + k) : strided16(s + a * lds + k * sk, sk, m);  \
        for (int b = 0; b < JB; b++) acc[a][b] = _mm512_fmadd_ps(sv, hv[b], acc[a][b]);                            \
      }                                                                                                            \
    }                                                                                                              \
    for (int a = 0; a < IB; a++)                                                                                   \
      for (int b = 0; b < JB; b++) out[a * oi + b * oj] = _mm512_reduce_add_ps(acc[a][b]);                         \
  }
DOT_BLOCK(1, 4)
DOT_BLOCK(1, 1)
DOT_BLOCK(2, 4)
DOT_BLOCK(2, 1)

AVX512 static void dot_avx512(const float *s, int64_t S, int64_t lds, int64_t sk, const void *h, bool h16, int64_t ldh,
                              int64_t L, int64_t K, float *out, int64_t oi, int64_t oj) {
  int64_t j = 0;
  const unsigned char *hb = h;
  int64_t es = h16 ? 2 : 4;
  for (; j + 4 <= L; j += 4) {
    int64_t i = 0;
    for (; i + 2 <= S; i += 2) dot_2x4(s + i * lds, lds, sk, hb + j * ldh * es, h16, ldh, K, out + i * oi + j * oj, oi, oj);
    if (i < S) dot_1x4(s + i * lds, lds, sk, hb + j * ldh * es, h16, ldh, K, out + i * oi + j * oj, oi, oj);
  }
  for (; j < L; j++) {
    int64_t i = 0;
    for (; i + 2 <= S; i += 2) dot_2x1(s + i * lds, lds, sk, hb + j * ldh * es, h16, ldh, K, out + i * oi + j * oj, oi, oj);
    if (i < S) dot_1x1(s + i * lds, lds, sk, hb + j * ldh * es, h16, ldh, K, out + i * oi + j * oj, oi, oj);
  }
}

/* Up to 4 rows of s against 64 columns of h, k by k; columns past n masked. */
AVX512 static void axpy_block(const float *s, int64_t IB, int64_t lds, const void *h, bool h16, int64_t ldh,
                              int64_t n, int64_t K, float *out, int64_t oi, int64_t oj) {
  __m512 acc[4][4];
  __mmask16 m[4];
  for (int b = 0; b < 4; b++) m[b] = n > 16 * b ? mask_of(n - 16 * b) : 0;
  for (int a = 0; a < 4; a++)
    for (int b = 0; b < 4; b++) acc[a][b] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k++) {
    __m512 hv[4];
    for (int b = 0; b < 4; b++) hv[b] = load16(h, h16, k * ldh + 16 * b, m[b]);
    for (int a = 0; a < IB; a++) {
      __m512 sv = _mm512_set1_ps(s[a * lds + k]);
      for (int b = 0; b < 4; b++) acc[a][b] = _mm512_fmadd_ps(sv, hv[b], acc[a][b]);
    }
  }
  for (int a = 0; a < IB; a++)
    for (int b = 0; b < 4 && 16 * b < n; b++) {
      if (oj == 1) {
        _mm512_mask_storeu_ps(out + a * oi + 16 * b, m[b], acc[a][b]);
        continue;
      }
      float t[16];
      _mm512_storeu_ps(t, acc[a][b]);
      for (int64_t e = 0; e < 16 && 16 * b + e < n; e++) out[a * oi + (16 * b + e) * oj] = t[e];
    }
}

AVX512 static void axpy_avx512(const float *s, int64_t S, int64_t lds, const void *h, bool h16, int64_t ldh,
                               int64_t L, int64_t K, float *out, int64_t oi, int64_t oj) {
  const unsigned char *hb = h;
  int64_t es = h16 ? 2 : 4;
  for (int64_t j = 0; j < L; j += 64)
    for (int64_t i = 0; i < S; i += 4)
      axpy_block(s + i * lds, S - i < 4 ? S - i : 4, lds, hb + j * es, h16, ldh, L - j < 64 ? L - j : 64, K,
                 out + i * oi + j * oj, oi, oj);
}
#endif

void gemv_dot(const float *s, int64_t S, int64_t lds, int64_t sk, const void *h, bool h16, int64_t ldh, int64_t L, int64_t K,
              float *out, int64_t oi, int64_t oj) {
#if HAVE_X86
  if (cpu_features()->avx512) {
    dot_avx512(s, S, lds, sk, h, h16, ldh, L, K, out, oi, oj);
    return;
  }
#endif
  dot_scalar(s, S, lds, sk, h, h16, ldh, L, K, out, oi, oj);
}

void gemv_axpy(const float *s, int64_t S, int64_t lds, const void *h, bool h16, int64_t ldh, int64_t L, int64_t K,
               float *out, int64_t oi, int64_t oj) {
#if HAVE_X86
  if (cpu_features()->avx512) {
    axpy_avx512(s, S, lds, h, h16, ldh, L, K, out, oi, oj);
    return;
  }
#endif
  axpy_scalar(s, S, lds, h, h16, ldh, L, K, out, oi, oj);
}
