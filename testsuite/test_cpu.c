/*
 * The CPU reference backend (runtime/cpu/) against the IR reference
 * evaluator (testsuite/ir_eval.c).
 *
 * Each program is compiled the way orionc does it (parse, legalize, write a
 * package), loaded with orion_open and run by the CPU interpreter on seeded
 * random inputs; the same .oir, parsed and legalized separately, is
 * evaluated by ir_eval (exact double arithmetic) on the same inputs, and
 * every output is compared. The reference is legalized so that what is
 * compared is the backend, not the compiler's deliberate rewrites (exact
 * gelu becomes the tanh form, which differs by up to ~3e-4; sdpa and rms_norm
 * are decomposed; concatenated outputs are split). The error measure is |cpu - ref| / max(1, |ref|):
 * relative for large values, absolute below 1 (softmax probabilities and
 * values that cancel to near zero would make a pure relative error
 * meaningless).
 *
 * Tolerances:
 *   fp32 programs, FP32 mode: 1e-5. Each op's result is rounded to fp32
 *     (2^-24 relative), and the chains below are at most ~30 ops deep.
 *   fp16 programs, ANE mode: 2e-2. Every op rounds to fp16 (2^-11 = 4.9e-4
 *     relative each); over ~30 dependent ops, through exp/pow/rsqrt that
 *     amplify relative error, that grows to ~1e-2; legalization also writes
 *     decomposition constants (gelu's sqrt(2/pi), ...) as fp16 consts.
 * The largest error of each case is printed to stderr for the record.
 *
 * Hand-written MIL in bare directories covers what the compiler does not
 * emit from .oir (concat with interleave, negative-stride slices, literal
 * operands) with hand-computed values, and the unsupported-op error.
 *
 * The other CPU backend tests share its helpers (cpu_check.c):
 * test_cpu_buffers.c (buffers, threads, weight updates), test_cpu_ops.c and
 * test_cpu_ops_corpus.c (the remaining MIL ops by hand and against naive
 * references), test_cpu_fusion.c (fused kernels give the unfused bits).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cpu_check.h"
#include "orion/blob.h"
#include "orion/fp16.h"
#include "orion/package.h"
#include "orion/passes.h"

#define TOL_FP32 1e-5
#define TOL_ANE 2e-2

/* Runs a "$F" program as fp32 in FP32 mode and as fp16 in ANE mode. */
static void check_both(const char *label, const char *text, const IntRange *ranges, uint64_t seed) {
  char *t32 = with_dtype(text, "fp32"), *t16 = with_dtype(text, "fp16");
  check(label, t32, CPU_NUMERICS_FP32, TOL_FP32, ranges, seed);
  check(label, t16, CPU_NUMERICS_ANE, TOL_ANE, ranges, seed);
  free(t32);
  free(t16);
}

/* ---- compiled programs against ir_eval ---- */

Test(cpu, elementwise_chain) {
  check_both("elementwise",
             "func main(a: $F[2,3], b: $F[3], c: bool[2,3]) {\n"
             "  const one: $F[] = 1;\n"
             "  s = add(a, b);\n  d = sub(s, b);\n  m = mul(d, a);\n"
             "  ab = abs(b);\n  den = add(ab, one);\n  q = div(m, den);\n"
             "  qa = abs(q);\n  p = pow(qa, b);\n"
             "  mx = maximum(p, a);\n  mn = minimum(mx, b);\n  r = relu(mn);\n  t = tanh(r);\n"
             "  sg = sigmoid(m);\n  sl = silu(m);\n  ge = gelu(sl);\n  gt = gelu(ge, mode=\"tanh\");\n"
             "  e = exp(gt);\n  l = log(e, epsilon=1e-6);\n  sq = sqrt(e);\n  rs = rsqrt(e);\n"
             "  ng = neg(rs);\n  id = identity(ng);\n  cl = clip(a, min=-1, max=inf);\n  cl2 = clip(s, min=-0.5, max=0.5);\n"
             "  y = select(c, cl, a);\n"
             "  return y, t, sg, p, ge, gt, l, sq, id, cl2, mx, q;\n}\n",
             NULL, 1);
}

Test(cpu, long_chain) {
  /* a deeper dependent chain, to see how fp16 rounding accumulates */
  check_both("long_chain",
             "func main(a: $F[4,8], b: $F[8]) {\n"
             "  const h: $F[] = 0.5;\n"
             "  x1 = add(a, b);\n  x2 = mul(x1, h);\n  x3 = tanh(x2);\n  x4 = add(x3, a);\n  x5 = silu(x4);\n"
             "  x6 = mul(x5, b);\n  x7 = sigmoid(x6);\n  x8 = add(x7, x1);\n  x9 = gelu(x8);\n  x10 = sub(x9, b);\n"
             "  x11 = mul(x10, h);\n  x12 = exp(x11);\n  x13 = rsqrt(x12);\n  x14 = add(x13, x3);\n  x15 = relu(x14);\n"
             "  x16 = add(x15, x2);\n  x17 = tanh(x16);\n  x18 = mul(x17, x4);\n  x19 = add(x18, x7);\n  x20 = gelu(x19, mode=\"tanh\");\n"
             "  return x20;\n}\n",
             NULL, 2);
}

Test(cpu, matmul_transposes_broadcasting) {
  check_both("matmul",
             "func main(a: $F[2,3,4,5], b: $F[5,6], c: $F[3,6,5], v: $F[5], w: $F[1,4,3]) {\n"
             "  m1 = matmul(a, b);\n"
             "  m2 = matmul(a, c, transpose_y=true);\n"
             "  m3 = matmul(a, v);\n"
             "  m4 = matmul(w, a, transpose_x=true);\n"
             "  m5 = matmul(v, b);\n"
             "  m6 = matmul(c, v);\n"
             "  return m1, m2, m3, m4, m5, m6;\n}\n",
             NULL, 3);
}

Test(cpu, conv_and_linear) {
  check_both("conv_linear",
             "func main(x: $F[1,8,5,16], h: $F[2,16,8], z: $F[2,4,9]) {\n"
             "  param w: $F[4,8,3,3] = normal(seed=1, std=0.1);\n"
             "  param bias: $F[4] = normal(seed=5, std=1);\n"
             "  param dw: $F[8,1,1,3] = normal(seed=6, std=0.5);\n"
             "  param gw: $F[6,4,2,2] = normal(seed=7, std=0.3);\n"
             "  param w1: $F[3,4,3] = normal(seed=8, std=0.3);\n"
             "  param lw: $F[6,8] = uniform(seed=2, low=-0.5, high=0.5);\n"
             "  param lb: $F[6] = normal(seed=3, std=1);\n"
             "  c1 = conv(x, w, bias, pad=[1,1,1,1]);\n"
             "  c2 = conv(x, dw, groups=8, pad=[0,0,1,1]);\n"
             "  c3 = conv(x, dw, groups=8, strides=[1,2], pad_type=\"same\");\n"
             "  c4 = conv(x, gw, groups=2, strides=[2,3], dilations=[1,2]);\n"
             "  c5 = conv(x, w, strides=[2,2], pad_type=\"same\");\n"
             "  c6 = conv(z, w1, pad=[2,1]);\n"
             "  l1 = linear(h, lw, lb);\n  l2 = linear(h, lw);\n"
             "  return c1, c2, c3, c4, c5, c6, l1, l2;\n}\n",
             NULL, 4);
}

Test(cpu, softmax_and_reductions) {
  check_both("softmax_reductions",
             "func main(x: $F[2,6,4]) {\n"
             "  s0 = softmax(x);\n  s1 = softmax(x, axis=1);\n  s2 = softmax(x, axis=0);\n"
             "  rs = reduce_sum(x, axes=[-1]);\n  rm = reduce_mean(x, axes=[0,2], keep_dims=true);\n"
             "  rx = reduce_max(x);\n  ra = reduce_sum(x, keep_dims=true);\n  rmx = reduce_max(x, axes=[1]);\n"
             "  return s0, s1, s2, rs, rm, rx, ra, rmx;\n}\n",
             NULL, 5);
}

Test(cpu, shape_ops) {
  static const IntRange ids[] = {{"ids", 0, 12}, {NULL, 0, 0}};
  check_both("shape_ops",
             "func main(x: $F[2,6,4], ids: int32[3]) {\n"
             "  r = reshape(x, shape=[-1,4]);\n"
             "  t = transpose(x, perm=[2,-3,1]);\n"
             "  s = slice(x, begin=[0,-4,1], end=[2,100,4], stride=[1,2,1]);\n"
             "  a, b = split(x, axis=1, num_splits=2);\n"
             "  c, d, e = split(x, axis=-1, split_sizes=[1,2,1]);\n"
             "  f = cast(a, dtype=\"fp32\");\n"
             "  g = gather(r, ids);\n"
             "  g2 = gather(x, ids, axis=1);\n"
             "  return r, t, s, a, b, c, d, e, f, g, g2;\n}\n",
             ids, 6);
}

Test(cpu, cast) {
  check("cast", "func main(x: fp32[2,5], i: int32[2,5], m: bool[2,5]) {\n"
        "  const s: fp32[] = 3;\n"
        "  xs = mul(x, s);\n"
        "  a = cast(xs, dtype=\"int32\");\n  b = cast(xs, dtype=\"bool\");\n  c = cast(m, dtype=\"fp32\");\n"
        "  d = cast(i, dtype=\"fp16\");\n  e = cast(i, dtype=\"bool\");\n  h = cast(xs, dtype=\"fp16\");\n"
        "  k = cast(h, dtype=\"fp32\");\n  n = cast(a, dtype=\"fp32\");\n  j = add(i, a);\n"
        "  return a, b, c, d, e, h, k, n, j;\n}\n",
        CPU_NUMERICS_FP32, TOL_FP32, NULL, 7);
}

Test(cpu, layer_norm_and_rms_norm) {
  check_both("norms",
             "func main(x: $F[1,8,1,16], h: $F[2,16,8], y: $F[2,3,4]) {\n"
             "  param g: $F[8] = normal(seed=1, std=1);\n"
             "  param beta: $F[8] = normal(seed=2, std=1);\n"
             "  param g2: $F[4,3] = normal(seed=3, std=1);\n"
             "  ln = layer_norm(h, g, beta, epsilon=1e-5);\n"
             "  ln0 = layer_norm(h);\n"
             "  ln2 = layer_norm(y, g2, axes=[2, 1], epsilon=1e-3);\n"
             "  rn = rms_norm(x, g, axes=[1], epsilon=1e-6);\n"
             "  rn2 = rms_norm(h, g);\n"
             "  return ln, ln0, ln2, rn, rn2;\n}\n",
             NULL, 8);
}

Test(cpu, select_and_gather) {
  static const IntRange ids[] = {{"ids", 0, 5}, {NULL, 0, 0}};
  check_both("select_gather",
             "func main(c: bool[3,1], a: $F[4], b: $F[3,4], e: $F[5,3], ids: int32[2,3]) {\n"
             "  const k: $F[] = -7;\n"
             "  s1 = select(c, a, b);\n  s2 = select(c, k, b);\n"
             "  g = gather(e, ids);\n  g1 = gather(e, ids, axis=0);\n"
             "  return s1, s2, g, g1;\n}\n",
             ids, 9);
}

Test(cpu, decomposed_attention) {
  check_both("attention",
             "func main(q: $F[1,2,4,8], k: $F[1,2,6,8], v: $F[1,2,6,8], keep: bool[4,6], bias: $F[1,1,4,6]) {\n"
             "  a = sdpa(q, k, v, causal=true);\n"
             "  b = sdpa(q, k, v, keep, scale=0.25);\n"
             "  c = sdpa(q, k, v, bias);\n"
             "  return a, b, c;\n}\n",
             NULL, 10);
}

Test(cpu, tiny_mlp_example) {
  char *text = example("tiny_mlp.oir");
  check("tiny_mlp", text, CPU_NUMERICS_ANE, TOL_ANE, NULL, 11);
  /* The fp16 program in FP32 mode: no fp16 rounding between ops; the
   * difference from the exact reference is then only the fp16 consts that
   * legalization wrote for gelu, well below the ANE mode's. */
  double e = check("tiny_mlp", text, CPU_NUMERICS_FP32, 5e-3, NULL, 11);
  cr_assert_lt(e, 5e-3);
  free(text);
}

/* ---- hand-written MIL in a bare directory ---- */


Test(cpu, unsupported_op_is_reported) {
  write_bare(MIL_HEAD "    func main<ios18>(tensor<fp32, [2]> x) {\n"
                      "        tensor<fp32, [2]> a = relu(x = x)[name = string(\"a\")];\n"
                      "        tensor<fp32, [2]> y = frobnicate(x = a)[name = string(\"y\")];\n"
                      "    } -> (y);\n}\n");
  Loaded l;
  load(&l, dir, CPU_NUMERICS_FP32);
  cr_assert_null(l.c);
  char want[256];
  snprintf(want, sizeof want, "%s/model.mil:6:31: error: op 'frobnicate' is not supported by the CPU backend\n", dir);
  cr_assert_not_null(strstr(l.diags.data, want), "got:\n%s\nwant:\n%s", l.diags.data, want);
  unload(&l);
  cleanup();
}

/* Runs a bare program with one fp32 input x of nx elements into out. */
static void run_bare(Loaded *l, const float *x, int64_t nx, CpuTensor *out) {
  load(l, dir, CPU_NUMERICS_FP32);
  cr_assert_not_null(l->c, "%s", l->diags.data);
  CpuTensor in = {.dtype = MIL_DT_FP32, .rank = 1, .dims = {nx}, .data = (void *)(uintptr_t)x};
  cr_assert(cpu_run(l->c, &in, out, &l->d), "%s", l->diags.data);
}

Test(cpu, hand_written_shape_ops) {
  write_bare(MIL_HEAD
             "    func main<ios18>(tensor<fp32, [6]> x) {\n"
             "        tensor<int32, [2]> shp = const()[name = string(\"shp\"), val = tensor<int32, [2]>([2, 3])];\n"
             "        tensor<fp32, [2, 3]> r = reshape(shape = shp, x = x)[name = string(\"r\")];\n"
             "        tensor<fp32, [2, 3]> m = mul(x = r, y = fp32(10))[name = string(\"m\")];\n"
             "        tensor<fp32, [2, 6]> c = concat(axis = int32(1), interleave = bool(true), values = (r, m))[name = string(\"c\")];\n"
             "        tensor<fp32, [4, 3]> c0 = concat(axis = int32(-2), interleave = bool(false), values = (r, m))[name = string(\"c0\")];\n"
             "        tensor<fp32, [2, 2]> s = slice_by_index(begin = tensor<int32, [2]>([1, -1]), end = tensor<int32, [2]>([-3, -4]), stride = tensor<int32, [2]>([-1, -2]), x = r)[name = string(\"s\")];\n"
             "        tensor<fp32, [3]> q = slice_by_index(begin = tensor<int32, [2]>([1, 0]), end = tensor<int32, [2]>([2, 3]), squeeze_mask = tensor<bool, [2]>([true, false]), x = r)[name = string(\"q\")];\n"
             "        tensor<fp32, [6]> cl = clip(alpha = fp32(2), beta = fp32(4.5), x = x)[name = string(\"cl\")];\n"
             "        tensor<fp32, [6]> gs = gelu(mode = string(\"SIGMOID_APPROXIMATION\"), x = x)[name = string(\"gs\")];\n"
             "        tensor<fp32, [6]> ge = gelu(mode = string(\"EXACT\"), x = x)[name = string(\"ge\")];\n"
             "        tensor<fp32, [6]> gt = gelu(mode = string(\"TANH_APPROXIMATION\"), x = x)[name = string(\"gt\")];\n"
             "        tensor<fp32, [6]> sl = silu(x = x)[name = string(\"sl\")];\n"
             "    } -> (c, c0, s, q, cl, gs, ge, gt, sl);\n}\n");
  Loaded l;
  const float x[6] = {1, 2, 3, 4, 5, 6};
  CpuTensor out[9];
  run_bare(&l, x, 6, out);
  /* interleave: slice k of input j goes to position k*2 + j */
  const float c[12] = {1, 10, 2, 20, 3, 30, 4, 40, 5, 50, 6, 60};
  const float c0[12] = {1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 50, 60};
  const float s[4] = {6, 4, 3, 1}; /* rows 1..>0 reversed, columns -1, -3 */
  const float q[3] = {4, 5, 6};
  const float cl[6] = {2, 2, 3, 4, 4.5f, 4.5f};
  cr_assert_eq(out[0].dims[1], 6);
  for (int i = 0; i < 12; i++) cr_assert_float_eq(((float *)out[0].data)[i], c[i], 0, "c[%d]", i);
  for (int i = 0; i < 12; i++) cr_assert_float_eq(((float *)out[1].data)[i], c0[i], 0, "c0[%d]", i);
  for (int i = 0; i < 4; i++) cr_assert_float_eq(((float *)out[2].data)[i], s[i], 0, "s[%d]", i);
  cr_assert_eq(out[3].rank, 1);
  for (int i = 0; i < 3; i++) cr_assert_float_eq(((float *)out[3].data)[i], q[i], 0, "q[%d]", i);
  for (int i = 0; i < 6; i++) cr_assert_float_eq(((float *)out[4].data)[i], cl[i], 0, "cl[%d]", i);
  for (int i = 0; i < 6; i++) {
    double v = (double)x[i], want = v / (1 + exp(-1.702 * v));
    cr_assert_float_eq(((float *)out[5].data)[i], want, 1e-6 * want, "gs[%d]", i);
    want = 0.5 * v * (1 + erf(v / sqrt(2.0)));
    cr_assert_float_eq(((float *)out[6].data)[i], want, 1e-6 * want, "ge[%d]", i);
    want = 0.5 * v * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (v + 0.044715 * v * v * v)));
    cr_assert_float_eq(((float *)out[7].data)[i], want, 1e-6 * want, "gt[%d]", i);
    want = v / (1 + exp(-v));
    cr_assert_float_eq(((float *)out[8].data)[i], want, 1e-6 * want, "sl[%d]", i);
  }
  for (int i = 0; i < 9; i++) cpu_tensor_free(&out[i]);
  unload(&l);
  cleanup();
}

Test(cpu, ane_mode_rounds_to_fp16_and_overflows) {
  write_bare(MIL_HEAD "    func main<ios18>(tensor<fp16, [2]> x) {\n"
                      "        tensor<fp16, [2]> m = mul(x = x, y = fp16(0x1.8p+1))[name = string(\"m\")];\n"
                      "        tensor<fp16, [2]> z = sub(x = m, y = fp16(0x1.8p+1))[name = string(\"z\")];\n"
                      "        tensor<fp16, [2]> w = real_div(x = m, y = fp16(0x1p+2))[name = string(\"w\")];\n"
                      "    } -> (z, w);\n}\n");
  /* x0 = 32000: m = 96000 overflows fp16 (ANE mode: inf, so w = inf) but
   * not fp32 (w = 24000, an fp16 value). x1 = 1 + 2^-10: m = 3 + 1.5 * 2^-9
   * is a tie between fp16 neighbours and rounds to even, 3 + 2^-8, in ANE
   * mode (z = 2^-8); in FP32 mode z = 1.5 * 2^-9 exactly. */
  const uint16_t x[2] = {fp16_from_float(32000), fp16_from_float(1.0f + 0x1p-10f)};
  for (int mode = 0; mode < 2; mode++) {
    Loaded l;
    load(&l, dir, mode == 0 ? CPU_NUMERICS_ANE : CPU_NUMERICS_FP32);
    cr_assert_not_null(l.c, "%s", l.diags.data);
    CpuTensor in = {.dtype = MIL_DT_FP16, .rank = 1, .dims = {2}, .data = (void *)(uintptr_t)x}, out[2];
    cr_assert(cpu_run(l.c, &in, out, &l.d), "%s", l.diags.data);
    float z1 = fp16_to_float(((uint16_t *)out[0].data)[1]), w0 = fp16_to_float(((uint16_t *)out[1].data)[0]);
    if (mode == 0) {
      cr_assert(isinf(w0) && w0 > 0, "ane: %g", (double)w0);
      cr_assert_float_eq(z1, 0x1p-8f, 0);
    } else {
      cr_assert_float_eq(w0, 24000.0f, 0);
      cr_assert_float_eq(z1, 0x1.8p-9f, 0);
    }
    for (int i = 0; i < 2; i++) cpu_tensor_free(&out[i]);
    unload(&l);
  }
  cleanup();
}

Test(cpu, input_mismatch_is_reported) {
  write_bare(MIL_HEAD "    func main<ios18>(tensor<fp32, [2]> x) {\n"
                      "        tensor<fp32, [2]> y = relu(x = x)[name = string(\"y\")];\n"
                      "    } -> (y);\n}\n");
  Loaded l;
  load(&l, dir, CPU_NUMERICS_FP32);
  cr_assert_not_null(l.c, "%s", l.diags.data);
  float x[3] = {1, 2, 3};
  CpuTensor in = {.dtype = MIL_DT_FP32, .rank = 1, .dims = {3}, .data = x}, out[1];
  cr_assert_not(cpu_run(l.c, &in, out, &l.d));
  cr_assert_not_null(strstr(l.diags.data, "input 0 ('x') must be tensor<fp32, [2]>"), "%s", l.diags.data);
  cr_assert_null(out[0].data);
  unload(&l);
  cleanup();
}
