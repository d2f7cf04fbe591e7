/*
 * The CPU backend's eight-lane (AVX-512 F) forms of its transcendental
 * loops (runtime/cpu/cpu_math.h exp8, tanh8; the softmax row and the unary
 * kernels that use them): every lane's bits equal the four-lane AVX2 forms'
 * (exp4, tanh4 and the loops the CPU without AVX-512 runs), over sweeps of
 * ordinary values, the clamps' edges, tiny and denormal values, zeros of
 * both signs, infinities and NaNs, and lengths off the 8 and 4 grids.
 * Skipped where the CPU lacks AVX2 or AVX-512. Reads the backend's internal
 * header.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"
#include "cpu_math.h"

#if HAVE_X86

#define SKIP_WITHOUT_AVX512()                                                                                         \
  do {                                                                                                                \
    if (!cpu_features()->avx2 || !cpu_features()->avx512) cr_skip_test("the CPU has no AVX2 or no AVX-512");         \
  } while (0)

#define N_VALUES 4096

static uint64_t bits_d(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

static uint32_t bits_f(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

/* N_VALUES arguments: a seeded sweep of [-span, span] and the special values first. */
static void arguments(double *x, double span, unsigned seed) {
  static const double special[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, -708.0, 708.0, -708.5, 708.5, -709.0,
                                   1e-3, -1e-3, 0x1.fffffffffffffp-11, 1e-300, 4.9e-324, -4.9e-324, 20.0, -20.0,
                                   1e308, -1e308};
  int ns = (int)(sizeof special / sizeof special[0]);
  srand(seed);
  for (int i = 0; i < N_VALUES; i++)
    x[i] = i < ns ? special[i] : span * (2.0 * rand() / RAND_MAX - 1.0) * (i % 3 == 0 ? 1e-4 : 1.0);
}

AVX2 static void map4(bool tanh_of, const double *x, double *y, int n) {
  for (int i = 0; i < n; i += 4) {
    __m256d v = _mm256_loadu_pd(x + i);
    _mm256_storeu_pd(y + i, tanh_of ? tanh4(v) : exp4(v));
  }
}

AVX512D static void map8(bool tanh_of, const double *x, double *y, int n) {
  for (int i = 0; i < n; i += 8) {
    __m512d v = _mm512_loadu_pd(x + i);
    _mm512_storeu_pd(y + i, tanh_of ? tanh8(v) : exp8(v));
  }
}

static void expect_same_lanes(bool tanh_of, double span) {
  static double x[N_VALUES], y4[N_VALUES], y8[N_VALUES];
  arguments(x, span, tanh_of ? 7u : 11u);
  map4(tanh_of, x, y4, N_VALUES);
  map8(tanh_of, x, y8, N_VALUES);
  for (int i = 0; i < N_VALUES; i++)
    cr_assert_eq(bits_d(y8[i]), bits_d(y4[i]), "%s(%a): eight lanes %a, four lanes %a", tanh_of ? "tanh" : "exp", x[i],
                 y8[i], y4[i]);
}

Test(cpu_math_wide, exp8_equals_exp4) {
  SKIP_WITHOUT_AVX512();
  expect_same_lanes(false, 760.0);
}

Test(cpu_math_wide, tanh8_equals_tanh4) {
  SKIP_WITHOUT_AVX512();
  expect_same_lanes(true, 25.0);
}

/* A row of scores as attention makes them: ordinary values, a masked tail of -inf, a very negative run. */
static void scores(float *row, int64_t len, unsigned seed) {
  srand(seed);
  for (int64_t k = 0; k < len; k++) row[k] = (float)(8.0 * rand() / RAND_MAX - 4.0);
  for (int64_t k = len / 2; k < len && len > 6; k++) row[k] = k % 5 ? -INFINITY : -800.0f;
  if (len > 2) row[1] = 30.0f;
}

Test(cpu_math_wide, softmax_row_same_bits_on_eight_lanes) {
  SKIP_WITHOUT_AVX512();
  float in[133], o4[133], o8[133];
  double keep[133];
  for (int64_t len = 1; len <= 133; len++)
    for (int kept = 0; kept < 2; kept++) {
      scores(in, len, (unsigned)len);
      if (len == 37) in[20] = NAN; /* a NaN row: all NaN either way */
      softmax_row(in, o4, len, kept ? keep : NULL, true, false);
      softmax_row(in, o8, len, kept ? keep : NULL, true, true);
      for (int64_t k = 0; k < len; k++)
        cr_assert_eq(bits_f(o8[k]), bits_f(o4[k]), "len %lld, keep %d, element %lld: %a against %a", (long long)len,
                     kept, (long long)k, (double)o8[k], (double)o4[k]);
    }
}

Test(cpu_math_wide, unary_kernels_same_bits_on_eight_lanes) {
  SKIP_WITHOUT_AVX512();
  static const struct {
    int code, gelu;
    const char *name;
  } ops[] = {{U_TANH, 0, "tanh"}, {U_EXP, 0, "exp"}, {U_GELU, 1, "gelu tanh"}, {U_SIGMOID, 0, "sigmoid"},
             {U_SILU, 0, "silu"}};
  static double x[N_VALUES];
  static float a[N_VALUES], o4[N_VALUES], o8[N_VALUES];
  arguments(x, 40.0, 3u);
  for (int i = 0; i < N_VALUES; i++) a[i] = (float)x[i];
  for (size_t op = 0; op < sizeof ops / sizeof ops[0]; op++)
    for (int64_t n = N_VALUES - 13; n <= N_VALUES; n += 13) { /* tails of every length mod 8 */
      UnaryJob j = {.code = ops[op].code, .gelu = ops[op].gelu, .avx2 = true, .avx512 = false};
      unary_f32(&j, a, o4, n);
      j.avx512 = true;
      unary_f32(&j, a, o8, n);
      for (int64_t i = 0; i < n; i++)
        cr_assert_eq(bits_f(o8[i]), bits_f(o4[i]), "%s(%a), n %lld: eight lanes %a, four lanes %a", ops[op].name,
                     (double)a[i], (long long)n, (double)o8[i], (double)o4[i]);
    }
}

#else

Test(cpu_math_wide, not_x86) { cr_skip_test("the eight-lane forms are x86 only"); }

#endif
