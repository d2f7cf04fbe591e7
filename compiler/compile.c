/*
 * The compile pipeline (orion/compile.h): one call from .oir source or a
 * verified module to a package or emitted text. The steps and their order
 * are orionc's; what orionc prints (progress, phase times) goes through the
 * caller's hooks, diagnostics through the caller's Diag.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compile_internal.h"
#include "orion/cache.h"
#include "orion/frontend.h"
#include "orion/pass_plugin.h"
#include "orion/patch.h"
#include "orion/temporaries.h"
#include "orion/weights.h"

void orion_compile_options_init(OrionCompileOptions *o) {
  *o = (OrionCompileOptions){.check_weights = true, .target = MIL_IOS18,
                             .cache_max_bytes = COMPILE_CACHE_DEFAULT_MAX_BYTES};
  o->passes.pipeline = PASSES_DEFAULT_PIPELINE;
  /* An embedding's gradient by rows (docs/training.md, "The gradient of an
   * embedding"): tokens x dim values instead of a vocabulary x tokens x dim
   * one-hot matmul in the backward. */
  o->autodiff.gather_rows = true;
}

void orion_compile_result_free(OrionCompileResult *r) {
  sb_free(&r->text);
  sb_free(&r->summary);
}

/* The call's state: options, hooks, and what it reports into. */
typedef struct Compile {
  const OrionCompileOptions *o;
  OrionCompileResult *r;
  Diag *d;
  uint32_t errors_before, warnings_before;
  struct timespec last; /* end of the previous phase */
} Compile;

/* Formats a message for one of the caller's text hooks (nothing when unset). */
static void to_hook(void (*hook)(void *, const char *), void *ctx, const char *fmt, va_list ap) ORION_PRINTF(3, 0);
static void to_hook(void (*hook)(void *, const char *), void *ctx, const char *fmt, va_list ap) {
  if (!hook) return;
  StrBuf sb;
  sb_init(&sb);
  sb_vprintf(&sb, fmt, ap);
  hook(ctx, sb.data);
  sb_free(&sb);
}

static void progress(Compile *c, const char *fmt, ...) ORION_PRINTF(2, 3);
static void progress(Compile *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  to_hook(c->o->hooks.progress, c->o->hooks.ctx, fmt, ap);
  va_end(ap);
}

static void timing(Compile *c, const char *fmt, ...) ORION_PRINTF(2, 3);
static void timing(Compile *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  to_hook(c->o->hooks.timing, c->o->hooks.ctx, fmt, ap);
  va_end(ap);
}

static void phase(Compile *c, const char *name) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  double ms = (double)(now.tv_sec - c->last.tv_sec) * 1e3 + (double)(now.tv_nsec - c->last.tv_nsec) / 1e6;
  if (name && c->o->hooks.phase) c->o->hooks.phase(c->o->hooks.ctx, name, ms);
  c->last = now;
}

static bool failed(const Compile *c) {
  return c->d->nerrors > c->errors_before;
}

static ConstraintTable *table_of(const OrionCompileOptions *o, Diag *d) {
  return o->constraints ? (ConstraintTable *)(uintptr_t)o->constraints : constraints_builtin(d);
}

static void table_done(const OrionCompileOptions *o, ConstraintTable *t) {
  if (t != o->constraints) constraints_free(t);
}

bool orion_compile_options_resolve(OrionCompileOptions *o, Diag *d, char *err, size_t errlen) {
  if (errlen) err[0] = 0;
  if (!o->chip) return true;
  /* The chip names its newest dialect: the default target, and a limit on an explicit one. */
  ConstraintTable *t = table_of(o, d);
  if (!t) return false;
  const ConstraintChip *chip = constraints_chip(t, o->chip);
  bool ok = true;
  if (!chip) {
    StrBuf known;
    sb_init(&known);
    constraints_chip_names(t, &known);
    snprintf(err, errlen, "unknown chip '%s' (expected %s)", o->chip, known.data ? known.data : "none");
    sb_free(&known);
    ok = false;
  } else if (!o->target_given) {
    o->target = chip->target;
    o->target_given = true;
  } else if (o->target > chip->target) {
    snprintf(err, errlen, "--target=%s is newer than %s supports (at most %s)", mil_target_name(o->target), o->chip,
             mil_target_name(chip->target));
    ok = false;
  }
  table_done(o, t);
  return ok;
}

bool orion_compile_load_plugins(const char *const *paths, uint32_t n, Diag *d) {
  for (uint32_t i = 0; i < n; i++)
    if (!passes_load_plugin(paths[i], d)) return false;
  return true;
}

/* Checks the legalized program against the ANE constraint table. Findings
 * go through the diagnostics module (so -w and -Werror apply) as one line
 * each, `message [ANE001]`; orion-lint shows the full entries. Violations of
 * error severity stop the compile unless `allow` names their rule, which
 * turns them into warnings. */
static bool check_constraints(Compile *c, const OrionCompileOptions *o, IrModule *m) {
  Diag *d = c->d;
  ConstraintTable *t = table_of(o, d);
  if (!t) return false;
  /* The package writer pads small surfaces, so for a compile ANE004 is news, not a problem. */
  static const LintSeverityOverride overrides[] = {{"ANE004", DIAG_NOTE}};
  LintOptions lo = {.target = o->target, .chip = o->chip, .allow = NULL, .overrides = overrides, .noverrides = 1};
  LintOptions check = {.target = o->target, .chip = o->chip, .allow = o->allow, .nallow = o->nallow};
  if (!lint_options_check(t, &check, d)) {
    table_done(o, t);
    return false;
  }
  LintReport r;
  lint_report_init(&r, d->sources);
  lint_ir(t, m, &lo, &r);
  lint_report_sort(&r);
  uint32_t errors = 0, warnings = 0;
  for (uint32_t i = 0; i < r.n; i++) {
    const LintFinding *f = &r.items[i];
    DiagLevel level = f->severity;
    for (uint32_t k = 0; k < o->nallow; k++)
      if (level == DIAG_ERROR && !strcmp(o->allow[k], f->rule->id)) level = DIAG_WARNING;
    if (level == DIAG_NOTE && !o->report_notes) continue;
    uint32_t before = d->nerrors + d->nwarnings;
    diag_report(d, level, f->span, "%s [%s]", f->message, f->rule->id);
    if (level == DIAG_ERROR) errors++;
    else if (level == DIAG_WARNING) warnings++;
    if (d->nerrors + d->nwarnings > before)
      diag_note(d, f->span, "'orion-lint --explain %s' describes the constraint and its workaround", f->rule->id);
  }
  if (errors)
    diag_error(d, (SrcSpan){0}, "the program violates %u ANE constraint%s; --allow=ID compiles it anyway", errors,
               errors == 1 ? "" : "s");
  c->r->lint_errors = errors;
  c->r->lint_warnings = warnings;
  lint_report_free(&r);
  table_done(o, t);
  return !failed(c);
}

/* Writes the package, or copies it from the compile cache when the key matches. */
static bool write_package(Compile *c, IrModule *m, const PackageOptions *po, const char *path) {
  const OrionCompileOptions *o = c->o;
  char key[COMPILE_CACHE_KEY_LEN + 1];
  if (o->cache_dir) {
    compile_cache_key(m, po, o->plugins, o->nplugins, key);
    bool served = compile_cache_fetch(o->cache_dir, key, path, &po->temp_dir, c->d);
    phase(c, "cache lookup");
    if (served) {
      c->r->from_cache = true;
      timing(c, "served from the compile cache (%s/%s.anepkg)", o->cache_dir, key);
      progress(c, "wrote %s (copied from the compile cache)", path);
      return true;
    }
    if (failed(c)) return false;
  }
  progress(c, "writing %s", path);
  if (!package_write(m, path, po, c->d)) return false;
  phase(c, "package");
  if (o->cache_dir) {
    if (!compile_cache_store(o->cache_dir, key, path, o->cache_max_bytes))
      progress(c, "not stored in the compile cache %s", o->cache_dir);
    phase(c, "cache store");
  }
  const PackageStats *s = po->stats;
  timing(c, "weights        %9.2f ms (%llu bytes)", s->weights_ms, (unsigned long long)s->weight_bytes);
  timing(c, "mil text       %9.2f ms", s->mil_ms);
  timing(c, "manifest       %9.2f ms", s->manifest_ms);
  timing(c, "write          %9.2f ms", s->write_ms);
  progress(c, "wrote %s", path);
  return true;
}

/* Legalized IR to MIL text or a package. */
static bool emit(Compile *c, const OrionCompileOptions *o, uint64_t min_surface_bytes, IrModule *m,
                 const char *out_package) {
  PackageOptions po = {.target = o->target, .chip = o->chip, .min_surface_bytes = min_surface_bytes,
                       .source_name = o->source_name, .source_text = o->source_text ? o->source_text : "",
                       .source_len = o->source_text ? o->source_len : 0,
                       .warnings = c->d->nwarnings - c->warnings_before,
                       .weights = {.clamp_fp16 = o->clamp_fp16}, .stats = &c->r->stats,
                       .keep_duplicate_weights = o->no_dedup, .compile_args = o->compile_args,
                       .ncompile_args = o->ncompile_args, .lint_checked = !o->no_lint,
                       .lint_errors = c->r->lint_errors, .lint_warnings = c->r->lint_warnings,
                       .temp_dir = {o->hooks.temp_dir, o->hooks.temp_dir_begin, o->hooks.ctx},
                       .training = o->training};
  if (o->emit == ORION_EMIT_MIL) {
    progress(c, "emitting MIL");
    if (!package_emit_mil(m, &po, &c->r->text, c->d)) return false;
    phase(c, "emit");
    timing(c, "weights        %9.2f ms (%llu bytes)", c->r->stats.weights_ms,
           (unsigned long long)c->r->stats.weight_bytes);
    timing(c, "mil text       %9.2f ms", c->r->stats.mil_ms);
    return true;
  }
  if (!out_package) {
    diag_error(c->d, (SrcSpan){0}, "no path to write the package to");
    return false;
  }
  return write_package(c, m, &po, out_package);
}

/* What the pipeline needs before it reads the program: the options checked
 * and the target's numbers from the constraint table. */
typedef struct Prepared {
  OrionCompileOptions o; /* the caller's, with the pass options' target numbers */
  uint64_t min_surface_bytes;
} Prepared;

static bool prepare(Compile *c, Prepared *p) {
  p->o = *c->o;
  OrionCompileOptions *o = &p->o;
  c->r->status = ORION_COMPILE_OPTIONS_ERROR;
  char err[512];
  if (!orion_compile_options_resolve(o, c->d, err, sizeof err)) {
    if (err[0]) diag_error(c->d, (SrcSpan){0}, "%s", err);
    return false;
  }
  if (!passes_check_spec(&o->passes, c->d)) return false;
  if (o->train && o->training) {
    diag_error(c->d, (SrcSpan){0}, "--train makes the training contract; it cannot also be given (--train-contract)");
    return false;
  }
  /* The SRAM budget and the minimum surface the passes plan for are the
   * target's, or the chip's, from the constraint table. */
  ConstraintTable *table = table_of(o, c->d);
  if (!table) return false;
  const ConstraintChip *chip = o->chip ? constraints_chip(table, o->chip) : NULL;
  ConstraintTarget target = chip ? constraints_chip_target(table, chip, o->target) : *constraints_target(table, o->target);
  if (target.sram_budget_bytes <= UINT32_MAX) o->passes.pass_options.target_sram_bytes = (uint32_t)target.sram_budget_bytes;
  o->passes.pass_options.target_min_surface_bytes = target.min_surface_bytes;
  /* These emits run the constraint check after the passes: it reports ANE016. */
  o->passes.pass_options.sram_checked_later =
      !o->no_lint && (o->emit == ORION_EMIT_NONE || o->emit == ORION_EMIT_MIL || o->emit == ORION_EMIT_PACKAGE);
  p->min_surface_bytes = target.min_surface_bytes;
  table_done(o, table);
  c->r->status = ORION_COMPILE_INPUT_ERROR;
  return true;
}

static bool compile_rest(Compile *c, const OrionCompileOptions *caller, uint64_t min_surface_bytes, IrModule *m,
                         const CompileTraining *train, const char *out_package);

/* The pipeline after parsing (m verified). */
static bool compile(Compile *c, Prepared *p, IrModule *m, const char *out_package) {
  const OrionCompileOptions o = p->o;
  if (o.emit == ORION_EMIT_OIR && !o.inline_calls && !o.legalize) ir_print_module(m, &c->r->text);
  PassCtx inline_ctx = {.d = c->d};
  if (!pass_inline(m, &inline_ctx) || !ir_verify(m, c->d)) return false;
  phase(c, "inline");
  for (uint32_t i = 0; i < o.noverrides; i++)
    if (!weights_override(m, o.overrides[i].name, o.overrides[i].file, c->d)) return false;
  if (o.check_weights && !weights_check_sources(m, c->d)) return false;
  phase(c, "weight check");
  CompileTraining train = {0};
  OrionCompileOptions rest = o;
  LoraLayers lora = {0};
  bool ok = true;
  if (o.train && o.passes.pass_options.nlora) {
    /* LoRA training: the adapters must be inputs before AD differentiates with respect to them, so the
     * lora pass runs here, once, and not again in the pipeline. */
    PassOptions po = o.passes.pass_options;
    po.lora_layers = &lora;
    po.lora_any_float = true;
    PassCtx lora_ctx = {.d = c->d, .opt = &po};
    ok = pass_lora(m, &lora_ctx) && ir_verify(m, c->d);
    rest.passes.pass_options.nlora = 0;
    phase(c, "lora");
  }
  if (ok && o.train) {
    ok = compile_train(m, &o, o.passes.pass_options.nlora ? &lora : NULL, c->d, &train);
    phase(c, "autodiff");
  }
  free(lora.layers);
  ok = ok && compile_rest(c, &rest, p->min_surface_bytes, m, train.contract ? &train : NULL, out_package);
  package_training_free(train.contract);
  return ok;
}

/* After inlining (and --train): the summary, the emit. */
static bool compile_rest(Compile *c, const OrionCompileOptions *caller, uint64_t min_surface_bytes, IrModule *m,
                         const CompileTraining *train, const char *out_package) {
  OrionCompileOptions o = *caller;
  if (train) o.training = train->contract;
  const char *name = o.source_name ? o.source_name : "<module>";
  StrBuf *text = &c->r->text;
  if (o.summary) compile_summary(m, name, train, o.summary_json, &c->r->summary);
  if (o.emit == ORION_EMIT_OIR && o.inline_calls && !o.legalize) ir_print_module(m, text);
  switch (o.emit) {
  case ORION_EMIT_DOT:
    if (!passes_run(m, &o.passes, c->d)) return false;
    ir_print_dot(m, text);
    break;
  case ORION_EMIT_OIR:
    if (o.legalize) {
      if (!passes_run(m, &o.passes, c->d)) return false;
      ir_print_module(m, text);
    }
    break;
  case ORION_EMIT_NONE:
    /* A full check: the passes, the constraints and the weights' values as
     * the package writer would make them, without writing anything. */
    if (!passes_run(m, &o.passes, c->d)) return false;
    if (!o.no_lint && !check_constraints(c, &o, m)) return false;
    if (o.check_weights) {
      WeightLoadOptions wo = {.clamp_fp16 = o.clamp_fp16};
      if (!weights_check_values(m, &wo, c->d)) return false;
      phase(c, "weight values");
    }
    break;
  case ORION_EMIT_MIL:
  case ORION_EMIT_PACKAGE:
    progress(c, "running the %s pipeline", o.passes.passes ? "given" : o.passes.pipeline);
    if (!passes_run(m, &o.passes, c->d)) return false;
    phase(c, "passes");
    if (!o.no_lint && !check_constraints(c, &o, m)) return false;
    phase(c, "constraints");
    if (!emit(c, &o, min_surface_bytes, m, out_package)) return false;
    break;
  }
  if (failed(c)) return false;
  c->r->status = ORION_COMPILE_OK;
  return true;
}

static void begin(Compile *c, const OrionCompileOptions *o, OrionCompileResult *r, Diag *d) {
  *r = (OrionCompileResult){.status = ORION_COMPILE_INPUT_ERROR};
  sb_init(&r->text);
  sb_init(&r->summary);
  *c = (Compile){.o = o, .r = r, .d = d, .errors_before = d->nerrors, .warnings_before = d->nwarnings};
  phase(c, NULL);
}

bool orion_compile_module(IrModule *m, const OrionCompileOptions *o, const char *out_package,
                          OrionCompileResult *result, Diag *d) {
  Compile c;
  begin(&c, o, result, d);
  Prepared p;
  return prepare(&c, &p) && compile(&c, &p, m, out_package);
}

/* Parses with d->sources set (a set of the call's own when the caller has
 * none), then compiles with the source recorded for the manifest. */
static bool compile_source(const char *path, const char *name, const char *text, size_t len,
                           const OrionCompileOptions *o, const char *out_package, OrionCompileResult *result,
                           Diag *d) {
  Compile c;
  begin(&c, o, result, d);
  Prepared p;
  if (!prepare(&c, &p)) return false;
  SourceSet own;
  bool owns_sources = !d->sources;
  if (owns_sources) {
    srcset_init(&own);
    d->sources = &own;
  }
  uint32_t file = d->sources->count; /* the id the parser registers the source under */
  progress(&c, "parsing %s", path ? path : name);
  IrModule *m = path ? oir_parse_file(path, d) : oir_parse_string(name, text, len, d);
  phase(&c, "parse+verify");
  bool ok = false;
  if (m) {
    const SourceFile *src = srcset_get(d->sources, file);
    p.o.source_name = path ? path : name;
    p.o.source_text = src ? src->text : "";
    p.o.source_len = src ? src->len : 0;
    ok = compile(&c, &p, m, out_package);
  }
  ir_module_free(m);
  if (owns_sources) {
    srcset_free(&own);
    d->sources = NULL;
  }
  return ok;
}

void orion_compile_cleanup(const char *temp_dir) {
  if (temp_dir) temp_remove_claimed(temp_dir); /* renamed out of the writer's way, then removed */
}

bool orion_compile_file(const char *path, const OrionCompileOptions *o, const char *out_package,
                        OrionCompileResult *result, Diag *d) {
  return compile_source(path, NULL, NULL, 0, o, out_package, result, d);
}

bool orion_compile_text(const char *name, const char *text, size_t len, const OrionCompileOptions *o,
                        const char *out_package, OrionCompileResult *result, Diag *d) {
  return compile_source(NULL, name, text, len, o, out_package, result, d);
}
