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
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include "ir_eval.h"
#include "orion/blob.h"
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
 * bits with 1, 2 and 3 threads, in both numerics modes, and with 2 threads
 * and check_finite (which fuses nothing: every linear layer then runs as its
 * transposes, conv and bias add). */
Test(cpu, threads_give_identical_results, .timeout = 120) {
  char *text = example("gpt2_block.oir");
  make_dir();
  char path[128];
  snprintf(path, sizeof path, "%s/m.anepkg", dir);
  compile_pkg(text, path);
  free(text);
  for (int mode = 0; mode < 2; mode++) {
    uint16_t *first = NULL;
    for (uint32_t run = 1; run <= 4; run++) {
      uint32_t threads = run == 4 ? 2 : run;
      Loaded l;
      srcset_init(&l.sources);
      diag_init(&l.d, &l.sources);
      sb_init(&l.diags);
      l.d.capture = &l.diags;
      l.p = orion_open(path, NULL, &l.d);
      cr_assert_not_null(l.p, "%s", l.diags.data);
      CpuOptions o = {.numerics = mode == 0 ? CPU_NUMERICS_ANE : CPU_NUMERICS_FP32, .threads = threads,
                      .check_finite = run == 4};
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
        cr_assert(memcmp(first, y, oi->bytes) == 0, "%u threads%s differ from 1 (mode %d)", threads,
                  run == 4 ? " unfused" : "", mode);
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

/* ---- the remaining MIL ops, --check-finite and profiling ----
 *
 * Each op: small cases worked out by hand (exact values), error texts, and a
 * larger case against a naive reference written here (plain loops in double,
 * independent of the backend's kernels), run with 1 and 3 threads (the bits
 * must agree). */

/* Loads the bare program in dir with options. */
static void load_opts(Loaded *l, const CpuOptions *o) {
  srcset_init(&l->sources);
  diag_init(&l->d, &l->sources);
  sb_init(&l->diags);
  l->d.capture = &l->diags;
  l->p = orion_open(dir, NULL, &l->d);
  cr_assert_not_null(l->p, "%s", l->diags.data);
  l->c = cpu_prepare_with(l->p, 0, o, &l->d);
}

static CpuTensor f32_tensor(float *data, uint32_t rank, const int64_t *dims) {
  CpuTensor t = {.dtype = MIL_DT_FP32, .rank = rank, .data = data};
  memcpy(t.dims, dims, rank * sizeof *dims);
  return t;
}

static float *out_f32(const CpuTensor *t) { return t->data; }
static bool *out_bool(const CpuTensor *t) { return t->data; }

/* Deterministic values in [-2, 2] in steps of 1/8 when coarse (so that
 * comparisons see equal values), else any float. */
static void fill_random(float *p, int64_t n, uint32_t seed, bool coarse) {
  uint32_t s = seed * 2654435761u + 12345u;
  for (int64_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    double u = (double)(s >> 8) / (double)(1u << 24);
    p[i] = coarse ? (float)(floor(u * 33) / 8 - 2) : (float)(u * 4 - 2);
  }
}

static int64_t prod(const int64_t *d, uint32_t r) {
  int64_t n = 1;
  for (uint32_t i = 0; i < r; i++) n *= d[i];
  return n;
}

/* The offset in an operand of dims `id` (rank ir, NumPy broadcasting) of
 * output element `flat` of dims `od` (rank orank). */
static int64_t bcast_index(int64_t flat, const int64_t *od, uint32_t orank, const int64_t *id, uint32_t ir) {
  int64_t off = 0, stride = 1;
  for (uint32_t k = 0; k < orank; k++) {
    uint32_t oi = orank - 1 - k;
    int64_t coord = flat % od[oi];
    flat /= od[oi];
    if (k >= ir) continue;
    uint32_t ii = ir - 1 - k;
    off += (id[ii] == 1 ? 0 : coord) * stride;
    stride *= id[ii];
  }
  return off;
}

/* Runs the program in dir with 1 and 3 threads in `mode`, checks the two
 * agree bit for bit, and returns the first run's outputs (caller frees). */
static void run_twice(CpuNumerics mode, const CpuTensor *in, CpuTensor *out, uint32_t nout) {
  CpuTensor other[16];
  cr_assert_leq(nout, 16);
  for (uint32_t threads = 1; threads <= 3; threads += 2) {
    Loaded l;
    CpuOptions o = {.numerics = mode, .threads = threads};
    load_opts(&l, &o);
    cr_assert_not_null(l.c, "%s", l.diags.data);
    cr_assert(cpu_run(l.c, in, threads == 1 ? out : other, &l.d), "%s", l.diags.data);
    unload(&l);
  }
  for (uint32_t k = 0; k < nout; k++) {
    size_t bytes = (size_t)prod(out[k].dims, out[k].rank) * cpu_dtype_size(out[k].dtype);
    cr_assert(memcmp(out[k].data, other[k].data, bytes) == 0, "output %u differs between 1 and 3 threads", k);
    cpu_tensor_free(&other[k]);
  }
}

/* Expects preparing (or, with `run`, running) the program in dir to fail with `want` in the messages. */
static void expect_error(const CpuTensor *in, uint32_t nout, const char *want) {
  Loaded l;
  CpuOptions o = {.numerics = CPU_NUMERICS_FP32, .threads = 1};
  load_opts(&l, &o);
  if (l.c) {
    CpuTensor out[16];
    cr_assert_leq(nout, 16);
    cr_assert_not(cpu_run(l.c, in, out, &l.d), "the run succeeded; wanted %s", want);
  }
  char full[512];
  snprintf(full, sizeof full, "%s/model.mil:%s", dir, want);
  cr_assert_not_null(strstr(l.diags.data, full), "got:\n%s\nwant:\n%s", l.diags.data, full);
  unload(&l);
}

Test(cpu, slice_by_size_by_hand) {
  write_bare(MIL_HEAD
             "    func main<ios18>(tensor<fp32, [12]> x, tensor<int32, [2]> b) {\n"
             "        tensor<int32, [2]> shp = const()[name = string(\"shp\"), val = tensor<int32, [2]>([3, 4])];\n"
             "        tensor<fp32, [3, 4]> r = reshape(shape = shp, x = x)[name = string(\"r\")];\n"
             "        tensor<fp32, [2, 3]> s1 = slice_by_size(begin = tensor<int32, [2]>([1, -3]), size = tensor<int32, [2]>([2, -1]), x = r)[name = string(\"s1\")];\n"
             "        tensor<fp32, [3, 1]> s2 = slice_by_size(begin = tensor<int32, [2]>([0, 2]), size = tensor<int32, [2]>([3, 1]), x = r)[name = string(\"s2\")];\n"
             "        tensor<fp32, [2, 4]> s3 = slice_by_size(begin = b, size = tensor<int32, [2]>([2, 4]), x = r)[name = string(\"s3\")];\n"
             "    } -> (s1, s2, s3);\n}\n");
  float x[12];
  for (int i = 0; i < 12; i++) x[i] = (float)i;
  int32_t b[2] = {1, 0};
  CpuTensor in[2] = {f32_tensor(x, 1, (int64_t[]){12}), {.dtype = MIL_DT_INT32, .rank = 1, .dims = {2}, .data = b}};
  CpuTensor out[3];
  run_twice(CPU_NUMERICS_FP32, in, out, 3);
  const float s1[6] = {5, 6, 7, 9, 10, 11}, s2[3] = {2, 6, 10}, s3[8] = {4, 5, 6, 7, 8, 9, 10, 11};
  for (int i = 0; i < 6; i++) cr_assert_float_eq(out_f32(&out[0])[i], s1[i], 0, "s1[%d]", i);
  for (int i = 0; i < 3; i++) cr_assert_float_eq(out_f32(&out[1])[i], s2[i], 0, "s2[%d]", i);
  for (int i = 0; i < 8; i++) cr_assert_float_eq(out_f32(&out[2])[i], s3[i], 0, "s3[%d]", i);
  for (int i = 0; i < 3; i++) cpu_tensor_free(&out[i]);
  /* begin is a runtime value: a slice that does not fit is an error of the run, at the statement. */
  b[0] = 2;
  expect_error(in, 3, "9:35: error: slice_by_size: size 2 from begin 2 does not fit dimension 0 of size 3");
  b[0] = -4;
  expect_error(in, 3, "9:35: error: slice_by_size: begin -4 is out of range for dimension 0 of size 3");
  cleanup();
  write_bare(MIL_HEAD "    func main<ios18>(tensor<fp32, [4]> x) {\n"
                      "        tensor<fp32, [2]> y = slice_by_size(begin = tensor<int32, [2]>([0, 0]), size = tensor<int32, [1]>([2]), x = x)[name = string(\"y\")];\n"
                      "    } -> (y);\n}\n");
  float x4[4] = {0};
  CpuTensor in4 = f32_tensor(x4, 1, (int64_t[]){4});
  expect_error(&in4, 1, "5:31: error: slice_by_size: begin and size need 1 entries each (they have 2 and 1)");
  cleanup();
}

Test(cpu, slice_by_size_against_reference) {
  write_bare(MIL_HEAD "    func main<ios18>(tensor<fp32, [5, 6, 7]> x) {\n"
                      "        tensor<fp32, [3, 4, 5]> y = slice_by_size(begin = tensor<int32, [3]>([1, -4, 2]), size = tensor<int32, [3]>([3, -1, 5]), x = x)[name = string(\"y\")];\n"
                      "    } -> (y);\n}\n");
  static float x[5 * 6 * 7];
  fill_random(x, 5 * 6 * 7, 1, false);
  CpuTensor in = f32_tensor(x, 3, (int64_t[]){5, 6, 7}), out;
  run_twice(CPU_NUMERICS_FP32, &in, &out, 1);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++)
      for (int k = 0; k < 5; k++)
        cr_assert_float_eq(out_f32(&out)[(i * 4 + j) * 5 + k], x[((1 + i) * 6 + (2 + j)) * 7 + (2 + k)], 0);
  cpu_tensor_free(&out);
  cleanup();
}

Test(cpu, comparisons_and_logical_by_hand) {
  write_bare(MIL_HEAD
             "    func main<ios18>(tensor<fp32, [2, 3]> x, tensor<fp32, [3]> y) {\n"
             "        tensor<bool, [2, 3]> eq = equal(x = x, y = y)[name = string(\"eq\")];\n"
             "        tensor<bool, [2, 3]> ne = not_equal(x = x, y = y)[name = string(\"ne\")];\n"
             "        tensor<bool, [2, 3]> lt = less(x = x, y = y)[name = string(\"lt\")];\n"
             "        tensor<bool, [2, 3]> le = less_equal(x = x, y = y)[name = string(\"le\")];\n"
             "        tensor<bool, [2, 3]> gt = greater(x = x, y = y)[name = string(\"gt\")];\n"
             "        tensor<bool, [2, 3]> ge = greater_equal(x = x, y = y)[name = string(\"ge\")];\n"
             "        tensor<bool, [2, 3]> an = logical_and(x = lt, y = ne)[name = string(\"an\")];\n"
             "        tensor<bool, [2, 3]> or = logical_or(x = gt, y = eq)[name = string(\"or\")];\n"
             "        tensor<bool, [2, 3]> xo = logical_xor(x = le, y = ge)[name = string(\"xo\")];\n"
             "        tensor<bool, [2, 3]> no = logical_not(x = eq)[name = string(\"no\")];\n"
             "        tensor<bool, [3]> ic = greater(x = tensor<int32, [3]>([1, 5, -2]), y = int32(1))[name = string(\"ic\")];\n"
             "        tensor<bool, [2, 3]> sc = less(x = x, y = fp32(0x1p-1))[name = string(\"sc\")];\n"
             "    } -> (eq, ne, lt, le, gt, ge, an, or, xo, no, ic, sc);\n}\n");
  float x[6] = {1, 2, NAN, 0, 5, -1}, y[3] = {1, 3, NAN};
  CpuTensor in[2] = {f32_tensor(x, 2, (int64_t[]){2, 3}), f32_tensor(y, 1, (int64_t[]){3})};
  CpuTensor out[12];
  run_twice(CPU_NUMERICS_ANE, in, out, 12);
  /* NaN compares unequal to everything, itself included. */
  static const bool want[12][6] = {
      {1, 0, 0, 0, 0, 0}, /* eq */
      {0, 1, 1, 1, 1, 1}, /* ne */
      {0, 1, 0, 1, 0, 0}, /* lt */
      {1, 1, 0, 1, 0, 0}, /* le */
      {0, 0, 0, 0, 1, 0}, /* gt */
      {1, 0, 0, 0, 1, 0}, /* ge */
      {0, 1, 0, 1, 0, 0}, /* lt and ne */
      {1, 0, 0, 0, 1, 0}, /* gt or eq */
      {0, 1, 0, 1, 1, 0}, /* le xor ge */
      {0, 1, 1, 1, 1, 1}, /* not eq */
      {0, 1, 0},          /* [1, 5, -2] > 1 */
      {0, 0, 0, 1, 0, 1}, /* x < 0.5 */
  };
  for (int k = 0; k < 12; k++) {
    cr_assert_eq(out[k].dtype, MIL_DT_BOOL);
    for (int i = 0; i < (k == 10 ? 3 : 6); i++) cr_assert_eq(out_bool(&out[k])[i], want[k][i], "output %d element %d", k, i);
    cpu_tensor_free(&out[k]);
  }
  cleanup();
  write_bare(MIL_HEAD "    func main<ios18>(tensor<fp32, [2]> x) {\n"
                      "        tensor<fp32, [2]> y = equal(x = x, y = x)[name = string(\"y\")];\n"
                      "    } -> (y);\n}\n");
  float x2[2] = {0};
  CpuTensor in2 = f32_tensor(x2, 1, (int64_t[]){2});
  expect_error(&in2, 1, "5:31: error: equal: returns bool, but the result is declared fp32");
  cleanup();
  write_bare(MIL_HEAD "    func main<ios18>(tensor<fp32, [2]> x) {\n"
                      "        tensor<bool, [2]> y = logical_or(x = x, y = x)[name = string(\"y\")];\n"
                      "    } -> (y);\n}\n");
  expect_error(&in2, 1, "5:31: error: logical_or: takes and returns bool, not fp32 and fp32 into bool");
  cleanup();
}

Test(cpu, comparisons_against_reference) {
  write_bare(MIL_HEAD
             "    func main<ios18>(tensor<fp32, [4, 1, 6]> x, tensor<fp32, [3, 1]> y) {\n"
             "        tensor<bool, [4, 3, 6]> c0 = equal(x = x, y = y)[name = string(\"c0\")];\n"
             "        tensor<bool, [4, 3, 6]> c1 = not_equal(x = x, y = y)[name = string(\"c1\")];\n"
             "        tensor<bool, [4, 3, 6]> c2 = less(x = x, y = y)[name = string(\"c2\")];\n"
             "        tensor<bool, [4, 3, 6]> c3 = less_equal(x = x, y = y)[name = string(\"c3\")];\n"
             "        tensor<bool, [4, 3, 6]> c4 = greater(x = y, y = x)[name = string(\"c4\")];\n"
             "        tensor<bool, [4, 3, 6]> c5 = greater_equal(x = y, y = x)[name = string(\"c5\")];\n"
             "        tensor<bool, [4, 3, 6]> c6 = logical_xor(x = c2, y = c5)[name = string(\"c6\")];\n"
             "    } -> (c0, c1, c2, c3, c4, c5, c6);\n}\n");
  float x[24], y[3];
  fill_random(x, 24, 2, true);
  fill_random(y, 3, 3, true);
  y[1] = x[5]; /* at least one equal pair */
  CpuTensor in[2] = {f32_tensor(x, 3, (int64_t[]){4, 1, 6}), f32_tensor(y, 2, (int64_t[]){3, 1})};
  CpuTensor out[7];
  run_twice(CPU_NUMERICS_FP32, in, out, 7);
  const int64_t od[3] = {4, 3, 6}, xd[3] = {4, 1, 6}, yd[2] = {3, 1};
  int equal_seen = 0;
  for (int64_t i = 0; i < 72; i++) {
    double u = x[bcast_index(i, od, 3, xd, 3)], v = y[bcast_index(i, od, 3, yd, 2)];
    bool want[7] = {u == v, u != v, u < v, u <= v, v > u, v >= u, (u < v) != (v >= u)};
    equal_seen += u == v;
    for (int k = 0; k < 7; k++) cr_assert_eq(out_bool(&out[k])[i], want[k], "c%d[%lld]", k, (long long)i);
  }
  cr_assert_gt(equal_seen, 0);
  for (int k = 0; k < 7; k++) cpu_tensor_free(&out[k]);
  cleanup();
}

Test(cpu, sdpa_by_hand) {
  write_bare(MIL_HEAD
             "    func main<ios18>(tensor<fp32, [1, 1, 2, 4]> q, tensor<fp32, [1, 1, 3, 4]> k, tensor<fp32, [1, 1, 3, 2]> v) {\n"
             "        tensor<fp32, [1, 1, 2, 2]> a1 = scaled_dot_product_attention(key = k, query = q, value = v)[name = string(\"a1\")];\n"
             "        tensor<bool, [3]> m2 = const()[name = string(\"m2\"), val = tensor<bool, [3]>([true, true, false])];\n"
             "        tensor<fp32, [1, 1, 2, 2]> a2 = scaled_dot_product_attention(attn_mask = m2, key = k, query = q, value = v)[name = string(\"a2\")];\n"
             "        tensor<fp32, [2, 3]> m3 = const()[name = string(\"m3\"), val = tensor<fp32, [2, 3]>([0, -inf, -inf, -inf, -inf, 0])];\n"
             "        tensor<fp32, [1, 1, 2, 2]> a3 = scaled_dot_product_attention(attn_mask = m3, key = k, query = q, value = v)[name = string(\"a3\")];\n"
             "        tensor<bool, [2, 3]> m4 = const()[name = string(\"m4\"), val = tensor<bool, [2, 3]>([false, false, false, true, false, true])];\n"
             "        tensor<fp32, [1, 1, 2, 2]> a4 = scaled_dot_product_attention(attn_mask = m4, key = k, query = q, value = v)[name = string(\"a4\")];\n"
             "    } -> (a1, a2, a3, a4);\n}\n");
  /* Scores q k^T / sqrt(4): row 0 [1, 1, 0], row 1 [0, 0, 0]. */
  float q[8] = {1, 0, 0, 0, 0, 0, 0, 0}, k[12] = {2, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0}, v[6] = {1, 2, 3, 4, 5, 6};
  CpuTensor in[3] = {f32_tensor(q, 4, (int64_t[]){1, 1, 2, 4}), f32_tensor(k, 4, (int64_t[]){1, 1, 3, 4}),
                     f32_tensor(v, 4, (int64_t[]){1, 1, 3, 2})};
  CpuTensor out[4];
  run_twice(CPU_NUMERICS_FP32, in, out, 4);
  double e = exp(1.0), w = 2 * e + 1;
  /* no mask: row 0 weights e, e, 1 (over 2e + 1); row 1 the mean of v's rows */
  const double a1[4] = {(e * 1 + e * 3 + 5) / w, (e * 2 + e * 4 + 6) / w, 3, 4};
  const float a2[4] = {2, 3, 2, 3}; /* keys 0 and 1 only, equal scores in both rows */
  const float a3[4] = {1, 2, 5, 6}; /* -inf added to all but key 0 (row 0) and key 2 (row 1) */
  for (int i = 0; i < 4; i++) {
    cr_assert_float_eq(out_f32(&out[0])[i], a1[i], 1e-6, "a1[%d] = %.9g", i, (double)out_f32(&out[0])[i]);
    cr_assert_float_eq(out_f32(&out[1])[i], a2[i], 0, "a2[%d]", i);
    cr_assert_float_eq(out_f32(&out[2])[i], a3[i], 0, "a3[%d]", i);
  }
  /* every key of row 0 masked: NaN, as softmax over nothing is; row 1: mean of v0 and v2 */
  cr_assert(isnan(out_f32(&out[3])[0]) && isnan(out_f32(&out[3])[1]));
  cr_assert_float_eq(out_f32(&out[3])[2], 3, 0);
  cr_assert_float_eq(out_f32(&out[3])[3], 4, 0);
  for (int i = 0; i < 4; i++) cpu_tensor_free(&out[i]);
  cleanup();
  write_bare(MIL_HEAD
             "    func main<ios18>(tensor<fp32, [1, 2, 4]> q, tensor<fp32, [1, 3, 4]> k, tensor<fp32, [1, 4, 2]> v) {\n"
             "        tensor<fp32, [1, 2, 2]> a = scaled_dot_product_attention(key = k, query = q, value = v)[name = string(\"a\")];\n"
             "    } -> (a);\n}\n");
  float v2[8] = {0};
  CpuTensor in2[3] = {f32_tensor(q, 3, (int64_t[]){1, 2, 4}), f32_tensor(k, 3, (int64_t[]){1, 3, 4}),
                      f32_tensor(v2, 3, (int64_t[]){1, 4, 2})};
  expect_error(in2, 1, "5:37: error: scaled_dot_product_attention: value has 4 rows but key 3");
  cleanup();
}

/* softmax(q k^T / sqrt(E) + mask) v, plainly, in double. */
static void sdpa_ref(const float *q, const float *k, const float *v, const float *fm, const bool *bm, int64_t B,
                     int64_t L, int64_t S, int64_t E, int64_t EV, double *out) {
  for (int64_t b = 0; b < B; b++)
    for (int64_t l = 0; l < L; l++) {
      double sc[64], mx = -INFINITY, sum = 0;
      for (int64_t s = 0; s < S; s++) {
        double dot = 0;
        for (int64_t e = 0; e < E; e++) dot += (double)q[(b * L + l) * E + e] * (double)k[(b * S + s) * E + e];
        sc[s] = dot / sqrt((double)E) + (fm ? (double)fm[l * S + s] : 0);
        if (bm && !bm[s]) sc[s] = -INFINITY;
        if (sc[s] > mx) mx = sc[s];
      }
      for (int64_t s = 0; s < S; s++) sum += sc[s] = exp(sc[s] - mx);
      for (int64_t c = 0; c < EV; c++) {
        double acc = 0;
        for (int64_t s = 0; s < S; s++) acc += sc[s] / sum * (double)v[(b * S + s) * EV + c];
        out[(b * L + l) * EV + c] = acc;
      }
    }
}

Test(cpu, sdpa_against_reference) {
  write_bare(MIL_HEAD
             "    func main<ios18>(tensor<fp32, [2, 3, 5, 8]> q, tensor<fp32, [2, 3, 7, 8]> k, tensor<fp32, [2, 3, 7, 6]> v, tensor<fp32, [5, 7]> m, tensor<bool, [1, 7]> keep) {\n"
             "        tensor<fp32, [2, 3, 5, 6]> a = scaled_dot_product_attention(key = k, query = q, value = v)[name = string(\"a\")];\n"
             "        tensor<fp32, [2, 3, 5, 6]> b = scaled_dot_product_attention(attn_mask = m, key = k, query = q, value = v)[name = string(\"b\")];\n"
             "        tensor<fp32, [2, 3, 5, 6]> c = scaled_dot_product_attention(attn_mask = keep, key = k, query = q, value = v)[name = string(\"c\")];\n"
             "    } -> (a, b, c);\n}\n");
  static float q[240], k[336], v[252], m[35];
  bool keep[7] = {true, false, true, true, false, true, true};
  fill_random(q, 240, 4, false);
  fill_random(k, 336, 5, false);
  fill_random(v, 252, 6, false);
  fill_random(m, 35, 7, false);
  CpuTensor in[5] = {f32_tensor(q, 4, (int64_t[]){2, 3, 5, 8}), f32_tensor(k, 4, (int64_t[]){2, 3, 7, 8}),
                     f32_tensor(v, 4, (int64_t[]){2, 3, 7, 6}), f32_tensor(m, 2, (int64_t[]){5, 7}),
                     {.dtype = MIL_DT_BOOL, .rank = 2, .dims = {1, 7}, .data = keep}};
  CpuTensor out[3];
  run_twice(CPU_NUMERICS_FP32, in, out, 3);
  static double want[180];
  for (int variant = 0; variant < 3; variant++) {
    sdpa_ref(q, k, v, variant == 1 ? m : NULL, variant == 2 ? keep : NULL, 6, 5, 7, 8, 6, want);
    for (int i = 0; i < 180; i++)
      cr_assert_leq(err_of(out_f32(&out[variant])[i], want[i]), 2e-7, "variant %d element %d: %.9g vs %.9g", variant,
                    i, (double)out_f32(&out[variant])[i], want[i]);
    cpu_tensor_free(&out[variant]);
  }
  cleanup();
}

Test(cpu, conv3d_by_hand) {
  write_bare(MIL_HEAD
             "    func main<ios18>(tensor<fp32, [1, 1, 2, 2, 2]> x) {\n"
             "        tensor<fp32, [1, 1, 2, 2, 2]> w = const()[name = string(\"w\"), val = tensor<fp32, [1, 1, 2, 2, 2]>([1, 2, 3, 4, 5, 6, 7, 8])];\n"
             "        tensor<fp32, [1]> b = const()[name = string(\"b\"), val = tensor<fp32, [1]>([0.5])];\n"
             "        tensor<fp32, [1, 1, 1, 1, 1]> y1 = conv(bias = b, weight = w, x = x)[name = string(\"y1\")];\n"
             "        tensor<fp32, [1, 1, 2, 1, 1]> y2 = conv(pad = tensor<int32, [6]>([1, 0, 0, 0, 0, 0]), pad_type = string(\"custom\"), weight = w, x = x)[name = string(\"y2\")];\n"
             "    } -> (y1, y2);\n}\n");
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  CpuTensor in = f32_tensor(x, 5, (int64_t[]){1, 1, 2, 2, 2}), out[2];
  run_twice(CPU_NUMERICS_FP32, &in, out, 2);
  /* 1 + 4 + ... + 64 = 204 (+ 0.5); padded in front in depth: the first
   * output sees x's first plane through w's second, 1*5 + 2*6 + 3*7 + 4*8 = 70 */
  cr_assert_float_eq(out_f32(&out[0])[0], 204.5f, 0);
  cr_assert_float_eq(out_f32(&out[1])[0], 70.0f, 0);
  cr_assert_float_eq(out_f32(&out[1])[1], 204.0f, 0);
  for (int i = 0; i < 2; i++) cpu_tensor_free(&out[i]);
  cleanup();
  write_bare(MIL_HEAD
             "    func main<ios18>(tensor<fp32, [1, 1, 2, 2, 2]> x) {\n"
             "        tensor<fp32, [1, 1, 1, 1, 1]> w = const()[name = string(\"w\"), val = tensor<fp32, [1, 1, 1, 1, 1]>([1])];\n"
             "        tensor<fp32, [1, 1, 2, 2, 2]> y = conv(strides = tensor<int32, [2]>([1, 1]), weight = w, x = x)[name = string(\"y\")];\n"
             "    } -> (y);\n}\n");
  expect_error(&in, 1, "6:43: error: conv: strides needs 3 entries");
  cleanup();
}

typedef struct ConvRef {
  int64_t N, C, O, G, D[3], K[3], st[3], dl[3], before[3], OD[3];
} ConvRef;

/* A plain 3-D convolution in double; bias may be NULL. */
static void conv3d_ref(const ConvRef *r, const float *x, const float *w, const float *b, double *out) {
  int64_t CG = r->C / r->G, OG = r->O / r->G;
  for (int64_t n = 0; n < r->N; n++)
    for (int64_t o = 0; o < r->O; o++)
      for (int64_t p = 0; p < r->OD[0] * r->OD[1] * r->OD[2]; p++) {
        int64_t oz = p / (r->OD[1] * r->OD[2]), oy = p / r->OD[2] % r->OD[1], ox = p % r->OD[2];
        double s = b ? b[o] : 0;
        for (int64_t c = 0; c < CG; c++)
          for (int64_t t = 0; t < r->K[0] * r->K[1] * r->K[2]; t++) {
            int64_t kz = t / (r->K[1] * r->K[2]), ky = t / r->K[2] % r->K[1], kx = t % r->K[2];
            int64_t iz = oz * r->st[0] + kz * r->dl[0] - r->before[0], iy = oy * r->st[1] + ky * r->dl[1] - r->before[1],
                    ix = ox * r->st[2] + kx * r->dl[2] - r->before[2];
            if (iz < 0 || iy < 0 || ix < 0 || iz >= r->D[0] || iy >= r->D[1] || ix >= r->D[2]) continue;
            int64_t ci = (o / OG) * CG + c;
            s += (double)x[(((n * r->C + ci) * r->D[0] + iz) * r->D[1] + iy) * r->D[2] + ix] *
                 (double)w[((o * CG + c) * r->K[0] + kz) * r->K[1] * r->K[2] + ky * r->K[2] + kx];
          }
        out[(n * r->O + o) * r->OD[0] * r->OD[1] * r->OD[2] + p] = s;
      }
}

Test(cpu, conv3d_against_reference) {
  write_bare(MIL_HEAD
             "    func main<ios18>(tensor<fp32, [2, 4, 5, 6, 7]> x, tensor<fp32, [6, 2, 3, 2, 3]> w, tensor<fp32, [6]> b, tensor<fp32, [3, 4, 3, 3, 3]> w2, tensor<fp32, [5, 4, 1, 1, 1]> w3) {\n"
             "        tensor<fp32, [2, 6, 2, 3, 7]> y1 = conv(bias = b, dilations = tensor<int32, [3]>([2, 1, 1]), groups = int32(2), pad = tensor<int32, [6]>([1, 0, 0, 1, 1, 1]), pad_type = string(\"custom\"), strides = tensor<int32, [3]>([1, 2, 1]), weight = w, x = x)[name = string(\"y1\")];\n"
             "        tensor<fp32, [2, 3, 3, 3, 4]> y2 = conv(pad_type = string(\"same\"), strides = tensor<int32, [3]>([2, 2, 2]), weight = w2, x = x)[name = string(\"y2\")];\n"
             "        tensor<fp32, [2, 5, 5, 6, 7]> y3 = conv(weight = w3, x = x)[name = string(\"y3\")];\n"
             "    } -> (y1, y2, y3);\n}\n");
  static float x[2 * 4 * 210], w[6 * 2 * 18], b[6], w2[3 * 4 * 27], w3[20];
  fill_random(x, 1680, 8, false);
  fill_random(w, 216, 9, false);
  fill_random(b, 6, 10, false);
  fill_random(w2, 324, 11, false);
  fill_random(w3, 20, 12, false);
  CpuTensor in[5] = {f32_tensor(x, 5, (int64_t[]){2, 4, 5, 6, 7}), f32_tensor(w, 5, (int64_t[]){6, 2, 3, 2, 3}),
                     f32_tensor(b, 1, (int64_t[]){6}), f32_tensor(w2, 5, (int64_t[]){3, 4, 3, 3, 3}),
                     f32_tensor(w3, 5, (int64_t[]){5, 4, 1, 1, 1})};
  CpuTensor out[3];
  run_twice(CPU_NUMERICS_FP32, in, out, 3);
  /* same, stride 2: outputs ceil(D / 2) = 3, 3, 4; padding (out - 1) * 2 + 3 - D = 2, 1, 2, half before (rounded down) */
  const ConvRef refs[3] = {
      {2, 4, 6, 2, {5, 6, 7}, {3, 2, 3}, {1, 2, 1}, {2, 1, 1}, {1, 0, 1}, {2, 3, 7}},
      {2, 4, 3, 1, {5, 6, 7}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 0, 1}, {3, 3, 4}},
      {2, 4, 5, 1, {5, 6, 7}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {5, 6, 7}},
  };
  const float *ws[3] = {w, w2, w3};
  static double want[2 * 6 * 210];
  for (int k = 0; k < 3; k++) {
    conv3d_ref(&refs[k], x, ws[k], k == 0 ? b : NULL, want);
    int64_t n = prod(out[k].dims, 5);
    for (int64_t i = 0; i < n; i++)
      cr_assert_leq(err_of(out_f32(&out[k])[i], want[i]), 1e-6, "y%d[%lld]: %.9g vs %.9g", k + 1, (long long)i,
                    (double)out_f32(&out[k])[i], want[i]);
    cpu_tensor_free(&out[k]);
  }
  cleanup();
}

Test(cpu, constexpr_ops_by_hand) {
  write_bare(MIL_HEAD
             "    func main<ios18>(tensor<fp32, [2, 3]> x) {\n"
             "        tensor<fp32, [2, 3]> W = constexpr_affine_dequantize()[axis = int32(0), name = string(\"W\"), quantized_data = tensor<int8, [2, 3]>([1, -2, 3, 4, 5, -6]), scale = tensor<fp32, [2]>([0.5, 2]), zero_point = tensor<int8, [2]>([1, 0])];\n"
             "        tensor<fp32, [2, 3]> y = add(x = x, y = W)[name = string(\"y\")];\n"
             "        tensor<uint8, [4, 3]> d = const()[name = string(\"d\"), val = tensor<uint8, [4, 3]>([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11])];\n"
             "        tensor<fp16, [2, 3]> s = const()[name = string(\"s\"), val = tensor<fp16, [2, 3]>([1, 2, 4, 0.5, 0.25, 0.125])];\n"
             "        tensor<uint8, [2, 3]> o = const()[name = string(\"o\"), val = tensor<uint8, [2, 3]>([1, 1, 1, 2, 2, 2])];\n"
             "        tensor<fp16, [4, 3]> B = constexpr_blockwise_shift_scale(data = d, offset = o, scale = s)[name = string(\"B\")];\n"
             "        tensor<fp32, [4, 3]> C = constexpr_cast(output_dtype = string(\"fp32\"), source_val = B)[name = string(\"C\")];\n"
             "        tensor<fp32, [4, 3]> z = mul(x = C, y = fp32(1))[name = string(\"z\")];\n"
             "    } -> (y, z);\n}\n");
  float x[6] = {0};
  CpuTensor in = f32_tensor(x, 2, (int64_t[]){2, 3}), out[2];
  run_twice(CPU_NUMERICS_ANE, &in, out, 2);
  /* row 0: 0.5 * ([1, -2, 3] - 1); row 1: 2 * [4, 5, -6] */
  const float y[6] = {0, -1.5f, 1, 8, 10, -12};
  /* blocks of 2 rows x 1 column: rows 0-1 scale [1, 2, 4] offset 1, rows 2-3 scale [0.5, 0.25, 0.125] offset 2 */
  const float z[12] = {-1, 0, 4, 2, 6, 16, 2, 1.25f, 0.75f, 3.5f, 2, 1.125f};
  for (int i = 0; i < 6; i++) cr_assert_float_eq(out_f32(&out[0])[i], y[i], 0, "y[%d]", i);
  for (int i = 0; i < 12; i++) cr_assert_float_eq(out_f32(&out[1])[i], z[i], 0, "z[%d] = %g", i, (double)out_f32(&out[1])[i]);
  for (int i = 0; i < 2; i++) cpu_tensor_free(&out[i]);
  cleanup();
  /* errors, at prepare */
  write_bare(MIL_HEAD
             "    func main<ios18>(tensor<fp32, [2]> x) {\n"
             "        tensor<fp32, [2]> W = constexpr_affine_dequantize()[axis = int32(0), name = string(\"W\"), quantized_data = tensor<fp32, [2]>([1, 2]), scale = fp32(1), zero_point = fp32(0)];\n"
             "        tensor<fp32, [2]> y = add(x = x, y = W)[name = string(\"y\")];\n"
             "    } -> (y);\n}\n");
  expect_error(NULL, 1, "5:31: error: constexpr_affine_dequantize: quantized_data must be int8 or uint8, not fp32");
  cleanup();
  write_bare(MIL_HEAD
             "    func main<ios18>(tensor<fp32, [2]> x) {\n"
             "        tensor<fp32, [2]> W = constexpr_blockwise_shift_scale(data = x, scale = tensor<fp32, [1]>([1]))[name = string(\"W\")];\n"
             "    } -> (W);\n}\n");
  expect_error(NULL, 1, "5:31: error: constexpr_blockwise_shift_scale: argument 'data' must be a constant");
  cleanup();
  write_bare(MIL_HEAD
             "    func main<ios18>(tensor<fp32, [2]> x) {\n"
             "        tensor<fp32, [2]> W = constexpr_lut_to_dense()[indices = tensor<uint8, [2]>([0, 1]), lut = tensor<fp32, [2, 1]>([1, 2]), name = string(\"W\"), vector_axis = int32(0)];\n"
             "    } -> (W);\n}\n");
  expect_error(NULL, 1, "5:31: error: constexpr_lut_to_dense: the iOS18 form (no shape; vector_axis) is not supported yet");
  cleanup();
  write_bare(MIL_HEAD
             "    func main<ios18>(tensor<fp32, [2]> x) {\n"
             "        tensor<fp32, [2]> W = constexpr_sparse_blockwise_shift_scale()[name = string(\"W\")];\n"
             "    } -> (W);\n}\n");
  expect_error(NULL, 1, "5:31: error: op 'constexpr_sparse_blockwise_shift_scale' is not supported by the CPU backend");
  cleanup();
}

/* The corpus's form: every input in the attribute block, the int8 data in a
 * BLOBFILE; a vector scale along axis 1, a scalar zero point. Checked against
 * a plain dequantization, and again after cpu_reload_weights. */
Test(cpu, constexpr_affine_dequantize_blobfile) {
  make_dir();
  char path[256];
  snprintf(path, sizeof path, "%s/weights", dir);
  cr_assert_eq(mkdir(path, 0755), 0);
  int8_t q[16 * 8];
  for (int i = 0; i < 128; i++) q[i] = (int8_t)((i * 37) % 256 - 128);
  BlobWriter bw;
  blob_writer_init(&bw);
  uint64_t off = blob_writer_add(&bw, BLOB_INT8, q, sizeof q);
  snprintf(path, sizeof path, "%s/weights/weight.bin", dir);
  const char *err;
  cr_assert(write_file_atomic(path, (const char *)bw.data, bw.len, &err), "%s", err);
  blob_writer_free(&bw);
  char mil[2048];
  snprintf(mil, sizeof mil,
           MIL_HEAD "    func main<ios18>(tensor<fp16, [16, 8]> x) {\n"
                    "        tensor<fp16, [16, 8]> W = constexpr_affine_dequantize()[axis = int32(-1), name = string(\"W\"), quantized_data = tensor<int8, [16, 8]>(BLOBFILE(path = string(\"@model_path/weights/weight.bin\"), offset = uint64(%llu))), scale = tensor<fp16, [8]>([0x1p-3, 0.5, 1, 3, 0.1, 7, 0x1p-7, 2]), zero_point = int8(-3)];\n"
                    "        tensor<fp16, [16, 8]> y = add(x = x, y = W)[name = string(\"y\")];\n"
                    "    } -> (y);\n}\n",
           (unsigned long long)off);
  snprintf(path, sizeof path, "%s/model.mil", dir);
  cr_assert(write_file_atomic(path, mil, strlen(mil), &err), "%s", err);
  uint16_t x[128] = {0};
  CpuTensor in = {.dtype = MIL_DT_FP16, .rank = 2, .dims = {16, 8}, .data = x}, out;
  const float scale[8] = {0x1p-3f, 0.5f, 1, 3, 0.1f, 7, 0x1p-7f, 2};
  Loaded l;
  CpuOptions o = {.numerics = CPU_NUMERICS_ANE, .threads = 2};
  load_opts(&l, &o);
  cr_assert_not_null(l.c, "%s", l.diags.data);
  for (int round = 0; round < 2; round++) {
    if (round == 1) cr_assert(cpu_reload_weights(l.c, &l.d), "%s", l.diags.data);
    cr_assert(cpu_run(l.c, &in, &out, &l.d), "%s", l.diags.data);
    for (int i = 0; i < 128; i++) {
      /* the scale as the MIL literal holds it (fp16), times q - zp, rounded to fp16 */
      double s = (double)fp16_to_float(fp16_from_float(scale[i % 8]));
      uint16_t want = fp16_from_double(s * ((double)q[i] + 3));
      cr_assert_eq(((uint16_t *)out.data)[i], want, "W[%d]: 0x%04x, want 0x%04x", i, ((uint16_t *)out.data)[i], want);
    }
    cpu_tensor_free(&out);
  }
  cr_assert_not(cpu_set_weight(l.c, "W", MIL_DT_FP16, x, sizeof x, &l.d));
  cr_assert_not_null(strstr(l.diags.data, "weight 'W' is the 'quantized_data' of a constexpr_affine_dequantize; it can be reloaded but not set"),
                     "%s", l.diags.data);
  unload(&l);
  cleanup();
}

/* --check-finite: x * x with x = 300 is 90000, above fp16's 65504: inf in ANE mode. */
Test(cpu, check_finite_reports_the_first_non_finite_value) {
  write_bare(MIL_HEAD "    func main<ios18>(tensor<fp16, [2, 2]> x) {\n"
                      "        tensor<fp16, [2, 2]> a = relu(x = x)[name = string(\"a\")];\n"
                      "        tensor<fp16, [2, 2]> y = mul(x = a, y = a)[name = string(\"y\")];\n"
                      "        tensor<fp16, [2, 2]> e = exp(x = y)[name = string(\"e\")];\n"
                      "    } -> (e);\n}\n");
  uint16_t x[4] = {fp16_from_float(1), fp16_from_float(2), fp16_from_float(300), fp16_from_float(-3)};
  CpuTensor in = {.dtype = MIL_DT_FP16, .rank = 2, .dims = {2, 2}, .data = x}, out;
  for (int variant = 0; variant < 3; variant++) {
    Loaded l;
    /* 0: ANE mode with the check; 1: without it; 2: FP32 mode with it (90000 is finite, exp of it is not) */
    CpuOptions o = {.numerics = variant == 2 ? CPU_NUMERICS_FP32 : CPU_NUMERICS_ANE, .threads = 2,
                    .check_finite = variant != 1};
    load_opts(&l, &o);
    cr_assert_not_null(l.c, "%s", l.diags.data);
    bool ran = cpu_run(l.c, &in, &out, &l.d);
    char want[512];
    if (variant == 0)
      snprintf(want, sizeof want, "%s/model.mil:6:34: error: mul: result 'y' is inf at element 2 (index [1, 0]), the first non-finite value of the run\n", dir);
    else
      snprintf(want, sizeof want, "%s/model.mil:7:34: error: exp: result 'e' is inf at element 2 (index [1, 0]), the first non-finite value of the run\n", dir);
    if (variant == 1) {
      cr_assert(ran, "%s", l.diags.data);
      cr_assert(isinf(fp16_to_float(((uint16_t *)out.data)[2])));
      cpu_tensor_free(&out);
    } else {
      cr_assert_not(ran);
      cr_assert_not_null(strstr(l.diags.data, want), "got:\n%s\nwant:\n%s", l.diags.data, want);
    }
    unload(&l);
  }
  /* a non-finite input is reported at the parameter */
  x[0] = 0x7e00; /* NaN */
  Loaded l;
  CpuOptions o = {.numerics = CPU_NUMERICS_ANE, .check_finite = true};
  load_opts(&l, &o);
  cr_assert_not(cpu_run(l.c, &in, &out, &l.d));
  char want[512];
  snprintf(want, sizeof want, "%s/model.mil:4:43: error: input 'x' is NaN at element 0 (index [0, 0])", dir);
  cr_assert_not_null(strstr(l.diags.data, want), "got:\n%s\nwant:\n%s", l.diags.data, want);
  unload(&l);
  cleanup();
}

Test(cpu, profile_times_every_statement) {
  write_bare(MIL_HEAD "    func main<ios18>(tensor<fp32, [64]> x) {\n"
                      "        tensor<fp32, [64]> a = relu(x = x)[name = string(\"a\")];\n"
                      "        tensor<fp32, []> two = const()[name = string(\"two\"), val = fp32(2)];\n"
                      "        tensor<fp32, [64]> m = mul(x = a, y = two)[name = string(\"m\")];\n"
                      "        tensor<fp32, [64]> y = add(x = m, y = x)[name = string(\"y\")];\n"
                      "    } -> (y);\n}\n");
  float x[64] = {0};
  CpuTensor in = f32_tensor(x, 1, (int64_t[]){64}), out;
  Loaded l;
  CpuOptions o = {.numerics = CPU_NUMERICS_FP32, .threads = 2};
  load_opts(&l, &o);
  cr_assert_not_null(l.c, "%s", l.diags.data);
  cr_assert_eq(cpu_profile_count(l.c), 0, "no profile without the option");
  unload(&l);
  o.profile = true;
  load_opts(&l, &o);
  cr_assert_not_null(l.c, "%s", l.diags.data);
  for (int r = 0; r < 3; r++) {
    cr_assert(cpu_run(l.c, &in, &out, &l.d), "%s", l.diags.data);
    cpu_tensor_free(&out);
  }
  const char *ops[3] = {"relu", "mul", "add"}, *names[3] = {"a", "m", "y"};
  const uint32_t stmts[3] = {0, 2, 3}, lines[3] = {5, 7, 8};
  cr_assert_eq(cpu_profile_count(l.c), 3);
  for (uint32_t i = 0; i < 3; i++) {
    const CpuStmtTime *e = cpu_profile_stmt(l.c, i);
    cr_assert_str_eq(e->op, ops[i]);
    cr_assert_str_eq(e->name, names[i]);
    cr_assert_eq(e->stmt, stmts[i]);
    /* relu, mul and add run as one fused group, timed at its first statement */
    cr_assert_eq(e->runs, i == 0 ? 3u : 0u);
    cr_assert(e->ms >= 0);
    uint32_t line, col;
    srcset_linecol(&l.sources, e->loc.file, e->loc.start, &line, &col);
    cr_assert_eq(line, lines[i]);
  }
  cr_assert_null(cpu_profile_stmt(l.c, 3));
  cpu_profile_reset(l.c);
  cr_assert_eq(cpu_profile_stmt(l.c, 0)->runs, 0);
  cr_assert(cpu_profile_stmt(l.c, 0)->ms == 0);
  unload(&l);
  cleanup();
}

/* ---- reduce_argmax/argmin, quantize/dequantize, pooling, and the shape ops of the corpus ---- */

#define S_(n) "string(\"" n "\")"

/* Expects the program in dir to fail (at prepare or run) with `msg` at the
 * first occurrence of `at` (the op's name and its parenthesis) in `mil`. */
static void expect_error_at(const char *mil, const char *at, const CpuTensor *in, uint32_t nout, const char *msg) {
  const char *p = strstr(mil, at);
  cr_assert_not_null(p, "'%s' is not in the program", at);
  uint32_t line = 1, col = 1;
  for (const char *s = mil; s < p; s++) {
    if (*s == '\n') line++, col = 1;
    else col++;
  }
  char want[512];
  snprintf(want, sizeof want, "%u:%u: error: %s", line, col, msg);
  expect_error(in, nout, want);
}

/* Writes mil as the bare program, and expects the error. */
static void bare_error(const char *mil, const char *at, const CpuTensor *in, const char *msg) {
  write_bare(mil);
  expect_error_at(mil, at, in, 1, msg);
  cleanup();
}

/* Asserts t has dtype dt, the dims given and exactly the values want. */
static void expect_values(const CpuTensor *t, MilDType dt, uint32_t rank, const int64_t *dims, const double *want,
                          const char *what) {
  cr_assert_eq(t->dtype, dt, "%s: dtype", what);
  cr_assert_eq(t->rank, rank, "%s: rank %u", what, t->rank);
  for (uint32_t i = 0; i < rank; i++) cr_assert_eq(t->dims[i], dims[i], "%s: dim %u", what, i);
  int64_t n = prod(dims, rank);
  for (int64_t i = 0; i < n; i++) {
    double g = cpu_elem(t, (uint64_t)i);
    cr_assert(g == want[i] || (isnan(g) && isnan(want[i])), "%s[%lld] = %g, want %g", what, (long long)i, g, want[i]);
  }
}

Test(cpu, argmax_argmin_by_hand) {
  write_bare(MIL_HEAD
             "    func main<ios18>(tensor<fp32, [2, 3]> x) {\n"
             "        tensor<int32, [2]> a1 = reduce_argmax(x = x)[name = " S_("a1") "];\n"
             "        tensor<int32, [1, 3]> a2 = reduce_argmin(axis = int32(0), keep_dims = bool(true), x = x)[name = " S_("a2") "];\n"
             "        tensor<int32, [2, 1]> a3 = reduce_argmin(axis = int32(-1), keep_dims = bool(true), output_dtype = " S_("int32") ", x = x)[name = " S_("a3") "];\n"
             "        tensor<int32, []> a4 = reduce_argmax(axis = int32(0), x = tensor<int32, [4]>([3, 9, 9, -1]))[name = " S_("a4") "];\n"
             "    } -> (a1, a2, a3, a4);\n}\n");
  /* Ties keep the first index; NaN wins both (NumPy's argmax and argmin). */
  float x[6] = {1, 5, 5, 7, NAN, -2};
  CpuTensor in = f32_tensor(x, 2, (int64_t[]){2, 3}), out[4];
  run_twice(CPU_NUMERICS_ANE, &in, out, 4);
  expect_values(&out[0], MIL_DT_INT32, 1, (int64_t[]){2}, (double[]){1, 1}, "a1");
  expect_values(&out[1], MIL_DT_INT32, 2, (int64_t[]){1, 3}, (double[]){0, 1, 1}, "a2");
  expect_values(&out[2], MIL_DT_INT32, 2, (int64_t[]){2, 1}, (double[]){0, 1}, "a3");
  expect_values(&out[3], MIL_DT_INT32, 0, NULL, (double[]){1}, "a4");
  for (int i = 0; i < 4; i++) cpu_tensor_free(&out[i]);
  cleanup();
  float x4[4] = {0};
  CpuTensor in4 = f32_tensor(x4, 2, (int64_t[]){2, 2});
  bare_error(MIL_HEAD "    func main<ios18>(tensor<fp32, [2, 2]> x) {\n"
                      "        tensor<fp32, [2]> y = reduce_argmax(x = x)[name = " S_("y") "];\n    } -> (y);\n}\n",
             "reduce_argmax(", &in4, "reduce_argmax: returns int32, but the result is declared fp32");
  bare_error(MIL_HEAD "    func main<ios18>(tensor<fp32, [2, 2]> x) {\n"
                      "        tensor<int32, [2]> y = reduce_argmin(axis = int32(2), x = x)[name = " S_("y") "];\n    } -> (y);\n}\n",
             "reduce_argmin(", &in4, "reduce_argmin: axis 2 is out of range for rank 2");
  bare_error(MIL_HEAD "    func main<ios18>(tensor<fp32, [2, 2]> x) {\n"
                      "        tensor<int32, [2]> y = reduce_argmax(output_dtype = " S_("uint16") ", x = x)[name = " S_("y") "];\n    } -> (y);\n}\n",
             "reduce_argmax(", &in4, "reduce_argmax: output_dtype 'uint16' is not supported (only int32)");
  bare_error(MIL_HEAD "    func main<ios18>(tensor<fp32, [2, 2]> x) {\n"
                      "        tensor<int32, [2, 1]> y = reduce_argmax(x = x)[name = " S_("y") "];\n    } -> (y);\n}\n",
             "reduce_argmax(", &in4, "reduce_argmax: the result shape is [2] but the statement declares [2, 1]");
}

Test(cpu, argmax_argmin_against_reference) {
  write_bare(MIL_HEAD
             "    func main<ios18>(tensor<fp32, [5, 37, 6]> x) {\n"
             "        tensor<int32, [5, 6]> a = reduce_argmax(axis = int32(1), x = x)[name = " S_("a") "];\n"
             "        tensor<int32, [1, 37, 6]> b = reduce_argmin(axis = int32(-3), keep_dims = bool(true), x = x)[name = " S_("b") "];\n"
             "    } -> (a, b);\n}\n");
  static float x[5 * 37 * 6];
  fill_random(x, 5 * 37 * 6, 7, true); /* coarse: many ties */
  CpuTensor in = f32_tensor(x, 3, (int64_t[]){5, 37, 6}), out[2];
  run_twice(CPU_NUMERICS_FP32, &in, out, 2);
  for (int i = 0; i < 5; i++)
    for (int k = 0; k < 6; k++) {
      int best = 0;
      for (int j = 1; j < 37; j++)
        if (x[(i * 37 + j) * 6 + k] > x[(i * 37 + best) * 6 + k]) best = j;
      cr_assert_eq(((int32_t *)out[0].data)[i * 6 + k], best, "a[%d, %d]", i, k);
    }
  for (int j = 0; j < 37; j++)
    for (int k = 0; k < 6; k++) {
      int best = 0;
      for (int i = 1; i < 5; i++)
        if (x[(i * 37 + j) * 6 + k] < x[(best * 37 + j) * 6 + k]) best = i;
      cr_assert_eq(((int32_t *)out[1].data)[j * 6 + k], best, "b[%d, %d]", j, k);
    }
  for (int i = 0; i < 2; i++) cpu_tensor_free(&out[i]);
  cleanup();
}

Test(cpu, quantize_dequantize_by_hand) {
  const char *mil =
      MIL_HEAD
      "    func main<ios18>(tensor<fp32, [6]> x) {\n"
      "        tensor<int8, [6]> q = quantize(input = x, output_dtype = " S_("int8") ", scale = fp32(0x1p-1), zero_point = int8(3))[name = " S_("q") "];\n"
      "        tensor<fp32, [6]> d = dequantize(input = q, scale = fp32(0x1p-1), zero_point = int8(3))[name = " S_("d") "];\n"
      "        tensor<int8, [6]> q2 = quantize(input = x, output_dtype = " S_("int8") ", scale = fp32(0x1p-1))[name = " S_("q2") "];\n"
      "        tensor<fp32, [6]> d2 = dequantize(input = q2, scale = fp32(0x1p-1))[name = " S_("d2") "];\n"
      "        tensor<int32, [2]> shp = const()[name = " S_("shp") ", val = tensor<int32, [2]>([2, 3])];\n"
      "        tensor<fp32, [2, 3]> r = reshape(shape = shp, x = x)[name = " S_("r") "];\n"
      "        tensor<fp32, [3]> sc = const()[name = " S_("sc") ", val = tensor<fp32, [3]>([1, 2, 4])];\n"
      "        tensor<uint8, [3]> zp = const()[name = " S_("zp") ", val = tensor<uint8, [3]>([10, 0, 128])];\n"
      "        tensor<uint8, [2, 3]> q3 = quantize(axis = int32(-1), input = r, output_dtype = " S_("uint8") ", scale = sc, zero_point = zp)[name = " S_("q3") "];\n"
      "        tensor<fp32, [2, 3]> d3 = dequantize(axis = int32(1), input = q3, scale = sc, zero_point = zp)[name = " S_("d3") "];\n"
      "    } -> (d, d2, d3);\n}\n";
  write_bare(mil);
  /* x / 0.5 = 0.5, 1.5, -0.5, 200, -200, 12: halves round to even, then the zero point, then the int8 clip. */
  float x[6] = {0.25f, 0.75f, -0.25f, 100, -100, 6};
  CpuTensor in = f32_tensor(x, 1, (int64_t[]){6}), out[3];
  run_twice(CPU_NUMERICS_FP32, &in, out, 3);
  expect_values(&out[0], MIL_DT_FP32, 1, (int64_t[]){6}, (double[]){0, 1, 0, 62, -65.5, 6}, "d");
  expect_values(&out[1], MIL_DT_FP32, 1, (int64_t[]){6}, (double[]){0, 1, 0, 63.5, -64, 6}, "d2");
  /* per column: 0.25/1 -> 0, 100/1 -> 100; 0.75/2 -> 0, -100/2 -> clip at 0 - 0; -0.25/4 -> 0, 6/4 = 1.5 -> 2 */
  expect_values(&out[2], MIL_DT_FP32, 2, (int64_t[]){2, 3}, (double[]){0, 0, 0, 100, 0, 8}, "d3");
  for (int i = 0; i < 3; i++) cpu_tensor_free(&out[i]);
  x[1] = NAN;
  expect_error_at(mil, "quantize(", &in, 3, "quantize: element 1 quantizes to NaN (input nan, scale 0.5)");
  cleanup();
  float x2[2] = {0};
  CpuTensor in2 = f32_tensor(x2, 1, (int64_t[]){2});
  const char *head = MIL_HEAD "    func main<ios18>(tensor<fp32, [2]> x) {\n";
  char buf[1024];
  snprintf(buf, sizeof buf, "%s        tensor<int8, [2]> q = quantize(input = x, output_dtype = " S_("int16") ", scale = fp32(1))[name = " S_("q") "];\n"
           "        tensor<fp32, [2]> y = dequantize(input = q, scale = fp32(1))[name = " S_("y") "];\n    } -> (y);\n}\n", head);
  bare_error(buf, "quantize(", &in2, "quantize: output_dtype must be int8 or uint8, not 'int16'");
  snprintf(buf, sizeof buf, "%s        tensor<int8, [2]> q = quantize(input = x, output_dtype = " S_("int8") ", scale = fp32(1), zero_point = uint8(0))[name = " S_("q") "];\n"
           "        tensor<fp32, [2]> y = dequantize(input = q, scale = fp32(1))[name = " S_("y") "];\n    } -> (y);\n}\n", head);
  bare_error(buf, "quantize(", &in2, "quantize: zero_point is uint8 but the quantized type is int8");
  snprintf(buf, sizeof buf, "%s        tensor<int8, [2]> q = quantize(input = x, output_dtype = " S_("int8") ", scale = tensor<fp32, [2]>([1, 2]))[name = " S_("q") "];\n"
           "        tensor<fp32, [2]> y = dequantize(input = q, scale = fp32(1))[name = " S_("y") "];\n    } -> (y);\n}\n", head);
  bare_error(buf, "quantize(", &in2, "quantize: scale must be a scalar when axis is not given");
  snprintf(buf, sizeof buf, "%s        tensor<int8, [2]> q = quantize(axis = int32(0), input = x, output_dtype = " S_("int8") ", scale = tensor<fp32, [3]>([1, 2, 3]))[name = " S_("q") "];\n"
           "        tensor<fp32, [2]> y = dequantize(input = q, scale = fp32(1))[name = " S_("y") "];\n    } -> (y);\n}\n", head);
  bare_error(buf, "quantize(", &in2, "quantize: scale must be a scalar or a vector of the 2 elements of dimension 0");
  snprintf(buf, sizeof buf, "%s        tensor<fp32, [2]> y = dequantize(input = x, scale = fp32(1))[name = " S_("y") "];\n    } -> (y);\n}\n", head);
  bare_error(buf, "dequantize(", &in2, "dequantize: input must be int8 or uint8, not fp32");
  snprintf(buf, sizeof buf, "%s        tensor<int8, [2]> q = quantize(input = x, output_dtype = " S_("int8") ", scale = fp32(1))[name = " S_("q") "];\n    } -> (q);\n}\n", head);
  write_bare(buf);
  expect_error_at(buf, "main<", &in2, 1, "output 'q' is int8, which the CPU backend does not return");
  cleanup();
}

Test(cpu, quantize_against_reference) {
  write_bare(MIL_HEAD
             "    func main<ios18>(tensor<fp32, [7, 33, 5]> x) {\n"
             "        tensor<fp32, [33]> sc = const()[name = " S_("sc") ", val = tensor<fp32, [33]>([0.125, 0.25, 0.5, 1, 0.0625, 0.125, 0.25, 0.5, 1, 0.0625, 0.125, 0.25, 0.5, 1, 0.0625, 0.125, 0.25, 0.5, 1, 0.0625, 0.125, 0.25, 0.5, 1, 0.0625, 0.125, 0.25, 0.5, 1, 0.0625, 0.125, 0.25, 0.5])];\n"
             "        tensor<int8, [33]> zp = const()[name = " S_("zp") ", val = tensor<int8, [33]>([0, 1, -1, 5, -7, 0, 1, -1, 5, -7, 0, 1, -1, 5, -7, 0, 1, -1, 5, -7, 0, 1, -1, 5, -7, 0, 1, -1, 5, -7, 0, 1, -1])];\n"
             "        tensor<int8, [7, 33, 5]> q = quantize(axis = int32(1), input = x, output_dtype = " S_("int8") ", scale = sc, zero_point = zp)[name = " S_("q") "];\n"
             "        tensor<fp32, [7, 33, 5]> y = dequantize(axis = int32(-2), input = q, scale = sc, zero_point = zp)[name = " S_("y") "];\n"
             "    } -> (y);\n}\n");
  static float x[7 * 33 * 5];
  fill_random(x, 7 * 33 * 5, 11, true); /* coarse: multiples of 1/8, so many exact halves */
  for (int i = 0; i < 7 * 33 * 5; i += 13) x[i] *= 40; /* some beyond the int8 range */
  CpuTensor in = f32_tensor(x, 3, (int64_t[]){7, 33, 5}), out;
  run_twice(CPU_NUMERICS_FP32, &in, &out, 1);
  static const double scs[5] = {0.125, 0.25, 0.5, 1, 0.0625};
  static const int zps[5] = {0, 1, -1, 5, -7};
  for (int i = 0; i < 7 * 33 * 5; i++) {
    int c = i / 5 % 33;
    double s = scs[c % 5], t = (double)x[i] / s, fl = floor(t);
    /* round half to even, written out */
    double r = t - fl < 0.5 ? fl : t - fl > 0.5 ? fl + 1 : fmod(fl, 2) == 0 ? fl : fl + 1;
    r += zps[c % 5];
    r = r < -128 ? -128 : r > 127 ? 127 : r;
    double want = s * (r - zps[c % 5]);
    cr_assert(out_f32(&out)[i] == (float)want, "y[%d] = %g, want %g (x %g)", i, (double)out_f32(&out)[i], want, (double)x[i]);
  }
  cpu_tensor_free(&out);
  cleanup();
}

Test(cpu, pooling_by_hand) {
  write_bare(MIL_HEAD
             "    func main<ios18>(tensor<fp32, [16]> x) {\n"
             "        tensor<int32, [4]> shp = const()[name = " S_("shp") ", val = tensor<int32, [4]>([1, 1, 4, 4])];\n"
             "        tensor<fp32, [1, 1, 4, 4]> r = reshape(shape = shp, x = x)[name = " S_("r") "];\n"
             "        tensor<fp32, [1, 1, 2, 2]> p1 = max_pool(kernel_sizes = tensor<int32, [2]>([2, 2]), pad_type = " S_("valid") ", strides = tensor<int32, [2]>([2, 2]), x = r)[name = " S_("p1") "];\n"
             "        tensor<fp32, [1, 1, 4, 4]> p2 = avg_pool(exclude_padding_from_average = bool(false), kernel_sizes = tensor<int32, [2]>([3, 3]), pad = tensor<int32, [4]>([1, 1, 1, 1]), pad_type = " S_("custom") ", x = r)[name = " S_("p2") "];\n"
             "        tensor<fp32, [1, 1, 4, 4]> p3 = avg_pool(exclude_padding_from_average = bool(true), kernel_sizes = tensor<int32, [2]>([3, 3]), pad = tensor<int32, [4]>([1, 1, 1, 1]), pad_type = " S_("custom") ", x = r)[name = " S_("p3") "];\n"
             "        tensor<fp32, [1, 1, 2, 2]> p4 = max_pool(ceil_mode = bool(true), kernel_sizes = tensor<int32, [2]>([3, 3]), pad_type = " S_("valid") ", strides = tensor<int32, [2]>([2, 2]), x = r)[name = " S_("p4") "];\n"
             "        tensor<fp32, [1, 1, 2, 2]> p5 = avg_pool(ceil_mode = bool(true), kernel_sizes = tensor<int32, [2]>([3, 3]), pad_type = " S_("valid") ", strides = tensor<int32, [2]>([2, 2]), x = r)[name = " S_("p5") "];\n"
             "        tensor<fp32, [1, 1, 4, 4]> p6 = max_pool(kernel_sizes = tensor<int32, [2]>([2, 2]), pad_type = " S_("same") ", x = r)[name = " S_("p6") "];\n"
             "        tensor<int32, [3]> shp1 = const()[name = " S_("shp1") ", val = tensor<int32, [3]>([1, 2, 8])];\n"
             "        tensor<fp32, [1, 2, 8]> r1 = reshape(shape = shp1, x = x)[name = " S_("r1") "];\n"
             "        tensor<fp32, [1, 2, 2]> p7 = max_pool(kernel_sizes = tensor<int32, [1]>([3]), pad_type = " S_("valid") ", strides = tensor<int32, [1]>([3]), x = r1)[name = " S_("p7") "];\n"
             "        tensor<fp32, [1, 2, 3]> p8 = avg_pool(kernel_sizes = tensor<int32, [1]>([2]), pad_type = " S_("same_lower") ", strides = tensor<int32, [1]>([3]), x = r1)[name = " S_("p8") "];\n"
             "    } -> (p1, p2, p3, p4, p5, p6, p7, p8);\n}\n");
  float x[16];
  for (int i = 0; i < 16; i++) x[i] = (float)i;
  CpuTensor in = f32_tensor(x, 1, (int64_t[]){16}), out[8];
  run_twice(CPU_NUMERICS_FP32, &in, out, 8);
  const int64_t d22[4] = {1, 1, 2, 2}, d44[4] = {1, 1, 4, 4};
  expect_values(&out[0], MIL_DT_FP32, 4, d22, (double[]){5, 7, 13, 15}, "p1");
  /* 3x3 windows padded by 1: the padding counts (a corner is 10 / 9), or not (10 / 4). */
  expect_values(&out[1], MIL_DT_FP32, 4, d44,
                (double[]){(float)(10 / 9.), 2, (float)(24 / 9.), 2, 3, 5, 6, (float)(39 / 9.), (float)(51 / 9.), 9, 10, 7,
                           (float)(42 / 9.), (float)(66 / 9.), 8, (float)(50 / 9.)},
                "p2");
  expect_values(&out[2], MIL_DT_FP32, 4, d44,
                (double[]){2.5, 3, 4, 4.5, 4.5, 5, 6, 6.5, 8.5, 9, 10, 10.5, 10.5, 11, 12, 12.5}, "p3");
  /* ceil_mode: the windows at 2 overhang; max ignores, avg divides by what is inside. */
  expect_values(&out[3], MIL_DT_FP32, 4, d22, (double[]){10, 11, 14, 15}, "p4");
  expect_values(&out[4], MIL_DT_FP32, 4, d22, (double[]){5, 6.5, 11, 12.5}, "p5");
  /* same, kernel 2: one extra row and column after */
  expect_values(&out[5], MIL_DT_FP32, 4, d44, (double[]){5, 6, 7, 7, 9, 10, 11, 11, 13, 14, 15, 15, 13, 14, 15, 15}, "p6");
  expect_values(&out[6], MIL_DT_FP32, 3, (int64_t[]){1, 2, 2}, (double[]){2, 5, 10, 13}, "p7");
  /* same_lower, kernel 2 stride 3 over 8: 3 outputs, padding 3*3 - 8 + 2 - 3 = 0 */
  expect_values(&out[7], MIL_DT_FP32, 3, (int64_t[]){1, 2, 3}, (double[]){0.5, 3.5, 6.5, 8.5, 11.5, 14.5}, "p8");
  for (int i = 0; i < 8; i++) cpu_tensor_free(&out[i]);
  cleanup();
  float x4[16] = {0};
  CpuTensor in4 = f32_tensor(x4, 4, (int64_t[]){1, 1, 4, 4});
  const char *head = MIL_HEAD "    func main<ios18>(tensor<fp32, [1, 1, 4, 4]> x) {\n";
  char buf[1024];
  snprintf(buf, sizeof buf, "%s        tensor<fp32, [1, 1, 2, 2]> y = max_pool(kernel_sizes = tensor<int32, [3]>([2, 2, 2]), pad_type = " S_("valid") ", x = x)[name = " S_("y") "];\n    } -> (y);\n}\n", head);
  bare_error(buf, "max_pool(", &in4, "max_pool: kernel_sizes needs 2 entries");
  snprintf(buf, sizeof buf, "%s        tensor<fp32, [1, 1, 2, 2]> y = avg_pool(ceil_mode = bool(true), kernel_sizes = tensor<int32, [2]>([2, 2]), pad_type = " S_("same") ", x = x)[name = " S_("y") "];\n    } -> (y);\n}\n", head);
  bare_error(buf, "avg_pool(", &in4, "avg_pool: ceil_mode needs pad_type valid or custom");
  snprintf(buf, sizeof buf, "%s        tensor<fp32, [1, 1, 3, 3]> y = max_pool(kernel_sizes = tensor<int32, [2]>([2, 2]), pad_type = " S_("valid") ", strides = tensor<int32, [2]>([2, 2]), x = x)[name = " S_("y") "];\n    } -> (y);\n}\n", head);
  bare_error(buf, "max_pool(", &in4, "max_pool: the result shape is [1, 1, 2, 2] but the statement declares [1, 1, 3, 3]");
  snprintf(buf, sizeof buf, "%s        tensor<fp32, [1, 1, 2, 2]> y = max_pool(kernel_sizes = tensor<int32, [2]>([2, 2]), x = x)[name = " S_("y") "];\n    } -> (y);\n}\n", head);
  bare_error(buf, "max_pool(", &in4, "max_pool: missing argument 'pad_type'");
}

/* Naive pooling of x [N, C, H, W] (kernel kh x kw, strides sh sw, padding
 * t, l before and the output size given): max, or the average over the
 * window's positions inside the padded input (excl: inside x only). */
static double pool_ref(const float *x, int64_t H, int64_t W, int64_t nc, int64_t oy, int64_t ox, int kh, int kw, int sh,
                       int sw, int t, int l, int avg, int excl) {
  double r = avg ? 0 : -HUGE_VAL;
  int cnt = 0;
  for (int dy = 0; dy < kh; dy++)
    for (int dx = 0; dx < kw; dx++) {
      int64_t y = oy * sh - t + dy, xx = ox * sw - l + dx;
      bool inside = y >= 0 && y < H && xx >= 0 && xx < W;
      if (!excl || inside) cnt++;
      if (!inside) continue;
      double v = x[(nc * H + y) * W + xx];
      r = avg ? r + v : (v > r ? v : r);
    }
  return avg ? r / cnt : r;
}

Test(cpu, pooling_against_reference) {
  write_bare(MIL_HEAD
             "    func main<ios18>(tensor<fp32, [2, 3, 9, 11]> x) {\n"
             "        tensor<fp32, [2, 3, 4, 4]> a = max_pool(kernel_sizes = tensor<int32, [2]>([3, 2]), pad = tensor<int32, [4]>([1, 0, 1, 1]), pad_type = " S_("custom") ", strides = tensor<int32, [2]>([2, 3]), x = x)[name = " S_("a") "];\n"
             "        tensor<fp32, [2, 3, 4, 4]> b = avg_pool(kernel_sizes = tensor<int32, [2]>([3, 2]), pad = tensor<int32, [4]>([1, 0, 1, 1]), pad_type = " S_("custom") ", strides = tensor<int32, [2]>([2, 3]), x = x)[name = " S_("b") "];\n"
             "        tensor<fp32, [2, 3, 4, 4]> c = avg_pool(exclude_padding_from_average = bool(true), kernel_sizes = tensor<int32, [2]>([3, 2]), pad = tensor<int32, [4]>([1, 0, 1, 1]), pad_type = " S_("custom") ", strides = tensor<int32, [2]>([2, 3]), x = x)[name = " S_("c") "];\n"
             "    } -> (a, b, c);\n}\n");
  static float x[2 * 3 * 9 * 11];
  fill_random(x, 2 * 3 * 9 * 11, 5, false);
  CpuTensor in = f32_tensor(x, 4, (int64_t[]){2, 3, 9, 11}), out[3];
  run_twice(CPU_NUMERICS_FP32, &in, out, 3);
  for (int k = 0; k < 3; k++)
    for (int64_t nc = 0; nc < 6; nc++)
      for (int64_t oy = 0; oy < 4; oy++)
        for (int64_t ox = 0; ox < 4; ox++) {
          double want = pool_ref(x, 9, 11, nc, oy, ox, 3, 2, 2, 3, 1, 1, k > 0, k == 2);
          float got = out_f32(&out[k])[(nc * 4 + oy) * 4 + ox];
          cr_assert(fabs((double)got - want) <= 1e-6 * fmax(1, fabs(want)), "output %d [%lld, %lld, %lld]: %g, want %g", k,
                    (long long)nc, (long long)oy, (long long)ox, (double)got, want);
        }
  for (int i = 0; i < 3; i++) cpu_tensor_free(&out[i]);
  cleanup();
}

Test(cpu, shape_ops_by_hand) {
  write_bare(MIL_HEAD
             "    func main<ios18>(tensor<fp32, [6]> x) {\n"
             "        tensor<int32, [2]> shp = const()[name = " S_("shp") ", val = tensor<int32, [2]>([2, 3])];\n"
             "        tensor<fp32, [2, 3]> r = reshape(shape = shp, x = x)[name = " S_("r") "];\n"
             "        tensor<fp32, [1, 2, 3, 1]> e = expand_dims(axes = tensor<int32, [2]>([0, -1]), x = r)[name = " S_("e") "];\n"
             "        tensor<fp32, [2, 3]> sq = squeeze(x = e)[name = " S_("sq") "];\n"
             "        tensor<fp32, [2, 3, 1]> sq2 = squeeze(axes = tensor<int32, [1]>([0]), x = e)[name = " S_("sq2") "];\n"
             "        tensor<fp32, [1, 2, 3, 1]> sq3 = squeeze(axes = tensor<int32, [1]>([1]), x = e)[name = " S_("sq3") "];\n"
             "        tensor<fp32, [2, 3]> c = const()[name = " S_("c") ", val = tensor<fp32, [2, 3]>([10, 11, 12, 13, 14, 15])];\n"
             "        tensor<fp32, [2, 2, 3]> sk = stack(axis = int32(1), values = (r, c))[name = " S_("sk") "];\n"
             "        tensor<fp32, [2, 3, 2]> sk2 = stack(axis = int32(-1), values = (r, c))[name = " S_("sk2") "];\n"
             "        tensor<fp32, [4, 3]> t = tile(reps = tensor<int32, [2]>([2, 1]), x = r)[name = " S_("t") "];\n"
             "        tensor<fp32, [2, 6]> t2 = tile(reps = tensor<int32, [2]>([1, 2]), x = r)[name = " S_("t2") "];\n"
             "        tensor<fp32, [3, 6]> pc = pad(constant_val = fp32(9), mode = " S_("constant") ", pad = tensor<int32, [4]>([1, 0, 2, 1]), x = r)[name = " S_("pc") "];\n"
             "        tensor<fp32, [2, 6]> pr = pad(mode = " S_("reflect") ", pad = tensor<int32, [2]>([2, 1]), x = r)[name = " S_("pr") "];\n"
             "        tensor<fp32, [4, 6]> pe = pad(mode = " S_("replicate") ", pad = tensor<int32, [4]>([1, 1, 1, 2]), x = r)[name = " S_("pe") "];\n"
             "        tensor<int32, [4]> sh = shape(x = e)[name = " S_("sh") "];\n"
             "        tensor<int32, [3]> rg = range_1d(end = int32(11), start = int32(2), step = int32(3))[name = " S_("rg") "];\n"
             "        tensor<fp32, [4]> rgf = range_1d(end = fp32(-1), start = fp32(1), step = fp32(-0x1p-1))[name = " S_("rgf") "];\n"
             "    } -> (e, sq, sq2, sq3, sk, sk2, t, t2, pc, pr, pe, sh, rg, rgf);\n}\n");
  float x[6] = {0, 1, 2, 3, 4, 5};
  CpuTensor in = f32_tensor(x, 1, (int64_t[]){6}), out[14];
  run_twice(CPU_NUMERICS_ANE, &in, out, 14);
  const double r[6] = {0, 1, 2, 3, 4, 5};
  expect_values(&out[0], MIL_DT_FP32, 4, (int64_t[]){1, 2, 3, 1}, r, "e");
  expect_values(&out[1], MIL_DT_FP32, 2, (int64_t[]){2, 3}, r, "sq");
  expect_values(&out[2], MIL_DT_FP32, 3, (int64_t[]){2, 3, 1}, r, "sq2");
  expect_values(&out[3], MIL_DT_FP32, 4, (int64_t[]){1, 2, 3, 1}, r, "sq3"); /* a listed dim of size 2 stays */
  expect_values(&out[4], MIL_DT_FP32, 3, (int64_t[]){2, 2, 3}, (double[]){0, 1, 2, 10, 11, 12, 3, 4, 5, 13, 14, 15}, "sk");
  expect_values(&out[5], MIL_DT_FP32, 3, (int64_t[]){2, 3, 2}, (double[]){0, 10, 1, 11, 2, 12, 3, 13, 4, 14, 5, 15}, "sk2");
  expect_values(&out[6], MIL_DT_FP32, 2, (int64_t[]){4, 3}, (double[]){0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5}, "t");
  expect_values(&out[7], MIL_DT_FP32, 2, (int64_t[]){2, 6}, (double[]){0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5}, "t2");
  expect_values(&out[8], MIL_DT_FP32, 2, (int64_t[]){3, 6},
                (double[]){9, 9, 9, 9, 9, 9, 9, 9, 0, 1, 2, 9, 9, 9, 3, 4, 5, 9}, "pc");
  expect_values(&out[9], MIL_DT_FP32, 2, (int64_t[]){2, 6}, (double[]){2, 1, 0, 1, 2, 1, 5, 4, 3, 4, 5, 4}, "pr");
  expect_values(&out[10], MIL_DT_FP32, 2, (int64_t[]){4, 6},
                (double[]){0, 0, 1, 2, 2, 2, 0, 0, 1, 2, 2, 2, 3, 3, 4, 5, 5, 5, 3, 3, 4, 5, 5, 5}, "pe");
  expect_values(&out[11], MIL_DT_INT32, 1, (int64_t[]){4}, (double[]){1, 2, 3, 1}, "sh");
  expect_values(&out[12], MIL_DT_INT32, 1, (int64_t[]){3}, (double[]){2, 5, 8}, "rg");
  expect_values(&out[13], MIL_DT_FP32, 1, (int64_t[]){4}, (double[]){1, 0.5, 0, -0.5}, "rgf");
  for (int i = 0; i < 14; i++) cpu_tensor_free(&out[i]);
  cleanup();
  float x6[6] = {0};
  CpuTensor in6 = f32_tensor(x6, 2, (int64_t[]){2, 3});
  const char *head = MIL_HEAD "    func main<ios18>(tensor<fp32, [2, 3]> x) {\n";
  char buf[1024];
  snprintf(buf, sizeof buf, "%s        tensor<fp32, [1, 1, 2, 3]> y = expand_dims(axes = tensor<int32, [2]>([0, -4]), x = x)[name = " S_("y") "];\n    } -> (y);\n}\n", head);
  bare_error(buf, "expand_dims(", &in6, "expand_dims: axis -4 is listed twice");
  snprintf(buf, sizeof buf, "%s        tensor<fp32, [3, 2]> z = reshape(shape = tensor<int32, [2]>([3, 2]), x = x)[name = " S_("z") "];\n"
           "        tensor<fp32, [2, 2, 3]> y = stack(axis = int32(0), values = (x, z))[name = " S_("y") "];\n    } -> (y);\n}\n", head);
  bare_error(buf, "stack(", &in6, "stack: value 1 does not have the shape of the first value");
  snprintf(buf, sizeof buf, "%s        tensor<fp32, [4, 3]> y = tile(reps = tensor<int32, [1]>([2]), x = x)[name = " S_("y") "];\n    } -> (y);\n}\n", head);
  bare_error(buf, "tile(", &in6, "tile: reps has 1 entries for rank 2");
  snprintf(buf, sizeof buf, "%s        tensor<fp32, [2, 7]> y = pad(mode = " S_("reflect") ", pad = tensor<int32, [2]>([3, 1]), x = x)[name = " S_("y") "];\n    } -> (y);\n}\n", head);
  bare_error(buf, "pad(", &in6, "pad: reflect padding of dimension 1 needs pads below its size 3");
  snprintf(buf, sizeof buf, "%s        tensor<fp32, [2, 5]> y = pad(mode = " S_("wrap") ", pad = tensor<int32, [2]>([1, 1]), x = x)[name = " S_("y") "];\n    } -> (y);\n}\n", head);
  bare_error(buf, "pad(", &in6, "pad: unknown mode 'wrap' (constant, reflect or replicate)");
  snprintf(buf, sizeof buf, "%s        tensor<int32, [4]> y = range_1d(end = int32(11), start = int32(2), step = int32(3))[name = " S_("y") "];\n    } -> (y);\n}\n", head);
  bare_error(buf, "range_1d(", &in6, "range_1d: the result shape is [3] but the statement declares [4]");
  snprintf(buf, sizeof buf, "%s        tensor<int32, [0]> y = range_1d(end = int32(11), start = int32(2), step = int32(0))[name = " S_("y") "];\n    } -> (y);\n}\n", head);
  bare_error(buf, "range_1d(", &in6, "range_1d: start, end and step must be finite and step not 0");
}

Test(cpu, index_ops_by_hand) {
  const char *mil =
      MIL_HEAD
      "    func main<ios18>(tensor<fp32, [6]> x, tensor<int32, [2, 2]> gi) {\n"
      "        tensor<int32, [2]> shp = const()[name = " S_("shp") ", val = tensor<int32, [2]>([2, 3])];\n"
      "        tensor<fp32, [2, 3]> r = reshape(shape = shp, x = x)[name = " S_("r") "];\n"
      "        tensor<fp32, [2, 2]> ga = gather_along_axis(axis = int32(1), indices = gi, x = r)[name = " S_("ga") "];\n"
      "        tensor<fp32, [1, 3]> ga0 = gather_along_axis(indices = tensor<int32, [1, 3]>([1, 0, 1]), x = r)[name = " S_("ga0") "];\n"
      "        tensor<fp32, [6]> y = sub(x = x, y = fp32(0x1.4p+1))[name = " S_("y") "];\n"
      "        tensor<fp32, [6]> fl = floor(x = y)[name = " S_("fl") "];\n"
      "        tensor<fp32, [6]> fd = floor_div(x = y, y = fp32(-2))[name = " S_("fd") "];\n"
      "        tensor<int32, [4]> fdi = floor_div(x = tensor<int32, [4]>([7, -7, 7, -7]), y = tensor<int32, [4]>([2, 2, -2, -2]))[name = " S_("fdi") "];\n"
      "        tensor<fp32, [2, 4]> v = const()[name = " S_("v") ", val = tensor<fp32, [2, 4]>([3, 1, 3, 2, -1, 5, 0, 5])];\n"
      "        tensor<fp32, [2, 2]> tv, tensor<int32, [2, 2]> ti = topk(k = int32(2), x = v)[name = " S_("tk") "];\n"
      "        tensor<fp32, [2, 2]> av, tensor<int32, [2, 2]> ai = topk(ascending = bool(true), axis = int32(-1), k = int32(2), x = v)[name = " S_("ak") "];\n"
      "        tensor<fp32, [1, 4]> cv, tensor<int32, [1, 4]> ci = topk(axis = int32(0), x = v)[name = " S_("ck") "];\n"
      "    } -> (ga, ga0, fl, fd, fdi, tv, ti, av, ai, cv, ci);\n}\n";
  write_bare(mil);
  float x[6] = {0, 1, 2, 3, 4, 5};
  int32_t gi[4] = {2, 0, 1, 1};
  CpuTensor in[2] = {f32_tensor(x, 1, (int64_t[]){6}), {.dtype = MIL_DT_INT32, .rank = 2, .dims = {2, 2}, .data = gi}};
  CpuTensor out[11];
  run_twice(CPU_NUMERICS_FP32, in, out, 11);
  expect_values(&out[0], MIL_DT_FP32, 2, (int64_t[]){2, 2}, (double[]){2, 0, 4, 4}, "ga");
  expect_values(&out[1], MIL_DT_FP32, 2, (int64_t[]){1, 3}, (double[]){3, 1, 5}, "ga0");
  expect_values(&out[2], MIL_DT_FP32, 1, (int64_t[]){6}, (double[]){-3, -2, -1, 0, 1, 2}, "fl");
  /* (x - 2.5) / -2 = 1.25, 0.75, 0.25, -0.25, -0.75, -1.25, toward -inf */
  expect_values(&out[3], MIL_DT_FP32, 1, (int64_t[]){6}, (double[]){1, 0, 0, -1, -1, -2}, "fd");
  expect_values(&out[4], MIL_DT_INT32, 1, (int64_t[]){4}, (double[]){3, -4, -4, 3}, "fdi");
  /* equal values keep their order */
  expect_values(&out[5], MIL_DT_FP32, 2, (int64_t[]){2, 2}, (double[]){3, 3, 5, 5}, "tv");
  expect_values(&out[6], MIL_DT_INT32, 2, (int64_t[]){2, 2}, (double[]){0, 2, 1, 3}, "ti");
  expect_values(&out[7], MIL_DT_FP32, 2, (int64_t[]){2, 2}, (double[]){1, 2, -1, 0}, "av");
  expect_values(&out[8], MIL_DT_INT32, 2, (int64_t[]){2, 2}, (double[]){1, 3, 0, 2}, "ai");
  expect_values(&out[9], MIL_DT_FP32, 2, (int64_t[]){1, 4}, (double[]){3, 5, 3, 5}, "cv");
  expect_values(&out[10], MIL_DT_INT32, 2, (int64_t[]){1, 4}, (double[]){0, 1, 0, 1}, "ci");
  for (int i = 0; i < 11; i++) cpu_tensor_free(&out[i]);
  /* the indices are a runtime value: out of range (iOS17 on, negative too) is an error of the run */
  gi[1] = 3;
  expect_error_at(mil, "gather_along_axis(", in, 11, "gather_along_axis: index 3 is out of range for dimension 1 of size 3");
  gi[1] = -1;
  expect_error_at(mil, "gather_along_axis(", in, 11, "gather_along_axis: index -1 is out of range for dimension 1 of size 3");
  cleanup();
  float x6[6] = {0};
  CpuTensor in6 = f32_tensor(x6, 2, (int64_t[]){2, 3});
  const char *head = MIL_HEAD "    func main<ios18>(tensor<fp32, [2, 3]> x) {\n";
  char buf[1024];
  snprintf(buf, sizeof buf, "%s        tensor<fp32, [2, 5]> v, tensor<int32, [2, 5]> i = topk(k = int32(5), x = x)[name = " S_("t") "];\n    } -> (v, i);\n}\n", head);
  bare_error(buf, "topk(", &in6, "topk: k 5 is out of range for dimension 1 of size 3");
  snprintf(buf, sizeof buf, "%s        tensor<fp32, [2, 3]> y = gather_along_axis(axis = int32(0), indices = tensor<int32, [2]>([0, 1]), x = x)[name = " S_("y") "];\n    } -> (y);\n}\n", head);
  bare_error(buf, "gather_along_axis(", &in6, "gather_along_axis: indices must have the rank of x and its dims except at axis 0");
}

/* x's element for padded position p of a dim of size D in each mode (-1: the constant), written naively. */
static int64_t pad_src_ref(const char *mode, int64_t p, int64_t D) {
  if (p >= 0 && p < D) return p;
  if (!strcmp(mode, "constant")) return -1;
  if (!strcmp(mode, "replicate")) return p < 0 ? 0 : D - 1;
  int64_t q = p;
  while (q < 0 || q >= D) q = q < 0 ? -q : 2 * D - 2 - q; /* mirror at the edges, edge not repeated */
  return q;
}

Test(cpu, shape_and_index_ops_against_reference) {
  write_bare(MIL_HEAD
             "    func main<ios18>(tensor<fp32, [3, 7, 9]> x, tensor<int32, [3, 4, 9]> gi) {\n"
             "        tensor<fp32, [3, 10, 13]> pc = pad(constant_val = fp32(-7), pad = tensor<int32, [4]>([2, 1, 0, 4]), x = x)[name = " S_("pc") "];\n"
             "        tensor<fp32, [3, 13, 17]> pr = pad(mode = " S_("reflect") ", pad = tensor<int32, [4]>([6, 0, 3, 5]), x = x)[name = " S_("pr") "];\n"
             "        tensor<fp32, [5, 15, 10]> pe = pad(mode = " S_("replicate") ", pad = tensor<int32, [6]>([1, 1, 8, 0, 0, 1]), x = x)[name = " S_("pe") "];\n"
             "        tensor<fp32, [6, 7, 27]> t = tile(reps = tensor<int32, [3]>([2, 1, 3]), x = x)[name = " S_("t") "];\n"
             "        tensor<fp32, [3, 4, 9]> g = gather_along_axis(axis = int32(-2), indices = gi, x = x)[name = " S_("g") "];\n"
             "        tensor<fp32, [3, 7, 5]> tv, tensor<int32, [3, 7, 5]> ti = topk(k = int32(5), x = x)[name = " S_("tk") "];\n"
             "        tensor<fp32, [3, 7, 9]> fd = floor_div(x = x, y = fp32(0x1.99999ap-4))[name = " S_("fd") "];\n"
             "    } -> (pc, pr, pe, t, g, tv, ti, fd);\n}\n");
  static float x[3 * 7 * 9];
  static int32_t gi[3 * 4 * 9];
  fill_random(x, 3 * 7 * 9, 21, true); /* coarse: ties for topk */
  for (int i = 0; i < 3 * 4 * 9; i++) gi[i] = (int32_t)((i * 7919u + 13u) % 7u);
  CpuTensor in[2] = {f32_tensor(x, 3, (int64_t[]){3, 7, 9}), {.dtype = MIL_DT_INT32, .rank = 3, .dims = {3, 4, 9}, .data = gi}};
  CpuTensor out[8];
  run_twice(CPU_NUMERICS_FP32, in, out, 8);
  const int64_t xd[3] = {3, 7, 9};
  struct {
    const char *mode;
    int64_t before[3], dims[3];
  } pads[3] = {{"constant", {0, 2, 0}, {3, 10, 13}}, {"reflect", {0, 6, 3}, {3, 13, 17}}, {"replicate", {1, 8, 0}, {5, 15, 10}}};
  for (int k = 0; k < 3; k++)
    for (int64_t i = 0; i < prod(pads[k].dims, 3); i++) {
      int64_t c[3] = {i / (pads[k].dims[1] * pads[k].dims[2]), i / pads[k].dims[2] % pads[k].dims[1], i % pads[k].dims[2]}, s[3];
      bool constant = false;
      for (int d = 0; d < 3; d++) {
        s[d] = pad_src_ref(pads[k].mode, c[d] - pads[k].before[d], xd[d]);
        constant = constant || s[d] < 0;
      }
      float want = constant ? -7.0f : x[(s[0] * 7 + s[1]) * 9 + s[2]];
      cr_assert(out_f32(&out[k])[i] == want, "%s [%lld]", pads[k].mode, (long long)i);
    }
  for (int a = 0; a < 6; a++)
    for (int b = 0; b < 7; b++)
      for (int c = 0; c < 27; c++) cr_assert(out_f32(&out[3])[(a * 7 + b) * 27 + c] == x[((a % 3) * 7 + b) * 9 + c % 9]);
  for (int a = 0; a < 3; a++)
    for (int b = 0; b < 4; b++)
      for (int c = 0; c < 9; c++)
        cr_assert(out_f32(&out[4])[(a * 4 + b) * 9 + c] == x[(a * 7 + gi[(a * 4 + b) * 9 + c]) * 9 + c]);
  /* topk: a stable descending sort of each row of 9, first 5 kept (insertion sort here) */
  for (int row = 0; row < 21; row++) {
    int idx[9];
    for (int m = 0; m < 9; m++) {
      int p = m;
      while (p > 0 && x[row * 9 + idx[p - 1]] < x[row * 9 + m]) idx[p] = idx[p - 1], p--;
      idx[p] = m;
    }
    for (int r = 0; r < 5; r++) {
      cr_assert_eq(((int32_t *)out[6].data)[row * 5 + r], idx[r], "ti row %d rank %d", row, r);
      cr_assert(out_f32(&out[5])[row * 5 + r] == x[row * 9 + idx[r]]);
    }
  }
  /* floor_div by 0.1f: n with n * y <= x < (n + 1) * y (products exact in double) */
  for (int i = 0; i < 3 * 7 * 9; i++) {
    double n = (double)out_f32(&out[7])[i], y = (double)0x1.99999ap-4f;
    cr_assert(n == floor(n) && n * y <= (double)x[i] && (double)x[i] < (n + 1) * y, "fd[%d] = %g for %g", i, n, (double)x[i]);
  }
  for (int i = 0; i < 8; i++) cpu_tensor_free(&out[i]);
  cleanup();
}

Test(cpu, small_integer_casts_and_uint16_topk_indices) {
  const char *mil =
      MIL_HEAD
      "    func main<ios17>(tensor<fp32, [4]> x) {\n"
      "        tensor<int16, [4]> a = cast(dtype = " S_("int16") ", x = x)[name = " S_("a") "];\n"
      "        tensor<int32, [4]> b = cast(dtype = " S_("int32") ", x = a)[name = " S_("b") "];\n"
      "        tensor<fp32, [2]> v, tensor<uint16, [2]> i = topk(k = int32(2), output_indices_dtype = " S_("uint16") ", x = x)[name = " S_("t") "];\n"
      "        tensor<int32, [2]> j = cast(dtype = " S_("int32") ", x = i)[name = " S_("j") "];\n"
      "        tensor<int16, [1]> gi = cast(dtype = " S_("int16") ", x = tensor<int32, [1]>([3]))[name = " S_("gi") "];\n"
      "        tensor<fp32, [1]> g = gather_along_axis(axis = int32(0), indices = gi, x = x)[name = " S_("g") "];\n"
      "        tensor<uint8, [4]> u = cast(dtype = " S_("uint8") ", x = x)[name = " S_("u") "];\n"
      "        tensor<fp32, [4]> f = cast(dtype = " S_("fp32") ", x = u)[name = " S_("f") "];\n"
      "    } -> (b, v, j, g, f);\n}\n";
  write_bare(mil);
  float x[4] = {3.75f, 200, 0, 7.5f};
  CpuTensor in = f32_tensor(x, 1, (int64_t[]){4}), out[5];
  run_twice(CPU_NUMERICS_FP32, &in, out, 5);
  expect_values(&out[0], MIL_DT_INT32, 1, (int64_t[]){4}, (double[]){3, 200, 0, 7}, "b");
  expect_values(&out[1], MIL_DT_FP32, 1, (int64_t[]){2}, (double[]){200, 7.5}, "v");
  expect_values(&out[2], MIL_DT_INT32, 1, (int64_t[]){2}, (double[]){1, 3}, "j");
  expect_values(&out[3], MIL_DT_FP32, 1, (int64_t[]){1}, (double[]){7.5}, "g");
  expect_values(&out[4], MIL_DT_FP32, 1, (int64_t[]){4}, (double[]){3, 200, 0, 7}, "f");
  for (int i = 0; i < 5; i++) cpu_tensor_free(&out[i]);
  x[1] = 300; /* beyond uint8 */
  expect_error_at(mil, "cast(dtype = " S_("uint8"), &in, 5, "cast: cast of 300 to uint8 is out of range");
  x[1] = -40000; /* beyond int16 */
  expect_error_at(mil, "cast(", &in, 5, "cast: cast of -40000 to int16 is out of range");
  cleanup();
  float x2[2] = {0};
  CpuTensor in2 = f32_tensor(x2, 1, (int64_t[]){2});
  bare_error(MIL_HEAD "    func main<ios17>(tensor<fp32, [2]> x) {\n"
                      "        tensor<fp32, [1]> v, tensor<int32, [1]> i = topk(output_indices_dtype = " S_("uint16") ", x = x)[name = " S_("t") "];\n"
                      "    } -> (v, i);\n}\n",
             "topk(", &in2, "topk: the indices are uint16, but the result is declared int32");
}

Test(cpu, lstm_by_hand) {
  write_bare(MIL_HEAD
             "    func main<ios17>(tensor<fp32, [2, 1, 1]> x, tensor<fp32, [1, 1]> h0, tensor<fp32, [1, 1]> c0) {\n"
             "        tensor<fp32, [4, 1]> wi = const()[name = " S_("wi") ", val = tensor<fp32, [4, 1]>([0.5, 1, 0.25, 2])];\n"
             "        tensor<fp32, [4, 1]> wh = const()[name = " S_("wh") ", val = tensor<fp32, [4, 1]>([1, 0, 2, -1])];\n"
             "        tensor<fp32, [4]> b = const()[name = " S_("b") ", val = tensor<fp32, [4]>([0, 0.5, 0, 0])];\n"
             "        tensor<fp32, [2, 1, 1]> y, tensor<fp32, [1, 1]> h, tensor<fp32, [1, 1]> c = lstm(activation = " S_("linear") ", bias = b, cell_activation = " S_("linear") ", initial_c = c0, initial_h = h0, output_sequence = bool(true), recurrent_activation = " S_("linear") ", weight_hh = wh, weight_ih = wi, x = x)[name = " S_("l") "];\n"
             "        tensor<fp32, [3]> p = const()[name = " S_("p") ", val = tensor<fp32, [3]>([0.5, -0.5, 1])];\n"
             "        tensor<fp32, [1, 1, 1]> y2, tensor<fp32, [1, 1]> h2, tensor<fp32, [1, 1]> c2 = lstm(initial_c = c0, initial_h = h0, peephole = p, weight_hh = wh, weight_ih = wi, x = x)[name = " S_("l2") "];\n"
             "    } -> (y, h, c, y2, h2, c2);\n}\n");
  float x[2] = {1, 2}, h0[1] = {0.5f}, c0[1] = {1};
  CpuTensor in[3] = {f32_tensor(x, 3, (int64_t[]){2, 1, 1}), f32_tensor(h0, 2, (int64_t[]){1, 1}), f32_tensor(c0, 2, (int64_t[]){1, 1})};
  CpuTensor out[6];
  run_twice(CPU_NUMERICS_FP32, in, out, 6);
  /* Linear activations, gates ifoz. Step 0 (x 1, h 0.5, c 1): i 1, f 1.5, o 1.25, z 1.5, c 3, h 3.75.
   * Step 1 (x 2, h 3.75, c 3): i 4.75, f 2.5, o 8, z 0.25, c 8.6875, h 69.5. */
  expect_values(&out[0], MIL_DT_FP32, 3, (int64_t[]){2, 1, 1}, (double[]){3.75, 69.5}, "y");
  expect_values(&out[1], MIL_DT_FP32, 2, (int64_t[]){1, 1}, (double[]){69.5}, "h");
  expect_values(&out[2], MIL_DT_FP32, 2, (int64_t[]){1, 1}, (double[]){8.6875}, "c");
  /* sigmoid / tanh with peepholes (i and f see c(t-1), o sees c(t)), no bias, the last step only */
  double h = 0.5, c = 1;
  for (int t = 0; t < 2; t++) {
    double xi = x[t];
    double ig = 1 / (1 + exp(-(0.5 * xi + 1 * h + 0.5 * c))), fg = 1 / (1 + exp(-(1 * xi + 0 * h - 0.5 * c)));
    double z = tanh(2 * xi - 1 * h);
    c = fg * c + ig * z;
    double og = 1 / (1 + exp(-(0.25 * xi + 2 * h + 1 * c)));
    h = og * tanh(c);
  }
  for (int k = 3; k < 6; k++) {
    double want = k == 5 ? c : h, got = (double)out_f32(&out[k])[0];
    cr_assert(fabs(got - want) <= 1e-6, "output %d: %.9g, want %.9g", k, got, want);
  }
  for (int i = 0; i < 6; i++) cpu_tensor_free(&out[i]);
  cleanup();
  const char *head = MIL_HEAD "    func main<ios17>(tensor<fp32, [2, 1, 1]> x, tensor<fp32, [1, 1]> h0, tensor<fp32, [1, 1]> c0) {\n"
                              "        tensor<fp32, [4, 1]> w = const()[name = " S_("w") ", val = tensor<fp32, [4, 1]>([1, 1, 1, 1])];\n";
  char buf[2048];
  snprintf(buf, sizeof buf, "%s        tensor<fp32, [1, 1, 1]> y, tensor<fp32, [1, 1]> h, tensor<fp32, [1, 1]> c = lstm(direction = " S_("bidirectional") ", initial_c = c0, initial_h = h0, weight_hh = w, weight_ih = w, x = x)[name = " S_("l") "];\n    } -> (y, h, c);\n}\n", head);
  write_bare(buf);
  expect_error_at(buf, "lstm(", in, 3, "lstm: direction 'bidirectional' is not supported yet (only forward)");
  cleanup();
  snprintf(buf, sizeof buf, "%s        tensor<fp32, [1, 1, 1]> y, tensor<fp32, [1, 1]> h, tensor<fp32, [1, 1]> c = lstm(activation = " S_("scaled_tanh") ", initial_c = c0, initial_h = h0, weight_hh = w, weight_ih = w, x = x)[name = " S_("l") "];\n    } -> (y, h, c);\n}\n", head);
  write_bare(buf);
  expect_error_at(buf, "lstm(", in, 3, "lstm: activation 'scaled_tanh' is not supported (sigmoid, tanh, relu or linear)");
  cleanup();
  snprintf(buf, sizeof buf, "%s        tensor<fp32, [1, 1, 1]> y, tensor<fp32, [1, 1]> h, tensor<fp32, [1, 1]> c = lstm(initial_c = c0, initial_h = h0, weight_hh = w, weight_ih = tensor<fp32, [4, 2]>([1, 1, 1, 1, 1, 1, 1, 1]), x = x)[name = " S_("l") "];\n    } -> (y, h, c);\n}\n", head);
  write_bare(buf);
  expect_error_at(buf, "lstm(", in, 3, "lstm: weight_ih must be [4H, 1] and weight_hh [4H, H] (H = 1)");
  cleanup();
  snprintf(buf, sizeof buf, "%s        tensor<fp32, [2, 1, 1]> y, tensor<fp32, [1, 1]> h, tensor<fp32, [1, 1]> c = lstm(initial_c = c0, initial_h = h0, weight_hh = w, weight_ih = w, x = x)[name = " S_("l") "];\n    } -> (y, h, c);\n}\n", head);
  write_bare(buf);
  expect_error_at(buf, "lstm(", in, 3, "lstm: the result shape is [1, 1, 1] but the statement declares [2, 1, 1]");
  cleanup();
}

/* Appends "name = const() ... [n]" of random values in [-scale, scale] to sb, their floats to v. */
static void const_vec(StrBuf *sb, const char *name, float *v, int64_t n, const char *shape, uint32_t seed, double scale) {
  fill_random(v, n, seed, false);
  sb_printf(sb, "        tensor<fp32, %s> %s = const()[name = string(\"%s\"), val = tensor<fp32, %s>([", shape, name, name, shape);
  for (int64_t i = 0; i < n; i++) {
    v[i] = (float)((double)v[i] * scale / 2);
    sb_printf(sb, "%s%a", i ? ", " : "", (double)v[i]);
  }
  sb_puts(sb, "])];\n");
}

Test(cpu, lstm_against_reference) {
  enum { S = 5, B = 2, NI = 3, H = 4 };
  static float wi[4 * H * NI], wh[4 * H * H], b[4 * H], pp[3 * H], x[S * B * NI], h0[B * H], c0[B * H];
  StrBuf sb;
  sb_init(&sb);
  sb_puts(&sb, MIL_HEAD "    func main<ios17>(tensor<fp32, [5, 2, 3]> x, tensor<fp32, [2, 4]> h0, tensor<fp32, [2, 4]> c0) {\n");
  const_vec(&sb, "wi", wi, 4 * H * NI, "[16, 3]", 31, 1.5);
  const_vec(&sb, "wh", wh, 4 * H * H, "[16, 4]", 32, 1.0);
  const_vec(&sb, "b", b, 4 * H, "[16]", 33, 0.5);
  const_vec(&sb, "pp", pp, 3 * H, "[12]", 34, 0.5);
  sb_puts(&sb, "        tensor<fp32, [5, 2, 4]> y, tensor<fp32, [2, 4]> h, tensor<fp32, [2, 4]> c = lstm(bias = b, initial_c = c0, initial_h = h0, output_sequence = bool(true), peephole = pp, weight_hh = wh, weight_ih = wi, x = x)[name = string(\"l\")];\n"
               "    } -> (y, h, c);\n}\n");
  write_bare(sb.data);
  sb_free(&sb);
  fill_random(x, S * B * NI, 35, false);
  fill_random(h0, B * H, 36, false);
  fill_random(c0, B * H, 37, false);
  CpuTensor in[3] = {f32_tensor(x, 3, (int64_t[]){S, B, NI}), f32_tensor(h0, 2, (int64_t[]){B, H}), f32_tensor(c0, 2, (int64_t[]){B, H})};
  CpuTensor out[3];
  run_twice(CPU_NUMERICS_FP32, in, out, 3);
  double h[B][H], c[B][H];
  for (int n = 0; n < B; n++)
    for (int u = 0; u < H; u++) h[n][u] = h0[n * H + u], c[n][u] = c0[n * H + u];
  for (int t = 0; t < S; t++) {
    double hn[B][H];
    for (int n = 0; n < B; n++)
      for (int u = 0; u < H; u++) {
        double g[4];
        for (int k = 0; k < 4; k++) {
          g[k] = b[k * H + u];
          for (int i = 0; i < NI; i++) g[k] += (double)wi[(k * H + u) * NI + i] * (double)x[(t * B + n) * NI + i];
          for (int m = 0; m < H; m++) g[k] += (double)wh[(k * H + u) * H + m] * h[n][m];
        }
        double ig = 1 / (1 + exp(-(g[0] + (double)pp[u] * c[n][u]))), fg = 1 / (1 + exp(-(g[1] + (double)pp[H + u] * c[n][u])));
        double cn = fg * c[n][u] + ig * tanh(g[3]);
        double og = 1 / (1 + exp(-(g[2] + (double)pp[2 * H + u] * cn)));
        c[n][u] = cn;
        hn[n][u] = og * tanh(cn);
        double got = (double)out_f32(&out[0])[(t * B + n) * H + u];
        cr_assert(fabs(got - hn[n][u]) <= 1e-5, "y[%d, %d, %d] = %.9g, want %.9g", t, n, u, got, hn[n][u]);
      }
    memcpy(h, hn, sizeof h);
  }
  for (int n = 0; n < B; n++)
    for (int u = 0; u < H; u++) {
      cr_assert(fabs((double)out_f32(&out[1])[n * H + u] - h[n][u]) <= 1e-5);
      cr_assert(fabs((double)out_f32(&out[2])[n * H + u] - c[n][u]) <= 1e-5);
    }
  for (int i = 0; i < 3; i++) cpu_tensor_free(&out[i]);
  cleanup();
}

Test(cpu, constexpr_lut_and_sparse_by_hand) {
  StrBuf sb;
  sb_init(&sb);
  sb_puts(&sb, MIL_HEAD "    func main<ios16>(tensor<fp32, [5]> x) {\n"
               "        tensor<fp32, [5]> L = constexpr_lut_to_dense()[indices = tensor<uint8, [2]>([228, 3]), lut = tensor<fp32, [4]>([10, 20, 30, 40]), name = string(\"L\"), shape = tensor<uint32, [1]>([5])];\n"
               "        tensor<fp32, [5]> a = add(x = x, y = L)[name = string(\"a\")];\n"
               "        tensor<fp16, [3]> L6 = constexpr_lut_to_dense()[indices = tensor<uint8, [3]>([127, 128, 2]), lut = tensor<fp16, [64]>([");
  for (int k = 0; k < 64; k++) sb_printf(&sb, "%s%g", k ? ", " : "", k * 0.5);
  sb_puts(&sb, "]), name = string(\"L6\"), shape = tensor<uint32, [1]>([3])];\n"
               "        tensor<fp16, [3]> b = mul(x = L6, y = fp16(1))[name = string(\"b\")];\n"
               "        tensor<fp32, [3, 3]> S = constexpr_sparse_to_dense()[mask = tensor<uint8, [2]>([45, 1]), name = string(\"S\"), nonzero_data = tensor<fp32, [5]>([1, 2, 3, 4, 5]), shape = tensor<uint32, [2]>([3, 3])];\n"
               "        tensor<fp32, [3, 3]> c = mul(x = S, y = fp32(1))[name = string(\"c\")];\n"
               "    } -> (a, b, c);\n}\n");
  write_bare(sb.data);
  sb_free(&sb);
  float x[5] = {0};
  CpuTensor in = f32_tensor(x, 1, (int64_t[]){5}), out[3];
  run_twice(CPU_NUMERICS_ANE, &in, out, 3);
  /* 228 = 0b11100100: 2-bit indices 0, 1, 2, 3 from the low bits up; then 3 */
  expect_values(&out[0], MIL_DT_FP32, 1, (int64_t[]){5}, (double[]){10, 20, 30, 40, 40}, "a");
  /* 6-bit indices 63, 1, 40 across the bytes 127, 128, 2 */
  expect_values(&out[1], MIL_DT_FP16, 1, (int64_t[]){3}, (double[]){31.5, 0.5, 20}, "b");
  /* mask bits 0, 2, 3, 5 (45) and 8 */
  expect_values(&out[2], MIL_DT_FP32, 2, (int64_t[]){3, 3}, (double[]){1, 0, 2, 3, 0, 4, 0, 0, 5}, "c");
  for (int i = 0; i < 3; i++) cpu_tensor_free(&out[i]);
  cleanup();
  const char *head = MIL_HEAD "    func main<ios16>(tensor<fp32, [3, 3]> x) {\n";
  const char *tail = "        tensor<fp32, [3, 3]> y = add(x = x, y = W)[name = string(\"y\")];\n    } -> (y);\n}\n";
  char buf[1024];
  snprintf(buf, sizeof buf, "%s        tensor<fp32, [3, 3]> W = constexpr_sparse_to_dense()[mask = tensor<uint8, [2]>([45, 2]), name = string(\"W\"), nonzero_data = tensor<fp32, [5]>([1, 2, 3, 4, 5]), shape = tensor<uint32, [2]>([3, 3])];\n%s", head, tail);
  bare_error(buf, "constexpr_sparse_to_dense(", NULL, "constexpr_sparse_to_dense: mask has bit 9 set, past the 9 elements");
  snprintf(buf, sizeof buf, "%s        tensor<fp32, [3, 3]> W = constexpr_sparse_to_dense()[mask = tensor<uint8, [2]>([45, 0]), name = string(\"W\"), nonzero_data = tensor<fp32, [5]>([1, 2, 3, 4, 5]), shape = tensor<uint32, [2]>([3, 3])];\n%s", head, tail);
  bare_error(buf, "constexpr_sparse_to_dense(", NULL, "constexpr_sparse_to_dense: mask has 4 bits set but nonzero_data has 5 values");
  snprintf(buf, sizeof buf, "%s        tensor<fp32, [3, 3]> W = constexpr_lut_to_dense()[indices = tensor<uint8, [3]>([0, 0, 0]), lut = tensor<fp32, [3]>([1, 2, 3]), name = string(\"W\"), shape = tensor<uint32, [2]>([3, 3])];\n%s", head, tail);
  bare_error(buf, "constexpr_lut_to_dense(", NULL, "constexpr_lut_to_dense: lut must be a vector of 2, 4, 16, 64 or 256 entries (it has 3)");
  snprintf(buf, sizeof buf, "%s        tensor<fp32, [3, 3]> W = constexpr_lut_to_dense()[indices = tensor<uint8, [2]>([0, 0]), lut = tensor<fp32, [4]>([1, 2, 3, 4]), name = string(\"W\"), shape = tensor<uint32, [2]>([3, 3])];\n%s", head, tail);
  bare_error(buf, "constexpr_lut_to_dense(", NULL, "constexpr_lut_to_dense: indices has 2 bytes; 9 2-bit indices need 3");
  snprintf(buf, sizeof buf, "%s        tensor<fp32, [3, 3]> W = constexpr_lut_to_dense()[indices = tensor<uint8, [3]>([0, 0, 0]), lut = tensor<fp32, [4]>([1, 2, 3, 4]), name = string(\"W\"), shape = tensor<uint32, [2]>([9, 1])];\n%s", head, tail);
  bare_error(buf, "constexpr_lut_to_dense(", NULL, "constexpr_lut_to_dense: shape does not match the declared result shape");
}

Test(cpu, constexpr_lut_and_sparse_against_reference) {
  enum { N = 35 };
  uint32_t s = 12345;
  int idx[N];
  uint8_t packed[(N * 6 + 7) / 8] = {0}, mask[(N + 7) / 8] = {0};
  float lut[64], nz[N];
  bool on[N];
  int nnz = 0;
  /* 6-bit indices packed through a bit accumulator, least significant first */
  uint64_t acc = 0;
  int nacc = 0, nb = 0;
  for (int i = 0; i < N; i++) {
    s = s * 1664525u + 1013904223u;
    idx[i] = (int)(s >> 26);
    acc |= (uint64_t)idx[i] << nacc;
    for (nacc += 6; nacc >= 8; nacc -= 8, acc >>= 8) packed[nb++] = (uint8_t)(acc & 255);
    on[i] = (s >> 3) % 3 == 0;
    if (on[i]) mask[i / 8] = (uint8_t)(mask[i / 8] | 1u << (i % 8)), nz[nnz] = (float)(i + 1) * 0.25f, nnz++;
  }
  if (nacc) packed[nb++] = (uint8_t)acc;
  cr_assert_eq(nb, (int)sizeof packed);
  fill_random(lut, 64, 41, false);
  StrBuf sb;
  sb_init(&sb);
  sb_puts(&sb, MIL_HEAD "    func main<ios16>(tensor<fp32, [5, 7]> x) {\n        tensor<fp32, [5, 7]> L = constexpr_lut_to_dense()[indices = tensor<uint8, [27]>([");
  for (int i = 0; i < nb; i++) sb_printf(&sb, "%s%u", i ? ", " : "", packed[i]);
  sb_puts(&sb, "]), lut = tensor<fp32, [64]>([");
  for (int i = 0; i < 64; i++) sb_printf(&sb, "%s%a", i ? ", " : "", (double)lut[i]);
  sb_puts(&sb, "]), name = string(\"L\"), shape = tensor<uint32, [2]>([5, 7])];\n        tensor<fp32, [5, 7]> a = add(x = x, y = L)[name = string(\"a\")];\n");
  sb_printf(&sb, "        tensor<fp32, [5, 7]> S = constexpr_sparse_to_dense()[mask = tensor<uint8, [5]>([%u, %u, %u, %u, %u]), name = string(\"S\"), nonzero_data = tensor<fp32, [%d]>([",
            mask[0], mask[1], mask[2], mask[3], mask[4], nnz);
  for (int i = 0; i < nnz; i++) sb_printf(&sb, "%s%a", i ? ", " : "", (double)nz[i]);
  sb_puts(&sb, "]), shape = tensor<uint32, [2]>([5, 7])];\n        tensor<fp32, [5, 7]> b = add(x = x, y = S)[name = string(\"b\")];\n    } -> (a, b);\n}\n");
  write_bare(sb.data);
  sb_free(&sb);
  cr_assert_gt(nnz, 3);
  float x[N] = {0};
  CpuTensor in = f32_tensor(x, 2, (int64_t[]){5, 7}), out[2];
  run_twice(CPU_NUMERICS_FP32, &in, out, 2);
  for (int i = 0, k = 0; i < N; i++) {
    cr_assert(out_f32(&out[0])[i] == lut[idx[i]], "L[%d]", i);
    cr_assert(out_f32(&out[1])[i] == (on[i] ? nz[k++] : 0.0f), "S[%d]", i);
  }
  for (int i = 0; i < 2; i++) cpu_tensor_free(&out[i]);
  cleanup();
}

Test(cpu, gather_along_axis_wraps_negative_indices_before_ios17) {
  write_bare(MIL_HEAD
             "    func main<ios16>(tensor<fp32, [2, 3]> x) {\n"
             "        tensor<fp32, [2, 2]> y = gather_along_axis(axis = int32(-1), indices = tensor<int32, [2, 2]>([-1, 0, -3, 2]), x = x)[name = " S_("y") "];\n"
             "    } -> (y);\n}\n");
  float x[6] = {0, 1, 2, 3, 4, 5};
  CpuTensor in = f32_tensor(x, 2, (int64_t[]){2, 3}), out;
  run_twice(CPU_NUMERICS_FP32, &in, &out, 1);
  expect_values(&out, MIL_DT_FP32, 2, (int64_t[]){2, 2}, (double[]){2, 0, 3, 5}, "y");
  cpu_tensor_free(&out);
  cleanup();
}

/* ---- fusion ---- */

/* A literal [O, K, 1, 1] weight ((o * 7 + k * 3) % 17 - 8) / 16 and [O] bias (o % 5 - 2) / 8, in dtype dt. */
static void put_weights(StrBuf *sb, const char *dt, const char *w, const char *b, int O, int K) {
  sb_printf(sb, "        tensor<%s, [%d, %d, 1, 1]> %s = const()[name = string(\"%s\"), val = tensor<%s, [%d, %d, 1, 1]>([", dt, O,
            K, w, w, dt, O, K);
  for (int i = 0; i < O * K; i++) sb_printf(sb, "%s%g", i ? ", " : "", ((i / K * 7 + i % K * 3) % 17 - 8) / 16.0);
  sb_printf(sb, "])];\n        tensor<%s, [%d]> %s = const()[name = string(\"%s\"), val = tensor<%s, [%d]>([", dt, O, b, b, dt, O);
  for (int i = 0; i < O; i++) sb_printf(sb, "%s%g", i ? ", " : "", (i % 5 - 2) / 8.0);
  sb_puts(sb, "])];\n");
}

#define I32_(n, ...) "tensor<int32, [" #n "]>([" #__VA_ARGS__ "])"

/* Three linear layers as lower-linear writes them (transpose, reshape, 1x1
 * conv, bias add, reshape, transpose), the bias as add's x or y or absent,
 * chained, and a conv whose transposed input is also returned (not fused):
 * the fused run gives the bits of the unfused one (check_finite fuses
 * nothing), with 1 and 3 threads, in both modes, and matches a reference. */
Test(cpu, fused_linear_gives_the_unfused_bits) {
  for (int mode = 0; mode < 2; mode++) {
    const char *dt = mode == 0 ? "fp16" : "fp32";
    StrBuf sb;
    sb_init(&sb);
    sb_printf(&sb, MIL_HEAD "    func main<ios18>(tensor<%s, [1, 6, 24]> x) {\n", dt);
    put_weights(&sb, dt, "w1", "b1", 20, 24);
    put_weights(&sb, dt, "w2", "b2", 16, 20);
    put_weights(&sb, dt, "w3", "b3", 12, 16);
    char *body = with_dtype(
        "        tensor<$F, [1, 24, 6]> t1 = transpose(perm = " I32_(3, 0, 2, 1) ", x = x)[name = " S_("t1") "];\n"
        "        tensor<$F, [1, 24, 1, 6]> v1 = reshape(shape = " I32_(4, 1, 24, 1, 6) ", x = t1)[name = " S_("v1") "];\n"
        "        tensor<$F, [1, 20, 1, 6]> r1 = conv(dilations = " I32_(2, 1, 1) ", groups = int32(1), pad = " I32_(4, 0, 0, 0, 0) ", pad_type = " S_("custom") ", strides = " I32_(2, 1, 1) ", weight = w1, x = v1)[name = " S_("r1") "];\n"
        "        tensor<$F, [1, 20, 1, 1]> c1 = reshape(shape = " I32_(4, 1, 20, 1, 1) ", x = b1)[name = " S_("c1") "];\n"
        "        tensor<$F, [1, 20, 1, 6]> a1 = add(x = r1, y = c1)[name = " S_("a1") "];\n"
        "        tensor<$F, [1, 20, 6]> s1 = reshape(shape = " I32_(3, 1, 20, 6) ", x = a1)[name = " S_("s1") "];\n"
        "        tensor<$F, [1, 6, 20]> y1 = transpose(perm = " I32_(3, 0, 2, 1) ", x = s1)[name = " S_("y1") "];\n"
        "        tensor<$F, [1, 20, 6]> t2 = transpose(perm = " I32_(3, -3, -1, -2) ", x = y1)[name = " S_("t2") "];\n"
        "        tensor<$F, [1, 20, 1, 6]> v2 = reshape(shape = " I32_(4, 1, 20, 1, 6) ", x = t2)[name = " S_("v2") "];\n"
        "        tensor<$F, [1, 16, 1, 6]> r2 = conv(pad_type = " S_("same") ", weight = w2, x = v2)[name = " S_("r2") "];\n"
        "        tensor<$F, [16, 1, 1]> c2 = reshape(shape = " I32_(3, 16, 1, 1) ", x = b2)[name = " S_("c2") "];\n"
        "        tensor<$F, [1, 16, 1, 6]> a2 = add(x = c2, y = r2)[name = " S_("a2") "];\n"
        "        tensor<$F, [1, 16, 6]> s2 = reshape(shape = " I32_(3, 1, 16, 6) ", x = a2)[name = " S_("s2") "];\n"
        "        tensor<$F, [1, 6, 16]> y2 = transpose(perm = " I32_(3, 0, 2, 1) ", x = s2)[name = " S_("y2") "];\n"
        "        tensor<$F, [1, 16, 6]> t3 = transpose(perm = " I32_(3, 0, 2, 1) ", x = y2)[name = " S_("t3") "];\n"
        "        tensor<$F, [1, 16, 1, 6]> v3 = reshape(shape = " I32_(4, 1, 16, 1, 6) ", x = t3)[name = " S_("v3") "];\n"
        "        tensor<$F, [1, 12, 1, 6]> r3 = conv(pad_type = " S_("valid") ", weight = w3, x = v3)[name = " S_("r3") "];\n"
        "        tensor<$F, [1, 12, 6]> s3 = reshape(shape = " I32_(3, 1, 12, 6) ", x = r3)[name = " S_("s3") "];\n"
        "        tensor<$F, [1, 6, 12]> y3 = transpose(perm = " I32_(3, 0, 2, 1) ", x = s3)[name = " S_("y3") "];\n"
        "        tensor<$F, [1, 24, 6]> t4 = transpose(perm = " I32_(3, 0, 2, 1) ", x = x)[name = " S_("t4") "];\n"
        "        tensor<$F, [1, 24, 1, 6]> v4 = reshape(shape = " I32_(4, 1, 24, 1, 6) ", x = t4)[name = " S_("v4") "];\n"
        "        tensor<$F, [1, 20, 1, 6]> r4 = conv(weight = w1, x = v4)[name = " S_("r4") "];\n"
        "    } -> (y3, y1, t4, r4);\n}\n",
        dt);
    sb_puts(&sb, body);
    free(body);
    write_bare(sb.data);
    sb_free(&sb);
    float xf[144];
    uint16_t xh[144];
    fill_random(xf, 144, 11, true);
    for (int i = 0; i < 144; i++) xh[i] = fp16_from_float(xf[i]);
    CpuTensor in = {.dtype = mode == 0 ? MIL_DT_FP16 : MIL_DT_FP32, .rank = 3, .dims = {1, 6, 24},
                    .data = mode == 0 ? (void *)xh : (void *)xf};
    CpuTensor fused[4], unfused[4];
    CpuNumerics nm = mode == 0 ? CPU_NUMERICS_ANE : CPU_NUMERICS_FP32;
    run_twice(nm, &in, fused, 4);
    /* What was fused (profiled: an elided statement never runs), then the unfused run. */
    Loaded l;
    CpuOptions opt = {.numerics = nm, .threads = 2, .profile = true};
    load_opts(&l, &opt);
    cr_assert_not_null(l.c, "%s", l.diags.data);
    cr_assert(cpu_run(l.c, &in, unfused, &l.d), "%s", l.diags.data);
    const char *elided = " t1 v1 a1 s1 y1 t2 v2 a2 s2 y2 t3 v3 s3 y3 ";
    for (uint32_t i = 0; i < cpu_profile_count(l.c); i++) {
      const CpuStmtTime *e = cpu_profile_stmt(l.c, i);
      char key[16];
      snprintf(key, sizeof key, " %s ", e->name);
      cr_assert_eq(e->runs, strstr(elided, key) ? 0u : 1u, "%s: statement %s ran %u times", dt, e->name, e->runs);
    }
    for (int k = 0; k < 4; k++) cpu_tensor_free(&unfused[k]);
    unload(&l);
    opt = (CpuOptions){.numerics = nm, .threads = 2, .check_finite = true};
    load_opts(&l, &opt);
    cr_assert_not_null(l.c, "%s", l.diags.data);
    cr_assert(cpu_run(l.c, &in, unfused, &l.d), "%s", l.diags.data);
    unload(&l);
    for (int k = 0; k < 4; k++) {
      size_t bytes = (size_t)prod(fused[k].dims, fused[k].rank) * cpu_dtype_size(fused[k].dtype);
      cr_assert(memcmp(fused[k].data, unfused[k].data, bytes) == 0, "%s: output %d differs from the unfused run", dt, k);
    }
    /* The reference, in double: y1 = x w1^T + b1, y2 = y1 w2^T + b2, y3 = y2 w3^T; r4 = w1 x^T. */
    double y1[6][20], y2[6][16], y3[6][12];
    for (int p = 0; p < 6; p++) {
      for (int o = 0; o < 20; o++) {
        double s = (o % 5 - 2) / 8.0;
        for (int k = 0; k < 24; k++) s += (double)xf[p * 24 + k] * (((o * 7 + k * 3) % 17 - 8) / 16.0);
        y1[p][o] = s;
        double r4 = cpu_elem(&fused[3], (uint64_t)(o * 6 + p)), want = s - (o % 5 - 2) / 8.0;
        cr_assert(fabs(r4 - want) <= 2e-2 * fmax(1, fabs(want)), "%s: r4[%d][%d] = %g, want %g", dt, o, p, r4, want);
      }
      for (int o = 0; o < 16; o++) {
        double s = (o % 5 - 2) / 8.0;
        for (int k = 0; k < 20; k++) s += y1[p][k] * (((o * 7 + k * 3) % 17 - 8) / 16.0);
        y2[p][o] = s;
      }
      for (int o = 0; o < 12; o++) {
        double s = 0;
        for (int k = 0; k < 16; k++) s += y2[p][k] * (((o * 7 + k * 3) % 17 - 8) / 16.0);
        y3[p][o] = s;
      }
    }
    double tol = mode == 0 ? 2e-2 : 1e-5;
    for (int p = 0; p < 6; p++) {
      for (int o = 0; o < 12; o++) {
        double g = cpu_elem(&fused[0], (uint64_t)(p * 12 + o));
        cr_assert(fabs(g - y3[p][o]) <= tol * fmax(1, fabs(y3[p][o])), "%s: y3[%d][%d] = %g, want %g", dt, p, o, g, y3[p][o]);
      }
      for (int o = 0; o < 20; o++) {
        double g = cpu_elem(&fused[1], (uint64_t)(p * 20 + o));
        cr_assert(fabs(g - y1[p][o]) <= tol * fmax(1, fabs(y1[p][o])), "%s: y1[%d][%d] = %g, want %g", dt, p, o, g, y1[p][o]);
      }
      for (int k = 0; k < 24; k++)
        cr_assert(cpu_elem(&fused[2], (uint64_t)(k * 6 + p)) == (double)(mode == 0 ? fp16_to_float(xh[p * 24 + k]) : xf[p * 24 + k]));
    }
    for (int k = 0; k < 4; k++) cpu_tensor_free(&fused[k]), cpu_tensor_free(&unfused[k]);
    cleanup();
  }
}

/* An element-wise group: unary and binary ops of one result shape, with a
 * row-broadcast operand (rows of 1001 cross the tiles of 2048 elements), a
 * scalar, a view among them, results used only inside (one of them twice by
 * one op) and one returned, run tile by tile: the bits of the unfused run
 * (check_finite fuses nothing), with 1 and 3 threads, in both modes; only
 * the first member is timed. */
Test(cpu, fused_group_gives_the_unfused_bits) {
  for (int mode = 0; mode < 2; mode++) {
    const char *dt = mode == 0 ? "fp16" : "fp32";
    char *mil = with_dtype(
        MIL_HEAD "    func main<ios18>(tensor<$F, [3, 1001]> x, tensor<$F, [1001]> b) {\n"
        "        tensor<$F, [3, 1001]> a = add(x = x, y = b)[name = " S_("a") "];\n"
        "        tensor<$F, [3, 1001]> m = mul(x = a, y = a)[name = " S_("m") "];\n"
        "        tensor<$F, [3, 1001]> t = tanh(x = m)[name = " S_("t") "];\n"
        "        tensor<$F, [1, 1001]> g = reshape(shape = " I32_(2, 1, 1001) ", x = b)[name = " S_("g") "];\n"
        "        tensor<$F, [3, 1001]> s = sub(x = t, y = g)[name = " S_("s") "];\n"
        "        tensor<$F, [3, 1001]> e = exp(x = s)[name = " S_("e") "];\n"
        "        tensor<$F, [3, 1001]> q = rsqrt(epsilon = $F(0.25), x = e)[name = " S_("q") "];\n"
        "        tensor<$F, [3, 1001]> d = real_div(x = q, y = e)[name = " S_("d") "];\n"
        "        tensor<$F, [3, 1001]> z = maximum(x = d, y = $F(0.75))[name = " S_("z") "];\n"
        "        tensor<$F, [3, 1001]> w = mul(x = z, y = a)[name = " S_("w") "];\n"
        "    } -> (w, t);\n}\n",
        dt);
    write_bare(mil);
    free(mil);
    float xf[3003], bf[1001];
    uint16_t xh[3003], bh[1001];
    fill_random(xf, 3003, 21, false);
    fill_random(bf, 1001, 22, false);
    for (int i = 0; i < 3003; i++) xh[i] = fp16_from_float(xf[i]);
    for (int i = 0; i < 1001; i++) bh[i] = fp16_from_float(bf[i]);
    MilDType mdt = mode == 0 ? MIL_DT_FP16 : MIL_DT_FP32;
    CpuTensor in[2] = {{.dtype = mdt, .rank = 2, .dims = {3, 1001}, .data = mode == 0 ? (void *)xh : (void *)xf},
                       {.dtype = mdt, .rank = 1, .dims = {1001}, .data = mode == 0 ? (void *)bh : (void *)bf}};
    CpuNumerics nm = mode == 0 ? CPU_NUMERICS_ANE : CPU_NUMERICS_FP32;
    CpuTensor fused[2], unfused[2];
    run_twice(nm, in, fused, 2);
    Loaded l;
    CpuOptions opt = {.numerics = nm, .threads = 2, .profile = true};
    load_opts(&l, &opt);
    cr_assert_not_null(l.c, "%s", l.diags.data);
    cr_assert(cpu_run(l.c, in, unfused, &l.d), "%s", l.diags.data);
    for (uint32_t i = 0; i < cpu_profile_count(l.c); i++) {
      const CpuStmtTime *e = cpu_profile_stmt(l.c, i);
      cr_assert_eq(e->runs, strcmp(e->name, "a") ? 0u : 1u, "%s: statement %s ran %u times", dt, e->name, e->runs);
    }
    for (int k = 0; k < 2; k++) cpu_tensor_free(&unfused[k]);
    unload(&l);
    opt = (CpuOptions){.numerics = nm, .threads = 2, .check_finite = true};
    load_opts(&l, &opt);
    cr_assert_not_null(l.c, "%s", l.diags.data);
    cr_assert(cpu_run(l.c, in, unfused, &l.d), "%s", l.diags.data);
    unload(&l);
    for (int k = 0; k < 2; k++) {
      cr_assert(memcmp(fused[k].data, unfused[k].data, 3003 * cpu_dtype_size(mdt)) == 0,
                "%s: output %d differs from the unfused run", dt, k);
      cpu_tensor_free(&fused[k]);
      cpu_tensor_free(&unfused[k]);
    }
    cleanup();
  }
}

/* Element-wise ops right after a fused linear run as its epilogue, on each
 * row of each piece (a group reading the linear's result twice and another
 * input; a single add), but not after a linear whose rows are not a
 * multiple of 4 long (a vectors-of-4 split would differ): the bits of the
 * unfused run, with 1 and 3 threads, in both modes. */
Test(cpu, fused_linear_epilogue_gives_the_unfused_bits) {
  for (int mode = 0; mode < 2; mode++) {
    const char *dt = mode == 0 ? "fp16" : "fp32";
    StrBuf sb;
    sb_init(&sb);
    sb_printf(&sb, MIL_HEAD "    func main<ios18>(tensor<%s, [1, 6, 24]> x, tensor<%s, [1, 6, 20]> r, tensor<%s, [1, 6, 16]> q) {\n",
              dt, dt, dt);
    put_weights(&sb, dt, "w1", "b1", 20, 24);
    put_weights(&sb, dt, "w2", "b2", 16, 20);
    put_weights(&sb, dt, "w3", "b3", 10, 16);
    /* linear(IN [1, 6, K]) -> OUT [1, 6, O] as lower-linear writes it */
    static const char *lin =
        "        tensor<$F, [1, K, 6]> tI = transpose(perm = " I32_(3, 0, 2, 1) ", x = IN)[name = " S_("tI") "];\n"
        "        tensor<$F, [1, K, 1, 6]> vI = reshape(shape = tensor<int32, [4]>([1, K, 1, 6]), x = tI)[name = " S_("vI") "];\n"
        "        tensor<$F, [1, O, 1, 6]> rI = conv(pad_type = " S_("valid") ", weight = wI, x = vI)[name = " S_("rI") "];\n"
        "        tensor<$F, [1, O, 1, 1]> cI = reshape(shape = tensor<int32, [4]>([1, O, 1, 1]), x = bI)[name = " S_("cI") "];\n"
        "        tensor<$F, [1, O, 1, 6]> aI = add(x = rI, y = cI)[name = " S_("aI") "];\n"
        "        tensor<$F, [1, O, 6]> sI = reshape(shape = tensor<int32, [3]>([1, O, 6]), x = aI)[name = " S_("sI") "];\n"
        "        tensor<$F, [1, 6, O]> OUT = transpose(perm = " I32_(3, 0, 2, 1) ", x = sI)[name = " S_("OUT") "];\n";
    const char *subst[3][5] = {{"1", "24", "20", "x", "y1"}, {"2", "20", "16", "h", "y2"}, {"3", "16", "10", "e2", "y3"}};
    const char *eps[3] = {
        "        tensor<$F, [1, 6, 20]> m = mul(x = y1, y = y1)[name = " S_("m") "];\n"
        "        tensor<$F, [1, 6, 20]> t = tanh(x = m)[name = " S_("t") "];\n"
        "        tensor<$F, [1, 6, 20]> s = add(x = t, y = r)[name = " S_("s") "];\n"
        "        tensor<$F, [1, 6, 20]> h = mul(x = s, y = y1)[name = " S_("h") "];\n",
        "        tensor<$F, [1, 6, 16]> e2 = add(x = q, y = y2)[name = " S_("e2") "];\n",
        "        tensor<$F, [1, 6, 10]> g3 = relu(x = y3)[name = " S_("g3") "];\n"};
    for (int L = 0; L < 3; L++) {
      for (const char *p = lin; *p; p++) {
        if (*p == 'I' && (p[1] == ' ' || p[1] == ')' || p[1] == ',' || p[1] == '"')) sb_puts(&sb, subst[L][0]);
        else if (*p == 'K' && (p[1] == ',' || p[1] == ']')) sb_puts(&sb, subst[L][1]);
        else if (*p == 'O' && (p[1] == ',' || p[1] == ']')) sb_puts(&sb, subst[L][2]);
        else if (!strncmp(p, "IN)", 3)) sb_puts(&sb, subst[L][3]), p += 1;
        else if (!strncmp(p, "OUT", 3)) sb_puts(&sb, subst[L][4]), p += 2;
        else if (!strncmp(p, "$F", 2)) sb_puts(&sb, dt), p++;
        else sb_putc(&sb, *p);
      }
      char *e = with_dtype(eps[L], dt);
      sb_puts(&sb, e);
      free(e);
    }
    sb_puts(&sb, "    } -> (g3, h);\n}\n");
    write_bare(sb.data);
    sb_free(&sb);
    float xf[144], rf[120], qf[96];
    uint16_t xh[144], rh[120], qh[96];
    fill_random(xf, 144, 31, false);
    fill_random(rf, 120, 32, false);
    fill_random(qf, 96, 33, false);
    for (int i = 0; i < 144; i++) xh[i] = fp16_from_float(xf[i]);
    for (int i = 0; i < 120; i++) rh[i] = fp16_from_float(rf[i]);
    for (int i = 0; i < 96; i++) qh[i] = fp16_from_float(qf[i]);
    MilDType mdt = mode == 0 ? MIL_DT_FP16 : MIL_DT_FP32;
    CpuTensor in[3] = {{.dtype = mdt, .rank = 3, .dims = {1, 6, 24}, .data = mode == 0 ? (void *)xh : (void *)xf},
                       {.dtype = mdt, .rank = 3, .dims = {1, 6, 20}, .data = mode == 0 ? (void *)rh : (void *)rf},
                       {.dtype = mdt, .rank = 3, .dims = {1, 6, 16}, .data = mode == 0 ? (void *)qh : (void *)qf}};
    CpuNumerics nm = mode == 0 ? CPU_NUMERICS_ANE : CPU_NUMERICS_FP32;
    CpuTensor fused[2], unfused[2];
    run_twice(nm, in, fused, 2);
    Loaded l;
    CpuOptions opt = {.numerics = nm, .threads = 2, .profile = true};
    load_opts(&l, &opt);
    cr_assert_not_null(l.c, "%s", l.diags.data);
    cr_assert(cpu_run(l.c, in, unfused, &l.d), "%s", l.diags.data);
    const char *ran = " r1 c1 r2 c2 r3 c3 g3 ";
    for (uint32_t i = 0; i < cpu_profile_count(l.c); i++) {
      const CpuStmtTime *e = cpu_profile_stmt(l.c, i);
      char key[16];
      snprintf(key, sizeof key, " %s ", e->name);
      cr_assert_eq(e->runs, strstr(ran, key) ? 1u : 0u, "%s: statement %s ran %u times", dt, e->name, e->runs);
    }
    for (int k = 0; k < 2; k++) cpu_tensor_free(&unfused[k]);
    unload(&l);
    opt = (CpuOptions){.numerics = nm, .threads = 2, .check_finite = true};
    load_opts(&l, &opt);
    cr_assert_not_null(l.c, "%s", l.diags.data);
    cr_assert(cpu_run(l.c, in, unfused, &l.d), "%s", l.diags.data);
    unload(&l);
    for (int k = 0; k < 2; k++) {
      size_t bytes = (size_t)prod(fused[k].dims, fused[k].rank) * cpu_dtype_size(mdt);
      cr_assert(memcmp(fused[k].data, unfused[k].data, bytes) == 0, "%s: output %d differs from the unfused run", dt, k);
      cpu_tensor_free(&fused[k]);
      cpu_tensor_free(&unfused[k]);
    }
    cleanup();
  }
}

/* A row group: reductions over the last dim (mean, sum, max) among element-
 * wise ops on the rows and on one value per row, tiles of whole rows (10
 * rows of 1000: the last tile short): the bits of the unfused run, with 1
 * and 3 threads, in both modes; only the first statement is timed. */
Test(cpu, fused_row_group_gives_the_unfused_bits) {
  for (int mode = 0; mode < 2; mode++) {
    const char *dt = mode == 0 ? "fp16" : "fp32";
    char *mil = with_dtype(
        MIL_HEAD "    func main<ios18>(tensor<$F, [10, 1000]> x) {\n"
        "        tensor<$F, [10, 1]> m = reduce_mean(axes = " I32_(1, -1) ", keep_dims = bool(true), x = x)[name = " S_("m") "];\n"
        "        tensor<$F, [10, 1000]> c = sub(x = x, y = m)[name = " S_("c") "];\n"
        "        tensor<$F, [10, 1000]> q = mul(x = c, y = c)[name = " S_("q") "];\n"
        "        tensor<$F, [10, 1]> v = reduce_sum(axes = " I32_(1, 1) ", keep_dims = bool(true), x = q)[name = " S_("v") "];\n"
        "        tensor<$F, [10, 1]> w = mul(x = v, y = $F(0.001))[name = " S_("w") "];\n"
        "        tensor<$F, [10, 1]> i = rsqrt(epsilon = $F(0.001), x = w)[name = " S_("i") "];\n"
        "        tensor<$F, [10, 1000]> n = mul(x = c, y = i)[name = " S_("n") "];\n"
        "        tensor<$F, [10, 1000]> t = tanh(x = n)[name = " S_("t") "];\n"
        "        tensor<$F, [10, 1]> mx = reduce_max(axes = " I32_(1, -1) ", keep_dims = bool(true), x = t)[name = " S_("mx") "];\n"
        "        tensor<$F, [10, 1000]> y = sub(x = t, y = mx)[name = " S_("y") "];\n"
        "    } -> (y, i);\n}\n",
        dt);
    write_bare(mil);
    free(mil);
    float xf[10000];
    uint16_t xh[10000];
    fill_random(xf, 10000, 41, false);
    for (int i = 0; i < 10000; i++) xh[i] = fp16_from_float(xf[i] * (1 + 0.1f * (float)(i / 1000)));
    for (int i = 0; i < 10000; i++) xf[i] = fp16_to_float(xh[i]);
    MilDType mdt = mode == 0 ? MIL_DT_FP16 : MIL_DT_FP32;
    CpuTensor in = {.dtype = mdt, .rank = 2, .dims = {10, 1000}, .data = mode == 0 ? (void *)xh : (void *)xf};
    CpuNumerics nm = mode == 0 ? CPU_NUMERICS_ANE : CPU_NUMERICS_FP32;
    CpuTensor fused[2], unfused[2];
    run_twice(nm, &in, fused, 2);
    Loaded l;
    CpuOptions opt = {.numerics = nm, .threads = 2, .profile = true};
    load_opts(&l, &opt);
    cr_assert_not_null(l.c, "%s", l.diags.data);
    cr_assert(cpu_run(l.c, &in, unfused, &l.d), "%s", l.diags.data);
    for (uint32_t k = 0; k < cpu_profile_count(l.c); k++) {
      const CpuStmtTime *e = cpu_profile_stmt(l.c, k);
      cr_assert_eq(e->runs, strcmp(e->name, "m") ? 0u : 1u, "%s: statement %s ran %u times", dt, e->name, e->runs);
    }
    for (int k = 0; k < 2; k++) cpu_tensor_free(&unfused[k]);
    unload(&l);
    opt = (CpuOptions){.numerics = nm, .threads = 2, .check_finite = true};
    load_opts(&l, &opt);
    cr_assert_not_null(l.c, "%s", l.diags.data);
    cr_assert(cpu_run(l.c, &in, unfused, &l.d), "%s", l.diags.data);
    unload(&l);
    for (int k = 0; k < 2; k++) {
      size_t bytes = (size_t)prod(fused[k].dims, fused[k].rank) * cpu_dtype_size(mdt);
      cr_assert(memcmp(fused[k].data, unfused[k].data, bytes) == 0, "%s: output %d differs from the unfused run", dt, k);
      cpu_tensor_free(&fused[k]);
      cpu_tensor_free(&unfused[k]);
    }
    cleanup();
  }
}

/* softmax with blocks of very negative scores (a causal mask's -65504), which
 * skip computing their exps, a row that is all masked but one, and a NaN row. */
Test(cpu, softmax_masked_rows) {
  write_bare(MIL_HEAD "    func main<ios18>(tensor<fp32, [3, 12]> x) {\n"
                      "        tensor<fp32, [3, 12]> y = softmax(axis = int32(-1), x = x)[name = " S_("y") "];\n"
                      "    } -> (y);\n}\n");
  float x[36];
  for (int i = 0; i < 36; i++) x[i] = -65504;
  x[0] = 0, x[1] = 1, x[2] = 2, x[3] = 3, x[9] = -1;   /* row 0: blocks of 4 mixed, masked, mixed */
  x[12 + 11] = 5;                                      /* row 1: one score */
  x[24 + 5] = NAN;                                     /* row 2: NaN */
  CpuTensor in = f32_tensor(x, 2, (int64_t[]){3, 12}), out;
  run_twice(CPU_NUMERICS_FP32, &in, &out, 1);
  const float *y = out_f32(&out);
  double sum = exp(0.0) + exp(1.0) + exp(2.0) + exp(3.0) + exp(-1.0);
  for (int i = 0; i < 12; i++) {
    double want = i < 4 ? exp((double)i) / sum : i == 9 ? exp(-1.0) / sum : 0;
    cr_assert_float_eq((double)y[i], want, 1e-7, "y[0][%d] = %g, want %g", i, (double)y[i], want);
    cr_assert(y[12 + i] == (i == 11 ? 1.0f : 0.0f), "y[1][%d] = %g", i, (double)y[12 + i]);
    cr_assert(isnan(y[24 + i]), "y[2][%d] = %g", i, (double)y[24 + i]);
  }
  cpu_tensor_free(&out);
  cleanup();
}
