/*
 * fp16 and bf16 conversions: every fp16 bit pattern round-trips, ties go to
 * even, the edges (largest finite value, overflow, subnormals, signed zero,
 * NaN) come out as IEEE 754 says, and fp16_from_double rounds once.
 *
 * Random inputs are checked against a reference written here from first
 * principles: the nearest representable value found by binary search over
 * all finite fp16 (or the two bf16 neighbours) as doubles, ties to the even
 * bit pattern. It shares no code with the bit manipulation under test.
 */
#include "orion/fp16.h"
#include "orion/support.h"

#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <string.h>

static uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static bool fp16_is_nan(uint16_t h) { return (h & 0x7C00) == 0x7C00 && (h & 0x3FF); }

/* ---- the reference ----------------------------------------------------- */

/* The value of a non-negative finite fp16 pattern, from the definition. */
static double fp16_value(uint16_t h) {
  int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  return e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
}

/* Nearest fp16 to d: non-negative finite fp16 patterns increase with their
 * value, so a binary search finds the pair around |d|; the midpoint of two
 * fp16 values is exact in double, so the comparison is exact. */
static uint16_t ref_fp16(double d) {
  uint16_t sign = signbit(d) ? 0x8000 : 0;
  double a = fabs(d);
  if (isnan(d)) return 0x7E00;
  /* Beyond 65504 + half an ulp (2^4 there), IEEE rounding gives inf. */
  if (a >= 65520.0) return sign | 0x7C00;
  if (a >= 65504.0) return sign | 0x7BFF;
  uint16_t lo = 0, hi = 0x7BFF; /* value(lo) <= a < value(hi) */
  while (hi - lo > 1) {
    uint16_t mid = (uint16_t)((lo + hi) / 2);
    if (fp16_value(mid) <= a) lo = mid;
    else hi = mid;
  }
  double midpoint = (fp16_value(lo) + fp16_value(hi)) / 2;
  uint16_t r = a < midpoint ? lo : a > midpoint ? hi : (lo & 1) ? hi : lo;
  return sign | r;
}

/* Nearest bf16 to a finite float: bf16 is the top half of a float, so the
 * candidates are the truncation and the next pattern up; 2^128 stands in for
 * the value past the largest finite one. */
static uint16_t ref_bf16(float f) {
  uint32_t u = float_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
  uint16_t lo = (uint16_t)((u >> 16) & 0x7FFF), hi = (uint16_t)(lo + 1);
  double a = fabs((double)f);
  double vlo = (double)bf16_to_float(lo);
  double vhi = hi == 0x7F80 ? ldexp(1, 128) : (double)bf16_to_float(hi);
  double midpoint = (vlo + vhi) / 2;
  uint16_t r = a < midpoint ? lo : a > midpoint ? hi : (lo & 1) ? hi : lo;
  return sign | r;
}

/* ---- fp16 -------------------------------------------------------------- */

Test(fp16, every_pattern_round_trips) {
  for (uint32_t i = 0; i < 65536; i++) {
    uint16_t h = (uint16_t)i;
    float f = fp16_to_float(h);
    if (fp16_is_nan(h)) {
      cr_assert(isnan(f), "0x%04x", i);
      /* Made quiet, sign and payload kept. */
      cr_assert_eq(fp16_from_float(f), h | 0x0200, "0x%04x", i);
      cr_assert_eq(fp16_from_double((double)f), h | 0x0200, "0x%04x", i);
      continue;
    }
    cr_assert_eq(fp16_from_float(f), h, "0x%04x", i);
    cr_assert_eq(fp16_from_double((double)f), h, "0x%04x", i);
    if (!isinf(f)) cr_assert_eq(fp16_value(h & 0x7FFF), fabs((double)f), "0x%04x", i);
  }
}

Test(fp16, known_values) {
  cr_assert_eq(fp16_to_float(0x3C00), 1.0f);
  cr_assert_eq(fp16_to_float(0xC000), -2.0f);
  cr_assert_eq(fp16_to_float(0x3555), 0x555p-12f);
  cr_assert_eq(fp16_to_float(0x7BFF), 65504.0f);
  cr_assert_eq((double)fp16_to_float(0x7BFF), FP16_MAX);
  cr_assert_eq(fp16_to_float(0x0400), 0x1p-14f);
  cr_assert_eq(fp16_to_float(0x03FF), 0x3FFp-24f);
  cr_assert_eq(fp16_to_float(0x0001), 0x1p-24f);
  cr_assert(isinf(fp16_to_float(0x7C00)) && fp16_to_float(0x7C00) > 0);
  cr_assert(isinf(fp16_to_float(0xFC00)) && fp16_to_float(0xFC00) < 0);
  cr_assert_eq(fp16_from_float(1.0f), 0x3C00);
  cr_assert_eq(fp16_from_float(-2.0f), 0xC000);
  cr_assert_eq(fp16_from_float(0.1f), 0x2E66);
  cr_assert_eq(fp16_from_double(0.1), 0x2E66);
  cr_assert_eq(fp16_from_float(0.5f), 0x3800);
}

Test(fp16, ties_round_to_even) {
  /* 1 + 2^-11 is half an ulp above 1: the even neighbour 1 wins. */
  cr_assert_eq(fp16_from_float(1.0f + 0x1p-11f), 0x3C00);
  cr_assert_eq(fp16_from_double(1.0 + 0x1p-11), 0x3C00);
  /* 1 + 3*2^-11 is halfway between 0x3C01 (odd) and 0x3C02 (even). */
  cr_assert_eq(fp16_from_float(1.0f + 0x3p-11f), 0x3C02);
  cr_assert_eq(fp16_from_double(1.0 + 0x3p-11), 0x3C02);
  /* Just off the tie either way. */
  cr_assert_eq(fp16_from_float(1.0f + 0x1p-11f + 0x1p-23f), 0x3C01);
  cr_assert_eq(fp16_from_float(1.0f + 0x1p-11f - 0x1p-23f), 0x3C00);
  cr_assert_eq(fp16_from_double(1.0 + 0x1p-11 + 0x1p-52), 0x3C01);
  cr_assert_eq(fp16_from_double(1.0 + 0x1p-11 - 0x1p-52), 0x3C00);
  /* A carry out of the mantissa moves to the next binade: 2 - 2^-12 is
   * halfway between 0x3BFF (odd) and 2.0 (0x4000). */
  cr_assert_eq(fp16_from_float(2.0f - 0x1p-12f), 0x4000);
  cr_assert_eq(fp16_from_float(-(1.0f + 0x3p-11f)), 0xBC02);
}

Test(fp16, largest_value_and_overflow) {
  cr_assert_eq(fp16_from_float(65504.0f), 0x7BFF);
  cr_assert_eq(fp16_from_float(65519.99f), 0x7BFF);
  cr_assert_eq(fp16_from_double(65519.99), 0x7BFF);
  cr_assert_eq(fp16_from_double(nextafter(65520.0, 0.0)), 0x7BFF);
  /* 65520 is the tie between 65504 (odd mantissa) and 65536: inf. */
  cr_assert_eq(fp16_from_float(65520.0f), 0x7C00);
  cr_assert_eq(fp16_from_double(65520.0), 0x7C00);
  cr_assert_eq(fp16_from_float(-65520.0f), 0xFC00);
  cr_assert_eq(fp16_from_float(1e10f), 0x7C00);
  cr_assert_eq(fp16_from_float(FLT_MAX), 0x7C00);
  cr_assert_eq(fp16_from_double(DBL_MAX), 0x7C00);
  cr_assert_eq(fp16_from_double(-1e300), 0xFC00);
  cr_assert_eq(fp16_from_float(INFINITY), 0x7C00);
  cr_assert_eq(fp16_from_float(-INFINITY), 0xFC00);
  cr_assert_eq(fp16_from_double((double)INFINITY), 0x7C00);
}

Test(fp16, subnormals) {
  cr_assert_eq(fp16_from_float(0x1p-24f), 0x0001);
  cr_assert_eq(fp16_from_double(0x1p-24), 0x0001);
  /* Half the smallest subnormal ties to the even 0. */
  cr_assert_eq(fp16_from_float(0x1p-25f), 0x0000);
  cr_assert_eq(fp16_from_double(0x1p-25), 0x0000);
  cr_assert_eq(fp16_from_float(-0x1p-25f), 0x8000);
  cr_assert_eq(fp16_from_float(0x1p-25f + 0x1p-40f), 0x0001);
  cr_assert_eq(fp16_from_double(nextafter(0x1p-25, 1.0)), 0x0001);
  /* 0.75 quanta rounds up to the smallest subnormal. */
  cr_assert_eq(fp16_from_float(0x3p-26f), 0x0001);
  cr_assert_eq(fp16_from_double(0x3p-26), 0x0001);
  /* 1.5 and 2.5 quanta: ties to 2 both times. */
  cr_assert_eq(fp16_from_float(0x3p-25f), 0x0002);
  cr_assert_eq(fp16_from_float(0x5p-25f), 0x0002);
  cr_assert_eq(fp16_from_float(0x3FFp-24f), 0x03FF);
  /* 1023.5 quanta: the tie between the largest subnormal (odd) and the
   * smallest normal goes up into the normal range. */
  cr_assert_eq(fp16_from_float(0x7FFp-25f), 0x0400);
  cr_assert_eq(fp16_from_float(0x1p-14f), 0x0400);
  /* Far below: float and double subnormals, and tiny normals. */
  cr_assert_eq(fp16_from_float(0x1p-149f), 0x0000);
  cr_assert_eq(fp16_from_float(-0x1p-130f), 0x8000);
  cr_assert_eq(fp16_from_float(0x1p-30f), 0x0000);
  cr_assert_eq(fp16_from_double(0x1p-1074), 0x0000);
  cr_assert_eq(fp16_from_double(0x1p-100), 0x0000);
  /* And back. */
  cr_assert_eq(fp16_to_float(0x0002), 0x1p-23f);
  cr_assert_eq(fp16_to_float(0x8003), -0x3p-24f);
}

Test(fp16, negative_zero) {
  cr_assert_eq(fp16_from_float(-0.0f), 0x8000);
  cr_assert_eq(fp16_from_double(-0.0), 0x8000);
  cr_assert_eq(fp16_from_float(0.0f), 0x0000);
  float z = fp16_to_float(0x8000);
  cr_assert(z == 0.0f && signbit(z));
  cr_assert(!signbit(fp16_to_float(0x0000)));
}

Test(fp16, nan_stays_nan) {
  /* A signalling NaN whose payload lies only in the low bits must not become inf. */
  cr_assert(fp16_is_nan(fp16_from_float(bits_float(0x7F800001u))));
  cr_assert_eq(fp16_from_float(bits_float(0x7F800001u)), 0x7E00);
  cr_assert_eq(fp16_from_float(bits_float(0xFFC00000u)), 0xFE00);
  /* The top ten payload bits are kept: 0x412000 >> 13 = 0x209. */
  cr_assert_eq(fp16_from_float(bits_float(0x7FC12000u)), 0x7E09);
  cr_assert(fp16_is_nan(fp16_from_double((double)NAN)));
  uint64_t snan = UINT64_C(0x7FF0000000000001);
  double d;
  memcpy(&d, &snan, sizeof d);
  cr_assert_eq(fp16_from_double(d), 0x7E00);
  cr_assert(isnan(fp16_to_float(0x7C01)));
}

Test(fp16, from_double_rounds_once) {
  /* Just above the fp16 tie 1 + 2^-11, by less than half a float ulp:
   * through float it lands exactly on the tie and goes down to even, but
   * the double is above the tie and must round up. */
  double d = 1.0 + 0x1p-11 + 0x1p-40;
  cr_assert_eq((double)(float)d, 1.0 + 0x1p-11);
  cr_assert_eq(fp16_from_float((float)d), 0x3C00);
  cr_assert_eq(fp16_from_double(d), 0x3C01);
  cr_assert_eq(ref_fp16(d), 0x3C01);
  /* The mirror case below a tie whose lower neighbour is odd. */
  d = 1.0 + 0x3p-11 - 0x1p-40;
  cr_assert_eq(fp16_from_float((float)d), 0x3C02);
  cr_assert_eq(fp16_from_double(d), 0x3C01);
  /* In the subnormal range too. */
  d = 0x1p-25 + 0x1p-60;
  cr_assert_eq(fp16_from_float((float)d), 0x0000);
  cr_assert_eq(fp16_from_double(d), 0x0001);
}

/* A double spread over the fp16 range and beyond, with a random mantissa. */
static double random_double(uint64_t *rng) {
  uint64_t r = splitmix64(rng);
  double m = ldexp((double)(r >> 11), -53) + 1.0; /* [1, 2) */
  int e = (int)(splitmix64(rng) % 50) - 32;        /* 2^-32 .. 2^17 */
  double d = ldexp(m, e);
  return (r & 1) ? -d : d;
}

/* A double at, or a few double ulps from, the midpoint of two neighbouring
 * fp16 values: where rounding decisions, and double rounding, happen. */
static double random_near_tie(uint64_t *rng) {
  uint64_t r = splitmix64(rng);
  uint16_t h = (uint16_t)(r % 0x7BFF);
  double d = (fp16_value(h) + fp16_value((uint16_t)(h + 1))) / 2;
  int steps = (int)((r >> 16) % 9) - 4;
  for (; steps > 0; steps--) d = nextafter(d, (double)INFINITY);
  for (; steps < 0; steps++) d = nextafter(d, 0.0);
  if ((r >> 32) & 1) {
    /* Further off: far enough for float to see the difference, or not. */
    d += ((r >> 33) & 1 ? 1 : -1) * ldexp(d, -20 - (int)((r >> 34) % 16));
  }
  return (r >> 63) ? -d : d;
}

Test(fp16, random_doubles_against_the_reference) {
  uint64_t rng = 0x5eed;
  int double_rounding_seen = 0;
  for (int i = 0; i < 300000; i++) {
    double d = i % 2 ? random_double(&rng) : random_near_tie(&rng);
    uint16_t want = ref_fp16(d);
    cr_assert_eq(fp16_from_double(d), want, "fp16_from_double(%a) = 0x%04x, expected 0x%04x", d,
                 fp16_from_double(d), want);
    float f = (float)d;
    cr_assert_eq(fp16_from_float(f), ref_fp16((double)f), "fp16_from_float(%a)", (double)f);
    if (fp16_from_float(f) != want) double_rounding_seen++;
  }
  /* The sample does reach the cases that rounding through float gets wrong. */
  cr_assert_gt(double_rounding_seen, 100);
}

Test(fp16, arrays) {
  const float src[5] = {1.0f, -2.0f, 65520.0f, 0x1p-25f, 0.5f};
  uint16_t h[5];
  float back[5];
  fp16_from_float_array(h, src, 5);
  cr_assert_eq(h[0], 0x3C00);
  cr_assert_eq(h[1], 0xC000);
  cr_assert_eq(h[2], 0x7C00);
  cr_assert_eq(h[3], 0x0000);
  cr_assert_eq(h[4], 0x3800);
  fp16_to_float_array(back, h, 5);
  cr_assert_eq(back[0], 1.0f);
  cr_assert_eq(back[1], -2.0f);
  cr_assert(isinf(back[2]));
  cr_assert_eq(back[4], 0.5f);
  fp16_from_float_array(NULL, NULL, 0);
}

/* ---- bf16 -------------------------------------------------------------- */

Test(bf16, every_pattern_round_trips) {
  for (uint32_t i = 0; i < 65536; i++) {
    uint16_t b = (uint16_t)i;
    float f = bf16_to_float(b);
    cr_assert_eq(float_bits(f), i << 16);
    bool nan = (b & 0x7F80) == 0x7F80 && (b & 0x7F);
    if (nan) cr_assert_eq(bf16_from_float(f), b | 0x0040, "0x%04x", i);
    else cr_assert_eq(bf16_from_float(f), b, "0x%04x", i);
  }
}

Test(bf16, sample_values) {
  cr_assert_eq(bf16_from_float(1.0f), 0x3F80);
  cr_assert_eq(bf16_from_float(-1.5f), 0xBFC0);
  cr_assert_eq(bf16_to_float(0x4049), 3.140625f);
  cr_assert_eq(bf16_from_float(3.14159265f), 0x4049);
  /* Ties to even, both ways, and just above a tie. */
  cr_assert_eq(bf16_from_float(bits_float(0x3F808000u)), 0x3F80);
  cr_assert_eq(bf16_from_float(bits_float(0x3F818000u)), 0x3F82);
  cr_assert_eq(bf16_from_float(bits_float(0x3F808001u)), 0x3F81);
  cr_assert_eq(bf16_from_float(bits_float(0x3F807FFFu)), 0x3F80);
  /* Overflow rounds to inf; just below the tie it does not. */
  cr_assert_eq(bf16_from_float(FLT_MAX), 0x7F80);
  cr_assert_eq(bf16_from_float(-FLT_MAX), 0xFF80);
  cr_assert_eq(bf16_from_float(bits_float(0x7F7F7FFFu)), 0x7F7F);
  cr_assert_eq(bf16_from_float(INFINITY), 0x7F80);
  /* Subnormals and zeros. */
  cr_assert_eq(bf16_from_float(bits_float(0x00018000u)), 0x0002);
  cr_assert_eq(bf16_from_float(bits_float(0x00008000u)), 0x0000);
  cr_assert_eq(bf16_from_float(-0.0f), 0x8000);
  /* NaN stays NaN, even one that rounding would turn into inf. */
  cr_assert_eq(bf16_from_float(bits_float(0x7F800001u)), 0x7FC0);
  cr_assert_eq(bf16_from_float(bits_float(0xFFFFFFFFu)), 0xFFFF);
  cr_assert(isnan(bf16_to_float(0x7FC0)));
}

Test(bf16, random_floats_against_the_reference) {
  uint64_t rng = 0xbf16;
  for (int i = 0; i < 200000; i++) {
    uint32_t u = (uint32_t)splitmix64(&rng);
    if ((u & 0x7F800000u) == 0x7F800000u) continue; /* inf and NaN are tested above */
    if (i % 4 == 0) u = (u & 0xFFFF0000u) | 0x8000u; /* exact ties */
    float f = bits_float(u);
    cr_assert_eq(bf16_from_float(f), ref_bf16(f), "0x%08x", u);
  }
}

/* The branch-free conversion against the plainly written one, over a stride
 * of all 2^32 float patterns (coprime with every field boundary) plus every
 * pattern whose low 13 bits sit at a rounding tie or next to one. */
Test(fp16, fast_path_matches_reference) {
  for (uint64_t u = 0; u < (1ull << 32); u += 4099) {
    uint32_t x = (uint32_t)u;
    float f;
    memcpy(&f, &x, sizeof f);
    cr_assert_eq(fp16_from_float(f), fp16_from_float_reference(f), "pattern 0x%08x", x);
  }
  for (uint32_t hi = 0; hi < (1u << 19); hi += 3) {
    static const uint32_t lows[] = {0x0000, 0x0FFF, 0x1000, 0x1001, 0x1FFF};
    for (size_t k = 0; k < sizeof lows / sizeof *lows; k++) {
      uint32_t x = (hi << 13) | lows[k];
      float f;
      memcpy(&f, &x, sizeof f);
      cr_assert_eq(fp16_from_float(f), fp16_from_float_reference(f), "pattern 0x%08x", x);
    }
  }
}
