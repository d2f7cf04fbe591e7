/*
 * The reference evaluator against values computed by hand: every op on tiny
 * consts, with the arithmetic in the comments. Exact where the arithmetic is
 * exact in double, else within 1e-12 of the written formula.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "helpers.h"
#include "ir_eval.h"
#include "orion/fp16.h"

/* Parses `text`, evaluates `main` on `inputs` (NULL: none), returns its outputs. */
typedef struct Run {
  Parsed p;
  EvalTensor *out;
  uint32_t nout;
} Run;

static void run_open(Run *r, const char *text, const EvalTensor *inputs) {
  parsed_open(&r->p, text);
  cr_assert(r->p.m, "does not parse:\n%s", r->p.diags.data);
  IrFuncId f = ir_func_lookup(r->p.m, "main");
  cr_assert(f);
  char err[1024];
  cr_assert(ir_eval(r->p.m, f, inputs, &r->out, err, sizeof err), "%s", err);
  r->nout = ir_func(r->p.m, f)->noutputs;
}

static void run_close(Run *r) {
  eval_tensors_free(r->out, r->nout);
  parsed_close(&r->p);
}

static const char *type_of(const EvalTensor *t) {
  static char buf[128];
  StrBuf sb;
  sb_init(&sb);
  ir_type_print(&sb, &t->type);
  snprintf(buf, sizeof buf, "%s", sb.data);
  sb_free(&sb);
  return buf;
}

static void expect_tensor(const EvalTensor *t, const char *type, const double *want, size_t n, double tol,
                          const char *what) {
  cr_assert_str_eq(type_of(t), type, "%s", what);
  cr_assert_eq(ir_type_elements(&t->type), n, "%s: %zu values expected", what, n);
  for (size_t i = 0; i < n; i++)
    cr_assert(fabs(t->data[i] - want[i]) <= tol || (isinf(want[i]) && t->data[i] == want[i]),
              "%s: element %zu is %.17g, expected %.17g", what, i, t->data[i], want[i]);
}

#define VALS(...) (const double[]){__VA_ARGS__}, sizeof((const double[]){__VA_ARGS__}) / sizeof(double)
/* Output `i` of the run has `type` and the values. */
#define EXPECT_OUT(r, i, type, tol, ...) expect_tensor(&(r).out[i], type, VALS(__VA_ARGS__), tol, #i)

/* Output 0 of `text` (a whole module with `main`). */
static void check1(const char *text, const char *type, const double *want, size_t n, double tol) {
  Run r;
  run_open(&r, text, NULL);
  expect_tensor(&r.out[0], type, want, n, tol, text);
  run_close(&r);
}
#define CHECK(text, type, tol, ...) check1(text, type, VALS(__VA_ARGS__), tol)

/* Evaluation of `text` fails with a message containing `want`. */
static void check_error(const char *text, const char *want) {
  Parsed p;
  parsed_open(&p, text);
  cr_assert(p.m, "does not parse:\n%s", p.diags.data);
  EvalTensor *out = NULL;
  char err[1024];
  cr_assert_not(ir_eval(p.m, ir_func_lookup(p.m, "main"), NULL, &out, err, sizeof err));
  cr_assert_null(out);
  cr_assert(strstr(err, want), "error '%s' does not contain '%s'", err, want);
  parsed_close(&p);
}

static const double TOL = 1e-12;

/* ---- elementwise ---- */

Test(ir_eval, binary_broadcasting) {
  Run r;
  run_open(&r,
           "func main() {\n"
           "  const a: fp32[2,3] = [[1, 2, 3], [4, 5, 6]];\n"
           "  const b: fp32[3] = [10, 20, 30];\n"
           "  const c: fp32[2,1] = [[2], [4]];\n"
           "  const d: fp32[3] = [3, 0, 5];\n"
           "  const h: fp32[] = 0.5;\n"
           "  s = add(a, b);\n  t = sub(a, c);\n  p = mul(a, c);\n  q = div(a, c);\n  w = pow(c, a);\n"
           "  mx = maximum(a, d);\n  mn = minimum(d, a);\n  sc = mul(h, a);\n"
           "  return s, t, p, q, w, mx, mn, sc;\n}\n",
           NULL);
  EXPECT_OUT(r, 0, "fp32[2,3]", 0, 11, 22, 33, 14, 25, 36);
  EXPECT_OUT(r, 1, "fp32[2,3]", 0, -1, 0, 1, 0, 1, 2);
  EXPECT_OUT(r, 2, "fp32[2,3]", 0, 2, 4, 6, 16, 20, 24);
  EXPECT_OUT(r, 3, "fp32[2,3]", 0, 0.5, 1, 1.5, 1, 1.25, 1.5);
  EXPECT_OUT(r, 4, "fp32[2,3]", 0, 2, 4, 8, 256, 1024, 4096); /* 2^1 2^2 2^3, 4^4 4^5 4^6 */
  EXPECT_OUT(r, 5, "fp32[2,3]", 0, 3, 2, 5, 4, 5, 6);
  EXPECT_OUT(r, 6, "fp32[2,3]", 0, 1, 0, 3, 3, 0, 5);
  EXPECT_OUT(r, 7, "fp32[2,3]", 0, 0.5, 1, 1.5, 2, 2.5, 3);
  run_close(&r);
  /* [4,1] with [1,3]: both stretch */
  CHECK("func main() {\n  const a: fp16[2,1] = [[1], [2]];\n  const b: fp16[1,3] = [[10, 20, 30]];\n"
        "  y = add(a, b);\n  return y;\n}\n",
        "fp16[2,3]", 0, 11, 21, 31, 12, 22, 32);
  /* int32 arithmetic */
  CHECK("func main() {\n  const a: int32[3] = [7, -3, 2];\n  const b: int32[] = -2;\n  y = mul(a, b);\n  return y;\n}\n",
        "int32[3]", 0, -14, 6, -4);
}

Test(ir_eval, unary) {
  Run r;
  run_open(&r,
           "func main() {\n"
           "  const x: fp32[4] = [-1, 0, 0.5, 2];\n"
           "  const s: fp32[4] = [0, 0.25, 4, 9];\n"
           "  const l: fp32[2] = [0, 1.718281828459045];\n"
           "  const q: fp32[2] = [0, 3.75];\n"
           "  const i: int32[3] = [-4, 0, 5];\n"
           "  r = relu(x);\n  t = tanh(x);\n  sg = sigmoid(x);\n  si = silu(x);\n  e = exp(x);\n  sq = sqrt(s);\n"
           "  ng = neg(x);\n  ab = abs(x);\n  id = identity(x);\n  lg = log(l, epsilon=1.0);\n"
           "  rs = rsqrt(q, epsilon=0.25);\n  ni = neg(i);\n  ai = abs(i);\n"
           "  return r, t, sg, si, e, sq, ng, ab, id, lg, rs, ni, ai;\n}\n",
           NULL);
  EXPECT_OUT(r, 0, "fp32[4]", 0, 0, 0, 0.5, 2);
  EXPECT_OUT(r, 1, "fp32[4]", TOL, tanh(-1.0), 0, tanh(0.5), tanh(2.0));
  EXPECT_OUT(r, 2, "fp32[4]", TOL, 1 / (1 + exp(1.0)), 0.5, 1 / (1 + exp(-0.5)), 1 / (1 + exp(-2.0)));
  EXPECT_OUT(r, 3, "fp32[4]", TOL, -1 / (1 + exp(1.0)), 0, 0.5 / (1 + exp(-0.5)), 2 / (1 + exp(-2.0)));
  EXPECT_OUT(r, 4, "fp32[4]", TOL, exp(-1.0), 1, exp(0.5), exp(2.0));
  EXPECT_OUT(r, 5, "fp32[4]", 0, 0, 0.5, 2, 3);
  EXPECT_OUT(r, 6, "fp32[4]", 0, 1, 0, -0.5, -2);
  EXPECT_OUT(r, 7, "fp32[4]", 0, 1, 0, 0.5, 2);
  EXPECT_OUT(r, 8, "fp32[4]", 0, -1, 0, 0.5, 2);
  EXPECT_OUT(r, 9, "fp32[2]", TOL, 0, 1);  /* log(0 + 1), log(e - 1 + 1) */
  EXPECT_OUT(r, 10, "fp32[2]", 0, 2, 0.5); /* 1/sqrt(0.25), 1/sqrt(4) */
  EXPECT_OUT(r, 11, "int32[3]", 0, 4, 0, -5);
  EXPECT_OUT(r, 12, "int32[3]", 0, 4, 0, 5);
  run_close(&r);
  /* epsilon defaults to 0: log(1) = 0, rsqrt(4) = 0.5 */
  CHECK("func main() {\n  const x: fp32[2] = [1, 4];\n  a = log(x);\n  b = rsqrt(x);\n  c = add(a, b);\n  return c;\n}\n",
        "fp32[2]", TOL, 1, log(4.0) + 0.5);
}

static double gelu_exact(double x) { return 0.5 * x * (1 + erf(x / sqrt(2.0))); }
static double gelu_tanh(double x) {
  return 0.5 * x * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
}

Test(ir_eval, gelu_both_modes) {
  Run r;
  run_open(&r,
           "func main() {\n  const x: fp32[5] = [-3, -1, 0, 1, 2.5];\n"
           "  a = gelu(x);\n  b = gelu(x, mode=\"exact\");\n  c = gelu(x, mode=\"tanh\");\n  return a, b, c;\n}\n",
           NULL);
  EXPECT_OUT(r, 0, "fp32[5]", TOL, gelu_exact(-3), gelu_exact(-1), 0, 0.8413447460685429, gelu_exact(2.5));
  EXPECT_OUT(r, 1, "fp32[5]", TOL, gelu_exact(-3), gelu_exact(-1), 0, gelu_exact(1), gelu_exact(2.5));
  EXPECT_OUT(r, 2, "fp32[5]", TOL, gelu_tanh(-3), gelu_tanh(-1), 0, gelu_tanh(1), gelu_tanh(2.5));
  /* the modes differ, slightly */
  cr_assert(fabs(r.out[2].data[3] - r.out[1].data[3]) > 1e-5);
  cr_assert(fabs(r.out[2].data[3] - r.out[1].data[3]) < 1e-3);
  run_close(&r);
}

Test(ir_eval, clip_and_select) {
  CHECK("func main() {\n  const x: fp32[5] = [-3, -1, 0, 1, 3];\n  y = clip(x, min=-1, max=2);\n  return y;\n}\n",
        "fp32[5]", 0, -1, -1, 0, 1, 2);
  CHECK("func main() {\n  const x: fp32[3] = [-3, 0, 1e30];\n  y = clip(x, min=-1, max=inf);\n  return y;\n}\n",
        "fp32[3]", 0, -1, 0, 1e30);
  /* cond [2,1], a [3], b scalar -> [2,3] */
  CHECK("func main() {\n  const c: bool[2,1] = [[true], [false]];\n  const a: fp32[3] = [1, 2, 3];\n"
        "  const b: fp32[] = -1;\n  y = select(c, a, b);\n  return y;\n}\n",
        "fp32[2,3]", 0, 1, 2, 3, -1, -1, -1);
  /* cond [3] against a [2,1] and b [2,3] */
  CHECK("func main() {\n  const c: bool[3] = [true, false, true];\n  const a: int32[2,1] = [[7], [8]];\n"
        "  const b: int32[2,3] = [[1, 2, 3], [4, 5, 6]];\n  y = select(c, a, b);\n  return y;\n}\n",
        "int32[2,3]", 0, 7, 2, 7, 8, 5, 8);
}

Test(ir_eval, cast) {
  Run r;
  run_open(&r,
           "func main() {\n  const x: fp32[5] = [-2.7, -0.5, 0, 0.5, 2.7];\n  const b: bool[2] = [true, false];\n"
           "  const i: int32[3] = [-1, 0, 300];\n"
           "  a = cast(x, dtype=\"int32\");\n  c = cast(x, dtype=\"bool\");\n  d = cast(b, dtype=\"fp32\");\n"
           "  e = cast(i, dtype=\"fp16\");\n  f = cast(i, dtype=\"bool\");\n  g = cast(x, dtype=\"int8\");\n"
           "  h = cast(x, dtype=\"fp16\");\n  k = cast(h, dtype=\"fp32\");\n"
           "  return a, c, d, e, f, g, h, k;\n}\n",
           NULL);
  EXPECT_OUT(r, 0, "int32[5]", 0, -2, 0, 0, 0, 2); /* toward zero */
  EXPECT_OUT(r, 1, "bool[5]", 0, 1, 1, 0, 1, 1);
  EXPECT_OUT(r, 2, "fp32[2]", 0, 1, 0);
  EXPECT_OUT(r, 3, "fp16[3]", 0, -1, 0, 300);
  EXPECT_OUT(r, 4, "bool[3]", 0, 1, 0, 1);
  EXPECT_OUT(r, 5, "int8[5]", 0, -2, 0, 0, 0, 2);
  /* to fp16 rounds (nearest even): 2.7 -> 2.69921875; back to fp32 is exact */
  EXPECT_OUT(r, 6, "fp16[5]", 0, -2.69921875, -0.5, 0, 0.5, 2.69921875);
  EXPECT_OUT(r, 7, "fp32[5]", 0, -2.69921875, -0.5, 0, 0.5, 2.69921875);
  cr_assert(!signbit(r.out[0].data[1])); /* -0.5 -> 0, not -0 */
  run_close(&r);
  check_error("func main() {\n  const i: int32[2] = [1, 200];\n  y = cast(i, dtype=\"int8\");\n  return y;\n}\n",
              "cast of 200 to int8 is out of range");
  check_error("func main() {\n  const x: fp32[1] = nan;\n  y = cast(x, dtype=\"int32\");\n  return y;\n}\n",
              "cast of NaN to int32");
}

/* ---- reductions and normalizations ---- */

Test(ir_eval, softmax) {
  CHECK("func main() {\n  const x: fp32[2,3] = [[1, 2, 3], [0, 0, 0]];\n  y = softmax(x);\n  return y;\n}\n",
        "fp32[2,3]", TOL, 0.09003057317038046, 0.24472847105479767, 0.6652409557748219, 1.0 / 3, 1.0 / 3, 1.0 / 3);
  /* axis 0: column 0 is [1, 1] -> halves; column 1 is [2, 2 + ln 3] -> 1/4, 3/4 */
  CHECK("func main() {\n  const x: fp32[2,2] = [[1, 2], [1, 3.0986122886681098]];\n  y = softmax(x, axis=0);\n"
        "  return y;\n}\n",
        "fp32[2,2]", TOL, 0.5, 0.25, 0.5, 0.75);
  /* middle axis of [1,2,2]: pairs (x[0,0,k], x[0,1,k]) */
  CHECK("func main() {\n  const x: fp32[1,2,2] = [[[0, 5], [0, 5]]];\n  y = softmax(x, axis=1);\n  return y;\n}\n",
        "fp32[1,2,2]", TOL, 0.5, 0.5, 0.5, 0.5);
}

Test(ir_eval, reductions) {
  Run r;
  run_open(&r,
           "func main() {\n  const x: fp32[2,3] = [[1, 2, 3], [4, 5, 6]];\n"
           "  const z: fp32[2,2,2] = [[[1, 2], [3, 4]], [[5, 6], [7, 8]]];\n"
           "  const i: int32[2,2] = [[1, 2], [-1, -2]];\n"
           "  all = reduce_sum(x);\n  rows = reduce_sum(x, axes=[1], keep_dims=true);\n"
           "  cols = reduce_mean(x, axes=[0]);\n  mx = reduce_max(x, axes=[-1], keep_dims=true);\n"
           "  mid = reduce_sum(z, axes=[0, 2]);\n  im = reduce_mean(i, axes=[1]);\n  am = reduce_max(z);\n"
           "  kd = reduce_mean(z, keep_dims=true);\n"
           "  return all, rows, cols, mx, mid, im, am, kd;\n}\n",
           NULL);
  EXPECT_OUT(r, 0, "fp32[]", 0, 21);
  EXPECT_OUT(r, 1, "fp32[2,1]", 0, 6, 15);
  EXPECT_OUT(r, 2, "fp32[3]", 0, 2.5, 3.5, 4.5);
  EXPECT_OUT(r, 3, "fp32[2,1]", 0, 3, 6);
  EXPECT_OUT(r, 4, "fp32[2]", 0, 14, 22); /* j=0: 1+2+5+6, j=1: 3+4+7+8 */
  EXPECT_OUT(r, 5, "int32[2]", 0, 1, -1); /* 1.5 and -1.5 truncate toward zero */
  EXPECT_OUT(r, 6, "fp32[]", 0, 8);
  EXPECT_OUT(r, 7, "fp32[1,1,1]", 0, 4.5);
  run_close(&r);
}

Test(ir_eval, layer_norm) {
  /* row [1,2,3,4]: mean 2.5, biased var 1.25; 1/sqrt(1.25) = 0.894427190999916 */
  const double k = 0.8944271909999159;
  Run r;
  run_open(&r,
           "func main() {\n  const x: fp32[2,4] = [[1, 2, 3, 4], [-1, 1, -1, 1]];\n"
           "  const g: fp32[4] = [1, 0, 2, -1];\n  const b: fp32[4] = [0, 1, 0, 1];\n"
           "  plain = layer_norm(x, epsilon=0);\n  affine = layer_norm(x, g, b, epsilon=0);\n"
           "  dflt = layer_norm(x);\n  return plain, affine, dflt;\n}\n",
           NULL);
  EXPECT_OUT(r, 0, "fp32[2,4]", TOL, -1.5 * k, -0.5 * k, 0.5 * k, 1.5 * k, -1, 1, -1, 1);
  EXPECT_OUT(r, 1, "fp32[2,4]", TOL, -1.5 * k, 1, 1.0 * k, -1.5 * k + 1, -1, 1, -2, 0);
  /* default epsilon 1e-5: row 2 has var 1 */
  const double d = 1 / sqrt(1 + 1e-5), d1 = 1 / sqrt(1.25 + 1e-5);
  EXPECT_OUT(r, 2, "fp32[2,4]", TOL, -1.5 * d1, -0.5 * d1, 0.5 * d1, 1.5 * d1, -d, d, -d, d);
  run_close(&r);
  /* axes [2, 1] jointly over a [1,2,3] input: mean 3.5, var 17.5/6; gamma is
   * [3,2], indexed [k][j] for x[0,j,k] (the order `axes` lists them) */
  const double s = 1 / sqrt(17.5 / 6);
  CHECK("func main() {\n  const x: fp32[1,2,3] = [[[1, 2, 3], [4, 5, 6]]];\n"
        "  const g: fp32[3,2] = [[1, 10], [2, 20], [3, 30]];\n"
        "  y = layer_norm(x, g, axes=[2, 1], epsilon=0);\n  return y;\n}\n",
        "fp32[1,2,3]", TOL, -2.5 * s * 1, -1.5 * s * 2, -0.5 * s * 3, 0.5 * s * 10, 1.5 * s * 20, 2.5 * s * 30);
  /* axis 0 of [2,2]: columns [1,3] and [2,6] */
  CHECK("func main() {\n  const x: fp32[2,2] = [[1, 2], [3, 6]];\n  y = layer_norm(x, axes=[0], epsilon=0);\n"
        "  return y;\n}\n",
        "fp32[2,2]", TOL, -1, -1, 1, 1);
}

Test(ir_eval, rms_norm) {
  /* [3, 4]: mean square 12.5 */
  CHECK("func main() {\n  const x: fp32[1,2] = [[3, 4]];\n  const g: fp32[2] = [2, -1];\n"
        "  y = rms_norm(x, g, epsilon=0);\n  return y;\n}\n",
        "fp32[1,2]", TOL, 2 * 0.848528137423857, -1.131370849898476);
  CHECK("func main() {\n  const x: fp32[2] = [1, -1];\n  y = rms_norm(x);\n  return y;\n}\n", "fp32[2]", TOL,
        1 / sqrt(1 + 1e-5), -1 / sqrt(1 + 1e-5));
  /* axes [2, 1] with gamma [3,2] indexed [k][j]; mean square of 1..6 = 91/6 */
  const double s = 1 / sqrt(91.0 / 6);
  CHECK("func main() {\n  const x: fp32[1,2,3] = [[[1, 2, 3], [4, 5, 6]]];\n"
        "  const g: fp32[3,2] = [[1, 10], [2, 20], [3, 30]];\n"
        "  y = rms_norm(x, g, axes=[2, 1], epsilon=0);\n  return y;\n}\n",
        "fp32[1,2,3]", TOL, 1 * s, 2 * s * 2, 3 * s * 3, 4 * s * 10, 5 * s * 20, 6 * s * 30);
}

/* ---- shape ops ---- */

static const char *IOTA24 = "  const x: fp32[2,3,4] = [[[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]],"
                            " [[12, 13, 14, 15], [16, 17, 18, 19], [20, 21, 22, 23]]];\n";

static void check_iota(const char *body, const char *type, const double *want, size_t n) {
  char text[2048];
  snprintf(text, sizeof text, "func main() {\n%s%s\n}\n", IOTA24, body);
  check1(text, type, want, n, 0);
}
#define CHECK_IOTA(body, type, ...) check_iota(body, type, VALS(__VA_ARGS__))

Test(ir_eval, reshape_and_transpose) {
  CHECK_IOTA("  y = reshape(x, shape=[0, -1]);\n  z = slice(y, begin=[1, 10], end=[2, 12]);\n  return z;", "fp32[1,2]",
             22, 23);
  CHECK_IOTA("  y = reshape(x, shape=[4, 6]);\n  z = slice(y, begin=[1, 0], end=[2, 6]);\n  return z;", "fp32[1,6]", 6,
             7, 8, 9, 10, 11);
  CHECK("func main() {\n  const x: fp32[1] = 7;\n  y = reshape(x, shape=[]);\n  return y;\n}\n", "fp32[]", 0, 7);
  CHECK("func main() {\n  const x: fp32[2,3] = [[0, 1, 2], [3, 4, 5]];\n  y = transpose(x, perm=[1, 0]);\n"
        "  return y;\n}\n",
        "fp32[3,2]", 0, 0, 3, 1, 4, 2, 5);
  /* result[k, i, j] = x[i, j, k] */
  CHECK_IOTA("  y = transpose(x, perm=[-1, 0, 1]);\n  return y;", "fp32[4,2,3]", 0, 4, 8, 12, 16, 20, 1, 5, 9, 13, 17,
             21, 2, 6, 10, 14, 18, 22, 3, 7, 11, 15, 19, 23);
}

Test(ir_eval, slice) {
  /* the example of docs/language.md: x[-1:100, 0:3:2, 1:-1] */
  CHECK_IOTA("  y = slice(x, begin=[-1, 0, 1], end=[100, 3, -1], stride=[1, 2, 1]);\n  return y;", "fp32[1,2,2]", 13,
             14, 21, 22);
  /* x[-6:7:2] of 0..6 = [1, 3, 5]; x[-100:3:2] = [0, 2] */
#define SEVEN(attrs) "func main() {\n  const x: int32[7] = [0, 1, 2, 3, 4, 5, 6];\n  y = slice(x, " attrs ");\n  return y;\n}\n"
  CHECK(SEVEN("begin=[-6], end=[7], stride=[2]"), "int32[3]", 0, 1, 3, 5);
  CHECK(SEVEN("begin=[-100], end=[3], stride=[2]"), "int32[2]", 0, 0, 2);
  CHECK(SEVEN("begin=[2], end=[-1], stride=[3]"), "int32[2]", 0, 2, 5);
#undef SEVEN
}

Test(ir_eval, split_and_concat) {
  Run r;
  run_open(&r,
           "func main() {\n  const x: fp32[2,5] = [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]];\n"
           "  a, b = split(x, axis=1, split_sizes=[2, 3]);\n  top, bottom = split(x, axis=-2, num_splits=2);\n"
           "  c = concat(b, a, axis=1);\n  d = concat(bottom, top, bottom, axis=0);\n  e = concat(a, axis=-1);\n"
           "  return a, b, top, bottom, c, d, e;\n}\n",
           NULL);
  EXPECT_OUT(r, 0, "fp32[2,2]", 0, 0, 1, 5, 6);
  EXPECT_OUT(r, 1, "fp32[2,3]", 0, 2, 3, 4, 7, 8, 9);
  EXPECT_OUT(r, 2, "fp32[1,5]", 0, 0, 1, 2, 3, 4);
  EXPECT_OUT(r, 3, "fp32[1,5]", 0, 5, 6, 7, 8, 9);
  EXPECT_OUT(r, 4, "fp32[2,5]", 0, 2, 3, 4, 0, 1, 7, 8, 9, 5, 6);
  EXPECT_OUT(r, 5, "fp32[3,5]", 0, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9);
  EXPECT_OUT(r, 6, "fp32[2,2]", 0, 0, 1, 5, 6);
  run_close(&r);
}

Test(ir_eval, gather) {
  const char *text = "func main() {\n  const t: fp32[4,2] = [[0, 1], [10, 11], [20, 21], [30, 31]];\n"
                     "  const ids: int32[2,2] = [[3, 0], [1, 1]];\n  const one: int32[] = 1;\n"
                     "  const cols: int32[2] = [1, 0];\n"
                     "  rows = gather(t, ids);\n  col = gather(t, one, axis=1);\n  swap = gather(t, cols, axis=-1);\n"
                     "  return rows, col, swap;\n}\n";
  Run r;
  run_open(&r, text, NULL);
  EXPECT_OUT(r, 0, "fp32[2,2,2]", 0, 30, 31, 0, 1, 10, 11, 10, 11);
  EXPECT_OUT(r, 1, "fp32[4]", 0, 1, 11, 21, 31);
  EXPECT_OUT(r, 2, "fp32[4,2]", 0, 1, 0, 11, 10, 21, 20, 31, 30);
  run_close(&r);
  check_error("func main() {\n  const t: fp32[4] = [0, 1, 2, 3];\n  const i: int32[2] = [1, 4];\n"
              "  y = gather(t, i);\n  return y;\n}\n",
              "index 4 out of range for dimension 0 of size 4");
  check_error("func main() {\n  const t: fp32[4] = [0, 1, 2, 3];\n  const i: int32[1] = -1;\n"
              "  y = gather(t, i);\n  return y;\n}\n",
              "index -1 out of range");
}

/* ---- linear algebra ---- */

Test(ir_eval, linear) {
  /* W = [[1,0,-1],[2,1,0]], b = [10,20]: [1,2,3] -> [1-3+10, 2+2+20], [4,5,6] -> [4-6+10, 8+5+20] */
  CHECK("func main() {\n  const x: fp32[2,3] = [[1, 2, 3], [4, 5, 6]];\n  const w: fp32[2,3] = [[1, 0, -1], [2, 1, 0]];\n"
        "  const b: fp32[2] = [10, 20];\n  y = linear(x, w, b);\n  return y;\n}\n",
        "fp32[2,2]", 0, 8, 24, 8, 33);
  CHECK("func main() {\n  const x: fp32[3] = [1, 2, 3];\n  const w: fp32[2,3] = [[1, 0, -1], [2, 1, 0]];\n"
        "  y = linear(x, w);\n  return y;\n}\n",
        "fp32[2]", 0, -2, 4);
  CHECK("func main() {\n  const x: fp16[2,1,1,3] = [[[[1, 2, 3]]], [[[4, 5, 6]]]];\n"
        "  const w: fp16[1,3] = [[1, 1, 1]];\n  y = linear(x, w);\n  return y;\n}\n",
        "fp16[2,1,1,1]", 0, 6, 15);
}

Test(ir_eval, matmul) {
  /* a = [[1,2,3],[4,5,6]], b = [[7,8],[9,10],[11,12]]: a b = [[58,64],[139,154]] */
  Run r;
  run_open(&r,
           "func main() {\n  const a: fp32[2,3] = [[1, 2, 3], [4, 5, 6]];\n"
           "  const b: fp32[3,2] = [[7, 8], [9, 10], [11, 12]];\n"
           "  const at: fp32[3,2] = [[1, 4], [2, 5], [3, 6]];\n  const bt: fp32[2,3] = [[7, 9, 11], [8, 10, 12]];\n"
           "  const v: fp32[3] = [1, 2, 3];\n  const ones: fp32[3] = 1;\n"
           "  p = matmul(a, b);\n  p_tx = matmul(at, b, transpose_x=true);\n  p_ty = matmul(a, bt, transpose_y=true);\n"
           "  p_tt = matmul(at, bt, transpose_x=true, transpose_y=true);\n"
           "  vb = matmul(v, b);\n  av = matmul(a, ones);\n  vv = matmul(v, v);\n  aat = matmul(a, a, transpose_y=true);\n"
           "  return p, p_tx, p_ty, p_tt, vb, av, vv, aat;\n}\n",
           NULL);
  for (int i = 0; i < 4; i++) EXPECT_OUT(r, i, "fp32[2,2]", 0, 58, 64, 139, 154);
  EXPECT_OUT(r, 4, "fp32[2]", 0, 58, 64);
  EXPECT_OUT(r, 5, "fp32[2]", 0, 6, 15);
  EXPECT_OUT(r, 6, "fp32[]", 0, 14);
  EXPECT_OUT(r, 7, "fp32[2,2]", 0, 14, 32, 32, 77);
  run_close(&r);
  /* batch broadcasting: A [2,1,1,2] rows [1,2] and [3,4]; B [1,3,2,1] columns [1,0], [0,1], [1,1]:
   * out[i,j] = A_i . B_j */
  CHECK("func main() {\n  const a: fp32[2,1,1,2] = [[[[1, 2]]], [[[3, 4]]]];\n"
        "  const b: fp32[1,3,2,1] = [[[[1], [0]], [[0], [1]], [[1], [1]]]];\n  y = matmul(a, b);\n  return y;\n}\n",
        "fp32[2,3,1,1]", 0, 1, 2, 3, 3, 4, 7);
  /* a rank-2 y against a batched x, transposed: x [2,2,1] (x^T: [1,2]) */
  CHECK("func main() {\n  const a: int32[2,2,1] = [[[1], [2]], [[3], [4]]];\n  const b: int32[2,3] = [[1, 0, 1], [0, 1, 1]];\n"
        "  y = matmul(a, b, transpose_x=true);\n  return y;\n}\n",
        "int32[2,1,3]", 0, 1, 2, 3, 3, 4, 7);
}

/* x: channel 0 = [[1,2,3],[4,5,6],[7,8,9]], channel 1 = [[1,0,1],[0,1,0],[1,0,1]] */
static const char *CONV_X = "  const x: fp32[1,2,3,3] = [[[[1, 2, 3], [4, 5, 6], [7, 8, 9]], "
                            "[[1, 0, 1], [0, 1, 0], [1, 0, 1]]]];\n"
                            /* w channel 0 = [[1,0],[0,1]] (diagonal pairs), channel 1 = all ones (window sum) */
                            "  const w: fp32[1,2,2,2] = [[[[1, 0], [0, 1]], [[1, 1], [1, 1]]]];\n";

static void check_conv(const char *body, const char *type, const double *want, size_t n) {
  char text[2048];
  snprintf(text, sizeof text, "func main() {\n%s%s\n}\n", CONV_X, body);
  check1(text, type, want, n, 0);
}
#define CHECK_CONV(body, type, ...) check_conv(body, type, VALS(__VA_ARGS__))

Test(ir_eval, conv_valid_bias) {
  /* channel 0: 1+5, 2+6, 4+8, 5+9 = 6, 8, 12, 14; channel 1 windows each sum to 2; bias 0.5 */
  CHECK_CONV("  const b: fp32[1] = 0.5;\n  y = conv(x, w, b);\n  return y;", "fp32[1,1,2,2]", 8.5, 10.5, 14.5, 16.5);
}

Test(ir_eval, conv_padding_and_stride) {
  /* pad 1 all round, stride 2: outputs at rows/cols {-1,0} and {1,2}.
   * channel 0: (0,0) 0+1, (0,1) 0+3, (1,0) 0+7, (1,1) 5+9
   * channel 1: (0,0) 1, (0,1) 0+1, (1,0) 0+1, (1,1) 1+0+0+1 */
  CHECK_CONV("  y = conv(x, w, strides=[2, 2], pad=[1, 1, 1, 1]);\n  return y;", "fp32[1,1,2,2]", 2, 4, 8, 16);
  /* asymmetric custom pad: rows 0 before and 1 after, cols 1 before and 0 after:
   * out[o0][o1] = x[o0][o1-1] + x[o0+1][o1] (zero outside) */
  CHECK("func main() {\n  const x: fp32[1,1,3,3] = [[[[1, 2, 3], [4, 5, 6], [7, 8, 9]]]];\n"
        "  const w: fp32[1,1,2,2] = [[[[1, 0], [0, 1]]]];\n  y = conv(x, w, pad=[0, 1, 1, 0]);\n  return y;\n}\n",
        "fp32[1,1,3,3]", 0, 0 + 4, 1 + 5, 2 + 6, 0 + 7, 4 + 8, 5 + 9, 0 + 0, 7 + 0, 8 + 0);
}

Test(ir_eval, conv_same_and_same_lower) {
  /* 2x2 kernel, stride 1: total padding 1 per dim. same: 0 before, 1 after
   * (out = x[o] + x[o+1, o+1]); same_lower: 1 before (out = x[o-1, o-1] + x[o]) */
#define PADDED(pad_type) "func main() {\n  const x: fp32[1,1,3,3] = [[[[1, 2, 3], [4, 5, 6], [7, 8, 9]]]];\n" \
  "  const w: fp32[1,1,2,2] = [[[[1, 0], [0, 1]]]];\n  y = conv(x, w, pad_type=\"" pad_type "\");\n  return y;\n}\n"
  CHECK(PADDED("same"), "fp32[1,1,3,3]", 0, 6, 8, 3, 12, 14, 6, 7, 8, 9);
  CHECK(PADDED("same_lower"), "fp32[1,1,3,3]", 0, 1, 2, 3, 4, 6, 8, 7, 12, 14);
#undef PADDED
  /* same with stride 2 on 3: out ceil(3/2) = 2, P = 2*2 - 3 + 2 - 2 = 1 (after): rows {0,1} and {2,3} */
  CHECK("func main() {\n  const x: fp32[1,1,3,3] = [[[[1, 2, 3], [4, 5, 6], [7, 8, 9]]]];\n"
        "  const w: fp32[1,1,2,2] = [[[[1, 0], [0, 1]]]];\n  y = conv(x, w, strides=[2, 2], pad_type=\"same\");\n"
        "  return y;\n}\n",
        "fp32[1,1,2,2]", 0, 1 + 5, 3, 7, 9);
}

Test(ir_eval, conv_groups) {
  /* depthwise: channel 0 with [[1,0],[0,1]] = 6, 8, 12, 14; channel 1 with [[2,0],[0,-1]]:
   * (0,0) 2*1 - 1, (0,1) 2*0 - 0, (1,0) 2*0 - 0, (1,1) 2*1 - 1 */
  CHECK_CONV("  const wd: fp32[2,1,2,2] = [[[[1, 0], [0, 1]]], [[[2, 0], [0, -1]]]];\n"
             "  const b: fp32[2] = [0, 100];\n  y = conv(x, wd, b, groups=2);\n  return y;",
             "fp32[1,2,2,2]", 6, 8, 12, 14, 101, 100, 100, 101);
  /* groups 2 with 2 outputs per group: outputs 0,1 read channel 0, outputs 2,3 read channel 1 (1x1 kernels) */
  CHECK("func main() {\n  const x: fp32[1,2,1,2] = [[[[1, 2]], [[10, 20]]]];\n"
        "  const w: fp32[4,1,1,1] = [[[[1]]], [[[-1]]], [[[2]]], [[[3]]]];\n  y = conv(x, w, groups=2);\n  return y;\n}\n",
        "fp32[1,4,1,2]", 0, 1, 2, -1, -2, 20, 40, 30, 60);
}

Test(ir_eval, conv_1d_dilation_and_3d) {
  /* 1-D, kernel [1,1] dilated by 2 (span 3): [1+3, 2+4, 3+5]; with stride 2: [1+3, 3+5] */
  CHECK("func main() {\n  const x: fp32[1,1,5] = [[[1, 2, 3, 4, 5]]];\n  const w: fp32[1,1,2] = [[[1, 1]]];\n"
        "  y = conv(x, w, dilations=[2]);\n  return y;\n}\n",
        "fp32[1,1,3]", 0, 4, 6, 8);
  CHECK("func main() {\n  const x: fp32[1,1,5] = [[[1, 2, 3, 4, 5]]];\n  const w: fp32[1,1,2] = [[[1, 1]]];\n"
        "  y = conv(x, w, dilations=[2], strides=[2]);\n  return y;\n}\n",
        "fp32[1,1,2]", 0, 4, 8);
  /* 3-D: a 2x2x2 kernel of ones over 1..8 and a batch of 2 (the second doubled) */
  CHECK("func main() {\n  const x: fp32[2,1,2,2,2] = [[[[[1, 2], [3, 4]], [[5, 6], [7, 8]]]], "
        "[[[[2, 4], [6, 8]], [[10, 12], [14, 16]]]]];\n  const w: fp32[1,1,2,2,2] = 1;\n  y = conv(x, w);\n  return y;\n}\n",
        "fp32[2,1,1,1,1]", 0, 36, 72);
}

/* ---- attention ---- */

Test(ir_eval, sdpa_causal_by_hand) {
  /* q = k = I (2x2), v = [[1,2],[3,4]], scale 1/sqrt(2).
   * causal row 0 sees key 0 only: v0 = [1, 2].
   * row 1: scores [0, 1/sqrt2], p1 = sigmoid(1/sqrt2) = 0.6697615493266569: v0 + p1 (v1 - v0) */
  const double p1 = 0.6697615493266569, p2 = 1 / (1 + exp(-2.0));
#define QV(body) \
  "func main() {\n  const q: fp32[1,1,2,2] = [[[[1, 0], [0, 1]]]];\n" \
  "  const v: fp32[1,1,2,2] = [[[[1, 2], [3, 4]]]];\n" body "  return y;\n}\n"
  CHECK(QV("  y = sdpa(q, q, v, causal=true);\n"), "fp32[1,1,2,2]", TOL, 1, 2, 1 + 2 * p1, 2 + 2 * p1);
  /* not causal: row 0 has scores [1/sqrt2, 0], so weight p1 on v0 */
  CHECK(QV("  y = sdpa(q, q, v);\n"), "fp32[1,1,2,2]", TOL, 3 - 2 * p1, 4 - 2 * p1, 1 + 2 * p1, 2 + 2 * p1);
  /* a bool mask equal to the causal one gives the causal result; true = keep */
  CHECK(QV("  const keep: bool[2,2] = [[true, false], [true, true]];\n  y = sdpa(q, q, v, keep);\n"),
        "fp32[1,1,2,2]", TOL, 1, 2, 1 + 2 * p1, 2 + 2 * p1);
  /* a float mask is added: -inf removes key 1 from row 0 */
  CHECK(QV("  const m: fp32[2,2] = [[0, -inf], [0, 0]];\n  y = sdpa(q, q, v, m);\n"), "fp32[1,1,2,2]", TOL, 1, 2,
        1 + 2 * p1, 2 + 2 * p1);
  /* scale=2: row 1 scores [0, 2] */
  CHECK(QV("  y = sdpa(q, q, v, causal=true, scale=2.0);\n"), "fp32[1,1,2,2]", TOL, 1, 2, 1 + 2 * p2, 2 + 2 * p2);
#undef QV
}

Test(ir_eval, sdpa_causal_offset_and_float_mask) {
  /* L = 2 < S = 3: query i sees keys j <= i + 1. Zero queries weight the
   * allowed keys equally: row 0 = (3 + 6)/2, row 1 = (3 + 6 + 9)/3. */
#define QKV(body) \
  "func main() {\n  const q: fp32[1,2,2] = 0;\n  const k: fp32[1,3,2] = [[[1, 2], [3, 4], [5, 6]]];\n" \
  "  const v: fp32[1,3,1] = [[[3], [6], [9]]];\n" body "  return y;\n}\n"
  CHECK(QKV("  y = sdpa(q, k, v, causal=true);\n"), "fp32[1,2,1]", TOL, 4.5, 6);
  /* mask [3] = [0, ln 2, -inf] broadcast to both rows: weights 1:2:0 -> (3 + 12)/3 */
  CHECK(QKV("  const m: fp32[3] = [0, 0.6931471805599453, -inf];\n  y = sdpa(q, k, v, m);\n"), "fp32[1,2,1]", TOL, 5,
        5);
  /* mask and causal together: row 0 keeps keys 0, 1; row 1 drops key 2 through the mask */
  CHECK(QKV("  const m: bool[1,2,3] = [[[true, true, true], [true, true, false]]];\n"
            "  y = sdpa(q, k, v, m, causal=true);\n"),
        "fp32[1,2,1]", TOL, 4.5, 4.5);
#undef QKV
}

Test(ir_eval, sdpa_batches) {
  /* two heads with different values: each head averages its own v (zero q) */
  CHECK("func main() {\n  const q: fp32[1,2,1,2] = 0;\n  const k: fp32[1,2,2,2] = 1;\n"
        "  const v: fp32[1,2,2,1] = [[[[1], [3]], [[10], [30]]]];\n  y = sdpa(q, k, v);\n  return y;\n}\n",
        "fp32[1,2,1,1]", TOL, 2, 20);
}

/* ---- functions, params, inputs ---- */

Test(ir_eval, inputs_params_and_outputs) {
  Parsed p;
  parsed_open(&p, "func main(x: fp32[2], n: int32[2]) {\n"
                  "  param h: fp16[2] = fill(0.1);\n  param f: fp32[2] = fill(0.1);\n  param o: fp16[2] = ones;\n"
                  "  a = add(x, f);\n  b = cast(n, dtype=\"fp16\");\n  c = add(b, h);\n"
                  "  return a, c, same = x, h, o;\n}\n");
  cr_assert(p.m, "%s", p.diags.data);
  IrFuncId f = ir_func_lookup(p.m, "main");
  double xd[2] = {1, 2}, nd[2] = {3, -4};
  EvalTensor in[2] = {{.type = {.dtype = DT_FP32, .rank = 1, .dims = {2}}, .data = xd},
                      {.type = {.dtype = DT_INT32, .rank = 1, .dims = {2}}, .data = nd}};
  EvalTensor *out;
  char err[512];
  cr_assert(ir_eval(p.m, f, in, &out, err, sizeof err), "%s", err);
  const double h = (double)fp16_to_float(fp16_from_double(0.1)), fl = (double)0.1f;
  cr_assert_eq(h, 0.0999755859375); /* fp16 params are rounded as stored */
  expect_tensor(&out[0], "fp32[2]", VALS(1 + fl, 2 + fl), 0, "a");
  expect_tensor(&out[1], "fp16[2]", VALS(3 + h, -4 + h), 0, "c");
  expect_tensor(&out[2], "fp32[2]", VALS(1, 2), 0, "same");
  expect_tensor(&out[3], "fp16[2]", VALS(h, h), 0, "h");
  expect_tensor(&out[4], "fp16[2]", VALS(1, 1), 0, "o");
  eval_tensors_free(out, 5);
  /* wrong input type, fractional int input */
  EvalTensor bad[2] = {in[0], {.type = {.dtype = DT_INT32, .rank = 1, .dims = {3}}, .data = nd}};
  cr_assert_not(ir_eval(p.m, f, bad, &out, err, sizeof err));
  cr_assert(strstr(err, "input 2 ('n') is int32[3] but must be int32[2]"), "%s", err);
  nd[1] = 0.5;
  cr_assert_not(ir_eval(p.m, f, in, &out, err, sizeof err));
  cr_assert(strstr(err, "not a value of int32"), "%s", err);
  parsed_close(&p);
}

Test(ir_eval, random_params_match_materialization) {
  /* normal/uniform params: the evaluator's values are the materialized ones */
  Run r;
  run_open(&r, "func main() {\n  param w: fp32[3] = uniform(seed=5, low=-1, high=1);\n"
               "  param n: fp16[3] = normal(seed=6, std=0.5);\n  return w, n;\n}\n", NULL);
  for (int i = 0; i < 3; i++) {
    cr_assert(r.out[0].data[i] >= -1 && r.out[0].data[i] < 1);
    cr_assert_eq(r.out[0].data[i], (double)(float)r.out[0].data[i]);
    cr_assert_eq(r.out[1].data[i], (double)fp16_to_float(fp16_from_double(r.out[1].data[i])));
  }
  cr_assert_neq(r.out[0].data[0], r.out[0].data[1]);
  run_close(&r);
}

Test(ir_eval, calls) {
  /* f(x) = 2x + 1, called twice: 2(2x + 1) + 1 = 4x + 3; g returns two outputs */
  const char *text = "func f(x: fp32[2]) {\n  const two: fp32[] = 2;\n  const one: fp32[] = 1;\n"
                     "  y = mul(x, two);\n  z = add(y, one);\n  return z;\n}\n"
                     "func g(a: fp32[2], b: fp32[2]) {\n  s = add(a, b);\n  d = sub(a, b);\n  return s, d;\n}\n"
                     "func main() {\n  const x: fp32[2] = [1, -2];\n  h = call f(x) as h0;\n  o = call f(h) as h1;\n"
                     "  s, d = call g(o, x) as pair;\n  return o, s, d;\n}\n";
  Run r;
  run_open(&r, text, NULL);
  EXPECT_OUT(r, 0, "fp32[2]", 0, 7, -5);
  EXPECT_OUT(r, 1, "fp32[2]", 0, 8, -7);
  EXPECT_OUT(r, 2, "fp32[2]", 0, 6, -3);
  run_close(&r);
}

Test(ir_eval, call_instances_get_their_own_weights) {
  /* two instances of one callee with a random param: different weights,
   * each equal to what inlining gives it (derived seed) */
  const char *text = "func f(x: fp32[4]) {\n  param w: fp32[4] = normal(seed=3);\n  y = add(x, w);\n  return y;\n}\n"
                     "func main(x: fp32[4]) {\n  a = call f(x) as l0;\n  b = call f(x) as l1;\n  return a, b;\n}\n";
  Run r;
  EvalTensor x = {.type = {.dtype = DT_FP32, .rank = 1, .dims = {4}}, .data = (double[]){0, 0, 0, 0}};
  run_open(&r, text, &x);
  cr_assert_neq(r.out[0].data[0], r.out[1].data[0]);
  /* the same as a param of an entry function seeded with the derived seed */
  char direct[512];
  snprintf(direct, sizeof direct,
           "func main() {\n  param a: fp32[4] = normal(seed=%llu);\n  param b: fp32[4] = normal(seed=%llu);\n"
           "  return a, b;\n}\n",
           (unsigned long long)ir_derive_seed(3, "l0"), (unsigned long long)ir_derive_seed(3, "l1"));
  Run d;
  run_open(&d, direct, NULL);
  cr_assert_eq(eval_max_abs_diff(&r.out[0], &d.out[0]), 0);
  cr_assert_eq(eval_max_abs_diff(&r.out[1], &d.out[1]), 0);
  run_close(&d);
  run_close(&r);
}

/* ---- random inputs and comparison ---- */

Test(ir_eval, random_inputs) {
  IrType h = {.dtype = DT_FP16, .rank = 2, .dims = {8, 16}}, i = {.dtype = DT_INT32, .rank = 1, .dims = {200}};
  IrType b = {.dtype = DT_BOOL, .rank = 1, .dims = {64}};
  EvalTensor a = eval_random_input(&h, 1), a2 = eval_random_input(&h, 1), c = eval_random_input(&h, 2);
  cr_assert_eq(eval_max_abs_diff(&a, &a2), 0); /* deterministic */
  cr_assert_gt(eval_max_abs_diff(&a, &c), 0);
  double lo = 9, hi = -9;
  for (int k = 0; k < 128; k++) {
    double v = a.data[k];
    cr_assert(v >= -2 && v <= 2);
    cr_assert_eq(v, (double)fp16_to_float(fp16_from_double(v)), "fp16 inputs are fp16 values");
    lo = fmin(lo, v);
    hi = fmax(hi, v);
  }
  cr_assert(lo < -1.5 && hi > 1.5);
  EvalTensor ids = eval_random_ints(&i, 7, 0, 5), bits = eval_random_input(&b, 7);
  bool seen[5] = {false};
  for (int k = 0; k < 200; k++) {
    cr_assert(ids.data[k] >= 0 && ids.data[k] < 5 && ids.data[k] == trunc(ids.data[k]));
    seen[(int)ids.data[k]] = true;
  }
  for (int k = 0; k < 5; k++) cr_assert(seen[k]);
  int ones = 0;
  for (int k = 0; k < 64; k++) {
    cr_assert(bits.data[k] == 0 || bits.data[k] == 1);
    ones += bits.data[k] == 1;
  }
  cr_assert(ones > 10 && ones < 54);
  eval_tensor_free(&a);
  eval_tensor_free(&a2);
  eval_tensor_free(&c);
  eval_tensor_free(&ids);
  eval_tensor_free(&bits);
}

Test(ir_eval, max_abs_diff) {
  IrType t = {.dtype = DT_FP32, .rank = 1, .dims = {4}}, u = {.dtype = DT_FP32, .rank = 1, .dims = {3}};
  double inf = HUGE_VAL, qnan = nan("");
  EvalTensor a = {.type = t, .data = (double[]){1, inf, qnan, -2}}, b = {.type = t, .data = (double[]){1.5, inf, qnan, -2}};
  cr_assert_eq(eval_max_abs_diff(&a, &b), 0.5);
  EvalTensor c = {.type = t, .data = (double[]){1, inf, 0, -2}};
  cr_assert(isinf(eval_max_abs_diff(&a, &c)));
  EvalTensor d = {.type = u, .data = (double[]){1, inf, 0}};
  cr_assert(isinf(eval_max_abs_diff(&a, &d)));
}

Test(ir_eval, every_op_has_a_rule) {
  /* one program using every op of ops.def; fails if a new op gets no evaluation rule */
  const char *text =
      "func main(x: fp32[1,2,2,2], i: int32[2]) {\n"
      "  const w: fp32[2,2,1,1] = 1;\n  const lw: fp32[2,2] = 1;\n  const two: fp32[] = 2;\n"
      "  const c: bool[2] = [true, false];\n"
      "  a = conv(x, w);\n  b = linear(a, lw);\n  m = matmul(b, b);\n  s1 = add(m, two);\n  s2 = sub(s1, two);\n"
      "  s3 = mul(s2, two);\n  s4 = div(s3, two);\n  s5 = pow(s4, two);\n  s6 = maximum(s5, two);\n"
      "  s7 = minimum(s6, two);\n  u1 = relu(s7);\n  u2 = tanh(u1);\n  u3 = sigmoid(u2);\n  u4 = silu(u3);\n"
      "  u5 = gelu(u4);\n  u6 = exp(u5);\n  u7 = log(u6);\n  u8 = sqrt(u6);\n  u9 = rsqrt(u8);\n  u10 = neg(u9);\n"
      "  u11 = abs(u10);\n  u12 = softmax(u11);\n  r1 = reduce_sum(u12, axes=[0], keep_dims=true);\n"
      "  r2 = reduce_mean(r1, axes=[0], keep_dims=true);\n  r3 = reduce_max(r2, axes=[0], keep_dims=true);\n"
      "  h1 = reshape(r3, shape=[1, 2, 2, 2]);\n  h2 = transpose(h1, perm=[0, 1, 3, 2]);\n"
      "  h3 = slice(h2, begin=[0, 0, 0, 0], end=[1, 2, 2, 2]);\n  p, q = split(h3, axis=1, num_splits=2);\n"
      "  h4 = concat(q, p, axis=1);\n  h5 = cast(h4, dtype=\"fp32\");\n  n1 = layer_norm(h5);\n  n2 = rms_norm(n1);\n"
      "  n3 = clip(n2, min=-1, max=1);\n  v = reshape(n3, shape=[2, 2, 2]);\n  g = gather(v, i, axis=2);\n"
      "  k = reduce_sum(u7, axes=[0]);\n  cc = select(c, k, k);\n  at = sdpa(v, v, v);\n"
      "  ce = cross_entropy(lw, i, ignore_index=-1);\n  sc = add(at, ce);\n  id = identity(sc);\n"
      "  return g, cc, id;\n}\n";
  Parsed p;
  parsed_open(&p, text);
  cr_assert(p.m, "%s", p.diags.data);
  bool used[OP_COUNT] = {false};
  IrFuncId f = ir_func_lookup(p.m, "main");
  IR_FOR_EACH_OP(p.m, f, op) used[ir_op(p.m, op)->kind] = true;
  for (int k = 0; k < OP_CALL; k++) cr_assert(used[k], "op '%s' is not in the program", ir_op_info((IrOpKind)k)->name);
  IrType xt = ir_value(p.m, ir_func(p.m, f)->inputs[0])->type, it = ir_value(p.m, ir_func(p.m, f)->inputs[1])->type;
  EvalTensor in[2] = {eval_random_input(&xt, 1), eval_random_ints(&it, 1, 0, 2)};
  EvalTensor *out;
  char err[1024];
  cr_assert(ir_eval(p.m, f, in, &out, err, sizeof err), "%s", err);
  eval_tensors_free(out, 3);
  eval_tensor_free(&in[0]);
  eval_tensor_free(&in[1]);
  parsed_close(&p);
}
