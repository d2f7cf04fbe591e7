/*
 * bench/hash's view of the hash functions support/ carried before orion used
 * Debian's libraries (support/sha256.c and support/xxh64.c, taken from git by
 * bench/hash): a translation unit of its own, because nettle's header
 * #defines sha256_init and friends over their names.
 */
#include <stddef.h>
#include <stdint.h>

#include "orion/sha256.h"
#include "orion/xxh64.h"

uint64_t ours_xxh64(const void *data, size_t len);
void ours_sha256(const void *data, size_t len, uint8_t digest[32]);

uint64_t ours_xxh64(const void *data, size_t len) { return xxh64(data, len, 0); }

void ours_sha256(const void *data, size_t len, uint8_t digest[32]) {
  Sha256 s;
  sha256_init(&s);
  sha256_update(&s, data, len);
  sha256_final(&s, digest);
}
