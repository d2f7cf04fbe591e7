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
  /* For a backend that runs on the CPU what its device refuses statement by
   * statement (the ane backend's partition, docs/ane-backend.md): a
   * violation of a rule the table places on the CPU (its "placement":
   * "cpu", Constraint.placed_on_cpu) at a statement of the function is no
   * error but a remark, one per statement: "statement N (concat 'c') runs
   * on the CPU: ANE001, the ANE compiler rejects concat" (N indexes the MIL
   * function's statements, consts included). */
  bool cpu_placement;
  /* With cpu_placement, may be set: the caller's array of one entry per
   * statement of the MIL function, each set to the number of the rule that
   * places it on the CPU (1 for ANE001), 0 for none. */
  uint32_t *placed;
} OrionAneCheckOptions;

/* Checks function fn of p (options may be NULL). Each violation is reported
 * once through d as an error with the rule id in brackets: at the MIL
 * statement ("concat would fail on the ANE: the ANE compiler rejects concat
 * [ANE001]"), or naming Manifest.plist. d must have the SourceSet p was
 * opened with. Returns true when nothing would fail; false after reporting
 * the violations, or an unknown chip or target. */
bool orion_ane_check(const OrionProgram *p, uint32_t fn, const OrionAneCheckOptions *opt, Diag *d);

#endif
