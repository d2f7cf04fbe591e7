/*
 * The ane backend behind the backend interface (orion/backend.h), where it is built
 * (meson: ane_backend_enabled, on Linux with the stand-in and on macOS): the framework opened
 * and bound at ane_framework_path() (ane_framework.h), a prepared function
 * being one compiled and loaded program with its surfaces (ane_model.h) on
 * the function's surface plan (ane_surfaces.h). Elsewhere the registry's
 * entry is the placeholder, runtime/backend_ane.c.
 *
 * The program handed to the device is the function's MIL file as it was
 * read (from the SourceSet of the Diag given to prepare, copied) and the
 * program's weight files as they are now (orion_program_weight_file_at:
 * after a reload or a training step's write, the new bytes), so a weight
 * change is an update of the compiled program by the strategy the
 * weight-update self-test chose for this OS build (ane_update.h,
 * ane_weight_update.h): it runs at the first prepare of a program whose
 * weights the caller will write (opened writable_weights) or at the first
 * update, unless its cached choice is there; until then, and for a program
 * shared with another OrionProgram's function, a recompile. Under the
 * `inputs` strategy a function is compiled with its weights as inputs
 * (ane_weight_surfaces.h): at prepare when the caller will write them, else
 * at its first update; an update then writes their surfaces.
 *
 * A function with int32/bool values, or with statements the device refuses
 * by a rule the constraint table places on the CPU, runs in parts
 * (ane_parts.h); supports accepts it, a remark naming each statement moved.
 *
 * Every compile goes through the device program cache (ane_program_cache.h)
 * over the lifecycle's device operations (ane_device_ops.h): the compile
 * budget and resident cap of ANE005 (or ORION_ANE_COMPILE_BUDGET,
 * ORION_ANE_RESIDENT_CAP), paced retries with a real sleep, and one
 * compiled program for equal content (two functions of one MIL file, the
 * same function prepared twice).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ane_budget.h"
#include "ane_device_info.h"
#include "ane_device_ops.h"
#include "ane_framework.h"
#include "ane_iosurface.h"
#include "ane_model.h"
#include "ane_partition_cost.h"
#include "ane_parts.h"
#include "ane_program_cache.h"
#include "ane_update_cache.h"
#include "ane_weight_surfaces.h"
#include "ane_weight_update.h"
#include "ane_surfaces.h"
#include "ane_unavailable.h"
#include "loader_internal.h"
#include "orion/ane_check.h"
#include "orion/backend.h"
#include "orion/constraint_table.h"
#include "orion/mil_reader.h"

#define ANE_RETRY_PAUSE_ENV "ORION_ANE_RETRY_PAUSE_MS"

typedef struct AneExec AneExec;

typedef struct AneBackend {
  AneFramework fw;
  AneSystem sys;
  ConstraintTable *table; /* the minimum surface per target, ANE005's figures */
  AneExec *execs;         /* the prepared functions, for the programs they share */
  AneLimits limits;
  AneBudget budget;
  AneRetryPolicy retry;
  AneLifecycle lifecycle;
  AneDeviceOps ops;
  AneProgramCache *cache;
  char os_build[72], ane_arch[72]; /* what the compiled images depend on */
  AneArchitecture arch;            /* how ane_arch was found, for -v */
  AneUpdater updater;              /* weight updates over the lifecycle, the self-test's probe */
  AneUpdateOps update_ops;
  bool strategy_known;             /* the self-test ran, or its cached choice was read */
  OrionReloadStrategy strategy;    /* then: how weights_changed updates */
  char strategy_origin[1200];      /* "the self-test's choice ..." for describe */
} AneBackend;

struct AneExec {
  AneBackend *b;
  AneExec *next;
  OrionProgram *p;
  uint32_t fn;
  char what[256]; /* "function 'main'" */
  char *mil; /* a copy: recompiles outlive the caller's Diag */
  size_t mil_len;
  uint32_t procedure; /* the function's index in its MIL file */
  uint64_t min_surface; /* the plan's minimum (0: exact surfaces) */
  AneSurfacePlan plan;
  AneDeviceProgram *program; /* held in the backend's cache */
  AneRequest request;
  AneParts *parts; /* set: the function runs in parts (ane_parts.h) and nothing above is used */
  AneWeightSurfaces *weight_inputs; /* set: compiled with its weights as inputs (the `inputs` strategy) */
  bool weight_inputs_refused;       /* ... or that was tried and refused (remarked once) */
  bool shared_dir_remarked;         /* its directory was another process's: said once */
};

static bool directory_shared(AneExec *e, Diag *d);

/* Off macOS the only framework there can be is a stand-in that
 * $ORION_ANE_FRAMEWORK names; without it the backend says what the
 * placeholder says. */
static bool bind(AneFramework *fw, AneSystem *sys, char *why, size_t len) {
#if !defined(__APPLE__)
  const char *env = getenv(ANE_FRAMEWORK_ENV);
  if (!env || !*env) {
    snprintf(why, len, "%s", ORION_ANE_NOT_MACOS);
    return false;
  }
#endif
  if (!ane_framework_open(fw, NULL, why, len)) return false;
  if (ane_system_bind(sys, fw->handle, fw->path, why, len)) return true;
  ane_framework_close(fw);
  return false;
}

static bool ane_available(char *why, size_t len) {
  AneFramework fw;
  AneSystem sys;
  if (!bind(&fw, &sys, why, len)) return false;
  ane_framework_close(&fw);
  return true;
}

static const char *environment(const char *name) { return getenv(name); }

/* $ORION_ANE_RETRY_PAUSE_MS: the first pause between compile attempts
 * (default 15000, ane-guide's advice), 0 to 3600000. */
static bool retry_pause(AneRetryPolicy *retry, Diag *d) {
  const char *v = getenv(ANE_RETRY_PAUSE_ENV);
  if (!v || !*v) return true;
  char *end;
  errno = 0;
  unsigned long long ms = strtoull(v, &end, 10);
  if (*end || errno || ms > 3600000u || *v == '-' || *v == '+') {
    diag_error(d, (SrcSpan){0}, "%s=%s is not a pause in milliseconds from 0 to 3600000", ANE_RETRY_PAUSE_ENV, v);
    return false;
  }
  retry->first_pause_ms = (uint32_t)ms;
  return true;
}

/* The self-test's cached choice for this OS build, if there is a usable one
 * (no device is touched; a corrupt file is a warning). */
static void read_cached_choice(AneBackend *b, Diag *d) {
  StrBuf path;
  sb_init(&path);
  Diag quiet = *d;
  StrBuf sink;
  sb_init(&sink);
  quiet.capture = &sink; /* no cache directory at all is not worth a word here */
  if (ane_update_cache_path(NULL, environment, b->os_build, b->ane_arch, &path, &quiet) &&
      ane_update_cache_read(path.data, b->os_build, b->ane_arch, &b->strategy, d)) {
    b->strategy_known = true;
    snprintf(b->strategy_origin, sizeof b->strategy_origin, "the self-test's choice for OS build %s, cached in '%s'",
             b->os_build, path.data);
  }
  sb_free(&sink);
  sb_free(&path);
}

/* The strategy for this OS build: the cached choice, else the self-test's
 * (which writes it to the cache). */
static bool choose_strategy(AneBackend *b, Diag *d) {
  if (b->strategy_known) return true;
  AneSelfTest test = ane_updater_self_test(&b->updater);
  AneSelfTestResult res;
  if (!ane_update_self_test(&b->ops, &b->update_ops, &b->budget, &b->retry, &test, &res, d)) return false;
  b->strategy_known = true;
  b->strategy = res.strategy;
  snprintf(b->strategy_origin, sizeof b->strategy_origin,
           "the self-test's choice for OS build %s, %s '%s'", b->os_build, res.from_cache ? "cached in" : "written to",
           res.cache_path);
  return true;
}

/* The compiles every ane backend of this process has asked of the device:
 * the ANE compiler's limit is per process, not per backend. */
static _Atomic uint64_t process_compiles;

static void *ane_open(const OrionBackendOptions *opt, Diag *d) {
  AneLimitOptions limits = {.compile_budget = opt ? opt->compile_budget : 0, .resident_cap = opt ? opt->resident_cap : 0};
  AneBackend *b = xcalloc(1, sizeof *b);
  char why[1024];
  if (!bind(&b->fw, &b->sys, why, sizeof why)) {
    diag_error(d, (SrcSpan){0}, "%s", why);
    free(b);
    return NULL;
  }
  size_t len;
  const char *text = constraints_builtin_text(&len);
  b->table = constraints_parse("ane_constraints.json", text, len, NULL, d);
  if (!b->table || !ane_limits_resolve(b->table, &limits, environment, &b->limits, d)) {
    constraints_free(b->table);
    ane_framework_close(&b->fw);
    free(b);
    return NULL;
  }
  ane_budget_init(&b->budget, &b->limits.compile_budget);
  ane_budget_share(&b->budget, &process_compiles);
  b->retry = ane_retry_default(ane_sleep_ms, NULL);
  if (!retry_pause(&b->retry, d)) {
    constraints_free(b->table);
    ane_framework_close(&b->fw);
    free(b);
    return NULL;
  }
  b->lifecycle = (AneLifecycle){.fw = &b->fw, .sys = &b->sys};
  b->ops = ane_lifecycle_ops(&b->lifecycle);
  b->cache = ane_program_cache_new(&b->ops, &b->budget, &b->limits.resident_cap, &b->retry);
  ane_device_os_build(&b->fw, b->os_build, sizeof b->os_build);
  ane_device_architecture(&b->fw, &b->arch);
  snprintf(b->ane_arch, sizeof b->ane_arch, "%s", b->arch.name);
  ane_updater_init(&b->updater, &b->lifecycle, constraints_target(b->table, MIL_IOS18)->min_surface_bytes,
                   b->os_build, b->ane_arch);
  b->update_ops = ane_updater_ops(&b->updater);
  read_cached_choice(b, d);
  return b;
}

static void ane_close(void *impl) {
  AneBackend *b = impl;
  ane_program_cache_free(b->cache);
  constraints_free(b->table);
  ane_framework_close(&b->fw);
  free(b);
}

static void ane_describe(const void *impl, char *out, size_t len) {
  const AneBackend *b = impl;
  char strategy[1400] = "update strategy: recompile";
  if (b->strategy_known)
    snprintf(strategy, sizeof strategy, "update strategy: %s (%s)", ane_update_strategy_name(b->strategy),
             b->strategy_origin);
  char variants[512];
  ane_descriptor_variants_list(variants, sizeof variants);
  snprintf(out, len, "framework '%s'; descriptor factory %s%s (probed in order: %s); %s", b->fw.path,
           ane_descriptor_variant_kind(b->fw.descriptor_variant), b->fw.descriptor_from_mil_name, variants, strategy);
}

static void ane_usage(const void *impl, char *out, size_t len) {
  const AneBackend *b = impl;
  StrBuf sb;
  sb_init(&sb);
  ane_program_cache_stats_print(b->cache, &sb);
  while (sb.len && sb.data[sb.len - 1] == '\n') sb.data[--sb.len] = '\0';
  snprintf(out, len, "%s; OS build %s, ANE architecture %s", sb.data, b->os_build, b->ane_arch);
  sb_free(&sb);
}

static void ane_device(const void *impl, char *out, size_t len) {
  ane_device_architecture_describe(&((const AneBackend *)impl)->arch, out, len);
}

static uint64_t ane_compiles(const void *impl) { return ((const AneBackend *)impl)->budget.used; }

/* Recompiling always works; another strategy once the self-test (or its
 * cached choice) says it does on this OS build. */
static OrionBackendCaps ane_caps(const void *impl) {
  const AneBackend *b = impl;
  return (OrionBackendCaps){
      .numerics_fp32 = false, /* the device computes in fp16 */
      .update_strategies = 1u << ORION_RELOAD_RECOMPILE | (b->strategy_known ? 1u << b->strategy : 0u),
      .inputs_may_alias_outputs = true, /* inputs are copied into the device's surfaces first */
      .places_refused_on_cpu = true,    /* the partition (ane_parts.h) */
  };
}

/* What the device refuses statement by statement runs on the CPU (the
 * table's placement), so only the rest refuses the function; each statement
 * moved is a remark. */
static bool ane_supports(void *impl, const OrionProgram *p, uint32_t fn, Diag *d) {
  AneBackend *b = impl;
  OrionAneCheckOptions check = {.table = b->table, .cpu_placement = true};
  return orion_ane_check(p, fn, &check, d);
}

/* The statements the constraint table places on the CPU (*placed: one entry
 * per MIL statement, the caller frees it); false when there are none. The
 * check's words are supports' to say: here they are not reported again. */
static bool refused_statements(const AneBackend *b, const OrionProgram *p, uint32_t fn, SourceSet *sources,
                               uint32_t **placed) {
  const MilFunc *f = orion_function_mil(p, fn);
  *placed = xcalloc(f->nstmts + 1, sizeof **placed);
  StrBuf sink;
  sb_init(&sink);
  Diag quiet;
  diag_init(&quiet, sources);
  quiet.capture = &sink;
  OrionAneCheckOptions check = {.table = b->table, .cpu_placement = true, .placed = *placed};
  (void)orion_ane_check(p, fn, &check, &quiet); /* what placement cannot mend the device refuses itself */
  sb_free(&sink);
  bool any = false;
  for (uint32_t s = 0; s < f->nstmts; s++) any |= (*placed)[s] != 0;
  return any;
}

/* The program's weight files under their @model_path keys (the caller frees the keys and the array). */
static AneWeightFile *weight_files(const OrionProgram *p, uint32_t *n) {
  *n = orion_program_weight_file_count(p);
  AneWeightFile *w = xcalloc(*n + 1, sizeof *w);
  for (uint32_t i = 0; i < *n; i++) {
    const char *rel;
    w[i].data = orion_program_weight_file_at(p, i, &rel, &w[i].len);
    size_t klen = strlen("@model_path/") + strlen(rel) + 1;
    char *key = xmalloc(klen);
    snprintf(key, klen, "@model_path/%s", rel);
    w[i].key = key;
  }
  return w;
}

/* Keeps the first error a cache call reports, to say it again in the
 * lifecycle's words where the device refused the program. */
static void keep_first_error(void *ctx, DiagLevel level, SrcSpan span, const char *message) {
  (void)span;
  StrBuf *first = ctx;
  if (level == DIAG_ERROR && !first->len) sb_puts(first, message);
}

/* Holds the cache's program for the function's MIL and the program's
 * weight files as they are now: a hit costs no compile. */
static bool compile(AneExec *e, Diag *d) {
  AneBackend *b = e->b;
  uint32_t n = 0;
  /* With its weights as inputs the program has no weight files: one compile for every value of the weights. */
  AneWeightFile *w = e->weight_inputs ? xcalloc(1, sizeof *w) : weight_files(e->p, &n);
  StrBuf digest, first, quiet;
  sb_init(&digest);
  sb_init(&first);
  sb_init(&quiet);
  ane_weight_files_digest(w, n, &digest);
  const AneWeightSurfaces *wi = e->weight_inputs;
  AneLifecycleSource ls = {
      .src = {.name = e->what, .mil_text = wi ? wi->mil : e->mil, .mil_len = wi ? wi->mil_len : e->mil_len,
              .weights_digest = digest.data ? digest.data : "", .os_build = b->os_build, .ane_arch = b->ane_arch,
              .weights_as_inputs = wi != NULL},
      .files = w,
      .nfiles = n};
  Diag inner = *d;
  inner.capture = &quiet;
  inner.observe = keep_first_error;
  inner.observe_ctx = &first;
  b->lifecycle.why[0] = '\0';
  b->lifecycle.transient = false;
  e->program = ane_program_cache_acquire(b->cache, &ls.src, &inner);
  char why[2048];
  bool ok = e->program != NULL;
  /* The device's refusal in the lifecycle's words; retries given up, the budget's and the cap's refusals as the cache
   * says them. */
  bool refused = b->lifecycle.why[0] && !b->lifecycle.transient;
  if (!ok) diag_error(d, (SrcSpan){0}, "%s", refused ? b->lifecycle.why : first.data ? first.data : "");
  else if (!ane_device_program_ensure_directory(&b->lifecycle, e->program, why, sizeof why)) {
    diag_error(d, (SrcSpan){0}, "%s", why);
    ane_program_cache_release(b->cache, e->program);
    e->program = NULL;
    ok = false;
  }
  sb_free(&digest);
  sb_free(&first);
  sb_free(&quiet);
  for (uint32_t i = 0; i < n; i++) free((void *)(uintptr_t)w[i].key);
  free(w);
  return ok;
}

static uint64_t minimum_surface(const AneBackend *b, const OrionProgram *p) {
  const Package *pkg = orion_program_manifest(p);
  MilTarget target = MIL_IOS18;
  if (pkg && pkg->target) (void)mil_target_from_name(pkg->target, &target);
  return constraints_target(b->table, target)->min_surface_bytes;
}

static void ane_release(void *exec);

/* The function with its weights as inputs: its MIL and plan (one procedure).
 * A function that cannot be so keeps its consts: said once, as a remark. */
static bool plan_weight_inputs(AneExec *e, Diag *d) {
  if (e->weight_inputs_refused || !orion_weight_count(e->p, e->fn)) return false;
  AneWeightSurfaces *ws = xcalloc(1, sizeof *ws);
  AneSurfacePlan plan;
  char why[2048];
  if (!ane_weight_surfaces_plan(ws, &plan, e->p, e->fn, e->mil, e->min_surface, why, sizeof why)) {
    free(ws);
    e->weight_inputs_refused = true;
    diag_remark(d, (SrcSpan){0}, "the ane backend compiles %s with its weights as consts, so a weight change "
                "recompiles it: %s", e->what, why);
    return false;
  }
  ane_surface_plan_free(&e->plan);
  e->plan = plan;
  e->weight_inputs = ws;
  e->procedure = 0;
  return true;
}

/* The request of e's plan; with weights as inputs, their surfaces filled. */
static bool make_request(AneExec *e, Diag *d) {
  AneBackend *b = e->b;
  char why[2048];
  bool ok = ane_request_make(&e->request, &b->fw, &b->sys, e->plan.ninputs, e->plan.noutputs, e->plan.surface_bytes,
                             e->procedure, why, sizeof why) &&
            (!e->weight_inputs ||
             ane_weight_surfaces_write(e->weight_inputs, &e->plan, &b->sys, &e->request, e->p, e->fn, why, sizeof why));
  if (!ok) diag_error(d, (SrcSpan){0}, "%s", why);
  return ok;
}

static void *ane_prepare(void *impl, OrionProgram *p, uint32_t fn, const OrionPrepareOptions *opt, Diag *d) {
  AneBackend *b = impl;
  const MilProgram *prog = orion_function_program(p, fn);
  const SourceFile *src = d->sources ? srcset_get(d->sources, prog->file) : NULL;
  if (!src) {
    diag_error(d, (SrcSpan){0}, "the ane backend needs the MIL text of '%s' (the Diag's SourceSet the program was "
               "opened with)", orion_function_name(p, fn));
    return NULL;
  }
  AneExec *e = xcalloc(1, sizeof *e);
  e->b = b;
  e->p = p;
  e->fn = fn;
  /* Hook: int32/bool values cannot be on the device's surfaces, and the statements the table places on the CPU
   * (unless the caller keeps them on the device) are refused there; they run on the CPU and the rest as device
   * segments of their own (ane_parts.h). Other functions take the single-program path below. */
  uint32_t *placed = NULL;
  bool moved = !(opt && opt->keep_refused_on_device) && refused_statements(b, p, fn, d->sources, &placed);
  if (moved || ane_parts_wanted(p, fn)) {
    AneCostModel cost = ane_cost_model(b->table);
    bool weigh = !(opt && opt->keep_refused_on_device);
    e->parts = ane_parts_prepare(&orion_backend_ane, b, p, fn, src->text, src->len, moved ? placed : NULL,
                                 weigh ? &cost : NULL, opt, d);
    free(placed);
    if (e->parts) return e;
    free(e);
    return NULL;
  }
  free(placed);
  snprintf(e->what, sizeof e->what, "function '%s'", orion_function_name(p, fn));
  e->mil = xmalloc(src->len + 1);
  memcpy(e->mil, src->text, src->len + 1);
  e->mil_len = src->len;
  e->procedure = (uint32_t)(orion_function_mil(p, fn) - prog->funcs);
  uint32_t nin = orion_input_count(p, fn), nout = orion_output_count(p, fn);
  const OrionTensorInfo **in = xcalloc(nin + 1, sizeof *in), **out = xcalloc(nout + 1, sizeof *out);
  for (uint32_t i = 0; i < nin; i++) in[i] = orion_input(p, fn, i);
  for (uint32_t i = 0; i < nout; i++) out[i] = orion_output(p, fn, i);
  char why[2048];
  e->min_surface = opt && opt->exact_surfaces ? 0 : minimum_surface(b, p);
  /* The caller will write the weights (training): choose how before the first step (and before the compile: the
   * `inputs` strategy compiles the function with its weights as inputs). Other programs keep their consts, which
   * evaluate faster, until their first update. */
  bool writable = orion_weight_count(p, fn) && orion_weight_data_writable(p, fn, 0);
  bool ok = !writable || choose_strategy(b, d);
  bool as_inputs = ok && writable && b->strategy == ORION_RELOAD_INPUTS && plan_weight_inputs(e, d);
  if (ok && !as_inputs) {
    ok = ane_surface_plan(&e->plan, in, nin, out, nout, e->min_surface, why, sizeof why);
    if (!ok) diag_error(d, (SrcSpan){0}, "%s", why);
  }
  free(in);
  free(out);
  ok = ok && compile(e, d) && make_request(e, d);
  if (ok && writable) (void)directory_shared(e, d);
  e->next = b->execs;
  b->execs = e;
  if (!ok) {
    ane_release(e);
    return NULL;
  }
  return e;
}

static bool locked_copy(const AneSystem *sys, IOSurfaceRef s, bool write, uint64_t bytes, const OrionTensor *t) {
  uint32_t mode = write ? 0 : kIOSurfaceLockReadOnly;
  if (sys->lock(s, mode, NULL) != 0) return false;
  void *base = sys->base_address(s);
  if (base && write) ane_surface_pack(base, bytes, t);
  else if (base) ane_surface_unpack(base, t);
  return sys->unlock(s, mode, NULL) == 0 && base;
}

static bool ane_run(void *exec, const OrionTensor *in, const OrionTensor *out, Diag *d) {
  AneExec *e = exec;
  if (e->parts) return ane_parts_run(e->parts, in, out, d); /* hook: ane_parts.h */
  const AneSystem *sys = &e->b->sys;
  uint32_t nin = e->weight_inputs ? e->weight_inputs->first : e->plan.ninputs; /* the weights' surfaces follow */
  for (uint32_t i = 0; i < nin; i++)
    if (!locked_copy(sys, e->request.inputs[e->plan.input_slot[i]], true, e->plan.surface_bytes, &in[i])) {
      diag_error(d, (SrcSpan){0}, "the ane backend cannot lock the surface of input '%s'",
                 orion_input(e->p, e->fn, i)->name);
      return false;
    }
  char why[2048];
  if (!ane_model_evaluate(&e->program->model, &e->b->fw, &e->request, e->what, why, sizeof why)) {
    diag_error(d, (SrcSpan){0}, "%s", why);
    return false;
  }
  for (uint32_t i = 0; i < e->plan.noutputs; i++)
    if (!locked_copy(sys, e->request.outputs[e->plan.output_slot[i]], false, e->plan.surface_bytes, &out[i])) {
      diag_error(d, (SrcSpan){0}, "the ane backend cannot lock the surface of output '%s'",
                 orion_output(e->p, e->fn, i)->name);
      return false;
    }
  return true;
}

/* Lets go of e's program. It stays compiled and loaded in the cache (until
 * evicted or the backend closes), but its directory goes when no prepared
 * function holds it: it is written again if one does. */
static void drop_program(AneExec *e) {
  if (!e->program) return;
  bool shared = false;
  for (const AneExec *o = e->b->execs; o; o = o->next) shared |= o != e && o->program == e->program;
  ane_program_cache_release(e->b->cache, e->program);
  if (!shared) ane_model_remove_directory(&e->program->model);
  e->program = NULL;
}

static bool same_files(const AneDeviceProgram *p, const AneWeightFile *w, uint32_t n) {
  if (p->nfiles != n) return false;
  for (uint32_t i = 0; i < n; i++)
    if (strcmp(p->files[i].key, w[i].key) || p->files[i].len != w[i].len ||
        (w[i].len && memcmp(p->files[i].data, w[i].data, w[i].len)))
      return false;
  return true;
}

/* Whether e's program's directory is another process's (ane_model.h): then
 * reload-files and patch-data would rewrite that process's weights, so
 * e's updates recompile, said once where the strategy writes files. */
static bool directory_shared(AneExec *e, Diag *d) {
  if (!e->program || !ane_model_dir_shared(&e->program->model)) return false;
  OrionReloadStrategy s = e->b->strategy;
  if (!e->shared_dir_remarked && e->b->strategy_known &&
      (s == ORION_RELOAD_RELOAD_FILES || s == ORION_RELOAD_PATCH_DATA)) {
    diag_remark(d, (SrcSpan){0},
                "the ane backend's directory '%s' of %s is shared with another process: its weight files are not "
                "rewritten; updates recompile",
                e->program->model.dir, e->what);
    e->shared_dir_remarked = true;
  }
  return true;
}

/* The chosen strategy on e's program (no compile for reload-files or
 * patch-data); the cache then finds it under its new content. Another
 * function of the same program already updated it: nothing to do. */
static bool update_in_place(AneExec *e, Diag *d) {
  AneBackend *b = e->b;
  uint32_t n;
  AneWeightFile *w = weight_files(e->p, &n);
  bool ok = true;
  if (!same_files(e->program, w, n)) {
    StrBuf digest;
    sb_init(&digest);
    ane_weight_files_digest(w, n, &digest);
    AneLifecycleSource ls = {
        .src = {.name = e->what, .mil_text = e->mil, .mil_len = e->mil_len,
                .weights_digest = digest.data ? digest.data : "", .os_build = b->os_build, .ane_arch = b->ane_arch},
        .files = w,
        .nfiles = n};
    AneWeightSet set = {.files = w, .n = n};
    ok = ane_update_apply(b->strategy, &b->ops, &b->update_ops, &b->budget, &b->retry, e->program, &ls.src, &set,
                          false, d);
    if (ok) ane_program_cache_rekey(b->cache, e->program, &ls.src);
    sb_free(&digest);
  }
  for (uint32_t i = 0; i < n; i++) free((void *)(uintptr_t)w[i].key);
  free(w);
  return ok;
}

/* The program's new weights taken up by the backend's strategy: written
 * into the weight surfaces (inputs), or updated in place (reload-files,
 * patch-data), or compiled again (recompile: a new cache entry; the old one
 * stays for a function still holding it, or to be evicted). The surfaces
 * and the request stay, except where a function compiled with its consts
 * before the choice of inputs is compiled again with its weights as inputs
 * (a new request, whose surfaces those inputs add to). */
static bool ane_weights_changed(void *exec, Diag *d) {
  AneExec *e = exec;
  if (e->parts) return ane_parts_weights_changed(e->parts, d); /* hook: ane_parts.h */
  AneBackend *b = e->b;
  char why[2048];
  if (e->weight_inputs && e->program) { /* the `inputs` strategy: the new bytes into their surfaces */
    if (ane_weight_surfaces_write(e->weight_inputs, &e->plan, &b->sys, &e->request, e->p, e->fn, why, sizeof why))
      return true;
    diag_error(d, (SrcSpan){0}, "%s", why);
    return false;
  }
  if (!choose_strategy(b, d)) return false;
  if (b->strategy == ORION_RELOAD_INPUTS && !orion_weight_count(e->p, e->fn)) return true; /* nothing to bind */
  if (b->strategy == ORION_RELOAD_INPUTS && e->program && plan_weight_inputs(e, d)) {
    /* compiled with its consts before the choice: once more with its weights as inputs, a new request */
    drop_program(e);
    ane_request_free(&e->request, &b->fw, &b->sys);
    return compile(e, d) && make_request(e, d);
  }
  bool shared = false; /* with another program's function, whose weights did not change */
  for (const AneExec *o = b->execs; o; o = o->next) shared |= o != e && o->program == e->program && o->p != e->p;
  /* a function kept with its consts under `inputs` recompiles */
  if (b->strategy == ORION_RELOAD_RECOMPILE || b->strategy == ORION_RELOAD_INPUTS || shared || !e->program ||
      directory_shared(e, d)) {
    drop_program(e);
    if (!compile(e, d)) return false;
    if (!e->weight_inputs ||
        ane_weight_surfaces_write(e->weight_inputs, &e->plan, &b->sys, &e->request, e->p, e->fn, why, sizeof why))
      return true;
    diag_error(d, (SrcSpan){0}, "%s", why);
    return false;
  }
  return update_in_place(e, d);
}

static uint32_t ane_profile_count(const void *exec) {
  (void)exec;
  return 0;
}

static const OrionStmtTime *ane_profile_stmt(const void *exec, uint32_t i) {
  (void)exec, (void)i;
  return NULL;
}

static void ane_profile_reset(void *exec) { (void)exec; }

static void ane_release(void *exec) {
  AneExec *e = exec;
  if (e->parts) { /* hook: ane_parts.h; never in the list of execs */
    ane_parts_free(e->parts);
    free(e);
    return;
  }
  for (AneExec **at = &e->b->execs; *at; at = &(*at)->next)
    if (*at == e) {
      *at = e->next;
      break;
    }
  ane_request_free(&e->request, &e->b->fw, &e->b->sys);
  drop_program(e);
  ane_surface_plan_free(&e->plan);
  if (e->weight_inputs) ane_weight_surfaces_free(e->weight_inputs);
  free(e->weight_inputs);
  free(e->mil);
  free(e);
}

const OrionBackendVtable orion_backend_ane = {
    .name = "ane",
#if defined(__APPLE__)
    .description = "Apple's Neural Engine through AppleNeuralEngine.framework",
#else
    .description = "Apple's Neural Engine through AppleNeuralEngine.framework (here: its Linux stand-in, "
                   "$ORION_ANE_FRAMEWORK)",
#endif
    .available = ane_available,
    .open = ane_open,
    .close = ane_close,
    .caps = ane_caps,
    .supports = ane_supports,
    .prepare = ane_prepare,
    .run = ane_run,
    .weights_changed = ane_weights_changed,
    .profile_count = ane_profile_count,
    .profile_stmt = ane_profile_stmt,
    .profile_reset = ane_profile_reset,
    .release = ane_release,
    .describe = ane_describe,
    .usage = ane_usage,
    .device = ane_device,
    .compiles = ane_compiles,
};
