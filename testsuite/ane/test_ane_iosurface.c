/*
 * The ane backend's IOSurfaces (runtime/ane/ane_iosurface.h) against the
 * stand-in's IOSurface/CoreFoundation functions (standin_iosurface.c): every
 * symbol resolved from the opened framework, a surface of the requested
 * size made the reference's way, memory reachable only under a lock, and
 * the error for a library that lacks the functions; CoreFoundation's and
 * IOSurface's functions from two libraries (as on macOS), each missing one
 * named with its own library.
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ane_iosurface.h"

static void *open_standin(char *path, size_t len) {
  const char *dir = getenv("ANE_STANDIN_DIR");
  cr_assert_not_null(dir, "ANE_STANDIN_DIR (meson test sets it)");
  snprintf(path, len, "%s/libane_standin.so", dir);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  cr_assert_not_null(h, "%s", dlerror());
  return h;
}

Test(iosurface, a_surface_has_the_size_asked_for_and_its_memory_under_a_lock) {
  char path[4096], why[1024] = "";
  void *h = open_standin(path, sizeof path);
  AneSystem sys;
  cr_assert(ane_system_bind(&sys, h, path, why, sizeof why), "%s", why);
  IOSurfaceRef s = ane_iosurface_create(&sys, 49152);
  cr_assert_not_null(s);
  cr_assert_eq(sys.alloc_size(s), 49152);
  cr_assert_null(sys.base_address(s), "the stand-in hands out memory only under a lock");
  cr_assert_eq(sys.lock(s, 0, NULL), 0);
  unsigned char *base = sys.base_address(s);
  cr_assert_not_null(base);
  cr_assert_eq(base[0], 0);
  cr_assert_eq(base[49151], 0);
  memset(base, 0x5a, 49152);
  cr_assert_eq(sys.unlock(s, 0, NULL), 0);
  cr_assert_neq(sys.unlock(s, 0, NULL), 0, "unlocking what is not locked is an error");
  sys.release(s);
}

Test(iosurface, a_library_without_the_functions_is_named) {
  void *self = dlopen(NULL, RTLD_NOW);
  cr_assert_not_null(self);
  AneSystem sys;
  char why[1024] = "";
  cr_assert_not(ane_system_bind(&sys, self, "test_ane_iosurface", why, sizeof why));
  cr_assert_str_eq(why, "the ane backend's framework 'test_ane_iosurface' lacks CFNumberCreate");
  cr_assert_null(sys.surface_create);
}

Test(iosurface, the_two_libraries_are_searched_each_for_its_own_functions) {
  char path[4096], why[1024] = "";
  void *h = open_standin(path, sizeof path);
  void *self = dlopen(NULL, RTLD_NOW);
  cr_assert_not_null(self);
  AneSystem sys;
  cr_assert(ane_system_bind_libraries(&sys, h, path, h, path, why, sizeof why), "%s", why);
  cr_assert_not_null(sys.surface_create);
  cr_assert_not_null(sys.width);
  /* CoreFoundation's functions found, IOSurface's looked for in the other library. */
  cr_assert_not(ane_system_bind_libraries(&sys, h, path, self, "surfaces", why, sizeof why));
  cr_assert_str_eq(why, "the ane backend's framework 'surfaces' lacks IOSurfaceCreate");
  cr_assert_null(sys.number_create, "a failed bind leaves nothing half-bound");
  cr_assert_not(ane_system_bind_libraries(&sys, self, "cf", h, path, why, sizeof why));
  cr_assert_str_eq(why, "the ane backend's framework 'cf' lacks CFNumberCreate");
}
