/*
 * The machine-readable lint reports: what kept an input from being checked
 * (parse errors, unreadable files) in JSON and SARIF, SARIF's column unit
 * and its rules' help pages. (The findings' own fields: test_constraints.c.)
 */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <string.h>

#include "orion/constraints.h"

static ConstraintTable *builtin(void) {
  Diag d;
  diag_init(&d, NULL);
  ConstraintTable *t = constraints_builtin(&d);
  cr_assert_not_null(t);
  return t;
}

static const cJSON *member(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  cr_assert_not_null(v, "no '%s'", key);
  return v;
}

static int number(const cJSON *o, const char *key) {
  const cJSON *v = member(o, key);
  cr_assert(cJSON_IsNumber(v), "'%s' is not a number", key);
  return v->valueint;
}

static const char *text(const cJSON *o, const char *key) {
  const cJSON *v = member(o, key);
  cr_assert(cJSON_IsString(v), "'%s' is not a string", key);
  return v->valuestring;
}

static const cJSON *first_run(const cJSON *sarif) { return cJSON_GetArrayItem(member(sarif, "runs"), 0); }

static const cJSON *region_of(const cJSON *with_locations) {
  const cJSON *loc = cJSON_GetArrayItem(member(with_locations, "locations"), 0);
  cr_assert_not_null(loc);
  return member(member(loc, "physicalLocation"), "region");
}

/* A report of one parse error at line 2 ("  y = relu(x;", the ';') and one
 * unreadable file known only by name. */
static void input_errors_report(SourceSet *ss, LintReport *r) {
  srcset_init(ss);
  const char *src = "func main(x: fp16[2]) {\n  y = relu(x;\n}\n";
  uint32_t file = srcset_add(ss, "bad.oir", src, strlen(src));
  lint_report_init(r, ss);
  uint32_t semi = (uint32_t)(strchr(src, ';') - src);
  lint_report_add_notice(r, DIAG_ERROR, (SrcSpan){file, semi, semi + 1}, "bad.oir", "unexpected ';', expected ')'");
  lint_report_add_notice(r, DIAG_NOTE, (SrcSpan){file, semi, semi + 1}, NULL, "the call starts here");
  lint_report_add_notice(r, DIAG_ERROR, (SrcSpan){0}, "gone.mil", "cannot read 'gone.mil': no such file or directory");
}

Test(lint_report, json_carries_input_errors) {
  SourceSet ss;
  LintReport r;
  input_errors_report(&ss, &r);
  cr_assert_eq(lint_report_input_errors(&r), 2);
  StrBuf sb;
  sb_init(&sb);
  lint_format_json(&r, &sb);
  cJSON *root = cJSON_Parse(sb.data);
  cr_assert_not_null(root, "%s", sb.data);
  cr_assert_str_eq(text(root, "format"), "orion-lint");
  cr_assert_eq(number(root, "format_version"), (int)LINT_JSON_FORMAT_VERSION);
  cr_assert_str_eq(text(member(root, "tool"), "version"), ORION_VERSION);
  cr_assert(cJSON_IsFalse(member(root, "complete")));
  cr_assert_eq(cJSON_GetArraySize(member(root, "findings")), 0);
  const cJSON *msgs = member(root, "input_messages");
  cr_assert_eq(cJSON_GetArraySize(msgs), 3);
  const cJSON *m = cJSON_GetArrayItem(msgs, 0);
  cr_assert_str_eq(text(m, "severity"), "error");
  cr_assert_str_eq(text(m, "message"), "unexpected ';', expected ')'");
  cr_assert_str_eq(text(m, "file"), "bad.oir");
  cr_assert_eq(number(m, "line"), 2);
  cr_assert_eq(number(m, "column"), 13);
  cr_assert_eq(number(m, "end_column"), 14);
  cr_assert_str_eq(text(cJSON_GetArrayItem(msgs, 1), "severity"), "note");
  m = cJSON_GetArrayItem(msgs, 2);
  cr_assert_str_eq(text(m, "file"), "gone.mil");
  cr_assert(cJSON_IsNull(member(m, "line")));
  const cJSON *summary = member(root, "summary");
  cr_assert_eq(number(summary, "errors"), 0);
  cr_assert_eq(number(summary, "input_errors"), 2);
  cJSON_Delete(root);
  sb_free(&sb);
  lint_report_free(&r);
  srcset_free(&ss);
}

Test(lint_report, sarif_carries_input_errors) {
  ConstraintTable *t = builtin();
  SourceSet ss;
  LintReport r;
  input_errors_report(&ss, &r);
  StrBuf sb;
  sb_init(&sb);
  lint_format_sarif(t, &r, &sb);
  cJSON *root = cJSON_Parse(sb.data);
  cr_assert_not_null(root, "%s", sb.data);
  const cJSON *run = first_run(root);
  cr_assert_str_eq(text(run, "columnKind"), "unicodeCodePoints");
  const cJSON *inv = cJSON_GetArrayItem(member(run, "invocations"), 0);
  cr_assert(cJSON_IsFalse(member(inv, "executionSuccessful")));
  const cJSON *notes = member(inv, "toolExecutionNotifications");
  cr_assert_eq(cJSON_GetArraySize(notes), 3);
  const cJSON *n = cJSON_GetArrayItem(notes, 0);
  cr_assert_str_eq(text(n, "level"), "error");
  cr_assert_str_eq(text(member(n, "message"), "text"), "unexpected ';', expected ')'");
  const cJSON *region = region_of(n);
  cr_assert_eq(number(region, "startLine"), 2);
  cr_assert_eq(number(region, "startColumn"), 13);
  cr_assert_eq(number(region, "endColumn"), 14);
  cr_assert_str_eq(text(cJSON_GetArrayItem(notes, 1), "level"), "note");
  /* The errors are results too (the note is not), the unreadable file by its name alone. */
  const cJSON *results = member(run, "results");
  cr_assert_eq(cJSON_GetArraySize(results), 2);
  const cJSON *res = cJSON_GetArrayItem(results, 0);
  cr_assert_str_eq(text(res, "ruleId"), "input-error");
  cr_assert_str_eq(text(res, "level"), "error");
  cr_assert_eq(number(region_of(res), "startColumn"), 13);
  const cJSON *loc = cJSON_GetArrayItem(member(cJSON_GetArrayItem(results, 1), "locations"), 0);
  const cJSON *phys = member(loc, "physicalLocation");
  cr_assert_str_eq(text(member(phys, "artifactLocation"), "uri"), "gone.mil");
  cr_assert_null(cJSON_GetObjectItemCaseSensitive(phys, "region"));
  cJSON_Delete(root);
  sb_free(&sb);
  lint_report_free(&r);
  srcset_free(&ss);
  constraints_free(t);
}

Test(lint_report, sarif_succeeds_without_input_errors) {
  ConstraintTable *t = builtin();
  LintReport r;
  lint_report_init(&r, NULL);
  lint_report_add_notice(&r, DIAG_WARNING, (SrcSpan){0}, "a.oir", "input 'u' is never used");
  StrBuf sb;
  sb_init(&sb);
  lint_format_sarif(t, &r, &sb);
  cJSON *root = cJSON_Parse(sb.data);
  cr_assert_not_null(root);
  const cJSON *run = first_run(root);
  const cJSON *inv = cJSON_GetArrayItem(member(run, "invocations"), 0);
  cr_assert(cJSON_IsTrue(member(inv, "executionSuccessful")));
  cr_assert_eq(cJSON_GetArraySize(member(inv, "toolExecutionNotifications")), 1);
  cr_assert_eq(cJSON_GetArraySize(member(run, "results")), 0);
  cJSON_Delete(root);
  sb.len = 0;
  lint_format_json(&r, &sb);
  root = cJSON_Parse(sb.data);
  cr_assert(cJSON_IsTrue(member(root, "complete")));
  cJSON_Delete(root);
  sb_free(&sb);
  lint_report_free(&r);
  constraints_free(t);
}

/* SARIF columns count code points (as columnKind says), the text and JSON
 * reports' count bytes: "ab\u00e9\u20ac z" puts 'z' at byte 9, code point 6. */
Test(lint_report, sarif_columns_count_code_points) {
  ConstraintTable *t = builtin();
  SourceSet ss;
  srcset_init(&ss);
  const char *src = "first line\nab\xc3\xa9\xe2\x82\xac zz \xc3\xa9\n";
  uint32_t file = srcset_add(&ss, "u.mil", src, strlen(src));
  uint32_t z = (uint32_t)(strchr(src, 'z') - src);
  LintReport r;
  lint_report_init(&r, &ss);
  LintFinding f = {.rule = constraints_find(t, "ANE014"), .severity = DIAG_ERROR, .span = {file, z, z + 5},
                   .message = "m"};
  lint_report_add(&r, &f);
  StrBuf sb;
  sb_init(&sb);
  lint_format_sarif(t, &r, &sb);
  cJSON *root = cJSON_Parse(sb.data);
  cr_assert_not_null(root);
  const cJSON *region = region_of(cJSON_GetArrayItem(member(first_run(root), "results"), 0));
  cr_assert_eq(number(region, "startLine"), 2);
  cr_assert_eq(number(region, "startColumn"), 6);
  cr_assert_eq(number(region, "endColumn"), 10); /* "zz \u00e9": four code points, five bytes */
  cJSON_Delete(root);
  sb.len = 0;
  lint_format_json(&r, &sb);
  root = cJSON_Parse(sb.data);
  const cJSON *finding = cJSON_GetArrayItem(member(root, "findings"), 0);
  cr_assert_eq(number(finding, "column"), 9);
  cr_assert_eq(number(finding, "end_column"), 14);
  cJSON_Delete(root);
  sb_free(&sb);
  lint_report_free(&r);
  srcset_free(&ss);
  constraints_free(t);
}

/* GitHub's anchor of a Markdown heading: lowercase, spaces to '-', other punctuation dropped. */
static void heading_anchor(const char *heading, size_t len, char *out, size_t cap) {
  size_t n = 0;
  for (size_t i = 0; i < len && n + 1 < cap; i++) {
    char c = heading[i];
    if (c >= 'A' && c <= 'Z') out[n++] = (char)(c - 'A' + 'a');
    else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_') out[n++] = c;
    else if (c == ' ') out[n++] = '-';
  }
  out[n] = 0;
}

/* Each rule's helpUri is the installed docs/constraints.md at an anchor
 * the page has: the heading of that rule's section. */
Test(lint_report, sarif_help_uri_is_the_rules_section) {
  ConstraintTable *t = builtin();
  char *doc;
  size_t len;
  const char *err;
  cr_assert(read_file(ORION_SOURCE_ROOT "/docs/constraints.md", 1u << 24, &doc, &len, &err), "%s", err);
  LintReport r;
  lint_report_init(&r, NULL);
  StrBuf sb;
  sb_init(&sb);
  lint_format_sarif(t, &r, &sb);
  cJSON *root = cJSON_Parse(sb.data);
  const cJSON *rules = member(member(member(first_run(root), "tool"), "driver"), "rules");
  cr_assert_eq(cJSON_GetArraySize(rules), (int)t->nrules);
  for (uint32_t i = 0; i < t->nrules; i++) {
    const Constraint *c = &t->rules[i];
    const char *uri = text(cJSON_GetArrayItem(rules, (int)i), "helpUri");
    cr_assert(!strncmp(uri, "file:///", 8), "%s", uri);
    const char *hash = strchr(uri, '#');
    cr_assert_not_null(hash, "%s", uri);
    cr_assert(hash - uri > 25 && !strncmp(hash - 25, "/doc/orion/constraints.md#", 26), "%s", uri);
    char want[128];
    snprintf(want, sizeof want, "\n## %s: %s\n", c->id, c->name);
    const char *h = strstr(doc, want);
    cr_assert_not_null(h, "docs/constraints.md has no section for %s", c->id);
    char anchor[128];
    heading_anchor(h + 4, strlen(want) - 5, anchor, sizeof anchor);
    cr_assert_str_eq(hash + 1, anchor);
  }
  cJSON_Delete(root);
  sb_free(&sb);
  lint_report_free(&r);
  free(doc);
  constraints_free(t);
}
