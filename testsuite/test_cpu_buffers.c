/*
 * The CPU backend's buffers and runs: outputs into the caller's buffers,
 * planned buffers reused only for dead values, identical results with any
 * number of threads, fp16 inputs and outputs converted in pieces, weights
 * set and reloaded, and the ane numerics' rounding against
 * fp16_from_float. (Split from test_cpu.c; the helpers are cpu_check.c's.)
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

/* ---- planned buffers, caller buffers, threads, weight updates ---- */

/* fp32 outputs land in the caller's buffers (written by the op that
 * computes them); fp16 outputs are converted into them; a returned input is
 * copied. The program runs twice into the same buffers with new inputs. */
Test(cpu, outputs_into_caller_buffers) {
  write_bare(MIL_HEAD "    func main<ios18>(tensor<fp32, [4]> x) {\n"
                      "        tensor<fp32, [4]> a = mul(x = x, y = fp32(2))[name = string(\"a\")];\n"
                      "        tensor<int32, [2]> shp = const()[name = string(\"shp\"), val = tensor<int32, [2]>([2, 2])];\n"
                      "        tensor<fp32, [2, 2]> r = reshape(shape = shp, x = a)[name = string(\"r\")];\n"
                      "        tensor<fp16, [4]> h = cast(dtype = string(\"fp16\"), x = x)[name = string(\"h\")];\n"
                      "    } -> (r, h, x);\n}\n");
  Loaded l;
  load(&l, dir, CPU_NUMERICS_FP32);
  cr_assert_not_null(l.c, "%s", l.diags.data);
  float r[4] = {0}, xo[4] = {0};
  uint16_t h[4] = {0};
  CpuTensor out[3] = {{.dtype = MIL_DT_FP32, .rank = 2, .dims = {2, 2}, .data = r},
                      {.dtype = MIL_DT_FP16, .rank = 1, .dims = {4}, .data = h},
                      {.dtype = MIL_DT_FP32, .rank = 1, .dims = {4}, .data = xo}};
  for (int round = 0; round < 2; round++) {
    float x[4] = {1, 2.5f, -3, (float)round};
    CpuTensor in = {.dtype = MIL_DT_FP32, .rank = 1, .dims = {4}, .data = x};
    cr_assert(cpu_run_into(l.c, &in, out, &l.d), "%s", l.diags.data);
    for (int i = 0; i < 4; i++) {
      cr_assert_float_eq(r[i], 2 * x[i], 0, "round %d r[%d]", round, i);
      cr_assert_float_eq(fp16_to_float(h[i]), x[i], 0, "round %d h[%d]", round, i);
      cr_assert_float_eq(xo[i], x[i], 0, "round %d x[%d]", round, i);
    }
  }
  /* A caller buffer of the wrong shape is refused, naming the output. */
  CpuTensor bad[3] = {out[0], out[1], out[2]};
  bad[0].dims[1] = 3;
  float x[4] = {0};
  CpuTensor in = {.dtype = MIL_DT_FP32, .rank = 1, .dims = {4}, .data = x};
  cr_assert_not(cpu_run_into(l.c, &in, bad, &l.d));
  cr_assert_not_null(strstr(l.diags.data, "output 0 ('r') must be tensor<fp32, [2, 2]>"), "%s", l.diags.data);
  unload(&l);
  cleanup();
}

/* Values whose lifetimes overlap must not share a planned buffer, and
 * values that are dead must let later ones reuse their memory: t1 and t2 are
 * alive together (t2 until the end), t3 reuses t1's place once t1 is dead.
 * A planner that reused a buffer too early would change y. */
Test(cpu, planned_buffers_reuse_only_dead_values) {
  write_bare(MIL_HEAD "    func main<ios18>(tensor<fp32, [256]> x) {\n"
                      "        tensor<fp32, [256]> t1 = add(x = x, y = fp32(1))[name = string(\"t1\")];\n"
                      "        tensor<fp32, [256]> t2 = mul(x = x, y = fp32(3))[name = string(\"t2\")];\n"
                      "        tensor<fp32, [256]> t3 = mul(x = t1, y = t1)[name = string(\"t3\")];\n"
                      "        tensor<fp32, [256]> t4 = add(x = t3, y = fp32(5))[name = string(\"t4\")];\n"
                      "        tensor<fp32, [256]> t5 = sub(x = t4, y = x)[name = string(\"t5\")];\n"
                      "        tensor<fp32, [256]> t6 = mul(x = t5, y = fp32(0.5))[name = string(\"t6\")];\n"
                      "        tensor<fp32, [256]> y = add(x = t6, y = t2)[name = string(\"y\")];\n"
                      "    } -> (y);\n}\n");
  Loaded l;
  load(&l, dir, CPU_NUMERICS_FP32);
  cr_assert_not_null(l.c, "%s", l.diags.data);
  /* Seven 1 KiB values, at most three alive at once (y is the caller's). */
  cr_assert_leq(cpu_planned_bytes(l.c), 4 * 1024, "planned %zu bytes", cpu_planned_bytes(l.c));
  float x[256], y[256];
  for (int i = 0; i < 256; i++) x[i] = (float)(i % 17) - 8;
  CpuTensor in = {.dtype = MIL_DT_FP32, .rank = 1, .dims = {256}, .data = x};
  CpuTensor out = {.dtype = MIL_DT_FP32, .rank = 1, .dims = {256}, .data = y};
  cr_assert(cpu_run_into(l.c, &in, &out, &l.d), "%s", l.diags.data);
  for (int i = 0; i < 256; i++) {
    float v = x[i], t1 = v + 1, t4 = t1 * t1 + 5, want = (t4 - v) * 0.5f + v * 3;
    cr_assert_float_eq(y[i], want, 0, "y[%d] = %g, want %g", i, (double)y[i], (double)want);
  }
  unload(&l);
  cleanup();
}

/* The GPT-2 example (two blocks, fp16 weights read in place) gives the same
 * bits with 1, 2 and 3 threads, in both numerics modes, and with 2 threads
 * and check_finite (which fuses nothing: every linear layer then runs as its
 * transposes, conv and bias add). */
Test(cpu, threads_give_identical_results, .timeout = 120) {
  char *text = example("gpt2_block.oir");
  char path[128];
  make_pkg(text, path, sizeof path);
  free(text);
  for (int mode = 0; mode < 2; mode++) {
    uint16_t *first = NULL;
    for (uint32_t run = 1; run <= 4; run++) {
      uint32_t threads = run == 4 ? 2 : run;
      Loaded l;
      srcset_init(&l.sources);
      diag_init(&l.d, &l.sources);
      sb_init(&l.diags);
      l.d.capture = &l.diags;
      l.p = orion_open(path, NULL, &l.d);
      cr_assert_not_null(l.p, "%s", l.diags.data);
      CpuOptions o = {.numerics = mode == 0 ? CPU_NUMERICS_ANE : CPU_NUMERICS_FP32, .threads = threads,
                      .check_finite = run == 4};
      l.c = cpu_prepare_with(l.p, 0, &o, &l.d);
      cr_assert_not_null(l.c, "%s", l.diags.data);
      cr_assert_eq(cpu_threads(l.c), threads);
      const OrionTensorInfo *ii = orion_input(l.p, 0, 0), *oi = orion_output(l.p, 0, 0);
      size_t n = ii->bytes / 2;
      uint16_t *x = xcalloc(n, 2), *y = xcalloc(oi->bytes / 2, 2);
      for (size_t i = 0; i < n; i++) x[i] = fp16_from_float((float)((i * 7919) % 1000) / 500.0f - 1.0f);
      CpuTensor in = {.dtype = ii->dtype, .rank = ii->rank, .data = x};
      CpuTensor out = {.dtype = oi->dtype, .rank = oi->rank, .data = y};
      memcpy(in.dims, ii->dims, sizeof in.dims);
      memcpy(out.dims, oi->dims, sizeof out.dims);
      cr_assert(cpu_run_into(l.c, &in, &out, &l.d), "%s", l.diags.data);
      if (!first) {
        first = y;
        bool finite = true;
        for (size_t i = 0; i < oi->bytes / 2; i++) finite = finite && isfinite(fp16_to_float(y[i]));
        cr_assert(finite);
      } else {
        cr_assert(memcmp(first, y, oi->bytes) == 0, "%u threads%s differ from 1 (mode %d)", threads,
                  run == 4 ? " unfused" : "", mode);
        free(y);
      }
      free(x);
      unload(&l);
    }
    free(first);
  }
  cleanup();
}

/* cpu_set_weight replaces one BLOBFILE const (fp32 or fp16 data, converted
 * to the declared dtype) without re-planning; cpu_reload_weights re-reads
 * every BLOBFILE const from the loaded program. The fp16 weight w is large
 * enough to be read in place by linear (converted panel by panel). */
Test(cpu, set_and_reload_weights) {
  const char *text = "func main(x: fp16[2,64]) {\n"
                     "  param w: fp16[128,64] = normal(seed=5, std=0.1);\n"
                     "  param b: fp32[128] = normal(seed=6, std=0.1);\n"
                     "  y = linear(x, w);\n"
                     "  yc = cast(y, dtype=\"fp32\");\n"
                     "  z = add(yc, b);\n"
                     "  return z;\n"
                     "}\n";
  char path[128];
  make_pkg(text, path, sizeof path);
  Loaded l;
  load_prepared(&l, path, CPU_NUMERICS_FP32);
  const OrionWeight *ww = NULL, *wb = NULL;
  for (uint32_t i = 0; i < orion_weight_count(l.p, 0); i++) {
    const OrionWeight *w = orion_weight(l.p, 0, i);
    if (w->size == 128 * 64 * 2) ww = w;
    if (w->size == 128 * 4) wb = w;
  }
  cr_assert(ww && wb, "weights not found");
  uint16_t x[128];
  for (int i = 0; i < 128; i++) x[i] = fp16_from_float((float)(i % 9) - 4);
  CpuTensor in = {.dtype = MIL_DT_FP16, .rank = 2, .dims = {2, 64}, .data = x};
  float z0[256], z1[256];
  CpuTensor out = {.dtype = MIL_DT_FP32, .rank = 2, .dims = {2, 128}, .data = z0};
  cr_assert(cpu_run_into(l.c, &in, &out, &l.d), "%s", l.diags.data);

  /* w := 0.5 everywhere (fp32 data), b := 1 (fp16 data): z = 0.5 * sum(x row) + 1. */
  float *w = xcalloc(128 * 64, sizeof *w);
  uint16_t bh[128];
  for (int i = 0; i < 128 * 64; i++) w[i] = 0.5f;
  for (int i = 0; i < 128; i++) bh[i] = fp16_from_float(1);
  cr_assert(cpu_set_weight(l.c, ww->name, MIL_DT_FP32, w, 128 * 64 * 4, &l.d), "%s", l.diags.data);
  cr_assert(cpu_set_weight(l.c, wb->name, MIL_DT_FP16, bh, sizeof bh, &l.d), "%s", l.diags.data);
  out.data = z1;
  cr_assert(cpu_run_into(l.c, &in, &out, &l.d), "%s", l.diags.data);
  for (int r = 0; r < 2; r++) {
    float s = 0;
    for (int k = 0; k < 64; k++) s += fp16_to_float(x[r * 64 + k]);
    for (int o = 0; o < 128; o++) cr_assert_float_eq(z1[r * 128 + o], 0.5f * s + 1, 1e-5, "z[%d][%d]", r, o);
  }

  /* Reloading reads the program's weights again: the first results come back. */
  cr_assert(cpu_reload_weights(l.c, &l.d), "%s", l.diags.data);
  cr_assert(cpu_run_into(l.c, &in, &out, &l.d), "%s", l.diags.data);
  cr_assert(memcmp(z0, z1, sizeof z0) == 0);

  /* Errors: unknown name, wrong size, wrong dtype. */
  cr_assert_not(cpu_set_weight(l.c, "nope", MIL_DT_FP32, w, 4, &l.d));
  cr_assert_not_null(strstr(l.diags.data, "has no BLOBFILE weight 'nope'"), "%s", l.diags.data);
  cr_assert_not(cpu_set_weight(l.c, ww->name, MIL_DT_FP32, w, 100, &l.d));
  cr_assert_not_null(strstr(l.diags.data, "but 100 bytes were given"), "%s", l.diags.data);
  cr_assert_not(cpu_set_weight(l.c, ww->name, MIL_DT_INT32, w, 128 * 64 * 4, &l.d));
  cr_assert_not_null(strstr(l.diags.data, "give fp16 or fp32"), "%s", l.diags.data);
  free(w);
  unload(&l);
  cleanup();
}

/* ANE mode rounds every fp16 result with the hardware conversion when the
 * CPU has one: it must agree bit for bit with fp16_from_float, including
 * ties, subnormals, overflow to inf and the largest finite values. */
Test(cpu, ane_rounding_matches_fp16_from_float) {
  enum { N = 4096 };
  write_bare(MIL_HEAD "    func main<ios18>(tensor<fp32, [4096]> x) {\n"
                      "        tensor<fp16, [4096]> y = mul(x = x, y = fp32(1))[name = string(\"y\")];\n"
                      "    } -> (y);\n}\n");
  Loaded l;
  load(&l, dir, CPU_NUMERICS_ANE);
  cr_assert_not_null(l.c, "%s", l.diags.data);
  static float x[N];
  static uint16_t y[N];
  uint32_t s = 12345;
  for (int i = 0; i < N; i++) {
    s = s * 1664525u + 1013904223u;
    uint32_t u = s;
    if (i % 4 == 1) u = (u & 0x80000000u) | (0x33000000u + (u & 0x01FFFFFFu)); /* around fp16's subnormals */
    if (i % 4 == 2) u = (u & 0x80000000u) | (0x477F0000u + (u & 0x0001FFFFu)); /* around 65504 */
    if (i % 4 == 3) u = (u & 0xFFFFE000u) | 0x1000u;                           /* exact ties */
    memcpy(&x[i], &u, 4);
    if (isnan(x[i])) x[i] = 1;
  }
  CpuTensor in = {.dtype = MIL_DT_FP32, .rank = 1, .dims = {N}, .data = x};
  CpuTensor out = {.dtype = MIL_DT_FP16, .rank = 1, .dims = {N}, .data = y};
  cr_assert(cpu_run_into(l.c, &in, &out, &l.d), "%s", l.diags.data);
  for (int i = 0; i < N; i++)
    cr_assert_eq(y[i], fp16_from_float(x[i]), "x = %a: got 0x%04x, want 0x%04x", (double)x[i], y[i],
                 fp16_from_float(x[i]));
  unload(&l);
  cleanup();
}

/* A run's fp16 inputs and outputs convert in parallel pieces (several
 * pieces here, an odd count of elements): every fp16 bit pattern read as
 * fp16_to_float reads it, every float written as fp16_from_float writes it,
 * at 1 and 2 threads, in both modes. */
Test(cpu, fp16_inputs_and_outputs_convert_in_pieces) {
  enum { N = 200003 };
  char mil[1024];
  snprintf(mil, sizeof mil,
           MIL_HEAD "    func main<ios18>(tensor<fp16, [%d]> x, tensor<fp32, [%d]> f) {\n"
                    "        tensor<fp32, [%d]> a = cast(dtype = string(\"fp32\"), x = x)[name = string(\"a\")];\n"
                    "        tensor<fp16, [%d]> b = mul(x = f, y = fp32(1))[name = string(\"b\")];\n"
                    "    } -> (a, b);\n}\n",
           N, N, N, N);
  write_bare(mil);
  static uint16_t x[N], b[N];
  static float f[N], a[N];
  uint32_t s = 777;
  for (int i = 0; i < N; i++) {
    x[i] = (uint16_t)(i * 40503u);
    s = s * 1664525u + 1013904223u;
    uint32_t u = i % 3 ? s : (s & 0x8FFFFFFFu) | 0x30000000u; /* a third near fp16's range */
    memcpy(&f[i], &u, 4);
    if (isnan(f[i])) f[i] = -2;
  }
  for (int mode = 0; mode < 2; mode++)
    for (uint32_t threads = 1; threads <= 2; threads++) {
      Loaded l;
      CpuOptions o = {.numerics = mode ? CPU_NUMERICS_ANE : CPU_NUMERICS_FP32, .threads = threads};
      load_opts(&l, &o);
      cr_assert_not_null(l.c, "%s", l.diags.data);
      CpuTensor in[2] = {{.dtype = MIL_DT_FP16, .rank = 1, .dims = {N}, .data = x},
                         {.dtype = MIL_DT_FP32, .rank = 1, .dims = {N}, .data = f}};
      CpuTensor out[2] = {{.dtype = MIL_DT_FP32, .rank = 1, .dims = {N}, .data = a},
                          {.dtype = MIL_DT_FP16, .rank = 1, .dims = {N}, .data = b}};
      cr_assert(cpu_run_into(l.c, in, out, &l.d), "%s", l.diags.data);
      for (int i = 0; i < N; i++) {
        float want = fp16_to_float(x[i]);
        cr_assert(isnan(want) ? isnan(a[i]) : !memcmp(&a[i], &want, 4), "x = 0x%04x: got %a, want %a", x[i],
                  (double)a[i], (double)want);
        cr_assert_eq(b[i], fp16_from_float(f[i]), "f = %a: got 0x%04x, want 0x%04x", (double)f[i], b[i],
                     fp16_from_float(f[i]));
      }
      unload(&l);
    }
  cleanup();
}
