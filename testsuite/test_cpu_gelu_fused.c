/*
 * The CPU backend's one-pass gelu (runtime/cpu/k_fused.c, gelu_chain and
 * gelu_range): the nine statements orionc lowers gelu(mode="tanh") into,
 * as a linear's epilogue and as a group of their own (a length that is not
 * a multiple of 4: the scalar tail), run as one pass in fp32 numerics (not
 * in ANE numerics) and give the unfused run's bits, with 1 and 2 threads,
 * in both, on values
 * that include large ones (tanh saturated), signed zeros, infinities and a
 * NaN. Reads the backend's internal header.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_check.h"
#include "cpu_internal.h"
#include "orion/fp16.h"

/* Runs the program at path; *gelus: how many of its groups run as the one-pass gelu. */
static void run_one(const char *path, const CpuOptions *o, CpuTensor *in, CpuTensor *out, uint32_t *gelus) {
  Loaded l;
  load_path_opts(&l, path, o);
  *gelus = 0;
  for (uint32_t si = 0; si < l.c->f->nstmts; si++)
    *gelus += l.c->fz[si].kind == FZ_GROUP && group_runs_gelu(l.c->fz[si].group);
  cr_assert(cpu_run(l.c, in, out, &l.d), "%s", l.diags.data);
  unload(&l);
}

static void check_mode(bool half) {
  const char *dt = half ? "fp16" : "fp32";
  char text[1024], path[128];
  /* y: gelu as the epilogue of a linear of 64 outputs; z: gelu of an input of 5 x 7 x 3 values */
  snprintf(text, sizeof text,
           "func main(x: %s[1,5,24], u: %s[5,7,3]) {\n"
           "  param w: %s[64,24] = normal(seed=3, std=0.4);\n  param b: %s[64] = normal(seed=4, std=0.5);\n"
           "  fc = linear(x, w, b);\n  y = gelu(fc, mode=\"tanh\");\n  z = gelu(u, mode=\"tanh\");\n"
           "  return y, z;\n}\n",
           dt, dt, dt, dt);
  make_pkg(text, path, sizeof path);
  float x[120], u[105];
  fill_random(x, 120, 5, false);
  fill_random(u, 105, 6, false);
  for (int i = 0; i < 105; i++) u[i] *= 3;
  const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 40.0f, -40.0f, 1e-20f, -3.5f, 0.7f};
  for (int i = 0; i < 10; i++) u[10 * i + 3] = special[i];
  uint16_t xh[120], uh[105];
  for (int i = 0; i < 120; i++) xh[i] = fp16_from_float(x[i]);
  for (int i = 0; i < 105; i++) uh[i] = fp16_from_float(u[i]);
  MilDType mdt = half ? MIL_DT_FP16 : MIL_DT_FP32;
  CpuTensor in[2] = {{.dtype = mdt, .rank = 3, .dims = {1, 5, 24}, .data = half ? (void *)xh : (void *)x},
                     {.dtype = mdt, .rank = 3, .dims = {5, 7, 3}, .data = half ? (void *)uh : (void *)u}};
  CpuNumerics nm = half ? CPU_NUMERICS_ANE : CPU_NUMERICS_FP32;
  CpuOptions o1 = {.numerics = nm, .threads = 1}, o2 = {.numerics = nm, .threads = 2};
  CpuOptions ou = {.numerics = nm, .threads = 1, .unfused = true};
  CpuTensor a[2], b[2], c[2];
  uint32_t g1, g2, gu;
  run_one(path, &o1, in, a, &g1);
  run_one(path, &o2, in, b, &g2);
  run_one(path, &ou, in, c, &gu);
  const CpuFeatures *f = cpu_features();
  uint32_t want = f->avx2 && !half ? 2 : 0; /* ANE numerics round each member: member by member */
  cr_assert(g1 == want && g2 == want && gu == 0, "%s: %u and %u one-pass gelus (want %u), unfused %u", dt, g1, g2,
            want, gu);
  for (int k = 0; k < 2; k++) {
    size_t bytes = (size_t)prod(a[k].dims, a[k].rank) * cpu_dtype_size(a[k].dtype);
    cr_assert(!memcmp(a[k].data, c[k].data, bytes), "%s: output %d differs from the unfused run", dt, k);
    cr_assert(!memcmp(a[k].data, b[k].data, bytes), "%s: output %d differs between 1 and 2 threads", dt, k);
    cpu_tensor_free(&a[k]), cpu_tensor_free(&b[k]), cpu_tensor_free(&c[k]);
  }
  cleanup();
}

Test(cpu_gelu_fused, fp32_gives_the_unfused_bits) { check_mode(false); }

Test(cpu_gelu_fused, ane_numerics_give_the_unfused_bits) { check_mode(true); }
