/*
 * The hardware probes (orion/probe.h) against a fake device behind
 * orion_backend_open_vtable: the CPU backend computing, in front of it the
 * device's refusals (concat and gelu, surfaces below N bytes, more than M
 * channels, a prepare failing after K compiles). The probes must find
 * exactly N, M, K and the two rejections, and their JSON must have the
 * table's fields and pass the table's own loader once merged into it.
 * Timing probes: structure only.
 */
#include <criterion/criterion.h>
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "orion/backend.h"
#include "orion/probe.h"

/* The device the fake emulates (the test's own, set before each open). */
typedef struct FakeDevice {
  uint64_t min_surface_bytes; /* N */
  uint64_t max_channels;      /* M: dims[1] of every input and output */
  uint32_t compile_budget;    /* K: successful prepares */
  bool reject_concat, reject_gelu;
  bool reject_v13; /* program(1.3) (ios18), as M1 and M2 do */
  uint32_t compiles; /* so far */
} FakeDevice;

static FakeDevice fake;

static bool fake_available(char *why, size_t len) {
  (void)why, (void)len;
  return true;
}
static void *fake_open(const OrionBackendOptions *opt, Diag *d) { return orion_backend_cpu.open(opt, d); }
static void fake_close(void *impl) { orion_backend_cpu.close(impl); }
static OrionBackendCaps fake_caps(const void *impl) { return orion_backend_cpu.caps(impl); }
static bool fake_supports(void *impl, const OrionProgram *p, uint32_t fn, Diag *d) {
  return orion_backend_cpu.supports(impl, p, fn, d);
}

static bool tensor_ok(const OrionTensorInfo *t, Diag *d) {
  if (t->bytes < fake.min_surface_bytes) {
    diag_error(d, (SrcSpan){0}, "fake device: status 0x1d: %s is %llu bytes", t->mil_name,
               (unsigned long long)t->bytes);
    return false;
  }
  if (t->rank == 4 && (uint64_t)t->dims[1] > fake.max_channels) {
    diag_error(d, (SrcSpan){0}, "fake device: %lld channels", (long long)t->dims[1]);
    return false;
  }
  return true;
}

static void *fake_prepare(void *impl, OrionProgram *p, uint32_t fn, const OrionPrepareOptions *opt, Diag *d) {
  const MilFunc *f = orion_function_mil(p, fn);
  if (fake.reject_v13 && f->ios >= 18) {
    diag_error(d, (SrcSpan){0}, "fake device: the MIL parser refuses <%s>", f->opset);
    return NULL;
  }
  for (uint32_t i = 0; i < f->nstmts; i++)
    if ((fake.reject_concat && !strcmp(f->stmts[i].op, "concat")) ||
        (fake.reject_gelu && !strcmp(f->stmts[i].op, "gelu"))) {
      diag_error(d, (SrcSpan){0}, "fake device: ANECCompile() FAILED: %s", f->stmts[i].op);
      return NULL;
    }
  for (uint32_t i = 0; i < orion_input_count(p, fn); i++)
    if (!tensor_ok(orion_input(p, fn, i), d)) return NULL;
  for (uint32_t i = 0; i < orion_output_count(p, fn); i++)
    if (!tensor_ok(orion_output(p, fn, i), d)) return NULL;
  if (fake.compiles >= fake.compile_budget) {
    diag_error(d, (SrcSpan){0}, "fake device: compile budget spent");
    return NULL;
  }
  void *e = orion_backend_cpu.prepare(impl, p, fn, opt, d);
  if (e) fake.compiles++;
  return e;
}
static bool fake_run(void *exec, const OrionTensor *in, const OrionTensor *out, Diag *d) {
  return orion_backend_cpu.run(exec, in, out, d);
}
static bool fake_weights_changed(void *exec, Diag *d) { return orion_backend_cpu.weights_changed(exec, d); }
static uint32_t fake_profile_count(const void *exec) { return orion_backend_cpu.profile_count(exec); }
static const OrionStmtTime *fake_profile_stmt(const void *exec, uint32_t i) {
  return orion_backend_cpu.profile_stmt(exec, i);
}
static void fake_profile_reset(void *exec) { orion_backend_cpu.profile_reset(exec); }
static void fake_release(void *exec) { orion_backend_cpu.release(exec); }

static const OrionBackendVtable fake_vt = {
    .name = "fake",
    .description = "a device emulated for the probe tests",
    .available = fake_available,
    .open = fake_open,
    .close = fake_close,
    .caps = fake_caps,
    .supports = fake_supports,
    .prepare = fake_prepare,
    .run = fake_run,
    .weights_changed = fake_weights_changed,
    .profile_count = fake_profile_count,
    .profile_stmt = fake_profile_stmt,
    .profile_reset = fake_profile_reset,
    .release = fake_release,
};

static SourceSet sources;
static Diag diag;
static StrBuf messages;

static OrionBackend *open_fake(FakeDevice dev) {
  fake = dev;
  srcset_init(&sources);
  sb_init(&messages);
  diag_init(&diag, &sources);
  diag.capture = &messages;
  OrionBackend *b = orion_backend_open_vtable(&fake_vt, &(OrionBackendOptions){.threads = 1}, &diag);
  cr_assert_not_null(b, "%s", messages.data);
  return b;
}

static void finish(OrionBackend *b, OrionProbeReport *r) {
  orion_probe_report_free(r);
  orion_backend_close(b);
  sb_free(&messages);
  srcset_free(&sources);
}

/* Small and quick: the SRAM series to 200 KB, 5 dispatch runs. */
static OrionProbeOptions small_options(unsigned only) {
  return (OrionProbeOptions){.only = only, .target = MIL_IOS18, .max_compiles = 100, .max_working_set = 200000,
                             .repeats = 1, .dispatch_runs = 5};
}

static const FakeDevice typical = {.min_surface_bytes = 4096, .max_channels = 1000, .compile_budget = 40,
                                   .reject_concat = true, .reject_gelu = true};

Test(probe, finds_the_fake_devices_limits) {
  OrionBackend *b = open_fake(typical);
  OrionProbeReport r;
  OrionProbeOptions o = small_options(0);
  cr_assert(orion_probe_run(b, &o, &r, &diag), "%s", messages.data);
  cr_assert(r.channels.ran && r.channels.found);
  cr_assert_eq(r.channels.accepted, 1000);
  cr_assert_eq(r.channels.rejected, 1001);
  cr_assert_not_null(strstr(r.channels.error, "fake device: 1001 channels"), "%s", r.channels.error);
  cr_assert(r.surface.ran && r.surface.found);
  cr_assert_eq(r.surface.accepted * ORION_PROBE_WIDTH * 2, 4096);
  cr_assert_eq(r.surface.rejected * ORION_PROBE_WIDTH * 2, 4096 - 64);
  cr_assert_not_null(strstr(r.surface.error, "status 0x1d"), "%s", r.surface.error);
  cr_assert(r.concat.ran && !r.concat.accepted);
  cr_assert_str_eq(r.concat.rule, "ANE001");
  cr_assert_not_null(strstr(r.concat.error, "ANECCompile() FAILED: concat"), "%s", r.concat.error);
  cr_assert(r.gelu.ran && !r.gelu.accepted);
  cr_assert_str_eq(r.gelu.rule, "ANE010");
  cr_assert_not_null(strstr(r.gelu.error, "ANECCompile() FAILED: gelu"), "%s", r.gelu.error);
  /* The compile budget: K programs in the process, the other probes' included. */
  cr_assert(r.compiles.ran && r.compiles.failed);
  cr_assert_eq(r.compiles.budget, 40);
  cr_assert_eq(r.prepared, 40);
  cr_assert_eq(fake.compiles, 40);
  cr_assert_not_null(strstr(r.compiles.error, "compile budget spent"), "%s", r.compiles.error);
  /* Timing: structure only. */
  cr_assert(r.sram.ran);
  cr_assert_eq(r.sram.npoints, 3); /* n = 64, 96, 128: working sets 24576, 55296, 98304 bytes */
  cr_assert_eq(r.sram.points[0].n, 64);
  cr_assert_eq(r.sram.points[2].working_set_bytes, 98304);
  cr_assert_null(r.sram.error);
  cr_assert(r.dispatch.ran && r.dispatch.ok);
  cr_assert_eq(r.dispatch.runs, 5);
  cr_assert(r.dispatch.best_ms <= r.dispatch.median_ms);
  finish(b, &r);
}

static ConstraintTable *builtin(void);
static const ConstraintChip *merged_chip(const cJSON *entry, const char *chip, ConstraintTable **out);

/* The dialect probe finds program(1.3) refused, and the probes after it
 * use the newest dialect accepted; the JSON's chip target says so and
 * still loads into the table. */
Test(probe, dialect_refused_falls_back) {
  FakeDevice dev = typical;
  dev.reject_v13 = true;
  OrionBackend *b = open_fake(dev);
  OrionProbeReport r;
  OrionProbeOptions o = small_options(1u << ORION_PROBE_DIALECT | 1u << ORION_PROBE_GELU | 1u << ORION_PROBE_CHANNELS |
                                      1u << ORION_PROBE_SURFACE);
  cr_assert(orion_probe_run(b, &o, &r, &diag), "%s", messages.data);
  cr_assert(r.dialects.ran && r.dialects.found);
  cr_assert(r.dialects.accepted[MIL_IOS16] && r.dialects.accepted[MIL_IOS17] && !r.dialects.accepted[MIL_IOS18]);
  cr_assert_not_null(strstr(r.dialects.error[MIL_IOS18], "refuses <ios18>"), "%s", r.dialects.error[MIL_IOS18]);
  cr_assert_eq(r.dialects.newest, MIL_IOS17);
  cr_assert_eq(r.target, MIL_IOS17);
  cr_assert_eq(r.surface.accepted * 64, 4096); /* found in program(1.0), not refused for its dialect */
  cr_assert(!r.gelu.accepted);
  cr_assert_not_null(strstr(r.gelu.error, "FAILED: gelu"), "%s", r.gelu.error);
  ConstraintTable *t = builtin();
  cr_assert_not_null(t, "%s", messages.data);
  char *text = orion_probe_report_json(&r, t, "m4", "9.9.9", "2026-12-02");
  cJSON *root = cJSON_Parse(text);
  const cJSON *entry = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "chips"), "m4");
  const cJSON *target = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(entry, "target"), "value");
  cr_assert_str_eq(target->valuestring, "ios17");
  ConstraintTable *merged;
  const ConstraintChip *c = merged_chip(entry, "m4", &merged);
  cr_assert_eq(c->target, MIL_IOS17);
  cr_assert_eq(c->min_surface_bytes.value, 4096);
  constraints_free(merged);
  cJSON_Delete(root);
  free(text);
  constraints_free(t);
  finish(b, &r);
}

/* The searches' boundaries wherever they fall, not only at round numbers. */
Test(probe, finds_odd_limits) {
  OrionBackend *b = open_fake((FakeDevice){.min_surface_bytes = 49152 + 1, .max_channels = 16385,
                                           .compile_budget = 1000});
  OrionProbeReport r;
  OrionProbeOptions o = small_options(1u << ORION_PROBE_CHANNELS | 1u << ORION_PROBE_SURFACE);
  o.pace_ms = 1; /* a pause after each rejection changes nothing found */
  cr_assert(orion_probe_run(b, &o, &r, &diag), "%s", messages.data);
  cr_assert_eq(r.channels.accepted, 16385);
  cr_assert_eq(r.surface.accepted * 64, 49152 + 64); /* the next whole [1, C, 1, 32] */
  cr_assert(!r.concat.ran && !r.gelu.ran && !r.sram.ran && !r.dispatch.ran && !r.compiles.ran);
  finish(b, &r);
}

Test(probe, compile_cap_bounds_the_budget_probe) {
  OrionBackend *b = open_fake((FakeDevice){.min_surface_bytes = 0, .max_channels = 1u << 30, .compile_budget = 1000});
  OrionProbeReport r;
  OrionProbeOptions o = small_options(1u << ORION_PROBE_COMPILES);
  o.max_compiles = 10;
  cr_assert(orion_probe_run(b, &o, &r, &diag), "%s", messages.data);
  cr_assert(r.compiles.ran && !r.compiles.failed);
  cr_assert_eq(r.compiles.this_probe, 10);
  cr_assert_eq(fake.compiles, 10);
  cr_assert(!r.channels.ran && !r.surface.ran);
  finish(b, &r);
}

/* A device that accepts everything: the searches end at their caps, and
 * the dialect of M1/M2 (program(1.0)) is read and run too. */
Test(probe, nothing_rejected_in_either_dialect) {
  for (int t = MIL_IOS16; t <= MIL_IOS18; t++) {
    OrionBackend *b = open_fake((FakeDevice){.max_channels = 1u << 30, .compile_budget = 1000});
    OrionProbeReport r;
    OrionProbeOptions o = small_options(0);
    o.target = (MilTarget)t;
    o.max_channels = 4096;
    o.max_surface_bytes = 8192;
    o.max_compiles = 3;
    cr_assert(orion_probe_run(b, &o, &r, &diag), "%s", messages.data);
    for (int d = MIL_IOS16; d <= MIL_IOS18; d++) cr_assert(r.dialects.accepted[d], "%s", r.dialects.error[d]);
    cr_assert(r.channels.all_accepted && !r.channels.found);
    cr_assert_eq(r.channels.accepted, 4096);
    cr_assert(!r.surface.found && !r.surface.none);
    cr_assert_eq(r.surface.accepted, 1);
    cr_assert(r.concat.accepted, "%s", r.concat.error);
    cr_assert(r.gelu.accepted, "%s", r.gelu.error);
    cr_assert(r.dispatch.ok, "%s", r.dispatch.error);
    cr_assert(!r.compiles.failed, "%s", r.compiles.error);
    cr_assert_null(r.sram.error, "%s", r.sram.error);
    finish(b, &r);
  }
}

/* ---- the JSON ---- */

static ConstraintTable *builtin(void) {
  size_t len;
  const char *text = constraints_builtin_text(&len);
  return constraints_parse("builtin", text, len, NULL, &diag);
}

static double number(const cJSON *o, const char *a, const char *b) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, a), b);
  cr_assert(cJSON_IsNumber(v), "%s.%s", a, b);
  return v->valuedouble;
}

/* The chip entry put into the shipped table in place of (or beside) the
 * chip's: the table's loader must take it, with the probed figures. */
static const ConstraintChip *merged_chip(const cJSON *entry, const char *chip, ConstraintTable **out) {
  size_t len;
  cJSON *table = cJSON_Parse(constraints_builtin_text(&len));
  cJSON *chips = cJSON_GetObjectItemCaseSensitive(table, "chips");
  cJSON_DeleteItemFromObjectCaseSensitive(chips, chip);
  cJSON_AddItemToObject(chips, chip, cJSON_Duplicate(entry, true));
  char *text = cJSON_PrintUnformatted(table);
  cJSON_Delete(table);
  *out = constraints_parse("merged", text, strlen(text), NULL, &diag);
  free(text);
  cr_assert_not_null(*out, "%s", messages.data);
  return constraints_chip(*out, chip);
}

static void check_json(const char *chip, bool known) {
  OrionBackend *b = open_fake(typical);
  OrionProbeReport r;
  OrionProbeOptions o = small_options(0);
  cr_assert(orion_probe_run(b, &o, &r, &diag), "%s", messages.data);
  ConstraintTable *t = builtin();
  cr_assert_not_null(t, "%s", messages.data);
  char *text = orion_probe_report_json(&r, t, chip, "9.9.9", "2026-12-02");
  cJSON *root = cJSON_Parse(text);
  cr_assert_not_null(root, "%s", text);
  const cJSON *entry = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "chips"), chip);
  cr_assert_not_null(entry);
  static const char *const fields[] = {"description", "target", "min_surface_bytes", "sram_budget_bytes",
                                       "max_tensor_dim"};
  for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
    cr_assert_not_null(cJSON_GetObjectItemCaseSensitive(entry, fields[i]), "%s", fields[i]);
  cr_assert_eq(number(entry, "min_surface_bytes", "value"), 4096);
  cr_assert_eq(number(entry, "max_tensor_dim", "value"), 1000);
  const cJSON *src = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(entry, "max_tensor_dim"), "source");
  cr_assert_not_null(strstr(src->valuestring, "orion-run probe (orion 9.9.9, backend fake, 2026-12-02)"), "%s",
                     src->valuestring);
  const cJSON *probe = cJSON_GetObjectItemCaseSensitive(root, "probe");
  cr_assert(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(probe, "concat"), "accepted")));
  cr_assert(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(probe, "gelu"), "accepted")));
  cr_assert_eq(number(probe, "compiles", "budget"), 40);
  cr_assert(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(probe, "sram"), "points")));
  ConstraintTable *merged;
  const ConstraintChip *c = merged_chip(entry, chip, &merged);
  cr_assert_not_null(c);
  cr_assert_eq(c->min_surface_bytes.value, 4096);
  cr_assert(!c->min_surface_bytes.inherited);
  cr_assert_eq(c->max_tensor_dim.value, 1000);
  /* The SRAM knee is timing: whatever it is, the entry loads; without one the table's figure stays. */
  if (!r.sram.knee_found) {
    const ConstraintChip *before = constraints_chip(t, chip);
    cr_assert_eq(c->sram_budget_bytes.value, before ? before->sram_budget_bytes.value
                                                    : constraints_target(t, MIL_IOS18)->sram_budget_bytes);
  }
  cr_assert_eq(c->target, MIL_IOS18); /* measured: the fake takes every dialect */
  if (known) cr_assert_str_eq(c->description, constraints_chip(t, chip)->description);
  constraints_free(merged);
  cJSON_Delete(root);
  free(text);
  constraints_free(t);
  finish(b, &r);
}

Test(probe, json_is_a_chip_entry_the_table_loads) { check_json("m1", true); }
Test(probe, json_adds_a_chip_the_table_lacks) { check_json("m9", false); }

/* Probes that did not run leave the chip's figures as the table has them. */
Test(probe, json_keeps_the_tables_figures_it_did_not_measure) {
  OrionBackend *b = open_fake(typical);
  OrionProbeReport r;
  OrionProbeOptions o = small_options(1u << ORION_PROBE_CONCAT);
  cr_assert(orion_probe_run(b, &o, &r, &diag), "%s", messages.data);
  ConstraintTable *t = builtin();
  char *text = orion_probe_report_json(&r, t, "m4", "9.9.9", "2026-12-02");
  cJSON *root = cJSON_Parse(text);
  const cJSON *probe = cJSON_GetObjectItemCaseSensitive(root, "probe");
  cr_assert_null(cJSON_GetObjectItemCaseSensitive(probe, "channels"));
  cr_assert_not_null(cJSON_GetObjectItemCaseSensitive(probe, "concat"));
  ConstraintTable *merged;
  const ConstraintChip *c =
      merged_chip(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "chips"), "m4"), "m4",
                  &merged);
  const ConstraintChip *before = constraints_chip(t, "m4");
  cr_assert_eq(c->max_tensor_dim.value, before->max_tensor_dim.value);
  cr_assert_str_eq(c->max_tensor_dim.source, before->max_tensor_dim.source);
  cr_assert_eq(c->min_surface_bytes.inherited, before->min_surface_bytes.inherited);
  constraints_free(merged);
  cJSON_Delete(root);
  free(text);
  constraints_free(t);
  finish(b, &r);
}

Test(probe, names) {
  OrionProbeKind k;
  for (int i = 0; i < ORION_PROBE_COUNT; i++) {
    cr_assert(orion_probe_from_name(orion_probe_name((OrionProbeKind)i), &k));
    cr_assert_eq((int)k, i);
  }
  cr_assert(!orion_probe_from_name("cliff", &k));
  cr_assert_str_eq(orion_probe_name(ORION_PROBE_COMPILES), "compiles");
}

/* The SRAM series starts at the first size whose surfaces reach the device's
 * minimum: the surface probe's finding, else the caller's figure (the
 * table's). Without either, its first size is refused and the series ends. */
Test(probe, the_sram_series_starts_at_the_smallest_surface) {
  FakeDevice big_minimum = typical;
  big_minimum.min_surface_bytes = 16384; /* n = 64: 8192-byte surfaces, refused; n = 96: 18432 */
  OrionBackend *b = open_fake(big_minimum);
  OrionProbeReport r;
  OrionProbeOptions o = small_options(1u << ORION_PROBE_SRAM);
  o.min_surface_bytes = 16384;
  cr_assert(orion_probe_run(b, &o, &r, &diag), "%s", messages.data);
  cr_assert_null(r.sram.error, "%s", r.sram.error);
  cr_assert_eq(r.sram.npoints, 2);
  cr_assert_eq(r.sram.points[0].n, 96);
  cr_assert_eq(r.sram.points[1].n, 128);
  finish(b, &r);
  b = open_fake(big_minimum);
  o = small_options((1u << ORION_PROBE_CHANNELS) | (1u << ORION_PROBE_SURFACE) | (1u << ORION_PROBE_SRAM)); /* found */
  cr_assert(orion_probe_run(b, &o, &r, &diag), "%s", messages.data);
  cr_assert_eq(r.surface.accepted * ORION_PROBE_WIDTH * 2, 16384, "%llu", (unsigned long long)r.surface.accepted);
  cr_assert_null(r.sram.error, "%s", r.sram.error);
  cr_assert_eq(r.sram.points[0].n, 96);
  finish(b, &r);
  b = open_fake(big_minimum);
  o = small_options(1u << ORION_PROBE_SRAM); /* nothing known */
  cr_assert(orion_probe_run(b, &o, &r, &diag), "%s", messages.data);
  cr_assert_eq(r.sram.npoints, 0);
  cr_assert_not_null(strstr(r.sram.error, "matmul of [1, 1, 64, 64]"), "%s", r.sram.error);
  finish(b, &r);
}
