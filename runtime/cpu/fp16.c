/*
 * Converting fp16 to float and rounding floats to fp16, with F16C when the
 * CPU has it (the hardware rounds as fp16_from_float does).
 */
#include "cpu_internal.h"


#if HAVE_X86
__attribute__((target("avx,f16c"))) static void h2f_f16c(float *d, const uint16_t *s, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(s + i))));
  for (; i < n; i++) d[i] = _cvtsh_ss(s[i]);
}

/* Each float to the nearest fp16 value (ties to even, overflow to inf): the
 * hardware conversion rounds as fp16_from_float does. */
__attribute__((target("avx,f16c"))) static void round16_f16c(float *p, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(p + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(p + i), _MM_FROUND_TO_NEAREST_INT)));
  for (; i < n; i++) p[i] = _cvtsh_ss(_cvtss_sh(p[i], _MM_FROUND_TO_NEAREST_INT));
}
#endif

/* n fp16 values at s (any alignment) to floats. */
void h2f(float *d, const void *s, int64_t n) {
#if HAVE_X86
  if (cpu_features()->f16c && ((uintptr_t)s & 1) == 0) {
    h2f_f16c(d, s, n);
    return;
  }
#endif
  const unsigned char *b = s;
  for (int64_t i = 0; i < n; i++) {
    uint16_t h;
    memcpy(&h, b + 2 * i, 2);
    d[i] = fp16_to_float(h);
  }
}

void round16(float *p, int64_t n) {
#if HAVE_X86
  if (cpu_features()->f16c) {
    round16_f16c(p, n);
    return;
  }
#endif
  for (int64_t i = 0; i < n; i++) p[i] = fp16_to_float(fp16_from_float(p[i]));
}
