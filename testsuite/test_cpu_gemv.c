/*
 * The CPU backend's matrix-vector kernels (runtime/cpu/k_gemv.c) and fp16
 * inputs read in place: the kernels against a double-precision reference
 * within the fp32 reassociation bound, their strided forms giving the same
 * bits; a linear with an fp16 weight and few rows against ir_eval; x·W with
 * an fp16 weight read in place (against ir_eval, the same bits with any
 * thread count, converted when a many-row matmul reads it too); decode's
 * q k^T and p v against an fp16 KV cache given as an input, which is never
 * converted (the backend's counter) and gives the bits of the converted run.
 * Reads the backend's internal header for the kernels and the counter.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_check.h"
#include "cpu_internal.h"
#include "orion/fp16.h"

/* Inputs: s [S, K] floats, h [L, K] (dot) or [K, L] (axpy) as fp16 bits and
 * as the floats they are. */
typedef struct Case {
  int64_t S, L, K, ldh;
  float *s, *st, *hf;
  uint16_t *hh;
} Case;

static void case_make(Case *c, int64_t S, int64_t L, int64_t K, bool dot, uint32_t seed) {
  *c = (Case){.S = S, .L = L, .K = K, .ldh = (dot ? K : L) + 3};
  int64_t nh = (dot ? L : K) * c->ldh;
  c->s = malloc(sizeof(float) * (size_t)(S * K));
  c->st = malloc(sizeof(float) * (size_t)(S * K));
  c->hf = malloc(sizeof(float) * (size_t)nh);
  c->hh = malloc(sizeof(uint16_t) * (size_t)nh);
  fill_random(c->s, S * K, seed, false);
  fill_random(c->hf, nh, seed + 1, false);
  for (int64_t i = 0; i < nh; i++) c->hf[i] = fp16_to_float(c->hh[i] = fp16_from_float(c->hf[i]));
  for (int64_t i = 0; i < S; i++)
    for (int64_t k = 0; k < K; k++) c->st[k * S + i] = c->s[i * K + k]; /* s transposed: [K, S] */
}

static void case_free(Case *c) {
  free(c->s), free(c->st), free(c->hf), free(c->hh);
}

/* out[i, j] against the exact sum: |out - ref| <= K 2^-24 sum |s h| (float
 * accumulation of K products, each exact in double). */
static void expect_near(const Case *c, bool dot, const float *out, const char *what) {
  for (int64_t i = 0; i < c->S; i++)
    for (int64_t j = 0; j < c->L; j++) {
      double ref = 0, mag = 0;
      for (int64_t k = 0; k < c->K; k++) {
        double p = (double)c->s[i * c->K + k] * (double)c->hf[dot ? j * c->ldh + k : k * c->ldh + j];
        ref += p, mag += fabs(p);
      }
      double bound = (double)c->K * ldexp(1.0, -24) * mag;
      double got = (double)out[i * c->L + j];
      cr_assert(fabs(got - ref) <= bound, "%s S=%lld L=%lld K=%lld [%lld, %lld]: %.9g vs %.9g (bound %.3g)", what,
                (long long)c->S, (long long)c->L, (long long)c->K, (long long)i, (long long)j, got, ref, bound);
    }
}

static const int64_t shapes[][3] = {{1, 1, 1}, {1, 5, 17}, {2, 4, 16}, {3, 130, 64}, {8, 7, 775}, {5, 67, 300}};

/* gemv_dot (and its portable form): fp16 and float h, the reference bound; s read down its columns
 * (sk, a conv's layout) and the output transposed give the same bits. */
Test(cpu_gemv, dot_within_the_fp32_bound_and_layouts_agree) {
  for (size_t n = 0; n < sizeof shapes / sizeof shapes[0]; n++) {
    Case c;
    case_make(&c, shapes[n][0], shapes[n][1], shapes[n][2], true, (uint32_t)(7 + n));
    size_t no = (size_t)(c.S * c.L);
    float *a = malloc(sizeof(float) * no), *b = malloc(sizeof(float) * no), *t = malloc(sizeof(float) * no);
    for (int h16 = 0; h16 < 2; h16++) {
      const void *h = h16 ? (const void *)c.hh : (const void *)c.hf;
      gemv_dot_portable(c.s, c.S, c.K, 1, h, h16, c.ldh, c.L, c.K, a, c.L, 1);
      expect_near(&c, true, a, h16 ? "portable dot fp16" : "portable dot fp32");
      gemv_dot(c.s, c.S, c.K, 1, h, h16, c.ldh, c.L, c.K, a, c.L, 1);
      expect_near(&c, true, a, h16 ? "dot fp16" : "dot fp32");
      gemv_dot(c.st, c.S, 1, c.S, h, h16, c.ldh, c.L, c.K, b, c.L, 1);
      cr_assert(memcmp(a, b, no * sizeof(float)) == 0, "dot: s strided differs (shape %zu)", n);
      gemv_dot(c.s, c.S, c.K, 1, h, h16, c.ldh, c.L, c.K, t, 1, c.S);
      for (int64_t i = 0; i < c.S; i++)
        for (int64_t j = 0; j < c.L; j++)
          cr_assert(memcmp(&a[i * c.L + j], &t[j * c.S + i], sizeof(float)) == 0, "dot: transposed output differs");
    }
    free(a), free(b), free(t);
    case_free(&c);
  }
}

Test(cpu_gemv, axpy_within_the_fp32_bound_and_layouts_agree) {
  for (size_t n = 0; n < sizeof shapes / sizeof shapes[0]; n++) {
    Case c;
    case_make(&c, shapes[n][0], shapes[n][1], shapes[n][2], false, (uint32_t)(17 + n));
    size_t no = (size_t)(c.S * c.L);
    float *a = malloc(sizeof(float) * no), *t = malloc(sizeof(float) * no);
    for (int h16 = 0; h16 < 2; h16++) {
      const void *h = h16 ? (const void *)c.hh : (const void *)c.hf;
      gemv_axpy_portable(c.s, c.S, c.K, h, h16, c.ldh, c.L, c.K, a, c.L, 1);
      expect_near(&c, false, a, h16 ? "portable axpy fp16" : "portable axpy fp32");
      gemv_axpy(c.s, c.S, c.K, h, h16, c.ldh, c.L, c.K, a, c.L, 1);
      expect_near(&c, false, a, h16 ? "axpy fp16" : "axpy fp32");
      gemv_axpy(c.s, c.S, c.K, h, h16, c.ldh, c.L, c.K, t, 1, c.S);
      for (int64_t i = 0; i < c.S; i++)
        for (int64_t j = 0; j < c.L; j++)
          cr_assert(memcmp(&a[i * c.L + j], &t[j * c.S + i], sizeof(float)) == 0, "axpy: transposed output differs");
    }
    free(a), free(t);
    case_free(&c);
  }
}

/* A linear with an fp16 weight from the weight file (read in place: its
 * other use is a gather, as a tied embedding's) and 1 or 3 rows (the gemv
 * path), with a bias and without, in both numerics (the
 * results cast to fp32, so fp32 numerics is checked to fp32's precision). */
Test(cpu_gemv, linear_with_few_rows_against_ir_eval) {
  const char *text = "func main(x: fp32[1,3,96], y: fp32[1,1,96], t: int32[1,2]) {\n"
                     "  param w: fp16[300,96] = normal(seed=1, std=0.5);\n"
                     "  param b: fp16[300] = normal(seed=2, std=0.5);\n"
                     "  xh = cast(x, dtype=\"fp16\");\n  yh = cast(y, dtype=\"fp16\");\n"
                     "  a = linear(xh, w, b);\n  c = linear(yh, w);\n  e = gather(w, t, axis=0);\n"
                     "  af = cast(a, dtype=\"fp32\");\n  cf = cast(c, dtype=\"fp32\");\n"
                     "  return af, cf, e;\n"
                     "}\n";
  IntRange rows[] = {{"t", 0, 300}, {NULL, 0, 0}};
  check("linear rows 3 and 1", text, CPU_NUMERICS_FP32, 1e-5, rows, 5);
  check("linear rows 3 and 1", text, CPU_NUMERICS_ANE, 2e-3, rows, 5);
  char path[128];
  make_pkg(text, path, sizeof path);
  Loaded l;
  load_prepared(&l, path, CPU_NUMERICS_FP32);
  uint32_t in_place = 0;
  for (uint32_t s = 0; s < l.c->nslots; s++)
    in_place += l.c->vals[s].st == ST_H16 && l.c->vals[s].n == 300 * 96 && l.c->slots[s].kind == SK_CONST;
  cr_assert_eq(in_place, 1, "the weight read by linear and gather is not fp16 in place");
  unload(&l);
  cleanup();
}

/* Decode's attention against a KV cache given as fp16 inputs k and v: s = q
 * k^T, p = softmax(s), o = p v, and t = v^T p^T (v as matmul's x). `extra`
 * adds a reduce_sum of k, which cannot read fp16, so k is converted. */
static char *attention_program(bool extra) {
  static const char *head =
      MIL_HEAD "    func main<ios18>(tensor<fp32, [1, 2, 1, 16]> qf, tensor<fp16, [1, 2, 40, 16]> k, "
               "tensor<fp16, [1, 2, 40, 16]> v) {\n"
               "        tensor<fp16, [1, 2, 1, 16]> q = cast(dtype = " S_("fp16") ", x = qf)[name = " S_("q") "];\n"
               "        tensor<fp16, [1, 2, 1, 40]> s = matmul(transpose_x = bool(false), transpose_y = bool(true), "
               "x = q, y = k)[name = " S_("s") "];\n"
               "        tensor<fp16, [1, 2, 1, 40]> p = softmax(axis = int32(-1), x = s)[name = " S_("p") "];\n"
               "        tensor<fp16, [1, 2, 1, 16]> o = matmul(transpose_x = bool(false), transpose_y = bool(false), "
               "x = p, y = v)[name = " S_("o") "];\n"
               "        tensor<fp16, [1, 2, 16, 1]> t = matmul(transpose_x = bool(true), transpose_y = bool(true), "
               "x = v, y = p)[name = " S_("t") "];\n";
  const char *sum = "        tensor<fp16, [1, 2, 40]> r = reduce_sum(axes = tensor<int32, [1]>([-1]), keep_dims = "
                    "bool(false), x = k)[name = " S_("r") "];\n";
  size_t n = strlen(head) + strlen(sum) + 64;
  char *text = malloc(n);
  snprintf(text, n, "%s%s    } -> (s, o, t%s);\n}\n", head, extra ? sum : "", extra ? ", r" : "");
  return text;
}

/* The outputs s [80], o [32] and t [32] (fp16 bits) of the third of three runs. */
static void run_attention(bool extra, CpuNumerics mode, const CpuTensor *in, uint16_t *out[3], bool *k_in_place,
                          uint64_t *converted) {
  static const size_t count[3] = {80, 32, 32};
  char *text = attention_program(extra);
  write_bare(text);
  free(text);
  Loaded l;
  CpuOptions opt = {.numerics = mode, .threads = 2};
  load_opts(&l, &opt);
  cr_assert_not_null(l.c, "%s", l.diags.data);
  CpuTensor o[4];
  for (int run = 0; run < 3; run++) {
    cr_assert(cpu_run(l.c, in, o, &l.d), "%s", l.diags.data);
    for (int i = 0; i < 3; i++) memcpy(out[i], o[i].data, count[i] * sizeof(uint16_t));
    for (int i = 0; i < (extra ? 4 : 3); i++) cpu_tensor_free(&o[i]);
  }
  *k_in_place = l.c->vals[1].st == ST_H16;
  *converted = l.c->fp16_inputs_converted;
  cr_assert_eq(l.c->vals[2].st, ST_H16, "v is read only by matmuls: in place");
  unload(&l);
  cleanup();
}

Test(cpu_gemv, fp16_kv_cache_is_read_in_place_with_the_converted_bits) {
  float qf[32], kf[1280], vf[1280];
  uint16_t kh[1280], vh[1280], kh0[1280], vh0[1280];
  fill_random(qf, 32, 41, false);
  for (int i = 0; i < 32; i++) qf[i] = fp16_to_float(fp16_from_float(qf[i])); /* the program casts q to fp16 */
  fill_random(kf, 1280, 42, false);
  fill_random(vf, 1280, 43, false);
  for (int i = 0; i < 1280; i++) {
    kf[i] = fp16_to_float(kh[i] = fp16_from_float(kf[i]));
    vf[i] = fp16_to_float(vh[i] = fp16_from_float(vf[i]));
  }
  memcpy(kh0, kh, sizeof kh), memcpy(vh0, vh, sizeof vh);
  CpuTensor in[3] = {{.dtype = MIL_DT_FP32, .rank = 4, .dims = {1, 2, 1, 16}, .data = qf},
                     {.dtype = MIL_DT_FP16, .rank = 4, .dims = {1, 2, 40, 16}, .data = kh},
                     {.dtype = MIL_DT_FP16, .rank = 4, .dims = {1, 2, 40, 16}, .data = vh}};
  for (int m = 0; m < 2; m++) {
    CpuNumerics mode = m ? CPU_NUMERICS_ANE : CPU_NUMERICS_FP32;
    uint16_t s1[80], o1[32], t1[32], s2[80], o2[32], t2[32];
    uint16_t *a[3] = {s1, o1, t1}, *b[3] = {s2, o2, t2};
    bool in_place, in_place2;
    uint64_t conv, conv2;
    run_attention(false, mode, in, a, &in_place, &conv);
    run_attention(true, mode, in, b, &in_place2, &conv2);
    cr_assert(in_place, "mode %d: the cache inputs are not read in place", m);
    cr_assert_eq(conv, 0, "mode %d: %llu fp16 inputs converted over three runs", m, (unsigned long long)conv);
    cr_assert_not(in_place2, "mode %d: k is read by reduce_sum, so it must be converted", m);
    cr_assert_eq(conv2, 3, "mode %d: k converted once per run (3 runs): %llu", m, (unsigned long long)conv2);
    cr_assert(memcmp(s1, s2, sizeof s1) == 0 && memcmp(o1, o2, sizeof o1) == 0 && memcmp(t1, t2, sizeof t1) == 0,
              "mode %d: in place and converted differ", m);
    cr_assert(memcmp(kh, kh0, sizeof kh) == 0 && memcmp(vh, vh0, sizeof vh) == 0, "the caller's cache was written");
    if (m) continue;
    /* fp32 numerics against double (to the outputs' fp16 rounding): s; o = p v and t = (p v)^T agree. */
    for (int hd = 0; hd < 2; hd++)
      for (int j = 0; j < 40; j++) {
        double r = 0;
        for (int d = 0; d < 16; d++) r += (double)qf[hd * 16 + d] * (double)kf[(hd * 40 + j) * 16 + d];
        double got = (double)fp16_to_float(s1[hd * 40 + j]);
        cr_assert(fabs(got - r) <= ldexp(fabs(r), -10) + 1e-6, "s[%d, %d] = %g, want %g", hd, j, got, r);
      }
    for (int hd = 0; hd < 2; hd++)
      for (int d = 0; d < 16; d++)
        cr_assert_eq(o1[hd * 16 + d], t1[hd * 16 + d], "o and t^T differ at [%d, %d]", hd, d);
  }
}

/* Few-row matmuls against fp16 inputs read in place, with the batch shapes
 * decode meets: grouped-query rows (3 query rows per key head), batch dims
 * broadcast both ways, the value product, and the cache as x (transposed);
 * against ir_eval in fp32 numerics (results cast to fp32) and ane numerics. */
Test(cpu_gemv, fp16_input_matmuls_with_broadcast_batches_against_ir_eval) {
  const char *text = "func main(q: fp16[1,2,3,16], r: fp16[2,1,1,16], p: fp16[1,2,3,40], k: fp16[1,2,40,16],\n"
                     "          v: fp16[1,2,40,16]) {\n"
                     "  s: fp16[1,2,3,40] = matmul(q, k, transpose_y=true);\n"
                     "  b: fp16[2,2,1,40] = matmul(r, k, transpose_y=true);\n"
                     "  o: fp16[1,2,3,16] = matmul(p, v);\n"
                     "  t: fp16[1,2,16,3] = matmul(v, p, transpose_x=true, transpose_y=true);\n"
                     "  sf = cast(s, dtype=\"fp32\");\n  bf = cast(b, dtype=\"fp32\");\n"
                     "  of = cast(o, dtype=\"fp32\");\n  tf = cast(t, dtype=\"fp32\");\n"
                     "  return sf, bf, of, tf;\n"
                     "}\n";
  check("fp16 input matmuls", text, CPU_NUMERICS_FP32, 1e-5, NULL, 9);
  check("fp16 input matmuls", text, CPU_NUMERICS_ANE, 4e-3, NULL, 9);
  char path[128];
  make_pkg(text, path, sizeof path);
  Loaded l;
  load_prepared(&l, path, CPU_NUMERICS_FP32);
  for (uint32_t i = 0; i < orion_input_count(l.p, 0); i++) {
    const char *name = orion_input(l.p, 0, i)->name;
    bool cache = !strcmp(name, "k") || !strcmp(name, "v");
    cr_assert_eq(l.c->vals[l.c->in_param[i]].st == ST_H16, cache, "input %s: in place %d", name, cache);
  }
  unload(&l);
  cleanup();
}

/* x·W with an fp16 weight W [K, N] from the weight file (GPT-2's Conv1D in
 * decode): read in place by gemv_axpy when every use streams it (1 or 3
 * rows of x), converted to fp32 when one use has more rows than the gemv
 * kernels take (12: sgemm); against ir_eval in both numerics. */
Test(cpu_gemv, matmul_reads_an_fp16_weight_in_place_when_every_use_streams_it) {
  const char *text = "func main(x: fp32[1,3,96], y: fp32[1,1,96], z: fp32[1,12,96]) {\n"
                     "  param w: fp16[96,300] = normal(seed=1, std=0.5);\n"
                     "  param u: fp16[96,200] = normal(seed=2, std=0.5);\n"
                     "  xh = cast(x, dtype=\"fp16\");\n  yh = cast(y, dtype=\"fp16\");\n"
                     "  zh = cast(z, dtype=\"fp16\");\n"
                     "  a = matmul(xh, w);\n  c = matmul(yh, w);\n  d = matmul(yh, u);\n  e = matmul(zh, u);\n"
                     "  af = cast(a, dtype=\"fp32\");\n  cf = cast(c, dtype=\"fp32\");\n"
                     "  df = cast(d, dtype=\"fp32\");\n  ef = cast(e, dtype=\"fp32\");\n"
                     "  return af, cf, df, ef;\n"
                     "}\n";
  check("matmul x W, rows 3, 1 and 12", text, CPU_NUMERICS_FP32, 1e-5, NULL, 9);
  check("matmul x W, rows 3, 1 and 12", text, CPU_NUMERICS_ANE, 2e-3, NULL, 9);
  char path[128];
  make_pkg(text, path, sizeof path);
  Loaded l;
  load_prepared(&l, path, CPU_NUMERICS_FP32);
  uint32_t w_in_place = 0, u_in_place = 0, u_converted = 0;
  for (uint32_t s = 0; s < l.c->nslots; s++) {
    if (l.c->slots[s].kind != SK_CONST) continue;
    w_in_place += l.c->vals[s].st == ST_H16 && l.c->vals[s].n == 96 * 300;
    u_in_place += l.c->vals[s].st == ST_H16 && l.c->vals[s].n == 96 * 200;
    u_converted += l.c->vals[s].st == ST_F32 && l.c->vals[s].n == 96 * 200;
  }
  cr_assert_eq(w_in_place, 1, "the weight every matmul streams is not fp16 in place");
  /* A 12-row product by u takes the packed GEMM where it runs (AVX-512), which reads u's fp16 in place too;
   * elsewhere it is sgemm on a converted copy. */
  if (gemm_packed_fast())
    cr_assert(u_in_place == 1 && u_converted == 0, "the weight the packed GEMM and gemv_axpy read is not in place");
  else
    cr_assert(u_in_place == 0 && u_converted == 1, "the weight a 12-row matmul reads is not converted");
  unload(&l);
  cleanup();
}

/* x·W read in place in several row pieces (K 300: 128, 128 and 44 rows, the
 * partial sums added in piece order) and more columns than one chunk of
 * partial sums (N 4099): against ir_eval, and the same bits with 1, 2 and 3
 * threads (the pieces follow K alone; the next rows' prefetch reads
 * nothing it could change). */
Test(cpu_gemv, matmul_in_place_row_pieces_give_the_same_bits_with_any_thread_count) {
  const char *text = "func main(x: fp32[1,3,300], y: fp32[1,1,300]) {\n"
                     "  param w: fp16[300,4099] = normal(seed=3, std=0.5);\n"
                     "  xh = cast(x, dtype=\"fp16\");\n  yh = cast(y, dtype=\"fp16\");\n"
                     "  a = matmul(xh, w);\n  c = matmul(yh, w);\n"
                     "  af = cast(a, dtype=\"fp32\");\n  cf = cast(c, dtype=\"fp32\");\n"
                     "  return af, cf;\n"
                     "}\n";
  check("matmul x W, 3 row pieces", text, CPU_NUMERICS_FP32, 1e-5, NULL, 11);
  char path[128];
  make_pkg(text, path, sizeof path);
  float x[3 * 300], y[300];
  fill_random(x, 3 * 300, 5, false);
  fill_random(y, 300, 6, false);
  CpuTensor in[2] = {f32_tensor(x, 3, (int64_t[]){1, 3, 300}), f32_tensor(y, 3, (int64_t[]){1, 1, 300})};
  CpuTensor out[3][2];
  for (uint32_t threads = 1; threads <= 3; threads++) {
    Loaded l;
    load(&l, path, CPU_NUMERICS_FP32); /* for its sources and diagnostics; prepared again with the thread count */
    cpu_free(l.c);
    CpuOptions o = {.numerics = CPU_NUMERICS_FP32, .threads = threads};
    l.c = cpu_prepare_with(l.p, 0, &o, &l.d);
    cr_assert_not_null(l.c, "%s", l.diags.data);
    uint32_t in_place = 0;
    for (uint32_t s = 0; s < l.c->nslots; s++)
      in_place += l.c->slots[s].kind == SK_CONST && l.c->vals[s].st == ST_H16 && l.c->vals[s].n == 300 * 4099;
    cr_assert_eq(in_place, 1, "the weight is not read in place");
    cr_assert(cpu_run(l.c, in, out[threads - 1], &l.d), "%s", l.diags.data);
    unload(&l);
  }
  for (uint32_t k = 0; k < 2; k++) {
    size_t bytes = (size_t)prod(out[0][k].dims, out[0][k].rank) * sizeof(float);
    for (uint32_t t = 1; t < 3; t++) {
      cr_assert(memcmp(out[0][k].data, out[t][k].data, bytes) == 0, "output %u differs between 1 and %u threads", k,
                t + 1);
      cpu_tensor_free(&out[t][k]);
    }
    cpu_tensor_free(&out[0][k]);
  }
  cleanup();
}

/* x·W read in place in row pieces gives, bit for bit, each 128-row piece's
 * gemv_axpy sums added in piece order (0, 1, 2, ...) for every output: the
 * order the backend promises, whichever way it walks the partial sums. */
Test(cpu_gemv, matmul_in_place_row_pieces_are_added_in_piece_order) {
  enum { S = 3, K = 300, N = 1000, ROWS = 128 };
  const char *text = "func main(x: fp32[1,3,300]) {\n"
                     "  param w: fp16[300,1000] = normal(seed=4, std=0.5);\n"
                     "  xh = cast(x, dtype=\"fp16\");\n  a = matmul(xh, w);\n  af = cast(a, dtype=\"fp32\");\n"
                     "  return af;\n"
                     "}\n";
  char path[128];
  make_pkg(text, path, sizeof path);
  float x[S * K], xr[S * K];
  fill_random(x, S * K, 7, false);
  for (int i = 0; i < S * K; i++) xr[i] = fp16_to_float(fp16_from_float(x[i])); /* what xh holds */
  Loaded l;
  load(&l, path, CPU_NUMERICS_FP32);
  const uint16_t *w = NULL;
  for (uint32_t s = 0; s < l.c->nslots; s++)
    if (l.c->slots[s].kind == SK_CONST && l.c->vals[s].st == ST_H16 && l.c->vals[s].n == K * N) w = l.c->vals[s].p;
  cr_assert_not_null(w, "the weight is not read in place");
  CpuTensor in = f32_tensor(x, 3, (int64_t[]){1, S, K}), out;
  cr_assert(cpu_run(l.c, &in, &out, &l.d), "%s", l.diags.data);
  float *want = calloc(S * N, sizeof(float)), *part = malloc(sizeof(float) * S * N);
  for (int k0 = 0; k0 < K; k0 += ROWS) {
    int nk = K - k0 < ROWS ? K - k0 : ROWS;
    gemv_axpy(xr + k0, S, K, w + (size_t)k0 * N, true, N, N, nk, part, N, 1);
    for (int e = 0; e < S * N; e++) want[e] = k0 == 0 ? part[e] : want[e] + part[e];
  }
  const float *got = out_f32(&out);
  for (int e = 0; e < S * N; e++)
    cr_assert(memcmp(&got[e], &want[e], sizeof(float)) == 0, "output %d: %.9g, pieces in order give %.9g", e,
              (double)got[e], (double)want[e]);
  free(want), free(part);
  cpu_tensor_free(&out);
  unload(&l);
  cleanup();
}

/* A product of two fp16 weights with few rows ([8, 4096] x [4096, 8]): each
 * could be streamed against the other, but not both in place. Where the
 * packed GEMM runs (AVX-512) it takes the product with y read in place and x
 * converted; elsewhere both are converted (sgemm). Against ir_eval. */
Test(cpu_gemv, a_product_of_two_weights_is_never_read_in_place_twice) {
  const char *text = "func main(x: fp32[1,8]) {\n"
                     "  param a: fp16[8,4096] = normal(seed=1, std=0.5);\n"
                     "  param b: fp16[4096,8] = normal(seed=2, std=0.5);\n"
                     "  c = matmul(a, b);\n  cf = cast(c, dtype=\"fp32\");\n  y = add(cf, x);\n"
                     "  return y;\n"
                     "}\n";
  check("matmul of two weights", text, CPU_NUMERICS_FP32, 1e-5, NULL, 13);
  char path[128];
  make_pkg(text, path, sizeof path);
  Loaded l;
  load_prepared(&l, path, CPU_NUMERICS_FP32);
  uint32_t converted = 0;
  for (uint32_t s = 0; s < l.c->nslots; s++)
    converted += l.c->slots[s].kind == SK_CONST && l.c->vals[s].st == ST_F32 && l.c->vals[s].n == 8 * 4096;
  if (gemm_packed_fast())
    cr_assert_eq(converted, 1, "not exactly x converted for the packed GEMM");
  else
    cr_assert_eq(converted, 2, "the two weights are not both converted");
  unload(&l);
  cleanup();
}
