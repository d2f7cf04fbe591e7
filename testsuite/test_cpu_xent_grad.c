/*
 * The CPU backend's fused cross entropy gradient (runtime/cpu/k_xent_grad.c,
 * fusion.c's fuse_xent_grad) on the backward programs orionc --train emits:
 * a model whose logits are x + b (so that b's gradient is the chain's result), fp32 and fp16, rows of 37 and of 3001
 * classes (longer than the softmax keeps on the stack), with and without
 * ignore_index. The fused run elides the chain (softmax, the one-hot's sub,
 * cast and select; the scaling and the cast to fp16 where they follow) and
 * gives the bits of the unfused run (CpuOptions.unfused) at 1 and 2
 * threads, NaN rows and out-of-range targets included; and the gradient
 * agrees with (softmax(x) - one_hot(t)) * scale / count in double.
 * Fused, fp16 saved logits are read in place (not converted into the arena)
 * with the converted run's bits.
 */
#define _XOPEN_SOURCE 700

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"
#include "helpers.h"
#include "orion/compile.h"
#include "orion/cpu.h"
#include "orion/fp16.h"
#include "orion/runtime.h"

static char dir[] = "/tmp/orion-xent-grad-XXXXXX";

static void setup(void) { cr_assert_not_null(mkdtemp(dir)); }
static void teardown(void) { remove_tree(dir); }

TestSuite(cpu_xent_grad, .init = setup, .fini = teardown);

enum { ROWS = 6 }; /* [2, 3] positions */

/* Compiles the model with --train into dir/name; returns the path (caller frees). */
static char *compile_model(const char *dt, int C, const char *ce_extra, const char *name) {
  StrBuf src, path, msgs;
  sb_init(&src);
  sb_init(&path);
  sb_init(&msgs);
  sb_printf(&src,
            "func main(x: %s[2,3,%d], targets: int32[2,3]) {\n"
            "  param b: %s[2,3,%d] = normal(seed=5, std=1.5);\n"
            "  logits = add(x, b);\n"
            "  loss: fp32[] = cross_entropy(logits, targets%s);\n"
            "  return loss;\n}\n",
            dt, C, dt, C, ce_extra);
  sb_printf(&path, "%s/%s", dir, name);
  OrionCompileOptions o;
  orion_compile_options_init(&o);
  o.train = true;
  o.autodiff.save_elementwise = true; /* the logits as a saved input, not made again from x and b */
  Diag d;
  diag_init(&d, NULL);
  d.capture = &msgs;
  d.suppress_warnings = true;
  OrionCompileResult r;
  cr_assert(orion_compile_text("xent.oir", src.data, strlen(src.data), &o, path.data, &r, &d), "%s",
            msgs.data ? msgs.data : "");
  orion_compile_result_free(&r);
  sb_free(&src);
  sb_free(&msgs);
  return path.data;
}

/* Deterministic floats in [-4, 4). */
static float value_at(uint32_t i, uint32_t seed) {
  uint32_t s = (i + 1) * 2654435761u ^ seed * 40503u;
  s ^= s >> 13;
  s *= 2246822519u;
  s ^= s >> 16;
  return (float)((double)(s % 65536) / 8192.0 - 4.0);
}

typedef struct Inputs {
  CpuTensor t[8];
  uint32_t n;
  int32_t targets[ROWS];
  float *logits; /* the saved logits as floats (fp16 ones converted), for the reference */
  float loss_scale;
} Inputs;

/* The backward's inputs: loss_scale 256, the float inputs random (a NaN in
 * row 4 of the saved logits), the targets 0, C-1, an out-of-range C, 7, -1
 * (ignore_index's, or out of range) and 1. */
static void make_inputs(OrionProgram *p, uint32_t fn, int C, Inputs *in) {
  in->n = orion_input_count(p, fn);
  cr_assert_leq(in->n, 8);
  in->loss_scale = 256;
  int32_t tv[ROWS] = {0, C - 1, C, 7, -1, 1};
  memcpy(in->targets, tv, sizeof tv);
  in->logits = NULL;
  for (uint32_t i = 0; i < in->n; i++) {
    const OrionTensorInfo *ti = orion_input(p, fn, i);
    CpuTensor *t = &in->t[i];
    *t = (CpuTensor){.dtype = ti->dtype, .rank = ti->rank};
    memcpy(t->dims, ti->dims, sizeof t->dims);
    int64_t n = 1;
    for (uint32_t k = 0; k < ti->rank; k++) n *= ti->dims[k];
    t->data = xcalloc((size_t)n, 4);
    if (!strcmp(ti->name, "loss_scale")) {
      ((float *)t->data)[0] = in->loss_scale;
    } else if (ti->dtype == MIL_DT_INT32) {
      memcpy(t->data, in->targets, sizeof in->targets);
    } else {
      float *f = xcalloc((size_t)n, sizeof *f);
      for (int64_t k = 0; k < n; k++) f[k] = value_at((uint32_t)k, i);
      bool logits = !strcmp(ti->name, "logits");
      if (logits) f[4 * C + 3] = NAN;
      if (ti->dtype == MIL_DT_FP16) {
        for (int64_t k = 0; k < n; k++) {
          ((uint16_t *)t->data)[k] = fp16_from_float(f[k]);
          f[k] = fp16_to_float(((uint16_t *)t->data)[k]);
        }
      } else {
        memcpy(t->data, f, (size_t)n * sizeof *f);
      }
      if (logits) in->logits = f;
      else free(f);
    }
  }
  cr_assert_not_null(in->logits, "the backward reads the logits");
}

static void inputs_free(Inputs *in) {
  for (uint32_t i = 0; i < in->n; i++) free(in->t[i].data);
  free(in->logits);
}

/* Runs function fn with the options; returns its first output (the gradient
 * of b, fp32) and how many softmax and select statements ran. */
static CpuTensor run(OrionProgram *p, uint32_t fn, const CpuOptions *o, const Inputs *in, uint32_t *chain_runs) {
  Diag d;
  StrBuf msgs;
  sb_init(&msgs);
  diag_init(&d, NULL);
  d.capture = &msgs;
  CpuProgram *c = cpu_prepare_with(p, fn, o, &d);
  cr_assert_not_null(c, "%s", msgs.data ? msgs.data : "");
  uint32_t nout = orion_output_count(p, fn);
  CpuTensor out[4];
  cr_assert_leq(nout, 4);
  cr_assert(cpu_run(c, in->t, out, &d), "%s", msgs.data ? msgs.data : "");
  *chain_runs = 0;
  for (uint32_t i = 0; i < cpu_profile_count(c); i++) {
    const CpuStmtTime *e = cpu_profile_stmt(c, i);
    if (!strcmp(e->op, "softmax") || !strcmp(e->op, "select")) *chain_runs += e->runs;
  }
  for (uint32_t k = 1; k < nout; k++) cpu_tensor_free(&out[k]);
  cpu_free(c);
  sb_free(&msgs);
  return out[0];
}

/* The same bits, or NaN in both. */
static bool same_float(float a, float b) { return (isnan(a) && isnan(b)) || !memcmp(&a, &b, sizeof a); }

/* The compiled model at path opened, its backward function found; diagnostics captured into msgs. */
typedef struct Bwd {
  SourceSet sources;
  Diag d;
  StrBuf msgs;
  OrionProgram *p;
  uint32_t fn;
} Bwd;

static void bwd_open(Bwd *b, const char *path) {
  srcset_init(&b->sources);
  sb_init(&b->msgs);
  diag_init(&b->d, &b->sources);
  b->d.capture = &b->msgs;
  b->p = orion_open(path, NULL, &b->d);
  cr_assert_not_null(b->p, "%s", b->msgs.data ? b->msgs.data : "");
  b->fn = orion_function_find(b->p, "main.bwd");
  cr_assert_neq(b->fn, UINT32_MAX);
}

static void bwd_close(Bwd *b) {
  orion_close(b->p);
  srcset_free(&b->sources);
  sb_free(&b->msgs);
}

/* The model's b is added to x, so b's gradient is the logits' own: the chain's result. */
static void check_case(const char *dt, int C, const char *ce_extra, bool ignore) {
  char name[64];
  snprintf(name, sizeof name, "%s_%d_%d.anepkg", dt, C, ignore);
  char *path = compile_model(dt, C, ce_extra, name);
  Bwd prog;
  bwd_open(&prog, path);
  OrionProgram *p = prog.p;
  uint32_t fn = prog.fn;
  Inputs in;
  make_inputs(p, fn, C, &in);
  bool half = !strcmp(dt, "fp16");
  CpuNumerics modes[2] = {CPU_NUMERICS_FP32, CPU_NUMERICS_ANE};
  for (int m = 0; m < 2; m++) {
    uint32_t runs_fused, runs_unfused, runs_other;
    CpuOptions fo = {.numerics = modes[m], .threads = 2, .profile = true};
    CpuOptions uo = {.numerics = modes[m], .threads = 1, .profile = true, .unfused = true};
    CpuOptions f1 = {.numerics = modes[m], .threads = 1, .profile = true};
    CpuTensor fused = run(p, fn, &fo, &in, &runs_fused), unfused = run(p, fn, &uo, &in, &runs_unfused);
    CpuTensor fused1 = run(p, fn, &f1, &in, &runs_other);
    /* ignore_index's mask of the kept positions is one more select, of the targets' shape, not fused */
    uint32_t mask = ignore ? 1 : 0;
    cr_assert_eq(runs_fused, mask, "%s: the chain's softmax and select ran %u times fused", name, runs_fused - mask);
    cr_assert_eq(runs_unfused, 2 + mask, "%s: unfused, the softmax and select ran %u times", name, runs_unfused - mask);
    cr_assert_eq(fused.dtype, MIL_DT_FP32);
    cr_assert_eq(fused.rank, 3u);
    cr_assert_eq(fused.dims[2], C);
    const float *got = fused.data, *x = in.logits;
    for (int k = 0; k < ROWS * C; k++) {
      float a = got[k], b = ((float *)unfused.data)[k], e = ((float *)fused1.data)[k];
      cr_assert(same_float(a, b), "%s mode %d: g[%d] fused %a, unfused %a", name, m, k, (double)a, (double)b);
      cr_assert(same_float(a, e), "%s mode %d: g[%d] at 2 threads %a, at 1 %a", name, m, k, (double)a, (double)e);
    }
    /* The reference in double: (softmax(x) - one_hot(t)) * keep * loss_scale / count. */
    int counted = 0;
    for (int r = 0; r < ROWS; r++) counted += !ignore || in.targets[r] != -1;
    for (int r = 0; r < ROWS; r++) {
      double mx = -INFINITY, sum = 0;
      for (int q = 0; q < C; q++) mx = fmax(mx, (double)x[r * C + q]);
      for (int q = 0; q < C; q++) sum += exp((double)x[r * C + q] - mx);
      for (int k = 0; k < C; k++) {
        double g = got[r * C + k];
        if (r == 4) { /* its NaN: the whole row is NaN, ignored or not (NaN times a keep of 0) */
          cr_assert(isnan(g), "%s: g[%d][%d] = %g, want NaN", name, r, k, g);
          continue;
        }
        double keep = ignore && in.targets[r] == -1 ? 0 : 1;
        double want = (exp((double)x[r * C + k] - mx) / sum - (in.targets[r] == k ? 1 : 0)) * keep * (double)in.loss_scale / counted;
        /* fp32: a few float roundings; fp16: the result rounded to fp16 (2^-11 relative, subnormals below 2^-14). */
        double tol = half ? 0x1p-11 * fabs(want) + 0x1p-24 : 1e-6 * fabs(want) + 1e-12;
        cr_assert(fabs(g - want) <= tol, "%s mode %d: g[%d][%d] = %.9g, want %.9g", name, m, r, k, g, want);
      }
    }
    cpu_tensor_free(&fused);
    cpu_tensor_free(&unfused);
    cpu_tensor_free(&fused1);
  }
  inputs_free(&in);
  bwd_close(&prog);
  free(path);
}

Test(cpu_xent_grad, fp32_gives_the_unfused_bits) {
  check_case("fp32", 37, "", false);
  check_case("fp32", 3001, "", false);
}

Test(cpu_xent_grad, fp16_gives_the_unfused_bits) {
  check_case("fp16", 37, "", false);
  check_case("fp16", 3001, "", false);
}

Test(cpu_xent_grad, ignore_index_keeps_its_mask) {
  check_case("fp32", 37, ", ignore_index=-1", true);
  check_case("fp16", 3001, ", ignore_index=-1", true);
}

/* The slot of the backward's input named "logits". */
static uint32_t logits_slot(const CpuProgram *c, OrionProgram *p, uint32_t fn) {
  for (uint32_t i = 0; i < orion_input_count(p, fn); i++)
    if (!strcmp(orion_input(p, fn, i)->name, "logits")) return c->in_param[i];
  cr_assert_fail("the backward has no input named logits");
  return UINT32_MAX;
}

/* Fused, the fp16 logits stay the caller's buffer (no conversion over two
 * runs, the buffer unwritten) with the bits of the unfused run, which
 * converts them on each run: odd widths (37, and 3001 past the softmax's
 * stack), both numerics, 1 and 2 threads, the NaN row included. */
Test(cpu_xent_grad, fp16_logits_are_read_in_place_with_the_converted_bits) {
  static const int widths[2] = {37, 3001};
  for (int w = 0; w < 2; w++) {
    int C = widths[w];
    char name[64];
    snprintf(name, sizeof name, "inplace_%d.anepkg", C);
    char *path = compile_model("fp16", C, "", name);
    Bwd prog;
    bwd_open(&prog, path);
    OrionProgram *p = prog.p;
    uint32_t fn = prog.fn;
    Inputs in;
    make_inputs(p, fn, C, &in);
    uint32_t li = UINT32_MAX;
    for (uint32_t i = 0; i < in.n; i++)
      if (!strcmp(orion_input(p, fn, i)->name, "logits")) li = i;
    cr_assert_neq(li, UINT32_MAX);
    size_t bytes = (size_t)ROWS * (size_t)C * sizeof(uint16_t);
    uint16_t *before = malloc(bytes);
    memcpy(before, in.t[li].data, bytes);
    CpuNumerics modes[2] = {CPU_NUMERICS_FP32, CPU_NUMERICS_ANE};
    for (int m = 0; m < 2; m++) {
      CpuOptions uo = {.numerics = modes[m], .threads = 1, .unfused = true};
      CpuProgram *u = cpu_prepare_with(p, fn, &uo, &prog.d);
      cr_assert_not_null(u, "%s", prog.msgs.data ? prog.msgs.data : "");
      cr_assert_eq(u->vals[logits_slot(u, p, fn)].st, ST_F32, "unfused, the softmax reads the logits converted");
      CpuTensor want[4];
      uint32_t nout = orion_output_count(p, fn);
      cr_assert_leq(nout, 4);
      cr_assert(cpu_run(u, in.t, want, &prog.d), "%s", prog.msgs.data ? prog.msgs.data : "");
      cr_assert_eq(u->fp16_inputs_converted, 1, "unfused: the logits converted once");
      for (uint32_t threads = 1; threads <= 2; threads++) {
        CpuOptions fo = {.numerics = modes[m], .threads = threads};
        CpuProgram *c = cpu_prepare_with(p, fn, &fo, &prog.d);
        cr_assert_not_null(c, "%s", prog.msgs.data ? prog.msgs.data : "");
        cr_assert_eq(c->vals[logits_slot(c, p, fn)].st, ST_H16, "C %d mode %d: the logits are not read in place", C, m);
        for (int r = 0; r < 2; r++) {
          CpuTensor got[4];
          cr_assert(cpu_run(c, in.t, got, &prog.d), "%s", prog.msgs.data ? prog.msgs.data : "");
          for (uint32_t k = 0; k < nout; k++) {
            cr_assert_eq(got[k].dtype, want[k].dtype);
            size_t n = 1, es = got[k].dtype == MIL_DT_FP16 ? 2 : 4;
            for (uint32_t q = 0; q < got[k].rank; q++) n *= (size_t)got[k].dims[q];
            cr_assert(memcmp(got[k].data, want[k].data, n * es) == 0,
                      "C %d mode %d threads %u: output %u differs from the converted run's", C, m, threads, k);
            cpu_tensor_free(&got[k]);
          }
        }
        cr_assert_eq(c->fp16_inputs_converted, 0, "C %d mode %d: %llu fp16 inputs converted over two runs", C, m,
                     (unsigned long long)c->fp16_inputs_converted);
        cpu_free(c);
      }
      for (uint32_t k = 0; k < nout; k++) cpu_tensor_free(&want[k]);
      cpu_free(u);
    }
    cr_assert(memcmp(before, in.t[li].data, bytes) == 0, "the caller's logits were written");
    free(before);
    inputs_free(&in);
    bwd_close(&prog);
    free(path);
  }
}

/* A tied-classifier shape on the streamed tiles (k_matmul_amx.c): h = x * s,
 * logits = linear(h, w) of C classes, so the backward's dlogits feeds
 * dh = dlogits w and dw = dlogits^T h (through a reshape), and nothing else. */
static char *compile_classifier(int C, const char *name) {
  StrBuf src, path, msgs;
  sb_init(&src);
  sb_init(&path);
  sb_init(&msgs);
  sb_printf(&src,
            "func main(x: fp16[2,32,40], targets: int32[2,32]) {\n"
            "  param s: fp16[40] = normal(seed=3, std=1.0);\n"
            "  param w: fp16[%d,40] = normal(seed=5, std=0.5);\n"
            "  h = mul(x, s);\n"
            "  logits = linear(h, w);\n"
            "  loss: fp32[] = cross_entropy(logits, targets);\n"
            "  return loss;\n}\n",
            C);
  sb_printf(&path, "%s/%s", dir, name);
  OrionCompileOptions o;
  orion_compile_options_init(&o);
  o.train = true;
  o.autodiff.save_elementwise = true;
  Diag d;
  diag_init(&d, NULL);
  d.capture = &msgs;
  d.suppress_warnings = true;
  OrionCompileResult r;
  cr_assert(orion_compile_text("cls.oir", src.data, strlen(src.data), &o, path.data, &r, &d), "%s",
            msgs.data ? msgs.data : "");
  orion_compile_result_free(&r);
  sb_free(&src);
  sb_free(&msgs);
  return path.data;
}

/* The result of the fused gradient statement, or UINT32_MAX. */
static uint32_t xent_result(const CpuProgram *c) {
  for (uint32_t si = 0; si < c->f->nstmts; si++)
    if (c->fz[si].kind == FZ_XENT_GRAD) return c->base[si];
  return UINT32_MAX;
}

/* ane numerics: dlogits stored as fp16 bits (its only readers the two tiled
 * products), the unfused run's bits (dlogits as floats, the same tiles) for
 * every gradient at 1 and 2 threads; [64, 16411] is past the tiles' minimum
 * with odd classes. */
Test(cpu_xent_grad, dlogits_stored_as_fp16_for_the_tiles_give_the_float_bits) {
  if (!gemm_amx_on()) cr_skip_test("the CPU or the OS has no AMX-BF16 (or ORION_CPU_AMX=0)");
  enum { CLS = 16411 };
  char *path = compile_classifier(CLS, "cls.anepkg");
  Bwd prog;
  bwd_open(&prog, path);
  OrionProgram *p = prog.p;
  uint32_t fn = prog.fn;
  uint32_t n = orion_input_count(p, fn);
  cr_assert_leq(n, 8);
  CpuTensor in[8];
  for (uint32_t i = 0; i < n; i++) {
    const OrionTensorInfo *ti = orion_input(p, fn, i);
    in[i] = (CpuTensor){.dtype = ti->dtype, .rank = ti->rank};
    memcpy(in[i].dims, ti->dims, sizeof in[i].dims);
    int64_t count = 1;
    for (uint32_t k = 0; k < ti->rank; k++) count *= ti->dims[k];
    in[i].data = xcalloc((size_t)count, 4);
    for (int64_t k = 0; k < count; k++) {
      if (!strcmp(ti->name, "loss_scale")) ((float *)in[i].data)[k] = 256;
      else if (ti->dtype == MIL_DT_INT32) ((int32_t *)in[i].data)[k] = (int32_t)((k * 7919) % CLS);
      else if (ti->dtype == MIL_DT_FP16) ((uint16_t *)in[i].data)[k] = fp16_from_float(value_at((uint32_t)k, i));
      else ((float *)in[i].data)[k] = value_at((uint32_t)k, i);
    }
  }
  uint32_t nout = orion_output_count(p, fn);
  cr_assert_leq(nout, 4);
  CpuOptions uo = {.numerics = CPU_NUMERICS_ANE, .threads = 2, .unfused = true};
  CpuProgram *u = cpu_prepare_with(p, fn, &uo, &prog.d);
  cr_assert_not_null(u, "%s", prog.msgs.data ? prog.msgs.data : "");
  CpuTensor want[4];
  cr_assert(cpu_run(u, in, want, &prog.d), "%s", prog.msgs.data ? prog.msgs.data : "");
  cr_assert(u->amxmm, "the classifier's products run on the streamed tiles");
  for (uint32_t threads = 1; threads <= 2; threads++) {
    CpuOptions fo = {.numerics = CPU_NUMERICS_ANE, .threads = threads};
    CpuProgram *c = cpu_prepare_with(p, fn, &fo, &prog.d);
    cr_assert_not_null(c, "%s", prog.msgs.data ? prog.msgs.data : "");
    uint32_t g = xent_result(c);
    cr_assert_neq(g, UINT32_MAX, "the gradient chain is fused");
    cr_assert_eq(c->vals[g].st, ST_H16, "threads %u: dlogits is not stored as fp16", threads);
    CpuTensor got[4];
    cr_assert(cpu_run(c, in, got, &prog.d), "%s", prog.msgs.data ? prog.msgs.data : "");
    for (uint32_t k = 0; k < nout; k++) {
      size_t count = 1, es = got[k].dtype == MIL_DT_FP16 ? 2 : 4;
      for (uint32_t q = 0; q < got[k].rank; q++) count *= (size_t)got[k].dims[q];
      cr_assert(memcmp(got[k].data, want[k].data, count * es) == 0, "threads %u: output %u (%s) differs", threads, k,
                orion_output(p, fn, k)->mil_name);
      cpu_tensor_free(&got[k]);
    }
    cpu_free(c);
  }
  for (uint32_t k = 0; k < nout; k++) cpu_tensor_free(&want[k]);
  cpu_free(u);
  for (uint32_t i = 0; i < n; i++) free(in[i].data);
  bwd_close(&prog);
  free(path);
}
