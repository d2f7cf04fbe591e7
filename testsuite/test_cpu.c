/*
 * The CPU reference backend (runtime/cpu.c) against the IR reference
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
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "ir_eval.h"
#include "orion/cpu.h"
#include "orion/fp16.h"
#include "orion/package.h"
#include "orion/passes.h"

static char dir[64];

static void make_dir(void) {
  snprintf(dir, sizeof dir, "/tmp/orion-cpu-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
}

static void cleanup(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

/* `text` with every "$F" replaced by dt ("fp16" or "fp32"); caller frees. */
static char *with_dtype(const char *text, const char *dt) {
  StrBuf sb;
  sb_init(&sb);
  for (const char *s = text; *s;) {
    if (s[0] == '$' && s[1] == 'F') {
      sb_puts(&sb, dt);
      s += 2;
    } else {
      sb_putc(&sb, *s++);
    }
  }
  return sb.data;
}

/* Compiles text into dir/name.anepkg as orionc does. */
static void compile_pkg(const char *text, const char *path) {
  Parsed p;
  parsed_open(&p, text);
  cr_assert_not_null(p.m, "%s", p.diags.data);
  cr_assert(passes_legalize(p.m, &p.d), "%s", p.diags.data);
  PackageOptions po = {.target = MIL_IOS18, .source_name = "t.oir", .source_text = text, .source_len = strlen(text)};
  cr_assert(package_write(p.m, path, &po, &p.d), "%s", p.diags.data);
  parsed_close(&p);
}

static MilDType mil_dt(IrDType t) {
  switch (t) {
  case DT_FP16: return MIL_DT_FP16;
  case DT_FP32: return MIL_DT_FP32;
  case DT_INT32: return MIL_DT_INT32;
  case DT_BOOL: return MIL_DT_BOOL;
  default: cr_assert_fail("dtype %s is not used by these tests", ir_dtype_name(t)); return MIL_DT_NONE;
  }
}

static CpuTensor to_cpu(const EvalTensor *e) {
  CpuTensor t = {.dtype = mil_dt(e->type.dtype), .rank = e->type.rank};
  uint64_t n = ir_type_elements(&e->type);
  for (uint32_t i = 0; i < t.rank; i++) t.dims[i] = e->type.dims[i];
  t.data = xcalloc(n ? n : 1, cpu_dtype_size(t.dtype));
  for (uint64_t i = 0; i < n; i++) {
    double v = e->data[i];
    switch (t.dtype) {
    case MIL_DT_FP16: ((uint16_t *)t.data)[i] = fp16_from_double(v); break;
    case MIL_DT_FP32: ((float *)t.data)[i] = (float)v; break;
    case MIL_DT_INT32: ((int32_t *)t.data)[i] = (int32_t)v; break;
    default: ((bool *)t.data)[i] = v != 0; break;
    }
  }
  return t;
}

static double cpu_elem(const CpuTensor *t, uint64_t i) {
  switch (t->dtype) {
  case MIL_DT_FP16: return (double)fp16_to_float(((const uint16_t *)t->data)[i]);
  case MIL_DT_FP32: return (double)((const float *)t->data)[i];
  case MIL_DT_INT32: return ((const int32_t *)t->data)[i];
  default: return ((const bool *)t->data)[i] ? 1 : 0;
  }
}

/* |a - b| / max(1, |b|); equal infinities and NaN against NaN are 0. */
static double err_of(double a, double b) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b) ? 0 : HUGE_VAL;
  if (isinf(a) || isinf(b)) return a == b ? 0 : HUGE_VAL;
  return fabs(a - b) / fmax(1.0, fabs(b));
}

/* A named integer input's range [low, high) (gather indices). */
typedef struct IntRange {
  const char *input;
  int64_t low, high;
} IntRange;

/* Loads a package (or bare directory) and prepares function 0. */
typedef struct Loaded {
  SourceSet sources;
  Diag d;
  StrBuf diags;
  OrionProgram *p;
  CpuProgram *c;
} Loaded;

static void load(Loaded *l, const char *path, CpuNumerics mode) {
  srcset_init(&l->sources);
  diag_init(&l->d, &l->sources);
  sb_init(&l->diags);
  l->d.capture = &l->diags;
  l->p = orion_open(path, NULL, &l->d);
  cr_assert_not_null(l->p, "%s", l->diags.data);
  l->c = cpu_prepare(l->p, 0, mode, &l->d);
}

static void unload(Loaded *l) {
  cpu_free(l->c);
  orion_close(l->p);
  srcset_free(&l->sources);
  sb_free(&l->diags);
}

/* Compiles and runs `text` on the CPU and with ir_eval on the same random
 * inputs (seeded by seed); asserts every output is within tol and returns
 * the largest error. */
static double check(const char *label, const char *text, CpuNumerics mode, double tol, const IntRange *ranges,
                    uint64_t seed) {
  make_dir();
  char path[128];
  snprintf(path, sizeof path, "%s/m.anepkg", dir);
  compile_pkg(text, path);
  Loaded l;
  load(&l, path, mode);
  cr_assert_not_null(l.c, "%s: %s", label, l.diags.data);

  Parsed ref;
  parsed_open(&ref, text);
  cr_assert_not_null(ref.m, "%s", ref.diags.data);
  cr_assert(passes_legalize(ref.m, &ref.d), "%s", ref.diags.data);
  IrFuncId f = ir_func_lookup(ref.m, "main");
  IrFunc *fn = ir_func(ref.m, f);
  cr_assert_eq(fn->ninputs, orion_input_count(l.p, 0));
  cr_assert_eq(fn->noutputs, orion_output_count(l.p, 0));
  EvalTensor *in = xcalloc(fn->ninputs + 1, sizeof *in);
  CpuTensor *cin = xcalloc(fn->ninputs + 1, sizeof *cin);
  for (uint32_t i = 0; i < fn->ninputs; i++) {
    const IrValue *v = ir_value(ref.m, fn->inputs[i]);
    cr_assert_str_eq(v->name, orion_input(l.p, 0, i)->name);
    const IntRange *r = ranges;
    while (r && r->input && strcmp(r->input, v->name)) r++;
    uint64_t s = seed * 1000 + i;
    in[i] = r && r->input ? eval_random_ints(&v->type, s, r->low, r->high) : eval_random_input(&v->type, s);
    cin[i] = to_cpu(&in[i]);
  }
  EvalTensor *want = NULL;
  char err[1024];
  cr_assert(ir_eval(ref.m, f, in, &want, err, sizeof err), "%s: ir_eval: %s", label, err);
  CpuTensor *got = xcalloc(fn->noutputs + 1, sizeof *got);
  cr_assert(cpu_run(l.c, cin, got, &l.d), "%s: %s", label, l.diags.data);

  double worst = 0;
  for (uint32_t o = 0; o < fn->noutputs; o++) {
    const EvalTensor *w = &want[o];
    cr_assert_eq(got[o].dtype, mil_dt(w->type.dtype), "%s: output %u dtype", label, o);
    cr_assert_eq(got[o].rank, w->type.rank, "%s: output %u rank", label, o);
    for (uint32_t k = 0; k < w->type.rank; k++) cr_assert_eq(got[o].dims[k], w->type.dims[k]);
    uint64_t n = ir_type_elements(&w->type);
    for (uint64_t i = 0; i < n; i++) {
      double e = err_of(cpu_elem(&got[o], i), w->data[i]);
      cr_assert_leq(e, tol, "%s: output %u ('%s') element %llu: cpu %.9g, reference %.9g", label, o,
                    orion_output(l.p, 0, o)->name, (unsigned long long)i, cpu_elem(&got[o], i), w->data[i]);
      if (e > worst) worst = e;
    }
    cpu_tensor_free(&got[o]);
  }
  fprintf(stderr, "cpu %-28s %-4s max error %.3g (tolerance %g)\n", label, mode == CPU_NUMERICS_ANE ? "ane" : "fp32",
          worst, tol);
  free(got);
  eval_tensors_free(want, fn->noutputs);
  for (uint32_t i = 0; i < fn->ninputs; i++) {
    eval_tensor_free(&in[i]);
    free(cin[i].data);
  }
  free(in);
  free(cin);
  parsed_close(&ref);
  unload(&l);
  cleanup();
  return worst;
}

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

static char *example(const char *name) {
  const char *root = getenv("ORION_SOURCE_ROOT");
  cr_assert_not_null(root, "ORION_SOURCE_ROOT is not set");
  char path[1024];
  snprintf(path, sizeof path, "%s/examples/%s", root, name);
  char *data;
  size_t len;
  const char *err;
  cr_assert(read_file(path, 1u << 24, &data, &len, &err), "%s: %s", path, err);
  return data;
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

static void write_bare(const char *mil) {
  make_dir();
  char path[128];
  snprintf(path, sizeof path, "%s/model.mil", dir);
  const char *err;
  cr_assert(write_file_atomic(path, mil, strlen(mil), &err), "%s", err);
}

#define MIL_HEAD "program(1.3)\n[buildInfo = dict<string, string>({{\"coremlc-version\", \"3505.4.1\"}})]\n{\n"

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

/* ---- planned buffers, caller buffers, threads, weight updates ---- */

/* fp32 outputs land in the caller's buffers (written by the op that
 * computes them); fp16 outputs are converted into them; a returned input is
 * copied. The program runs twice into the same buffers with new inputs. */
Test(cpu, outputs_into_caller_buffers) {
  write_bare(MIL_HEAD "    func main<ios18>(tensor<fp32, [4]> x) {\n"
                      "        tensor<fp32, [4]> a = mul(x = x, y = fp32(2))[name = string(\"a\")];\n"
                      "        tensor<int32, [2]> shp = const()[name = string(\"shp\"), val = tensor<int32, [2]>([2, 2])];\n"
                      "        tensor<fp32, [2, 2]> r = reshape(shape = shp, x = a)[name = string(\"r\")];\n"
                      "        tensor<fp16, [4]> h = cast(dtype = string(\"fp16\"), x = x)[name = string(\"h\")];\n"
                      "    } -> (r, h, x);\n}\n");
  Loaded l;
  load(&l, dir, CPU_NUMERICS_FP32);
  cr_assert_not_null(l.c, "%s", l.diags.data);
  float r[4] = {0}, xo[4] = {0};
  uint16_t h[4] = {0};
  CpuTensor out[3] = {{.dtype = MIL_DT_FP32, .rank = 2, .dims = {2, 2}, .data = r},
                      {.dtype = MIL_DT_FP16, .rank = 1, .dims = {4}, .data = h},
                      {.dtype = MIL_DT_FP32, .rank = 1, .dims = {4}, .data = xo}};
  for (int round = 0; round < 2; round++) {
    float x[4] = {1, 2.5f, -3, (float)round};
    CpuTensor in = {.dtype = MIL_DT_FP32, .rank = 1, .dims = {4}, .data = x};
    cr_assert(cpu_run_into(l.c, &in, out, &l.d), "%s", l.diags.data);
    for (int i = 0; i < 4; i++) {
      cr_assert_float_eq(r[i], 2 * x[i], 0, "round %d r[%d]", round, i);
      cr_assert_float_eq(fp16_to_float(h[i]), x[i], 0, "round %d h[%d]", round, i);
      cr_assert_float_eq(xo[i], x[i], 0, "round %d x[%d]", round, i);
    }
  }
  /* A caller buffer of the wrong shape is refused, naming the output. */
  CpuTensor bad[3] = {out[0], out[1], out[2]};
  bad[0].dims[1] = 3;
  float x[4] = {0};
  CpuTensor in = {.dtype = MIL_DT_FP32, .rank = 1, .dims = {4}, .data = x};
  cr_assert_not(cpu_run_into(l.c, &in, bad, &l.d));
  cr_assert_not_null(strstr(l.diags.data, "output 0 ('r') must be tensor<fp32, [2, 2]>"), "%s", l.diags.data);
  unload(&l);
  cleanup();
}

/* Values whose lifetimes overlap must not share a planned buffer, and
 * values that are dead must let later ones reuse their memory: t1 and t2 are
 * alive together (t2 until the end), t3 reuses t1's place once t1 is dead.
 * A planner that reused a buffer too early would change y. */
Test(cpu, planned_buffers_reuse_only_dead_values) {
  write_bare(MIL_HEAD "    func main<ios18>(tensor<fp32, [256]> x) {\n"
                      "        tensor<fp32, [256]> t1 = add(x = x, y = fp32(1))[name = string(\"t1\")];\n"
                      "        tensor<fp32, [256]> t2 = mul(x = x, y = fp32(3))[name = string(\"t2\")];\n"
                      "        tensor<fp32, [256]> t3 = mul(x = t1, y = t1)[name = string(\"t3\")];\n"
                      "        tensor<fp32, [256]> t4 = add(x = t3, y = fp32(5))[name = string(\"t4\")];\n"
                      "        tensor<fp32, [256]> t5 = sub(x = t4, y = x)[name = string(\"t5\")];\n"
                      "        tensor<fp32, [256]> t6 = mul(x = t5, y = fp32(0.5))[name = string(\"t6\")];\n"
                      "        tensor<fp32, [256]> y = add(x = t6, y = t2)[name = string(\"y\")];\n"
                      "    } -> (y);\n}\n");
  Loaded l;
  load(&l, dir, CPU_NUMERICS_FP32);
  cr_assert_not_null(l.c, "%s", l.diags.data);
  /* Seven 1 KiB values, at most three alive at once (y is the caller's). */
  cr_assert_leq(cpu_planned_bytes(l.c), 4 * 1024, "planned %zu bytes", cpu_planned_bytes(l.c));
  float x[256], y[256];
  for (int i = 0; i < 256; i++) x[i] = (float)(i % 17) - 8;
  CpuTensor in = {.dtype = MIL_DT_FP32, .rank = 1, .dims = {256}, .data = x};
  CpuTensor out = {.dtype = MIL_DT_FP32, .rank = 1, .dims = {256}, .data = y};
  cr_assert(cpu_run_into(l.c, &in, &out, &l.d), "%s", l.diags.data);
  for (int i = 0; i < 256; i++) {
    float v = x[i], t1 = v + 1, t4 = t1 * t1 + 5, want = (t4 - v) * 0.5f + v * 3;
    cr_assert_float_eq(y[i], want, 0, "y[%d] = %g, want %g", i, (double)y[i], (double)want);
  }
  unload(&l);
  cleanup();
}

/* The GPT-2 example (two blocks, fp16 weights read in place) gives the same
 * bits with 1, 2 and 3 threads, in both numerics modes. */
Test(cpu, threads_give_identical_results, .timeout = 120) {
  char *text = example("gpt2_block.oir");
  make_dir();
  char path[128];
  snprintf(path, sizeof path, "%s/m.anepkg", dir);
  compile_pkg(text, path);
  free(text);
  for (int mode = 0; mode < 2; mode++) {
    uint16_t *first = NULL;
    for (uint32_t threads = 1; threads <= 3; threads++) {
      Loaded l;
      srcset_init(&l.sources);
      diag_init(&l.d, &l.sources);
      sb_init(&l.diags);
      l.d.capture = &l.diags;
      l.p = orion_open(path, NULL, &l.d);
      cr_assert_not_null(l.p, "%s", l.diags.data);
      CpuOptions o = {.numerics = mode == 0 ? CPU_NUMERICS_ANE : CPU_NUMERICS_FP32, .threads = threads};
      l.c = cpu_prepare_with(l.p, 0, &o, &l.d);
      cr_assert_not_null(l.c, "%s", l.diags.data);
      cr_assert_eq(cpu_threads(l.c), threads);
      const OrionTensorInfo *ii = orion_input(l.p, 0, 0), *oi = orion_output(l.p, 0, 0);
      size_t n = ii->bytes / 2;
      uint16_t *x = xcalloc(n, 2), *y = xcalloc(oi->bytes / 2, 2);
      for (size_t i = 0; i < n; i++) x[i] = fp16_from_float((float)((i * 7919) % 1000) / 500.0f - 1.0f);
      CpuTensor in = {.dtype = ii->dtype, .rank = ii->rank, .data = x};
      CpuTensor out = {.dtype = oi->dtype, .rank = oi->rank, .data = y};
      memcpy(in.dims, ii->dims, sizeof in.dims);
      memcpy(out.dims, oi->dims, sizeof out.dims);
      cr_assert(cpu_run_into(l.c, &in, &out, &l.d), "%s", l.diags.data);
      if (!first) {
        first = y;
        bool finite = true;
        for (size_t i = 0; i < oi->bytes / 2; i++) finite = finite && isfinite(fp16_to_float(y[i]));
        cr_assert(finite);
      } else {
        cr_assert(memcmp(first, y, oi->bytes) == 0, "%u threads differ from 1 (mode %d)", threads, mode);
        free(y);
      }
      free(x);
      unload(&l);
    }
    free(first);
  }
  cleanup();
}

/* cpu_set_weight replaces one BLOBFILE const (fp32 or fp16 data, converted
 * to the declared dtype) without re-planning; cpu_reload_weights re-reads
 * every BLOBFILE const from the loaded program. The fp16 weight w is large
 * enough to be read in place by linear (converted panel by panel). */
Test(cpu, set_and_reload_weights) {
  const char *text = "func main(x: fp16[2,64]) {\n"
                     "  param w: fp16[128,64] = normal(seed=5, std=0.1);\n"
                     "  param b: fp32[128] = normal(seed=6, std=0.1);\n"
                     "  y = linear(x, w);\n"
                     "  yc = cast(y, dtype=\"fp32\");\n"
                     "  z = add(yc, b);\n"
                     "  return z;\n"
                     "}\n";
  make_dir();
  char path[128];
  snprintf(path, sizeof path, "%s/m.anepkg", dir);
  compile_pkg(text, path);
  Loaded l;
  load(&l, path, CPU_NUMERICS_FP32);
  cr_assert_not_null(l.c, "%s", l.diags.data);
  const OrionWeight *ww = NULL, *wb = NULL;
  for (uint32_t i = 0; i < orion_weight_count(l.p, 0); i++) {
    const OrionWeight *w = orion_weight(l.p, 0, i);
    if (w->size == 128 * 64 * 2) ww = w;
    if (w->size == 128 * 4) wb = w;
  }
  cr_assert(ww && wb, "weights not found");
  uint16_t x[128];
  for (int i = 0; i < 128; i++) x[i] = fp16_from_float((float)(i % 9) - 4);
  CpuTensor in = {.dtype = MIL_DT_FP16, .rank = 2, .dims = {2, 64}, .data = x};
  float z0[256], z1[256];
  CpuTensor out = {.dtype = MIL_DT_FP32, .rank = 2, .dims = {2, 128}, .data = z0};
  cr_assert(cpu_run_into(l.c, &in, &out, &l.d), "%s", l.diags.data);

  /* w := 0.5 everywhere (fp32 data), b := 1 (fp16 data): z = 0.5 * sum(x row) + 1. */
  float *w = xcalloc(128 * 64, sizeof *w);
  uint16_t bh[128];
  for (int i = 0; i < 128 * 64; i++) w[i] = 0.5f;
  for (int i = 0; i < 128; i++) bh[i] = fp16_from_float(1);
  cr_assert(cpu_set_weight(l.c, ww->name, MIL_DT_FP32, w, 128 * 64 * 4, &l.d), "%s", l.diags.data);
  cr_assert(cpu_set_weight(l.c, wb->name, MIL_DT_FP16, bh, sizeof bh, &l.d), "%s", l.diags.data);
  out.data = z1;
  cr_assert(cpu_run_into(l.c, &in, &out, &l.d), "%s", l.diags.data);
  for (int r = 0; r < 2; r++) {
    float s = 0;
    for (int k = 0; k < 64; k++) s += fp16_to_float(x[r * 64 + k]);
    for (int o = 0; o < 128; o++) cr_assert_float_eq(z1[r * 128 + o], 0.5f * s + 1, 1e-5, "z[%d][%d]", r, o);
  }

  /* Reloading reads the program's weights again: the first results come back. */
  cr_assert(cpu_reload_weights(l.c, &l.d), "%s", l.diags.data);
  cr_assert(cpu_run_into(l.c, &in, &out, &l.d), "%s", l.diags.data);
  cr_assert(memcmp(z0, z1, sizeof z0) == 0);

  /* Errors: unknown name, wrong size, wrong dtype. */
  cr_assert_not(cpu_set_weight(l.c, "nope", MIL_DT_FP32, w, 4, &l.d));
  cr_assert_not_null(strstr(l.diags.data, "has no BLOBFILE weight 'nope'"), "%s", l.diags.data);
  cr_assert_not(cpu_set_weight(l.c, ww->name, MIL_DT_FP32, w, 100, &l.d));
  cr_assert_not_null(strstr(l.diags.data, "but 100 bytes were given"), "%s", l.diags.data);
  cr_assert_not(cpu_set_weight(l.c, ww->name, MIL_DT_INT32, w, 128 * 64 * 4, &l.d));
  cr_assert_not_null(strstr(l.diags.data, "give fp16 or fp32"), "%s", l.diags.data);
  free(w);
  unload(&l);
  cleanup();
}

/* ANE mode rounds every fp16 result with the hardware conversion when the
 * CPU has one: it must agree bit for bit with fp16_from_float, including
 * ties, subnormals, overflow to inf and the largest finite values. */
Test(cpu, ane_rounding_matches_fp16_from_float) {
  enum { N = 4096 };
  write_bare(MIL_HEAD "    func main<ios18>(tensor<fp32, [4096]> x) {\n"
                      "        tensor<fp16, [4096]> y = mul(x = x, y = fp32(1))[name = string(\"y\")];\n"
                      "    } -> (y);\n}\n");
  Loaded l;
  load(&l, dir, CPU_NUMERICS_ANE);
  cr_assert_not_null(l.c, "%s", l.diags.data);
  static float x[N];
  static uint16_t y[N];
  uint32_t s = 12345;
  for (int i = 0; i < N; i++) {
    s = s * 1664525u + 1013904223u;
    uint32_t u = s;
    if (i % 4 == 1) u = (u & 0x80000000u) | (0x33000000u + (u & 0x01FFFFFFu)); /* around fp16's subnormals */
    if (i % 4 == 2) u = (u & 0x80000000u) | (0x477F0000u + (u & 0x0001FFFFu)); /* around 65504 */
    if (i % 4 == 3) u = (u & 0xFFFFE000u) | 0x1000u;                           /* exact ties */
    memcpy(&x[i], &u, 4);
    if (isnan(x[i])) x[i] = 1;
  }
  CpuTensor in = {.dtype = MIL_DT_FP32, .rank = 1, .dims = {N}, .data = x};
  CpuTensor out = {.dtype = MIL_DT_FP16, .rank = 1, .dims = {N}, .data = y};
  cr_assert(cpu_run_into(l.c, &in, &out, &l.d), "%s", l.diags.data);
  for (int i = 0; i < N; i++)
    cr_assert_eq(y[i], fp16_from_float(x[i]), "x = %a: got 0x%04x, want 0x%04x", (double)x[i], y[i],
                 fp16_from_float(x[i]));
  unload(&l);
  cleanup();
}
