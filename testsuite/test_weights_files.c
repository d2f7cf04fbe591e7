/*
 * Tests of weights_materialize on file sources: safetensors (f32 to fp16,
 * aligned or not, large multi-chunk, bf16/f16/f64, ints and bool, i64 out of
 * int32), npy, NaN and range checks (threaded conversion reports the first
 * problem; fp16 range, infinities, clamping) and file problems, every
 * diagnostic compared as text. (Split from test_weights_data.c; the helpers
 * are weights_check.c's.)
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "orion/fp16.h"
#include "orion/weights.h"
#include "weights_check.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The generator is defined with separate roundings (see weights_random.c). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* ---- safetensors ------------------------------------------------------------- */

/* Rounding cases of fp32 -> fp16, with their expected bits worked out by hand. */
static const struct {
  uint32_t f32;
  uint16_t f16;
} f32_cases[] = {
    {0x3F800000, 0x3C00}, /* 1 */
    {0x3F801000, 0x3C00}, /* 1 + 2^-11: halfway between 1 and 1 + 2^-10, ties to even (down) */
    {0x3F803000, 0x3C02}, /* 1 + 3*2^-11: halfway, ties to even (up) */
    {0x3F801001, 0x3C01}, /* just above halfway: up */
    {0xBDCCCCCD, 0xAE66}, /* -0.1 */
    {0x33800000, 0x0001}, /* 2^-24: the smallest subnormal */
    {0x33C00000, 0x0002}, /* 3*2^-25: halfway between subnormals 1 and 2, ties to even (2) */
    {0x33000000, 0x0000}, /* 2^-25: halfway between 0 and 2^-24, ties to even (0) */
    {0x387FC000, 0x03FF}, /* the largest subnormal */
    {0x477FE000, 0x7BFF}, /* 65504 */
    {0x477FEFFF, 0x7BFF}, /* just under 65520 rounds down to 65504 */
    {0x80000000, 0x8000}, /* -0 */
};
#define NF32_CASES (sizeof f32_cases / sizeof f32_cases[0])

Test(safetensors, f32_to_fp16_aligned_and_not, .init = tmp_setup, .fini = tmp_teardown) {
  uint32_t data[NF32_CASES];
  for (size_t i = 0; i < NF32_CASES; i++) data[i] = f32_cases[i].f32;
  for (size_t misalign = 0; misalign < 4; misalign++) {
    write_safetensors("m.safetensors", "k", "F32", "[3,4]", data, sizeof data, misalign);
    Run r;
    run_begin(&r);
    int64_t dims[2] = {3, 4};
    IrValueId v =
        add_param(&r, DT_FP16, 2, dims, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "m.safetensors", .key = "k"});
    uint16_t *h = load_ok(&r, v, false, NF32_CASES * 2, "");
    for (size_t i = 0; i < NF32_CASES; i++)
      cr_assert_eq(h[i], f32_cases[i].f16, "misalign %zu, case %zu: got 0x%04x", misalign, i, h[i]);
    free(h);
    run_end(&r);
  }
}

Test(safetensors, f32_large_multi_chunk, .init = tmp_setup, .fini = tmp_teardown) {
  const size_t n = 3 * 4096 + 17;
  float *data = malloc(n * sizeof *data);
  cr_assert_not_null(data);
  for (size_t i = 0; i < n; i++) data[i] = (float)i * 0.5f - 3000.0f;
  write_safetensors("m.safetensors", "k", "F32", "[12305]", data, n * 4, 4);
  Run r;
  run_begin(&r);
  IrValueId a = add_vector(&r, DT_FP16, (int64_t)n, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "m.safetensors", .key = "k"});
  IrValueId b = add_vector(&r, DT_FP32, (int64_t)n, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "m.safetensors", .key = "k"});
  uint16_t *h = load_ok(&r, a, false, n * 2, "");
  float *f = load_ok(&r, b, false, n * 4, "");
  for (size_t i = 0; i < n; i++) {
    cr_assert_eq(h[i], fp16_from_double((double)data[i]), "element %zu", i);
    cr_assert_eq(f32_bits(f[i]), f32_bits(data[i]));
  }
  free(h), free(f), free(data);
  run_end(&r);
}

Test(safetensors, bf16_f16_f64, .init = tmp_setup, .fini = tmp_teardown) {
  /* BF16: 1.0, -2.5, the largest bf16 below 65520 in fp16 terms, a bf16 subnormal. */
  static const uint16_t bf[4] = {0x3F80, 0xC020, 0x477F, 0x0001};
  write_safetensors("bf.safetensors", "t", "BF16", "[4]", bf, sizeof bf, 3);
  static const uint16_t f16[3] = {0x3C00, 0x8001, 0x7BFF};
  write_safetensors("h.safetensors", "t", "F16", "[3]", f16, sizeof f16, 1);
  /* F64: single rounding case, 0.1, a value that rounds to fp32's largest. */
  static const double f64[3] = {1.0 + 0x1p-11 + 0x1p-40, 0.1, -65519.0};
  write_safetensors("d.safetensors", "t", "F64", "[3]", f64, sizeof f64, 5);

  Run r;
  run_begin(&r);
  IrParamSource sb = {.kind = SRC_SAFETENSORS, .path = "bf.safetensors", .key = "t"};
  IrParamSource sh = {.kind = SRC_SAFETENSORS, .path = "h.safetensors", .key = "t"};
  IrParamSource sd = {.kind = SRC_SAFETENSORS, .path = "d.safetensors", .key = "t"};
  uint32_t *bf32 = load_ok(&r, add_vector(&r, DT_FP32, 4, sb), false, 16, "");
  uint16_t *bf16h = load_ok(&r, add_vector(&r, DT_FP16, 4, sb), false, 8, "");
  uint16_t *hh = load_ok(&r, add_vector(&r, DT_FP16, 3, sh), false, 6, "");
  float *hf = load_ok(&r, add_vector(&r, DT_FP32, 3, sh), false, 12, "");
  uint16_t *dh = load_ok(&r, add_vector(&r, DT_FP16, 3, sd), false, 6, "");
  float *df = load_ok(&r, add_vector(&r, DT_FP32, 3, sd), false, 12, "");
  for (int i = 0; i < 4; i++) {
    cr_assert_eq(bf32[i], (uint32_t)bf[i] << 16, "bf16 %d", i);
    cr_assert_eq(f32_bits(bf16_to_float(bf[i])), bf32[i]);
  }
  /* 65280 is exact in fp16; the bf16 subnormal (about 9e-41) flushes to +0. */
  static const uint16_t want_bf16h[4] = {0x3C00, 0xC100, 0x7BF8, 0x0000};
  for (int i = 0; i < 4; i++) cr_assert_eq(bf16h[i], want_bf16h[i], "bf16 -> fp16 %d: 0x%04x", i, bf16h[i]);
  for (int i = 0; i < 3; i++) cr_assert_eq(hh[i], f16[i]);
  cr_assert_eq(f32_bits(hf[0]), 0x3F800000);
  cr_assert_eq(f32_bits(hf[1]), 0xB3800000); /* -2^-24 */
  cr_assert_eq(f32_bits(hf[2]), 0x477FE000);
  static const uint16_t want_dh[3] = {0x3C01, 0x2E66, 0xFBFF};
  for (int i = 0; i < 3; i++) cr_assert_eq(dh[i], want_dh[i], "f64 -> fp16 %d: 0x%04x", i, dh[i]);
  cr_assert_eq(f32_bits(df[0]), 0x3F801000); /* 1 + 2^-11 in fp32 */
  cr_assert_eq(f32_bits(df[1]), f32_bits(0.1f));
  cr_assert_eq(f32_bits(df[2]), f32_bits(-65519.0f));
  free(bf32), free(bf16h), free(hh), free(hf), free(dh), free(df);
  run_end(&r);
}

Test(safetensors, ints_and_bool, .init = tmp_setup, .fini = tmp_teardown) {
  static const int64_t i64[6] = {0, -1, 2147483647, INT32_MIN, 42, -7};
  static const int32_t i32[3] = {5, -6, INT32_MAX};
  static const uint8_t u8[3] = {0, 128, 255};
  static const uint8_t b[4] = {0, 1, 1, 0};
  write_safetensors("m64.safetensors", "k", "I64", "[2,3]", i64, sizeof i64, 7);
  write_safetensors("m32.safetensors", "k", "I32", "[3]", i32, sizeof i32, 2);
  write_safetensors("mu8.safetensors", "k", "U8", "[3]", u8, sizeof u8, 1);
  write_safetensors("mb.safetensors", "k", "BOOL", "[4]", b, sizeof b, 0);
  Run r;
  run_begin(&r);
  int64_t dims[2] = {2, 3};
  int32_t *a = load_ok(
      &r, add_param(&r, DT_INT32, 2, dims, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "m64.safetensors", .key = "k"}),
      false, 24, "");
  for (int i = 0; i < 6; i++) cr_assert_eq(a[i], (int32_t)i64[i]);
  int32_t *c = load_ok(
      &r, add_vector(&r, DT_INT32, 3, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "m32.safetensors", .key = "k"}),
      false, 12, "");
  cr_assert_eq(memcmp(c, i32, 12), 0);
  uint8_t *u = load_ok(
      &r, add_vector(&r, DT_UINT8, 3, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "mu8.safetensors", .key = "k"}),
      false, 3, "");
  cr_assert_eq(memcmp(u, u8, 3), 0);
  uint8_t *bb = load_ok(
      &r, add_vector(&r, DT_BOOL, 4, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "mb.safetensors", .key = "k"}),
      false, 4, "");
  cr_assert_eq(memcmp(bb, b, 4), 0);
  free(a), free(c), free(u), free(bb);
  run_end(&r);
}

Test(safetensors, i64_out_of_int32, .init = tmp_setup, .fini = tmp_teardown) {
  static const int64_t i64[6] = {0, 1, 2, 3, 4, 3000000000};
  write_safetensors("f.safetensors", "k", "I64", "[6]", i64, sizeof i64, 0);
  Run r;
  run_begin(&r);
  IrValueId v = add_vector(&r, DT_INT32, 6, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "f.safetensors", .key = "k"});
  load_fails(&r, v, false,
             "orionc: error: weight 'w' from 'f.safetensors' ('k') has the value 3000000000 at index 5, outside "
             "int32\n");
  run_end(&r);

  static const int64_t neg[2] = {-2147483649LL, 0};
  write_safetensors("g.safetensors", "k", "I64", "[2]", neg, sizeof neg, 0);
  run_begin(&r);
  v = add_vector(&r, DT_INT32, 2, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "g.safetensors", .key = "k"});
  load_fails(&r, v, false,
             "orionc: error: weight 'w' from 'g.safetensors' ('k') has the value -2147483649 at index 0, outside "
             "int32\n");
  run_end(&r);
}

/* ---- npy ------------------------------------------------------------------------ */

Test(npy, f4_to_fp16_and_small_ints, .init = tmp_setup, .fini = tmp_teardown) {
  uint32_t data[NF32_CASES];
  for (size_t i = 0; i < NF32_CASES; i++) data[i] = f32_cases[i].f32;
  write_npy("w.npy", "<f4", "(2, 6)", data, sizeof data);
  static const int8_t i8[5] = {-128, -1, 0, 1, 127};
  write_npy("i.npy", "|i1", "(5,)", i8, sizeof i8);
  static const uint8_t b1[4] = {0, 1, 2, 0}; /* numpy reads any nonzero byte as True */
  write_npy("b.npy", "|b1", "(4,)", b1, sizeof b1);
  Run r;
  run_begin(&r);
  int64_t dims[2] = {2, 6};
  uint16_t *h = load_ok(&r, add_param(&r, DT_FP16, 2, dims, (IrParamSource){.kind = SRC_NPY, .path = "w.npy"}),
                        false, NF32_CASES * 2, "");
  for (size_t i = 0; i < NF32_CASES; i++) cr_assert_eq(h[i], f32_cases[i].f16, "case %zu", i);
  int8_t *c = load_ok(&r, add_vector(&r, DT_INT8, 5, (IrParamSource){.kind = SRC_NPY, .path = "i.npy"}), false, 5, "");
  cr_assert_eq(memcmp(c, i8, 5), 0);
  uint8_t *bb = load_ok(&r, add_vector(&r, DT_BOOL, 4, (IrParamSource){.kind = SRC_NPY, .path = "b.npy"}), false, 4, "");
  static const uint8_t want_b[4] = {0, 1, 1, 0};
  cr_assert_eq(memcmp(bb, want_b, 4), 0);
  free(h), free(c), free(bb);
  run_end(&r);
}

Test(npy, absolute_path_and_scalar, .init = tmp_setup, .fini = tmp_teardown) {
  float one = 1.5f;
  write_npy("s.npy", "<f4", "()", &one, sizeof one);
  char abs[PATH_MAX];
  snprintf(abs, sizeof abs, "%s/s.npy", tmp.path);
  Run r;
  run_begin(&r);
  r.m->base_dir = "/nonexistent";
  uint16_t *h = load_ok(&r, add_param(&r, DT_FP16, 0, NULL, (IrParamSource){.kind = SRC_NPY, .path = abs}), false, 2, "");
  cr_assert_eq(*h, 0x3E00);
  free(h);
  run_end(&r);
}

/* ---- NaN and range ---------------------------------------------------------------- */

Test(checks, nan_is_an_error, .init = tmp_setup, .fini = tmp_teardown) {
  float data[20];
  for (int i = 0; i < 20; i++) data[i] = (float)i;
  data[17] = bits_f32(0x7FC00000);
  data[19] = bits_f32(0xFF800001); /* a signalling NaN later on */
  write_safetensors("model.safetensors", "key", "F32", "[20]", data, sizeof data, 0);
  write_npy("w.npy", "<f4", "(20,)", data, sizeof data);
  IrParamSource st = {.kind = SRC_SAFETENSORS, .path = "model.safetensors", .key = "key"};
  for (int clamp = 0; clamp < 2; clamp++) {
    Run r;
    run_begin(&r);
    load_fails(&r, add_vector(&r, DT_FP16, 20, st), clamp,
               "orionc: error: weight 'w' from 'model.safetensors' ('key') has NaN at index 17\n");
    run_end(&r);
  }
  Run r;
  run_begin(&r);
  load_fails(&r, add_vector(&r, DT_FP32, 20, st), false,
             "orionc: error: weight 'w' from 'model.safetensors' ('key') has NaN at index 17\n");
  run_end(&r);
  run_begin(&r);
  load_fails(&r, add_vector(&r, DT_FP16, 20, (IrParamSource){.kind = SRC_NPY, .path = "w.npy"}), false,
             "orionc: error: weight 'w' from 'w.npy' has NaN at index 17\n");
  run_end(&r);

  /* fp16 and bf16 NaNs, deep in a later chunk. */
  const size_t n = 9000;
  uint16_t *h = calloc(n, 2);
  cr_assert_not_null(h);
  h[8500] = 0xFE01;
  write_safetensors("h.safetensors", "k", "F16", "[9000]", h, n * 2, 0);
  h[8500] = 0;
  h[4100] = 0x7FC1;
  write_safetensors("b.safetensors", "k", "BF16", "[9000]", h, n * 2, 0);
  free(h);
  run_begin(&r);
  load_fails(&r, add_vector(&r, DT_FP32, (int64_t)n, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "h.safetensors", .key = "k"}),
             false, "orionc: error: weight 'w' from 'h.safetensors' ('k') has NaN at index 8500\n");
  run_end(&r);
  run_begin(&r);
  load_fails(&r, add_vector(&r, DT_FP16, (int64_t)n, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "b.safetensors", .key = "k"}),
             false, "orionc: error: weight 'w' from 'b.safetensors' ('k') has NaN at index 4100\n");
  run_end(&r);
}

/* A conversion large enough to run on several threads reports the first
 * problem of the whole tensor, whichever thread met it, and counts clamped
 * values over all of them. */
Test(checks, threaded_conversion_reports_the_first_problem, .init = tmp_setup, .fini = tmp_teardown) {
  const size_t n = 3u << 20;
  float *data = calloc(n, sizeof *data);
  cr_assert_not_null(data);
  data[2900000] = bits_f32(0x7FC00000);
  data[1500001] = bits_f32(0x7FC00000);
  data[2000000] = 1e6f;
  data[300] = -1e6f;
  data[n - 1] = 7e4f;
  write_safetensors("big.safetensors", "k", "F32", "[3145728]", data, n * 4, 0);
  data[2900000] = data[1500001] = 0;
  write_safetensors("over.safetensors", "k", "F32", "[3145728]", data, n * 4, 0);
  free(data);
  Run r;
  run_begin(&r);
  load_fails(&r, add_vector(&r, DT_FP16, (int64_t)n, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "big.safetensors", .key = "k"}),
             false,
             "orionc: error: weight 'w' from 'big.safetensors' ('k') has NaN at index 1500001\n"
             "orionc: error: weight 'w' from 'big.safetensors' ('k') has the value -1000000 at index 300, beyond "
             "fp16's range (65504); pass --clamp-fp16 to clamp\n");
  run_end(&r);
  run_begin(&r);
  load_fails(&r, add_vector(&r, DT_FP16, (int64_t)n, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "over.safetensors", .key = "k"}),
             false,
             "orionc: error: weight 'w' from 'over.safetensors' ('k') has the value -1000000 at index 300, beyond "
             "fp16's range (65504); pass --clamp-fp16 to clamp\n");
  run_end(&r);
  run_begin(&r);
  uint16_t *h = load_ok(&r, add_vector(&r, DT_FP16, (int64_t)n, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "over.safetensors", .key = "k"}),
                        true, n * 2,
                        "orionc: warning: weight 'w' from 'over.safetensors' ('k'): clamped 3 values beyond fp16's range "
                        "to +-65504\n");
  cr_assert_eq(h[300], 0xFBFF);
  cr_assert_eq(h[2000000], 0x7BFF);
  cr_assert_eq(h[n - 1], 0x7BFF);
  free(h);
  run_end(&r);
}

Test(checks, beyond_fp16_range, .init = tmp_setup, .fini = tmp_teardown) {
  float data[6] = {1, 2, 65519.0f, 70000.0f, -1e30f, 3};
  write_safetensors("model.safetensors", "key", "F32", "[6]", data, sizeof data, 0);
  IrParamSource st = {.kind = SRC_SAFETENSORS, .path = "model.safetensors", .key = "key"};
  Run r;
  run_begin(&r);
  load_fails(&r, add_vector(&r, DT_FP16, 6, st), false,
             "orionc: error: weight 'w' from 'model.safetensors' ('key') has the value 70000 at index 3, beyond "
             "fp16's range (65504); pass --clamp-fp16 to clamp\n");
  run_end(&r);

  run_begin(&r);
  uint16_t *h = load_ok(&r, add_vector(&r, DT_FP16, 6, st), true, 12,
                        "orionc: warning: weight 'w' from 'model.safetensors' ('key'): clamped 2 values beyond fp16's "
                        "range to +-65504\n");
  static const uint16_t want[6] = {0x3C00, 0x4000, 0x7BFF, 0x7BFF, 0xFBFF, 0x4200};
  for (int i = 0; i < 6; i++) cr_assert_eq(h[i], want[i], "element %d: 0x%04x", i, h[i]);
  cr_assert_eq(r.d.nwarnings, 1);
  free(h);
  /* The same file into fp32 is fine. */
  float *f = load_ok(&r, add_vector(&r, DT_FP32, 6, st), false, 24,
                     "orionc: warning: weight 'w' from 'model.safetensors' ('key'): clamped 2 values beyond fp16's "
                     "range to +-65504\n");
  cr_assert_eq(memcmp(f, data, sizeof data), 0);
  free(f);
  run_end(&r);

  /* A non-integral value prints in the shortest form that reads back as the float. */
  float frac[2] = {0, 70000.1f};
  write_safetensors("frac.safetensors", "k", "F32", "[2]", frac, sizeof frac, 0);
  run_begin(&r);
  load_fails(&r, add_vector(&r, DT_FP16, 2, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "frac.safetensors", .key = "k"}),
             false,
             "orionc: error: weight 'w' from 'frac.safetensors' ('k') has the value 70000.1 at index 1, beyond fp16's "
             "range (65504); pass --clamp-fp16 to clamp\n");
  run_end(&r);
}

Test(checks, infinities, .init = tmp_setup, .fini = tmp_teardown) {
  float data[4] = {1, bits_f32(0xFF800000), 2, bits_f32(0x7F800000)};
  write_safetensors("m.safetensors", "k", "F32", "[4]", data, sizeof data, 0);
  uint16_t h16[3] = {0, 0, 0x7C00};
  write_npy("h.npy", "<f2", "(3,)", h16, sizeof h16);
  IrParamSource st = {.kind = SRC_SAFETENSORS, .path = "m.safetensors", .key = "k"};
  Run r;
  run_begin(&r);
  load_fails(&r, add_vector(&r, DT_FP16, 4, st), false,
             "orionc: error: weight 'w' from 'm.safetensors' ('k') has the value -inf at index 1, beyond fp16's range "
             "(65504); pass --clamp-fp16 to clamp\n");
  run_end(&r);
  run_begin(&r);
  load_fails(&r, add_vector(&r, DT_FP16, 3, (IrParamSource){.kind = SRC_NPY, .path = "h.npy"}), false,
             "orionc: error: weight 'w' from 'h.npy' has the value inf at index 2, beyond fp16's range (65504); pass "
             "--clamp-fp16 to clamp\n");
  run_end(&r);
  run_begin(&r);
  uint16_t *h = load_ok(&r, add_vector(&r, DT_FP16, 4, st), true, 8,
                        "orionc: warning: weight 'w' from 'm.safetensors' ('k'): clamped 2 values beyond fp16's range "
                        "to +-65504\n");
  static const uint16_t want[4] = {0x3C00, 0xFBFF, 0x4000, 0x7BFF};
  for (int i = 0; i < 4; i++) cr_assert_eq(h[i], want[i]);
  free(h);
  run_end(&r);
  /* fp32 holds infinities as they are (e.g. attention masks). */
  run_begin(&r);
  float *f = load_ok(&r, add_vector(&r, DT_FP32, 4, st), false, 16, "");
  cr_assert_eq(memcmp(f, data, sizeof data), 0);
  free(f);
  run_end(&r);
}

Test(checks, f64_beyond_fp32_and_single_clamp, .init = tmp_setup, .fini = tmp_teardown) {
  static const double d[3] = {1, 1e39, -70000};
  write_safetensors("d.safetensors", "k", "F64", "[3]", d, sizeof d, 0);
  IrParamSource st = {.kind = SRC_SAFETENSORS, .path = "d.safetensors", .key = "k"};
  Run r;
  run_begin(&r);
  load_fails(&r, add_vector(&r, DT_FP32, 3, st), false,
             "orionc: error: weight 'w' from 'd.safetensors' ('k') has the value 1e+39 at index 1, beyond fp32's "
             "range (3.40282347e+38)\n");
  run_end(&r);
  run_begin(&r);
  uint16_t *h = load_ok(&r, add_vector(&r, DT_FP16, 3, st), true, 6,
                        "orionc: warning: weight 'w' from 'd.safetensors' ('k'): clamped 2 values beyond fp16's range "
                        "to +-65504\n");
  cr_assert_eq(h[1], 0x7BFF);
  cr_assert_eq(h[2], 0xFBFF);
  free(h);
  run_end(&r);
  static const double one[1] = {-65536};
  write_safetensors("one.safetensors", "k", "F64", "[1]", one, sizeof one, 0);
  run_begin(&r);
  h = load_ok(&r, add_vector(&r, DT_FP16, 1, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "one.safetensors", .key = "k"}),
              true, 2,
              "orionc: warning: weight 'w' from 'one.safetensors' ('k'): clamped 1 value beyond fp16's range to "
              "+-65504\n");
  cr_assert_eq(*h, 0xFBFF);
  free(h);
  run_end(&r);
}

/* ---- file problems ---------------------------------------------------------------- */

Test(files, missing_file_key_and_mismatches, .init = tmp_setup, .fini = tmp_teardown) {
  float data[4] = {1, 2, 3, 4};
  write_safetensors("m.safetensors", "k", "F32", "[2,2]", data, sizeof data, 0);
  Run r;
  run_begin(&r);
  load_fails(&r, add_vector(&r, DT_FP16, 4, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "nope.safetensors", .key = "k"}),
             false,
             "orionc: error: cannot read weights for 'w': cannot open 'nope.safetensors': No such file or directory\n");
  run_end(&r);
  run_begin(&r);
  load_fails(&r, add_vector(&r, DT_FP16, 4, (IrParamSource){.kind = SRC_NPY, .path = "nope.npy"}), false,
             "orionc: error: cannot read weights for 'w': cannot open 'nope.npy': No such file or directory\n");
  run_end(&r);
  run_begin(&r);
  load_fails(&r, add_vector(&r, DT_FP16, 4, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "m.safetensors", .key = "x"}),
             false, "orionc: error: cannot read weights for 'w' from 'm.safetensors': no tensor named 'x' in the file (it holds 'k')\n");
  run_end(&r);
  run_begin(&r);
  load_fails(&r, add_vector(&r, DT_FP16, 4, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "m.safetensors", .key = "k"}),
             false,
             "orionc: error: shape mismatch for 'w': declared fp16[4] but 'm.safetensors' holds 'k' as [2,2]\n");
  run_end(&r);
  run_begin(&r);
  int64_t dims[2] = {2, 2};
  load_fails(&r, add_param(&r, DT_INT32, 2, dims, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "m.safetensors", .key = "k"}),
             false, "orionc: error: dtype mismatch for 'w': declared int32 but 'k' in 'm.safetensors' is F32\n");
  run_end(&r);
  /* A directory, and a file that is not a .npy. */
  write_bytes("bad.npy", "hello", 5, NULL, 0);
  run_begin(&r);
  load_fails(&r, add_vector(&r, DT_FP16, 4, (IrParamSource){.kind = SRC_NPY, .path = "bad.npy"}), false,
             "orionc: error: cannot read weights for 'w' from 'bad.npy': not a .npy file (bad magic)\n");
  run_end(&r);
  run_begin(&r);
  r.m->base_dir = "/";
  load_fails(&r, add_vector(&r, DT_FP16, 4, (IrParamSource){.kind = SRC_NPY, .path = "tmp"}), false,
             "orionc: error: cannot read weights for 'w': 'tmp' is not a regular file\n");
  run_end(&r);
}

Test(files, empty_tensor, .init = tmp_setup, .fini = tmp_teardown) {
  write_safetensors("e.safetensors", "k", "F32", "[0,3]", NULL, 0, 0);
  Run r;
  run_begin(&r);
  int64_t dims[2] = {0, 3};
  void *p = load_ok(&r, add_param(&r, DT_FP16, 2, dims, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "e.safetensors", .key = "k"}),
                    false, 0, "");
  free(p);
  run_end(&r);
}
