/*
 * The fused attention (docs/cpu-backend.md, "Fusion"): softmax(q kᵀ · scale
 * + mask) v for every head, q, k and v read through their strides from the
 * rows that hold them (a fused linear's [B, T, 3C] output, which the split
 * and the head transposes no longer copy), written straight into the merged
 * heads' [B, L, H, DV] rows; the keys a mask hides to the end of a row (a
 * causal mask's upper triangle) are neither multiplied nor exponentiated.
 */
#include "cpu_internal.h"

#include <math.h>

/* A piece is one head of one batch item (its keys transposed once), taken ATT_RB query rows at a time. */
#define ATT_RB 32

typedef struct AttJob {
  const CpuProgram *c;
  const Val *src[3], *mask, *scalev; /* scalev: the scale's const (NULL: none) */
  Val *o;
  int64_t B, H, L, S, D, DV;
  int64_t off[3], width[3]; /* q's, k's and v's first column and row length in their sources */
  float scale; /* scalev's value, read on each run */
  bool scaled, round, avx2;
  int64_t *ext; /* per query row: its keys before the trailing ones the mask hides (set on each run) */
  double *gap;  /* per query row: the least its kept keys' mask exceeds the hidden ones' by (+inf: none hidden) */
} AttJob;

/* A key is hidden when its mask is at most the compiler's masked value, fp16's most negative
 * (passes/decompose_attention.c), or -inf. */
#define ATT_HIDDEN (-65504.0f)

static int64_t up16(int64_t n) { return (n + 15) / 16 * 16; }

int64_t attention_fused_scratch(int64_t L, int64_t S, int64_t D) {
  int64_t s16 = up16(S);
  /* kᵀ, a row block's scores and weights, the softmax's exps (doubles), each row's keys (int64) */
  return D * s16 + 2 * ATT_RB * s16 + 2 * s16 + 2 * L;
}

/* Every output below is zero and then one fused multiply-add per term in
 * order (d = 0, 1, .. for a score, key 0, 1, .. for an output): the same
 * bits with any thread count (a piece's results depend on the piece alone).
 * AVX-512 only: the plan fuses nothing elsewhere (fuse_attention). */

#if HAVE_X86
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,f16c,fma")))

AVX512 static void keys_transposed(float *kt, int64_t ld, const float *k, int64_t kstride, int64_t n, int64_t D) {
  for (int64_t j0 = 0; j0 < ld; j0 += 16)
    for (int64_t d0 = 0; d0 < D; d0 += 16) {
      __m512 r[16], t[16];
      __mmask16 dm = gemm_lanes(D - d0);
      for (int64_t i = 0; i < 16; i++)
        r[i] = j0 + i < n ? _mm512_maskz_loadu_ps(dm, k + (j0 + i) * kstride + d0) : _mm512_setzero_ps();
      gemm_transpose16(r, t);
      for (int64_t i = 0; i < 16 && d0 + i < D; i++) _mm512_storeu_ps(kt + (d0 + i) * ld + j0, t[i]);
    }
}

/* The Euclidean norm of n floats, in float: the caller's margin covers its rounding. */
AVX512 static float norm16(const float *p, int64_t n) {
  __m512 a = _mm512_setzero_ps();
  for (int64_t d = 0; d < n; d += 16) {
    __m512 x = _mm512_maskz_loadu_ps(gemm_lanes(n - d), p + d);
    a = _mm512_fmadd_ps(x, x, a);
  }
  return sqrtf(_mm512_reduce_add_ps(a));
}

AVX512 static void scores4(const float *const q[4], const float *kt, int64_t ld, int64_t D, int64_t n,
                           float *const s[4]) {
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    __m512 a[4][2];
    #pragma GCC unroll 4
    for (int r = 0; r < 4; r++) a[r][0] = a[r][1] = _mm512_setzero_ps();
    for (int64_t d = 0; d < D; d++) {
      __m512 k0 = _mm512_loadu_ps(kt + d * ld + j), k1 = _mm512_loadu_ps(kt + d * ld + j + 16);
      #pragma GCC unroll 4
      for (int r = 0; r < 4; r++) {
        __m512 qv = _mm512_set1_ps(q[r][d]);
        a[r][0] = _mm512_fmadd_ps(qv, k0, a[r][0]);
        a[r][1] = _mm512_fmadd_ps(qv, k1, a[r][1]);
      }
    }
    #pragma GCC unroll 4
    for (int r = 0; r < 4; r++) _mm512_storeu_ps(s[r] + j, a[r][0]), _mm512_storeu_ps(s[r] + j + 16, a[r][1]);
  }
  for (; j < n; j += 16) {
    __m512 a[4];
    #pragma GCC unroll 4
    for (int r = 0; r < 4; r++) a[r] = _mm512_setzero_ps();
    for (int64_t d = 0; d < D; d++) {
      __m512 k0 = _mm512_loadu_ps(kt + d * ld + j);
      #pragma GCC unroll 4
      for (int r = 0; r < 4; r++) a[r] = _mm512_fmadd_ps(_mm512_set1_ps(q[r][d]), k0, a[r]);
    }
    #pragma GCC unroll 4
    for (int r = 0; r < 4; r++) _mm512_storeu_ps(s[r] + j, a[r]);
  }
}

AVX512 static void weighted4(const float *const p[4], const int64_t len[4], const float *v, int64_t vstride,
                             int64_t DV, float *const o[4], int rows) {
  int64_t lo = len[0], hi = len[0];
  #pragma GCC unroll 4
  for (int r = 1; r < 4; r++) lo = len[r] < lo ? len[r] : lo, hi = len[r] > hi ? len[r] : hi;
  for (int64_t e = 0; e < DV; e += 64) {
    __mmask16 m[4];
    #pragma GCC unroll 4
    for (int c = 0; c < 4; c++) m[c] = gemm_lanes(DV - e - 16 * c);
    __m512 a[4][4];
    #pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
      #pragma GCC unroll 4
      for (int c = 0; c < 4; c++) a[r][c] = _mm512_setzero_ps();
    int64_t j = 0;
    for (; j < lo; j++) { /* every row takes key j */
      __m512 x[4];
      #pragma GCC unroll 4
      for (int c = 0; c < 4; c++) x[c] = _mm512_maskz_loadu_ps(m[c], v + j * vstride + e + 16 * c);
      #pragma GCC unroll 4
      for (int r = 0; r < 4; r++) {
        __m512 w = _mm512_set1_ps(p[r][j]);
        #pragma GCC unroll 4
        for (int c = 0; c < 4; c++) a[r][c] = _mm512_fmadd_ps(w, x[c], a[r][c]);
      }
    }
    for (; j < hi; j++) { /* the longer rows' last keys */
      __m512 x[4];
      #pragma GCC unroll 4
      for (int c = 0; c < 4; c++) x[c] = _mm512_maskz_loadu_ps(m[c], v + j * vstride + e + 16 * c);
      #pragma GCC unroll 4
      for (int r = 0; r < 4; r++) {
        if (j >= len[r]) continue;
        __m512 w = _mm512_set1_ps(p[r][j]);
        #pragma GCC unroll 4
        for (int c = 0; c < 4; c++) a[r][c] = _mm512_fmadd_ps(w, x[c], a[r][c]);
      }
    }
    #pragma GCC unroll 4
    for (int r = 0; r < rows; r++)
      #pragma GCC unroll 4
      for (int c = 0; c < 4; c++) _mm512_mask_storeu_ps(o[r] + e + 16 * c, m[c], a[r][c]);
  }
}

/* The keys row i must take: ext[i], or all S unless skipping the hidden ones is exact. It is when every
 * hidden key's term is below 2^-150 of the row's largest, so its weight is 0 in float and its exp vanishes
 * in the row's sum (at least 1) as the unfused softmax adds it: |score| <= |scale| |q| max|k| =: b, so a
 * hidden term is at most b + (its mask) and the largest at least -b + (a kept key's mask), and
 * 2b + 168 <= gap suffices (104 for 2^-150, 64 for the fp16 roundings of ANE numerics near -65504; b is
 * widened by 2^-7 for the roundings of the scores). A NaN or an infinity in q or k fails the test. */
static int64_t keys_of_row(const AttJob *j, int64_t i, double qnorm, double kmax) {
  if (j->ext[i] == j->S) return j->S;
  double b = (j->scaled ? fabs((double)j->scale) : 1.0) * qnorm * kmax * (1 + 0x1p-7); /* and the norms' */
  return 2 * b + 168 <= j->gap[i] ? j->ext[i] : j->S;
}

static double norm_of(const float *p, int64_t n) { return (double)norm16(p, n); }

/* How many of a row's scores its softmax takes: its m keys rounded up to the unfused softmax's vectors of
 * 4 (the rest of which are hidden keys: their terms vanish), or all S where the unfused one's scalar tail
 * begins (S not a multiple of 4), so that the row's sum is added in the unfused order. */
static int64_t softmax_len(int64_t m, int64_t S) {
  int64_t m4 = (m + 3) / 4 * 4;
  return m4 <= S - S % 4 ? m4 : S;
}

/* Query rows [r0, r1) of one head: kt its keys transposed (ld apart), keys[] each row's keys. */
static void attention_rows(const AttJob *j, float *scr, const float *q, const float *v, float *out,
                           const float *kt, int64_t ld, const int64_t *keys, int64_t r0, int64_t r1) {
  int64_t S = j->S, D = j->D, DV = j->DV, ostride = j->H * DV;
  float *sc = scr, *pw = sc + ATT_RB * ld;
  double *keep = (double *)(void *)(pw + ATT_RB * ld);
  for (int64_t g = r0; g < r1; g += 4) {
    const float *qr[4], *pr[4];
    float *sr[4], *orow[4];
    int64_t len[4], n = 0;
    int rows = r1 - g < 4 ? (int)(r1 - g) : 4;
    for (int r = 0; r < 4; r++) {
      int64_t i = g + (r < rows ? r : rows - 1); /* a short group repeats its last row */
      qr[r] = q + i * j->width[0];
      sr[r] = sc + (g - r0 + r) * ld;
      pr[r] = pw + (i - r0) * ld;
      orow[r] = out + i * ostride;
      len[r] = keys[i];
      int64_t c = up16(softmax_len(len[r], S));
      n = c > n ? c : n;
    }
    scores4(qr, kt, ld, D, n, sr);
    /* The row's steps as the unfused statements take them: scale, mask, softmax (each rounded to fp16 in
     * ANE numerics). */
    for (int r = 0; r < rows; r++) {
      int64_t i = g + r, m = softmax_len(len[r], S);
      float *s = sr[r], *p = pw + (i - r0) * ld;
      if (j->round) round16(s, m);
      if (j->scaled) {
        for (int64_t t = 0; t < m; t++) s[t] *= j->scale;
        if (j->round) round16(s, m);
      }
      if (j->mask) {
        const float *mk = fp(j->mask) + i * S;
        for (int64_t t = 0; t < m; t++) s[t] += mk[t];
        if (j->round) round16(s, m);
      }
      softmax_row(s, p, m, keep, j->avx2);
      if (j->round) round16(p, m);
    }
    weighted4(pr, len, v, j->width[2], DV, orow, rows);
    for (int r = 0; j->round && r < rows; r++) round16(orow[r], DV);
  }
}

/* One piece: head h of batch item b. */
static void attention_head(const AttJob *j, float *scr, int64_t b, int64_t h) {
  int64_t L = j->L, S = j->S, D = j->D, DV = j->DV;
  const float *q = fp(j->src[0]) + b * L * j->width[0] + j->off[0] + h * D;
  const float *k = fp(j->src[1]) + b * S * j->width[1] + j->off[1] + h * D;
  const float *v = fp(j->src[2]) + b * S * j->width[2] + j->off[2] + h * DV;
  float *out = fp(j->o) + b * L * j->H * DV + h * DV;
  int64_t ld = up16(S), *keys = (int64_t *)(void *)(scr + D * ld + 2 * ATT_RB * ld + 2 * ld), E = 0;
  double kmax = -1;
  for (int64_t i = 0; i < L && kmax < 0; i++)
    if (j->ext[i] < S) kmax = 0; /* some row may skip keys */
  for (int64_t t = 0; kmax >= 0 && t < S; t++) {
    double n = norm_of(k + t * j->width[1], D);
    kmax = n > kmax || n != n ? n : kmax;
  }
  for (int64_t i = 0; i < L; i++) {
    keys[i] = keys_of_row(j, i, kmax >= 0 ? norm_of(q + i * j->width[0], D) : 0, kmax);
    int64_t n = softmax_len(keys[i], S);
    E = n > E ? n : E;
  }
  ld = up16(E);
  float *kt = scr;
  keys_transposed(kt, ld, k, j->width[1], E, D);
  for (int64_t r0 = 0; r0 < L; r0 += ATT_RB)
    attention_rows(j, kt + D * ld, q, v, out, kt, ld, keys, r0, r0 + ATT_RB < L ? r0 + ATT_RB : L);
}

static void attention_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  const AttJob *j = arg;
  for (int64_t piece = lo; piece < hi; piece++) attention_head(j, j->c->scratch[tid], piece / j->H, piece % j->H);
}
#endif

bool bind_attention_fused(Ctx *x, const Fused *f, void **bound) {
  const CpuProgram *c = x->c;
  Val *o = &x->vals[c->base[x->si]];
  const Val *src[3], *mask = f->amask == UINT32_MAX ? NULL : &x->vals[f->amask];
  for (int k = 0; k < 3; k++) src[k] = &x->vals[f->asrc[k]];
  int64_t B = o->dims[0], L = o->dims[1], H = o->dims[2], DV = o->dims[3], S = src[1]->dims[1], D = f->adim;
  const Val *sv = f->ascale == UINT32_MAX ? NULL : &x->vals[f->ascale];
  bool ok = o->rank == 4 && o->st == ST_F32 && (!mask || (mask->st == ST_F32 && mask->n == L * S)) &&
            (!sv || (sv->st == ST_F32 && sv->n == 1)) &&
            attention_fused_scratch(L, S, D) <= c->scratch_floats;
  for (int k = 0; k < 3; k++)
    ok = ok && src[k]->st == ST_F32 && src[k]->rank == 3 && src[k]->dims[0] == B &&
         src[k]->dims[1] == (k ? S : L) && f->aoff[k] + H * (k == 2 ? DV : D) <= src[k]->dims[2];
  if (!ok) return op_fail(x, "a fused attention needs float q, k and v rows and scratch"); /* the plan prevents this */
  size_t bytes = sizeof(AttJob) + (size_t)L * (sizeof(int64_t) + sizeof(double));
  AttJob *j = xmalloc(bytes);
  *j = (AttJob){.c = c, .src = {src[0], src[1], src[2]}, .mask = mask, .o = o, .B = B, .H = H, .L = L, .S = S,
                .D = D, .DV = DV, .off = {f->aoff[0], f->aoff[1], f->aoff[2]},
                .width = {src[0]->dims[2], src[1]->dims[2], src[2]->dims[2]},
                .scalev = f->ascale == UINT32_MAX ? NULL : &x->vals[f->ascale], .scaled = f->ascale != UINT32_MAX,
                .round = f->round_out, .avx2 = cpu_features()->avx2, .ext = (int64_t *)(void *)(j + 1)};
  j->gap = (double *)(void *)(j->ext + L);
  *bound = j;
  return true;
}

bool k_attention_fused(Ctx *x, const Fused *f) {
  (void)f;
  AttJob *j = x->c->bound[x->si];
  if (j->scalev) j->scale = fp(j->scalev)[0];
  /* Each row's hidden keys, from its mask row (a value: read on every run). */
  for (int64_t i = 0; i < j->L; i++) {
    int64_t e = j->S;
    double kept = -HUGE_VAL, hidden = -HUGE_VAL;
    if (j->mask) {
      const float *mk = fp(j->mask) + i * j->S;
      for (; e > 0 && mk[e - 1] <= ATT_HIDDEN; e--) hidden = fmax(hidden, (double)mk[e - 1]);
      for (int64_t t = 0; t < e; t++) kept = fmax(kept, (double)mk[t]);
    }
    j->ext[i] = e;
    j->gap[i] = e == j->S ? HUGE_VAL : kept - hidden; /* -inf (or NaN) when nothing is kept: all keys taken */
  }
#if HAVE_X86
  par_for(x->c, j->B * j->H, 1, attention_task, j);
  return true;
#else
  return op_fail(x, "no fused attention on this CPU"); /* the plan fuses none without AVX-512 */
#endif
}
