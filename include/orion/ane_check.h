/*
 * The ANE failure simulation: before a loaded program runs on any backend,
 * report what would fail on the ANE for a known reason. It runs the rules of
 * the constraint table that a program decides (orion/ane_rules.h, the same
 * checkers orion-lint runs on packages and .mil files): the MIL rules on
 * every program (rejected ops, a masked attention, conv with a bias,
 * BLOBFILE records, matmul's transpose flags, returned names), and the
 * manifest rules (surface sizes, binding order) where there is a manifest.
 * The figures are the table's for the package's target and chip (its
 * manifest's Chip, as orion-lint uses them) unless the options name a chip.
 *
 * orion-run calls it before preparing a function (--no-ane-checks skips
 * it); a library user does the same: open, orion_ane_check, then
 * orion_backend_prepare. See docs/runtime-api.md.
 */
#ifndef ORION_ANE_CHECK_H
#define ORION_ANE_CHECK_H

#include "orion/constraint_table.h"
#include "orion/runtime.h"

typedef struct OrionAneCheckOptions {
  const char *chip;             /* a chip of the table; NULL: the manifest's Chip, else the target's figures */
  const ConstraintTable *table; /* NULL: the table built into orion */
} OrionAneCheckOptions;

/* Checks function fn of p (options may be NULL). Each violation is reported
 * once through d as an error with the rule id in brackets: at the MIL
 * statement ("concat would fail on the ANE: the ANE compiler rejects concat
 * [ANE001]"), or naming Manifest.plist. d must have the SourceSet p was
 * opened with. Returns true when nothing would fail; false after reporting
 * the violations, or an unknown chip or target. */
bool orion_ane_check(const OrionProgram *p, uint32_t fn, const OrionAneCheckOptions *opt, Diag *d);

#endif
