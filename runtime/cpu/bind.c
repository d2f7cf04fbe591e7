/*
 * Binding: every statement whose op has a binder gets its arguments decoded
 * and checked once, at prepare, into the job its kernel runs (and every
 * fused group its job, from its members'); the run loop then looks nothing
 * up and checks no shape. Settings (scalar, string and list arguments) must
 * be constants, so weight updates that change one bind again.
 */
#include "cpu_internal.h"

#include <stdlib.h>

void bound_free(CpuProgram *c) {
  for (uint32_t si = 0; c->bound && si < c->f->nstmts; si++) {
    free(c->bound[si]);
    c->bound[si] = NULL;
  }
  for (uint32_t si = 0; c->fz && si < c->f->nstmts; si++) {
    free(c->fz[si].group);
    c->fz[si].group = NULL;
  }
}

bool bind_all(CpuProgram *c, Diag *d) {
  const MilFunc *f = c->f;
  bound_free(c);
  if (!c->bound) c->bound = xcalloc(f->nstmts + 1, sizeof *c->bound);
  if (!c->setting) c->setting = xcalloc(c->nslots + 1, sizeof *c->setting);
  Ctx x = {.c = c, .vals = c->vals, .d = d, .binding = true, .setting = c->setting,
           .gemm_pack_floats = &c->gemm_pack_floats, .amxmm = &c->amxmm};
  /* Views show their sources' storage (an fp16 weight's too), as they will when they run. */
  for (uint32_t si = 0; si < f->nstmts; si++)
    if (c->ops[si] && c->ops[si]->family == OF_VIEW) c->vals[c->base[si]].st = c->vals[c->slots[c->base[si]].src].st;
  bool ok = true;
  for (uint32_t si = 0; si < f->nstmts; si++) {
    const OpEntry *e = c->ops[si];
    if (!e || !e->bind) continue;
    x.s = &f->stmts[si];
    x.si = si;
    /* The binder first: some report a missing argument in their own words ("needs both alpha and beta");
     * then the table, for any required argument the binder had a default for. */
    bool bound = e->bind(&x, e->code, &c->vals[c->base[si]], x.s->nresults, &c->bound[si]);
    ok = bound && mil_op_check_required(c->mil[si], x.s, d) && ok;
  }
  for (uint32_t si = 0; ok && si < f->nstmts; si++) {
    x.s = &f->stmts[si];
    x.si = si;
    /* An unfused element-wise op rounds its fp16 result itself (ANE mode): run.c's pass is not needed. */
    const OpEntry *e = c->ops[si];
    c->fz[si].self_round = c->fz[si].kind == FZ_NONE && e && c->bound[si] &&
                           ((e->family == OF_UNARY && e->bind == bind_unary && ((const UnaryJob *)c->bound[si])->round16) ||
                            (e->family == OF_BINARY && e->bind == bind_binary && ((const BinJob *)c->bound[si])->round16));
    if (c->fz[si].kind == FZ_GROUP) ok = bind_group(&x, si, c->fz[si].end, &c->fz[si].group);
    if (c->fz[si].kind == FZ_LINEAR) { /* the conv's own job gives way to the fused one */
      free(c->bound[si]);
      c->bound[si] = NULL;
      ok = bind_fused_linear(&x, &c->fz[si], &c->bound[si]);
    }
    if (c->fz[si].kind == FZ_ATTENTION) { /* and the head merge's */
      free(c->bound[si]);
      c->bound[si] = NULL;
      ok = bind_attention_fused(&x, &c->fz[si], &c->bound[si]);
    }
    if (c->fz[si].kind == FZ_XENT_GRAD) { /* so does the chain's last statement's */
      free(c->bound[si]);
      c->bound[si] = NULL;
      ok = bind_xent_grad(&x, &c->fz[si], &c->bound[si]);
    }
  }
  c->bound_ok = ok;
  return ok;
}
