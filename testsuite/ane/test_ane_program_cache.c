/*
 * The ane backend's device program cache and paced compiles
 * (runtime/ane/ane_program_cache.h, ane_compile.h) against a fake device:
 * the key, the exact sequence of device calls for hits, misses and
 * evictions, held programs never evicted, the budget refusing before the
 * device is asked, and retries with their exact pauses.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "ane_program_cache.h"
#include "fake_ane_device.h"

static FakeDevice dev;
static AneDeviceOps ops;
static AneBudget budget;
static StrBuf msgs;
static Diag d;

static void setup(void) {
  fake_init(&dev);
  ops = fake_device_ops(&dev);
  fake_budget_init(&budget);
  sb_init(&msgs);
  diag_init(&d, NULL);
  d.capture = &msgs;
  d.program = "t";
}

static void teardown(void) {
  fake_free(&dev);
  sb_free(&msgs);
}

static AneLimit cap_of(uint64_t n) {
  AneLimit l = {.value = n};
  snprintf(l.origin, sizeof l.origin, "ORION_ANE_RESIDENT_CAP");
  return l;
}

static const FakeWeights wa = {{1, 2, 3, 4}}, wb = {{5, 6, 7, 8}}, wc = {{9, 10, 11, 12}};

static void log_is(const char *want) {
  cr_assert_str_eq(dev.log.data ? dev.log.data : "", want);
  dev.log.len = 0;
  if (dev.log.data) dev.log.data[0] = '\0';
}

TestSuite(ane_cache, .init = setup, .fini = teardown);

Test(ane_cache, the_key_covers_content_os_build_and_architecture) {
  AneProgramSource a = fake_source("a", "mil a", &wa);
  char k0[65], k[65];
  ane_program_key(&a, k0);
  cr_assert_eq(strlen(k0), 64);
  AneProgramSource v = a;
  v.mil_text = "mil b";
  ane_program_key(&v, k);
  cr_assert_str_neq(k, k0);
  v = a;
  v.weights = &wb;
  ane_program_key(&v, k);
  cr_assert_str_neq(k, k0);
  v = a;
  v.os_build = "25G12";
  ane_program_key(&v, k);
  cr_assert_str_neq(k, k0);
  v = a;
  v.ane_arch = "h15";
  ane_program_key(&v, k);
  cr_assert_str_neq(k, k0);
  v = a;
  v.weights_as_inputs = true;
  ane_program_key(&v, k);
  cr_assert_str_neq(k, k0);
  v = a;
  v.name = "other name, same program";
  ane_program_key(&v, k);
  cr_assert_str_eq(k, k0);
  /* The manifest's checksums instead of the bytes: a key of its own, stable. */
  v = a;
  v.weights = NULL;
  v.weights_digest = "xxh64 0123456789abcdef";
  ane_program_key(&v, k);
  cr_assert_str_neq(k, k0);
  char k2[65];
  ane_program_key(&v, k2);
  cr_assert_str_eq(k, k2);
}

Test(ane_cache, a_hit_compiles_nothing_and_a_miss_compiles_and_loads) {
  AneLimit cap = cap_of(4);
  AneProgramCache *c = ane_program_cache_new(&ops, &budget, &cap, NULL);
  AneProgramSource a = fake_source("a", "mil a", &wa);
  void *p = ane_program_cache_acquire(c, &a, &d);
  cr_assert_not_null(p);
  log_is("compile a; load a; ");
  AneProgramSource a_again = fake_source("a again", "mil a", &wa);
  cr_assert_eq(ane_program_cache_acquire(c, &a_again, &d), p);
  log_is("");
  AneProgramCacheStats s = ane_program_cache_stats(c);
  cr_assert_eq(s.hits, 1);
  cr_assert_eq(s.misses, 1);
  cr_assert_eq(s.compiles, 1);
  cr_assert_eq(s.resident, 1);
  cr_assert_eq(budget.used, 1);
  StrBuf line;
  sb_init(&line);
  ane_program_cache_stats_print(c, &line);
  cr_assert_str_eq(line.data, "ane program cache: 1 hits, 1 misses, 1 compiles (0 retries), 0 evictions, 1 of 4 "
                              "resident; compile budget 1 of 119 used (constraint ANE005 (compiles_per_process))\n");
  sb_free(&line);
  ane_program_cache_release(c, p);
  ane_program_cache_release(c, p);
  ane_program_cache_free(c);
  log_is("unload a; release a; ");
  cr_assert_eq(dev.live, 0);
}

Test(ane_cache, a_full_cache_unloads_the_least_recently_used_free_program) {
  AneLimit cap = cap_of(2);
  AneProgramCache *c = ane_program_cache_new(&ops, &budget, &cap, NULL);
  AneProgramSource a = fake_source("a", "mil a", &wa), b = fake_source("b", "mil b", &wb),
                   x = fake_source("c", "mil c", &wc);
  void *pa = ane_program_cache_acquire(c, &a, &d), *pb = ane_program_cache_acquire(c, &b, &d);
  ane_program_cache_release(c, pb);
  ane_program_cache_release(c, pa);
  cr_assert_eq(ane_program_cache_acquire(c, &a, &d), pa); /* a is now the more recently used */
  ane_program_cache_release(c, pa);
  log_is("compile a; load a; compile b; load b; ");
  /* The compile comes first, so that a failed one evicts nothing; the unload before the load. */
  void *pc = ane_program_cache_acquire(c, &x, &d);
  cr_assert_not_null(pc);
  log_is("compile c; unload b; release b; load c; ");
  ane_program_cache_release(c, pc);
  AneProgramCacheStats s = ane_program_cache_stats(c);
  cr_assert_eq(s.evictions, 1);
  cr_assert_eq(s.resident, 2);
  cr_assert_eq(s.misses, 3);
  cr_assert_eq(s.hits, 1);
  ane_program_cache_free(c);
  cr_assert_eq(dev.live, 0);
}

Test(ane_cache, held_programs_are_never_evicted_and_all_held_is_a_clear_error) {
  AneLimit cap = cap_of(2);
  AneProgramCache *c = ane_program_cache_new(&ops, &budget, &cap, NULL);
  AneProgramSource a = fake_source("a", "mil a", &wa), b = fake_source("b", "mil b", &wb),
                   x = fake_source("c", "mil c", &wc);
  void *pa = ane_program_cache_acquire(c, &a, &d);
  void *pb = ane_program_cache_acquire(c, &b, &d);
  ane_program_cache_release(c, pa); /* a is older but b is held: a goes */
  log_is("compile a; load a; compile b; load b; ");
  void *pc = ane_program_cache_acquire(c, &x, &d);
  log_is("compile c; unload a; release a; load c; ");
  cr_assert_null(ane_program_cache_acquire(c, &a, &d));
  log_is(""); /* refused before anything is compiled */
  cr_assert_str_eq(msgs.data, "t: error: the ane backend cannot load 'a': all 2 resident programs (the cap, from "
                              "ORION_ANE_RESIDENT_CAP) are in use; release one, or raise the cap with "
                              "ORION_ANE_RESIDENT_CAP\n");
  cr_assert_eq(budget.used, 3);
  ane_program_cache_release(c, pb);
  ane_program_cache_release(c, pc);
  ane_program_cache_free(c);
}

Test(ane_cache, past_the_budget_the_device_is_not_asked) {
  AneLimit cap = cap_of(4);
  budget.limit.value = 1;
  AneProgramCache *c = ane_program_cache_new(&ops, &budget, &cap, NULL);
  AneProgramSource a = fake_source("a", "mil a", &wa), b = fake_source("b", "mil b", &wb);
  cr_assert_not_null(ane_program_cache_acquire(c, &a, &d));
  cr_assert_null(ane_program_cache_acquire(c, &b, &d));
  log_is("compile a; load a; ");
  cr_assert_str_eq(msgs.data,
                   "t: error: the ane backend will not compile 'b': this process has used 1 of its compile budget of "
                   "1 (from constraint ANE005 (compiles_per_process)), past which the ANE compiler fails silently "
                   "(ANE005); restart the process to get a new budget, or set ORION_ANE_COMPILE_BUDGET if this "
                   "device is known to take more\n");
  /* A hit still works: it needs no compile. */
  cr_assert_not_null(ane_program_cache_acquire(c, &a, &d));
  ane_program_cache_free(c);
}

static AneDeviceError transient(int64_t code) {
  AneDeviceError e = {.code = code, .kind = ANE_FAILURE_TRANSIENT};
  snprintf(e.message, sizeof e.message, "compiler service restarted");
  return e;
}

Test(ane_cache, a_transient_failure_is_retried_after_growing_pauses) {
  AneLimit cap = cap_of(4);
  AneRetryPolicy retry = ane_retry_default(fake_sleep, &dev);
  AneProgramCache *c = ane_program_cache_new(&ops, &budget, &cap, &retry);
  dev.compile_fails[0] = transient(0x50004);
  dev.compile_fails[1] = transient(0x50004);
  AneProgramSource a = fake_source("a", "mil a", &wa);
  cr_assert_not_null(ane_program_cache_acquire(c, &a, &d));
  log_is("compile a; sleep 15000; compile a; sleep 30000; compile a; load a; ");
  AneProgramCacheStats s = ane_program_cache_stats(c);
  cr_assert_eq(s.compiles, 3);
  cr_assert_eq(s.retries, 2);
  cr_assert_eq(budget.used, 3); /* each attempt is a compile the device made */
  cr_assert_null(msgs.data);
  ane_program_cache_free(c);
}

Test(ane_cache, retries_end_with_the_device_error_code) {
  AneLimit cap = cap_of(4);
  AneRetryPolicy retry = {.max_retries = 2, .first_pause_ms = 100, .sleep = fake_sleep, .sleep_ctx = &dev};
  AneProgramCache *c = ane_program_cache_new(&ops, &budget, &cap, &retry);
  for (int i = 0; i < 3; i++) dev.compile_fails[i] = transient(0x50004);
  AneProgramSource a = fake_source("a", "mil a", &wa);
  cr_assert_null(ane_program_cache_acquire(c, &a, &d));
  log_is("compile a; sleep 100; compile a; sleep 200; compile a; ");
  cr_assert_str_eq(msgs.data, "t: error: the ANE compiler failed on 'a' (code 0x50004: compiler service restarted) "
                              "after 3 attempts\n");
  cr_assert_eq(ane_program_cache_stats(c).resident, 0);
  ane_program_cache_free(c);
  cr_assert_eq(dev.live, 0);
}

/* The first compile fails with `failure` (retried by `retry`, or not at
 * all): one attempt, reported as `want`. */
static void compiled_once(const AneRetryPolicy *retry, AneDeviceError failure, const char *want) {
  AneLimit cap = cap_of(4);
  AneProgramCache *c = ane_program_cache_new(&ops, &budget, &cap, retry);
  dev.compile_fails[0] = failure;
  AneProgramSource a = fake_source("a", "mil a", &wa);
  cr_assert_null(ane_program_cache_acquire(c, &a, &d));
  log_is("compile a; ");
  cr_assert_str_eq(msgs.data, want);
  ane_program_cache_free(c);
}

Test(ane_cache, a_rejection_is_not_retried) {
  AneRetryPolicy retry = ane_retry_default(fake_sleep, &dev);
  compiled_once(&retry, (AneDeviceError){.code = 0x3, .kind = ANE_FAILURE_REJECTED, .message = "ANE001: concat"},
                "t: error: the ANE compiler rejected 'a' (code 0x3: ANE001: concat); not retried: the device "
                "refuses this program\n");
}

Test(ane_cache, without_a_sleep_function_nothing_is_retried) {
  compiled_once(NULL, transient(0x50004),
                "t: error: the ANE compiler failed on 'a' (code 0x50004: compiler service restarted) after 1 "
                "attempt\n");
}

Test(ane_cache, a_failed_load_releases_the_program_and_names_the_code) {
  AneLimit cap = cap_of(1);
  AneProgramCache *c = ane_program_cache_new(&ops, &budget, &cap, NULL);
  AneProgramSource a = fake_source("a", "mil a", &wa), b = fake_source("b", "mil b", &wb);
  void *pa = ane_program_cache_acquire(c, &a, &d);
  ane_program_cache_release(c, pa);
  dev.fail_loads = true;
  cr_assert_null(ane_program_cache_acquire(c, &b, &d));
  log_is("compile a; load a; compile b; unload a; release a; load b; release b; ");
  cr_assert_str_eq(msgs.data, "t: error: the ANE could not load 'b' (code 0x20004: address space exhausted)\n");
  cr_assert_eq(ane_program_cache_stats(c).resident, 0);
  cr_assert_eq(dev.live, 0);
  dev.fail_loads = false;
  cr_assert_not_null(ane_program_cache_acquire(c, &a, &d));
  ane_program_cache_free(c);
}
