/*
 * Element-wise kernels: unary and binary ops (arithmetic, comparisons,
 * logical ops; NumPy broadcasting), select and cast.
 */
#include "cpu_internal.h"
#include "orion/op_semantics.h"

#include <math.h>

#include "cpu_math.h"

#if HAVE_X86
enum { V_TANH, V_EXP, V_GELU_TANH, V_SIGMOID, V_SILU };

/* o[i] = f(a[i]) for i < n - n % 4; returns how many were done. */
AVX2 static int64_t unary_avx2(int f, const float *a, float *o, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    __m256d v = _mm256_cvtps_pd(_mm_loadu_ps(a + i)), r;
    if (f == V_TANH) r = tanh4(v);
    else if (f == V_EXP) r = exp4(v);
    else if (f == V_SIGMOID || f == V_SILU) { /* op_sem_sigmoid, op_sem_silu: v / (1 + e^-v) */
      __m256d one = _mm256_set1_pd(1.0);
      r = _mm256_div_pd(one, _mm256_add_pd(one, exp4(_mm256_sub_pd(_mm256_setzero_pd(), v))));
      if (f == V_SILU) r = _mm256_mul_pd(v, r);
    }
    else {
      __m256d v3 = _mm256_mul_pd(_mm256_mul_pd(v, v), v);
      __m256d in = _mm256_mul_pd(_mm256_set1_pd(0.7978845608028654), _mm256_fmadd_pd(v3, _mm256_set1_pd(0.044715), v));
      r = _mm256_mul_pd(_mm256_mul_pd(_mm256_set1_pd(0.5), v), _mm256_add_pd(_mm256_set1_pd(1.0), tanh4(in)));
    }
    _mm_storeu_ps(o + i, _mm256_cvtpd_ps(r));
  }
  return i;
}
#endif

static double unary_one(const UnaryJob *j, double v) {
  switch (j->code) {
  case U_RELU: return op_sem_relu(v);
  case U_TANH: return op_sem_tanh(v);
  case U_SIGMOID: return op_sem_sigmoid(v);
  case U_SILU: return op_sem_silu(v);
  case U_GELU: return j->gelu == 0 ? op_sem_gelu_exact(v) : j->gelu == 1 ? op_sem_gelu_tanh(v) : op_sem_gelu_sigmoid(v);
  case U_EXP: return op_sem_exp(v);
  case U_LOG: return op_sem_log(v, j->eps);
  case U_SQRT: return sqrt(v);
  case U_RSQRT: return op_sem_rsqrt(v, j->eps);
  case U_ABS: return fabs(v);
  case U_CLIP: return op_sem_clip(v, j->lo, j->hi);
  case U_NOT: return v == 0;
  case U_FLOOR: return floor(v);
  default: return v; /* identity */
  }
}

/* o[i] = f(a[i]) for i < n, float to float. */
void unary_f32(const UnaryJob *j, const float *restrict a, float *restrict o, int64_t n) {
  switch (j->code) {
  case U_RELU:
    for (int64_t i = 0; i < n; i++) o[i] = a[i] <= 0 ? 0.0f : a[i]; /* NaN stays NaN, -0 is +0 */
    return;
  case U_ABS:
    for (int64_t i = 0; i < n; i++) o[i] = fabsf(a[i]);
    return;
  case U_TANH:
  case U_EXP: {
    int64_t i = 0;
#if HAVE_X86
    if (j->avx2) i += unary_avx2(j->code == U_TANH ? V_TANH : V_EXP, a, o, n);
#endif
    for (; i < n; i++) o[i] = (float)(j->code == U_TANH ? tanh_d((double)a[i]) : exp_d((double)a[i]));
    return;
  }
  default: {
    int64_t i = 0;
#if HAVE_X86
    if (j->avx2 && j->code == U_GELU && j->gelu == 1) i += unary_avx2(V_GELU_TANH, a, o, n);
    else if (j->avx2 && (j->code == U_SILU || j->code == U_SIGMOID))
      i += unary_avx2(j->code == U_SILU ? V_SILU : V_SIGMOID, a, o, n);
#endif
    for (; i < n; i++) o[i] = (float)unary_one(j, (double)a[i]);
    return;
  }
  }
}

static void unary_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  (void)tid;
  const UnaryJob *j = arg;
  if (j->a->st == ST_F32 && j->o->st == ST_F32) unary_f32(j, fp(j->a) + lo, fp(j->o) + lo, hi - lo);
  else
    for (int64_t i = lo; i < hi; i++) st(j->o, i, unary_one(j, ld(j->a, i)));
  if (j->round16) round16(fp(j->o) + lo, hi - lo); /* while the piece is in cache */
}

/* Reads and checks a unary op's operands into *jp (false: reported). */
static bool unary_setup(Ctx *x, int code, Val *out, UnaryJob *jp) {
  bool ok = true;
  const Val *a = req_arg(x, SHARED_x, &ok);
  UnaryJob j = {.code = code, .avx2 = cpu_features()->avx2, .a = a, .o = out,
                .round16 = x->c->mode == CPU_NUMERICS_ANE && out->dt == MIL_DT_FP16 && out->st == ST_F32};
  if (code == U_LOG) j.eps = scalar_arg(x, MIL_ARG_LOG_epsilon, a && a->dt == MIL_DT_FP16 ? 0.0 : 1e-45, &ok);
  if (code == U_RSQRT) j.eps = scalar_arg(x, MIL_ARG_RSQRT_epsilon, a && a->dt == MIL_DT_FP16 ? 0.0 : 1e-12, &ok);
  if (code == U_CLIP) {
    j.lo = scalar_arg(x, MIL_ARG_CLIP_alpha, 0, &ok);
    j.hi = scalar_arg(x, MIL_ARG_CLIP_beta, 0, &ok);
    if (ok && (!find_arg(x, MIL_ARG_CLIP_alpha) ||
        !find_arg(x, MIL_ARG_CLIP_beta))) return op_fail(x, "needs both alpha and beta");
  }
  if (code == U_GELU) {
    const char *m = string_arg(x, MIL_ARG_GELU_mode, "EXACT", &ok);
    if (!ok) return false;
    if (!strcmp(m, "TANH_APPROXIMATION")) j.gelu = 1;
    else if (!strcmp(m, "SIGMOID_APPROXIMATION")) j.gelu = 2;
    else if (strcmp(m, "EXACT")) return op_fail(x, "unknown mode '%s'", m);
  }
  if (!ok) return false;
  if (a->st == ST_STR) return op_fail(x, "argument 'x' must be a tensor");
  if (code == U_NOT && (a->dt != MIL_DT_BOOL || out->dt != MIL_DT_BOOL))
    return op_fail(x, "takes and returns bool, not %s and %s", mil_dtype_name(a->dt), mil_dtype_name(out->dt));
  if (!expect_shape(x, out, a->dims, a->rank)) return false;
  *jp = j;
  return true;
}

/* A copy of the n bytes at p. */
static void *dup_job(const void *p, size_t n) { return memcpy(xmalloc(n), p, n); }

bool bind_unary(Ctx *x, int code, Val *out, uint32_t nout, void **bound) {
  (void)nout;
  UnaryJob j = {0};
  if (!unary_setup(x, code, out, &j)) return false;
  *bound = dup_job(&j, sizeof j);
  return true;
}

bool k_unary(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  const UnaryJob *j = x->c->bound[x->si];
  par_for(x->c, out->n, GRAIN, unary_task, (void *)(uintptr_t)j);
  return true;
}


#define BIN_CHUNK 4096

static double bin_one(int code, double u, double v, bool integer) {
  switch (code) {
  case B_ADD: return u + v;
  case B_SUB: return u - v;
  case B_MUL: return u * v;
  case B_DIV: return integer ? (v == 0 ? 0 : trunc(u / v)) : u / v;
  case B_POW: return pow(u, v);
  case B_MAX: return op_sem_maximum(u, v);
  case B_MIN: return op_sem_minimum(u, v);
  /* floor_div rounds toward -inf. The double quotient of two floats is never
   * rounded across an integer, so its floor is the exact one. Integer x // 0
   * is 0, as integer real_div. */
  case B_FDIV: return integer ? (v == 0 ? 0 : floor(u / v)) : floor(u / v);
  /* IEEE comparisons, as NumPy's: NaN is unequal to everything. */
  case B_EQ: return u == v;
  case B_NE: return u != v;
  case B_LT: return u < v;
  case B_LE: return u <= v;
  case B_GT: return u > v;
  case B_GE: return u >= v;
  case B_AND: return u != 0 && v != 0;
  case B_OR: return u != 0 || v != 0;
  default: return (u != 0) != (v != 0); /* xor */
  }
}

/* A comparison of float rows into bool (0/1 int32) results. */
#define CMP_LOOP(OP)                                                                                                   \
  for (int64_t i = 0; i < n; i++) o[i] = a[i * sa] OP b[i * sb]

static void cmp_row(int code, const float *restrict a, int64_t sa, const float *restrict b, int64_t sb,
                    int32_t *restrict o, int64_t n) {
  switch (code) {
  case B_EQ: CMP_LOOP(==); break;
  case B_NE: CMP_LOOP(!=); break;
  case B_LT: CMP_LOOP(<); break;
  case B_LE: CMP_LOOP(<=); break;
  case B_GT: CMP_LOOP(>); break;
  default: CMP_LOOP(>=); break;
  }
}

/* A float row; the loops for the common strides are written out so the
 * compiler vectorizes them. Float +, -, *, / round exactly as the double
 * operation rounded to float would. */
#define BIN_LOOP(EXPR)                                                                                                 \
  do {                                                                                                                 \
    if (sa == 1 && sb == 1)                                                                                            \
      for (int64_t i = 0; i < n; i++) {                                                                                \
        float u = a[i], v = b[i];                                                                                      \
        o[i] = (EXPR);                                                                                                 \
      }                                                                                                                \
    else if (sa == 1 && sb == 0) {                                                                                     \
      float v = b[0];                                                                                                  \
      for (int64_t i = 0; i < n; i++) {                                                                                \
        float u = a[i];                                                                                                \
        o[i] = (EXPR);                                                                                                 \
      }                                                                                                                \
    } else if (sa == 0 && sb == 1) {                                                                                   \
      float u = a[0];                                                                                                  \
      for (int64_t i = 0; i < n; i++) {                                                                                \
        float v = b[i];                                                                                                \
        o[i] = (EXPR);                                                                                                 \
      }                                                                                                                \
    } else                                                                                                             \
      for (int64_t i = 0; i < n; i++) {                                                                                \
        float u = a[i * sa], v = b[i * sb];                                                                            \
        o[i] = (EXPR);                                                                                                 \
      }                                                                                                                \
  } while (0)

#define BIN_ROW_BODY                                                                                                   \
  switch (code) {                                                                                                      \
  case B_ADD: BIN_LOOP(u + v); break;                                                                                  \
  case B_SUB: BIN_LOOP(u - v); break;                                                                                  \
  case B_MUL: BIN_LOOP(u * v); break;                                                                                  \
  case B_DIV: BIN_LOOP(u / v); break;                                                                                  \
  case B_FDIV: BIN_LOOP((float)floor((double)u / (double)v)); break;                                                   \
  case B_POW: BIN_LOOP((float)pow((double)u, (double)v)); break;                                                       \
  case B_MAX: BIN_LOOP(u != u || v != v ? NAN : u > v ? u : u < v ? v : signbit(u) ? v : u); break;                   \
  default: BIN_LOOP(u != u || v != v ? NAN : u < v ? u : u > v ? v : signbit(u) ? u : v); break;                      \
  }

#if HAVE_X86
/* The same loops compiled for AVX2 (eight floats at a time; each element
 * still one IEEE operation, so the same results), chosen when the CPU has it. */
AVX2 static void bin_row_avx2(int code, const float *restrict a, int64_t sa, const float *restrict b, int64_t sb,
                              float *restrict o, int64_t n) {
  BIN_ROW_BODY
}
#endif

static void bin_row(bool avx2, int code, const float *restrict a, int64_t sa, const float *restrict b, int64_t sb,
                    float *restrict o, int64_t n) {
#if HAVE_X86
  if (avx2) {
    bin_row_avx2(code, a, sa, b, sb, o, n);
    return;
  }
#else
  (void)avx2;
#endif
  BIN_ROW_BODY
}

static void bin_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  (void)tid;
  const BinJob *j = arg;
  bool fast = j->a->st == ST_F32 && j->b->st == ST_F32 && j->o->st == ST_F32;
  bool integer = j->o->dt == MIL_DT_INT32;
  for (int64_t it = lo; it < hi; it++) {
    int64_t row = it / j->chunks, c0 = (it % j->chunks) * BIN_CHUNK;
    int64_t n = j->inner - c0 < BIN_CHUNK ? j->inner - c0 : BIN_CHUNK;
    int64_t oa = offset_at(row, j->odims, j->nouter, j->ast) + c0 * j->sa;
    int64_t ob = offset_at(row, j->odims, j->nouter, j->bst) + c0 * j->sb;
    int64_t oo = row * j->inner + c0;
    if (fast) {
      bin_row(j->avx2, j->code, fp(j->a) + oa, j->sa, fp(j->b) + ob, j->sb, fp(j->o) + oo, n);
      if (j->round16) round16(fp(j->o) + oo, n); /* while the piece is in cache */
      continue;
    }
    if (integer && j->a->st == ST_I32 && j->b->st == ST_I32 && (j->code == B_ADD || j->code == B_SUB)) {
      /* exact in int64, then saturated as st does (an index minus a range of them: one-hot masks) */
      const int32_t *pa = (const int32_t *)j->a->p + oa, *pb = (const int32_t *)j->b->p + ob;
      int32_t *po = (int32_t *)j->o->p + oo;
      int64_t sa = j->sa, sb = j->sb, sign = j->code == B_ADD ? 1 : -1;
      for (int64_t i = 0; i < n; i++) {
        int64_t r = (int64_t)pa[i * sa] + sign * pb[i * sb];
        po[i] = r > INT32_MAX ? INT32_MAX : r < INT32_MIN ? INT32_MIN : (int32_t)r;
      }
      continue;
    }
    if (is_compare(j->code) && j->a->st == ST_F32 && j->b->st == ST_F32) {
      cmp_row(j->code, fp(j->a) + oa, j->sa, fp(j->b) + ob, j->sb, (int32_t *)j->o->p + oo, n);
      continue;
    }
    for (int64_t i = 0; i < n; i++)
      st(j->o, oo + i, bin_one(j->code, ld(j->a, oa + i * j->sa), ld(j->b, ob + i * j->sb), integer));
    if (j->round16) round16(fp(j->o) + oo, n);
  }
}


/* Output elements [e0, e1) of a float binary op (a fused group's tile): the
 * same rows as bin_task's, cut where the range cuts them. Element k of
 * operand a is at pa[k - a0] (a0 is 0 for a planned value; a value held in
 * a tile buffer starting at element a0 is shaped as the result), the same
 * for b; the result's element e at po[e - o0]. */
void bin_range(const BinJob *j, int64_t e0, int64_t e1, const float *pa, int64_t a0, const float *pb,
                      int64_t b0, float *po, int64_t o0) {
  while (e0 < e1) {
    int64_t row = e0 / j->inner, c0 = e0 % j->inner;
    int64_t n = j->inner - c0 < e1 - e0 ? j->inner - c0 : e1 - e0;
    int64_t oa = offset_at(row, j->odims, j->nouter, j->ast) + c0 * j->sa;
    int64_t ob = offset_at(row, j->odims, j->nouter, j->bst) + c0 * j->sb;
    bin_row(j->avx2, j->code, pa + (oa - a0), j->sa, pb + (ob - b0), j->sb, po + (e0 - o0), n);
    e0 += n;
  }
}

/* Reads and checks a binary op's operands into *jp; false when reported, or
 * (with *jp's o NULL) when the result is empty. */
static bool bin_setup(Ctx *x, int code, Val *out, BinJob *jp) {
  bool ok = true;
  const Val *a = req_arg(x, SHARED_x, &ok), *b = req_arg(x, SHARED_y, &ok);
  if (!ok) return false;
  if (a->st == ST_STR || b->st == ST_STR) return op_fail(x, "operands must be tensors");
  if (is_compare(code) && out->dt != MIL_DT_BOOL)
    return op_fail(x, "returns bool, but the result is declared %s", mil_dtype_name(out->dt));
  if (is_logical(code) && (a->dt != MIL_DT_BOOL || b->dt != MIL_DT_BOOL || out->dt != MIL_DT_BOOL))
    return op_fail(x, "takes and returns bool, not %s and %s into %s", mil_dtype_name(a->dt), mil_dtype_name(b->dt),
                mil_dtype_name(out->dt));
  if (!is_compare(code) && !is_logical(code) && out->dt == MIL_DT_BOOL)
    return op_fail(x, "does not return bool");
  BinJob j = {.code = code, .avx2 = cpu_features()->avx2, .a = a, .b = b, .o = out,
              .round16 = x->c->mode == CPU_NUMERICS_ANE && out->dt == MIL_DT_FP16 && out->st == ST_F32};
  if (!bcast_strides(x, a, out, j.ast) || !bcast_strides(x, b, out, j.bst)) return false;
  if (out->n == 0) {
    jp->o = NULL;
    return true;
  }
  memcpy(j.odims, out->dims, sizeof j.odims);
  int64_t *strides[2] = {j.ast, j.bst};
  uint32_t r = collapse_dims(out->rank, j.odims, strides, 2);
  if (r == 0) j.odims[r] = 1, j.ast[r] = j.bst[r] = 0, r = 1;
  j.nouter = r - 1;
  j.inner = j.odims[r - 1];
  j.sa = j.ast[r - 1];
  j.sb = j.bst[r - 1];
  j.chunks = (j.inner + BIN_CHUNK - 1) / BIN_CHUNK;
  *jp = j;
  return true;
}

bool bind_binary(Ctx *x, int code, Val *out, uint32_t nout, void **bound) {
  (void)nout;
  BinJob j = {0};
  if (!bin_setup(x, code, out, &j)) return false;
  *bound = dup_job(&j, sizeof j);
  return true;
}

bool k_binary(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)out, (void)nout;
  const BinJob *j = x->c->bound[x->si];
  if (!j->o) return true;
  int64_t items = elements(j->odims, j->nouter) * j->chunks;
  int64_t per = j->inner < BIN_CHUNK ? j->inner : BIN_CHUNK;
  par_for(x->c, items, (GRAIN + per - 1) / per, bin_task, (void *)(uintptr_t)j);
  return true;
}

/* select as bound: the operands' strides over the result, its dims
 * collapsed like a binary op's, cut into rows of chunks for the pool. */
typedef struct SelectJob {
  const Val *c, *a, *b;
  Val *o;
  uint32_t nouter;
  int64_t odims[MIL_MAX_RANK], sc[MIL_MAX_RANK], sa[MIL_MAX_RANK], sb[MIL_MAX_RANK];
  int64_t inner, ic, ia, ib, chunks;
} SelectJob;

bool bind_select(Ctx *x, int code, Val *out, uint32_t nout, void **bound) {
  (void)code, (void)nout;
  bool ok = true;
  SelectJob j = {.c = req_arg(x, MIL_ARG_SELECT_cond, &ok),
                 .a = req_arg(x, MIL_ARG_SELECT_a, &ok),
                 .b = req_arg(x, MIL_ARG_SELECT_b, &ok),
                 .o = out};
  if (!ok) return false;
  if (!bcast_strides(x, j.c, out, j.sc) || !bcast_strides(x, j.a, out, j.sa) || !bcast_strides(x, j.b, out, j.sb))
    return false;
  memcpy(j.odims, out->dims, sizeof j.odims);
  int64_t *strides[3] = {j.sc, j.sa, j.sb};
  uint32_t r = collapse_dims(out->rank, j.odims, strides, 3);
  if (r == 0) j.odims[r] = 1, j.sc[r] = j.sa[r] = j.sb[r] = 0, r = 1;
  j.nouter = r - 1;
  j.inner = j.odims[r - 1];
  j.ic = j.sc[r - 1], j.ia = j.sa[r - 1], j.ib = j.sb[r - 1];
  j.chunks = (j.inner + BIN_CHUNK - 1) / BIN_CHUNK;
  *bound = dup_job(&j, sizeof j);
  return true;
}

/* A piece is a chunk of a row: offsets found once, then strided. Float
 * operands and result (the masks of a backward) are copied as floats, bit
 * for bit what ld/st give. */
static void select_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  (void)tid;
  const SelectJob *j = arg;
  bool fast = j->o->st == ST_F32 && j->a->st == ST_F32 && j->b->st == ST_F32 && j->c->st == ST_I32;
  for (int64_t it = lo; it < hi; it++) {
    int64_t row = it / j->chunks, c0 = (it % j->chunks) * BIN_CHUNK;
    int64_t n = j->inner - c0 < BIN_CHUNK ? j->inner - c0 : BIN_CHUNK;
    int64_t oc = offset_at(row, j->odims, j->nouter, j->sc) + c0 * j->ic;
    int64_t oa = offset_at(row, j->odims, j->nouter, j->sa) + c0 * j->ia;
    int64_t ob = offset_at(row, j->odims, j->nouter, j->sb) + c0 * j->ib;
    int64_t oo = row * j->inner + c0;
    if (fast) {
      const int32_t *restrict c = (const int32_t *)j->c->p + oc;
      const float *restrict a = fp(j->a) + oa, *restrict b = fp(j->b) + ob;
      float *restrict o = fp(j->o) + oo;
      int64_t ic = j->ic, ia = j->ia, ib = j->ib;
      for (int64_t i = 0; i < n; i++) o[i] = c[i * ic] != 0 ? a[i * ia] : b[i * ib];
      continue;
    }
    for (int64_t i = 0; i < n; i++)
      st(j->o, oo + i, ld(j->c, oc + i * j->ic) != 0 ? ld(j->a, oa + i * j->ia) : ld(j->b, ob + i * j->ib));
  }
}

bool k_select(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)out, (void)nout;
  const SelectJob *j = x->c->bound[x->si];
  if (j->o->n == 0) return true;
  int64_t items = elements(j->odims, j->nouter) * j->chunks;
  int64_t per = j->inner < BIN_CHUNK ? j->inner : BIN_CHUNK;
  par_for(x->c, items, (GRAIN + per - 1) / per, select_task, (void *)(uintptr_t)j);
  return true;
}

typedef struct CastJob {
  const Val *a;
  const char *to; /* the dtype's name */
  MilDType t;
  double lo, hi; /* the integer types' range */
} CastJob;

bool bind_cast(Ctx *x, int code, Val *out, uint32_t nout, void **bound) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, MIL_ARG_CAST_x, &ok);
  const char *to = string_arg(x, MIL_ARG_CAST_dtype, NULL, &ok);
  if (!ok) return false;
  if (!to) return op_fail(x, "missing argument '%s'", mil_arg_name(MIL_ARG_CAST_dtype));
  MilDType t = mil_dtype_from_name(to, strlen(to));
  if (t != out->dt) return op_fail(x, "casts to '%s' but the result is declared %s", to, mil_dtype_name(out->dt));
  if (!expect_shape(x, out, a->dims, a->rank)) return false;
  CastJob j = {.a = a, .to = to, .t = t, .lo = -2147483648.0, .hi = 2147483647.0};
  if (t == MIL_DT_INT8) j.lo = -128, j.hi = 127;
  if (t == MIL_DT_UINT8) j.lo = 0, j.hi = 255;
  if (t == MIL_DT_INT16) j.lo = -32768, j.hi = 32767;
  if (t == MIL_DT_UINT16) j.lo = 0, j.hi = 65535;
  *bound = dup_job(&j, sizeof j);
  return true;
}

/* Casts that cannot fail, in parallel pieces: to bool (!= 0) and to fp32,
 * from int32 or fp32 storage, and to fp16 from fp32 storage; each element as
 * the serial loop makes it (a float's fp16_from_double is its
 * fp16_from_float, which round16 applies, F16C or not: NaNs quieted the same
 * way, payload truncated, sign kept). */
static bool cast_parallel(const CastJob *j, const Val *out) {
  if (j->t == MIL_DT_FP16) return out->st == ST_F32 && j->a->st == ST_F32;
  return (j->t == MIL_DT_BOOL || j->t == MIL_DT_FP32) && out->st == (j->t == MIL_DT_BOOL ? ST_I32 : ST_F32) &&
         (j->a->st == ST_I32 || j->a->st == ST_F32);
}

typedef struct CastPiece {
  const CastJob *j;
  Val *out;
} CastPiece;

static void cast_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  (void)tid;
  const CastPiece *p = arg;
  const Val *a = p->j->a;
  int64_t e0 = lo * GRAIN, e1 = hi * GRAIN < p->out->n ? hi * GRAIN : p->out->n;
  if (p->j->t == MIL_DT_BOOL) {
    int32_t *restrict o = (int32_t *)p->out->p;
    if (a->st == ST_I32)
      for (int64_t i = e0; i < e1; i++) o[i] = ((const int32_t *)a->p)[i] != 0;
    else
      for (int64_t i = e0; i < e1; i++) o[i] = fp(a)[i] != 0;
  } else {
    float *restrict o = fp(p->out);
    if (a->st == ST_I32)
      for (int64_t i = e0; i < e1; i++) o[i] = (float)((const int32_t *)a->p)[i];
    else
      memcpy(o + e0, fp(a) + e0, (size_t)(e1 - e0) * sizeof(float));
    if (p->j->t == MIL_DT_FP16) round16(o + e0, e1 - e0);
  }
}

bool k_cast(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  const CastJob *j = x->c->bound[x->si];
  if (cast_parallel(j, out)) {
    CastPiece p = {j, out};
    par_for(x->c, (out->n + GRAIN - 1) / GRAIN, 1, cast_task, &p);
    return true;
  }
  const Val *a = j->a;
  const char *to = j->to;
  MilDType t = j->t;
  double lo = j->lo, hi = j->hi;
  for (int64_t i = 0; i < out->n; i++) {
    double v = ld(a, i);
    switch (t) {
    case MIL_DT_INT32:
    case MIL_DT_INT8:
    case MIL_DT_UINT8:
    case MIL_DT_INT16:
    case MIL_DT_UINT16:
      /* NumPy astype truncates toward zero; NaN and out-of-range values are left undefined (or wrap) there, an
       * error here. */
      if (isnan(v) || trunc(v) < lo || trunc(v) > hi) return op_fail(x, "cast of %g to %s is out of range", v, to);
      st(out, i, trunc(v));
      break;
    case MIL_DT_BOOL: st(out, i, v != 0); break;
    /* Converting is what the op is for: fp16 rounds in every mode. */
    case MIL_DT_FP16: st(out, i, (double)fp16_to_float(fp16_from_double(v))); break;
    default: st(out, i, v); break;
    }
  }
  return true;
}
