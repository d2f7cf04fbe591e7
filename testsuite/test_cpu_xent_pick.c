/*
 * The CPU backend's gather of a cross entropy's target logits
 * (runtime/cpu/fusion.c, fuse_xent_pick; k_xent_grad.c, k_xent_pick): on the
 * forward lower_cross_entropy writes, fp32 and fp16 logits (an add, which
 * could otherwise join the row group's tiles), 37 and 3001
 * classes, with and without ignore_index, the gather reads the logits and
 * their row maxima instead of the shifted [n, C] values, which the row group
 * keeps in its tiles (never written out); the loss has the unfused run's
 * bits at 1 and 2 threads and agrees with the mean of lse - x[t] in double.
 * Reads the backend's internal header.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_check.h"
#include "cpu_internal.h"
#include "orion/fp16.h"

enum { ROWS = 6 }; /* [2, 3] positions */

/* The slot of the result named `name`, or UINT32_MAX. */
static uint32_t slot_named(const CpuProgram *c, const char *name) {
  for (uint32_t si = 0; si < c->f->nstmts; si++)
    if (c->f->stmts[si].nresults == 1 && c->f->stmts[si].results[0].name &&
        !strcmp(c->f->stmts[si].results[0].name, name))
      return c->base[si];
  return UINT32_MAX;
}

static float run_loss(const char *path, const CpuOptions *o, CpuTensor *in, bool expect_pick) {
  Loaded l;
  load_path_opts(&l, path, o);
  uint32_t picks = 0;
  for (uint32_t si = 0; si < l.c->f->nstmts; si++) picks += l.c->fz[si].kind == FZ_XENT_PICK;
  cr_assert_eq(picks, expect_pick ? 1u : 0u, "%u gathers of the shifted logits fused", picks);
  uint32_t sh = slot_named(l.c, "loss_shifted");
  cr_assert_neq(sh, UINT32_MAX, "no loss_shifted in the lowered forward");
  if (expect_pick) cr_assert_geq(l.c->slots[sh].tile, 0, "the shifted logits are written out, not kept in a tile");
  CpuTensor out;
  cr_assert(cpu_run(l.c, in, &out, &l.d), "%s", l.diags.data);
  float loss = ((const float *)out.data)[0];
  cpu_tensor_free(&out);
  unload(&l);
  return loss;
}

static void check_case(const char *dt, int64_t C, bool ignore) {
  char text[512], path[128];
  snprintf(text, sizeof text,
           "func main(x: fp32[2,3,%lld], targets: int32[2,3]) {\n  xc = cast(x, dtype=\"%s\");\n  logits = add(xc, xc);\n"
           "  loss: fp32[] = cross_entropy(logits, targets%s);\n  return loss;\n}\n",
           (long long)C, dt, ignore ? ", ignore_index=-1" : "");
  make_pkg(text, path, sizeof path);
  bool half = !strcmp(dt, "fp16");
  float *x = malloc(sizeof(float) * (size_t)(ROWS * C));
  fill_random(x, ROWS * C, (uint32_t)(7 + C), false);
  for (int64_t i = 0; half && i < ROWS * C; i++) x[i] = fp16_to_float(fp16_from_float(x[i]));
  int32_t t[ROWS] = {0, (int32_t)C - 1, 5, 7, ignore ? -1 : 2, 1};
  int64_t xd[3] = {2, 3, C}, td[2] = {2, 3};
  CpuTensor in[2] = {f32_tensor(x, 3, xd), {.dtype = MIL_DT_INT32, .rank = 2, .data = t}};
  memcpy(in[1].dims, td, sizeof td);
  CpuNumerics modes[2] = {CPU_NUMERICS_FP32, CPU_NUMERICS_ANE};
  for (int m = 0; m < 2; m++) {
    CpuOptions o2 = {.numerics = modes[m], .threads = 2}, o1 = {.numerics = modes[m], .threads = 1};
    CpuOptions ou = {.numerics = modes[m], .threads = 1, .unfused = true};
    float f2 = run_loss(path, &o2, in, true), f1 = run_loss(path, &o1, in, true), u = run_loss(path, &ou, in, false);
    cr_assert(!memcmp(&f2, &u, sizeof u) && !memcmp(&f1, &u, sizeof u),
              "%s C=%lld mode %d: fused %a (2 threads), %a (1), unfused %a", dt, (long long)C, m, (double)f2, (double)f1,
              (double)u);
    double sum = 0;
    int counted = 0;
    for (int r = 0; r < ROWS; r++) {
      if (ignore && t[r] == -1) continue;
      double mx = -INFINITY, se = 0;
      for (int64_t q = 0; q < C; q++) mx = fmax(mx, 2.0 * (double)x[r * C + q]);
      for (int64_t q = 0; q < C; q++) se += exp(2.0 * (double)x[r * C + q] - mx);
      sum += log(se) + mx - 2.0 * (double)x[r * C + t[r]];
      counted++;
    }
    double want = sum / counted;
    cr_assert(fabs((double)u - want) <= 1e-5 * fabs(want), "%s C=%lld mode %d: loss %.9g, want %.9g", dt, (long long)C,
              m, (double)u, want);
  }
  free(x);
  cleanup();
}

Test(cpu_xent_pick, fp32_logits_give_the_unfused_bits) {
  check_case("fp32", 37, false);
  check_case("fp32", 3001, false);
}

Test(cpu_xent_pick, fp16_logits_give_the_unfused_bits) {
  check_case("fp16", 37, false);
  check_case("fp16", 3001, false);
}

Test(cpu_xent_pick, ignore_index_keeps_its_mask) {
  check_case("fp32", 37, true);
  check_case("fp16", 3001, true);
}
