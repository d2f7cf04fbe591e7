/*
 * The many-row products on AMX tiles (Intel Advanced Matrix Extensions,
 * TDPBF16PS), for CPUs and kernels that offer them (docs/cpu-backend.md,
 * "Linear algebra", the AMX path). k_linalg.c cuts the products into the
 * same pieces as the packed GEMM's; this file packs operands into bf16
 * piece planes in the tiles' layouts and multiplies blocks.
 *
 * Numerics: a float x is split exactly into three bf16 pieces x = x1 + x2 +
 * x3 (each the truncation of what the earlier ones leave), an fp16 value
 * into two (x3 = 0). A product a b is the sum of the piece products ai bj
 * with i + j <= 4: a1b1, a1b2, a1b3, a2b1, a2b2, a3b1, in that order for each
 * 32 k, all into one fp32 accumulator (TDPBF16PS: the bf16 products exact,
 * each added with round to nearest, denormal inputs read as zero, denormal
 * results flushed). A pass whose piece plane is all zero in a 32 x 32 block
 * (fp16 operands' third pieces) is skipped. The dropped pairs are below
 * 2^-20 |a b|; every output gets its terms in one fixed order decided by the
 * data and the shape alone, so the bits do not depend on the thread count.
 * A block whose operands hold an infinity or a NaN is summed by fmaf
 * instead (an infinite piece times another value's zero piece would give a
 * NaN where IEEE arithmetic gives an infinity).
 */
#include "cpu_internal.h"

#include <math.h>
#include <stdlib.h>

#if HAVE_X86

/* One target for every function here, so that the small helpers inline (GCC inlines only into a superset). */
#define AMX __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16,f16c,fma")))

/* Flags of one packed tile group (16 rows or columns by 32 k). */
enum { AMX_NONFINITE = 1, AMX_PIECE2 = 2, AMX_PIECE3 = 4 };

bool gemm_amx_on(void) { return cpu_features()->amx; }

/* The tile configuration, loaded by each thread before its first tile
 * instruction: palette 1, tiles 0-3 the 16 x 16 fp32 sums of a 32 x 32
 * block, 4-5 two row groups of A, 6-7 two column groups of B, each 16 rows
 * of 64 bytes. The kernel keeps it for the thread's life. */
typedef struct __attribute__((packed)) TileConfig {
  uint8_t palette, start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} TileConfig;

/* In static storage: GCC 12's _tile_loadconfig tells the compiler it reads
 * only the first 8 bytes, so a local's other stores could be dropped. */
static const TileConfig tile_config = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

static _Thread_local bool tiles_configured;

AMX static void configure_tiles(void) {
  if (tiles_configured) return;
  _tile_loadconfig(&tile_config);
  tiles_configured = true;
}

/* ---- splitting into pieces ---- */

static inline uint32_t bits_of(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  return u;
}
static inline float float_of(uint32_t u) {
  float x;
  memcpy(&x, &u, 4);
  return x;
}

/* The three bf16 pieces of x; a non-finite x is its own first piece (a NaN
 * kept a NaN: truncation alone could make it an infinity). */
static inline void split_scalar(float x, uint16_t p[3], uint8_t *flags) {
  uint32_t u = bits_of(x);
  if ((u & 0x7f800000u) == 0x7f800000u) {
    p[0] = (uint16_t)((u >> 16) | ((u & 0x7fffffu) ? 0x40u : 0u));
    p[1] = p[2] = 0;
    *flags |= AMX_NONFINITE;
    return;
  }
  uint32_t h1 = u & 0xffff0000u;
  float r = x - float_of(h1);
  uint32_t h2 = bits_of(r) & 0xffff0000u;
  uint32_t h3 = bits_of(r - float_of(h2));
  p[0] = (uint16_t)(h1 >> 16), p[1] = (uint16_t)(h2 >> 16), p[2] = (uint16_t)(h3 >> 16);
  if (h2 & 0x7fff0000u) *flags |= AMX_PIECE2;
  if (h3 & 0x7fff0000u) *flags |= AMX_PIECE3;
}

/* What a tile's pieces hold, gathered as they are split and turned into its flags once. */
typedef struct PieceSeen {
  __m512i any2, any3; /* OR of the second and third pieces' bits */
  uint8_t nonfinite;
} PieceSeen;

AMX static inline PieceSeen seen_none(void) {
  return (PieceSeen){.any2 = _mm512_setzero_si512(), .any3 = _mm512_setzero_si512(), .nonfinite = 0};
}

AMX static inline uint8_t seen_flags(const PieceSeen *ps) {
  const __m512i mag = _mm512_set1_epi32(0x7fff0000);
  return (uint8_t)(ps->nonfinite | (_mm512_test_epi32_mask(ps->any2, mag) ? AMX_PIECE2 : 0) |
                   (_mm512_test_epi32_mask(ps->any3, mag) ? AMX_PIECE3 : 0));
}

/* The same for 16 floats: the pieces' fp32 bits (low halves zero). */
AMX static inline void split16(__m512 x, __m512i h[3], PieceSeen *ps) {
  const __m512i hi = _mm512_set1_epi32((int)0xffff0000u), ex = _mm512_set1_epi32(0x7f800000);
  __m512i u = _mm512_castps_si512(x);
  __mmask16 nf = _mm512_cmpeq_epi32_mask(_mm512_and_si512(u, ex), ex);
  __m512i h1 = _mm512_and_si512(u, hi);
  __m512 r = _mm512_sub_ps(x, _mm512_castsi512_ps(h1));
  __m512i h2 = _mm512_and_si512(_mm512_castps_si512(r), hi);
  __m512i h3 = _mm512_castps_si512(_mm512_sub_ps(r, _mm512_castsi512_ps(h2)));
  if (nf) {
    __mmask16 nan = nf & _mm512_test_epi32_mask(u, _mm512_set1_epi32(0x7fffff));
    h1 = _mm512_mask_or_epi32(h1, nan, h1, _mm512_set1_epi32(0x400000));
    h2 = _mm512_maskz_mov_epi32((__mmask16)~nf, h2), h3 = _mm512_maskz_mov_epi32((__mmask16)~nf, h3);
    ps->nonfinite = AMX_NONFINITE;
  }
  ps->any2 = _mm512_or_si512(ps->any2, h2), ps->any3 = _mm512_or_si512(ps->any3, h3);
  h[0] = h1, h[1] = h2, h[2] = h3;
}

/* The same for 16 fp16 values as floats: 11 significant bits, so x - x1 is the second piece exactly and the third
 * is zero (not computed). */
AMX static inline void split16_h16(__m512 x, __m512i h[3], PieceSeen *ps) {
  const __m512i hi = _mm512_set1_epi32((int)0xffff0000u), ex = _mm512_set1_epi32(0x7f800000);
  __m512i u = _mm512_castps_si512(x);
  __mmask16 nf = _mm512_cmpeq_epi32_mask(_mm512_and_si512(u, ex), ex);
  __m512i h1 = _mm512_and_si512(u, hi);
  __m512i h2 = _mm512_castps_si512(_mm512_sub_ps(x, _mm512_castsi512_ps(h1)));
  if (nf) {
    __mmask16 nan = nf & _mm512_test_epi32_mask(u, _mm512_set1_epi32(0x7fffff));
    h1 = _mm512_mask_or_epi32(h1, nan, h1, _mm512_set1_epi32(0x400000));
    h2 = _mm512_maskz_mov_epi32((__mmask16)~nf, h2);
    ps->nonfinite = AMX_NONFINITE;
  }
  ps->any2 = _mm512_or_si512(ps->any2, h2);
  h[0] = h1, h[1] = h2, h[2] = _mm512_setzero_si512();
}

/* 32 pieces (lo's 16, then hi's) as bf16. A piece is exact in bf16, so the rounding conversion only moves
 * the bits (its flush of denormals is the tiles' own). */
AMX static inline __m512i bf16_pair(__m512i lo, __m512i hi) {
  return (__m512i)_mm512_cvtne2ps_pbh(_mm512_castsi512_ps(hi), _mm512_castsi512_ps(lo));
}

/* 16 elements of a source row from p (the first m of them, the rest zero), as floats. */
AMX static inline __m512 load16(const void *p, bool h16, __mmask16 m) {
  if (h16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
  return _mm512_maskz_loadu_ps(m, p);
}

/* Tile t of group g at k-block kb: AMX_PLANES tiles of AMX_TILE_ELEMS bf16. */
static inline uint16_t *tile_at(AmxPacked d, int64_t g, int64_t kb) {
  return d.p + (g * d.gstride + kb) * AMX_PLANES * AMX_TILE_ELEMS;
}

/* ---- packing ---- */

/* Any strides, element by element: the A side's tiles [16 rows][32 k], or (vnni) the B side's [16 k pairs][16
 * columns][2]. */
static void pack_scalar(AmxPacked d, GemmSrc s, int64_t i0, int64_t n, int64_t k0, int64_t nk, bool vnni) {
  int64_t groups = 2 * ((n + 31) / 32), kbs = (nk + 31) / 32;
  for (int64_t g = 0; g < groups; g++)
    for (int64_t kb = 0; kb < kbs; kb++) {
      uint16_t *t = tile_at(d, g, kb);
      uint8_t fl = 0;
      for (int64_t r = 0; r < 16; r++)
        for (int64_t kk = 0; kk < 32; kk++) {
          int64_t row = g * 16 + r, k = kb * 32 + kk, at = vnni ? (kk / 2) * 32 + r * 2 + (kk & 1) : r * 32 + kk;
          uint16_t p[3] = {0, 0, 0};
          if (row < n && k < nk) split_scalar(gemm_src_at(s, i0 + row, k0 + k), p, &fl);
          for (int q = 0; q < AMX_PLANES; q++) t[q * AMX_TILE_ELEMS + at] = p[q];
        }
      d.flags[g * d.gstride + kb] = fl;
    }
}

/* Rows whose k run contiguously (a weight [O, K], a conv's weight [O, C], activations [R, K]): each row's k range
 * read in order (the prefetchers follow it) and the next range's lines asked for ahead. */
AMX static void pack_rows_kcontig(AmxPacked d, GemmSrc s, int64_t i0, int64_t n, int64_t k0, int64_t nk) {
  int64_t groups = 2 * ((n + 31) / 32), kbs = (nk + 31) / 32, es = s.h16 ? 2 : 4;
  int planes = s.h16 ? 2 : AMX_PLANES; /* an fp16 value's third piece is zero: its flag says so, the plane is not read */
  PieceSeen seen[AMX_KC / 32];
  for (int64_t g = 0; g < groups; g++) {
    for (int64_t kb = 0; kb < kbs; kb++) seen[kb] = seen_none();
    for (int64_t r = 0; r < 16; r++) {
      int64_t row = g * 16 + r;
      const unsigned char *p = (const unsigned char *)s.p + ((i0 + row) * s.si + k0) * es;
      if (row < n)
        for (int64_t line = 0; line < nk * es; line += 64) __builtin_prefetch(p + nk * es + line, 0, 2);
      for (int64_t kb = 0; kb < kbs; kb++) {
        uint16_t *t = tile_at(d, g, kb);
        int64_t kn = nk - kb * 32;
        __m512i lo[3], hi[3];
        if (row < n && s.h16) {
          split16_h16(load16(p + kb * 32 * es, true, gemm_lanes(kn)), lo, &seen[kb]);
          split16_h16(load16(p + (kb * 32 + 16) * es, true, gemm_lanes(kn - 16)), hi, &seen[kb]);
        } else if (row < n) {
          split16(load16(p + kb * 32 * es, false, gemm_lanes(kn)), lo, &seen[kb]);
          split16(load16(p + (kb * 32 + 16) * es, false, gemm_lanes(kn - 16)), hi, &seen[kb]);
        } else {
          for (int q = 0; q < 3; q++) lo[q] = hi[q] = _mm512_setzero_si512();
        }
        for (int q = 0; q < planes; q++)
          _mm512_storeu_si512((void *)(t + q * AMX_TILE_ELEMS + r * 32), bf16_pair(lo[q], hi[q]));
      }
    }
    for (int64_t kb = 0; kb < kbs; kb++) d.flags[g * d.gstride + kb] = seen_flags(&seen[kb]);
  }
}

/* Columns contiguous along n (a weight [K, O] read in place, activations [K, P] of a conv, a transposed x's
 * columns): a k pair's two rows interleaved lane by lane, each row's run over up to AMX_NC_GROUPS groups read
 * at once (rows far apart: one page each, so once per k, not once per group). */
#define AMX_NC_GROUPS 8
#define AMX_NC_AHEAD 16
AMX static void pack_cols_ncontig(AmxPacked d, GemmSrc s, int64_t j0, int64_t n, int64_t k0, int64_t nk) {
  int64_t groups = 2 * ((n + 31) / 32), kbs = (nk + 31) / 32, es = s.h16 ? 2 : 4;
  const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
  for (int64_t g0 = 0; g0 < groups; g0 += AMX_NC_GROUPS) {
    int64_t ng = groups - g0 < AMX_NC_GROUPS ? groups - g0 : AMX_NC_GROUPS;
    for (int64_t kb = 0; kb < kbs; kb++) {
      PieceSeen seen[AMX_NC_GROUPS];
      for (int64_t g = 0; g < ng; g++) seen[g] = seen_none();
      for (int64_t pr = 0; pr < 16; pr++) {
        int64_t k = kb * 32 + 2 * pr;
        const unsigned char *row = (const unsigned char *)s.p + ((k0 + k) * s.sk + j0) * es;
        /* the pair AMX_NC_AHEAD k on asked for now: the rows' lines come from memory, not the prefetchers */
        if (k + AMX_NC_AHEAD + 1 < nk)
          for (int64_t line = 0; line < ng * 16 * es; line += 64) {
            __builtin_prefetch(row + AMX_NC_AHEAD * s.sk * es + line, 0, 1);
            __builtin_prefetch(row + (AMX_NC_AHEAD + 1) * s.sk * es + line, 0, 1);
          }
        for (int64_t g = g0; g < g0 + ng; g++) {
          __mmask16 m = gemm_lanes(n - g * 16);
          uint16_t *t = tile_at(d, g, kb);
          __m512i e[3], o[3];
          const unsigned char *p = row + g * 16 * es;
          if (m && k < nk) split16(load16(p, s.h16, m), e, &seen[g - g0]);
          else for (int q = 0; q < 3; q++) e[q] = _mm512_setzero_si512();
          if (m && k + 1 < nk) split16(load16(p + s.sk * es, s.h16, m), o, &seen[g - g0]);
          else for (int q = 0; q < 3; q++) o[q] = _mm512_setzero_si512();
          for (int q = 0; q < AMX_PLANES; q++)
            _mm512_storeu_si512((void *)(t + q * AMX_TILE_ELEMS + pr * 32),
                                _mm512_or_si512(_mm512_srli_epi32(e[q], 16), _mm512_and_si512(o[q], hi)));
        }
      }
      for (int64_t g = 0; g < ng; g++) d.flags[(g0 + g) * d.gstride + kb] = seen_flags(&seen[g]);
    }
  }
}

/* Columns whose k run contiguously (a weight [O, K]): each column's 32 k as 16 pairs, then the 16 x 16 pairs
 * transposed in registers (as floats: only the bits move). */
AMX static void pack_cols_kcontig(AmxPacked d, GemmSrc s, int64_t j0, int64_t n, int64_t k0, int64_t nk) {
  int64_t groups = 2 * ((n + 31) / 32), kbs = (nk + 31) / 32, es = s.h16 ? 2 : 4;
  for (int64_t g = 0; g < groups; g++)
    for (int64_t kb = 0; kb < kbs; kb++) {
      uint16_t *t = tile_at(d, g, kb);
      PieceSeen seen = seen_none();
      int64_t kn = nk - kb * 32;
      __mmask16 m0 = gemm_lanes(kn), m1 = gemm_lanes(kn - 16);
      __m512 cols[AMX_PLANES][16];
      for (int64_t c = 0; c < 16; c++) {
        int64_t col = g * 16 + c;
        __m512i lo[3], hi[3];
        if (col < n) {
          const unsigned char *p = (const unsigned char *)s.p + ((j0 + col) * s.si + k0 + kb * 32) * es;
          split16(load16(p, s.h16, m0), lo, &seen);
          split16(load16(p + 16 * es, s.h16, m1), hi, &seen);
        } else {
          for (int q = 0; q < 3; q++) lo[q] = hi[q] = _mm512_setzero_si512();
        }
        for (int q = 0; q < AMX_PLANES; q++) cols[q][c] = _mm512_castsi512_ps(bf16_pair(lo[q], hi[q]));
      }
      for (int q = 0; q < AMX_PLANES; q++) {
        __m512 rows[16];
        gemm_transpose16(cols[q], rows);
        for (int pr = 0; pr < 16; pr++) _mm512_storeu_ps(t + q * AMX_TILE_ELEMS + pr * 32, rows[pr]);
      }
      d.flags[g * d.gstride + kb] = seen_flags(&seen);
    }
}

/* Rows contiguous along m (a transposed x, the dy^T of a weight's gradient): each k pair's two rows of 16
 * values interleaved into 16 pairs, then the 16 x 16 pairs transposed in registers into the tile's rows. */
AMX static void pack_rows_mcontig(AmxPacked d, GemmSrc s, int64_t i0, int64_t n, int64_t k0, int64_t nk) {
  int64_t groups = 2 * ((n + 31) / 32), kbs = (nk + 31) / 32, es = s.h16 ? 2 : 4;
  const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
  for (int64_t g = 0; g < groups; g++) {
    __mmask16 m = gemm_lanes(n - g * 16);
    for (int64_t kb = 0; kb < kbs; kb++) {
      uint16_t *t = tile_at(d, g, kb);
      PieceSeen seen = seen_none();
      __m512 pairs[AMX_PLANES][16];
      for (int64_t pr = 0; pr < 16; pr++) {
        int64_t k = kb * 32 + 2 * pr;
        __m512i e[3], o[3];
        const unsigned char *p = (const unsigned char *)s.p + (i0 + g * 16 + (k0 + k) * s.sk) * es;
        if (m && k < nk) split16(load16(p, s.h16, m), e, &seen);
        else for (int q = 0; q < 3; q++) e[q] = _mm512_setzero_si512();
        if (m && k + 1 < nk) split16(load16(p + s.sk * es, s.h16, m), o, &seen);
        else for (int q = 0; q < 3; q++) o[q] = _mm512_setzero_si512();
        for (int q = 0; q < AMX_PLANES; q++)
          pairs[q][pr] = _mm512_castsi512_ps(_mm512_or_si512(_mm512_srli_epi32(e[q], 16), _mm512_and_si512(o[q], hi)));
      }
      for (int q = 0; q < AMX_PLANES; q++) {
        __m512 rows[16];
        gemm_transpose16(pairs[q], rows);
        for (int r = 0; r < 16; r++) _mm512_storeu_ps(t + q * AMX_TILE_ELEMS + r * 32, rows[r]);
      }
      d.flags[g * d.gstride + kb] = seen_flags(&seen);
    }
  }
}

AmxPacked gemm_amx_view(void *base, int64_t n, int64_t K, int64_t g, int64_t kb) {
  int64_t nkb = (K + 31) / 32, groups = (n + 31) / 32 * 2;
  uint16_t *p = base;
  uint8_t *flags = (uint8_t *)(p + groups * nkb * AMX_PLANES * AMX_TILE_ELEMS);
  return (AmxPacked){.p = p + (g * nkb + kb) * AMX_PLANES * AMX_TILE_ELEMS, .flags = flags + g * nkb + kb,
                     .gstride = nkb};
}

void gemm_amx_pack_rows(AmxPacked d, GemmSrc s, int64_t i0, int64_t n, int64_t k0, int64_t nk) {
  if (s.sk != 1) {
    if (s.si == 1) pack_rows_mcontig(d, s, i0, n, k0, nk);
    else pack_scalar(d, s, i0, n, k0, nk, false);
    return;
  }
  for (int64_t c0 = 0; c0 < nk; c0 += AMX_KC) { /* AMX_KC at a time: what one row's read covers */
    AmxPacked at = d;
    at.p += (c0 / 32) * AMX_PLANES * AMX_TILE_ELEMS, at.flags += c0 / 32;
    pack_rows_kcontig(at, s, i0, n, k0 + c0, nk - c0 < AMX_KC ? nk - c0 : AMX_KC);
  }
}

void gemm_amx_pack_cols(AmxPacked d, GemmSrc s, int64_t j0, int64_t n, int64_t k0, int64_t nk) {
  if (s.sk == 1) pack_cols_kcontig(d, s, j0, n, k0, nk);
  else if (s.si == 1) pack_cols_ncontig(d, s, j0, n, k0, nk);
  else pack_scalar(d, s, j0, n, k0, nk, true);
}

/* ---- multiplying ---- */

static inline int planes_of(uint8_t fl) { return fl & AMX_PIECE3 ? 3 : fl & AMX_PIECE2 ? 2 : 1; }

/* A value rebuilt (exactly) from its pieces: the planes its tile's flags say are there (an fp16 source's third
 * plane is not written). */
static inline float piece_value(const uint16_t *t, uint8_t fl, int64_t at) {
  float v = 0;
  for (int q = 0; q < planes_of(fl); q++) v += float_of((uint32_t)t[q * AMX_TILE_ELEMS + at] << 16);
  return v;
}

/* A 32 x 32 block whose operands hold a non-finite value: the values
 * rebuilt from their pieces and summed by one fmaf per k. */
static void block_fmaf(AmxPacked A, int64_t ga, AmxPacked B, int64_t gb, int64_t nkb, float *T, int64_t ldt) {
  for (int64_t i = 0; i < 32; i++)
    for (int64_t j = 0; j < 32; j++) {
      float c = T[i * ldt + j];
      for (int64_t kb = 0; kb < nkb; kb++) {
        int64_t a = (ga + i / 16) * A.gstride + kb, b = (gb + j / 16) * B.gstride + kb;
        const uint16_t *ta = A.p + a * AMX_PLANES * AMX_TILE_ELEMS, *tb = B.p + b * AMX_PLANES * AMX_TILE_ELEMS;
        for (int64_t kk = 0; kk < 32; kk++)
          c = fmaf(piece_value(ta, A.flags[a], (i % 16) * 32 + kk),
                   piece_value(tb, B.flags[b], (kk / 2) * 32 + (j % 16) * 2 + (kk & 1)), c);
      }
      T[i * ldt + j] = c;
    }
}

/* T[32, 32] (ldt floats, a multiple of 16) += A's row groups ga, ga + 1 by B's column groups gb, gb + 1 over nkb
 * k-blocks, on the tiles. */
AMX static void block_tiles(AmxPacked A, int64_t ga, AmxPacked B, int64_t gb, int64_t nkb, float *T, int64_t ldt,
                            bool acc) {
  size_t ld = (size_t)ldt * sizeof(float);
  if (acc) {
    _tile_loadd(0, T, ld);
    _tile_loadd(1, T + 16, ld);
    _tile_loadd(2, T + 16 * ldt, ld);
    _tile_loadd(3, T + 16 * ldt + 16, ld);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  for (int64_t kb = 0; kb < nkb; kb++) {
    const uint16_t *a0 = tile_at(A, ga, kb), *a1 = tile_at(A, ga + 1, kb);
    const uint16_t *b0 = tile_at(B, gb, kb), *b1 = tile_at(B, gb + 1, kb);
    int na = planes_of(A.flags[ga * A.gstride + kb] | A.flags[(ga + 1) * A.gstride + kb]);
    int nb = planes_of(B.flags[gb * B.gstride + kb] | B.flags[(gb + 1) * B.gstride + kb]);
    for (int ia = 0; ia < na; ia++) {
      _tile_loadd(4, a0 + ia * AMX_TILE_ELEMS, 64);
      _tile_loadd(5, a1 + ia * AMX_TILE_ELEMS, 64);
      for (int jb = 0; jb < nb && ia + jb <= 2; jb++) {
        _tile_loadd(6, b0 + jb * AMX_TILE_ELEMS, 64);
        _tile_loadd(7, b1 + jb * AMX_TILE_ELEMS, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
    }
  }
  _tile_stored(0, T, ld);
  _tile_stored(1, T + 16, ld);
  _tile_stored(2, T + 16 * ldt, ld);
  _tile_stored(3, T + 16 * ldt + 16, ld);
}

static bool any_nonfinite(AmxPacked d, int64_t g, int64_t nkb) {
  uint8_t fl = 0;
  for (int64_t kb = 0; kb < nkb; kb++) fl |= d.flags[g * d.gstride + kb] | d.flags[(g + 1) * d.gstride + kb];
  return fl & AMX_NONFINITE;
}

void gemm_amx_block(AmxPacked A, AmxPacked B, int64_t M, int64_t N, int64_t nkb, float *T, int64_t ldt, bool acc) {
  configure_tiles();
  int64_t mp = (M + 31) / 32 * 32, np = (N + 31) / 32 * 32;
  /* Column blocks outer: B's 32 columns by the k range stay in L1 while A's row blocks pass. */
  for (int64_t n0 = 0; n0 < np; n0 += 32)
    for (int64_t m0 = 0; m0 < mp; m0 += 32) {
      float *t = T + m0 * ldt + n0;
      if (any_nonfinite(A, m0 / 16, nkb) || any_nonfinite(B, n0 / 16, nkb)) {
        for (int64_t i = 0; !acc && i < 32; i++) memset(t + i * ldt, 0, 32 * sizeof(float));
        block_fmaf(A, m0 / 16, B, n0 / 16, nkb, t, ldt);
      } else {
        block_tiles(A, m0 / 16, B, n0 / 16, nkb, t, ldt, acc);
      }
    }
}

/* C[r][o] = bias[o] + T[o][r]: 16 x 16 blocks transposed in registers. */
AMX void gemm_amx_store_transposed(const float *T, int64_t ldt, int64_t no, int64_t nr, const float *bias, float *C,
                                      int64_t ldc) {
  for (int64_t o0 = 0; o0 < no; o0 += 16) {
    __mmask16 mo = gemm_lanes(no - o0);
    __m512 b = bias ? _mm512_maskz_loadu_ps(mo, bias + o0) : _mm512_setzero_ps();
    for (int64_t r0 = 0; r0 < nr; r0 += 16) {
      __m512 in[16], out[16];
      for (int i = 0; i < 16; i++) in[i] = _mm512_loadu_ps(T + (o0 + i) * ldt + r0); /* T is padded to 32 x 32 */
      gemm_transpose16(in, out);
      for (int64_t r = 0; r < 16 && r0 + r < nr; r++)
        _mm512_mask_storeu_ps(C + (r0 + r) * ldc + o0, mo, bias ? _mm512_add_ps(b, out[r]) : out[r]);
    }
  }
}

#else

bool gemm_amx_on(void) { return false; }
AmxPacked gemm_amx_view(void *base, int64_t n, int64_t K, int64_t g, int64_t kb) {
  (void)base, (void)n, (void)K, (void)g, (void)kb;
  return (AmxPacked){0};
}
void gemm_amx_store_transposed(const float *T, int64_t ldt, int64_t no, int64_t nr, const float *bias, float *C,
                               int64_t ldc) {
  (void)T, (void)ldt, (void)no, (void)nr, (void)bias, (void)C, (void)ldc;
}
void gemm_amx_pack_rows(AmxPacked d, GemmSrc s, int64_t i0, int64_t n, int64_t k0, int64_t nk) {
  (void)d, (void)s, (void)i0, (void)n, (void)k0, (void)nk;
}
void gemm_amx_pack_cols(AmxPacked d, GemmSrc s, int64_t j0, int64_t n, int64_t k0, int64_t nk) {
  (void)d, (void)s, (void)j0, (void)n, (void)k0, (void)nk;
}
void gemm_amx_block(AmxPacked A, AmxPacked B, int64_t M, int64_t N, int64_t nkb, float *T, int64_t ldt, bool acc) {
  (void)A, (void)B, (void)M, (void)N, (void)nkb, (void)T, (void)ldt, (void)acc;
}

#endif
