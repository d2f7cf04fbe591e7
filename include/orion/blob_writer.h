/*
 * Writing MIL blob storage (`weight.bin`, orion/blob.h) byte-exact with
 * Apple's writer: the compiler's (backend/blob_write.c); the runtime only
 * reads weight files.
 */
#ifndef ORION_BLOB_WRITER_H
#define ORION_BLOB_WRITER_H

#include "orion/blob.h"

/* One blob as the writer laid it out: what a manifest and a layout hash need,
 * kept so that neither has to read the file's bytes back. */
typedef struct BlobRecord {
  uint64_t offset; /* of the metadata record */
  uint64_t size;   /* data bytes */
  uint64_t data_hash; /* of the data: the manifest's weight checksum (package_weight_checksum) */
  uint32_t dtype;
  char *identity;         /* what the blob is the same weight as (NULL: a constant); the writer's copy */
  uint64_t identity_hash; /* its XXH3-64 (0 for none) */
  uint8_t *copy; /* the data, for small blobs of a writer with same_data (NULL otherwise) */
} BlobRecord;

/* Builds a weight file in memory. Identical blobs (same dtype, bytes and
 * identity) are stored once: adding one again returns the first one's
 * offset. The identity says which weight a blob is (orion/weights.h,
 * weights_identity): two params that merely hold equal bytes are not one. */
typedef struct BlobWriter {
  uint8_t *data;
  size_t len, cap;
  bool fixed; /* data is the caller's (e.g. a mapped file): never grown or freed */
  uint32_t count;
  /* Store every blob, even one equal to an earlier blob of its identity (so
   * that each can be patched on its own later); false by default. */
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
/* The same, for a caller that has already taken the bytes' checksum, as
 * package_weight_checksum(PACKAGE_FORMAT_VERSION, ...) gives it. */
uint64_t blob_writer_add_hashed(BlobWriter *w, BlobDType dtype, const void *bytes, size_t nbytes, uint64_t data_hash);
/* The same for a blob of the given identity (NULL: a constant, as above):
 * it shares the storage only of an earlier blob of equal bytes and identity. */
uint64_t blob_writer_add_as(BlobWriter *w, const char *identity, BlobDType dtype, const void *bytes, size_t nbytes,
                            uint64_t data_hash);
/* Where the data of a next blob of nbytes would go. Filling that place and
 * passing it to blob_writer_add saves the copy; if the blob turns out to be
 * a duplicate, the place is simply reused by the next one. */
uint8_t *blob_writer_stage(BlobWriter *w, size_t nbytes);
/* The checksum of the data of the record at `offset`, as given when it was
 * added; false if no record starts there. */
bool blob_writer_data_hash(const BlobWriter *w, uint64_t offset, uint64_t *hash);
/* What blob_file_layout computes for the file this writer has built (the
 * header, each record and the padding before it), from the writer's own
 * records rather than the bytes. */
uint64_t blob_writer_layout_xxh64(const BlobWriter *w);

#endif
