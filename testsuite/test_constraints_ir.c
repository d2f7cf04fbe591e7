/*
 * The linter's IR checks: each static rule with a violating program (its
 * exact finding) and a clean one, before and after legalization, allow and
 * severity overrides; and the three reporters (text and JSON exactly, SARIF
 * by its required structure, parsed back). (Split from test_constraints.c.)
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
