/*
 * fold-layout: chains of layout ops collapse: reshape(reshape(x)) is one
 * reshape, transpose(transpose(x, p), q) is one transpose by the composed
 * permutation (which identity-elim removes when it is the identity). This is
 * what lets lower-linear's layout changes cancel between consecutive layers.
 */
#include "orion/passes.h"
#include "pass_util.h"

bool pass_fold_layout(IrModule *m, PassCtx *ctx) {
  PASS_FOR_EACH_OP(m, f, op) {
    IrOp *o = ir_op(m, op);
    if (o->kind != OP_RESHAPE && o->kind != OP_TRANSPOSE) continue;
    IrValue *in = ir_value(m, o->inputs[0]);
    if (in->kind != VK_RESULT || ir_op(m, in->def)->kind != o->kind) continue;
    IrOpId inner = in->def;
    IrValueId x = ir_op(m, inner)->inputs[0];
    if (o->kind == OP_TRANSPOSE) {
      int64_t p[IR_MAX_RANK], q[IR_MAX_RANK], r[IR_MAX_RANK];
      int n = ir_attr_ints(m, inner, "perm", p, IR_MAX_RANK);
      ir_attr_ints(m, op, "perm", q, IR_MAX_RANK);
      /* out[i] = mid[q[i]] = x[p[q[i]]] */
      for (int i = 0; i < n; i++) {
        int64_t qi = q[i] < 0 ? q[i] + n : q[i];
        r[i] = p[qi] < 0 ? p[qi] + n : p[qi];
      }
      ir_op_set_attr_ints(m, op, "perm", r, (uint32_t)n);
    }
    if (o->kind == OP_RESHAPE) {
      /* The outer shape may say 0 ("copy") or -1 relative to the middle value:
       * spell out the dims it produced before it reads from x instead. */
      const IrType t = ir_value(m, o->results[0])->type;
      ir_op_set_attr_ints(m, op, "shape", t.dims, t.rank);
    }
    ir_op_set_input(m, op, 0, x);
    ctx->changed = true;
  }
  return true;
}
