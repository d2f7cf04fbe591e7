/*
 * The ane backend's cache of compiled device programs, keyed by what the
 * compiled image depends on: the package content (MIL text and weights, or
 * the manifest's checksums of them), the OS build (its compiler) and the
 * ANE architecture. A hit costs no compile; a miss compiles through the
 * device's ops (charged to the compile budget, paced retries) and loads. At
 * most `cap` programs stay loaded: the least recently used one that nobody
 * holds is unloaded to make room; held programs are never evicted.
 * Unlike the runtime's cache of opened packages (runtime/program_cache.c),
 * this one holds device handles and knows the budget; it is pure C.
 */
#ifndef ORION_ANE_PROGRAM_CACHE_H
#define ORION_ANE_PROGRAM_CACHE_H

#include "ane_compile.h"

typedef struct AneProgramCache AneProgramCache;

typedef struct AneProgramCacheStats {
  uint64_t hits, misses, compiles, retries, evictions;
  uint32_t resident, cap;
} AneProgramCacheStats;

/* The key: 64 lowercase hex digits of the SHA-256 of a description of src
 * (the digests of its MIL text and weights, its OS build and architecture). */
void ane_program_key(const AneProgramSource *src, char key[65]);

/* cap: the resident-program cap (AneLimits.resident_cap). ops and budget
 * are borrowed and must outlive the cache; retry may be NULL. */
AneProgramCache *ane_program_cache_new(const AneDeviceOps *ops, AneBudget *budget, const AneLimit *cap,
                                       const AneRetryPolicy *retry);
/* Unloads and releases every program (held or not); NULL is fine. */
void ane_program_cache_free(AneProgramCache *c);
/* The loaded program for src, held until released; NULL after reporting. */
void *ane_program_cache_acquire(AneProgramCache *c, const AneProgramSource *src, Diag *d);
void ane_program_cache_release(AneProgramCache *c, void *program);
/* The program's content changed in place (a weight update without a
 * compile): it is now found under src's key. */
void ane_program_cache_rekey(AneProgramCache *c, void *program, const AneProgramSource *src);
AneProgramCacheStats ane_program_cache_stats(const AneProgramCache *c);
/* One line for -v: "ane program cache: 3 hits, 2 misses, ...". */
void ane_program_cache_stats_print(const AneProgramCache *c, StrBuf *out);

#endif
