/* The device program cache (ane_program_cache.h). */
#include <stdlib.h>
#include <string.h>

#include "ane_program_cache.h"
#include "orion/hash.h"

typedef struct AneSlot {
  char key[65];
  void *program;
  uint32_t holders;   /* acquisitions not yet released */
  uint64_t last_used; /* the cache's clock at the last acquisition */
} AneSlot;

struct AneProgramCache {
  const AneDeviceOps *ops;
  AneBudget *budget;
  AneRetryPolicy retry;
  AneSlot *slots;
  uint32_t n, cap;
  AneLimit cap_limit;
  uint64_t clock;
  AneProgramCacheStats stats;
  AneCompileStats compile_stats;
};

void ane_program_key(const AneProgramSource *src, char key[65]) {
  char mil[65], weights[65];
  sha256_hex(src->mil_text, src->mil_len, mil);
  StrBuf sb;
  sb_init(&sb);
  /* Bytes and checksums are hashed apart, so that neither can pass for the other. */
  if (src->weights) {
    sha256_hex(src->weights, src->weights_len, weights);
    sb_printf(&sb, "orion ane program 1\nmil %s\nweight bytes %s\n", mil, weights);
  } else {
    const char *digest = src->weights_digest ? src->weights_digest : "";
    sha256_hex(digest, strlen(digest), weights);
    sb_printf(&sb, "orion ane program 1\nmil %s\nweight checksums %s\n", mil, weights);
  }
  sb_printf(&sb, "os build %s\nane arch %s\nweights as inputs %d\n", src->os_build ? src->os_build : "",
            src->ane_arch ? src->ane_arch : "", src->weights_as_inputs ? 1 : 0);
  sha256_hex(sb.data, sb.len, key);
  sb_free(&sb);
}

AneProgramCache *ane_program_cache_new(const AneDeviceOps *ops, AneBudget *budget, const AneLimit *cap,
                                       const AneRetryPolicy *retry) {
  AneProgramCache *c = xcalloc(1, sizeof *c);
  c->ops = ops;
  c->budget = budget;
  if (retry) c->retry = *retry;
  c->cap_limit = *cap;
  c->cap = cap->value == 0 ? 1 : cap->value > ANE_LIMIT_MAX ? ANE_LIMIT_MAX : (uint32_t)cap->value;
  c->slots = xcalloc(c->cap, sizeof *c->slots);
  return c;
}

static void drop(AneProgramCache *c, AneSlot *s) {
  c->ops->unload(c->ops->ctx, s->program);
  c->ops->release(c->ops->ctx, s->program);
}

void ane_program_cache_free(AneProgramCache *c) {
  if (!c) return;
  for (uint32_t i = 0; i < c->n; i++) drop(c, &c->slots[i]);
  free(c->slots);
  free(c);
}

void *ane_program_cache_acquire(AneProgramCache *c, const AneProgramSource *src, Diag *d) {
  char key[65];
  ane_program_key(src, key);
  c->clock++;
  for (uint32_t i = 0; i < c->n; i++)
    if (!strcmp(c->slots[i].key, key)) {
      c->slots[i].holders++;
      c->slots[i].last_used = c->clock;
      c->stats.hits++;
      return c->slots[i].program;
    }
  /* Room is found before compiling, so that a full cache wastes no budget. */
  uint32_t at = c->n;
  if (c->n == c->cap) {
    at = UINT32_MAX;
    for (uint32_t i = 0; i < c->n; i++)
      if (!c->slots[i].holders && (at == UINT32_MAX || c->slots[i].last_used < c->slots[at].last_used)) at = i;
    if (at == UINT32_MAX) {
      diag_error(d, (SrcSpan){0},
                 "the ane backend cannot load '%s': all %u resident programs (the cap, from %s) are in use; release "
                 "one, or raise the cap with %s",
                 src->name, c->cap, c->cap_limit.origin, ANE_RESIDENT_CAP_ENV);
      return NULL;
    }
  }
  c->stats.misses++;
  void *program = NULL;
  bool ok = ane_compile_paced(c->ops, c->budget, &c->retry, src, NULL, false, &program, &c->compile_stats, d);
  c->stats.compiles = c->compile_stats.compiles;
  c->stats.retries = c->compile_stats.retries;
  if (!ok) return NULL;
  if (at < c->n) { /* the device's cap is on loaded programs: unload before loading */
    drop(c, &c->slots[at]);
    c->stats.evictions++;
  }
  AneDeviceError err = {0};
  if (!c->ops->load(c->ops->ctx, program, &err)) {
    StrBuf sb;
    sb_init(&sb);
    ane_device_error_print(&err, &sb);
    diag_error(d, (SrcSpan){0}, "the ANE could not load '%s' (%s)", src->name, sb.data);
    sb_free(&sb);
    c->ops->release(c->ops->ctx, program);
    if (at < c->n) { /* the evicted slot is gone: close the gap */
      c->slots[at] = c->slots[c->n - 1];
      c->n--;
    }
    return NULL;
  }
  if (at == c->n) c->n++;
  c->slots[at] = (AneSlot){.program = program, .holders = 1, .last_used = c->clock};
  memcpy(c->slots[at].key, key, sizeof key);
  return program;
}

void ane_program_cache_release(AneProgramCache *c, void *program) {
  for (uint32_t i = 0; i < c->n; i++)
    if (c->slots[i].program == program && c->slots[i].holders) {
      c->slots[i].holders--;
      return;
    }
}

void ane_program_cache_rekey(AneProgramCache *c, void *program, const AneProgramSource *src) {
  for (uint32_t i = 0; i < c->n; i++)
    if (c->slots[i].program == program) ane_program_key(src, c->slots[i].key);
}

AneProgramCacheStats ane_program_cache_stats(const AneProgramCache *c) {
  AneProgramCacheStats s = c->stats;
  s.resident = c->n;
  s.cap = c->cap;
  return s;
}

void ane_program_cache_stats_print(const AneProgramCache *c, StrBuf *out) {
  AneProgramCacheStats s = ane_program_cache_stats(c);
  sb_printf(out,
            "ane program cache: %llu hits, %llu misses, %llu compiles (%llu retries), %llu evictions, %u of %u "
            "resident; compile budget %llu of %llu used (%s)\n",
            (unsigned long long)s.hits, (unsigned long long)s.misses, (unsigned long long)s.compiles,
            (unsigned long long)s.retries, (unsigned long long)s.evictions, s.resident, s.cap,
            (unsigned long long)ane_budget_process_used(c->budget), (unsigned long long)c->budget->limit.value, c->budget->limit.origin);
}
