/*
 * The linter's package and MIL file checks: a clean package, each package
 * rule on an edited package (surfaces, binding order, BLOBFILE offsets,
 * literal transposes, undefined returns), the MIL text rules in bare files
 * and packages, unreadable and malformed MIL, and the linter agreeing with
 * the MIL reader on the first error. (Split from test_constraints.c.)
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

/* ---- package checks ---- */

static char dir[64];

static void make_dir(void) { test_dir_make(dir, sizeof dir, "lint"); }

static void remove_dir(void) { test_dir_remove(dir); }

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
