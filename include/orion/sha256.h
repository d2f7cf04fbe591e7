/*
 * SHA-256 (FIPS 180-4), for package checksums: the manifest records one per
 * weight and per MIL file, and readers verify them.
 */
#ifndef ORION_SHA256_H
#define ORION_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct Sha256 {
  uint32_t state[8];
  uint64_t length; /* bytes hashed so far */
  uint8_t block[64];
  uint32_t used;   /* bytes in block */
} Sha256;

void sha256_init(Sha256 *s);
void sha256_update(Sha256 *s, const void *data, size_t n);
void sha256_final(Sha256 *s, uint8_t digest[32]);
/* One call; hex is 64 lowercase characters plus NUL. */
void sha256_hex(const void *data, size_t n, char hex[65]);

#endif
