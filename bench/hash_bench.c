/*
 * bench/hash's program: the throughput of each hash a package's checksums
 * could use, on the same buffer of weight-like data (fp16 values of a seeded
 * normal distribution, as orionc's initializers make them), against a plain
 * read of the bytes. Each is timed `runs` times, interleaved, and the best
 * run kept (the machine is shared). Prints one line per hash: GB/s and the
 * ratio to the plain read and to our XXH64, over the whole buffer (bound by
 * memory bandwidth on a loaded machine) and over a 512 KB window of it
 * hashed again and again as many bytes (in L2: the hash's own cost, which is
 * what shows on a machine whose memory is faster than the hash).
 *
 *   hash_bench MEGABYTES RUNS [ours]   ("ours": also support/'s own, linked in)
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <nettle/sha2.h>
#include <openssl/evp.h>
#include <xxhash.h>
#define XXH_DISPATCH_DISABLE_REPLACE /* both: the portable entry points and the dispatched ones */
#include <xxh_x86dispatch.h>

uint64_t ours_xxh64(const void *data, size_t len);
void ours_sha256(const void *data, size_t len, uint8_t digest[32]);

static volatile uint64_t sink; /* keeps every result alive */

/* The memory-bandwidth ceiling: every 64-bit word read once, four lanes so
 * that the adds are not the limit. */
static void plain_read(const uint8_t *p, size_t n) {
  const uint64_t *w = (const uint64_t *)(const void *)p;
  uint64_t a = 0, b = 0, c = 0, d = 0;
  size_t words = n / 8, i = 0;
  for (; i + 4 <= words; i += 4) {
    a += w[i];
    b += w[i + 1];
    c += w[i + 2];
    d += w[i + 3];
  }
  for (; i < words; i++) a += w[i];
  sink += a ^ b ^ c ^ d;
}

static void lib_xxh64(const uint8_t *p, size_t n) { sink += XXH64(p, n, 0); }
static void lib_xxh3_64(const uint8_t *p, size_t n) { sink += XXH3_64bits(p, n); }
static void lib_xxh3_128(const uint8_t *p, size_t n) {
  XXH128_hash_t h = XXH3_128bits(p, n);
  sink += h.low64 ^ h.high64;
}
/* The entry points that pick SSE2, AVX2 or AVX-512 by the CPU at run time. */
static void lib_xxh3_64_dispatch(const uint8_t *p, size_t n) { sink += XXH3_64bits_dispatch(p, n); }
static void lib_xxh3_128_dispatch(const uint8_t *p, size_t n) {
  XXH128_hash_t h = XXH3_128bits_dispatch(p, n);
  sink += h.low64 ^ h.high64;
}
static void our_xxh64(const uint8_t *p, size_t n) { sink += ours_xxh64(p, n); }
static void our_sha256(const uint8_t *p, size_t n) {
  uint8_t d[32];
  ours_sha256(p, n, d);
  sink += d[0];
}
static void nettle_sha(const uint8_t *p, size_t n) {
  struct sha256_ctx c;
  uint8_t d[SHA256_DIGEST_SIZE];
  sha256_init(&c);
  sha256_update(&c, n, p);
  sha256_digest(&c, sizeof d, d);
  sink += d[0];
}
static void openssl_sha(const uint8_t *p, size_t n) {
  uint8_t d[32];
  unsigned int len = 0;
  EVP_Digest(p, n, d, &len, EVP_sha256(), NULL);
  sink += d[0];
}

typedef struct Hash {
  const char *name;
  void (*run)(const uint8_t *, size_t);
  bool ours;
  double best, best_cached; /* seconds */
} Hash;

#define WINDOW (512u * 1024u)

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* fp16 bits of a normal(0, 0.02) sample: weight-like, not compressible. */
static uint16_t fp16_normal(uint64_t *state) {
  *state = *state * 6364136223846793005ull + 1442695040888963407ull;
  double u1 = ((double)(*state >> 11) + 1.0) / 9007199254740993.0;
  *state = *state * 6364136223846793005ull + 1442695040888963407ull;
  double u2 = (double)(*state >> 11) / 9007199254740992.0;
  float x = (float)(0.02 * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
  uint32_t f;
  memcpy(&f, &x, 4);
  uint32_t sign = (f >> 16) & 0x8000u;
  int e = (int)((f >> 23) & 0xff) - 127 + 15;
  if (e <= 0) return (uint16_t)sign; /* tiny: flush, as the bench needs only plausible bits */
  return (uint16_t)(sign | ((uint32_t)e << 10) | ((f >> 13) & 0x3ffu));
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: hash_bench MEGABYTES RUNS [ours]\n");
    return 2;
  }
  size_t n = (size_t)strtoull(argv[1], NULL, 10) << 20;
  int runs = atoi(argv[2]);
  bool with_ours = argc > 3 && !strcmp(argv[3], "ours");
  uint8_t *buf = malloc(n);
  if (!buf) return 1;
  uint64_t state = 42;
  for (size_t i = 0; i + 2 <= n; i += 2) {
    uint16_t h = fp16_normal(&state);
    memcpy(buf + i, &h, 2);
  }
  Hash hashes[] = {
      {"plain read", plain_read, false, 1e30, 1e30},     {"our XXH64", our_xxh64, true, 1e30, 1e30},
      {"libxxhash XXH64", lib_xxh64, false, 1e30, 1e30}, {"libxxhash XXH3-64", lib_xxh3_64, false, 1e30, 1e30},
      {"libxxhash XXH3-128", lib_xxh3_128, false, 1e30, 1e30},
      {"XXH3-64 dispatched", lib_xxh3_64_dispatch, false, 1e30, 1e30},
      {"XXH3-128 dispatched", lib_xxh3_128_dispatch, false, 1e30, 1e30}, {"our SHA-256", our_sha256, true, 1e30, 1e30},
      {"nettle SHA-256", nettle_sha, false, 1e30, 1e30}, {"libcrypto SHA-256", openssl_sha, false, 1e30, 1e30},
  };
  size_t nh = sizeof hashes / sizeof hashes[0];
  for (int r = 0; r < runs; r++)
    for (size_t i = 0; i < nh; i++) {
      if (hashes[i].ours && !with_ours) continue;
      double t0 = now();
      hashes[i].run(buf, n);
      double t = now() - t0;
      if (t < hashes[i].best) hashes[i].best = t;
      t0 = now();
      for (size_t k = 0; k < n / WINDOW; k++) hashes[i].run(buf, WINDOW);
      t = now() - t0;
      if (t < hashes[i].best_cached) hashes[i].best_cached = t;
    }
  size_t cached = n / WINDOW * WINDOW;
  printf("%zu MB of fp16 weights, best of %d runs; GB/s over the whole buffer | over a 512 KB window (in cache)\n",
         n >> 20, runs);
  printf("%-20s %8s %9s %10s | %8s %9s %10s\n", "hash", "GB/s", "vs read", "vs XXH64", "GB/s", "vs read", "vs XXH64");
  for (size_t i = 0; i < nh; i++) {
    if (hashes[i].ours && !with_ours) continue;
    double g = (double)n / hashes[i].best / 1e9, c = (double)cached / hashes[i].best_cached / 1e9;
    double gr = (double)n / hashes[0].best / 1e9, cr = (double)cached / hashes[0].best_cached / 1e9;
    /* Against our XXH64 when it is linked in, else libxxhash's (the same function). */
    const Hash *base = with_ours ? &hashes[1] : &hashes[2];
    double gx = (double)n / base->best / 1e9, cx = (double)cached / base->best_cached / 1e9;
    printf("%-20s %8.2f %8.2fx %9.2fx | %8.2f %8.2fx %9.2fx\n", hashes[i].name, g, g / gr, g / gx, c, c / cr, c / cx);
  }
  free(buf);
  return 0;
}
