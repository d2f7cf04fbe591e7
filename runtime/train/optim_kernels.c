/*
 * The optimizer's per-element passes (optim_kernels.h). Over GPT-2's 124M
 * params a step's AdamW reads four arrays and writes three, so it is one
 * pass; the AVX versions do exactly the scalar operations (multiply, add,
 * divide, square root, each rounded once: the project builds with
 * -std=c11, which contracts nothing into FMAs, and the target has no FMA),
 * eight lanes at a time. AdamW also counts the new weights that do not fit
 * the program weight they are written into next (orion/values_fit.h), so
 * the write needs no check pass of its own.
 */
#include "optim_kernels.h"

#include <math.h>
#include <stdint.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_AVX_PATH 1
/* libgcc reads cpuid once at start-up; this only reads its result. */
static bool have_avx(void) { return __builtin_cpu_supports("avx"); }
#else
#define HAVE_AVX_PATH 0
#endif

static size_t adamw_scalar(float *w, float *m, float *v, const float *g, size_t n, const AdamwScalars *s,
                           float limit) {
  size_t unfit = 0;
  for (size_t e = 0; e < n; e++) {
    float ge = g[e];
    if (s->unscale != 1.0f) ge = ge * s->unscale;
    if (s->clip != 1.0f) ge = ge * s->clip;
    float pe = w[e] * s->decay;
    float me = m[e] * s->b1 + s->one_minus_b1 * ge;
    float ve = v[e] * s->b2 + s->one_minus_b2 * ge * ge;
    float denom = sqrtf(ve) / s->bc2_sqrt + s->eps;
    m[e] = me;
    v[e] = ve;
    w[e] = pe + (s->neg_step * me) / denom;
    unfit += !(fabsf(w[e]) < limit);
  }
  return unfit;
}

#if HAVE_AVX_PATH
/* The new weights are counted against the limit in the register they are
 * stored from: |w| by clearing the sign, "not less than" (true for NaN) as
 * a lane mask, which is almost always 0. */
__attribute__((target("avx"))) static size_t adamw_avx(float *w, float *m, float *v, const float *g, size_t n,
                                                       const AdamwScalars *s, float limit) {
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF)), lim = _mm256_set1_ps(limit);
  size_t unfit = 0;
  const __m256 decay = _mm256_set1_ps(s->decay), b1 = _mm256_set1_ps(s->b1), omb1 = _mm256_set1_ps(s->one_minus_b1);
  const __m256 b2 = _mm256_set1_ps(s->b2), omb2 = _mm256_set1_ps(s->one_minus_b2);
  const __m256 neg_step = _mm256_set1_ps(s->neg_step), bc2s = _mm256_set1_ps(s->bc2_sqrt), eps = _mm256_set1_ps(s->eps);
  const __m256 unscale = _mm256_set1_ps(s->unscale), clip = _mm256_set1_ps(s->clip);
  bool unscaled = s->unscale != 1.0f, clipped = s->clip != 1.0f;
  size_t e = 0;
  for (; e + 8 <= n; e += 8) {
    __m256 ge = _mm256_loadu_ps(g + e);
    if (unscaled) ge = _mm256_mul_ps(ge, unscale);
    if (clipped) ge = _mm256_mul_ps(ge, clip);
    __m256 pe = _mm256_mul_ps(_mm256_loadu_ps(w + e), decay);
    __m256 me = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(m + e), b1), _mm256_mul_ps(omb1, ge));
    __m256 ve = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(v + e), b2), _mm256_mul_ps(_mm256_mul_ps(omb2, ge), ge));
    __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(ve), bc2s), eps);
    _mm256_storeu_ps(m + e, me);
    _mm256_storeu_ps(v + e, ve);
    __m256 we = _mm256_add_ps(pe, _mm256_div_ps(_mm256_mul_ps(neg_step, me), denom));
    _mm256_storeu_ps(w + e, we);
    unsigned bad = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(we, magnitude), lim, _CMP_NLT_UQ));
    for (; bad; bad &= bad - 1) unfit++;
  }
  return unfit + adamw_scalar(w + e, m + e, v + e, g + e, n - e, s, limit);
}
#endif

size_t train_kernel_adamw(float *w, float *m, float *v, const float *g, size_t n, const AdamwScalars *s, float limit) {
#if HAVE_AVX_PATH
  if (have_avx()) return adamw_avx(w, m, v, g, n, s, limit);
#endif
  return adamw_scalar(w, m, v, g, n, s, limit);
}

/* The squares go into eight double lanes (element i of each group of eight
 * into lane i), summed in lane order at the end, then the tail in order:
 * the AVX and the scalar versions add in the same order. A sum of g * 0 is
 * NaN exactly when some g is NaN or infinite, in any order. */
static void unscale_sq_scalar(float *g, size_t n, float inv, bool store, double *sq, bool *finite) {
  double lane[8] = {0};
  float probe = 0.0f;
  size_t e = 0;
  for (; e + 8 <= n; e += 8)
    for (size_t k = 0; k < 8; k++) {
      float x = g[e + k];
      if (inv != 1.0f) x = x * inv;
      if (store && inv != 1.0f) g[e + k] = x;
      probe += x * 0.0f;
      lane[k] += (double)x * (double)x;
    }
  double sum = 0;
  for (size_t k = 0; k < 8; k++) sum += lane[k];
  for (; e < n; e++) {
    float x = g[e];
    if (inv != 1.0f) x = x * inv;
    if (store && inv != 1.0f) g[e] = x;
    probe += x * 0.0f;
    sum += (double)x * (double)x;
  }
  *sq = sum;
  *finite = probe == 0.0f;
}

#if HAVE_AVX_PATH
__attribute__((target("avx"))) static void unscale_sq_avx(float *g, size_t n, float inv, bool store, double *sq,
                                                          bool *finite) {
  const __m256 scale = _mm256_set1_ps(inv), zero = _mm256_setzero_ps();
  __m256 probe = zero;
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  bool scaled = inv != 1.0f;
  size_t e = 0;
  for (; e + 8 <= n; e += 8) {
    __m256 x = _mm256_loadu_ps(g + e);
    if (scaled) {
      x = _mm256_mul_ps(x, scale);
      if (store) _mm256_storeu_ps(g + e, x);
    }
    probe = _mm256_add_ps(probe, _mm256_mul_ps(x, zero));
    __m256d a = _mm256_cvtps_pd(_mm256_castps256_ps128(x)), b = _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1));
    lo = _mm256_add_pd(lo, _mm256_mul_pd(a, a));
    hi = _mm256_add_pd(hi, _mm256_mul_pd(b, b));
  }
  double lane[8];
  float p[8];
  _mm256_storeu_pd(lane, lo);
  _mm256_storeu_pd(lane + 4, hi);
  _mm256_storeu_ps(p, probe);
  double sum = 0;
  for (size_t k = 0; k < 8; k++) sum += lane[k];
  float pr = 0.0f;
  for (size_t k = 0; k < 8; k++) pr += p[k];
  for (; e < n; e++) {
    float x = g[e];
    if (scaled) x = x * inv;
    if (scaled && store) g[e] = x;
    pr += x * 0.0f;
    sum += (double)x * (double)x;
  }
  *sq = sum;
  *finite = pr == 0.0f;
}
#endif

void train_kernel_unscale_sq(float *g, size_t n, float inv, bool store, double *sq, bool *finite) {
#if HAVE_AVX_PATH
  if (have_avx()) {
    unscale_sq_avx(g, n, inv, store, sq, finite);
    return;
  }
#endif
  unscale_sq_scalar(g, n, inv, store, sq, finite);
}
