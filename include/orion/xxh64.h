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

#endif
