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

/* The last (len mod 32) bytes and the final mix, shared by both forms. */
static uint64_t finish(uint64_t h, const uint8_t *p, const uint8_t *end) {
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

static void stripes(uint64_t v[4], const uint8_t *p, size_t n) { /* n is a multiple of 32 */
  for (const uint8_t *end = p + n; p < end; p += 32) {
    v[0] = round64(v[0], read64(p));
    v[1] = round64(v[1], read64(p + 8));
    v[2] = round64(v[2], read64(p + 16));
    v[3] = round64(v[3], read64(p + 24));
  }
}

static uint64_t converge(const uint64_t v[4]) {
  uint64_t h = rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18);
  for (int i = 0; i < 4; i++) h = merge(h, v[i]);
  return h;
}

uint64_t xxh64(const void *data, size_t len, uint64_t seed) {
  const uint8_t *p = data;
  uint64_t h;
  if (len >= 32) {
    uint64_t v[4] = {seed + P1 + P2, seed + P2, seed, seed - P1};
    stripes(v, p, len & ~(size_t)31);
    h = converge(v);
    p += len & ~(size_t)31;
  } else {
    h = seed + P5;
  }
  return finish(h + (uint64_t)len, p, (const uint8_t *)data + len);
}

void xxh64_init(Xxh64State *s, uint64_t seed) {
  *s = (Xxh64State){.v = {seed + P1 + P2, seed + P2, seed, seed - P1}, .seed = seed};
}

void xxh64_update(Xxh64State *s, const void *data, size_t len) {
  const uint8_t *p = data;
  s->total += len;
  if (s->nbuf) { /* complete the buffered stripe first */
    size_t k = 32 - s->nbuf < len ? 32 - s->nbuf : len;
    memcpy(s->buf + s->nbuf, p, k);
    s->nbuf += (uint32_t)k;
    p += k;
    len -= k;
    if (s->nbuf < 32) return;
    stripes(s->v, s->buf, 32);
    s->nbuf = 0;
  }
  size_t whole = len & ~(size_t)31;
  stripes(s->v, p, whole);
  memcpy(s->buf, p + whole, len - whole);
  s->nbuf = (uint32_t)(len - whole);
}

uint64_t xxh64_digest(const Xxh64State *s) {
  uint64_t h = s->total >= 32 ? converge(s->v) : s->seed + P5;
  return finish(h + s->total, s->buf, s->buf + s->nbuf);
}

void xxh64_hex(const void *data, size_t len, char hex[17]) {
  snprintf(hex, 17, "%016llx", (unsigned long long)xxh64(data, len, 0));
}
