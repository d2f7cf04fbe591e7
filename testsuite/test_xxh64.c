/*
 * XXH64 against reference values printed by Debian's xxhsum (xxHash's own
 * tool), for lengths that exercise every tail path and the 32-byte stripes.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "orion/support.h"
#include "orion/hash.h"

static void check(const void *data, size_t len, const char *want) {
  char hex[17];
  xxh64_hex(data, len, hex);
  cr_assert_str_eq(hex, want, "length %zu", len);
}

Test(xxh64, reference_values) {
  check("", 0, "ef46db3751d8e999");
  check("a", 1, "d24ec4f1a98c6e5b");
  check("abc", 3, "44bc2cf5ad770999");
  char x[100];
  memset(x, 'x', sizeof x);
  check(x, 100, "92f0de5a88a3c094");
  char z[1000] = {0};
  check(z, 1000, "0e2b1ef27944075a");
}

/* Runs of 'q' of every length around the 4-, 8- and 32-byte boundaries. */
Test(xxh64, every_tail_length) {
  static const struct {
    size_t len;
    const char *hex;
  } cases[] = {
      {1, "1b00b0a90a478a4d"},
      {2, "4789e180e4a61095"},
      {3, "b62b468edbfc54a9"},
      {4, "c5b12c9ddff7d85d"},
      {5, "f37100d975043dcc"},
      {7, "153f81abe58ea5d6"},
      {8, "26545f58a19f7a7a"},
      {9, "86954ee9e27c659d"},
      {15, "8a6e59fcc5e94197"},
      {16, "74b26e448a4145c0"},
      {17, "97673668b3e9fa1a"},
      {31, "c5de6c8bb3485c3a"},
      {32, "0f085e21de38d0f0"},
      {33, "40149e1612102fb7"},
      {63, "b44b6bd84254453a"},
      {64, "7d312a273d0811ab"},
      {65, "c4ab41f9e6e5c1f0"},
      {100, "9a081e2d827f6447"}};
  char q[100];
  memset(q, 'q', sizeof q);
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check(q, cases[i].len, cases[i].hex);
}

Test(xxh64, unaligned_input_gives_the_same_hash) {
  char buf[300];
  for (size_t i = 0; i < sizeof buf; i++) buf[i] = (char)(i * 7 + 3);
  uint64_t h = XXH64(buf + 1, 200, 0);
  char copy[200];
  memcpy(copy, buf + 1, 200);
  cr_assert_eq(h, XXH64(copy, 200, 0));
  cr_assert_neq(h, XXH64(copy, 199, 0));
  cr_assert_neq(h, XXH64(copy, 200, 1), "the seed matters");
}

Test(xxh64, streaming_in_any_pieces_equals_one_shot) {
  uint8_t buf[1000];
  uint64_t st = 5;
  for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)(splitmix64(&st) >> 56);
  static const size_t lens[] = {0, 1, 7, 31, 32, 33, 64, 95, 100, 999, 1000};
  static const size_t pieces[] = {1, 3, 8, 31, 32, 33, 100};
  for (size_t a = 0; a < sizeof lens / sizeof *lens; a++)
    for (size_t b = 0; b < sizeof pieces / sizeof *pieces; b++) {
      XXH64_state_t *s = xxh64_state_new();
      XXH64_reset(s, 9);
      for (size_t at = 0; at < lens[a]; at += pieces[b])
        XXH64_update(s, buf + at, lens[a] - at < pieces[b] ? lens[a] - at : pieces[b]);
      cr_assert_eq(XXH64_digest(s), XXH64(buf, lens[a], 9), "length %zu in pieces of %zu", lens[a], pieces[b]);
      XXH64_freeState(s);
    }
}
