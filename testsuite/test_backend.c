/*
 * The backend interface (orion/backend.h): the registry and selection by
 * name, the CPU and checking backends behind the one table (same bits as
 * the CPU backend called directly), options refused against a backend's
 * caps, per-statement support checks, and the weight update as one call
 * (the old mapping still mapped while backends move, undone when one fails).
 */
#define _XOPEN_SOURCE 700

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../runtime/backend_internal.h"
#include "helpers.h"
#include "orion/backend.h"
#include "orion/cpu.h"
#include "orion/fp16.h"
#include "orion/package.h"
#include "orion/passes.h"
#include "orion/patch.h"

/* A linear layer with gelu and a residual add: what the CPU backend fuses. */
static const char *const program =
    "func main(x: fp16[2,64]) {\n"
    "  param w: fp16[64,64] = normal(seed=3, std=0.2);\n"
    "  param b: fp16[64] = fill(0.25);\n"
    "  h = linear(x, w, b);\n"
    "  g = gelu(h, mode=\"tanh\");\n"
    "  y = add(g, x);\n"
    "  return y;\n"
    "}\n";

static char dir[64], pkg[160];

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/orion-backend-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
  snprintf(pkg, sizeof pkg, "%s/m.anepkg", dir);
  Parsed p;
  parsed_open(&p, program);
  cr_assert_not_null(p.m, "%s", p.diags.data);
  cr_assert(passes_legalize(p.m, &p.d), "%s", p.diags.data);
  PackageOptions po = {.target = MIL_IOS18, .source_name = "t.oir", .source_text = program,
                       .source_len = strlen(program)};
  cr_assert(package_write(p.m, pkg, &po, &p.d), "%s", p.diags.data);
  parsed_close(&p);
}

static void teardown(void) { remove_tree(dir); }

typedef struct Ctx {
  SourceSet sources;
  Diag d;
  StrBuf text;
} Ctx;

static void ctx_open(Ctx *c) {
  srcset_init(&c->sources);
  diag_init(&c->d, &c->sources);
  sb_init(&c->text);
  c->d.capture = &c->text;
  c->d.program = "test";
}

static void ctx_close(Ctx *c) {
  sb_free(&c->text);
  srcset_free(&c->sources);
}

static uint16_t xs[2 * 64];

static OrionTensor input(void) {
  for (int i = 0; i < 128; i++) xs[i] = fp16_from_float((float)((i * 37) % 23 - 11) / 8.0f);
  return (OrionTensor){.dtype = MIL_DT_FP16, .rank = 2, .dims = {2, 64}, .data = xs};
}

Test(backend, registry_lists_cpu_first_then_check_and_ane) {
  cr_assert_eq(orion_backend_registry_count(), 3);
  cr_assert_str_eq(orion_backend_registry_get(0)->name, "cpu");
  cr_assert_str_eq(orion_backend_registry_get(1)->name, "check");
  cr_assert_str_eq(orion_backend_registry_get(2)->name, "ane");
  cr_assert_null(orion_backend_registry_get(3));
  cr_assert_eq(orion_backend_find("check"), &orion_backend_check);
  cr_assert_null(orion_backend_find("gpu"));
  char *names = orion_backend_available_names();
  cr_assert_str_eq(names, "cpu, check");
  free(names);
}

Test(backend, unknown_and_unavailable_backends_say_why) {
  Ctx c;
  ctx_open(&c);
  cr_assert_null(orion_backend_open("gpu", NULL, &c.d));
  cr_assert_null(orion_backend_open("ane", NULL, &c.d));
  cr_assert_str_eq(c.text.data,
                   "test: error: unknown backend 'gpu' (backends built in: cpu, check)\n"
                   "test: error: the ane backend is only available on macOS (Apple's Neural Engine, through the "
                   "private AppleNeuralEngine.framework), and this build is not for macOS; backends built in: cpu, "
                   "check\n");
  ctx_close(&c);
}

/* The interface adds nothing to the numbers: the same bits as the CPU
 * backend called directly, in both numerics, through both backends. */
Test(backend, cpu_and_check_compute_the_cpu_backends_bits, .init = setup, .fini = teardown) {
  Ctx c;
  ctx_open(&c);
  OrionProgram *p = orion_open(pkg, NULL, &c.d);
  cr_assert_not_null(p, "%s", c.text.data);
  OrionTensor in = input();
  for (int mode = 0; mode < 2; mode++) {
    CpuOptions co = {.numerics = mode ? CPU_NUMERICS_FP32 : CPU_NUMERICS_ANE};
    CpuProgram *direct = cpu_prepare_with(p, 0, &co, &c.d);
    cr_assert_not_null(direct, "%s", c.text.data);
    CpuTensor want = {0};
    cr_assert(cpu_run(direct, &in, &want, &c.d), "%s", c.text.data);
    for (int k = 0; k < 2; k++) {
      OrionBackend *b = orion_backend_open(k ? "check" : "cpu", NULL, &c.d);
      cr_assert_not_null(b, "%s", c.text.data);
      OrionPrepareOptions po = {.numerics = mode ? ORION_NUMERICS_FP32 : ORION_NUMERICS_ANE};
      OrionExec *e = orion_backend_prepare(b, p, 0, &po, &c.d);
      cr_assert_not_null(e, "%s", c.text.data);
      cr_assert_eq(orion_exec_program(e), p);
      OrionTensor got = {0};
      cr_assert(orion_exec_run_alloc(e, &in, &got, &c.d), "%s", c.text.data);
      cr_assert_eq(got.dtype, MIL_DT_FP16);
      cr_assert_eq(memcmp(got.data, want.data, 2 * 64 * 2), 0, "%s, mode %d", orion_backend_name(b), mode);
      orion_tensor_free(&got);
      orion_backend_close(b); /* releases e */
    }
    cpu_tensor_free(&want);
    cpu_free(direct);
  }
  cr_assert_eq(c.text.len, 0, "%s", c.text.data);
  orion_close(p);
  ctx_close(&c);
}

/* The checking backend's comparison names the first element that differs. */
Test(backend, check_reports_the_first_differing_element, .init = setup, .fini = teardown) {
  Ctx c;
  ctx_open(&c);
  OrionProgram *p = orion_open(pkg, NULL, &c.d);
  cr_assert_not_null(p, "%s", c.text.data);
  uint16_t a[128], b[128];
  for (int i = 0; i < 128; i++) a[i] = b[i] = fp16_from_float((float)i);
  OrionTensor ta = {.dtype = MIL_DT_FP16, .rank = 2, .dims = {2, 64}, .data = a};
  OrionTensor tb = ta;
  tb.data = b;
  cr_assert(check_outputs_identical(p, 0, &ta, &tb, &c.d));
  b[70] = fp16_from_float(70.5f);
  b[90] = 0;
  cr_assert_not(check_outputs_identical(p, 0, &ta, &tb, &c.d));
  cr_assert_str_eq(c.text.data, "test: error: the fused and the unfused runs differ: output 'y' element 70 is 70 "
                                "fused, 70.5 unfused\n");
  orion_close(p);
  ctx_close(&c);
}

/* A backend with fewer caps than the CPU's: prepare refuses what it lacks. */
static bool mini_available(char *why, size_t len) {
  (void)why, (void)len;
  return true;
}
static int mini_state;
static void *mini_open(const OrionBackendOptions *opt, Diag *d) {
  (void)opt, (void)d;
  return &mini_state;
}
static void mini_close(void *impl) { (void)impl; }
static OrionBackendCaps mini_caps(const void *impl) {
  (void)impl;
  return (OrionBackendCaps){.update_strategies = 1u << ORION_RELOAD_REMAP};
}

Test(backend, prepare_refuses_what_the_caps_lack, .init = setup, .fini = teardown) {
  static const OrionBackendVtable mini = {.name = "mini", .description = "test", .available = mini_available,
                                          .open = mini_open, .close = mini_close, .caps = mini_caps};
  Ctx c;
  ctx_open(&c);
  OrionProgram *p = orion_open(pkg, NULL, &c.d);
  cr_assert_not_null(p, "%s", c.text.data);
  OrionBackend *b = orion_backend_open_vtable(&mini, NULL, &c.d);
  cr_assert_not_null(b);
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_FP32, .profile = true, .check_finite = true};
  cr_assert_null(orion_backend_prepare(b, p, 0, &po, &c.d));
  po = (OrionPrepareOptions){0};
  cr_assert_null(orion_backend_prepare(b, p, 5, &po, &c.d));
  OrionOpenOptions oo = {.verify_checksums = true, .reload = ORION_RELOAD_INPUTS};
  cr_assert_not(orion_backend_update_weights(b, p, &oo, NULL, &c.d));
  cr_assert_str_eq(c.text.data, "test: error: the mini backend has no fp32 numerics (it computes as the ANE does)\n"
                                "test: error: the mini backend cannot profile statements\n"
                                "test: error: the mini backend cannot check results for inf and NaN\n"
                                "test: error: function index 5 out of range (the program has 1)\n"
                                "test: error: the mini backend cannot update weights by binding weights as inputs\n");
  orion_backend_close(b);
  orion_close(p);
  ctx_close(&c);
}

/* Every statement the backend cannot run is reported at its location. */
Test(backend, supports_reports_every_unknown_op_at_its_statement) {
  char d[] = "/tmp/orion-backend-mil-XXXXXX";
  cr_assert_not_null(mkdtemp(d));
  char path[96];
  snprintf(path, sizeof path, "%s/model.mil", d);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fputs("program(1.3)\n"
        "{\n"
        "    func main<ios18>(tensor<fp32, [4]> x) {\n"
        "        tensor<fp32, [4]> a = frobnicate(x = x)[name = string(\"a\")];\n"
        "        tensor<fp32, [4]> b = relu(x = a)[name = string(\"b\")];\n"
        "        tensor<fp32, [4]> c = twiddle(x = b)[name = string(\"c\")];\n"
        "    } -> (c);\n"
        "}\n",
        f);
  fclose(f);
  Ctx c;
  ctx_open(&c);
  OrionProgram *p = orion_open(d, NULL, &c.d);
  cr_assert_not_null(p, "%s", c.text.data);
  OrionBackend *b = orion_backend_open("cpu", NULL, &c.d);
  cr_assert_not(orion_backend_supports(b, p, 0, &c.d));
  char want[1024];
  snprintf(want, sizeof want,
           "%s:4:31: error: op 'frobnicate' is not supported by the CPU backend\n"
           "    4 |         tensor<fp32, [4]> a = frobnicate(x = x)[name = string(\"a\")];\n"
           "      |                               ^~~~~~~~~~\n"
           "%s:6:31: error: op 'twiddle' is not supported by the CPU backend\n"
           "    6 |         tensor<fp32, [4]> c = twiddle(x = b)[name = string(\"c\")];\n"
           "      |                               ^~~~~~~\n",
           path, path);
  cr_assert_str_eq(c.text.data, want);
  orion_backend_close(b);
  orion_close(p);
  ctx_close(&c);
  remove_tree(d);
}

/* ---- weights updated as one call ---- */

static PatchTensor bias_tensor(const float *v) {
  PatchTensor t = {.name = "b", .origin = "memory", .dtype = ORION_DT_FP32, .rank = 1, .dims = {64}, .data = v,
                   .nbytes = 64 * 4};
  return t;
}

static const uint16_t *bias_of(OrionProgram *p) {
  for (uint32_t i = 0; i < orion_weight_count(p, 0); i++)
    if (!strcmp(orion_weight(p, 0, i)->name, "b")) return orion_weight(p, 0, i)->data;
  cr_assert_fail("no weight b");
  return NULL;
}

/* After an update through the interface, every function prepared on the
 * backend computes what a fresh open of the patched package computes. */
Test(backend, update_weights_reaches_every_prepared_function, .init = setup, .fini = teardown) {
  Ctx c;
  ctx_open(&c);
  OrionProgram *p = orion_open(pkg, NULL, &c.d);
  cr_assert_not_null(p, "%s", c.text.data);
  OrionBackend *b = orion_backend_open("check", NULL, &c.d);
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_ANE};
  OrionExec *e1 = orion_backend_prepare(b, p, 0, &po, &c.d), *e2 = orion_backend_prepare(b, p, 0, &po, &c.d);
  cr_assert(e1 && e2, "%s", c.text.data);
  OrionTensor in = input(), before = {0};
  cr_assert(orion_exec_run_alloc(e1, &in, &before, &c.d), "%s", c.text.data);
  float nb[64];
  for (int i = 0; i < 64; i++) nb[i] = -1.5f + (float)i / 16;
  PatchTensor t = bias_tensor(nb);
  cr_assert(package_patch(pkg, &t, 1, NULL, &c.d), "%s", c.text.data);
  bool changed = false;
  cr_assert(orion_backend_update_weights(b, p, NULL, &changed, &c.d), "%s", c.text.data);
  cr_assert(changed);
  cr_assert_eq(orion_weights_generation(p), 1);
  cr_assert(orion_backend_update_weights(b, p, NULL, &changed, &c.d), "%s", c.text.data);
  cr_assert_not(changed, "same generation: nothing to do");

  OrionProgram *fresh = orion_open(pkg, NULL, &c.d);
  OrionBackend *cpu = orion_backend_open("cpu", NULL, &c.d);
  OrionExec *ef = orion_backend_prepare(cpu, fresh, 0, &po, &c.d);
  cr_assert_not_null(ef, "%s", c.text.data);
  OrionTensor want = {0}, got1 = {0}, got2 = {0};
  cr_assert(orion_exec_run_alloc(ef, &in, &want, &c.d), "%s", c.text.data);
  cr_assert(orion_exec_run_alloc(e1, &in, &got1, &c.d), "%s", c.text.data);
  cr_assert(orion_exec_run_alloc(e2, &in, &got2, &c.d), "%s", c.text.data);
  cr_assert_neq(memcmp(want.data, before.data, 256), 0, "the new bias changes the result");
  cr_assert_eq(memcmp(got1.data, want.data, 256), 0);
  cr_assert_eq(memcmp(got2.data, want.data, 256), 0);
  orion_tensor_free(&before);
  orion_tensor_free(&want);
  orion_tensor_free(&got1);
  orion_tensor_free(&got2);
  orion_backend_close(cpu);
  orion_backend_close(b);
  orion_close(fresh);
  orion_close(p);
  ctx_close(&c);
}

/* A backend that reads the weights it had while it moves to the new ones,
 * and fails on the second function: the old bytes stay mapped during the
 * move (reading it would fault otherwise), and a failure puts every
 * function back on the old mapping. */
static const uint16_t *old_bias;
static uint16_t seen_old;
static int moves, fail_at;
static void *spy_prepare(void *impl, OrionProgram *p, uint32_t fn, const OrionPrepareOptions *opt, Diag *d) {
  (void)impl, (void)p, (void)fn, (void)opt, (void)d;
  return xcalloc(1, 1);
}
static bool spy_weights_changed(void *exec, Diag *d) {
  (void)exec;
  seen_old = old_bias[0]; /* faults if the old mapping is gone */
  if (++moves == fail_at) {
    diag_error(d, (SrcSpan){0}, "spy refuses");
    return false;
  }
  return true;
}
static void spy_release(void *exec) { free(exec); }

Test(backend, update_keeps_the_old_mapping_until_all_moved_and_undoes_a_failure, .init = setup, .fini = teardown) {
  static const OrionBackendVtable spy = {.name = "spy", .description = "test", .available = mini_available,
                                         .open = mini_open, .close = mini_close, .caps = mini_caps,
                                         .prepare = spy_prepare, .weights_changed = spy_weights_changed,
                                         .release = spy_release};
  Ctx c;
  ctx_open(&c);
  OrionProgram *p = orion_open(pkg, NULL, &c.d);
  cr_assert_not_null(p, "%s", c.text.data);
  OrionBackend *b = orion_backend_open_vtable(&spy, NULL, &c.d);
  OrionPrepareOptions po = {0};
  cr_assert(orion_backend_prepare(b, p, 0, &po, &c.d) && orion_backend_prepare(b, p, 0, &po, &c.d));
  old_bias = bias_of(p);
  uint16_t was = old_bias[0];
  cr_assert_eq(was, 0x3400); /* 0.25 */
  float nb[64];
  for (int i = 0; i < 64; i++) nb[i] = 2;
  PatchTensor t = bias_tensor(nb);
  cr_assert(package_patch(pkg, &t, 1, NULL, &c.d), "%s", c.text.data);

  moves = 0, fail_at = 2;
  cr_assert_not(orion_backend_update_weights(b, p, NULL, NULL, &c.d));
  cr_assert_str_eq(c.text.data, "test: error: spy refuses\ntest: note: the program keeps its previous weights\n");
  /* The patch wrote the file in place, and a mapping shows the file: what
   * matters is that the old mapping was still there to read. */
  cr_assert_eq(seen_old, 0x4000);
  cr_assert_eq(moves, 4, "two moved forward (one failed), both moved back");
  cr_assert_eq(bias_of(p), old_bias, "back on the old mapping");
  cr_assert_eq(orion_weights_generation(p), 0, "the update is undone: the next one tries again");

  c.text.len = 0;
  c.text.data[0] = 0;
  moves = 0, fail_at = 0;
  cr_assert(orion_backend_update_weights(b, p, NULL, NULL, &c.d), "%s", c.text.data);
  cr_assert_eq(moves, 2, "each function read the old mapping while moving");
  cr_assert_neq(bias_of(p), old_bias, "on the new mapping");
  cr_assert_eq(bias_of(p)[0], 0x4000); /* 2 */
  cr_assert_eq(orion_weights_generation(p), 1);
  orion_backend_close(b);
  orion_close(p);
  ctx_close(&c);
}
