/*
 * libFuzzer target for the runtime's .npy reader (orion/npy.h): any bytes
 * must end in an array or in a diagnostic, never a crash, hang or leak.
 * Beyond memory safety each outcome is held to the header's promises: a
 * rejection reported exactly one error and left the array empty; an accepted
 * array reported nothing, has a supported dtype, a rank within the limit, no
 * negative dimension, and exactly elements * dtype-size bytes of data. An
 * accepted array is also written back with npy_encode and read again, which
 * must give the same array (numpy's header as we write it parses).
 */
#include <stdlib.h>
#include <string.h>

#include "orion/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_array(const NpyArray *a) {
  if (a->dtype == ORION_DT_NONE || a->dtype >= ORION_DT_COUNT || a->rank > ORION_MAX_RANK || !a->data) abort();
  uint64_t elements = 1;
  for (uint32_t i = 0; i < a->rank; i++) {
    if (a->dims[i] < 0) abort();
    elements *= (uint64_t)a->dims[i]; /* the reader checked it does not overflow */
  }
  if (elements * orion_dtype_size(a->dtype) != a->nbytes) abort();
  /* Every byte is readable (ASan checks the buffer's extent). */
  volatile uint8_t sum = 0;
  for (size_t i = 0; i < a->nbytes; i++) sum = (uint8_t)(sum + ((const uint8_t *)a->data)[i]);
  (void)sum;
}

static void check_rewrite(const NpyArray *a, Diag *d) {
  uint8_t *bytes;
  size_t len;
  if (!npy_encode(a, "fuzz.npy", &bytes, &len, d)) abort();
  NpyArray b;
  if (!npy_read_bytes(bytes, len, "fuzz.npy", &b, d)) abort();
  if (b.dtype != a->dtype || b.rank != a->rank || b.nbytes != a->nbytes ||
      memcmp(b.dims, a->dims, a->rank * sizeof a->dims[0]) != 0 || memcmp(b.data, a->data, a->nbytes) != 0)
    abort();
  npy_free(&b);
  free(bytes);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (1u << 20)) return 0;
  SourceSet sources;
  srcset_init(&sources);
  StrBuf cap;
  sb_init(&cap);
  Diag d;
  diag_init(&d, &sources);
  d.capture = &cap;
  NpyArray a;
  if (npy_read_bytes(data, size, "fuzz.npy", &a, &d)) {
    if (d.nerrors || cap.len) abort();
    check_array(&a);
    check_rewrite(&a, &d);
    if (d.nerrors || cap.len) abort();
    npy_free(&a);
  } else if (d.nerrors != 1 || cap.len == 0 || a.data || a.nbytes) {
    abort();
  }
  sb_free(&cap);
  srcset_free(&sources);
  return 0;
}
