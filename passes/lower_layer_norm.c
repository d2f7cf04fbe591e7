/*
 * lower-layer-norm: layer_norm(x, gamma, beta, axes, eps) becomes
 *   d = x - mean(x); y = d * rsqrt(mean(d*d) + eps) * gamma + beta
 * over `axes`, as the Orion reference writes it: the ANE compiler has been
 * reported to reject MIL's layer_norm for wide rows (D >= 1024, GPT-2
 * medium), and these ops are ones it runs. gamma and beta have the
 * normalized dims' shape in the order `axes` lists them; they are
 * transposed to x's order if needed and reshaped to broadcast.
 */
#include "orion/passes.h"
#include "pass_util.h"

/* gamma/beta [x.dims[axes]...] -> broadcastable [1.., d, 1..] in x's axis order. */
static IrValueId to_broadcast(IrModule *m, IrOpId op, IrValueId v, const IrType *xt, const int64_t *axes, int n,
                              const char *base) {
  int64_t order[IR_MAX_RANK];
  bool sorted = true;
  for (int i = 0; i < n; i++) {
    order[i] = 0;
    for (int j = 0; j < n; j++) order[i] += axes[j] < axes[i];
  }
  for (int i = 0; i + 1 < n; i++) sorted &= axes[i] < axes[i + 1];
  IrValueId out = ir_op(m, op)->results[0];
  if (!sorted) {
    int64_t perm[IR_MAX_RANK];
    for (int i = 0; i < n; i++) perm[order[i]] = i;
    v = pass_op1(m, op, OP_TRANSPOSE, (IrValueId[]){v}, 1, pass_name(m, out, arena_printf(&m->arena, "%s_t", base)));
    pass_set_ints(m, v, "perm", perm, (uint32_t)n);
  }
  int64_t shape[IR_MAX_RANK];
  for (int i = 0; i < xt->rank; i++) {
    shape[i] = 1;
    for (int j = 0; j < n; j++)
      if (axes[j] == i) shape[i] = xt->dims[i];
  }
  IrValueId r = pass_op1(m, op, OP_RESHAPE, (IrValueId[]){v}, 1, pass_name(m, out, base));
  pass_set_ints(m, r, "shape", shape, (uint32_t)xt->rank);
  return r;
}

static void lower(IrModule *m, IrOpId op) {
  IrOp *o = ir_op(m, op);
  IrFuncId f = o->func;
  SrcSpan loc = o->loc;
  /* o dangles once ops are created below: read everything first. */
  IrValueId x = o->inputs[0], gamma = o->ninputs > 1 ? o->inputs[1] : IR_NO_VALUE,
            beta = o->ninputs > 2 ? o->inputs[2] : IR_NO_VALUE;
  IrValueId out = o->results[0];
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

  IrValueId mean = pass_op1(m, op, OP_REDUCE_MEAN, (IrValueId[]){x}, 1, pass_name(m, out, "mean"));
  pass_set_ints(m, mean, "axes", axes, (uint32_t)n);
  pass_set_bool(m, mean, "keep_dims", true);
  IrValueId d = pass_op1(m, op, OP_SUB, (IrValueId[]){x, mean}, 2, pass_name(m, out, "centered"));
  IrValueId sq = pass_op1(m, op, OP_MUL, (IrValueId[]){d, d}, 2, pass_name(m, out, "sq"));
  IrValueId var = pass_op1(m, op, OP_REDUCE_MEAN, (IrValueId[]){sq}, 1, pass_name(m, out, "var"));
  pass_set_ints(m, var, "axes", axes, (uint32_t)n);
  pass_set_bool(m, var, "keep_dims", true);
  IrValueId e = pass_scalar_const(m, f, pass_name(m, out, "eps"), xt.dtype, eps, loc);
  IrValueId ve = pass_op1(m, op, OP_ADD, (IrValueId[]){var, e}, 2, pass_name(m, out, "var_eps"));
  IrValueId inv = pass_op1(m, op, OP_RSQRT, (IrValueId[]){ve}, 1, pass_name(m, out, "inv_std"));
  IrValueId y = pass_op1(m, op, OP_MUL, (IrValueId[]){d, inv}, 2, pass_name(m, out, "normed"));
  if (!ir_id_is_none(gamma)) {
    IrValueId g = to_broadcast(m, op, gamma, &xt, axes, n, "gamma");
    y = pass_op1(m, op, OP_MUL, (IrValueId[]){y, g}, 2, pass_name(m, out, "scaled"));
  }
  if (!ir_id_is_none(beta)) {
    IrValueId b = to_broadcast(m, op, beta, &xt, axes, n, "beta");
    y = pass_op1(m, op, OP_ADD, (IrValueId[]){y, b}, 2, pass_name(m, out, "shifted"));
  }
  pass_replace_op(m, op, out, y);
}

bool pass_lower_layer_norm(IrModule *m, PassCtx *ctx) {
  PASS_FOR_EACH_OP(m, f, op) {
    if (ir_op(m, op)->kind != OP_LAYER_NORM) continue;
    lower(m, op);
    ctx->changed = true;
  }
  return true;
}
