/*
 * Internal interface of the linter: the context checkers run in, how they
 * report, and the checker signatures.
 *
 * The package checks read MIL text with the MIL reader (mil/), the one the
 * runtime loads programs with, in its tolerant mode: a program with the very
 * defects the rules describe (an undefined return name, an op given
 * arguments it does not take) is still read and checked, while text the
 * reader cannot read is reported with the reader's own first error, so the
 * linter and the runtime never disagree about a file.
 */
#ifndef ORION_LINT_INTERNAL_H
#define ORION_LINT_INTERNAL_H

#include "orion/constraints.h"
#include "orion/mil_reader.h"

/* ---- checking context ---- */

typedef struct LintCtx {
  const ConstraintTable *table;
  const LintOptions *opt;
  LintReport *report;
  const Constraint *rule;         /* the rule being checked */
  const ConstraintTarget *target; /* the target checked against (&chip_target with a chip) */
  ConstraintTarget chip_target;
  /* lint_ir */
  IrModule *m;
  /* lint_package */
  const Package *pkg;
  const char *manifest_path;
  MilProgram **mil;       /* per package function, read tolerantly (NULL entries never reach checkers) */
  uint32_t *mil_file;     /* per package function: SourceSet id of its MIL text */
  const char **mil_path;  /* per package function */
} LintCtx;

/* The severity of the rule (after the user's overrides). */
#define LINT_RULE_LEVEL (-1)

/* Reports a finding of c->rule at `level` (LINT_RULE_LEVEL, or a checker's
 * own level when it knows better, e.g. a warning because the package writer
 * pads), unless the rule is allowed. `span` locates it in a source; with
 * span.file 0, `path` names the file. */
void lint_emit(LintCtx *c, int level, SrcSpan span, const char *path, const char *function, const char *fmt, ...)
    ORION_PRINTF(6, 7);
/* lint_emit for a finding whose message says why the rule's pass cannot fix
 * it: it is not downgraded because that pass runs next, and the report does
 * not name the pass as the fix. */
void lint_emit_unfixable(LintCtx *c, int level, SrcSpan span, const char *path, const char *function,
                         const char *fmt, ...) ORION_PRINTF(6, 7);

typedef void (*LintIrCheck)(LintCtx *c, IrFuncId f);

/* IR checkers (check_ir.c). */
void check_ir_concat(LintCtx *c, IrFuncId f);         /* ANE001 */
void check_ir_min_surface(LintCtx *c, IrFuncId f);    /* ANE004 */
void check_ir_sdpa_mask(LintCtx *c, IrFuncId f);      /* ANE006 */
void check_ir_gelu(LintCtx *c, IrFuncId f);           /* ANE010 */
void check_ir_conv_bias(LintCtx *c, IrFuncId f);      /* ANE013 */
void check_ir_const_matmul(LintCtx *c, IrFuncId f);   /* ANE015 */
void check_ir_sram(LintCtx *c, IrFuncId f);           /* ANE016 */
void check_ir_fp32(LintCtx *c, IrFuncId f);           /* ANE017 */

/* The package checkers are the shared rules library's (orion/ane_rules.h,
 * check_package.c): lint_package and lint_mil_file run them. */

/* "1.5 MiB", "32 MiB", "3072 bytes" */
void lint_put_size(StrBuf *sb, uint64_t bytes);

#endif
