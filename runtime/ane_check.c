/*
 * orion_ane_check (orion/ane_check.h): the shared ANE rules (orion/ane_rules.h)
 * on a loaded program, each violation an error through the caller's Diag.
 */
#include "orion/ane_check.h"

#include <stdlib.h>
#include <string.h>

#include "loader_internal.h"
#include "orion/ane_rules.h"

/* A violation, kept until all are known so that they are reported in
 * source order (the registry runs rule by rule). */
typedef struct Violation {
  SrcSpan span;
  uint32_t rule; /* Constraint.number */
  uint32_t index;
  bool placed; /* a remark: its statement runs on the CPU (OrionAneCheckOptions.cpu_placement) */
  char *message;
} Violation;

typedef struct CheckSink {
  Violation *v;
  uint32_t n, cap;
  const MilFunc *f;
  bool cpu_placement;
  uint32_t *placed; /* per statement of f: the rule placing it, 0 for none (owned) */
} CheckSink;

/* The statement of f whose text holds span, UINT32_MAX if none. */
static uint32_t stmt_at(const MilFunc *f, SrcSpan span) {
  for (uint32_t s = 0; f && s < f->nstmts; s++) {
    SrcSpan at = f->stmts[s].loc;
    if (at.file == span.file && at.start <= span.start && span.start < at.end) return s;
  }
  return UINT32_MAX;
}

/* A finding of a rule the table places on the CPU, at a statement: that
 * statement moves (once, for its first rule) instead of refusing the function. */
static bool place(CheckSink *s, const AneRuleFinding *f) {
  if (!s->cpu_placement || !f->rule->placed_on_cpu || !f->span.file) return false;
  uint32_t at = stmt_at(s->f, f->span);
  if (at == UINT32_MAX) return false;
  if (s->placed[at]) return true;
  s->placed[at] = f->rule->number;
  const MilStmt *st = &s->f->stmts[at];
  StrBuf msg;
  sb_init(&msg);
  sb_printf(&msg, "statement %u (%s '%s') runs on the CPU: %s, ", at, st->op, st->nresults ? st->results[0].name : "?",
            f->rule->id);
  ane_rule_summary_lower(f->rule, &msg);
  xgrow((void **)&s->v, sizeof *s->v, &s->cap, s->n + 1);
  s->v[s->n] = (Violation){.span = st->op_loc, .rule = f->rule->number, .index = s->n, .placed = true,
                           .message = msg.data};
  s->n++;
  return true;
}

/* A statement the rule forbids reads as what would fail and why, in the
 * table's words; other findings keep the checker's. */
static void collect(void *ctx, const AneRuleFinding *f) {
  CheckSink *s = ctx;
  int level = f->level == ANE_RULE_LEVEL ? (int)f->rule->severity : f->level;
  if (level != DIAG_ERROR) return; /* what would not fail is the linter's to say */
  if (place(s, f)) return;
  StrBuf msg;
  sb_init(&msg);
  if (f->op) {
    sb_printf(&msg, "%s would fail on the ANE: ", f->op);
    ane_rule_summary_lower(f->rule, &msg);
    sb_printf(&msg, " [%s]", f->rule->id);
  } else if (f->span.file) {
    sb_printf(&msg, "%s [%s]", f->message, f->rule->id);
  } else {
    sb_printf(&msg, "%s: %s [%s]", f->path, f->message, f->rule->id);
  }
  xgrow((void **)&s->v, sizeof *s->v, &s->cap, s->n + 1);
  s->v[s->n] = (Violation){.span = f->span, .rule = f->rule->number, .index = s->n, .message = msg.data};
  s->n++;
}

/* The manifest's first, then by position in the MIL, then by rule. */
static int by_place(const void *pa, const void *pb) {
  const Violation *a = pa, *b = pb;
  int c = (a->span.file > b->span.file) - (a->span.file < b->span.file);
  if (!c) c = (a->span.start > b->span.start) - (a->span.start < b->span.start);
  if (!c) c = (a->rule > b->rule) - (a->rule < b->rule);
  if (!c) c = (a->index > b->index) - (a->index < b->index);
  return c;
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
    CheckSink sink = {.f = f.funcs, .cpu_placement = opt->cpu_placement};
    sink.placed = xcalloc(f.funcs->nstmts + 1, sizeof *sink.placed);
    AneRuleInput in = {.table = t, .target = &target, .sources = d->sources, .dir = orion_program_path(p),
                       .manifest_path = pkg ? manifest.data : NULL, .functions = &f, .nfunctions = 1,
                       .weight_file = mapped_weight_file, .weight_ctx = (void *)(uintptr_t)p,
                       .sink = collect, .sink_ctx = &sink};
    ane_rules_run(&in);
    if (sink.n > 1) qsort(sink.v, sink.n, sizeof *sink.v, by_place);
    uint32_t refused = 0;
    for (uint32_t i = 0; i < sink.n; i++) {
      if (sink.v[i].placed) diag_remark(d, sink.v[i].span, "%s", sink.v[i].message);
      else diag_error(d, sink.v[i].span, "%s", sink.v[i].message);
      refused += !sink.v[i].placed;
      free(sink.v[i].message);
    }
    free(sink.v);
    if (opt->placed) memcpy(opt->placed, sink.placed, f.funcs->nstmts * sizeof *sink.placed);
    free(sink.placed);
    ok = refused == 0;
    free((void *)(uintptr_t)f.inputs);
    free((void *)(uintptr_t)f.outputs);
    sb_free(&manifest);
  }
  constraints_free(own);
  return ok;
}
