/* Weight-update strategies and the self-test (ane_update.h). */
#include <stdlib.h>
#include <string.h>

#include "ane_update.h"
#include "ane_update_cache.h"

const OrionReloadStrategy ane_update_order[ANE_UPDATE_STRATEGIES] = {ORION_RELOAD_RELOAD_FILES, ORION_RELOAD_PATCH_DATA,
                                                                     ORION_RELOAD_INPUTS, ORION_RELOAD_RECOMPILE};

const char *ane_update_strategy_name(OrionReloadStrategy s) {
  switch (s) {
  case ORION_RELOAD_RELOAD_FILES: return "reload-files";
  case ORION_RELOAD_PATCH_DATA: return "patch-data";
  case ORION_RELOAD_INPUTS: return "inputs";
  case ORION_RELOAD_RECOMPILE: return "recompile";
  case ORION_RELOAD_AUTO:
  case ORION_RELOAD_REMAP: break;
  }
  return NULL;
}

bool ane_update_strategy_from_name(const char *name, OrionReloadStrategy *out) {
  for (int i = 0; i < ANE_UPDATE_STRATEGIES; i++)
    if (!strcmp(name, ane_update_strategy_name(ane_update_order[i]))) {
      *out = ane_update_order[i];
      return true;
    }
  return false;
}

static bool device_failed(const char *what, const AneProgramSource *src, const AneDeviceError *err, Diag *d) {
  StrBuf sb;
  sb_init(&sb);
  ane_device_error_print(err, &sb);
  diag_error(d, (SrcSpan){0}, "the ane backend could not %s '%s' (%s)", what, src->name, sb.data);
  sb_free(&sb);
  return false;
}

typedef bool WeightOp(void *ctx, void *program, const void *weights, AneDeviceError *err);

static WeightOp *weight_op(OrionReloadStrategy s, const AneDeviceOps *dev, const AneUpdateOps *up) {
  if (s == ORION_RELOAD_RECOMPILE && !dev->recompile) return NULL;
  return s == ORION_RELOAD_PATCH_DATA ? up->patch_data : s == ORION_RELOAD_INPUTS ? up->bind_weights
                                                                                  : up->write_weight_files;
}

bool ane_update_apply(OrionReloadStrategy s, const AneDeviceOps *dev, const AneUpdateOps *up, AneBudget *budget,
                      const AneRetryPolicy *retry, void *program, const AneProgramSource *src,
                      const void *weights, bool from_reserve, Diag *d) {
  AneDeviceError err = {0};
  WeightOp *op = weight_op(s, dev, up);
  const char *name = ane_update_strategy_name(s);
  if (!name) {
    diag_error(d, (SrcSpan){0}, "the ane backend has no weight-update strategy %d", (int)s);
    return false;
  }
  if (!op) {
    diag_error(d, (SrcSpan){0}, "the ane backend cannot update weights by %s on this device", name);
    return false;
  }
  if (s == ORION_RELOAD_INPUTS)
    return op(up->ctx, program, weights, &err) || device_failed("bind weights of", src, &err, d);
  dev->unload(dev->ctx, program);
  if (!op(up->ctx, program, weights, &err))
    return device_failed(s == ORION_RELOAD_PATCH_DATA ? "patch the compiled data of" : "write the weight files of",
                         src, &err, d);
  if (s == ORION_RELOAD_RECOMPILE) {
    void *same = NULL;
    if (!ane_compile_paced(dev, budget, retry, src, program, from_reserve, &same, NULL, d)) return false;
  }
  return dev->load(dev->ctx, program, &err) || device_failed("load", src, &err, d);
}

/* ---- the self-test ---- */

typedef struct Run {
  const AneDeviceOps *dev;
  const AneUpdateOps *up;
  AneBudget *budget;
  const AneRetryPolicy *retry;
  const AneSelfTest *test;
  AneCompileStats stats;
  StrBuf tried;
  bool indistinct; /* the probe gives the same outputs with the old and the new weights */
} Run;

/* fp16 bits in an order where adjacent values differ by 1 (so that a
 * difference counts ulps across zero). */
static int32_t ordered(uint16_t h) { return h & 0x8000 ? -(int32_t)(h & 0x7fff) : (int32_t)h; }

static bool is_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }

static bool outputs_match(const uint16_t *a, const uint16_t *b, size_t n, uint32_t tol) {
  for (size_t i = 0; i < n; i++) {
    if (a[i] == b[i]) continue;
    int64_t diff = (int64_t)ordered(a[i]) - ordered(b[i]);
    if (is_nan(a[i]) || is_nan(b[i]) || (diff < 0 ? -diff : diff) > tol) return false;
  }
  return true;
}

/* Compiles (from the reservation) and loads the probe; NULL after reporting. */
static void *build(Run *r, const AneProgramSource *src, Diag *d) {
  void *p = NULL;
  if (!ane_compile_paced(r->dev, r->budget, r->retry, src, NULL, true, &p, &r->stats, d)) return NULL;
  AneDeviceError err = {0};
  if (!r->dev->load(r->dev->ctx, p, &err)) {
    device_failed("load", src, &err, d);
    r->dev->release(r->dev->ctx, p);
    return NULL;
  }
  return p;
}

static void discard(Run *r, void *p) {
  r->dev->unload(r->dev->ctx, p);
  r->dev->release(r->dev->ctx, p);
}

static bool evaluate(Run *r, void *p, const AneProgramSource *src, uint16_t *out, Diag *d) {
  AneDeviceError err = {0};
  return r->up->evaluate(r->up->ctx, p, out, r->test->outputs, &err) || device_failed("run", src, &err, d);
}

/* A strategy's errors go to a scratch Diag that keeps the last one for
 * r->tried, not to the caller's: the next strategy may work. */
typedef struct Scratch {
  Diag d;
  StrBuf sink;
  char last[512];
} Scratch;

static void keep_last(void *ctx, DiagLevel level, SrcSpan span, const char *message) {
  (void)span;
  if (level == DIAG_ERROR) snprintf(((Scratch *)ctx)->last, sizeof ((Scratch *)ctx)->last, "%s", message);
}

static void note(Run *r, OrionReloadStrategy s, const char *why) {
  sb_printf(&r->tried, "%s%s: %s", r->tried.len ? "; " : "", ane_update_strategy_name(s), why);
}

/* Tries strategy s: true when the probe, updated by it, gives `fresh`. */
static bool try_strategy(Run *r, OrionReloadStrategy s, const uint16_t *fresh, uint16_t *got) {
  if (!weight_op(s, r->dev, r->up)) { /* known before spending a compile on it */
    note(r, s, "this device's operations cannot do it");
    return false;
  }
  const AneProgramSource *src = r->up->probe_source(r->up->ctx, r->test->old_weights, s == ORION_RELOAD_INPUTS);
  Scratch sc = {.last = "failed"};
  diag_init(&sc.d, NULL);
  sb_init(&sc.sink);
  sc.d.capture = &sc.sink;
  sc.d.observe = keep_last;
  sc.d.observe_ctx = &sc;
  bool ok = false;
  void *p = build(r, src, &sc.d);
  if (p) {
    /* The probe must tell the weights apart, or no strategy can be judged. */
    if (evaluate(r, p, src, got, &sc.d) && outputs_match(got, fresh, r->test->outputs, 0)) {
      r->indistinct = true;
      discard(r, p);
      sb_free(&sc.sink);
      return false;
    }
    ok = !diag_has_errors(&sc.d) &&
         ane_update_apply(s, r->dev, r->up, r->budget, r->retry, p, src, r->test->new_weights, true, &sc.d) &&
         evaluate(r, p, src, got, &sc.d);
    if (ok && !outputs_match(got, fresh, r->test->outputs, r->test->tolerance_ulps)) {
      note(r, s, "the updated probe's outputs differ from a fresh compile's");
      ok = false;
    } else if (!ok) {
      note(r, s, sc.last);
    }
    discard(r, p);
  } else {
    note(r, s, sc.last);
  }
  sb_free(&sc.sink);
  return ok;
}

static bool run_self_test(Run *r, OrionReloadStrategy *chosen, Diag *d) {
  size_t n = r->test->outputs;
  uint16_t *fresh = xcalloc(n, sizeof *fresh), *got = xcalloc(n, sizeof *got);
  bool found = false;
  const AneProgramSource *new_src = r->up->probe_source(r->up->ctx, r->test->new_weights, false);
  void *p = build(r, new_src, d);
  bool ran = p && evaluate(r, p, new_src, fresh, d);
  if (p) discard(r, p);
  for (int i = 0; ran && i < ANE_UPDATE_STRATEGIES && !found && !r->indistinct; i++) {
    found = try_strategy(r, ane_update_order[i], fresh, got);
    if (found) *chosen = ane_update_order[i];
  }
  if (r->indistinct)
    diag_error(d, (SrcSpan){0},
               "the weight-update self-test's probe gives the same outputs with the old and the new weights, so it "
               "cannot tell whether an update took effect");
  else if (ran && !found)
    diag_error(d, (SrcSpan){0},
               "the ane backend found no way to update weights on OS build %s (%s) that matches a fresh compile: %s",
               r->test->os_build, r->test->ane_arch, r->tried.data ? r->tried.data : "no strategy could be tried");
  free(fresh);
  free(got);
  return found;
}

bool ane_update_self_test(const AneDeviceOps *dev, const AneUpdateOps *up, AneBudget *budget,
                          const AneRetryPolicy *retry, const AneSelfTest *test, AneSelfTestResult *res, Diag *d) {
  memset(res, 0, sizeof *res);
  if (test->outputs == 0 || test->outputs > ANE_PROBE_MAX_OUTPUTS) {
    diag_error(d, (SrcSpan){0}, "the weight-update self-test's probe must have 1 to %u outputs, not %zu",
               ANE_PROBE_MAX_OUTPUTS, test->outputs);
    return false;
  }
  StrBuf path;
  sb_init(&path);
  bool ok = ane_update_cache_path(test->cache_dir, test->env, test->os_build, test->ane_arch, &path, d);
  if (!ok) goto out;
  snprintf(res->cache_path, sizeof res->cache_path, "%s", path.data);
  if (!test->rerun && ane_update_cache_read(path.data, test->os_build, test->ane_arch, &res->strategy, d)) {
    res->from_cache = true;
    goto out;
  }
  uint64_t reserved_before = budget->reserved, used_before = budget->used;
  ok = ane_budget_reserve(budget, ANE_SELF_TEST_COMPILES, "the weight-update self-test", d);
  if (!ok) goto out;
  Run r = {dev, up, budget, retry, test, {0}, {0}, false};
  sb_init(&r.tried);
  ok = run_self_test(&r, &res->strategy, d);
  /* What is left of the reservation goes back to the process. */
  if (budget->reserved > reserved_before) ane_budget_unreserve(budget, budget->reserved - reserved_before);
  res->compiles = budget->used - used_before; /* recompiles included */
  snprintf(res->tried, sizeof res->tried, "%s", r.tried.data ? r.tried.data : "");
  sb_free(&r.tried);
  if (ok) ok = ane_update_cache_write(path.data, test->os_build, test->ane_arch, res->strategy, d);
out:
  sb_free(&path);
  return ok;
}
