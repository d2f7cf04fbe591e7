/*
 * Gradient rules of the element-wise ops against central finite differences
 * (autodiff_check.c), with broadcasting and odd shapes, and the rule table
 * against ops.def.
 *
 * Tolerance: everything is evaluated in double; central differences with
 * h = 1e-5 have a truncation error of about h^2 |f'''| / 6 (~1e-10 for these
 * smooth, O(1) functions) and a rounding error of about 1e-16 |L| / h (~1e-10
 * for |L| ~ 10), so 1e-6 relative (to max(1, |grad|)) leaves a wide margin
 * while any wrong rule is off by O(1). Random values are at least ~1e-7 away
 * from the kinks of relu/abs/max/clip with overwhelming probability.
 */
#include <criterion/criterion.h>

#include "autodiff_check.h"

static void expect_grads(const char *oir, const char *grads) {
  AdCheck opt = {.seed = 11, .passes = PASSES_DEFAULT_PIPELINE};
  AdCheckResult r = ad_check(oir, &opt);
  cr_assert(r.ok, "%s\nin:\n%s", r.err, oir);
  cr_expect_str_eq(r.grads, grads);
}

/* main with trainable params a and b of the given types, loss = sum(OP(a, b) * r). */
static void binary_case(const char *op, const char *ta, const char *tb, const char *tz, const char *src) {
  char oir[2048];
  snprintf(oir, sizeof oir,
           "func main(r: fp32%s) {\n"
           "  param a: fp32%s = %s;\n"
           "  param b: fp32%s = %s;\n"
           "  z = %s(a, b);\n"
           "  p = mul(z, r);\n"
           "  loss = reduce_sum(p);\n"
           "  return loss;\n"
           "}\n",
           tz, ta, src, tb, src, op);
  expect_grads(oir, "grad.a,grad.b");
}

Test(autodiff_rules, every_op_has_a_row) {
  for (int k = 0; k <= OP_CALL; k++) {
    bool diff;
    const char *fam = ad_rule_family((IrOpKind)k, &diff);
    cr_expect(fam != NULL, "op '%s' has no gradient rule row in passes/grad_rules.c",
              k == OP_CALL ? "call" : ir_op_info((IrOpKind)k)->name);
    if (k < OP_CALL) cr_expect(diff, "op '%s' is marked not differentiable", ir_op_info((IrOpKind)k)->name);
  }
}

#define U "uniform(seed=1, low=-2, high=2)"
#define POS "uniform(seed=1, low=0.5, high=2)"

Test(autodiff_rules, add_sub_mul_broadcast) {
  const char *ops[] = {"add", "sub", "mul"};
  for (int i = 0; i < 3; i++) {
    binary_case(ops[i], "[3,1,5]", "[5]", "[3,1,5]", U);
    binary_case(ops[i], "[3,1,5]", "[4,1]", "[3,4,5]", U);
    binary_case(ops[i], "[]", "[2,3]", "[2,3]", U);
    binary_case(ops[i], "[2,1,3]", "[1,4,1]", "[2,4,3]", U);
  }
}

Test(autodiff_rules, div_pow) {
  binary_case("div", "[3,1,5]", "[5]", "[3,1,5]", POS);
  binary_case("div", "[2,3]", "[]", "[2,3]", POS);
  binary_case("pow", "[3,1,5]", "[5]", "[3,1,5]", POS);
  binary_case("pow", "[4]", "[3,1]", "[3,4]", POS);
}

Test(autodiff_rules, maximum_minimum) {
  binary_case("maximum", "[3,1,5]", "[5]", "[3,1,5]", U);
  binary_case("minimum", "[3,1,5]", "[4,1]", "[3,4,5]", U);
  binary_case("maximum", "[2,3]", "[2,3]", "[2,3]", U);
}

/* main with one trainable param x, loss = sum(EXPR(x) * r); EXPR names x and makes y. */
static void unary_case(const char *stmt, const char *shape, const char *src) {
  char oir[2048];
  snprintf(oir, sizeof oir,
           "func main(r: fp32%s) {\n"
           "  param x: fp32%s = %s;\n"
           "  %s\n"
           "  p = mul(y, r);\n"
           "  loss = reduce_sum(p);\n"
           "  return loss;\n"
           "}\n",
           shape, shape, src, stmt);
  expect_grads(oir, "grad.x");
}

Test(autodiff_rules, activations) {
  const char *shapes[] = {"[7]", "[3,1,5]", "[]"};
  for (int i = 0; i < 3; i++) {
    unary_case("y = relu(x);", shapes[i], U);
    unary_case("y = tanh(x);", shapes[i], U);
    unary_case("y = sigmoid(x);", shapes[i], U);
    unary_case("y = silu(x);", shapes[i], U);
    unary_case("y = gelu(x);", shapes[i], U);
    unary_case("y = gelu(x, mode=\"exact\");", shapes[i], U);
    unary_case("y = gelu(x, mode=\"tanh\");", shapes[i], U);
  }
}

Test(autodiff_rules, gelu_exact_at_zero) {
  /* Phi(0) is read as 0.5 where x is 0 (the rule divides by x elsewhere) */
  unary_case("y = gelu(x);", "[3]", "zeros");
}

Test(autodiff_rules, math) {
  const char *shapes[] = {"[7]", "[2,1,3]"};
  for (int i = 0; i < 2; i++) {
    unary_case("y = exp(x);", shapes[i], U);
    unary_case("y = log(x);", shapes[i], POS);
    unary_case("y = log(x, epsilon=0.25);", shapes[i], POS);
    unary_case("y = sqrt(x);", shapes[i], POS);
    unary_case("y = rsqrt(x);", shapes[i], POS);
    unary_case("y = rsqrt(x, epsilon=0.5);", shapes[i], POS);
    unary_case("y = neg(x);", shapes[i], U);
    unary_case("y = abs(x);", shapes[i], U);
    unary_case("y = clip(x, min=-1.0, max=0.5);", shapes[i], U);
    unary_case("y = identity(x);", shapes[i], U);
  }
}

Test(autodiff_rules, select_both_data_operands) {
  expect_grads("func main(r: fp32[3,4], keep: bool[3,1]) {\n"
               "  param a: fp32[3,4] = " U ";\n"
               "  param b: fp32[4] = " U ";\n"
               "  y = select(keep, a, b);\n"
               "  p = mul(y, r);\n"
               "  loss = reduce_sum(p);\n"
               "  return loss;\n"
               "}\n",
               "grad.a,grad.b");
}

Test(autodiff_rules, cast_float_to_float) {
  /* fp16 -> fp32 -> fp16 round trips round at fp16, so the differences use
   * h = 2^-6 on a loss linear in the cast values: the fp16 spacing near
   * |x| < 2 is at most 2^-10, the rounding error of one difference at most
   * 2^-11 / 2^-5 of |r| <= 2, i.e. 0.13; 0.15 still tells a right rule (exact
   * 1) from a wrong one (0 or 2x). The fp32 case is tight. */
  AdCheck opt = {.seed = 5, .h = 0x1p-6, .tol = 0.15};
  AdCheckResult r = ad_check("func main(r: fp32[2,3]) {\n"
                             "  param w: fp16[2,3] = " U ";\n"
                             "  y = cast(w, dtype=\"fp32\");\n"
                             "  p = mul(y, r);\n"
                             "  loss = reduce_sum(p);\n"
                             "  return loss;\n"
                             "}\n",
                             &opt);
  cr_assert(r.ok, "%s", r.err);
  r = ad_check("func main(r: fp32[4]) {\n"
               "  param x: fp32[4] = uniform(seed=2, low=-1, high=1);\n"
               "  h = cast(x, dtype=\"fp16\");\n"
               "  y = cast(h, dtype=\"fp32\");\n"
               "  p = mul(y, r);\n"
               "  loss = reduce_sum(p);\n"
               "  return loss;\n"
               "}\n",
               &opt);
  cr_assert(r.ok, "%s", r.err);
}
