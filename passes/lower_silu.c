/*
 * lower-silu: silu(x) = x * sigmoid(x), the form ANE-direct programs use.
 */
#include "orion/passes.h"
#include "pass_util.h"

bool pass_lower_silu(IrModule *m, PassCtx *ctx) {
  PASS_FOR_EACH_OP(m, f, op) {
    IrOp *o = ir_op(m, op);
    if (o->kind != OP_SILU) continue;
    IrValueId x = o->inputs[0], out = o->results[0];
    IrValueId s = pass_op1(m, op, OP_SIGMOID, (IrValueId[]){x}, 1, pass_name(m, out, "sigmoid"));
    IrValueId y = pass_op1(m, op, OP_MUL, (IrValueId[]){x, s}, 2, pass_name(m, out, "silu"));
    pass_replace_op(m, op, out, y);
    ctx->changed = true;
  }
  return true;
}
