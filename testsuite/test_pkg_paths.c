/*
 * The package confinement rules (pkgio/pkg_paths.c): which names are plain
 * names or relative paths, where a file of a package leads once links are
 * followed, and what kind of directory a path is.
 */
/* realpath() and setenv() are XSI/POSIX beyond the project-wide _POSIX_C_SOURCE. */
#define _XOPEN_SOURCE 700

#include "orion/pkg_paths.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *why_not(const char *name, PkgNameKind kind) {
  static char why[128];
  return pkg_name_ok(name, kind, why, sizeof why) ? "ok" : why;
}

Test(pkg_name, plain_names) {
  cr_assert_str_eq(why_not("z", PKG_NAME_PLAIN), "ok");
  cr_assert_str_eq(why_not("model_main.mil", PKG_NAME_PLAIN), "ok");
  cr_assert_str_eq(why_not(".hidden", PKG_NAME_PLAIN), "ok");
  cr_assert_str_eq(why_not("a..b", PKG_NAME_PLAIN), "ok");
  cr_assert_str_eq(why_not("", PKG_NAME_PLAIN), "is empty");
  cr_assert_str_eq(why_not("..", PKG_NAME_PLAIN), "has a '..' component");
  cr_assert_str_eq(why_not(".", PKG_NAME_PLAIN), "has a '.' component");
  cr_assert_str_eq(why_not("/abs", PKG_NAME_PLAIN), "is an absolute path");
  cr_assert_str_eq(why_not("a/b", PKG_NAME_PLAIN), "has a '/' where a plain name is meant");
  cr_assert_str_eq(why_not("../x", PKG_NAME_PLAIN), "has a '/' where a plain name is meant");
  cr_assert_str_eq(why_not("a\nb", PKG_NAME_PLAIN), "has a control character");
  cr_assert_str_eq(why_not("a\x7f", PKG_NAME_PLAIN), "has a control character");
  cr_assert_str_eq(why_not("\x01", PKG_NAME_PLAIN), "has a control character");
}

Test(pkg_name, relative_paths) {
  cr_assert_str_eq(why_not("weights/weight.bin", PKG_NAME_RELPATH), "ok");
  cr_assert_str_eq(why_not("weights/../x", PKG_NAME_RELPATH), "has a '..' component");
  cr_assert_str_eq(why_not("weights//x", PKG_NAME_RELPATH), "has an empty path component");
  cr_assert_str_eq(why_not("weights/", PKG_NAME_RELPATH), "has an empty path component");
  cr_assert_str_eq(why_not("./x", PKG_NAME_RELPATH), "has a '.' component");
  cr_assert_str_eq(why_not("/etc/passwd", PKG_NAME_RELPATH), "is an absolute path");
}

static char dir[64];

static void in_scratch(void) {
  snprintf(dir, sizeof dir, "/tmp/orion_pkg_paths_XXXXXX");
  cr_assert(mkdtemp(dir));
  char *real = realpath(dir, NULL); /* messages name resolved paths */
  snprintf(dir, sizeof dir, "%s", real);
  free(real);
  setenv("D", dir, 1); /* for the shell commands below; this process only */
}

static void run(const char *cmd) { cr_assert_eq(system(cmd), 0, "%s", cmd); }

static void out_of_scratch(void) { run("rm -rf \"$D\""); }

static const char *leads(const char *root, const char *rel) {
  static char why[512];
  char r[128];
  snprintf(r, sizeof r, "%s/%s", dir, root);
  if (pkg_file_inside(r, rel, why, sizeof why)) return "inside";
  /* Without the scratch directory's name, so the expectations are fixed text. */
  char *at = strstr(why, dir);
  if (at) memmove(at + 1, at + strlen(dir), strlen(at + strlen(dir)) + 1), at[0] = 'D';
  return why;
}

Test(pkg_file, links, .init = in_scratch, .fini = out_of_scratch) {
  run("mkdir -p \"$D/p/weights\" \"$D/out\" && touch \"$D/p/real.mil\" \"$D/out/x\"");
  run("ln -s real.mil \"$D/p/in.mil\" && ln -s \"$D/out/x\" \"$D/p/abs.mil\"");
  run("ln -s ../out/x \"$D/p/rel.mil\" && ln -s ../out \"$D/p/w\" && ln -s ../out/none \"$D/p/dangling.mil\"");
  cr_assert_str_eq(leads("p", "real.mil"), "inside");
  cr_assert_str_eq(leads("p", "in.mil"), "inside");
  cr_assert_str_eq(leads("p", "missing.mil"), "inside");
  cr_assert_str_eq(leads("p", "abs.mil"), "leads outside the package (a symbolic link to 'D/out/x')");
  cr_assert_str_eq(leads("p", "rel.mil"), "leads outside the package (a symbolic link to 'D/out/x')");
  cr_assert_str_eq(leads("p", "w/x"), "leads outside the package (a symbolic link to 'D/out/x')");
  cr_assert_str_eq(leads("p", "w/none/deeper"), "leads outside the package (a symbolic link to 'D/out/none/deeper')");
  cr_assert_str_eq(leads("p", "dangling.mil"), "leads outside the package (a symbolic link to 'D/out/none')");
  /* Out through a link and back in by the package's own name: it ends inside. */
  run("ln -s .. \"$D/p/up\"");
  cr_assert_str_eq(leads("p", "up/p/real.mil"), "inside");
  cr_assert_str_eq(leads("p", "up/out/x"), "leads outside the package (a symbolic link to 'D/out/x')");
}

Test(pkg_dir, kinds, .init = in_scratch, .fini = out_of_scratch) {
  run("mkdir -p \"$D/a.anepkg\" \"$D/bare\" \"$D/empty\" \"$D/full\"");
  run("touch \"$D/bare/model.mil\" \"$D/full/Manifest.plist\" && mkdir \"$D/j\" \"$D/j/weights\"");
  run("touch \"$D/j/model.mil\" \"$D/j/weights/weight.bin.journal\"");
  char p[128];
  const struct { const char *name; PkgDirKind kind; } cases[] = {
      {"a.anepkg", PKG_DIR_PACKAGE_NO_MANIFEST}, {"a.anepkg/", PKG_DIR_PACKAGE_NO_MANIFEST},
      {"bare", PKG_DIR_BARE}, {"empty", PKG_DIR_NONE}, {"full", PKG_DIR_PACKAGE},
      {"j", PKG_DIR_PACKAGE_NO_MANIFEST}, {"missing", PKG_DIR_NONE}, {"bare/model.mil", PKG_DIR_NONE},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    snprintf(p, sizeof p, "%s/%s", dir, cases[i].name);
    cr_assert_eq(pkg_dir_kind(p), cases[i].kind, "%s", cases[i].name);
  }
}

/* The package as pkg_open_file reads it: `rel` read through `dir`, or the refusal. */
static const char *read_through(const PkgDir *pd, const char *rel) {
  static char got[512];
  char *data;
  size_t len;
  bool outside = false;
  if (pkg_read_file(pd, rel, 4096, &data, &len, &outside, got, sizeof got)) {
    snprintf(got, sizeof got, "read '%.*s'", (int)len, data);
    free(data);
    return got;
  }
  char *at = strstr(got, dir);
  if (at) memmove(at + 1, at + strlen(dir), strlen(at + strlen(dir)) + 1), at[0] = 'D';
  cr_assert_eq(outside, strstr(got, "leads outside") != NULL, "%s", got);
  return got;
}

/* No check by name comes before the open: a file swapped for a link out
 * after the package was opened (where a check would have passed) is refused
 * when it is read through the package's descriptor, and the outside file's
 * content is never returned. */
Test(pkg_file, swapped_after_open, .init = in_scratch, .fini = out_of_scratch) {
  run("mkdir -p \"$D/p/weights\" \"$D/out/weights\" && printf mil >\"$D/p/model.mil\"");
  run("printf w >\"$D/p/weights/weight.bin\" && printf SECRET >\"$D/out/secret\" && printf SECRET >\"$D/out/weights/weight.bin\"");
  char p[128];
  snprintf(p, sizeof p, "%s/p", dir);
  PkgDir pd;
  const char *err;
  cr_assert(pkg_dir_open(&pd, p, &err));
  cr_assert_str_eq(read_through(&pd, "model.mil"), "read 'mil'");
  cr_assert_str_eq(read_through(&pd, "weights/weight.bin"), "read 'w'");
  run("rm \"$D/p/model.mil\" && ln -s \"$D/out/secret\" \"$D/p/model.mil\"");
  cr_assert_str_eq(read_through(&pd, "model.mil"), "leads outside the package (a symbolic link to 'D/out/secret')");
  /* A directory on the way swapped for a link out. */
  run("rm -r \"$D/p/weights\" && ln -s ../out/weights \"$D/p/weights\"");
  cr_assert_str_eq(read_through(&pd, "weights/weight.bin"),
                   "leads outside the package (a symbolic link to 'D/out/weights/weight.bin')");
  /* Writing is refused the same way, and the outside file keeps its bytes. */
  bool outside = false;
  char why[512];
  cr_assert_eq(pkg_open_file(&pd, "weights/weight.bin", O_WRONLY | O_TRUNC, &outside, why, sizeof why), -1);
  cr_assert(outside);
  run("test \"$(cat \"$D/out/weights/weight.bin\")\" = SECRET");
  pkg_dir_close(&pd);
}

/* Links that stay inside the package are followed, relative or absolute,
 * through directories too; what is no regular file is refused. */
Test(pkg_file, links_inside_and_kinds, .init = in_scratch, .fini = out_of_scratch) {
  run("mkdir -p \"$D/p/a/b\" && printf real >\"$D/p/a/b/real.mil\" && mkfifo \"$D/p/fifo\"");
  run("ln -s a/b/real.mil \"$D/p/rel.mil\" && ln -s \"$D/p/a/b/real.mil\" \"$D/p/abs.mil\"");
  run("ln -s ../../rel.mil \"$D/p/a/b/up.mil\" && ln -s a/b \"$D/p/ab\" && ln -s loop1 \"$D/p/loop2\" && ln -s loop2 \"$D/p/loop1\"");
  run("ln -s ../../../p/a/b/real.mil \"$D/p/a/b/around.mil\" && ln -s ../../../q/real.mil \"$D/p/a/b/elsewhere.mil\"");
  char p[128];
  snprintf(p, sizeof p, "%s/p", dir);
  PkgDir pd;
  const char *err;
  cr_assert(pkg_dir_open(&pd, p, &err));
  cr_assert_str_eq(read_through(&pd, "rel.mil"), "read 'real'");
  cr_assert_str_eq(read_through(&pd, "abs.mil"), "read 'real'");
  cr_assert_str_eq(read_through(&pd, "a/b/up.mil"), "read 'real'");
  cr_assert_str_eq(read_through(&pd, "ab/real.mil"), "read 'real'");
  /* Through the package's parent straight back in by name ends inside, as it always did. */
  cr_assert_str_eq(read_through(&pd, "a/b/around.mil"), "read 'real'");
  cr_assert_str_eq(read_through(&pd, "a/b/elsewhere.mil"), "leads outside the package (a symbolic link to 'D/q/real.mil')");
  cr_assert_str_eq(read_through(&pd, "a"), "is a directory");
  cr_assert_str_eq(read_through(&pd, "fifo"), "is not a regular file");
  cr_assert_str_eq(read_through(&pd, "missing.mil"), "No such file or directory");
  cr_assert_str_eq(read_through(&pd, "loop1"), "Too many levels of symbolic links");
  pkg_dir_close(&pd);
}
