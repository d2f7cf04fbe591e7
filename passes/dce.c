/*
 * dce: dead-code elimination. Ops none of whose results is used (by another
 * op or as a function output) are deleted, then the params and consts nothing
 * uses any more. Walking each function backwards deletes whole dead chains in
 * one run. Functions are programs (entries) and are never deleted here;
 * callees disappear with inlining.
 */
#include "orion/passes.h"
#include "pass_util.h"

static bool op_is_dead(IrModule *m, IrOpId op) {
  IrOp *o = ir_op(m, op);
  for (uint32_t i = 0; i < o->nresults; i++)
    if (ir_value(m, o->results[i])->nuses) return false;
  return true;
}

bool pass_dce(IrModule *m, PassCtx *ctx) {
  for (IrFuncId f = 1; f < m->nfuncs; f++) {
    if (m->funcs[f].dead) continue;
    for (IrOpId op = ir_func(m, f)->last, prev; op; op = prev) {
      prev = ir_op(m, op)->prev;
      if (!op_is_dead(m, op)) continue;
      ir_op_erase(m, op);
      ctx->changed = true;
    }
    for (uint32_t i = ir_func(m, f)->ndecls; i-- > 0;) {
      IrValueId v = ir_func(m, f)->decls[i];
      if (ir_value(m, v)->nuses) continue;
      ir_decl_erase(m, v);
      ctx->changed = true;
    }
  }
  return true;
}
