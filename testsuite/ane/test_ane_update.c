/*
 * The weight-update strategies and their self-test (runtime/ane/
 * ane_update.h, ane_update_cache.h) against a fake device with each
 * disputed behaviour of peers.md §4.9 as a switch: the strategy chosen for
 * each, the exact device calls, the cached file's content and reuse, a
 * corrupt or foreign file ignored with a warning, the failure when nothing
 * works, and the compile budget's reservation.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ane_update.h"
#include "ane_update_cache.h"
#include "fake_ane_device.h"
#include "orion/hash.h"

static FakeDevice dev;
static AneDeviceOps ops;
static AneUpdateOps up;
static AneBudget budget;
static StrBuf msgs;
static Diag d;
static char tmp[64];
static char xdg[128];

static const char *test_env(const char *name) {
  if (!strcmp(name, "XDG_CACHE_HOME")) return xdg;
  if (!strcmp(name, "HOME")) return "/nonexistent-home";
  return NULL;
}

static void setup(void) {
  fake_init(&dev);
  ops = fake_device_ops(&dev);
  up = fake_update_ops(&dev);
  fake_budget_init(&budget);
  sb_init(&msgs);
  diag_init(&d, NULL);
  d.capture = &msgs;
  d.program = "t";
  snprintf(tmp, sizeof tmp, "/tmp/orion-ane-update-XXXXXX");
  cr_assert_not_null(mkdtemp(tmp));
  snprintf(xdg, sizeof xdg, "%s/xdg", tmp);
}

static void teardown(void) {
  remove_tree(tmp);
  fake_free(&dev);
  sb_free(&msgs);
}

TestSuite(ane_update, .init = setup, .fini = teardown);

static AneSelfTest probe(void) {
  return (AneSelfTest){.old_weights = &dev.old_w, .new_weights = &dev.new_w, .outputs = FAKE_WEIGHTS,
                       .os_build = "25F84", .ane_arch = "h16", .env = test_env};
}

static void log_is(const char *want) {
  cr_assert_str_eq(dev.log.data ? dev.log.data : "", want);
  dev.log.len = 0;
  if (dev.log.data) dev.log.data[0] = '\0';
}

static char *cache_text(void) {
  char path[256], *text = NULL;
  snprintf(path, sizeof path, "%s/orion/ane-update-25F84-h16", xdg);
  size_t len;
  const char *err;
  cr_assert(read_file(path, 4096, &text, &len, &err), "%s: %s", path, err);
  return text;
}

static void expect_cached(const char *strategy) {
  StrBuf want;
  sb_init(&want);
  sb_printf(&want, "orion ane weight-update choice 1\nos-build 25F84\nane-arch h16\nstrategy %s\n", strategy);
  char sum[65];
  sha256_hex(want.data, want.len, sum);
  sb_printf(&want, "sha256 %s\n", sum);
  char *text = cache_text();
  cr_assert_str_eq(text, want.data);
  free(text);
  sb_free(&want);
}

#define FRESH "compile probe-new; load probe-new; eval probe-new; unload probe-new; release probe-new; "
#define PROBE_OLD "compile probe-old; load probe-old; eval probe-old; "
#define DONE_OLD "unload probe-old; release probe-old; "
#define RELOAD_FILES PROBE_OLD "unload probe-old; write-files probe-old; load probe-old; eval probe-old; " DONE_OLD
#define PATCH_DATA PROBE_OLD "unload probe-old; patch-data probe-old; load probe-old; eval probe-old; " DONE_OLD

Test(ane_update, files_honoured_after_reload_picks_reload_files) {
  dev.reload_reads_files = true; /* (b) */
  AneSelfTest t = probe();
  AneSelfTestResult r;
  cr_assert(ane_update_self_test(&ops, &up, &budget, NULL, &t, &r, &d), "%s", msgs.data);
  cr_assert_eq(r.strategy, ORION_RELOAD_RELOAD_FILES);
  cr_assert_not(r.from_cache);
  cr_assert_eq(r.compiles, 2);
  cr_assert_str_eq(r.tried, "");
  log_is(FRESH RELOAD_FILES);
  expect_cached("reload-files");
  cr_assert_eq(budget.used, 2);
  cr_assert_eq(budget.reserved, 0); /* the rest of the reservation came back */
  cr_assert_eq(dev.live, 0);
}

Test(ane_update, a_patched_data_file_honoured_picks_patch_data) {
  dev.load_reads_patched_data = true;
  AneSelfTest t = probe();
  AneSelfTestResult r;
  cr_assert(ane_update_self_test(&ops, &up, &budget, NULL, &t, &r, &d), "%s", msgs.data);
  cr_assert_eq(r.strategy, ORION_RELOAD_PATCH_DATA);
  log_is(FRESH RELOAD_FILES PATCH_DATA);
  cr_assert_str_eq(r.tried, "reload-files: the updated probe's outputs differ from a fresh compile's");
  expect_cached("patch-data");
}

Test(ane_update, files_ignored_until_recompile_picks_recompile) {
  /* (a): no switch set; weights as inputs are rejected too. */
  AneSelfTest t = probe();
  AneSelfTestResult r;
  cr_assert(ane_update_self_test(&ops, &up, &budget, NULL, &t, &r, &d), "%s", msgs.data);
  cr_assert_eq(r.strategy, ORION_RELOAD_RECOMPILE);
  log_is(FRESH RELOAD_FILES PATCH_DATA "compile probe-old-inputs; " PROBE_OLD
         "unload probe-old; write-files probe-old; recompile probe-old; load probe-old; eval probe-old; " DONE_OLD);
  cr_assert_str_eq(r.tried, "reload-files: the updated probe's outputs differ from a fresh compile's; "
                            "patch-data: the updated probe's outputs differ from a fresh compile's; "
                            "inputs: the ANE compiler rejected 'probe-old-inputs' (code 0x50001: weights as inputs "
                            "are not supported); not retried: the device refuses this program");
  cr_assert_eq(r.compiles, 6);
  cr_assert_eq(budget.used, 6);
  cr_assert_eq(budget.reserved, 0);
  expect_cached("recompile");
  cr_assert_null(msgs.data); /* a strategy's failure is not the caller's error */
}

Test(ane_update, weights_as_inputs_only_picks_inputs) {
  dev.inputs_supported = true; /* (c) */
  dev.recompile_reuses_image = true;
  AneSelfTest t = probe();
  AneSelfTestResult r;
  cr_assert(ane_update_self_test(&ops, &up, &budget, NULL, &t, &r, &d), "%s", msgs.data);
  cr_assert_eq(r.strategy, ORION_RELOAD_INPUTS);
  log_is(FRESH RELOAD_FILES PATCH_DATA
         "compile probe-old-inputs; load probe-old-inputs; eval probe-old-inputs; bind probe-old-inputs; "
         "eval probe-old-inputs; unload probe-old-inputs; release probe-old-inputs; ");
  expect_cached("inputs");
}

Test(ane_update, nothing_working_is_an_error_naming_each_strategy) {
  dev.recompile_reuses_image = true;
  AneSelfTest t = probe();
  AneSelfTestResult r;
  cr_assert_not(ane_update_self_test(&ops, &up, &budget, NULL, &t, &r, &d));
  cr_assert_str_eq(msgs.data,
                   "t: error: the ane backend found no way to update weights on OS build 25F84 (h16) that matches a "
                   "fresh compile: reload-files: the updated probe's outputs differ from a fresh compile's; "
                   "patch-data: the updated probe's outputs differ from a fresh compile's; inputs: the ANE compiler "
                   "rejected 'probe-old-inputs' (code 0x50001: weights as inputs are not supported); not retried: "
                   "the device refuses this program; recompile: the updated probe's outputs differ from a fresh "
                   "compile's\n");
  char path[256];
  snprintf(path, sizeof path, "%s/orion/ane-update-25F84-h16", xdg);
  cr_assert_neq(access(path, F_OK), 0); /* nothing is cached */
  cr_assert_eq(budget.reserved, 0);
  cr_assert_eq(dev.live, 0);
}

Test(ane_update, the_cached_choice_is_reused_without_touching_the_device) {
  dev.reload_reads_files = true;
  AneSelfTest t = probe();
  AneSelfTestResult r;
  cr_assert(ane_update_self_test(&ops, &up, &budget, NULL, &t, &r, &d));
  log_is(FRESH RELOAD_FILES);
  dev.reload_reads_files = false; /* would now give another answer */
  cr_assert(ane_update_self_test(&ops, &up, &budget, NULL, &t, &r, &d));
  cr_assert(r.from_cache);
  cr_assert_eq(r.strategy, ORION_RELOAD_RELOAD_FILES);
  cr_assert_eq(r.compiles, 0);
  log_is("");
  char want[256];
  snprintf(want, sizeof want, "%s/orion/ane-update-25F84-h16", xdg);
  cr_assert_str_eq(r.cache_path, want);
  /* Another OS build has its own file, and runs the test. */
  t.os_build = "25G12";
  cr_assert(ane_update_self_test(&ops, &up, &budget, NULL, &t, &r, &d), "%s", msgs.data);
  cr_assert_not(r.from_cache);
  cr_assert_eq(r.strategy, ORION_RELOAD_RECOMPILE);
  /* rerun ignores the file. */
  t.os_build = "25F84";
  t.rerun = true;
  cr_assert(ane_update_self_test(&ops, &up, &budget, NULL, &t, &r, &d), "%s", msgs.data);
  cr_assert_not(r.from_cache);
  cr_assert_eq(r.strategy, ORION_RELOAD_RECOMPILE);
  expect_cached("recompile");
}

static void write_cache(const char *text) {
  char dir[256], path[300];
  snprintf(dir, sizeof dir, "%s/orion", xdg);
  snprintf(path, sizeof path, "%s/ane-update-25F84-h16", dir);
  mkdir(xdg, 0700);
  mkdir(dir, 0700);
  const char *err;
  cr_assert(write_file_atomic(path, text, strlen(text), &err), "%s", err);
}

static void ignored_with(const char *text, const char *reason) {
  write_cache(text);
  dev.reload_reads_files = true;
  AneSelfTest t = probe();
  AneSelfTestResult r;
  cr_assert(ane_update_self_test(&ops, &up, &budget, NULL, &t, &r, &d), "%s", msgs.data);
  cr_assert_not(r.from_cache);
  cr_assert_eq(r.strategy, ORION_RELOAD_RELOAD_FILES);
  StrBuf want;
  sb_init(&want);
  sb_printf(&want, "t: warning: ignoring the weight-update choice in '%s/orion/ane-update-25F84-h16': %s; running "
                   "the self-test again\n", xdg, reason);
  cr_assert_str_eq(msgs.data, want.data);
  sb_free(&want);
  expect_cached("reload-files"); /* rewritten */
}

Test(ane_update, a_corrupt_file_is_ignored_with_a_warning) {
  StrBuf text;
  sb_init(&text);
  ane_update_cache_format("25F84", "h16", "recompile", &text);
  text.data[text.len - 3] ^= 1; /* one bit of the checksum */
  ignored_with(text.data, "its checksum does not match (the file is corrupt)");
  sb_free(&text);
}

Test(ane_update, an_edited_strategy_fails_the_checksum) {
  StrBuf text;
  sb_init(&text);
  ane_update_cache_format("25F84", "h16", "recompile", &text);
  char *s = strstr(text.data, "recompile");
  memcpy(s, "rEcompile", 9);
  ignored_with(text.data, "its checksum does not match (the file is corrupt)");
  sb_free(&text);
}

Test(ane_update, a_foreign_file_is_ignored_with_a_warning) {
  StrBuf text;
  sb_init(&text);
  ane_update_cache_format("24A335", "h16", "inputs", &text);
  ignored_with(text.data, "it is for another OS build or ANE architecture");
  sb_free(&text);
}

Test(ane_update, a_file_of_something_else_is_ignored) {
  ignored_with("{\"strategy\": \"inputs\"}\n", "it is not an orion weight-update choice");
}

Test(ane_update, a_truncated_file_is_ignored) {
  StrBuf text;
  sb_init(&text);
  ane_update_cache_format("25F84", "h16", "inputs", &text);
  text.data[text.len - 20] = '\0';
  ignored_with(text.data, "it is malformed");
  sb_free(&text);
}

Test(ane_update, the_self_test_reserves_its_compiles_before_it_starts) {
  budget.limit.value = 5; /* fewer than ANE_SELF_TEST_COMPILES */
  AneSelfTest t = probe();
  AneSelfTestResult r;
  cr_assert_not(ane_update_self_test(&ops, &up, &budget, NULL, &t, &r, &d));
  log_is("");
  cr_assert_str_eq(msgs.data, "t: error: the ane backend cannot set 6 compiles aside for the weight-update "
                              "self-test: this process has used 0 of its compile budget of 5 (from constraint ANE005 "
                              "(compiles_per_process)) and 0 are already set aside; restart the process to get a new "
                              "budget\n");
}

Test(ane_update, retried_compiles_draw_on_the_reservation_only) {
  budget.limit.value = 8;
  dev.reload_reads_files = true;
  for (int i = 0; i < 6; i++)
    dev.compile_fails[i] = (AneDeviceError){.code = 0x50004, .kind = ANE_FAILURE_TRANSIENT};
  AneRetryPolicy retry = {.max_retries = 10, .first_pause_ms = 1, .sleep = fake_sleep, .sleep_ctx = &dev};
  AneSelfTest t = probe();
  AneSelfTestResult r;
  cr_assert_not(ane_update_self_test(&ops, &up, &budget, &retry, &t, &r, &d));
  log_is("compile probe-new; sleep 1; compile probe-new; sleep 2; compile probe-new; sleep 4; compile probe-new; "
         "sleep 8; compile probe-new; sleep 16; compile probe-new; sleep 32; ");
  cr_assert_str_eq(msgs.data, "t: error: the ane backend will not compile 'probe-new': the compiles set aside for it "
                              "are spent, and the rest of the compile budget of 8 (from constraint ANE005 "
                              "(compiles_per_process)) is kept for the process\n");
  cr_assert_eq(budget.used, 6);
  cr_assert_eq(budget.reserved, 0);
}

Test(ane_update, a_probe_that_cannot_tell_the_weights_apart_is_an_error) {
  dev.new_w = dev.old_w;
  AneSelfTest t = probe();
  AneSelfTestResult r;
  cr_assert_not(ane_update_self_test(&ops, &up, &budget, NULL, &t, &r, &d));
  cr_assert_str_eq(msgs.data, "t: error: the weight-update self-test's probe gives the same outputs with the old and "
                              "the new weights, so it cannot tell whether an update took effect\n");
  cr_assert_eq(dev.live, 0);
}

Test(ane_update, a_tolerance_accepts_outputs_that_differ_by_so_many_fp16_ulps) {
  dev.reload_reads_files = true;
  FakeWeights near = dev.new_w;
  near.w[0] += 2;
  dev.sources[1] = fake_source("probe-new", "mil probe", &near); /* the fresh compile differs by 2 ulps */
  AneSelfTest t = probe();
  t.tolerance_ulps = 1;
  AneSelfTestResult r;
  cr_assert_not(ane_update_self_test(&ops, &up, &budget, NULL, &t, &r, &d));
  cr_assert(strstr(msgs.data, "found no way to update weights"), "%s", msgs.data);
  t.tolerance_ulps = 2;
  cr_assert(ane_update_self_test(&ops, &up, &budget, NULL, &t, &r, &d), "%s", msgs.data);
  cr_assert_eq(r.strategy, ORION_RELOAD_RELOAD_FILES);
}

Test(ane_update, the_cache_directory_follows_xdg_then_home) {
  StrBuf p;
  sb_init(&p);
  cr_assert(ane_update_cache_path(NULL, test_env, "25F84", "h16", &p, &d));
  StrBuf want;
  sb_init(&want);
  sb_printf(&want, "%s/orion/ane-update-25F84-h16", xdg);
  cr_assert_str_eq(p.data, want.data);
  snprintf(xdg, sizeof xdg, "relative/dir"); /* the XDG spec says to ignore it */
  p.len = 0;
  cr_assert(ane_update_cache_path(NULL, test_env, "25F84", "h16", &p, &d));
  cr_assert_str_eq(p.data, "/nonexistent-home/.cache/orion/ane-update-25F84-h16");
  p.len = 0;
  cr_assert_not(ane_update_cache_path(NULL, test_env, "../x", "h16", &p, &d));
  cr_assert_str_eq(msgs.data, "t: error: the ane backend cannot name its weight-update cache for OS build '../x' and "
                              "ANE architecture 'h16': each must be 1 to 64 letters, digits, '.', '_' or '-'\n");
  sb_free(&p);
  sb_free(&want);
}

Test(ane_update, strategies_apply_outside_the_self_test) {
  dev.reload_reads_files = true;
  void *p = NULL;
  AneProgramSource *src = &dev.sources[0];
  cr_assert(ane_compile_paced(&ops, &budget, NULL, src, NULL, false, &p, NULL, &d));
  AneDeviceError err = {0};
  cr_assert(ops.load(ops.ctx, p, &err));
  log_is("compile probe-old; load probe-old; ");
  cr_assert(ane_update_apply(ORION_RELOAD_RECOMPILE, &ops, &up, &budget, NULL, p, src, &dev.new_w, false, &d));
  log_is("unload probe-old; write-files probe-old; recompile probe-old; load probe-old; ");
  cr_assert_eq(budget.used, 2);
  cr_assert_not(ane_update_apply(ORION_RELOAD_REMAP, &ops, &up, &budget, NULL, p, src, &dev.new_w, false, &d));
  cr_assert_str_eq(msgs.data, "t: error: the ane backend has no weight-update strategy 1\n");
  msgs.len = 0;
  up.patch_data = NULL;
  cr_assert_not(ane_update_apply(ORION_RELOAD_PATCH_DATA, &ops, &up, &budget, NULL, p, src, &dev.new_w, false, &d));
  cr_assert_str_eq(msgs.data, "t: error: the ane backend cannot update weights by patch-data on this device\n");
  log_is("");
  ops.unload(ops.ctx, p);
  ops.release(ops.ctx, p);
}

Test(ane_update, a_nul_byte_makes_a_file_malformed) {
  /* Found by fuzz_ane_update_cache: "sha256 <sum>\0\n" passed as the sum. */
  StrBuf text;
  sb_init(&text);
  ane_update_cache_format("25F84", "h16", "recompile", &text);
  OrionReloadStrategy s;
  cr_assert_null(ane_update_cache_parse(text.data, text.len, "25F84", "h16", &s));
  cr_assert_eq(s, ORION_RELOAD_RECOMPILE);
  text.data[text.len - 1] = '\0';
  sb_putc(&text, '\n');
  cr_assert_str_eq(ane_update_cache_parse(text.data, text.len, "25F84", "h16", &s), "it is malformed");
  sb_free(&text);
}

Test(ane_update, a_strategy_the_device_cannot_do_costs_no_compile) {
  dev.load_reads_patched_data = true; /* would match, but the operations have no patch_data */
  up.patch_data = NULL;
  AneSelfTest t = probe();
  AneSelfTestResult r;
  cr_assert(ane_update_self_test(&ops, &up, &budget, NULL, &t, &r, &d), "%s", msgs.data);
  cr_assert_eq(r.strategy, ORION_RELOAD_RECOMPILE);
  log_is(FRESH RELOAD_FILES "compile probe-old-inputs; " PROBE_OLD
         "unload probe-old; write-files probe-old; recompile probe-old; load probe-old; eval probe-old; " DONE_OLD);
  cr_assert_str_eq(r.tried, "reload-files: the updated probe's outputs differ from a fresh compile's; "
                            "patch-data: this device's operations cannot do it; "
                            "inputs: the ANE compiler rejected 'probe-old-inputs' (code 0x50001: weights as inputs "
                            "are not supported); not retried: the device refuses this program");
  cr_assert_eq(r.compiles, 5);
}
