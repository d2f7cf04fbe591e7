/*
 * libFuzzer target for the MIL blob storage reader (weight.bin).
 *
 * Each input is opened as a weight file and walked; then records are read
 * at a few offsets taken from the input itself (the u64s in the header's
 * reserved bytes, the 64-byte multiples around them, and each record the
 * walk found), both plainly and with the dtype and size from the last good
 * read as the expected tensor, so mutations reach every check. Beyond memory
 * safety, each success is checked against what blob.h promises: the data
 * lies inside the input, the size is non-zero, the dtype is known, the record
 * is aligned; each failure leaves a non-empty, terminated message. Files the
 * walk accepts are also rebuilt with the writer, which must give back the
 * same offsets whenever the input was itself written the canonical way.
 */
#include "orion/blob_writer.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define ERR_LEN 256
#define MAX_WALKED 64

typedef struct Walk {
  size_t size; /* of the input */
  uint64_t offsets[MAX_WALKED];
  BlobInfo infos[MAX_WALKED];
  size_t n;      /* records seen, possibly more than MAX_WALKED */
  uint64_t last; /* offset of the last one */
} Walk;

static void check_failure(const char *err) {
  if (err[0] == 0 || memchr(err, 0, ERR_LEN) == NULL) abort();
}

static void check_info(const BlobInfo *info, uint64_t offset, size_t size) {
  if (offset % 64 != 0 || offset < BLOB_HEADER_SIZE || offset > size || size - offset < BLOB_METADATA_SIZE) abort();
  if (!blob_dtype_name(info->dtype) || info->size == 0) abort();
  if (info->data_offset > size || info->size > size - info->data_offset) abort();
  if (info->offset_unusual != (info->data_offset != offset + BLOB_METADATA_SIZE)) abort();
}

static bool on_record(void *ctx, uint64_t offset, const BlobInfo *info) {
  Walk *wk = ctx;
  check_info(info, offset, wk->size);
  /* Offsets strictly increase, so the walk terminates. */
  if (wk->n && offset <= wk->last) abort();
  wk->last = offset;
  if (wk->n < MAX_WALKED) {
    wk->offsets[wk->n] = offset;
    wk->infos[wk->n] = *info;
  }
  wk->n++;
  return true;
}

static uint64_t read_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

/* Reads at one offset, plainly and against an expected tensor. */
static void probe(const BlobFile *f, uint64_t offset, uint32_t dtype, uint64_t nbytes) {
  BlobInfo info;
  char err[ERR_LEN];
  memset(err, 0, sizeof err);
  if (blob_file_read(f, offset, &info, err, sizeof err)) check_info(&info, offset, f->len);
  else check_failure(err);
  memset(err, 0, sizeof err);
  if (blob_file_read_expect(f, offset, dtype, nbytes, &info, err, sizeof err)) {
    check_info(&info, offset, f->len);
    if (info.dtype != dtype || info.size != nbytes) abort();
  } else {
    check_failure(err);
  }
}

static bool same_bytes(const uint8_t *data, const BlobInfo *x, const BlobInfo *y) {
  return x->dtype == y->dtype && x->size == y->size &&
         memcmp(data + x->data_offset, data + y->data_offset, (size_t)x->size) == 0;
}

/* A file that walks cleanly and was laid out the canonical way (no unusual
 * data offsets, zero reserved fields, no duplicate blobs, which the writer
 * would merge) is rebuilt by the writer at the same offsets, and byte for
 * byte when its gaps are zero too. */
static void rebuild(const Walk *wk, const uint8_t *data, size_t size) {
  if (wk->n > MAX_WALKED) return;
  for (size_t j = 8; j < BLOB_HEADER_SIZE; j++)
    if (data[j]) return;
  for (size_t i = 0; i < wk->n; i++) {
    const BlobInfo *info = &wk->infos[i];
    /* Sub-byte blobs may carry padding bits, which the writer never sets. */
    if (info->offset_unusual || blob_dtype_size(info->dtype) == 0) return;
    const uint8_t *rec = data + wk->offsets[i];
    for (size_t j = 24; j < BLOB_METADATA_SIZE; j++)
      if (rec[j]) return;
    for (size_t k = 0; k < i; k++)
      if (same_bytes(data, info, &wk->infos[k])) return;
  }
  BlobWriter w;
  blob_writer_init(&w);
  bool gaps_zero = true;
  for (size_t i = 0; i < wk->n; i++) {
    const BlobInfo *info = &wk->infos[i];
    if (blob_writer_add(&w, (BlobDType)info->dtype, data + info->data_offset, (size_t)info->size) != wk->offsets[i])
      abort();
    uint64_t end = info->data_offset + info->size;
    uint64_t next = i + 1 < wk->n ? wk->offsets[i + 1] : end;
    for (uint64_t k = end; k < next; k++)
      if (data[k]) gaps_zero = false;
  }
  /* The walk lets a file run on past its last data up to the next multiple of 64. */
  if (w.len > size || size - w.len >= 64) abort();
  if (gaps_zero && memcmp(w.data, data, w.len) != 0) abort();
  blob_writer_free(&w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  BlobFile f;
  char err[ERR_LEN];
  memset(err, 0, sizeof err);
  if (!blob_file_open(&f, data, size, err, sizeof err)) {
    check_failure(err);
    return 0;
  }

  Walk wk = {.size = size};
  memset(err, 0, sizeof err);
  bool walked = blob_file_walk(&f, on_record, &wk, err, sizeof err);
  if (!walked) check_failure(err);
  else if (wk.n != f.count) abort();

  /* The layout checksum needs a clean walk, and then finds the same records. */
  uint64_t layout, *records = NULL;
  uint32_t nrecords = 0;
  memset(err, 0, sizeof err);
  if (blob_file_layout(&f, &layout, &records, &nrecords, err, sizeof err)) {
    if (!walked || nrecords != wk.n) abort();
    for (uint32_t i = 0; i < nrecords && i < MAX_WALKED; i++)
      if (records[i] != wk.offsets[i]) abort();
    free(records);
  } else {
    check_failure(err);
  }

  /* Offsets chosen by the input: the reserved u64s of the header, and their
   * neighbours on the 64-byte grid, with a fixed and an input-chosen tensor. */
  uint32_t dtype = data[8] % 18;
  uint64_t nbytes = read_u64(data + 16) % 4096;
  for (int i = 1; i < 8; i++) {
    uint64_t off = read_u64(data + 8 * i);
    probe(&f, off, dtype, nbytes);
    probe(&f, off & ~(uint64_t)63, BLOB_FP16, 128);
    probe(&f, (off % (size + 64)) & ~(uint64_t)63, dtype, nbytes);
  }
  for (size_t i = 0; i < wk.n && i < MAX_WALKED; i++) {
    probe(&f, wk.offsets[i], wk.infos[i].dtype, wk.infos[i].size);
    probe(&f, wk.offsets[i] + 1, dtype, nbytes);
  }
  if (walked) rebuild(&wk, data, size);
  return 0;
}
