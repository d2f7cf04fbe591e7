/*
 * The linter's core: the checker registry (which code checks which rule),
 * running the checkers over IR or a package, the findings they report
 * (severity from the table, the user's overrides and allow list, demotion to
 * a note when a pass about to run fixes the problem), and the report they
 * collect in.
 */
#include <stdlib.h>
#include <string.h>

#include "lint_internal.h"
#include "orion/ane_rules.h"
#include "orion/mil_ops.h"
#include "orion/pkg_paths.h"

/* ---- registry ---- */

/* One entry per rule checked on the IR; the rules checked on packages and
 * MIL files are the shared registry's (orion/ane_rules.h). The test suite
 * asserts that every static rule of the table has a checker of its kind and
 * every checker names a rule. Kept in rule order. */
static const struct {
  const char *rule;
  LintIrCheck ir;
} ir_checkers[] = {
    {"ANE001", check_ir_concat},
    {"ANE004", check_ir_min_surface},
    {"ANE006", check_ir_sdpa_mask},
    {"ANE010", check_ir_gelu},
    {"ANE013", check_ir_conv_bias},
    {"ANE015", check_ir_const_matmul},
    {"ANE016", check_ir_sram},
    {"ANE017", check_ir_fp32},
};

#define NIR_CHECKERS (sizeof ir_checkers / sizeof *ir_checkers)

/* The shared registry's entry of package checker i (those with a checker). */
static uint32_t package_checker(uint32_t i) {
  for (uint32_t k = 0; k < ane_rule_count(); k++)
    if (ane_rule_needs(k) != ANE_RULE_AT_RUN && i-- == 0) return k;
  return UINT32_MAX;
}

uint32_t lint_checker_count(void) {
  uint32_t n = (uint32_t)NIR_CHECKERS;
  for (uint32_t k = 0; k < ane_rule_count(); k++) n += ane_rule_needs(k) != ANE_RULE_AT_RUN;
  return n;
}

const char *lint_checker_rule(uint32_t i) {
  return i < NIR_CHECKERS ? ir_checkers[i].rule : ane_rule_id(package_checker(i - (uint32_t)NIR_CHECKERS));
}

unsigned lint_checker_kind(uint32_t i) {
  if (i < NIR_CHECKERS) return CHECK_STATIC_IR;
  return package_checker(i - (uint32_t)NIR_CHECKERS) != UINT32_MAX ? CHECK_STATIC_PACKAGE : 0;
}

/* ---- report ---- */

void lint_report_init(LintReport *r, SourceSet *sources) {
  memset(r, 0, sizeof *r);
  r->sources = sources;
  arena_init(&r->arena);
}

void lint_report_free(LintReport *r) {
  arena_free(&r->arena);
  free(r->items);
  free(r->notices);
  memset(r, 0, sizeof *r);
}

void lint_report_add(LintReport *r, const LintFinding *f) {
  xgrow((void **)&r->items, sizeof *r->items, &r->cap, r->n + 1);
  LintFinding *g = &r->items[r->n++];
  *g = *f;
  g->path = f->path ? arena_strdup(&r->arena, f->path) : NULL;
  g->function = f->function ? arena_strdup(&r->arena, f->function) : NULL;
  g->message = arena_strdup(&r->arena, f->message ? f->message : "");
}

uint32_t lint_report_count(const LintReport *r, DiagLevel at_least) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < r->n; i++) n += r->items[i].severity >= at_least;
  return n;
}

void lint_report_add_notice(LintReport *r, DiagLevel level, SrcSpan span, const char *path, const char *message) {
  xgrow((void **)&r->notices, sizeof *r->notices, &r->cap_notices, r->nnotices + 1);
  r->notices[r->nnotices++] = (LintNotice){level, span, !span.file && path ? arena_strdup(&r->arena, path) : NULL,
                                           arena_strdup(&r->arena, message ? message : "")};
}

uint32_t lint_report_input_errors(const LintReport *r) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < r->nnotices; i++) n += r->notices[i].level == DIAG_ERROR;
  return n;
}

/* The file a finding is in, for ordering. */
static const char *finding_file(const LintReport *r, const LintFinding *f) {
  const SourceFile *sf = f->span.file && r->sources ? srcset_get(r->sources, f->span.file) : NULL;
  return sf ? sf->name : f->path ? f->path : "";
}

typedef struct SortItem {
  const char *file;
  const LintFinding *f;
  uint32_t index; /* original position: keeps the sort stable */
} SortItem;

static int compare_items(const void *pa, const void *pb) {
  const SortItem *a = pa, *b = pb;
  int c = strcmp(a->file, b->file);
  if (c == 0) c = (a->f->span.start > b->f->span.start) - (a->f->span.start < b->f->span.start);
  if (c == 0) c = (a->f->rule->number > b->f->rule->number) - (a->f->rule->number < b->f->rule->number);
  if (c == 0) c = (a->index > b->index) - (a->index < b->index);
  return c;
}

void lint_report_sort(LintReport *r) {
  if (r->n < 2) return;
  SortItem *items = xmalloc(sizeof *items * r->n);
  for (uint32_t i = 0; i < r->n; i++) items[i] = (SortItem){finding_file(r, &r->items[i]), &r->items[i], i};
  qsort(items, r->n, sizeof *items, compare_items);
  LintFinding *sorted = xmalloc(sizeof *sorted * r->n);
  for (uint32_t i = 0; i < r->n; i++) sorted[i] = *items[i].f;
  free(r->items);
  free(items);
  r->items = sorted;
  r->cap = r->n;
}

/* ---- options ---- */

bool lint_options_check(const ConstraintTable *t, const LintOptions *o, Diag *d) {
  bool ok = true;
  for (uint32_t i = 0; i < o->nallow; i++)
    if (!constraints_find(t, o->allow[i])) {
      diag_error(d, (SrcSpan){0}, "unknown rule '%s' (orion-lint --list shows them)", o->allow[i]);
      ok = false;
    }
  for (uint32_t i = 0; i < o->noverrides; i++)
    if (!constraints_find(t, o->overrides[i].id)) {
      diag_error(d, (SrcSpan){0}, "unknown rule '%s' (orion-lint --list shows them)", o->overrides[i].id);
      ok = false;
    }
  if (o->chip && !constraints_chip(t, o->chip)) {
    StrBuf known;
    sb_init(&known);
    constraints_chip_names(t, &known);
    diag_error(d, (SrcSpan){0}, "unknown chip '%s' (expected %s)", o->chip, known.len ? known.data : "none");
    sb_free(&known);
    ok = false;
  }
  return ok;
}

/* The data IR checks use: the chip's numbers when o names one, else the target's. */
static void ctx_set_target(LintCtx *c, MilTarget target) {
  const ConstraintChip *chip = c->opt->chip ? constraints_chip(c->table, c->opt->chip) : NULL;
  if (!chip) {
    c->target = constraints_target(c->table, target);
    return;
  }
  c->chip_target = constraints_chip_target(c->table, chip, target);
  c->target = &c->chip_target;
}

static bool allowed(const LintOptions *o, const Constraint *rule) {
  for (uint32_t i = 0; i < o->nallow; i++)
    if (!strcmp(o->allow[i], rule->id)) return true;
  return false;
}

static DiagLevel rule_level(const LintOptions *o, const Constraint *rule) {
  DiagLevel level = rule->severity;
  for (uint32_t i = 0; i < o->noverrides; i++)
    if (!strcmp(o->overrides[i].id, rule->id)) level = o->overrides[i].level;
  return level;
}

/* Whether a pipeline spec ("a,(b,c),d") names the pass. */
static bool pipeline_has(const char *spec, const char *pass) {
  size_t n = strlen(pass);
  for (const char *p = spec; p && *p;) {
    size_t len = strcspn(p, ",() ");
    if (len == n && !strncmp(p, pass, n)) return true;
    p += len ? len : 1;
  }
  return false;
}

static void emit(LintCtx *c, int level, SrcSpan span, const char *path, const char *function, bool unfixable,
                 const char *fmt, va_list ap) ORION_PRINTF(7, 0);
static void emit(LintCtx *c, int level, SrcSpan span, const char *path, const char *function, bool unfixable,
                 const char *fmt, va_list ap) {
  const Constraint *rule = c->rule;
  if (allowed(c->opt, rule)) return;
  /* The user's override wins over a checker's own level. */
  bool overridden = false;
  for (uint32_t i = 0; i < c->opt->noverrides; i++) overridden |= !strcmp(c->opt->overrides[i].id, rule->id);
  DiagLevel sev = level == LINT_RULE_LEVEL || overridden ? rule_level(c->opt, rule) : (DiagLevel)level;
  StrBuf msg;
  sb_init(&msg);
  sb_vprintf(&msg, fmt, ap);
  LintFinding f = {
      .rule = rule,
      .severity = sev,
      .unfixed_severity = sev,
      .will_be_fixed = !unfixable && rule->fixed_by && pipeline_has(c->opt->pipeline, rule->fixed_by),
      .unfixable = unfixable,
      .span = span,
      .path = span.file ? NULL : path,
      .function = function,
      .message = msg.data,
  };
  if (f.will_be_fixed) f.severity = DIAG_NOTE;
  lint_report_add(c->report, &f);
  sb_free(&msg);
}

void lint_emit(LintCtx *c, int level, SrcSpan span, const char *path, const char *function, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  emit(c, level, span, path, function, false, fmt, ap);
  va_end(ap);
}

void lint_emit_unfixable(LintCtx *c, int level, SrcSpan span, const char *path, const char *function,
                         const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  emit(c, level, span, path, function, true, fmt, ap);
  va_end(ap);
}

void lint_put_size(StrBuf *sb, uint64_t bytes) {
  const uint64_t mib = 1u << 20;
  if (bytes >= mib && bytes % mib == 0) sb_printf(sb, "%llu MiB", (unsigned long long)(bytes / mib));
  else if (bytes >= mib) sb_printf(sb, "%.1f MiB", (double)bytes / (double)mib);
  else sb_printf(sb, "%llu bytes", (unsigned long long)bytes);
}

/* ---- running ---- */

void lint_ir(const ConstraintTable *t, IrModule *m, const LintOptions *o, LintReport *r) {
  LintCtx c = {.table = t, .opt = o, .report = r, .m = m};
  ctx_set_target(&c, o->target);
  for (size_t k = 0; k < NIR_CHECKERS; k++) {
    c.rule = constraints_find(t, ir_checkers[k].rule);
    /* A custom table may leave a rule out; then nothing checks it. */
    if (!c.rule || allowed(o, c.rule)) continue;
    for (IrFuncId f = 1; f < m->nfuncs; f++)
      if (!m->funcs[f].dead) ir_checkers[k].ir(&c, f);
  }
}

/* The first error a Diag reports (Diag.observe). */
typedef struct FirstError {
  bool seen;
  SrcSpan span;
  char *message;
} FirstError;

static void keep_first_error(void *ctx, DiagLevel level, SrcSpan span, const char *message) {
  FirstError *fe = ctx;
  if (level != DIAG_ERROR || fe->seen) return;
  fe->seen = true;
  fe->span = span;
  fe->message = xstrdup(message);
}

/* Reads the MIL text registered as `file` with the MIL reader, tolerantly
 * (the rules report what it reads past). When the reader cannot read it,
 * its first error is reported through d, where it was found and in its
 * words, as the reason the text cannot be checked. */
static MilProgram *read_mil_text(SourceSet *sources, uint32_t file, Diag *d) {
  Diag rd;
  diag_init(&rd, sources);
  StrBuf discard; /* the reader's own report: what the linter repeats is enough */
  sb_init(&discard);
  rd.capture = &discard;
  FirstError fe = {0};
  rd.observe = keep_first_error;
  rd.observe_ctx = &fe;
  MilReadOptions opt = {.tolerant = true};
  MilProgram *p = mil_read_source(file, &opt, &rd);
  if (!p) {
    const char *why = fe.seen ? fe.message : "it cannot be read";
    const SourceFile *sf = srcset_get(sources, file);
    if (!fe.seen || !fe.span.file) {
      diag_error(d, (SrcSpan){0}, "%s: cannot check this MIL text: %s", sf->name, why);
    } else if (d->sources == sources) {
      diag_error(d, fe.span, "cannot check this MIL text: %s", why);
    } else {
      uint32_t line, col;
      srcset_linecol(sources, file, fe.span.start, &line, &col);
      diag_error(d, (SrcSpan){0}, "%s:%u:%u: cannot check this MIL text: %s", sf->name, line, col, why);
    }
  }
  free(fe.message);
  sb_free(&discard);
  return p;
}

/* An op the MIL op table does not have is run by no backend (orion-run
 * refuses the program), so the text cannot pass: each is an error, at the
 * op, and the text goes unchecked as when the reader rejects it. */
static bool known_ops(const MilProgram *p, SourceSet *sources, uint32_t file, Diag *d) {
  bool ok = true;
  for (uint32_t f = 0; f < p->nfuncs; f++)
    for (uint32_t i = 0; i < p->funcs[f].nstmts; i++) {
      const MilStmt *st = &p->funcs[f].stmts[i];
      if (mil_op_find(st->op)) continue;
      ok = false;
      if (d->sources == sources) {
        diag_error(d, st->op_loc, "cannot check this MIL text: op '%s' is not in the MIL op table, so no backend runs it",
                   st->op);
      } else {
        uint32_t line, col;
        srcset_linecol(sources, file, st->op_loc.start, &line, &col);
        diag_error(d, (SrcSpan){0}, "%s:%u:%u: cannot check this MIL text: op '%s' is not in the MIL op table, so no "
                   "backend runs it", srcset_get(sources, file)->name, line, col, st->op);
      }
    }
  return ok;
}

/* Reads the MIL text of every function of c->pkg into c (texts added to
 * r->sources so findings show their lines). False after reporting through
 * d if one cannot be read or the MIL reader cannot read it. */
static bool load_mil_texts(LintCtx *c, LintReport *r, Diag *d) {
  const Package *pkg = c->pkg;
  uint32_t n = pkg->nfunctions;
  c->mil = xcalloc(n ? n : 1, sizeof *c->mil);
  c->mil_file = xcalloc(n ? n : 1, sizeof *c->mil_file);
  c->mil_path = xcalloc(n ? n : 1, sizeof *c->mil_path);
  bool ok = true;
  /* Through the package's descriptor, by the package rule (orion/pkg_paths.h). */
  PkgDir dir;
  const char *derr;
  if (!pkg_dir_open(&dir, pkg->path, &derr)) {
    diag_error(d, (SrcSpan){0}, "cannot read '%s': %s", pkg->path, derr);
    return false;
  }
  for (uint32_t i = 0; i < n; i++) {
    StrBuf p;
    sb_init(&p);
    sb_printf(&p, "%s/%s", pkg->path, pkg->functions[i].mil_file);
    char *text, err[4096 + 128];
    size_t len;
    bool outside;
    if (!pkg_read_file(&dir, pkg->functions[i].mil_file, MAX_SOURCE_BYTES, &text, &len, &outside, err, sizeof err)) {
      if (outside) diag_error(d, (SrcSpan){0}, "%s: %s", p.data, err);
      else diag_error(d, (SrcSpan){0}, "cannot read '%s': %s", p.data, err);
      sb_free(&p);
      ok = false;
      continue;
    }
    /* The report's SourceSet keeps the text, so findings can show its lines. */
    c->mil_file[i] = srcset_add(r->sources, p.data, text, len);
    free(text);
    c->mil_path[i] = srcset_get(r->sources, c->mil_file[i])->name;
    c->mil[i] = read_mil_text(r->sources, c->mil_file[i], d);
    if (c->mil[i] && !known_ops(c->mil[i], r->sources, c->mil_file[i], d)) {
      mil_program_free(c->mil[i]);
      c->mil[i] = NULL;
    }
    if (!c->mil[i]) ok = false;
    sb_free(&p);
  }
  pkg_dir_close(&dir);
  return ok;
}

/* A finding of the shared rules, reported as the linter's. */
static void lint_sink(void *ctx, const AneRuleFinding *f) {
  _Static_assert(ANE_RULE_LEVEL == LINT_RULE_LEVEL, "a shared checker's level is the linter's");
  LintCtx *c = ctx;
  c->rule = f->rule;
  lint_emit(c, f->level, f->span, f->path, f->function, "%s", f->message);
}

static bool lint_drops(void *ctx, const Constraint *rule) { return allowed(((LintCtx *)ctx)->opt, rule); }

static AneRuleIo *rule_io(const PkgTensor *t, uint32_t n) {
  AneRuleIo *io = xcalloc(n ? n : 1, sizeof *io);
  for (uint32_t i = 0; i < n; i++)
    io[i] = (AneRuleIo){.name = t[i].name, .mil_name = t[i].mil_name, .binding = t[i].binding,
                        .surface_bytes = t[i].surface_bytes};
  return io;
}

/* The shared package/MIL rules (orion/ane_rules.h) on every function of
 * c->pkg; those of the manifest only when there is one. */
static void run_package_checkers(LintCtx *c, bool with_manifest) {
  uint32_t n = c->pkg->nfunctions;
  AneRuleFunction *fns = xcalloc(n ? n : 1, sizeof *fns);
  for (uint32_t i = 0; i < n; i++) {
    const PkgFunction *pf = &c->pkg->functions[i];
    fns[i] = (AneRuleFunction){.name = pf->name, .program = c->mil[i], .funcs = c->mil[i]->funcs,
                               .nfuncs = c->mil[i]->nfuncs, .inputs = rule_io(pf->inputs, pf->ninputs),
                               .outputs = rule_io(pf->outputs, pf->noutputs), .ninputs = pf->ninputs,
                               .noutputs = pf->noutputs};
  }
  AneRuleInput in = {.table = c->table, .target = c->target, .sources = c->report->sources, .dir = c->pkg->path,
                     .manifest_path = with_manifest ? c->manifest_path : NULL, .functions = fns, .nfunctions = n,
                     .sink = lint_sink, .sink_ctx = c, .drops = lint_drops};
  ane_rules_run(&in);
  for (uint32_t i = 0; i < n; i++) {
    free((void *)(uintptr_t)fns[i].inputs);
    free((void *)(uintptr_t)fns[i].outputs);
  }
  free(fns);
}

static void ctx_free(LintCtx *c) {
  for (uint32_t i = 0; c->mil && i < c->pkg->nfunctions; i++) mil_program_free(c->mil[i]);
  free(c->mil);
  free(c->mil_file);
  free(c->mil_path);
}

bool lint_package(const ConstraintTable *t, const Package *pkg, const LintOptions *o, LintReport *r, Diag *d) {
  if (!r->sources) ice("lint_package needs a report with a SourceSet (it holds the MIL texts)");
  MilTarget target = MIL_IOS18;
  if (!mil_target_from_name(pkg->target, &target)) {
    diag_error(d, (SrcSpan){0}, "%s: unknown target '%s'", pkg->path, pkg->target);
    return false;
  }
  /* The chip's numbers apply as orionc applied them: --chip's, else those of
   * the chip the package was compiled for (its manifest's Chip). */
  const char *chip_name = o->chip ? o->chip : pkg->chip;
  const ConstraintChip *chip = chip_name ? constraints_chip(t, chip_name) : NULL;
  if (chip_name && !chip) {
    StrBuf known;
    sb_init(&known);
    constraints_chip_names(t, &known);
    diag_error(d, (SrcSpan){0}, "%s: compiled for chip '%s', which the constraint table does not know (expected %s)",
               pkg->path, chip_name, known.len ? known.data : "none");
    sb_free(&known);
    return false;
  }
  StrBuf mp;
  sb_init(&mp);
  sb_printf(&mp, "%s/%s", pkg->path, PACKAGE_MANIFEST);
  LintCtx c = {.table = t, .opt = o, .report = r, .target = constraints_target(t, target), .pkg = pkg,
               .manifest_path = mp.data};
  if (chip) {
    c.chip_target = constraints_chip_target(t, chip, target);
    c.target = &c.chip_target;
  }
  bool ok = load_mil_texts(&c, r, d);
  if (ok) run_package_checkers(&c, true);
  ctx_free(&c);
  sb_free(&mp);
  return ok;
}

bool lint_mil_file(const ConstraintTable *t, const char *path, const LintOptions *o, LintReport *r, Diag *d) {
  if (!r->sources) ice("lint_mil_file needs a report with a SourceSet (it holds the MIL text)");
  /* A package of one function without a manifest: @model_path is the file's directory. */
  const char *slash = strrchr(path, '/');
  char *dir = slash ? strndup(path, (size_t)(slash - path + (slash == path))) : xstrdup(".");
  PkgFunction fn = {.name = NULL, .mil_file = (char *)(uintptr_t)(slash ? slash + 1 : path)};
  Package pkg = {.path = dir, .functions = &fn, .nfunctions = 1};
  LintCtx c = {.table = t, .opt = o, .report = r, .pkg = &pkg};
  ctx_set_target(&c, o->target);
  bool ok = load_mil_texts(&c, r, d);
  /* Findings name the MIL function when the file has one. */
  if (ok && c.mil[0]->nfuncs == 1) fn.name = (char *)(uintptr_t)c.mil[0]->funcs[0].name;
  if (ok) run_package_checkers(&c, false);
  ctx_free(&c);
  free(dir);
  return ok;
}
