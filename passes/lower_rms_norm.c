/*
 * lower-rms-norm: MIL has no RMS norm op, so
 *   rms_norm(x, gamma, axes, eps) = x * rsqrt(mean(x*x over axes) + eps) * gamma
 * as the ANE-direct programs write it. gamma has the normalized dims' shape;
 * it is reshaped to broadcast against x (1 everywhere else).
 */
#include "orion/passes.h"
#include "pass_util.h"

static void lower(IrModule *m, IrOpId op) {
  IrOp *o = ir_op(m, op);
  IrFuncId f = o->func;
  SrcSpan loc = o->loc;
  IrValueId x = o->inputs[0], gamma = o->ninputs > 1 ? o->inputs[1] : IR_NO_VALUE, out = o->results[0];
  IrType xt = ir_value(m, x)->type;
  int64_t axes[IR_MAX_RANK];
  int n = ir_attr_ints(m, op, "axes", axes, IR_MAX_RANK);
  if (n < 0) {
    n = 1;
    axes[0] = -1;
  }
  for (int i = 0; i < n; i++)
    if (axes[i] < 0) axes[i] += xt.rank;
  double eps = ir_attr_float(m, op, "epsilon", 1e-5);

  IrValueId sq = pass_op1(m, op, OP_MUL, (IrValueId[]){x, x}, 2, pass_name(m, out, "sq"));
  IrValueId mean = pass_op1(m, op, OP_REDUCE_MEAN, (IrValueId[]){sq}, 1, pass_name(m, out, "ms"));
  pass_set_ints(m, mean, "axes", axes, (uint32_t)n);
  pass_set_bool(m, mean, "keep_dims", true);
  IrValueId e = pass_scalar_const(m, f, pass_name(m, out, "eps"), xt.dtype, eps, loc);
  IrValueId sum = pass_op1(m, op, OP_ADD, (IrValueId[]){mean, e}, 2, pass_name(m, out, "ms_eps"));
  IrValueId inv = pass_op1(m, op, OP_RSQRT, (IrValueId[]){sum}, 1, pass_name(m, out, "inv_rms"));
  IrValueId y = pass_op1(m, op, OP_MUL, (IrValueId[]){x, inv}, 2, pass_name(m, out, "normed"));
  if (!ir_id_is_none(gamma)) {
    /* gamma is laid out in the order `axes` lists them; broadcasting needs
     * x's order, so unsorted axes first transpose gamma. */
    int64_t order[IR_MAX_RANK];
    bool sorted = true;
    for (int i = 0; i < n; i++) {
      order[i] = 0;
      for (int j = 0; j < n; j++) order[i] += axes[j] < axes[i];
    }
    for (int i = 0; i + 1 < n; i++) sorted &= axes[i] < axes[i + 1];
    if (!sorted) {
      int64_t perm[IR_MAX_RANK];
      for (int i = 0; i < n; i++) perm[order[i]] = i; /* output position order[i] takes gamma dim i */
      gamma = pass_op1(m, op, OP_TRANSPOSE, (IrValueId[]){gamma}, 1, pass_name(m, out, "gamma_t"));
      pass_set_ints(m, gamma, "perm", perm, (uint32_t)n);
    }
    int64_t shape[IR_MAX_RANK];
    for (int i = 0; i < xt.rank; i++) {
      shape[i] = 1;
      for (int j = 0; j < n; j++)
        if (axes[j] == i) shape[i] = xt.dims[i];
    }
    IrValueId g = pass_op1(m, op, OP_RESHAPE, (IrValueId[]){gamma}, 1, pass_name(m, out, "gamma"));
    pass_set_ints(m, g, "shape", shape, xt.rank);
    y = pass_op1(m, op, OP_MUL, (IrValueId[]){y, g}, 2, pass_name(m, out, "scaled"));
  }
  pass_replace_op(m, op, out, y);
}

bool pass_lower_rms_norm(IrModule *m, PassCtx *ctx) {
  for (IrFuncId f = 1; f < m->nfuncs; f++) {
    if (m->funcs[f].dead) continue;
    for (IrOpId op = ir_func(m, f)->first, next; !ir_id_is_none(op); op = next) {
      next = ir_op(m, op)->next;
      if (ir_op(m, op)->kind == OP_RMS_NORM) {
        lower(m, op);
        ctx->changed = true;
      }
    }
  }
  return true;
}
