/*
 * lower-neg: MIL has no negation op; neg(x) becomes mul(x, -1).
 */
#include "orion/passes.h"
#include "pass_util.h"

bool pass_lower_neg(IrModule *m, PassCtx *ctx) {
  for (IrFuncId f = 1; f < m->nfuncs; f++) {
    if (m->funcs[f].dead) continue;
    for (IrOpId op = ir_func(m, f)->first, next; !ir_id_is_none(op); op = next) {
      next = ir_op(m, op)->next;
      if (ir_op(m, op)->kind != OP_NEG) continue;
      IrValueId x = ir_op(m, op)->inputs[0], out = ir_op(m, op)->results[0];
      IrValueId c = pass_scalar_const(m, f, pass_name(m, out, "minus_one"), ir_value(m, x)->type.dtype, -1.0,
                                      ir_op(m, op)->loc);
      IrValueId y = pass_op1(m, op, OP_MUL, (IrValueId[]){x, c}, 2, pass_name(m, out, "neg"));
      pass_replace_op(m, op, out, y);
      ctx->changed = true;
    }
  }
  return true;
}
