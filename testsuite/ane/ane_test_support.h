/*
 * What the ane unit tests share: a small program compiled into a package of
 * a test's own directory, the weight-update self-test's cache kept in it,
 * and the stand-in framework's compile counter. Failures are Criterion
 * assertions in the calling test.
 */
#ifndef ORION_ANE_TEST_SUPPORT_H
#define ORION_ANE_TEST_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>

#include "../helpers.h"
#include "orion/backend.h"

/* Makes a fresh /tmp/orion-NAME-XXXXXX into dir[dircap] and compiles `text`
 * (legalized, iOS 18 MIL, source "t.oir") into dir/m.anepkg, its path in
 * pkg[pkgcap]. */
void ane_test_package(const char *text, const char *name, char *dir, size_t dircap, char *pkg, size_t pkgcap);

/* Points XDG_CACHE_HOME at dir/cache (its path in cache[cap]) and TMPDIR at
 * dir/tmpdir (made here), so that the weight-update self-test's cached choice
 * and the reference's temporary directories are this test's own. */
void ane_test_own_cache(const char *dir, char *cache, size_t cap);

/* The stand-in's count of compiles (ane_standin_compile_count), read from
 * the framework the backend has loaded (ORION_ANE_FRAMEWORK). */
unsigned long standin_compiles(void);
/* The surfaces it has made (ane_standin_surface_count), likewise. */
unsigned long standin_surfaces(void);

/* A package opened on a fresh ane backend with function 0 prepared in ane
 * numerics, every step asserted (errors from cap); compiles is what the
 * prepare cost the stand-in (a writable program's self-test included). */
typedef struct AneTestPrepared {
  OrionProgram *program;
  OrionBackend *backend;
  OrionExec *exec;
  unsigned long compiles;
} AneTestPrepared;

AneTestPrepared ane_test_prepare(const char *pkg, bool writable_weights, Capture *cap);
/* Closes the backend (and with it the exec) and the program. */
void ane_test_close(AneTestPrepared *t);

#endif
