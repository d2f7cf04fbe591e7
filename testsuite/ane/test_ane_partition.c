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
 * choice under each stand-in switch; and a device segment the device
 * refuses, named in the error.
 */
#define _XOPEN_SOURCE 700

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../helpers.h"
#include "ane_test_support.h"
#include "ane_partition.h"
#include "ane_parts.h"
#include "loader_internal.h"
#include "orion/backend.h"
#include "orion/fp16.h"

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
  OrionOpenOptions oo = ORION_OPEN_OPTIONS_DEFAULT;
  oo.writable_weights = true;
  OrionProgram *p = orion_open(pkg, &oo, &cap.d);
  cr_assert_not_null(p, "%s", cap.text.data);
  OrionBackend *b = orion_backend_open("ane", NULL, &cap.d);
  cr_assert_not_null(b, "%s", cap.text.data);
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_ANE};
  unsigned long before = standin_compiles();
  OrionExec *e = orion_backend_prepare(b, p, 0, &po, &cap.d);
  cr_assert_not_null(e, "%s", cap.text.data);
  cr_assert_eq(standin_compiles(), before + 2 + self_test, "%s: %lu compiles", mode, standin_compiles() - before);
  before = standin_compiles();
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

/* Under `inputs` each device segment is compiled with its weights as
 * inputs (the segment without weights as it is): a write goes into the
 * weight surfaces, no compile, and the new values are seen. */
Test(ane_partition, a_weight_write_goes_into_the_segments_weight_inputs_without_a_compile, .fini = teardown) {
  parts_strategy_case("inputs", 4, 0,
                      "ane program cache: 0 hits, 2 misses, 2 compiles (0 retries), 0 evictions, 2 of 128 resident; "
                      "compile budget 6 of 119 used (constraint ANE005 (compiles_per_process)); OS build standin-1, "
                      "ANE architecture standin");
}

/* A device segment the device refuses: the error names the segment and gives the device's. */
Test(ane_partition, a_refused_segment_is_named, .fini = teardown) {
  compile(refused);
  OrionProgram *p = orion_open(pkg, NULL, &cap.d);
  cr_assert_not_null(p, "%s", cap.text.data);
  OrionBackend *b = orion_backend_open("ane", NULL, &cap.d);
  cr_assert_not_null(b, "%s", cap.text.data);
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_ANE};
  cr_assert_null(orion_backend_prepare(b, p, 0, &po, &cap.d));
  cr_assert_str_eq(cap.text.data,
                   "test: error: the ane backend cannot prepare segment 1 (device) of function 'main': the ane "
                   "backend: the device failed to compile function 'main' (error code 1, 0x1): ANECCompile() FAILED: "
                   "concat would fail on the ANE: the ANE compiler rejects concat [ANE001]\n");
  orion_backend_close(b);
  orion_close(p);
}
