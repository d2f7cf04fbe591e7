/*
 * The ANE failure simulation (orion/ane_check.h) and the rule registry it
 * shares with the linter (orion/ane_rules.h): the registry against the
 * constraint table; orion_ane_check on bare directories (every MIL rule,
 * ANE013 included) and packages (manifest rules, a concat reported once,
 * chips) with the exact messages; with cpu_placement, the statement rules
 * as remarks and the statements they place, the surface rules still errors;
 * the linter finding the same rules at the same places in the same file.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "helpers.h"
#include "orion/ane_check.h"
#include "orion/ane_rules.h"
#include "orion/constraints.h"
#include "orion/package.h"
#include "orion/passes.h"

static ConstraintTable *builtin(void) {
  size_t len;
  const char *text = constraints_builtin_text(&len);
  SourceSet ss;
  srcset_init(&ss);
  Diag d;
  diag_init(&d, &ss);
  ConstraintTable *t = constraints_parse("ane_constraints.json", text, len, NULL, &d);
  cr_assert_not_null(t);
  srcset_free(&ss);
  return t;
}

/* ---- the registry ---- */

Test(registry, every_package_or_runtime_rule_has_an_entry_and_every_entry_a_rule) {
  ConstraintTable *t = builtin();
  for (uint32_t i = 0; i < t->nrules; i++) {
    const Constraint *c = &t->rules[i];
    uint32_t k = ane_rule_find(c->id);
    if (!(c->checks & (CHECK_STATIC_PACKAGE | CHECK_RUNTIME))) {
      cr_assert_eq(k, UINT32_MAX, "%s is checked neither on packages nor at run time, but has an entry", c->id);
      continue;
    }
    cr_assert_neq(k, UINT32_MAX, "%s is checked on packages or at run time but has no entry", c->id);
    if (c->checks & CHECK_STATIC_PACKAGE)
      cr_assert_neq(ane_rule_needs(k), ANE_RULE_AT_RUN, "%s is static-package but has no checker", c->id);
    if (ane_rule_needs(k) == ANE_RULE_AT_RUN)
      cr_assert(ane_rule_at_run_reason(k) && *ane_rule_at_run_reason(k), "%s: no reason it waits for a run", c->id);
    else
      cr_assert_null(ane_rule_at_run_reason(k));
  }
  for (uint32_t k = 0; k < ane_rule_count(); k++) {
    const Constraint *c = constraints_find(t, ane_rule_id(k));
    cr_assert_not_null(c, "entry %u names the unknown rule %s", k, ane_rule_id(k));
    cr_assert(c->checks & (CHECK_STATIC_PACKAGE | CHECK_RUNTIME), "%s has an entry but the table checks it neither way",
              c->id);
    cr_assert_eq(ane_rule_find(c->id), k, "%s has two entries", c->id);
    if (k) cr_assert_lt(constraints_find(t, ane_rule_id(k - 1))->number, c->number, "entries out of rule order");
  }
  /* 12 checkers (7 of MIL text, 5 of the manifest) and 5 rules only a run shows. */
  uint32_t n[3] = {0};
  for (uint32_t k = 0; k < ane_rule_count(); k++) n[ane_rule_needs(k)]++;
  cr_assert_eq(n[ANE_RULE_MIL], 7);
  cr_assert_eq(n[ANE_RULE_MANIFEST], 5);
  cr_assert_eq(n[ANE_RULE_AT_RUN], 5);
  constraints_free(t);
}

static const char *lowered(const ConstraintTable *t, const char *id) {
  static char buf[256];
  StrBuf sb;
  sb_init(&sb);
  ane_rule_summary_lower(constraints_find(t, id), &sb);
  snprintf(buf, sizeof buf, "%s", sb.data);
  sb_free(&sb);
  return buf;
}

Test(registry, summaries_read_as_the_tail_of_a_sentence) {
  ConstraintTable *t = builtin();
  cr_assert_str_eq(lowered(t, "ANE001"), "the ANE compiler rejects concat");
  cr_assert_str_eq(lowered(t, "ANE006"), "the ANE's fused attention ignores its mask");
  cr_assert_str_eq(lowered(t, "ANE008"), "a BLOBFILE offset must point at the blob's metadata record");
  cr_assert_str_eq(lowered(t, "ANE010"), "gelu is not an ANE op");
  cr_assert_str_eq(lowered(t, "ANE013"), "conv takes no bias on the ANE path");
  constraints_free(t);
}

/* ---- programs on disk ---- */

static char dir[64];

static void make_dir(void) {
  snprintf(dir, sizeof dir, "/tmp/orion-anecheck-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
}

static void remove_dir(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

static void make_subdir(const char *rel) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, rel);
  cr_assert_eq(mkdir(path, 0755), 0, "%s", path);
}

static void put_file(const char *rel, const char *text) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, rel);
  const char *err;
  cr_assert(write_file_atomic(path, text, strlen(text), &err), "%s", err);
}

static char *read_rel(const char *rel) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, rel);
  char *data;
  size_t len;
  const char *err;
  cr_assert(read_file(path, 1u << 24, &data, &len, &err), "%s: %s", path, err);
  return data;
}

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

/* Sets <key>KEY</key><integer>..</integer> of the tensor named `tensor` in the manifest. */
static void set_manifest_int(const char *tensor, const char *key, const char *value) {
  char anchor[128], k[64];
  snprintf(anchor, sizeof anchor, "<string>%s</string>", tensor);
  snprintf(k, sizeof k, "<key>%s</key>", key);
  char *text = read_rel("p.anepkg/" PACKAGE_MANIFEST);
  char *kp = strstr(strstr(text, anchor), k);
  cr_assert_not_null(kp);
  char *open = strstr(kp, "<integer>"), *close = strstr(kp, "</integer>");
  StrBuf sb;
  sb_init(&sb);
  sb_printf(&sb, "%.*s<integer>%s%s", (int)(open - text), text, value, close);
  put_file("p.anepkg/" PACKAGE_MANIFEST, sb.data);
  sb_free(&sb);
  free(text);
}

/* The error and note lines (no source excerpts) of checking function 0 of
 * dir/REL, dir replaced by "D"; `ok` tells what orion_ane_check returned. */
static const char *check_at(const char *rel, const OrionAneCheckOptions *opt, bool *ok) {
  static char buf[8192];
  SourceSet ss;
  srcset_init(&ss);
  StrBuf diags, lines;
  sb_init(&diags);
  sb_init(&lines);
  Diag d;
  diag_init(&d, &ss);
  d.capture = &diags;
  d.program = "t";
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, rel);
  OrionOpenOptions oo = {.verify_checksums = false};
  OrionProgram *p = orion_open(path, &oo, &d);
  cr_assert_not_null(p, "%s", diags.data);
  *ok = orion_ane_check(p, 0, opt, &d);
  for (const char *line = diags.data; line && *line;) {
    size_t n = strcspn(line, "\n");
    if (line[0] != ' ') {
      for (const char *q = line; q < line + n;) {
        bool at_dir = !strncmp(q, dir, strlen(dir));
        if (at_dir) sb_puts(&lines, "D");
        else sb_putc(&lines, *q);
        q += at_dir ? strlen(dir) : 1;
      }
      sb_putc(&lines, '\n');
    }
    line += n + (line[n] == '\n');
  }
  snprintf(buf, sizeof buf, "%s", lines.data ? lines.data : "");
  orion_close(p);
  sb_free(&diags);
  sb_free(&lines);
  srcset_free(&ss);
  return buf;
}

/* Every rule of MIL text a strict reader lets through, each violated once
 * (ANE008 and ANE014 make orion_open itself refuse the program). */
static const char *const bare_mil =
    "program(1.3)\n"
    "{\n"
    "    func main<ios18>(tensor<fp16, [1, 4, 1, 8]> a, tensor<fp16, [1, 4, 1, 8]> b) {\n"
    "        int32 ax = const()[name = string(\"ax\"), val = int32(3)];\n"
    "        bool il = const()[name = string(\"il\"), val = bool(false)];\n"
    "        tensor<fp16, [1, 4, 1, 16]> c = concat(axis = ax, interleave = il, values = (a, b))[name = string(\"c\")];\n"
    "        tensor<fp16, [1, 4, 1, 8]> g = gelu(x = a)[name = string(\"g\")];\n"
    "        tensor<fp16, [4, 4, 1, 1]> w = const()[name = string(\"w\"), val = tensor<fp16, [4, 4, 1, 1]>([1, 0, 0, 0, "
    "0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1])];\n"
    "        tensor<fp16, [4]> cb = const()[name = string(\"cb\"), val = tensor<fp16, [4]>([0, 0, 0, 0])];\n"
    "        tensor<fp16, [1, 4, 1, 8]> k = conv(bias = cb, weight = w, x = g)[name = string(\"k\")];\n"
    "        tensor<fp16, [1, 4, 1, 8]> s = scaled_dot_product_attention(attn_mask = b, key = a, query = b, value = "
    "k)[name = string(\"s\")];\n"
    "        tensor<fp16, [1, 4, 1, 8]> s2 = scaled_dot_product_attention(key = a, query = b, value = s)[name = "
    "string(\"s2\")];\n"
    "        tensor<fp16, [1, 4, 8, 8]> m = matmul(transpose_x = bool(true), transpose_y = il, x = s2, y = s2)[name = "
    "string(\"m\")];\n"
    "    } -> (m, c);\n"
    "}\n";

static const char *const bare_errors =
    "D/bare/model.mil:6:41: error: concat would fail on the ANE: the ANE compiler rejects concat [ANE001]\n"
    "D/bare/model.mil:7:40: error: gelu would fail on the ANE: gelu is not an ANE op [ANE010]\n"
    "D/bare/model.mil:10:40: error: conv would fail on the ANE: conv takes no bias on the ANE path [ANE013]\n"
    "D/bare/model.mil:11:40: error: scaled_dot_product_attention would fail on the ANE: the ANE's fused attention "
    "ignores its mask [ANE006]\n"
    "D/bare/model.mil:13:61: error: transpose_x of matmul 'm' is the literal 'bool(true)'; the ANE's MIL parser needs "
    "a named bool const [ANE012]\n";

Test(ane_check, bare_directory_gets_every_mil_rule) {
  make_dir();
  make_subdir("bare");
  put_file("bare/model.mil", bare_mil);
  bool ok;
  cr_assert_str_eq(check_at("bare", NULL, &ok), bare_errors);
  cr_assert_not(ok);
  remove_dir();
}

/* With cpu_placement (the ane backend's supports and orion-run on it):
 * every rule bare_mil breaks is one the table places on the CPU, so each
 * statement is a remark at its op, once (the matmul breaks ANE012 once),
 * placed[] names the rule, and the function passes. */
Test(ane_check, placement_turns_statement_rules_into_remarks) {
  make_dir();
  make_subdir("bare");
  put_file("bare/model.mil", bare_mil);
  uint32_t placed[10] = {0};
  OrionAneCheckOptions opt = {.cpu_placement = true, .placed = placed};
  bool ok;
  cr_assert_str_eq(check_at("bare", &opt, &ok),
                   "D/bare/model.mil:6:41: note: statement 2 (concat 'c') runs on the CPU: ANE001, the ANE compiler "
                   "rejects concat\n"
                   "D/bare/model.mil:7:40: note: statement 3 (gelu 'g') runs on the CPU: ANE010, gelu is not an ANE op\n"
                   "D/bare/model.mil:10:40: note: statement 6 (conv 'k') runs on the CPU: ANE013, conv takes no bias on "
                   "the ANE path\n"
                   "D/bare/model.mil:11:40: note: statement 7 (scaled_dot_product_attention 's') runs on the CPU: "
                   "ANE006, the ANE's fused attention ignores its mask\n"
                   "D/bare/model.mil:13:40: note: statement 9 (matmul 'm') runs on the CPU: ANE012, matmul's "
                   "transpose_x and transpose_y must be named consts\n");
  cr_assert(ok);
  uint32_t want[10] = {0, 0, 1, 10, 0, 0, 13, 6, 0, 12};
  for (uint32_t i = 0; i < 10; i++) cr_assert_eq(placed[i], want[i], "statement %u: rule %u", i, placed[i]);
  remove_dir();
}

static const char *const pkg_program =
    "func main(xin: fp16[1,4,4], amat: fp16[1,4,4]) {\n"
    "  param w: fp16[4,4] = normal(seed=3, std=0.5);\n"
    "  h = linear(xin, w);\n"
    "  y = matmul(h, amat, transpose_y=true);\n"
    "  return zout = y, first = h;\n"
    "}\n";

/* A clean package and its MIL as a bare directory: nothing would fail, and
 * without a manifest (surface sizes 0) no manifest rule runs. */
Test(ane_check, clean_programs_pass) {
  make_dir();
  compile_pkg(pkg_program);
  bool ok;
  cr_assert_str_eq(check_at("p.anepkg", NULL, &ok), "");
  cr_assert(ok);
  char cmd[512];
  snprintf(cmd, sizeof cmd, "cp -r '%s/p.anepkg' '%s/bare' && rm '%s/bare/" PACKAGE_MANIFEST "'", dir, dir, dir);
  cr_assert_eq(system(cmd), 0);
  cr_assert_str_eq(check_at("bare", NULL, &ok), "");
  cr_assert(ok);
  remove_dir();
}

Test(ane_check, package_manifest_rules) {
  make_dir();
  compile_pkg(pkg_program);
  set_manifest_int("zout", "SurfaceBytes", "65536");
  set_manifest_int("amat", "SurfaceBytes", "98304");
  bool ok;
  cr_assert_str_eq(check_at("p.anepkg", NULL, &ok),
                   "t: error: D/p.anepkg/Manifest.plist: outputs of 'main' have surfaces of different sizes: 'zout' "
                   "has 65536 bytes, 'first' has 49152 [ANE002]\n"
                   "t: error: D/p.anepkg/Manifest.plist: inputs of 'main' have surfaces of different sizes: 'xin' has "
                   "49152 bytes, 'amat' has 98304 [ANE018]\n");
  cr_assert_not(ok);
  compile_pkg(pkg_program);
  set_manifest_int("zout", "Binding", "0");
  set_manifest_int("first", "Binding", "1");
  set_manifest_int("xin", "Binding", "0");
  set_manifest_int("amat", "Binding", "1");
  cr_assert_str_eq(check_at("p.anepkg", NULL, &ok),
                   "t: error: D/p.anepkg/Manifest.plist: output 'zout' of 'main' (MIL name 'zout') has binding 0, but "
                   "the ANE binds it at 1 (ASCII order of MIL names) [ANE003]\n"
                   "t: error: D/p.anepkg/Manifest.plist: output 'first' of 'main' (MIL name 'first') has binding 1, "
                   "but the ANE binds it at 0 (ASCII order of MIL names) [ANE003]\n"
                   "t: error: D/p.anepkg/Manifest.plist: input 'xin' of 'main' (MIL name 'xin') has binding 0, but "
                   "the ANE binds it at 1 (ASCII order of MIL names) [ANE019]\n"
                   "t: error: D/p.anepkg/Manifest.plist: input 'amat' of 'main' (MIL name 'amat') has binding 1, but "
                   "the ANE binds it at 0 (ASCII order of MIL names) [ANE019]\n");
  compile_pkg("func main(x: fp16[1,4]) {\n  y = relu(x);\n  return y;\n}\n");
  set_manifest_int("x", "SurfaceBytes", "3072");
  set_manifest_int("y", "SurfaceBytes", "3072");
  cr_assert_str_eq(check_at("p.anepkg", NULL, &ok),
                   "t: error: D/p.anepkg/Manifest.plist: input 'x' of 'main' has a 3072-byte surface, below the "
                   "49152-byte minimum of ios18 [ANE004]\n"
                   "t: error: D/p.anepkg/Manifest.plist: output 'y' of 'main' has a 3072-byte surface, below the "
                   "49152-byte minimum of ios18 [ANE004]\n");
  remove_dir();
}

/* orion-run used to report a package's concat twice: its own rule and the
 * linter's. (split-concat leaves this one; legalizing layer_norm adds a second.) */
Test(ane_check, package_concat_is_reported_once) {
  make_dir();
  compile_pkg("func main(a: fp32[1,2,4], b: fp32[1,2,4]) {\n  y = concat(a, b, axis=-1);\n  n = layer_norm(y);\n"
              "  return n;\n}\n");
  bool ok;
  const char *out = check_at("p.anepkg", NULL, &ok);
  cr_assert_not(ok);
  cr_assert_not_null(strstr(out, ": error: concat would fail on the ANE: the ANE compiler rejects concat [ANE001]\n"),
                     "%s", out);
  uint32_t reported = 0, statements = 0;
  for (const char *h = out; (h = strstr(h, "[ANE001]")); h++) reported++;
  char *mil = read_rel("p.anepkg/model.mil");
  for (const char *h = mil; (h = strstr(h, " = concat(")); h++) statements++;
  free(mil);
  cr_assert_eq(statements, 2);
  cr_assert_eq(reported, statements, "%s", out);
  remove_dir();
}

/* A rule about the surfaces is no placement question: with cpu_placement
 * the manifest's too small surfaces refuse the function in the same words. */
Test(ane_check, placement_leaves_the_surface_rules_errors) {
  make_dir();
  compile_pkg("func main(x: fp16[1,4]) {\n  y = relu(x);\n  return y;\n}\n");
  set_manifest_int("x", "SurfaceBytes", "3072");
  set_manifest_int("y", "SurfaceBytes", "3072");
  uint32_t placed[4] = {7, 7, 7, 7};
  OrionAneCheckOptions opt = {.cpu_placement = true, .placed = placed};
  bool ok;
  cr_assert_str_eq(check_at("p.anepkg", &opt, &ok),
                   "t: error: D/p.anepkg/Manifest.plist: input 'x' of 'main' has a 3072-byte surface, below the "
                   "49152-byte minimum of ios18 [ANE004]\n"
                   "t: error: D/p.anepkg/Manifest.plist: output 'y' of 'main' has a 3072-byte surface, below the "
                   "49152-byte minimum of ios18 [ANE004]\n");
  cr_assert_not(ok);
  cr_assert_eq(placed[0], 0, "nothing placed: the array is cleared");
  remove_dir();
}

/* The built-in table with a 64 KiB minimum surface for m1 (its own is the
 * targets' 48 KiB), as orion-lint's tests use it. */
static ConstraintTable *m1_64k_table(void) {
  size_t len;
  const char *text = constraints_builtin_text(&len);
  const char *m1 = strstr(text, "\"m1\": {");
  cr_assert_not_null(m1);
  const char *ms = strstr(m1, "\"min_surface_bytes\": {");
  const char *from = "\"value\": 49152,\n        \"inherited\": true,";
  const char *at = strstr(ms, from);
  cr_assert_not_null(at);
  StrBuf sb;
  sb_init(&sb);
  sb_printf(&sb, "%.*s\"value\": 65536,\n        \"inherited\": false,%s", (int)(at - text), text, at + strlen(from));
  SourceSet ss;
  srcset_init(&ss);
  Diag d;
  diag_init(&d, &ss);
  ConstraintTable *t = constraints_parse("m1.json", sb.data, sb.len, NULL, &d);
  cr_assert_not_null(t);
  srcset_free(&ss);
  sb_free(&sb);
  return t;
}

/* The chip's figures, from the options or from the manifest's Chip. */
Test(ane_check, chip_figures) {
  make_dir();
  compile_pkg("func main(x: fp16[1,4]) {\n  y = relu(x);\n  return y;\n}\n");
  ConstraintTable *t = m1_64k_table();
  const char *too_small =
      "t: error: D/p.anepkg/Manifest.plist: input 'x' of 'main' has a 49152-byte surface, below the 65536-byte "
      "minimum of m1 [ANE004]\n"
      "t: error: D/p.anepkg/Manifest.plist: output 'y' of 'main' has a 49152-byte surface, below the 65536-byte "
      "minimum of m1 [ANE004]\n";
  bool ok;
  OrionAneCheckOptions plain = {.table = t}, m1 = {.table = t, .chip = "m1"};
  cr_assert_str_eq(check_at("p.anepkg", &plain, &ok), "");
  cr_assert(ok);
  cr_assert_str_eq(check_at("p.anepkg", &m1, &ok), too_small);
  cr_assert_not(ok);
  /* The package says it was compiled for m1. */
  char *text = read_rel("p.anepkg/" PACKAGE_MANIFEST);
  char *target = strstr(text, "<key>Target</key>");
  cr_assert_not_null(target);
  StrBuf sb;
  sb_init(&sb);
  sb_printf(&sb, "%.*s<key>Chip</key><string>m1</string>%s", (int)(target - text), text, target);
  put_file("p.anepkg/" PACKAGE_MANIFEST, sb.data);
  sb_free(&sb);
  free(text);
  cr_assert_str_eq(check_at("p.anepkg", &plain, &ok), too_small);
  OrionAneCheckOptions m4 = {.table = t, .chip = "m4"}, m9 = {.table = t, .chip = "m9"};
  cr_assert_str_eq(check_at("p.anepkg", &m4, &ok), "");
  cr_assert(ok);
  cr_assert_str_eq(check_at("p.anepkg", &m9, &ok),
                   "t: error: D/p.anepkg: chip 'm9' is not one the constraint table knows (expected m1, m2, m3, m4 or "
                   "m5)\n");
  cr_assert_not(ok);
  constraints_free(t);
  remove_dir();
}

/* The linter reads the same file with the same checkers: the same rules at
 * the same places. */
Test(ane_check, linter_finds_the_same_rules_at_the_same_places) {
  make_dir();
  make_subdir("bare");
  put_file("bare/model.mil", bare_mil);
  ConstraintTable *t = builtin();
  SourceSet ss;
  srcset_init(&ss);
  Diag d;
  diag_init(&d, &ss);
  char path[256];
  snprintf(path, sizeof path, "%s/bare/model.mil", dir);
  LintReport r;
  lint_report_init(&r, &ss);
  LintOptions o = {.target = MIL_IOS18};
  cr_assert(lint_mil_file(t, path, &o, &r, &d));
  lint_report_sort(&r);
  StrBuf places;
  sb_init(&places);
  for (uint32_t i = 0; i < r.n; i++) {
    uint32_t line, col;
    srcset_linecol(&ss, r.items[i].span.file, r.items[i].span.start, &line, &col);
    sb_printf(&places, "D/bare/model.mil:%u:%u: [%s]\n", line, col, r.items[i].rule->id);
  }
  /* bare_errors, each line cut to its place and rule. */
  StrBuf want;
  sb_init(&want);
  for (const char *l = bare_errors; *l;) {
    size_t n = strcspn(l, "\n");
    const char *err = strstr(l, " error: "), *id = l + n - 8;
    sb_printf(&want, "%.*s [%.6s]\n", (int)(err - l), l, id + 1);
    l += n + 1;
  }
  cr_assert_str_eq(places.data, want.data);
  sb_free(&want);
  sb_free(&places);
  lint_report_free(&r);
  srcset_free(&ss);
  constraints_free(t);
  remove_dir();
}
