/*
 * Gradient rules of reductions, shape ops and layers against central finite
 * differences (autodiff_check.c; tolerance as derived in
 * test_autodiff_elementwise.c: 1e-6 relative to max(1, |grad|)).
 */
#include <criterion/criterion.h>

#include "autodiff_check.h"

#define U "uniform(seed=1, low=-1, high=1)"

/* DECLS (params), then STMT making y of shape YSHAPE; loss = sum(y * r). */
static void layer_case(const char *inputs, const char *decls, const char *stmt, const char *yshape, const char *grads,
                       const EvalIntRange *ranges) {
  char oir[4096];
  snprintf(oir, sizeof oir,
           "func main(r: fp32%s%s) {\n"
           "%s"
           "  %s\n"
           "  p = mul(y, r);\n"
           "  loss = reduce_sum(p);\n"
           "  return loss;\n"
           "}\n",
           yshape, inputs, decls, stmt);
  AdCheck opt = {.seed = 3, .ranges = ranges, .passes = PASSES_DEFAULT_PIPELINE};
  AdCheckResult r = ad_check(oir, &opt);
  cr_assert(r.ok, "%s\nin:\n%s", r.err, oir);
  cr_expect_str_eq(r.grads, grads, "%s", oir);
}

#define X(shape) "  param x: fp32" shape " = " U ";\n"

Test(autodiff_layers, softmax) {
  layer_case("", X("[3,4,5]"), "y = softmax(x);", "[3,4,5]", "grad.x", NULL);
  layer_case("", X("[3,4,5]"), "y = softmax(x, axis=0);", "[3,4,5]", "grad.x", NULL);
  layer_case("", X("[7]"), "y = softmax(x, axis=-1);", "[7]", "grad.x", NULL);
}

Test(autodiff_layers, reductions) {
  const char *ops[] = {"reduce_sum", "reduce_mean", "reduce_max"};
  char stmt[256];
  for (int i = 0; i < 3; i++) {
    snprintf(stmt, sizeof stmt, "y = %s(x, axes=[1]);", ops[i]);
    layer_case("", X("[3,4,5]"), stmt, "[3,5]", "grad.x", NULL);
    snprintf(stmt, sizeof stmt, "y = %s(x, axes=[0, -1], keep_dims=true);", ops[i]);
    layer_case("", X("[3,4,5]"), stmt, "[1,4,1]", "grad.x", NULL);
    snprintf(stmt, sizeof stmt, "y = %s(x);", ops[i]);
    layer_case("", X("[3,1,5]"), stmt, "[]", "grad.x", NULL);
  }
}

Test(autodiff_layers, reshape_transpose) {
  layer_case("", X("[3,4,5]"), "y = reshape(x, shape=[5,-1]);", "[5,12]", "grad.x", NULL);
  layer_case("", X("[3,4,5]"), "y = transpose(x, perm=[2,0,1]);", "[5,3,4]", "grad.x", NULL);
  layer_case("", X("[2,3]"), "y = transpose(x, perm=[-1,0]);", "[3,2]", "grad.x", NULL);
}

Test(autodiff_layers, slice) {
  layer_case("", X("[5,6]"), "y = slice(x, begin=[1,0], end=[4,6]);", "[3,6]", "grad.x", NULL);
  layer_case("", X("[5,6]"), "y = slice(x, begin=[-4,1], end=[5,-1], stride=[2,3]);", "[2,2]", "grad.x", NULL);
  layer_case("", X("[7]"), "y = slice(x, begin=[0], end=[7], stride=[3]);", "[3]", "grad.x", NULL);
  layer_case("", X("[2,9,3]"), "y = slice(x, begin=[0,2,0], end=[2,8,3], stride=[1,2,1]);", "[2,3,3]", "grad.x", NULL);
}

Test(autodiff_layers, split_concat) {
  layer_case("", X("[4,6]"), "a, b, c = split(x, axis=1, num_splits=3);\n  y = concat(c, a, axis=0);", "[8,2]",
             "grad.x", NULL);
  /* a part no one reads gets zeros in the concat of the adjoints */
  layer_case("", X("[4,6]"), "a, b = split(x, axis=-1, split_sizes=[1,5]);\n  y = mul(b, b);", "[4,5]", "grad.x", NULL);
  layer_case("", X("[2,3]") "  param w: fp32[2,1] = " U ";\n", "y = concat(x, w, x, axis=1);", "[2,7]", "grad.x,grad.w",
             NULL);
}

Test(autodiff_layers, layer_norm) {
  const char *g = "  param g: fp32[5] = uniform(seed=2, low=0.5, high=1.5);\n  param b: fp32[5] = " U ";\n";
  layer_case("", X("[3,5]"), "y = layer_norm(x);", "[3,5]", "grad.x", NULL);
  layer_case("", X("[2,3,5]") "  param g: fp32[5] = uniform(seed=2, low=0.5, high=1.5);\n", "y = layer_norm(x, g);",
             "[2,3,5]", "grad.x,grad.g", NULL);
  char d[512];
  snprintf(d, sizeof d, "%s%s", X("[2,3,5]"), g);
  layer_case("", d, "y = layer_norm(x, g, b, epsilon=0.01);", "[2,3,5]", "grad.x,grad.g,grad.b", NULL);
  /* several axes, listed out of order: gamma is [x[2], x[1]] */
  layer_case("", X("[2,3,4]") "  param g: fp32[4,3] = " U ";\n  param b: fp32[4,3] = " U ";\n",
             "y = layer_norm(x, g, b, axes=[2,1]);", "[2,3,4]", "grad.x,grad.g,grad.b", NULL);
}

Test(autodiff_layers, rms_norm) {
  layer_case("", X("[3,5]"), "y = rms_norm(x);", "[3,5]", "grad.x", NULL);
  layer_case("", X("[2,3,5]") "  param g: fp32[5] = " U ";\n", "y = rms_norm(x, g, epsilon=0.001);", "[2,3,5]",
             "grad.x,grad.g", NULL);
  layer_case("", X("[2,3,4]") "  param g: fp32[3,4] = " U ";\n", "y = rms_norm(x, g, axes=[1,2]);", "[2,3,4]",
             "grad.x,grad.g", NULL);
}

Test(autodiff_layers, gather_is_a_scatter_add) {
  /* repeated indices accumulate: 6 picks from 4 rows */
  EvalIntRange idx[] = {{"idx", 0, 4}, {NULL, 0, 0}};
  layer_case(", idx: int32[2,3]", "  param x: fp32[4,5] = " U ";\n", "y = gather(x, idx);", "[2,3,5]", "grad.x", idx);
  layer_case(", idx: int32[2,3]", "  param x: fp32[2,4,3] = " U ";\n", "y = gather(x, idx, axis=1);", "[2,2,3,3]",
             "grad.x", idx);
  layer_case(", idx: int32[]", "  param x: fp32[4,5] = " U ";\n", "y = gather(x, idx, axis=0);", "[5]", "grad.x", idx);
}

Test(autodiff_layers, matmul) {
  const char *w = "  param a: fp32[3,4] = " U ";\n  param b: fp32[4,5] = " U ";\n";
  layer_case("", w, "y = matmul(a, b);", "[3,5]", "grad.a,grad.b", NULL);
  layer_case("", "  param a: fp32[4,3] = " U ";\n  param b: fp32[4,5] = " U ";\n", "y = matmul(a, b, transpose_x=true);",
             "[3,5]", "grad.a,grad.b", NULL);
  layer_case("", "  param a: fp32[3,4] = " U ";\n  param b: fp32[5,4] = " U ";\n", "y = matmul(a, b, transpose_y=true);",
             "[3,5]", "grad.a,grad.b", NULL);
  layer_case("", "  param a: fp32[4,3] = " U ";\n  param b: fp32[5,4] = " U ";\n",
             "y = matmul(a, b, transpose_x=true, transpose_y=true);", "[3,5]", "grad.a,grad.b", NULL);
  /* batched, with broadcasting of the batch dims */
  layer_case("", "  param a: fp32[2,1,3,4] = " U ";\n  param b: fp32[3,4,5] = " U ";\n", "y = matmul(a, b);", "[2,3,3,5]",
             "grad.a,grad.b", NULL);
  layer_case("", "  param a: fp32[3,4] = " U ";\n  param b: fp32[2,5,4] = " U ";\n", "y = matmul(a, b, transpose_y=true);",
             "[2,3,5]", "grad.a,grad.b", NULL);
  /* rank-1 operands */
  layer_case("", "  param a: fp32[4] = " U ";\n  param b: fp32[2,4,5] = " U ";\n", "y = matmul(a, b);", "[2,5]",
             "grad.a,grad.b", NULL);
  layer_case("", "  param a: fp32[3,4] = " U ";\n  param b: fp32[4] = " U ";\n", "y = matmul(a, b);", "[3]",
             "grad.a,grad.b", NULL);
  layer_case("", "  param a: fp32[4] = " U ";\n  param b: fp32[4] = " U ";\n", "y = matmul(a, b);", "[]", "grad.a,grad.b",
             NULL);
}

Test(autodiff_layers, linear) {
  layer_case("", X("[2,3,4]") "  param w: fp32[5,4] = " U ";\n", "y = linear(x, w);", "[2,3,5]", "grad.x,grad.w", NULL);
  layer_case("", X("[3,4]") "  param w: fp32[5,4] = " U ";\n  param b: fp32[5] = " U ";\n", "y = linear(x, w, b);", "[3,5]",
             "grad.x,grad.w,grad.b", NULL);
  layer_case("", X("[4]") "  param w: fp32[5,4] = " U ";\n  param b: fp32[5] = " U ";\n", "y = linear(x, w, b);", "[5]",
             "grad.x,grad.w,grad.b", NULL);
}

Test(autodiff_layers, conv_1x1) {
  layer_case("", X("[2,4,1,3]") "  param w: fp32[6,4,1,1] = " U ";\n  param b: fp32[6] = " U ";\n", "y = conv(x, w, b);",
             "[2,6,1,3]", "grad.x,grad.w,grad.b", NULL);
  layer_case("", X("[1,4,5]") "  param w: fp32[6,2,1] = " U ";\n", "y = conv(x, w, groups=2);", "[1,6,5]", "grad.x,grad.w",
             NULL);
  layer_case("", X("[1,4,2,3]") "  param w: fp32[2,4,1,1] = " U ";\n", "y = conv(x, w, pad_type=\"same\");", "[1,2,2,3]",
             "grad.x,grad.w", NULL);
}

Test(autodiff_layers, conv_kernels_strides_padding) {
  const char *w33 = "  param w: fp32[3,2,3,3] = " U ";\n  param b: fp32[3] = " U ";\n";
  char d[512];
  snprintf(d, sizeof d, "%s%s", X("[2,2,5,6]"), w33);
  layer_case("", d, "y = conv(x, w, b);", "[2,3,3,4]", "grad.x,grad.w,grad.b", NULL);
  layer_case("", d, "y = conv(x, w, b, pad=[1,0,2,1]);", "[2,3,4,7]", "grad.x,grad.w,grad.b", NULL);
  layer_case("", d, "y = conv(x, w, strides=[2,2], pad_type=\"same\");", "[2,3,3,3]", "grad.x,grad.w,grad.b", NULL);
  layer_case("", d, "y = conv(x, w, strides=[2,3], pad_type=\"same_lower\");", "[2,3,3,2]", "grad.x,grad.w,grad.b",
             NULL); /* b unused: a zero gradient */
  layer_case("", d, "y = conv(x, w, b, dilations=[2,1], pad=[1,1,0,0]);", "[2,3,3,4]", "grad.x,grad.w,grad.b", NULL);
  /* 1-D, groups, stride and padding together */
  layer_case("", X("[1,4,7]") "  param w: fp32[6,2,3] = " U ";\n", "y = conv(x, w, groups=2, strides=[2], pad=[1,2]);",
             "[1,6,4]", "grad.x,grad.w", NULL);
  /* 3-D without strides */
  layer_case("", X("[1,1,3,3,3]") "  param w: fp32[2,1,2,2,2] = " U ";\n", "y = conv(x, w);", "[1,2,2,2,2]",
             "grad.x,grad.w", NULL);
}

#define QKV(l, s)                                                  \
  "  param q: fp32[1,2," #l ",4] = " U ";\n"                       \
  "  param k: fp32[1,2," #s ",4] = " U ";\n"                       \
  "  param v: fp32[1,2," #s ",3] = " U ";\n"

Test(autodiff_layers, sdpa) {
  layer_case("", QKV(3, 3), "y = sdpa(q, k, v);", "[1,2,3,3]", "grad.q,grad.k,grad.v", NULL);
  layer_case("", QKV(3, 3), "y = sdpa(q, k, v, causal=true);", "[1,2,3,3]", "grad.q,grad.k,grad.v", NULL);
  layer_case("", QKV(2, 5), "y = sdpa(q, k, v, causal=true, scale=0.7);", "[1,2,2,3]", "grad.q,grad.k,grad.v", NULL);
  layer_case(", keep: bool[1,1,3,5]", QKV(3, 5), "y = sdpa(q, k, v, keep);", "[1,2,3,3]", "grad.q,grad.k,grad.v", NULL);
  layer_case("", QKV(3, 5) "  param bias: fp32[3,5] = " U ";\n", "y = sdpa(q, k, v, bias, causal=true);", "[1,2,3,3]",
             "grad.q,grad.k,grad.v,grad.bias", NULL);
}
