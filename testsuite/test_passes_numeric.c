/*
 * Passes preserve what programs compute: each program is evaluated by the
 * reference evaluator (ir_eval.c) before and after the pass, on the same
 * random inputs, and every output must agree within a tolerance. Each test
 * also checks that the pass really rewrote something.
 *
 * To cover a new pass, add a Test with a small program that uses what the
 * pass rewrites (tiny shapes: the evaluator is plain loops) and call
 *   check_pass_preserves(text, "my-pass", seed, tol);
 * or check_seeds(text, "my-pass", tol, ranges) for seeds 1 to 3, where
 * ranges (or NULL) gives int inputs such as gather indices their range:
 *   static const EvalIntRange ids[] = {{"tokens", 0, 50}, {NULL, 0, 0}};
 * Use tol 1e-9 when the rewrite computes the same arithmetic, 1e-6 when it
 * reassociates sums or products.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "helpers.h"
#include "ir_eval.h"
#include "orion/passes.h"

static double g_worst; /* largest difference of the last check, for messages */

static void check_pass_preserves_ranges(const char *text, const char *passes, uint64_t seed, double tol,
                                        const EvalIntRange *ranges) {
  char err[4096];
  bool ok = eval_pass_preserves(text, passes, seed, tol, ranges, &g_worst, err, sizeof err);
  cr_assert(ok, "passes '%s', seed %llu: %s", passes, (unsigned long long)seed, err);
}

/* The same without int ranges (unused here, for new tests). */
static void check_pass_preserves(const char *text, const char *passes, uint64_t seed, double tol)
    __attribute__((unused));
static void check_pass_preserves(const char *text, const char *passes, uint64_t seed, double tol) {
  check_pass_preserves_ranges(text, passes, seed, tol, NULL);
}

/* Seeds 1, 2 and 3. */
static void check_seeds(const char *text, const char *passes, double tol, const EvalIntRange *ranges) {
  for (uint64_t seed = 1; seed <= 3; seed++) check_pass_preserves_ranges(text, passes, seed, tol, ranges);
}

/* Ops of `kind` in every live function after running `passes` on `text`. */
static int count_after(const char *text, const char *passes, IrOpKind kind) {
  Parsed p;
  parsed_open(&p, text);
  cr_assert(p.m, "%s", p.diags.data);
  PassManagerOptions o = {.verify_each = true};
  if (passes_pipeline(passes)) o.pipeline = passes;
  else o.passes = passes;
  cr_assert(passes_run(p.m, &o, &p.d), "%s", p.diags.data);
  int n = 0;
  for (IrFuncId f = 1; f < p.m->nfuncs; f++) {
    if (ir_func(p.m, f)->dead) continue;
    IR_FOR_EACH_OP(p.m, f, op) n += ir_op(p.m, op)->kind == kind;
  }
  parsed_close(&p);
  return n;
}

/* ---- the harness itself ---- */

/* A deliberately wrong pass: neg(x) -> identity(x). */
static bool break_neg(IrModule *m, PassCtx *ctx) {
  for (IrFuncId f = 1; f < m->nfuncs; f++) {
    if (m->funcs[f].dead) continue;
    IR_FOR_EACH_OP(m, f, op) {
      if (ir_op(m, op)->kind != OP_NEG) continue;
      ir_op(m, op)->kind = OP_IDENTITY;
      ctx->changed = true;
    }
  }
  return true;
}

Test(passes_numeric, harness_catches_a_wrong_rewrite) {
  SourceSet ss;
  srcset_init(&ss);
  Diag d;
  diag_init(&d, &ss);
  PassInfo bad = {"test-break-neg", "neg -> identity (wrong on purpose)", ANALYSIS_TYPES, ANALYSIS_TYPES, break_neg};
  cr_assert(pass_register(&bad, &d));
  srcset_free(&ss);
  const char *text = "func main(x: fp32[2,3]) {\n  y = neg(x);\n  z = relu(y);\n  return z;\n}\n";
  char err[2048];
  double worst;
  cr_assert_not(eval_pass_preserves(text, "test-break-neg", 1, 1e-9, NULL, &worst, err, sizeof err));
  cr_assert(strstr(err, "output 'z' of 'main' (fp32[2,3]) differs by"), "%s", err);
  cr_assert_gt(worst, 0.1);
  /* and an unchanged program passes with difference 0 */
  cr_assert(eval_pass_preserves(text, "lower-rms-norm", 1, 0, NULL, &worst, err, sizeof err), "%s", err);
  cr_assert_eq(worst, 0);
}

Test(passes_numeric, harness_rejects_non_finite_references) {
  /* log of inputs in [-2, 2] is NaN somewhere: such a check would prove nothing */
  const char *text = "func main(x: fp32[4,4]) {\n  y = log(x);\n  z = neg(y);\n  return z;\n}\n";
  char err[2048];
  cr_assert_not(eval_pass_preserves(text, "lower-neg", 1, 1e-9, NULL, NULL, err, sizeof err));
  cr_assert(strstr(err, "the check would prove nothing"), "%s", err);
}

/* ---- decompose-attention ---- */

Test(passes_numeric, decompose_attention_plain_and_scaled) {
  const char *text = "func main(q: fp32[1,2,3,4], k: fp32[1,2,5,4], v: fp32[1,2,5,3]) {\n"
                     "  a = sdpa(q, k, v);\n  b = sdpa(q, k, v, scale=0.3);\n  c = add(a, b);\n  d = tanh(c);\n"
                     "  return d, a;\n}\n";
  check_seeds(text, "decompose-attention", 1e-9, NULL);
  cr_assert_eq(count_after(text, "decompose-attention", OP_SDPA), 0);
  cr_assert_eq(count_after(text, "decompose-attention", OP_MATMUL), 4);
}

Test(passes_numeric, decompose_attention_causal) {
  /* L == S and L < S (query i sees keys j <= i + S - L), rank 3 and rank 4, fp16 */
  const char *text = "func main(q: fp16[2,4,8], k: fp16[2,4,8], v: fp16[2,4,8], q1: fp16[1,1,2,8], k1: fp16[1,1,5,8],"
                     " v1: fp16[1,1,5,2]) {\n"
                     "  a = sdpa(q, k, v, causal=true);\n  b = sdpa(q1, k1, v1, causal=true);\n"
                     "  c = sdpa(q1, k1, v1, causal=true, scale=1.5);\n  return a, b, c;\n}\n";
  check_seeds(text, "decompose-attention", 1e-9, NULL);
  cr_assert_eq(count_after(text, "decompose-attention", OP_SDPA), 0);
}

Test(passes_numeric, decompose_attention_masks) {
  /* a float mask (a random input, broadcast over heads) and a bool mask
   * (a const with a kept key in every row, so no row is fully masked),
   * each also combined with causal */
  const char *text =
      "func main(q: fp32[1,2,3,4], k: fp32[1,2,3,4], v: fp32[1,2,3,2], m: fp32[1,1,3,3]) {\n"
      "  const keep: bool[3,3] = [[true, false, true], [false, true, false], [true, true, false]];\n"
      "  const row: bool[3] = [true, false, true];\n"
      "  a = sdpa(q, k, v, m);\n  b = sdpa(q, k, v, keep);\n  c = sdpa(q, k, v, m, causal=true);\n"
      "  d = sdpa(q, k, v, row, causal=true, scale=0.5);\n  e = concat(a, b, c, d, axis=-1);\n  return e;\n}\n";
  check_seeds(text, "decompose-attention", 1e-9, NULL);
  cr_assert_eq(count_after(text, "decompose-attention", OP_SDPA), 0);
  cr_assert_eq(count_after(text, "decompose-attention", OP_SELECT), 2);
}

/* ---- lower-rms-norm ---- */

Test(passes_numeric, lower_rms_norm) {
  const char *text = "func main(x: fp32[2,3,4], y: fp16[1,4,8]) {\n"
                     "  param g: fp32[4] = uniform(seed=1, low=0.5, high=1.5);\n"
                     "  param g2: fp32[3,4] = normal(seed=2);\n  param h: fp16[8] = normal(seed=3);\n"
                     "  a = rms_norm(x, g);\n  b = rms_norm(x, axes=[1]);\n  c = rms_norm(x, g2, axes=[1, 2], epsilon=0.5);\n"
                     "  d = rms_norm(x, axes=[-3, -1]);\n  e = rms_norm(y, h, epsilon=1e-3);\n"
                     "  s = add(a, b);\n  t = add(s, c);\n  u = add(t, d);\n  return u, e;\n}\n";
  /* x * rsqrt(mean + eps) instead of x / sqrt(mean + eps): a rounding apart */
  check_seeds(text, "lower-rms-norm", 1e-12, NULL);
  cr_assert_eq(count_after(text, "lower-rms-norm", OP_RMS_NORM), 0);
  cr_assert_eq(count_after(text, "lower-rms-norm", OP_RSQRT), 5);
}

/* gamma has the normalized dims in the order `axes` lists them (docs/language.md,
 * layer_norm; infer.c): with axes=[2, 1] on [2,3,4] it is [4,3], and gamma[k][j]
 * scales x[i][j][k]. lower-rms-norm reshapes gamma to [1,3,4] without first
 * transposing it, which scrambles its elements (a difference of about 1.5 here).
 * Disabled until passes/lower_rms_norm.c transposes gamma into x's axis order. */
Test(passes_numeric, lower_rms_norm_axes_out_of_order) {
  const char *text = "func main(x: fp32[2,3,4]) {\n  param g: fp32[4,3] = normal(seed=2);\n"
                     "  a = rms_norm(x, g, axes=[2, 1]);\n  return a;\n}\n";
  check_seeds(text, "lower-rms-norm", 1e-12, NULL);
}

/* ---- lower-neg ---- */

Test(passes_numeric, lower_neg) {
  const char *text = "func main(x: fp32[2,3], i: int32[4], h: fp16[3]) {\n"
                     "  a = neg(x);\n  b = neg(a);\n  c = add(a, b);\n  d = neg(i);\n  e = neg(h);\n  f = exp(e);\n"
                     "  return c, d, f, a;\n}\n";
  check_seeds(text, "lower-neg", 0, NULL); /* x * -1 is exactly -x */
  cr_assert_eq(count_after(text, "lower-neg", OP_NEG), 0);
  cr_assert_eq(count_after(text, "lower-neg", OP_MUL), 4);
}

/* ---- lower-silu, gelu-tanh ---- */

Test(passes_numeric, lower_silu) {
  const char *text = "func main(x: fp32[2,5], h: fp16[3]) {\n  a = silu(x);\n  b = silu(a);\n  c = silu(h);\n"
                     "  return b, c;\n}\n";
  check_seeds(text, "lower-silu", 0, NULL);
  cr_assert_eq(count_after(text, "lower-silu", OP_SILU), 0);
}

Test(passes_numeric, gelu_tanh) {
  /* the tanh mode is rewritten into the same formula */
  const char *tanh_mode = "func main(x: fp32[4,8], h: fp16[6]) {\n  a = gelu(x, mode=\"tanh\");\n  b = gelu(h, mode=\"tanh\");\n"
                          "  return a, b;\n}\n";
  check_seeds(tanh_mode, "gelu-tanh", 1e-12, NULL);
  cr_assert_eq(count_after(tanh_mode, "gelu-tanh", OP_GELU), 0);
  /* exact gelu becomes the approximation: within 5e-4 (the pass's own
   * bound), and visibly not the same function */
  const char *exact = "func main(x: fp32[16,16]) {\n  a = gelu(x);\n  return a;\n}\n";
  check_seeds(exact, "gelu-tanh", 5e-4, NULL);
  cr_assert_gt(g_worst, 1e-5);
}

/* ---- split-concat ---- */

Test(passes_numeric, split_concat_products) {
  /* concat along the contracted axis of linear (features), matmul (both
   * operands, with transposes) and conv (channels, bias added once) */
  const char *text =
      "func main(a: fp32[1,3,4], b: fp32[1,3,2], c: fp32[2,5], d: fp32[3,5], u: fp32[1,2,3,3], v: fp32[1,1,3,3]) {\n"
      "  param w: fp32[7,6] = normal(seed=1);\n  param bias: fp32[7] = normal(seed=2);\n"
      "  param y: fp32[4,5] = normal(seed=3);\n  param y2: fp32[5,3] = normal(seed=6);\n"
      "  param k: fp32[4,3,2,2] = normal(seed=4);\n"
      "  param kb: fp32[4] = normal(seed=5);\n"
      "  x = concat(a, b, axis=-1);\n  l = linear(x, w, bias);\n"
      "  cd = concat(c, d, axis=0);\n  m1 = matmul(y, cd);\n  m2 = matmul(cd, y, transpose_x=true, transpose_y=true);\n"
      "  cdt = concat(c, d, axis=0);\n  m3 = matmul(cdt, y2, transpose_x=true);\n"
      "  uv = concat(u, v, axis=1);\n  k2 = conv(uv, k, kb, pad=[1, 0, 0, 1]);\n"
      "  return l, m1, m2, m3, k2;\n}\n";
  check_seeds(text, "split-concat", 1e-12, NULL);
  check_seeds(text, "(split-concat)", 1e-12, NULL);
  cr_assert_eq(count_after(text, "(split-concat)", OP_CONCAT), 0);
}

Test(passes_numeric, split_concat_elementwise) {
  /* concat moved below element-wise ops (the other operand sliced, or
   * broadcast) until it meets a linear */
  const char *text = "func main(a: fp32[2,3], b: fp32[2,5], s: fp32[8], t: fp32[2,1], r: fp32[2,8]) {\n"
                     "  param w: fp32[4,8] = normal(seed=1);\n"
                     "  x = concat(a, b, axis=1);\n  e = exp(x);\n  p = mul(e, s);\n  q = add(t, p);\n"
                     "  z = sub(q, r);\n  g = gelu(z, mode=\"tanh\");\n  c = clip(g, min=-1, max=1.5);\n"
                     "  y = linear(c, w);\n  return y;\n}\n";
  check_seeds(text, "split-concat", 1e-12, NULL);
  check_seeds(text, "(split-concat)", 1e-12, NULL);
  cr_assert_eq(count_after(text, "(split-concat)", OP_CONCAT), 0);
}

/* A concat whose axis has size 1 (a single part) broadcasts against the other
 * operand; distributing the op slices that operand to size 1 instead, and the
 * output silently becomes fp32[2,1] instead of fp32[2,3]. Disabled until
 * split-concat leaves concats that the other operand broadcasts alone. */
Test(passes_numeric, split_concat_broadcast_part) {
  const char *text = "func main(a: fp32[2,1], y: fp32[2,3]) {\n  x = concat(a, axis=1);\n  z = add(x, y);\n  r = relu(z);\n"
                     "  return r;\n}\n";
  check_seeds(text, "split-concat", 0, NULL);
}

/* ---- conv and linear layout ---- */

Test(passes_numeric, split_conv_bias) {
  const char *text = "func main(x: fp32[1,4,5,5], y: fp16[2,2,7]) {\n"
                     "  param w: fp32[6,2,3,3] = normal(seed=1);\n  param b: fp32[6] = normal(seed=2);\n"
                     "  param w1: fp16[3,2,3] = normal(seed=3);\n  param b1: fp16[3] = normal(seed=4);\n"
                     "  a = conv(x, w, b, groups=2, strides=[2, 1], pad_type=\"same\");\n"
                     "  c = conv(y, w1, b1, dilations=[2], pad=[1, 2]);\n  return a, c;\n}\n";
  check_seeds(text, "split-conv-bias", 0, NULL);
  cr_assert_eq(count_after(text, "split-conv-bias", OP_ADD), 2);
}

Test(passes_numeric, lower_linear) {
  /* rank 2 and rank 3 inputs, with and without bias; then the bias split */
  const char *text = "func main(x: fp32[2,3,8], z: fp16[5,8]) {\n"
                     "  param w: fp32[6,8] = normal(seed=1);\n  param b: fp32[6] = normal(seed=2);\n"
                     "  param w2: fp32[4,6] = normal(seed=3);\n  param w3: fp16[3,8] = normal(seed=4);\n"
                     "  h = linear(x, w, b);\n  g = relu(h);\n  y = linear(g, w2);\n  k = linear(z, w3);\n  return y, k;\n}\n";
  check_seeds(text, "lower-linear", 1e-12, NULL);
  check_seeds(text, "lower-linear,split-conv-bias,fold-layout,identity-elim,dce", 1e-12, NULL);
  cr_assert_eq(count_after(text, "lower-linear", OP_LINEAR), 0);
  cr_assert_eq(count_after(text, "lower-linear", OP_CONV), 3);
}

/* ---- clean-ups ---- */

Test(passes_numeric, dce_identity_elim_fold_layout) {
  const char *text =
      "func main(x: fp32[2,3,4], i: int32[6]) {\n"
      "  const one: fp32[] = 1;\n  const zero: fp32[1] = 0;\n  const izero: int32[] = 0;\n"
      "  a = identity(x);\n  b = reshape(a, shape=[2, 3, 4]);\n  c = transpose(b, perm=[0, 1, 2]);\n"
      "  d = cast(c, dtype=\"fp32\");\n  e = mul(d, one);\n  f = add(zero, e);\n  g = sub(f, zero);\n"
      "  h = reshape(g, shape=[6, 4]);\n  k = reshape(h, shape=[4, -1]);\n  l = reshape(k, shape=[3, 8]);\n"
      "  t1 = transpose(x, perm=[2, 0, 1]);\n  t2 = transpose(t1, perm=[1, 2, 0]);\n  t3 = transpose(t2, perm=[0, 2, 1]);\n"
      "  dead = exp(t3);\n  dead2 = neg(dead);\n  j = sub(i, izero);\n  return l, t3, j;\n}\n";
  const char *all[] = {"dce", "identity-elim", "fold-layout", "(dce,identity-elim,fold-layout)"};
  for (int p = 0; p < 4; p++) check_seeds(text, all[p], 0, NULL);
  cr_assert_eq(count_after(text, "dce", OP_NEG), 0);
  cr_assert_eq(count_after(text, "identity-elim", OP_IDENTITY), 0);
  cr_assert_eq(count_after(text, "(dce,identity-elim,fold-layout)", OP_RESHAPE), 1);
  cr_assert_eq(count_after(text, "(dce,identity-elim,fold-layout)", OP_TRANSPOSE), 1);
}

/* A reshape entry 0 copies the size of its operand at that index: after
 * reshape(reshape(x)) is folded, the operand is x, whose size there differs.
 * Here x [4,6] -> [6,4] -> reshape(shape=[0, -1]) is [6,4]; folded it reads
 * [4,6], and the output silently becomes fp32[4,6] (the verifier re-infers
 * undeclared result types). Disabled until fold-layout resolves 0 entries
 * (or leaves such chains alone). */
Test(passes_numeric, fold_layout_reshape_zero) {
  const char *text = "func main(x: fp32[4,6]) {\n  a = reshape(x, shape=[6, 4]);\n  b = reshape(a, shape=[0, -1]);\n"
                     "  c = relu(b);\n  return c;\n}\n";
  check_seeds(text, "fold-layout", 0, NULL);
}

Test(passes_numeric, cast_fusion) {
  /* lossless round trips go; casts of consts are folded the way the cast rounds */
  const char *text = "func main(h: fp16[4], b: int8[3], x: fp32[3]) {\n"
                     "  const c: fp32[3] = [0.1, -2.7, 1e-3];\n  const n: fp32[2] = [-2.7, 3.5];\n"
                     "  h32 = cast(h, dtype=\"fp32\");\n  h16 = cast(h32, dtype=\"fp16\");\n  he = exp(h16);\n"
                     "  b32 = cast(b, dtype=\"int32\");\n  bf = cast(b32, dtype=\"fp32\");\n"
                     "  cc = cast(c, dtype=\"fp16\");\n  cb = cast(cc, dtype=\"fp32\");\n  s = add(bf, cb);\n  t = mul(s, x);\n"
                     "  ni = cast(n, dtype=\"int32\");\n  return he, t, ni;\n}\n";
  check_seeds(text, "cast-fusion", 0, NULL);
  check_seeds(text, "(cast-fusion,dce)", 0, NULL);
  cr_assert_eq(count_after(text, "(cast-fusion,dce)", OP_CAST), 1); /* bf = cast(b, fp32) */
}

Test(passes_numeric, const_fold) {
  /* exactly representable values: the folded consts are exact */
  const char *exact = "func main(x: fp32[2,3]) {\n  const a: fp32[3] = [1, 2, 4];\n  const b: fp32[2,1] = [[0.5], [-3]];\n"
                      "  const z: fp32[] = 0;\n  p = mul(a, b);\n  q = add(p, a);\n  r = neg(q);\n  e = exp(z);\n"
                      "  y = mul(x, r);\n  w = add(y, e);\n  return w;\n}\n";
  check_seeds(exact, "const-fold", 0, NULL);
  cr_assert_eq(count_after(exact, "(const-fold)", OP_MUL), 1);
  /* others are rounded to fp32 once folded: within fp32 rounding */
  const char *rounded = "func main(x: fp32[3]) {\n  const a: fp32[3] = [0.1, 0.7, 1.3];\n  e = exp(a);\n  s = sigmoid(e);\n"
                        "  d = div(s, a);\n  y = mul(x, d);\n  return y;\n}\n";
  check_seeds(rounded, "(const-fold)", 1e-6, NULL);
  cr_assert_eq(count_after(rounded, "(const-fold)", OP_EXP), 0);
}

/* ---- analyses and guards ---- */

Test(passes_numeric, io_legalize_and_sram_annotate_change_nothing) {
  const char *text = "func main(b: fp32[2,4], a: fp32[2,4]) {\n  s = add(a, b);\n  r = relu(s);\n  return r, s;\n}\n";
  check_seeds(text, "io-legalize,sram-annotate", 0, NULL);
}

Test(passes_numeric, fp16_range_guard) {
  const char *text = "func main(x: fp16[2,4], y: fp16[4,3]) {\n  e = exp(x);\n  m = matmul(e, y);\n  s = reduce_sum(m);\n"
                     "  d = div(s, s);\n  return m, d;\n}\n";
  PassManagerOptions o = {.passes = "fp16-range-guard", .verify_each = true, .pass_options = {.fp16_range_guard = true}};
  char err[2048];
  for (uint64_t seed = 1; seed <= 3; seed++)
    cr_assert(eval_pass_preserves_opts(text, &o, seed, 0, NULL, NULL, err, sizeof err), "%s", err);
  Parsed p;
  parsed_open(&p, text);
  cr_assert(passes_run(p.m, &o, &p.d), "%s", p.diags.data);
  int clips = 0;
  IR_FOR_EACH_OP(p.m, ir_func_lookup(p.m, "main"), op) clips += ir_op(p.m, op)->kind == OP_CLIP;
  cr_assert_eq(clips, 4);
  parsed_close(&p);
}

/* A dead call goes, and with it every function only it called (nested
 * callees too); a function still called, and every entry, stays. */
Test(passes_numeric, dce_deletes_functions_no_output_depends_on) {
  const char *text = "func sq(x: fp32[2]) {\n  y = mul(x, x);\n  return y;\n}\n"
                     "func twice(x: fp32[2]) {\n  s = call sq(x) as s;\n  t = add(s, s);\n  return t;\n}\n"
                     "func used(x: fp32[2]) {\n  y = exp(x);\n  return y;\n}\n"
                     "func main(x: fp32[2]) {\n  dead = call twice(x) as d;\n  u = call used(x) as u;\n"
                     "  r = relu(u);\n  return r;\n}\n";
  check_seeds(text, "dce", 0, NULL);
  Parsed p;
  parsed_open(&p, text);
  cr_assert(p.m, "%s", p.diags.data);
  PassManagerOptions o = {.passes = "dce", .verify_each = true};
  cr_assert(passes_run(p.m, &o, &p.d), "%s", p.diags.data);
  cr_assert_eq(ir_func_lookup(p.m, "twice"), 0);
  cr_assert_eq(ir_func_lookup(p.m, "sq"), 0);
  cr_assert_neq(ir_func_lookup(p.m, "used"), 0);
  cr_assert_neq(ir_func_lookup(p.m, "main"), 0);
  cr_assert_eq(count_after(text, "dce", OP_CALL), 1);
  parsed_close(&p);
}

/* ---- the manager ---- */

/* A pass that requires inlined IR does not run on calls: the manager says what to run first. */
Test(passes_numeric, manager_checks_what_a_pass_requires) {
  const char *text = "func f(x: fp32[4]) {\n  y = relu(x);\n  return y;\n}\n"
                     "func main(a: fp32[2], b: fp32[2]) {\n  c = concat(a, b, axis=0);\n  y = call f(c) as f;\n"
                     "  return y;\n}\n";
  Parsed p;
  parsed_open(&p, text);
  cr_assert(p.m, "%s", p.diags.data);
  PassManagerOptions o = {.passes = "split-concat", .verify_each = true};
  cr_assert_not(passes_run(p.m, &o, &p.d));
  cr_assert_str_eq(p.diags.data, "orionc: error: pass 'split-concat' requires calls to be inlined; run 'inline' before it\n");
  parsed_close(&p);
  parsed_open(&p, text);
  o.passes = "inline,split-concat";
  cr_assert(passes_run(p.m, &o, &p.d), "%s", p.diags.data);
  parsed_close(&p);
}

/* ---- inline ---- */

Test(passes_numeric, inline_without_params) {
  const char *text = "func sq(x: fp32[2,4]) {\n  y = mul(x, x);\n  return y;\n}\n"
                     "func f(x: fp32[2,4], b: fp32[4]) {\n  const two: fp32[] = 2;\n  s = call sq(x) as sq;\n"
                     "  t = mul(s, two);\n  u = add(t, b);\n  return u, s;\n}\n"
                     "func main(x: fp32[2,4], b: fp32[4]) {\n  p, q = call f(x, b) as l0;\n  r, s = call f(p, b) as l1;\n"
                     "  z = add(q, s);\n  return r, z;\n}\n";
  check_seeds(text, "inline", 0, NULL);
  cr_assert_eq(count_after(text, "inline", OP_CALL), 0);
}

/* Calls evaluated by recursion give each instance the weights inlining gives
 * it (seeds derived from the instance path), nested paths included. */
Test(passes_numeric, inline_with_random_params_and_nesting) {
  const char *text =
      "func mlp(x: fp32[1,3,4]) {\n  param up: fp32[8,4] = normal(seed=1, std=0.5);\n"
      "  param down: fp32[4,8] = uniform(seed=2, low=-0.5, high=0.5);\n  param b: fp32[8] = fill(0.25);\n"
      "  h = linear(x, up, b);\n  a = silu(h);\n  y = linear(a, down);\n  return y;\n}\n"
      "func layer(x: fp32[1,3,4]) {\n  param g: fp32[4] = normal(seed=3, mean=1, std=0.1);\n"
      "  n = rms_norm(x, g);\n  m = call mlp(n) as mlp;\n  y = add(x, m);\n  return y;\n}\n"
      "func main(x: fp32[1,3,4]) {\n  param w: fp32[4,4] = normal(seed=4);\n"
      "  h0 = call layer(x) as layers.0;\n  h1 = call layer(h0) as layers.1;\n  o = linear(h1, w);\n  return o;\n}\n"
      "func second(x: fp32[1,3,4]) {\n  y = call mlp(x) as layers.0.mlp;\n  return y;\n}\n";
  check_seeds(text, "inline", 1e-12, NULL);
  cr_assert_eq(count_after(text, "inline", OP_CALL), 0);
}

/* ---- whole pipelines on small transformer blocks ---- */

/* GPT-2 block scaled down: channels 16, 2 heads of 8, MLP 64, sequence 4,
 * vocabulary 50; token and position embeddings, two blocks, tied logits. */
static const char *GPT2_SMALL =
    "func block(x: fp16[1,4,16]) {\n"
    "  param ln_1.weight: fp16[16] = normal(seed=5, mean=1, std=0.1);\n"
    "  param ln_1.bias: fp16[16] = normal(seed=6, std=0.1);\n"
    "  param attn.c_attn.weight: fp16[48,16] = normal(seed=1, std=0.3);\n"
    "  param attn.c_attn.bias: fp16[48] = normal(seed=7, std=0.1);\n"
    "  param attn.c_proj.weight: fp16[16,16] = normal(seed=2, std=0.3);\n"
    "  param attn.c_proj.bias: fp16[16] = zeros;\n"
    "  param ln_2.weight: fp16[16] = ones;\n"
    "  param ln_2.bias: fp16[16] = zeros;\n"
    "  param mlp.c_fc.weight: fp16[64,16] = normal(seed=3, std=0.3);\n"
    "  param mlp.c_fc.bias: fp16[64] = fill(0.01);\n"
    "  param mlp.c_proj.weight: fp16[16,64] = normal(seed=4, std=0.2);\n"
    "  param mlp.c_proj.bias: fp16[16] = zeros;\n"
    "  ln1 = layer_norm(x, ln_1.weight, ln_1.bias, epsilon=1e-5);\n"
    "  qkv: fp16[1,4,48] = linear(ln1, attn.c_attn.weight, attn.c_attn.bias);\n"
    "  q, k, v = split(qkv, axis=-1, num_splits=3);\n"
    "  q4 = reshape(q, shape=[1, 4, 2, 8]);\n  k4 = reshape(k, shape=[1, 4, 2, 8]);\n"
    "  v4 = reshape(v, shape=[1, 4, 2, 8]);\n"
    "  qh: fp16[1,2,4,8] = transpose(q4, perm=[0, 2, 1, 3]);\n"
    "  kh = transpose(k4, perm=[0, 2, 1, 3]);\n  vh = transpose(v4, perm=[0, 2, 1, 3]);\n"
    "  att: fp16[1,2,4,8] = sdpa(qh, kh, vh, causal=true);\n"
    "  att_t = transpose(att, perm=[0, 2, 1, 3]);\n"
    "  att_m: fp16[1,4,16] = reshape(att_t, shape=[1, 4, 16]);\n"
    "  proj = linear(att_m, attn.c_proj.weight, attn.c_proj.bias);\n"
    "  a = add(x, proj);\n"
    "  ln2 = layer_norm(a, ln_2.weight, ln_2.bias, epsilon=1e-5);\n"
    "  fc: fp16[1,4,64] = linear(ln2, mlp.c_fc.weight, mlp.c_fc.bias);\n"
    "  act = gelu(fc, mode=\"tanh\");\n"
    "  mlp_out: fp16[1,4,16] = linear(act, mlp.c_proj.weight, mlp.c_proj.bias);\n"
    "  y = add(a, mlp_out);\n"
    "  return y;\n"
    "}\n"
    "func main(tokens: int32[1,4]) {\n"
    "  param wte: fp16[50,16] = normal(seed=8, std=0.5);\n"
    "  param wpe: fp16[4,16] = normal(seed=9, std=0.1);\n"
    "  param ln_f.weight: fp16[16] = ones;\n"
    "  param ln_f.bias: fp16[16] = zeros;\n"
    "  e = gather(wte, tokens, axis=0);\n"
    "  x = add(e, wpe);\n"
    "  h0 = call block(x) as h.0;\n"
    "  h1 = call block(h0) as h.1;\n"
    "  hf = layer_norm(h1, ln_f.weight, ln_f.bias, epsilon=1e-5);\n"
    "  logits: fp16[1,4,50] = linear(hf, wte);\n"
    "  return logits;\n"
    "}\n";

static const EvalIntRange GPT2_TOKENS[] = {{"tokens", 0, 50}, {NULL, 0, 0}};

Test(passes_numeric, gpt2_block_small_O0) {
  check_seeds(GPT2_SMALL, "O0", 1e-9, GPT2_TOKENS);
  cr_assert_eq(count_after(GPT2_SMALL, "O0", OP_SDPA), 0);
  cr_assert_eq(count_after(GPT2_SMALL, "O0", OP_CALL), 0);
}

Test(passes_numeric, gpt2_block_small_each_pass) {
  check_pass_preserves_ranges(GPT2_SMALL, "inline", 4, 1e-9, GPT2_TOKENS);
  check_pass_preserves_ranges(GPT2_SMALL, "decompose-attention", 5, 1e-9, GPT2_TOKENS);
  check_pass_preserves_ranges(GPT2_SMALL, "inline,decompose-attention", 6, 1e-9, GPT2_TOKENS);
  check_pass_preserves_ranges(GPT2_SMALL, "O1", 7, 1e-9, GPT2_TOKENS);
}

/* Llama block scaled down: dim 16, 2 heads of 8, SwiGLU hidden 32, sequence
 * 4; rms_norm, RoPE with neg, causal sdpa: every legalizing pass has work. */
static const char *LLAMA_SMALL =
    "func block(x: fp32[1,4,16], cos: fp32[1,1,4,8], sin: fp32[1,1,4,8]) {\n"
    "  param input_layernorm.weight: fp32[16] = normal(seed=10, mean=1, std=0.1);\n"
    "  param self_attn.q_proj.weight: fp32[16,16] = normal(seed=1, std=0.3);\n"
    "  param self_attn.k_proj.weight: fp32[16,16] = normal(seed=2, std=0.3);\n"
    "  param self_attn.v_proj.weight: fp32[16,16] = normal(seed=3, std=0.3);\n"
    "  param self_attn.o_proj.weight: fp32[16,16] = normal(seed=4, std=0.3);\n"
    "  param post_attention_layernorm.weight: fp32[16] = ones;\n"
    "  param mlp.gate_proj.weight: fp32[32,16] = normal(seed=5, std=0.3);\n"
    "  param mlp.up_proj.weight: fp32[32,16] = normal(seed=6, std=0.3);\n"
    "  param mlp.down_proj.weight: fp32[16,32] = normal(seed=7, std=0.3);\n"
    "  n = rms_norm(x, input_layernorm.weight, epsilon=1e-5);\n"
    "  q = linear(n, self_attn.q_proj.weight);\n  k = linear(n, self_attn.k_proj.weight);\n"
    "  v = linear(n, self_attn.v_proj.weight);\n"
    "  q4 = reshape(q, shape=[1, 4, 2, 8]);\n  k4 = reshape(k, shape=[1, 4, 2, 8]);\n"
    "  v4 = reshape(v, shape=[1, 4, 2, 8]);\n"
    "  qh = transpose(q4, perm=[0, 2, 1, 3]);\n  kh = transpose(k4, perm=[0, 2, 1, 3]);\n"
    "  vh = transpose(v4, perm=[0, 2, 1, 3]);\n"
    "  q_lo = slice(qh, begin=[0, 0, 0, 0], end=[1, 2, 4, 4]);\n"
    "  q_hi = slice(qh, begin=[0, 0, 0, 4], end=[1, 2, 4, 8]);\n"
    "  q_hi_neg = neg(q_hi);\n  q_rot = concat(q_hi_neg, q_lo, axis=-1);\n"
    "  q_cos = mul(qh, cos);\n  q_sin = mul(q_rot, sin);\n  qr = add(q_cos, q_sin);\n"
    "  k_lo = slice(kh, begin=[0, 0, 0, 0], end=[1, 2, 4, 4]);\n"
    "  k_hi = slice(kh, begin=[0, 0, 0, 4], end=[1, 2, 4, 8]);\n"
    "  k_hi_neg = neg(k_hi);\n  k_rot = concat(k_hi_neg, k_lo, axis=-1);\n"
    "  k_cos = mul(kh, cos);\n  k_sin = mul(k_rot, sin);\n  kr = add(k_cos, k_sin);\n"
    "  att = sdpa(qr, kr, vh, causal=true);\n"
    "  att_t = transpose(att, perm=[0, 2, 1, 3]);\n  att_m = reshape(att_t, shape=[1, 4, 16]);\n"
    "  o = linear(att_m, self_attn.o_proj.weight);\n  h = add(x, o);\n"
    "  m = rms_norm(h, post_attention_layernorm.weight, epsilon=1e-5);\n"
    "  gate = linear(m, mlp.gate_proj.weight);\n  up = linear(m, mlp.up_proj.weight);\n"
    "  gate_act = silu(gate);\n  gated = mul(gate_act, up);\n"
    "  down = linear(gated, mlp.down_proj.weight);\n  y = add(h, down);\n  return y;\n"
    "}\n"
    "func main(tokens: int32[1,4], cos: fp32[1,1,4,8], sin: fp32[1,1,4,8]) {\n"
    "  param embed: fp32[40,16] = normal(seed=8, std=0.5);\n"
    "  param norm.weight: fp32[16] = ones;\n"
    "  x = gather(embed, tokens);\n"
    "  h0 = call block(x, cos, sin) as layers.0;\n"
    "  h1 = call block(h0, cos, sin) as layers.1;\n"
    "  hn = rms_norm(h1, norm.weight, epsilon=1e-5);\n"
    "  logits = linear(hn, embed);\n"
    "  return logits;\n"
    "}\n";

Test(passes_numeric, llama_block_small_O0) {
  static const EvalIntRange tokens[] = {{"tokens", 0, 40}, {NULL, 0, 0}};
  check_seeds(LLAMA_SMALL, "O0", 1e-9, tokens);
  cr_assert_eq(count_after(LLAMA_SMALL, "O0", OP_RMS_NORM), 0);
  cr_assert_eq(count_after(LLAMA_SMALL, "O0", OP_NEG), 0);
  cr_assert_eq(count_after(LLAMA_SMALL, "O0", OP_SDPA), 0);
  check_pass_preserves_ranges(LLAMA_SMALL, "inline,lower-neg,lower-rms-norm", 9, 1e-9, tokens);
  check_pass_preserves_ranges(LLAMA_SMALL, "O1", 10, 1e-9, tokens);
}

/* passes_legalize is the O0 pipeline */
Test(passes_numeric, legalize_is_O0) {
  Parsed a, b;
  parsed_open(&a, GPT2_SMALL);
  parsed_open(&b, GPT2_SMALL);
  cr_assert(a.m && b.m);
  cr_assert(passes_legalize(a.m, &a.d), "%s", a.diags.data);
  PassManagerOptions o = {.pipeline = "O0"};
  cr_assert(passes_run(b.m, &o, &b.d), "%s", b.diags.data);
  IrType t = {.dtype = DT_INT32, .rank = 2, .dims = {1, 4}};
  EvalTensor tok = eval_random_ints(&t, 11, 0, 50);
  EvalTensor *oa, *ob;
  char err[1024];
  cr_assert(ir_eval(a.m, ir_func_lookup(a.m, "main"), &tok, &oa, err, sizeof err), "%s", err);
  cr_assert(ir_eval(b.m, ir_func_lookup(b.m, "main"), &tok, &ob, err, sizeof err), "%s", err);
  cr_assert_eq(eval_max_abs_diff(&oa[0], &ob[0]), 0);
  eval_tensors_free(oa, 1);
  eval_tensors_free(ob, 1);
  eval_tensor_free(&tok);
  parsed_close(&a);
  parsed_close(&b);
}

/* Scores of two concats (rotary halves): the product splits over one
 * operand and the weight slices of the other collapse onto its parts. */
Test(passes_numeric, split_concat_product_of_two_concats) {
  check_pass_preserves("func main(a: fp32[2,4,4], b: fp32[2,4,4], c: fp32[2,4,4], d: fp32[2,4,4]) {\n"
                       "  q = concat(a, b, axis=-1);\n"
                       "  k = concat(c, d, axis=-1);\n"
                       "  s = matmul(q, k, transpose_y=true);\n"
                       "  return s;\n}\n",
                       "(split-concat,identity-elim,dce)", 7, 1e-12);
}

/* layer_norm written out in element-wise ops, over the last axis, over
 * channels, and over two axes listed out of order (gamma transposed). */
Test(passes_numeric, lower_layer_norm) {
  check_seeds("func main(x: fp32[2,3,8]) {\n  param g: fp32[8] = uniform(seed=1, low=0.5, high=1.5);\n"
              "  param b: fp32[8] = uniform(seed=2, low=-1, high=1);\n  y = layer_norm(x, g, b);\n  return y;\n}\n",
              "lower-layer-norm", 1e-9, NULL);
  check_seeds("func main(x: fp32[1,8,1,4]) {\n  param g: fp32[8] = uniform(seed=3, low=0.5, high=1.5);\n"
              "  y = layer_norm(x, g, axes=[1], epsilon=1e-3);\n  return y;\n}\n",
              "lower-layer-norm", 1e-9, NULL);
  check_seeds("func main(x: fp32[2,3,4]) {\n  param g: fp32[4,3] = uniform(seed=4, low=0.5, high=1.5);\n"
              "  param b: fp32[4,3] = uniform(seed=5, low=-1, high=1);\n  y = layer_norm(x, g, b, axes=[2,1]);\n"
              "  return y;\n}\n",
              "lower-layer-norm", 1e-9, NULL);
}
