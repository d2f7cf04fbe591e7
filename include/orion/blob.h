/*
 * MIL blob storage, version 2 (`weight.bin`), byte-exact with Apple's writer:
 * a 64-byte header {u32 count, u32 version = 2, zeros}, then per blob a
 * 64-byte metadata record {u32 0xDEADBEEF, u32 dtype, u64 size, u64 data
 * offset (= record + 64), u64 padding bits = 0, zeros} followed by the data;
 * records start 64-aligned; no padding after the last blob. The offset a MIL
 * BLOBFILE names is the offset of the metadata record. See the MIL spec §2.
 *
 * The reader is the package I/O library's (pkgio/blob.c): it takes a weight
 * file as untrusted bytes. The writer is the compiler's (orion/blob_writer.h).
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
/* Offsets of the fields of a metadata record (the reader's and the writer's). */
#define BLOB_META_SENTINEL 0u
#define BLOB_META_DTYPE 4u
#define BLOB_META_SIZE 8u
#define BLOB_META_OFFSET 16u
#define BLOB_META_PADDING_BITS 24u

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
