/*
 * The file that keeps the weight-update self-test's choice for one OS build
 * and ANE architecture: `ane-update-<os build>-<arch>` in
 * $XDG_CACHE_HOME/orion/ (else $HOME/.cache/orion/), five lines of text, the
 * last the SHA-256 of the first four, written atomically. A file that does
 * not verify, or is for another build, is ignored with a warning (the
 * self-test then runs again). Format in docs/ane-backend.md.
 */
#ifndef ORION_ANE_UPDATE_CACHE_H
#define ORION_ANE_UPDATE_CACHE_H

#include "ane_budget.h"
#include "orion/runtime.h"

#define ANE_UPDATE_CACHE_MAGIC "orion ane weight-update choice 1"
#define ANE_UPDATE_CACHE_MAX_BYTES 4096u

/* The file's path; false (after reporting) for a build or architecture name
 * that is not letters, digits, '.', '_' or '-' (at most 64), or no cache
 * directory (neither variable set). */
bool ane_update_cache_path(const char *dir, AneGetenv *env, const char *os_build, const char *ane_arch, StrBuf *path,
                           Diag *d);
/* The file's text for that choice. */
void ane_update_cache_format(const char *os_build, const char *ane_arch, const char *strategy, StrBuf *out);
/* Why the file's text is not a usable choice for that build and
 * architecture ("its checksum does not match (the file is corrupt)"), or
 * NULL with *out set. Any bytes are safe (fuzz_ane_update_cache). */
const char *ane_update_cache_parse(const char *text, size_t len, const char *os_build, const char *ane_arch,
                                   OrionReloadStrategy *out);
/* The cached choice; false when there is none usable (missing: silently;
 * unreadable, corrupt or foreign: with a warning through d). */
bool ane_update_cache_read(const char *path, const char *os_build, const char *ane_arch, OrionReloadStrategy *out,
                           Diag *d);
/* Creates the directory as needed and writes the file atomically. */
bool ane_update_cache_write(const char *path, const char *os_build, const char *ane_arch, OrionReloadStrategy s,
                            Diag *d);

#endif
