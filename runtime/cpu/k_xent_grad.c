/*
 * The gradient of a cross entropy in one pass (fusion.c, fuse_xent_grad):
 * the chain the compiler emits for it over [rows, C] logits,
 *
 *   p = softmax(x); d = t[.., None] - [0, 1, .., C-1]; o = select(cast(d, bool), differs, equals)
 *   g = (p - o) [* scale] [cast to fp16]
 *
 * row by row while the row is in cache: the softmax as the op computes it
 * (softmax_row, its exps kept in the thread's scratch), then the same float
 * subtraction, product and fp16 rounding per element, so the result is the
 * chain's bit for bit, without its four [rows, C] intermediates (an int32
 * difference, a bool mask, the one-hot and the difference before scaling).
 * fp16 logits given as an input are read in place (choose_fp16_inputs):
 * each row is converted into its output row, then the softmax runs there
 * (softmax_row reads each element before it writes it), so the same floats
 * without a [rows, C] fp32 copy of the input written and read back. A
 * result stored as fp16 bits (choose_fp16_results: only the classifier's
 * tiled products read it) is made as floats in the scratch, after the
 * row's exps, and converted when the row is done (exact: it is rounded).
 */
#include "cpu_internal.h"

typedef struct XentGradJob {
  const CpuProgram *c;
  const Val *x, *t, *s; /* logits, targets (one per row), the scale (NULL: none) */
  Val *o;
  int64_t C;
  float differs, equals;
  bool avx2, round;
} XentGradJob;

static void xent_grad_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  const XentGradJob *j = arg;
  int64_t C = j->C;
  double *keep = (double *)(void *)j->c->scratch[tid]; /* C doubles: the plan asked for them */
  const int32_t *t = (const int32_t *)j->t->p;
  float scale = j->s ? fp(j->s)[0] : 1.0f;
  /* p - (+0) is p for every p the softmax makes (no signalling NaN): only the target's class changes. */
  uint32_t bits;
  memcpy(&bits, &j->differs, sizeof bits);
  bool plain = bits == 0;
  for (int64_t r = lo; r < hi; r++) {
    /* fp16 storage (choose_fp16_results): the row as floats after the exps, converted when done */
    float *o = j->o->st == ST_H16 ? (float *)(void *)(keep + C) : fp(j->o) + r * C;
    if (j->x->st == ST_H16) {
      h2f(o, (const uint16_t *)j->x->p + r * C, C);
      softmax_row(o, o, C, keep, j->avx2);
    } else {
      softmax_row(fp(j->x) + r * C, o, C, keep, j->avx2);
    }
    int64_t hit = t[r] >= 0 && t[r] < C ? t[r] : -1; /* no class is an out-of-range target */
    if (plain) {
      if (hit >= 0) o[hit] -= j->equals;
    } else {
      for (int64_t k = 0; k < C; k++) o[k] -= k == hit ? j->equals : j->differs;
    }
    if (j->s)
      for (int64_t k = 0; k < C; k++) o[k] *= scale;
    if (j->round) round16(o, C);
    if (j->o->st == ST_H16) fp16_from_float_array((uint16_t *)j->o->p + r * C, o, (size_t)C);
  }
}

bool bind_xent_grad(Ctx *x, const Fused *f, void **bound) {
  const CpuProgram *c = x->c;
  Val *o = &x->vals[c->base[x->si]];
  const Val *lx = &x->vals[f->xs], *t = &x->vals[f->bs], *s = f->ss == UINT32_MAX ? NULL : &x->vals[f->ss];
  int64_t C = lx->rank ? lx->dims[lx->rank - 1] : 0;
  if ((lx->st != ST_F32 && lx->st != ST_H16) || (o->st != ST_F32 && (o->st != ST_H16 || !f->round_out)) || t->st != ST_I32 || (s && (s->st != ST_F32 || s->n != 1)) ||
      o->n != lx->n || C < 1 || t->n * C != lx->n || (o->st == ST_H16 ? 3 : 2) * C > c->scratch_floats)
    return op_fail(x, "a fused cross entropy gradient needs float logits, int32 targets and scratch"); /* the plan prevents this */
  XentGradJob j = {.c = c, .x = lx, .t = t, .s = s, .o = o, .C = C, .differs = f->differs, .equals = f->equals,
                   .avx2 = cpu_features()->avx2, .round = f->round_out};
  *bound = memcpy(xmalloc(sizeof j), &j, sizeof j);
  return true;
}

bool k_xent_grad(Ctx *x, const Fused *f) {
  (void)f;
  const XentGradJob *j = x->c->bound[x->si];
  par_for(x->c, j->t->n, 1, xent_grad_task, (void *)(uintptr_t)j);
  return true;
}

/* The gather of a cross entropy's target logits from the logits themselves
 * (fusion.c, fuse_xent_pick): out[j] = x[i] - m[i / C], i = index[j], the
 * float subtraction that made the shifted value, so the gather's bits; an
 * index out of range fails as the gather would. */
bool k_xent_pick(Ctx *x, const Fused *f) {
  const CpuProgram *c = x->c;
  const Val *lx = &x->vals[f->xs], *m = &x->vals[f->bs];
  const Val *ind = &x->vals[arg_slot(c, x->si, MIL_ARG_GATHER_indices)];
  Val *o = &x->vals[c->base[x->si]];
  int64_t C = lx->dims[lx->rank - 1], len = lx->n;
  const int32_t *idx = (const int32_t *)ind->p;
  for (int64_t j = 0; j < ind->n; j++) {
    int64_t k = idx[j];
    if (k < 0 && c->f->ios < 17) k += len;
    if (k < 0 || k >= len)
      return op_fail(x, "index %d is out of range for dimension 0 of size %lld (indices element [%lld])", idx[j],
                     (long long)len, (long long)j);
    fp(o)[j] = fp(lx)[k] - fp(m)[k / C];
  }
  return true;
}
