/*
 * The runtime's program loader (runtime.h): a compiled package and a bare
 * model directory open with the right functions, I/O and weight bytes; every
 * rejection (checksums, manifest/MIL disagreement, BLOBFILE path confinement,
 * weight records, missing files) comes with its exact message. Packages are
 * compiled here with the libraries; bare directories are copied out of them
 * and edited as text.
 */
/* realpath() is XSI, beyond the project-wide _POSIX_C_SOURCE. */
#define _XOPEN_SOURCE 700

#include <criterion/criterion.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include "orion/package.h"
#include "orion/passes.h"
#include "orion/runtime.h"

static const char *const program =
    "func main(x: fp16[1,4], a: fp16[1,4]) {\n"
    "  param w: fp16[4,4] = fill(0.5);\n"
    "  param b: fp16[4] = zeros;\n"
    "  h = linear(x, w, b);\n"
    "  z = add(h, a);\n"
    "  return z, first = h;\n"
    "}\n";

static char dir[64];
static char pkg[128];  /* dir/m.anepkg */
static char bare[128]; /* dir/bare */

static void make_dir(void) {
  test_dir_make(dir, sizeof dir, "loader");
  snprintf(pkg, sizeof pkg, "%s/m.anepkg", dir);
  snprintf(bare, sizeof bare, "%s/bare", dir);
}

static void cleanup(void) { test_dir_remove(dir); }

static void run(const char *cmd) { cr_assert_eq(system(cmd), 0, "failed: %s", cmd); }

/* Compiles `program` into pkg. */
static void compile_pkg(void) {
  Parsed p;
  parsed_open(&p, program);
  cr_assert_not_null(p.m, "%s", p.diags.data);
  cr_assert(passes_legalize(p.m, &p.d), "%s", p.diags.data);
  PackageOptions po = {.target = MIL_IOS18, .source_name = "t.oir", .source_text = program,
                       .source_len = strlen(program)};
  cr_assert(package_write(p.m, pkg, &po, &p.d), "%s", p.diags.data);
  parsed_close(&p);
}

/* A compiled package's MIL and weights copied into a bare directory (no manifest). */
static void make_bare(void) {
  compile_pkg();
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "mkdir -p '%s/weights' && cp '%s/model.mil' '%s/' && cp '%s/weights/weight.bin' '%s/weights/'",
           bare, pkg, bare, pkg, bare);
  run(cmd);
}

/* Replaces the first `count` occurrences (0 = all) of `from` in a file; at least one must exist. */
static void edit(const char *path, const char *from, const char *to, int count) {
  char *data;
  size_t len;
  const char *err;
  cr_assert(read_file(path, 1u << 24, &data, &len, &err), "%s: %s", path, err);
  StrBuf out;
  sb_init(&out);
  const char *s = data;
  int n = 0;
  for (const char *hit; (count == 0 || n < count) && (hit = strstr(s, from)); n++) {
    sb_putn(&out, s, (size_t)(hit - s));
    sb_puts(&out, to);
    s = hit + strlen(from);
  }
  sb_puts(&out, s);
  cr_assert_gt(n, 0, "'%s' not found in %s", from, path);
  cr_assert(write_file_atomic(path, out.data, out.len, &err), "%s", err);
  sb_free(&out);
  free(data);
}

typedef struct Opened {
  SourceSet sources;
  Diag d;
  StrBuf diags;
  OrionProgram *p;
} Opened;

static void open_at(Opened *o, const char *path, bool verify) {
  srcset_init(&o->sources);
  diag_init(&o->d, &o->sources);
  sb_init(&o->diags);
  o->d.capture = &o->diags;
  OrionOpenOptions opt = {.verify_checksums = verify};
  o->p = orion_open(path, &opt, &o->d);
}

static void close_opened(Opened *o) {
  orion_close(o->p);
  srcset_free(&o->sources);
  sb_free(&o->diags);
}

static const char *diags(const Opened *o) { return o->diags.data ? o->diags.data : ""; }

/* The diagnostics' message lines (no source excerpts), in a static buffer. */
static const char *messages(const Opened *o) {
  static char buf[8192];
  buf[0] = '\0';
  size_t used = 0;
  for (const char *s = diags(o); *s;) {
    size_t n = strcspn(s, "\n");
    char line[1024];
    snprintf(line, sizeof line, "%.*s", (int)n, s);
    if (strstr(line, "error: ") || strstr(line, "warning: ")) {
      used += (size_t)snprintf(buf + used, sizeof buf - used, "%.*s\n", (int)n, s);
      cr_assert_lt(used, sizeof buf);
    }
    s += n + (s[n] == '\n');
  }
  return buf;
}

/* Opens path, expects a failure with exactly the message lines `want`. */
static void expect_rejected(const char *path, bool verify, const char *want) {
  Opened o;
  open_at(&o, path, verify);
  cr_assert_null(o.p, "opened, diagnostics:\n%s", diags(&o));
  cr_assert_str_eq(messages(&o), want, "full diagnostics:\n%s", diags(&o));
  close_opened(&o);
}

/* Opens a bare directory whose model.mil had `from` replaced by `to` (first occurrence). */
static void expect_bare_edit_rejected(const char *from, const char *to, const char *want_after_dir) {
  make_dir();
  make_bare();
  char mil[256];
  snprintf(mil, sizeof mil, "%s/model.mil", bare);
  edit(mil, from, to, 1);
  char want[2048];
  snprintf(want, sizeof want, "%s%s", bare, want_after_dir);
  expect_rejected(bare, true, want);
  cleanup();
}

static void check_weights(const OrionProgram *p) {
  cr_assert_eq(orion_weight_count(p, 0), 2);
  const OrionWeight *w = orion_weight(p, 0, 0);
  cr_assert_str_eq(w->name, "w");
  cr_assert_str_eq(w->attr, "val");
  cr_assert_eq(w->dtype, MIL_DT_FP16);
  cr_assert_eq(w->size, 32);
  cr_assert_str_eq(orion_function_mil(p, 0)->stmts[w->stmt].op, "const");
  uint16_t h[16];
  memcpy(h, w->data, sizeof h);
  for (int i = 0; i < 16; i++) cr_assert_eq(h[i], 0x3800, "element %d is 0x%04x", i, h[i]);
  const OrionWeight *b = orion_weight(p, 0, 1);
  cr_assert_str_eq(b->name, "b");
  cr_assert_eq(b->size, 8);
  cr_assert_gt(b->stmt, w->stmt);
  static const uint8_t zeros[8];
  cr_assert_eq(memcmp(b->data, zeros, 8), 0);
  cr_assert_null(orion_weight(p, 0, 2));
}

Test(loader, package_opens) {
  make_dir();
  compile_pkg();
  Opened o;
  open_at(&o, pkg, true);
  OrionProgram *p = o.p;
  cr_assert_not_null(p, "%s", diags(&o));
  cr_assert_eq(o.diags.len, 0, "%s", diags(&o));
  cr_assert_eq(orion_function_count(p), 1);
  cr_assert_str_eq(orion_function_name(p, 0), "main");
  cr_assert_eq(orion_function_find(p, "main"), 0);
  cr_assert_eq(orion_function_find(p, "other"), UINT32_MAX);
  cr_assert_str_eq(orion_function_mil(p, 0)->name, "main");
  cr_assert(!orion_function_has_dynamic_shapes(p, 0));
  /* Inputs in declared order; bound in ASCII order of MIL names. */
  cr_assert_eq(orion_input_count(p, 0), 2);
  const OrionTensorInfo *x = orion_input(p, 0, 0), *a = orion_input(p, 0, 1);
  cr_assert_str_eq(x->name, "x");
  cr_assert_str_eq(x->mil_name, "x");
  cr_assert_eq(x->binding, 1);
  cr_assert_str_eq(a->name, "a");
  cr_assert_eq(a->binding, 0);
  cr_assert_eq(x->dtype, MIL_DT_FP16);
  cr_assert_eq(x->rank, 2);
  cr_assert_eq(x->dims[0], 1);
  cr_assert_eq(x->dims[1], 4);
  cr_assert_eq(x->bytes, 8);
  cr_assert_eq(x->surface_bytes, 49152);
  cr_assert_null(orion_input(p, 0, 2));
  cr_assert_eq(orion_output_count(p, 0), 2);
  const OrionTensorInfo *z = orion_output(p, 0, 0), *first = orion_output(p, 0, 1);
  cr_assert_str_eq(z->name, "z");
  cr_assert_eq(z->binding, 1);
  cr_assert_str_eq(first->name, "first");
  cr_assert_eq(first->binding, 0);
  cr_assert_eq(first->surface_bytes, 49152);
  check_weights(p);
  /* Default options (NULL) verify checksums too. */
  Diag d2;
  SourceSet ss2;
  srcset_init(&ss2);
  diag_init(&d2, &ss2);
  OrionProgram *p2 = orion_open(pkg, NULL, &d2);
  cr_assert_not_null(p2);
  orion_close(p2);
  srcset_free(&ss2);
  close_opened(&o);
  cleanup();
}

Test(loader, bare_directory_opens) {
  make_dir();
  make_bare();
  Opened o;
  open_at(&o, bare, true);
  OrionProgram *p = o.p;
  cr_assert_not_null(p, "%s", diags(&o));
  cr_assert_eq(o.diags.len, 0, "%s", diags(&o));
  cr_assert_eq(orion_function_count(p), 1);
  cr_assert_str_eq(orion_function_name(p, 0), "main");
  /* I/O from the MIL function: parameters as written (the emitter sorts them). */
  cr_assert_eq(orion_input_count(p, 0), 2);
  cr_assert_str_eq(orion_input(p, 0, 0)->name, "a");
  cr_assert_str_eq(orion_input(p, 0, 0)->mil_name, "a");
  cr_assert_eq(orion_input(p, 0, 0)->binding, 0);
  cr_assert_str_eq(orion_input(p, 0, 1)->name, "x");
  cr_assert_eq(orion_input(p, 0, 1)->binding, 1);
  cr_assert_eq(orion_input(p, 0, 1)->bytes, 8);
  cr_assert_eq(orion_input(p, 0, 1)->surface_bytes, 0);
  cr_assert_eq(orion_output_count(p, 0), 2);
  cr_assert_str_eq(orion_output(p, 0, 0)->name, "z");
  cr_assert_eq(orion_output(p, 0, 0)->binding, 1);
  cr_assert_str_eq(orion_output(p, 0, 1)->name, "first");
  cr_assert_eq(orion_output(p, 0, 1)->binding, 0);
  cr_assert_eq(orion_output(p, 0, 1)->dtype, MIL_DT_FP16);
  cr_assert_eq(orion_output(p, 0, 1)->rank, 2);
  check_weights(p);
  close_opened(&o);
  cleanup();
}

Test(loader, tampered_weight) {
  make_dir();
  compile_pkg();
  char file[256];
  snprintf(file, sizeof file, "%s/weights/weight.bin", pkg);
  FILE *fp = fopen(file, "r+b");
  cr_assert_not_null(fp);
  fseek(fp, 130, SEEK_SET); /* inside w's data (record 64, data 128) */
  fputc(0x55, fp);
  fclose(fp);
  char want[1024];
  snprintf(want, sizeof want,
           "orionc: error: %s/weights/weight.bin: weight 'w' fails its checksum\n",
           pkg);
  expect_rejected(pkg, true, want);
  /* Without verification it opens, and the mapping shows the changed byte. */
  Opened o;
  open_at(&o, pkg, false);
  cr_assert_not_null(o.p, "%s", diags(&o));
  cr_assert_eq(((const uint8_t *)orion_weight(o.p, 0, 0)->data)[2], 0x55);
  close_opened(&o);
  cleanup();
}

Test(loader, tampered_mil) {
  make_dir();
  compile_pkg();
  char file[256];
  snprintf(file, sizeof file, "%s/model.mil", pkg);
  FILE *fp = fopen(file, "a");
  fputs(" ", fp);
  fclose(fp);
  char want[512];
  snprintf(want, sizeof want,
           "orionc: error: %s/model.mil: checksum mismatch (the file changed since it was written)\n", pkg);
  expect_rejected(pkg, true, want);
  cleanup();
}

Test(loader, manifest_and_mil_disagree) {
  make_dir();
  compile_pkg();
  char file[256];
  snprintf(file, sizeof file, "%s/model.mil", pkg);
  /* Rename the parameter a to q (and its use), so the MIL still reads. */
  edit(file, "[1, 4]> a,", "[1, 4]> q,", 0);
  edit(file, "y = a)", "y = q)", 0);
  char want[1024];
  snprintf(want, sizeof want,
           "%s:4:10: error: input 'a' of the manifest (MIL name 'a') is not a parameter of function 'main'\n"
           "%s:4:43: error: parameter 'q' is not an input in the manifest\n",
           file, file);
  expect_rejected(pkg, false, want);
  /* With checksums on, the changed file is caught first. */
  snprintf(want, sizeof want,
           "orionc: error: %s: checksum mismatch (the file changed since it was written)\n", file);
  expect_rejected(pkg, true, want);
  cleanup();
}

Test(loader, manifest_and_mil_types_disagree) {
  make_dir();
  compile_pkg();
  char file[256];
  snprintf(file, sizeof file, "%s/model.mil", pkg);
  edit(file, "tensor<fp16, [1, 4]> x)", "tensor<fp32, [1, 4]> x)", 1);
  char want[1024];
  snprintf(want, sizeof want,
           "%s:4:67: error: input 'x' is tensor<fp16, [1, 4]> in the manifest but tensor<fp32, [1, 4]> in the MIL\n",
           file);
  expect_rejected(pkg, false, want);
  cleanup();
}

static const char w_path[] = "string(\"@model_path/weights/weight.bin\"), offset = uint64(64)";

Test(loader, blobfile_dotdot) {
  expect_bare_edit_rejected(w_path, "string(\"@model_path/../bare/weights/weight.bin\"), offset = uint64(64)",
                            "/model.mil:5:9: error: BLOBFILE path '@model_path/../bare/weights/weight.bin' has a "
                            "'..' component; weights must stay inside the model directory\n");
}

Test(loader, blobfile_absolute) {
  expect_bare_edit_rejected(w_path, "string(\"/etc/weight.bin\"), offset = uint64(64)",
                            "/model.mil:5:9: error: BLOBFILE path '/etc/weight.bin' is absolute; weight paths must "
                            "start with @model_path/\n");
  expect_bare_edit_rejected(w_path, "string(\"@model_path//etc/weight.bin\"), offset = uint64(64)",
                            "/model.mil:5:9: error: BLOBFILE path '@model_path//etc/weight.bin' is absolute after "
                            "@model_path/\n");
}

Test(loader, blobfile_without_model_path) {
  expect_bare_edit_rejected(w_path, "string(\"weights/weight.bin\"), offset = uint64(64)",
                            "/model.mil:5:9: error: BLOBFILE path 'weights/weight.bin' does not start with "
                            "@model_path/\n");
}

Test(loader, blobfile_empty_component) {
  expect_bare_edit_rejected(w_path, "string(\"@model_path/weights//weight.bin\"), offset = uint64(64)",
                            "/model.mil:5:9: error: BLOBFILE path '@model_path/weights//weight.bin' has an empty "
                            "component\n");
}

Test(loader, blobfile_symlink_out) {
  make_dir();
  make_bare();
  /* weights2 -> /tmp; through it, a copy of the weight file beside (not inside) the directory. */
  char cmd[1024], real_dir[PATH_MAX], mil[256], to[512], want[16384];
  snprintf(cmd, sizeof cmd, "ln -s /tmp '%s/weights2' && mkdir '%s/outside' && cp '%s/weights/weight.bin' '%s/outside/'",
           bare, dir, bare, dir);
  run(cmd);
  cr_assert_not_null(realpath(dir, real_dir));
  const char *base = strrchr(dir, '/') + 1;
  snprintf(mil, sizeof mil, "%s/model.mil", bare);
  snprintf(to, sizeof to, "string(\"@model_path/weights2/%s/outside/weight.bin\"), offset = uint64(64)", base);
  edit(mil, w_path, to, 1);
  /* Worded as every package reader words a file leading out (pkg_paths), at the BLOBFILE. */
  snprintf(want, sizeof want,
           "%s:5:9: error: %s/weights2/%s/outside/weight.bin: leads outside the package (a symbolic link to "
           "'%s/outside/weight.bin')\n",
           mil, bare, base, real_dir);
  expect_rejected(bare, true, want);
  /* A missing file behind the link is still reported as leading out. */
  char to2[512];
  snprintf(to2, sizeof to2, "string(\"@model_path/weights2/%s/nothing/weight.bin\"), offset = uint64(64)", base);
  edit(mil, to, to2, 1);
  snprintf(want, sizeof want,
           "%s:5:9: error: %s/weights2/%s/nothing/weight.bin: leads outside the package (a symbolic link to "
           "'%s/nothing/weight.bin')\n",
           mil, bare, base, real_dir);
  expect_rejected(bare, true, want);
  cleanup();
}

static const uint8_t *weight_bytes(const OrionProgram *p, uint32_t i) { return orion_weight(p, 0, i)->data; }

/* Links that stay inside the directory are followed (relative, and absolute
 * to its realpath), and one file reached by two spellings is mapped once. */
Test(loader, blobfile_links_inside) {
  make_dir();
  make_bare();
  char cmd[4 * PATH_MAX], real_bare[PATH_MAX], mil[256], to[PATH_MAX + 128];
  cr_assert_not_null(realpath(bare, real_bare));
  /* The distance between the two weights' bytes in one mapping of the file. */
  Opened plain;
  open_at(&plain, bare, true);
  cr_assert_not_null(plain.p, "%s", diags(&plain));
  cr_assert_eq(orion_weight_count(plain.p, 0), 2);
  ptrdiff_t apart = weight_bytes(plain.p, 1) - weight_bytes(plain.p, 0);
  close_opened(&plain);
  snprintf(cmd, sizeof cmd, "mv '%s/weights' '%s/store' && ln -s store '%s/weights' && ln -s '%s/store' '%s/abs'",
           bare, bare, bare, real_bare, bare);
  run(cmd);
  snprintf(mil, sizeof mil, "%s/model.mil", bare);
  snprintf(to, sizeof to, "string(\"@model_path/abs/weight.bin\"), offset = uint64(64)");
  edit(mil, w_path, to, 1);
  Opened o;
  open_at(&o, bare, true);
  cr_assert_not_null(o.p, "%s", diags(&o));
  cr_assert_eq(o.diags.len, 0, "%s", diags(&o));
  check_weights(o.p);
  /* Two mappings would put them anywhere; one keeps the file's distance. */
  cr_assert_eq(weight_bytes(o.p, 1) - weight_bytes(o.p, 0), apart);
  close_opened(&o);
  cleanup();
}

Test(loader, missing_weight_file) {
  make_dir();
  make_bare();
  char file[256], real_bare[PATH_MAX], want[16384];
  snprintf(file, sizeof file, "%s/weights/weight.bin", bare);
  cr_assert_eq(unlink(file), 0);
  cr_assert_not_null(realpath(bare, real_bare));
  snprintf(want, sizeof want,
           "%s/model.mil:5:9: error: BLOBFILE path '@model_path/weights/weight.bin': cannot open "
           "'%s/weights/weight.bin': No such file or directory\n"
           "%s/model.mil:6:9: error: BLOBFILE path '@model_path/weights/weight.bin': cannot open "
           "'%s/weights/weight.bin': No such file or directory\n",
           bare, real_bare, bare, real_bare);
  expect_rejected(bare, true, want);
  cleanup();
}

Test(loader, offset_not_at_a_record) {
  expect_bare_edit_rejected("offset = uint64(64)", "offset = uint64(128)",
                            "/model.mil:5:9: error: @model_path/weights/weight.bin: bad sentinel 0x38003800 in the "
                            "blob record at offset 128\n");
}

Test(loader, dtype_mismatch) {
  expect_bare_edit_rejected("tensor<fp16, [4, 4]> w = const()[name = string(\"w\"), val = tensor<fp16, [4, 4]>",
                            "tensor<fp32, [4, 4]> w = const()[name = string(\"w\"), val = tensor<fp32, [4, 4]>",
                            "/model.mil:5:9: error: @model_path/weights/weight.bin: blob at offset 64 holds fp16 but "
                            "the tensor is fp32\n");
}

Test(loader, size_mismatch) {
  expect_bare_edit_rejected("tensor<fp16, [4, 4]> w = const()[name = string(\"w\"), val = tensor<fp16, [4, 4]>",
                            "tensor<fp16, [4, 8]> w = const()[name = string(\"w\"), val = tensor<fp16, [4, 8]>",
                            "/model.mil:5:9: error: @model_path/weights/weight.bin: blob at offset 64 has 32 bytes "
                            "but the tensor needs 64\n");
}

Test(loader, unsupported_blob_dtype) {
  expect_bare_edit_rejected("tensor<fp16, [4, 4]> w = const()[name = string(\"w\"), val = tensor<fp16, [4, 4]>",
                            "tensor<int16, [4, 4]> w = const()[name = string(\"w\"), val = tensor<int16, [4, 4]>",
                            "/model.mil:5:9: error: BLOBFILE of int16 is not supported\n");
}

Test(loader, missing_model_mil) {
  make_dir();
  char want[512];
  snprintf(want, sizeof want,
           "orionc: error: cannot open '%s': it holds neither Manifest.plist (a package) nor model.mil (a model "
           "directory)\n",
           dir);
  expect_rejected(dir, true, want);
  char missing[128];
  snprintf(missing, sizeof missing, "%s/absent", dir);
  snprintf(want, sizeof want, "orionc: error: cannot open '%s': No such file or directory\n", missing);
  expect_rejected(missing, true, want);
  cleanup();
}

/* A copy of a corpus file as the model.mil of a bare directory. */
static void corpus_dir(const char *name) {
  const char *root = getenv("ORION_SOURCE_ROOT");
  if (!root)
    cr_assert_fail("ORION_SOURCE_ROOT is not set: run this test through meson (it names the source tree, beside which "
             "../shared/corpus/mil lives)");
  require_mil_corpus();
  char src[1024], cmd[2048];
  snprintf(src, sizeof src, "%s/../shared/corpus/mil/%s", root, name);
  if (access(src, R_OK) != 0)
    cr_assert_fail("cannot read the corpus file '%s' (ORION_SOURCE_ROOT=%s; the corpus lives in ../shared beside the "
                   "source tree)", src, root);
  snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s' '%s/model.mil'", bare, src, bare);
  run(cmd);
}

Test(loader, corpus_add_model) {
  make_dir();
  corpus_dir("coremlc_add_model_ios16.mil");
  Opened o;
  open_at(&o, bare, true);
  cr_assert_not_null(o.p, "%s", diags(&o));
  cr_assert_eq(orion_function_count(o.p), 1);
  cr_assert_str_eq(orion_function_name(o.p, 0), "main");
  cr_assert_eq(orion_input_count(o.p, 0), 2);
  cr_assert_str_eq(orion_input(o.p, 0, 0)->name, "x");
  cr_assert_str_eq(orion_input(o.p, 0, 1)->name, "y");
  cr_assert_eq(orion_input(o.p, 0, 1)->binding, 1);
  cr_assert_eq(orion_input(o.p, 0, 0)->bytes, 20);
  cr_assert_eq(orion_output_count(o.p, 0), 1);
  cr_assert_str_eq(orion_output(o.p, 0, 0)->name, "var_3");
  cr_assert_eq(orion_weight_count(o.p, 0), 0);
  cr_assert(!orion_function_has_dynamic_shapes(o.p, 0));
  close_opened(&o);
  cleanup();
}

Test(loader, dynamic_shapes_are_flagged_not_rejected) {
  make_dir();
  char cmd[512];
  snprintf(cmd, sizeof cmd, "mkdir -p '%s'", bare);
  run(cmd);
  static const char text[] = "program(1.3)\n{\n    func main<ios18>(tensor<fp16, [1, ?]> x) {\n"
                             "        tensor<fp16, [1, ?]> y = relu(x = x)[name = string(\"y\")];\n"
                             "    } -> (y);\n}\n";
  char mil[256];
  const char *err;
  snprintf(mil, sizeof mil, "%s/model.mil", bare);
  cr_assert(write_file_atomic(mil, text, strlen(text), &err), "%s", err);
  Opened o;
  open_at(&o, bare, true);
  cr_assert_not_null(o.p, "%s", diags(&o));
  cr_assert(orion_function_has_dynamic_shapes(o.p, 0));
  cr_assert_eq(orion_input(o.p, 0, 0)->dims[1], -1);
  cr_assert_eq(orion_input(o.p, 0, 0)->bytes, 0);
  close_opened(&o);
  cleanup();
}

Test(loader, corpus_flexible_shapes) {
  make_dir();
  corpus_dir("coremlc_transpose_flexible_shape_ios16.mil");
  Opened o;
  open_at(&o, bare, true);
  cr_assert_not_null(o.p, "%s", diags(&o));
  cr_assert_eq(o.diags.len, 0, "%s", diags(&o));
  cr_assert(orion_function_has_dynamic_shapes(o.p, 0));
  const OrionTensorInfo *x = orion_input(o.p, 0, 0);
  cr_assert_eq(x->rank, 3);
  cr_assert_eq(x->dims[0], 1);
  cr_assert_eq(x->dims[1], -1);
  close_opened(&o);
  cleanup();
}
