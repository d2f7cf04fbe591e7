/*
 * The CPU backend's remaining MIL ops (slice_by_size, comparisons and
 * logical ops, sdpa, conv3d, the constexpr ops), --check-finite and
 * profiling: by hand and against naive references. (Split from test_cpu.c;
 * the helpers are cpu_check.c's.)
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

/* ---- the remaining MIL ops, --check-finite and profiling ----
 *
 * Each op: small cases worked out by hand (exact values), error texts, and a
 * larger case against a naive reference written here (plain loops in double,
 * independent of the backend's kernels), run with 1 and 3 threads (the bits
 * must agree). */


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
