/*
 * Human-readable views of the table: `orion-lint --explain ID` (one rule,
 * plain text wrapped for a terminal) and docs/constraints.md (the whole table
 * as Markdown). The Markdown is generated, never edited by hand: a test
 * compares the committed file with this output.
 */
#include <string.h>

#include "lint_internal.h"
#include "orion/ane_rules.h"

#define WRAP_COLUMNS 78

/* Appends text wrapped at word boundaries, each line indented. */
static void put_wrapped(StrBuf *out, const char *text, int indent) {
  int col = 0;
  const char *p = text;
  while (*p) {
    size_t n = strcspn(p, " ");
    if (col > indent && col + 1 + (int)n > WRAP_COLUMNS) {
      sb_putc(out, '\n');
      col = 0;
    }
    if (col == 0) {
      sb_printf(out, "%*s", indent, "");
      col = indent;
    } else {
      sb_putc(out, ' ');
      col++;
    }
    sb_putn(out, p, n);
    col += (int)n;
    p += n;
    while (*p == ' ') p++;
  }
  sb_putc(out, '\n');
}

static void put_param_value(StrBuf *out, const ConstraintTarget *ct, ConstraintParamId id) {
  switch (id) {
  case PARAM_PROGRAM_VERSION: sb_puts(out, ct->program_version); break;
  case PARAM_OPSET: sb_puts(out, ct->opset); break;
  case PARAM_MIN_SURFACE_BYTES: sb_printf(out, "%llu", (unsigned long long)ct->min_surface_bytes); break;
  case PARAM_SRAM_BUDGET_BYTES: sb_printf(out, "%llu", (unsigned long long)ct->sram_budget_bytes); break;
  case PARAM_MAX_TENSOR_DIM: sb_printf(out, "%llu", (unsigned long long)ct->max_tensor_dim); break;
  case PARAM_COUNT: break;
  }
}

/* A chip's figure for a numeric parameter, or NULL (the dialect parameters
 * come from the chip's target). */
static const ConstraintChipValue *chip_value(const ConstraintChip *chip, ConstraintParamId id) {
  switch (id) {
  case PARAM_MIN_SURFACE_BYTES: return &chip->min_surface_bytes;
  case PARAM_SRAM_BUDGET_BYTES: return &chip->sram_budget_bytes;
  case PARAM_MAX_TENSOR_DIM: return &chip->max_tensor_dim;
  case PARAM_PROGRAM_VERSION:
  case PARAM_OPSET:
  case PARAM_COUNT: break;
  }
  return NULL;
}

static void put_ops(StrBuf *out, const Constraint *c, const char *quote) {
  if (!c->nops) sb_puts(out, "-");
  for (uint32_t i = 0; i < c->nops; i++) sb_printf(out, "%s%s%s%s", i ? ", " : "", quote, ir_op_info(c->ops[i])->name, quote);
}

/* Where the rule is checked, from the checker registries (the linter's IR
 * checkers, the shared package/MIL rules). */
static void put_where(StrBuf *out, const Constraint *c) {
  bool ir = false;
  for (uint32_t k = 0; k < lint_checker_count(); k++)
    ir |= lint_checker_kind(k) == CHECK_STATIC_IR && !strcmp(lint_checker_rule(k), c->id);
  const char *sep = "";
  if (ir) {
    sb_puts(out, "`orionc` and `orion-lint` on the graph");
    sep = "; ";
  }
  uint32_t e = ane_rule_find(c->id);
  AneRuleNeeds needs = e == UINT32_MAX ? ANE_RULE_AT_RUN : ane_rule_needs(e);
  if (e != UINT32_MAX && needs == ANE_RULE_MIL)
    sb_printf(out, "%s`orion-lint` on packages and `.mil` files, and before every run (`orion-run`, "
                   "`orion_ane_check`)", sep);
  else if (e != UINT32_MAX && needs == ANE_RULE_MANIFEST)
    sb_printf(out, "%s`orion-lint` on packages, and before a package runs (`orion-run`, `orion_ane_check`)", sep);
  else if (e != UINT32_MAX)
    sb_printf(out, "%snot before a run: %s", sep, ane_rule_at_run_reason(e));
  else if (!ir)
    sb_puts(out, "nowhere: documented only");
}

void constraints_explain(const ConstraintTable *t, const Constraint *c, StrBuf *out) {
  sb_printf(out, "%s: %s\n", c->id, c->name);
  put_wrapped(out, c->summary, 0);
  sb_printf(out, "\n  category   %s\n  severity   %s\n  checked    ", constraint_category_name(c->category),
            constraint_severity_name(c->severity));
  constraint_checks_print(c->checks, out);
  sb_puts(out, "\n  ops        ");
  put_ops(out, c, "");
  sb_printf(out, "\n  fixed by   %s\n  source     %s\n  disputed   %s\n", c->fixed_by ? c->fixed_by : "-", c->source,
            c->disputed ? "yes" : "no");
  if (c->placed_on_cpu) sb_puts(out, "  placement  cpu (the ane backend runs a statement that breaks it on the CPU)\n");
  sb_puts(out, "\nsymptom\n");
  put_wrapped(out, c->symptom, 2);
  sb_puts(out, "\nworkaround\n");
  put_wrapped(out, c->workaround, 2);
  if (c->disputed) {
    sb_puts(out, "\nwhere reports disagree\n");
    put_wrapped(out, c->dispute_note, 2);
  }
  if (c->notes) {
    sb_puts(out, "\nnotes\n");
    put_wrapped(out, c->notes, 2);
  }
  if (c->nfigures) sb_puts(out, "\nfigures (what the runtime tracks)\n");
  for (uint32_t i = 0; i < c->nfigures; i++)
    sb_printf(out, "  %s: %llu\n", c->figures[i].name, (unsigned long long)c->figures[i].value);
  bool header = false;
  for (int i = 0; i < PARAM_COUNT; i++) {
    const ConstraintParam *p = &t->params[i];
    if (!p->rule || strcmp(p->rule, c->id)) continue;
    if (!header) sb_puts(out, "\ntarget data (ios16 / ios17 / ios18)\n");
    header = true;
    sb_printf(out, "  %s: ", p->name);
    for (int k = 0; k < CONSTRAINT_TARGET_COUNT; k++) {
      if (k) sb_puts(out, " / ");
      put_param_value(out, &t->targets[k], (ConstraintParamId)i);
    }
    sb_printf(out, "%s%s\n", p->unit[0] ? " " : "", p->unit);
    if (p->disputed) put_wrapped(out, p->dispute_note, 4);
  }
  /* Then each chip's figure for those parameters, with where it comes from. */
  header = false;
  for (int i = 0; i < PARAM_COUNT; i++) {
    const ConstraintParam *p = &t->params[i];
    if (!p->rule || strcmp(p->rule, c->id) || !t->nchips || !chip_value(&t->chips[0], (ConstraintParamId)i)) continue;
    if (!header) sb_puts(out, "\nchip data (--chip=NAME)\n");
    header = true;
    sb_printf(out, "  %s:\n", p->name);
    for (uint32_t k = 0; k < t->nchips; k++) {
      const ConstraintChipValue *v = chip_value(&t->chips[k], (ConstraintParamId)i);
      sb_printf(out, "    %s: %llu%s%s%s\n", t->chips[k].name, (unsigned long long)v->value, p->unit[0] ? " " : "", p->unit,
                v->inherited ? " (the target's default)" : "");
      StrBuf line;
      sb_init(&line);
      sb_printf(&line, "source: %s", v->source ? v->source : "-");
      put_wrapped(out, line.data, 6);
      if (v->disputed) {
        line.len = 0;
        sb_printf(&line, "disputed: %s", v->dispute_note ? v->dispute_note : "-");
        put_wrapped(out, line.data, 6);
      }
      sb_free(&line);
    }
  }
}

/* ---- Markdown ---- */

/* Text in Markdown: characters that would start markup are escaped ('_'
 * only at the start of a word, where it could open emphasis). */
static void md(StrBuf *out, const char *s) {
  for (const char *p = s; *p; p++) {
    bool word_start = p == s || !((p[-1] >= 'a' && p[-1] <= 'z') || (p[-1] >= 'A' && p[-1] <= 'Z') ||
                                  (p[-1] >= '0' && p[-1] <= '9'));
    if (*p == '|') sb_puts(out, "\\|");
    else if (*p == '<') sb_puts(out, "&lt;");
    else if (*p == '>') sb_puts(out, "&gt;");
    else if (*p == '*' || *p == '`' || *p == '\\' || (*p == '_' && word_start)) {
      sb_putc(out, '\\');
      sb_putc(out, *p);
    } else sb_putc(out, *p);
  }
}

/* md() ending in a full stop (unless the text already ends a sentence). */
static void md_sentence(StrBuf *out, const char *s) {
  md(out, s);
  size_t n = strlen(s);
  if (!n || !strchr(".!?", s[n - 1])) sb_putc(out, '.');
}

/* GitHub's heading anchor of "ANE001: no-concat". */
/* GitHub's anchor of the heading "## ANE001: no-concat" that the page gives each rule. */
void constraints_doc_anchor(const Constraint *c, StrBuf *out) {
  for (const char *s = c->id; *s; s++) sb_putc(out, (char)(*s >= 'A' && *s <= 'Z' ? *s - 'A' + 'a' : *s));
  sb_printf(out, "-%s", c->name);
}

/* One chip value's provenance: "value: source (inherited) Disputed: note." */
static void put_chip_value_note(StrBuf *out, const char *name, const ConstraintChipValue *v) {
  sb_printf(out, "  - `%s`: ", name);
  if (v->inherited) sb_puts(out, "inherits the default: ");
  md_sentence(out, v->source);
  if (v->disputed) {
    sb_puts(out, " Disputed: ");
    md_sentence(out, v->dispute_note);
  }
  sb_putc(out, '\n');
}

/* The chips section: a table of the numbers, then each value's source. */
static void put_chips(const ConstraintTable *t, StrBuf *out) {
  if (!t->nchips) return;
  sb_puts(out, "\n## Chips\n\n"
               "`orionc --chip=NAME` and `orion-lint --chip=NAME` take the chip's target as the default `--target`\n"
               "(a newer `--target` is a usage error), and its SRAM budget and minimum surface instead of the\n"
               "target's (nothing checks tensor extents against `max_tensor_dim` yet). An inherited value\n"
               "(marked *) is the target's default, kept because no report gives a figure for that chip.\n\n"
               "| chip | generation | newest target | `min_surface_bytes` | `sram_budget_bytes` | `max_tensor_dim` |\n"
               "|---|---|---|---|---|---|\n");
  for (uint32_t i = 0; i < t->nchips; i++) {
    const ConstraintChip *c = &t->chips[i];
    sb_printf(out, "| `%s` | ", c->name);
    md(out, c->description);
    sb_printf(out, " | %s%s | %llu%s | %llu%s | %llu%s |\n", mil_target_name(c->target), c->dialect.disputed ? " (disputed)" : "",
              (unsigned long long)c->min_surface_bytes.value, c->min_surface_bytes.inherited ? " \\*" : "",
              (unsigned long long)c->sram_budget_bytes.value, c->sram_budget_bytes.inherited ? " \\*" : "",
              (unsigned long long)c->max_tensor_dim.value, c->max_tensor_dim.inherited ? " \\*" : "");
  }
  sb_putc(out, '\n');
  for (uint32_t i = 0; i < t->nchips; i++) {
    const ConstraintChip *c = &t->chips[i];
    sb_printf(out, "- `%s`:\n", c->name);
    put_chip_value_note(out, "target", &c->dialect);
    put_chip_value_note(out, "min_surface_bytes", &c->min_surface_bytes);
    put_chip_value_note(out, "sram_budget_bytes", &c->sram_budget_bytes);
    put_chip_value_note(out, "max_tensor_dim", &c->max_tensor_dim);
  }
}

void constraints_gen_docs(const ConstraintTable *t, StrBuf *out) {
  sb_puts(out,
          "# ANE constraints\n"
          "\n"
          "<!-- Generated from constraints/ane_constraints.json by `orion-lint --gen-docs`; do not edit by hand.\n"
          "     A test fails when this file and the table disagree. -->\n"
          "\n");
  md(out, t->description);
  sb_puts(out,
          "\n\n"
          "Each rule has a stable id, a category (what goes wrong), a severity (of a violation that reaches\n"
          "the device), how it can be checked (`static-ir`: from the graph; `static-package`: from a written\n"
          "package; `runtime`: only when the program runs; `advisory`: not checkable), the pass that fixes it\n"
          "where one does, its source, and whether reports disagree.\n"
          "\n"
          "## Checking a graph, a package or MIL text\n"
          "\n"
          "```sh\n"
          "orion-lint model.oir                 # before and after orionc's pass pipeline\n"
          "orion-lint model.anepkg              # a written package: manifest, MIL, weights\n"
          "orion-lint model.mil                 # MIL text alone (from any tool): the MIL checks\n"
          "orion-lint --format=sarif model.oir  # for CI code scanning (also --format=json)\n"
          "orion-lint --explain ANE007          # everything about one rule\n"
          "```\n"
          "\n"
          "For a `.oir` file the IR checks run twice: before orionc's default pass pipeline (`O1`), where a\n"
          "problem that one of its passes fixes is a note (`will_be_fixed`; the text report says \"fixed by pass\n"
          "'P', which runs next\"), and after it, where whatever is left is reported at its severity, the\n"
          "passes planning with the target's or chip's numbers as orionc's do; so `orion-lint` and `orionc`\n"
          "see the same program. One difference is deliberate: for a compile `orionc` reports ANE004 on a\n"
          "graph as a note (its package writer pads every surface), `orion-lint` as a warning. A `.mil` file gets the `static-package` checks that need only MIL text (and the\n"
          "weight files its `BLOBFILE`s name, `@model_path` being the file's directory); the manifest rules\n"
          "need a package. MIL is read with the runtime's reader, so text it rejects, and an op that the MIL op\n"
          "table (`include/orion/mil_ops.def`) does not have and so no backend runs, is an error that keeps\n"
          "the text from being checked (exit status 2), as `orion-run` refuses to run it. `--allow=ID` drops a rule's findings, `--severity=ID=LEVEL` changes its severity,\n"
          "`--target=ios16|ios17|ios18` picks the target data below, and `--chip=NAME` a chip's figures\n"
          "instead (see Chips; its newest target is the default `--target`, a newer one and an unknown chip\n"
          "are usage errors). A package is checked with its own target and, unless `--chip` names another,\n"
          "the figures of the chip it was compiled for (its manifest's `Chip`; one the table does not know\n"
          "is an error). The exit status is 0 when no finding reaches `--fail-on` (default `error`),\n"
          "1 when one does, 2 for a usage error or unreadable input. `-ferror-limit=N` (default 20, 0 for none)\n"
          "stops the messages about unreadable input after N errors.\n"
          "\n"
          "### Machine-readable reports\n"
          "\n"
          "`--format=json` prints one object: `format` (`\"orion-lint\"`) and `format_version` (1), `tool`\n"
          "(`name`, `version`), `complete` (false when an input could not be read or checked), `findings`\n"
          "(each with `rule`, `name`, `severity`, `category`, `message`, `file`, `line`, `column`, `end_column`,\n"
          "`function`, `fixed_by`, `will_be_fixed`, `unfixed_severity`, `workaround`, `disputed`),\n"
          "`input_messages` (what the readers reported: `severity`, `message` and the same location fields) and\n"
          "`summary` (findings by severity, `will_be_fixed`, `input_errors`). Its columns count bytes, as the\n"
          "text report's do. A finding that a pass of the pipeline about to run fixes has `will_be_fixed`\n"
          "true and is a note.\n"
          "\n"
          "`--format=sarif` prints a SARIF 2.1.0 log (it validates against OASIS's schema) with one run: every\n"
          "rule of the table, each with a `helpUri` to its section of this page where `meson install` puts it\n"
          "(`share/doc/orion/constraints.md`); the findings as results (`willBeFixed` among their\n"
          "properties); `columnKind` `unicodeCodePoints` (columns count code points, not bytes); and one\n"
          "invocation whose `toolExecutionNotifications` are what the readers reported and whose\n"
          "`executionSuccessful` is false when an input could not be checked. Each such error (a `.oir` that\n"
          "does not parse, MIL the reader rejects, a broken manifest, a missing file) is also a result of\n"
          "rule `input-error` at its location, so code scanning shows it where it shows findings.\n"
          "\n"
          "## Before a run\n"
          "\n"
          "The runtime simulates the ANE's failure modes before a program runs on any backend\n"
          "(`orion_ane_check`, `orion/ane_check.h`; `orion-run` calls it unless `--no-ane-checks`): it runs\n"
          "the same checkers as `orion-lint` on packages, from one registry of the rules a program decides\n"
          "(`orion/ane_rules.h`). The MIL rules run on every program, a bare model directory included; the\n"
          "manifest rules where there is a manifest, with the figures of the package's target and chip.\n"
          "Every violation of an error rule is an error at its MIL statement or naming `Manifest.plist`,\n"
          "with the rule id in brackets. Each rule's **Checked by** line below says where it is checked;\n"
          "the test suite holds both registries to the table's `check` kinds.\n"
          "\n"
          "## Rules\n"
          "\n"
          "| id | name | category | severity | checked | fixed by | disputed |\n"
          "|---|---|---|---|---|---|---|\n");
  for (uint32_t i = 0; i < t->nrules; i++) {
    const Constraint *c = &t->rules[i];
    sb_printf(out, "| [%s](#", c->id);
    constraints_doc_anchor(c, out);
    sb_printf(out, ") | %s | %s | %s | ", c->name, constraint_category_name(c->category),
              constraint_severity_name(c->severity));
    constraint_checks_print(c->checks, out);
    sb_printf(out, " | %s%s%s | %s |\n", c->fixed_by ? "`" : "", c->fixed_by ? c->fixed_by : "-",
              c->fixed_by ? "`" : "", c->disputed ? "yes" : "no");
  }
  sb_puts(out, "\n## Target data\n\n| parameter | ios16 | ios17 | ios18 | unit | rule | disputed |\n"
               "|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < PARAM_COUNT; i++) {
    const ConstraintParam *p = &t->params[i];
    sb_printf(out, "| `%s` | ", p->name);
    for (int k = 0; k < CONSTRAINT_TARGET_COUNT; k++) {
      put_param_value(out, &t->targets[k], (ConstraintParamId)i);
      sb_puts(out, " | ");
    }
    sb_printf(out, "%s | %s | %s |\n", p->unit[0] ? p->unit : "-", p->rule ? p->rule : "-", p->disputed ? "yes" : "no");
  }
  sb_putc(out, '\n');
  for (int i = 0; i < PARAM_COUNT; i++) {
    const ConstraintParam *p = &t->params[i];
    sb_printf(out, "- `%s`: ", p->name);
    md_sentence(out, p->description);
    sb_puts(out, " Source: ");
    md_sentence(out, p->source);
    if (p->disputed) {
      sb_puts(out, " Disputed: ");
      md_sentence(out, p->dispute_note);
    }
    sb_putc(out, '\n');
  }
  put_chips(t, out);
  for (uint32_t i = 0; i < t->nrules; i++) {
    const Constraint *c = &t->rules[i];
    sb_printf(out, "\n## %s: %s\n\n", c->id, c->name);
    md_sentence(out, c->summary);
    sb_printf(out, "\n\n- **Category:** %s\n- **Severity:** %s\n- **Checked:** ", constraint_category_name(c->category),
              constraint_severity_name(c->severity));
    constraint_checks_print(c->checks, out);
    sb_puts(out, "\n- **Checked by:** ");
    put_where(out, c);
    sb_puts(out, "\n- **Ops:** ");
    put_ops(out, c, "`");
    sb_printf(out, "\n- **Fixed by:** %s%s%s\n", c->fixed_by ? "`" : "", c->fixed_by ? c->fixed_by : "-",
              c->fixed_by ? "`" : "");
    if (c->placed_on_cpu)
      sb_puts(out, "- **Placement:** `cpu`: the ane backend runs a statement that breaks it on the CPU "
                   "(docs/ane-backend.md)\n");
    sb_puts(out, "- **Source:** ");
    md(out, c->source);
    sb_puts(out, "\n\n**Symptom.** ");
    md_sentence(out, c->symptom);
    sb_puts(out, "\n\n**Workaround.** ");
    md_sentence(out, c->workaround);
    sb_putc(out, '\n');
    if (c->disputed) {
      sb_puts(out, "\n**Disputed.** ");
      md_sentence(out, c->dispute_note);
      sb_putc(out, '\n');
    }
    if (c->notes) {
      sb_puts(out, "\n**Notes.** ");
      md_sentence(out, c->notes);
      sb_putc(out, '\n');
    }
    if (c->nfigures) {
      sb_puts(out, "\n**Figures** (what the runtime tracks):");
      for (uint32_t k = 0; k < c->nfigures; k++)
        sb_printf(out, "%s `%s` = %llu", k ? "," : "", c->figures[k].name, (unsigned long long)c->figures[k].value);
      sb_puts(out, ".\n");
    }
  }
}
