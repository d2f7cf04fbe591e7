/*
 * Running what the plan fused (fusion.c): element-wise groups tile by tile
 * (the tanh gelu's nine members in one pass), and a lowered linear layer as
 * one product with its epilogue.
 */
#include "cpu_internal.h"

#include <math.h>

#include "cpu_math.h"

/* A fused element-wise group (see "Fusion" in docs/cpu-backend.md): the
 * statements x->si .. end - 1, every member a float unary or binary op with
 * a result of one shape, run tile by tile: each tile of GROUP_TILE elements
 * goes through every member in statement order (and, in ANE mode, each
 * member's fp16 result is rounded) while it is in cache. A result used only
 * inside the group lives in one of the thread's tile buffers, never in
 * memory. Views among the statements are set first. */

enum { GM_UNARY, GM_BINARY, GM_REDUCE };

/* A row group's rows per tile: about GROUP_TILE elements, a multiple of 4
 * (a unary member one per row then splits into the vectors of 4 it would
 * unfused). */
int64_t tile_rows(int64_t L) {
  int64_t r = GROUP_TILE / L / 4 * 4;
  return r > 4 ? r : 4;
}

struct GroupJob {
  const CpuProgram *c;
  uint32_t n;
  int64_t L;     /* a row group: the rows' length (1: an element group) */
  int64_t units; /* elements (an element group) or rows */
  int64_t per;   /* units per tile */
  uint8_t kind[GROUP_MAX];
  bool round[GROUP_MAX];
  bool ro[GROUP_MAX], ra[GROUP_MAX], rb[GROUP_MAX];    /* a row group: the result, x, y are one per row */
  int64_t on[GROUP_MAX], an[GROUP_MAX], bn[GROUP_MAX]; /* their elements */
  int32_t ta[GROUP_MAX], tb[GROUP_MAX], to[GROUP_MAX]; /* tile buffers of the operands and result, -1: planned */
  UnaryJob u[GROUP_MAX];
  BinJob b[GROUP_MAX];
  RedJob r[GROUP_MAX];
  bool gelu; /* the members are gelu_chain's: run by gelu_range */
};

bool group_runs_gelu(const GroupJob *g) { return g && g->gelu; }

#if HAVE_X86
/* gelu_chain's nine members over elements [e0, e1) in one pass, each element through every member in
 * registers: the same float operations and operand orders as member by member (one statement each, so
 * nothing is contracted), the tanh by tanh4 for the range's whole fours and by tanh_d for its last
 * n % 4 as unary_f32 does. */
__attribute__((target("avx2,fma"))) static void gelu_range(const GroupJob *g, int64_t e0, int64_t e1) {
  const float *f = fp(g->b[0].a) + e0;
  float *y = fp(g->b[8].o) + e0;
  float k = fp(g->b[2].b)[0], c = fp(g->b[4].b)[0], one = fp(g->b[6].b)[0], half = fp(g->b[7].b)[0];
  int64_t n = e1 - e0, i = 0;
  __m256 wk = _mm256_set1_ps(k), wc = _mm256_set1_ps(c), wone = _mm256_set1_ps(one), whalf = _mm256_set1_ps(half);
  for (; i + 8 <= n; i += 8) { /* eight at a time (tanh4 on each half: the same fours as unary_f32's) */
    __m256 x = _mm256_loadu_ps(f + i);
    __m256 x2 = _mm256_mul_ps(x, x);
    __m256 x3 = _mm256_mul_ps(x2, x);
    __m256 kx3 = _mm256_mul_ps(x3, wk);
    __m256 in = _mm256_add_ps(x, kx3);
    __m256 sc = _mm256_mul_ps(in, wc);
    __m128 tlo = _mm256_cvtpd_ps(tanh4(_mm256_cvtps_pd(_mm256_castps256_ps128(sc))));
    __m128 thi = _mm256_cvtpd_ps(tanh4(_mm256_cvtps_pd(_mm256_extractf128_ps(sc, 1))));
    __m256 t = _mm256_insertf128_ps(_mm256_castps128_ps256(tlo), thi, 1);
    __m256 p = _mm256_add_ps(t, wone);
    __m256 h = _mm256_mul_ps(x, whalf);
    __m256 r = _mm256_mul_ps(h, p);
    _mm256_storeu_ps(y + i, r);
  }
  __m128 vk = _mm_set1_ps(k), vc = _mm_set1_ps(c), vone = _mm_set1_ps(one), vhalf = _mm_set1_ps(half);
  for (; i + 4 <= n; i += 4) {
    __m128 x = _mm_loadu_ps(f + i);
    __m128 x2 = _mm_mul_ps(x, x);
    __m128 x3 = _mm_mul_ps(x2, x);
    __m128 kx3 = _mm_mul_ps(x3, vk);
    __m128 in = _mm_add_ps(x, kx3);
    __m128 sc = _mm_mul_ps(in, vc);
    __m128 t = _mm256_cvtpd_ps(tanh4(_mm256_cvtps_pd(sc)));
    __m128 p = _mm_add_ps(t, vone);
    __m128 h = _mm_mul_ps(x, vhalf);
    __m128 r = _mm_mul_ps(h, p);
    _mm_storeu_ps(y + i, r);
  }
  for (; i < n; i++) {
    float x = f[i];
    float x2 = x * x;
    float x3 = x2 * x;
    float kx3 = x3 * k;
    float in = x + kx3;
    float sc = in * c;
    float t = (float)tanh_d((double)sc);
    float p = t + one;
    float h = x * half;
    y[i] = h * p;
  }
}

/* Whether group g's members are the tanh form of gelu as lower-gelu writes it, in this order and with these
 * operands (f the group's input, k, c, one and half float scalars):
 *   x2 = f·f; x3 = x2·f; kx3 = x3·k; in = f + kx3; s = in·c; t = tanh(s); p = t + one; h = f·half; y = h·p
 * every result but y in a tile buffer, y and f in memory, none rounded to fp16: in ANE numerics the nine
 * fp16 roundings in registers measured slower than member by member (92.1 -> 93.0 ms a forward). */
static bool gelu_chain(const GroupJob *g) {
  static const uint8_t kind[9] = {GM_BINARY, GM_BINARY, GM_BINARY, GM_BINARY, GM_BINARY,
                                  GM_UNARY,  GM_BINARY, GM_BINARY, GM_BINARY};
  static const int code[9] = {B_MUL, B_MUL, B_MUL, B_ADD, B_MUL, U_TANH, B_ADD, B_MUL, B_MUL};
  const CpuFeatures *cf = cpu_features();
  if (g->n != 9 || g->L != 1 || !cf->avx2) return false;
  const Val *o[9];
  for (int m = 0; m < 9; m++) {
    bool bin = kind[m] == GM_BINARY;
    if (g->kind[m] != kind[m] || (bin ? g->b[m].code : g->u[m].code) != code[m] || g->round[m] ||
        (m < 8) != (g->to[m] >= 0))
      return false;
    o[m] = bin ? g->b[m].o : g->u[m].o;
  }
  const Val *f = g->b[0].a;
  const BinJob *b = g->b;
#define SCALAR(v) ((v)->n == 1 && (v)->st == ST_F32 && (v)->p)
  return f->st == ST_F32 && f->n == o[8]->n && g->ta[0] < 0 && b[0].b == f && b[1].a == o[0] && b[1].b == f &&
         b[2].a == o[1] && SCALAR(b[2].b) && b[3].a == f && b[3].b == o[2] && b[4].a == o[3] && SCALAR(b[4].b) &&
         g->u[5].a == o[4] && b[6].a == o[5] && SCALAR(b[6].b) && b[7].a == f && SCALAR(b[7].b) && b[8].a == o[7] &&
         b[8].b == o[6];
#undef SCALAR
}
#endif

/* Units [u0, u1) (elements, or whole rows) of every member, in order; tiles:
 * the thread's tile buffers, c->tile_floats apart. */
static void group_range(const GroupJob *g, float *tiles, int64_t u0, int64_t u1) {
#if HAVE_X86
  if (g->gelu) {
    gelu_range(g, u0, u1);
    return;
  }
#endif
  int64_t tf = g->c->tile_floats;
  for (uint32_t m = 0; m < g->n; m++) {
    int64_t so = g->ro[m] ? 1 : g->L, sa = g->ra[m] ? 1 : g->L, sb = g->rb[m] ? 1 : g->L; /* elements per unit */
    Val *ov = g->kind[m] == GM_BINARY ? g->b[m].o : g->kind[m] == GM_UNARY ? g->u[m].o : g->r[m].o;
    float *o = g->to[m] >= 0 ? tiles + g->to[m] * tf : fp(ov) + u0 * so;
    if (g->kind[m] == GM_BINARY) {
      const BinJob *j = &g->b[m];
      bool ia = g->ta[m] >= 0, ib = g->tb[m] >= 0;
      bin_range(j, u0 * so, u1 * so, ia ? tiles + g->ta[m] * tf : fp(j->a), ia ? u0 * sa : 0,
                ib ? tiles + g->tb[m] * tf : fp(j->b), ib ? u0 * sb : 0, o, u0 * so);
    } else {
      const Val *av = g->kind[m] == GM_UNARY ? g->u[m].a : g->r[m].a;
      const float *a = g->ta[m] >= 0 ? tiles + g->ta[m] * tf : fp(av) + u0 * sa;
      if (g->kind[m] == GM_UNARY) unary_f32(&g->u[m], a, o, (u1 - u0) * so);
      else reduce_rows(&g->r[m], a, o, u1 - u0);
    }
    if (g->round[m]) round16(o, (u1 - u0) * so);
  }
}

void epilogue_row(const GroupJob *g, float *tiles, int64_t e0, int64_t n) { group_range(g, tiles, e0, e0 + n); }

static void group_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  const GroupJob *g = arg;
  float *tiles = g->c->tiles ? g->c->tiles[tid] : NULL;
  for (int64_t t = lo; t < hi; t++)
    group_range(g, tiles, t * g->per, (t + 1) * g->per < g->units ? (t + 1) * g->per : g->units);
}

/* Makes the job of group [first, end) from its members' bound jobs. */
bool bind_group(Ctx *x, uint32_t first, uint32_t end, GroupJob **bound) {
  const CpuProgram *c = x->c;
  int64_t L = c->fz[first].rowlen ? c->fz[first].rowlen : 1;
  GroupJob *g = xcalloc(1, sizeof *g);
  *g = (GroupJob){.c = c, .n = 0, .L = L};
  *bound = g;
  for (uint32_t si = first; si < end; si++) {
    const OpEntry *e = c->ops[si];
    if (!e || e->family == OF_VIEW) continue; /* a const, or a view (set as the group runs) */
    Val *out = &x->vals[c->base[si]];
    x->s = &c->f->stmts[si];
    x->si = si;
    uint32_t m = g->n++;
    g->kind[m] = e->family == OF_BINARY ? GM_BINARY : e->family == OF_UNARY ? GM_UNARY : GM_REDUCE;
    g->round[m] = c->mode == CPU_NUMERICS_ANE && out->dt == MIL_DT_FP16;
    uint32_t xs = arg_slot(c, si, SHARED_x), ys = g->kind[m] == GM_BINARY ? arg_slot(c, si, SHARED_y) : UINT32_MAX;
    g->to[m] = c->slots[c->base[si]].tile;
    g->ta[m] = c->slots[xs].tile;
    g->tb[m] = ys == UINT32_MAX ? -1 : c->slots[ys].tile;
    /* the plan gave every member a result of the group's shape, or (a row group) one per row */
    int64_t full = g->kind[m] == GM_REDUCE ? x->vals[xs].n : out->n;
    if (full / L > g->units) g->units = full / L;
    g->on[m] = out->n;
    g->an[m] = x->vals[xs].n;
    g->bn[m] = ys == UINT32_MAX ? 0 : x->vals[ys].n;
    if (g->kind[m] == GM_BINARY) g->b[m] = *(const BinJob *)c->bound[si];
    else if (g->kind[m] == GM_UNARY) g->u[m] = *(const UnaryJob *)c->bound[si];
    else g->r[m] = *reduce_job(c, si);
    if (g->kind[m] == GM_REDUCE && !g->r[m].o) return op_fail(x, "a fused reduction must reduce the last dim"); /* the plan prevents this */
  }
  for (uint32_t m = 0; m < g->n; m++) { /* an operand or result not of the group's shape is one per row */
    g->ro[m] = L > 1 && g->on[m] != g->units * L;
    g->ra[m] = L > 1 && g->an[m] != g->units * L;
    g->rb[m] = L > 1 && g->bn[m] != g->units * L;
  }
  g->per = L > 1 ? tile_rows(L) : GROUP_TILE;
#if HAVE_X86
  g->gelu = gelu_chain(g);
#endif
  return true;
}

/* Points the views among statements [first, end) at their sources. */
void set_views(const CpuProgram *c, Val *vals, uint32_t first, uint32_t end) {
  for (uint32_t si = first; si < end; si++)
    if (c->ops[si] && c->ops[si]->family == OF_VIEW) {
      const Val *a = &vals[c->slots[c->base[si]].src];
      vals[c->base[si]].p = a->p;
      vals[c->base[si]].st = a->st;
    }
}

bool k_group(Ctx *x, uint32_t end) {
  const GroupJob *g = x->c->fz[x->si].group;
  set_views(x->c, x->vals, x->si, end);
  par_for(x->c, (g->units + g->per - 1) / g->per, 1, group_task, (void *)(uintptr_t)g);
  return true;
}

/* A fused linear (see "Fusion" in docs/cpu-backend.md): the pointwise conv of
 * statement x->s computed from the untransposed x [B, P, K] straight into the
 * transposed result [B, P, O], the bias added (and the ANE roundings done)
 * piece by piece, then the element-wise group that follows (if the plan
 * made it the epilogue) run on each row of the piece while it is in cache;
 * the plan checked the shapes and the conv's arguments. */
/* A fused linear as bound: the product's job, and the bias (whose data a
 * weight update may move, so it is read when the linear runs). */
typedef struct FusedLinearBound {
  WJob j;
  const Val *bias;
} FusedLinearBound;

bool bind_fused_linear(Ctx *x, const Fused *f, void **bound) {
  bool ok = true;
  const Val *w = req_arg(x, MIL_ARG_CONV_weight, &ok);
  if (!ok) return false;
  const Val *a = &x->vals[f->xs], *b = f->bs == UINT32_MAX ? NULL : &x->vals[f->bs];
  Val *y = &x->vals[f->ys];
  if ((w->st != ST_F32 && w->st != ST_H16) || a->st != ST_F32 || y->st != ST_F32 || (b && b->st != ST_F32))
    return op_fail(x, "a fused linear needs float operands"); /* the plan prevents this */
  FusedLinearBound fb = {.j = {.conv = false, .x = a, .w = w, .o = y, .O = y->dims[2], .K = a->dims[2],
                               .R = a->dims[0] * a->dims[1], .round_mid = f->round_mid, .round_out = f->round_out},
                         .bias = b};
  wjob_reserve(x, &fb.j, 1);
  *bound = memcpy(xmalloc(sizeof fb), &fb, sizeof fb);
  return true;
}

bool k_fused_linear(Ctx *x, const Fused *f) {
  const FusedLinearBound *fb = x->c->bound[x->si];
  WJob j = fb->j;
  j.post = fb->bias ? fp(fb->bias) : NULL;
  if (f->gfirst) {
    set_views(x->c, x->vals, f->gfirst, x->c->fz[f->gfirst].end);
    j.epi = x->c->fz[f->gfirst].group;
  }
  wgemm(x, &j, 1);
  return true;
}
