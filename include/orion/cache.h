/*
 * The compile cache: packages stored by content key, so that compiling an
 * unchanged graph again is a copy instead of producing and writing every
 * weight again. See docs/package-format.md ("The compile cache") for what the
 * key covers; the runtime's cache of loaded programs is in orion/runtime.h.
 */
#ifndef ORION_CACHE_H
#define ORION_CACHE_H

#include "orion/package.h"

#define COMPILE_CACHE_KEY_LEN 32 /* hex digits of SHA-256 kept */
#define COMPILE_CACHE_DEFAULT_MAX_BYTES (4ull << 30)

/* $ORION_CACHE_DIR, else $XDG_CACHE_HOME/orion, else $HOME/.cache/orion;
 * NULL when none is set (caller frees). */
char *compile_cache_default_dir(void);

/* The key of a legalized module about to be written with these options
 * (plugins: the pass plugins loaded, by path, hashed by content). */
void compile_cache_key(IrModule *m, const PackageOptions *opt, const char *const *plugins, uint32_t nplugins,
                       char key[COMPILE_CACHE_KEY_LEN + 1]);

/* On a hit (an entry that passes its checksums) writes it to `path` exactly
 * as package_write would (telling temp_dir, if given, its temporary
 * directory) and returns true. A miss returns false quietly; a failure to
 * write `path` is reported. */
bool compile_cache_fetch(const char *dir, const char *key, const char *path, const TempDirHook *temp_dir, Diag *d);

/* Stores the package at `path` under `key` (best effort: false if it could
 * not), then evicts least recently used entries beyond max_bytes. */
bool compile_cache_store(const char *dir, const char *key, const char *path, uint64_t max_bytes);

#endif
