/*
 * MIL blob storage (weight.bin): the writer against files spelled out byte
 * by byte from the MIL spec (§2.3, §2.6), deduplication, the reader on what
 * the writer produces, and each rejection with its exact message.
 *
 * Expected files are written here as literal bytes rather than through
 * helpers that mirror the writer, so a shared misunderstanding of the layout
 * cannot make both sides agree.
 */
#include "orion/blob_writer.h"
#include "orion/hash.h"
#include "orion/manifest.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ERR_LEN 256

static void put_le(uint8_t *p, uint64_t v, int nbytes) {
  for (int i = 0; i < nbytes; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* A writable copy of a buffer, for corrupting. */
static uint8_t *copy_of(const uint8_t *data, size_t len) {
  uint8_t *c = malloc(len ? len : 1);
  cr_assert_not_null(c);
  memcpy(c, data, len);
  return c;
}

/* The §2.6 file: one 64x64 fp16 blob whose data bytes are i mod 251. */
static void worked_example(BlobWriter *w, uint8_t data[8192]) {
  for (size_t i = 0; i < 8192; i++) data[i] = (uint8_t)(i % 251);
  blob_writer_init(w);
  cr_assert_eq(blob_writer_add(w, BLOB_FP16, data, 8192), 64);
}

/* ---- writer ---------------------------------------------------------------- */

Test(blob_writer, empty_file_is_just_the_header) {
  static const uint8_t want[64] = {0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00};
  BlobWriter w;
  blob_writer_init(&w);
  cr_assert_eq(w.len, 64);
  cr_assert_eq(memcmp(w.data, want, 64), 0);
  blob_writer_free(&w);
  cr_assert_null(w.data);
}

Test(blob_writer, worked_example_byte_for_byte) {
  /* MIL spec §2.6, as printed there. */
  static const uint8_t head[128] = {
      /* 0x00 header: count 1, version 2, 56 zero bytes */
      0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0,
      0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
      0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
      0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
      /* 0x40 sentinel, dtype 1 (fp16), size 0x2000 */
      0xEF, 0xBE, 0xAD, 0xDE, 0x01, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      /* 0x50 data offset 128, padding bits 0 */
      0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      /* 0x60 reserved */
      0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
      0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  };
  BlobWriter w;
  static uint8_t data[8192];
  worked_example(&w, data);
  cr_assert_eq(w.len, 8320);
  cr_assert_eq(w.count, 1);
  cr_assert_eq(memcmp(w.data, head, sizeof head), 0);
  cr_assert_eq(memcmp(w.data + 128, data, sizeof data), 0);
  blob_writer_free(&w);
}

Test(blob_writer, second_record_is_aligned_up_and_nothing_follows_the_last) {
  /* 20 bytes of fp32 at 64 (data 128..147), so the next record goes to
   * align64(148) = 192 with zeros between; its 8 bytes of data at 256 end
   * the file at 264, not rounded up. */
  static const uint8_t want[264] = {
      [0] = 0x02, [4] = 0x02, /* count 2, version 2 */
      [64] = 0xEF, 0xBE, 0xAD, 0xDE, 0x02, 0x00, 0x00, 0x00, /* sentinel, fp32 */
      [72] = 0x14, 0, 0, 0, 0, 0, 0, 0,                      /* size 20 */
      [80] = 0x80, 0, 0, 0, 0, 0, 0, 0,                      /* data at 128 */
      [128] = 0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x40, 0x40, /* 1, 2, 3 */
      0x00, 0x00, 0x80, 0x40, 0x00, 0x00, 0xA0, 0x40,                                 /* 4, 5 */
      [192] = 0xEF, 0xBE, 0xAD, 0xDE, 0x01, 0x00, 0x00, 0x00, /* sentinel, fp16 */
      [200] = 0x08, 0, 0, 0, 0, 0, 0, 0,                      /* size 8 */
      [208] = 0x00, 0x01, 0, 0, 0, 0, 0, 0,                   /* data at 256 */
      [256] = 0x00, 0x3C, 0x00, 0x40, 0x00, 0x42, 0x00, 0x44, /* 1, 2, 3, 4 in fp16 */
  };
  const float f32[5] = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f};
  const uint8_t f16[8] = {0x00, 0x3C, 0x00, 0x40, 0x00, 0x42, 0x00, 0x44};
  BlobWriter w;
  blob_writer_init(&w);
  cr_assert_eq(blob_writer_add(&w, BLOB_FP32, f32, sizeof f32), 64);
  cr_assert_eq(w.len, 148);
  cr_assert_eq(w.data[0], 1, "the count is rewritten after each blob");
  cr_assert_eq(blob_writer_add(&w, BLOB_FP16, f16, sizeof f16), 192);
  cr_assert_eq(w.len, sizeof want);
  cr_assert_eq(memcmp(w.data, want, sizeof want), 0);
  blob_writer_free(&w);
}

/* The offsets MIL spec §2.3 quotes from coremltools' tests. */
Test(blob_writer, offsets_from_coremltools) {
  BlobWriter w;
  uint8_t *zeros = calloc(1, 62720);
  cr_assert_not_null(zeros);
  blob_writer_init(&w);
  cr_assert_eq(blob_writer_add(&w, BLOB_FP32, zeros, 500 * 4), 64);
  zeros[0] = 1; /* not a duplicate of the first */
  cr_assert_eq(blob_writer_add(&w, BLOB_FP32, zeros, 500 * 4), 2176);
  blob_writer_free(&w);

  blob_writer_init(&w);
  cr_assert_eq(blob_writer_add(&w, BLOB_FP16, zeros, 8 * 1 * 5 * 5 * 2), 64);
  cr_assert_eq(blob_writer_add(&w, BLOB_FP16, zeros, 5 * 6272 * 2), 576);
  zeros[1] = 1;
  cr_assert_eq(blob_writer_add(&w, BLOB_FP16, zeros, 2), 63360);
  cr_assert_eq(w.len, 63360 + 64 + 2);
  blob_writer_free(&w);
  free(zeros);
}

Test(blob_writer, identical_blobs_are_stored_once) {
  const uint8_t a[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const uint8_t b[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 11};
  BlobWriter w;
  blob_writer_init(&w);
  cr_assert_eq(blob_writer_add(&w, BLOB_INT8, a, sizeof a), 64);
  cr_assert_eq(blob_writer_add(&w, BLOB_INT8, b, sizeof b), 192);
  size_t len = w.len;
  /* A different buffer with the same bytes. */
  uint8_t again[10];
  memcpy(again, a, sizeof a);
  cr_assert_eq(blob_writer_add(&w, BLOB_INT8, again, sizeof again), 64);
  cr_assert_eq(blob_writer_add(&w, BLOB_INT8, b, sizeof b), 192);
  cr_assert_eq(w.count, 2);
  cr_assert_eq(w.data[0], 2);
  cr_assert_eq(w.len, len);
  blob_writer_free(&w);
}

Test(blob_writer, keep_duplicates_stores_every_blob) {
  const uint8_t a[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  BlobWriter w;
  blob_writer_init(&w);
  w.keep_duplicates = true;
  cr_assert_eq(blob_writer_add(&w, BLOB_INT8, a, sizeof a), 64);
  cr_assert_eq(blob_writer_add(&w, BLOB_INT8, a, sizeof a), 192);
  cr_assert_eq(blob_writer_add(&w, BLOB_INT8, a, sizeof a), 320);
  cr_assert_eq(w.count, 3);
  cr_assert_eq(w.len, 320 + 64 + 10);
  cr_assert_eq(memcmp(w.data + 192 + 64, a, sizeof a), 0);
  blob_writer_free(&w);
}

Test(blob_writer, same_bytes_with_another_dtype_or_length_are_kept_apart) {
  const uint8_t bytes[8] = {0, 0x3C, 0, 0x3C, 0, 0x3C, 0, 0x3C};
  BlobWriter w;
  blob_writer_init(&w);
  uint64_t u8 = blob_writer_add(&w, BLOB_UINT8, bytes, 8);
  uint64_t i8 = blob_writer_add(&w, BLOB_INT8, bytes, 8);
  uint64_t f16 = blob_writer_add(&w, BLOB_FP16, bytes, 8);
  uint64_t f16_short = blob_writer_add(&w, BLOB_FP16, bytes, 4);
  cr_assert_eq(u8, 64);
  cr_assert_eq(i8, 192);
  cr_assert_eq(f16, 320);
  cr_assert_eq(f16_short, 448);
  cr_assert_eq(w.count, 4);
  cr_assert_eq(w.data[448 + 4], BLOB_FP16);
  blob_writer_free(&w);
}

Test(blob_writer, dedup_survives_table_growth) {
  enum { N = 500 };
  uint64_t offsets[N];
  BlobWriter w;
  blob_writer_init(&w);
  for (uint32_t i = 0; i < N; i++) offsets[i] = blob_writer_add(&w, BLOB_UINT32, &i, sizeof i);
  size_t len = w.len;
  for (uint32_t i = 0; i < N; i++) {
    cr_assert_eq(offsets[i], 64 + 128 * (uint64_t)i);
    cr_assert_eq(blob_writer_add(&w, BLOB_UINT32, &i, sizeof i), offsets[i], "blob %u", i);
  }
  cr_assert_eq(w.count, N);
  cr_assert_eq(w.len, len);
  blob_writer_free(&w);
}

/* Equal bytes share a blob only within one identity (one weight): blobs of
 * other identities, and of none (constants), are kept apart. */
Test(blob_writer, equal_bytes_share_only_within_an_identity) {
  const uint8_t a[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  BlobWriter w;
  blob_writer_init(&w);
  uint64_t h = package_weight_checksum(PACKAGE_FORMAT_VERSION, a, sizeof a);
  cr_assert_eq(blob_writer_add_as(&w, "param g1", BLOB_INT8, a, sizeof a, h), 64);
  cr_assert_eq(blob_writer_add_as(&w, "param g2", BLOB_INT8, a, sizeof a, h), 192);
  cr_assert_eq(blob_writer_add(&w, BLOB_INT8, a, sizeof a), 320);
  cr_assert_eq(blob_writer_add_as(&w, "param g1", BLOB_INT8, a, sizeof a, h), 64);
  cr_assert_eq(blob_writer_add_as(&w, "param g2", BLOB_INT8, a, sizeof a, h), 192);
  cr_assert_eq(blob_writer_add_hashed(&w, BLOB_INT8, a, sizeof a, h), 320);
  cr_assert_eq(w.count, 3);
  cr_assert_eq(w.len, 320 + 64 + 10);
  blob_writer_free(&w);
}

/* Many blobs of equal bytes under distinct identities, through several
 * growths of the table: each found again under its own identity only. */
Test(blob_writer, identities_survive_table_growth) {
  enum { N = 300 };
  const uint8_t zeros[16] = {0};
  uint64_t offsets[N];
  char name[32];
  BlobWriter w;
  blob_writer_init(&w);
  for (int i = 0; i < N; i++) {
    snprintf(name, sizeof name, "param b%d", i);
    offsets[i] = blob_writer_add_as(&w, name, BLOB_UINT8, zeros, sizeof zeros, package_weight_checksum(PACKAGE_FORMAT_VERSION, zeros, sizeof zeros));
    cr_assert_eq(offsets[i], 64 + 128 * (uint64_t)i);
  }
  for (int i = 0; i < N; i++) {
    snprintf(name, sizeof name, "param b%d", i);
    cr_assert_eq(blob_writer_add_as(&w, name, BLOB_UINT8, zeros, sizeof zeros, package_weight_checksum(PACKAGE_FORMAT_VERSION, zeros, sizeof zeros)),
                 offsets[i], "blob %d", i);
  }
  cr_assert_eq(w.count, N);
  blob_writer_free(&w);
}

/* Blobs staged in place in a fixed buffer (as the package writer does in a
 * mapped file) give the same bytes as blobs copied in; a staged duplicate
 * leaves nothing behind, its place taken by the next blob. */
Test(blob_writer, staged_in_a_fixed_buffer_like_copied) {
  static const uint8_t blobs[][12] = {
      {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12},
      {9, 9, 9},
      {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, /* a duplicate of the first */
      {7, 7, 7, 7, 7, 7, 7},
  };
  static const size_t sizes[] = {12, 3, 12, 7};
  BlobWriter copied, staged;
  blob_writer_init(&copied);
  size_t cap = 64 + 4 * (64 + 64); /* room for every record, as the package writer reserves */
  uint8_t *buf = malloc(cap);
  cr_assert_not_null(buf);
  memset(buf, 0xAA, cap); /* not zeroed: the writer must write every byte it keeps */
  blob_writer_init_fixed(&staged, buf, cap);
  for (size_t i = 0; i < 4; i++) {
    uint64_t want = blob_writer_add(&copied, BLOB_UINT8, blobs[i], sizes[i]);
    uint8_t *place = blob_writer_stage(&staged, sizes[i]);
    memcpy(place, blobs[i], sizes[i]);
    cr_assert_eq(blob_writer_add(&staged, BLOB_UINT8, place, sizes[i]), want, "blob %zu", i);
  }
  cr_assert_eq(staged.len, copied.len);
  cr_assert_eq(staged.count, 3);
  cr_assert(memcmp(staged.data, copied.data, copied.len) == 0);
  blob_writer_free(&staged); /* leaves the caller's buffer alone */
  blob_writer_free(&copied);
  free(buf);
}

/* A writer whose earlier bytes may be gone asks its same_data hook to
 * confirm a large duplicate, but confirms small ones from its own copy. */
typedef struct HookLog {
  const uint8_t *file; /* where the hook reads "the disk" */
  int calls;
} HookLog;

static bool hook_same(void *ctx, uint64_t data_offset, const void *bytes, size_t nbytes) {
  HookLog *h = ctx;
  h->calls++;
  return memcmp(h->file + data_offset, bytes, nbytes) == 0;
}

Test(blob_writer, same_data_hook_and_small_copies) {
  size_t big = 100000; /* over the 64 KiB a writer copies */
  uint8_t *large = malloc(big), small[300];
  for (size_t i = 0; i < big; i++) large[i] = (uint8_t)(i * 7 + 3);
  for (size_t i = 0; i < sizeof small; i++) small[i] = (uint8_t)(i ^ 0x5A);
  BlobWriter w;
  blob_writer_init(&w);
  HookLog log = {0};
  w.same_data = hook_same;
  w.same_ctx = &log;
  uint64_t s1 = blob_writer_add(&w, BLOB_UINT8, small, sizeof small);
  uint64_t l1 = blob_writer_add(&w, BLOB_UINT8, large, big);
  /* Scribble over the small blob's bytes in the file: its copy still confirms it. */
  memset(w.data + s1 + 64, 0, sizeof small);
  log.file = w.data;
  cr_assert_eq(blob_writer_add(&w, BLOB_UINT8, small, sizeof small), s1);
  cr_assert_eq(log.calls, 0, "a small duplicate asked the hook");
  cr_assert_eq(blob_writer_add(&w, BLOB_UINT8, large, big), l1);
  cr_assert_eq(log.calls, 1);
  cr_assert_eq(w.count, 2);
  cr_assert_not_null(w.records[0].copy);
  cr_assert_null(w.records[1].copy);
  blob_writer_free(&w);
  free(large);
}

/* The layout hash a manifest records, from the writer's records, equals the
 * one the reader computes from the file's bytes. */
Test(blob_writer, layout_hash_from_records_matches_the_file) {
  static const uint8_t a[5] = {1, 2, 3, 4, 5}, b[64] = {9}, c[3] = {7, 7, 7};
  BlobWriter w;
  blob_writer_init(&w);
  blob_writer_add(&w, BLOB_UINT8, a, sizeof a);
  blob_writer_add(&w, BLOB_FP16, b, sizeof b);
  blob_writer_add(&w, BLOB_UINT8, a, sizeof a); /* a duplicate: no record */
  blob_writer_add(&w, BLOB_INT8, c, sizeof c);
  BlobFile f;
  char err[ERR_LEN];
  uint64_t want;
  cr_assert(blob_file_open(&f, w.data, w.len, err, sizeof err), "%s", err);
  cr_assert(blob_file_layout(&f, &want, NULL, NULL, err, sizeof err), "%s", err);
  cr_assert_eq(blob_writer_layout_xxh64(&w), want);
  /* And it changes with what it covers: another dtype for the last blob. */
  BlobWriter v;
  blob_writer_init(&v);
  blob_writer_add(&v, BLOB_UINT8, a, sizeof a);
  blob_writer_add(&v, BLOB_FP16, b, sizeof b);
  blob_writer_add(&v, BLOB_UINT8, c, sizeof c);
  cr_assert_neq(blob_writer_layout_xxh64(&v), want);
  blob_writer_free(&v);
  blob_writer_free(&w);
  /* An empty file: the header alone. */
  blob_writer_init(&w);
  cr_assert(blob_file_open(&f, w.data, w.len, err, sizeof err), "%s", err);
  cr_assert(blob_file_layout(&f, &want, NULL, NULL, err, sizeof err), "%s", err);
  cr_assert_eq(blob_writer_layout_xxh64(&w), want);
  blob_writer_free(&w);
}

/* ---- reader ---------------------------------------------------------------- */

typedef struct Walked {
  uint64_t offsets[16];
  BlobInfo infos[16];
  uint32_t n, stop_at; /* stop_at: index at which the callback says stop; 0 = never */
} Walked;

static bool collect(void *ctx, uint64_t offset, const BlobInfo *info) {
  Walked *wk = ctx;
  if (wk->stop_at && wk->n == wk->stop_at) return false;
  cr_assert_lt(wk->n, 16);
  wk->offsets[wk->n] = offset;
  wk->infos[wk->n++] = *info;
  return true;
}

Test(blob_reader, round_trip) {
  const uint16_t h[3] = {0x3C00, 0x4000, 0x4200};
  const float f[7] = {1, 2, 3, 4, 5, 6, 7};
  const int32_t i32[64] = {[0] = -1, [63] = 1 << 30};
  const uint8_t u8[1] = {200};
  BlobWriter w;
  blob_writer_init(&w);
  uint64_t off[5];
  off[0] = blob_writer_add(&w, BLOB_FP16, h, sizeof h);
  off[1] = blob_writer_add(&w, BLOB_FP32, f, sizeof f);
  off[2] = blob_writer_add(&w, BLOB_INT32, i32, sizeof i32);
  off[3] = blob_writer_add(&w, BLOB_UINT8, u8, sizeof u8);
  off[4] = blob_writer_add(&w, BLOB_BF16, h, sizeof h);
  const uint32_t dtypes[5] = {BLOB_FP16, BLOB_FP32, BLOB_INT32, BLOB_UINT8, BLOB_BF16};
  const void *datas[5] = {h, f, i32, u8, h};
  const size_t sizes[5] = {sizeof h, sizeof f, sizeof i32, sizeof u8, sizeof h};

  BlobFile bf;
  char err[ERR_LEN] = "";
  cr_assert(blob_file_open(&bf, w.data, w.len, err, sizeof err), "%s", err);
  cr_assert_eq(bf.count, 5);
  for (int i = 0; i < 5; i++) {
    BlobInfo info;
    cr_assert(blob_file_read_expect(&bf, off[i], dtypes[i], sizes[i], &info, err, sizeof err), "%s", err);
    cr_assert_eq(info.dtype, dtypes[i]);
    cr_assert_eq(info.size, sizes[i]);
    cr_assert_eq(info.data_offset, off[i] + 64);
    cr_assert_not(info.offset_unusual);
    cr_assert_eq(memcmp(w.data + info.data_offset, datas[i], sizes[i]), 0);
  }
  Walked wk = {0};
  cr_assert(blob_file_walk(&bf, collect, &wk, err, sizeof err), "%s", err);
  cr_assert_eq(wk.n, 5);
  for (int i = 0; i < 5; i++) {
    cr_assert_eq(wk.offsets[i], off[i]);
    cr_assert_eq(wk.infos[i].size, sizes[i]);
  }
  cr_assert(blob_file_walk(&bf, NULL, NULL, err, sizeof err), "%s", err);
  blob_writer_free(&w);
}

Test(blob_reader, empty_file_walks_to_nothing) {
  BlobWriter w;
  blob_writer_init(&w);
  BlobFile bf;
  char err[ERR_LEN];
  Walked wk = {0};
  cr_assert(blob_file_open(&bf, w.data, w.len, err, sizeof err));
  cr_assert(blob_file_walk(&bf, collect, &wk, err, sizeof err), "%s", err);
  cr_assert_eq(wk.n, 0);
  blob_writer_free(&w);
}

Test(blob_reader, dtype_names_and_sizes) {
  cr_assert_str_eq(blob_dtype_name(BLOB_FP16), "fp16");
  cr_assert_str_eq(blob_dtype_name(BLOB_BF16), "bf16");
  cr_assert_str_eq(blob_dtype_name(BLOB_UINT32), "uint32");
  cr_assert_str_eq(blob_dtype_name(11), "uint4");
  cr_assert_null(blob_dtype_name(0));
  cr_assert_null(blob_dtype_name(18));
  cr_assert_null(blob_dtype_name(UINT32_MAX));
  cr_assert_eq(blob_dtype_size(BLOB_FP32), 4);
  cr_assert_eq(blob_dtype_size(BLOB_INT16), 2);
  cr_assert_eq(blob_dtype_size(BLOB_INT8), 1);
  cr_assert_eq(blob_dtype_size(8), 0); /* int4 */
  cr_assert_eq(blob_dtype_size(99), 0);
}

/* ---- rejections -------------------------------------------------------------- */

/* Opens `data` (which must succeed) and reads the record at `offset`,
 * expecting failure with exactly `want`. */
static void expect_read_error(const uint8_t *data, size_t len, uint64_t offset, const char *want) {
  BlobFile bf;
  BlobInfo info;
  char err[ERR_LEN] = "";
  cr_assert(blob_file_open(&bf, data, len, err, sizeof err), "%s", err);
  cr_assert_not(blob_file_read(&bf, offset, &info, err, sizeof err));
  cr_assert_str_eq(err, want);
}

Test(blob_reader, short_header) {
  uint8_t data[64] = {[4] = 2};
  BlobFile bf;
  char err[ERR_LEN];
  cr_assert_not(blob_file_open(&bf, data, 63, err, sizeof err));
  cr_assert_str_eq(err, "weight file has 63 bytes; the header alone needs 64");
  cr_assert_not(blob_file_open(&bf, data, 0, err, sizeof err));
  cr_assert_str_eq(err, "weight file has 0 bytes; the header alone needs 64");
  cr_assert(blob_file_open(&bf, data, 64, err, sizeof err));
}

Test(blob_reader, wrong_version) {
  uint8_t data[64] = {[4] = 1};
  BlobFile bf;
  char err[ERR_LEN];
  cr_assert_not(blob_file_open(&bf, data, 64, err, sizeof err));
  cr_assert_str_eq(err, "weight file has version 1; expected 2");
  put_le(data + 4, 0x02000000, 4); /* big-endian 2 */
  cr_assert_not(blob_file_open(&bf, data, 64, err, sizeof err));
  cr_assert_str_eq(err, "weight file has version 33554432; expected 2");
}

Test(blob_reader, bad_sentinel) {
  BlobWriter w;
  static uint8_t data[8192];
  worked_example(&w, data);
  w.data[64] = 0xEE;
  expect_read_error(w.data, w.len, 64, "bad sentinel 0xdeadbeee in the blob record at offset 64");
  /* A record read at a data position sees data, not a sentinel. */
  w.data[64] = 0xEF;
  expect_read_error(w.data, w.len, 128, "bad sentinel 0x03020100 in the blob record at offset 128");
  blob_writer_free(&w);
}

Test(blob_reader, record_offsets_outside_or_misaligned) {
  BlobWriter w;
  static uint8_t data[8192];
  worked_example(&w, data);
  expect_read_error(w.data, w.len, 8384, "blob record at offset 8384 is outside the file (8320 bytes)");
  expect_read_error(w.data, w.len, UINT64_MAX - 63,
                    "blob record at offset 18446744073709551552 is outside the file (8320 bytes)");
  /* The record itself partly past the end: a file cut 32 bytes into it. */
  expect_read_error(w.data, 96, 64, "blob record at offset 64 is outside the file (96 bytes)");
  expect_read_error(w.data, 127, 64, "blob record at offset 64 is outside the file (127 bytes)");
  expect_read_error(w.data, w.len, 100, "blob record offset 100 is not 64-byte aligned");
  expect_read_error(w.data, w.len, UINT64_MAX, "blob record offset 18446744073709551615 is not 64-byte aligned");
  expect_read_error(w.data, w.len, 0, "blob record offset 0 is inside the 64-byte header");
  blob_writer_free(&w);
}

Test(blob_reader, data_range_outside_the_file) {
  BlobWriter w;
  static uint8_t data[8192];
  worked_example(&w, data);
  /* The whole record is there, the last data byte is not. */
  expect_read_error(w.data, 8319, 64,
                    "blob at offset 64 has data (8192 bytes at offset 128) outside the file (8319 bytes)");
  uint8_t *c = copy_of(w.data, w.len);
  put_le(c + 64 + 16, UINT64_MAX, 8); /* data offset: offset + size must not wrap */
  expect_read_error(c, w.len, 64,
                    "blob at offset 64 has data (8192 bytes at offset 18446744073709551615) outside the file "
                    "(8320 bytes)");
  put_le(c + 64 + 16, 128, 8);
  put_le(c + 64 + 8, UINT64_MAX, 8); /* size */
  expect_read_error(c, w.len, 64,
                    "blob at offset 64 has data (18446744073709551615 bytes at offset 128) outside the file "
                    "(8320 bytes)");
  free(c);
  blob_writer_free(&w);
}

Test(blob_reader, empty_blob_and_unknown_dtype) {
  BlobWriter w;
  static uint8_t data[8192];
  worked_example(&w, data);
  uint8_t *c = copy_of(w.data, w.len);
  put_le(c + 64 + 8, 0, 8);
  expect_read_error(c, w.len, 64, "blob at offset 64 is empty (size 0)");
  put_le(c + 64 + 8, 8192, 8);
  put_le(c + 64 + 4, 0, 4);
  expect_read_error(c, w.len, 64, "blob at offset 64 has unknown dtype code 0");
  put_le(c + 64 + 4, 18, 4);
  expect_read_error(c, w.len, 64, "blob at offset 64 has unknown dtype code 18");
  put_le(c + 64 + 4, 0x01000000, 4);
  expect_read_error(c, w.len, 64, "blob at offset 64 has unknown dtype code 16777216");
  free(c);
  blob_writer_free(&w);
}

Test(blob_reader, expect_checks_dtype_then_size) {
  uint8_t bytes[100] = {0};
  BlobWriter w;
  blob_writer_init(&w);
  cr_assert_eq(blob_writer_add(&w, BLOB_FP16, bytes, sizeof bytes), 64);
  /* 64 + 64 + 100 = 228, rounded up */
  cr_assert_eq(blob_writer_add(&w, BLOB_FP32, bytes, sizeof bytes), 256);
  BlobFile bf;
  BlobInfo info;
  char err[ERR_LEN];
  cr_assert(blob_file_open(&bf, w.data, w.len, err, sizeof err));
  cr_assert_not(blob_file_read_expect(&bf, 64, BLOB_FP16, 128, &info, err, sizeof err));
  cr_assert_str_eq(err, "blob at offset 64 has 100 bytes but the tensor needs 128");
  cr_assert_not(blob_file_read_expect(&bf, 256, BLOB_FP16, 100, &info, err, sizeof err));
  cr_assert_str_eq(err, "blob at offset 256 holds fp32 but the tensor is fp16");
  cr_assert_not(blob_file_read_expect(&bf, 256, BLOB_FP16, 128, &info, err, sizeof err));
  cr_assert_str_eq(err, "blob at offset 256 holds fp32 but the tensor is fp16");
  cr_assert_not(blob_file_read_expect(&bf, 256, 99, 100, &info, err, sizeof err));
  cr_assert_str_eq(err, "blob at offset 256 holds fp32 but the tensor has dtype code 99");
  /* The record's own checks come first. */
  cr_assert_not(blob_file_read_expect(&bf, 160, BLOB_FP32, 100, &info, err, sizeof err));
  cr_assert_str_eq(err, "blob record offset 160 is not 64-byte aligned");
  cr_assert(blob_file_read_expect(&bf, 256, BLOB_FP32, 100, &info, err, sizeof err), "%s", err);
  blob_writer_free(&w);
}

/* A file with one record at 64 of the given dtype, size, data offset and
 * padding bits, `len` bytes long (data bytes are zero). */
static uint8_t *one_record(size_t len, uint32_t dtype, uint64_t size, uint64_t data_offset, uint64_t padding) {
  uint8_t *c = calloc(1, len);
  cr_assert_not_null(c);
  put_le(c, 1, 4);
  put_le(c + 4, 2, 4);
  put_le(c + 64, 0xDEADBEEF, 4);
  put_le(c + 68, dtype, 4);
  put_le(c + 72, size, 8);
  put_le(c + 80, data_offset, 8);
  put_le(c + 88, padding, 8);
  return c;
}

Test(blob_reader, sub_byte_padding) {
  /* uint4 (11): 3 bytes hold 5 elements and 4 padding bits. */
  uint8_t *c = one_record(131, 11, 3, 128, 4);
  BlobFile bf;
  BlobInfo info;
  char err[ERR_LEN];
  cr_assert(blob_file_open(&bf, c, 131, err, sizeof err));
  cr_assert(blob_file_read(&bf, 64, &info, err, sizeof err), "%s", err);
  put_le(c + 88, 8, 8);
  expect_read_error(c, 131, 64, "blob at offset 64 has 8 padding bits; at most 7 are allowed");
  put_le(c + 88, 2, 8);
  expect_read_error(c, 131, 64,
                    "blob at offset 64 holds 22 bits of data (3 bytes minus 2 padding bits), not a whole number of uint4 "
                    "elements");
  /* uint3 (12): 24 bits are eight elements; 23 are not a whole number. */
  put_le(c + 68, 12, 4);
  put_le(c + 88, 0, 8);
  cr_assert(blob_file_read(&bf, 64, &info, err, sizeof err), "%s", err);
  put_le(c + 88, 1, 8);
  expect_read_error(c, 131, 64,
                    "blob at offset 64 holds 23 bits of data (3 bytes minus 1 padding bits), not a whole number of uint3 "
                    "elements");
  put_le(c + 88, 3, 8);
  cr_assert(blob_file_read(&bf, 64, &info, err, sizeof err), "%s", err);
  /* Byte types ignore the field, as Apple's reader does. */
  put_le(c + 68, BLOB_UINT8, 4);
  put_le(c + 88, 99, 8);
  cr_assert(blob_file_read(&bf, 64, &info, err, sizeof err), "%s", err);
  free(c);
}

Test(blob_reader, unusual_data_offset_is_tolerated) {
  /* The data 64 bytes further on than Apple's writer puts it. */
  uint8_t *c = one_record(200, BLOB_UINT8, 8, 192, 0);
  BlobFile bf;
  BlobInfo info;
  char err[ERR_LEN];
  cr_assert(blob_file_open(&bf, c, 200, err, sizeof err));
  cr_assert(blob_file_read(&bf, 64, &info, err, sizeof err), "%s", err);
  cr_assert(info.offset_unusual);
  cr_assert_eq(info.data_offset, 192);
  /* The walk goes on from the end of the data, as GetAllOffsets does. */
  Walked wk = {0};
  cr_assert(blob_file_walk(&bf, collect, &wk, err, sizeof err), "%s", err);
  cr_assert_eq(wk.n, 1);
  cr_assert(wk.infos[0].offset_unusual);
  free(c);
}

Test(blob_reader, walk_checks_the_count) {
  const uint8_t a[20] = {1}, b[8] = {2};
  BlobWriter w;
  blob_writer_init(&w);
  blob_writer_add(&w, BLOB_UINT8, a, sizeof a);
  blob_writer_add(&w, BLOB_UINT8, b, sizeof b);
  uint8_t *c = copy_of(w.data, w.len);
  BlobFile bf;
  char err[ERR_LEN];
  put_le(c, 3, 4);
  cr_assert(blob_file_open(&bf, c, w.len, err, sizeof err));
  cr_assert_not(blob_file_walk(&bf, NULL, NULL, err, sizeof err));
  cr_assert_str_eq(err, "weight file header has a count of 3 but the file holds 2 blobs");
  /* The multi-blob files some ANE projects build keep the count at 1. */
  put_le(c, 1, 4);
  cr_assert(blob_file_open(&bf, c, w.len, err, sizeof err));
  cr_assert_not(blob_file_walk(&bf, NULL, NULL, err, sizeof err));
  cr_assert_str_eq(err, "weight file header has a count of 1 but the file holds 2 blobs");
  free(c);
  blob_writer_free(&w);
}

Test(blob_reader, walk_stops_at_the_first_bad_record) {
  BlobWriter w;
  static uint8_t data[8192];
  worked_example(&w, data);
  /* Trailing bytes after the last blob: the walk looks for a record there. */
  uint8_t *c = calloc(1, w.len + 10);
  cr_assert_not_null(c);
  memcpy(c, w.data, w.len);
  BlobFile bf;
  char err[ERR_LEN];
  cr_assert(blob_file_open(&bf, c, w.len + 10, err, sizeof err));
  Walked wk = {0};
  cr_assert_not(blob_file_walk(&bf, collect, &wk, err, sizeof err));
  cr_assert_str_eq(err, "blob record at offset 8320 is outside the file (8330 bytes)");
  cr_assert_eq(wk.n, 1, "the good record was seen first");
  /* A bad record first: nothing is reported to the callback. */
  c[64] = 0;
  wk.n = 0;
  cr_assert_not(blob_file_walk(&bf, collect, &wk, err, sizeof err));
  cr_assert_str_eq(err, "bad sentinel 0xdeadbe00 in the blob record at offset 64");
  cr_assert_eq(wk.n, 0);
  free(c);
  blob_writer_free(&w);
}

Test(blob_reader, walk_cannot_go_backwards) {
  /* Data placed over the header: the next record would be at 64 again. */
  uint8_t *c = one_record(128, BLOB_UINT8, 10, 0, 0);
  BlobFile bf;
  char err[ERR_LEN];
  cr_assert(blob_file_open(&bf, c, 128, err, sizeof err));
  cr_assert_not(blob_file_walk(&bf, NULL, NULL, err, sizeof err));
  cr_assert_str_eq(err, "blob at offset 64 has its data before it (10 bytes at offset 0), so the next record "
                        "cannot be found");
  free(c);
}

Test(blob_reader, walk_stopped_by_the_callback) {
  const uint8_t a[20] = {1}, b[8] = {2};
  BlobWriter w;
  blob_writer_init(&w);
  blob_writer_add(&w, BLOB_UINT8, a, sizeof a);
  blob_writer_add(&w, BLOB_UINT8, b, sizeof b);
  BlobFile bf;
  char err[ERR_LEN];
  cr_assert(blob_file_open(&bf, w.data, w.len, err, sizeof err));
  Walked wk = {.stop_at = 1};
  cr_assert_not(blob_file_walk(&bf, collect, &wk, err, sizeof err));
  cr_assert_str_eq(err, "blob walk stopped by the callback at offset 192");
  cr_assert_eq(wk.n, 1);
  blob_writer_free(&w);
}

Test(blob_reader, messages_are_cut_to_the_buffer) {
  uint8_t data[64] = {[4] = 7};
  BlobFile bf;
  char err[8];
  cr_assert_not(blob_file_open(&bf, data, 64, err, sizeof err));
  cr_assert_str_eq(err, "weight ");
  cr_assert_not(blob_file_open(&bf, data, 64, NULL, 0));
}
