/*
 * The .anepkg package: written atomically, read back, verified; replacing
 * an existing package only on success; the manifest reader's rejections;
 * the verifier catching tampered files.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include "orion/package.h"
#include "orion/passes.h"

static const char *const program =
    "func main(x: fp16[1,4], a: fp16[1,4]) {\n"
    "  param w: fp16[4,4] = normal(seed=3, std=0.5);\n"
    "  param b: fp16[4] = zeros;\n"
    "  param c: fp16[4] = zeros;\n"
    "  h = linear(x, w, b);\n"
    "  y = add(h, c);\n"
    "  z = add(y, a);\n"
    "  return z, first = y;\n"
    "}\n";

static char dir[64];

static void make_dir(void) { test_dir_make(dir, sizeof dir, "pkg"); }

static void cleanup(void) { test_dir_remove(dir); }

/* Compiles `text` into dir/name; returns the diagnostics. */
static const char *compile_to(const char *text, const char *name, bool *ok) {
  static char diags[4096];
  Parsed p;
  parsed_open(&p, text);
  cr_assert_not_null(p.m, "%s", p.diags.data);
  cr_assert(passes_legalize(p.m, &p.d), "%s", p.diags.data);
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  PackageOptions po = {.target = MIL_IOS18, .source_name = "t.oir", .source_text = text, .source_len = strlen(text)};
  *ok = package_write(p.m, path, &po, &p.d);
  snprintf(diags, sizeof diags, "%s", p.diags.data ? p.diags.data : "");
  parsed_close(&p);
  return diags;
}

static int count_entries(void) {
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

static void capture(Diag *d, StrBuf *sb) {
  sb_init(sb);
  diag_init(d, NULL);
  d->capture = sb;
}

Test(package, write_read_verify) {
  make_dir();
  bool ok;
  const char *diags = compile_to(program, "m.anepkg", &ok);
  cr_assert(ok, "%s", diags);
  char path[256];
  snprintf(path, sizeof path, "%s/m.anepkg", dir);
  StrBuf sb;
  Diag d;
  capture(&d, &sb);
  Package pkg;
  cr_assert(package_read(path, &pkg, &d), "%s", sb.data);
  cr_assert_eq(pkg.format_version, 2);
  cr_assert_str_eq(pkg.target, "ios18");
  cr_assert_str_eq(pkg.program_version, "1.3");
  cr_assert_eq(pkg.nfunctions, 1);
  PkgFunction *f = &pkg.functions[0];
  cr_assert_str_eq(f->mil_file, "model.mil");
  /* Inputs bind in ASCII order of their names: a before x. */
  cr_assert_eq(f->ninputs, 2);
  cr_assert_str_eq(f->inputs[0].name, "x");
  cr_assert_eq(f->inputs[0].binding, 1);
  cr_assert_eq(f->inputs[1].binding, 0);
  /* Outputs in declared order, bound alphabetically: first < z. */
  cr_assert_str_eq(f->outputs[0].name, "z");
  cr_assert_str_eq(f->outputs[1].name, "first");
  cr_assert_eq(f->outputs[0].binding, 1);
  cr_assert_eq(f->outputs[1].binding, 0);
  /* Surfaces: uniform, at least the minimum. */
  cr_assert_eq(f->surface_bytes, 49152);
  cr_assert_eq(f->inputs[0].surface_bytes, 49152);
  cr_assert_eq(f->inputs[0].bytes, 8);
  /* Weights: the two zero tensors are independent params, a blob each. */
  cr_assert_eq(f->nweights, 3);
  cr_assert_str_eq(f->weights[0].name, "w");
  cr_assert_eq(f->weights[0].offset, 64);
  cr_assert_eq(f->weights[0].bytes, 32);
  cr_assert_eq(f->weights[1].offset, 64 + 64 + 64); /* after 32 data bytes, aligned up */
  cr_assert_eq(f->weights[2].offset, f->weights[1].offset + 128);
  cr_assert_eq(pkg.weights_size, f->weights[2].offset + 64 + 8);
  cr_assert(package_verify(&pkg, &d), "%s", sb.data);
  /* The weight file's bytes: header count 3, version 2. */
  char wpath[300];
  snprintf(wpath, sizeof wpath, "%s/weights/weight.bin", path);
  size_t len;
  char *w = slurp(wpath, &len);
  cr_assert_eq(len, pkg.weights_size);
  uint32_t head[2];
  memcpy(head, w, 8);
  cr_assert_eq(head[0], 3);
  cr_assert_eq(head[1], 2);
  free(w);
  package_free(&pkg);
  sb_free(&sb);
  cleanup();
}

/* The binding table's example: 'a.b' sorts before 'a_a' as .oir names but
 * after it as MIL names (a_b); 'tensor' and 'string' are MIL reserved words. */
static const char *const renamed_io =
    "func main(a.b: fp16[1,4], a_a: fp16[1,4], tensor: fp16[1,4]) {\n"
    "  s = add(a.b, a_a);\n"
    "  t = mul(s, tensor);\n"
    "  return o.b = t, o_a = s, string = t;\n"
    "}\n";

/* Writes p's module as dir/name and reads the package back. */
static void write_and_read(Parsed *p, const char *text, const char *name, Package *pkg) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  PackageOptions po = {.target = MIL_IOS18, .source_name = "t.oir", .source_text = text, .source_len = strlen(text)};
  cr_assert(package_write(p->m, path, &po, &p->d), "%s", p->diags.data);
  StrBuf sb;
  Diag d;
  capture(&d, &sb);
  cr_assert(package_read(path, pkg, &d), "%s", sb.data);
  sb_free(&sb);
}

static void assert_manifest_is_table(const PkgTensor *t, const IrBinding *b, uint32_t n, uint64_t surface) {
  for (uint32_t i = 0; i < n; i++) {
    cr_assert_str_eq(t[i].name, b[i].name);
    cr_assert_str_eq(t[i].mil_name, b[i].mil_name, "%s", b[i].name);
    cr_assert_eq(t[i].binding, b[i].binding, "%s", b[i].name);
    cr_assert_eq(t[i].bytes, b[i].bytes, "%s", b[i].name);
    cr_assert_eq(t[i].surface_bytes, surface, "%s", b[i].name);
  }
}

/* The manifest records io-legalize's table: names, binding indices, bytes, surface. */
Test(package, manifest_bindings_are_io_legalizes_table) {
  make_dir();
  Parsed p;
  parsed_open(&p, renamed_io);
  cr_assert_not_null(p.m, "%s", p.diags.data);
  cr_assert(passes_legalize(p.m, &p.d), "%s", p.diags.data);
  IrFuncId f = ir_func_lookup(p.m, "main");
  const IrBindingTable *t = ir_func(p.m, f)->bindings;
  cr_assert_not_null(t, "io-legalize (in O0) attaches the table");
  /* The table itself: MIL order, not .oir order. */
  cr_assert_str_eq(t->inputs[0].mil_name, "a_b");
  cr_assert_eq(t->inputs[0].binding, 1);
  cr_assert_eq(t->inputs[1].binding, 0);
  cr_assert_str_eq(t->inputs[2].mil_name, "tensor_");
  cr_assert_str_eq(t->outputs[2].mil_name, "string_");
  cr_assert_eq(t->outputs[0].binding, 1);
  cr_assert_eq(t->surface_bytes, 49152);
  Package pkg;
  write_and_read(&p, renamed_io, "m.anepkg", &pkg);
  cr_assert_eq(pkg.nfunctions, 1);
  const PkgFunction *pf = &pkg.functions[0];
  cr_assert_eq(pf->ninputs, t->ninputs);
  cr_assert_eq(pf->noutputs, t->noutputs);
  cr_assert_eq(pf->surface_bytes, t->surface_bytes);
  assert_manifest_is_table(pf->inputs, t->inputs, t->ninputs, t->surface_bytes);
  assert_manifest_is_table(pf->outputs, t->outputs, t->noutputs, t->surface_bytes);
  package_free(&pkg);
  parsed_close(&p);
  cleanup();
}

/* The emitter and the manifest take the table as they find it, rather than
 * deciding again: an edited table shows in the MIL parameters and the manifest. */
Test(package, the_emitter_uses_the_table_it_finds) {
  make_dir();
  Parsed p;
  parsed_open(&p, renamed_io);
  cr_assert_not_null(p.m, "%s", p.diags.data);
  cr_assert(passes_legalize(p.m, &p.d), "%s", p.diags.data);
  IrBindingTable *t = ir_func(p.m, ir_func_lookup(p.m, "main"))->bindings;
  cr_assert_not_null(t);
  t->inputs[0].mil_name = "zz_first";           /* was a_b, binding 1 */
  t->inputs[0].binding = 2;
  t->inputs[2].binding = 1;                     /* tensor_ */
  t->surface_bytes = 65536;
  Package pkg;
  write_and_read(&p, renamed_io, "m.anepkg", &pkg);
  const PkgFunction *pf = &pkg.functions[0];
  assert_manifest_is_table(pf->inputs, t->inputs, t->ninputs, 65536);
  assert_manifest_is_table(pf->outputs, t->outputs, t->noutputs, 65536);
  char path[300];
  snprintf(path, sizeof path, "%s/m.anepkg/model.mil", dir);
  size_t len;
  char *mil = slurp(path, &len);
  cr_assert_not_null(strstr(mil, "func main<ios18>(tensor<fp16, [1, 4]> a_a, tensor<fp16, [1, 4]> tensor_, "
                                 "tensor<fp16, [1, 4]> zz_first) {"), "%s", mil);
  cr_assert_not_null(strstr(mil, "add(x = zz_first, y = a_a)"), "%s", mil);
  free(mil);
  package_free(&pkg);
  parsed_close(&p);
  cleanup();
}

/* A pass that changes the interface drops the tables (ANALYSIS_BINDINGS);
 * without io-legalize after it, the emitter computes the table the same way. */
Test(package, a_changed_interface_drops_the_table) {
  make_dir();
  const char *text = "func main(x: fp16[1,4], y: fp16[1,4]) {\n  c = concat(x, y, axis=1);\n  return c;\n}\n";
  Parsed p;
  parsed_open(&p, text);
  cr_assert_not_null(p.m, "%s", p.diags.data);
  PassManagerOptions pm = {.passes = "io-legalize,split-concat"};
  cr_assert(passes_run(p.m, &pm, &p.d), "%s", p.diags.data);
  IrFuncId f = ir_func_lookup(p.m, "main");
  cr_assert_null(ir_func(p.m, f)->bindings, "split-concat made two outputs of one; the old table is gone");
  Package pkg;
  write_and_read(&p, text, "m.anepkg", &pkg);
  const IrBindingTable *t = ir_func(p.m, f)->bindings;
  cr_assert_not_null(t, "the emitter attached the table it computed");
  cr_assert(io_bindings_current(p.m, f));
  cr_assert_eq(t->noutputs, 2);
  assert_manifest_is_table(pkg.functions[0].outputs, t->outputs, t->noutputs, t->surface_bytes);
  /* And after io-legalize again the same table comes back. */
  pm.passes = "io-legalize";
  cr_assert(passes_run(p.m, &pm, &p.d), "%s", p.diags.data);
  const IrBindingTable *again = ir_func(p.m, f)->bindings;
  for (uint32_t i = 0; i < t->noutputs; i++) {
    cr_assert_str_eq(again->outputs[i].mil_name, t->outputs[i].mil_name);
    cr_assert_eq(again->outputs[i].binding, t->outputs[i].binding);
  }
  package_free(&pkg);
  parsed_close(&p);
  cleanup();
}

Test(package, tampering_is_detected) {
  make_dir();
  bool ok;
  compile_to(program, "m.anepkg", &ok);
  cr_assert(ok);
  char path[256], file[300];
  snprintf(path, sizeof path, "%s/m.anepkg", dir);
  snprintf(file, sizeof file, "%s/model.mil", path);
  FILE *fp = fopen(file, "a");
  fputs(" ", fp);
  fclose(fp);
  snprintf(file, sizeof file, "%s/weights/weight.bin", path);
  fp = fopen(file, "r+b");
  fseek(fp, 130, SEEK_SET);
  fputc(0x55, fp);
  fclose(fp);
  StrBuf sb;
  Diag d;
  capture(&d, &sb);
  Package pkg;
  cr_assert(package_read(path, &pkg, &d));
  cr_assert(!package_verify(&pkg, &d));
  char want[1024];
  snprintf(want, sizeof want,
           "orionc: error: %s/model.mil: checksum mismatch (the file changed since it was written)\n"
           "orionc: error: %s/weights/weight.bin: weight 'w' fails its checksum\n",
           path, path);
  cr_assert_str_eq(sb.data, want);
  package_free(&pkg);
  sb_free(&sb);
  cleanup();
}

/* Weights large enough that the streamed weight file has written them and
 * given their memory back before the next one is compared with them: the
 * same param of a second entry (a) is confirmed from the disk and stored
 * once, the weight after it takes its place, and every checksum holds. */
Test(package, large_duplicates_are_confirmed_from_the_disk) {
  static const char *const text =
      "func first(x: fp16[1,2048]) {\n"
      "  param a: fp16[2048,2048] = normal(seed=5, std=0.02);\n"
      "  param c: fp16[2048,2048] = normal(seed=6, std=0.02);\n"
      "  h = linear(x, a);\n"
      "  j = linear(x, c);\n"
      "  s = add(h, j);\n"
      "  return s;\n"
      "}\n"
      "func second(x: fp16[1,2048]) {\n"
      "  param a: fp16[2048,2048] = normal(seed=5, std=0.02);\n"
      "  param d: fp16[2048,2048] = normal(seed=5, std=0.02, mean=1e-3);\n"
      "  h = linear(x, a);\n"
      "  k = linear(x, d);\n"
      "  u = add(h, k);\n"
      "  return u;\n"
      "}\n";
  make_dir();
  bool ok;
  const char *diags = compile_to(text, "m.anepkg", &ok);
  cr_assert(ok, "%s", diags);
  char path[256];
  snprintf(path, sizeof path, "%s/m.anepkg", dir);
  StrBuf sb;
  Diag d;
  capture(&d, &sb);
  Package pkg;
  cr_assert(package_read(path, &pkg, &d), "%s", sb.data);
  cr_assert_eq(pkg.nfunctions, 2);
  PkgFunction *f = &pkg.functions[0], *g = &pkg.functions[1];
  cr_assert_eq(f->nweights, 2);
  cr_assert_eq(g->nweights, 2);
  uint64_t blob = 64 + 2048 * 2048 * 2;
  cr_assert_eq(f->weights[0].offset, 64);
  cr_assert_eq(f->weights[1].offset, 64 + blob);
  cr_assert_eq(g->weights[0].offset, 64, "the duplicate was stored again at %llu",
               (unsigned long long)g->weights[0].offset);
  cr_assert_eq(g->weights[1].offset, 64 + 2 * blob);
  cr_assert_eq(pkg.weights_size, 64 + 3 * blob);
  cr_assert(package_verify(&pkg, &d), "%s", sb.data);
  package_free(&pkg);
  sb_free(&sb);
  cleanup();
}

/* Bytes outside every blob's data (a record's reserved field, the header's
 * zeros) are covered by the layout checksum. */
Test(package, tampering_with_the_layout_is_detected) {
  static const long places[] = {20, 64 + 40};
  for (size_t i = 0; i < sizeof places / sizeof *places; i++) {
    make_dir();
    bool ok;
    compile_to(program, "m.anepkg", &ok);
    cr_assert(ok);
    char path[256], file[300];
    snprintf(path, sizeof path, "%s/m.anepkg", dir);
    snprintf(file, sizeof file, "%s/weights/weight.bin", path);
    FILE *fp = fopen(file, "r+b");
    fseek(fp, places[i], SEEK_SET);
    fputc(0x01, fp);
    fclose(fp);
    StrBuf sb;
    Diag d;
    capture(&d, &sb);
    Package pkg;
    cr_assert(package_read(path, &pkg, &d));
    cr_assert(!package_verify(&pkg, &d));
    char want[1024];
    snprintf(want, sizeof want,
             "orionc: error: %s/weights/weight.bin: checksum mismatch (the file changed since it was written)\n", path);
    cr_assert_str_eq(sb.data, want, "byte %ld", places[i]);
    package_free(&pkg);
    sb_free(&sb);
    cleanup();
  }
}

Test(package, replaced_only_on_success) {
  make_dir();
  bool ok;
  compile_to(program, "m.anepkg", &ok);
  cr_assert(ok);
  char mil[300];
  snprintf(mil, sizeof mil, "%s/m.anepkg/model.mil", dir);
  size_t len;
  char *before = slurp(mil, &len);
  /* A compile whose weights cannot be produced fails and leaves the old package. */
  const char *diags = compile_to("func main(x: fp16[2]) {\n  param w: fp16[2] = npy(\"/nonexistent/w.npy\");\n"
                                 "  y = mul(x, w);\n  return y;\n}\n", "m.anepkg", &ok);
  cr_assert(!ok);
  cr_assert_not_null(strstr(diags, "cannot open '/nonexistent/w.npy'"), "%s", diags);
  char *after = slurp(mil, &len);
  cr_assert_str_eq(before, after);
  cr_assert_eq(count_entries(), 1, "no temporary directory is left behind");
  /* A successful compile replaces it. */
  compile_to("func main(x: fp16[2]) {\n  y = relu(x);\n  return y;\n}\n", "m.anepkg", &ok);
  cr_assert(ok);
  char *replaced = slurp(mil, &len);
  cr_assert_not_null(strstr(replaced, "relu"));
  cr_assert_eq(count_entries(), 1);
  free(before);
  free(after);
  free(replaced);
  cleanup();
}

Test(package, refuses_to_replace_other_things) {
  make_dir();
  char path[256];
  snprintf(path, sizeof path, "%s/notes", dir);
  cr_assert_eq(mkdir(path, 0755), 0);
  char file[300];
  snprintf(file, sizeof file, "%s/keep.txt", path);
  FILE *fp = fopen(file, "w");
  fputs("mine", fp);
  fclose(fp);
  bool ok;
  const char *diags = compile_to(program, "notes", &ok);
  cr_assert(!ok);
  char want[512];
  snprintf(want, sizeof want, "orionc: error: refusing to replace '%s': it is a directory but not an orion package\n", path);
  cr_assert_not_null(strstr(diags, want), "%s", diags);
  cr_assert_null(strstr(strstr(diags, want) + strlen(want), "error:"), "only that error: %s", diags);
  cr_assert_eq(access(file, F_OK), 0);
  diags = compile_to(program, "notes/keep.txt", &ok);
  cr_assert(!ok);
  snprintf(want, sizeof want, "orionc: error: cannot write the package '%s': a file of that name exists\n", file);
  cr_assert_not_null(strstr(diags, want), "%s", diags);
  cleanup();
}

/* ---- manifest reader ---- */

static const char *manifest_error(const char *text) {
  static char buf[1024];
  StrBuf sb;
  Diag d;
  capture(&d, &sb);
  Package pkg;
  bool ok = package_parse_manifest(text, strlen(text), "M", &pkg, &d);
  snprintf(buf, sizeof buf, "%s", ok ? "ok" : sb.data);
  if (ok) package_free(&pkg);
  sb_free(&sb);
  return buf;
}

#define HEAD "<?xml version=\"1.0\"?><plist version=\"1.0\"><dict>"
#define HASH "0000000000000000000000000000000000000000000000000000000000000000"
#define XXH "0123456789abcdef"
#define TOP(version, target)                                                                                   \
  "<key>FormatVersion</key><integer>" version "</integer><key>CompilerVersion</key><string>orionc</string>"    \
  "<key>Target</key><string>" target "</string><key>ProgramVersion</key><string>1.3</string>"                   \
  "<key>Source</key><string>t.oir</string><key>SourceSHA256</key><string>" HASH "</string>"                     \
  "<key>WeightsFile</key><string>weights/weight.bin</string><key>WeightsLayoutXXH64</key><string>" XXH "</string>"  \
  "<key>WeightsSize</key><integer>64</integer><key>WeightsGeneration</key><integer>0</integer>"                 \
  "<key>MinimumSurfaceBytes</key><integer>49152</integer>"
#define IO(name, binding)                                                                                      \
  "<dict><key>Name</key><string>" name "</string><key>MILName</key><string>" name "</string>"                    \
  "<key>DType</key><string>fp16</string><key>Shape</key><array><integer>2</integer></array>"                    \
  "<key>Binding</key><integer>" binding "</integer><key>Bytes</key><integer>4</integer>"                        \
  "<key>SurfaceBytes</key><integer>49152</integer></dict>"
#define FUNC(inputs)                                                                                           \
  "<key>Functions</key><array><dict><key>Name</key><string>main</string><key>MILFile</key><string>model.mil</string>" \
  "<key>MILXXH64</key><string>" XXH "</string><key>SurfaceBytes</key><integer>49152</integer>"                \
  "<key>Inputs</key><array>" inputs "</array><key>Outputs</key><array>" IO("y", "0") "</array>"                 \
  "<key>Weights</key><array></array></dict></array>"
#define LINT "<key>Lint</key><dict><key>Checked</key><false/><key>Errors</key><integer>0</integer><key>Warnings</key><integer>0</integer></dict>"
#define TAIL "</dict></plist>"

Test(manifest, accepts_a_complete_manifest) {
  cr_assert_str_eq(manifest_error(HEAD TOP("1", "ios18") FUNC(IO("a", "1") IO("b", "0")) LINT TAIL), "ok");
}

/* Chip is optional; when present it is a chip name. */
Test(manifest, chip) {
  StrBuf sb;
  Diag d;
  capture(&d, &sb);
  Package pkg;
  const char *with = HEAD TOP("1", "ios18") "<key>Chip</key><string>m4</string>" FUNC(IO("a", "0")) LINT TAIL;
  cr_assert(package_parse_manifest(with, strlen(with), "M", &pkg, &d), "%s", sb.data);
  cr_assert_str_eq(pkg.chip, "m4");
  package_free(&pkg);
  const char *without = HEAD TOP("1", "ios18") FUNC(IO("a", "0")) LINT TAIL;
  cr_assert(package_parse_manifest(without, strlen(without), "M", &pkg, &d), "%s", sb.data);
  cr_assert_null(pkg.chip);
  package_free(&pkg);
  sb_free(&sb);
  const char *bad = "orionc: error: M: manifest: 'Chip' must be a chip name of 1 to 16 lowercase letters and digits, e.g. m4\n";
  cr_assert_str_eq(manifest_error(HEAD TOP("1", "ios18") "<key>Chip</key><string>M4</string>" FUNC(IO("a", "0")) LINT TAIL), bad);
  cr_assert_str_eq(manifest_error(HEAD TOP("1", "ios18") "<key>Chip</key><string></string>" FUNC(IO("a", "0")) LINT TAIL), bad);
  cr_assert_str_eq(manifest_error(HEAD TOP("1", "ios18") "<key>Chip</key><string>m12345678901234567</string>" FUNC(IO("a", "0")) LINT TAIL), bad);
  cr_assert_str_eq(manifest_error(HEAD TOP("1", "ios18") "<key>Chip</key><integer>4</integer>" FUNC(IO("a", "0")) LINT TAIL),
                   "orionc: error: M: manifest: 'Chip' of the manifest must be <string>\n");
}

/* A function with one weight whose checksum is under `key`. */
#define FUNC_WEIGHT(key)                                                                                       \
  "<key>Functions</key><array><dict><key>Name</key><string>main</string><key>MILFile</key><string>model.mil</string>" \
  "<key>MILXXH64</key><string>" XXH "</string><key>SurfaceBytes</key><integer>49152</integer>"                \
  "<key>Inputs</key><array>" IO("a", "0") "</array><key>Outputs</key><array>" IO("y", "0") "</array>"           \
  "<key>Weights</key><array><dict><key>Name</key><string>w</string><key>MILName</key><string>w</string>"        \
  "<key>DType</key><string>fp16</string><key>Shape</key><array><integer>2</integer></array>"                    \
  "<key>Offset</key><integer>64</integer><key>Bytes</key><integer>4</integer>"                                 \
  "<key>" key "</key><string>" XXH "</string></dict></array></dict></array>"

/* Format 1 records a weight's checksum as XXH64, format 2 as XXH3: each
 * reads its own key and lacks the other's. */
Test(manifest, weight_checksum_key_by_format) {
  cr_assert_str_eq(manifest_error(HEAD TOP("1", "ios18") FUNC_WEIGHT("XXH64") LINT TAIL), "ok");
  cr_assert_str_eq(manifest_error(HEAD TOP("2", "ios18") FUNC_WEIGHT("XXH3") LINT TAIL), "ok");
  cr_assert_str_eq(manifest_error(HEAD TOP("1", "ios18") FUNC_WEIGHT("XXH3") LINT TAIL),
                   "orionc: error: M: manifest: weight has no 'XXH64'\n");
  cr_assert_str_eq(manifest_error(HEAD TOP("2", "ios18") FUNC_WEIGHT("XXH64") LINT TAIL),
                   "orionc: error: M: manifest: weight has no 'XXH3'\n");
  StrBuf sb;
  Diag d;
  capture(&d, &sb);
  Package pkg;
  const char *text = HEAD TOP("2", "ios18") FUNC_WEIGHT("XXH3") LINT TAIL;
  cr_assert(package_parse_manifest(text, strlen(text), "M", &pkg, &d), "%s", sb.data);
  cr_assert_eq(pkg.format_version, 2);
  cr_assert_str_eq(pkg.functions[0].weights[0].checksum, XXH);
  package_free(&pkg);
  sb_free(&sb);
}

Test(manifest, rejections) {
  cr_assert_str_eq(manifest_error("<plist"), "orionc: error: M: manifest is not well-formed XML\n");
  cr_assert_str_eq(manifest_error("<?xml version=\"1.0\"?><array/>"),
                   "orionc: error: M: manifest is not a property list with a <dict> at its root\n");
  cr_assert_str_eq(manifest_error(HEAD TOP("3", "ios18") FUNC(IO("a", "0")) LINT TAIL),
                   "orionc: error: M: package format version 3 is not supported (this reads versions 1 to 2)\n");
  cr_assert_str_eq(manifest_error(HEAD TOP("0", "ios18") FUNC(IO("a", "0")) LINT TAIL),
                   "orionc: error: M: package format version 0 is not supported (this reads versions 1 to 2)\n");
  cr_assert_str_eq(manifest_error(HEAD TOP("1", "ios12") FUNC(IO("a", "0")) LINT TAIL),
                   "orionc: error: M: manifest: unknown target 'ios12'\n");
  cr_assert_str_eq(manifest_error(HEAD TOP("1", "ios18") FUNC(IO("a", "0") IO("b", "0")) LINT TAIL),
                   "orionc: error: M: manifest: the input bindings are not 0..1, each once\n");
  cr_assert_str_eq(manifest_error(HEAD TOP("1", "ios18") FUNC(IO("a", "0")) TAIL),
                   "orionc: error: M: manifest: the manifest has no 'Lint'\n");
  cr_assert_str_eq(manifest_error(HEAD "<key>FormatVersion</key><string>1</string>" TAIL),
                   "orionc: error: M: manifest: 'FormatVersion' of the manifest must be <integer>\n");
  cr_assert_str_eq(manifest_error(HEAD "<key>FormatVersion</key><integer>-1</integer>" TAIL),
                   "orionc: error: M: manifest: 'FormatVersion' of the manifest must be an integer from 0 to 4294967295\n");
}
