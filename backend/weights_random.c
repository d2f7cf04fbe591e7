/*
 * The random initializers, normal and uniform: a generator simple enough to
 * redo in a few lines of numpy (docs/weights.md spells it out), built from
 * correctly rounded operations only, so that its bits are the same
 * everywhere, and vectorized (SplitMix64 draws; a ziggurat for `normal`),
 * with wider builds of its kernel for x86-64 CPUs that have AVX2 or AVX-512.
 * Part of weight materialization (weights_data_internal.h).
 */
#include "weights_data_internal.h"

#include "orion/fp16.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

/* The generator's results are defined by separate roundings of each
 * operation; a fused multiply-add would change low bits (GCC in ISO C mode
 * does not fuse; clang does unless told). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* The generator runs on four lanes at a time through GCC/clang vector
 * extensions: element-wise IEEE operations, so each lane computes exactly
 * what the scalar definition in docs/weights.md computes, whatever vector
 * instructions the target turns them into. Only static functions, all
 * inlined, take or return these types, so no ABI is crossed. */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wunknown-warning-option"
#pragma clang diagnostic ignored "-Wpsabi"
#elif defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
#define LANES 4
typedef double V4d __attribute__((vector_size(32)));
typedef uint64_t V4u __attribute__((vector_size(32)));
typedef int64_t V4i __attribute__((vector_size(32)));
typedef uint32_t V4u32 __attribute__((vector_size(16)));
typedef float V4f __attribute__((vector_size(16)));

/* Everything the chunk kernel calls is inlined into it, so that each of its
 * builds (portable, AVX2, AVX-512) gets its own copy. */
#define INLINE static inline __attribute__((always_inline))
#define PAIRS_PER_CHUNK (CHUNK / 2)

#define ONE_BITS UINT64_C(0x3FF0000000000000)
#define MANTISSA_MASK UINT64_C(0x000FFFFFFFFFFFFF)
#define ABS_MASK UINT64_C(0x7FFFFFFFFFFFFFFF)
/* 1.5 * 2^52: adding it to a double of magnitude below 2^51 rounds that
 * double to an integer (ties to even), which then sits in the low bits. */
#define ROUND_MAGIC 0x1.8p52
#define ROUND_MAGIC_BITS UINT64_C(0x4338000000000000)

/* The constants of `normal`, as docs/weights.md defines them: each is the
 * double nearest the exact value (what Python's float arithmetic gives). */
#define SQRT2 0x1.6a09e667f3bcdp+0   /* math.sqrt(2) */
#define LN2 0x1.62e42fefa39efp-1     /* math.log(2) */

/* log(m) = 2 (s + s^3/3 + s^5/5 + ...), s = (m-1)/(m+1): 1/3 ... 1/19. */
static const double log_coeffs[] = {
    0x1.5555555555555p-2, 0x1.999999999999ap-3, 0x1.2492492492492p-3, 0x1.c71c71c71c71cp-4, 0x1.745d1745d1746p-4,
    0x1.3b13b13b13b14p-4, 0x1.1111111111111p-4, 0x1.e1e1e1e1e1e1ep-5, 0x1.af286bca1af28p-5,
};
/* The ziggurat's layer edges zig_x and heights zig_f, as the doc's numpy
 * code computes them: 1024 layers, picked by a draw's low 10 bits; bit 10 is
 * the sign. */
#include "ziggurat_table.h"
#define ZIG_LAYER_MASK 1023u
#define ZIG_SIGN_BIT 10
#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

INLINE V4d splat(double x) { return (V4d){x, x, x, x}; } /* keeps -0.0 (0 + x would not) */
INLINE V4u splat_u(uint64_t x) { return (V4u){x, x, x, x}; }
/* Bit reinterpretations (a vector cast between equal sizes keeps the bits). */
INLINE V4u bits_of(V4d x) { return (V4u)x; }
INLINE V4d from_bits(V4u x) { return (V4d)x; }
/* Lane-wise choice by a mask of all-ones or all-zeros lanes. */
INLINE V4u select_u(V4u mask, V4u yes, V4u no) { return (yes & mask) | (no & ~mask); }
INLINE V4d select_d(V4u mask, V4d yes, V4d no) { return from_bits(select_u(mask, bits_of(yes), bits_of(no))); }

/* SplitMix64's output function on each lane's state. */
INLINE V4u mix64(V4u z) {
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

/* (z >> 11) * 2^-53 without an integer-to-double conversion (x86 has no
 * vector one before AVX-512): the top 52 bits become a double in [1, 2)
 * minus 1, and the 53rd bit adds 2^-53. Both steps are exact. */
INLINE V4d unit_of(V4u z) {
  V4d hi = from_bits((z >> 12) | ONE_BITS) - 1.0;
  V4u low_bit = (z >> 11) & 1;
  return hi + from_bits((0 - low_bit) & splat_u(UINT64_C(0x3CA0000000000000))); /* 0 or 2^-53 */
}

INLINE V4d horner(const double *c, size_t n, V4d x2) {
  V4d p = splat(c[n - 1]);
  /* Unrolled: each lane's chain is short enough for the core to overlap
   * several pairs' chains. */
#pragma GCC unroll 16
  for (size_t i = n - 1; i-- > 0;) p = p * x2 + c[i];
  return p;
}

/* log(u) for u in (0, 1]: u = m * 2^e with m in (sqrt(2)/2, sqrt(2)], exactly,
 * then the atanh series in s = (m-1)/(m+1). */
INLINE V4d log_unit(V4d u) {
  V4u b = bits_of(u);
  V4d m = from_bits((b & MANTISSA_MASK) | ONE_BITS); /* in [1, 2) */
  V4i e = (V4i)(b >> 52) - 1023;
  V4u big = (V4u)(m > SQRT2);
  m = select_d(big, m * 0.5, m);
  e -= (V4i)big; /* the mask is -1 where m was halved */
  V4d ed = from_bits((V4u)(e + (int64_t)ROUND_MAGIC_BITS)) - ROUND_MAGIC; /* exact: |e| is small */
  V4d s = (m - 1.0) / (m + 1.0);
  V4d s2 = s * s, t = 2.0 * s;
  return ed * LN2 + (t + t * (s2 * horner(log_coeffs, COUNT_OF(log_coeffs), s2)));
}

/* Table entries, lane by lane. */
INLINE V4d lookup(const double *table, V4u i) {
  V4d r;
  for (int l = 0; l < LANES; l++) r[l] = table[i[l]];
  return r;
}

/* The first try of `normal` on each lane's draw z: x with its sign, and in
 * *miss the lanes whose point fell outside their layer's box. */
INLINE V4d normal_first_try(V4u z, V4u *miss) {
  V4u layer = z & ZIG_LAYER_MASK;
  V4d x = unit_of(z) * lookup(zig_x, layer);
  *miss = (V4u)(x >= lookup(zig_x, layer + 1)); /* not x < edge: x is never NaN */
  return from_bits(bits_of(x) ^ ((z >> ZIG_SIGN_BIT) & 1) << 63);
}

static double log_scalar(double w) { return log_unit(splat(w))[0]; }

static double unit_scalar(uint64_t z) { return (double)(z >> 11) * 0x1p-53; } /* exact: 53 bits */

/* The rest of an element whose first try, with draw z, missed its box (0.4%
 * of elements): the tail or the wedge test, then new tries, drawing from a
 * SplitMix64 of the element's own that starts at z. Scalar, out of the
 * vector loop, and the same function for every build. The chord of a wedge
 * settles most points without a logarithm: where the curve is convex
 * (x >= 1) nothing above the chord is under the curve, where it is concave
 * (x <= 1) everything below the chord is. */
static double normal_retry(uint64_t z) {
  const double r = zig_x[1];
  uint64_t state = z;
  double x;
  for (;;) {
    unsigned layer = (unsigned)(z & ZIG_LAYER_MASK);
    x = unit_scalar(z) * zig_x[layer];
    if (x < zig_x[layer + 1]) break;
    if (layer == 0) { /* the tail beyond r */
      double a, b;
      do {
        a = log_scalar(1.0 - unit_scalar(splitmix64(&state))) / r;
        b = log_scalar(1.0 - unit_scalar(splitmix64(&state)));
      } while (!(-(b + b) > a * a));
      x = r - a;
      break;
    }
    double w = unit_scalar(splitmix64(&state));
    double t = (zig_x[layer] - x) / (zig_x[layer] - zig_x[layer + 1]); /* the chord's height at x */
    if (zig_x[layer + 1] >= 1.0 && w > t) {
      z = splitmix64(&state);
      continue;
    }
    if (zig_x[layer] <= 1.0 && w < t) break;
    double y = zig_f[layer] + w * (zig_f[layer + 1] - zig_f[layer]);
    if (log_scalar(y) < -0.5 * (x * x)) break; /* under the curve */
    z = splitmix64(&state);
  }
  return (z >> ZIG_SIGN_BIT) & 1 ? -x : x;
}

/* fp16 bits of finite doubles, rounded once to nearest even (NaN and
 * infinities give an fp16 NaN or infinity; the caller looks closer). */
INLINE V4u fp16_bits(V4d v) {
  V4u b = bits_of(v);
  V4u a = b & ABS_MASK;
  V4u sign = (b >> 48) & 0x8000;
  /* Normal range: round the mantissa at bit 42, then rebias 1023 -> 15. */
  V4u normal = ((a + UINT64_C(0x1FFFFFFFFFF) + ((a >> 42) & 1)) >> 42) - (UINT64_C(1008) << 10);
  /* Below 2^-14 fp16 steps are 2^-24: adding 2^28 (whose ulp is 2^-24)
   * rounds to that grid, and the bits above 2^28's are the fp16 bits. */
  V4u sub = bits_of(from_bits(a) + 0x1p28) - UINT64_C(0x41B0000000000000);
  V4u h = select_u((V4u)(a < UINT64_C(0x3F10000000000000)), sub, normal); /* 2^-14 */
  h = select_u((V4u)(a >= UINT64_C(0x40EFFE0000000000)), splat_u(0x7C00), h); /* 65520 and up */
  h = select_u((V4u)(a > UINT64_C(0x7FF0000000000000)), splat_u(0x7E00), h);  /* NaN */
  return h | sign;
}

/* Fills v0/v1 (PAIRS_PER_CHUNK each) with the values of elements at, at+1,
 * ... of a uniform or normal initializer: pair j of the chunk is elements
 * at+2j (v0) and at+2j+1 (v1), made from draws at+2j+1 and at+2j+2. */
INLINE void gen_chunk(const IrParamSource *src, uint64_t at, double *restrict v0, double *restrict v1) {
  V4u lane;
  for (int i = 0; i < LANES; i++) lane[i] = 2 * (uint64_t)i + 1;
  const uint64_t gamma = SPLITMIX64_GAMMA, step = 2 * LANES * gamma;
  V4u state_a = src->seed + at * gamma + lane * gamma;
  if (src->kind == SRC_UNIFORM) {
    V4d low = splat(src->a), span = splat(src->b - src->a);
    for (size_t j = 0; j < PAIRS_PER_CHUNK; j += LANES, state_a += step) {
      V4d a = low + span * unit_of(mix64(state_a));
      V4d b = low + span * unit_of(mix64(state_a + gamma));
      memcpy(v0 + j, &a, sizeof a);
      memcpy(v1 + j, &b, sizeof b);
    }
    return;
  }
  /* The first tries in the lanes; the few misses one by one after each step. */
  V4d mean = splat(src->a), std = splat(src->b);
  for (size_t j = 0; j < PAIRS_PER_CHUNK; j += LANES, state_a += step) {
    V4u za = mix64(state_a), zb = mix64(state_a + gamma), miss_a, miss_b;
    V4d a = mean + std * normal_first_try(za, &miss_a);
    V4d b = mean + std * normal_first_try(zb, &miss_b);
    memcpy(v0 + j, &a, sizeof a);
    memcpy(v1 + j, &b, sizeof b);
    V4u any = miss_a | miss_b;
    if (!(any[0] | any[1] | any[2] | any[3])) continue;
    for (int l = 0; l < LANES; l++) {
      if (miss_a[l]) v0[j + l] = src->a + src->b * normal_retry(za[l]);
      if (miss_b[l]) v1[j + l] = src->a + src->b * normal_retry(zb[l]);
    }
  }
}

/* Rounds the values of elements at .. at+k-1 (pairs from v0/v1) to fp16;
 * returns whether any came out NaN or infinite. */
INLINE bool store_fp16_chunk(uint16_t *out, const double *v0, const double *v1, size_t k) {
  V4u special = splat_u(0);
  for (size_t j = 0; 2 * j < k; j += LANES) {
    V4d a, b;
    memcpy(&a, v0 + j, sizeof a);
    memcpy(&b, v1 + j, sizeof b);
    V4u h = fp16_bits(a) | fp16_bits(b) << 16; /* element 2j in the low half */
    special |= (V4u)((h & 0x7C00) == 0x7C00) | (V4u)((h & 0x7C000000) == 0x7C000000);
    V4u32 packed = __builtin_convertvector(h, V4u32);
    size_t left = k - 2 * j;
    memcpy(out + 2 * j, &packed, (left < 2 * LANES ? left : 2 * LANES) * sizeof *out);
  }
  uint64_t any = 0;
  for (int i = 0; i < LANES; i++) any |= special[i];
  return any != 0;
}

/* The same for fp32: C's conversion rounds to nearest even. */
INLINE bool store_fp32_chunk(float *out, const double *v0, const double *v1, size_t k) {
  V4u special = splat_u(0);
  for (size_t j = 0; 2 * j < k; j += LANES) {
    V4d a, b;
    memcpy(&a, v0 + j, sizeof a);
    memcpy(&b, v1 + j, sizeof b);
    V4u fa = __builtin_convertvector((V4u32)__builtin_convertvector(a, V4f), V4u);
    V4u fb = __builtin_convertvector((V4u32)__builtin_convertvector(b, V4f), V4u);
    V4u f = fa | fb << 32;
    special |= (V4u)((f & FP32_EXP_MASK) == FP32_EXP_MASK) |
               (V4u)((f & ((uint64_t)FP32_EXP_MASK << 32)) == (uint64_t)FP32_EXP_MASK << 32);
    size_t left = k - 2 * j;
    memcpy(out + 2 * j, &f, (left < 2 * LANES ? left : 2 * LANES) * sizeof *out);
  }
  uint64_t any = 0;
  for (int i = 0; i < LANES; i++) any |= special[i];
  return any != 0;
}

/* One chunk: its values into v0/v1 and, if out is set, rounded to the
 * dtype into out (k elements); returns whether any came out NaN or
 * infinite. Built once per code path below. */
INLINE bool chunk_kernel(const IrParamSource *src, uint64_t at, double *v0, double *v1, IrDType dt, void *out,
                         size_t k) {
  gen_chunk(src, at, v0, v1);
  if (!out) return false;
  return dt == DT_FP16 ? store_fp16_chunk(out, v0, v1, k) : store_fp32_chunk(out, v0, v1, k);
}

typedef bool ChunkFn(const IrParamSource *src, uint64_t at, double *v0, double *v1, IrDType dt, void *out, size_t k);

static bool chunk_portable(const IrParamSource *src, uint64_t at, double *v0, double *v1, IrDType dt, void *out,
                           size_t k) {
  return chunk_kernel(src, at, v0, v1, dt, out, k);
}

/* Wider builds of the same kernel for x86-64 CPUs that have them: AVX2
 * doubles the lanes of the integer steps (draws, fp16 rounding), AVX-512DQ
 * adds 64-bit multiplies for the draws. Neither may fuse a multiply and an
 * add: GCC in ISO C mode and clang under FP_CONTRACT OFF keep them apart,
 * and the tests compare every build's bits. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_WIDE_KERNELS 1
__attribute__((target("avx2"))) static bool chunk_avx2(const IrParamSource *src, uint64_t at, double *v0, double *v1,
                                                       IrDType dt, void *out, size_t k) {
  return chunk_kernel(src, at, v0, v1, dt, out, k);
}

#define AVX512_TARGET __attribute__((target("avx2,avx512f,avx512dq,avx512vl")))

/* SplitMix64's output function on eight lanes. */
AVX512_TARGET static inline __m512i mix64_x8(__m512i z) {
  z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)), _mm512_set1_epi64((long long)0xBF58476D1CE4E5B9ull));
  z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)), _mm512_set1_epi64((long long)0x94D049BB133111EBull));
  return _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
}

/* The values of eight elements from their draws z: the same operations as
 * gen_chunk (the unit draw by an exact conversion instead of bit tricks),
 * the first tries of `normal` with scalar table reads, its rare retries one
 * by one. */
AVX512_TARGET __attribute__((always_inline)) static inline __m512d values_x8(const IrParamSource *src, __m512i z) {
  __m512d u = _mm512_mul_pd(_mm512_cvtepu64_pd(_mm512_srli_epi64(z, 11)), _mm512_set1_pd(0x1p-53));
  if (src->kind == SRC_UNIFORM)
    return _mm512_add_pd(_mm512_set1_pd(src->a), _mm512_mul_pd(_mm512_set1_pd(src->b - src->a), u));
  /* The two table reads per lane as plain loads: on Zen 4 sixteen scalar
   * loads take about half as long as two vector gathers. */
  uint64_t idx[8];
  _mm512_storeu_si512(idx, _mm512_and_si512(z, _mm512_set1_epi64(ZIG_LAYER_MASK)));
  __m512d edge = _mm512_setr_pd(zig_x[idx[0]], zig_x[idx[1]], zig_x[idx[2]], zig_x[idx[3]], zig_x[idx[4]], zig_x[idx[5]],
                                zig_x[idx[6]], zig_x[idx[7]]);
  __m512d next = _mm512_setr_pd(zig_x[idx[0] + 1], zig_x[idx[1] + 1], zig_x[idx[2] + 1], zig_x[idx[3] + 1], zig_x[idx[4] + 1],
                                zig_x[idx[5] + 1], zig_x[idx[6] + 1], zig_x[idx[7] + 1]);
  __m512d x = _mm512_mul_pd(u, edge);
  __mmask8 miss = _mm512_cmp_pd_mask(x, next, _CMP_GE_OQ);
  __m512i sign = _mm512_slli_epi64(_mm512_and_si512(_mm512_srli_epi64(z, ZIG_SIGN_BIT), _mm512_set1_epi64(1)), 63);
  x = _mm512_castsi512_pd(_mm512_xor_si512(_mm512_castpd_si512(x), sign));
  __m512d v = _mm512_add_pd(_mm512_set1_pd(src->a), _mm512_mul_pd(_mm512_set1_pd(src->b), x));
  if (miss) {
    double lanes[8];
    uint64_t draws[8];
    _mm512_storeu_pd(lanes, v);
    _mm512_storeu_si512(draws, z);
    for (int l = 0; l < 8; l++)
      if (miss & (1u << l)) lanes[l] = src->a + src->b * normal_retry(draws[l]);
    v = _mm512_loadu_pd(lanes);
  }
  return v;
}

/* fp16 bits of eight doubles, rounded once: rounding to fp32 toward zero and
 * setting the last bit when inexact ("round to odd") keeps enough to make
 * the second rounding, fp32 -> fp16 to nearest even, give the exact
 * rounding of the double (fp32 has more than two bits beyond fp16's). */
AVX512_TARGET static inline __m128i fp16_x8(__m512d v) {
  __m256 f = _mm512_cvt_roundpd_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  __mmask8 inexact = _mm512_cmp_pd_mask(_mm512_cvtps_pd(f), v, _CMP_NEQ_UQ);
  __m256i odd = _mm256_mask_or_epi32(_mm256_castps_si256(f), inexact, _mm256_castps_si256(f), _mm256_set1_epi32(1));
  return _mm256_maskz_cvtps_ph(0xFF, _mm256_castsi256_ps(odd), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

/* A whole chunk into out, sixteen elements a step, with no staging: elements
 * at+2l come from one vector of draws and at+2l+1 from the next (the layout
 * of gen_chunk), interleaved on the way out. */
AVX512_TARGET static bool chunk_avx512_full(const IrParamSource *src, uint64_t at, IrDType dt, void *out) {
  const uint64_t gamma = SPLITMIX64_GAMMA;
  __m512i state = _mm512_add_epi64(_mm512_set1_epi64((long long)(src->seed + at * gamma)),
                                   _mm512_mullo_epi64(_mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15),
                                                      _mm512_set1_epi64((long long)gamma)));
  const __m512i step = _mm512_set1_epi64((long long)(16 * gamma)), next = _mm512_set1_epi64((long long)gamma);
  if (dt == DT_FP16) {
    uint16_t *h = out;
    __m256i special = _mm256_setzero_si256(), exp_mask = _mm256_set1_epi16(0x7C00);
    for (size_t i = 0; i < CHUNK; i += 16, state = _mm512_add_epi64(state, step)) {
      __m128i a = fp16_x8(values_x8(src, mix64_x8(state)));
      __m128i b = fp16_x8(values_x8(src, mix64_x8(_mm512_add_epi64(state, next))));
      __m256i both = _mm256_setr_m128i(_mm_unpacklo_epi16(a, b), _mm_unpackhi_epi16(a, b));
      _mm256_storeu_si256((__m256i *)(h + i), both);
      special = _mm256_or_si256(special, _mm256_cmpeq_epi16(_mm256_and_si256(both, exp_mask), exp_mask));
    }
    return !_mm256_testz_si256(special, special);
  }
  float *f = out;
  const __m512i exp_mask = _mm512_set1_epi32(0x7F800000);
  unsigned special = 0;
  const __m512i interleave = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  for (size_t i = 0; i < CHUNK; i += 16, state = _mm512_add_epi64(state, step)) {
    __m256 a = _mm512_cvtpd_ps(values_x8(src, mix64_x8(state)));
    __m256 b = _mm512_cvtpd_ps(values_x8(src, mix64_x8(_mm512_add_epi64(state, next))));
    __m512i both = _mm512_permutex2var_epi32(_mm512_castsi256_si512(_mm256_castps_si256(a)), interleave,
                                             _mm512_castsi256_si512(_mm256_castps_si256(b)));
    _mm512_storeu_si512(f + i, both);
    special |= _mm512_cmpeq_epi32_mask(_mm512_and_si512(both, exp_mask), exp_mask);
  }
  return special != 0;
}

/* Whole chunks go straight to the output; the last, partial chunk and
 * requests for the doubles take the staged path. When a chunk holds a NaN or
 * an infinity its doubles are staged again for the caller (rare). */
AVX512_TARGET static bool chunk_avx512(const IrParamSource *src, uint64_t at, double *v0, double *v1, IrDType dt,
                                       void *out, size_t k) {
  if (!out || k != CHUNK) return chunk_kernel(src, at, v0, v1, dt, out, k);
  if (!chunk_avx512_full(src, at, dt, out)) return false;
  gen_chunk(src, at, v0, v1);
  return true;
}
#endif

/* The kernel of a code path, or NULL if this CPU cannot run it. */
static ChunkFn *kernel_for(WeightsCodePath path) {
#ifdef HAVE_WIDE_KERNELS
  __builtin_cpu_init();
  bool avx2 = __builtin_cpu_supports("avx2");
  bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                __builtin_cpu_supports("avx512vl");
  switch (path) {
  case WEIGHTS_CODE_AUTO: return avx512 ? chunk_avx512 : avx2 ? chunk_avx2 : chunk_portable;
  case WEIGHTS_CODE_AVX2: return avx2 ? chunk_avx2 : NULL;
  case WEIGHTS_CODE_AVX512: return avx512 ? chunk_avx512 : NULL;
  case WEIGHTS_CODE_PORTABLE: return chunk_portable;
  }
  return NULL;
#else
  return path == WEIGHTS_CODE_AUTO || path == WEIGHTS_CODE_PORTABLE ? chunk_portable : NULL;
#endif
}

/* Which kernel runs: picked on first use, or set by weights_use_code_path. */
static ChunkFn *_Atomic chunk_fn;

static ChunkFn *chunk_fn_get(void) {
  ChunkFn *f = atomic_load(&chunk_fn);
  if (!f) {
    f = kernel_for(WEIGHTS_CODE_AUTO);
    atomic_store(&chunk_fn, f);
  }
  return f;
}

bool weights_use_code_path(WeightsCodePath path) {
  ChunkFn *f = kernel_for(path);
  if (f) atomic_store(&chunk_fn, f);
  return f != NULL;
}

void weights_random_values(const IrParamSource *src, uint64_t first, size_t count, double *out) {
  if (src->kind != SRC_NORMAL && src->kind != SRC_UNIFORM) ice("weights_random_values on a non-random source");
  if (first % 2) ice("weights_random_values from odd element %llu", (unsigned long long)first);
  ChunkFn *fn = chunk_fn_get();
  double v0[PAIRS_PER_CHUNK], v1[PAIRS_PER_CHUNK];
  for (size_t done = 0; done < count; done += CHUNK) {
    size_t k = count - done < CHUNK ? count - done : CHUNK;
    fn(src, first + done, v0, v1, DT_FP32, NULL, k);
    for (size_t i = 0; i < k; i++) out[done + i] = (i & 1 ? v1 : v0)[i / 2];
  }
}

/* The slow path of a chunk with a NaN or infinity in its output. */
static void fix_chunk(WeightOut *o, uint64_t at, size_t k, const double *v0, const double *v1) {
  for (size_t i = 0; i < k; i++) {
    double v = (i & 1 ? v1 : v0)[i / 2];
    if (o->dtype == DT_FP16) {
      uint16_t *h = (uint16_t *)o->data + at + i;
      if ((*h & FP16_EXP_MASK) != FP16_EXP_MASK) continue;
      if (isnan(v)) weights_note_nan(o, at + i);
      else *h = weights_note_over(o, at + i, v, false);
    } else {
      if (isfinite(((float *)o->data)[at + i])) continue;
      if (isnan(v)) weights_note_nan(o, at + i);
      else weights_note_over(o, at + i, v, false);
    }
  }
}

/* Generates elements [begin, end) of a random initializer; begin is a
 * multiple of CHUNK, and each chunk finds its generator state by jump-ahead
 * (element i comes from draw i + 1), so the split does not matter. The last
 * chunk is computed whole and stored in part. */
static void gen_range(WeightOut *o, uint64_t begin, uint64_t end) {
  ChunkFn *fn = chunk_fn_get();
  size_t size = ir_dtype_size(o->dtype);
  double v0[PAIRS_PER_CHUNK], v1[PAIRS_PER_CHUNK];
  for (uint64_t at = begin; at < end; at += CHUNK) {
    size_t k = end - at < CHUNK ? (size_t)(end - at) : CHUNK;
    if (fn(&o->param->src, at, v0, v1, o->dtype, (uint8_t *)o->data + at * size, k)) fix_chunk(o, at, k, v0, v1);
  }
}

/* Random initializers are the most work of a compile (124M values for a
 * GPT-2): shared out over the cores; jump-ahead makes the result
 * independent of who made which slice. */
static void gen_slice(WeightOut *o, uint64_t begin, uint64_t end, const void *arg) {
  (void)arg;
  gen_range(o, begin, end);
}

bool weights_make_random(WeightOut *o) {
  weights_run_slices(o, gen_slice, NULL);
  return weights_report_problems(o);
}
