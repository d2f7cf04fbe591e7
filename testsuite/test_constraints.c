/*
 * The constraint table and the linter: the shipped table (20 rules, ids,
 * targets agreeing with the rest of the toolchain, the generated docs being
 * current), every loader rejection with its exact message, the checker
 * registry against the table, each static rule with a violating input (its
 * exact finding) and a clean one (no finding), before and after
 * legalization, and the three reporters (text and JSON exactly, SARIF by
 * its required structure, parsed back).
 */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "orion/constraints.h"
#include "orion/mil_reader.h"
#include "orion/package.h"
#include "orion/passes.h"

/* ---- helpers ---- */

static ConstraintTable *builtin(void) {
  StrBuf sb;
  sb_init(&sb);
  Diag d;
  diag_init(&d, NULL);
  d.capture = &sb;
  ConstraintTable *t = constraints_builtin(&d);
  cr_assert_not_null(t, "the shipped table does not load:\n%s", sb.data);
  sb_free(&sb);
  return t;
}

/* s with the first `from` replaced by `to` (heap). */
static char *subst(const char *s, const char *from, const char *to) {
  const char *p = strstr(s, from);
  cr_assert_not_null(p, "'%s' not found in:\n%s", from, s);
  size_t n = strlen(s) - strlen(from) + strlen(to) + 1;
  char *r = xmalloc(n);
  snprintf(r, n, "%.*s%s%s", (int)(p - s), s, to, p + strlen(from));
  return r;
}

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

/* Whether the n bytes at s contain needle. */
static bool has(const char *s, size_t n, const char *needle) {
  size_t k = strlen(needle);
  for (size_t i = 0; i + k <= n; i++)
    if (!memcmp(s + i, needle, k)) return true;
  return false;
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

/* ---- IR checks ---- */

/* Lints text as t.oir (after legalization if asked) and returns the header
 * lines of the findings of one rule, in the text format. */
static const char *ir_findings(const char *text, const char *rule, bool legalize, const LintOptions *opt) {
  static char buf[8192];
  ConstraintTable *t = builtin();
  Parsed p;
  parsed_open(&p, text);
  cr_assert_not_null(p.m, "%s", p.diags.data);
  if (legalize) cr_assert(passes_legalize(p.m, &p.d), "%s", p.diags.data);
  LintOptions o = opt ? *opt : (LintOptions){.target = MIL_IOS18};
  LintReport r, only;
  lint_report_init(&r, &p.sources);
  lint_report_init(&only, &p.sources);
  lint_ir(t, p.m, &o, &r);
  lint_report_sort(&r);
  for (uint32_t i = 0; i < r.n; i++)
    if (!strcmp(r.items[i].rule->id, rule)) lint_report_add(&only, &r.items[i]);
  StrBuf sb, heads;
  sb_init(&sb);
  sb_init(&heads);
  lint_format_text(&only, &sb);
  char tag[16];
  snprintf(tag, sizeof tag, "[%s]: ", rule);
  for (const char *line = sb.data; line && *line;) {
    const char *nl = strchr(line, '\n');
    size_t n = nl ? (size_t)(nl - line + 1) : strlen(line);
    if (has(line, n, tag)) sb_putn(&heads, line, n);
    line += n;
  }
  snprintf(buf, sizeof buf, "%s", heads.data ? heads.data : "");
  sb_free(&sb);
  sb_free(&heads);
  lint_report_free(&only);
  lint_report_free(&r);
  parsed_close(&p);
  constraints_free(t);
  return buf;
}

static const char *const concat_program =
    "func main(a: fp16[1,768,1,32], b: fp16[1,768,1,32]) {\n"
    "  h = concat(a, b, axis=1);\n"
    "  return h;\n"
    "}\n";

Test(ir, ane001_concat) {
  cr_assert_str_eq(ir_findings(concat_program, "ANE001", false, NULL),
                   "t.oir:2:7: error[ANE001]: concat producing 'h' is rejected by the ANE compiler\n");
  /* A concat feeding an output becomes separate outputs when legalized. */
  cr_assert_str_eq(ir_findings(concat_program, "ANE001", true, NULL), "");
  /* One feeding a reduction over the concatenated axis cannot be split: it is still there. */
  const char *feeds_sum = "func main(a: fp16[1,32,384], b: fp16[1,32,384]) {\n"
                          "  h = concat(a, b, axis=2);\n  n = reduce_sum(h, axes=[2]);\n  return n;\n}\n";
  cr_assert_str_eq(ir_findings(feeds_sum, "ANE001", true, NULL),
                   "t.oir:2:7: error[ANE001]: concat producing 'h' is rejected by the ANE compiler; split-concat cannot "
                   "remove it: its use by reduce_sum 'n' is neither element-wise nor a linear, matmul or conv over the "
                   "concatenated axis\n");
  /* One feeding a linear layer along its features becomes a sum of products. */
  const char *feeds_linear = "func main(a: fp16[1,32,384], b: fp16[1,32,384]) {\n  param w: fp16[768,768] = zeros;\n"
                             "  h = concat(a, b, axis=2);\n  y = linear(h, w);\n  return y;\n}\n";
  cr_assert_str_eq(ir_findings(feeds_linear, "ANE001", false, NULL),
                   "t.oir:3:7: error[ANE001]: concat producing 'h' is rejected by the ANE compiler\n");
  cr_assert_str_eq(ir_findings(feeds_linear, "ANE001", true, NULL), "");
  cr_assert_str_eq(ir_findings("func main(a: fp16[1,768,1,32]) {\n  h = relu(a);\n  return h;\n}\n", "ANE001", false, NULL), "");
}

/* What split-concat cannot take apart is an error that says why: the use that stops it. */
Test(ir, ane001_says_why_split_concat_cannot_remove_it) {
  static const struct {
    const char *body, *why;
  } cases[] = {
      {"  param w: fp16[6,16] = zeros;\n  h = concat(a, b, axis=1);\n  y = linear(h, w);\n",
       "its use by linear 'y' contracts the last axis, not the concatenated one"},
      {"  param w: fp16[6,16,1,1] = zeros;\n  h = concat(a, b, axis=2);\n  r = reshape(h, shape=[1,16,2,16]);\n"
       "  y = conv(r, w);\n",
       "its use by reshape 'r' is neither element-wise nor a linear, matmul or conv over the concatenated axis"},
      {"  h = concat(a, b, axis=2);\n  y = mul(h, h);\n", "its use by mul 'y' takes it as both operands"},
      {"  h = concat(a, b, axis=2);\n  y = matmul(h, a, transpose_x=true);\n",
       "its use by matmul 'y' does not contract the concatenated axis"},
      {"  h = concat(a, b, axis=2);\n  y = slice(h, begin=[0,0,8], end=[1,16,24]);\n",
       "its use by slice 'y' takes a range across its parts, or strides along the concatenated axis"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char text[1024], want[1024];
    snprintf(text, sizeof text, "func main(a: fp16[1,16,16], b: fp16[1,16,16]) {\n%s  return y;\n}\n", cases[i].body);
    const char *got = ir_findings(text, "ANE001", true, NULL);
    snprintf(want, sizeof want, "error[ANE001]: concat producing 'h' is rejected by the ANE compiler; split-concat "
             "cannot remove it: %s\n", cases[i].why);
    cr_assert(strstr(got, want) && !strchr(strstr(got, want), '\n')[1], "case %zu:\n%s\nwanted ...%s", i, got, want);
  }
}

Test(ir, before_legalization_a_fixable_problem_is_a_note) {
  LintOptions o = {.target = MIL_IOS18, .pipeline = passes_pipeline("O0")};
  cr_assert_str_eq(ir_findings(concat_program, "ANE001", false, &o),
                   "t.oir:2:7: note[ANE001]: concat producing 'h' is rejected by the ANE compiler\n");
  /* A pass outside the pipeline fixes nothing: lower-linear is not in O0. */
  const char *linear = "func main(x: fp16[1,32,768]) {\n  param w: fp16[768,768] = zeros;\n  y = linear(x, w);\n  return y;\n}\n";
  cr_assert_str_eq(ir_findings(linear, "ANE015", false, &o),
                   "t.oir:3:7: warning[ANE015]: linear producing 'y' multiplies by the constant 'w'; as a 1x1 conv it "
                   "would run about 3x faster\n");
}

/* A concat split-concat cannot remove is an error even before split-concat runs. */
Test(ir, before_legalization_an_unremovable_concat_stays_an_error) {
  LintOptions o = {.target = MIL_IOS18, .pipeline = passes_pipeline("O0")};
  const char *feeds_sum = "func main(a: fp16[1,32,384], b: fp16[1,32,384]) {\n"
                          "  h = concat(a, b, axis=2);\n  n = reduce_sum(h, axes=[2]);\n  return n;\n}\n";
  cr_assert_str_eq(ir_findings(feeds_sum, "ANE001", false, &o),
                   "t.oir:2:7: error[ANE001]: concat producing 'h' is rejected by the ANE compiler; split-concat cannot "
                   "remove it: its use by reduce_sum 'n' is neither element-wise nor a linear, matmul or conv over the "
                   "concatenated axis\n");
}

Test(ir, ane004_small_io) {
  const char *small = "func main(x: fp16[1,16]) {\n  y = relu(x);\n  return y;\n}\n";
  cr_assert_str_eq(ir_findings(small, "ANE004", false, NULL),
                   "t.oir:1:11: warning[ANE004]: input 'x' of 'main' has 32 bytes, below the 49152-byte minimum surface "
                   "of ios18; the package pads its surface\n"
                   "t.oir:3:10: warning[ANE004]: output 'y' of 'main' has 32 bytes, below the 49152-byte minimum "
                   "surface of ios18; the package pads its surface\n");
  /* fp16 [1,768,1,32] is exactly 49152 bytes. */
  cr_assert_str_eq(ir_findings("func main(x: fp16[1,768,1,32]) {\n  y = relu(x);\n  return y;\n}\n", "ANE004", false, NULL), "");
  /* Only programs have surfaces: a called function's inputs are not checked. */
  cr_assert_str_eq(ir_findings("func f(s: fp16[1,1,1,1]) {\n  y = relu(s);\n  return y;\n}\n"
                               "func main(x: fp16[1,768,1,32]) {\n  r = reduce_sum(x, axes=[1,2,3], keep_dims=true);\n"
                               "  z = call f(r) as c;\n  y = mul(x, z);\n  return y;\n}\n",
                               "ANE004", false, NULL),
                   "");
}

Test(ir, ane006_masked_attention) {
  const char *causal = "func main(q: fp16[1,2,4,8], k: fp16[1,2,4,8], v: fp16[1,2,4,8]) {\n"
                       "  o = sdpa(q, k, v, causal=true);\n  return o;\n}\n";
  cr_assert_str_eq(ir_findings(causal, "ANE006", false, NULL),
                   "t.oir:2:7: error[ANE006]: causal sdpa producing 'o' would run unmasked (the ANE's fused attention "
                   "ignores masks)\n");
  cr_assert_str_eq(ir_findings(causal, "ANE006", true, NULL), "");
  const char *masked = "func main(q: fp16[1,2,4,8], k: fp16[1,2,4,8], v: fp16[1,2,4,8], m: fp16[4,4]) {\n"
                       "  o = sdpa(q, k, v, m);\n  return o;\n}\n";
  cr_assert_str_eq(ir_findings(masked, "ANE006", false, NULL),
                   "t.oir:2:7: error[ANE006]: masked sdpa producing 'o' would run unmasked (the ANE's fused attention "
                   "ignores masks)\n");
  const char *plain = "func main(q: fp16[1,2,4,8], k: fp16[1,2,4,8], v: fp16[1,2,4,8]) {\n"
                      "  o = sdpa(q, k, v);\n  return o;\n}\n";
  cr_assert_str_eq(ir_findings(plain, "ANE006", false, NULL), "");
}

Test(ir, ane010_gelu) {
  const char *gelu = "func main(x: fp16[1,768,1,32]) {\n  y = gelu(x, mode=\"tanh\");\n  return y;\n}\n";
  cr_assert_str_eq(ir_findings(gelu, "ANE010", false, NULL), "t.oir:2:7: error[ANE010]: gelu producing 'y' is not an ANE op\n");
  cr_assert_str_eq(ir_findings(gelu, "ANE010", true, NULL), "");
  cr_assert_str_eq(ir_findings("func main(x: fp16[1,768,1,32]) {\n  y = tanh(x);\n  return y;\n}\n", "ANE010", false, NULL), "");
}

Test(ir, ane013_conv_bias) {
  const char *conv = "func main(x: fp16[1,4,1,8]) {\n  param w: fp16[6,4,1,1] = zeros;\n  param b: fp16[6] = zeros;\n"
                     "  c = conv(x, w, b);\n  return c;\n}\n";
  cr_assert_str_eq(ir_findings(conv, "ANE013", false, NULL),
                   "t.oir:4:7: error[ANE013]: conv producing 'c' has a bias operand ('b'), which the ANE path rejects\n");
  cr_assert_str_eq(ir_findings(conv, "ANE013", true, NULL), "");
  cr_assert_str_eq(ir_findings("func main(x: fp16[1,4,1,8]) {\n  param w: fp16[6,4,1,1] = zeros;\n  c = conv(x, w);\n"
                               "  return c;\n}\n",
                               "ANE013", false, NULL),
                   "");
}

Test(ir, ane015_constant_matmul) {
  const char *mm = "func main(x: fp16[1,32,768]) {\n  const w: fp16[768,768] = 0.5;\n  y = matmul(x, w);\n  return y;\n}\n";
  cr_assert_str_eq(ir_findings(mm, "ANE015", false, NULL),
                   "t.oir:3:7: warning[ANE015]: matmul producing 'y' multiplies by the constant 'w'; as a 1x1 conv it "
                   "would run about 3x faster\n");
  /* Both operands computed at run time (attention scores): nothing to lower. */
  cr_assert_str_eq(ir_findings("func main(x: fp16[1,32,768], w: fp16[1,768,768]) {\n  y = matmul(x, w);\n  return y;\n}\n",
                               "ANE015", false, NULL),
                   "");
}

Test(ir, ane016_working_set) {
  const char *big = "func main(a: fp16[1,4096,1,4096], b: fp16[1,4096,1,4096]) {\n  y = add(a, b);\n  return y;\n}\n";
  cr_assert_str_eq(ir_findings(big, "ANE016", false, NULL),
                   "t.oir:2:7: warning[ANE016]: add producing 'y' has a working set of about 96 MiB, over the 32 MiB "
                   "SRAM budget of ios18\n");
  /* After legalization the sram-annotate pass's estimate is used: the same. */
  cr_assert_str_eq(ir_findings(big, "ANE016", true, NULL),
                   "t.oir:2:7: warning[ANE016]: add producing 'y' has a working set of about 96 MiB, over the 32 MiB "
                   "SRAM budget of ios18\n");
  cr_assert_str_eq(ir_findings("func main(a: fp16[1,2048,1,2048], b: fp16[1,2048,1,2048]) {\n  y = add(a, b);\n  return y;\n}\n",
                               "ANE016", false, NULL),
                   "");
}

Test(ir, ane017_fp32) {
  const char *f32 = "func main(x: fp32[1,768,1,16]) {\n  y = relu(x);\n  z = tanh(y);\n  return z;\n}\n";
  cr_assert_str_eq(ir_findings(f32, "ANE017", false, NULL),
                   "t.oir:1:11: note[ANE017]: input 'x' of 'main' is fp32; the ANE computes in fp16 (values beyond 65504 "
                   "overflow)\n"
                   "t.oir:2:7: note[ANE017]: 'main' has 2 fp32 ops (the first produces 'y'); the ANE computes in fp16\n"
                   "t.oir:4:10: note[ANE017]: output 'z' of 'main' is fp32; the ANE computes in fp16 (values beyond 65504 "
                   "overflow)\n");
  /* fp32 at the interface with fp16 compute inside: only the interface. */
  const char *casts = "func main(x: fp32[1,768,1,16]) {\n  h = cast(x, dtype=\"fp16\");\n  y = relu(h);\n"
                      "  z = cast(y, dtype=\"fp32\");\n  return z;\n}\n";
  cr_assert_str_eq(ir_findings(casts, "ANE017", false, NULL),
                   "t.oir:1:11: note[ANE017]: input 'x' of 'main' is fp32; the ANE computes in fp16 (values beyond 65504 "
                   "overflow)\n"
                   "t.oir:5:10: note[ANE017]: output 'z' of 'main' is fp32; the ANE computes in fp16 (values beyond 65504 "
                   "overflow)\n");
  cr_assert_str_eq(ir_findings("func main(x: fp16[1,768,1,16]) {\n  y = relu(x);\n  return y;\n}\n", "ANE017", false, NULL), "");
}

Test(ir, allow_and_severity_overrides) {
  const char *allow[] = {"ANE001"};
  LintOptions o = {.target = MIL_IOS18, .allow = allow, .nallow = 1};
  cr_assert_str_eq(ir_findings(concat_program, "ANE001", false, &o), "");
  LintSeverityOverride ov[] = {{"ANE001", DIAG_WARNING}};
  o = (LintOptions){.target = MIL_IOS18, .overrides = ov, .noverrides = 1};
  cr_assert_str_eq(ir_findings(concat_program, "ANE001", false, &o),
                   "t.oir:2:7: warning[ANE001]: concat producing 'h' is rejected by the ANE compiler\n");
  /* The user's level wins over a checker's own (ANE004 reports warnings). */
  LintSeverityOverride ov4[] = {{"ANE004", DIAG_ERROR}};
  o = (LintOptions){.target = MIL_IOS18, .overrides = ov4, .noverrides = 1};
  cr_assert_str_eq(ir_findings("func main(x: fp16[1,768,1,32], s: fp16[1]) {\n  y = relu(x);\n  return y;\n}\n", "ANE004", false, &o),
                   "t.oir:1:32: error[ANE004]: input 's' of 'main' has 2 bytes, below the 49152-byte minimum surface of "
                   "ios18; the package pads its surface\n");

  ConstraintTable *t = builtin();
  StrBuf sb;
  sb_init(&sb);
  Diag d;
  diag_init(&d, NULL);
  d.capture = &sb;
  d.program = "lint";
  const char *bad[] = {"ANE001", "ANE042"};
  LintSeverityOverride bad_ov[] = {{"ANE1", DIAG_NOTE}};
  LintOptions b = {.allow = bad, .nallow = 2, .overrides = bad_ov, .noverrides = 1};
  cr_assert(!lint_options_check(t, &b, &d));
  cr_assert_str_eq(sb.data, "lint: error: unknown rule 'ANE042' (orion-lint --list shows them)\n"
                            "lint: error: unknown rule 'ANE1' (orion-lint --list shows them)\n");
  sb_free(&sb);
  constraints_free(t);
}

/* ---- package checks ---- */

static char dir[64];

static void make_dir(void) {
  snprintf(dir, sizeof dir, "/tmp/orion-lint-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
}

static void remove_dir(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

static const char *const pkg_program =
    "func main(xin: fp16[1,4,4], amat: fp16[1,4,4]) {\n"
    "  param w: fp16[4,4] = normal(seed=3, std=0.5);\n"
    "  h = linear(xin, w);\n"
    "  y = matmul(h, amat, transpose_y=true);\n"
    "  return zout = y, first = h;\n"
    "}\n";

/* Legalizes text and writes dir/p.anepkg. */
static void compile_pkg(const char *text) {
  Parsed p;
  parsed_open(&p, text);
  cr_assert_not_null(p.m, "%s", p.diags.data);
  cr_assert(passes_legalize(p.m, &p.d), "%s", p.diags.data);
  char path[256];
  snprintf(path, sizeof path, "%s/p.anepkg", dir);
  PackageOptions po = {.target = MIL_IOS18, .source_name = "t.oir", .source_text = text, .source_len = strlen(text)};
  cr_assert(package_write(p.m, path, &po, &p.d), "%s", p.diags.data);
  parsed_close(&p);
}

static char *pkg_file(const char *name) {
  char path[256];
  snprintf(path, sizeof path, "%s/p.anepkg/%s", dir, name);
  char *data;
  size_t len;
  const char *err;
  cr_assert(read_file(path, 1u << 24, &data, &len, &err), "%s: %s", path, err);
  return data;
}

static void put_pkg_file(const char *name, const char *text) {
  char path[256];
  snprintf(path, sizeof path, "%s/p.anepkg/%s", dir, name);
  const char *err;
  cr_assert(write_file_atomic(path, text, strlen(text), &err), "%s", err);
}

/* Replaces the first `from` after `anchor` in a package file. */
static void edit_pkg_file(const char *name, const char *anchor, const char *from, const char *to) {
  char *text = pkg_file(name);
  char *a = anchor ? strstr(text, anchor) : text;
  cr_assert_not_null(a, "'%s' not in %s", anchor, name);
  char *edited = subst(a, from, to);
  StrBuf sb;
  sb_init(&sb);
  sb_printf(&sb, "%.*s%s", (int)(a - text), text, edited);
  put_pkg_file(name, sb.data);
  sb_free(&sb);
  free(edited);
  free(text);
}

/* Sets <key>KEY</key><integer>..</integer> of the tensor named `tensor` in the manifest. */
static void set_manifest_int(const char *tensor, const char *key, const char *value) {
  char anchor[128], k[64];
  snprintf(anchor, sizeof anchor, "<string>%s</string>", tensor);
  snprintf(k, sizeof k, "<key>%s</key>", key);
  char *text = pkg_file(PACKAGE_MANIFEST);
  char *a = strstr(text, anchor);
  cr_assert_not_null(a);
  char *kp = strstr(a, k);
  cr_assert_not_null(kp);
  char *open = strstr(kp, "<integer>"), *close = strstr(kp, "</integer>");
  StrBuf sb;
  sb_init(&sb);
  sb_printf(&sb, "%.*s<integer>%s%s", (int)(open - text), text, value, close);
  put_pkg_file(PACKAGE_MANIFEST, sb.data);
  sb_free(&sb);
  free(text);
}

/* The text-format header lines of all package findings (the package path
 * replaced by "P"), or the lint_package error. */
static const char *pkg_findings(void) {
  static char buf[8192];
  ConstraintTable *t = builtin();
  SourceSet ss;
  srcset_init(&ss);
  StrBuf diags, out, heads;
  sb_init(&diags);
  sb_init(&out);
  sb_init(&heads);
  Diag d;
  diag_init(&d, &ss);
  d.capture = &diags;
  d.program = "lint";
  char path[256];
  snprintf(path, sizeof path, "%s/p.anepkg", dir);
  Package pkg;
  cr_assert(package_read(path, &pkg, &d), "%s", diags.data);
  LintReport r;
  lint_report_init(&r, &ss);
  LintOptions o = {.target = MIL_IOS18};
  bool ok = lint_package(t, &pkg, &o, &r, &d);
  lint_report_sort(&r);
  lint_format_text(&r, &out);
  for (const char *line = ok ? out.data : diags.data; line && *line;) {
    const char *nl = strchr(line, '\n');
    size_t n = nl ? (size_t)(nl - line + 1) : strlen(line);
    if (!ok || (has(line, n, "]: ") && !has(line, n, " note: "))) {
      if (!strncmp(line, path, strlen(path))) {
        sb_puts(&heads, "P");
        sb_putn(&heads, line + strlen(path), n - strlen(path));
      } else {
        sb_putn(&heads, line, n);
      }
    }
    line += n;
  }
  snprintf(buf, sizeof buf, "%s", heads.data ? heads.data : "");
  lint_report_free(&r);
  package_free(&pkg);
  sb_free(&diags);
  sb_free(&out);
  sb_free(&heads);
  srcset_free(&ss);
  constraints_free(t);
  return buf;
}

Test(package, clean_package_has_no_findings) {
  make_dir();
  compile_pkg(pkg_program);
  cr_assert_str_eq(pkg_findings(), "");
  remove_dir();
}

Test(package, ane002_ane018_uniform_surfaces) {
  make_dir();
  compile_pkg(pkg_program);
  set_manifest_int("zout", "SurfaceBytes", "65536");
  set_manifest_int("amat", "SurfaceBytes", "98304");
  cr_assert_str_eq(pkg_findings(),
                   "P/Manifest.plist: error[ANE002]: outputs of 'main' have surfaces of different sizes: 'zout' has "
                   "65536 bytes, 'first' has 49152\n"
                   "P/Manifest.plist: error[ANE018]: inputs of 'main' have surfaces of different sizes: 'xin' has "
                   "49152 bytes, 'amat' has 98304\n");
  remove_dir();
}

Test(package, ane003_ane019_binding_order) {
  make_dir();
  compile_pkg(pkg_program);
  /* Bindings stay a permutation (the reader checks that) but not the ASCII order. */
  set_manifest_int("zout", "Binding", "0");
  set_manifest_int("first", "Binding", "1");
  set_manifest_int("xin", "Binding", "0");
  set_manifest_int("amat", "Binding", "1");
  cr_assert_str_eq(pkg_findings(),
                   "P/Manifest.plist: error[ANE003]: output 'zout' of 'main' (MIL name 'zout') has binding 0, but the "
                   "ANE binds it at 1 (ASCII order of MIL names)\n"
                   "P/Manifest.plist: error[ANE003]: output 'first' of 'main' (MIL name 'first') has binding 1, but the "
                   "ANE binds it at 0 (ASCII order of MIL names)\n"
                   "P/Manifest.plist: error[ANE019]: input 'xin' of 'main' (MIL name 'xin') has binding 0, but the ANE "
                   "binds it at 1 (ASCII order of MIL names)\n"
                   "P/Manifest.plist: error[ANE019]: input 'amat' of 'main' (MIL name 'amat') has binding 1, but the "
                   "ANE binds it at 0 (ASCII order of MIL names)\n");
  remove_dir();
}

Test(package, ane004_surface_below_minimum) {
  make_dir();
  compile_pkg("func main(x: fp16[1,4]) {\n  y = relu(x);\n  return y;\n}\n");
  set_manifest_int("x", "SurfaceBytes", "3072");
  set_manifest_int("y", "SurfaceBytes", "3072");
  cr_assert_str_eq(pkg_findings(),
                   "P/Manifest.plist: error[ANE004]: input 'x' of 'main' has a 3072-byte surface, below the 49152-byte "
                   "minimum of ios18\n"
                   "P/Manifest.plist: error[ANE004]: output 'y' of 'main' has a 3072-byte surface, below the 49152-byte "
                   "minimum of ios18\n");
  remove_dir();
}

/* Line and column of the first `needle` in the package's model.mil. */
static void mil_pos(const char *needle, int *line, int *col) {
  char *text = pkg_file("model.mil");
  const char *p = strstr(text, needle);
  cr_assert_not_null(p, "'%s' not in model.mil", needle);
  *line = 1;
  const char *ls = text;
  for (const char *q = text; q < p; q++)
    if (*q == '\n') {
      ++*line;
      ls = q + 1;
    }
  *col = (int)(p - ls) + 1;
  free(text);
}

Test(package, ane008_blobfile_offsets) {
  make_dir();
  compile_pkg(pkg_program);
  int line, col;
  edit_pkg_file("model.mil", "BLOBFILE", "offset = uint64(64)", "offset = uint64(100)");
  mil_pos("100)", &line, &col);
  char want[1024];
  snprintf(want, sizeof want,
           "P/model.mil:%d:%d: error[ANE008]: BLOBFILE offset 100 does not point at a blob record of "
           "'weights/weight.bin': blob record offset 100 is not 64-byte aligned\n",
           line, col);
  cr_assert_str_eq(pkg_findings(), want);
  /* Aligned, but the data of the only blob (the file has 64 + 64 + 32 bytes). */
  edit_pkg_file("model.mil", "BLOBFILE", "offset = uint64(100)", "offset = uint64(128)");
  snprintf(want, sizeof want,
           "P/model.mil:%d:%d: error[ANE008]: BLOBFILE offset 128 does not point at a blob record of "
           "'weights/weight.bin': blob record at offset 128 is outside the file (160 bytes)\n",
           line, col);
  cr_assert_str_eq(pkg_findings(), want);
  /* The right record, but the declared tensor type does not match it. */
  edit_pkg_file("model.mil", "BLOBFILE", "offset = uint64(128)", "offset = uint64(64)");
  edit_pkg_file("model.mil", " w = const()", "tensor<fp16, [4, 4]>(BLOBFILE", "tensor<fp32, [4, 4]>(BLOBFILE");
  mil_pos("64)))", &line, &col);
  snprintf(want, sizeof want,
           "P/model.mil:%d:%d: error[ANE008]: BLOBFILE offset 64 points at a blob that does not fit the tensor: blob "
           "at offset 64 holds fp16 but the tensor is fp32\n",
           line, col);
  cr_assert_str_eq(pkg_findings(), want);
  remove_dir();
}

Test(package, ane012_literal_transpose) {
  make_dir();
  compile_pkg(pkg_program);
  char *mil = pkg_file("model.mil");
  const char *mm = strstr(mil, "= matmul(");
  cr_assert_not_null(mm, "%s", mil);
  const char *ty = strstr(mm, "transpose_y = ");
  cr_assert_not_null(ty);
  ty += strlen("transpose_y = ");
  char name[64];
  snprintf(name, sizeof name, "%.*s", (int)strcspn(ty, ","), ty);
  free(mil);
  char from[96];
  snprintf(from, sizeof from, "transpose_y = %s,", name);
  edit_pkg_file("model.mil", "= matmul(", from, "transpose_y = bool(true),");
  int line, col;
  mil_pos("bool(true),", &line, &col);
  char want[512];
  snprintf(want, sizeof want,
           "P/model.mil:%d:%d: error[ANE012]: transpose_y of matmul 'y' is the literal 'bool(true)'; the ANE's MIL "
           "parser needs a named bool const\n",
           line, col);
  cr_assert_str_eq(pkg_findings(), want);
  remove_dir();
}

Test(package, ane014_undefined_return) {
  make_dir();
  compile_pkg(pkg_program);
  edit_pkg_file("model.mil", "} -> (", "first", "first_gone");
  int line, col;
  mil_pos("first_gone", &line, &col);
  char want[512];
  snprintf(want, sizeof want,
           "P/model.mil:%d:%d: error[ANE014]: returned name 'first_gone' is not defined by a statement or an input of "
           "'main'\n",
           line, col);
  cr_assert_str_eq(pkg_findings(), want);
  remove_dir();
}

Test(package, unreadable_mil_is_an_error) {
  make_dir();
  compile_pkg(pkg_program);
  put_pkg_file("model.mil", "program(1.3)\n{\n    func main<ios18>(tensor<fp16, [1]> x) {\n");
  cr_assert_str_eq(pkg_findings(), "P/model.mil:3:43: error: cannot check this MIL text: '{' is never closed\n"
                                   "    3 |     func main<ios18>(tensor<fp16, [1]> x) {\n"
                                   "      |                                           ^\n");
  remove_dir();
}

/* ---- MIL files ---- */

/* The text-format header lines of the findings of dir/NAME linted as a MIL
 * file (dir replaced by "D"), or its errors. */
static const char *mil_findings(const char *name) {
  static char buf[8192];
  ConstraintTable *t = builtin();
  SourceSet ss;
  srcset_init(&ss);
  StrBuf diags, out, heads;
  sb_init(&diags);
  sb_init(&out);
  sb_init(&heads);
  Diag d;
  diag_init(&d, &ss);
  d.capture = &diags;
  d.program = "lint";
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  LintReport r;
  lint_report_init(&r, &ss);
  LintOptions o = {.target = MIL_IOS18};
  bool ok = lint_mil_file(t, path, &o, &r, &d);
  lint_report_sort(&r);
  lint_format_text(&r, &out);
  for (const char *line = ok ? out.data : diags.data; line && *line;) {
    const char *nl = strchr(line, '\n');
    size_t n = nl ? (size_t)(nl - line + 1) : strlen(line);
    if (!ok || has(line, n, "]: ")) {
      size_t skip = strncmp(line, dir, strlen(dir)) ? 0 : strlen(dir);
      if (skip) sb_puts(&heads, "D");
      sb_putn(&heads, line + skip, n - skip);
    }
    line += n;
  }
  snprintf(buf, sizeof buf, "%s", heads.data ? heads.data : "");
  lint_report_free(&r);
  sb_free(&diags);
  sb_free(&out);
  sb_free(&heads);
  srcset_free(&ss);
  constraints_free(t);
  return buf;
}

static void put_file(const char *name, const char *text) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  const char *err;
  cr_assert(write_file_atomic(path, text, strlen(text), &err), "%s", err);
}

/* What orionc writes is clean as a MIL file too: its BLOBFILEs resolve
 * against the weight file beside it. */
Test(mil, emitted_mil_is_clean) {
  make_dir();
  compile_pkg(pkg_program);
  cr_assert_str_eq(mil_findings("p.anepkg/model.mil"), "");
  /* Without the weight file beside it, the offsets cannot be checked: ANE008. */
  char *mil = pkg_file("model.mil");
  put_file("alone.mil", mil);
  int line, col;
  mil_pos("64)", &line, &col);
  char want[512];
  snprintf(want, sizeof want,
           "D/alone.mil:%d:%d: error[ANE008]: cannot read the weight file 'weights/weight.bin': No such file or "
           "directory\n", line, col);
  cr_assert_str_eq(mil_findings("alone.mil"), want);
  free(mil);
  remove_dir();
}

/* MIL from other tools: every rule checkable from MIL text, each violated
 * once, next to a form of the same op that is fine. */
static const char *const foreign_mil =
    "program(1.3)\n"
    "{\n"
    "    func main<ios18>(tensor<fp16, [1, 4, 1, 8]> a, tensor<fp16, [1, 4, 1, 8]> b) {\n"
    "        tensor<fp16, [1, 8, 1, 8]> c = concat(axis = ax, interleave = il, values = (a, b))[name = string(\"c\")];\n"
    "        tensor<fp16, [1, 4, 1, 8]> g = gelu(mode = gm, x = a)[name = string(\"g\")];\n"
    "        tensor<fp16, [1, 4, 1, 8]> t = tanh(x = g)[name = string(\"t\")];\n"
    "        tensor<fp16, [1, 4, 1, 8]> k1 = conv(bias = cb, weight = w, x = t)[name = string(\"k1\")];\n"
    "        tensor<fp16, [1, 4, 1, 8]> k2 = conv(weight = w, x = k1)[name = string(\"k2\")];\n"
    "        tensor<fp16, [1, 4, 1, 8]> s1 = scaled_dot_product_attention(attn_mask = mk, key = a, query = b, value = k2)[name = string(\"s1\")];\n"
    "        tensor<fp16, [1, 4, 1, 8]> s2 = scaled_dot_product_attention(key = a, query = b, value = s1)[name = string(\"s2\")];\n"
    "        tensor<fp16, [1, 4, 8, 8]> m = matmul(transpose_x = bool(false), transpose_y = ty, x = s2, y = s2)[name = string(\"m\")];\n"
    "    } -> (m, gone);\n"
    "}\n";

Test(mil, every_mil_text_rule) {
  make_dir();
  put_file("f.mil", foreign_mil);
  cr_assert_str_eq(mil_findings("f.mil"),
                   "D/f.mil:4:40: error[ANE001]: concat 'c' is rejected by the ANE compiler\n"
                   "D/f.mil:5:40: error[ANE010]: gelu 'g' is not an ANE op\n"
                   "D/f.mil:7:41: error[ANE013]: conv 'k1' has a bias argument, which the ANE path rejects\n"
                   "D/f.mil:9:41: error[ANE006]: scaled_dot_product_attention 's1' has an attn_mask, which the ANE's "
                   "fused attention ignores (it runs unmasked)\n"
                   "D/f.mil:11:61: error[ANE012]: transpose_x of matmul 'm' is the literal 'bool(false)'; the ANE's MIL "
                   "parser needs a named bool const\n"
                   "D/f.mil:12:14: error[ANE014]: returned name 'gone' is not defined by a statement or an input of "
                   "'main'\n");
  remove_dir();
}

/* The same checks run on a package's MIL text. */
Test(package, mil_text_rules_in_a_package) {
  make_dir();
  compile_pkg(pkg_program);
  edit_pkg_file("model.mil", "= matmul(", "matmul(", "gelu(");
  int line, col;
  mil_pos("gelu(", &line, &col);
  char want[512];
  snprintf(want, sizeof want, "P/model.mil:%d:%d: error[ANE010]: gelu 'y' is not an ANE op\n", line, col);
  cr_assert_str_eq(pkg_findings(), want);
  remove_dir();
}

Test(mil, unreadable_or_malformed) {
  make_dir();
  char want[512];
  snprintf(want, sizeof want, "lint: error: cannot read '%s/none.mil': No such file or directory\n", dir);
  cr_assert_str_eq(mil_findings("none.mil"), want);
  put_file("bad.mil", "program(1.3)\n{\n    func main<ios18>(tensor<fp16, [1]> x) {\n");
  cr_assert_str_eq(mil_findings("bad.mil"), "D/bad.mil:3:43: error: cannot check this MIL text: '{' is never closed\n"
                                            "    3 |     func main<ios18>(tensor<fp16, [1]> x) {\n"
                                            "      |                                           ^\n");
  remove_dir();
}

/* orion-lint reads MIL with the reader orion-run loads it with, so on text
 * that cannot be read both stop at the same first error, at the same place
 * and in the same words (the linter says that is why it cannot check it).
 * The linter's old scanner accepted these bytes: it saw an op and '='. */
Test(mil, lint_and_reader_agree_on_the_first_error) {
  make_dir();
  put_file("agree.mil", "program(1.3)\n{\n    func main<ios18>(tensor<fp16, [1]> x) {\n"
                        "        tensor<fp16, [1]> y = relu(x = x) extra;\n    } -> (y);\n}\n");
  SourceSet ss;
  srcset_init(&ss);
  Diag d;
  diag_init(&d, &ss);
  StrBuf out;
  sb_init(&out);
  d.capture = &out;
  char path[256];
  snprintf(path, sizeof path, "%s/agree.mil", dir);
  cr_assert_null(mil_read_file(path, &d));
  char reader[512];
  snprintf(reader, sizeof reader, "%.*s", (int)strcspn(out.data, "\n"), out.data);
  const char *err = strstr(reader, ": error: ");
  cr_assert_not_null(err, "%s", reader);
  char want[768];
  snprintf(want, sizeof want, "D%.*s: error: cannot check this MIL text: %s", (int)(err - reader - strlen(dir)),
           reader + strlen(dir), err + strlen(": error: "));
  cr_assert_str_eq(want, "D/agree.mil:4:43: error: cannot check this MIL text: unexpected identifier 'extra', "
                         "expected ';' or '['");
  const char *lint = mil_findings("agree.mil");
  cr_assert_eq(strncmp(lint, want, strlen(want)), 0, "lint: %s\nreader: %s", lint, reader);
  cr_assert_eq(lint[strlen(want)], '\n');
  sb_free(&out);
  srcset_free(&ss);
  remove_dir();
}

/* ---- reporters ---- */

/* A report of the concat program's findings (ANE001 only). */
static void concat_report(Parsed *p, LintReport *r, ConstraintTable *t) {
  parsed_open(p, concat_program);
  cr_assert_not_null(p->m);
  lint_report_init(r, &p->sources);
  const char *allow[] = {"ANE004"};
  LintOptions o = {.target = MIL_IOS18, .allow = allow, .nallow = 1};
  lint_ir(t, p->m, &o, r);
  cr_assert_eq(r->n, 1);
}

Test(report, text_exact) {
  ConstraintTable *t = builtin();
  Parsed p;
  LintReport r;
  concat_report(&p, &r, t);
  StrBuf sb;
  sb_init(&sb);
  lint_format_text(&r, &sb);
  cr_assert_str_eq(sb.data,
                   "t.oir:2:7: error[ANE001]: concat producing 'h' is rejected by the ANE compiler\n"
                   "    2 |   h = concat(a, b, axis=1);\n"
                   "      |       ^~~~~~\n"
                   "t.oir:2:7: note: workaround: Return the parts as separate outputs (a multi-output program), or pack "
                   "inputs along one dimension and take them apart with slice_by_index; split-concat turns a concat "
                   "feeding outputs into separate outputs, one feeding conv/linear/matmul into a sum of products over "
                   "split weights, and distributes one feeding element-wise ops\n"
                   "t.oir:2:7: note: fixed by pass 'split-concat'\n"
                   "t.oir:2:7: note: reports disagree about this rule (orion-lint --explain ANE001)\n");
  sb_free(&sb);
  lint_report_free(&r);
  parsed_close(&p);
  constraints_free(t);
}

/* The rule's "fixed by pass" note is left out where the finding says the pass cannot fix it. */
Test(report, text_has_no_fix_note_when_the_pass_cannot_fix_it) {
  ConstraintTable *t = builtin();
  Parsed p;
  parsed_open(&p, "func main(a: fp16[1,2,4], b: fp16[1,2,4]) {\n  h = concat(a, b, axis=2);\n"
                  "  n = reduce_sum(h, axes=[2]);\n  return n;\n}\n");
  cr_assert_not_null(p.m);
  LintReport r;
  lint_report_init(&r, &p.sources);
  const char *allow[] = {"ANE004"};
  LintOptions o = {.target = MIL_IOS18, .allow = allow, .nallow = 1, .pipeline = passes_pipeline("O0")};
  lint_ir(t, p.m, &o, &r);
  cr_assert_eq(r.n, 1);
  cr_assert(r.items[0].unfixable && !r.items[0].will_be_fixed);
  StrBuf sb;
  sb_init(&sb);
  lint_format_text(&r, &sb);
  cr_assert_not_null(strstr(sb.data, "split-concat cannot remove it"), "%s", sb.data);
  cr_assert_null(strstr(sb.data, "fixed by pass"), "%s", sb.data);
  cr_assert_not_null(strstr(sb.data, "note: workaround: "), "%s", sb.data);
  cr_assert_not_null(strstr(sb.data, "note: reports disagree about this rule"), "%s", sb.data);
  sb_free(&sb);
  lint_report_free(&r);
  parsed_close(&p);
  constraints_free(t);
}

Test(report, json_exact) {
  ConstraintTable *t = builtin();
  Parsed p;
  LintReport r;
  concat_report(&p, &r, t);
  StrBuf sb;
  sb_init(&sb);
  lint_format_json(&r, &sb);
  cr_assert_str_eq(sb.data,
                   "{\n"
                   "  \"format\": \"orion-lint\",\n"
                   "  \"format_version\": 1,\n"
                   "  \"tool\": {\n"
                   "    \"name\": \"orion-lint\",\n"
                   "    \"version\": \"" ORION_VERSION "\"\n"
                   "  },\n"
                   "  \"complete\": true,\n"
                   "  \"findings\": [\n"
                   "    {\n"
                   "      \"rule\": \"ANE001\",\n"
                   "      \"name\": \"no-concat\",\n"
                   "      \"severity\": \"error\",\n"
                   "      \"category\": \"compile-failure\",\n"
                   "      \"message\": \"concat producing 'h' is rejected by the ANE compiler\",\n"
                   "      \"file\": \"t.oir\",\n"
                   "      \"line\": 2,\n"
                   "      \"column\": 7,\n"
                   "      \"end_column\": 13,\n"
                   "      \"function\": \"main\",\n"
                   "      \"fixed_by\": \"split-concat\",\n"
                   "      \"will_be_fixed\": false,\n"
                   "      \"unfixed_severity\": \"error\",\n"
                   "      \"workaround\": \"Return the parts as separate outputs (a multi-output program), or pack inputs "
                   "along one dimension and take them apart with slice_by_index; split-concat turns a concat feeding "
                   "outputs into separate outputs, one feeding conv/linear/matmul into a sum of products over split "
                   "weights, and distributes one feeding element-wise ops\",\n"
                   "      \"disputed\": true\n"
                   "    }\n"
                   "  ],\n"
                   "  \"input_messages\": [],\n"
                   "  \"summary\": {\n"
                   "    \"errors\": 1,\n"
                   "    \"warnings\": 0,\n"
                   "    \"notes\": 0,\n"
                   "    \"will_be_fixed\": 0,\n"
                   "    \"input_errors\": 0\n"
                   "  }\n"
                   "}\n");
  sb.len = 0;
  LintReport empty;
  lint_report_init(&empty, &p.sources);
  lint_format_json(&empty, &sb);
  /* No findings: an empty array, and a summary of zeros. */
  cr_assert_not_null(strstr(sb.data, "  \"complete\": true,\n  \"findings\": [],\n  \"input_messages\": [],\n"),
                     "%s", sb.data);
  cr_assert_not_null(strstr(sb.data, "\"errors\": 0,\n    \"warnings\": 0,\n    \"notes\": 0,\n"), "%s", sb.data);
  lint_report_free(&empty);
  sb_free(&sb);
  lint_report_free(&r);
  parsed_close(&p);
  constraints_free(t);
}

/* Bytes from a MIL file or a path come out as valid JSON whatever they are. */
Test(report, json_escapes_anything) {
  ConstraintTable *t = builtin();
  LintReport r;
  lint_report_init(&r, NULL);
  LintFinding f = {.rule = constraints_find(t, "ANE014"), .severity = DIAG_ERROR, .path = "a\"b\\c\x01\xff.mil",
                   .message = "tab\there \xe2\x82\xac \xc3("};
  lint_report_add(&r, &f);
  StrBuf sb;
  sb_init(&sb);
  lint_format_json(&r, &sb);
  cr_assert_not_null(strstr(sb.data, "\"message\": \"tab\\there \xe2\x82\xac \\ufffd(\""), "%s", sb.data);
  cr_assert_not_null(strstr(sb.data, "\"file\": \"a\\\"b\\\\c\\u0001\\ufffd.mil\""), "%s", sb.data);
  cr_assert_not_null(strstr(sb.data, "\"line\": null"));
  cJSON *j = cJSON_Parse(sb.data);
  cr_assert_not_null(j);
  cJSON_Delete(j);
  sb_free(&sb);
  lint_report_free(&r);
  constraints_free(t);
}

static const cJSON *member(const cJSON *o, const char *key, int type) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  cr_assert_not_null(v, "no '%s'", key);
  cr_assert_eq(v->type & 0xff, type, "'%s' has the wrong type", key);
  return v;
}

static const char *text_of(const cJSON *o, const char *key) { return member(o, key, cJSON_String)->valuestring; }

Test(report, sarif_structure) {
  ConstraintTable *t = builtin();
  Parsed p;
  LintReport r;
  concat_report(&p, &r, t);
  /* And a finding located only by a file, with an absolute path. */
  LintFinding f = {.rule = constraints_find(t, "ANE002"), .severity = DIAG_ERROR, .path = "/tmp/a b.anepkg/Manifest.plist",
                   .function = "main", .message = "outputs differ"};
  lint_report_add(&r, &f);
  StrBuf sb;
  sb_init(&sb);
  lint_format_sarif(t, &r, &sb);
  cJSON *root = cJSON_Parse(sb.data);
  cr_assert_not_null(root, "SARIF is not JSON:\n%s", sb.data);
  cr_assert(cJSON_IsObject(root));
  cr_assert_not_null(strstr(text_of(root, "$schema"), "sarif-schema-2.1.0.json"));
  cr_assert_str_eq(text_of(root, "version"), "2.1.0");
  const cJSON *runs = member(root, "runs", cJSON_Array);
  cr_assert_eq(cJSON_GetArraySize(runs), 1);
  const cJSON *run = cJSON_GetArrayItem(runs, 0);
  const cJSON *driver = member(member(run, "tool", cJSON_Object), "driver", cJSON_Object);
  cr_assert_str_eq(text_of(driver, "name"), "orion-lint");
  cr_assert_str_eq(text_of(driver, "version"), ORION_VERSION);
  const cJSON *rules = member(driver, "rules", cJSON_Array);
  cr_assert_eq(cJSON_GetArraySize(rules), 20);
  for (int i = 0; i < 20; i++) {
    const cJSON *rule = cJSON_GetArrayItem(rules, i);
    const Constraint *c = &t->rules[i];
    cr_assert_str_eq(text_of(rule, "id"), c->id);
    cr_assert_str_eq(text_of(rule, "name"), c->name);
    cr_assert_str_eq(text_of(member(rule, "shortDescription", cJSON_Object), "text"), c->summary);
    cr_assert_str_eq(text_of(member(rule, "fullDescription", cJSON_Object), "text"), c->symptom);
    cr_assert(!strncmp(text_of(member(rule, "help", cJSON_Object), "text"), c->workaround, strlen(c->workaround)));
    const char *level = text_of(member(rule, "defaultConfiguration", cJSON_Object), "level");
    cr_assert_str_eq(level, constraint_severity_name(c->severity));
    const cJSON *props = member(rule, "properties", cJSON_Object);
    cr_assert_str_eq(text_of(props, "category"), constraint_category_name(c->category));
    cr_assert_eq(cJSON_IsTrue(member(props, "disputed", c->disputed ? cJSON_True : cJSON_False)), c->disputed);
  }
  const cJSON *results = member(run, "results", cJSON_Array);
  cr_assert_eq(cJSON_GetArraySize(results), 2);
  const cJSON *res = cJSON_GetArrayItem(results, 0);
  cr_assert_str_eq(text_of(res, "ruleId"), "ANE001");
  cr_assert_eq(member(res, "ruleIndex", cJSON_Number)->valueint, 0);
  cr_assert_str_eq(text_of(res, "level"), "error");
  cr_assert_str_eq(text_of(member(res, "message", cJSON_Object), "text"),
                   "concat producing 'h' is rejected by the ANE compiler");
  const cJSON *locs = member(res, "locations", cJSON_Array);
  cr_assert_eq(cJSON_GetArraySize(locs), 1);
  const cJSON *phys = member(cJSON_GetArrayItem(locs, 0), "physicalLocation", cJSON_Object);
  cr_assert_str_eq(text_of(member(phys, "artifactLocation", cJSON_Object), "uri"), "t.oir");
  const cJSON *region = member(phys, "region", cJSON_Object);
  cr_assert_eq(member(region, "startLine", cJSON_Number)->valueint, 2);
  cr_assert_eq(member(region, "startColumn", cJSON_Number)->valueint, 7);
  cr_assert_eq(member(region, "endColumn", cJSON_Number)->valueint, 13);
  res = cJSON_GetArrayItem(results, 1);
  cr_assert_str_eq(text_of(res, "ruleId"), "ANE002");
  cr_assert_eq(member(res, "ruleIndex", cJSON_Number)->valueint, 1);
  phys = member(cJSON_GetArrayItem(member(res, "locations", cJSON_Array), 0), "physicalLocation", cJSON_Object);
  cr_assert_str_eq(text_of(member(phys, "artifactLocation", cJSON_Object), "uri"),
                   "file:///tmp/a%20b.anepkg/Manifest.plist");
  cr_assert_null(cJSON_GetObjectItemCaseSensitive(phys, "region"));
  cJSON_Delete(root);
  sb_free(&sb);
  lint_report_free(&r);
  parsed_close(&p);
  constraints_free(t);
}

Test(report, sort_by_file_position_and_rule) {
  ConstraintTable *t = builtin();
  LintReport r;
  lint_report_init(&r, NULL);
  LintFinding a = {.rule = constraints_find(t, "ANE003"), .path = "b", .message = "1"};
  LintFinding b = {.rule = constraints_find(t, "ANE002"), .path = "b", .message = "2"};
  LintFinding c = {.rule = constraints_find(t, "ANE019"), .path = "a", .message = "3"};
  lint_report_add(&r, &a);
  lint_report_add(&r, &b);
  lint_report_add(&r, &c);
  lint_report_sort(&r);
  cr_assert_str_eq(r.items[0].message, "3");
  cr_assert_str_eq(r.items[1].message, "2");
  cr_assert_str_eq(r.items[2].message, "1");
  cr_assert_eq(lint_report_count(&r, DIAG_NOTE), 3);
  cr_assert_eq(lint_report_count(&r, DIAG_WARNING), 0);
  lint_report_free(&r);
  constraints_free(t);
}
