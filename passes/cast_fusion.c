/*
 * cast-fusion: casts that change nothing or undo each other go away.
 *  - cast(cast(x, A), B) where A holds every value of x's dtype exactly
 *    (fp16 -> fp32, int8/uint8 -> int32, ...) becomes cast(x, B), and just x
 *    when B is x's dtype (a round trip);
 *  - a cast of a const becomes a const of the target dtype, converted the way
 *    the cast would (floats rounded, float -> int truncated, -> bool is != 0),
 *    unless some value has no result (NaN or out of range into an integer).
 * A cast to the same dtype is left to identity-elim.
 */
#include <stdlib.h>

#include "orion/op_semantics.h"
#include "orion/passes.h"
#include "pass_util.h"

/* Whether dtype `wide` represents every value of `narrow` exactly. */
static bool lossless(IrDType narrow, IrDType wide) {
  if (narrow == wide) return true;
  switch (narrow) {
  case DT_FP16: return wide == DT_FP32;
  case DT_INT8: case DT_UINT8: return wide == DT_INT32 || wide == DT_FP16 || wide == DT_FP32;
  case DT_BOOL: return true;
  case DT_INT32: return false; /* fp32 has 24 bits of mantissa */
  default: return false;
  }
}

/* The range of an integer dtype a cast may produce; false for others. */
static bool int_range(IrDType t, double *lo, double *hi) {
  switch (t) {
  case DT_INT32: *lo = -2147483648.0, *hi = 2147483647.0; return true;
  case DT_INT8: *lo = -128, *hi = 127; return true;
  case DT_UINT8: *lo = 0, *hi = 255; return true;
  default: return false;
  }
}

/* Largest const a cast is folded into (bigger ones stay casts). */
#define MAX_FOLD_ELEMENTS (1u << 16)

static bool fold_const(IrModule *m, IrOpId op) {
  IrOp *o = ir_op(m, op);
  IrValueId x = o->inputs[0], r = o->results[0];
  IrValue *xv = ir_value(m, x);
  if (xv->kind != VK_CONST || xv->ndata > MAX_FOLD_ELEMENTS) return false;
  IrType t = ir_value(m, r)->type;
  uint64_t n = xv->ndata;
  /* A cast with no result (NaN or out of range into an integer type) stays,
   * to be reported where it runs, as the backends do. */
  double lo, hi;
  if (int_range(t.dtype, &lo, &hi))
    for (uint64_t i = 0; i < n; i++)
      if (!op_sem_cast_int_defined(pass_const_value(xv->data[i], xv->type.dtype), lo, hi)) return false;
  double *data = xmalloc(sizeof *data * (size_t)n);
  for (uint64_t i = 0; i < n; i++) data[i] = pass_round_to_dtype(pass_const_value(xv->data[i], xv->type.dtype), t.dtype);
  IrValueId c = pass_const(m, o->func, pass_name(m, r, "const"), &t, data, n, o->loc);
  free(data);
  pass_replace_op(m, op, r, c);
  return true;
}

bool pass_cast_fusion(IrModule *m, PassCtx *ctx) {
  PASS_FOR_EACH_OP(m, f, op) {
    IrOp *o = ir_op(m, op);
    if (o->kind != OP_CAST) continue;
    if (fold_const(m, op)) {
      ctx->changed = true;
      continue;
    }
    IrValueId mid = o->inputs[0];
    IrValue *mv = ir_value(m, mid);
    if (mv->kind != VK_RESULT || ir_op(m, mv->def)->kind != OP_CAST) continue;
    IrValueId x = ir_op(m, mv->def)->inputs[0];
    IrDType from = ir_value(m, x)->type.dtype, via = mv->type.dtype, to = ir_value(m, o->results[0])->type.dtype;
    if (!lossless(from, via)) continue;
    if (to == from) {
      ir_replace_all_uses(m, o->results[0], x);
      ir_op_erase(m, op);
    } else {
      ir_op_set_input(m, op, 0, x); /* skip the intermediate cast; dce removes it if unused */
    }
    ctx->changed = true;
  }
  return true;
}
