/*
 * Linting a graph the way orionc compiles it: the IR checks before the
 * default pass pipeline (a finding that a pass of it fixes is a note marked
 * will_be_fixed) and after it, the passes planning with the target's or the
 * chip's numbers as orionc's do, so that orion-lint on a .oir file and
 * orionc's check after its passes see the same program and report the same
 * rules at the same severities.
 */
#include <string.h>

#include "lint_internal.h"
#include "orion/passes.h"

static bool same_place(const LintFinding *a, const LintFinding *b) {
  return a->rule == b->rule && a->span.file == b->span.file && a->span.start == b->span.start;
}

bool lint_ir_compiled(const ConstraintTable *t, IrModule *m, const LintOptions *o, LintReport *out, Diag *d,
                      bool *pipeline_failed) {
  *pipeline_failed = false;
  LintOptions pre = *o;
  pre.pipeline = passes_pipeline(PASSES_DEFAULT_PIPELINE);
  LintReport before, after;
  lint_report_init(&before, out->sources);
  lint_report_init(&after, out->sources);
  lint_ir(t, m, &pre, &before);
  const ConstraintChip *chip = o->chip ? constraints_chip(t, o->chip) : NULL;
  ConstraintTarget target = chip ? constraints_chip_target(t, chip, o->target) : *constraints_target(t, o->target);
  PassManagerOptions po = {.pipeline = PASSES_DEFAULT_PIPELINE};
  if (target.sram_budget_bytes <= UINT32_MAX) po.pass_options.target_sram_bytes = (uint32_t)target.sram_budget_bytes;
  po.pass_options.target_min_surface_bytes = target.min_surface_bytes;
  po.pass_options.sram_checked_later = true;
  /* The passes' own messages repeat what the checks say; they are shown
   * only when the pipeline fails. */
  StrBuf passes_said;
  sb_init(&passes_said);
  Diag pd;
  diag_init(&pd, out->sources);
  pd.program = d->program;
  pd.capture = &passes_said;
  if (passes_run(m, &po, &pd)) {
    lint_ir(t, m, o, &after);
    /* A note that the pipeline fixes it, unless it is still there after. */
    for (uint32_t i = 0; i < before.n; i++) {
      if (!before.items[i].will_be_fixed) continue;
      bool again = false;
      for (uint32_t k = 0; k < after.n && !again; k++) again = same_place(&before.items[i], &after.items[k]);
      if (!again) lint_report_add(out, &before.items[i]);
    }
    for (uint32_t i = 0; i < after.n; i++) lint_report_add(out, &after.items[i]);
  } else {
    if (d->capture) sb_putn(d->capture, passes_said.data ? passes_said.data : "", passes_said.len);
    else fputs(passes_said.data ? passes_said.data : "", d->out);
    *pipeline_failed = true;
    for (uint32_t i = 0; i < before.n; i++) {
      LintFinding f = before.items[i];
      f.severity = f.unfixed_severity;
      f.will_be_fixed = false;
      lint_report_add(out, &f);
    }
  }
  sb_free(&passes_said);
  lint_report_free(&before);
  lint_report_free(&after);
  return !*pipeline_failed;
}
