/*
 * split-conv-bias: conv(x, w, b) becomes add(conv(x, w), reshape(b)) with b
 * reshaped to [1, C, 1...] so that it broadcasts over the spatial dims: the
 * ANE path rejects conv's bias argument (constraint ANE013).
 */
#include "orion/passes.h"
#include "pass_util.h"

bool pass_split_conv_bias(IrModule *m, PassCtx *ctx) {
  PASS_FOR_EACH_OP(m, f, op) {
    IrOp *o = ir_op(m, op);
    if (o->kind != OP_CONV || o->ninputs < 3) continue;
    IrValueId x = o->inputs[0], w = o->inputs[1], b = o->inputs[2], out = o->results[0];
    const IrType x_type = ir_value(m, x)->type, *xt = &x_type; /* a copy: creating ops moves values */
    int64_t shape[IR_MAX_RANK];
    for (int i = 0; i < xt->rank; i++) shape[i] = i == 1 ? ir_value(m, w)->type.dims[0] : 1;
    IrValueId conv = pass_op1(m, op, OP_CONV, (IrValueId[]){x, w}, 2, pass_name(m, out, "nobias"));
    IrOpId nop = ir_value(m, conv)->def;
    for (uint32_t i = 0; i < ir_op(m, op)->nattrs; i++)
      ir_op_set_attr(m, nop, ir_op(m, op)->attrs[i].name, &ir_op(m, op)->attrs[i].val, ir_op(m, op)->attrs[i].loc);
    pass_reinfer(m, nop);
    IrValueId rb = pass_op1(m, op, OP_RESHAPE, (IrValueId[]){b}, 1, pass_name(m, out, "bias"));
    pass_set_ints(m, rb, "shape", shape, (uint32_t)xt->rank);
    IrValueId y = pass_op1(m, op, OP_ADD, (IrValueId[]){conv, rb}, 2, pass_name(m, out, "biased"));
    pass_replace_op(m, op, out, y);
    ctx->changed = true;
  }
  return true;
}
