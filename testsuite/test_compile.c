/*
 * The compile pipeline as a library call (orion/compile.h): source text or a
 * module in, a package that opens out; errors through Diag with their
 * location and nothing left behind; options that take effect; orionc's
 * argument spelling parsed and recorded for the manifest.
 */
#define _XOPEN_SOURCE 700 /* realpath */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include "orion/compile.h"
#include "orion/frontend.h"
#include "orion/runtime.h"

static const char *const program =
    "func main(x: fp16[1,4]) {\n"
    "  param w: fp16[4,4] = normal(seed=3, std=0.5);\n"
    "  param b: fp16[4] = zeros;\n"
    "  h = linear(x, w, b);\n"
    "  y = relu(h);\n"
    "  return y;\n"
    "}\n";

static char dir[64];
static char out[128];

static void make_dir(void) {
  test_dir_make(dir, sizeof dir, "compile");
  snprintf(out, sizeof out, "%s/m.anepkg", dir);
}

static void cleanup(void) { test_dir_remove(dir); }

TestSuite(compile, .init = make_dir, .fini = cleanup);

/* The names in dir, sorted, joined with spaces (static buffer). */
static const char *entries(void) {
  static char names[1024];
  struct dirent **list;
  int n = scandir(dir, &list, NULL, alphasort);
  cr_assert_geq(n, 0);
  names[0] = 0;
  for (int i = 0; i < n; i++) {
    if (strcmp(list[i]->d_name, ".") && strcmp(list[i]->d_name, "..")) {
      if (names[0]) strcat(names, " ");
      strcat(names, list[i]->d_name);
    }
    free(list[i]);
  }
  free(list);
  return names;
}

/* A Diag whose messages are kept in *text. */
static void capture(Diag *d, StrBuf *text) {
  diag_init(d, NULL);
  sb_init(text);
  d->capture = text;
}

static const char *text_of(const StrBuf *sb) {
  return sb->data ? sb->data : "";
}

Test(compile, text_to_a_package_that_opens) {
  OrionCompileOptions o;
  orion_compile_options_init(&o);
  const char *const args[] = {"--no-dedup"};
  o.no_dedup = true;
  o.compile_args = args;
  o.ncompile_args = 1;
  Diag d;
  StrBuf msgs;
  capture(&d, &msgs);
  OrionCompileResult r;
  cr_assert(orion_compile_text("t.oir", program, strlen(program), &o, out, &r, &d), "%s", text_of(&msgs));
  cr_assert_eq(r.status, ORION_COMPILE_OK);
  cr_assert_not(r.from_cache);
  cr_assert_gt(r.stats.weight_bytes, 0);
  cr_assert_eq(r.text.len, 0);
  cr_assert_null(d.sources, "the call's own source set is not left in the caller's Diag");
  cr_assert_str_eq(entries(), "m.anepkg", "no temporary directory is left beside the package");

  SourceSet sources;
  srcset_init(&sources);
  d.sources = &sources; /* the runtime wants one */
  OrionProgram *p = orion_open(out, NULL, &d);
  cr_assert_not_null(p, "%s", text_of(&msgs));
  cr_assert_eq(orion_function_count(p), 1);
  cr_assert_str_eq(orion_function_name(p, 0), "main");
  cr_assert_eq(orion_input_count(p, 0), 1);
  cr_assert_eq(orion_output_count(p, 0), 1);
  cr_assert_str_eq(orion_output(p, 0, 0)->name, "y");
  cr_assert_eq(orion_weight_count(p, 0), 2, "--no-dedup keeps both weights");
  orion_close(p);

  Package pkg;
  cr_assert(package_read(out, &pkg, &d), "%s", text_of(&msgs));
  cr_assert_str_eq(pkg.source_name, "t.oir");
  cr_assert_str_eq(pkg.target, "ios18");
  cr_assert_str_eq(pkg.program_version, "1.3");
  cr_assert(pkg.lint_checked);
  cr_assert_eq(pkg.ncompile_args, 1);
  cr_assert_str_eq(pkg.compile_args[0], "--no-dedup");
  cr_assert(package_verify(&pkg, &d), "%s", text_of(&msgs));
  package_free(&pkg);
  cr_assert_eq(d.nerrors, 0);
  orion_compile_result_free(&r);
  srcset_free(&sources);
  sb_free(&msgs);
}

Test(compile, an_error_has_its_location_and_leaves_no_package) {
  static const char *const bad = "func main(x: fp16[4]) {\n  a = relu(x);\n  b = frobnicate(a);\n  return b;\n}\n";
  OrionCompileOptions o;
  orion_compile_options_init(&o);
  Diag d;
  StrBuf msgs;
  capture(&d, &msgs);
  OrionCompileResult r;
  cr_assert_not(orion_compile_text("bad.oir", bad, strlen(bad), &o, out, &r, &d));
  cr_assert_eq(r.status, ORION_COMPILE_INPUT_ERROR);
  cr_assert_eq(strncmp(text_of(&msgs), "bad.oir:3:7: error: ", 20), 0, "%s", text_of(&msgs));
  cr_assert_str_eq(entries(), "", "nothing is written");
  orion_compile_result_free(&r);
  sb_free(&msgs);
}

Test(compile, a_weight_error_after_parsing_leaves_no_package) {
  static const char *const missing =
      "func main(x: fp16[4]) {\n  param w: fp16[4] = npy(\"nowhere.npy\");\n  y = add(x, w);\n  return y;\n}\n";
  OrionCompileOptions o;
  orion_compile_options_init(&o);
  Diag d;
  StrBuf msgs;
  capture(&d, &msgs);
  OrionCompileResult r;
  cr_assert_not(orion_compile_text("w.oir", missing, strlen(missing), &o, out, &r, &d));
  cr_assert_eq(r.status, ORION_COMPILE_INPUT_ERROR);
  cr_assert_eq(strncmp(text_of(&msgs), "w.oir:2:", 8), 0, "%s", text_of(&msgs));
  cr_assert_str_eq(entries(), "");
  orion_compile_result_free(&r);
  sb_free(&msgs);
}

Test(compile, target_ios16_gives_program_1_0) {
  OrionCompileOptions o;
  orion_compile_options_init(&o);
  o.emit = ORION_EMIT_MIL;
  o.target = MIL_IOS16;
  o.target_given = true;
  Diag d;
  StrBuf msgs;
  capture(&d, &msgs);
  OrionCompileResult r;
  cr_assert(orion_compile_text("t.oir", program, strlen(program), &o, NULL, &r, &d), "%s", text_of(&msgs));
  cr_assert_not_null(strstr(text_of(&r.text), "program(1.0)"), "%s", text_of(&r.text));
  cr_assert_null(strstr(text_of(&r.text), "program(1.3)"));
  orion_compile_result_free(&r);
  o.target = MIL_IOS18;
  cr_assert(orion_compile_text("t.oir", program, strlen(program), &o, NULL, &r, &d), "%s", text_of(&msgs));
  cr_assert_not_null(strstr(text_of(&r.text), "program(1.3)"));
  orion_compile_result_free(&r);
  cr_assert_str_eq(entries(), "", "--emit=mil writes no package");
  sb_free(&msgs);
}

Test(compile, a_chip_sets_its_target) {
  OrionCompileOptions o;
  orion_compile_options_init(&o);
  o.emit = ORION_EMIT_MIL;
  o.chip = "m1";
  Diag d;
  StrBuf msgs;
  capture(&d, &msgs);
  OrionCompileResult r;
  cr_assert(orion_compile_text("t.oir", program, strlen(program), &o, NULL, &r, &d), "%s", text_of(&msgs));
  cr_assert_not_null(strstr(text_of(&r.text), "program(1.0)"), "m1's newest dialect is ios16");
  orion_compile_result_free(&r);
  char err[256];
  o.chip = "m9";
  cr_assert_not(orion_compile_options_resolve(&o, &d, err, sizeof err));
  cr_assert_str_eq(err, "unknown chip 'm9' (expected m1, m2, m3, m4 or m5)");
  o.chip = "m1";
  o.target = MIL_IOS18;
  o.target_given = true;
  cr_assert_not(orion_compile_options_resolve(&o, &d, err, sizeof err));
  cr_assert_str_eq(err, "--target=ios18 is newer than m1 supports (at most ios16)");
  cr_assert_not(orion_compile_text("t.oir", program, strlen(program), &o, NULL, &r, &d));
  cr_assert_eq(r.status, ORION_COMPILE_OPTIONS_ERROR);
  orion_compile_result_free(&r);
  sb_free(&msgs);
}

Test(compile, an_unknown_pass_is_an_options_error_before_the_source_is_read) {
  OrionCompileOptions o;
  orion_compile_options_init(&o);
  o.passes.passes = "dce,no-such-pass";
  Diag d;
  StrBuf msgs;
  capture(&d, &msgs);
  OrionCompileResult r;
  cr_assert_not(orion_compile_text("t.oir", "not even .oir", 13, &o, out, &r, &d));
  cr_assert_eq(r.status, ORION_COMPILE_OPTIONS_ERROR);
  cr_assert_not_null(strstr(text_of(&msgs), "no-such-pass"), "%s", text_of(&msgs));
  cr_assert_null(strstr(text_of(&msgs), "t.oir"), "the source is not parsed: %s", text_of(&msgs));
  cr_assert_str_eq(entries(), "");
  orion_compile_result_free(&r);
  sb_free(&msgs);
}

Test(compile, the_pipeline_and_emit_options_take_effect) {
  /* -O1 folds the product of two constants; -O0 leaves it. */
  static const char *const twice =
      "func main(x: fp16[4]) {\n  const two: fp16[] = 2.0;\n  c = mul(two, two);\n  y = mul(x, c);\n  return y;\n}\n";
  OrionCompileOptions o;
  orion_compile_options_init(&o);
  o.emit = ORION_EMIT_OIR;
  o.legalize = true;
  Diag d;
  StrBuf msgs;
  capture(&d, &msgs);
  OrionCompileResult o1, o0;
  cr_assert(orion_compile_text("t.oir", twice, strlen(twice), &o, NULL, &o1, &d), "%s", text_of(&msgs));
  o.passes.pipeline = "O0";
  cr_assert(orion_compile_text("t.oir", twice, strlen(twice), &o, NULL, &o0, &d), "%s", text_of(&msgs));
  cr_assert_str_neq(text_of(&o1.text), text_of(&o0.text), "-O0 and -O1 give the same IR:\n%s", text_of(&o1.text));
  orion_compile_result_free(&o1);
  orion_compile_result_free(&o0);

  o.emit = ORION_EMIT_NONE;
  o.summary = true;
  cr_assert(orion_compile_text("t.oir", program, strlen(program), &o, NULL, &o1, &d), "%s", text_of(&msgs));
  cr_assert_eq(o1.text.len, 0);
  cr_assert_eq(strncmp(text_of(&o1.summary), "t.oir: 1 function\nfunc main: 1 input, 1 output, ", 46), 0, "%s",
               text_of(&o1.summary));
  orion_compile_result_free(&o1);
  sb_free(&msgs);
}

Test(compile, a_module_built_elsewhere_compiles_to_a_package) {
  SourceSet sources;
  srcset_init(&sources);
  Diag d;
  StrBuf msgs;
  capture(&d, &msgs);
  d.sources = &sources;
  IrModule *m = oir_parse_string("built.oir", program, strlen(program), &d);
  cr_assert_not_null(m, "%s", text_of(&msgs));
  OrionCompileOptions o;
  orion_compile_options_init(&o);
  o.source_name = "converted from model.safetensors";
  OrionCompileResult r;
  cr_assert(orion_compile_module(m, &o, out, &r, &d), "%s", text_of(&msgs));
  Package pkg;
  cr_assert(package_read(out, &pkg, &d), "%s", text_of(&msgs));
  cr_assert_str_eq(pkg.source_name, "converted from model.safetensors");
  cr_assert_eq(pkg.nfunctions, 1);
  cr_assert_str_eq(pkg.functions[0].name, "main");
  package_free(&pkg);
  orion_compile_result_free(&r);
  ir_module_free(m);
  srcset_free(&sources);
  sb_free(&msgs);
}

Test(compile, a_second_compile_is_served_from_the_cache) {
  char cache[128];
  snprintf(cache, sizeof cache, "%s/cache", dir);
  OrionCompileOptions o;
  orion_compile_options_init(&o);
  o.cache_dir = cache;
  Diag d;
  StrBuf msgs;
  capture(&d, &msgs);
  ConstraintTable *table = constraints_builtin(&d);
  cr_assert_not_null(table);
  o.constraints = table; /* the caller's table, used and not freed by the calls */
  OrionCompileResult r;
  cr_assert(orion_compile_text("t.oir", program, strlen(program), &o, out, &r, &d), "%s", text_of(&msgs));
  cr_assert_not(r.from_cache);
  orion_compile_result_free(&r);
  remove_tree(out);
  cr_assert(orion_compile_text("t.oir", program, strlen(program), &o, out, &r, &d), "%s", text_of(&msgs));
  cr_assert(r.from_cache);
  orion_compile_result_free(&r);
  cr_assert_str_eq(entries(), "cache m.anepkg");
  constraints_free(table);
  sb_free(&msgs);
}

/* What the temp_dir hook was told, in order. */
typedef struct TempLog {
  char paths[4][256];
  int n;
  bool remove_at_once; /* act as a signal arriving just after the directory was made */
} TempLog;

static void log_temp_dir(void *ctx, const char *path) {
  TempLog *log = ctx;
  cr_assert_lt(log->n, 4);
  snprintf(log->paths[log->n++], 256, "%s", path ? path : "(none)");
  if (path && log->remove_at_once) orion_compile_cleanup(path);
}

Test(compile, the_temporary_directory_is_reported_and_can_be_removed_mid_write) {
  OrionCompileOptions o;
  orion_compile_options_init(&o);
  TempLog log = {0};
  o.hooks = (OrionCompileHooks){.temp_dir = log_temp_dir, .ctx = &log};
  Diag d;
  StrBuf msgs;
  capture(&d, &msgs);
  OrionCompileResult r;
  cr_assert(orion_compile_text("t.oir", program, strlen(program), &o, out, &r, &d), "%s", text_of(&msgs));
  orion_compile_result_free(&r);
  cr_assert_eq(log.n, 2);
  cr_assert_eq(strncmp(log.paths[0], out, strlen(out)), 0, "%s", log.paths[0]);
  cr_assert_eq(strncmp(log.paths[0] + strlen(out), ".tmp-", 5), 0, "beside the package: %s", log.paths[0]);
  cr_assert_str_eq(log.paths[1], "(none)");

  /* Removed while the package is written into it (the package already there is kept). */
  log = (TempLog){.remove_at_once = true};
  cr_assert_not(orion_compile_text("t.oir", program, strlen(program), &o, out, &r, &d));
  cr_assert_not_null(strstr(text_of(&msgs), "cannot write the package"), "%s", text_of(&msgs));
  orion_compile_result_free(&r);
  cr_assert_str_eq(entries(), "m.anepkg", "nothing but the earlier package is left");
  Package pkg;
  cr_assert(package_read(out, &pkg, &d));
  cr_assert(package_verify(&pkg, &d), "%s", text_of(&msgs));
  package_free(&pkg);
  orion_compile_cleanup(NULL); /* nothing to do */
  sb_free(&msgs);
}

/* temp_dir_begin comes right before the directory exists and temp_dir right
 * after, so a driver locking from one to the other (orionc's signal thread)
 * never finds a directory it was not told of. */
typedef struct BeginLog {
  int begins, reports;
  bool existed_at_begin, begin_before_report;
  const char *out;
} BeginLog;

static bool temp_dir_exists(const char *package) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "ls -d '%s'.tmp-* >/dev/null 2>&1", package);
  return system(cmd) == 0;
}

static void begin_logged(void *ctx) {
  BeginLog *log = ctx;
  log->begins++;
  log->existed_at_begin |= temp_dir_exists(log->out);
}

static void report_logged(void *ctx, const char *path) {
  BeginLog *log = ctx;
  if (path) log->begin_before_report = log->begins == log->reports + 1;
  log->reports += path != NULL;
}

Test(compile, the_temporary_directory_is_made_between_begin_and_report) {
  OrionCompileOptions o;
  orion_compile_options_init(&o);
  BeginLog log = {.out = out};
  o.hooks = (OrionCompileHooks){.temp_dir = report_logged, .temp_dir_begin = begin_logged, .ctx = &log};
  Diag d;
  StrBuf msgs;
  capture(&d, &msgs);
  OrionCompileResult r;
  cr_assert(orion_compile_text("t.oir", program, strlen(program), &o, out, &r, &d), "%s", text_of(&msgs));
  orion_compile_result_free(&r);
  cr_assert_eq(log.begins, 1);
  cr_assert_eq(log.reports, 1);
  cr_assert_not(log.existed_at_begin, "the directory existed before begin");
  cr_assert(log.begin_before_report);
  sb_free(&msgs);
}

/* ---- orionc's argument spelling ---- */

TestSuite(compile_args, .init = make_dir, .fini = cleanup);

static OrionArgStatus parse1(OrionCompileArgs *a, const char *arg, char *err) {
  return orion_compile_args_parse(a, arg, err, 256);
}

Test(compile_args, options_that_shape_the_package_are_taken_and_recorded) {
  OrionCompileArgs a;
  orion_compile_args_init(&a);
  char err[256];
  const char *const taken[] = {"--target=ios16", "-O0", "--lora=*.q_proj:8:16", "--allow=ANE012", "--no-dedup",
                               "--weight-override=w=/nowhere/w.npy"};
  for (size_t i = 0; i < sizeof taken / sizeof *taken; i++)
    cr_assert_eq(parse1(&a, taken[i], err), ORION_ARG_TAKEN, "%s", taken[i]);
  const OrionCompileOptions *o = &a.options;
  cr_assert_eq(o->target, MIL_IOS16);
  cr_assert(o->target_given);
  cr_assert_str_eq(o->passes.pipeline, "O0");
  cr_assert_eq(o->passes.pass_options.nlora, 1);
  cr_assert_str_eq(o->passes.pass_options.lora[0].pattern, "*.q_proj");
  cr_assert_eq(o->passes.pass_options.lora[0].rank, 8);
  cr_assert_float_eq(o->passes.pass_options.lora[0].alpha, 16.0, 0);
  cr_assert_eq(o->nallow, 1);
  cr_assert_str_eq(o->allow[0], "ANE012");
  cr_assert(o->no_dedup);
  cr_assert_eq(o->noverrides, 1);
  cr_assert_str_eq(o->overrides[0].name, "w");
  cr_assert_str_eq(o->overrides[0].file, "/nowhere/w.npy");
  cr_assert_eq(o->ncompile_args, 6, "each is recorded for the manifest");
  for (size_t i = 0; i < 6; i++) cr_assert_str_eq(o->compile_args[i], taken[i]);
  orion_compile_args_free(&a);
}

Test(compile_args, a_file_is_recorded_with_its_absolute_path) {
  char path[128], want[4200];
  snprintf(path, sizeof path, "%s/new.safetensors", dir);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fclose(f);
  char cwd[4096];
  cr_assert_not_null(getcwd(cwd, sizeof cwd));
  cr_assert_eq(chdir(dir), 0);
  OrionCompileArgs a;
  orion_compile_args_init(&a);
  char err[256];
  cr_assert_eq(parse1(&a, "--weights-override=new.safetensors", err), ORION_ARG_TAKEN);
  char *real = realpath(path, NULL);
  snprintf(want, sizeof want, "--weights-override=%s", real);
  free(real);
  cr_assert_str_eq(a.options.compile_args[0], want);
  cr_assert_null(a.options.overrides[0].name);
  cr_assert_str_eq(a.options.overrides[0].file, "new.safetensors", "the compile reads it as given");
  cr_assert_eq(chdir(cwd), 0);
  orion_compile_args_free(&a);
}

Test(compile_args, the_rest_is_the_drivers_and_mistakes_are_named) {
  OrionCompileArgs a;
  orion_compile_args_init(&a);
  char err[256];
  cr_assert_eq(parse1(&a, "--emit=mil", err), ORION_ARG_NOT_MINE);
  cr_assert_eq(parse1(&a, "--cache-dir=/x", err), ORION_ARG_NOT_MINE);
  cr_assert_eq(parse1(&a, "-o", err), ORION_ARG_NOT_MINE);
  cr_assert_eq(parse1(&a, "-O2", err), ORION_ARG_INVALID);
  cr_assert_str_eq(err, "unknown optimization level '-O2' (expected -O0 or -O1)");
  cr_assert_eq(parse1(&a, "--target=ios15", err), ORION_ARG_INVALID);
  cr_assert_str_eq(err, "unknown target 'ios15' (expected ios16, ios17 or ios18)");
  cr_assert_eq(parse1(&a, "--lora=q:0", err), ORION_ARG_INVALID);
  cr_assert_str_eq(err, "'--lora=q:0' is not --lora=PATTERN:RANK[:ALPHA] (RANK from 1 to 4096)");
  cr_assert_eq(parse1(&a, "--weight-override=w", err), ORION_ARG_INVALID);
  cr_assert_str_eq(err, "'--weight-override=w' is not --weight-override=NAME=FILE.npy");
  for (int i = 0; i < ORION_COMPILE_MAX_ALLOW; i++) cr_assert_eq(parse1(&a, "--allow=ANE001", err), ORION_ARG_TAKEN);
  cr_assert_eq(parse1(&a, "--allow=ANE001", err), ORION_ARG_INVALID);
  cr_assert_str_eq(err, "too many --allow options (limit is 32)");
  cr_assert_eq(a.options.ncompile_args, ORION_COMPILE_MAX_ALLOW, "mistakes are not recorded");
  orion_compile_args_free(&a);
}
