/*
 * The ane backend's partition of a function (runtime/ane/ane_partition.c,
 * ane_parts.c): which statements of a small program with a gather by token
 * ids and a cross_entropy go to the CPU and which to the device, the
 * segments' inputs and outputs in binding order (ASCII order of MIL names)
 * and a segment written back out as MIL; a function without int32/bool
 * values is one device segment (the single-program path); the program run
 * in parts through the backend interface against the stand-in, its device
 * segments prepared on the same backend (its usage line counts their
 * compiles); a weight write updating the device segments by the self-test's
 * choice under each stand-in switch; a device segment the device refuses,
 * named in the error; statements the device refuses (concat, gelu) placed on
 * the CPU by the constraint table, with orion_ane_check's remarks, the exact
 * segments with and without the cost model (a one-statement device run
 * between two CPU statements joins them; a run that pays stays), and the
 * function run through the backend with the cpu backend's bits.
 */
#define _XOPEN_SOURCE 700

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../helpers.h"
#include "ane_test_support.h"
#include "ane_partition.h"
#include "ane_partition_cost.h"
#include "ane_parts.h"
#include "loader_internal.h"
#include "orion/ane_check.h"
#include "orion/backend.h"
#include "orion/fp16.h"
#include "orion/patch.h"

static const char *const program =
    "func main(tokens: int32[1,4], targets: int32[1,4]) {\n"
    "  param wte: fp16[8,4] = normal(seed=1, std=0.5);\n"
    "  param w: fp16[4,8] = normal(seed=2, std=0.5);\n"
    "  e = gather(wte, tokens, axis=0);\n"
    "  h = matmul(e, w);\n"
    "  logits = tanh(h);\n"
    "  loss: fp32[] = cross_entropy(logits, targets);\n"
    "  return loss, logits;\n"
    "}\n";

static const char *const float_only =
    "func main(x: fp16[1,4,1,8], bias: fp16[1,4,1,8]) {\n"
    "  d = sub(x, bias);\n"
    "  y = tanh(d);\n"
    "  return y, d;\n"
    "}\n";

/* concat: the device refuses it (ANE001) in the device segment after the gather. */
static const char *const refused =
    "func main(tokens: int32[1,4]) {\n"
    "  param wte: fp16[8,4] = fill(0.5);\n"
    "  e = gather(wte, tokens, axis=0);\n"
    "  f = tanh(e);\n"
    "  c = concat(e, f, axis=-1);\n"
    "  n = layer_norm(c);\n"
    "  return n;\n"
    "}\n";

static char dir[64], pkg[160], cache[128];
static Capture cap; /* what the code under test reports, as "test" */

static void compile(const char *text) {
  ane_test_package(text, "ane-partition", dir, sizeof dir, pkg, sizeof pkg);
  ane_test_own_cache(dir, cache, sizeof cache);
  capture_init(&cap, "test");
}

static void teardown(void) {
  capture_free(&cap);
  remove_tree(dir);
}

/* "cpu[e,...] device[h,...]": each segment's statements by first result. */
static void describe(const AnePartition *part, const MilFunc *f, StrBuf *out) {
  for (uint32_t s = 0; s < part->nsegs; s++) {
    const AneSegment *g = &part->segs[s];
    sb_printf(out, "%s%s[", s ? " " : "", g->on_device ? "device" : "cpu");
    for (uint32_t i = 0; i < g->nstmts; i++) sb_printf(out, "%s%s", i ? "," : "", f->stmts[g->stmts[i]].results[0].name);
    sb_puts(out, "](");
    for (uint32_t i = 0; i < g->ninputs; i++) sb_printf(out, "%s%s", i ? "," : "", g->inputs[i].name);
    sb_puts(out, ")->(");
    for (uint32_t i = 0; i < g->noutputs; i++) sb_printf(out, "%s%s", i ? "," : "", g->outputs[i].name);
    sb_puts(out, ")");
  }
}

Test(ane_partition, gather_and_cross_entropy_statements_run_on_the_cpu, .fini = teardown) {
  compile(program);
  OrionProgram *p = orion_open(pkg, NULL, &cap.d);
  cr_assert_not_null(p, "%s", cap.text.data);
  const MilFunc *f = orion_function_mil(p, 0);
  cr_assert(ane_parts_wanted(p, 0));
  AnePartition part;
  ane_partition_plan(&part, f);
  StrBuf got;
  sb_init(&got);
  describe(&part, f, &got);
  /* The gather by token ids and the loss's target arithmetic (int32) in one
   * CPU segment, scheduled ahead of the device's run; the pick of the
   * targets' logits (int32 indices) between the device's runs; consts are
   * in no list. */
  cr_assert_str_eq(got.data,
                   "cpu[e,loss_targets_checked,loss_targets_flat,loss_pick_index](targets,tokens)"
                   "->(e,loss_pick_index) "
                   "device[h,logits,loss_fp32,loss_max,loss_shifted,loss_exp,loss_sumexp,loss_lse,loss_shifted_flat,"
                   "loss_lse_flat](e)->(logits,loss_lse_flat,loss_shifted_flat) "
                   "cpu[loss_picked](loss_pick_index,loss_shifted_flat)->(loss_picked) "
                   "device[loss_each,loss_total,loss](loss_lse_flat,loss_picked)->(loss)");
  cr_assert_eq(part.cpu_stmts, 5);
  /* The last device segment as MIL: its inputs declared in binding order,
   * the consts it references, its statements as they were written. */
  StrBuf mil;
  sb_init(&mil);
  const MilProgram *prog = orion_function_program(p, 0);
  ane_partition_mil(&part, 3, prog, f, srcset_get(&cap.sources, prog->file)->text, &mil);
  cr_assert_str_eq(mil.data,
      "program(1.3)\n{\n"
      "    func main<ios18>(tensor<fp32, [4]> loss_lse_flat, tensor<fp32, [4]> loss_picked) {\n"
      "        fp32 loss_count = const()[name = string(\"loss_count\"), val = fp32(0x1p+2)];\n"
      "        tensor<int32, [1]> loss_total_axes = const()[name = string(\"loss_total_axes\"), val = "
      "tensor<int32, [1]>([0])];\n"
      "        bool loss_total_keep_dims = const()[name = string(\"loss_total_keep_dims\"), val = bool(false)];\n"
      "        tensor<fp32, [4]> loss_each = sub(x = loss_lse_flat, y = loss_picked)[name = string(\"loss_each\")];\n"
      "        fp32 loss_total = reduce_sum(axes = loss_total_axes, keep_dims = loss_total_keep_dims, x = "
      "loss_each)[name = string(\"loss_total\")];\n"
      "        fp32 loss = real_div(x = loss_total, y = loss_count)[name = string(\"loss\")];\n"
      "    } -> (loss);\n}\n");
  /* A BLOBFILE const keeps its offset: the segment gets the weight files whole. */
  sb_free(&mil);
  sb_init(&mil);
  ane_partition_mil(&part, 0, prog, f, srcset_get(&cap.sources, prog->file)->text, &mil);
  cr_assert(strstr(mil.data, "func main<ios18>(tensor<int32, [1, 4]> targets, tensor<int32, [1, 4]> tokens) {\n"), "%s", mil.data);
  cr_assert(strstr(mil.data, "BLOBFILE(path = string(\"@model_path/weights/weight.bin\"), offset = uint64(64))"),
            "%s", mil.data);
  sb_free(&mil);
  sb_free(&got);
  ane_partition_free(&part);
  orion_close(p);
}

/* The program run in parts on the ane backend against the stand-in, and on
 * the cpu backend in ane numerics: the fp16 logits are the same bits; the
 * fp32 loss went through fp16 surfaces (loss_shifted_flat, loss_lse_flat,
 * loss_picked and loss itself), so it is the cpu's within fp16 rounding. */
Test(ane_partition, a_run_in_parts_gives_the_cpu_backends_results, .fini = teardown) {
  compile(program);
  OrionProgram *p = orion_open(pkg, NULL, &cap.d);
  cr_assert_not_null(p, "%s", cap.text.data);
  int32_t tokens[4] = {1, 7, 3, 0}, targets[4] = {7, 3, 0, 5};
  const OrionTensor in[] = {{.dtype = MIL_DT_INT32, .rank = 2, .dims = {1, 4}, .data = tokens},
                            {.dtype = MIL_DT_INT32, .rank = 2, .dims = {1, 4}, .data = targets}};
  float loss[2];
  uint16_t logits[2][32];
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_ANE};
  for (int k = 0; k < 2; k++) {
    OrionTensor out[] = {{.dtype = MIL_DT_FP32, .rank = 0, .data = &loss[k]},
                         {.dtype = MIL_DT_FP16, .rank = 3, .dims = {1, 4, 8}, .data = logits[k]}};
    /* orion_input order is declared order: tokens, targets */
    cr_assert_str_eq(orion_input(p, 0, 0)->name, "tokens");
    OrionBackend *b = orion_backend_open(k ? "ane" : "cpu", NULL, &cap.d);
    cr_assert_not_null(b, "%s", cap.text.data);
    OrionExec *e = orion_backend_prepare(b, p, 0, &po, &cap.d);
    cr_assert_not_null(e, "%s", cap.text.data);
    cr_assert(orion_exec_run(e, in, out, &cap.d), "%s", cap.text.data);
    cr_assert(orion_exec_run(e, in, out, &cap.d), "%s", cap.text.data); /* buffers and surfaces reused */
    orion_backend_close(b);
  }
  cr_assert_arr_eq(logits[1], logits[0], sizeof logits[0]);
  cr_assert_gt(loss[0], 1.0f);
  cr_assert_float_eq(loss[1], loss[0], loss[0] / 1024, "ane %g, cpu %g", (double)loss[1], (double)loss[0]);
  orion_close(p);
}

Test(ane_partition, a_function_without_int32_is_one_device_program, .fini = teardown) {
  compile(float_only);
  OrionProgram *p = orion_open(pkg, NULL, &cap.d);
  cr_assert_not_null(p, "%s", cap.text.data);
  cr_assert_not(ane_parts_wanted(p, 0));
  orion_close(p);
}

/* The weight-update self-test's choice, made once by a backend of its own and
 * cached (as an earlier process would have), so that a later backend's
 * prepare compiles the segments alone. */
static void choose_once(OrionProgram *p) {
  OrionBackend *b = orion_backend_open("ane", NULL, &cap.d);
  cr_assert_not_null(b, "%s", cap.text.data);
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_ANE};
  cr_assert_not_null(orion_backend_prepare(b, p, 0, &po, &cap.d), "%s", cap.text.data);
  orion_backend_close(b);
}

/* A training step's weight write under the stand-in's default (baked
 * weights: the self-test chose recompile): of the two device segments only
 * the one that reads w is compiled again — the other's content is
 * unchanged, so the backend's device program cache hands back its compiled
 * program; the CPU segment's gather and the device's matmul both see the
 * new values. */
Test(ane_partition, a_weight_write_rebuilds_every_segment, .fini = teardown) {
  compile(program);
  OrionOpenOptions oo = ORION_OPEN_OPTIONS_DEFAULT;
  oo.writable_weights = true;
  OrionProgram *p = orion_open(pkg, &oo, &cap.d);
  cr_assert_not_null(p, "%s", cap.text.data);
  choose_once(p);
  OrionBackend *b = orion_backend_open("ane", NULL, &cap.d);
  cr_assert_not_null(b, "%s", cap.text.data);
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_ANE};
  unsigned long before = standin_compiles();
  OrionExec *e = orion_backend_prepare(b, p, 0, &po, &cap.d);
  cr_assert_not_null(e, "%s", cap.text.data);
  cr_assert_eq(standin_compiles(), before + 2, "one compile per device segment");
  int32_t tokens[4] = {1, 7, 3, 0}, targets[4] = {7, 3, 0, 5};
  const OrionTensor in[] = {{.dtype = MIL_DT_INT32, .rank = 2, .dims = {1, 4}, .data = tokens},
                            {.dtype = MIL_DT_INT32, .rank = 2, .dims = {1, 4}, .data = targets}};
  float loss;
  uint16_t logits[32];
  OrionTensor out[] = {{.dtype = MIL_DT_FP32, .rank = 0, .data = &loss},
                       {.dtype = MIL_DT_FP16, .rank = 3, .dims = {1, 4, 8}, .data = logits}};
  cr_assert(orion_exec_run(e, in, out, &cap.d), "%s", cap.text.data);
  /* wte = 0.5 and w = 0.5 everywhere: every logit is tanh(4 * 0.25) = tanh(1), and the loss log(8) */
  OrionWeightValues v[2] = {{.fn = 0}, {.fn = 0}};
  float half[32];
  for (int i = 0; i < 32; i++) half[i] = 0.5f;
  for (uint32_t i = 0; i < orion_weight_count(p, 0); i++) {
    if (!strcmp(orion_weight(p, 0, i)->name, "wte")) v[0].weight = i;
    if (!strcmp(orion_weight(p, 0, i)->name, "w")) v[1].weight = i;
  }
  v[0].values = v[1].values = half;
  before = standin_compiles();
  cr_assert(orion_backend_write_weights(b, p, v, 2, &cap.d), "%s", cap.text.data);
  cr_assert_eq(standin_compiles(), before + 1, "%lu compiles: the segment of w alone is new",
               standin_compiles() - before);
  cr_assert(orion_exec_run(e, in, out, &cap.d), "%s", cap.text.data);
  for (int i = 0; i < 32; i++) cr_assert_eq(logits[i], fp16_from_float(tanhf(1.0f)), "logit %d: %04x", i, logits[i]);
  cr_assert_float_eq(loss, logf(8.0f), 1e-3, "loss %g", (double)loss);
  orion_backend_close(b);
  orion_close(p);
}

/* The backend's usage line (orion-run -v after a run). */
static const char *usage(OrionBackend *b) {
  static char line[1024];
  cr_assert(orion_backend_usage(b, line, sizeof line));
  return line;
}

static void write_all(OrionBackend *b, OrionProgram *p, float wte, float w) {
  float a[32], c[32];
  for (int i = 0; i < 32; i++) a[i] = wte, c[i] = w;
  OrionWeightValues v[2] = {{.fn = 0, .values = a}, {.fn = 0, .values = c}};
  for (uint32_t i = 0; i < orion_weight_count(p, 0); i++) {
    if (!strcmp(orion_weight(p, 0, i)->name, "wte")) v[0].weight = i;
    if (!strcmp(orion_weight(p, 0, i)->name, "w")) v[1].weight = i;
  }
  cr_assert(orion_backend_write_weights(b, p, v, 2, &cap.d), "%s", cap.text.data);
}

/* Every logit is tanh(4 * wte * w) and the loss log(8). */
static void expect_values(OrionExec *e, float wte, float w) {
  int32_t tokens[4] = {1, 7, 3, 0}, targets[4] = {7, 3, 0, 5};
  const OrionTensor in[] = {{.dtype = MIL_DT_INT32, .rank = 2, .dims = {1, 4}, .data = tokens},
                            {.dtype = MIL_DT_INT32, .rank = 2, .dims = {1, 4}, .data = targets}};
  float loss;
  uint16_t logits[32];
  OrionTensor out[] = {{.dtype = MIL_DT_FP32, .rank = 0, .data = &loss},
                       {.dtype = MIL_DT_FP16, .rank = 3, .dims = {1, 4, 8}, .data = logits}};
  cr_assert(orion_exec_run(e, in, out, &cap.d), "%s", cap.text.data);
  for (int i = 0; i < 32; i++)
    cr_assert_eq(logits[i], fp16_from_float(tanhf(4.0f * wte * w)), "logit %d: %04x", i, logits[i]);
  cr_assert_float_eq(loss, logf(8.0f), 1e-3, "loss %g", (double)loss);
}

/* For one stand-in switch (ORION_ANE_STANDIN_WEIGHTS): the device segments
 * are prepared on the function's own backend (their compiles and the
 * self-test's, at the prepare of a writable program, are in its usage line),
 * and a weight write updates them by the self-test's choice at the cost of
 * `update` compiles per write, the new values seen each time. */
static void parts_strategy_case(const char *mode, unsigned long self_test, unsigned long update, const char *used) {
  cr_assert_eq(setenv("ORION_ANE_STANDIN_WEIGHTS", mode, 1), 0);
  compile(program);
  AneTestPrepared ready = ane_test_prepare(pkg, true, &cap);
  OrionProgram *p = ready.program;
  OrionBackend *b = ready.backend;
  OrionExec *e = ready.exec;
  cr_assert_eq(ready.compiles, 2 + self_test, "%s: %lu compiles", mode, ready.compiles);
  unsigned long before = standin_compiles();
  write_all(b, p, 0.5f, 0.5f);
  cr_assert_eq(standin_compiles(), before + update, "%s: %lu compiles", mode, standin_compiles() - before);
  expect_values(e, 0.5f, 0.5f);
  before = standin_compiles();
  write_all(b, p, 0.5f, 0.25f);
  cr_assert_eq(standin_compiles(), before + update, "%s: %lu compiles", mode, standin_compiles() - before);
  expect_values(e, 0.5f, 0.25f);
  cr_assert_str_eq(usage(b), used);
  orion_backend_close(b);
  orion_close(p);
  unsetenv("ORION_ANE_STANDIN_WEIGHTS");
}

Test(ane_partition, a_weight_write_recompiles_the_changed_segment_under_baked_weights, .fini = teardown) {
  /* the unchanged segment's recompile is the cache's hit */
  parts_strategy_case("baked", 6, 1,
                      "ane program cache: 2 hits, 4 misses, 4 compiles (0 retries), 0 evictions, 4 of 128 resident; "
                      "compile budget 10 of 119 used (constraint ANE005 (compiles_per_process)); OS build standin-1, "
                      "ANE architecture standin");
}

Test(ane_partition, a_weight_write_reloads_the_segments_files_without_a_compile, .fini = teardown) {
  parts_strategy_case("reload", 2, 0,
                      "ane program cache: 0 hits, 2 misses, 2 compiles (0 retries), 0 evictions, 2 of 128 resident; "
                      "compile budget 4 of 119 used (constraint ANE005 (compiles_per_process)); OS build standin-1, "
                      "ANE architecture standin");
}

Test(ane_partition, a_weight_write_patches_the_segments_data_without_a_compile, .fini = teardown) {
  parts_strategy_case("patch-data", 3, 0,
                      "ane program cache: 0 hits, 2 misses, 2 compiles (0 retries), 0 evictions, 2 of 128 resident; "
                      "compile budget 5 of 119 used (constraint ANE005 (compiles_per_process)); OS build standin-1, "
                      "ANE architecture standin");
}

/* A package patched on disk (orion-run patch) and taken up by
 * orion_backend_update_weights, the program not opened writable: each device
 * segment is reloaded by the self-test's strategy (its compiles at the first
 * update), not rebuilt; `update` compiles beyond the self-test's. */
static void parts_patched_case(const char *mode, unsigned long self_test, unsigned long update) {
  cr_assert_eq(setenv("ORION_ANE_STANDIN_WEIGHTS", mode, 1), 0);
  compile(program);
  AneTestPrepared ready = ane_test_prepare(pkg, false, &cap);
  OrionProgram *p = ready.program;
  OrionBackend *b = ready.backend;
  OrionExec *e = ready.exec;
  cr_assert_eq(ready.compiles, 2, "not writable: one compile per device segment, no self-test");
  unsigned long before;
  float wte[32], w[32];
  for (int i = 0; i < 32; i++) wte[i] = 0.5f, w[i] = 0.25f;
  PatchTensor t[2] = {{.name = "wte", .origin = "memory", .dtype = ORION_DT_FP32, .rank = 2, .dims = {8, 4},
                       .data = wte, .nbytes = sizeof wte},
                      {.name = "w", .origin = "memory", .dtype = ORION_DT_FP32, .rank = 2, .dims = {4, 8},
                       .data = w, .nbytes = sizeof w}};
  cr_assert(package_patch(pkg, t, 2, NULL, &cap.d), "%s", cap.text.data);
  before = standin_compiles();
  bool changed = false;
  OrionOpenOptions oo = ORION_OPEN_OPTIONS_DEFAULT;
  cr_assert(orion_backend_update_weights(b, p, &oo, &changed, &cap.d), "%s", cap.text.data);
  cr_assert(changed);
  cr_assert_eq(standin_compiles(), before + self_test + update, "%s: %lu compiles", mode, standin_compiles() - before);
  expect_values(e, 0.5f, 0.25f);
  /* A second patch: the choice is made, only the strategy's compiles. */
  for (int i = 0; i < 32; i++) w[i] = 0.125f;
  cr_assert(package_patch(pkg, &t[1], 1, NULL, &cap.d), "%s", cap.text.data);
  before = standin_compiles();
  cr_assert(orion_backend_update_weights(b, p, &oo, &changed, &cap.d), "%s", cap.text.data);
  cr_assert_eq(standin_compiles(), before + update, "%s: %lu compiles", mode, standin_compiles() - before);
  expect_values(e, 0.5f, 0.125f);
  orion_backend_close(b);
  orion_close(p);
  unsetenv("ORION_ANE_STANDIN_WEIGHTS");
}

Test(ane_partition, a_patch_reloads_the_device_segments_files_without_a_compile, .fini = teardown) {
  parts_patched_case("reload", 2, 0);
}

Test(ane_partition, a_patch_patches_the_device_segments_data_without_a_compile, .fini = teardown) {
  parts_patched_case("patch-data", 3, 0);
}

Test(ane_partition, a_patch_recompiles_the_device_segments_under_baked_weights, .fini = teardown) {
  parts_patched_case("baked", 6, 1); /* the segment of w: the other's content is unchanged (the cache's hit) */
}

/* Under `inputs` each device segment is compiled with its weights as
 * inputs (the segment without weights as it is): a write goes into the
 * weight surfaces, no compile, and the new values are seen. */
Test(ane_partition, a_weight_write_goes_into_the_segments_weight_inputs_without_a_compile, .fini = teardown) {
  parts_strategy_case("inputs", 4, 0,
                      "ane program cache: 0 hits, 2 misses, 2 compiles (0 retries), 0 evictions, 2 of 128 resident; "
                      "compile budget 6 of 119 used (constraint ANE005 (compiles_per_process)); OS build standin-1, "
                      "ANE architecture standin");
}

/* A device segment the device refuses: the error names the segment and gives the device's. (The concat goes
 * to the device only when the caller keeps it there: by default the table places it on the CPU, below.) */
Test(ane_partition, a_refused_segment_is_named, .fini = teardown) {
  compile(refused);
  OrionProgram *p = orion_open(pkg, NULL, &cap.d);
  cr_assert_not_null(p, "%s", cap.text.data);
  OrionBackend *b = orion_backend_open("ane", NULL, &cap.d);
  cr_assert_not_null(b, "%s", cap.text.data);
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_ANE, .keep_refused_on_device = true};
  cr_assert_null(orion_backend_prepare(b, p, 0, &po, &cap.d));
  cr_assert_str_eq(cap.text.data,
                   "test: error: the ane backend cannot prepare segment 1 (device) of function 'main': the ane "
                   "backend: the device failed to compile function 'main' (error code 1, 0x1): ANECCompile() FAILED: "
                   "concat would fail on the ANE: the ANE compiler rejects concat [ANE001]\n");
  orion_backend_close(b);
  orion_close(p);
}

/* concat (ANE001) and gelu (ANE010), statements the device refuses and the
 * constraint table places on the CPU, in MIL as another tool writes it (the
 * compiler would legalize both away); no int32 anywhere. */
static const char *const placed_mil =
    "program(1.3)\n"
    "{\n"
    "    func main<ios18>(tensor<fp16, [1, 4, 1, 8]> a, tensor<fp16, [1, 4, 1, 8]> b) {\n"
    "        tensor<fp16, [1, 4, 1, 8]> s = add(x = a, y = b)[name = string(\"s\")];\n"
    "        int32 ax = const()[name = string(\"ax\"), val = int32(1)];\n"
    "        bool il = const()[name = string(\"il\"), val = bool(false)];\n"
    "        tensor<fp16, [1, 8, 1, 8]> c = concat(axis = ax, interleave = il, values = (s, b))[name = string(\"c\")];\n"
    "        tensor<fp16, [1, 8, 1, 8]> t = tanh(x = c)[name = string(\"t\")];\n"
    "        tensor<fp16, [1, 8, 1, 8]> g = gelu(x = t)[name = string(\"g\")];\n"
    "        tensor<fp16, [1, 8, 1, 8]> n = mul(x = g, y = g)[name = string(\"n\")];\n"
    "    } -> (n);\n"
    "}\n";

/* A bare model directory dir/bare holding mil, opened. */
static OrionProgram *open_bare(const char *mil) {
  test_dir_make(dir, sizeof dir, "ane-partition");
  ane_test_own_cache(dir, cache, sizeof cache);
  capture_init(&cap, "test");
  snprintf(pkg, sizeof pkg, "%s/bare", dir);
  cr_assert_eq(mkdir(pkg, 0700), 0);
  char path[256];
  snprintf(path, sizeof path, "%s/model.mil", pkg);
  const char *err;
  cr_assert(write_file_atomic(path, mil, strlen(mil), &err), "%s", err);
  OrionProgram *p = orion_open(pkg, NULL, &cap.d);
  cr_assert_not_null(p, "%s", cap.text.data);
  return p;
}

/* What was captured so far is dropped (the SourceSet stays: the program's spans point into it). */
static void forget_messages(void) {
  sb_free(&cap.text);
  sb_init(&cap.text);
}

/* cap's lines without the source excerpts, the directory written "D". */
static const char *remarks(void) {
  static char buf[4096];
  StrBuf lines;
  sb_init(&lines);
  for (const char *line = cap.text.data; line && *line;) {
    size_t n = strcspn(line, "\n");
    const char *at = strstr(line, dir);
    if (line[0] != ' ') {
      if (at && at < line + n) sb_printf(&lines, "%.*sD%.*s\n", (int)(at - line), line,
                                         (int)(line + n - at - strlen(dir)), at + strlen(dir));
      else sb_printf(&lines, "%.*s\n", (int)n, line);
    }
    line += n + (line[n] == '\n');
  }
  snprintf(buf, sizeof buf, "%s", lines.data ? lines.data : "");
  sb_free(&lines);
  return buf;
}

static const char *const placed_remarks =
    "D/bare/model.mil:7:40: note: statement 3 (concat 'c') runs on the CPU: ANE001, the ANE compiler rejects concat\n"
    "D/bare/model.mil:9:40: note: statement 5 (gelu 'g') runs on the CPU: ANE010, gelu is not an ANE op\n";

/* The statements orion_ane_check places on the CPU (a remark each), as the
 * partition takes them: the concat (3) and the gelu (5), nothing else. The
 * plan without a cost model: each refused statement its own CPU segment,
 * the device's runs around them; with it (no dispatch figure in the table:
 * the copies alone), the one-statement device run between the two, tanh
 * (64 FLOPs against 256 bytes copied), joins its CPU neighbours; the runs at
 * the ends keep their place. */
Test(ane_partition, concat_and_gelu_statements_run_on_the_cpu, .fini = teardown) {
  OrionProgram *p = open_bare(placed_mil);
  const MilFunc *f = orion_function_mil(p, 0);
  cr_assert_not(ane_parts_wanted(p, 0), "no int32: only the table moves statements");
  uint32_t *placed = calloc(f->nstmts + 1, sizeof *placed);
  OrionAneCheckOptions check = {.cpu_placement = true, .placed = placed};
  cr_assert(orion_ane_check(p, 0, &check, &cap.d), "%s", cap.text.data);
  cr_assert_str_eq(remarks(), placed_remarks);
  uint32_t want[7] = {0, 0, 0, 1, 0, 10, 0};
  cr_assert_eq(f->nstmts, 7);
  for (uint32_t s = 0; s < 7; s++) cr_assert_eq(placed[s], want[s], "statement %u: rule %u", s, placed[s]);
  StrBuf got;
  sb_init(&got);
  AnePartition part;
  ane_partition_plan_placed(&part, f, placed, NULL);
  describe(&part, f, &got);
  cr_assert_str_eq(got.data, "device[s](a,b)->(s) cpu[c](b,s)->(c) device[t](c)->(t) cpu[g](t)->(g) device[n](g)->(n)");
  cr_assert_eq(ane_stmt_flops(f, 4), 64);
  cr_assert_eq(ane_segment_copy_bytes(f, &part.segs[2]), 256);
  ane_partition_free(&part);
  sb_free(&got);
  sb_init(&got);
  AneCostModel cost = ane_cost_model(NULL);
  cr_assert_eq(cost.dispatch_flops, ANE_DISPATCH_OVERHEAD_FLOPS_DEFAULT);
  ane_partition_plan_placed(&part, f, placed, &cost);
  describe(&part, f, &got);
  cr_assert_str_eq(got.data, "device[s](a,b)->(s) cpu[c,t,g](b,s)->(g) device[n](g)->(n)");
  cr_assert_eq(part.cpu_stmts, 3);
  ane_partition_free(&part);
  /* Without the table's placement the device gets them all: one program. */
  sb_free(&got);
  sb_init(&got);
  ane_partition_plan_placed(&part, f, NULL, &cost);
  describe(&part, f, &got);
  cr_assert_str_eq(got.data, "device[s,c,t,g,n](a,b)->(n)");
  ane_partition_free(&part);
  sb_free(&got);
  free(placed);
  orion_close(p);
}

/* The cost model keeps a device run that pays: the gather program's matmul
 * run (452 FLOPs against 168 bytes copied) stays between its CPU segments,
 * and the short run at the end (the loss) keeps its place at the end: the
 * same plan as without the model. A dispatch figure of 300 FLOPs moves it. */
Test(ane_partition, the_cost_model_keeps_a_device_run_that_pays, .fini = teardown) {
  compile(program);
  OrionProgram *p = orion_open(pkg, NULL, &cap.d);
  cr_assert_not_null(p, "%s", cap.text.data);
  const MilFunc *f = orion_function_mil(p, 0);
  AnePartition bare, weighed;
  ane_partition_plan(&bare, f);
  AneCostModel cost = ane_cost_model(NULL);
  ane_partition_plan_placed(&weighed, f, NULL, &cost);
  StrBuf a, b;
  sb_init(&a);
  sb_init(&b);
  describe(&bare, f, &a);
  describe(&weighed, f, &b);
  cr_assert_str_eq(b.data, a.data);
  cr_assert_eq(ane_segment_flops(f, &weighed.segs[1]), 452);
  cr_assert_eq(ane_segment_copy_bytes(f, &weighed.segs[1]), 168);
  ane_partition_free(&weighed);
  sb_free(&b);
  sb_init(&b);
  cost.dispatch_flops = 300;
  ane_partition_plan_placed(&weighed, f, NULL, &cost);
  describe(&weighed, f, &b);
  cr_assert_str_eq(b.data, "cpu[e,h,logits,loss_fp32,loss_max,loss_shifted,loss_exp,loss_sumexp,loss_lse,"
                           "loss_targets_checked,loss_targets_flat,loss_pick_index,loss_shifted_flat,loss_picked,"
                           "loss_lse_flat](targets,tokens)->(logits,loss_lse_flat,loss_picked) "
                           "device[loss_each,loss_total,loss](loss_lse_flat,loss_picked)->(loss)");
  ane_partition_free(&weighed);
  ane_partition_free(&bare);
  sb_free(&a);
  sb_free(&b);
  orion_close(p);
}

/* Through the backend: supports accepts the function (a remark per statement
 * moved), prepare compiles the two device segments (the cost model joined
 * the third to the CPU), and a run gives the cpu backend's bits in ane
 * numerics; a caller that keeps refused statements on the device gets the
 * device's refusal of the whole function. */
Test(ane_partition, the_backend_runs_refused_statements_on_the_cpu, .fini = teardown) {
  OrionProgram *p = open_bare(placed_mil);
  uint16_t a[32], b16[32], n[2][64];
  for (int i = 0; i < 32; i++) {
    a[i] = fp16_from_float((float)(i % 7) / 4 - 0.75f);
    b16[i] = fp16_from_float((float)(i % 5) / 3 - 0.5f);
  }
  const OrionTensor in[] = {{.dtype = MIL_DT_FP16, .rank = 4, .dims = {1, 4, 1, 8}, .data = a},
                            {.dtype = MIL_DT_FP16, .rank = 4, .dims = {1, 4, 1, 8}, .data = b16}};
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_ANE};
  for (int k = 0; k < 2; k++) {
    OrionTensor out[] = {{.dtype = MIL_DT_FP16, .rank = 4, .dims = {1, 8, 1, 8}, .data = n[k]}};
    OrionBackend *be = orion_backend_open(k ? "ane" : "cpu", NULL, &cap.d);
    cr_assert_not_null(be, "%s", cap.text.data);
    if (k) {
      forget_messages();
      cr_assert(orion_backend_caps(be).places_refused_on_cpu);
      cr_assert(orion_backend_supports(be, p, 0, &cap.d), "%s", cap.text.data);
      cr_assert_str_eq(remarks(), placed_remarks);
    }
    unsigned long before = k ? standin_compiles() : 0;
    OrionExec *e = orion_backend_prepare(be, p, 0, &po, &cap.d);
    cr_assert_not_null(e, "%s", cap.text.data);
    if (k) cr_assert_eq(standin_compiles(), before + 2, "%lu compiles", standin_compiles() - before);
    cr_assert(orion_exec_run(e, in, out, &cap.d), "%s", cap.text.data);
    orion_backend_close(be);
  }
  cr_assert_arr_eq(n[1], n[0], sizeof n[0]);
  OrionBackend *be = orion_backend_open("ane", NULL, &cap.d);
  cr_assert_not_null(be, "%s", cap.text.data);
  forget_messages();
  po.keep_refused_on_device = true;
  cr_assert_null(orion_backend_prepare(be, p, 0, &po, &cap.d));
  cr_assert_str_eq(remarks(), "test: error: the ane backend: the device failed to compile function 'main' (error code "
                              "1, 0x1): ANECCompile() FAILED: concat would fail on the ANE: the ANE compiler rejects "
                              "concat [ANE001]\n");
  orion_backend_close(be);
  orion_close(p);
}
