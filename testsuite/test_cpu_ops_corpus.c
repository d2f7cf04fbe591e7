/*
 * The CPU backend on reduce_argmax/argmin, quantize/dequantize, pooling, the
 * shape and index ops of the corpus, small integer casts, lstm and the
 * constexpr lut and sparse ops: by hand and against naive references.
 * (Split from test_cpu.c; the helpers are cpu_check.c's.)
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

/* ---- reduce_argmax/argmin, quantize/dequantize, pooling, and the shape ops of the corpus ---- */


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
