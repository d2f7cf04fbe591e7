/*
 * The CPU backend's reduction paths against the order the backend documents
 * (docs/cpu-backend.md, "Reductions"): reduce_sum/mean/max over leading and
 * middle axes (the [P, R, C] column pieces: each output a double
 * accumulated over its inputs in input order), and reduce_max over the
 * last axis alone and inside a row group (the vector max, falling back to
 * the scalar loop for NaN and zeros) give op_sem_maximum's and the double
 * sum's bits, with NaN, -0/+0 and infinities, odd shapes, at 1 and 2
 * threads, fused and unfused, in both modes. Also the casts the plan makes
 * views (an fp16 or fp32 result cast to fp32 reads its operand in place):
 * which are, and that their values are the operand's. Reads the backend's
 * internal header.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_check.h"
#include "cpu_internal.h"
#include "orion/fp16.h"
#include "orion/op_semantics.h"

#define I32_(n, ...) "tensor<int32, [" #n "]>([" #__VA_ARGS__ "])"

/* Random floats in [-2, 2] with NaNs, -0, +0 and infinities sprinkled in
 * (when special), some rows all zeros of mixed signs. */
static void fill_special(float *p, int64_t n, int64_t row, uint32_t seed, bool special) {
  fill_random(p, n, seed, false);
  if (!special) return;
  uint32_t s = seed * 2654435761u + 1;
  for (int64_t i = 0; i < n; i++) {
    s = s * 1103515245u + 12345u;
    uint32_t r = (s >> 16) % 97;
    if (r == 0) p[i] = NAN;
    else if (r == 1) p[i] = -0.0f;
    else if (r == 2) p[i] = 0.0f;
    else if (r == 3) p[i] = INFINITY;
    else if (r == 4) p[i] = -INFINITY;
  }
  /* A row of zeros only (-0 first), and a row of -0 only: the vector max must not settle those. */
  for (int64_t k = 0; k < row && 2 * row <= n; k++) p[k] = k % 3 ? 0.0f : -0.0f, p[row + k] = -0.0f;
}

/* The program in dir run with these options; outputs into out (caller frees). */
static void run_with(CpuNumerics mode, uint32_t threads, bool unfused, const CpuTensor *in, CpuTensor *out) {
  Loaded l;
  CpuOptions o = {.numerics = mode, .threads = threads, .unfused = unfused};
  load_opts(&l, &o);
  cr_assert_not_null(l.c, "%s", l.diags.data);
  cr_assert(cpu_run(l.c, in, out, &l.d), "%s", l.diags.data);
  unload(&l);
}

static bool same_bits(float a, float b) { return !memcmp(&a, &b, sizeof a); }

/* [P, R, C] in, reduced over R: output p C + c from column c of block p in row order. */
static float ref_column(const float *x, int64_t R, int64_t C, int64_t p, int64_t c, int code) {
  double r = code == R_MAX ? -HUGE_VAL : 0;
  for (int64_t k = 0; k < R; k++) {
    double v = (double)x[(p * R + k) * C + c];
    r = code == R_MAX ? op_sem_maximum(r, v) : r + v;
  }
  return (float)(code == R_MEAN ? r / (double)R : r);
}

static const char *red_op[3] = {"reduce_sum", "reduce_mean", "reduce_max"};

/* x [A, B, C] reduced over `axes` (a MIL int list naming the first two
 * axes, or with middle the second alone) into [C] or [A, C] (kept dims of
 * 1 with keep), checked against ref_column at 1 and 2 threads. */
static void check_columns(int64_t A, int64_t B, int64_t C, const char *axes, bool middle, bool keep, bool special) {
  int64_t P = middle ? A : 1, R = middle ? B : A * B;
  for (int code = 0; code < 3; code++) {
    char mil[1024], odims[64];
    if (middle) snprintf(odims, sizeof odims, keep ? "%lld, 1, %lld" : "%lld, %lld", (long long)A, (long long)C);
    else snprintf(odims, sizeof odims, keep ? "1, 1, %lld" : "%lld", (long long)C);
    snprintf(mil, sizeof mil,
             MIL_HEAD "    func main<ios18>(tensor<fp32, [%lld, %lld, %lld]> x) {\n"
                      "        tensor<fp32, [%s]> y = %s(axes = %s, keep_dims = bool(%s), x = x)[name = " S_("y") "];\n"
                      "    } -> (y);\n}\n",
             (long long)A, (long long)B, (long long)C, odims, red_op[code], axes, keep ? "true" : "false");
    write_bare(mil);
    int64_t n = A * B * C, xd[3] = {A, B, C};
    float *x = malloc(sizeof(float) * (size_t)n);
    fill_special(x, n, C, (uint32_t)(n + code), special);
    CpuTensor in = f32_tensor(x, 3, xd);
    for (int mode = 0; mode < 2; mode++)
      for (uint32_t threads = 1; threads <= 2; threads++) {
        CpuTensor out;
        run_with(mode ? CPU_NUMERICS_ANE : CPU_NUMERICS_FP32, threads, false, &in, &out);
        const float *y = out_f32(&out);
        for (int64_t p = 0; p < P; p++)
          for (int64_t c = 0; c < C; c++) {
            float want = ref_column(x, R, C, p, c, code), got = y[p * C + c];
            cr_assert(same_bits(got, want), "%s [%lld, %lld, %lld] axes %s, %u threads, mode %d: [%lld, %lld] is %a, want %a",
                      red_op[code], (long long)A, (long long)B, (long long)C, axes, threads, mode, (long long)p,
                      (long long)c, (double)got, (double)want);
          }
        cpu_tensor_free(&out);
      }
    free(x);
    cleanup();
  }
}

/* Leading axes: [B, T, C] over [0, 1] (a bias gradient) into [C], as the
 * columns of [B T, C]; odd widths, more than one piece, wider than a piece. */
Test(cpu_reduce, leading_axes_give_the_in_order_bits) {
  check_columns(2, 3, 5, I32_(2, 0, 1), false, false, true);
  check_columns(3, 7, 37, I32_(2, 0, 1), false, true, true);
  check_columns(4, 64, 300, I32_(2, 0, 1), false, false, true);
  check_columns(2, 5, 1000, I32_(2, -3, -2), false, false, false);
  check_columns(1, 4096, 24, I32_(2, 0, 1), false, false, true);
}

/* A middle axis: [P, R, C] over [1] into [P, C] (or [P, 1, C]). */
Test(cpu_reduce, middle_axis_gives_the_in_order_bits) {
  check_columns(3, 5, 37, I32_(1, 1), true, false, true);
  check_columns(6, 33, 70, I32_(1, 1), true, true, true);
  check_columns(2, 300, 129, I32_(1, -2), true, false, false);
}

/* op_sem_maximum over a row from -inf, in order: the scalar loop's result. */
static float ref_row_max(const float *x, int64_t n) {
  double r = -HUGE_VAL;
  for (int64_t k = 0; k < n; k++) r = op_sem_maximum(r, (double)x[k]);
  return (float)r;
}

/* reduce_max over the last axis of x [N, L]: alone (reduce_task), and in a
 * row group after an add (reduce_rows; L a multiple of 4), fused and
 * unfused, at 1 and 2 threads: each row's max as the scalar loop finds it,
 * NaN and -0/+0 rows included. */
static void check_row_max(int64_t N, int64_t L, bool grouped) {
  char mil[1024];
  if (grouped)
    snprintf(mil, sizeof mil,
             MIL_HEAD "    func main<ios18>(tensor<fp32, [%lld, %lld]> x) {\n"
                      "        tensor<fp32, [%lld, %lld]> d = add(x = x, y = x)[name = " S_("d") "];\n"
                      "        tensor<fp32, [%lld, 1]> y = reduce_max(axes = " I32_(1, -1) ", keep_dims = bool(true), x = d)[name = " S_("y") "];\n"
                      "        tensor<fp32, [%lld, %lld]> z = sub(x = d, y = y)[name = " S_("z") "];\n"
                      "    } -> (y, z);\n}\n",
             (long long)N, (long long)L, (long long)N, (long long)L, (long long)N, (long long)N, (long long)L);
  else
    snprintf(mil, sizeof mil,
             MIL_HEAD "    func main<ios18>(tensor<fp32, [%lld, %lld]> x) {\n"
                      "        tensor<fp32, [%lld]> y = reduce_max(axes = " I32_(1, 1) ", x = x)[name = " S_("y") "];\n"
                      "    } -> (y);\n}\n",
             (long long)N, (long long)L, (long long)N);
  write_bare(mil);
  int64_t n = N * L, xd[2] = {N, L};
  float *x = malloc(sizeof(float) * (size_t)n), *d = malloc(sizeof(float) * (size_t)n);
  fill_special(x, n, L, (uint32_t)(N * 31 + L), true);
  /* Rows with a NaN only at the end, or only in the scalar tail, and one of -inf only. */
  if (N > 4) x[3 * L - 1] = NAN, x[4 * L - 1 - L % 8] = -NAN;
  if (N > 5)
    for (int64_t k = 0; k < L; k++) x[5 * L + k] = -INFINITY;
  for (int64_t i = 0; i < n; i++) d[i] = grouped ? x[i] + x[i] : x[i];
  CpuTensor in = f32_tensor(x, 2, xd);
  for (int mode = 0; mode < 2; mode++)
    for (uint32_t threads = 1; threads <= 2; threads++)
      for (int unfused = 0; unfused < 2; unfused++) {
        if (!grouped && unfused) continue;
        if (grouped && !unfused) { /* the reduction is a row group's member */
          Loaded l;
          CpuOptions o = {.numerics = mode ? CPU_NUMERICS_ANE : CPU_NUMERICS_FP32, .threads = threads};
          load_opts(&l, &o);
          cr_assert_not_null(l.c, "%s", l.diags.data);
          cr_assert_eq(l.c->fz[0].kind, FZ_GROUP, "the add, the max and the sub are not a group");
          cr_assert_gt(l.c->fz[0].rowlen, 0, "not a row group");
          unload(&l);
        }
        CpuTensor out[2];
        run_with(mode ? CPU_NUMERICS_ANE : CPU_NUMERICS_FP32, threads, unfused, &in, out);
        const float *y = out_f32(&out[0]);
        for (int64_t r = 0; r < N; r++) {
          float want = ref_row_max(d + r * L, L);
          cr_assert(same_bits(y[r], want), "[%lld, %lld]%s row %lld, %u threads, mode %d%s: %a, want %a", (long long)N,
                    (long long)L, grouped ? " grouped" : "", (long long)r, threads, mode, unfused ? " unfused" : "",
                    (double)y[r], (double)want);
        }
        cpu_tensor_free(&out[0]);
        if (grouped) cpu_tensor_free(&out[1]);
      }
  free(x);
  free(d);
  cleanup();
}

Test(cpu_reduce, row_max_gives_the_scalar_bits) {
  int64_t lens[] = {1, 3, 8, 31, 33, 64, 77, 200, 3001};
  for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) check_row_max(9, lens[i], false);
  check_row_max(1500, 40, false); /* more rows than one piece */
}

Test(cpu_reduce, grouped_row_max_gives_the_scalar_bits) {
  int64_t lens[] = {4, 12, 36, 64, 100, 3000};
  for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) check_row_max(9, lens[i], true);
}

/* The statement's result slot named `name`. */
static uint32_t slot_named(const CpuProgram *c, const char *name) {
  for (uint32_t si = 0; si < c->f->nstmts; si++)
    if (c->f->stmts[si].nresults == 1 && c->f->stmts[si].results[0].name &&
        !strcmp(c->f->stmts[si].results[0].name, name))
      return c->base[si];
  cr_assert_fail("no result '%s'", name);
  return UINT32_MAX;
}

/* An fp16 result cast to fp32 (returned alone, and beside its operand) and
 * an fp32 result cast to fp32 are views of their operands: the same values
 * (in ane numerics the fp16 operand's values, as its output gives them);
 * a cast of a parameter and a cast to fp16 (which rounds) stay copies. */
Test(cpu_reduce, casts_to_fp32_of_results_are_views) {
  static const char mil[] =
      MIL_HEAD "    func main<ios18>(tensor<fp32, [5, 37]> x) {\n"
               "        tensor<fp16, [5, 37]> h = cast(dtype = " S_("fp16") ", x = x)[name = " S_("h") "];\n"
               "        tensor<fp16, [5, 37]> e = exp(x = h)[name = " S_("e") "];\n"
               "        tensor<fp32, [5, 37]> g = cast(dtype = " S_("fp32") ", x = e)[name = " S_("g") "];\n"
               "        tensor<fp32, [5, 37]> y = add(x = g, y = g)[name = " S_("y") "];\n"
               "        tensor<fp32, [5, 37]> q = mul(x = x, y = x)[name = " S_("q") "];\n"
               "        tensor<fp32, [5, 37]> w = cast(dtype = " S_("fp32") ", x = q)[name = " S_("w") "];\n"
               "        tensor<fp32, [5, 37]> px = cast(dtype = " S_("fp32") ", x = x)[name = " S_("px") "];\n"
               "    } -> (g, e, y, w, q, px);\n}\n";
  write_bare(mil);
  float x[185];
  fill_special(x, 185, 37, 5, true);
  int64_t xd[2] = {5, 37};
  CpuTensor in = f32_tensor(x, 2, xd);
  for (int mode = 0; mode < 2; mode++) {
    CpuNumerics m = mode ? CPU_NUMERICS_ANE : CPU_NUMERICS_FP32;
    Loaded l;
    CpuOptions o = {.numerics = m, .threads = 2};
    load_opts(&l, &o);
    cr_assert_not_null(l.c, "%s", l.diags.data);
    cr_assert_eq(l.c->slots[slot_named(l.c, "g")].kind, SK_VIEW, "g = cast(fp16 e) is not a view");
    cr_assert_eq(l.c->slots[slot_named(l.c, "w")].kind, SK_VIEW, "w = cast(fp32 q) is not a view");
    cr_assert_eq(l.c->slots[slot_named(l.c, "h")].kind, SK_RESULT, "h = cast(x, fp16) rounds: no view");
    cr_assert_eq(l.c->slots[slot_named(l.c, "px")].kind, SK_RESULT, "px = cast(param x): no view");
    unload(&l);
    for (uint32_t threads = 1; threads <= 2; threads++) {
      CpuTensor out[6];
      run_with(m, threads, false, &in, out);
      const float *g = out_f32(&out[0]), *y = out_f32(&out[2]), *w = out_f32(&out[3]), *q = out_f32(&out[4]);
      const float *px = out_f32(&out[5]);
      const uint16_t *e = out[1].data;
      for (int i = 0; i < 185; i++) {
        float h = fp16_to_float(fp16_from_float(x[i]));
        cr_assert(same_bits(y[i], g[i] + g[i]), "y[%d] = %a is not g + g (g %a)", i, (double)y[i], (double)g[i]);
        cr_assert(same_bits(w[i], q[i]) && (same_bits(q[i], x[i] * x[i]) || isnan(x[i])), "w[%d] %a, q %a", i,
                  (double)w[i], (double)q[i]);
        cr_assert(same_bits(px[i], x[i]), "px[%d] %a, x %a", i, (double)px[i], (double)x[i]);
        if (mode) /* the fp16 operand's values, as returned */
          cr_assert(same_bits(g[i], fp16_to_float(e[i])), "g[%d] = %a, e %a", i, (double)g[i], (double)fp16_to_float(e[i]));
        else
          cr_assert(isnan(h) ? isnan(g[i]) : err_of(g[i], exp((double)h)) < 1e-6, "g[%d] = %a, exp(%a)", i, (double)g[i],
                    (double)h);
      }
      for (int k = 0; k < 6; k++) cpu_tensor_free(&out[k]);
    }
  }
  cleanup();
}

/* Returned alone, the viewed fp16 result is written to the caller's fp32
 * buffer (one root, written in place); the values are the same either way. */
Test(cpu_reduce, cast_view_output_alone) {
  static const char mil[] =
      MIL_HEAD "    func main<ios18>(tensor<fp32, [3, 16]> x) {\n"
               "        tensor<fp16, [3, 16]> h = cast(dtype = " S_("fp16") ", x = x)[name = " S_("h") "];\n"
               "        tensor<fp16, [3, 16]> e = mul(x = h, y = h)[name = " S_("e") "];\n"
               "        tensor<fp32, [3, 16]> g = cast(dtype = " S_("fp32") ", x = e)[name = " S_("g") "];\n"
               "    } -> (g);\n}\n";
  write_bare(mil);
  float x[48];
  fill_special(x, 48, 16, 9, true);
  int64_t xd[2] = {3, 16};
  CpuTensor in = f32_tensor(x, 2, xd);
  Loaded l;
  CpuOptions o = {.numerics = CPU_NUMERICS_ANE, .threads = 1};
  load_opts(&l, &o);
  cr_assert_not_null(l.c, "%s", l.diags.data);
  cr_assert(l.c->out_direct[0], "the viewed result does not write the caller's buffer");
  unload(&l);
  CpuTensor out;
  run_with(CPU_NUMERICS_ANE, 2, false, &in, &out);
  const float *g = out_f32(&out);
  for (int i = 0; i < 48; i++) {
    float h = fp16_to_float(fp16_from_float(x[i]));
    float want = fp16_to_float(fp16_from_float(h * h));
    cr_assert(same_bits(g[i], want) || (isnan(g[i]) && isnan(want)), "g[%d] = %a, want %a", i, (double)g[i], (double)want);
  }
  cpu_tensor_free(&out);
  cleanup();
}
