/*
 * orion_ane_check (orion/ane_check.h): the shared ANE rules (orion/ane_rules.h)
 * on a loaded program, each violation an error through the caller's Diag.
 */
#include "orion/ane_check.h"

#include <stdlib.h>
#include <string.h>

#include "loader_internal.h"
#include "orion/ane_rules.h"

typedef struct CheckSink {
  Diag *d;
  uint32_t errors;
} CheckSink;

/* A statement the rule forbids reads as what would fail and why, in the
 * table's words; other findings keep the checker's. */
static void report(void *ctx, const AneRuleFinding *f) {
  CheckSink *s = ctx;
  int level = f->level == ANE_RULE_LEVEL ? (int)f->rule->severity : f->level;
  if (level != DIAG_ERROR) return; /* what would not fail is the linter's to say */
  s->errors++;
  if (f->op) {
    StrBuf why;
    sb_init(&why);
    ane_rule_summary_lower(f->rule, &why);
    diag_error(s->d, f->span, "%s would fail on the ANE: %s [%s]", f->op, why.data, f->rule->id);
    sb_free(&why);
  } else if (f->span.file) {
    diag_error(s->d, f->span, "%s [%s]", f->message, f->rule->id);
  } else {
    diag_error(s->d, (SrcSpan){0}, "%s: %s [%s]", f->path, f->message, f->rule->id);
  }
}

static const uint8_t *mapped_weight_file(void *ctx, const char *relpath, size_t *len, const char **err) {
  *err = NULL; /* not mapped: the rules library reads it */
  return orion_program_weight_file(ctx, relpath, len);
}

static AneRuleIo *rule_io(const OrionProgram *p, uint32_t fn, bool outputs, uint32_t *n) {
  *n = outputs ? orion_output_count(p, fn) : orion_input_count(p, fn);
  AneRuleIo *io = xcalloc(*n ? *n : 1, sizeof *io);
  for (uint32_t i = 0; i < *n; i++) {
    const OrionTensorInfo *t = outputs ? orion_output(p, fn, i) : orion_input(p, fn, i);
    io[i] = (AneRuleIo){.name = t->name, .mil_name = t->mil_name, .binding = t->binding,
                        .surface_bytes = t->surface_bytes};
  }
  return io;
}

/* The figures to check against: the target's, or the chip's (the options',
 * else the manifest's). False after reporting an unknown one. */
static bool pick_target(const ConstraintTable *t, const OrionProgram *p, uint32_t fn, const char *chip_name,
                        ConstraintTarget *out, Diag *d) {
  const Package *pkg = orion_program_manifest(p);
  const char *target_name = pkg ? pkg->target : orion_function_mil(p, fn)->opset;
  MilTarget target = MIL_IOS18;
  if (pkg && !mil_target_from_name(target_name, &target)) {
    diag_error(d, (SrcSpan){0}, "%s: unknown target '%s'", orion_program_path(p), target_name);
    return false;
  }
  /* A bare directory's opset names the target when it is one of the table's. */
  if (!pkg && target_name) (void)mil_target_from_name(target_name, &target);
  if (!chip_name && pkg) chip_name = pkg->chip;
  if (!chip_name) {
    *out = *constraints_target(t, target);
    return true;
  }
  const ConstraintChip *chip = constraints_chip(t, chip_name);
  if (!chip) {
    StrBuf known;
    sb_init(&known);
    constraints_chip_names(t, &known);
    diag_error(d, (SrcSpan){0}, "%s: chip '%s' is not one the constraint table knows (expected %s)",
               orion_program_path(p), chip_name, known.len ? known.data : "none");
    sb_free(&known);
    return false;
  }
  *out = constraints_chip_target(t, chip, target);
  return true;
}

bool orion_ane_check(const OrionProgram *p, uint32_t fn, const OrionAneCheckOptions *opt, Diag *d) {
  OrionAneCheckOptions defaults = {0};
  if (!opt) opt = &defaults;
  ConstraintTable *own = NULL;
  const ConstraintTable *t = opt->table;
  if (!t) {
    size_t len;
    const char *text = constraints_builtin_text(&len);
    /* The runtime links no passes: 'fixed_by' names are taken as written. */
    t = own = constraints_parse("ane_constraints.json", text, len, NULL, d);
    if (!t) return false;
  }
  ConstraintTarget target;
  bool ok = pick_target(t, p, fn, opt->chip, &target, d);
  if (ok) {
    const Package *pkg = orion_program_manifest(p);
    StrBuf manifest;
    sb_init(&manifest);
    if (pkg) sb_printf(&manifest, "%s/%s", orion_program_path(p), PACKAGE_MANIFEST);
    AneRuleFunction f = {.name = orion_function_name(p, fn), .program = orion_function_program(p, fn),
                         .funcs = orion_function_mil(p, fn), .nfuncs = 1};
    f.inputs = rule_io(p, fn, false, &f.ninputs);
    f.outputs = rule_io(p, fn, true, &f.noutputs);
    CheckSink sink = {.d = d};
    AneRuleInput in = {.table = t, .target = &target, .sources = d->sources, .dir = orion_program_path(p),
                       .manifest_path = pkg ? manifest.data : NULL, .functions = &f, .nfunctions = 1,
                       .weight_file = mapped_weight_file, .weight_ctx = (void *)(uintptr_t)p,
                       .sink = report, .sink_ctx = &sink};
    ane_rules_run(&in);
    ok = sink.errors == 0;
    free((void *)(uintptr_t)f.inputs);
    free((void *)(uintptr_t)f.outputs);
    sb_free(&manifest);
  }
  constraints_free(own);
  return ok;
}
