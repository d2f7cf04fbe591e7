/*
 * libFuzzer target for the constraint table loader: any bytes must give a
 * table or an error that says why, never a crash, a hang or a leak. A table
 * that loads must keep the loader's promises (ids ANE + three digits and
 * unique, a note exactly on disputed rules, every target filled in), and
 * everything generated from it (explanations, docs, an empty SARIF report)
 * must work; the SARIF must parse back as JSON.
 */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "orion/constraints.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  StrBuf diags;
  sb_init(&diags);
  Diag d;
  diag_init(&d, NULL);
  d.capture = &diags;
  d.error_limit = 0; /* every message, so that all of the loader runs */
  ConstraintTable *t = constraints_load("fuzz", (const char *)data, size, &d);
  if (!t) {
    if (!diags.len) abort(); /* a rejection must say why */
    sb_free(&diags);
    return 0;
  }
  if (diags.len || t->nrules == 0 || t->nrules > CONSTRAINTS_MAX_RULES) abort();
  for (uint32_t i = 0; i < t->nrules; i++) {
    const Constraint *c = &t->rules[i];
    if (strlen(c->id) != 6 || strncmp(c->id, "ANE", 3) || constraints_find(t, c->id) != c) abort();
    if (c->disputed != (c->dispute_note != NULL) || !c->checks || c->severity > DIAG_ERROR) abort();
  }
  for (int k = 0; k < CONSTRAINT_TARGET_COUNT; k++) {
    const ConstraintTarget *ct = constraints_target(t, (MilTarget)k);
    if (!ct->program_version || !ct->opset || !ct->min_surface_bytes || !ct->sram_budget_bytes) abort();
  }
  StrBuf out;
  sb_init(&out);
  for (uint32_t i = 0; i < t->nrules; i++) constraints_explain(t, &t->rules[i], &out);
  constraints_gen_docs(t, &out);
  out.len = 0;
  LintReport r;
  lint_report_init(&r, NULL);
  LintFinding f = {.rule = &t->rules[0], .severity = DIAG_ERROR, .path = "x.oir", .message = "m"};
  lint_report_add(&r, &f);
  lint_format_sarif(t, &r, &out);
  cJSON *j = cJSON_ParseWithLength(out.data, out.len);
  if (!j) abort();
  cJSON_Delete(j);
  out.len = 0;
  lint_format_text(&r, &out);
  lint_format_json(&r, &out);
  lint_report_free(&r);
  sb_free(&out);
  constraints_free(t);
  sb_free(&diags);
  return 0;
}
