/*
 * gelu-tanh: the ANE compiler rejects gelu, so both modes become the tanh
 * approximation written with ops it has:
 *   0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
 * x^3 is x*x*x rather than pow(x, 3), which is NaN for negative x on some
 * implementations. For exact gelu this is an approximation (|error| < 5e-4).
 */
#include "orion/passes.h"
#include "pass_util.h"

bool pass_gelu_tanh(IrModule *m, PassCtx *ctx) {
  PASS_FOR_EACH_OP(m, f, op) {
    IrOp *o = ir_op(m, op);
    if (o->kind != OP_GELU) continue;
    IrValueId x = o->inputs[0], out = o->results[0];
    IrDType dt = ir_value(m, x)->type.dtype;
    SrcSpan loc = o->loc;
    IrValueId c_half = pass_scalar_const(m, f, pass_name(m, out, "half"), dt, 0.5, loc);
    IrValueId c_one = pass_scalar_const(m, f, pass_name(m, out, "one"), dt, 1.0, loc);
    IrValueId c_k = pass_scalar_const(m, f, pass_name(m, out, "k"), dt, 0.044715, loc);
    IrValueId c_s = pass_scalar_const(m, f, pass_name(m, out, "sqrt_2_over_pi"), dt, 0.79788456080286535588 /* sqrt(2 / pi) */, loc);
    IrValueId x2 = pass_op1(m, op, OP_MUL, (IrValueId[]){x, x}, 2, pass_name(m, out, "x2"));
    IrValueId x3 = pass_op1(m, op, OP_MUL, (IrValueId[]){x2, x}, 2, pass_name(m, out, "x3"));
    IrValueId kx3 = pass_op1(m, op, OP_MUL, (IrValueId[]){x3, c_k}, 2, pass_name(m, out, "kx3"));
    IrValueId inner = pass_op1(m, op, OP_ADD, (IrValueId[]){x, kx3}, 2, pass_name(m, out, "inner"));
    IrValueId scaled = pass_op1(m, op, OP_MUL, (IrValueId[]){inner, c_s}, 2, pass_name(m, out, "scaled"));
    IrValueId th = pass_op1(m, op, OP_TANH, (IrValueId[]){scaled}, 1, pass_name(m, out, "tanh"));
    IrValueId onep = pass_op1(m, op, OP_ADD, (IrValueId[]){th, c_one}, 2, pass_name(m, out, "one_plus"));
    IrValueId hx = pass_op1(m, op, OP_MUL, (IrValueId[]){x, c_half}, 2, pass_name(m, out, "half_x"));
    IrValueId y = pass_op1(m, op, OP_MUL, (IrValueId[]){hx, onep}, 2, pass_name(m, out, "gelu"));
    pass_replace_op(m, op, out, y);
    ctx->changed = true;
  }
  return true;
}
