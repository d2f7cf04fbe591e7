/*
 * The little orion adds around libxxhash and nettle (orion/hash.h).
 */
#include "orion/hash.h"

#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>

/* As the allocation funnel (support/memory.c) ends: libxxhash allocates its
 * aligned states itself. */
static void need(const void *state) {
  if (state) return;
  fprintf(stderr, "orion: fatal error: out of memory allocating a hash state\n");
  abort();
}

void hash64_hex(uint64_t hash, char hex[17]) { snprintf(hex, 17, "%016llx", (unsigned long long)hash); }

void xxh64_hex(const void *data, size_t len, char hex[17]) { hash64_hex(XXH64(data, len, 0), hex); }

void xxh3_hex(const void *data, size_t len, char hex[17]) { hash64_hex(XXH3_64bits(data, len), hex); }

XXH64_state_t *xxh64_state_new(void) {
  XXH64_state_t *s = XXH64_createState();
  need(s);
  XXH64_reset(s, 0);
  return s;
}

XXH3_state_t *xxh3_state_new(void) {
  XXH3_state_t *s = XXH3_createState();
  need(s);
  XXH3_64bits_reset(s);
  return s;
}

void sha256_hex(const void *data, size_t n, char hex[65]) {
  struct sha256_ctx c;
  uint8_t digest[SHA256_DIGEST_SIZE];
  sha256_init(&c);
  sha256_update(&c, n, data);
  sha256_digest(&c, sizeof digest, digest);
  for (int i = 0; i < SHA256_DIGEST_SIZE; i++) snprintf(hex + 2 * i, 3, "%02x", digest[i]);
}
