/*
 * Half-precision conversions: IEEE binary16 (fp16) and bfloat16 (bf16).
 *
 * Weights reach the blob file as fp16 and the CPU interpreter rounds to fp16
 * after every op, so both directions must be bit-exact on every host,
 * whatever its F16C support or compiler flags: everything here works on the
 * integer bit patterns. Narrowing rounds to nearest, ties to even; values
 * past the largest finite result become +-inf, NaNs stay NaNs (made quiet,
 * with the top of their payload kept). fp16_from_double rounds once from the
 * double: converting through float first would round twice and can land on
 * the wrong side of an fp16 halfway point.
 */
#include "orion/fp16.h"

#include <math.h>
#include <stdbool.h>

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

static uint64_t double_bits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

/* Rounds the finite nonzero magnitude sig * 2^scale to fp16 bits (no sign),
 * where sig has its leading one at bit `top` (so the value's exponent is
 * top + scale). Every fp16 value is k * 2^q with k < 2048 and q >= -24: q is
 * -24 for subnormals and exponent - 10 for normals, so rounding is one shift
 * of sig to the quantum q with round-to-nearest-even on the bits shifted out.
 * A carry out of the significand bumps the exponent field by itself, which
 * is also how the largest subnormal rounds up to the smallest normal and the
 * largest normal to inf. */
static uint16_t round_to_fp16(uint64_t sig, int top, int scale) {
  int exp = top + scale;
  if (exp > 15) return 0x7C00;
  int quantum = exp < -14 ? -24 : exp - 10;
  int shift = quantum - scale; /* > 0 for float and double inputs */
  uint64_t k;
  if (shift <= 0) {
    k = sig << -shift;
  } else if (shift > top + 1) {
    return 0; /* below half the smallest subnormal */
  } else {
    k = sig >> shift;
    uint64_t rem = sig & ((UINT64_C(1) << shift) - 1);
    uint64_t half = UINT64_C(1) << (shift - 1);
    if (rem > half || (rem == half && (k & 1))) k++;
  }
  uint32_t bits = exp < -14 ? (uint32_t)k : ((uint32_t)(exp + 15) << 10) + (uint32_t)(k - 1024);
  return bits >= 0x7C00 ? 0x7C00 : (uint16_t)bits;
}

/* Branch-free float -> fp16, round to nearest even (compiles to selects, about
 * six times faster than the general rounding above; the compiler converts
 * hundreds of millions of weights). Normal results: rebias the exponent and
 * round the 13 dropped bits by adding 0xFFF plus the kept LSB. Subnormal
 * results: adding 0.5 makes the FPU shift and round the mantissa into the low
 * bits. Assumes the default rounding mode. */
static inline uint16_t float_to_fp16_fast(float f) {
  uint32_t x = float_bits(f), sign = (x >> 16) & 0x8000u;
  x &= 0x7FFFFFFFu;
  uint32_t normal = (x + 0xC8000FFFu + ((x >> 13) & 1u)) >> 13;
  const uint32_t half = 126u << 23;
  uint32_t sub = float_bits(bits_float(x) + bits_float(half)) - half;
  uint32_t special = x > 0x7F800000u ? (0x7E00u | ((x >> 13) & 0x3FFu)) : 0x7C00u;
  uint32_t o = x >= 0x47800000u ? special : x < 0x38800000u ? sub : normal;
  return (uint16_t)(sign | o);
}

uint16_t fp16_from_float(float f) { return float_to_fp16_fast(f); }

/* The general rounding path, kept as the reference the fast one is tested against. */
uint16_t fp16_from_float_reference(float f) {
  uint32_t u = float_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
  uint32_t e = (u >> 23) & 0xFF, m = u & 0x7FFFFF;
  if (e == 0xFF) return (uint16_t)(sign | (m ? 0x7E00 | (m >> 13) : 0x7C00));
  /* Zeros, and float subnormals (below 2^-126, far under fp16's 2^-25). */
  if (e == 0) return sign;
  return (uint16_t)(sign | round_to_fp16(m | 0x800000u, 23, (int)e - 150));
}

/* double -> fp16 in one rounding: round to float *to odd* (truncate, then set
 * the last bit if anything was lost), then to fp16 to nearest even. With 13
 * more bits in float than in fp16, rounding to odd first cannot change the
 * final result (the classic double-rounding fix). */
uint16_t fp16_from_double(double d) {
  if (d != d) {
    uint64_t u = double_bits(d);
    uint16_t sign = (uint16_t)((u >> 48) & 0x8000);
    return (uint16_t)(sign | 0x7E00 | (uint16_t)((u & ((UINT64_C(1) << 52) - 1)) >> 42));
  }
  float f = (float)d;
  if ((double)f != d) {
    uint32_t b = float_bits(f);
    if (fabs((double)f) > fabs(d)) b--; /* rounded away from zero: step back toward it */
    f = bits_float(b | 1u);
  }
  return float_to_fp16_fast(f);
}

float fp16_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t e = (h >> 10) & 0x1F, m = h & 0x3FF;
  if (e == 0x1F) return bits_float(sign | 0x7F800000u | (m << 13));
  if (e == 0) {
    if (m == 0) return bits_float(sign);
    /* Subnormal: shift the leading one up to the implicit bit; each shift
     * lowers the exponent by one, starting from that of 2^-14. */
    e = 127 - 14;
    while (!(m & 0x400)) {
      m <<= 1;
      e--;
    }
    return bits_float(sign | (e << 23) | ((m & 0x3FF) << 13));
  }
  return bits_float(sign | ((e + 127 - 15) << 23) | (m << 13));
}

float bf16_to_float(uint16_t b) { return bits_float((uint32_t)b << 16); }

uint16_t bf16_from_float(float f) {
  uint32_t u = float_bits(f);
  /* Rounding could carry a NaN's payload into inf or lose it to zero. */
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040);
  /* Adding just under half, plus the kept low bit, rounds ties to even; a
   * carry into the exponent is the right answer, up to inf. */
  u += 0x7FFFu + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>

/* F16C's conversion with round-to-nearest-even given in the instruction
 * (not MXCSR's mode) is IEEE's, as float_to_fp16_fast: the same bits for
 * every finite value, infinity and NaN (quieted, payload truncated, sign
 * kept). Eight at a time; the tail by the scalar path. Unaligned loads and
 * stores: the callers' buffers are any float and uint16_t arrays. */
__attribute__((target("avx,f16c"))) static void fp16_from_float_f16c(uint16_t *dst, const float *src, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128((__m128i *)(void *)(dst + i), h);
  }
  for (; i < n; i++) dst[i] = float_to_fp16_fast(src[i]);
}

__attribute__((target("avx,f16c"))) static void fp16_from_float_f16c_streaming(uint16_t *dst, const float *src,
                                                                               size_t n) {
  size_t i = 0;
  for (; i < n && ((uintptr_t)(dst + i) & 15); i++) dst[i] = float_to_fp16_fast(src[i]);
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_stream_si128((__m128i *)(void *)(dst + i), h);
  }
  for (; i < n; i++) dst[i] = float_to_fp16_fast(src[i]);
  _mm_sfence(); /* the streamed stores ordered before whatever reads them next */
}

/* F16C is CPUID leaf 1, ECX bit 29, asked directly: clang before 15 does not
 * know "f16c" as a __builtin_cpu_supports feature (runtime/cpu/features.c
 * does the same). */
static bool f16c_found;
static pthread_once_t f16c_once = PTHREAD_ONCE_INIT;

/* Asked once: CPUID can cost a trip to the hypervisor, and the callers
 * convert in chunks. */
static void find_f16c(void) {
  unsigned a, b, c, d;
  __builtin_cpu_init();
  f16c_found = __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
}

static bool have_f16c(void) {
  pthread_once(&f16c_once, find_f16c);
  return f16c_found;
}
#endif

void fp16_from_float_array(uint16_t *dst, const float *src, size_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (have_f16c()) {
    fp16_from_float_f16c(dst, src, n);
    return;
  }
#endif
  for (size_t i = 0; i < n; i++) dst[i] = fp16_from_float(src[i]);
}

void fp16_from_float_array_streaming(uint16_t *dst, const float *src, size_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (have_f16c()) {
    fp16_from_float_f16c_streaming(dst, src, n);
    return;
  }
#endif
  fp16_from_float_array(dst, src, n);
}

void fp16_to_float_array(float *dst, const uint16_t *src, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = fp16_to_float(src[i]);
}
