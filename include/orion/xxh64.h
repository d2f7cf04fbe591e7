/*
 * XXH64, the 64-bit xxHash checksum: fast (several GB/s in portable C), for
 * package integrity checks where speed matters (hundreds of MB of weights).
 * Not cryptographic: it detects corruption, not tampering.
 */
#ifndef ORION_XXH64_H
#define ORION_XXH64_H

#include <stddef.h>
#include <stdint.h>

uint64_t xxh64(const void *data, size_t len, uint64_t seed);
/* 16 lowercase hex digits plus NUL, as xxhsum prints it. */
void xxh64_hex(const void *data, size_t len, char hex[17]);

/* The same hash over data given in pieces: init, update any number of
 * times, digest (which leaves the state usable for more updates). */
typedef struct Xxh64State {
  uint64_t v[4], seed, total;
  uint8_t buf[32];
  uint32_t nbuf;
} Xxh64State;
void xxh64_init(Xxh64State *s, uint64_t seed);
void xxh64_update(Xxh64State *s, const void *data, size_t len);
uint64_t xxh64_digest(const Xxh64State *s);

#endif
