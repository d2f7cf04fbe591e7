/*
 * The CPU backend's fused attention (runtime/cpu/fusion.c, fuse_attention;
 * k_attention_fused.c) on what orionc makes of a split into q, k and v, the
 * head transposes, sdpa and the head merge: the chain is fused (the split,
 * the matmuls and the softmax never run), the result has the same bits at 1
 * and 2 threads and is within a stated bound of a double reference (and so
 * is the unfused run), causal and not, with an additive mask input (a row
 * all -inf: NaN, as softmax over nothing gives; scores so large that the
 * masked keys cannot be skipped), odd lengths (not a multiple of the row
 * block, of 4 or of 16) and one row, in fp32 and ANE numerics (fused where
 * the CPU has AVX-512; elsewhere the same checks hold unfused), and with the
 * heads of k and v also returned (a prefill's KV cache: those transposes
 * run). Reads the backend's internal header.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_check.h"
#include "cpu_internal.h"
#include "orion/fp16.h"

typedef struct Case {
  int B, H, T, D;
  bool causal, mask; /* causal=true; or an additive [T, T] mask input */
  bool half;         /* fp16 model in ANE numerics, else fp32 in fp32 numerics */
  float big;         /* inputs scaled by this (scores of tens of thousands: no key can be skipped) */
  bool cache;        /* kh and vh returned too, as a prefill returns its KV cache: their transposes run */
} Case;

/* Runs the program at path; *fused: whether the attention was fused and its statements elided. */
static CpuTensor run_one(const char *path, const CpuOptions *o, CpuTensor *in, bool *fused, CpuTensor *kv) {
  bool split_runs = kv != NULL; /* the cache's head transposes read the split's results */
  Loaded l;
  load_path_opts(&l, path, o);
  uint32_t n = 0, ran = 0; /* fused statements; softmax, matmul and split statements not elided */
  for (uint32_t si = 0; si < l.c->f->nstmts; si++) {
    n += l.c->fz[si].kind == FZ_ATTENTION;
    MilOpId op = l.c->ops[si] ? l.c->ops[si]->op : MIL_OP_COUNT;
    ran += (op == MIL_OP_SOFTMAX || op == MIL_OP_MATMUL || (op == MIL_OP_SPLIT && !split_runs)) &&
           l.c->fz[si].kind != FZ_ELIDED;
  }
  *fused = n == 1 && ran == 0;
  CpuTensor out[3];
  cr_assert(cpu_run(l.c, in, out, &l.d), "%s", l.diags.data);
  if (kv) kv[0] = out[1], kv[1] = out[2];
  unload(&l);
  return out[0];
}

static size_t bytes_of(const CpuTensor *t) { return (size_t)prod(t->dims, t->rank) * cpu_dtype_size(t->dtype); }

static float out_at(const CpuTensor *t, int64_t i) {
  return t->dtype == MIL_DT_FP16 ? fp16_to_float(((const uint16_t *)t->data)[i]) : ((const float *)t->data)[i];
}

static void check_case(Case k) {
  int B = k.B, H = k.H, T = k.T, D = k.D, C = H * D;
  const char *dt = k.half ? "fp16" : "fp32";
  char text[2048], path[128];
  char mdecl[64] = "";
  if (k.mask) snprintf(mdecl, sizeof mdecl, ", m: %s[%d,%d]", dt, T, T);
  snprintf(text, sizeof text,
           "func main(x: %s[%d,%d,%d]%s) {\n"
           "  q, k, v = split(x, axis=-1, num_splits=3);\n"
           "  q4 = reshape(q, shape=[%d, %d, %d, %d]);\n  k4 = reshape(k, shape=[%d, %d, %d, %d]);\n"
           "  v4 = reshape(v, shape=[%d, %d, %d, %d]);\n"
           "  qh = transpose(q4, perm=[0, 2, 1, 3]);\n  kh = transpose(k4, perm=[0, 2, 1, 3]);\n"
           "  vh = transpose(v4, perm=[0, 2, 1, 3]);\n"
           "  att = sdpa(qh, kh, vh%s);\n"
           "  att_t = transpose(att, perm=[0, 2, 1, 3]);\n  y = reshape(att_t, shape=[%d, %d, %d]);\n  return y%s;\n}\n",
           dt, B, T, 3 * C, mdecl, B, T, H, D, B, T, H, D, B, T, H, D, k.mask ? ", m" : k.causal ? ", causal=true" : "",
           B, T, C, k.cache ? ", key = kh, value = vh" : "");
  make_pkg(text, path, sizeof path);
  int64_t n = (int64_t)B * T * 3 * C;
  float *x = malloc(sizeof(float) * (size_t)n), *m = malloc(sizeof(float) * (size_t)T * T);
  uint16_t *xh = malloc(2 * (size_t)n), *mh = malloc(2 * (size_t)T * T);
  fill_random(x, n, (uint32_t)(T * 31 + D), false);
  for (int64_t i = 0; i < n; i++) {
    x[i] *= k.big;
    if (k.half) x[i] = fp16_to_float(xh[i] = fp16_from_float(x[i]));
  }
  for (int i = 0; i < T; i++) /* causal, -65504 above the diagonal as orionc writes it; row 1 all -inf */
    for (int j = 0; j < T; j++) {
      m[i * T + j] = i == 1 && T > 2 ? -INFINITY : j <= i ? (float)((i + j) % 3) * 0.5f : -65504.0f;
      mh[i * T + j] = fp16_from_float(m[i * T + j]);
    }
  int64_t xd[3] = {B, T, 3 * C}, md[2] = {T, T};
  CpuTensor in[2] = {{.dtype = k.half ? MIL_DT_FP16 : MIL_DT_FP32, .rank = 3, .data = k.half ? (void *)xh : (void *)x},
                     {.dtype = k.half ? MIL_DT_FP16 : MIL_DT_FP32, .rank = 2, .data = k.half ? (void *)mh : (void *)m}};
  memcpy(in[0].dims, xd, sizeof xd);
  memcpy(in[1].dims, md, sizeof md);
  CpuNumerics nm = k.half ? CPU_NUMERICS_ANE : CPU_NUMERICS_FP32;
  CpuOptions o1 = {.numerics = nm, .threads = 1}, o2 = {.numerics = nm, .threads = 2};
  CpuOptions ou = {.numerics = nm, .threads = 1, .unfused = true};
  bool f1, f2, fu;
  CpuTensor kv[2], kvu[2];
  CpuTensor y1 = run_one(path, &o1, in, &f1, k.cache ? kv : NULL);
  CpuTensor y2 = run_one(path, &o2, in, &f2, k.cache ? kvu : NULL);
  for (int c = 0; k.cache && c < 2; c++) cpu_tensor_free(&kvu[c]);
  CpuTensor yu = run_one(path, &ou, in, &fu, k.cache ? kvu : NULL);
  for (int c = 0; k.cache && c < 2; c++) { /* the cache outputs are the head transposes' copies */
    cr_assert(!memcmp(kv[c].data, kvu[c].data, bytes_of(&kv[c])), "T=%d: cache output %d differs", T, c);
    cpu_tensor_free(&kv[c]), cpu_tensor_free(&kvu[c]);
  }
  bool want = cpu_features()->avx512; /* the plan fuses it only there */
  cr_assert(f1 == want && f2 == want && !fu, "T=%d D=%d: fused %d, %d (want %d), unfused run fused %d", T, D, f1, f2,
            want, fu);
  size_t bytes = (size_t)B * T * C * (k.half ? 2 : 4);
  cr_assert(!memcmp(y1.data, y2.data, bytes), "T=%d D=%d %s: 1 and 2 threads differ", T, D, dt);
  /* The reference in double, and the bound: with u the unit roundoff of the numerics (2^-24 fp32, 2^-11 for
   * ANE's fp16 steps), each score t_j is within e_j = (D 2^-24 sum|q k| + 3u |t_j|) (scaled) of the exact one;
   * to first order the output moves by at most sum_j p_j e_j |v_j| + (sum_j p_j e_j) sum_j p_j |v_j|, plus
   * the weights' and the sum's own roundings, (2u + S 2^-24) sum_j p_j |v_j|, and the result's u |o|. Twice
   * that is allowed. */
  double u = k.half ? 0x1p-11 : 0x1p-24, scale = 1 / sqrt((double)D);
  double *t = malloc(sizeof(double) * (size_t)T), *e = malloc(sizeof(double) * (size_t)T);
  int64_t nan_rows = 0;
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++)
      for (int i = 0; i < T; i++) {
        const float *qi = x + ((int64_t)b * T + i) * 3 * C + h * D;
        double mx = -INFINITY;
        for (int j = 0; j < T; j++) {
          const float *kj = x + ((int64_t)b * T + j) * 3 * C + C + h * D;
          double s = 0, a = 0;
          for (int d = 0; d < D; d++) s += (double)qi[d] * (double)kj[d], a += fabs((double)qi[d] * (double)kj[d]);
          double mk = k.mask ? (double)m[i * T + j] : k.causal && j > i ? -65504.0 : 0;
          t[j] = s * scale + mk;
          e[j] = (D * 0x1p-24 * a + 3 * u * fabs(s)) * scale + 3 * u * fabs(mk);
          mx = fmax(mx, t[j]);
        }
        double sum = 0;
        for (int j = 0; j < T; j++) sum += exp(t[j] - mx);
        for (int c = 0; c < D; c++) {
          double o = 0, pv = 0, pe = 0, pev = 0;
          for (int j = 0; j < T; j++) {
            double p = exp(t[j] - mx) / sum, vj = x[((int64_t)b * T + j) * 3 * C + 2 * C + h * D + c];
            o += p * vj, pv += p * fabs(vj), pe += p * e[j], pev += p * e[j] * fabs(vj);
          }
          double bound = 2 * (pev + pe * pv + (2 * u + T * 0x1p-24) * pv + u * fabs(o)) + 1e-30;
          int64_t at = ((int64_t)b * T + i) * C + h * D + c;
          float got = out_at(&y1, at), unf = out_at(&yu, at);
          if (k.mask && i == 1 && T > 2) { /* every key -inf */
            cr_assert(isnan(got) && isnan(unf), "row 1: fused %g, unfused %g, want NaN", (double)got, (double)unf);
            nan_rows++;
            continue;
          }
          cr_assert(fabs((double)got - o) <= bound, "%s B%d H%d T%d D%d [%d, %d, %d, %d]: fused %.9g, want %.9g (bound %g)",
                    dt, B, H, T, D, b, i, h, c, (double)got, o, bound);
          cr_assert(fabs((double)unf - o) <= bound, "%s T%d D%d [%d, %d, %d, %d]: unfused %.9g, want %.9g (bound %g)", dt,
                    T, D, b, i, h, c, (double)unf, o, bound);
        }
      }
  cr_assert_eq(nan_rows, k.mask && T > 2 ? (int64_t)B * H * D : 0);
  free(t), free(e), free(x), free(m), free(xh), free(mh);
  cpu_tensor_free(&y1), cpu_tensor_free(&y2), cpu_tensor_free(&yu);
  cleanup();
}

Test(cpu_attention_fused, causal_fp32) {
  check_case((Case){.B = 1, .H = 2, .T = 128, .D = 64, .causal = true, .big = 1});
  check_case((Case){.B = 2, .H = 3, .T = 37, .D = 20, .causal = true, .big = 1});
  check_case((Case){.B = 1, .H = 2, .T = 1, .D = 16, .causal = true, .big = 1});
}

Test(cpu_attention_fused, cache_outputs_keep_their_transposes) {
  check_case((Case){.B = 1, .H = 2, .T = 16, .D = 16, .causal = true, .big = 1, .cache = true});
  check_case((Case){.B = 1, .H = 2, .T = 37, .D = 16, .causal = true, .half = true, .big = 1, .cache = true});
}

Test(cpu_attention_fused, unmasked_fp32) {
  check_case((Case){.B = 2, .H = 2, .T = 45, .D = 32, .big = 1});
  check_case((Case){.B = 1, .H = 1, .T = 3, .D = 7, .big = 1});
}

Test(cpu_attention_fused, mask_input_fp32) {
  check_case((Case){.B = 1, .H = 3, .T = 70, .D = 24, .mask = true, .big = 1});
  /* scores of tens of thousands: a masked key can be a row's largest, so none is skipped */
  check_case((Case){.B = 1, .H = 2, .T = 33, .D = 16, .mask = true, .big = 60});
}

Test(cpu_attention_fused, ane_numerics) {
  check_case((Case){.B = 1, .H = 2, .T = 128, .D = 64, .causal = true, .half = true, .big = 1});
  check_case((Case){.B = 2, .H = 2, .T = 37, .D = 20, .causal = true, .half = true, .big = 1});
  check_case((Case){.B = 1, .H = 2, .T = 29, .D = 16, .mask = true, .half = true, .big = 1});
  check_case((Case){.B = 1, .H = 2, .T = 19, .D = 16, .half = true, .big = 1});
}
