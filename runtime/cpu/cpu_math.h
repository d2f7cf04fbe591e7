/*
 * exp and tanh evaluated in double to about 1e-15 relative, and the same
 * four doubles at a time with AVX2 and FMA (see docs/cpu-backend.md,
 * "Transcendental functions"). Inline: they are the inner loops of the
 * element-wise, softmax, attention and lstm kernels.
 */
#ifndef ORION_CPU_MATH_H
#define ORION_CPU_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "orion/op_semantics.h"

#if HAVE_X86
#include <immintrin.h>
#endif


/* The one definition, shared with the folder and the evaluator
 * (docs/numerics.md). */
static inline double exp_d(double x) { return op_sem_exp(x); }
static inline double tanh_d(double v) { return op_sem_tanh(v); }

/* The same functions four doubles at a time (AVX2 and FMA, when the CPU
 * has them; chosen once at prepare). The fused multiply-adds make the
 * doubles differ from exp_d's in the last bits, far below float's
 * precision; each element is computed the same way whatever thread runs it. */

#if HAVE_X86
#define AVX2 __attribute__((target("avx2,fma")))

AVX2 static inline __m256d exp4(__m256d x) {
  const __m256d shift = _mm256_set1_pd(0x1.8p52);
  __m256d nan = _mm256_cmp_pd(x, x, _CMP_UNORD_Q);
  __m256d xc = _mm256_min_pd(_mm256_max_pd(x, _mm256_set1_pd(-708.0)), _mm256_set1_pd(708.0));
  __m256d t = _mm256_fmadd_pd(xc, _mm256_set1_pd(1.4426950408889634), shift);
  __m256d k = _mm256_sub_pd(t, shift);
  __m256d r = _mm256_fnmadd_pd(k, _mm256_set1_pd(0x1.62e42feep-1), xc);
  r = _mm256_fnmadd_pd(k, _mm256_set1_pd(0x1.a39ef35793c76p-33), r);
  __m256d p = _mm256_set1_pd(1.0 / 39916800);
  static const double c[] = {1.0 / 3628800, 1.0 / 362880, 1.0 / 40320, 1.0 / 5040, 1.0 / 720, 1.0 / 120,
                             1.0 / 24,      1.0 / 6,      0.5,          1.0,          1.0};
  for (int i = 0; i < 11; i++) p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(c[i]));
  __m256i kb = _mm256_sub_epi64(_mm256_castpd_si256(t), _mm256_castpd_si256(shift));
  __m256d scale = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(kb, _mm256_set1_epi64x(1023)), 52));
  return _mm256_blendv_pd(_mm256_mul_pd(p, scale), x, nan);
}

AVX2 static inline __m256d tanh4(__m256d v) {
  const __m256d sign = _mm256_set1_pd(-0.0);
  __m256d a = _mm256_andnot_pd(sign, v);
  __m256d e = exp4(_mm256_mul_pd(a, _mm256_set1_pd(-2.0)));
  __m256d one = _mm256_set1_pd(1.0);
  __m256d big = _mm256_div_pd(_mm256_sub_pd(one, e), _mm256_add_pd(one, e));
  __m256d a2 = _mm256_mul_pd(a, a);
  __m256d small = _mm256_fmadd_pd(_mm256_mul_pd(a, a2), _mm256_fmadd_pd(a2, _mm256_set1_pd(2.0 / 15), _mm256_set1_pd(-1.0 / 3)), a);
  __m256d r = _mm256_blendv_pd(big, small, _mm256_cmp_pd(a, _mm256_set1_pd(1e-3), _CMP_LT_OQ));
  r = _mm256_or_pd(r, _mm256_and_pd(v, sign));
  return _mm256_blendv_pd(r, v, _mm256_cmp_pd(v, v, _CMP_UNORD_Q));
}

#endif /* HAVE_X86 */

#endif
