/*
 * XXH64 (the xxHash 64-bit algorithm, as specified in xxHash's
 * doc/xxhash_spec.md), written from the specification. Little-endian reads
 * through memcpy so any alignment works.
 */
#include "orion/xxh64.h"

#include <stdio.h>
#include <string.h>

#define P1 0x9E3779B185EBCA87ull
#define P2 0xC2B2AE3D27D4EB4Full
#define P3 0x165667B19E3779F9ull
#define P4 0x85EBCA77C2B2AE63ull
#define P5 0x27D4EB2F165667C5ull

static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static uint64_t read64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v; /* the toolchain targets little-endian hosts only */
}

static uint32_t read32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

static uint64_t round64(uint64_t acc, uint64_t input) {
  acc += input * P2;
  acc = rotl(acc, 31);
  return acc * P1;
}

static uint64_t merge(uint64_t acc, uint64_t val) {
  acc ^= round64(0, val);
  return acc * P1 + P4;
}

uint64_t xxh64(const void *data, size_t len, uint64_t seed) {
  const uint8_t *p = data, *end = p + len;
  uint64_t h;
  if (len >= 32) {
    uint64_t v1 = seed + P1 + P2, v2 = seed + P2, v3 = seed, v4 = seed - P1;
    const uint8_t *limit = end - 32;
    do {
      v1 = round64(v1, read64(p));
      v2 = round64(v2, read64(p + 8));
      v3 = round64(v3, read64(p + 16));
      v4 = round64(v4, read64(p + 24));
      p += 32;
    } while (p <= limit);
    h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
    h = merge(h, v1);
    h = merge(h, v2);
    h = merge(h, v3);
    h = merge(h, v4);
  } else {
    h = seed + P5;
  }
  h += (uint64_t)len;
  for (; p + 8 <= end; p += 8) {
    h ^= round64(0, read64(p));
    h = rotl(h, 27) * P1 + P4;
  }
  if (p + 4 <= end) {
    h ^= (uint64_t)read32(p) * P1;
    h = rotl(h, 23) * P2 + P3;
    p += 4;
  }
  for (; p < end; p++) {
    h ^= (uint64_t)*p * P5;
    h = rotl(h, 11) * P1;
  }
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  h *= P3;
  h ^= h >> 32;
  return h;
}

void xxh64_hex(const void *data, size_t len, char hex[17]) {
  snprintf(hex, 17, "%016llx", (unsigned long long)xxh64(data, len, 0));
}
