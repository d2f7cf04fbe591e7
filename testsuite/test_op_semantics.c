/*
 * One meaning per op (docs/numerics.md): every element-wise .oir op gives
 * the same bits whether the compiler folds it, the CPU backend runs it or
 * the reference evaluator computes it.
 *
 * Each case is a .oir program whose operands are consts holding edge cases
 * (signed zeros, subnormals, the largest finite values, infinities, NaN,
 * rounding ties, int32 extremes). It is
 *   - folded: const-fold and cast-fusion only; the output must have become
 *     a const, whose values are read;
 *   - run: compiled without folding (lower-neg and io-legalize only, so the
 *     backend sees the op itself), loaded with orion_open and run by
 *     cpu_prepare + cpu_run in ANE and in FP32 numerics;
 *   - evaluated: ir_eval, its exact doubles stored in the result dtype as a
 *     backend stores them (op_sem_store_fp16 / op_sem_store_fp32).
 * The three must agree bit for bit: fp16 and fp32 results by their bits
 * (so -0 differs from +0), except that any NaN equals any NaN (payload and
 * sign of a NaN are not part of an op's meaning). Binary ops take every
 * pair of edge values, once with both operands flat and once broadcast
 * ([K,1] against [K]), so the CPU's strided loops run too. A cast without a
 * result (NaN or out of range into int32) must be refused by all three: not
 * folded, an error of the run, an evaluation error.
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
#include "orion/op_semantics.h"
#include "orion/package.h"
#include "orion/passes.h"

#define MAX_ELEMS 1024

/* One way's result: its elements as bits of the result dtype. */
typedef struct Bits {
  bool ok; /* false: refused (not folded, run or evaluation failed) */
  IrDType dt;
  uint64_t n;
  uint32_t v[MAX_ELEMS];
  char why[1024];
} Bits;

static uint32_t bits_of(IrDType dt, double x) {
  switch (dt) {
  case DT_FP32: {
    float f = (float)x;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
  }
  case DT_FP16: return fp16_from_double(x);
  case DT_BOOL: return x != 0;
  default: return (uint32_t)(int32_t)x;
  }
}

static bool is_nan_bits(IrDType dt, uint32_t u) {
  if (dt == DT_FP32) return (u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu);
  if (dt == DT_FP16) return (u & 0x7c00u) == 0x7c00u && (u & 0x03ffu);
  return false;
}

static double value_of(IrDType dt, uint32_t u) {
  if (dt == DT_FP32) {
    float f;
    memcpy(&f, &u, sizeof f);
    return (double)f;
  }
  if (dt == DT_FP16) return (double)fp16_to_float((uint16_t)u);
  return dt == DT_BOOL ? (double)u : (double)(int32_t)u;
}

/* ---- the three ways ---- */

static IrValueId main_output(IrModule *m) { return ir_func(m, ir_func_lookup(m, "main"))->outputs[0].value; }

static void by_folder(const char *text, Bits *r) {
  Parsed p;
  parsed_open(&p, text);
  cr_assert_not_null(p.m, "%s\n%s", text, p.diags.data);
  PassManagerOptions o = {.passes = "const-fold,cast-fusion", .verify_each = true};
  cr_assert(passes_run(p.m, &o, &p.d), "%s", p.diags.data);
  const IrValue *v = ir_value(p.m, main_output(p.m));
  r->dt = v->type.dtype;
  r->n = ir_type_elements(&v->type);
  r->ok = v->kind == VK_CONST;
  if (r->ok)
    for (uint64_t i = 0; i < r->n; i++) r->v[i] = bits_of(r->dt, v->data[v->ndata == 1 ? 0 : i]);
  else snprintf(r->why, sizeof r->why, "not folded");
  parsed_close(&p);
}

static void by_eval(const char *text, Bits *r) {
  Parsed p;
  parsed_open(&p, text);
  cr_assert_not_null(p.m, "%s", p.diags.data);
  EvalTensor *out = NULL;
  r->ok = ir_eval(p.m, ir_func_lookup(p.m, "main"), NULL, &out, r->why, sizeof r->why);
  const IrValue *v = ir_value(p.m, main_output(p.m));
  r->dt = v->type.dtype;
  r->n = ir_type_elements(&v->type);
  for (uint64_t i = 0; r->ok && i < r->n; i++) {
    double x = out[0].data[i];
    if (r->dt == DT_FP32) x = op_sem_store_fp32(x);
    if (r->dt == DT_FP16) x = op_sem_store_fp16(x);
    r->v[i] = bits_of(r->dt, x);
  }
  if (out) eval_tensors_free(out, ir_func(p.m, ir_func_lookup(p.m, "main"))->noutputs);
  parsed_close(&p);
}

static void by_cpu(const char *text, CpuNumerics mode, Bits *r) {
  char dir[64];
  snprintf(dir, sizeof dir, "/tmp/orion-sem-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
  char path[128];
  snprintf(path, sizeof path, "%s/m.anepkg", dir);
  Parsed p;
  parsed_open(&p, text);
  cr_assert_not_null(p.m, "%s", p.diags.data);
  PassManagerOptions o = {.passes = "lower-neg,io-legalize", .verify_each = true};
  cr_assert(passes_run(p.m, &o, &p.d), "%s", p.diags.data);
  PackageOptions po = {.target = MIL_IOS18, .source_name = "t.oir", .source_text = text, .source_len = strlen(text)};
  cr_assert(package_write(p.m, path, &po, &p.d), "%s", p.diags.data);
  parsed_close(&p);

  SourceSet sources;
  Diag d;
  StrBuf diags;
  srcset_init(&sources);
  diag_init(&d, &sources);
  sb_init(&diags);
  d.capture = &diags;
  OrionProgram *prog = orion_open(path, NULL, &d);
  cr_assert_not_null(prog, "%s", diags.data);
  CpuProgram *c = cpu_prepare(prog, 0, mode, &d);
  cr_assert_not_null(c, "%s", diags.data);
  CpuTensor none = {0}, out = {0};
  r->ok = cpu_run(c, &none, &out, &d);
  snprintf(r->why, sizeof r->why, "%s", diags.data ? diags.data : "");
  r->n = 1;
  for (uint32_t k = 0; k < out.rank; k++) r->n *= (uint64_t)out.dims[k];
  for (uint64_t i = 0; r->ok && i < r->n; i++) {
    switch (out.dtype) {
    case MIL_DT_FP32: r->dt = DT_FP32, memcpy(&r->v[i], (const float *)out.data + i, 4); break;
    case MIL_DT_FP16: r->dt = DT_FP16, r->v[i] = ((const uint16_t *)out.data)[i]; break;
    case MIL_DT_INT32: r->dt = DT_INT32, r->v[i] = (uint32_t)((const int32_t *)out.data)[i]; break;
    default: r->dt = DT_BOOL, r->v[i] = ((const bool *)out.data)[i]; break;
    }
  }
  if (r->ok) cpu_tensor_free(&out);
  cpu_free(c);
  orion_close(prog);
  srcset_free(&sources);
  sb_free(&diags);
  unlink(path);
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

/* ---- agreement ---- */

static void same_bits(const char *label, const char *text, const char *who, const Bits *want, const Bits *got) {
  cr_assert(got->ok, "%s: %s refused it: %s\n%s", label, who, got->why, text);
  cr_assert_eq(got->dt, want->dt, "%s: %s: dtype", label, who);
  cr_assert_eq(got->n, want->n, "%s: %s: elements", label, who);
  for (uint64_t i = 0; i < want->n; i++) {
    uint32_t a = want->v[i], b = got->v[i];
    if (a == b || (is_nan_bits(want->dt, a) && is_nan_bits(want->dt, b))) continue;
    cr_assert_fail("%s: element %llu: reference %.17g (bits 0x%x), %s %.17g (bits 0x%x)\n%s", label, (unsigned long long)i,
                   value_of(want->dt, a), a, who, value_of(got->dt, b), b, text);
  }
}

/* The folder, the CPU backend in both modes and ir_eval give the same bits. */
static void agree(const char *label, const char *text) {
  static Bits folded, eval, cpu;
  by_folder(text, &folded);
  cr_assert(folded.ok, "%s: the folder left the op\n%s", label, text);
  cr_assert_leq(folded.n, MAX_ELEMS);
  by_eval(text, &eval);
  same_bits(label, text, "ir_eval", &folded, &eval);
  by_cpu(text, CPU_NUMERICS_ANE, &cpu);
  same_bits(label, text, "cpu (ane)", &folded, &cpu);
  by_cpu(text, CPU_NUMERICS_FP32, &cpu);
  same_bits(label, text, "cpu (fp32)", &folded, &cpu);
}

/* The folder and the CPU backend give the same bits (ir_eval takes consts
 * as written, unrounded: it is the exact reference, and it rounds no
 * intermediate result), in ANE numerics and, with fp32_too, in FP32
 * numerics (which keeps fp16 intermediates in fp32). */
static void folder_and_cpu_agree_in(const char *label, const char *text, bool fp32_too) {
  static Bits folded, cpu;
  by_folder(text, &folded);
  cr_assert(folded.ok, "%s: the folder left the op\n%s", label, text);
  by_cpu(text, CPU_NUMERICS_ANE, &cpu);
  same_bits(label, text, "cpu (ane)", &folded, &cpu);
  if (!fp32_too) return;
  by_cpu(text, CPU_NUMERICS_FP32, &cpu);
  same_bits(label, text, "cpu (fp32)", &folded, &cpu);
}

static void folder_and_cpu_agree(const char *label, const char *text) { folder_and_cpu_agree_in(label, text, true); }

/* ir_eval and the CPU backend give the same bits (ops the folder does not fold). */
static void eval_and_cpu_agree(const char *label, const char *text) {
  static Bits eval, cpu;
  by_eval(text, &eval);
  cr_assert(eval.ok, "%s: %s", label, eval.why);
  by_cpu(text, CPU_NUMERICS_ANE, &cpu);
  same_bits(label, text, "cpu (ane)", &eval, &cpu);
  by_cpu(text, CPU_NUMERICS_FP32, &cpu);
  same_bits(label, text, "cpu (fp32)", &eval, &cpu);
}

/* All three refuse: not folded, the run fails with `msg`, the evaluation fails. */
static void all_refuse(const char *label, const char *text, const char *msg) {
  static Bits r;
  by_folder(text, &r);
  cr_assert_not(r.ok, "%s: folded", label);
  by_eval(text, &r);
  cr_assert_not(r.ok, "%s: ir_eval computed it", label);
  by_cpu(text, CPU_NUMERICS_ANE, &r);
  cr_assert_not(r.ok, "%s: the CPU backend ran it", label);
  cr_assert(strstr(r.why, msg), "%s: %s", label, r.why);
}

/* ---- programs ---- */

static void put_value(StrBuf *sb, IrDType dt, double v) {
  if (dt == DT_BOOL) sb_puts(sb, v != 0 ? "true" : "false");
  else if (dt == DT_INT32) sb_printf(sb, "%.0f", v);
  else if (isnan(v)) sb_puts(sb, "nan");
  else if (isinf(v)) sb_puts(sb, v > 0 ? "inf" : "-inf");
  else sb_printf(sb, "%.17e", v); /* exact, and -0 stays -0 */
}

static void put_const(StrBuf *sb, const char *name, IrDType dt, const char *shape, const double *v, size_t n) {
  sb_printf(sb, "  const %s: %s%s = [", name, ir_dtype_name(dt), shape);
  for (size_t i = 0; i < n; i++) {
    if (i) sb_puts(sb, ", ");
    put_value(sb, dt, v[i]);
  }
  sb_puts(sb, "];\n");
}

/* y = op(x<attrs>) over the values, each three times and then once more in
 * part, so vector loops and their scalar tails both see each one. */
static void unary(const char *op, const char *attrs, IrDType dt, const double *vals, size_t k) {
  double v[MAX_ELEMS];
  size_t n = 0;
  for (int rep = 0; rep < 3; rep++)
    for (size_t i = 0; i < k; i++) v[n++] = vals[i];
  for (size_t i = 0; i < 3 && i < k; i++) v[n++] = vals[i];
  StrBuf sb;
  sb_init(&sb);
  char shape[32];
  snprintf(shape, sizeof shape, "[%zu]", n);
  sb_puts(&sb, "func main() {\n");
  put_const(&sb, "x", dt, shape, v, n);
  sb_printf(&sb, "  y = %s(x%s);\n  return y;\n}\n", op, attrs);
  char label[128];
  snprintf(label, sizeof label, "%s%s %s", op, attrs, ir_dtype_name(dt));
  agree(label, sb.data);
  sb_free(&sb);
}

/* z = op(a, b) for every pair of values: flat, and broadcast [k,1] by [k]. */
static void binary(const char *op, IrDType dt, const double *vals, size_t k) {
  cr_assert_leq(k * k, MAX_ELEMS);
  double a[MAX_ELEMS], b[MAX_ELEMS];
  for (size_t i = 0; i < k; i++)
    for (size_t j = 0; j < k; j++) a[i * k + j] = vals[i], b[i * k + j] = vals[j];
  for (int bcast = 0; bcast < 2; bcast++) {
    StrBuf sb;
    sb_init(&sb);
    char sa[32], sbs[32];
    snprintf(sa, sizeof sa, bcast ? "[%zu,1]" : "[%zu]", bcast ? k : k * k);
    snprintf(sbs, sizeof sbs, "[%zu]", bcast ? k : k * k);
    sb_puts(&sb, "func main() {\n");
    put_const(&sb, "a", dt, sa, bcast ? vals : a, bcast ? k : k * k);
    put_const(&sb, "b", dt, sbs, bcast ? vals : b, bcast ? k : k * k);
    sb_printf(&sb, "  z = %s(a, b);\n  return z;\n}\n", op);
    char label[128];
    snprintf(label, sizeof label, "%s %s%s", op, ir_dtype_name(dt), bcast ? " broadcast" : "");
    agree(label, sb.data);
    sb_free(&sb);
  }
}

static char *cast_text(IrDType from, IrDType to, const double *vals, size_t k) {
  StrBuf sb;
  sb_init(&sb);
  char shape[32];
  snprintf(shape, sizeof shape, "[%zu]", k);
  sb_puts(&sb, "func main() {\n");
  put_const(&sb, "x", from, shape, vals, k);
  sb_printf(&sb, "  y = cast(x, dtype=\"%s\");\n  return y;\n}\n", ir_dtype_name(to));
  return sb.data;
}

static void cast(IrDType from, IrDType to, const double *vals, size_t k) {
  char *text = cast_text(from, to, vals, k);
  char label[64];
  snprintf(label, sizeof label, "cast %s -> %s", ir_dtype_name(from), ir_dtype_name(to));
  agree(label, text);
  free(text);
}

/* ---- edge values ---- */

#define N_(a) (sizeof(a) / sizeof *(a))
static const double F32_MAX = 3.4028234663852886e38, F32_TINY = 0x1p-149;

/* Signed zeros, the smallest subnormal and the largest finite value,
 * infinities, NaN, numbers whose sums and products tie (1 + 2^-24, 2^-24),
 * values a pow/log/sqrt edge needs (-1, 0.5, 2, 3, -2.5). */
static const double f32_vals[] = {0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 3.0, -2.5, 1.0 + 0x1p-23, 0x1p-24,
                                  F32_TINY, F32_MAX, INFINITY, -INFINITY, NAN, 100.0};
static const double f16_vals[] = {0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 3.0, -2.5, 1.0 + 0x1p-10, 0x1p-11,
                                  0x1p-24, 65504.0, INFINITY, -INFINITY, NAN, 12.0};
/* int32: the extremes, and factors whose product overflows (46341^2 > 2^31). */
static const double i32_vals[] = {0, 1, -1, 2, -2, 7, 46341, -46341, 65536, 2147483647.0, -2147483648.0};

static const char *const float_unary[] = {"relu", "tanh", "sigmoid", "silu", "exp", "sqrt", "neg", "abs", "identity",
                                          "log", "rsqrt", "gelu"};

Test(op_semantics, float_unary_ops) {
  for (int d = 0; d < 2; d++) {
    IrDType dt = d ? DT_FP16 : DT_FP32;
    const double *v = d ? f16_vals : f32_vals;
    size_t k = d ? N_(f16_vals) : N_(f32_vals);
    for (size_t i = 0; i < N_(float_unary); i++) unary(float_unary[i], "", dt, v, k);
    unary("gelu", ", mode=\"tanh\"", dt, v, k);
    /* epsilon is held in x's dtype: 0.1 is not an fp16 (or fp32) number */
    unary("log", ", epsilon=0.1", dt, v, k);
    unary("rsqrt", ", epsilon=1e-5", dt, v, k);
    unary("clip", ", min=-1, max=2", dt, v, k);
    unary("clip", ", min=0, max=inf", dt, v, k);
    unary("clip", ", min=-inf, max=0.3", dt, v, k);
  }
}

Test(op_semantics, int32_unary_ops) {
  const char *const ops[] = {"neg", "abs", "identity"};
  for (size_t i = 0; i < N_(ops); i++) unary(ops[i], "", DT_INT32, i32_vals, N_(i32_vals));
}

Test(op_semantics, float_binary_ops) {
  const char *const ops[] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum"};
  for (size_t i = 0; i < N_(ops); i++) {
    binary(ops[i], DT_FP32, f32_vals, N_(f32_vals));
    binary(ops[i], DT_FP16, f16_vals, N_(f16_vals));
  }
}

Test(op_semantics, int32_binary_ops_saturate) {
  const char *const ops[] = {"add", "sub", "mul", "maximum", "minimum"};
  for (size_t i = 0; i < N_(ops); i++) binary(ops[i], DT_INT32, i32_vals, N_(i32_vals));
}

Test(op_semantics, select) {
  const char *text = "func main() {\n"
                     "  const c: bool[2,1] = [[true], [false]];\n"
                     "  const a: fp32[4] = [nan, -0.0, inf, 1.5];\n"
                     "  const b: fp32[4] = [0.0, nan, -inf, -0.0];\n"
                     "  y = select(c, a, b);\n  return y;\n}\n";
  agree("select fp32", text);
  const char *ints = "func main() {\n"
                     "  const c: bool[4] = [true, false, false, true];\n"
                     "  const a: int32[4] = [2147483647, 1, 2, -2147483648];\n"
                     "  const b: int32[] = -7;\n"
                     "  y = select(c, a, b);\n  return y;\n}\n";
  agree("select int32", ints);
}

Test(op_semantics, casts) {
  /* float -> int32 truncates toward zero; -> bool is != 0 (NaN is true) */
  const double to_int[] = {0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.7, 2147483520.0, -2147483648.0, 1e9};
  cast(DT_FP32, DT_INT32, to_int, N_(to_int));
  const double h_to_int[] = {0.0, -0.0, 0.5, -0.5, 1.5, -2.5, 65504.0, -65504.0};
  cast(DT_FP16, DT_INT32, h_to_int, N_(h_to_int));
  cast(DT_FP32, DT_BOOL, f32_vals, N_(f32_vals));
  cast(DT_FP16, DT_BOOL, f16_vals, N_(f16_vals));
  /* fp32 -> fp16: nearest even (1 + 2^-11 ties down, 1 + 3 * 2^-11 up),
   * 65520 (halfway to 2^16) overflows to inf, 2^-25 ties to 0, subnormals */
  const double to_half[] = {1.0 + 0x1p-11, 1.0 + 3 * 0x1p-11, 65504.0, 65519.0, 65520.0, -65520.0, 0x1p-25, 3 * 0x1p-25,
                            0x1p-24, 1e-10, -0.0, INFINITY, NAN, F32_MAX, F32_TINY};
  cast(DT_FP32, DT_FP16, to_half, N_(to_half));
  cast(DT_FP16, DT_FP32, f16_vals, N_(f16_vals));
  /* int32 -> fp32 ties to even above 2^24; int32 -> fp16 above 2^11 and to inf */
  const double big_ints[] = {16777217.0, 16777219.0, 2147483647.0, -2147483648.0, 2049, 2051, 65519, 65520, -65536, 0};
  cast(DT_INT32, DT_FP32, big_ints, N_(big_ints));
  cast(DT_INT32, DT_FP16, big_ints, N_(big_ints));
  cast(DT_INT32, DT_BOOL, i32_vals, N_(i32_vals));
  const double bools[] = {0, 1, 1, 0};
  cast(DT_BOOL, DT_FP32, bools, N_(bools));
  cast(DT_BOOL, DT_INT32, bools, N_(bools));
}

Test(op_semantics, casts_without_a_result_are_refused_by_all) {
  const double nan_[] = {1.0, NAN};
  char *t = cast_text(DT_FP32, DT_INT32, nan_, N_(nan_));
  all_refuse("cast nan -> int32", t, "cast of nan to int32 is out of range");
  free(t);
  const double big[] = {2147483648.0};
  t = cast_text(DT_FP32, DT_INT32, big, N_(big));
  all_refuse("cast 2^31 -> int32", t, "cast of 2.14748e+09 to int32 is out of range");
  free(t);
  const double neg_inf[] = {-INFINITY};
  t = cast_text(DT_FP16, DT_INT32, neg_inf, N_(neg_inf));
  all_refuse("cast -inf -> int32", t, "cast of -inf to int32 is out of range");
  free(t);
}

Test(op_semantics, folding_reads_consts_as_the_program_holds_them) {
  /* 1.0003 is 1 in fp16 (below the midpoint 1 + 2^-11): folded unrounded,
   * 1.0003 + 0.0003 would round up to 1 + 2^-10 */
  folder_and_cpu_agree("add of unrounded fp16 consts",
                       "func main() {\n  const a: fp16[2] = [1.0003, 0.1];\n  const b: fp16[2] = [0.0003, 0.2];\n"
                       "  y = add(a, b);\n  return y;\n}\n");
  folder_and_cpu_agree("cast of an unrounded fp16 const",
                       "func main() {\n  const a: fp16[2] = [1.0003, 0.1];\n  y = cast(a, dtype=\"fp32\");\n"
                       "  return y;\n}\n");
  /* 1 + 2^-11 + 2^-40 is held as the fp32 1 + 2^-11, an fp16 tie (to 1); the
   * double itself would round up */
  folder_and_cpu_agree("fp32 const to fp16",
                       "func main() {\n  const a: fp32[2] = [1.0004882812509095, 0.1];\n"
                       "  y = cast(a, dtype=\"fp16\");\n  return y;\n}\n");
}

Test(op_semantics, reduce_max_is_maximum_folded_over_the_axis) {
  /* pairs: NaN either side, signed zeros in both orders, infinities */
  for (int d = 0; d < 3; d++) {
    const char *dt = d == 0 ? "fp32" : d == 1 ? "fp16" : "int32";
    const char *pairs = d < 2 ? "[[nan, 1.0], [1.0, nan], [-0.0, 0.0], [0.0, -0.0], [-0.0, -0.0], [-inf, -inf], [inf, -1.0], [-2.5, -3.0]]"
                              : "[[-2147483648, -2147483648], [0, -1], [2147483647, 0], [-5, -4]]";
    char text[1024], label[64];
    snprintf(text, sizeof text, "func main() {\n  const x: %s[%d,2] = %s;\n  y = reduce_max(x, axes=[1]);\n  return y;\n}\n",
             dt, d < 2 ? 8 : 4, pairs);
    snprintf(label, sizeof label, "reduce_max rows %s", dt);
    eval_and_cpu_agree(label, text);
    if (d == 0) { /* as maximum: -0 < +0 in either order, NaN propagates */
      static Bits r;
      by_cpu(text, CPU_NUMERICS_FP32, &r);
      cr_assert(r.v[2] == 0 && r.v[3] == 0 && r.v[4] == 0x80000000u, "0x%x 0x%x 0x%x", r.v[2], r.v[3], r.v[4]);
      cr_assert(is_nan_bits(DT_FP32, r.v[0]) && is_nan_bits(DT_FP32, r.v[1]));
    }
    /* the same pairs down the columns: the strided reduction */
    snprintf(text, sizeof text,
             "func main() {\n  const x: %s[%d,2] = %s;\n  t = transpose(x, perm=[1, 0]);\n"
             "  y = reduce_max(t, axes=[0]);\n  return y;\n}\n",
             dt, d < 2 ? 8 : 4, pairs);
    snprintf(label, sizeof label, "reduce_max columns %s", dt);
    eval_and_cpu_agree(label, text);
  }
}

Test(op_semantics, a_chain_folds_to_what_the_fused_group_computes) {
  /* consecutive element-wise ops run as one fused group on the CPU (tile by
   * tile, each fp16 result rounded in ANE numerics); folded op by op they
   * give the same bits */
  for (int d = 0; d < 2; d++) {
    IrDType dt = d ? DT_FP16 : DT_FP32;
    const double *v = d ? f16_vals : f32_vals;
    size_t k = d ? N_(f16_vals) : N_(f32_vals);
    double a[MAX_ELEMS], b[MAX_ELEMS];
    for (size_t i = 0; i < k; i++)
      for (size_t j = 0; j < k; j++) a[i * k + j] = v[i], b[i * k + j] = v[j];
    StrBuf sb;
    sb_init(&sb);
    char shape[32];
    snprintf(shape, sizeof shape, "[%zu]", k * k);
    sb_puts(&sb, "func main() {\n");
    put_const(&sb, "x", dt, shape, a, k * k);
    put_const(&sb, "y", dt, shape, b, k * k);
    sb_puts(&sb, "  m = maximum(x, y);\n  r = relu(m);\n  n = minimum(r, y);\n  c = clip(n, min=-1, max=2);\n"
                 "  p = mul(c, x);\n  t = tanh(p);\n  s = sub(t, y);\n  q = div(s, x);\n  e = exp(q);\n"
                 "  return e;\n}\n");
    folder_and_cpu_agree_in(d ? "chain fp16" : "chain fp32", sb.data, !d);
    sb_free(&sb);
  }
}
