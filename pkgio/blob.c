/*
 * MIL blob storage, version 2 (`weight.bin`): the writer and the reader.
 *
 * The writer reproduces Apple's StorageWriter byte for byte (MIL spec §2.3):
 * the header's count is rewritten after every blob, each 64-byte metadata
 * record starts at the current length rounded up to 64, its data follows
 * immediately, gaps are zeros and nothing is padded after the last blob, so
 * the file size is the last record's offset + 64 + its size. Identical blobs
 * (same dtype and bytes) are stored once; a hash table of XXH64 hashes finds
 * candidates and a byte comparison confirms them, so a hash collision can
 * never merge two different tensors.
 *
 * The reader takes a weight file as untrusted bytes (a package may come from
 * anywhere) and makes Apple's reader's checks (§2.5) plus our own: records
 * 64-byte aligned and past the header, a known dtype, the data range inside
 * the file, sub-byte padding that fits the element width, and (on request)
 * the dtype and byte count the MIL tensor type expects. A data offset other
 * than record + 64 is only reported back: Apple's reader tolerates it. All
 * arithmetic on numbers from the file is arranged so that it cannot wrap.
 * Integers are little-endian whatever the host.
 */
#include "orion/blob.h"
#include "orion/dtype.h"
#include "orion/xxh64.h"

#include "orion/support.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- dtypes ------------------------------------------------------------ */

/* Codes (§2.2) are looked up in the dtype table; 0 and codes past the known
 * ones are unknown. */
const char *blob_dtype_name(uint32_t code) {
  OrionDType t = orion_dtype_from_blob_code(code);
  return t == ORION_DT_NONE ? NULL : orion_dtype_name(t);
}

size_t blob_dtype_size(uint32_t code) { return orion_dtype_size(orion_dtype_from_blob_code(code)); }

/* ---- byte helpers ------------------------------------------------------ */

static uint64_t align64(uint64_t x) { return (x + 63) & ~(uint64_t)63; }

static void put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_u64(const uint8_t *p) { return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32; }

/* Offsets of the fields of a metadata record. */
enum { META_SENTINEL = 0, META_DTYPE = 4, META_SIZE = 8, META_OFFSET = 16, META_PADDING_BITS = 24 };

/* ---- writer ------------------------------------------------------------ */

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
  for (size_t i = 0; i < w->nrecords; i++) free(w->records[i].copy);
  free(w->table);
  free(w->records);
  memset(w, 0, sizeof *w);
}

/* XXH64 of the data, fast enough to hash every weight as it is added; the
 * same checksum a manifest records, so it is computed only here. */
static uint64_t blob_hash(const void *bytes, size_t nbytes) { return xxh64(bytes, nbytes, 0); }

/* Whether the record holds exactly these bytes. */
static bool same_blob(const BlobWriter *w, const BlobRecord *r, uint32_t dtype, const void *bytes, size_t nbytes) {
  if (r->dtype != dtype || r->size != nbytes) return false;
  uint64_t data = r->offset + BLOB_METADATA_SIZE;
  if (r->copy) return memcmp(r->copy, bytes, nbytes) == 0;
  return w->same_data ? w->same_data(w->same_ctx, data, bytes, nbytes) : memcmp(w->data + data, bytes, nbytes) == 0;
}

/* Slot of the blob equal to (dtype, bytes), or else of the empty slot where it belongs. */
static size_t table_slot(const BlobWriter *w, uint64_t h, uint32_t dtype, const void *bytes, size_t nbytes) {
  size_t mask = w->table_cap - 1, i = (size_t)h & mask;
  while (w->table[i]) {
    const BlobRecord *r = &w->records[w->table[i] - 1];
    if (r->xxh64 == h && same_blob(w, r, dtype, bytes, nbytes)) break;
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
    size_t j = (size_t)w->records[old[i] - 1].xxh64 & (cap - 1);
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
  uint8_t *p = realloc(w->data, total);
  if (!p) return false;
  w->data = p;
  w->cap = total;
  return true;
}

uint64_t blob_writer_add(BlobWriter *w, BlobDType dtype, const void *bytes, size_t nbytes) {
  return blob_writer_add_hashed(w, dtype, bytes, nbytes, blob_hash(bytes, nbytes));
}

uint64_t blob_writer_add_hashed(BlobWriter *w, BlobDType dtype, const void *bytes, size_t nbytes, uint64_t h) {
  /* Both are bugs in the caller: Apple's reader rejects empty blobs, and the
   * dtype comes from our own type mapping. */
  if (nbytes == 0) ice("empty blob added to a weight file");
  if (!blob_dtype_name((uint32_t)dtype)) ice("unknown blob dtype code %u", (unsigned)dtype);

  size_t slot = 0;
  if (!w->keep_duplicates) {
    table_reserve(w);
    slot = table_slot(w, h, (uint32_t)dtype, bytes, nbytes);
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
  put_u32(rec + META_SENTINEL, BLOB_SENTINEL);
  put_u32(rec + META_DTYPE, (uint32_t)dtype);
  put_u64(rec + META_SIZE, nbytes);
  put_u64(rec + META_OFFSET, meta + BLOB_METADATA_SIZE);
  if (bytes != rec + BLOB_METADATA_SIZE) memcpy(rec + BLOB_METADATA_SIZE, bytes, nbytes);
  w->len = end;
  put_u32(w->data, ++w->count);

  if (w->nrecords == w->records_cap) {
    w->records_cap = w->records_cap ? 2 * w->records_cap : 64;
    w->records = xrealloc(w->records, w->records_cap * sizeof *w->records);
  }
  w->records[w->nrecords++] = (BlobRecord){.offset = meta, .size = nbytes, .xxh64 = h, .dtype = (uint32_t)dtype};
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

bool blob_writer_data_xxh64(const BlobWriter *w, uint64_t offset, uint64_t *hash) {
  size_t lo = 0, hi = w->nrecords; /* records are in increasing offset order */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (w->records[mid].offset < offset) lo = mid + 1;
    else hi = mid;
  }
  if (lo == w->nrecords || w->records[lo].offset != offset) return false;
  *hash = w->records[lo].xxh64;
  return true;
}

uint64_t blob_writer_layout_xxh64(const BlobWriter *w) {
  static const uint8_t zeros[64];
  uint8_t header[BLOB_HEADER_SIZE] = {0}, rec[BLOB_METADATA_SIZE] = {0};
  put_u32(header, w->count);
  put_u32(header + 4, BLOB_VERSION);
  Xxh64State h;
  xxh64_init(&h, 0);
  xxh64_update(&h, header, sizeof header);
  uint64_t data_end = BLOB_HEADER_SIZE;
  for (size_t i = 0; i < w->nrecords; i++) {
    const BlobRecord *r = &w->records[i];
    xxh64_update(&h, zeros, (size_t)(r->offset - data_end)); /* under 64 bytes of alignment gap */
    put_u32(rec + META_SENTINEL, BLOB_SENTINEL);
    put_u32(rec + META_DTYPE, r->dtype);
    put_u64(rec + META_SIZE, r->size);
    put_u64(rec + META_OFFSET, r->offset + BLOB_METADATA_SIZE);
    xxh64_update(&h, rec, sizeof rec);
    data_end = r->offset + BLOB_METADATA_SIZE + r->size;
  }
  return xxh64_digest(&h);
}

uint8_t *blob_writer_stage(BlobWriter *w, size_t nbytes) {
  uint64_t data = align64(w->len) + BLOB_METADATA_SIZE;
  if (nbytes > SIZE_MAX - data) ice("weight file too large (%u blobs, %zu bytes)", w->count, w->len);
  reserve_bytes(w, (size_t)data + nbytes);
  return w->data + data;
}

/* ---- reader ------------------------------------------------------------ */

static bool fail(char *err, size_t errlen, const char *fmt, ...) ORION_PRINTF(3, 4);

/* Writes a message and returns false, so that "return fail(...)" reads well. */
static bool fail(char *err, size_t errlen, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return false;
}

bool blob_file_open(BlobFile *f, const uint8_t *data, size_t len, char *err, size_t errlen) {
  memset(f, 0, sizeof *f);
  if (len < BLOB_HEADER_SIZE)
    return fail(err, errlen, "weight file has %zu bytes; the header alone needs %u", len, BLOB_HEADER_SIZE);
  uint32_t version = get_u32(data + 4);
  if (version != BLOB_VERSION)
    return fail(err, errlen, "weight file has version %" PRIu32 "; expected %u", version, BLOB_VERSION);
  f->data = data;
  f->len = len;
  f->count = get_u32(data);
  return true;
}

/* Sub-byte data must end on an element boundary with under a byte of
 * padding, as Apple's reader requires (§2.5). */
static bool check_sub_byte(const uint8_t *rec, uint64_t offset, OrionDType t, uint64_t size, char *err,
                           size_t errlen) {
  uint64_t padding = get_u64(rec + META_PADDING_BITS);
  if (padding >= 8)
    return fail(err, errlen, "blob at offset %" PRIu64 " has %" PRIu64 " padding bits; at most 7 are allowed",
                offset, padding);
  /* size fits in the file, so size * 8 cannot wrap. */
  uint64_t bits = size * 8 - padding;
  if (bits % orion_dtype_bits(t) != 0)
    return fail(err, errlen,
                "blob at offset %" PRIu64 " holds %" PRIu64 " bits of data (%" PRIu64 " bytes minus %" PRIu64
                " padding bits), not a whole number of %s elements",
                offset, bits, size, padding, orion_dtype_name(t));
  return true;
}

bool blob_file_read(const BlobFile *f, uint64_t offset, BlobInfo *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  if (offset % 64 != 0) return fail(err, errlen, "blob record offset %" PRIu64 " is not 64-byte aligned", offset);
  if (offset < BLOB_HEADER_SIZE)
    return fail(err, errlen, "blob record offset %" PRIu64 " is inside the %u-byte header", offset, BLOB_HEADER_SIZE);
  uint64_t len = f->len;
  if (offset >= len || len - offset < BLOB_METADATA_SIZE)
    return fail(err, errlen, "blob record at offset %" PRIu64 " is outside the file (%zu bytes)", offset, f->len);

  const uint8_t *rec = f->data + offset;
  uint32_t sentinel = get_u32(rec + META_SENTINEL);
  if (sentinel != BLOB_SENTINEL)
    return fail(err, errlen, "bad sentinel 0x%08" PRIx32 " in the blob record at offset %" PRIu64, sentinel, offset);
  uint32_t dtype = get_u32(rec + META_DTYPE);
  OrionDType t = orion_dtype_from_blob_code(dtype);
  if (t == ORION_DT_NONE)
    return fail(err, errlen, "blob at offset %" PRIu64 " has unknown dtype code %" PRIu32, offset, dtype);
  uint64_t size = get_u64(rec + META_SIZE);
  uint64_t data_offset = get_u64(rec + META_OFFSET);
  if (size == 0) return fail(err, errlen, "blob at offset %" PRIu64 " is empty (size 0)", offset);
  if (data_offset > len || size > len - data_offset)
    return fail(err, errlen,
                "blob at offset %" PRIu64 " has data (%" PRIu64 " bytes at offset %" PRIu64
                ") outside the file (%zu bytes)",
                offset, size, data_offset, f->len);
  if (orion_dtype_size(t) == 0 && !check_sub_byte(rec, offset, t, size, err, errlen)) return false;

  out->dtype = dtype;
  out->size = size;
  out->data_offset = data_offset;
  out->offset_unusual = data_offset != offset + BLOB_METADATA_SIZE;
  return true;
}

bool blob_file_read_expect(const BlobFile *f, uint64_t offset, uint32_t dtype, uint64_t nbytes, BlobInfo *out,
                           char *err, size_t errlen) {
  if (!blob_file_read(f, offset, out, err, errlen)) return false;
  if (out->dtype != dtype) {
    const char *want = blob_dtype_name(dtype);
    if (want)
      return fail(err, errlen, "blob at offset %" PRIu64 " holds %s but the tensor is %s", offset,
                  blob_dtype_name(out->dtype), want);
    return fail(err, errlen, "blob at offset %" PRIu64 " holds %s but the tensor has dtype code %" PRIu32, offset,
                blob_dtype_name(out->dtype), dtype);
  }
  if (out->size != nbytes)
    return fail(err, errlen, "blob at offset %" PRIu64 " has %" PRIu64 " bytes but the tensor needs %" PRIu64, offset,
                out->size, nbytes);
  return true;
}

/* Walks like Apple's GetAllOffsets: the next record is at the end of this
 * one's data, rounded up to 64. A callback returning false stops the walk,
 * which then fails with a message saying so; fn may be NULL to only check. */
bool blob_file_walk(const BlobFile *f, bool (*fn)(void *ctx, uint64_t offset, const BlobInfo *info), void *ctx,
                    char *err, size_t errlen) {
  uint64_t offset = BLOB_HEADER_SIZE, seen = 0;
  while (offset < f->len) {
    BlobInfo info;
    if (!blob_file_read(f, offset, &info, err, errlen)) return false;
    seen++;
    if (fn && !fn(ctx, offset, &info))
      return fail(err, errlen, "blob walk stopped by the callback at offset %" PRIu64, offset);
    /* Both terms are inside the file, so neither the sum nor the rounding wraps. */
    uint64_t next = align64(info.data_offset + info.size);
    if (next <= offset)
      return fail(err, errlen,
                  "blob at offset %" PRIu64 " has its data before it (%" PRIu64 " bytes at offset %" PRIu64
                  "), so the next record cannot be found",
                  offset, info.size, info.data_offset);
    offset = next;
  }
  if (seen != f->count)
    return fail(err, errlen, "weight file header has a count of %" PRIu32 " but the file holds %" PRIu64 " blobs",
                f->count, seen);
  return true;
}

typedef struct LayoutWalk {
  const BlobFile *f;
  Xxh64State h;
  uint64_t data_end; /* where the previous blob's data ended */
  uint64_t *records;
  uint32_t n, cap;
  bool canonical;
} LayoutWalk;

/* The bytes between the previous blob's data and this record (padding), then the record. */
static bool layout_record(void *ctx, uint64_t offset, const BlobInfo *info) {
  LayoutWalk *w = ctx;
  if (info->offset_unusual) w->canonical = false;
  xxh64_update(&w->h, w->f->data + w->data_end, (size_t)(offset - w->data_end));
  xxh64_update(&w->h, w->f->data + offset, BLOB_METADATA_SIZE);
  w->data_end = info->data_offset + info->size;
  xgrow((void **)&w->records, sizeof *w->records, &w->cap, w->n + 1);
  w->records[w->n++] = offset;
  return true;
}

bool blob_file_layout(const BlobFile *f, uint64_t *layout_hash, uint64_t **records, uint32_t *nrecords, char *err,
                      size_t errlen) {
  LayoutWalk w = {.f = f, .data_end = BLOB_HEADER_SIZE, .canonical = true};
  xxh64_init(&w.h, 0);
  xxh64_update(&w.h, f->data, BLOB_HEADER_SIZE);
  bool ok = blob_file_walk(f, layout_record, &w, err, errlen);
  if (ok && !w.canonical) ok = fail(err, errlen, "a blob does not have its data right after its record");
  else if (ok && w.data_end != f->len)
    ok = fail(err, errlen, "weight file has %zu bytes after its last blob", (size_t)(f->len - w.data_end));
  if (ok) *layout_hash = xxh64_digest(&w.h);
  if (ok && records) *records = w.records;
  else free(w.records);
  if (nrecords) *nrecords = ok ? w.n : 0;
  return ok;
}
