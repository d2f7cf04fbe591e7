/*
 * The CPU backend's streamed AMX matmul (runtime/cpu/k_matmul_amx.c): a
 * matmul of fp16 values with a long op(x) and few columns, the llama's
 * tied classifier in the backward (dh = dlogits E, dE = dlogits^T h), at
 * shapes off the 16 / 32 grids (rows, columns and k). Its bits are those of
 * the AMX path's blocks over the same pieces (the test's own product, as
 * test_cpu_gemm_amx.c's), the same at 1 and 2 threads; the rule takes fp16
 * operands only, and ORION_CPU_AMX=0 turns it off. Skipped where the CPU or
 * the OS lacks AMX (but the rule's tests). Reads the backend's internal header.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amx_check.h"
#include "cpu_check.h"
#include "cpu_internal.h"
#include "orion/fp16.h"


/* n random values that fp16 holds exactly (the casts to fp16 then copy them). */
static float *fp16_values(int64_t n, uint32_t seed) {
  float *p = malloc(sizeof(float) * (size_t)n);
  fill_random(p, n, seed, false);
  for (int64_t i = 0; i < n; i++) p[i] = fp16_to_float(fp16_from_float(p[i]));
  return p;
}

/* The program at path run on inputs (rank 2, dims[i]) with `threads` threads in fp32 numerics (the matmul's
 * fp16-declared result unrounded); its first output, n floats (caller frees); *w the fp16 param as floats. */
static float *run_program(const char *path, float **in, const int64_t (*dims)[2], uint32_t nin, int64_t n,
                          uint32_t threads, float **w) {
  CpuOptions o = {.numerics = CPU_NUMERICS_FP32, .threads = threads};
  Loaded l;
  load_path_opts(&l, path, &o);
  for (uint32_t s = 0; w && s < l.c->nslots; s++) {
    const Val *v = &l.c->vals[s];
    if (l.c->slots[s].kind != SK_CONST || l.c->slots[s].weight < 0 || v->rank != 2) continue;
    *w = malloc(sizeof(float) * (size_t)v->n);
    for (int64_t i = 0; i < v->n; i++) (*w)[i] = v->st == ST_H16 ? fp16_to_float(((const uint16_t *)v->p)[i]) : fp(v)[i];
  }
  CpuTensor ins[2], out;
  for (uint32_t i = 0; i < nin; i++) ins[i] = f32_tensor(in[i], 2, dims[i]);
  cr_assert(cpu_run(l.c, ins, &out, &l.d), "%s", l.diags.data);
  float *y = malloc(sizeof(float) * (size_t)n);
  memcpy(y, out.data, sizeof(float) * (size_t)n);
  cpu_tensor_free(&out);
  unload(&l);
  return y;
}

/* dh = g E: g [M, K] by an fp16 weight [K, N]; M K at least 2^20 (the rule's long op(x)). */
static const int64_t dh_shapes[][3] = {{40, 26250, 33}, {300, 3501, 17}, {1029, 1100, 288}};

Test(cpu_matmul_amx, dlogits_by_the_table_has_the_amx_blocks_bits_at_1_and_2_threads) {
  SKIP_WITHOUT_AMX();
  for (size_t s = 0; s < sizeof dh_shapes / sizeof dh_shapes[0]; s++) {
    int64_t M = dh_shapes[s][0], K = dh_shapes[s][1], N = dh_shapes[s][2];
    cr_assert(M * K >= ((int64_t)1 << 20), "shape %zu is under the rule's size", s);
    char text[512], path[128];
    snprintf(text, sizeof text,
             "func main(g: fp32[%lld,%lld]) {\n  param e: fp16[%lld,%lld] = normal(seed=3, std=0.5);\n"
             "  gc = cast(g, dtype=\"fp16\");\n  d = matmul(gc, e);\n  df = cast(d, dtype=\"fp32\");\n  return df;\n}\n",
             (long long)M, (long long)K, (long long)K, (long long)N);
    make_pkg(text, path, sizeof path);
    float *g = fp16_values(M * K, (uint32_t)(11 + s)), *e = NULL;
    int64_t dims[1][2] = {{M, K}};
    float *y1 = run_program(path, &g, dims, 1, M * N, 1, &e);
    cr_assert_not_null(e, "no weight found");
    float *ref = malloc(sizeof(float) * (size_t)(M * N));
    amx_product((GemmSrc){.p = g, .si = K, .sk = 1}, (GemmSrc){.p = e, .si = 1, .sk = N}, M, N, K, ref);
    for (int64_t i = 0; i < M * N; i++)
      cr_assert(memcmp(&y1[i], &ref[i], sizeof(float)) == 0, "shape %zu [%lld, %lld]: %.9g, the blocks give %.9g", s,
                (long long)(i / N), (long long)(i % N), (double)y1[i], (double)ref[i]);
    float *y2 = run_program(path, &g, dims, 1, M * N, 2, NULL);
    cr_assert(memcmp(y1, y2, sizeof(float) * (size_t)(M * N)) == 0, "shape %zu: the bits differ at 2 threads", s);
    free(g), free(e), free(y1), free(y2), free(ref);
    cleanup();
  }
}

/* dE = g^T h: g [K, M] transposed, h [K, N]; M K at least 2^20. */
static const int64_t de_shapes[][3] = {{1100, 1000, 40}, {4111, 257, 288}, {32769, 65, 5}};

Test(cpu_matmul_amx, dlogits_transposed_by_the_hidden_state_has_the_amx_blocks_bits_at_1_and_2_threads) {
  SKIP_WITHOUT_AMX();
  for (size_t s = 0; s < sizeof de_shapes / sizeof de_shapes[0]; s++) {
    int64_t M = de_shapes[s][0], K = de_shapes[s][1], N = de_shapes[s][2];
    cr_assert(M * K >= ((int64_t)1 << 20), "shape %zu is under the rule's size", s);
    char text[512], path[128];
    snprintf(text, sizeof text,
             "func main(g: fp32[%lld,%lld], h: fp32[%lld,%lld]) {\n  gc = cast(g, dtype=\"fp16\");\n"
             "  hc = cast(h, dtype=\"fp16\");\n  d = matmul(gc, hc, transpose_x=true);\n"
             "  df = cast(d, dtype=\"fp32\");\n  return df;\n}\n",
             (long long)K, (long long)M, (long long)K, (long long)N);
    make_pkg(text, path, sizeof path);
    float *in[2] = {fp16_values(K * M, (uint32_t)(21 + s)), fp16_values(K * N, (uint32_t)(31 + s))};
    int64_t dims[2][2] = {{K, M}, {K, N}};
    float *y1 = run_program(path, in, dims, 2, M * N, 1, NULL);
    /* C^T = h^T g on the blocks: h^T's rows (n, k) = h[k N + n] on the A side, g's columns (m, k) on the B side. */
    float *ref = malloc(sizeof(float) * (size_t)(M * N));
    amx_product((GemmSrc){.p = in[1], .si = 1, .sk = N}, (GemmSrc){.p = in[0], .si = 1, .sk = M}, N, M, K, ref);
    for (int64_t m = 0; m < M; m++)
      for (int64_t n = 0; n < N; n++)
        cr_assert(memcmp(&y1[m * N + n], &ref[n * M + m], sizeof(float)) == 0,
                  "shape %zu [%lld, %lld]: %.9g, the blocks give %.9g", s, (long long)m, (long long)n,
                  (double)y1[m * N + n], (double)ref[n * M + m]);
    float *y2 = run_program(path, in, dims, 2, M * N, 2, NULL);
    cr_assert(memcmp(y1, y2, sizeof(float) * (size_t)(M * N)) == 0, "shape %zu: the bits differ at 2 threads", s);
    free(in[0]), free(in[1]), free(y1), free(y2), free(ref);
    cleanup();
  }
}

static Val val2(MilDType dt, uint8_t st, int64_t d0, int64_t d1) {
  return (Val){.dt = dt, .st = st, .rank = 2, .dims = {d0, d1}, .n = d0 * d1};
}

/* The rule: fp16 operands (ane numerics' values) only, one matrix, at most 512 columns, op(x) of 2^20 floats. */
Test(cpu_matmul_amx, the_rule_takes_fp16_operands_of_one_long_matrix_with_few_columns) {
  SKIP_WITHOUT_AMX();
  Val g = val2(MIL_DT_FP16, ST_F32, 1024, 32000), e = val2(MIL_DT_FP16, ST_H16, 32000, 288);
  Val gf = val2(MIL_DT_FP32, ST_F32, 1024, 32000), ef = val2(MIL_DT_FP32, ST_F32, 32000, 288);
  cr_assert(amxmm_fits(&g, &e, 1, 1024, 32000, 288), "the llama's dlogits E");
  cr_assert(amxmm_fits(&g, &e, 1, 32000, 1024, 288), "the llama's dlogits^T h");
  cr_assert(!amxmm_fits(&gf, &ef, 1, 1024, 32000, 288), "fp32 operands (fp32 numerics) stay off");
  cr_assert(!amxmm_fits(&g, &ef, 1, 1024, 32000, 288), "an fp32 y stays off");
  cr_assert(!amxmm_fits(&g, &e, 2, 1024, 32000, 288), "a batch stays off");
  cr_assert(!amxmm_fits(&g, &e, 1, 1024, 32000, 513), "more than 512 columns stay off");
  cr_assert(!amxmm_fits(&g, &e, 1, 1024, 1023, 288), "op(x) under 2^20 floats stays off");
  cr_assert(!amxmm_fits(&g, &e, 1, 16, 1 << 20, 288), "fewer than 32 rows stay off");
}

/* ORION_CPU_AMX=0 (read once, before the first product): the rule is off, and such a product runs as before,
 * within fp32's reassociation bound of double. Criterion runs each test in its own process. */
Test(cpu_matmul_amx, orion_cpu_amx_0_turns_it_off) {
  cr_assert_eq(setenv("ORION_CPU_AMX", "0", 1), 0);
  cr_assert(!gemm_amx_on(), "ORION_CPU_AMX=0 left the AMX path on");
  Val g = val2(MIL_DT_FP16, ST_F32, 1024, 32000), e = val2(MIL_DT_FP16, ST_H16, 32000, 288);
  cr_assert(!amxmm_fits(&g, &e, 1, 1024, 32000, 288), "the rule holds with AMX off");
  int64_t M = 1100, K = 1000, N = 40;
  char text[512], path[128];
  snprintf(text, sizeof text,
           "func main(g: fp32[%lld,%lld], h: fp32[%lld,%lld]) {\n  gc = cast(g, dtype=\"fp16\");\n"
           "  hc = cast(h, dtype=\"fp16\");\n  d = matmul(gc, hc, transpose_x=true);\n"
           "  df = cast(d, dtype=\"fp32\");\n  return df;\n}\n",
           (long long)K, (long long)M, (long long)K, (long long)N);
  make_pkg(text, path, sizeof path);
  float *in[2] = {fp16_values(K * M, 41), fp16_values(K * N, 42)};
  int64_t dims[2][2] = {{K, M}, {K, N}};
  float *y = run_program(path, in, dims, 2, M * N, 2, NULL);
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double ref = 0, mag = 0;
      for (int64_t k = 0; k < K; k++) {
        double p = (double)in[0][k * M + m] * (double)in[1][k * N + n];
        ref += p, mag += fabs(p);
      }
      cr_assert(fabs((double)y[m * N + n] - ref) <= (double)K * ldexp(1.0, -24) * mag, "[%lld, %lld]: %.9g vs %.9g",
                (long long)m, (long long)n, (double)y[m * N + n], ref);
    }
  free(in[0]), free(in[1]), free(y);
  cleanup();
}
