/*
 * The runtime's cache of loaded programs (see orion/runtime.h). The ANE keeps
 * only about 100-128 compiled programs resident per process, and loading one
 * is the expensive step, so a process that switches between programs (a
 * training step's forward and backward, several adapters' base models) keeps
 * them loaded, keyed by content, up to a bound, evicting the least recently
 * used program nobody holds.
 */
#include <stdlib.h>
#include <string.h>

#include "orion/patch.h"
#include "orion/runtime.h"
#include "orion/hash.h"

typedef struct CacheSlot {
  char key[65];         /* SHA-256 of the content description */
  OrionProgram *program;
  uint32_t holders;     /* acquisitions not yet released */
  uint64_t last_used;   /* the cache's clock at the last acquisition */
} CacheSlot;

struct OrionProgramCache {
  CacheSlot *slots;
  uint32_t n, capacity;
  uint64_t clock;
  OrionProgramCacheStats stats;
};

OrionProgramCache *orion_program_cache_new(uint32_t capacity) {
  OrionProgramCache *c = xcalloc(1, sizeof *c);
  c->capacity = capacity ? capacity : ORION_DEFAULT_RESIDENT_PROGRAMS;
  c->slots = xcalloc(c->capacity, sizeof *c->slots);
  return c;
}

void orion_program_cache_free(OrionProgramCache *c) {
  if (!c) return;
  for (uint32_t i = 0; i < c->n; i++) orion_close(c->slots[i].program);
  free(c->slots);
  free(c);
}

/* What makes two packages the same program: the manifest's checksums of
 * every MIL file and of the weights (whose algorithm its format version
 * names), the target and the compiler. */
static bool content_key(const char *path, char key[65], Diag *d) {
  Package pkg;
  if (!package_read(path, &pkg, d)) return false;
  StrBuf sb;
  sb_init(&sb);
  sb_printf(&sb, "format %u\n%s\n%s\n%s\n%s\n%llu\n", pkg.format_version, pkg.compiler_version, pkg.target,
            pkg.program_version, pkg.weights_layout_xxh64, (unsigned long long)pkg.weights_size);
  for (uint32_t i = 0; i < pkg.nfunctions; i++) {
    sb_printf(&sb, "%s %s %s\n", pkg.functions[i].name, pkg.functions[i].mil_file, pkg.functions[i].mil_xxh64);
    for (uint32_t k = 0; k < pkg.functions[i].nweights; k++) sb_printf(&sb, "%s\n", pkg.functions[i].weights[k].checksum);
  }
  sha256_hex(sb.data, sb.len, key);
  sb_free(&sb);
  package_free(&pkg);
  return true;
}

OrionProgram *orion_program_cache_acquire(OrionProgramCache *c, const char *path, const OrionOpenOptions *opt,
                                          Diag *d) {
  /* A pending update changes the content: complete it before keying. */
  if (package_has_journal(path) && !package_recover(path, NULL, d)) return NULL;
  char key[65];
  if (!content_key(path, key, d)) return NULL;
  c->clock++;
  for (uint32_t i = 0; i < c->n; i++)
    if (!strcmp(c->slots[i].key, key)) {
      c->slots[i].holders++;
      c->slots[i].last_used = c->clock;
      c->stats.hits++;
      return c->slots[i].program;
    }
  uint32_t at = c->n;
  if (c->n == c->capacity) {
    /* Full: the least recently used program that nobody holds makes room. */
    at = UINT32_MAX;
    for (uint32_t i = 0; i < c->n; i++)
      if (!c->slots[i].holders && (at == UINT32_MAX || c->slots[i].last_used < c->slots[at].last_used)) at = i;
    if (at == UINT32_MAX) {
      diag_error(d, (SrcSpan){0}, "cannot load '%s': all %u resident programs are in use (release one, or make "
                 "the cache larger)", path, c->capacity);
      return NULL;
    }
  }
  OrionProgram *p = orion_open(path, opt, d);
  if (!p) return NULL;
  c->stats.misses++;
  if (at < c->n) {
    orion_close(c->slots[at].program);
    c->stats.evictions++;
  } else {
    c->n++;
  }
  c->slots[at] = (CacheSlot){.program = p, .holders = 1, .last_used = c->clock};
  memcpy(c->slots[at].key, key, sizeof key);
  return p;
}

void orion_program_cache_release(OrionProgramCache *c, OrionProgram *p) {
  for (uint32_t i = 0; i < c->n; i++)
    if (c->slots[i].program == p && c->slots[i].holders) {
      c->slots[i].holders--;
      return;
    }
}

OrionProgramCacheStats orion_program_cache_stats(const OrionProgramCache *c) {
  OrionProgramCacheStats s = c->stats;
  s.resident = c->n;
  return s;
}
