/*
 * MIL blob storage, version 2 (`weight.bin`): the writer (orion/blob_writer.h;
 * the reader is the package I/O library's, pkgio/blob.c).
 *
 * The writer reproduces Apple's StorageWriter byte for byte (MIL spec §2.3):
 * the header's count is rewritten after every blob, each 64-byte metadata
 * record starts at the current length rounded up to 64, its data follows
 * immediately, gaps are zeros and nothing is padded after the last blob, so
 * the file size is the last record's offset + 64 + its size. Identical blobs
 * (same dtype, bytes and identity) are stored once; a hash table of XXH64
 * hashes finds candidates and a comparison of identity and bytes confirms
 * them, so a hash collision can never merge two different tensors. Integers
 * are little-endian whatever the host.
 */
#include "orion/blob_writer.h"
#include "orion/hash.h"
#include "orion/manifest.h"

#include "orion/support.h"

#include <stdlib.h>
#include <string.h>

static uint64_t align64(uint64_t x) { return (x + 63) & ~(uint64_t)63; }

static void put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

void blob_writer_init(BlobWriter *w) {
  memset(w, 0, sizeof *w);
  w->cap = 4096;
  w->data = xcalloc(1, w->cap);
  w->len = BLOB_HEADER_SIZE; /* count 0, version 2, reserved zeros */
  put_u32(w->data + 4, BLOB_VERSION);
}

void blob_writer_init_fixed(BlobWriter *w, uint8_t *data, size_t cap) {
  if (cap < BLOB_HEADER_SIZE) ice("weight file buffer of %zu bytes", cap);
  memset(w, 0, sizeof *w);
  w->data = data;
  w->cap = cap;
  w->fixed = true;
  memset(data, 0, BLOB_HEADER_SIZE);
  w->len = BLOB_HEADER_SIZE;
  put_u32(w->data + 4, BLOB_VERSION);
}

/* Blobs a writer with same_data keeps a copy of, and the most bytes it keeps. */
#define COPY_MAX_BLOB ((size_t)64 << 10)
#define COPY_MAX_TOTAL ((size_t)64 << 20)

void blob_writer_free(BlobWriter *w) {
  if (!w->fixed) free(w->data);
  for (size_t i = 0; i < w->nrecords; i++) {
    free(w->records[i].copy);
    free(w->records[i].identity);
  }
  free(w->table);
  free(w->records);
  memset(w, 0, sizeof *w);
}

/* The checksum the manifest records for the data (XXH3-64 in format 2),
 * fast enough to hash every weight as it is added, so it is computed only here. */
static uint64_t blob_hash(const void *bytes, size_t nbytes) {
  return package_weight_checksum(PACKAGE_FORMAT_VERSION, bytes, nbytes);
}

/* Where a blob's candidates start in the table: its data and identity hashed together. */
static uint64_t slot_hash(uint64_t data_hash, uint64_t identity_hash) { return data_hash ^ identity_hash; }

static bool same_identity(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }

/* Whether the record is the same weight and holds exactly these bytes. */
static bool same_blob(const BlobWriter *w, const BlobRecord *r, const char *identity, uint32_t dtype,
                      const void *bytes, size_t nbytes) {
  if (r->dtype != dtype || r->size != nbytes || !same_identity(r->identity, identity)) return false;
  uint64_t data = r->offset + BLOB_METADATA_SIZE;
  if (r->copy) return memcmp(r->copy, bytes, nbytes) == 0;
  return w->same_data ? w->same_data(w->same_ctx, data, bytes, nbytes) : memcmp(w->data + data, bytes, nbytes) == 0;
}

/* Slot of the blob equal to (identity, dtype, bytes), or else of the empty slot where it belongs. */
static size_t table_slot(const BlobWriter *w, uint64_t h, const char *identity, uint64_t ih, uint32_t dtype,
                         const void *bytes, size_t nbytes) {
  size_t mask = w->table_cap - 1, i = (size_t)slot_hash(h, ih) & mask;
  while (w->table[i]) {
    const BlobRecord *r = &w->records[w->table[i] - 1];
    if (r->data_hash == h && r->identity_hash == ih && same_blob(w, r, identity, dtype, bytes, nbytes)) break;
    i = (i + 1) & mask;
  }
  return i;
}

/* Keeps the table at most half full so that probe runs stay short. */
static void table_reserve(BlobWriter *w) {
  if ((w->table_used + 1) * 2 <= w->table_cap) return;
  size_t old_cap = w->table_cap, cap = old_cap ? old_cap * 2 : 64;
  size_t *old = w->table;
  w->table = xcalloc(cap, sizeof *w->table);
  w->table_cap = cap;
  for (size_t i = 0; i < old_cap; i++) {
    if (!old[i]) continue;
    const BlobRecord *r = &w->records[old[i] - 1];
    size_t j = (size_t)slot_hash(r->data_hash, r->identity_hash) & (cap - 1);
    while (w->table[j]) j = (j + 1) & (cap - 1);
    w->table[j] = old[i];
  }
  free(old);
}

static void reserve_bytes(BlobWriter *w, size_t need) {
  if (need <= w->cap) return;
  if (w->fixed) ice("weight file needs %zu bytes, more than the %zu reserved", need, w->cap);
  size_t cap = w->cap;
  while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
  w->data = xrealloc(w->data, cap);
  w->cap = cap;
}

void blob_writer_reserve(BlobWriter *w, size_t total) { reserve_bytes(w, total); }

bool blob_writer_try_reserve(BlobWriter *w, size_t total) {
  if (total <= w->cap) return true;
  if (w->fixed) return false;
  uint8_t *p = try_realloc(w->data, total);
  if (!p) return false;
  w->data = p;
  w->cap = total;
  return true;
}

uint64_t blob_writer_add(BlobWriter *w, BlobDType dtype, const void *bytes, size_t nbytes) {
  return blob_writer_add_hashed(w, dtype, bytes, nbytes, blob_hash(bytes, nbytes));
}

uint64_t blob_writer_add_hashed(BlobWriter *w, BlobDType dtype, const void *bytes, size_t nbytes, uint64_t h) {
  return blob_writer_add_as(w, NULL, dtype, bytes, nbytes, h);
}

uint64_t blob_writer_add_as(BlobWriter *w, const char *identity, BlobDType dtype, const void *bytes, size_t nbytes,
                            uint64_t h) {
  /* Both are bugs in the caller: Apple's reader rejects empty blobs, and the
   * dtype comes from our own type mapping. */
  if (nbytes == 0) ice("empty blob added to a weight file");
  if (!blob_dtype_name((uint32_t)dtype)) ice("unknown blob dtype code %u", (unsigned)dtype);

  size_t slot = 0;
  uint64_t ih = identity ? XXH3_64bits(identity, strlen(identity)) : 0;
  if (!w->keep_duplicates) {
    table_reserve(w);
    slot = table_slot(w, h, identity, ih, (uint32_t)dtype, bytes, nbytes);
    if (w->table[slot]) return w->records[w->table[slot] - 1].offset;
  }

  uint64_t meta = align64(w->len);
  if (w->count == UINT32_MAX || nbytes > SIZE_MAX - BLOB_METADATA_SIZE - meta)
    ice("weight file too large (%u blobs, %zu bytes)", w->count, w->len);
  size_t end = (size_t)meta + BLOB_METADATA_SIZE + nbytes;
  reserve_bytes(w, end);
  if (w->claim) w->claim(w->claim_ctx, end);
  /* Zeros for the alignment gap and the record's reserved fields. */
  memset(w->data + w->len, 0, (size_t)meta + BLOB_METADATA_SIZE - w->len);
  uint8_t *rec = w->data + meta;
  put_u32(rec + BLOB_META_SENTINEL, BLOB_SENTINEL);
  put_u32(rec + BLOB_META_DTYPE, (uint32_t)dtype);
  put_u64(rec + BLOB_META_SIZE, nbytes);
  put_u64(rec + BLOB_META_OFFSET, meta + BLOB_METADATA_SIZE);
  if (bytes != rec + BLOB_METADATA_SIZE) memcpy(rec + BLOB_METADATA_SIZE, bytes, nbytes);
  w->len = end;
  put_u32(w->data, ++w->count);

  if (w->nrecords == w->records_cap) {
    w->records_cap = w->records_cap ? 2 * w->records_cap : 64;
    w->records = xrealloc(w->records, w->records_cap * sizeof *w->records);
  }
  w->records[w->nrecords++] = (BlobRecord){.offset = meta, .size = nbytes, .data_hash = h, .dtype = (uint32_t)dtype,
                                           .identity = identity && !w->keep_duplicates ? xstrdup(identity) : NULL,
                                           .identity_hash = w->keep_duplicates ? 0 : ih};
  if (w->same_data && !w->keep_duplicates && nbytes <= COPY_MAX_BLOB && w->copied + nbytes <= COPY_MAX_TOTAL) {
    w->records[w->nrecords - 1].copy = xmalloc(nbytes);
    memcpy(w->records[w->nrecords - 1].copy, rec + BLOB_METADATA_SIZE, nbytes);
    w->copied += nbytes;
  }
  if (!w->keep_duplicates) {
    w->table[slot] = w->nrecords;
    w->table_used++;
  }
  return meta;
}

bool blob_writer_data_hash(const BlobWriter *w, uint64_t offset, uint64_t *hash) {
  size_t lo = 0, hi = w->nrecords; /* records are in increasing offset order */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (w->records[mid].offset < offset) lo = mid + 1;
    else hi = mid;
  }
  if (lo == w->nrecords || w->records[lo].offset != offset) return false;
  *hash = w->records[lo].data_hash;
  return true;
}

uint64_t blob_writer_layout_xxh64(const BlobWriter *w) {
  static const uint8_t zeros[64];
  uint8_t header[BLOB_HEADER_SIZE] = {0}, rec[BLOB_METADATA_SIZE] = {0};
  put_u32(header, w->count);
  put_u32(header + 4, BLOB_VERSION);
  XXH64_state_t *h = xxh64_state_new();
  XXH64_update(h, header, sizeof header);
  uint64_t data_end = BLOB_HEADER_SIZE;
  for (size_t i = 0; i < w->nrecords; i++) {
    const BlobRecord *r = &w->records[i];
    XXH64_update(h, zeros, (size_t)(r->offset - data_end)); /* under 64 bytes of alignment gap */
    put_u32(rec + BLOB_META_SENTINEL, BLOB_SENTINEL);
    put_u32(rec + BLOB_META_DTYPE, r->dtype);
    put_u64(rec + BLOB_META_SIZE, r->size);
    put_u64(rec + BLOB_META_OFFSET, r->offset + BLOB_METADATA_SIZE);
    XXH64_update(h, rec, sizeof rec);
    data_end = r->offset + BLOB_METADATA_SIZE + r->size;
  }
  uint64_t layout = XXH64_digest(h);
  XXH64_freeState(h);
  return layout;
}

uint8_t *blob_writer_stage(BlobWriter *w, size_t nbytes) {
  uint64_t data = align64(w->len) + BLOB_METADATA_SIZE;
  if (nbytes > SIZE_MAX - data) ice("weight file too large (%u blobs, %zu bytes)", w->count, w->len);
  reserve_bytes(w, (size_t)data + nbytes);
  return w->data + data;
}
