/*
 * The ANE constraint table and the linter built on it.
 *
 * constraints/ane_constraints.json lists the 20 constraints of the Orion
 * reference system (ANE001..ANE020) with their category, severity, symptom,
 * workaround, how each is checked, the pass that fixes it and whether reports
 * disagree, plus per-target data (minimum surface size, SRAM budget, tensor
 * dimension limit, MIL dialect). The file is embedded in the library at build
 * time, so no data file needs to be installed; constraints_load() validates
 * any table strictly (unknown or missing fields, wrong types, duplicate or
 * malformed ids, unknown ops and passes are errors naming the entry).
 *
 * The table and its loader are a library of their own (orion/constraint_table.h,
 * linked by the runtime too); the rest is the compiler's.
 *
 * The linter runs one checker per statically checkable rule, on the IR
 * (lint_ir: any stage, before or after legalization), on a written package
 * (lint_package: manifest, MIL text and weight file) or on a MIL file alone
 * (lint_mil_file); the package and MIL checkers are the compiler-free rules
 * library's (orion/ane_rules.h), which the runtime's orion_ane_check runs
 * too. Findings collect in a
 * LintReport and are printed as text (the diagnostics format with the rule id,
 * `file:line:col: error[ANE001]: ...`), JSON or SARIF 2.1.0.
 * See docs/constraints.md (generated from the table).
 */
#ifndef ORION_CONSTRAINTS_H
#define ORION_CONSTRAINTS_H

#include "orion/constraint_table.h"
#include "orion/ir.h"
#include "orion/mil.h"
#include "orion/package.h"

/* The same, with every 'fixed_by' checked against the pass registry. */
ConstraintTable *constraints_load(const char *name, const char *json, size_t len, Diag *d);
ConstraintTable *constraints_load_file(const char *path, Diag *d);
/* The table shipped with orion, validated like any other; a new object on
 * each call. */
ConstraintTable *constraints_builtin(Diag *d);

/* Everything the table says about one rule, for `orion-lint --explain`. */
void constraints_explain(const ConstraintTable *t, const Constraint *c, StrBuf *out);
/* docs/constraints.md, generated from the table. */
void constraints_gen_docs(const ConstraintTable *t, StrBuf *out);

/* ---- findings ---- */

typedef struct LintFinding {
  const Constraint *rule;
  DiagLevel severity;         /* as reported */
  DiagLevel unfixed_severity; /* what it would be if will_be_fixed were false */
  bool will_be_fixed;         /* rule->fixed_by is in the pipeline that runs next */
  bool unfixable;             /* the message says why rule->fixed_by cannot fix this one: never will_be_fixed */
  SrcSpan span;               /* into the report's sources; file 0: no source position */
  const char *path;           /* the file when span.file is 0 (e.g. a manifest), else NULL */
  const char *function;       /* the function it concerns, or NULL */
  const char *message;        /* lowercase, no trailing period */
} LintFinding;

/* A message about reading the input rather than a rule's finding (a parse
 * error, an unreadable file, MIL the reader rejects), kept so that the JSON
 * and SARIF reports carry it: a file that cannot be checked is not clean. */
typedef struct LintNotice {
  DiagLevel level;
  SrcSpan span;        /* into the report's sources; file 0: no source position */
  const char *path;    /* with span.file 0: the input it concerns, or NULL */
  const char *message; /* as the diagnostics module printed it, without the level */
} LintNotice;

typedef struct LintReport {
  SourceSet *sources; /* spans point into it (not owned) */
  Arena arena;        /* owns the findings' and notices' strings */
  LintFinding *items;
  uint32_t n, cap;
  LintNotice *notices; /* in the order reported */
  uint32_t nnotices, cap_notices;
} LintReport;

void lint_report_init(LintReport *r, SourceSet *sources);
void lint_report_free(LintReport *r);
/* Appends a copy of f (strings copied into r's arena). */
void lint_report_add(LintReport *r, const LintFinding *f);
/* Orders findings by file, position and rule (stable). */
void lint_report_sort(LintReport *r);
/* Findings at or above a level. */
uint32_t lint_report_count(const LintReport *r, DiagLevel at_least);
/* Appends a notice (strings copied; path is kept only when span.file is 0).
 * A caller gets them from a Diag.observe hook on the Diag it reads the input
 * with, whose sources are the report's. */
void lint_report_add_notice(LintReport *r, DiagLevel level, SrcSpan span, const char *path, const char *message);
/* Notices at the error level: the input was not completely checked. */
uint32_t lint_report_input_errors(const LintReport *r);

/* ---- running the checks ---- */

typedef struct LintSeverityOverride {
  const char *id;
  DiagLevel level;
} LintSeverityOverride;

typedef struct LintOptions {
  MilTarget target;     /* for IR checks (packages are checked against their own target) */
  const char *chip;     /* a chip of the table whose numbers IR checks use, or NULL (the target's) */
  const char *pipeline; /* passes that will run on the IR next, as a pipeline spec
                           ("inline,(dce,cast-fusion),..."): findings a listed pass fixes become
                           notes; NULL after legalization */
  const char *const *allow; /* rule ids whose findings are dropped */
  uint32_t nallow;
  const LintSeverityOverride *overrides; /* severities replacing the table's */
  uint32_t noverrides;
} LintOptions;

/* Checks that every id in o names a rule of t (errors through d). */
bool lint_options_check(const ConstraintTable *t, const LintOptions *o, Diag *d);

/* Runs the checkers of every static-ir rule over every live function of m
 * (verified IR, at any stage). Spans are the IR's, so r->sources must be the
 * SourceSet m was parsed into. */
void lint_ir(const ConstraintTable *t, IrModule *m, const LintOptions *o, LintReport *r);

/* Runs lint_ir on m (verified, as parsed) before the default pass pipeline
 * (PASSES_DEFAULT_PIPELINE: findings one of its passes fixes are notes with
 * will_be_fixed) and after it, as orionc compiles m: the passes get the
 * target's or o->chip's SRAM budget and minimum surface. A finding before
 * that is still there after is reported once, as after. When the pipeline
 * fails, its messages go to d's stream, *pipeline_failed is set and the
 * findings are those before it at their unfixed severity; returns false. */
bool lint_ir_compiled(const ConstraintTable *t, IrModule *m, const LintOptions *o, LintReport *r, Diag *d,
                      bool *pipeline_failed);

/* Runs the checkers of every static-package rule on a package read by
 * package_read(): its manifest, each function's MIL text (added to
 * r->sources so findings point into it) and the weight file. Returns false,
 * after reporting through d, if a file cannot be read or a MIL text is too
 * malformed to check. */
bool lint_package(const ConstraintTable *t, const Package *pkg, const LintOptions *o, LintReport *r, Diag *d);

/* Runs the package checkers that need only MIL text (and the weight files
 * it names, @model_path being the file's directory) on one MIL file, e.g.
 * one written by another tool; the manifest rules need a package. Returns
 * false, after reporting through d, if the file cannot be read or is too
 * malformed to check. */
bool lint_mil_file(const ConstraintTable *t, const char *path, const LintOptions *o, LintReport *r, Diag *d);

/* The checker registry: one entry per (rule, kind) the code checks. */
uint32_t lint_checker_count(void);
const char *lint_checker_rule(uint32_t i);
unsigned lint_checker_kind(uint32_t i); /* CHECK_STATIC_IR or CHECK_STATIC_PACKAGE */

/* ---- reporters ---- */

/* `file:line:col: error[ANE001]: message`, the source line and a caret,
 * then `note:` lines with the workaround and the fixing pass. */
void lint_format_text(const LintReport *r, StrBuf *out);
/* An object (docs/constraints.md, "Machine-readable reports"): the format
 * and its version, the tool, whether every input was checked, the findings
 * (every field, keys in a fixed order), the input errors and a summary
 * counting both by severity. Columns count bytes, as in the text format. */
#define LINT_JSON_FORMAT_VERSION 1u
void lint_format_json(const LintReport *r, StrBuf *out);
/* SARIF 2.1.0: one run of the tool "orion-lint" with every rule of t (each
 * with a helpUri into docs/constraints.md), the findings and input errors
 * as results, the notices as the invocation's toolExecutionNotifications;
 * columns count Unicode code points (columnKind "unicodeCodePoints"). */
void lint_format_sarif(const ConstraintTable *t, const LintReport *r, StrBuf *out);
/* The anchor of a rule's section in docs/constraints.md ("ane001-no-concat"). */
void constraints_doc_anchor(const Constraint *c, StrBuf *out);

#endif
