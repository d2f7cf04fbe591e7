/*
 * The constraint table and the linter: the shipped table (20 rules, ids,
 * targets agreeing with the rest of the toolchain, the generated docs being
 * current), every loader rejection with its exact message, the checker
 * registry against the table, each static rule with a violating input (its
 * exact finding) and a clean one (no finding), before and after
 * legalization, and the three reporters (text and JSON exactly, SARIF by
 * its required structure, parsed back).
 *
 * This file: the shipped table and the loader. The IR checks and the
 * reporters are in test_constraints_ir.c, the package and MIL file checks in
 * test_constraints_pkg.c; their shared helpers in constraints_check.c.
 */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "constraints_check.h"
#include "helpers.h"
#include "orion/constraints.h"
#include "orion/mil_reader.h"
#include "orion/package.h"
#include "orion/passes.h"

static const char *const rule_ane001 =
    "{\"id\": \"ANE001\", \"name\": \"no-concat\", \"summary\": \"The ANE compiler rejects concat\", "
    "\"category\": \"compile-failure\", \"severity\": \"error\", \"check\": [\"static-ir\"], \"ops\": [\"concat\"], "
    "\"symptom\": \"ANECCompile() FAILED\", \"workaround\": \"split it\", \"fixed_by\": \"split-concat\", "
    "\"source\": \"Orion #1\", \"disputed\": false}";

static const char *const param_doc =
    "{\"description\": \"d\", \"unit\": \"bytes\", \"rule\": null, \"source\": \"s\", \"disputed\": false}";

/* The test table's one chip: an inherited minimum surface, its own SRAM budget. */
static const char *const chip_target = "{\"value\": \"ios16\", \"inherited\": false, \"source\": \"PR #6\", \"disputed\": false}";
static const char *const chip_min_surface =
    "{\"value\": 49152, \"inherited\": true, \"source\": \"no figure\", \"disputed\": false}";
static const char *const chip_sram =
    "{\"value\": 2000000, \"inherited\": false, \"source\": \"ane-guide\", \"disputed\": true, \"dispute_note\": \"n\"}";
static const char *const chip_dim = "{\"value\": 16384, \"inherited\": false, \"source\": \"ane-guide\", \"disputed\": false}";

/* A complete valid table around the given rules. */
static char *table_json(const char *rules) {
  StrBuf sb;
  sb_init(&sb);
  sb_printf(&sb,
            "{\n  \"schema_version\": 1,\n  \"description\": \"test table\",\n  \"parameters\": {"
            "\"program_version\": %s, \"opset\": %s, \"min_surface_bytes\": %s, \"sram_budget_bytes\": %s, "
            "\"max_tensor_dim\": %s},\n  \"targets\": {",
            param_doc, param_doc, param_doc, param_doc, param_doc);
  const char *names[] = {"ios16", "ios17", "ios18"};
  for (int i = 0; i < 3; i++)
    sb_printf(&sb,
              "%s\"%s\": {\"program_version\": \"1.0\", \"opset\": \"%s\", \"min_surface_bytes\": 49152, "
              "\"sram_budget_bytes\": 33554432, \"max_tensor_dim\": 16384}",
              i ? ", " : "", names[i], names[i]);
  sb_printf(&sb, "},\n  \"chips\": {\"m1\": {\"description\": \"M1\", \"target\": %s, \"min_surface_bytes\": %s, "
            "\"sram_budget_bytes\": %s, \"max_tensor_dim\": %s}},\n  \"constraints\": [%s]\n}\n",
            chip_target, chip_min_surface, chip_sram, chip_dim, rules);
  return sb.data;
}

/* The loader's messages for a table ("" if it loads). */
static const char *load_errors(const char *json) {
  static char buf[8192];
  StrBuf sb;
  sb_init(&sb);
  Diag d;
  diag_init(&d, NULL);
  d.capture = &sb;
  d.program = "lint";
  ConstraintTable *t = constraints_load("t.json", json, strlen(json), &d);
  cr_assert((t != NULL) == (sb.len == 0), "a table loads exactly when nothing is reported:\n%s", sb.data);
  snprintf(buf, sizeof buf, "%s", sb.data ? sb.data : "");
  constraints_free(t);
  sb_free(&sb);
  return buf;
}

/* The loader's message for ANE001 with one substitution. */
static const char *rule_error(const char *from, const char *to) {
  char *rule = subst(rule_ane001, from, to);
  char *json = table_json(rule);
  const char *r = load_errors(json);
  free(rule);
  free(json);
  return r;
}

/* ---- the shipped table ---- */

Test(table, shipped_has_twenty_rules_in_order) {
  ConstraintTable *t = builtin();
  cr_assert_eq(t->nrules, 20);
  for (uint32_t i = 0; i < t->nrules; i++) {
    char id[16];
    snprintf(id, sizeof id, "ANE%03u", i + 1);
    cr_assert_str_eq(t->rules[i].id, id);
    cr_assert_eq(t->rules[i].number, i + 1);
    for (uint32_t k = 0; k < i; k++) cr_assert_str_neq(t->rules[i].name, t->rules[k].name);
  }
  cr_assert_eq(t->schema_version, 1);
  constraints_free(t);
}

Test(table, shipped_rules_as_the_reference_reconciles_them) {
  ConstraintTable *t = builtin();
  const Constraint *c = constraints_find(t, "ANE001");
  cr_assert_str_eq(c->name, "no-concat");
  cr_assert_eq(c->category, CAT_COMPILE_FAILURE);
  cr_assert_eq(c->severity, DIAG_ERROR);
  cr_assert_eq(c->checks, CHECK_STATIC_IR | CHECK_STATIC_PACKAGE);
  cr_assert_eq(c->nops, 1);
  cr_assert_eq(c->ops[0], OP_CONCAT);
  cr_assert_str_eq(c->fixed_by, "split-concat");
  cr_assert(c->disputed);
  cr_assert_not_null(strstr(c->dispute_note, "maderix"));
  c = constraints_find(t, "ANE007");
  cr_assert(c->disputed && c->checks == CHECK_ADVISORY && !c->fixed_by);
  cr_assert_eq(constraints_find(t, "ANE010")->ops[0], OP_GELU);
  cr_assert_str_eq(constraints_find(t, "ANE006")->fixed_by, "decompose-attention");
  cr_assert_str_eq(constraints_find(t, "ANE013")->fixed_by, "split-conv-bias");
  cr_assert_str_eq(constraints_find(t, "ANE015")->fixed_by, "lower-linear");
  cr_assert_eq(constraints_find(t, "ANE017")->severity, DIAG_NOTE);
  cr_assert_eq(constraints_find(t, "ANE016")->category, CAT_PERFORMANCE);
  cr_assert_null(constraints_find(t, "ANE021"));
  /* Every disputed rule says why; every note-less rule is undisputed. */
  for (uint32_t i = 0; i < t->nrules; i++)
    cr_assert_eq(t->rules[i].disputed, t->rules[i].dispute_note != NULL, "%s", t->rules[i].id);
  constraints_free(t);
}

/* The table owns the per-target facts: the emitter and the package writer must agree with it. */
Test(table, targets_agree_with_the_toolchain) {
  ConstraintTable *t = builtin();
  for (int i = 0; i < CONSTRAINT_TARGET_COUNT; i++) {
    const ConstraintTarget *ct = constraints_target(t, (MilTarget)i);
    cr_assert_eq(ct->target, (MilTarget)i);
    cr_assert_str_eq(ct->program_version, mil_program_version((MilTarget)i));
    cr_assert_str_eq(ct->opset, mil_target_name((MilTarget)i));
    cr_assert_eq(ct->min_surface_bytes, target_info((MilTarget)i)->min_surface_bytes);
    cr_assert_eq(ct->sram_budget_bytes, 32u << 20);
    cr_assert_eq(ct->max_tensor_dim, 16384);
  }
  cr_assert_str_eq(t->params[PARAM_MIN_SURFACE_BYTES].rule, "ANE004");
  cr_assert(t->params[PARAM_MAX_TENSOR_DIM].disputed);
  constraints_free(t);
}

Test(table, every_static_rule_has_a_checker_and_every_checker_a_rule) {
  ConstraintTable *t = builtin();
  for (uint32_t i = 0; i < t->nrules; i++) {
    const Constraint *c = &t->rules[i];
    for (unsigned kind = CHECK_STATIC_IR; kind <= CHECK_STATIC_PACKAGE; kind <<= 1) {
      if (!(c->checks & kind)) continue;
      bool found = false;
      for (uint32_t k = 0; k < lint_checker_count(); k++)
        found |= !strcmp(lint_checker_rule(k), c->id) && lint_checker_kind(k) == kind;
      cr_assert(found, "%s is checked %s but no checker does it", c->id, kind == CHECK_STATIC_IR ? "static-ir" : "static-package");
    }
  }
  for (uint32_t k = 0; k < lint_checker_count(); k++) {
    const Constraint *c = constraints_find(t, lint_checker_rule(k));
    cr_assert_not_null(c, "checker %u names the unknown rule %s", k, lint_checker_rule(k));
    cr_assert(c->checks & lint_checker_kind(k), "checker of %s checks a kind the table does not list", c->id);
  }
  cr_assert_eq(lint_checker_count(), 20);
  constraints_free(t);
}

Test(table, docs_are_generated_from_the_table) {
  ConstraintTable *t = builtin();
  StrBuf sb;
  sb_init(&sb);
  constraints_gen_docs(t, &sb);
  char *text;
  size_t len;
  const char *err;
  cr_assert(read_file(ORION_SOURCE_ROOT "/docs/constraints.md", 1u << 24, &text, &len, &err), "%s", err);
  cr_assert(len == sb.len && !memcmp(text, sb.data, len),
            "docs/constraints.md is out of date: run orion-lint --gen-docs >docs/constraints.md");
  free(text);
  sb_free(&sb);
  constraints_free(t);
}

Test(table, explain_prints_the_whole_entry) {
  ConstraintTable *t = builtin();
  StrBuf sb;
  sb_init(&sb);
  constraints_explain(t, constraints_find(t, "ANE007"), &sb);
  cr_assert(!strncmp(sb.data, "ANE007: weights-baked-at-compile\nWeights are baked into the compiled program\n\n"
                              "  category   silent-wrong-data\n  severity   warning\n  checked    advisory\n"
                              "  ops        -\n  fixed by   -\n  source     Orion docs/ane_constraints.md #7 (maderix)\n"
                              "  disputed   yes\n\nsymptom\n  Rewriting a weight file",
                     220),
            "%s", sb.data);
  cr_assert_not_null(strstr(sb.data, "\nwhere reports disagree\n  Orion v2's unload-rewrite-reload"));
  sb_free(&sb);
  sb_init(&sb);
  constraints_explain(t, constraints_find(t, "ANE016"), &sb);
  cr_assert_not_null(strstr(sb.data, "\ntarget data (ios16 / ios17 / ios18)\n  sram_budget_bytes: 33554432 / 33554432 / 33554432 bytes\n"), "%s", sb.data);
  /* After the targets' figures, each chip's, with its source and dispute. */
  const char *chips = strstr(sb.data, "\nchip data (--chip=NAME)\n  sram_budget_bytes:\n"
                                      "    m1: 2000000 bytes\n"
                                      "      source: ane-guide: working-set threshold of about 2 MB on M1 (MB read as\n"
                                      "      10^6 bytes)\n"
                                      "      disputed: tinygrad (M1 era) reports a 4 MB L2");
  cr_assert_not_null(chips, "%s", sb.data);
  cr_assert(strstr(sb.data, "target data") < chips);
  cr_assert_not_null(strstr(chips, "\n    m2: 33554432 bytes (the target's default)\n      source: no SRAM figure for M2"), "%s", sb.data);
  cr_assert_not_null(strstr(chips, "\n    m4: 33554432 bytes\n      source: maderix"), "%s", sb.data);
  cr_assert_not_null(strstr(chips, "\n    m5: 4720000 bytes\n"), "%s", sb.data);
  sb_free(&sb);
  sb_init(&sb);
  constraints_explain(t, constraints_find(t, "ANE004"), &sb);
  cr_assert_not_null(strstr(sb.data, "\nchip data (--chip=NAME)\n  min_surface_bytes:\n    m1: 49152 bytes (the target's default)\n"
                                     "      source: no report ties a minimum surface to a chip"),
                     "%s", sb.data);
  sb_free(&sb);
  sb_init(&sb);
  constraints_explain(t, constraints_find(t, "ANE007"), &sb);
  cr_assert_null(strstr(sb.data, "chip data"), "a rule without per-chip figures has none: %s", sb.data);
  sb_free(&sb);
  constraints_free(t);
}

/* ---- loader rejections ---- */

Test(loader, minimal_table_loads) {
  char *json = table_json(rule_ane001);
  cr_assert_str_eq(load_errors(json), "");
  free(json);
}

Test(loader, unknown_field) {
  cr_assert_str_eq(rule_error("\"disputed\": false", "\"disputed\": false, \"colour\": \"red\""),
                   "lint: error: t.json: constraint ANE001: unknown field 'colour'\n");
}

Test(loader, duplicate_field) {
  cr_assert_str_eq(rule_error("\"disputed\": false", "\"disputed\": false, \"name\": \"again\""),
                   "lint: error: t.json: constraint ANE001: duplicate field 'name'\n");
}

Test(loader, duplicate_id) {
  StrBuf rules;
  sb_init(&rules);
  sb_printf(&rules, "%s, %s", rule_ane001, rule_ane001);
  char *json = table_json(rules.data);
  cr_assert_str_eq(load_errors(json), "lint: error: t.json: constraint #2: duplicate id 'ANE001' (constraint #1 has it)\n");
  free(json);
  sb_free(&rules);
}

Test(loader, bad_ids) {
  cr_assert_str_eq(rule_error("\"ANE001\"", "\"ANE01\""),
                   "lint: error: t.json: constraint #1: id 'ANE01' does not match ANE followed by three digits\n");
  cr_assert_str_eq(rule_error("\"ANE001\"", "\"ane001\""),
                   "lint: error: t.json: constraint #1: id 'ane001' does not match ANE followed by three digits\n");
  cr_assert_str_eq(rule_error("\"ANE001\"", "\"ANE0001\""),
                   "lint: error: t.json: constraint #1: id 'ANE0001' does not match ANE followed by three digits\n");
  cr_assert_str_eq(rule_error("\"ANE001\"", "1"), "lint: error: t.json: constraint #1: 'id' must be a string\n");
  cr_assert_str_eq(rule_error("\"id\": \"ANE001\", ", ""), "lint: error: t.json: constraint #1: missing field 'id'\n");
}

Test(loader, unknown_op) {
  cr_assert_str_eq(rule_error("[\"concat\"]", "[\"concatenate\"]"),
                   "lint: error: t.json: constraint ANE001: unknown op 'concatenate' in 'ops'\n");
  cr_assert_str_eq(rule_error("[\"concat\"]", "[\"concat\", \"concat\"]"),
                   "lint: error: t.json: constraint ANE001: op 'concat' listed twice in 'ops'\n");
}

Test(loader, unknown_pass) {
  cr_assert_str_eq(rule_error("\"split-concat\"", "\"split-concats\""),
                   "lint: error: t.json: constraint ANE001: unknown pass 'split-concats' in 'fixed_by'\n");
  cr_assert_str_eq(rule_error("\"split-concat\"", "null"), "");
}

/* "placement": "cpu" on a rule checked from the written program, nothing else. */
Test(loader, placement) {
  cr_assert_str_eq(rule_error("[\"static-ir\"]", "[\"static-ir\", \"static-package\"], \"placement\": \"cpu\""), "");
  cr_assert_str_eq(rule_error("[\"static-ir\"]", "[\"static-ir\"], \"placement\": \"cpu\""),
                   "lint: error: t.json: constraint ANE001: 'placement' needs a rule checked from the written program "
                   "(static-package)\n");
  cr_assert_str_eq(rule_error("[\"static-ir\"]", "[\"static-package\"], \"placement\": \"ane\""),
                   "lint: error: t.json: constraint ANE001: 'placement' must be the string \"cpu\"\n");
  cr_assert_str_eq(rule_error("[\"static-ir\"]", "[\"static-package\"], \"placement\": true"),
                   "lint: error: t.json: constraint ANE001: 'placement' must be the string \"cpu\"\n");
}

/* The shipped table places the statement rules the device refuses on the CPU, and no rule about the whole
 * program or the surfaces. */
Test(table, placement_of_the_shipped_rules) {
  ConstraintTable *t = builtin();
  StrBuf placed;
  sb_init(&placed);
  for (uint32_t i = 0; i < t->nrules; i++)
    if (t->rules[i].placed_on_cpu) sb_printf(&placed, "%s%s", placed.len ? " " : "", t->rules[i].id);
  cr_assert_str_eq(placed.data, "ANE001 ANE006 ANE010 ANE012 ANE013");
  sb_free(&placed);
  constraints_free(t);
}

Test(loader, missing_field) {
  cr_assert_str_eq(rule_error("\"workaround\": \"split it\", ", ""),
                   "lint: error: t.json: constraint ANE001: missing field 'workaround'\n");
  cr_assert_str_eq(rule_error("\"fixed_by\": \"split-concat\", ", ""),
                   "lint: error: t.json: constraint ANE001: missing field 'fixed_by'\n");
}

Test(loader, wrong_types) {
  cr_assert_str_eq(rule_error("\"disputed\": false", "\"disputed\": \"no\""),
                   "lint: error: t.json: constraint ANE001: 'disputed' must be a boolean\n");
  cr_assert_str_eq(rule_error("[\"concat\"]", "\"concat\""),
                   "lint: error: t.json: constraint ANE001: 'ops' must be an array of strings\n");
  cr_assert_str_eq(rule_error("[\"concat\"]", "[1]"),
                   "lint: error: t.json: constraint ANE001: 'ops' must be an array of strings\n");
  cr_assert_str_eq(rule_error("\"split-concat\"", "3"),
                   "lint: error: t.json: constraint ANE001: 'fixed_by' must be a string or null\n");
  cr_assert_str_eq(rule_error("\"split it\"", "\"\""),
                   "lint: error: t.json: constraint ANE001: 'workaround' must be a non-empty string\n");
  cr_assert_str_eq(rule_error("[\"static-ir\"]", "[]"), "lint: error: t.json: constraint ANE001: 'check' must not be empty\n");
  cr_assert_str_eq(rule_error("[\"static-ir\"]", "\"static-ir\""),
                   "lint: error: t.json: constraint ANE001: 'check' must be an array of strings\n");
}

Test(loader, enumerations) {
  cr_assert_str_eq(rule_error("\"compile-failure\"", "\"compile-error\""),
                   "lint: error: t.json: constraint ANE001: unknown category 'compile-error' (expected compile-failure, "
                   "eval-failure, silent-wrong-data, compiler-level, performance, numeric or crash)\n");
  cr_assert_str_eq(rule_error("\"error\"", "\"fatal\""),
                   "lint: error: t.json: constraint ANE001: unknown severity 'fatal' (expected error, warning or note)\n");
  cr_assert_str_eq(rule_error("[\"static-ir\"]", "[\"static\"]"),
                   "lint: error: t.json: constraint ANE001: unknown check kind 'static' (expected static-ir, "
                   "static-package, runtime or advisory)\n");
  cr_assert_str_eq(rule_error("[\"static-ir\"]", "[\"runtime\", \"runtime\"]"),
                   "lint: error: t.json: constraint ANE001: check kind 'runtime' listed twice\n");
  cr_assert_str_eq(rule_error("\"no-concat\"", "\"No Concat\""),
                   "lint: error: t.json: constraint ANE001: 'name' must be lowercase words joined by '-' (at most 48 "
                   "characters, e.g. no-concat)\n");
}

Test(loader, dispute_note_goes_with_disputed) {
  cr_assert_str_eq(rule_error("\"disputed\": false", "\"disputed\": true"),
                   "lint: error: t.json: constraint ANE001: 'dispute_note' is required when 'disputed' is true\n");
  cr_assert_str_eq(rule_error("\"disputed\": false", "\"disputed\": false, \"dispute_note\": \"x\""),
                   "lint: error: t.json: constraint ANE001: 'dispute_note' is only allowed when 'disputed' is true\n");
  cr_assert_str_eq(rule_error("\"disputed\": false", "\"disputed\": true, \"dispute_note\": \"x\""), "");
}

Test(loader, text_must_be_clean_utf8) {
  cr_assert_str_eq(rule_error("\"split it\"", "\"split\\u0007it\""),
                   "lint: error: t.json: constraint ANE001: 'workaround' must not contain control characters\n");
  cr_assert_str_eq(rule_error("\"split it\"", "\"split \xc3\""),
                   "lint: error: t.json: constraint ANE001: 'workaround' is not valid UTF-8\n");
  cr_assert_str_eq(rule_error("\"split it\"", "\"d\xc3\xa9j\xc3\xa0 vu\""), "");
}

Test(loader, malformed_json) {
  cr_assert_str_eq(load_errors("{\n  \"schema_version\": ,\n}"), "lint: error: t.json: malformed JSON at line 2, column 21\n");
  cr_assert_str_eq(load_errors(""), "lint: error: t.json: malformed JSON at line 1, column 1\n");
  cr_assert_str_eq(load_errors("{} {}"), "lint: error: t.json: malformed JSON at line 1, column 4\n");
  cr_assert_str_eq(load_errors("[1]"), "lint: error: t.json: the top level must be an object\n");
}

Test(loader, top_level) {
  char *json = table_json(rule_ane001);
  char *bad = subst(json, "\"schema_version\": 1,", "\"schema_version\": 1, \"version\": 2,");
  cr_assert_str_eq(load_errors(bad), "lint: error: t.json: unknown top-level field 'version'\n");
  free(bad);
  bad = subst(json, "\"schema_version\": 1,", "");
  cr_assert_str_eq(load_errors(bad), "lint: error: t.json: missing top-level field 'schema_version'\n");
  free(bad);
  bad = subst(json, "\"schema_version\": 1,", "\"schema_version\": 2,");
  cr_assert_str_eq(load_errors(bad), "lint: error: t.json: schema version 2 is not supported (this is version 1)\n");
  free(bad);
  bad = subst(json, "\"schema_version\": 1,", "\"schema_version\": 1.5,");
  cr_assert_str_eq(load_errors(bad), "lint: error: t.json: 'schema_version' must be a positive integer\n");
  free(bad);
  free(json);
  json = table_json("");
  cr_assert_str_eq(load_errors(json), "lint: error: t.json: 'constraints' must not be empty\n");
  free(json);
}

Test(loader, parameters_and_targets) {
  char *json = table_json(rule_ane001);
  char *bad = subst(json, "\"max_tensor_dim\": {", "\"max_dim\": {");
  cr_assert_str_eq(load_errors(bad), "lint: error: t.json: 'parameters': unknown parameter 'max_dim'\n");
  free(bad);
  bad = subst(json, "\"rule\": null", "\"rule\": \"ANE099\"");
  cr_assert_str_eq(load_errors(bad), "lint: error: t.json: parameter 'program_version': unknown rule 'ANE099' in 'rule'\n");
  free(bad);
  bad = subst(json, "\"ios17\": {", "\"ios15\": {");
  cr_assert_str_eq(load_errors(bad), "lint: error: t.json: 'targets': unknown target 'ios15' (expected ios16, ios17 or ios18)\n");
  free(bad);
  bad = subst(json, "\"min_surface_bytes\": 49152", "\"min_surface_bytes\": -1");
  cr_assert_str_eq(load_errors(bad), "lint: error: t.json: target 'ios16': 'min_surface_bytes' must be a positive integer\n");
  free(bad);
  bad = subst(json, "\"min_surface_bytes\": 49152, ", "");
  cr_assert_str_eq(load_errors(bad), "lint: error: t.json: target 'ios16': missing field 'min_surface_bytes'\n");
  free(bad);
  free(json);
}

/* The chips section: every chip value is sourced, names a known target and, when
 * inherited, equals that target's default. */
Test(loader, chips) {
  char *json = table_json(rule_ane001);
  cr_assert_str_eq(load_errors(json), "");
  char *bad = subst(json, "\"description\": \"M1\", ", "\"description\": \"M1\", \"sram\": 1, ");
  cr_assert_str_eq(load_errors(bad), "lint: error: t.json: chip 'm1': unknown field 'sram'\n");
  free(bad);
  bad = subst(json, "\"inherited\": false, \"source\": \"PR #6\"", "\"inherited\": false, \"source\": \"PR #6\", \"why\": \"x\"");
  cr_assert_str_eq(load_errors(bad), "lint: error: t.json: chip 'm1': 'target': unknown field 'why'\n");
  free(bad);
  bad = subst(json, "\"value\": \"ios16\"", "\"value\": \"ios15\"");
  cr_assert_str_eq(load_errors(bad),
                   "lint: error: t.json: chip 'm1': 'target': unknown target 'ios15' (expected ios16, ios17 or ios18)\n");
  free(bad);
  bad = subst(json, "\"value\": 2000000, ", "");
  cr_assert_str_eq(load_errors(bad), "lint: error: t.json: chip 'm1': 'sram_budget_bytes': missing field 'value'\n");
  free(bad);
  bad = subst(json, ", \"max_tensor_dim\": {\"value\": 16384, \"inherited\": false, \"source\": \"ane-guide\", \"disputed\": false}}", "}");
  cr_assert_str_eq(load_errors(bad), "lint: error: t.json: chip 'm1': missing field 'max_tensor_dim'\n");
  free(bad);
  bad = subst(json, "\"source\": \"no figure\", ", "");
  cr_assert_str_eq(load_errors(bad), "lint: error: t.json: chip 'm1': 'min_surface_bytes': missing field 'source'\n");
  free(bad);
  bad = subst(json, "\"value\": 49152, \"inherited\": true", "\"value\": 16384, \"inherited\": true");
  cr_assert_str_eq(load_errors(bad), "lint: error: t.json: chip 'm1': 'min_surface_bytes': an inherited value must be "
                                     "the target's default 49152, not 16384\n");
  free(bad);
  bad = subst(json, "\"value\": 2000000", "\"value\": 0");
  cr_assert_str_eq(load_errors(bad), "lint: error: t.json: chip 'm1': 'sram_budget_bytes': 'value' must be a positive integer\n");
  free(bad);
  bad = subst(json, "\"disputed\": true, \"dispute_note\": \"n\"", "\"disputed\": true");
  cr_assert_str_eq(load_errors(bad),
                   "lint: error: t.json: chip 'm1': 'sram_budget_bytes': 'dispute_note' is required when 'disputed' is true\n");
  free(bad);
  bad = subst(json, "\"m1\": {", "\"M-1\": {");
  cr_assert_str_eq(load_errors(bad), "lint: error: t.json: 'chips': chip name 'M-1' must be lowercase letters and digits "
                                     "(at most 16, e.g. m1)\n");
  free(bad);
  bad = subst(json, "\"chips\": {\"m1\": {", "\"chips\": {\"m1\": {}, \"m1\": {");
  cr_assert_str_eq(load_errors(bad), "lint: error: t.json: 'chips': duplicate chip 'm1'\n");
  free(bad);
  bad = subst(json, "\"chips\": {\"m1\"", "\"chipz\": {\"m1\"");
  cr_assert_str_eq(load_errors(bad), "lint: error: t.json: unknown top-level field 'chipz'\n");
  free(bad);
  free(json);
}

/* The shipped chips: M1 has the smallest SRAM budget and the old dialect, M4 the
 * raised dimension limit; a chip's target keeps the target's dialect. */
Test(table, builtin_chips) {
  ConstraintTable *t = builtin();
  StrBuf names;
  sb_init(&names);
  constraints_chip_names(t, &names);
  cr_assert_str_eq(names.data, "m1, m2, m3, m4 or m5");
  sb_free(&names);
  const ConstraintChip *m1 = constraints_chip(t, "m1"), *m4 = constraints_chip(t, "m4");
  cr_assert(m1 && m4 && !constraints_chip(t, "m9"));
  cr_assert_eq(m1->target, MIL_IOS16);
  cr_assert_lt(m1->sram_budget_bytes.value, constraints_target(t, MIL_IOS16)->sram_budget_bytes);
  cr_assert(m1->sram_budget_bytes.disputed && !m1->sram_budget_bytes.inherited);
  cr_assert(m1->min_surface_bytes.inherited);
  cr_assert_eq(m4->target, MIL_IOS18);
  cr_assert_eq(m4->max_tensor_dim.value, 65536);
  ConstraintTarget ct = constraints_chip_target(t, m1, MIL_IOS16);
  cr_assert_str_eq(ct.chip, "m1");
  cr_assert_str_eq(ct.program_version, "1.0");
  cr_assert_eq(ct.sram_budget_bytes, m1->sram_budget_bytes.value);
  for (uint32_t i = 0; i < t->nchips; i++) cr_assert_not_null(t->chips[i].sram_budget_bytes.source);
  constraints_free(t);
}

Test(loader, every_problem_is_reported) {
  char *rule = subst(rule_ane001, "[\"concat\"]", "[\"concatenate\"]");
  char *rule2 = subst(rule, "\"split-concat\"", "\"nope\"");
  char *json = table_json(rule2);
  cr_assert_str_eq(load_errors(json), "lint: error: t.json: constraint ANE001: unknown op 'concatenate' in 'ops'\n"
                                      "lint: error: t.json: constraint ANE001: unknown pass 'nope' in 'fixed_by'\n");
  free(json);
  free(rule2);
  free(rule);
}
