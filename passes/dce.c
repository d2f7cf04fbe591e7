/*
 * dce: dead-code elimination. Ops none of whose results is used (by another
 * op or as a function output) are deleted, then the params and consts nothing
 * uses any more. Walking each function backwards deletes whole dead chains in
 * one run. A dead call goes like any op; a function that was called and has
 * no callers left is deleted whole (with its own calls, so nested callees
 * follow). Entry functions (never called) are programs and always stay.
 */
#include <stdlib.h>

#include "orion/passes.h"
#include "pass_util.h"

static bool op_is_dead(IrModule *m, IrOpId op) {
  IrOp *o = ir_op(m, op);
  for (uint32_t i = 0; i < o->nresults; i++)
    if (ir_value(m, o->results[i])->nuses) return false;
  return true;
}

bool pass_dce(IrModule *m, PassCtx *ctx) {
  bool *was_callee = xcalloc(m->nfuncs, sizeof *was_callee);
  for (IrFuncId f = 1; f < m->nfuncs; f++) was_callee[f] = !m->funcs[f].dead && m->funcs[f].ncallers > 0;
  for (IrFuncId f = 1; f < m->nfuncs; f++) {
    if (m->funcs[f].dead) continue;
    for (IrOpId op = ir_func(m, f)->last, prev; !ir_id_is_none(op); op = prev) {
      prev = ir_op(m, op)->prev;
      if (!op_is_dead(m, op)) continue;
      if (ir_op(m, op)->kind == OP_CALL) ir_func(m, ir_op(m, op)->callee)->ncallers--;
      ir_op_erase(m, op);
      ctx->changed = true;
    }
    if (ir_erase_unused_decls(m, f)) ctx->changed = true;
  }
  /* Deleting a function drops its calls: repeat until no callee is left without callers. */
  for (bool again = true; again;) {
    again = false;
    for (IrFuncId f = 1; f < m->nfuncs; f++)
      if (was_callee[f] && !m->funcs[f].dead && !m->funcs[f].ncallers) {
        pass_delete_func(m, f);
        ctx->changed = again = true;
      }
  }
  free(was_callee);
  return true;
}
