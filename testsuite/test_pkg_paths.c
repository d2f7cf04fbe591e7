/*
 * The package confinement rules (pkgio/pkg_paths.c): which names are plain
 * names or relative paths, where a file of a package leads once links are
 * followed, and what kind of directory a path is.
 */
/* realpath() and setenv() are XSI/POSIX beyond the project-wide _POSIX_C_SOURCE. */
#define _XOPEN_SOURCE 700

#include "orion/pkg_paths.h"

#include <criterion/criterion.h>
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
