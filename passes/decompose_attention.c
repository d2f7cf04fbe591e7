/*
 * decompose-attention: sdpa(q, k, v[, mask], causal, scale) becomes
 *   matmul(q, k, transpose_y) -> mul(scale) -> add(mask) -> softmax(-1) -> matmul(., v)
 * The ANE ignores the mask of its fused attention op and older targets have
 * none, so attention always reaches MIL in this form. A causal flag becomes a
 * const additive mask [L, S]: 0 where key j <= i + (S - L), else -65504 (the
 * most negative fp16, finite so that a row never turns into NaN). A bool
 * mask becomes select(mask, 0, -65504).
 */
#include <math.h>
#include <stdlib.h>

#include "orion/passes.h"
#include "pass_util.h"

#define MASKED (-65504.0)

static void decompose(IrModule *m, IrOpId op) {
  IrOp *o = ir_op(m, op);
  IrFuncId f = o->func;
  SrcSpan loc = o->loc;
  IrValueId q = o->inputs[0], k = o->inputs[1], v = o->inputs[2], mask = o->ninputs > 3 ? o->inputs[3] : IR_NO_VALUE;
  IrValueId out = o->results[0];
  IrType qt = ir_value(m, q)->type;
  int r = qt.rank;
  int64_t L = qt.dims[r - 2], E = qt.dims[r - 1], S = ir_value(m, k)->type.dims[r - 2];
  double scale = ir_attr_float(m, op, "scale", 1.0 / sqrt((double)E));
  bool causal = ir_attr_bool(m, op, "causal", false);
  IrDType dt = qt.dtype;

  IrValueId in2[2] = {q, k};
  IrOpId mm = IR_NO_OP;
  {
    const char *name = ir_unique_name(m, f, pass_name(m, out, "scores"));
    mm = ir_op_new(m, f, OP_MATMUL, in2, 2, 1, &name, loc);
    ir_op_move_before(m, mm, op);
    ir_op_set_attr_bool(m, mm, "transpose_y", true);
    pass_reinfer(m, mm);
  }
  IrValueId x = ir_op(m, mm)->results[0];
  IrValueId sc = pass_scalar_const(m, f, pass_name(m, out, "scale"), dt, scale, loc);
  x = pass_op1(m, op, OP_MUL, (IrValueId[]){x, sc}, 2, pass_name(m, out, "scaled"));
  if (!ir_id_is_none(mask)) {
    if (ir_value(m, mask)->type.dtype == DT_BOOL) {
      IrValueId zero = pass_scalar_const(m, f, pass_name(m, out, "keep"), dt, 0.0, loc);
      IrValueId neg = pass_scalar_const(m, f, pass_name(m, out, "masked"), dt, MASKED, loc);
      mask = pass_op1(m, op, OP_SELECT, (IrValueId[]){mask, zero, neg}, 3, pass_name(m, out, "bias"));
    }
    x = pass_op1(m, op, OP_ADD, (IrValueId[]){x, mask}, 2, pass_name(m, out, "masked_scores"));
  }
  if (causal) {
    double *data = xmalloc(sizeof *data * (size_t)(L * S));
    for (int64_t i = 0; i < L; i++)
      for (int64_t j = 0; j < S; j++) data[i * S + j] = j <= i + (S - L) ? 0.0 : MASKED;
    IrType mt = {.dtype = dt, .rank = 2, .dims = {L, S}};
    IrValueId cm = pass_const(m, f, pass_name(m, out, "causal_mask"), &mt, data, (uint64_t)(L * S), loc);
    free(data);
    x = pass_op1(m, op, OP_ADD, (IrValueId[]){x, cm}, 2, pass_name(m, out, "causal_scores"));
  }
  IrValueId p = pass_op1(m, op, OP_SOFTMAX, (IrValueId[]){x}, 1, pass_name(m, out, "probs"));
  pass_set_int(m, p, "axis", -1);
  IrValueId y = pass_op1(m, op, OP_MATMUL, (IrValueId[]){p, v}, 2, pass_name(m, out, "attn"));
  pass_replace_op(m, op, out, y);
}

bool pass_decompose_attention(IrModule *m, PassCtx *ctx) {
  for (IrFuncId f = 1; f < m->nfuncs; f++) {
    if (m->funcs[f].dead) continue;
    for (IrOpId op = ir_func(m, f)->first, next; !ir_id_is_none(op); op = next) {
      next = ir_op(m, op)->next;
      if (ir_op(m, op)->kind == OP_SDPA) {
        decompose(m, op);
        ctx->changed = true;
      }
    }
  }
  return true;
}
