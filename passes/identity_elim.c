/*
 * identity-elim: identity(x) is replaced by x, and so are the no-op forms of
 * other ops: reshape to the same shape, transpose by the identity
 * permutation, cast to the same dtype, mul by a const 1, add/sub of a const 0
 * (when the result keeps x's shape, i.e. the const does not broadcast it).
 * The one change of bits: an x of -0 stays -0 where -0 + +0 gives +0
 * (docs/numerics.md, "Rewrites that do not keep bits").
 */
#include "orion/passes.h"
#include "pass_util.h"

static bool same_type(IrModule *m, IrValueId a, IrValueId b) {
  return ir_type_equal(&ir_value(m, a)->type, &ir_value(m, b)->type);
}

/* The operand an op passes through unchanged, or 0. */
static IrValueId passthrough(IrModule *m, IrOpId op) {
  IrOp *o = ir_op(m, op);
  IrValueId x = o->ninputs ? o->inputs[0] : IR_NO_VALUE, r = o->nresults == 1 ? o->results[0] : IR_NO_VALUE;
  switch (o->kind) {
  case OP_IDENTITY: return x;
  case OP_RESHAPE:
  case OP_CAST:
  case OP_SLICE: /* a slice with the operand's type takes all of it (strides of 1 are implied by the size) */
    return same_type(m, x, r) ? x : IR_NO_VALUE;
  case OP_TRANSPOSE: {
    int64_t perm[IR_MAX_RANK];
    int n = ir_attr_ints(m, op, "perm", perm, IR_MAX_RANK);
    for (int i = 0; i < n; i++)
      if (perm[i] != i && perm[i] != i - n) return IR_NO_VALUE;
    return x;
  }
  case OP_MUL:
    if (pass_is_const_splat(m, o->inputs[1], 1.0) && same_type(m, x, r)) return x;
    if (pass_is_const_splat(m, x, 1.0) && same_type(m, o->inputs[1], r)) return o->inputs[1];
    return IR_NO_VALUE;
  case OP_ADD:
    if (pass_is_const_splat(m, o->inputs[1], 0.0) && same_type(m, x, r)) return x;
    if (pass_is_const_splat(m, x, 0.0) && same_type(m, o->inputs[1], r)) return o->inputs[1];
    return IR_NO_VALUE;
  case OP_SUB: return pass_is_const_splat(m, o->inputs[1], 0.0) && same_type(m, x, r) ? x : IR_NO_VALUE;
  default: return IR_NO_VALUE;
  }
}

bool pass_identity_elim(IrModule *m, PassCtx *ctx) {
  PASS_FOR_EACH_OP(m, f, op) {
    IrValueId x = passthrough(m, op);
    if (ir_id_is_none(x)) continue;
    ir_replace_all_uses(m, ir_op(m, op)->results[0], x);
    ir_op_erase(m, op);
    ctx->changed = true;
  }
  return true;
}
