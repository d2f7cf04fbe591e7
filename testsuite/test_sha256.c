/*
 * SHA-256: the FIPS 180-4 example messages, messages whose length sits at
 * each padding boundary (55, 56, 63, 64, 65 bytes, ...), and incremental
 * hashing split at every offset, byte by byte and in uneven pieces, which
 * must give the one-shot digest: nettle's SHA-256, as orion uses it
 * (orion/hash.h's sha256_hex for the one-shot digest).
 */
#include "orion/hash.h"

#include <nettle/sha2.h>

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* This file's names for nettle's streaming calls (they were orion's own). */
typedef struct sha256_ctx Sha256;
#undef sha256_update
#define sha256_update(s, data, n) nettle_sha256_update((s), (n), (const uint8_t *)(data))
static void sha256_final(Sha256 *s, uint8_t digest[32]) { sha256_digest(s, 32, digest); }

static void hex_of(const uint8_t digest[32], char hex[65]) {
  for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", digest[i]);
}

Test(sha256, fips_examples) {
  char hex[65];
  sha256_hex("", 0, hex);
  cr_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  sha256_hex(NULL, 0, hex);
  cr_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  sha256_hex("abc", 3, hex);
  cr_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  cr_assert_eq(strlen(m448) * 8, 448);
  sha256_hex(m448, strlen(m448), hex);
  cr_assert_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  const char *m896 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                     "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
  cr_assert_eq(strlen(m896) * 8, 896);
  sha256_hex(m896, strlen(m896), hex);
  cr_assert_str_eq(hex, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

Test(sha256, one_million_a) {
  const char *want = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
  char *a = malloc(1000000);
  cr_assert_not_null(a);
  memset(a, 'a', 1000000);
  char hex[65];
  sha256_hex(a, 1000000, hex);
  cr_assert_str_eq(hex, want);
  /* The same in 1000-byte pieces. */
  Sha256 s;
  uint8_t digest[32];
  sha256_init(&s);
  for (int i = 0; i < 1000; i++) sha256_update(&s, a + 1000 * i, 1000);
  sha256_final(&s, digest);
  hex_of(digest, hex);
  cr_assert_str_eq(hex, want);
  free(a);
}

/* Digests (computed independently) of bytes (7i + 3) mod 256, i < n, for
 * lengths around the points where the padding needs one block or two. */
Test(sha256, padding_boundaries) {
  static const struct {
    size_t n;
    const char *hex;
  } cases[] = {
      {55, "e7313d333c272e639f790978283f9eb392e843d0f29b7016828bb1daa4aac70b"},
      {56, "4324d65f3c103567f5589c710bc08f8523f929a9272e3af36fc968e52abc6c27"},
      {63, "81c80242132f230c3bd41b3e63bbcff16107339549214a99614ff26664625055"},
      {64, "39e3d7b6b5d075d37d053ad89b24b41bef4f3c29760c84447cab3f3be1882241"},
      {65, "aacca6ff74fdbb296d165a45cecfa04e5127bc008770fbbdd48006f2d2fae95e"},
      {119, "9ce7368e4daf32341631b492e80359dc9f594b48453cd0dd5bf0b19279cc177e"},
      {127, "a8d23e75d936f303d248888d9b165ee543f4cbafcad3c9dd2a79bd84faa11d07"},
      {128, "d2742f1f4ac6bb7ca2b239ee18402ba8b3f9f8e652d2a72973c2b9ba11c08cf6"},
      {129, "307f8fc2c1622b92762e818d39a185d4d667ad49a4b07ceae1f4afa008a93ec4"},
  };
  uint8_t msg[129];
  for (size_t i = 0; i < sizeof msg; i++) msg[i] = (uint8_t)(7 * i + 3);
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    char hex[65];
    sha256_hex(msg, cases[c].n, hex);
    cr_assert_str_eq(hex, cases[c].hex, "length %zu", cases[c].n);
  }
}

Test(sha256, incremental_equals_one_shot) {
  uint8_t msg[200];
  for (size_t i = 0; i < sizeof msg; i++) msg[i] = (uint8_t)(i * 31 + 17);
  Sha256 s;
  uint8_t want[32], got[32];
  sha256_init(&s);
  sha256_update(&s, msg, sizeof msg);
  sha256_final(&s, want);

  /* Two pieces, split at every offset (including empty pieces). */
  for (size_t split = 0; split <= sizeof msg; split++) {
    sha256_init(&s);
    sha256_update(&s, msg, split);
    sha256_update(&s, msg + split, sizeof msg - split);
    sha256_final(&s, got);
    cr_assert_eq(memcmp(got, want, 32), 0, "split at %zu", split);
  }
  /* Three pieces at every pair of offsets. */
  for (size_t a = 0; a <= sizeof msg; a += 7)
    for (size_t b = a; b <= sizeof msg; b++) {
      sha256_init(&s);
      sha256_update(&s, msg, a);
      sha256_update(&s, msg + a, b - a);
      sha256_update(&s, msg + b, sizeof msg - b);
      sha256_final(&s, got);
      cr_assert_eq(memcmp(got, want, 32), 0, "split at %zu and %zu", a, b);
    }
  /* One byte at a time. */
  sha256_init(&s);
  for (size_t i = 0; i < sizeof msg; i++) sha256_update(&s, msg + i, 1);
  sha256_final(&s, got);
  cr_assert_eq(memcmp(got, want, 32), 0);
  cr_assert(s.count == 0 && s.index == 0, "final clears the context");
}
