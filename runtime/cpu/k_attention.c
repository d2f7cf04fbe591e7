/*
 * scaled_dot_product_attention.
 */
#include "cpu_internal.h"

#include <math.h>

#include "cpu_math.h"

/* scaled_dot_product_attention (iOS18): softmax(Q K^T / sqrt(E) + M) V over
 * the last two dims (batch dims equal). A bool mask keeps a score where it is
 * true (-inf elsewhere), a float mask is added. One item is one query row,
 * computed in double with its scores in the thread's scratch (planned at
 * prepare) and rounded once; a row whose every score is masked is NaN, as
 * softmax over nothing but -inf is. */
typedef struct SdpaJob {
  const CpuProgram *c;
  const Val *q, *k, *v, *m;
  Val *o;
  int64_t L, S, E, EV;
  double scale;
  uint32_t srank;                                    /* the scores' rank (q's) */
  int64_t sdims[MIL_MAX_RANK], mst[MIL_MAX_RANK];    /* the scores' shape; the mask's strides in it */
} SdpaJob;

static void sdpa_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  const SdpaJob *j = arg;
  double *sc = (double *)(void *)j->c->scratch[tid];
  int64_t S = j->S, E = j->E, EV = j->EV;
  bool mbool = j->m && j->m->dt == MIL_DT_BOOL;
  for (int64_t row = lo; row < hi; row++) {
    int64_t b = row / j->L;
    const float *q = fp(j->q) + row * E, *k = fp(j->k) + b * S * E, *v = fp(j->v) + b * S * EV;
    double mx = -HUGE_VAL;
    bool nan = false;
    for (int64_t s = 0; s < S; s++) {
      double dot = 0;
      for (int64_t e = 0; e < E; e++) dot += (double)q[e] * (double)k[s * E + e];
      double t = dot * j->scale;
      if (j->m) {
        double mv = ld(j->m, offset_at(row * S + s, j->sdims, j->srank, j->mst));
        t = mbool ? (mv != 0 ? t : -HUGE_VAL) : t + mv;
      }
      sc[s] = t;
      nan |= isnan(t);
      mx = t > mx ? t : mx;
    }
    if (nan || mx == -HUGE_VAL || mx == HUGE_VAL) mx = (double)NAN; /* the whole row is NaN */
    double sum = 0;
    for (int64_t s = 0; s < S; s++) sum += sc[s] = sc[s] == -HUGE_VAL && mx == mx ? 0 : exp_d(sc[s] - mx);
    for (int64_t ev = 0; ev < EV; ev++) {
      double acc = 0;
      for (int64_t s = 0; s < S; s++) acc += sc[s] * (double)v[s * EV + ev];
      st(j->o, row * EV + ev, acc / sum);
    }
  }
}

bool bind_sdpa(Ctx *x, int code, Val *out, uint32_t nout, void **bound) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *q = req_arg(x, MIL_ARG_SCALED_DOT_PRODUCT_ATTENTION_query, &ok);
  const Val *k = req_arg(x, MIL_ARG_SCALED_DOT_PRODUCT_ATTENTION_key, &ok);
  const Val *v = req_arg(x, MIL_ARG_SCALED_DOT_PRODUCT_ATTENTION_value, &ok);
  const Val *m = opt_arg(x, MIL_ARG_SCALED_DOT_PRODUCT_ATTENTION_attn_mask, &ok);
  if (!ok) return false;
  if (q->st != ST_F32 || k->st != ST_F32 || v->st != ST_F32 || out->st != ST_F32)
    return op_fail(x, "query, key, value and the result must be fp16 or fp32");
  uint32_t r = q->rank;
  if (r < 3 || k->rank != r || v->rank != r)
    return op_fail(x, "query, key and value must have the same rank, 3 or more (they have %u, %u and %u)", q->rank,
                k->rank, v->rank);
  for (uint32_t i = 0; i + 2 < r; i++)
    if (k->dims[i] != q->dims[i] || v->dims[i] != q->dims[i])
      return op_fail(x, "query, key and value differ in batch dimension %u", i);
  SdpaJob j = {.c = x->c, .q = q, .k = k, .v = v, .m = m, .o = out, .L = q->dims[r - 2], .S = k->dims[r - 2],
               .E = q->dims[r - 1], .EV = v->dims[r - 1], .srank = r};
  if (k->dims[r - 1] != j.E) return op_fail(x, "key has %lld features per row but query %lld", (long long)k->dims[r - 1], (long long)j.E);
  if (v->dims[r - 2] != j.S) return op_fail(x, "value has %lld rows but key %lld", (long long)v->dims[r - 2], (long long)j.S);
  int64_t dims[MIL_MAX_RANK];
  memcpy(dims, q->dims, sizeof dims);
  dims[r - 1] = j.EV;
  if (!expect_shape(x, out, dims, r)) return false;
  if (m) {
    if (m->st == ST_STR || (m->dt != MIL_DT_BOOL && !is_float(m->dt))) return op_fail(x, "attn_mask must be bool, fp16 or fp32");
    Val sv = {.rank = r};
    memcpy(sv.dims, q->dims, sizeof sv.dims);
    sv.dims[r - 1] = j.S;
    if (!bcast_strides(x, m, &sv, j.mst)) return false;
    memcpy(j.sdims, sv.dims, sizeof j.sdims);
  }
  j.scale = j.E > 0 ? 1 / sqrt((double)j.E) : 1;
  if (2 * j.S > x->c->scratch_floats) return op_fail(x, "no scratch planned for %lld keys", (long long)j.S); /* prepare plans it */
  *bound = memcpy(xmalloc(sizeof j), &j, sizeof j);
  return true;
}

bool k_sdpa(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  const SdpaJob *j = x->c->bound[x->si];
  int64_t rows = j->EV ? out->n / j->EV : 0; /* batch x L query rows */
  int64_t per = j->S * (j->E + j->EV) + 1;
  par_for(x->c, rows, (GRAIN + per - 1) / per, sdpa_task, (void *)(uintptr_t)j);
  return true;
}
