/*
 * The CPU backend's AMX path (runtime/cpu/k_gemm_amx.c and its pieces in
 * k_linalg.c): blocks packed from every layout (k contiguous, m or n
 * contiguous, strided; floats and fp16 on either side; sizes off the 16 and
 * 32 grids) against double within the AMX bound, the same bits run to run;
 * fp16 by fp16 exact; infinities and NaNs as IEEE arithmetic gives them;
 * whole linear layers and pointwise convs the same bits at 1 and 2
 * threads; and ORION_CPU_AMX=0 giving the AVX-512 path's bits. Skipped
 * where the CPU or the OS lacks AMX (but the ORION_CPU_AMX=0 test). Reads
 * the backend's internal header.
 *
 * The bound: the pieces' dropped pairs (a2b3, a3b2, a3b3) are below 2^-20
 * |a b|; the sum is at most 6K fp32 additions of exact products into one
 * accumulator, each rounding by 2^-24 of the running sum, so |c - exact| <=
 * (6K + 24) 2^-24 sum_k |a_k b_k| (the 24 covers the dropped pairs and the
 * piece products' sum exceeding |a b| by a factor below 1 + 2^-6).
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


static double elem_of(GemmSrc s, int64_t i, int64_t k) {
  int64_t at = i * s.si + k * s.sk;
  return (double)(s.h16 ? fp16_to_float(((const uint16_t *)s.p)[at]) : ((const float *)s.p)[at]);
}

static double amx_bound(int64_t K, double mag) { return (double)(6 * K + 24) * ldexp(1.0, -24) * mag; }

static void expect_amx_bound(GemmSrc a, GemmSrc b, int64_t M, int64_t N, int64_t K, const float *C, const char *what) {
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double ref = 0, mag = 0;
      for (int64_t k = 0; k < K; k++) {
        double p = elem_of(a, m, k) * elem_of(b, n, k);
        ref += p, mag += fabs(p);
      }
      double got = (double)C[m * N + n], bound = amx_bound(K, mag);
      cr_assert(fabs(got - ref) <= bound, "%s M=%lld N=%lld K=%lld [%lld, %lld]: %.9g vs %.9g (bound %.3g)", what,
                (long long)M, (long long)N, (long long)K, (long long)m, (long long)n, got, ref, bound);
    }
}

static const int64_t shapes[][3] = {{1, 1, 1}, {17, 33, 31}, {33, 47, 300}, {5, 70, 64}, {40, 17, 530}, {64, 64, 96}};

/* A source of element (i, k) over an n x K matrix in data (floats or fp16 bits): layout 0 k contiguous, rows K + 3
 * apart; 1 i contiguous, k rows n + 1 apart; 2 both strided. */
static GemmSrc layout(const void *data, bool h16, int l, int64_t n, int64_t K) {
  if (l == 0) return (GemmSrc){.p = data, .h16 = h16, .si = K + 3, .sk = 1};
  if (l == 1) return (GemmSrc){.p = data, .h16 = h16, .si = 1, .sk = n + 1};
  return (GemmSrc){.p = data, .h16 = h16, .si = 2, .sk = 2 * n + 1};
}

Test(cpu_gemm_amx, every_layout_and_element_type_within_the_bound_and_the_same_bits_run_to_run) {
  SKIP_WITHOUT_AMX();
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
    int64_t na = (2 * M + 5) * (K + 5), nb = (2 * N + 5) * (K + 5);
    float *af = malloc(sizeof(float) * (size_t)na), *bf = malloc(sizeof(float) * (size_t)nb);
    uint16_t *ah = malloc(sizeof(uint16_t) * (size_t)na), *bh = malloc(sizeof(uint16_t) * (size_t)nb);
    float *c1 = malloc(sizeof(float) * (size_t)(M * N)), *c2 = malloc(sizeof(float) * (size_t)(M * N));
    fill_random(af, na, (uint32_t)(7 + s), false);
    fill_random(bf, nb, (uint32_t)(70 + s), false);
    for (int64_t i = 0; i < na; i++) ah[i] = fp16_from_float(af[i]);
    for (int64_t i = 0; i < nb; i++) bh[i] = fp16_from_float(bf[i]);
    for (int t = 0; t < 4; t++)
      for (int la = 0; la < 3; la++)
        for (int lb = 0; lb < 3; lb++) {
          bool ha = t & 1, hb = t & 2;
          GemmSrc a = layout(ha ? (const void *)ah : af, ha, la, M, K), b = layout(hb ? (const void *)bh : bf, hb, lb, N, K);
          char what[96];
          snprintf(what, sizeof what, "A %s layout %d, B %s layout %d", ha ? "fp16" : "fp32", la, hb ? "fp16" : "fp32", lb);
          amx_product(a, b, M, N, K, c1);
          expect_amx_bound(a, b, M, N, K, c1, what);
          amx_product(a, b, M, N, K, c2);
          cr_assert(memcmp(c1, c2, sizeof(float) * (size_t)(M * N)) == 0, "%s: the bits differ run to run", what);
        }
    free(af), free(bf), free(ah), free(bh), free(c1), free(c2);
  }
}

/* fp16 by fp16: every piece pair is kept, so one k gives the product exactly (11 + 11 significant bits). */
Test(cpu_gemm_amx, fp16_by_fp16_products_are_exact) {
  SKIP_WITHOUT_AMX();
  int64_t M = 40, N = 35;
  float *af = malloc(sizeof(float) * (size_t)M), *bf = malloc(sizeof(float) * (size_t)N), c[40 * 35];
  uint16_t *ah = malloc(sizeof(uint16_t) * (size_t)M), *bh = malloc(sizeof(uint16_t) * (size_t)N);
  fill_random(af, M, 3, false);
  fill_random(bf, N, 4, false);
  for (int64_t i = 0; i < M; i++) ah[i] = fp16_from_float(af[i]);
  for (int64_t i = 0; i < N; i++) bh[i] = fp16_from_float(bf[i]);
  amx_product((GemmSrc){.p = ah, .h16 = true, .si = 1, .sk = 1}, (GemmSrc){.p = bh, .h16 = true, .si = 1, .sk = 1},
              M, N, 1, c);
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      float want = fp16_to_float(ah[m]) * fp16_to_float(bh[n]);
      cr_assert(c[m * N + n] == want, "[%lld, %lld]: %.9g, not %.9g", (long long)m, (long long)n, (double)c[m * N + n],
                (double)want);
    }
  free(af), free(bf), free(ah), free(bh);
}

/* An infinity in A times finite values gives an infinity of the product's sign (not the NaN that inf times a zero
 * piece would), inf times an exact zero a NaN, a NaN in B a NaN in its column; the other outputs are untouched. */
Test(cpu_gemm_amx, infinities_and_nans_propagate_as_ieee_arithmetic) {
  SKIP_WITHOUT_AMX();
  int64_t M = 37, N = 45, K = 70;
  float *a = malloc(sizeof(float) * (size_t)(M * K)), *b = malloc(sizeof(float) * (size_t)(N * K));
  float *c = malloc(sizeof(float) * (size_t)(M * N));
  fill_random(a, M * K, 8, false);
  fill_random(b, N * K, 9, false);
  for (int64_t n = 0; n < N; n++) b[n * K + 5] = 1.0f + (float)n; /* pieces 2 and 3 zero: inf would meet them */
  b[3 * K + 5] = 0.0f;                                             /* column 3: inf times zero */
  a[2 * K + 5] = INFINITY, a[20 * K + 5] = -INFINITY;
  b[40 * K + 60] = NAN;
  uint16_t *bh = malloc(sizeof(uint16_t) * (size_t)(N * K));
  for (int64_t i = 0; i < N * K; i++) bh[i] = fp16_from_float(b[i]);
  for (int h16 = 0; h16 < 2; h16++) {
    GemmSrc sa = {.p = a, .si = K, .sk = 1}, sb = {.p = h16 ? (const void *)bh : b, .h16 = h16, .si = K, .sk = 1};
    amx_product(sa, sb, M, N, K, c);
    for (int64_t m = 0; m < M; m++)
      for (int64_t n = 0; n < N; n++) {
        float got = c[m * N + n];
        if (n == 40 || ((m == 2 || m == 20) && n == 3)) {
          cr_assert(isnan(got), "B %s [%lld, %lld]: %g, not a NaN", h16 ? "fp16" : "fp32", (long long)m, (long long)n,
                    (double)got);
        } else if (m == 2 || m == 20) {
          cr_assert(isinf(got) && (got > 0) == (m == 2), "B %s [%lld, %lld]: %g, not %sinf", h16 ? "fp16" : "fp32",
                    (long long)m, (long long)n, (double)got, m == 2 ? "+" : "-");
        } else {
          cr_assert(isfinite(got), "B %s [%lld, %lld]: %g", h16 ? "fp16" : "fp32", (long long)m, (long long)n,
                    (double)got);
        }
      }
  }
  free(bh);
  free(a), free(b), free(c);
}

/* One linear layer y = x w^T + b (fused: the linear layout) or its conv form (unfused: the [C, P] layout). */
static char *linear_text(int64_t R, int64_t K, int64_t O, const char *dt) {
  char *t = malloc(512);
  snprintf(t, 512,
           "func main(x: fp32[1,%lld,%lld]) {\n"
           "  param w: %s[%lld,%lld] = normal(seed=1, std=0.5);\n"
           "  param b: %s[%lld] = normal(seed=2, std=0.5);\n"
           "  xc = cast(x, dtype=\"%s\");\n  a = linear(xc, w, b);\n  af = cast(a, dtype=\"fp32\");\n"
           "  return af;\n}\n",
           (long long)R, (long long)K, dt, (long long)O, (long long)K, dt, (long long)O, dt);
  return t;
}

/* The layer's output with `threads` threads, fused or unfused (caller frees); *w and *b its weight and bias as
 * floats when asked. */
static float *run_layer(const char *path, int64_t R, int64_t K, int64_t O, const float *x, uint32_t threads,
                        bool unfused, float **w, float **b) {
  CpuOptions o = {.numerics = CPU_NUMERICS_FP32, .threads = threads, .unfused = unfused};
  Loaded l;
  load_path_opts(&l, path, &o);
  for (uint32_t s = 0; w && s < l.c->nslots; s++) {
    const Val *v = &l.c->vals[s];
    if (l.c->slots[s].kind != SK_CONST || l.c->slots[s].weight < 0) continue;
    float **to = v->n == K * O && v->rank >= 2 ? w : v->n == O && v->rank == 1 ? b : NULL;
    if (!to) continue;
    *to = malloc(sizeof(float) * (size_t)v->n);
    for (int64_t i = 0; i < v->n; i++)
      (*to)[i] = v->st == ST_H16 ? fp16_to_float(((const uint16_t *)v->p)[i]) : fp(v)[i];
  }
  int64_t dims[3] = {1, R, K};
  CpuTensor in = f32_tensor((float *)(uintptr_t)x, 3, dims), out;
  cr_assert(cpu_run(l.c, &in, &out, &l.d), "%s", l.diags.data);
  float *y = malloc(sizeof(float) * (size_t)(R * O));
  memcpy(y, out.data, sizeof(float) * (size_t)(R * O));
  cpu_tensor_free(&out);
  unload(&l);
  return y;
}

static const int64_t layer_shapes[][3] = {{37, 300, 130}, {600, 64, 40}, {33, 520, 300}, {64, 70, 129}};

/* Whole layers (on the AMX path by fp16 weights, the AVX-512 one by fp32 weights): within the bound of double (one
 * more rounding for the bias), the same bits at 1 and 2 threads, fused and unfused alike. */
Test(cpu_gemm_amx, linear_layers_within_the_bound_and_the_same_bits_at_1_and_2_threads) {
  SKIP_WITHOUT_AMX();
  for (size_t s = 0; s < sizeof layer_shapes / sizeof layer_shapes[0]; s++)
    for (int h16 = 0; h16 < 2; h16++) {
      int64_t R = layer_shapes[s][0], K = layer_shapes[s][1], O = layer_shapes[s][2];
      char *text = linear_text(R, K, O, h16 ? "fp16" : "fp32"), path[128];
      make_pkg(text, path, sizeof path);
      free(text);
      float *x = malloc(sizeof(float) * (size_t)(R * K)), *w = NULL, *b = NULL;
      fill_random(x, R * K, (uint32_t)(17 + s), false);
      if (h16)
        for (int64_t i = 0; i < R * K; i++) x[i] = fp16_to_float(fp16_from_float(x[i]));
      float *y1 = run_layer(path, R, K, O, x, 1, false, &w, &b);
      cr_assert(w && b, "no weight or bias found");
      for (int64_t r = 0; r < R; r++)
        for (int64_t n = 0; n < O; n++) {
          double ref = (double)b[n], mag = 0;
          for (int64_t k = 0; k < K; k++) {
            double p = (double)x[r * K + k] * (double)w[n * K + k];
            ref += p, mag += fabs(p);
          }
          double bound = amx_bound(K, mag) + ldexp(fabs(ref), -24);
          cr_assert(fabs((double)y1[r * O + n] - ref) <= bound, "%s shape %zu [%lld, %lld]: %.9g vs %.9g",
                    h16 ? "fp16" : "fp32", s, (long long)r, (long long)n, (double)y1[r * O + n], ref);
        }
      for (int run = 0; run < 3; run++) {
        float *y = run_layer(path, R, K, O, x, run ? 2 : 1, run == 2, NULL, NULL);
        cr_assert(memcmp(y1, y, sizeof(float) * (size_t)(R * O)) == 0, "%s shape %zu: %s differs", h16 ? "fp16" : "fp32",
                  s, run == 0 ? "a second run" : run == 1 ? "2 threads" : "the unfused conv layout at 2 threads");
        free(y);
      }
      free(x), free(w), free(b), free(y1);
      cleanup();
    }
}

/* ORION_CPU_AMX=0 (read once, before the first product): no AMX, and a layer by an fp16 weight (which the tiles
 * would run) has the AVX-512 path's bits, the bias followed by one fused multiply-add per k in order. Criterion
 * runs each test in its own process. */
Test(cpu_gemm_amx, orion_cpu_amx_0_gives_the_avx512_paths_bits) {
  cr_assert_eq(setenv("ORION_CPU_AMX", "0", 1), 0);
  cr_assert(!gemm_amx_on(), "ORION_CPU_AMX=0 left the AMX path on");
  if (!gemm_packed_fast()) cr_skip_test("no AVX-512 packed GEMM here (the layer runs on sgemm)");
  int64_t R = 37, K = 300, O = 130;
  char *text = linear_text(R, K, O, "fp16"), path[128];
  make_pkg(text, path, sizeof path);
  free(text);
  float *x = malloc(sizeof(float) * (size_t)(R * K)), *w = NULL, *b = NULL;
  fill_random(x, R * K, 5, false);
  for (int64_t i = 0; i < R * K; i++) x[i] = fp16_to_float(fp16_from_float(x[i])); /* the cast is exact then */
  float *y = run_layer(path, R, K, O, x, 2, false, &w, &b);
  for (int64_t r = 0; r < R; r++)
    for (int64_t n = 0; n < O; n++) {
      float c = b[n];
      for (int64_t k = 0; k < K; k++) c = fmaf(x[r * K + k], w[n * K + k], c);
      cr_assert(memcmp(&c, &y[r * O + n], sizeof c) == 0, "[%lld, %lld]: %.9g, not the FMA chain's %.9g", (long long)r,
                (long long)n, (double)y[r * O + n], (double)c);
    }
  free(x), free(w), free(b), free(y);
  cleanup();
}
