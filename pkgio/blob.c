/*
 * MIL blob storage, version 2 (`weight.bin`): the reader (the writer is
 * the compiler's, backend/blob_write.c).
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
#include "orion/hash.h"

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

static uint32_t get_u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_u64(const uint8_t *p) { return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32; }

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
  uint64_t padding = get_u64(rec + BLOB_META_PADDING_BITS);
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
  uint32_t sentinel = get_u32(rec + BLOB_META_SENTINEL);
  if (sentinel != BLOB_SENTINEL)
    return fail(err, errlen, "bad sentinel 0x%08" PRIx32 " in the blob record at offset %" PRIu64, sentinel, offset);
  uint32_t dtype = get_u32(rec + BLOB_META_DTYPE);
  OrionDType t = orion_dtype_from_blob_code(dtype);
  if (t == ORION_DT_NONE)
    return fail(err, errlen, "blob at offset %" PRIu64 " has unknown dtype code %" PRIu32, offset, dtype);
  uint64_t size = get_u64(rec + BLOB_META_SIZE);
  uint64_t data_offset = get_u64(rec + BLOB_META_OFFSET);
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
  XXH64_state_t *h;
  uint64_t data_end; /* where the previous blob's data ended */
  uint64_t *records;
  uint32_t n, cap;
  bool canonical;
} LayoutWalk;

/* The bytes between the previous blob's data and this record (padding), then the record. */
static bool layout_record(void *ctx, uint64_t offset, const BlobInfo *info) {
  LayoutWalk *w = ctx;
  if (info->offset_unusual) w->canonical = false;
  XXH64_update(w->h, w->f->data + w->data_end, (size_t)(offset - w->data_end));
  XXH64_update(w->h, w->f->data + offset, BLOB_METADATA_SIZE);
  w->data_end = info->data_offset + info->size;
  xgrow((void **)&w->records, sizeof *w->records, &w->cap, w->n + 1);
  w->records[w->n++] = offset;
  return true;
}

bool blob_file_layout(const BlobFile *f, uint64_t *layout_hash, uint64_t **records, uint32_t *nrecords, char *err,
                      size_t errlen) {
  LayoutWalk w = {.f = f, .data_end = BLOB_HEADER_SIZE, .canonical = true};
  w.h = xxh64_state_new();
  XXH64_update(w.h, f->data, BLOB_HEADER_SIZE);
  bool ok = blob_file_walk(f, layout_record, &w, err, errlen);
  if (ok && !w.canonical) ok = fail(err, errlen, "a blob does not have its data right after its record");
  else if (ok && w.data_end != f->len)
    ok = fail(err, errlen, "weight file has %zu bytes after its last blob", (size_t)(f->len - w.data_end));
  if (ok) *layout_hash = XXH64_digest(w.h);
  XXH64_freeState(w.h);
  if (ok && records) *records = w.records;
  else free(w.records);
  if (nrecords) *nrecords = ok ? w.n : 0;
  return ok;
}
