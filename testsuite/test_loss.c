/*
 * cross_entropy against the numpy fixtures of testsuite/e2e/loss (made by
 * make_loss_fixtures.py in float64, independently of orion): (a) the
 * reference evaluator on the op itself and on its lowering, (b) the compiled
 * package on the CPU backend in fp32 and ane numerics, (c) the exact error of
 * a target out of range.
 *
 * Tolerances, relative to the expected loss (|error| <= TOL * max(1, |loss|)):
 * - ir_eval computes in double; the fixture holds the loss as the program's
 *   fp32 (the .npy reader takes no float64), one rounding of 2^-24 relative:
 *   1e-7. The op and its lowering under ir_eval agree within 1e-12 (the
 *   lowering's one rounding, fp16 logits cast to fp32, is exact).
 * - the CPU backend computes every value of the lowering in fp32, so each of
 *   sub, exp, the sum of C terms, log, and the mean of N terms adds a
 *   relative error of about (C + N + 4) * 2^-24 <= 2e-6 for these shapes
 *   (C <= 11, N <= 12); 1e-5 leaves a margin. ane numerics round only
 *   fp16-declared results to fp16, and the lowering makes none (only the
 *   logits may be fp16, and they are an input): the same tolerance, and the
 *   test requires the same bits in both modes.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "ir_eval.h"
#include "orion/cpu.h"
#include "orion/fp16.h"
#include "orion/npy.h"
#include "orion/package.h"
#include "orion/passes.h"

#define TOL_EVAL 1e-7
#define TOL_LOWERING 1e-12
#define TOL_CPU 1e-5

static const char *const CASES[] = {"f32_4x7", "f16_2x3x11", "f32_c1", "f32_rank1", "f32_ignore", "f16_ignore_class",
                                    "f32_all_ignored", "f16_large", "f32_large"};

static char *case_path(const char *name, const char *file) {
  const char *root = getenv("ORION_SOURCE_ROOT");
  cr_assert_not_null(root, "ORION_SOURCE_ROOT is not set");
  size_t n = strlen(root) + strlen(name) + strlen(file) + 32;
  char *p = xmalloc(n);
  snprintf(p, n, "%s/testsuite/e2e/loss/%s/%s", root, name, file);
  return p;
}

static char *case_text(const char *name) {
  char *path = case_path(name, "model.oir"), *text;
  size_t len;
  const char *err;
  cr_assert(read_file(path, 1 << 20, &text, &len, &err), "%s: %s", path, err);
  free(path);
  return text;
}

static NpyArray case_npy(const char *name, const char *file) {
  char *path = case_path(name, file);
  NpyArray a;
  Diag d;
  StrBuf sb;
  sb_init(&sb);
  diag_init(&d, NULL);
  d.capture = &sb;
  cr_assert(npy_read(path, &a, &d), "%s", sb.data);
  sb_free(&sb);
  free(path);
  return a;
}

static double npy_elem(const NpyArray *a, size_t i) {
  switch (a->dtype) {
  case ORION_DT_FP16: return (double)fp16_to_float(((const uint16_t *)a->data)[i]);
  case ORION_DT_FP32: return (double)((const float *)a->data)[i];
  case ORION_DT_INT32: return ((const int32_t *)a->data)[i];
  default: cr_assert_fail("dtype not used by the fixtures"); return NAN;
  }
}

static EvalTensor to_eval(const NpyArray *a, const IrType *t) {
  EvalTensor e = {.type = *t};
  uint64_t n = ir_type_elements(t);
  cr_assert_eq(a->nbytes, n * ir_dtype_size(t->dtype), "fixture size");
  e.data = xcalloc(n, sizeof *e.data);
  for (uint64_t i = 0; i < n; i++) e.data[i] = npy_elem(a, i);
  return e;
}

static double expected_loss(const char *name) {
  NpyArray want = case_npy(name, "loss.npy");
  cr_assert_eq(want.rank, 0);
  double v = npy_elem(&want, 0);
  npy_free(&want);
  return v;
}

static double rel_err(double got, double want) {
  if (isnan(want) || isnan(got)) return isnan(want) && isnan(got) ? 0 : HUGE_VAL;
  return fabs(got - want) / fmax(1.0, fabs(want));
}

/* Evaluates case `name` with ir_eval after `passes` (NULL: as written).
 * Returns true with the loss in *loss, or false with the message in err. */
static bool eval_case(const char *name, const char *passes, double *loss, char *err, size_t errlen) {
  char *text = case_text(name);
  Parsed p;
  parsed_open(&p, text);
  cr_assert_not_null(p.m, "%s", p.diags.data);
  if (passes) {
    PassManagerOptions o = {.pipeline = passes};
    cr_assert(passes_run(p.m, &o, &p.d), "%s", p.diags.data);
  }
  IrFuncId f = ir_func_lookup(p.m, "main");
  IrFunc *fn = ir_func(p.m, f);
  NpyArray x = case_npy(name, "logits.npy"), t = case_npy(name, "targets.npy");
  EvalTensor in[2] = {to_eval(&x, &ir_value(p.m, fn->inputs[0])->type), to_eval(&t, &ir_value(p.m, fn->inputs[1])->type)};
  EvalTensor *out = NULL;
  bool ok = ir_eval(p.m, f, in, &out, err, errlen);
  if (ok) {
    *loss = out[0].data[0];
    eval_tensors_free(out, 1);
  }
  eval_tensor_free(&in[0]);
  eval_tensor_free(&in[1]);
  npy_free(&x);
  npy_free(&t);
  parsed_close(&p);
  free(text);
  return ok;
}

Test(loss, ir_eval_matches_the_fixtures) {
  for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
    double want = expected_loss(CASES[i]), got;
    char err[1024];
    cr_assert(eval_case(CASES[i], NULL, &got, err, sizeof err), "%s: %s", CASES[i], err);
    cr_assert_leq(rel_err(got, want), TOL_EVAL, "%s: ir_eval %.17g, fixture %.9g", CASES[i], got, want);
    /* the lowering, evaluated the same way */
    double lowered;
    cr_assert(eval_case(CASES[i], "O1", &lowered, err, sizeof err), "%s after O1: %s", CASES[i], err);
    cr_assert_leq(rel_err(lowered, got), TOL_LOWERING, "%s: ir_eval %.17g, after O1 %.17g", CASES[i], got, lowered);
  }
}

Test(loss, ir_eval_reports_a_target_out_of_range) {
  double loss;
  char err[1024];
  cr_assert_not(eval_case("out_of_range", NULL, &loss, err, sizeof err));
  cr_assert_str_eq(err, "in 'main', 'cross_entropy' (result 'loss'): target 7 at position [1, 2] is out of range for "
                        "7 classes");
  /* after the lowering, the gather that checks the targets stops */
  cr_assert_not(eval_case("out_of_range", "O1", &loss, err, sizeof err));
  cr_assert_str_eq(err, "in 'main', 'gather' (result 'loss_targets_checked'): index 7 out of range for dimension 0 of "
                        "size 7");
}

/* The lowering keeps the op's value on random logits and targets (ignored
 * ones included), for shapes of rank 1 to 4. */
Test(loss, lowering_preserves_random_cases) {
  static const char *const programs[] = {
      "func main(x: fp32[3,5], t: int32[3]) {\n  y = cross_entropy(x, t);\n  return y;\n}\n",
      "func main(x: fp16[2,2,3,4], t: int32[2,2,3]) {\n  y = cross_entropy(x, t, ignore_index=-1);\n  return y;\n}\n",
      "func main(x: fp32[6], t: int32[]) {\n  y = cross_entropy(x, t);\n  return y;\n}\n",
      "func main(x: fp32[4,2,6], t: int32[4,2]) {\n  y = cross_entropy(x, t, ignore_index=3);\n  return y;\n}\n",
  };
  static const int64_t low[] = {0, -1, 0, 0}, high[] = {5, 4, 6, 6};
  for (size_t i = 0; i < sizeof programs / sizeof *programs; i++) {
    EvalIntRange r[] = {{"t", low[i], high[i]}, {NULL, 0, 0}};
    char err[1024];
    double diff;
    for (uint64_t seed = 1; seed <= 4; seed++)
      cr_assert(eval_pass_preserves(programs[i], "O0", seed, 1e-12, r, &diff, err, sizeof err), "%s", err);
  }
}

/* ---- the CPU backend ---- */

static MilDType mil_of(OrionDType t) {
  return t == ORION_DT_FP16 ? MIL_DT_FP16 : t == ORION_DT_FP32 ? MIL_DT_FP32 : MIL_DT_INT32;
}

static CpuTensor to_cpu(const NpyArray *a) {
  CpuTensor t = {.dtype = mil_of(a->dtype), .rank = a->rank, .data = a->data};
  for (uint32_t i = 0; i < a->rank; i++) t.dims[i] = a->dims[i];
  return t;
}

typedef struct CaseRun {
  char dir[64];
  Diag d;
  SourceSet sources;
  StrBuf diags;
  OrionProgram *p;
} CaseRun;

/* Compiles `text` as orionc does (O1, ios18) and opens the package. */
static void open_text(CaseRun *r, const char *text) {
  snprintf(r->dir, sizeof r->dir, "/tmp/orion-loss-XXXXXX");
  cr_assert_not_null(mkdtemp(r->dir));
  Parsed p;
  parsed_open(&p, text);
  cr_assert_not_null(p.m, "%s", p.diags.data);
  cr_assert(passes_legalize(p.m, &p.d), "%s", p.diags.data);
  char path[128];
  snprintf(path, sizeof path, "%s/m.anepkg", r->dir);
  PackageOptions po = {.target = MIL_IOS18, .source_name = "model.oir", .source_text = text, .source_len = strlen(text)};
  cr_assert(package_write(p.m, path, &po, &p.d), "%s", p.diags.data);
  parsed_close(&p);
  srcset_init(&r->sources);
  diag_init(&r->d, &r->sources);
  sb_init(&r->diags);
  r->d.capture = &r->diags;
  r->p = orion_open(path, NULL, &r->d);
  cr_assert_not_null(r->p, "%s", r->diags.data);
}

static void open_case(CaseRun *r, const char *name) {
  char *text = case_text(name);
  open_text(r, text);
  free(text);
}

static void close_case(CaseRun *r) {
  orion_close(r->p);
  srcset_free(&r->sources);
  sb_free(&r->diags);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", r->dir);
  cr_assert_eq(system(cmd), 0);
}

/* Runs the case's package in `mode`: true with the loss in *loss, or false
 * with the messages in r->diags. */
static bool run_case(CaseRun *r, const char *name, CpuNumerics mode, float *loss) {
  NpyArray x = case_npy(name, "logits.npy"), t = case_npy(name, "targets.npy");
  CpuTensor in[2] = {to_cpu(&x), to_cpu(&t)}, out[1] = {{0}};
  CpuProgram *c = cpu_prepare(r->p, 0, mode, &r->d);
  cr_assert_not_null(c, "%s", r->diags.data);
  bool ok = cpu_run(c, in, out, &r->d);
  if (ok) {
    cr_assert_eq(out[0].dtype, MIL_DT_FP32);
    cr_assert_eq(out[0].rank, 0);
    *loss = *(const float *)out[0].data;
    cpu_tensor_free(&out[0]);
  }
  cpu_free(c);
  npy_free(&x);
  npy_free(&t);
  return ok;
}

Test(loss, cpu_backend_matches_the_fixtures) {
  for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
    double want = expected_loss(CASES[i]);
    CaseRun r;
    open_case(&r, CASES[i]);
    float fp32, ane;
    cr_assert(run_case(&r, CASES[i], CPU_NUMERICS_FP32, &fp32), "%s: %s", CASES[i], r.diags.data);
    cr_assert(run_case(&r, CASES[i], CPU_NUMERICS_ANE, &ane), "%s (ane): %s", CASES[i], r.diags.data);
    cr_assert_leq(rel_err(fp32, want), TOL_CPU, "%s: cpu %.9g, fixture %.9g", CASES[i], (double)fp32, want);
    cr_assert(memcmp(&fp32, &ane, sizeof fp32) == 0, "%s: fp32 %.9g but ane %.9g", CASES[i], (double)fp32, (double)ane);
    fprintf(stderr, "loss %-18s cpu %.9g fixture %.9g rel error %.3g (tolerance %g)\n", CASES[i], (double)fp32, want,
            rel_err(fp32, want), TOL_CPU);
    close_case(&r);
  }
}

Test(loss, cpu_backend_reports_a_target_out_of_range) {
  CaseRun r;
  open_case(&r, "out_of_range");
  float loss;
  cr_assert_not(run_case(&r, "out_of_range", CPU_NUMERICS_FP32, &loss));
  cr_assert_not_null(strstr(r.diags.data, "error: gather: index 7 is out of range for dimension 0 of size 7 (indices "
                                          "element [1, 2])"),
                     "%s", r.diags.data);
  /* at the statement that checks the targets */
  cr_assert_not_null(strstr(r.diags.data, "loss_targets_checked = gather("), "%s", r.diags.data);
  close_case(&r);
}

/* A 32k vocabulary (Llama-sized): the lowering's class table [0, C) goes to
 * the weight file, not into the MIL text as 190 KB of digits; the backend
 * reads it back from there (a target at C - 1 is picked, C is out of range). */
#define VOCAB 32000

static float vocab_logit(int row, int c) { return (float)sin(0.001 * (double)c * (row + 1)) * 3.0f; }

Test(loss, class_table_of_a_large_vocabulary_is_a_blob) {
  CaseRun r;
  open_text(&r, "func main(logits: fp32[2,32000], targets: int32[2]) {\n"
                "  loss: fp32[] = cross_entropy(logits, targets);\n"
                "  return loss;\n"
                "}\n");
  char path[128], *mil;
  size_t len;
  const char *err;
  snprintf(path, sizeof path, "%s/m.anepkg/model.mil", r.dir);
  cr_assert(read_file(path, 1 << 22, &mil, &len, &err), "%s: %s", path, err);
  cr_assert_lt(len, 8192, "model.mil is %zu bytes", len);
  cr_assert_not_null(strstr(mil, "tensor<int32, [32000]> loss_classes = const()[name = string(\"loss_classes\"), "
                                 "val = tensor<int32, [32000]>(BLOBFILE("),
                     "%s", mil);
  free(mil);

  float *x = xmalloc(sizeof *x * 2 * VOCAB);
  for (int row = 0; row < 2; row++)
    for (int c = 0; c < VOCAB; c++) x[row * VOCAB + c] = vocab_logit(row, c);
  int32_t t[2] = {VOCAB - 1, 5};
  double want = 0;
  for (int row = 0; row < 2; row++) {
    double mx = -HUGE_VAL, sum = 0;
    for (int c = 0; c < VOCAB; c++) mx = fmax(mx, (double)x[row * VOCAB + c]);
    for (int c = 0; c < VOCAB; c++) sum += exp((double)x[row * VOCAB + c] - mx);
    want += (log(sum) + mx - (double)x[row * VOCAB + t[row]]) / 2;
  }
  CpuTensor in[2] = {{.dtype = MIL_DT_FP32, .rank = 2, .dims = {2, VOCAB}, .data = x},
                     {.dtype = MIL_DT_INT32, .rank = 1, .dims = {2}, .data = t}},
            out[1] = {{0}};
  CpuProgram *c = cpu_prepare(r.p, 0, CPU_NUMERICS_FP32, &r.d);
  cr_assert_not_null(c, "%s", r.diags.data);
  cr_assert(cpu_run(c, in, out, &r.d), "%s", r.diags.data);
  float loss = *(const float *)out[0].data;
  cpu_tensor_free(&out[0]);
  /* fp32 throughout, a sum of C terms: (C + N + 4) * 2^-24 relative, as above */
  double tol = (VOCAB + 2 + 4) * 0x1p-24;
  cr_assert_leq(rel_err(loss, want), tol, "cpu %.9g, expected %.9g", (double)loss, want);

  t[0] = VOCAB;
  cr_assert_not(cpu_run(c, in, out, &r.d));
  cr_assert_not_null(strstr(r.diags.data, "error: gather: index 32000 is out of range for dimension 0 of size 32000"),
                     "%s", r.diags.data);
  cpu_free(c);
  free(x);
  close_case(&r);
}
