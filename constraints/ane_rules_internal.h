/*
 * What the package/MIL rule checkers (check_package.c) share with the
 * registry that runs them (ane_rules.c): the context a checker runs in and
 * how it reports.
 */
#ifndef ORION_ANE_RULES_INTERNAL_H
#define ORION_ANE_RULES_INTERNAL_H

#include "orion/ane_rules.h"

typedef struct AneWeightFile AneWeightFile;

typedef struct AneRuleCtx {
  const AneRuleInput *in;
  const Constraint *rule;         /* the rule being checked */
  const ConstraintTarget *target; /* in->target */
  const AneRuleFunction *fn;      /* the function being checked */
  AneWeightFile *weights;         /* weight files read so far (BLOBFILE targets) */
  uint32_t nweights, cap_weights;
} AneRuleCtx;

/* Reports a finding of c->rule about c->fn at `level` (ANE_RULE_LEVEL or a
 * DiagLevel). `span` locates it in the MIL; with span.file 0, `path` names
 * the file. `op` is set for a statement the rule forbids outright. */
void ane_rule_emit(AneRuleCtx *c, int level, SrcSpan span, const char *path, const char *op, const char *fmt, ...)
    ORION_PRINTF(6, 7);

/* Weight file bytes for a package-relative path (read once, then cached);
 * NULL with err set if it cannot be read. */
const uint8_t *ane_rule_weight_file(AneRuleCtx *c, const char *relpath, size_t *len, const char **err);

typedef void (*AneRuleCheck)(AneRuleCtx *c);

/* The checkers (check_package.c), of c->fn. */
void check_pkg_concat(AneRuleCtx *c);           /* ANE001 */
void check_pkg_uniform_outputs(AneRuleCtx *c);  /* ANE002 */
void check_pkg_output_order(AneRuleCtx *c);     /* ANE003 */
void check_pkg_min_surface(AneRuleCtx *c);      /* ANE004 */
void check_pkg_sdpa_mask(AneRuleCtx *c);        /* ANE006 */
void check_pkg_blobfile(AneRuleCtx *c);         /* ANE008 */
void check_pkg_gelu(AneRuleCtx *c);             /* ANE010 */
void check_pkg_transpose_consts(AneRuleCtx *c); /* ANE012 */
void check_pkg_conv_bias(AneRuleCtx *c);        /* ANE013 */
void check_pkg_returns(AneRuleCtx *c);          /* ANE014 */
void check_pkg_uniform_inputs(AneRuleCtx *c);   /* ANE018 */
void check_pkg_input_order(AneRuleCtx *c);      /* ANE019 */

#endif
