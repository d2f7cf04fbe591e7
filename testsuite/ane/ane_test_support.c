/* The ane unit tests' shared set-up (ane_test_support.h). */
#include "ane_test_support.h"

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../helpers.h"
#include "orion/package.h"
#include "orion/passes.h"

void ane_test_package(const char *text, const char *name, char *dir, size_t dircap, char *pkg, size_t pkgcap) {
  test_dir_make(dir, dircap, name);
  int n = snprintf(pkg, pkgcap, "%s/m.anepkg", dir);
  cr_assert(n > 0 && (size_t)n < pkgcap, "no room for the package path under %s", dir);
  Parsed p;
  parsed_open(&p, text);
  cr_assert_not_null(p.m, "%s", p.diags.data);
  cr_assert(passes_legalize(p.m, &p.d), "%s", p.diags.data);
  PackageOptions po = {.target = MIL_IOS18, .source_name = "t.oir", .source_text = text, .source_len = strlen(text)};
  cr_assert(package_write(p.m, pkg, &po, &p.d), "%s", p.diags.data);
  parsed_close(&p);
}

void ane_test_own_cache(const char *dir, char *cache, size_t cap) {
  int n = snprintf(cache, cap, "%s/cache", dir);
  cr_assert(n > 0 && (size_t)n < cap, "no room for the cache path under %s", dir);
  cr_assert_eq(setenv("XDG_CACHE_HOME", cache, 1), 0);
  /* The reference's temporary directories ($TMPDIR/<hexStringIdentifier>/,
   * one per content) too: another test process compiling the same content
   * at the same time (the self-test's probe program) would share one and
   * rewrite its weights under this one (docs/ane-backend.md, what is next). */
  char tmp[512];
  n = snprintf(tmp, sizeof tmp, "%s/tmpdir", dir);
  cr_assert(n > 0 && (size_t)n < sizeof tmp, "no room for the temporary directory under %s", dir);
  cr_assert(mkdir(tmp, 0700) == 0 || errno == EEXIST, "cannot make %s", tmp);
  cr_assert_eq(setenv("TMPDIR", tmp, 1), 0);
}

/* One of the stand-in's counters, by its function's name. */
static unsigned long standin_counter(const char *name) {
  void *h = dlopen(getenv("ORION_ANE_FRAMEWORK"), RTLD_NOW | RTLD_NOLOAD);
  cr_assert_not_null(h, "the backend has the stand-in loaded");
  void *sym = dlsym(h, name);
  dlclose(h);
  unsigned long (*count)(void);
  cr_assert_not_null(sym, "%s", name);
  memcpy(&count, &sym, sizeof sym); /* a data pointer to a function pointer, as POSIX allows */
  return count();
}

unsigned long standin_compiles(void) { return standin_counter("ane_standin_compile_count"); }

unsigned long standin_surfaces(void) { return standin_counter("ane_standin_surface_count"); }

AneTestPrepared ane_test_prepare(const char *pkg, bool writable_weights, Capture *cap) {
  AneTestPrepared t = {0};
  OrionOpenOptions oo = ORION_OPEN_OPTIONS_DEFAULT;
  oo.writable_weights = writable_weights;
  t.program = orion_open(pkg, &oo, &cap->d);
  cr_assert_not_null(t.program, "%s", cap->text.data);
  t.backend = orion_backend_open("ane", NULL, &cap->d);
  cr_assert_not_null(t.backend, "%s", cap->text.data);
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_ANE};
  unsigned long before = standin_compiles();
  t.exec = orion_backend_prepare(t.backend, t.program, 0, &po, &cap->d);
  cr_assert_not_null(t.exec, "%s", cap->text.data);
  t.compiles = standin_compiles() - before;
  return t;
}

void ane_test_close(AneTestPrepared *t) {
  orion_backend_close(t->backend);
  orion_close(t->program);
  *t = (AneTestPrepared){0};
}
