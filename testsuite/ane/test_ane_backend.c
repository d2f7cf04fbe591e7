/*
 * The ane backend behind the backend interface (runtime/ane/ane_backend.c)
 * against the stand-in framework: its caps and its -v line, a run on the
 * caller's fp32 tensors with the cpu backend's bits in ane numerics, a
 * training step's weight write taken up by a recompile (counted by the
 * stand-in), and the update strategies it does not carry out refused;
 * the device program cache under it (one compile per content), the
 * resident cap's eviction and refusal and the compile budget, read through
 * the usage line; the stand-in's own compile limit, past which a compile
 * fails silently as on the device, against orion's budget; a prepared
 * function's surfaces reused by its runs (counted by the stand-in).
 */
#define _GNU_SOURCE /* syscall(), for the flock the test puts under the backend */

#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../helpers.h"
#include "ane_test_support.h"
#include "orion/backend.h"
#include "orion/fp16.h"
#include "orion/hash.h"
#include "orion/package.h"
#include "orion/passes.h"
#include "orion/patch.h"
#include "orion/temporaries.h"

static const char *const program =
    "func main(x: fp32[1,4,1,8], bias: fp32[1,4,1,8]) {\n"
    "  param w: fp32[1,4,1,8] = fill(0.5);\n"
    "  d = sub(x, bias);\n"
    "  y = mul(d, w);\n"
    "  return y;\n"
    "}\n";

enum { N = 32 };

static char dir[64], pkg[160], cache[160];
static Capture cap; /* what the code under test reports, as "test" */

static void setup(void) {
  ane_test_package(program, "ane-backend", dir, sizeof dir, pkg, sizeof pkg);
  ane_test_own_cache(dir, cache, sizeof cache);
  capture_init(&cap, "test");
}

static void teardown(void) {
  capture_free(&cap);
  remove_tree(dir);
}

/* The package opened with writable weights (a training step's), and an ane
 * backend; both asserted. */
static OrionProgram *open_writable(OrionBackend **b) {
  OrionOpenOptions oo = ORION_OPEN_OPTIONS_DEFAULT;
  oo.writable_weights = true;
  OrionProgram *p = orion_open(pkg, &oo, &cap.d);
  cr_assert_not_null(p, "%s", cap.text.data);
  *b = orion_backend_open("ane", NULL, &cap.d);
  cr_assert_not_null(*b, "%s", cap.text.data);
  return p;
}

static float x[N], bias[N], y[N];
static const OrionTensor in[] = {{.dtype = MIL_DT_FP32, .rank = 4, .dims = {1, 4, 1, 8}, .data = x},
                                 {.dtype = MIL_DT_FP32, .rank = 4, .dims = {1, 4, 1, 8}, .data = bias}};

static float run(OrionExec *e) {
  for (int i = 0; i < N; i++) x[i] = 2.0f + (float)i, bias[i] = 0.5f;
  OrionTensor out = {0};
  cr_assert(orion_exec_run_alloc(e, in, &out, &cap.d), "%s", cap.text.data);
  cr_assert_eq(out.dtype, MIL_DT_FP32);
  memcpy(y, out.data, sizeof y);
  orion_tensor_free(&out);
  return y[0];
}

Test(ane_backend, caps_and_the_verbose_line, .init = setup, .fini = teardown) {
  OrionBackend *b = orion_backend_open("ane", NULL, &cap.d);
  cr_assert_not_null(b, "%s", cap.text.data);
  OrionBackendCaps caps = orion_backend_caps(b);
  cr_assert_not(caps.numerics_fp32);
  cr_assert_eq(caps.update_strategies, 1u << ORION_RELOAD_RECOMPILE);
  char about[1024];
  cr_assert(orion_backend_describe(b, about, sizeof about));
  char want[2048];
  snprintf(want, sizeof want, "framework '%s'; descriptor factory +modelWithMILText:weights:optionsPlist: (probed in "
           "order: +modelWithMILText:weights:optionsPlist:isMILModel:, "
           "-initWithNetworkText:weights:optionsPlist:isMILModel:, +modelWithMILText:weights:optionsPlist:); "
           "update strategy: recompile", getenv("ORION_ANE_FRAMEWORK"));
  cr_assert_str_eq(about, want);
  OrionBackend *cpu = orion_backend_open("cpu", NULL, &cap.d);
  cr_assert_not(orion_backend_describe(cpu, about, sizeof about), "the cpu backend has nothing to say");
  cr_assert_str_eq(about, "");
  orion_backend_close(cpu);
  orion_backend_close(b);
}

Test(ane_backend, fp32_tensors_give_the_cpu_backends_bits, .init = setup, .fini = teardown) {
  OrionProgram *p = orion_open(pkg, NULL, &cap.d);
  cr_assert_not_null(p, "%s", cap.text.data);
  float want[N];
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_ANE};
  for (int k = 0; k < 2; k++) {
    OrionBackend *b = orion_backend_open(k ? "ane" : "cpu", NULL, &cap.d);
    cr_assert_not_null(b, "%s", cap.text.data);
    OrionExec *e = orion_backend_prepare(b, p, 0, &po, &cap.d);
    cr_assert_not_null(e, "%s", cap.text.data);
    run(e);
    run(e); /* surfaces reused */
    if (!k) memcpy(want, y, sizeof want);
    else
      for (int i = 0; i < N; i++)
        cr_assert_eq(y[i], want[i], "y[%d]: ane %g, cpu %g", i, (double)y[i], (double)want[i]);
    orion_backend_close(b);
  }
  cr_assert_float_eq(want[0], 0.75f, 0);
  OrionBackend *b = orion_backend_open("ane", NULL, &cap.d);
  po.numerics = ORION_NUMERICS_FP32;
  cr_assert_null(orion_backend_prepare(b, p, 0, &po, &cap.d), "fp32 numerics are not the device's");
  orion_backend_close(b);
  orion_close(p);
}

Test(ane_backend, a_weight_write_is_a_recompile, .init = setup, .fini = teardown) {
  OrionOpenOptions oo = ORION_OPEN_OPTIONS_DEFAULT;
  oo.writable_weights = true;
  OrionProgram *p = orion_open(pkg, &oo, &cap.d);
  cr_assert_not_null(p, "%s", cap.text.data);
  OrionBackend *b = orion_backend_open("ane", NULL, &cap.d);
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_ANE};
  OrionExec *e = orion_backend_prepare(b, p, 0, &po, &cap.d);
  cr_assert_not_null(e, "%s", cap.text.data);
  cr_assert_float_eq(run(e), 0.75f, 0);
  unsigned long before = standin_compiles();
  uint32_t wi = UINT32_MAX;
  for (uint32_t i = 0; i < orion_weight_count(p, 0); i++)
    if (!strcmp(orion_weight(p, 0, i)->name, "w")) wi = i;
  cr_assert_neq(wi, UINT32_MAX);
  float two[N];
  for (int i = 0; i < N; i++) two[i] = 2.0f;
  OrionWeightValues v = {.fn = 0, .weight = wi, .values = two};
  cr_assert(orion_backend_write_weights(b, p, &v, 1, &cap.d), "%s", cap.text.data);
  cr_assert_eq(standin_compiles(), before + 1);
  cr_assert_float_eq(run(e), 3.0f, 0, "the new weights, compiled in");
  bool changed = true;
  oo.reload = ORION_RELOAD_REMAP;
  cr_assert_not(orion_backend_update_weights(b, p, &oo, &changed, &cap.d));
  cr_assert(strstr(cap.text.data, "test: error: the ane backend cannot update weights by remapping the weight file"),
            "%s", cap.text.data);
  orion_backend_close(b);
  orion_close(p);
}

static int entries(const char *path) {
  DIR *listing = opendir(path);
  cr_assert_not_null(listing, "%s", path);
  int n = 0;
  for (struct dirent *e; (e = readdir(listing));) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
  closedir(listing);
  return n;
}

/* Equal MIL and weights give one hexStringIdentifier, so one directory: it
 * stays until the last function compiled into it is released. */
Test(ane_backend, a_shared_directory_stays_until_its_last_user_goes, .init = setup, .fini = teardown) {
  char tmp[256];
  snprintf(tmp, sizeof tmp, "%s/tmp", dir);
  cr_assert_eq(mkdir(tmp, 0700), 0);
  cr_assert_eq(setenv("TMPDIR", tmp, 1), 0);
  OrionProgram *p = orion_open(pkg, NULL, &cap.d);
  cr_assert_not_null(p, "%s", cap.text.data);
  OrionBackend *b = orion_backend_open("ane", NULL, &cap.d);
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_ANE};
  OrionExec *e1 = orion_backend_prepare(b, p, 0, &po, &cap.d), *e2 = orion_backend_prepare(b, p, 0, &po, &cap.d);
  cr_assert(e1 && e2, "%s", cap.text.data);
  cr_assert_eq(entries(tmp), 1);
  orion_exec_release(e1);
  cr_assert_eq(entries(tmp), 1, "the other function's directory stays");
  cr_assert_float_eq(run(e2), 0.75f, 0);
  orion_exec_release(e2);
  cr_assert_eq(entries(tmp), 0);
  orion_backend_close(b);
  orion_close(p);
  unsetenv("TMPDIR");
}

/* The backend's usage line (orion-run -v after a run). */
static const char *usage(OrionBackend *b) {
  static char line[2048];
  cr_assert(orion_backend_usage(b, line, sizeof line));
  return line;
}

/* The self-test's cached choice, as ane_update_cache.c writes it (docs/ane-backend.md). */
static void write_choice(const char *os_build, const char *strategy) {
  char text[512], sum[65], path[512];
  int n = snprintf(text, sizeof text, "orion ane weight-update choice 1\nos-build %s\nane-arch standin\nstrategy %s\n",
                   os_build, strategy);
  sha256_hex(text, (size_t)n, sum);
  snprintf(path, sizeof path, "%s/orion", cache);
  mkdir(cache, 0700);
  mkdir(path, 0700);
  snprintf(path, sizeof path, "%s/orion/ane-update-%s-standin", cache, os_build);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f, "%s", path);
  fprintf(f, "%ssha256 %s\n", text, sum);
  cr_assert_eq(fclose(f), 0);
}

static uint32_t weight_index(OrionProgram *p, const char *name) {
  for (uint32_t i = 0; i < orion_weight_count(p, 0); i++)
    if (!strcmp(orion_weight(p, 0, i)->name, name)) return i;
  cr_assert_fail("no weight %s", name);
  return UINT32_MAX;
}

static void write_w(OrionBackend *b, OrionProgram *p, float value) {
  float v[N];
  for (int i = 0; i < N; i++) v[i] = value;
  OrionWeightValues wv = {.fn = 0, .weight = weight_index(p, "w"), .values = v};
  cr_assert(orion_backend_write_weights(b, p, &wv, 1, &cap.d), "%s", cap.text.data);
}

/* One compiled program per content: the same function prepared twice, and
 * after a weight change and back, is compiled once per distinct content. */
Test(ane_backend, equal_content_shares_one_compiled_program, .init = setup, .fini = teardown) {
  write_choice("standin-1", "recompile"); /* the cache under test, not the self-test */
  OrionBackend *b;
  OrionProgram *p = open_writable(&b);
  cr_assert_str_eq(usage(b), "ane program cache: 0 hits, 0 misses, 0 compiles (0 retries), 0 evictions, 0 of 128 "
                             "resident; compile budget 0 of 119 used (constraint ANE005 (compiles_per_process)); OS "
                             "build standin-1, ANE architecture standin");
  unsigned long before = standin_compiles();
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_ANE};
  OrionExec *e1 = orion_backend_prepare(b, p, 0, &po, &cap.d), *e2 = orion_backend_prepare(b, p, 0, &po, &cap.d);
  cr_assert(e1 && e2, "%s", cap.text.data);
  cr_assert_eq(standin_compiles(), before + 1, "the second is the cache's hit");
  cr_assert_float_eq(run(e1), 0.75f, 0);
  cr_assert_float_eq(run(e2), 0.75f, 0);
  write_w(b, p, 2.0f); /* both functions move to the new content: one compile */
  cr_assert_eq(standin_compiles(), before + 2);
  cr_assert_float_eq(run(e1), 3.0f, 0);
  cr_assert_float_eq(run(e2), 3.0f, 0);
  write_w(b, p, 0.5f); /* back to the first content, still resident */
  cr_assert_eq(standin_compiles(), before + 2);
  cr_assert_float_eq(run(e2), 0.75f, 0);
  cr_assert_str_eq(usage(b), "ane program cache: 4 hits, 2 misses, 2 compiles (0 retries), 0 evictions, 2 of 128 "
                             "resident; compile budget 2 of 119 used (constraint ANE005 (compiles_per_process)); OS "
                             "build standin-1, ANE architecture standin");
  orion_backend_close(b);
  orion_close(p);
}

/* ORION_ANE_RESIDENT_CAP=1: the unheld program is evicted for the next;
 * with the one resident program held, another is refused by name. */
Test(ane_backend, the_resident_cap_evicts_and_refuses, .init = setup, .fini = teardown) {
  cr_assert_eq(setenv("ORION_ANE_RESIDENT_CAP", "1", 1), 0);
  write_choice("standin-1", "recompile");
  OrionOpenOptions oo = ORION_OPEN_OPTIONS_DEFAULT;
  oo.writable_weights = true;
  OrionProgram *p = orion_open(pkg, &oo, &cap.d), *q = orion_open(pkg, NULL, &cap.d);
  cr_assert(p && q, "%s", cap.text.data);
  OrionBackend *b = orion_backend_open("ane", NULL, &cap.d);
  cr_assert_not_null(b, "%s", cap.text.data);
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_ANE};
  OrionExec *e = orion_backend_prepare(b, p, 0, &po, &cap.d);
  cr_assert_not_null(e, "%s", cap.text.data);
  write_w(b, p, 2.0f);
  cr_assert_float_eq(run(e), 3.0f, 0);
  cr_assert_null(orion_backend_prepare(b, q, 0, &po, &cap.d), "the cap's one program is held");
  cr_assert(strstr(cap.text.data, "test: error: the ane backend cannot load 'function 'main'': all 1 resident programs "
                                  "(the cap, from ORION_ANE_RESIDENT_CAP) are in use; release one, or raise the cap "
                                  "with ORION_ANE_RESIDENT_CAP"),
            "%s", cap.text.data);
  cr_assert_str_eq(usage(b), "ane program cache: 0 hits, 2 misses, 2 compiles (0 retries), 1 evictions, 1 of 1 "
                             "resident; compile budget 2 of 119 used (constraint ANE005 (compiles_per_process)); OS "
                             "build standin-1, ANE architecture standin");
  orion_backend_close(b);
  orion_close(q);
  orion_close(p);
  unsetenv("ORION_ANE_RESIDENT_CAP");
}

/* ORION_ANE_COMPILE_BUDGET=1 and an OS build of the stand-in's: the second
 * compile is refused before the device is asked; the usage line names both. */
Test(ane_backend, the_compile_budget_is_kept, .init = setup, .fini = teardown) {
  cr_assert_eq(setenv("ORION_ANE_COMPILE_BUDGET", "1", 1), 0);
  cr_assert_eq(setenv("ORION_ANE_STANDIN_OS_BUILD", "25F84", 1), 0);
  write_choice("25F84", "recompile"); /* no self-test: it would not fit the budget */
  OrionBackend *b;
  OrionProgram *p = open_writable(&b);
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_ANE};
  OrionExec *e = orion_backend_prepare(b, p, 0, &po, &cap.d);
  cr_assert_not_null(e, "%s", cap.text.data);
  unsigned long before = standin_compiles();
  float v[N];
  for (int i = 0; i < N; i++) v[i] = 2.0f;
  OrionWeightValues wv = {.fn = 0, .weight = weight_index(p, "w"), .values = v};
  cr_assert_not(orion_backend_write_weights(b, p, &wv, 1, &cap.d));
  cr_assert_eq(standin_compiles(), before, "not asked of the device");
  cr_assert(strstr(cap.text.data, "test: error: the ane backend will not compile 'function 'main'': this process has "
                                  "used 1 of its compile budget of 1 (from ORION_ANE_COMPILE_BUDGET), past which the "
                                  "ANE compiler fails silently (ANE005)"),
            "%s", cap.text.data);
  cr_assert_str_eq(usage(b), "ane program cache: 0 hits, 2 misses, 1 compiles (0 retries), 0 evictions, 1 of 128 "
                             "resident; compile budget 1 of 1 used (ORION_ANE_COMPILE_BUDGET); OS build 25F84, ANE "
                             "architecture standin");
  orion_backend_close(b);
  orion_close(p);
  unsetenv("ORION_ANE_COMPILE_BUDGET");
  unsetenv("ORION_ANE_STANDIN_OS_BUILD");
}

/* For one stand-in switch (ORION_ANE_STANDIN_WEIGHTS): the self-test at the
 * prepare of a writable program chooses `want` with `self_test` compiles,
 * says so in caps and -v, writes the cached choice; a weight write is seen
 * at the cost of `update` compiles; a second backend reuses the choice
 * (no self-test: one compile for its prepare). */
static void strategy_case(const char *mode, OrionReloadStrategy want, const char *name, unsigned long self_test,
                          unsigned long update) {
  cr_assert_eq(setenv("ORION_ANE_STANDIN_WEIGHTS", mode, 1), 0);
  OrionBackend *b;
  OrionProgram *p = open_writable(&b);
  cr_assert_eq(orion_backend_caps(b).update_strategies, 1u << ORION_RELOAD_RECOMPILE, "nothing else known yet");
  unsigned long before = standin_compiles();
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_ANE};
  OrionExec *e = orion_backend_prepare(b, p, 0, &po, &cap.d);
  cr_assert_not_null(e, "%s", cap.text.data);
  cr_assert_eq(standin_compiles(), before + 1 + self_test, "%s: %lu compiles", mode, standin_compiles() - before);
  cr_assert_eq(orion_backend_caps(b).update_strategies, 1u << ORION_RELOAD_RECOMPILE | 1u << want);
  char about[2048], want_tail[1024], path[512];
  snprintf(path, sizeof path, "%s/orion/ane-update-standin-1-standin", cache);
  snprintf(want_tail, sizeof want_tail, "; update strategy: %s (the self-test's choice for OS build standin-1, "
           "written to '%s')", name, path);
  cr_assert(orion_backend_describe(b, about, sizeof about));
  cr_assert(strlen(about) > strlen(want_tail) && !strcmp(about + strlen(about) - strlen(want_tail), want_tail),
            "%s", about);
  cr_assert_float_eq(run(e), 0.75f, 0);
  before = standin_compiles();
  write_w(b, p, 2.0f);
  cr_assert_eq(standin_compiles(), before + update, "%s: %lu compiles", mode, standin_compiles() - before);
  cr_assert_float_eq(run(e), 3.0f, 0, "the new weights are seen");
  write_w(b, p, 1.0f);
  cr_assert_float_eq(run(e), 1.5f, 0, "and again");
  orion_backend_close(b);
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f, "the choice is cached: %s", path);
  char line[256], strategy[64];
  snprintf(strategy, sizeof strategy, "strategy %s\n", name);
  bool found = false;
  while (fgets(line, sizeof line, f)) found |= !strcmp(line, strategy);
  fclose(f);
  cr_assert(found, "%s", strategy);
  /* A new backend (as a new process would) reads the choice: no self-test. */
  b = orion_backend_open("ane", NULL, &cap.d);
  cr_assert_eq(orion_backend_caps(b).update_strategies, 1u << ORION_RELOAD_RECOMPILE | 1u << want);
  before = standin_compiles();
  e = orion_backend_prepare(b, p, 0, &po, &cap.d);
  cr_assert_not_null(e, "%s", cap.text.data);
  cr_assert_eq(standin_compiles(), before + 1);
  snprintf(want_tail, sizeof want_tail, "; update strategy: %s (the self-test's choice for OS build standin-1, "
           "cached in '%s')", name, path);
  cr_assert(orion_backend_describe(b, about, sizeof about));
  cr_assert(!strcmp(about + strlen(about) - strlen(want_tail), want_tail), "%s", about);
  cr_assert_float_eq(run(e), 1.5f, 0);
  orion_backend_close(b);
  orion_close(p);
  unsetenv("ORION_ANE_STANDIN_WEIGHTS");
}

/* The self-test's compiles: the fresh reference, then one probe per
 * strategy tried (the inputs probe is refused at compile under baked: a
 * compile counted), plus the recompile's own. */
Test(ane_backend, baked_weights_choose_recompile, .init = setup, .fini = teardown) {
  strategy_case("baked", ORION_RELOAD_RECOMPILE, "recompile", 6, 1);
}

Test(ane_backend, weight_files_reread_at_reload_choose_reload_files, .init = setup, .fini = teardown) {
  strategy_case("reload", ORION_RELOAD_RELOAD_FILES, "reload-files", 2, 0);
}

Test(ane_backend, a_patchable_image_chooses_patch_data, .init = setup, .fini = teardown) {
  strategy_case("patch-data", ORION_RELOAD_PATCH_DATA, "patch-data", 3, 0);
}

/* The reference, the reload-files and patch-data probes (both stale), the
 * inputs probe; the function is then compiled with its weight as an input,
 * and an update is a write into its surface: no compile. */
Test(ane_backend, weights_as_inputs_only_choose_inputs, .init = setup, .fini = teardown) {
  strategy_case("inputs", ORION_RELOAD_INPUTS, "inputs", 4, 0);
}

/* Under `inputs` a function whose weight is a linear layer's (MIL's linear
 * takes consts only; lower-linear's conv likewise, ane-weight-inputs) keeps
 * its consts, says so in a remark, and recompiles at a weight write; the
 * new weights are seen. */
Test(ane_backend, a_conv_weight_keeps_its_consts_under_inputs, .init = setup, .fini = teardown) {
  cr_assert_eq(setenv("ORION_ANE_STANDIN_WEIGHTS", "inputs", 1), 0);
  char ldir[64], lpkg[160];
  ane_test_package("func main(x: fp16[1,4]) {\n  param w: fp16[2,4] = fill(0.5);\n  y = linear(x, w);\n  return y;\n}\n",
                   "ane-backend-linear", ldir, sizeof ldir, lpkg, sizeof lpkg);
  AneTestPrepared ready = ane_test_prepare(lpkg, true, &cap);
  OrionProgram *p = ready.program;
  OrionBackend *b = ready.backend;
  OrionExec *e = ready.exec;
  cr_assert_eq(ready.compiles, 4 + 1, "the self-test's 4 and the function's");
  unsigned long before;
  cr_assert_str_eq(captured(&cap), "test: note: the ane backend compiles function 'main' with its weights as "
                                   "consts, so a weight change recompiles it: function 'main' cannot take its weights "
                                   "as inputs: 'w' is (or makes) the weight of linear 'y', which MIL takes as a const "
                                   "only (dynamic weights go through matmul)\n");
  uint16_t xs[4], ys[2];
  for (int i = 0; i < 4; i++) xs[i] = fp16_from_float((float)(i + 1));
  const OrionTensor lin = {.dtype = MIL_DT_FP16, .rank = 2, .dims = {1, 4}, .data = xs};
  OrionTensor lout = {.dtype = MIL_DT_FP16, .rank = 2, .dims = {1, 2}, .data = ys};
  cr_assert(orion_exec_run(e, &lin, &lout, &cap.d), "%s", cap.text.data);
  cr_assert_eq(ys[0], fp16_from_float(5.0f), "(1 + 2 + 3 + 4) * 0.5: %04x", ys[0]);
  float two[8];
  for (int i = 0; i < 8; i++) two[i] = 2.0f;
  OrionWeightValues wv = {.fn = 0, .weight = 0, .values = two};
  before = standin_compiles();
  cr_assert(orion_backend_write_weights(b, p, &wv, 1, &cap.d), "%s", cap.text.data);
  cr_assert_eq(standin_compiles(), before + 1, "a recompile");
  cr_assert(orion_exec_run(e, &lin, &lout, &cap.d), "%s", cap.text.data);
  cr_assert_eq(ys[1], fp16_from_float(20.0f), "(1 + 2 + 3 + 4) * 2: %04x", ys[1]);
  orion_backend_close(b);
  orion_close(p);
  remove_tree(ldir);
  unsetenv("ORION_ANE_STANDIN_WEIGHTS");
}

/* A package patched on disk (what orion-run patch does) and taken up by
 * orion_backend_update_weights with ORION_RELOAD_AUTO: the first update runs
 * the self-test, then applies its choice. */
static void patched_case(const char *mode, unsigned long compiles_for_update) {
  cr_assert_eq(setenv("ORION_ANE_STANDIN_WEIGHTS", mode, 1), 0);
  AneTestPrepared ready = ane_test_prepare(pkg, false, &cap);
  OrionProgram *p = ready.program;
  OrionBackend *b = ready.backend;
  OrionExec *e = ready.exec;
  cr_assert_eq(ready.compiles, 1, "not writable: no self-test at prepare");
  unsigned long before;
  cr_assert_float_eq(run(e), 0.75f, 0);
  float two[N];
  for (int i = 0; i < N; i++) two[i] = 2.0f;
  PatchTensor t = {.name = "w", .origin = "memory", .dtype = ORION_DT_FP32, .rank = 4, .dims = {1, 4, 1, 8},
                   .data = two, .nbytes = sizeof two};
  cr_assert(package_patch(pkg, &t, 1, NULL, &cap.d), "%s", cap.text.data);
  before = standin_compiles();
  bool changed = false;
  OrionOpenOptions oo = ORION_OPEN_OPTIONS_DEFAULT;
  cr_assert(orion_backend_update_weights(b, p, &oo, &changed, &cap.d), "%s", cap.text.data);
  cr_assert(changed);
  cr_assert_eq(standin_compiles(), before + compiles_for_update, "%s: %lu compiles", mode, standin_compiles() - before);
  cr_assert_float_eq(run(e), 3.0f, 0, "the patched weights are seen");
  orion_backend_close(b);
  orion_close(p);
  unsetenv("ORION_ANE_STANDIN_WEIGHTS");
}

Test(ane_backend, a_patch_taken_up_by_reload_files, .init = setup, .fini = teardown) {
  patched_case("reload", 2); /* the self-test's two, none for the update */
}

Test(ane_backend, a_patch_taken_up_by_patch_data, .init = setup, .fini = teardown) {
  patched_case("patch-data", 3);
}

Test(ane_backend, a_patch_taken_up_by_recompile, .init = setup, .fini = teardown) {
  patched_case("baked", 6 + 1);
}

/* Prepared with its weight as a const before the choice: the update
 * compiles it once more with the weight as an input. */
Test(ane_backend, a_patch_taken_up_by_inputs, .init = setup, .fini = teardown) {
  patched_case("inputs", 4 + 1);
}

/* The compile service failing without an error object is transient: the
 * compile is tried again after a pause (ORION_ANE_RETRY_PAUSE_MS, here 1
 * ms), each attempt counted; past the retries it is reported as such.
 * silently_failing: the package and a backend whose stand-in fails the next
 * `failures` compiles so. */
static OrionBackend *silently_failing(const char *failures, OrionProgram **p) {
  cr_assert_eq(setenv("ORION_ANE_RETRY_PAUSE_MS", "1", 1), 0);
  cr_assert_eq(setenv("ORION_ANE_STANDIN_SILENT_FAILURES", failures, 1), 0);
  *p = orion_open(pkg, NULL, &cap.d);
  cr_assert_not_null(*p, "%s", cap.text.data);
  OrionBackend *b = orion_backend_open("ane", NULL, &cap.d);
  cr_assert_not_null(b, "%s", cap.text.data);
  return b;
}

static void silent_failures_end(void) {
  unsetenv("ORION_ANE_STANDIN_SILENT_FAILURES");
  unsetenv("ORION_ANE_RETRY_PAUSE_MS");
}

Test(ane_backend, a_compile_failing_without_an_error_is_retried, .init = setup, .fini = teardown) {
  OrionProgram *p;
  OrionBackend *b = silently_failing("2", &p);
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_ANE};
  unsigned long before = standin_compiles();
  OrionExec *e = orion_backend_prepare(b, p, 0, &po, &cap.d);
  cr_assert_not_null(e, "%s", cap.text.data);
  cr_assert_eq(standin_compiles(), before + 3);
  cr_assert_float_eq(run(e), 0.75f, 0);
  cr_assert_str_eq(usage(b), "ane program cache: 0 hits, 1 misses, 3 compiles (2 retries), 0 evictions, 1 of 128 "
                             "resident; compile budget 3 of 119 used (constraint ANE005 (compiles_per_process)); OS "
                             "build standin-1, ANE architecture standin");
  orion_backend_close(b);
  orion_close(p);
  silent_failures_end();
}

Test(ane_backend, a_compile_failing_past_the_retries_is_reported, .init = setup, .fini = teardown) {
  OrionProgram *p;
  OrionBackend *b = silently_failing("9", &p);
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_ANE};
  unsigned long before = standin_compiles();
  cr_assert_null(orion_backend_prepare(b, p, 0, &po, &cap.d));
  cr_assert_eq(standin_compiles(), before + 4, "the first attempt and 3 retries");
  cr_assert(strstr(cap.text.data, "test: error: the ANE compiler failed on 'function 'main'' (no error code: the ane "
                                  "backend: the device failed to compile function 'main', without an error) after 4 "
                                  "attempts"),
            "%s", cap.text.data);
  orion_backend_close(b);
  cr_assert_eq(setenv("ORION_ANE_RETRY_PAUSE_MS", "soon", 1), 0);
  cr_assert_null(orion_backend_open("ane", NULL, &cap.d));
  cr_assert(strstr(cap.text.data, "test: error: ORION_ANE_RETRY_PAUSE_MS=soon is not a pause in milliseconds from 0 to "
                                  "3600000"),
            "%s", cap.text.data);
  orion_close(p);
  silent_failures_end();
}

/* The stand-in's compile limit (ORION_ANE_STANDIN_COMPILE_LIMIT, here 3):
 * a prepare and two weight writes are its 3 compiles; the next write's
 * compile answers NO without an error, as the device past its limit, and
 * every retry too. limited: that backend, with orion's own budget from
 * `budget` and the choice of recompile cached (no self-test). */
static OrionProgram *limited(const char *budget, OrionBackend **b, OrionExec **e) {
  cr_assert_eq(setenv("ORION_ANE_STANDIN_COMPILE_LIMIT", "3", 1), 0);
  cr_assert_eq(setenv("ORION_ANE_COMPILE_BUDGET", budget, 1), 0);
  cr_assert_eq(setenv("ORION_ANE_RETRY_PAUSE_MS", "1", 1), 0);
  write_choice("standin-1", "recompile");
  OrionProgram *p = open_writable(b);
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_ANE};
  *e = orion_backend_prepare(*b, p, 0, &po, &cap.d);
  cr_assert_not_null(*e, "%s", cap.text.data);
  write_w(*b, p, 2.0f);
  write_w(*b, p, 3.0f);
  cr_assert_eq(standin_compiles(), 3);
  cr_assert_float_eq(run(*e), 4.5f, 0, "the third compile's weights");
  return p;
}

static void limited_end(OrionBackend *b, OrionProgram *p) {
  orion_backend_close(b);
  orion_close(p);
  unsetenv("ORION_ANE_STANDIN_COMPILE_LIMIT");
  unsetenv("ORION_ANE_COMPILE_BUDGET");
  unsetenv("ORION_ANE_RETRY_PAUSE_MS");
}

static bool try_write_w(OrionBackend *b, OrionProgram *p, float value) {
  float v[N];
  for (int i = 0; i < N; i++) v[i] = value;
  OrionWeightValues wv = {.fn = 0, .weight = weight_index(p, "w"), .values = v};
  return orion_backend_write_weights(b, p, &wv, 1, &cap.d);
}

/* orion's budget (10) above the device's limit (3): the device is asked and
 * fails silently, the compile is retried and then reported. */
Test(ane_backend, past_the_standins_compile_limit_a_compile_fails_silently, .init = setup, .fini = teardown) {
  OrionBackend *b;
  OrionExec *e;
  OrionProgram *p = limited("10", &b, &e);
  cr_assert_not(try_write_w(b, p, 4.0f));
  cr_assert_eq(standin_compiles(), 3 + 4, "the first attempt and 3 retries, each asked of the device");
  cr_assert(strstr(cap.text.data, "test: error: the ANE compiler failed on 'function 'main'' (no error code: the ane "
                                  "backend: the device failed to compile function 'main', without an error) after 4 "
                                  "attempts"),
            "%s", cap.text.data);
  cr_assert_str_eq(usage(b), "ane program cache: 0 hits, 4 misses, 7 compiles (3 retries), 0 evictions, 3 of 128 "
                             "resident; compile budget 7 of 10 used (ORION_ANE_COMPILE_BUDGET); OS build standin-1, "
                             "ANE architecture standin");
  limited_end(b, p);
}

/* orion's budget (3) within the device's limit (3): orion refuses the
 * fourth compile itself, before the device is asked. */
Test(ane_backend, a_budget_within_the_standins_limit_refuses_first, .init = setup, .fini = teardown) {
  OrionBackend *b;
  OrionExec *e;
  OrionProgram *p = limited("3", &b, &e);
  cr_assert_not(try_write_w(b, p, 4.0f));
  cr_assert_eq(standin_compiles(), 3, "not asked of the device");
  cr_assert(strstr(cap.text.data, "test: error: the ane backend will not compile 'function 'main'': this process has "
                                  "used 3 of its compile budget of 3 (from ORION_ANE_COMPILE_BUDGET), past which the "
                                  "ANE compiler fails silently (ANE005)"),
            "%s", cap.text.data);
  limited_end(b, p);
}

/* Without the variable the stand-in's limit is the table's 119 (ANE005):
 * with orion's budget raised past it, the 120th compile fails silently. */
Test(ane_backend, the_standins_compile_limit_is_the_tables_by_default, .init = setup, .fini = teardown) {
  cr_assert_eq(setenv("ORION_ANE_COMPILE_BUDGET", "200", 1), 0);
  cr_assert_eq(setenv("ORION_ANE_RETRY_PAUSE_MS", "0", 1), 0);
  write_choice("standin-1", "recompile");
  OrionBackend *b;
  OrionProgram *p = open_writable(&b);
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_ANE};
  OrionExec *e = orion_backend_prepare(b, p, 0, &po, &cap.d);
  cr_assert_not_null(e, "%s", cap.text.data);
  for (int i = 1; i < 119; i++) write_w(b, p, (float)i); /* distinct content each: a compile each */
  cr_assert_eq(standin_compiles(), 119);
  cr_assert_float_eq(run(e), 1.5f * 118.0f, 0, "the 119th compile's weights");
  cr_assert_not(try_write_w(b, p, 1000.0f));
  cr_assert_eq(standin_compiles(), 119 + 4);
  cr_assert(strstr(cap.text.data, "the device failed to compile function 'main', without an error) after 4 attempts"),
            "%s", cap.text.data);
  orion_backend_close(b);
  orion_close(p);
  unsetenv("ORION_ANE_COMPILE_BUDGET");
  unsetenv("ORION_ANE_RETRY_PAUSE_MS");
}

Test(ane_backend, a_malformed_standin_compile_limit_is_named, .init = setup, .fini = teardown) {
  cr_assert_eq(setenv("ORION_ANE_STANDIN_COMPILE_LIMIT", "lots", 1), 0);
  OrionProgram *p = orion_open(pkg, NULL, &cap.d);
  cr_assert_not_null(p, "%s", cap.text.data);
  OrionBackend *b = orion_backend_open("ane", NULL, &cap.d);
  cr_assert_not_null(b, "%s", cap.text.data);
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_ANE};
  cr_assert_null(orion_backend_prepare(b, p, 0, &po, &cap.d));
  cr_assert(strstr(cap.text.data, "the device failed to compile function 'main' (error code 1, 0x1): ANECCompile() "
                                  "FAILED: ORION_ANE_STANDIN_COMPILE_LIMIT=lots is not a count from 1 to 1000000"),
            "%s", cap.text.data);
  orion_backend_close(b);
  orion_close(p);
  unsetenv("ORION_ANE_STANDIN_COMPILE_LIMIT");
}

/* The surfaces and the request are made at prepare, one surface per input
 * and output, and reused by every run (the reference makes fresh ones for
 * every layer of every token) and across a recompile for a weight write. */
Test(ane_backend, a_prepared_function_reuses_its_surfaces, .init = setup, .fini = teardown) {
  write_choice("standin-1", "recompile"); /* no self-test: its probes make surfaces of their own */
  OrionBackend *b;
  OrionProgram *p = open_writable(&b);
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_ANE};
  unsigned long before = standin_surfaces();
  OrionExec *e = orion_backend_prepare(b, p, 0, &po, &cap.d);
  cr_assert_not_null(e, "%s", cap.text.data);
  unsigned long prepared = standin_surfaces();
  cr_assert_eq(prepared, before + 3, "x, bias and y: %lu surfaces", prepared - before);
  cr_assert_float_eq(run(e), 0.75f, 0);
  cr_assert_float_eq(run(e), 0.75f, 0);
  cr_assert_eq(standin_surfaces(), prepared, "no surface made by a run");
  write_w(b, p, 2.0f);
  cr_assert_float_eq(run(e), 3.0f, 0);
  cr_assert_eq(standin_surfaces(), prepared, "none by the recompile either");
  orion_backend_close(b);
  orion_close(p);
}

/* Two ane backends in one process (orion-run patch --verify opens a second
 * for its fresh compile) share the process's compile budget: the device
 * counts compiles per process, not per backend. */
Test(ane_backend, two_backends_share_the_process_compile_budget, .init = setup, .fini = teardown) {
  cr_assert_eq(setenv("ORION_ANE_COMPILE_BUDGET", "1", 1), 0);
  AneTestPrepared first = ane_test_prepare(pkg, false, &cap);
  cr_assert_eq(first.compiles, 1);
  OrionProgram *p = orion_open(pkg, NULL, &cap.d);
  cr_assert_not_null(p, "%s", cap.text.data);
  OrionBackend *second = orion_backend_open("ane", NULL, &cap.d);
  cr_assert_not_null(second, "%s", cap.text.data);
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_ANE};
  unsigned long before = standin_compiles();
  cr_assert_null(orion_backend_prepare(second, p, 0, &po, &cap.d), "the first backend spent the budget");
  cr_assert_eq(standin_compiles(), before, "not asked of the device");
  cr_assert(strstr(cap.text.data, "the ane backend will not compile 'function 'main'': this process has used 1 of its "
                                  "compile budget of 1 (from ORION_ANE_COMPILE_BUDGET)"),
            "%s", cap.text.data);
  orion_backend_close(second);
  orion_close(p);
  ane_test_close(&first);
  unsetenv("ORION_ANE_COMPILE_BUDGET");
}

/* A lower-linear'ed function (tiny_mlp: each linear a 1x1 conv of a reshape
 * of its weight) under `inputs`: its convs are written as matmuls
 * (ane_conv_matmul.h), so its weights become inputs: no remark, one compile
 * besides the self-test's 4, none at a weight write, and the cpu backend's
 * bits before and after the write (the stand-in runs the matmul on the cpu
 * backend in ane numerics, as the cpu backend runs the conv). */
/* The program as orionc compiles it (the O1 pipeline: lower-linear's convs). */
static void lowered_package(const char *text, const char *name, char *ldir, size_t dircap, char *lpkg, size_t pkgcap) {
  test_dir_make(ldir, dircap, name);
  snprintf(lpkg, pkgcap, "%s/m.anepkg", ldir);
  Parsed pr;
  parsed_open(&pr, text);
  cr_assert_not_null(pr.m, "%s", pr.diags.data);
  PassManagerOptions pm = {.pipeline = "O1"};
  cr_assert(passes_run(pr.m, &pm, &pr.d), "%s", pr.diags.data);
  PackageOptions po = {.target = MIL_IOS18, .source_name = "t.oir", .source_text = text, .source_len = strlen(text)};
  cr_assert(package_write(pr.m, lpkg, &po, &pr.d), "%s", pr.diags.data);
  parsed_close(&pr);
}

static void tiny_mlp_run(OrionExec *e, const uint16_t *xs, uint16_t *probs) {
  const OrionTensor tin = {.dtype = MIL_DT_FP16, .rank = 2, .dims = {1, 16}, .data = (void *)(uintptr_t)xs};
  OrionTensor tout = {.dtype = MIL_DT_FP16, .rank = 2, .dims = {1, 10}, .data = probs};
  cr_assert(orion_exec_run(e, &tin, &tout, &cap.d), "%s", cap.text.data);
}

Test(ane_backend, a_lowered_linears_weights_are_inputs_through_a_matmul, .init = setup, .fini = teardown) {
  cr_assert_eq(setenv("ORION_ANE_STANDIN_WEIGHTS", "inputs", 1), 0);
  char ldir[64], lpkg[160];
  lowered_package("func main(x: fp16[1,16]) {\n"
                   "  param fc1.weight: fp16[32,16] = normal(seed=1, std=0.25);\n"
                   "  param fc1.bias: fp16[32] = zeros;\n"
                   "  param fc2.weight: fp16[10,32] = normal(seed=2, std=0.18);\n"
                   "  param fc2.bias: fp16[10] = zeros;\n"
                   "  h: fp16[1,32] = linear(x, fc1.weight, fc1.bias);\n"
                   "  a = gelu(h, mode=\"tanh\");\n"
                   "  logits: fp16[1,10] = linear(a, fc2.weight, fc2.bias);\n"
                   "  probs = softmax(logits, axis=-1);\n"
                   "  return probs;\n"
                   "}\n",
                   "ane-backend-mlp", ldir, sizeof ldir, lpkg, sizeof lpkg);
  OrionOpenOptions oo = ORION_OPEN_OPTIONS_DEFAULT;
  oo.writable_weights = true;
  OrionProgram *p = orion_open(lpkg, &oo, &cap.d);
  cr_assert_not_null(p, "%s", cap.text.data);
  OrionBackend *b = orion_backend_open("ane", NULL, &cap.d), *cpu = orion_backend_open("cpu", NULL, &cap.d);
  cr_assert(b && cpu, "%s", cap.text.data);
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_ANE};
  unsigned long before = standin_compiles();
  OrionExec *e = orion_backend_prepare(b, p, 0, &po, &cap.d), *ce = orion_backend_prepare(cpu, p, 0, &po, &cap.d);
  cr_assert(e && ce, "%s", cap.text.data);
  cr_assert_eq(standin_compiles(), before + 4 + 1, "the self-test's 4 and the function's, with its weights as inputs");
  cr_assert_str_eq(captured(&cap), "", "no remark: the convs are matmuls: %s", captured(&cap));
  uint16_t xs[16], ane_probs[10], cpu_probs[10];
  for (int i = 0; i < 16; i++) xs[i] = fp16_from_float((float)(i % 5) * 0.5f - 1.0f);
  tiny_mlp_run(e, xs, ane_probs);
  tiny_mlp_run(ce, xs, cpu_probs);
  cr_assert_arr_eq(ane_probs, cpu_probs, sizeof ane_probs, "the cpu backend's bits");
  uint16_t old_probs[10];
  memcpy(old_probs, ane_probs, sizeof old_probs);
  float w1[32 * 16], b2[10];
  for (int i = 0; i < 32 * 16; i++) w1[i] = (float)(i % 7 - 3) * 0.125f;
  for (int i = 0; i < 10; i++) b2[i] = (float)i * 0.25f;
  OrionWeightValues wv[] = {{.fn = 0, .weight = weight_index(p, "fc1_weight"), .values = w1},
                            {.fn = 0, .weight = weight_index(p, "fc2_bias"), .values = b2}};
  before = standin_compiles();
  cr_assert(orion_backend_write_weights(b, p, wv, 2, &cap.d), "%s", cap.text.data);
  cr_assert_eq(standin_compiles(), before, "a write into the weights' surfaces, no compile");
  cr_assert(orion_backend_write_weights(cpu, p, wv, 2, &cap.d), "%s", cap.text.data);
  tiny_mlp_run(e, xs, ane_probs);
  tiny_mlp_run(ce, xs, cpu_probs);
  cr_assert_arr_eq(ane_probs, cpu_probs, sizeof ane_probs, "the cpu backend's bits after the write");
  cr_assert(memcmp(ane_probs, old_probs, sizeof old_probs), "the new weights are seen");
  orion_backend_close(b);
  orion_backend_close(cpu);
  orion_close(p);
  remove_tree(ldir);
  unsetenv("ORION_ANE_STANDIN_WEIGHTS");
}

/* The one directory the backend made in the test's own $TMPDIR (the reference's <hexStringIdentifier>). */
static void the_model_directory(char *path, size_t size) {
  const char *tmp = getenv("TMPDIR");
  DIR *d = opendir(tmp);
  cr_assert_not_null(d, "%s", tmp);
  int found = 0;
  for (struct dirent *de; (de = readdir(d));)
    if (de->d_name[0] != '.') found++, snprintf(path, size, "%s/%s", tmp, de->d_name);
  closedir(d);
  cr_assert_eq(found, 1, "one directory in %s", tmp);
}

/* A directory tree's names and bytes as text, to tell it unchanged. */
static void tree_text(const char *path, StrBuf *sb) {
  DIR *d = opendir(path);
  cr_assert_not_null(d, "%s", path);
  for (struct dirent *de; (de = readdir(d));) {
    if (de->d_name[0] == '.') continue;
    char sub[1024];
    snprintf(sub, sizeof sub, "%s/%s", path, de->d_name);
    struct stat st;
    cr_assert_eq(lstat(sub, &st), 0, "%s", sub);
    sb_printf(sb, "%s:", sub);
    if (S_ISDIR(st.st_mode)) tree_text(sub, sb);
    else {
      FILE *f = fopen(sub, "rb");
      cr_assert_not_null(f, "%s", sub);
      for (int c; (c = fgetc(f)) != EOF;) sb_printf(sb, "%02x", c);
      fclose(f);
    }
    sb_printf(sb, ";");
  }
  closedir(d);
}

/* Two processes compiling one content share $TMPDIR/<hex>/ (the framework
 * names it). The test plays the other process: it holds the directory's
 * flock through an open file description of its own. The backend then
 * writes nothing there, says so once, and its reload-files update
 * recompiles; uncontended, the update is the usual reload-files one (no
 * compile), and the lock goes with the backend. */
Test(ane_backend, a_directory_another_process_holds_is_never_rewritten, .init = setup, .fini = teardown) {
  cr_assert_eq(setenv("ORION_ANE_STANDIN_WEIGHTS", "reload", 1), 0);
  write_choice("standin-1", "reload-files");
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_ANE};
  OrionBackend *b;
  OrionProgram *p = open_writable(&b);
  OrionExec *e = orion_backend_prepare(b, p, 0, &po, &cap.d);
  cr_assert_not_null(e, "%s", cap.text.data);
  cr_assert_str_eq(captured(&cap), "", "uncontended: no remark");
  char model_dir[512];
  the_model_directory(model_dir, sizeof model_dir);
  int holder = open(model_dir, O_RDONLY | O_DIRECTORY);
  cr_assert_geq(holder, 0, "%s", model_dir);
  cr_assert_neq(flock(holder, LOCK_EX | LOCK_NB), 0, "the backend holds the directory's lock");
  unsigned long before = standin_compiles();
  write_w(b, p, 2.0f);
  cr_assert_eq(standin_compiles(), before, "reload-files: no compile");
  cr_assert_float_eq(run(e), 3.0f, 0);
  orion_backend_close(b);
  orion_close(p);
  struct stat st;
  cr_assert_neq(stat(model_dir, &st), 0, "removed with the backend");

  /* The other process's directory: its own files, its lock held. */
  cr_assert_eq(mkdir(model_dir, 0700), 0);
  char file[600];
  snprintf(file, sizeof file, "%s/model.mil", model_dir);
  FILE *f = fopen(file, "w");
  cr_assert_not_null(f);
  fputs("the other process's model.mil\n", f);
  cr_assert_eq(fclose(f), 0);
  cr_assert_eq(flock(holder, LOCK_EX | LOCK_NB), 0, "the backend let go of the lock");
  close(holder);
  holder = open(model_dir, O_RDONLY | O_DIRECTORY);
  cr_assert_geq(holder, 0);
  cr_assert_eq(flock(holder, LOCK_EX | LOCK_NB), 0);
  StrBuf held, now;
  sb_init(&held);
  sb_init(&now);
  tree_text(model_dir, &held);

  p = open_writable(&b);
  e = orion_backend_prepare(b, p, 0, &po, &cap.d);
  cr_assert_not_null(e, "%s", cap.text.data);
  char want[1200];
  snprintf(want, sizeof want, "test: note: the ane backend's directory '%s' of function 'main' is shared with "
           "another process: its weight files are not rewritten; updates recompile\n", model_dir);
  cr_assert_str_eq(captured(&cap), want);
  cr_assert_float_eq(run(e), 0.75f, 0, "its own weights, from its compile");
  before = standin_compiles();
  write_w(b, p, 2.0f);
  cr_assert_eq(standin_compiles(), before + 1, "a recompile, not a rewrite of the other's files");
  cr_assert_float_eq(run(e), 3.0f, 0, "the new weights are seen");
  write_w(b, p, 1.0f);
  cr_assert_float_eq(run(e), 1.5f, 0, "and again");
  cr_assert_str_eq(captured(&cap), want, "said once");
  orion_backend_close(b);
  orion_close(p);
  tree_text(model_dir, &now);
  cr_assert_str_eq(now.data, held.data, "the other process's directory, byte for byte, and still there");
  sb_free(&held);
  sb_free(&now);
  close(holder);
  remove_tree(model_dir);
  unsetenv("ORION_ANE_STANDIN_WEIGHTS");
}

/* The backend's flock as the test sees it: whether the directory being
 * locked was already registered for removal at that moment. It must not be:
 * a signal then would remove a directory another process holds. (Defined
 * here, this flock is the one the backend's code calls.) */
static const char *watched_dir;
static int registered_at_lock = -1;

int flock(int fd, int operation) {
  if (watched_dir && registered_at_lock < 0) registered_at_lock = temp_is_tracked(watched_dir);
  return (int)syscall(SYS_flock, fd, operation);
}

static OrionExec *prepare_watched(OrionBackend *b, OrionProgram *p, const char *model_dir) {
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_ANE};
  watched_dir = model_dir;
  registered_at_lock = -1;
  OrionExec *e = orion_backend_prepare(b, p, 0, &po, &cap.d);
  watched_dir = NULL;
  cr_assert_not_null(e, "%s", cap.text.data);
  return e;
}

Test(ane_backend, a_directory_is_registered_for_removal_only_once_its_lock_is_held, .init = setup,
     .fini = teardown) {
  OrionBackend *b;
  OrionProgram *p = open_writable(&b);
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_ANE};
  cr_assert_not_null(orion_backend_prepare(b, p, 0, &po, &cap.d), "%s", cap.text.data);
  char model_dir[512];
  the_model_directory(model_dir, sizeof model_dir);
  orion_backend_close(b);
  orion_close(p);

  p = open_writable(&b);
  prepare_watched(b, p, model_dir);
  cr_assert_eq(registered_at_lock, 0, "not registered before its lock is taken");
  cr_assert(temp_is_tracked(model_dir), "registered once the lock is the backend's");
  orion_backend_close(b);
  orion_close(p);
  cr_assert_not(temp_is_tracked(model_dir));

  /* Another process's: never registered, not even while its lock is tried. */
  cr_assert_eq(mkdir(model_dir, 0700), 0);
  int holder = open(model_dir, O_RDONLY | O_DIRECTORY);
  cr_assert_geq(holder, 0);
  cr_assert_eq(flock(holder, LOCK_EX | LOCK_NB), 0);
  p = open_writable(&b);
  prepare_watched(b, p, model_dir);
  cr_assert_eq(registered_at_lock, 0);
  cr_assert_not(temp_is_tracked(model_dir), "another's: a signal must not remove it");
  orion_backend_close(b);
  orion_close(p);
  struct stat st;
  cr_assert_eq(stat(model_dir, &st), 0, "still there");
  close(holder);
  remove_tree(model_dir);
}
