/*
 * Running what the plan fused (fusion.c): element-wise groups tile by tile,
 * and a lowered linear layer as one product with its epilogue.
 */
#include "cpu_internal.h"

#include <math.h>

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
};

/* Units [u0, u1) (elements, or whole rows) of every member, in order; tiles:
 * the thread's tile buffers, c->tile_floats apart. */
static void group_range(const GroupJob *g, float *tiles, int64_t u0, int64_t u1) {
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
