/*
 * The gradient rule of cross_entropy against central finite differences
 * (autodiff_check.c; tolerance as derived in test_autodiff_elementwise.c:
 * 1e-6 relative to max(1, |grad|)), as written and after the O1 pipeline
 * (which lowers the op: the lowered backward must agree).
 */
#include <criterion/criterion.h>
#include <stdio.h>

#include "autodiff_check.h"

#define U "uniform(seed=1, low=-3, high=3)"

/* loss = cross_entropy(f(x), t) with logits of LSHAPE (params DECLS). */
static AdCheckResult loss_case_tol(const char *tshape, const char *decls, const char *stmt, const EvalIntRange *ranges,
                                  double tol) {
  char oir[2048];
  snprintf(oir, sizeof oir,
           "func main(t: int32%s) {\n"
           "%s"
           "  %s\n"
           "  return loss;\n"
           "}\n",
           tshape, decls, stmt);
  AdCheck opt = {.seed = 5, .ranges = ranges, .passes = "O1", .tol = tol};
  AdCheckResult r = ad_check(oir, &opt);
  cr_assert(r.ok, "%s\nin:\n%s", r.err, oir);
  return r;
}

static AdCheckResult loss_case(const char *tshape, const char *decls, const char *stmt, const EvalIntRange *ranges) {
  return loss_case_tol(tshape, decls, stmt, ranges, 0);
}

Test(autodiff_loss, cross_entropy_of_a_param) {
  EvalIntRange t7[] = {{"t", 0, 7}, {NULL, 0, 0}};
  AdCheckResult r = loss_case("[4]", "  param x: fp32[4,7] = " U ";\n", "loss = cross_entropy(x, t);", t7);
  cr_expect_str_eq(r.grads, "grad.x");
  EvalIntRange t11[] = {{"t", 0, 11}, {NULL, 0, 0}};
  loss_case("[2,3]", "  param x: fp32[2,3,11] = " U ";\n", "loss = cross_entropy(x, t);", t11);
  /* rank-1 logits: one position, a scalar target */
  EvalIntRange t5[] = {{"t", 0, 5}, {NULL, 0, 0}};
  loss_case("[]", "  param x: fp32[5] = " U ";\n", "loss = cross_entropy(x, t);", t5);
  /* one class: the loss is 0 and so is its gradient */
  EvalIntRange t1[] = {{"t", 0, 1}, {NULL, 0, 0}};
  loss_case("[3]", "  param x: fp32[3,1] = " U ";\n", "loss = cross_entropy(x, t);", t1);
}

Test(autodiff_loss, ignore_index_outside_and_inside_the_classes) {
  /* -1 marks padding: targets drawn from [-1, 6) include some */
  EvalIntRange pad[] = {{"t", -1, 6}, {NULL, 0, 0}};
  loss_case("[3,4]", "  param x: fp32[3,4,6] = " U ";\n", "loss = cross_entropy(x, t, ignore_index=-1);", pad);
  /* an ignored class inside the range: its one-hot must not count */
  EvalIntRange t4[] = {{"t", 0, 4}, {NULL, 0, 0}};
  loss_case("[6]", "  param x: fp32[6,4] = " U ";\n", "loss = cross_entropy(x, t, ignore_index=2);", t4);
}

Test(autodiff_loss, through_a_classifier_and_fp16_logits) {
  EvalIntRange t9[] = {{"t", 0, 9}, {NULL, 0, 0}};
  AdCheckResult r = loss_case("[2,3]",
                              "  param h: fp32[2,3,4] = " U ";\n"
                              "  param w: fp32[9,4] = uniform(seed=2, low=-1, high=1);\n",
                              "z = linear(h, w);\n  loss = cross_entropy(z, t);", t9);
  cr_expect_str_eq(r.grads, "grad.h,grad.w");
  /* fp16 logits: the rule works in fp32 and casts the adjoint back to fp16,
   * which rounds it (the evaluator rounds casts): 2^-11 relative, so 1e-3. */
  loss_case_tol("[2,3]",
            "  param h: fp16[2,3,4] = " U ";\n"
            "  param w: fp16[9,4] = uniform(seed=2, low=-1, high=1);\n",
            "z = linear(h, w);\n  loss = cross_entropy(z, t);", t9, 1e-3);
}

Test(autodiff_loss, targets_are_not_differentiated) {
  /* targets computed from a param's shape-free int path never need an adjoint */
  EvalIntRange t3[] = {{"t", 0, 3}, {NULL, 0, 0}};
  AdCheckResult r = loss_case("[2]", "  param x: fp32[2,3] = " U ";\n  frozen param b: fp32[3] = " U ";\n",
                              "y = add(x, b);\n  loss = cross_entropy(y, t);", t3);
  cr_expect_str_eq(r.grads, "grad.x");
}
