/*
 * The gradient rule table, one row per op of include/orion/ops.def (indexed
 * by IrOpKind), and the element-wise rules. Shape ops and reductions are in
 * grad_rules_shape.c, the layers (matmul, linear, conv, norms, softmax,
 * attention, gather) in grad_rules_nn.c. test_autodiff_rules checks that every
 * op has a row, so adding an op to ops.def means adding its rule (or an
 * explicit "not differentiable" row) here. See docs/training.md.
 *
 * Each rule reads the adjoint g of the result and gives each operand that
 * needs one its gradient, in the forward value's dtype; broadcasting is
 * undone with ad_unbroadcast.
 */
#include <math.h>
#include <string.h>

#include "autodiff_internal.h"

#define PI 3.14159265358979323846

#define RULE(kind, family, fn) [OP_##kind] = {family, fn}
#define NOT_DIFFERENTIABLE(kind, family) [OP_##kind] = {family, NULL}

static const GradRule rules[OP_COUNT] = {
    RULE(CONV, "conv", grad_conv),
    RULE(LINEAR, "linear", grad_linear),
    RULE(MATMUL, "matmul", grad_matmul),
    RULE(ADD, "add/sub", grad_add_sub),
    RULE(SUB, "add/sub", grad_add_sub),
    RULE(MUL, "mul", grad_mul),
    RULE(DIV, "div", grad_div),
    RULE(POW, "pow", grad_pow),
    RULE(MAXIMUM, "maximum/minimum", grad_max_min),
    RULE(MINIMUM, "maximum/minimum", grad_max_min),
    RULE(RELU, "unary", grad_unary),
    RULE(TANH, "unary", grad_unary),
    RULE(SIGMOID, "unary", grad_unary),
    RULE(SILU, "unary", grad_unary),
    RULE(GELU, "gelu", grad_gelu),
    RULE(EXP, "unary", grad_unary),
    RULE(LOG, "unary", grad_unary),
    RULE(SQRT, "unary", grad_unary),
    RULE(RSQRT, "unary", grad_unary),
    RULE(NEG, "unary", grad_unary),
    RULE(ABS, "unary", grad_unary),
    RULE(SOFTMAX, "softmax", grad_softmax),
    RULE(REDUCE_SUM, "reduce", grad_reduce),
    RULE(REDUCE_MEAN, "reduce", grad_reduce),
    RULE(REDUCE_MAX, "reduce", grad_reduce),
    RULE(RESHAPE, "reshape", grad_reshape),
    RULE(TRANSPOSE, "transpose", grad_transpose),
    RULE(SLICE, "slice", grad_slice),
    RULE(SPLIT, "split", grad_split),
    RULE(CONCAT, "concat", grad_concat),
    RULE(CAST, "cast", grad_cast),
    RULE(LAYER_NORM, "layer_norm", grad_layer_norm),
    RULE(RMS_NORM, "rms_norm", grad_rms_norm),
    RULE(CLIP, "clip", grad_clip),
    RULE(SELECT, "select", grad_select),
    RULE(GATHER, "gather", grad_gather),
    RULE(SDPA, "sdpa", grad_sdpa),
    RULE(IDENTITY, "identity", grad_identity),
    RULE(CROSS_ENTROPY, "cross_entropy", grad_cross_entropy),
    NOT_DIFFERENTIABLE(CALL, "call (inline first)"),
};

const GradRule *grad_rule(IrOpKind k) { return &rules[k]; }

const char *ad_rule_family(IrOpKind k, bool *differentiable) {
  *differentiable = rules[k].fn != NULL;
  return rules[k].family;
}

/* ---- element-wise binary ---- */

bool grad_add_sub(AdCtx *c) {
  IrValueId g = ad_gy(c, 0);
  IrType a = ad_in_type(c, 0), b = ad_in_type(c, 1);
  if (ad_needs(c, 0)) ad_give(c, 0, ad_unbroadcast(c, g, &a));
  if (ad_needs(c, 1))
    ad_give(c, 1, ad_unbroadcast(c, ir_op(ad_module(c), ad_op(c))->kind == OP_SUB ? ad_op1(c, OP_NEG, g) : g, &b));
  return true;
}

bool grad_mul(AdCtx *c) {
  IrValueId g = ad_gy(c, 0);
  IrType a = ad_in_type(c, 0), b = ad_in_type(c, 1);
  if (ad_needs(c, 0)) ad_give(c, 0, ad_unbroadcast(c, ad_op2(c, OP_MUL, g, ad_x(c, 1)), &a));
  if (ad_needs(c, 1)) ad_give(c, 1, ad_unbroadcast(c, ad_op2(c, OP_MUL, g, ad_x(c, 0)), &b));
  return true;
}

/* z = x / y: dx = g / y, dy = -g z / y. */
bool grad_div(AdCtx *c) {
  IrValueId g = ad_gy(c, 0);
  IrType a = ad_in_type(c, 0), b = ad_in_type(c, 1);
  if (ad_needs(c, 0)) ad_give(c, 0, ad_unbroadcast(c, ad_op2(c, OP_DIV, g, ad_x(c, 1)), &a));
  if (ad_needs(c, 1)) {
    IrValueId t = ad_op2(c, OP_DIV, ad_op2(c, OP_MUL, g, ad_y(c, 0)), ad_x(c, 1));
    ad_give(c, 1, ad_unbroadcast(c, ad_op1(c, OP_NEG, t), &b));
  }
  return true;
}

/* z = x^y: dx = g y x^(y-1), dy = g z log(x). */
bool grad_pow(AdCtx *c) {
  IrValueId g = ad_gy(c, 0);
  IrType a = ad_in_type(c, 0), b = ad_in_type(c, 1);
  if (ad_needs(c, 0)) {
    IrValueId y = ad_x(c, 1);
    IrValueId ym1 = ad_op2(c, OP_SUB, y, ad_scalar(c, b.dtype, 1.0));
    IrValueId d = ad_op2(c, OP_MUL, ad_op2(c, OP_MUL, g, y), ad_op2(c, OP_POW, ad_x(c, 0), ym1));
    ad_give(c, 0, ad_unbroadcast(c, d, &a));
  }
  if (ad_needs(c, 1)) {
    IrValueId d = ad_op2(c, OP_MUL, ad_op2(c, OP_MUL, g, ad_y(c, 0)), ad_op1(c, OP_LOG, ad_x(c, 0)));
    ad_give(c, 1, ad_unbroadcast(c, d, &b));
  }
  return true;
}

/* The result equals x where x won (ties go to x); y gets the rest. The IR
 * has no comparison, so "z == x" is "z - x is not non-zero". */
bool grad_max_min(AdCtx *c) {
  IrValueId g = ad_gy(c, 0);
  IrType a = ad_in_type(c, 0), b = ad_in_type(c, 1), z = ad_res_type(c, 0);
  IrValueId x_lost = ad_nonzero(c, ad_op2(c, OP_SUB, ad_y(c, 0), ad_x(c, 0)));
  IrValueId zero = ad_scalar(c, z.dtype, 0.0);
  if (ad_needs(c, 0)) ad_give(c, 0, ad_unbroadcast(c, ad_select(c, x_lost, zero, g), &a));
  if (ad_needs(c, 1)) ad_give(c, 1, ad_unbroadcast(c, ad_select(c, x_lost, g, zero), &b));
  return true;
}

/* ---- element-wise unary ---- */

bool grad_unary(AdCtx *c) {
  IrModule *m = ad_module(c);
  IrOpKind k = ir_op(m, ad_op(c))->kind;
  IrValueId g = ad_gy(c, 0);
  IrDType dt = ad_in_type(c, 0).dtype;
  IrValueId d = IR_NO_VALUE;
  switch (k) {
  case OP_RELU: /* g where the result is non-zero, i.e. x > 0 */
    d = ad_select(c, ad_nonzero(c, ad_y(c, 0)), g, ad_scalar(c, dt, 0.0));
    break;
  case OP_TANH: { /* g (1 - y^2) */
    IrValueId y = ad_y(c, 0);
    d = ad_op2(c, OP_MUL, g, ad_op2(c, OP_SUB, ad_scalar(c, dt, 1.0), ad_op2(c, OP_MUL, y, y)));
    break;
  }
  case OP_SIGMOID: { /* g y (1 - y) */
    IrValueId y = ad_y(c, 0);
    d = ad_op2(c, OP_MUL, ad_op2(c, OP_MUL, g, y), ad_op2(c, OP_SUB, ad_scalar(c, dt, 1.0), y));
    break;
  }
  case OP_SILU: { /* g s (1 + x (1 - s)), s = sigmoid(x) */
    IrValueId x = ad_x(c, 0), s = ad_op1(c, OP_SIGMOID, x);
    IrValueId one = ad_scalar(c, dt, 1.0);
    IrValueId t = ad_op2(c, OP_ADD, one, ad_op2(c, OP_MUL, x, ad_op2(c, OP_SUB, one, s)));
    d = ad_op2(c, OP_MUL, g, ad_op2(c, OP_MUL, s, t));
    break;
  }
  case OP_EXP: d = ad_op2(c, OP_MUL, g, ad_y(c, 0)); break;
  case OP_LOG: { /* g / (x + epsilon) */
    double eps = ir_attr_float(m, ad_op(c), "epsilon", 0.0);
    IrValueId x = ad_x(c, 0);
    if (eps != 0) x = ad_op2(c, OP_ADD, x, ad_scalar(c, dt, eps));
    d = ad_op2(c, OP_DIV, g, x);
    break;
  }
  case OP_SQRT: /* g / (2 y) */
    d = ad_op2(c, OP_DIV, ad_op2(c, OP_MUL, g, ad_scalar(c, dt, 0.5)), ad_y(c, 0));
    break;
  case OP_RSQRT: { /* -g y^3 / 2 */
    IrValueId y = ad_y(c, 0);
    IrValueId y3 = ad_op2(c, OP_MUL, ad_op2(c, OP_MUL, y, y), y);
    d = ad_op2(c, OP_MUL, g, ad_op2(c, OP_MUL, y3, ad_scalar(c, dt, -0.5)));
    break;
  }
  case OP_NEG: d = ad_op1(c, OP_NEG, g); break;
  case OP_ABS: { /* g sign(x): x / |x| where |x| != 0, else 0 */
    IrValueId y = ad_y(c, 0);
    IrValueId sign = ad_op2(c, OP_DIV, ad_x(c, 0), y);
    d = ad_select(c, ad_nonzero(c, y), ad_op2(c, OP_MUL, g, sign), ad_scalar(c, dt, 0.0));
    break;
  }
  default: return ad_fail(c, "internal compiler error: no unary gradient rule for '%s'", ir_op_info(k)->name);
  }
  ad_give(c, 0, d);
  return true;
}

/* exact: y = x Phi(x), dy/dx = Phi(x) + x phi(x). The IR has no erf, so
 * Phi(x) is read back as y / x (0.5 at x = 0).
 * tanh: y = x (1 + t) / 2 with t = tanh(u), u = k (x + a x^3):
 * dy/dx = (1 + t) / 2 + x (1 - t^2) k (1 + 3 a x^2) / 2. */
bool grad_gelu(AdCtx *c) {
  IrModule *m = ad_module(c);
  IrValueId g = ad_gy(c, 0), x = ad_x(c, 0);
  IrDType dt = ad_in_type(c, 0).dtype;
  const char *mode = ir_attr_str(m, ad_op(c), "mode", "exact");
  IrValueId half = ad_scalar(c, dt, 0.5), one = ad_scalar(c, dt, 1.0), d;
  IrValueId x2 = ad_op2(c, OP_MUL, x, x);
  if (strcmp(mode, "tanh") == 0) {
    const double k = sqrt(2.0 / PI), a = 0.044715;
    IrValueId inner = ad_op2(c, OP_ADD, one, ad_op2(c, OP_MUL, x2, ad_scalar(c, dt, a)));
    IrValueId t = ad_op1(c, OP_TANH, ad_op2(c, OP_MUL, ad_op2(c, OP_MUL, x, inner), ad_scalar(c, dt, k)));
    IrValueId left = ad_op2(c, OP_MUL, ad_op2(c, OP_ADD, one, t), half);
    IrValueId sech2 = ad_op2(c, OP_SUB, one, ad_op2(c, OP_MUL, t, t));
    IrValueId dinner = ad_op2(c, OP_ADD, one, ad_op2(c, OP_MUL, x2, ad_scalar(c, dt, 3 * a)));
    IrValueId right = ad_op2(c, OP_MUL, ad_op2(c, OP_MUL, x, sech2), ad_op2(c, OP_MUL, dinner, ad_scalar(c, dt, k / 2)));
    d = ad_op2(c, OP_ADD, left, right);
  } else {
    IrValueId nz = ad_nonzero(c, x);
    IrValueId safe_x = ad_select(c, nz, x, one);
    IrValueId cdf = ad_select(c, nz, ad_op2(c, OP_DIV, ad_y(c, 0), safe_x), half);
    IrValueId pdf = ad_op2(c, OP_MUL, ad_op1(c, OP_EXP, ad_op2(c, OP_MUL, x2, ad_scalar(c, dt, -0.5))),
                           ad_scalar(c, dt, 1.0 / sqrt(2.0 * PI)));
    d = ad_op2(c, OP_ADD, cdf, ad_op2(c, OP_MUL, x, pdf));
  }
  ad_give(c, 0, ad_op2(c, OP_MUL, g, d));
  return true;
}

/* g where the result equals x (inside the range, boundaries included). */
bool grad_clip(AdCtx *c) {
  IrValueId g = ad_gy(c, 0);
  IrValueId clipped = ad_nonzero(c, ad_op2(c, OP_SUB, ad_y(c, 0), ad_x(c, 0)));
  ad_give(c, 0, ad_select(c, clipped, ad_scalar(c, ad_in_type(c, 0).dtype, 0.0), g));
  return true;
}

/* The condition carries no gradient (a bool on the path is rejected before). */
bool grad_select(AdCtx *c) {
  IrValueId g = ad_gy(c, 0), cond = ad_x(c, 0);
  IrValueId zero = ad_scalar(c, ad_res_type(c, 0).dtype, 0.0);
  IrType a = ad_in_type(c, 1), b = ad_in_type(c, 2);
  if (ad_needs(c, 1)) ad_give(c, 1, ad_unbroadcast(c, ad_select(c, cond, g, zero), &a));
  if (ad_needs(c, 2)) ad_give(c, 2, ad_unbroadcast(c, ad_select(c, cond, zero, g), &b));
  return true;
}

/* float <-> float: the adjoint goes back to the operand's dtype (other casts
 * never get here: their results are not float, or their operand is not). */
bool grad_cast(AdCtx *c) {
  IrType x = ad_in_type(c, 0);
  if (!ir_dtype_is_float(x.dtype))
    return ad_fail(c, "'cast' from %s is not differentiable", ir_dtype_name(x.dtype));
  ad_give(c, 0, ad_cast(c, ad_gy(c, 0), x.dtype));
  return true;
}

bool grad_identity(AdCtx *c) {
  ad_give(c, 0, ad_gy(c, 0));
  return true;
}
