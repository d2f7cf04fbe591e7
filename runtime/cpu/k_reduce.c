/*
 * Reductions and normalizations: softmax, reduce_sum/mean/max, layer_norm.
 */
#include "cpu_internal.h"
#include "orion/op_semantics.h"

#include <math.h>

#include "cpu_math.h"

#if HAVE_X86
/* softmax of one contiguous row given its max: sum of exps in double, then
 * each exp times the sum's reciprocal, rounded once (the sum is at least 1,
 * the max's exp, so the two double roundings add at most 2^-52 relative to
 * the float's 2^-24: within 2^-23 of the exact quotient; a vector division
 * per four elements cost as much as the exps). With room for the row's exps
 * (keep, len doubles) the second pass reads them back; without (NULL) it
 * computes them again, the same values. */
AVX2 static void softmax_row_avx2(const float *in, float *o, int64_t len, double mx, double *keep) {
  __m256d m = _mm256_set1_pd(mx), acc = _mm256_setzero_pd();
  bool kept = keep != NULL;
  int64_t k = 0;
  /* exp4 clamps its argument to -708 from below: four arguments there or
   * lower (a masked score) give exp4(-708) without computing it. */
  const __m256d lim = _mm256_set1_pd(-708.0), floor_e = exp4(lim);
  for (; k + 4 <= len; k += 4) {
    __m256d d = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(in + k)), m);
    __m256d e = _mm256_movemask_pd(_mm256_cmp_pd(d, lim, _CMP_NLE_UQ)) ? exp4(d) : floor_e;
    if (kept) _mm256_storeu_pd(keep + k, e);
    acc = _mm256_add_pd(acc, e);
  }
  double part[4];
  _mm256_storeu_pd(part, acc);
  double sum = (part[0] + part[1]) + (part[2] + part[3]);
  for (int64_t q = k; q < len; q++) sum += exp_d((double)in[q] - mx);
  double inv = 1.0 / sum; /* NaN for a NaN row, as the quotient was */
  __m256d iv = _mm256_set1_pd(inv);
  for (k = 0; k + 4 <= len; k += 4) {
    __m256d e = kept ? _mm256_loadu_pd(keep + k) : exp4(_mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(in + k)), m));
    _mm_storeu_ps(o + k, _mm256_cvtpd_ps(_mm256_mul_pd(e, iv)));
  }
  for (; k < len; k++) o[k] = (float)(exp_d((double)in[k] - mx) * inv);
}

/* The max of a contiguous row as the scalar loop finds it (`v > mx ? v : mx`
 * from -inf, NaNs skipped) and whether it holds a NaN. MAXPS(v, acc) returns
 * acc unless v > acc, NaN or equal: the scalar step, lane by lane; lanes may
 * differ from the scalar pick only between -0 and +0, which the caller's
 * in - mx turns into the same exp. */
AVX2 static float row_max_avx2(const float *in, int64_t len, bool *nan) {
  __m256 acc = _mm256_set1_ps(-INFINITY), bad = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= len; k += 8) {
    __m256 v = _mm256_loadu_ps(in + k);
    bad = _mm256_or_ps(bad, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    acc = _mm256_max_ps(v, acc);
  }
  float lane[8];
  _mm256_storeu_ps(lane, acc);
  float mx = -INFINITY;
  for (int i = 0; i < 8; i++) mx = lane[i] > mx ? lane[i] : mx;
  bool any = _mm256_movemask_ps(bad) != 0;
  for (; k < len; k++) {
    any |= in[k] != in[k];
    mx = in[k] > mx ? in[k] : mx;
  }
  *nan = any;
  return mx;
}
#endif

/* softmax over lines of `len` elements `post` apart; a line is one item. */
typedef struct SoftJob {
  const Val *a;
  Val *o;
  int64_t len, post;
  int64_t lines; /* of the whole tensor */
  bool avx2;     /* the CPU has AVX2 and FMA */
} SoftJob;

/* A copy of the n bytes at p. */
static void *dup_job(const void *p, size_t n) { return memcpy(xmalloc(n), p, n); }

void softmax_row(const float *in, float *o, int64_t len, double *keep, bool avx2) {
#if HAVE_X86
  if (avx2) {
    bool nan = false;
    float mx = row_max_avx2(in, len, &nan);
    if (nan) mx = NAN; /* as fmax would not: a NaN makes the whole line NaN */
    softmax_row_avx2(in, o, len, (double)mx, keep);
    return;
  }
#endif
  (void)keep, (void)avx2;
  float mx = -INFINITY;
  bool nan = false;
  for (int64_t k = 0; k < len; k++) {
    nan |= in[k] != in[k];
    mx = in[k] > mx ? in[k] : mx;
  }
  if (nan) mx = NAN;
  double sum = 0;
  for (int64_t k = 0; k < len; k++) sum += exp_d((double)in[k] - (double)mx);
  /* Each exp again rather than kept: the result is the double quotient rounded once. */
  for (int64_t k = 0; k < len; k++) o[k] = (float)(exp_d((double)in[k] - (double)mx) / sum);
}

/* Rows of up to SOFT_KEEP elements keep their exps on the stack. */
#define SOFT_KEEP 2048

static void softmax_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  (void)tid;
  const SoftJob *j = arg;
  int64_t len = j->len, post = j->post;
  double keep[SOFT_KEEP];
  for (int64_t line = lo; line < hi; line++) {
    int64_t base = (line / post) * len * post + line % post;
    if (j->a->st == ST_F32 && j->o->st == ST_F32) {
      const float *in = fp(j->a) + base;
      float *o = fp(j->o) + base;
      if (post == 1) {
        softmax_row(in, o, len, len <= SOFT_KEEP ? keep : NULL, j->avx2);
        continue;
      }
      float mx = -INFINITY;
      bool nan = false;
      for (int64_t k = 0; k < len; k++) {
        float v = in[k * post];
        nan |= v != v;
        mx = v > mx ? v : mx;
      }
      if (nan) mx = NAN; /* as fmax would not: a NaN makes the whole line NaN */
      double sum = 0;
      for (int64_t k = 0; k < len; k++) sum += exp_d((double)in[k * post] - (double)mx);
      /* Each exp again rather than kept: the result is the double quotient rounded once. */
      for (int64_t k = 0; k < len; k++) o[k * post] = (float)(exp_d((double)in[k * post] - (double)mx) / sum);
      continue;
    }
    double mx = -HUGE_VAL, sum = 0;
    for (int64_t k = 0; k < len; k++) mx = fmax(mx, ld(j->a, base + k * post));
    for (int64_t k = 0; k < len; k++) sum += exp_d(ld(j->a, base + k * post) - mx);
    for (int64_t k = 0; k < len; k++) st(j->o, base + k * post, exp_d(ld(j->a, base + k * post) - mx) / sum);
  }
}

bool bind_softmax(Ctx *x, int code, Val *out, uint32_t nout, void **bound) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, MIL_ARG_SOFTMAX_x, &ok);
  double axis_d = scalar_arg(x, MIL_ARG_SOFTMAX_axis, -1, &ok);
  uint32_t ax = 0;
  if (!ok || !norm_axis(x, to_index(axis_d), a->rank, &ax) || !expect_shape(x, out, a->dims, a->rank)) return false;
  SoftJob j = {.avx2 = cpu_features()->avx2, .a = a, .o = out, .len = a->dims[ax], .post = elements(a->dims + ax + 1, a->rank - ax - 1)};
  j.lines = elements(a->dims, ax) * j.post;
  *bound = dup_job(&j, sizeof j);
  return true;
}

bool k_softmax(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)out, (void)nout;
  const SoftJob *j = x->c->bound[x->si];
  if (j->len == 0 || j->lines == 0) return true;
  par_for(x->c, j->lines, (GRAIN + j->len - 1) / j->len, softmax_task, (void *)(uintptr_t)j);
  return true;
}

/* Reads the `axes` argument (default: all) into a per-dimension mask. */
static bool axes_mask(Ctx *x, const Val *a, bool *mask, bool *ok) {
  int64_t axes[MIL_MAX_RANK];
  uint32_t n;
  bool given = ints_arg(x, SHARED_axes, axes, MIL_MAX_RANK, &n, ok);
  if (!*ok) return false;
  for (uint32_t i = 0; i < a->rank; i++) mask[i] = !given;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t ax = 0;
    if (!norm_axis(x, axes[i], a->rank, &ax)) return *ok = false;
    mask[ax] = true;
  }
  return true;
}


/* The sum of n floats in double: four running sums (elements k mod 4), so
 * that the additions need not wait for each other, added pairwise, then the
 * last n mod 4 elements in order. */
static double sum_d(const float *p, int64_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) {
    s0 += (double)p[k];
    s1 += (double)p[k + 1];
    s2 += (double)p[k + 2];
    s3 += (double)p[k + 3];
  }
  double r = (s0 + s1) + (s2 + s3);
  for (; k < n; k++) r += (double)p[k];
  return r;
}

static double reduce_fin(int code, const Val *o, double r, int64_t count) {
  if (code != R_MEAN) return r;
  r /= (double)count;
  return o->dt == MIL_DT_INT32 ? trunc(r) : r;
}

#if HAVE_X86
/* The max of a contiguous row where MAXPS settles op_sem_maximum's result:
 * no NaN in the row (the scalar keeps the first NaN) and a nonzero max
 * (MAXPS picks between -0 and +0 by operand order, the scalar prefers +0).
 * Any other max is one value with one bit pattern whatever the order.
 * false: the caller runs the scalar loop. */
AVX2 static bool row_max_settled(const float *in, int64_t n, float *mx) {
  __m256 a0 = _mm256_set1_ps(-INFINITY), a1 = a0, a2 = a0, a3 = a0, bad = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 32 <= n; k += 32) {
    __m256 v0 = _mm256_loadu_ps(in + k), v1 = _mm256_loadu_ps(in + k + 8);
    __m256 v2 = _mm256_loadu_ps(in + k + 16), v3 = _mm256_loadu_ps(in + k + 24);
    bad = _mm256_or_ps(bad, _mm256_or_ps(_mm256_cmp_ps(v0, v1, _CMP_UNORD_Q), _mm256_cmp_ps(v2, v3, _CMP_UNORD_Q)));
    a0 = _mm256_max_ps(v0, a0), a1 = _mm256_max_ps(v1, a1), a2 = _mm256_max_ps(v2, a2), a3 = _mm256_max_ps(v3, a3);
  }
  for (; k + 8 <= n; k += 8) {
    __m256 v = _mm256_loadu_ps(in + k);
    bad = _mm256_or_ps(bad, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    a0 = _mm256_max_ps(v, a0);
  }
  float lane[8];
  _mm256_storeu_ps(lane, _mm256_max_ps(_mm256_max_ps(a0, a1), _mm256_max_ps(a2, a3)));
  float m = -INFINITY;
  for (int i = 0; i < 8; i++) m = lane[i] > m ? lane[i] : m;
  bool nan = _mm256_movemask_ps(bad) != 0;
  for (; k < n; k++) {
    nan |= in[k] != in[k];
    m = in[k] > m ? in[k] : m;
  }
  *mx = m;
  return !nan && m != 0;
}
#endif

/* op_sem_maximum over a contiguous row from -inf, in order. */
static double row_max(const float *in, int64_t n, bool avx2) {
#if HAVE_X86
  float m;
  if (avx2 && row_max_settled(in, n, &m)) return (double)m;
#endif
  (void)avx2;
  double r = -HUGE_VAL;
  for (int64_t k = 0; k < n; k++) r = op_sem_maximum(r, (double)in[k]);
  return r;
}

static void reduce_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  (void)tid;
  const RedJob *j = arg;
  int64_t cnt = j->count;
  for (int64_t i = lo; i < hi; i++) {
    double r = j->code == R_MAX ? -HUGE_VAL : 0;
    if (j->a->st == ST_F32) {
      const float *in = fp(j->a) + i * cnt;
      r = j->code == R_MAX ? row_max(in, cnt, j->avx2) : sum_d(in, cnt);
    } else {
      for (int64_t k = 0; k < cnt; k++) {
        double v = ld(j->a, i * cnt + k);
        r = j->code == R_MAX ? op_sem_maximum(r, v) : r + v;
      }
    }
    st(j->o, i, reduce_fin(j->code, j->o, r, cnt));
  }
}

/* The rows of a trailing reduction (a fused group's tile): output element
 * i of [r0, r1) from input row i, as reduce_task computes it. */
void reduce_rows(const RedJob *j, const float *in, float *o, int64_t n) {
  int64_t cnt = j->count;
  for (int64_t i = 0; i < n; i++) {
    const float *row = in + i * cnt;
    double r = j->code == R_MAX ? row_max(row, cnt, j->avx2) : sum_d(row, cnt);
    o[i] = (float)reduce_fin(j->code, j->o, r, cnt);
  }
}

/* Reads and checks a reduction; *jp's o is NULL unless it reduces trailing dims. */
static bool reduce_setup(Ctx *x, int code, Val *out, RedJob *jp) {
  bool ok = true, mask[MIL_MAX_RANK];
  const Val *a = req_arg(x, SHARED_x, &ok);
  bool keep = scalar_arg(x, SHARED_keep_dims, 0, &ok) != 0;
  if (!ok || !axes_mask(x, a, mask, &ok)) return false;
  int64_t dims[MIL_MAX_RANK] = {0}, count = 1;
  uint32_t rank = 0;
  bool trailing = true; /* the reduced dims (of size > 1) come after every kept dim (of size > 1) */
  bool seen_reduced = false;
  for (uint32_t i = 0; i < a->rank; i++) {
    if (mask[i]) count *= a->dims[i];
    if (!mask[i] || keep) dims[rank++] = mask[i] ? 1 : a->dims[i];
    if (a->dims[i] != 1) {
      if (mask[i]) seen_reduced = true;
      else if (seen_reduced) trailing = false;
    }
  }
  if (!expect_shape(x, out, dims, rank)) return false;
  *jp = (RedJob){.code = code, .avx2 = cpu_features()->avx2, .a = a, .o = trailing && count > 0 ? out : NULL, .count = count};
  return true;
}

/* A reduction as bound: the trailing case's job (o set), or the general
 * case's walk: the kept dims and their strides in the input, the reduced
 * dims and theirs; with cols, the input read as [P, R, C] (the reduced dims
 * the R block between the kept P and C blocks), output element p C + c
 * reducing column c of block p. */
typedef struct ReduceBound {
  RedJob j;
  uint32_t nk, nr;
  int64_t kept[MIL_MAX_RANK], kist[MIL_MAX_RANK], rdims[MIL_MAX_RANK], rst[MIL_MAX_RANK];
  bool cols;
  Val *out;
  int64_t P, R, C, width; /* width: the columns of one piece */
} ReduceBound;

/* Whether the dims of size > 1 read as kept*, reduced+, kept+ (the [P, R,
 * C] view), and its P, R, C. */
static bool column_view(const Val *a, const bool *mask, int64_t *P, int64_t *R, int64_t *C) {
  int phase = 0; /* 0: leading kept dims, 1: reduced, 2: trailing kept */
  *P = *R = *C = 1;
  for (uint32_t i = 0; i < a->rank; i++) {
    int64_t d = a->dims[i];
    if (d == 1) continue;
    if (mask[i]) {
      if (phase == 2) return false;
      phase = 1, *R *= d;
    } else if (phase == 0) *P *= d;
    else phase = 2, *C *= d;
  }
  return phase == 2 && *R > 0;
}

/* Columns a piece of the [P, R, C] view reduces at most: their doubles stay on the stack. */
#define COL_WIDTH 256

bool bind_reduce(Ctx *x, int code, Val *out, uint32_t nout, void **bound) {
  (void)nout;
  ReduceBound rb = {.nk = 0};
  if (!reduce_setup(x, code, out, &rb.j)) return false;
  if (!rb.j.o) {
    const Val *a = rb.j.a;
    bool ok = true, mask[MIL_MAX_RANK];
    if (!axes_mask(x, a, mask, &ok)) return false;
    for (uint32_t i = 0; i < a->rank; i++)
      if (!mask[i]) rb.kept[rb.nk++] = a->dims[i];
    int64_t ist[MIL_MAX_RANK];
    strides_of(a->dims, a->rank, ist);
    for (uint32_t i = 0; i < a->rank; i++)
      if (mask[i]) rb.rdims[rb.nr] = a->dims[i], rb.rst[rb.nr++] = ist[i];
    for (uint32_t i = 0, k = 0; i < a->rank; i++)
      if (!mask[i]) rb.kist[k++] = ist[i];
    rb.cols = column_view(a, mask, &rb.P, &rb.R, &rb.C);
    rb.out = out;
    /* About GRAIN elements a piece, in whole strips of 16 columns. */
    int64_t w = (GRAIN / (rb.R ? rb.R : 1) + 15) / 16 * 16;
    rb.width = w < 16 ? 16 : w > COL_WIDTH ? COL_WIDTH : w;
  }
  *bound = dup_job(&rb, sizeof rb);
  return true;
}

/* The trailing-dims job of bound reduction statement si (a fused group's member). */
const RedJob *reduce_job(const CpuProgram *c, uint32_t si) { return &((const ReduceBound *)c->bound[si])->j; }

#if HAVE_X86
/* acc[c] = the sum in double of in[r ld + c] over rows r in order, for
 * columns [0, w): each column's additions in the scalar loop's order, 16
 * columns at a time held in registers across the rows. */
AVX2 static void column_sums_avx2(const float *in, int64_t ld, int64_t rows, int64_t w, double *acc) {
  int64_t c = 0;
  for (; c + 16 <= w; c += 16) {
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
    for (int64_t r = 0; r < rows; r++) {
      const float *q = in + r * ld + c;
      s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm_loadu_ps(q)));
      s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm_loadu_ps(q + 4)));
      s2 = _mm256_add_pd(s2, _mm256_cvtps_pd(_mm_loadu_ps(q + 8)));
      s3 = _mm256_add_pd(s3, _mm256_cvtps_pd(_mm_loadu_ps(q + 12)));
    }
    _mm256_storeu_pd(acc + c, s0), _mm256_storeu_pd(acc + c + 4, s1);
    _mm256_storeu_pd(acc + c + 8, s2), _mm256_storeu_pd(acc + c + 12, s3);
  }
  for (; c + 4 <= w; c += 4) {
    __m256d s = _mm256_setzero_pd();
    for (int64_t r = 0; r < rows; r++) s = _mm256_add_pd(s, _mm256_cvtps_pd(_mm_loadu_ps(in + r * ld + c)));
    _mm256_storeu_pd(acc + c, s);
  }
  for (; c < w; c++) {
    double s = 0;
    for (int64_t r = 0; r < rows; r++) s += (double)in[r * ld + c];
    acc[c] = s;
  }
}
#endif

/* Pieces of the [P, R, C] view: a run of `width` columns of one block p,
 * each column reduced over its R rows in order (the general loop's order,
 * so its bits), read row by row. */
static void column_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  (void)tid;
  const ReduceBound *rb = arg;
  const Val *a = rb->j.a;
  int code = rb->j.code;
  int64_t R = rb->R, C = rb->C, nb = (C + rb->width - 1) / rb->width;
  double acc[COL_WIDTH];
  for (int64_t it = lo; it < hi; it++) {
    int64_t p = it / nb, c0 = it % nb * rb->width, w = C - c0 < rb->width ? C - c0 : rb->width;
    int64_t base = p * R * C + c0;
#if HAVE_X86
    if (code != R_MAX && a->st == ST_F32 && rb->j.avx2) column_sums_avx2(fp(a) + base, C, R, w, acc);
    else
#endif
    {
      for (int64_t c = 0; c < w; c++) acc[c] = code == R_MAX ? -HUGE_VAL : 0;
      for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < w; c++) {
          int64_t at = base + r * C + c;
          double v = a->st == ST_F32 ? (double)fp(a)[at] : ld(a, at);
          acc[c] = code == R_MAX ? op_sem_maximum(acc[c], v) : acc[c] + v;
        }
    }
    for (int64_t c = 0; c < w; c++) st(rb->out, p * C + c0 + c, reduce_fin(code, rb->out, acc[c], R));
  }
}

bool k_reduce(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)nout;
  const ReduceBound *rb = x->c->bound[x->si];
  if (rb->j.o) {
    par_for(x->c, out->n, (GRAIN + rb->j.count - 1) / rb->j.count, reduce_task, (void *)(uintptr_t)&rb->j);
    return true;
  }
  if (rb->cols) {
    int64_t pieces = rb->P * ((rb->C + rb->width - 1) / rb->width), per = GRAIN / (rb->width * rb->R);
    par_for(x->c, pieces, per, column_task, (void *)(uintptr_t)rb);
    return true;
  }
  const Val *a = rb->j.a;
  int64_t count = rb->j.count;
  /* Other axes: accumulate in input order into doubles, one output at a
   * time (a plain loop: rare in compiled programs). */
  for (int64_t o = 0; o < out->n; o++) {
    int64_t base = offset_at(o, rb->kept, rb->nk, rb->kist);
    double r = code == R_MAX ? -HUGE_VAL : 0;
    for (int64_t k = 0; k < count; k++) {
      double v = ld(a, base + offset_at(k, rb->rdims, rb->nr, rb->rst));
      r = code == R_MAX ? op_sem_maximum(r, v) : r + v;
    }
    st(out, o, reduce_fin(code, out, r, count));
  }
  return true;
}

/* layer_norm: mean and biased variance jointly over `axes`; gamma and beta
 * are indexed by the position within the normalized dims taken in the order
 * `axes` lists them. One item is one normalized group. */
typedef struct NormJob {
  const Val *a, *g, *b;
  Val *o;
  double eps;
  uint32_t nax, nouter;
  int64_t idims[MIL_MAX_RANK], ist[MIL_MAX_RANK], odims[MIL_MAX_RANK], ost[MIL_MAX_RANK];
  int64_t inner;
  bool contiguous; /* the normalized dims are the trailing ones, in order */
} NormJob;

static void norm_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  (void)tid;
  const NormJob *j = arg;
  int64_t inner = j->inner;
  for (int64_t o = lo; o < hi; o++) {
    int64_t base = offset_at(o, j->odims, j->nouter, j->ost);
#define AT(k) (j->contiguous ? base + (k) : base + offset_at((k), j->idims, j->nax, j->ist))
    double mean = 0, var = 0;
    for (int64_t k = 0; k < inner; k++) mean += ld(j->a, AT(k));
    mean /= (double)inner;
    for (int64_t k = 0; k < inner; k++) {
      double dv = ld(j->a, AT(k)) - mean;
      var += dv * dv;
    }
    var /= (double)inner;
    double inv = 1 / sqrt(var + j->eps);
    for (int64_t k = 0; k < inner; k++) {
      int64_t off = AT(k);
      st(j->o, off, (ld(j->a, off) - mean) * inv * (j->g ? ld(j->g, k) : 1) + (j->b ? ld(j->b, k) : 0));
    }
#undef AT
  }
}

bool bind_layer_norm(Ctx *x, int code, Val *out, uint32_t nout, void **bound) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, MIL_ARG_LAYER_NORM_x, &ok);
  const Val *g = opt_arg(x, MIL_ARG_LAYER_NORM_gamma, &ok);
  const Val *b = opt_arg(x, MIL_ARG_LAYER_NORM_beta, &ok);
  NormJob j = {.a = a, .g = g, .b = b, .o = out};
  j.eps = scalar_arg(x, MIL_ARG_LAYER_NORM_epsilon, 1e-5, &ok);
  int64_t axes[MIL_MAX_RANK];
  uint32_t n;
  bool given = ints_arg(x, MIL_ARG_LAYER_NORM_axes, axes, MIL_MAX_RANK, &n, &ok);
  if (!ok || !expect_shape(x, out, a->dims, a->rank)) return false;
  uint32_t ax[MIL_MAX_RANK], outer[MIL_MAX_RANK];
  bool in_axes[MIL_MAX_RANK] = {false};
  if (!given)
    for (uint32_t i = 0; i < a->rank; i++) axes[n++] = i;
  for (uint32_t i = 0; i < n; i++) {
    if (!norm_axis(x, axes[i], a->rank, &ax[j.nax])) return false;
    if (in_axes[ax[j.nax]]) return op_fail(x, "axis %lld is listed twice", (long long)axes[i]);
    in_axes[ax[j.nax++]] = true;
  }
  for (uint32_t i = 0; i < a->rank; i++)
    if (!in_axes[i]) outer[j.nouter++] = i;
  int64_t st_[MIL_MAX_RANK];
  strides_of(a->dims, a->rank, st_);
  j.contiguous = true;
  for (uint32_t i = 0; i < j.nax; i++) {
    j.idims[i] = a->dims[ax[i]], j.ist[i] = st_[ax[i]];
    j.contiguous = j.contiguous && ax[i] == a->rank - j.nax + i;
  }
  for (uint32_t i = 0; i < j.nouter; i++) j.odims[i] = a->dims[outer[i]], j.ost[i] = st_[outer[i]];
  j.inner = elements(j.idims, j.nax);
  if ((g && g->n != j.inner) || (b && b->n != j.inner))
    return op_fail(x, "gamma and beta must have the %lld elements of the normalized dims", (long long)j.inner);
  *bound = dup_job(&j, sizeof j);
  return true;
}

bool k_layer_norm(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)out, (void)nout;
  const NormJob *j = x->c->bound[x->si];
  if (j->inner == 0) return true;
  par_for(x->c, elements(j->odims, j->nouter), (GRAIN + j->inner - 1) / j->inner, norm_task, (void *)(uintptr_t)j);
  return true;
}
