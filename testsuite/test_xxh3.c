/*
 * XXH3-64, format 2's weight checksum, against reference values printed by
 * Debian's xxhsum -H3 for lengths that reach each of its code paths (0, 1-3,
 * 4-8, 9-16, 17-128, 129-240 bytes, then stripes and blocks, with the
 * CPU-dispatched long-input path past 240); streaming in pieces against one
 * call; and the per-format choice the manifest readers make
 * (package_weight_checksum: XXH64 in format 1, XXH3-64 in format 2).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "orion/hash.h"
#include "orion/manifest.h"

static void check(const void *data, size_t len, const char *want) {
  char hex[17];
  xxh3_hex(data, len, hex);
  cr_assert_str_eq(hex, want, "length %zu", len);
}

Test(xxh3, reference_values) {
  check("", 0, "2d06800538d394c2");
  check(NULL, 0, "2d06800538d394c2");
  check("a", 1, "e6c632b61e964e1f");
  check("abc", 3, "78af5f94892f3950");
  char x[100];
  memset(x, 'x', sizeof x);
  check(x, 100, "c90984ffdf50ce42");
  char z[1000] = {0};
  check(z, 1000, "24c1ea6074dd588c");
}

Test(xxh3, every_length_class) {
  static const struct {
    size_t len;
    const char *hex;
  } cases[] = {{1, "f2386670cff0b396"},    {2, "6541da5a7ba4b718"},    {3, "0989a84b64e60726"},
               {4, "d54cb6c7c95402cf"},    {8, "58f36208a142d878"},    {9, "aef56142f501a410"},
               {16, "e5ebbd2329eac6b2"},   {17, "c0f4fd137bcb41cd"},   {128, "8d3ef19b7a0aea21"},
               {129, "348020316d0e37b5"},  {240, "778be05a7922288a"},  {241, "f476ea4d5d0cc656"},
               {1024, "da88fb6823527caf"}, {1025, "9a2967397e82e550"}, {4096, "1443b740176b44bb"},
               {100000, "104b4c1cc594ef39"}};
  char *q = malloc(100000);
  cr_assert_not_null(q);
  memset(q, 'q', 100000);
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check(q, cases[i].len, cases[i].hex);
  free(q);
}

/* A megabyte and a bit of a pattern: many blocks and a ragged end. */
static uint8_t *pattern(size_t n) {
  uint8_t *p = malloc(n);
  cr_assert_not_null(p);
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(i * 7 + 3);
  return p;
}

Test(xxh3, long_input) {
  uint8_t *p = pattern(1000003);
  check(p, 1000003, "6fb4080543f32e5b");
  char hex[17];
  xxh64_hex(p, 1000003, hex);
  cr_assert_str_eq(hex, "293d731da18115ef");
  free(p);
}

Test(xxh3, streaming_in_any_pieces_equals_one_shot) {
  uint8_t *p = pattern(5000);
  static const size_t lens[] = {0, 1, 16, 240, 241, 1024, 1025, 4999, 5000};
  static const size_t pieces[] = {1, 7, 64, 255, 1024, 5000};
  XXH3_state_t *s = xxh3_state_new();
  for (size_t a = 0; a < sizeof lens / sizeof *lens; a++)
    for (size_t b = 0; b < sizeof pieces / sizeof *pieces; b++) {
      XXH3_64bits_reset(s);
      for (size_t at = 0; at < lens[a]; at += pieces[b])
        XXH3_64bits_update(s, p + at, lens[a] - at < pieces[b] ? lens[a] - at : pieces[b]);
      cr_assert_eq(XXH3_64bits_digest(s), XXH3_64bits(p, lens[a]), "length %zu in pieces of %zu", lens[a], pieces[b]);
    }
  XXH3_freeState(s);
  free(p);
}

Test(xxh3, hex_keeps_leading_zeros) {
  char hex[17];
  hash64_hex(0x00000000000000abull, hex);
  cr_assert_str_eq(hex, "00000000000000ab");
  hash64_hex(UINT64_MAX, hex);
  cr_assert_str_eq(hex, "ffffffffffffffff");
}

Test(xxh3, weight_checksum_by_format) {
  cr_assert_eq(package_weight_checksum(1, "abc", 3), 0x44bc2cf5ad770999ull);
  cr_assert_eq(package_weight_checksum(2, "abc", 3), 0x78af5f94892f3950ull);
  cr_assert_eq(package_weight_checksum(PACKAGE_FORMAT_VERSION, "abc", 3), 0x78af5f94892f3950ull,
               "the compiler writes format 2");
  cr_assert_str_eq(package_weight_checksum_key(1), "XXH64");
  cr_assert_str_eq(package_weight_checksum_key(2), "XXH3");
  cr_assert_str_eq(package_weight_checksum_name(1), "xxh64");
  cr_assert_str_eq(package_weight_checksum_name(2), "xxh3");
}
