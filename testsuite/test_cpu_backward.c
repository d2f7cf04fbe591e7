/*
 * CPU backend kernels a backward leans on, over two threads, against values
 * computed here: the one-hot matrices and masks (runtime/cpu/k_elementwise.c:
 * int32 add/sub with broadcasting, saturating; cast to bool and to fp32;
 * select with a broadcast condition), exactly; and matmuls of few rows,
 * as weight gradients are, which are cut into pieces by columns
 * (runtime/cpu/k_linalg.c), with every transpose flag.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "orion/cpu.h"
#include "orion/fp16.h"
#include "orion/package.h"
#include "orion/op_semantics.h"
#include "orion/passes.h"

enum { B = 4, T = 64, C = 300 }; /* [B, T, C] = 76,800 elements: several pieces */

/* The one-hot of the cross-entropy gradient and a float mask, as the rules write them. */
#define MASKS                                                                  \
  "func main(t: int32[4,64], x: fp32[4,64,300], big: int32[4,64]) {\n"          \
  "  const one: fp32[] = 1;\n"                                                 \
  "  const zero: fp32[] = 0;\n"                                                \
  "  tc = reshape(t, shape=[4,64,1]);\n"                                        \
  "  d = sub(tc, classes);\n"                                                   \
  "  other = cast(d, dtype=\"bool\");\n"                                       \
  "  oh = select(other, zero, one);\n"                                          \
  "  keep = cast(x, dtype=\"bool\");\n"                                        \
  "  kept = select(keep, x, oh);\n"                                             \
  "  back = cast(d, dtype=\"fp32\");\n"                                        \
  "  s = add(big, big);\n"                                                      \
  "  n = sub(tc, big3);\n"                                                      \
  "  return oh, kept, back, s, n;\n"                                            \
  "}\n"

static char *program(void) {
  StrBuf sb;
  sb_init(&sb);
  const char *at = strstr(MASKS, "  const one");
  sb_putn(&sb, MASKS, (size_t)(at - MASKS));
  sb_puts(&sb, "  const classes: int32[300] = [");
  for (int i = 0; i < C; i++) sb_printf(&sb, "%s%d", i ? ", " : "", i);
  sb_puts(&sb, "];\n  const big3: int32[4,64,1] = -2147483500;\n");
  sb_puts(&sb, at);
  return sb.data;
}

/* A compiled program on the CPU backend (FP32 numerics, 2 threads). */
typedef struct Prog {
  char dir[32];
  SourceSet sources;
  Diag d;
  StrBuf msgs;
  OrionProgram *p;
  CpuProgram *c;
} Prog;

static void prog_open(Prog *g, const char *text) {
  snprintf(g->dir, sizeof g->dir, "/tmp/orion-cpu-bwd-XXXXXX");
  cr_assert_not_null(mkdtemp(g->dir));
  char path[64];
  snprintf(path, sizeof path, "%s/m.anepkg", g->dir);
  Parsed p;
  parsed_open(&p, text);
  cr_assert_not_null(p.m, "%s", p.diags.data);
  cr_assert(passes_legalize(p.m, &p.d), "%s", p.diags.data);
  PackageOptions po = {.target = MIL_IOS18, .source_name = "t.oir", .source_text = text, .source_len = strlen(text)};
  cr_assert(package_write(p.m, path, &po, &p.d), "%s", p.diags.data);
  parsed_close(&p);
  srcset_init(&g->sources);
  diag_init(&g->d, &g->sources);
  sb_init(&g->msgs);
  g->d.capture = &g->msgs;
  g->p = orion_open(path, NULL, &g->d);
  cr_assert_not_null(g->p, "%s", g->msgs.data);
  CpuOptions opt = {.numerics = CPU_NUMERICS_FP32, .threads = 2};
  g->c = cpu_prepare_with(g->p, 0, &opt, &g->d);
  cr_assert_not_null(g->c, "%s", g->msgs.data);
}

static void prog_run(Prog *g, const CpuTensor *in, CpuTensor *out) {
  cr_assert(cpu_run(g->c, in, out, &g->d), "%s", g->msgs.data);
}

static void prog_close(Prog *g) {
  cpu_free(g->c);
  orion_close(g->p);
  srcset_free(&g->sources);
  sb_free(&g->msgs);
  remove_tree(g->dir);
}

Test(cpu_backward, one_hot_masks_and_saturation) {
  char *text = program();
  Prog g;
  prog_open(&g, text);
  static int32_t t[B * T], big[B * T];
  static float x[B * T * C];
  for (int i = 0; i < B * T; i++) {
    t[i] = (i * 37) % (C + 20) - 10; /* some below 0 and at or past C: no class */
    big[i] = i % 3 == 0 ? 2147483000 : i % 3 == 1 ? -2147483000 : i;
  }
  for (int i = 0; i < B * T * C; i++) x[i] = i % 5 == 0 ? 0.0f : i % 7 == 0 ? NAN : (float)i * 0.5f;
  CpuTensor in[3] = {{.dtype = MIL_DT_INT32, .rank = 2, .dims = {B, T}, .data = t},
                     {.dtype = MIL_DT_FP32, .rank = 3, .dims = {B, T, C}, .data = x},
                     {.dtype = MIL_DT_INT32, .rank = 2, .dims = {B, T}, .data = big}};
  CpuTensor out[5] = {0};
  prog_run(&g, in, out);
  const float *oh = out[0].data, *kept = out[1].data, *back = out[2].data;
  const int32_t *s = out[3].data, *n = out[4].data;
  for (int r = 0; r < B * T; r++) {
    for (int k = 0; k < C; k++) {
      int i = r * C + k;
      float want = t[r] == k ? 1.0f : 0.0f;
      cr_assert_eq(oh[i], want, "one-hot [%d, %d]", r, k);
      if (isnan(x[i])) cr_assert(isnan(kept[i]), "NaN is not 0: kept [%d]", i);
      else cr_assert_eq(kept[i], x[i] != 0 ? x[i] : want, "kept [%d]", i);
      cr_assert_eq(back[i], (float)(t[r] - k), "cast to fp32 [%d]", i);
    }
    int64_t twice = 2 * (int64_t)big[r], diff = (int64_t)t[r] + 2147483500;
    cr_assert_eq(s[r], twice > INT32_MAX ? INT32_MAX : twice < INT32_MIN ? INT32_MIN : (int32_t)twice, "add [%d]", r);
    cr_assert_eq(n[r], diff > INT32_MAX ? INT32_MAX : (int32_t)diff, "sub [%d]", r);
  }
  for (int o = 0; o < 5; o++) cpu_tensor_free(&out[o]);
  prog_close(&g);
  free(text);
}

/* dW = dy^T x and its kin: 96 rows (one row block) by 300 columns (three
 * column pieces), K = 200; every transpose flag. */
#define GRADS                                                                      \
  "func main(dy: fp32[200,96], x: fp32[200,300], a: fp32[96,200], bt: fp32[300,200]) {\n" \
  "  w1 = matmul(dy, x, transpose_x=true);\n"                                      \
  "  w2 = matmul(a, bt, transpose_y=true);\n"                                      \
  "  w3 = matmul(dy, bt, transpose_x=true, transpose_y=true);\n"                   \
  "  w4 = matmul(a, x);\n"                                                          \
  "  return w1, w2, w3, w4;\n"                                                      \
  "}\n"

enum { M = 96, N = 300, K = 200 };

/* op(A)[m, k] of a row-major A, transposed or not. */
static double at(const float *a, bool t, int64_t rows_of_op, int64_t cols_of_op, int64_t r, int64_t c) {
  (void)rows_of_op;
  return t ? (double)a[c * rows_of_op + r] : (double)a[r * cols_of_op + c];
}

Test(cpu_backward, matmuls_of_few_rows_are_cut_by_columns) {
  Prog g;
  prog_open(&g, GRADS);
  static float dy[K * M], x[K * N], a[M * K], bt[N * K];
  for (int i = 0; i < K * M; i++) dy[i] = a[i] = (float)sin(0.37 * i);
  for (int i = 0; i < K * N; i++) x[i] = bt[i] = (float)cos(0.11 * i);
  CpuTensor in[4] = {{.dtype = MIL_DT_FP32, .rank = 2, .dims = {K, M}, .data = dy},
                     {.dtype = MIL_DT_FP32, .rank = 2, .dims = {K, N}, .data = x},
                     {.dtype = MIL_DT_FP32, .rank = 2, .dims = {M, K}, .data = a},
                     {.dtype = MIL_DT_FP32, .rank = 2, .dims = {N, K}, .data = bt}};
  CpuTensor out[4] = {0};
  prog_run(&g, in, out);
  const float *A[4] = {dy, a, dy, a}, *Bm[4] = {x, bt, bt, x};
  const bool ta[4] = {true, false, true, false}, tb[4] = {false, true, true, false};
  for (int o = 0; o < 4; o++) {
    cr_assert_eq(out[o].rank, 2);
    cr_assert(out[o].dims[0] == M && out[o].dims[1] == N, "output %d is [%d, %d]", o, M, N);
    const float *got = out[o].data;
    for (int64_t m = 0; m < M; m++)
      for (int64_t n = 0; n < N; n++) {
        double want = 0, mag = 0;
        for (int64_t k = 0; k < K; k++) {
          double p = at(A[o], ta[o], M, K, m, k) * at(Bm[o], tb[o], K, N, k, n);
          want += p, mag += fabs(p);
        }
        /* fp32 sums of K products: well within 1e-5 of their magnitude */
        cr_assert_leq(fabs((double)got[m * N + n] - want), 1e-5 * mag, "output %d [%lld, %lld]: %.9g, want %.9g", o,
                      (long long)m, (long long)n, (double)got[m * N + n], want);
      }
    cpu_tensor_free(&out[o]);
  }
  prog_close(&g);
}

/* softmax over contiguous rows (the cross entropy's, and the backward's
 * recomputed one), the path whose row max is taken eight lanes at a time and
 * the tail one by one: against the formula in double, with the max and a NaN
 * at every position of rows of 37 (four vectors and a tail of 5), a huge max,
 * zeros of either sign as the max, and a row of -inf. (A max that is off
 * changes no value here: the sum of exps is in double, whose range takes any
 * fp32 difference; what is checked is the result.) */
enum { SR = 3 * 37 + 4, SL = 37 };

Test(cpu_backward, softmax_rows_max_and_nan_at_every_position) {
  Prog g;
  prog_open(&g, "func main(x: fp32[115,37]) {\n  y = softmax(x, axis=-1);\n  return y;\n}\n");
  static float x[SR * SL];
  for (int r = 0; r < SR; r++)
    for (int k = 0; k < SL; k++) x[r * SL + k] = (float)sin(0.7 * (r * SL + k)) - 3.0f;
  for (int r = 0; r < SL; r++) x[r * SL + r] = 2.5f;               /* rows 0-36: the max at position r */
  for (int r = SL; r < 2 * SL; r++) x[r * SL + r - SL] = NAN;       /* rows 37-73: a NaN at position r - 37 */
  for (int r = 2 * SL; r < 3 * SL; r++) x[r * SL + r - 2 * SL] = 9e37f; /* rows 74-110: a huge max */
  for (int k = 0; k < SL; k++) {
    x[111 * SL + k] = k % 2 ? 0.0f : -0.0f; /* the max is a zero of either sign */
    x[112 * SL + k] = k % 2 ? -0.0f : 0.0f;
    x[113 * SL + k] = -INFINITY;            /* all -inf: -inf - -inf is NaN */
    x[114 * SL + k] = (float)k;
  }
  CpuTensor in[1] = {{.dtype = MIL_DT_FP32, .rank = 2, .dims = {SR, SL}, .data = x}};
  CpuTensor out[1] = {0};
  prog_run(&g, in, out);
  const float *y = out[0].data;
  for (int r = 0; r < SR; r++) {
    const float *row = x + r * SL;
    bool nan = false;
    double mx = -(double)INFINITY, sum = 0;
    for (int k = 0; k < SL; k++) nan |= isnan(row[k]), mx = (double)row[k] > mx ? (double)row[k] : mx;
    for (int k = 0; k < SL; k++) sum += exp((double)row[k] - mx);
    for (int k = 0; k < SL; k++) {
      float got = y[r * SL + k];
      if (nan || r == 113) {
        cr_assert(isnan(got), "row %d [%d] is %g, not NaN", r, k, (double)got);
        continue;
      }
      double want = exp((double)row[k] - mx) / sum;
      cr_assert_leq(fabs((double)got - want), 0x1p-23 * want + 0x1p-149, "row %d [%d]: %.9g, want %.9g", r, k,
                    (double)got, want);
    }
  }
  for (int k = 0; k < SL; k++) cr_assert_eq(y[111 * SL + k], y[112 * SL + k], "the zeros' signs change nothing [%d]", k);
  cpu_tensor_free(&out[0]);
  prog_close(&g);
}

/* sigmoid (and silu, which passes/lower_silu.c makes x * sigmoid(x), the
 * sigmoid an fp32 value) four at a time: each value as op_sem_sigmoid gives
 * it, to the float (the vector exp differs from the scalar one in a double's
 * last bits only), and the edge cases exactly: NaN, the infinities (silu(-inf)
 * is -inf * 0, NaN), zeros, the clamp of exp's argument, a tail after the last
 * whole vector. */
enum { SN = 4099 };

Test(cpu_backward, silu_and_sigmoid_by_vectors) {
  Prog g;
  prog_open(&g, "func main(x: fp32[4099]) {\n  s = silu(x);\n  g = sigmoid(x);\n  return s, g;\n}\n");
  static float x[SN];
  for (int i = 0; i < SN; i++) x[i] = (float)(40.0 * sin(0.013 * i * i));
  static const float edge[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 800.0f, -800.0f, 1e-30f, -1e-30f, 88.0f, -88.0f};
  for (size_t i = 0; i < sizeof edge / sizeof *edge; i++) x[i * 13] = edge[i], x[SN - 1 - i] = edge[i];
  CpuTensor in[1] = {{.dtype = MIL_DT_FP32, .rank = 1, .dims = {SN}, .data = x}};
  CpuTensor out[2] = {0};
  prog_run(&g, in, out);
  for (int o = 0; o < 2; o++) {
    const float *y = out[o].data;
    for (int i = 0; i < SN; i++) {
      double v = (double)x[i];
      float sig = (float)op_sem_sigmoid(v);
      float want = o == 0 ? x[i] * sig : sig;
      if (isnan(want)) {
        cr_assert(isnan(y[i]), "%s(%g) is %g, not NaN", o ? "sigmoid" : "silu", v, (double)y[i]);
        continue;
      }
      bool edge_case = isinf(x[i]) || x[i] == 0 || fabsf(x[i]) >= 88.0f || fabsf(x[i]) < 1e-20f;
      if (edge_case)
        cr_assert(y[i] == want && signbit(y[i]) == signbit(want), "%s(%g) [%d]: %g, want %g", o ? "sigmoid" : "silu", v, i,
                  (double)y[i], (double)want);
      else
        cr_assert_leq(fabs((double)y[i] - (double)want), fabs((double)want) * 0x1p-23, "%s(%g): %.9g, want %.9g",
                      o ? "sigmoid" : "silu", v, (double)y[i], (double)want);
    }
    cpu_tensor_free(&out[o]);
  }
  prog_close(&g);
}

/* The cast to fp16 (the cross entropy's gradient in an fp16 backward, in
 * parallel pieces with F16C) and the fp16 output (converted eight at a
 * time): every float bit pattern class, NaN payloads, ties, fp16 subnormals
 * and overflow, give fp16_from_double's bits, as the serial loop did. */
Test(cpu_backward, cast_to_fp16_and_fp16_outputs_round_as_the_serial_loop) {
  enum { NH = 3 * 16384 + 5 };
  char text[128];
  snprintf(text, sizeof text, "func main(x: fp32[%d]) {\n  y = cast(x, dtype=\"fp16\");\n  return y;\n}\n", NH);
  Prog g;
  prog_open(&g, text);
  static float x[NH];
  uint32_t s = 12345u;
  for (int i = 0; i < NH; i++) {
    s ^= s << 13, s ^= s >> 17, s ^= s << 5;
    uint32_t bits = s;
    if (i % 4 == 1) bits = (bits & 0x80001FFFu) | (uint32_t)(103 + (i / 4) % 40) << 23; /* around fp16's range */
    if (i % 4 == 2) bits = (bits & 0x8000000Fu) | 0x47800000u | (uint32_t)(i % 2) << 12; /* ties near 65536 */
    memcpy(&x[i], &bits, sizeof bits);
  }
  CpuTensor in = {.dtype = MIL_DT_FP32, .rank = 1, .dims = {NH}, .data = x};
  CpuTensor out = {0};
  prog_run(&g, &in, &out);
  cr_assert_eq(out.dtype, MIL_DT_FP16);
  const uint16_t *y = out.data;
  for (int i = 0; i < NH; i++) {
    uint16_t want = fp16_from_double((double)x[i]);
    cr_assert_eq(y[i], want, "x[%d] = %a: fp16 0x%04x, want 0x%04x", i, (double)x[i], y[i], want);
  }
  cpu_tensor_free(&out);
  prog_close(&g);
}
