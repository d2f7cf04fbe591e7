/*
 * MIL blob storage, version 2 (`weight.bin`), byte-exact with Apple's writer:
 * a 64-byte header {u32 count, u32 version = 2, zeros}, then per blob a
 * 64-byte metadata record {u32 0xDEADBEEF, u32 dtype, u64 size, u64 data
 * offset (= record + 64), u64 padding bits = 0, zeros} followed by the data;
 * records start 64-aligned; no padding after the last blob. The offset a MIL
 * BLOBFILE names is the offset of the metadata record. See the MIL spec §2.
 */
#ifndef ORION_BLOB_H
#define ORION_BLOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The BlobDataType codes weight.bin stores for each dtype (never renumbered):
 * the file's numbering of OrionDTypes, which orion_dtype_blob_code and
 * orion_dtype_from_blob_code (orion/dtype.h) map to and from. */
typedef enum BlobDType {
  BLOB_FP16 = 1, BLOB_FP32 = 2, BLOB_UINT8 = 3, BLOB_INT8 = 4, BLOB_BF16 = 5, BLOB_INT16 = 6,
  BLOB_UINT16 = 7, BLOB_INT4 = 8, BLOB_UINT1 = 9, BLOB_UINT2 = 10, BLOB_UINT4 = 11, BLOB_UINT3 = 12,
  BLOB_UINT6 = 13, BLOB_INT32 = 14, BLOB_UINT32 = 15, BLOB_FP8E4M3FN = 16, BLOB_FP8E5M2 = 17
} BlobDType;

/* The dtype's name for a code ("fp16", ...), or NULL if the code is unknown. */
const char *blob_dtype_name(uint32_t code);
size_t blob_dtype_size(uint32_t code);      /* 0 if unknown or sub-byte */

#define BLOB_HEADER_SIZE 64u
#define BLOB_METADATA_SIZE 64u
#define BLOB_SENTINEL 0xDEADBEEFu
#define BLOB_VERSION 2u

/* One blob as the writer laid it out: what a manifest and a layout hash need,
 * kept so that neither has to read the file's bytes back. */
typedef struct BlobRecord {
  uint64_t offset; /* of the metadata record */
  uint64_t size;   /* data bytes */
  uint64_t xxh64;  /* of the data, seed 0 */
  uint32_t dtype;
  uint8_t *copy; /* the data, for small blobs of a writer with same_data (NULL otherwise) */
} BlobRecord;

/* Builds a weight file in memory. Identical blobs (same dtype and bytes) are
 * stored once: adding one again returns the first one's offset. */
typedef struct BlobWriter {
  uint8_t *data;
  size_t len, cap;
  bool fixed; /* data is the caller's (e.g. a mapped file): never grown or freed */
  uint32_t count;
  /* Store every blob, even one equal to an earlier blob (so that each can be
   * patched on its own later); false by default: identical blobs stored once. */
  bool keep_duplicates;
  /* How to confirm that the data at `data_offset` equals `bytes`, for a
   * writer whose earlier bytes may no longer be in memory (a file written as
   * it is built); NULL compares the bytes in memory. Such a writer keeps a
   * copy of each small blob (the biases and norms a model repeats), so that
   * confirming their duplicates does not have to read the file back. */
  bool (*same_data)(void *ctx, uint64_t data_offset, const void *bytes, size_t nbytes);
  void *same_ctx;
  size_t copied; /* bytes of those copies */
  /* Told, before the writer writes bytes below `end`, that it will (a file
   * whose memory is reused behind the writer needs to know); may be NULL.
   * The data of a staged blob is the stager's to claim as it writes it. */
  void (*claim)(void *ctx, uint64_t end);
  void *claim_ctx;
  /* dedup index: hash -> record index + 1 (open addressing; 0 is empty) */
  size_t *table;
  size_t table_cap, table_used;
  /* Every blob, in file order. */
  BlobRecord *records;
  size_t nrecords, records_cap;
} BlobWriter;

void blob_writer_init(BlobWriter *w);
/* A writer over the caller's `cap` bytes at data (zeroed or not; a mapped
 * file, say), which it fills from the start and never grows or frees. */
void blob_writer_init_fixed(BlobWriter *w, uint8_t *data, size_t cap);
void blob_writer_free(BlobWriter *w);
/* Makes room for a file of `total` bytes up front (avoids growing copies). */
void blob_writer_reserve(BlobWriter *w, size_t total);
/* The same, returning false (and changing nothing) when the memory cannot be
 * had, instead of ending the process: for sizes that come from the input. */
bool blob_writer_try_reserve(BlobWriter *w, size_t total);
/* Appends a blob (nbytes > 0) and returns the offset of its metadata record. */
uint64_t blob_writer_add(BlobWriter *w, BlobDType dtype, const void *bytes, size_t nbytes);
/* The same, for a caller that has already taken the XXH64 (seed 0) of the bytes. */
uint64_t blob_writer_add_hashed(BlobWriter *w, BlobDType dtype, const void *bytes, size_t nbytes, uint64_t xxh64);
/* Where the data of a next blob of nbytes would go. Filling that place and
 * passing it to blob_writer_add saves the copy; if the blob turns out to be
 * a duplicate, the place is simply reused by the next one. */
uint8_t *blob_writer_stage(BlobWriter *w, size_t nbytes);
/* The XXH64 (seed 0) of the data of the record at `offset`, as computed when
 * it was added; false if no record starts there. */
bool blob_writer_data_xxh64(const BlobWriter *w, uint64_t offset, uint64_t *hash);
/* What blob_file_layout computes for the file this writer has built (the
 * header, each record and the padding before it), from the writer's own
 * records rather than the bytes. */
uint64_t blob_writer_layout_xxh64(const BlobWriter *w);

/* A view of a weight file (bytes owned by the caller, e.g. a mapping). */
typedef struct BlobFile {
  const uint8_t *data;
  size_t len;
  uint32_t count; /* from the header */
} BlobFile;

typedef struct BlobInfo {
  uint32_t dtype;
  uint64_t size;        /* bytes */
  uint64_t data_offset; /* absolute */
  bool offset_unusual;  /* data_offset != record + 64 (tolerated, Apple's reader does) */
} BlobInfo;

/* Checks the header (size, version 2). On failure returns false with a
 * lowercase message in err. */
bool blob_file_open(BlobFile *f, const uint8_t *data, size_t len, char *err, size_t errlen);
/* Reads and checks the metadata record at `offset`: in bounds, sentinel,
 * known dtype, size > 0, data range inside the file. */
bool blob_file_read(const BlobFile *f, uint64_t offset, BlobInfo *out, char *err, size_t errlen);
/* Like blob_file_read, and also checks the dtype and byte size a MIL tensor
 * type expects. */
/* Walks every blob of the file in order (the canonical layout: records at
 * 64-byte boundaries, each followed by its data, nothing after the last) and
 * hashes everything but the blobs' data: the header, each record and the
 * padding after it. That is the part of the file a weight update never
 * changes; each blob's data has a checksum of its own in the manifest.
 * Optionally returns the record offsets (caller frees) and their count. */
bool blob_file_layout(const BlobFile *f, uint64_t *layout_hash, uint64_t **records, uint32_t *nrecords, char *err,
                      size_t errlen);

bool blob_file_read_expect(const BlobFile *f, uint64_t offset, uint32_t dtype, uint64_t nbytes, BlobInfo *out,
                           char *err, size_t errlen);
/* Walks every record from offset 64 with the align-64 rule; calls fn for each
 * (stops and returns false on the first bad record, with err set). */
bool blob_file_walk(const BlobFile *f, bool (*fn)(void *ctx, uint64_t offset, const BlobInfo *info), void *ctx,
                    char *err, size_t errlen);

#endif
