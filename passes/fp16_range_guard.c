/*
 * fp16-range-guard (training, with --fp16-range-guard): fp16 overflows to
 * inf past 65504 and one inf turns a training run into NaN (constraint
 * ANE017). After every fp16 op that can produce large values (exp, pow, div,
 * matmul, linear, conv, reduce_sum) a clip to [-65504, 65504] is inserted,
 * once: a result already clipped like that is left alone.
 */
#include "orion/passes.h"
#include "pass_util.h"

static bool can_overflow(IrOpKind k) {
  switch (k) {
  case OP_EXP: case OP_POW: case OP_DIV: case OP_MATMUL: case OP_LINEAR: case OP_CONV: case OP_REDUCE_SUM:
    return true;
  default:
    return false;
  }
}

static bool already_guarded(IrModule *m, IrValueId v) {
  IrValue *val = ir_value(m, v);
  if (val->nuses != 1 || ir_id_is_none(val->uses[0].op)) return false;
  IrOpId u = val->uses[0].op;
  return ir_op(m, u)->kind == OP_CLIP && ir_attr_float(m, u, "max", 0) <= 65504.0 && ir_attr_float(m, u, "min", 0) >= -65504.0;
}

bool pass_fp16_range_guard(IrModule *m, PassCtx *ctx) {
  if (!ctx->opt || !ctx->opt->fp16_range_guard) return true;
  PASS_FOR_EACH_OP(m, f, op) {
    IrOp *o = ir_op(m, op);
    if (!can_overflow(o->kind) || o->nresults != 1) continue;
    IrValueId r = o->results[0];
    if (ir_value(m, r)->type.dtype != DT_FP16 || already_guarded(m, r)) continue;
    IrOpId anchor = ir_op(m, op)->next; /* the clip goes right after the op */
    const char *name = ir_unique_name(m, f, pass_name(m, r, "guarded"));
    IrOpId clip = ir_op_new(m, f, OP_CLIP, &r, 1, 1, &name, o->loc);
    if (!ir_id_is_none(anchor)) ir_op_move_before(m, clip, anchor);
    ir_op_set_attr_float(m, clip, "min", -65504.0);
    ir_op_set_attr_float(m, clip, "max", 65504.0);
    IrValueId g = ir_op(m, clip)->results[0];
    /* Every use but the clip's own moves to the clipped value. */
    pass_replace_uses_except(m, f, r, g, clip);
    ctx->changed = true;
  }
  return true;
}
