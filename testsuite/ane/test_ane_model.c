/*
 * The ane backend's lifecycle (runtime/ane/ane_model.h) against the
 * stand-in framework, below the backend interface: a package's MIL and
 * weight file compiled, loaded and evaluated on surfaces; a binding in
 * declared order gets swapped data (the stand-in reads surfaces in ASCII
 * order of MIL names, as the device does), the manifest's binding the right
 * data; the weights are baked at compile (a change is seen only after a
 * recompile, which the stand-in counts); the reference's temporary
 * directory exists while the model does; the stand-in refuses surfaces
 * below the minimum or of unequal size with the device's evaluation code;
 * a program with a weight as an input is read in ASCII order and sees a new
 * weight without a compile under the stand-in's `inputs` switch, and is
 * refused at compile by name under the default.
 */
#define _XOPEN_SOURCE 700

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../helpers.h"
#include "ane_test_support.h"
#include "ane_model.h"
#include "ane_surfaces.h"
#include "orion/backend.h"
#include "orion/fp16.h"
#include "standin_exec.h"

/* y = (x - bias) * w: not symmetric in x and bias. The MIL lists the
 * inputs in ASCII order (bias, x); orion_input order is declared (x, bias). */
static const char *const program =
    "func main(x: fp16[1,4,1,8], bias: fp16[1,4,1,8]) {\n"
    "  param w: fp16[1,4,1,8] = fill(0.5);\n"
    "  d = sub(x, bias);\n"
    "  y = mul(d, w);\n"
    "  return y;\n"
    "}\n";

enum { N = 32, SURFACE = 49152 };

static char dir[64], pkg[160], tmpdir[160];
static char *mil, *weights;
static size_t mil_len, weights_len;
static AneFramework fw;
static AneSystem sys;

static void setup(void) {
  ane_test_package(program, "ane-model", dir, sizeof dir, pkg, sizeof pkg);
  snprintf(tmpdir, sizeof tmpdir, "%s/tmp", dir);
  cr_assert_eq(mkdir(tmpdir, 0700), 0);
  cr_assert_eq(setenv("TMPDIR", tmpdir, 1), 0);
  char path[256];
  snprintf(path, sizeof path, "%s/model.mil", pkg);
  mil = slurp(path, &mil_len);
  snprintf(path, sizeof path, "%s/weights/weight.bin", pkg);
  weights = slurp(path, &weights_len);
  char why[1024] = "";
  cr_assert(ane_framework_open(&fw, NULL, why, sizeof why), "%s", why);
  cr_assert(ane_system_bind(&sys, fw.handle, fw.path, why, sizeof why), "%s", why);
}

static void teardown(void) {
  free(mil);
  free(weights);
  ane_framework_close(&fw);
  remove_tree(dir);
}

/* Replaces every fp16 `from` in the weight bytes (past the file header) by `to`. */
static void replace_weight(char *data, size_t len, uint16_t from, uint16_t to) {
  int n = 0;
  for (size_t i = 64; i + 1 < len; i += 2) {
    uint16_t v;
    memcpy(&v, data + i, 2);
    if (v == from) memcpy(data + i, &to, 2), n++;
  }
  cr_assert_eq(n, N, "the weight's %d elements", N);
}

static void fill(IOSurfaceRef s, float value) {
  cr_assert_eq(sys.lock(s, 0, NULL), 0);
  uint16_t *h = sys.base_address(s);
  memset(h, 0, SURFACE);
  for (int i = 0; i < N; i++) h[i] = fp16_from_float(value);
  cr_assert_eq(sys.unlock(s, 0, NULL), 0);
}

static float first_output(const AneRequest *r) {
  cr_assert_eq(sys.lock(r->outputs[0], kIOSurfaceLockReadOnly, NULL), 0);
  const uint16_t *h = sys.base_address(r->outputs[0]);
  float y = fp16_to_float(h[0]);
  for (int i = 1; i < N; i++) cr_assert_eq(h[i], h[0]);
  cr_assert_eq(sys.unlock(r->outputs[0], kIOSurfaceLockReadOnly, NULL), 0);
  return y;
}

static void compile(AneModel *m, const char *w, size_t wlen) {
  AneWeightFile wf = {.key = "@model_path/weights/weight.bin", .data = w, .len = wlen};
  char why[2048] = "";
  cr_assert(ane_model_compile(m, &fw, &sys, "function 'main'", mil, mil_len, &wf, 1, why, sizeof why), "%s", why);
}

static unsigned long compiles(void) {
  unsigned long (*count)(void);
  void *sym = dlsym(fw.handle, "ane_standin_compile_count");
  cr_assert_not_null(sym);
  memcpy(&count, &sym, sizeof sym);
  return count();
}

Test(model, declared_order_gets_swapped_data_the_manifest_binding_the_right_data, .init = setup, .fini = teardown) {
  AneModel m;
  compile(&m, weights, weights_len);
  AneRequest r;
  char why[2048] = "";
  cr_assert(ane_request_make(&r, &fw, &sys, 2, 1, SURFACE, 0, why, sizeof why), "%s", why);
  /* Declared order: x at surface 0, bias at surface 1. */
  fill(r.inputs[0], 2.0f);
  fill(r.inputs[1], 0.5f);
  cr_assert(ane_model_evaluate(&m, &fw, &r, "function 'main'", why, sizeof why), "%s", why);
  cr_assert_float_eq(first_output(&r), -0.75f, 0, "(bias - x) * w: the inputs arrived swapped");
  /* The manifest's binding (the surface plan's slots): x at its binding. */
  SourceSet ss;
  srcset_init(&ss);
  Diag d;
  diag_init(&d, &ss);
  OrionProgram *p = orion_open(pkg, NULL, &d);
  cr_assert_not_null(p);
  const OrionTensorInfo *in[] = {orion_input(p, 0, 0), orion_input(p, 0, 1)}, *out[] = {orion_output(p, 0, 0)};
  cr_assert_str_eq(in[0]->name, "x");
  AneSurfacePlan plan;
  cr_assert(ane_surface_plan(&plan, in, 2, out, 1, SURFACE, why, sizeof why), "%s", why);
  cr_assert_eq(plan.input_slot[0], 1);
  cr_assert_eq(plan.input_slot[1], 0);
  fill(r.inputs[plan.input_slot[0]], 2.0f);
  fill(r.inputs[plan.input_slot[1]], 0.5f);
  cr_assert(ane_model_evaluate(&m, &fw, &r, "function 'main'", why, sizeof why), "%s", why);
  cr_assert_float_eq(first_output(&r), 0.75f, 0, "(x - bias) * w");
  /* What the cpu backend computes, through the backend interface. */
  uint16_t x[N], bias[N], y[N];
  for (int i = 0; i < N; i++) x[i] = fp16_from_float(2.0f), bias[i] = fp16_from_float(0.5f);
  OrionTensor tin[] = {{.dtype = MIL_DT_FP16, .rank = 4, .dims = {1, 4, 1, 8}, .data = x},
                       {.dtype = MIL_DT_FP16, .rank = 4, .dims = {1, 4, 1, 8}, .data = bias}};
  OrionTensor tout = {.dtype = MIL_DT_FP16, .rank = 4, .dims = {1, 4, 1, 8}, .data = y};
  OrionBackend *cpu = orion_backend_open("cpu", NULL, &d);
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_ANE};
  OrionExec *e = orion_backend_prepare(cpu, p, 0, &po, &d);
  cr_assert_not_null(e);
  cr_assert(orion_exec_run(e, tin, &tout, &d));
  cr_assert_float_eq(fp16_to_float(y[0]), 0.75f, 0);
  orion_exec_release(e);
  orion_backend_close(cpu);
  ane_surface_plan_free(&plan);
  orion_close(p);
  srcset_free(&ss);
  ane_request_free(&r, &fw, &sys);
  ane_model_free(&m, &fw);
}

Test(model, weights_are_baked_at_compile_and_each_compile_counted, .init = setup, .fini = teardown) {
  unsigned long before = compiles();
  AneModel m;
  compile(&m, weights, weights_len);
  cr_assert_eq(compiles(), before + 1);
  /* The reference's directory, with the MIL and the weights as given. */
  char path[512];
  snprintf(path, sizeof path, "%s/model.mil", m.dir);
  cr_assert_eq(strncmp(m.dir, tmpdir, strlen(tmpdir)), 0, "%s", m.dir);
  size_t len;
  char *written = slurp(path, &len);
  cr_assert_eq(len, mil_len);
  cr_assert_eq(memcmp(written, mil, len), 0);
  free(written);
  AneRequest r;
  char why[2048] = "";
  cr_assert(ane_request_make(&r, &fw, &sys, 2, 1, SURFACE, 0, why, sizeof why), "%s", why);
  fill(r.inputs[0], 0.5f); /* bias */
  fill(r.inputs[1], 2.0f); /* x */
  cr_assert(ane_model_evaluate(&m, &fw, &r, "function 'main'", why, sizeof why), "%s", why);
  cr_assert_float_eq(first_output(&r), 0.75f, 0);
  /* w = 2 in the caller's bytes and in the directory's file: not seen. */
  replace_weight(weights, weights_len, fp16_from_float(0.5f), fp16_from_float(2.0f));
  snprintf(path, sizeof path, "%s/weights/weight.bin", m.dir);
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f);
  cr_assert_eq(fwrite(weights, 1, weights_len, f), weights_len);
  fclose(f);
  cr_assert(ane_model_evaluate(&m, &fw, &r, "function 'main'", why, sizeof why), "%s", why);
  cr_assert_float_eq(first_output(&r), 0.75f, 0, "the compiled program keeps the weights it was compiled with");
  /* Recompiled: seen; the request and its surfaces are reused. */
  char dir_before[512];
  snprintf(dir_before, sizeof dir_before, "%s", m.dir);
  ane_model_free(&m, &fw);
  cr_assert_neq(access(dir_before, F_OK), 0, "the directory is removed with the model");
  compile(&m, weights, weights_len);
  cr_assert_eq(compiles(), before + 2);
  cr_assert(ane_model_evaluate(&m, &fw, &r, "function 'main'", why, sizeof why), "%s", why);
  cr_assert_float_eq(first_output(&r), 3.0f, 0);
  ane_request_free(&r, &fw, &sys);
  ane_model_free(&m, &fw);
}

Test(model, surfaces_below_the_minimum_are_refused_with_the_devices_code, .init = setup, .fini = teardown) {
  AneModel m;
  compile(&m, weights, weights_len);
  AneRequest r;
  char why[2048] = "";
  cr_assert(ane_request_make(&r, &fw, &sys, 2, 1, 16384, 0, why, sizeof why), "%s", why);
  cr_assert_not(ane_model_evaluate(&m, &fw, &r, "function 'main'", why, sizeof why));
  cr_assert_str_eq(why, "the ane backend: the device failed to evaluate function 'main' (error code 29, 0x1d): program "
                        "evaluation failed: a surface of 16384 bytes is below the 49152-byte minimum [ANE004]");
  ane_request_free(&r, &fw, &sys);
  ane_model_free(&m, &fw);
}

/* The stand-in's own check, below the framework's classes: a request whose
 * surfaces differ in size (ane_request_make never makes one). */
Test(model, surfaces_of_unequal_size_are_refused, .init = setup, .fini = teardown) {
  StandinProgram *(*standin_compile_fn)(const char *, size_t, const StandinWeight *, size_t, long *, char **);
  bool (*evaluate)(StandinProgram *, int64_t, IOSurfaceRef const *, long, IOSurfaceRef const *, long, long *, char **);
  void (*program_free)(StandinProgram *);
  void *c = dlsym(fw.handle, "standin_compile"), *e = dlsym(fw.handle, "standin_evaluate"),
       *f = dlsym(fw.handle, "standin_program_free");
  cr_assert(c && e && f);
  memcpy(&standin_compile_fn, &c, sizeof c);
  memcpy(&evaluate, &e, sizeof e);
  memcpy(&program_free, &f, sizeof f);
  char key[] = "@model_path/weights/weight.bin";
  StandinWeight w = {.key = key, .data = (uint8_t *)weights, .len = weights_len};
  long code = 0;
  char *text = NULL;
  StandinProgram *p = standin_compile_fn(mil, mil_len, &w, 1, &code, &text);
  cr_assert_not_null(p, "%s", text);
  IOSurfaceRef in[] = {ane_iosurface_create(&sys, SURFACE), ane_iosurface_create(&sys, SURFACE)};
  IOSurfaceRef out[] = {ane_iosurface_create(&sys, 2 * SURFACE)};
  cr_assert_not(evaluate(p, 0, in, 2, out, 1, &code, &text));
  cr_assert_eq(code, STANDIN_ERROR_EVALUATE);
  cr_assert_str_eq(text, "program evaluation failed: the request's surfaces are of 49152 and 98304 bytes, not of one "
                         "size");
  free(text);
  for (int i = 0; i < 2; i++) sys.release(in[i]);
  sys.release(out[0]);
  program_free(p);
}

/* y = (x - bias) * w with w an input (ane_weight_inputs.h's name): the
 * stand-in reads it like any input, in ASCII order of the MIL names
 * (bias, orion_weight__w, x), under ORION_ANE_STANDIN_WEIGHTS=inputs, and
 * a new w written into its surface is seen with no compile; under the
 * default (baked) such a program is refused at compile, by name. */
static const char weight_input_mil[] =
    "program(1.3)\n{\n    func main<ios18>(tensor<fp16, [1, 4, 1, 8]> x, tensor<fp16, [1, 4, 1, 8]> bias, "
    "tensor<fp16, [1, 4, 1, 8]> orion_weight__w) {\n"
    "        tensor<fp16, [1, 4, 1, 8]> d = sub(x = x, y = bias)[name = string(\"d\")];\n"
    "        tensor<fp16, [1, 4, 1, 8]> y = mul(x = d, y = orion_weight__w)[name = string(\"y\")];\n"
    "    } -> (y);\n}\n";

Test(model, a_weight_input_is_read_in_ascii_order_under_inputs_and_refused_otherwise, .init = setup,
     .fini = teardown) {
  AneModel m;
  char why[2048] = "";
  unsetenv("ORION_ANE_STANDIN_WEIGHTS");
  cr_assert_not(ane_model_compile(&m, &fw, &sys, "function 'main'", weight_input_mil, sizeof weight_input_mil - 1,
                                  NULL, 0, why, sizeof why));
  cr_assert_str_eq(why, "the ane backend: the device failed to compile function 'main' (error code 1, 0x1): "
                        "ANECCompile() FAILED: input 'orion_weight__w' is a weight given as an input, which this "
                        "device does not take (ORION_ANE_STANDIN_WEIGHTS=baked; only inputs takes them)");
  cr_assert_eq(setenv("ORION_ANE_STANDIN_WEIGHTS", "inputs", 1), 0);
  unsigned long before = compiles();
  cr_assert(ane_model_compile(&m, &fw, &sys, "function 'main'", weight_input_mil, sizeof weight_input_mil - 1, NULL,
                              0, why, sizeof why),
            "%s", why);
  AneRequest r;
  cr_assert(ane_request_make(&r, &fw, &sys, 3, 1, SURFACE, 0, why, sizeof why), "%s", why);
  fill(r.inputs[0], 0.5f); /* bias */
  fill(r.inputs[1], 0.5f); /* orion_weight__w */
  fill(r.inputs[2], 2.0f); /* x */
  cr_assert(ane_model_evaluate(&m, &fw, &r, "function 'main'", why, sizeof why), "%s", why);
  cr_assert_float_eq(first_output(&r), 0.75f, 0);
  fill(r.inputs[1], 2.0f);
  cr_assert(ane_model_evaluate(&m, &fw, &r, "function 'main'", why, sizeof why), "%s", why);
  cr_assert_float_eq(first_output(&r), 3.0f, 0, "the new weight is seen");
  cr_assert_eq(compiles(), before + 1, "without a compile");
  unsetenv("ORION_ANE_STANDIN_WEIGHTS");
  ane_request_free(&r, &fw, &sys);
  ane_model_free(&m, &fw);
}

/* The stand-in whose descriptor has only the initializer (alloc +
 * -initWithNetworkText:weights:optionsPlist:isMILModel:): the whole
 * lifecycle runs through it, and under ASan the object the initializer
 * hands over is released (the backend autoreleases it). */
static void setup_init_only(void) {
  const char *standins = getenv("ANE_STANDIN_DIR");
  cr_assert_not_null(standins, "ANE_STANDIN_DIR (meson test sets it)");
  char path[4096];
  snprintf(path, sizeof path, "%s/libane_standin_init_only.so", standins);
  cr_assert_eq(setenv("ORION_ANE_FRAMEWORK", path, 1), 0);
  setup();
}

Test(model, a_descriptor_made_by_its_initializer_compiles_and_runs, .init = setup_init_only, .fini = teardown) {
  cr_assert_str_eq(fw.descriptor_from_mil_name, "initWithNetworkText:weights:optionsPlist:isMILModel:");
  AneModel m;
  unsigned long before = compiles();
  compile(&m, weights, weights_len);
  cr_assert_eq(compiles(), before + 1);
  AneRequest r;
  char why[2048] = "";
  cr_assert(ane_request_make(&r, &fw, &sys, 2, 1, SURFACE, 0, why, sizeof why), "%s", why);
  fill(r.inputs[0], 0.5f); /* bias */
  fill(r.inputs[1], 2.0f); /* x */
  cr_assert(ane_model_evaluate(&m, &fw, &r, "function 'main'", why, sizeof why), "%s", why);
  cr_assert_float_eq(first_output(&r), 0.75f, 0, "(x - bias) * w");
  ane_request_free(&r, &fw, &sys);
  ane_model_free(&m, &fw);
}
