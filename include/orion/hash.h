/*
 * Checksums and content keys, from Debian's libraries rather than our own:
 * xxHash (libxxhash) where speed matters and only corruption is to be
 * caught (package files: hundreds of MB of weights), SHA-256 (nettle) where
 * a collision must not be arrangeable (source text, compile cache keys).
 * Call XXH64 and XXH3_64bits directly; what this adds is the hex form the
 * manifest stores, streaming states that end the process on out of memory
 * like the rest of support/, and the SHA-256 one call. Not cryptographic
 * for the xxHash part. See docs/architecture.md for why these libraries.
 */
#ifndef ORION_HASH_H
#define ORION_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <xxhash.h>
#if defined(__x86_64__) || defined(__i386__)
/* XXH3 through the entry points that pick SSE2, AVX2 or AVX-512 by the CPU
 * at run time (the plain ones are built for the oldest x86; bench/hash). */
#include <xxh_x86dispatch.h>
#endif

/* 16 lowercase hex digits plus NUL, as xxhsum prints a 64-bit hash. */
void hash64_hex(uint64_t hash, char hex[17]);
/* XXH64 (seed 0) and XXH3-64 (no seed, no secret) of data, in that form. */
void xxh64_hex(const void *data, size_t len, char hex[17]);
void xxh3_hex(const void *data, size_t len, char hex[17]);

/* Streaming states, reset (seed 0), never NULL; free with XXH64_freeState
 * and XXH3_freeState. */
XXH64_state_t *xxh64_state_new(void);
XXH3_state_t *xxh3_state_new(void);

/* SHA-256 of data; hex is 64 lowercase characters plus NUL. */
void sha256_hex(const void *data, size_t n, char hex[65]);

#endif
