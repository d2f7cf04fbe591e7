/*
 * The CPU backend's packed GEMM (runtime/cpu/k_gemm_pack.c and its pieces in
 * k_linalg.c): blocks packed from every layout a product reads (fp16 and
 * float, k contiguous, n contiguous, any strides) against a double-precision
 * reference within the fp32 bound, the AVX-512 forms giving the portable
 * forms' bits; and whole linear layers with many rows (fp16 and fp32
 * weights, odd sizes, K = 1, N = 1, several row blocks) against double, the
 * same bits with 1 and 2 threads, fused (the linear layout) and unfused (the
 * conv layout). Reads the backend's internal header.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_check.h"
#include "cpu_internal.h"
#include "orion/fp16.h"

/* C[M, N] = A[M, K] B[K, N] by the packed blocks, k in blocks of GEMM_KC as
 * k_linalg.c runs them; A's element (m, k) and B's (k, n) from sources. */
static void packed_product(GemmSrc a, GemmSrc b, int64_t M, int64_t N, int64_t K, float *C, bool portable) {
  int64_t groups = (M + GEMM_MR - 1) / GEMM_MR, panels = (N + GEMM_NR - 1) / GEMM_NR;
  float *ap = malloc(sizeof(float) * (size_t)(groups * GEMM_MR * GEMM_KC));
  float *bp = malloc(sizeof(float) * (size_t)(panels * GEMM_NR * GEMM_KC));
  for (int64_t k0 = 0; k0 < K; k0 += GEMM_KC) {
    int64_t nk = K - k0 < GEMM_KC ? K - k0 : GEMM_KC;
    gemm_pack_rows(ap, a, 0, M, k0, nk, portable);
    gemm_pack_cols(bp, b, 0, N, k0, nk, portable);
    gemm_block(ap, nk * GEMM_MR, bp, nk * GEMM_NR, M, N, nk, C, N, k0 > 0, portable, NULL);
  }
  free(ap), free(bp);
}

static double elem_of(GemmSrc s, int64_t i, int64_t k) {
  int64_t at = i * s.si + k * s.sk;
  return (double)(s.h16 ? fp16_to_float(((const uint16_t *)s.p)[at]) : ((const float *)s.p)[at]);
}

/* |c - exact| <= K 2^-24 sum |a b|: K float fused multiply-adds, each exact product rounded once with the sum. */
static void expect_bound(GemmSrc a, GemmSrc b, int64_t M, int64_t N, int64_t K, const float *C, const char *what) {
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double ref = 0, mag = 0;
      for (int64_t k = 0; k < K; k++) {
        double p = elem_of(a, m, k) * elem_of(b, n, k);
        ref += p, mag += fabs(p);
      }
      double got = (double)C[m * N + n], bound = (double)K * ldexp(1.0, -24) * mag;
      cr_assert(fabs(got - ref) <= bound, "%s M=%lld N=%lld K=%lld [%lld, %lld]: %.9g vs %.9g (bound %.3g)", what,
                (long long)M, (long long)N, (long long)K, (long long)m, (long long)n, got, ref, bound);
    }
}

static const int64_t block_shapes[][3] = {{1, 1, 1},    {13, 33, 1},  {12, 32, 256}, {25, 70, 300},
                                          {9, 1, 257},  {1, 31, 17},  {40, 64, 530}, {11, 100, 16}};

/* Each layout of B (a weight [N, K]: k contiguous; activations [K, N]: n contiguous; padded strides) in fp16 and
 * float: within the bound, and the fast forms' bits are the portable forms'. */
Test(cpu_gemm, blocks_within_the_fp32_bound_with_the_portable_bits) {
  for (size_t s = 0; s < sizeof block_shapes / sizeof block_shapes[0]; s++) {
    int64_t M = block_shapes[s][0], N = block_shapes[s][1], K = block_shapes[s][2];
    int64_t lda = K + 3, nb = (2 * N + 5) * (K + 5);
    float *af = malloc(sizeof(float) * (size_t)(M * lda)), *bf = malloc(sizeof(float) * (size_t)nb);
    uint16_t *bh = malloc(sizeof(uint16_t) * (size_t)nb);
    float *c1 = malloc(sizeof(float) * (size_t)(M * N)), *c2 = malloc(sizeof(float) * (size_t)(M * N));
    fill_random(af, M * lda, (uint32_t)(3 + s), false);
    fill_random(bf, nb, (uint32_t)(50 + s), false);
    for (int64_t i = 0; i < nb; i++) bh[i] = fp16_from_float(bf[i]);
    GemmSrc a = {.p = af, .si = lda, .sk = 1};
    for (int h16 = 0; h16 < 2; h16++) {
      const void *bd = h16 ? (const void *)bh : (const void *)bf;
      /* B(n, k): [N, K] rows K + 2 apart (k contiguous), [K, N] rows N + 1 apart (n contiguous), both strided */
      GemmSrc layouts[3] = {{.p = bd, .h16 = h16, .si = K + 2, .sk = 1},
                            {.p = bd, .h16 = h16, .si = 1, .sk = N + 1},
                            {.p = bd, .h16 = h16, .si = 2, .sk = 2 * N + 1}};
      for (int l = 0; l < 3; l++) {
        char what[64];
        snprintf(what, sizeof what, "%s layout %d", h16 ? "fp16" : "fp32", l);
        packed_product(a, layouts[l], M, N, K, c1, false);
        expect_bound(a, layouts[l], M, N, K, c1, what);
        packed_product(a, layouts[l], M, N, K, c2, true);
        cr_assert(memcmp(c1, c2, sizeof(float) * (size_t)(M * N)) == 0, "%s: fast and portable bits differ (shape %zu)",
                  what, s);
      }
    }
    free(af), free(bf), free(bh), free(c1), free(c2);
  }
}

/* fp16 A (a conv's weight is the row side) gives the bits of its floats. */
Test(cpu_gemm, fp16_rows_give_the_bits_of_their_floats) {
  int64_t M = 29, N = 45, K = 300;
  uint16_t *ah = malloc(sizeof(uint16_t) * (size_t)(M * K));
  float *af = malloc(sizeof(float) * (size_t)(M * K)), *bf = malloc(sizeof(float) * (size_t)(K * N));
  float *c1 = malloc(sizeof(float) * (size_t)(M * N)), *c2 = malloc(sizeof(float) * (size_t)(M * N));
  fill_random(af, M * K, 5, false);
  fill_random(bf, K * N, 6, false);
  for (int64_t i = 0; i < M * K; i++) af[i] = fp16_to_float(ah[i] = fp16_from_float(af[i]));
  GemmSrc b = {.p = bf, .si = 1, .sk = N};
  packed_product((GemmSrc){.p = ah, .h16 = true, .si = K, .sk = 1}, b, M, N, K, c1, false);
  packed_product((GemmSrc){.p = af, .si = K, .sk = 1}, b, M, N, K, c2, false);
  cr_assert(memcmp(c1, c2, sizeof(float) * (size_t)(M * N)) == 0, "fp16 rows differ from their floats");
  free(ah), free(af), free(bf), free(c1), free(c2);
}

/* One linear layer y = x w^T + b, x [1, R, K] an input, w and b params of
 * dtype dt; the text and the layer's output after a run. */
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

/* The weight (rank 2 or more) or the bias (rank 1) of n elements, as doubles (fp16 in place or floats). */
static double *const_values(const CpuProgram *c, int64_t n, bool weight) {
  for (uint32_t s = 0; s < c->nslots; s++) {
    const Val *v = &c->vals[s];
    if (c->slots[s].kind != SK_CONST || c->slots[s].weight < 0 || v->n != n || (v->rank >= 2) != weight ||
        (v->st != ST_H16 && v->st != ST_F32))
      continue;
    double *d = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
      d[i] = (double)(v->st == ST_H16 ? fp16_to_float(((const uint16_t *)v->p)[i]) : fp(v)[i]);
    return d;
  }
  cr_assert_fail("no const of %lld elements", (long long)n);
  return NULL;
}

static const int64_t layer_shapes[][3] = {{37, 300, 130}, {9, 1, 33}, {20, 17, 1}, {500, 64, 40}, {13, 520, 70}};

/* Whole layers (the lowered linear: fused, the linear layout; unfused, the conv's [C, P] layout) in fp32 numerics:
 * within the bound of double (K + 1 terms with the bias), the same bits with 1 and 2 threads, fused and unfused. */
Test(cpu_gemm, linear_layers_with_many_rows_against_double_and_threads) {
  cr_assert(gemm_packed_fast() || !cpu_features()->avx512, "AVX-512 without the packed GEMM's fast forms");
  for (size_t s = 0; s < sizeof layer_shapes / sizeof layer_shapes[0]; s++)
    for (int h16 = 0; h16 < 2; h16++) {
      int64_t R = layer_shapes[s][0], K = layer_shapes[s][1], O = layer_shapes[s][2];
      char *text = linear_text(R, K, O, h16 ? "fp16" : "fp32");
      char path[128];
      make_pkg(text, path, sizeof path);
      free(text);
      float *x = malloc(sizeof(float) * (size_t)(R * K));
      fill_random(x, R * K, (uint32_t)(11 + s), false);
      if (h16)
        for (int64_t i = 0; i < R * K; i++) x[i] = fp16_to_float(fp16_from_float(x[i])); /* the cast is exact then */
      int64_t dims[3] = {1, R, K};
      CpuTensor in = f32_tensor(x, 3, dims);
      float *first = NULL;
      for (int run = 0; run < 3; run++) {
        /* run 0: 1 thread; run 1: 2 threads; run 2: unfused (the conv layout), 2 threads */
        CpuOptions o = {.numerics = CPU_NUMERICS_FP32, .threads = run ? 2 : 1, .unfused = run == 2};
        Loaded l;
        load_path_opts(&l, path, &o);
        if (h16 && K * O >= 4096) {
          uint32_t in_place = 0;
          for (uint32_t i = 0; i < l.c->nslots; i++) in_place += l.c->vals[i].st == ST_H16 && l.c->vals[i].n == K * O;
          cr_assert_eq(in_place, 1, "the fp16 weight is not read in place");
        }
        CpuTensor out;
        cr_assert(cpu_run(l.c, &in, &out, &l.d), "%s", l.diags.data);
        const float *y = out.data;
        if (!run) {
          double *w = const_values(l.c, K * O, true), *b = const_values(l.c, O, false);
          for (int64_t r = 0; r < R; r++)
            for (int64_t n = 0; n < O; n++) {
              double ref = b[n], mag = fabs(b[n]);
              for (int64_t k = 0; k < K; k++) {
                double p = (double)x[r * K + k] * w[n * K + k];
                ref += p, mag += fabs(p);
              }
              double bound = (double)(K + 1) * ldexp(1.0, -24) * mag;
              cr_assert(fabs((double)y[r * O + n] - ref) <= bound, "%s R=%lld K=%lld O=%lld [%lld, %lld]: %.9g vs %.9g",
                        h16 ? "fp16" : "fp32", (long long)R, (long long)K, (long long)O, (long long)r, (long long)n,
                        (double)y[r * O + n], ref);
            }
          free(w), free(b);
          first = malloc(sizeof(float) * (size_t)(R * O));
          memcpy(first, y, sizeof(float) * (size_t)(R * O));
        } else {
          cr_assert(memcmp(first, y, sizeof(float) * (size_t)(R * O)) == 0, "%s R=%lld K=%lld O=%lld: %s differs",
                    h16 ? "fp16" : "fp32", (long long)R, (long long)K, (long long)O,
                    run == 1 ? "2 threads" : "the unfused conv layout");
        }
        cpu_tensor_free(&out);
        unload(&l);
      }
      free(first), free(x);
      cleanup();
    }
}

/* A backward's dx = dy W and a classifier's h E^T as matmuls of x [2, R, K]
 * by an fp16 weight y ([K, N], and [N, K] transposed): y stays fp16 in
 * place (no fp32 copy) where the packed GEMM runs, and the results are
 * within the bound of double, the same bits with 1 and 2 threads. */
Test(cpu_gemm, matmul_reads_an_fp16_weight_in_place) {
  static const int64_t shapes[][3] = {{37, 300, 130}, {9, 20, 700}, {5, 64, 70}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int ty = 0; ty < 2; ty++) {
      int64_t R = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
      char text[512];
      snprintf(text, sizeof text,
               "func main(x: fp32[2,%lld,%lld]) {\n  param w: fp16[%lld,%lld] = normal(seed=3, std=0.5);\n"
               "  xc = cast(x, dtype=\"fp16\");\n  a = matmul(xc, w%s);\n  af = cast(a, dtype=\"fp32\");\n"
               "  return af;\n}\n",
               (long long)R, (long long)K, (long long)(ty ? N : K), (long long)(ty ? K : N),
               ty ? ", transpose_y=true" : "");
      char path[128];
      make_pkg(text, path, sizeof path);
      float *x = malloc(sizeof(float) * (size_t)(2 * R * K)), *first = malloc(sizeof(float) * (size_t)(2 * R * N));
      fill_random(x, 2 * R * K, (uint32_t)(31 + s), false);
      for (int64_t i = 0; i < 2 * R * K; i++) x[i] = fp16_to_float(fp16_from_float(x[i]));
      int64_t dims[3] = {2, R, K};
      CpuTensor in = f32_tensor(x, 3, dims);
      for (uint32_t threads = 1; threads <= 2; threads++) {
        CpuOptions o = {.numerics = CPU_NUMERICS_FP32, .threads = threads};
        Loaded l;
        load_path_opts(&l, path, &o);
        bool in_place = false;
        for (uint32_t i = 0; i < l.c->nslots; i++) in_place |= l.c->vals[i].st == ST_H16 && l.c->vals[i].n == K * N;
        cr_assert_eq(in_place, gemm_packed_fast(), "shape %zu ty %d: the weight in place %d", s, ty, in_place);
        CpuTensor out;
        cr_assert(cpu_run(l.c, &in, &out, &l.d), "%s", l.diags.data);
        const float *y = out.data;
        if (threads == 1) {
          double *w = const_values(l.c, K * N, true);
          for (int64_t r = 0; r < 2 * R; r++)
            for (int64_t n = 0; n < N; n++) {
              double ref = 0, mag = 0;
              for (int64_t k = 0; k < K; k++) {
                double p = (double)x[r * K + k] * w[ty ? n * K + k : k * N + n];
                ref += p, mag += fabs(p);
              }
              double bound = (double)K * ldexp(1.0, -24) * mag;
              cr_assert(fabs((double)y[r * N + n] - ref) <= bound, "shape %zu ty %d [%lld, %lld]: %.9g vs %.9g", s, ty,
                        (long long)r, (long long)n, (double)y[r * N + n], ref);
            }
          free(w);
          memcpy(first, y, sizeof(float) * (size_t)(2 * R * N));
        } else {
          cr_assert(memcmp(first, y, sizeof(float) * (size_t)(2 * R * N)) == 0, "shape %zu ty %d: 2 threads differ", s,
                    ty);
        }
        cpu_tensor_free(&out);
        unload(&l);
      }
      free(x), free(first);
      cleanup();
    }
}

/* Pointwise convs on the packed GEMM's conv layout with several batch items
 * (each packed apart), positions off the 32-wide panels, fp16 weights in
 * place and fp32 ones, a bias, against ir_eval. */
Test(cpu_gemm, pointwise_conv_batches_against_ir_eval) {
  const char *text = "func main(x: fp32[3,70,37], y: fp32[2,300,20]) {\n"
                     "  param w: $F[130,70,1] = normal(seed=4, std=0.3);\n"
                     "  param b: $F[130] = normal(seed=5, std=0.5);\n"
                     "  param v: $F[40,300,1] = normal(seed=6, std=0.2);\n"
                     "  xc = cast(x, dtype=\"$F\");\n  yc = cast(y, dtype=\"$F\");\n"
                     "  c = conv(xc, w, b);\n  d = conv(yc, v);\n"
                     "  cf = cast(c, dtype=\"fp32\");\n  df = cast(d, dtype=\"fp32\");\n"
                     "  return cf, df;\n}\n";
  for (int h16 = 0; h16 < 2; h16++) {
    char *t = with_dtype(text, h16 ? "fp16" : "fp32");
    check(h16 ? "pointwise conv fp16" : "pointwise conv fp32", t, CPU_NUMERICS_FP32, 1e-5, NULL, 21);
    free(t);
  }
}

/* Each layout of A (the row side): k contiguous (x), m contiguous (a
 * transposed x, dy^T of a weight's gradient), both strided; with B k
 * contiguous and n contiguous: within the bound, the fast forms' bits the
 * portable forms'. */
Test(cpu_gemm, transposed_and_strided_rows_within_the_bound_with_the_portable_bits) {
  for (size_t s = 0; s < sizeof block_shapes / sizeof block_shapes[0]; s++) {
    int64_t M = block_shapes[s][0], N = block_shapes[s][1], K = block_shapes[s][2];
    int64_t na = (2 * M + 5) * (K + 5), nb = (N + 1) * (K + 2);
    float *af = malloc(sizeof(float) * (size_t)na), *bf = malloc(sizeof(float) * (size_t)nb);
    float *c1 = malloc(sizeof(float) * (size_t)(M * N)), *c2 = malloc(sizeof(float) * (size_t)(M * N));
    fill_random(af, na, (uint32_t)(70 + s), false);
    fill_random(bf, nb, (uint32_t)(90 + s), false);
    /* A(m, k): [M, K] rows K + 3 apart, [K, M] rows M + 3 apart (m contiguous), both strided */
    GemmSrc as[3] = {{.p = af, .si = K + 3, .sk = 1}, {.p = af, .si = 1, .sk = M + 3}, {.p = af, .si = 2, .sk = 2 * M + 1}};
    GemmSrc bs[2] = {{.p = bf, .si = K + 2, .sk = 1}, {.p = bf, .si = 1, .sk = N + 1}};
    for (int la = 0; la < 3; la++)
      for (int lb = 0; lb < 2; lb++) {
        char what[64];
        snprintf(what, sizeof what, "A layout %d, B layout %d", la, lb);
        packed_product(as[la], bs[lb], M, N, K, c1, false);
        expect_bound(as[la], bs[lb], M, N, K, c1, what);
        packed_product(as[la], bs[lb], M, N, K, c2, true);
        cr_assert(memcmp(c1, c2, sizeof(float) * (size_t)(M * N)) == 0, "%s: fast and portable bits differ (shape %zu)",
                  what, s);
      }
    free(af), free(bf), free(c1), free(c2);
  }
}

/* The fp32 backward's products as matmuls of two float inputs, x and y in
 * every transpose combination (dx = dy W, dW = dy^T x, x W^T, ...) at odd
 * sizes, several row blocks and k blocks, and x [3, R, K] by a y without
 * batch dims (its rows one operand): within the bound of double, the
 * same bits with 1 and 2 threads, and, where the packed GEMM runs them
 * (AVX-512, at most 1024 rows in all), exactly zero followed by one
 * fmaf per k in order. */
Test(cpu_gemm, float_matmuls_read_in_place_in_every_transpose) {
  static const int64_t shapes[][3] = {{37, 300, 130}, {600, 70, 45}, {20, 530, 300}, {13, 1, 33}, {9, 64, 1}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int tr = 0; tr < 6; tr++) {
      /* 4, 5: x [3, R, K] untransposed by y without batch dims (a backward's dx = dy W over [B, T, .]): its
       * rows of every batch are the product's M = 3 R */
      bool tx = tr < 4 && (tr & 1), ty = (tr & 2) || tr == 5, batched = tr >= 4;
      int64_t M = shapes[s][0] * (batched ? 3 : 1), K = shapes[s][1], N = shapes[s][2];
      int64_t xd[3] = {tx ? K : M, tx ? M : K}, yd[2] = {ty ? N : K, ty ? K : N};
      if (batched) xd[0] = 3, xd[1] = shapes[s][0], xd[2] = K;
      char text[512], xs[64];
      if (batched) snprintf(xs, sizeof xs, "%lld,%lld,%lld", (long long)xd[0], (long long)xd[1], (long long)xd[2]);
      else snprintf(xs, sizeof xs, "%lld,%lld", (long long)xd[0], (long long)xd[1]);
      snprintf(text, sizeof text, "func main(x: fp32[%s], y: fp32[%lld,%lld]) {\n  r = matmul(x, y%s%s);\n"
               "  return r;\n}\n", xs, (long long)yd[0], (long long)yd[1],
               tx ? ", transpose_x=true" : "", ty ? ", transpose_y=true" : "");
      char path[128];
      make_pkg(text, path, sizeof path);
      float *x = malloc(sizeof(float) * (size_t)(M * K)), *y = malloc(sizeof(float) * (size_t)(K * N));
      float *first = malloc(sizeof(float) * (size_t)(M * N));
      fill_random(x, M * K, (uint32_t)(41 + s), false);
      fill_random(y, K * N, (uint32_t)(61 + s), false);
      CpuTensor in[2] = {f32_tensor(x, batched ? 3 : 2, xd), f32_tensor(y, 2, yd)};
      for (uint32_t threads = 1; threads <= 2; threads++) {
        CpuOptions o = {.numerics = CPU_NUMERICS_FP32, .threads = threads};
        Loaded l;
        load_path_opts(&l, path, &o);
        CpuTensor out;
        cr_assert(cpu_run(l.c, in, &out, &l.d), "%s", l.diags.data);
        const float *r = out.data;
        if (threads == 1) {
          bool packed = gemm_packed_fast() && M > GEMV_ROWS && N > GEMV_ROWS && M <= 1024;
          for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
              double ref = 0, mag = 0;
              float chain = 0;
              for (int64_t k = 0; k < K; k++) {
                float a = x[tx ? k * M + m : m * K + k], b = y[ty ? n * K + k : k * N + n];
                double p = (double)a * (double)b;
                ref += p, mag += fabs(p);
                chain = fmaf(a, b, chain);
              }
              double bound = (double)K * ldexp(1.0, -24) * mag;
              cr_assert(fabs((double)r[m * N + n] - ref) <= bound, "shape %zu tx %d ty %d [%lld, %lld]: %.9g vs %.9g", s,
                        tx, ty, (long long)m, (long long)n, (double)r[m * N + n], ref);
              if (packed)
                cr_assert(memcmp(&r[m * N + n], &chain, sizeof chain) == 0,
                          "shape %zu tx %d ty %d [%lld, %lld]: %.9g, not the fma chain's %.9g", s, tx, ty, (long long)m,
                          (long long)n, (double)r[m * N + n], (double)chain);
            }
          memcpy(first, r, sizeof(float) * (size_t)(M * N));
        } else {
          cr_assert(memcmp(first, r, sizeof(float) * (size_t)(M * N)) == 0, "shape %zu tx %d ty %d: 2 threads differ", s,
                    tx, ty);
        }
        cpu_tensor_free(&out);
        unload(&l);
      }
      free(x), free(y), free(first);
      cleanup();
    }
}
