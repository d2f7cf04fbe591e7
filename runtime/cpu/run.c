/*
 * Running a prepared function: inputs bound, each statement's kernel run,
 * ANE rounding, finite checks and profiling, outputs converted.
 */
#include "cpu_internal.h"

#include <math.h>
#include <time.h>

static bool tensor_matches(const CpuTensor *t, const MilType *ty) {
  bool same = t->dtype == ty->dtype && t->rank == ty->rank && (t->data || !elements(ty->dims, ty->rank));
  for (uint32_t k = 0; same && k < ty->rank; k++) same = t->dims[k] == ty->dims[k];
  return same;
}

static void type_error(Diag *d, SrcSpan loc, const char *what, uint32_t i, const char *name, const MilType *ty) {
  StrBuf sb;
  sb_init(&sb);
  mil_type_print(ty, &sb);
  diag_error(d, loc, "%s %u ('%s') must be %s with data", what, i, name, sb.data);
  sb_free(&sb);
}

static void round_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  (void)tid;
  round16((float *)arg + lo, hi - lo);
}

/* fp16 to float (h2f) and float to fp16 (fp16_from_float_array) in pieces:
 * element by element, so the same bits in any split. A training step passes
 * its saved activations this way, the llama's [1024, 32000] logits among
 * them (4 % of its ane step on one thread). */
typedef struct ConvertJob {
  void *dst;
  const void *src;
} ConvertJob;

static void h2f_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  (void)tid;
  const ConvertJob *j = arg;
  h2f((float *)j->dst + lo, (const uint16_t *)j->src + lo, hi - lo);
}

static void f2h_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  (void)tid;
  const ConvertJob *j = arg;
  fp16_from_float_array((uint16_t *)j->dst + lo, (const float *)j->src + lo, (size_t)(hi - lo));
}

static void output_convert(const CpuProgram *c, const Val *v, const CpuTensor *t) {
  size_t n = (size_t)v->n;
  switch (t->dtype) {
  case MIL_DT_FP32:
    for (size_t k = 0; k < n; k++) ((float *)t->data)[k] = (float)ld(v, (int64_t)k);
    break;
  case MIL_DT_FP16:
    if (v->st == ST_H16) memcpy(t->data, v->p, n * 2);
    else if (v->st == ST_F32) { /* fp16_from_float, eight at a time */
      ConvertJob j = {t->data, v->p};
      par_for(c, v->n, 4 * GRAIN, f2h_task, &j);
    }
    else
      for (size_t k = 0; k < n; k++) ((uint16_t *)t->data)[k] = fp16_from_float((float)ld(v, (int64_t)k));
    break;
  case MIL_DT_INT32:
    for (size_t k = 0; k < n; k++) ((int32_t *)t->data)[k] = sat32(ld(v, (int64_t)k));
    break;
  default:
    for (size_t k = 0; k < n; k++) ((bool *)t->data)[k] = ld(v, (int64_t)k) != 0;
    break;
  }
}

/* check_finite: the first element of a float value that is inf or NaN, -1 if none. */
static int64_t first_nonfinite(const Val *v) {
  if (v->st == ST_H16) { /* an fp16 input read in place: exponent all ones */
    for (int64_t i = 0; i < v->n; i++)
      if (!isfinite(ld(v, i))) return i;
    return -1;
  }
  if (v->st != ST_F32) return -1;
  const float *p = fp(v);
  for (int64_t i = 0; i < v->n; i++)
    if (!isfinite(p[i])) return i;
  return -1;
}

static void describe_nonfinite(StrBuf *sb, const Val *v, int64_t at) {
  double e = ld(v, at);
  sb_printf(sb, "is %s at element %lld (index [", isnan(e) ? "NaN" : e > 0 ? "inf" : "-inf", (long long)at);
  int64_t idx[MIL_MAX_RANK], rem = at;
  for (uint32_t i = v->rank; i-- > 0;) {
    idx[i] = v->dims[i] ? rem % v->dims[i] : 0;
    rem = v->dims[i] ? rem / v->dims[i] : 0;
  }
  for (uint32_t i = 0; i < v->rank; i++) sb_printf(sb, "%s%lld", i ? ", " : "", (long long)idx[i]);
  sb_printf(sb, "]), the first non-finite value of the run");
}

static bool run_locked(CpuProgram *c, const CpuTensor *inputs, const CpuTensor *outputs, Diag *d) {
  const MilFunc *f = c->f;
  bool ok = true;
  if (!c->bound_ok) {
    diag_error(d, f->loc, "function '%s' cannot run: the weights of its last update were rejected", f->name);
    return false;
  }
  for (uint32_t i = 0; i < c->nin; i++) {
    const MilVar *pv = &f->params[c->in_param[i]];
    if (!tensor_matches(&inputs[i], &pv->type)) {
      type_error(d, pv->loc, "input", i, pv->name, &pv->type);
      ok = false;
    }
  }
  for (uint32_t i = 0; i < c->nout; i++) {
    const Val *v = &c->vals[c->out_slot[i]];
    MilType ty = {.kind = MIL_TYPE_TENSOR, .dtype = v->dt, .rank = v->rank};
    memcpy(ty.dims, v->dims, sizeof ty.dims);
    if (!tensor_matches(&outputs[i], &ty)) {
      type_error(d, f->loc, "output", i, orion_output(c->prog, c->fn, i)->mil_name, &ty);
      ok = false;
    }
  }
  if (!ok) return false;
  /* Point every planned value at its buffer, the inputs at the caller's data. */
  for (uint32_t s = 0; s < c->nslots; s++)
    if (c->slots[s].off >= 0) c->vals[s].p = c->arena + c->slots[s].off;
  for (uint32_t i = 0; i < c->nin; i++) {
    Val *v = &c->vals[c->in_param[i]];
    const CpuTensor *t = &inputs[i];
    if (v->dt == MIL_DT_FP32 || v->dt == MIL_DT_INT32) v->p = t->data;
    else if (v->st == ST_H16) v->p = (void *)(uintptr_t)t->data; /* read in place, never written */
    else if (v->dt == MIL_DT_FP16) {
      ConvertJob j = {v->p, t->data};
      par_for(c, v->n, 4 * GRAIN, h2f_task, &j);
      c->fp16_inputs_converted++;
    }
    else
      for (int64_t k = 0; k < v->n; k++) ((int32_t *)v->p)[k] = ((const bool *)t->data)[k] ? 1 : 0;
  }
  for (uint32_t i = 0; i < c->nout; i++)
    if (c->out_direct[i]) c->vals[c->out_root[i]].p = outputs[i].data;
  for (uint32_t i = 0; c->check_finite && i < c->nin; i++) {
    const MilVar *pv = &f->params[c->in_param[i]];
    int64_t at = first_nonfinite(&c->vals[c->in_param[i]]);
    if (at < 0) continue;
    StrBuf sb;
    sb_init(&sb);
    describe_nonfinite(&sb, &c->vals[c->in_param[i]], at);
    diag_error(d, pv->loc, "input '%s' %s", pv->name, sb.data);
    sb_free(&sb);
    ok = false;
  }
  Ctx x = {.c = c, .vals = c->vals, .d = d};
  for (uint32_t si = 0; ok && si < f->nstmts; si++) {
    const MilStmt *s = &f->stmts[si];
    uint8_t fk = c->fz[si].kind;
    if (!c->ops[si] || fk == FZ_ELIDED || fk == FZ_MEMBER || c->fz[si].epi) continue; /* const: prepared; others: fused */
    Val *out = &c->vals[c->base[si]];
    x.s = s;
    x.si = si;
    struct timespec t0;
    if (c->prof) clock_gettime(CLOCK_MONOTONIC, &t0);
    bool fused = fk != FZ_NONE || c->fz[si].self_round; /* rounds what it computes */
    ok = fk == FZ_LINEAR       ? k_fused_linear(&x, &c->fz[si])
         : fk == FZ_GROUP      ? k_group(&x, c->fz[si].end)
         : fk == FZ_XENT_GRAD  ? k_xent_grad(&x, &c->fz[si])
         : fk == FZ_XENT_PICK  ? k_xent_pick(&x, &c->fz[si])
         : fk == FZ_ATTENTION  ? k_attention_fused(&x, &c->fz[si])
                               : c->ops[si]->fn(&x, c->ops[si]->code, out, s->nresults);
    if (ok && !fused && c->mode == CPU_NUMERICS_ANE && c->ops[si]->family != OF_VIEW)
      for (uint32_t k = 0; k < s->nresults; k++)
        if (out[k].dt == MIL_DT_FP16 && out[k].st == ST_F32) par_for(c, out[k].n, 4 * GRAIN, round_task, out[k].p);
    if (c->prof) {
      struct timespec t1;
      clock_gettime(CLOCK_MONOTONIC, &t1);
      CpuStmtTime *e = &c->prof[c->prof_of[si]];
      e->runs++;
      e->ms += (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    }
    /* A view shows its operand's elements, which were checked where they were made. */
    for (uint32_t k = 0; ok && c->check_finite && c->ops[si]->family != OF_VIEW && k < s->nresults; k++) {
      int64_t at = first_nonfinite(&out[k]);
      if (at < 0) continue;
      StrBuf sb;
      sb_init(&sb);
      describe_nonfinite(&sb, &out[k], at);
      ok = op_fail(&x, "result '%s' %s", s->results[k].name, sb.data);
      sb_free(&sb);
    }
  }
  for (uint32_t i = 0; ok && i < c->nout; i++)
    if (!c->out_direct[i]) output_convert(c, &c->vals[c->out_slot[i]], &outputs[i]);
  return ok;
}

/* Programs of one context share its pool and run one at a time: a second
 * thread's run waits for the first to end. */
bool cpu_run_into(CpuProgram *c, const CpuTensor *inputs, const CpuTensor *outputs, Diag *d) {
  pthread_mutex_lock(&c->ctx->run_mu);
  pool_run_begin(&c->ctx->pool);
  bool ok = run_locked(c, inputs, outputs, d);
  pool_run_end(&c->ctx->pool);
  pthread_mutex_unlock(&c->ctx->run_mu);
  return ok;
}

bool cpu_run(CpuProgram *c, const CpuTensor *inputs, CpuTensor *outputs, Diag *d) {
  for (uint32_t i = 0; i < c->nout; i++) {
    const Val *v = &c->vals[c->out_slot[i]];
    outputs[i] = (CpuTensor){.dtype = v->dt, .rank = v->rank};
    memcpy(outputs[i].dims, v->dims, sizeof outputs[i].dims);
    outputs[i].data = alloc_elems(v->n, cpu_dtype_size(v->dt));
  }
  if (cpu_run_into(c, inputs, outputs, d)) return true;
  for (uint32_t i = 0; i < c->nout; i++) cpu_tensor_free(&outputs[i]);
  return false;
}

void cpu_tensor_free(CpuTensor *t) {
  if (!t) return;
  free(t->data);
  memset(t, 0, sizeof *t);
}
