/*
 * numpy .npy tensors for orion-run: reading a program's inputs and writing
 * its outputs (see include/orion/npy.h).
 *
 * The header is validated by the weight importer's parser (weights_parse_npy)
 * rather than a second one here, so the compiler and the runtime agree on
 * which files are valid and report them in the same words. This file adds
 * what only the runtime needs: the mapping to IR dtypes (float64 and int64
 * are refused with a hint, since the ANE has no such types and a silent
 * narrowing could hide a mistake), owning copies of the data, numpy's exact
 * version 1.0 header on output, and the fp16 <-> fp32 conversion that lets an
 * fp32 .npy feed an fp16 input.
 */
#include "orion/npy.h"

#include <stdlib.h>
#include <string.h>

#include "orion/fp16.h"
#include "orion/weight_file.h"

/* Size of the .npy version 1.0 preamble: magic (6), version (2), header
 * length (u16 little-endian). */
#define NPY_PREAMBLE 10

/* numpy >= 1.24 pads the header so that the data starts on a 64-byte boundary. */
#define NPY_ALIGN 64

/* numpy leaves room for the first dimension to grow to this many digits (its
 * GROWTH_AXIS_MAX_DIGITS) so that appending can rewrite the header in place;
 * matching it makes our files byte-identical to numpy's. */
#define NPY_GROWTH_DIGITS 21

/* Largest .npy file read: far beyond any ANE tensor, but a bound on what a
 * FIFO or a device file can make us buffer. */
#define NPY_MAX_FILE_BYTES ((size_t)1 << 31)

/* The dtypes the runtime's programs take and give (no 64-bit ones). */
static bool runtime_dtype(OrionDType t) {
  return t == ORION_DT_FP16 || t == ORION_DT_FP32 || t == ORION_DT_INT32 || t == ORION_DT_INT8 ||
         t == ORION_DT_UINT8 || t == ORION_DT_BOOL;
}

/* numpy's type string of a runtime dtype as numpy writes it ("<f2", "|b1"):
 * one-byte types have no byte order ('|'), wider ones are little-endian
 * ('<'). False for any other dtype. */
static bool descr_of(OrionDType t, char descr[8]) {
  if (!runtime_dtype(t)) return false;
  snprintf(descr, 8, "%c%s", orion_dtype_size(t) == 1 ? '|' : '<', orion_dtype_npy_code(t));
  return true;
}

static void report(Diag *d, const char *fmt, ...) ORION_PRINTF(2, 3);

/* Every message here is about a whole file, so none has a source location. */
static void report(Diag *d, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_vreport(d, DIAG_ERROR, (SrcSpan){0}, fmt, ap);
  va_end(ap);
}

/* Validates the header of a whole file in memory and fills everything of *out
 * but the data; *offset is where the data starts. */
static bool parse_header(const uint8_t *data, size_t len, const char *name, NpyArray *out, size_t *offset, Diag *d) {
  WeightInfo info;
  char err[256];
  if (!weights_parse_npy(data, len, &info, err, sizeof err)) {
    report(d, "'%s' is not a valid .npy file: %s", name, err);
    return false;
  }
  /* The runtime has no 64-bit types; say which narrower file to write
   * instead of converting (and possibly losing range) behind the user's back. */
  if (info.dtype == ORION_DT_FP64) {
    report(d, "'%s' holds float64 data; write fp32 or fp16", name);
    return false;
  }
  if (info.dtype == ORION_DT_INT64) {
    report(d, "'%s' holds int64 data; write int32", name);
    return false;
  }
  if (!runtime_dtype(info.dtype)) { /* the parser knows more types than .npy files carry (bf16) */
    report(d, "'%s' holds %s data, which orion cannot use", name, weight_file_dtype_name(info.dtype));
    return false;
  }
  out->dtype = info.dtype;
  out->rank = info.rank;
  memcpy(out->dims, info.dims, sizeof out->dims);
  /* The parser checked that offset + nbytes is exactly the file length, so
   * both fit in size_t. */
  out->nbytes = (size_t)info.nbytes;
  *offset = (size_t)info.data_offset;
  return true;
}

bool npy_read_bytes(const uint8_t *data, size_t len, const char *name, NpyArray *out, Diag *d) {
  memset(out, 0, sizeof *out);
  size_t offset;
  if (!parse_header(data, len, name, out, &offset, d)) {
    memset(out, 0, sizeof *out);
    return false;
  }
  /* A copy, not a pointer into the file: the data offset need not be aligned
   * for the element type, and the array must outlive the caller's bytes. */
  out->data = xmalloc(out->nbytes ? out->nbytes : 1);
  if (out->nbytes) memcpy(out->data, data + offset, out->nbytes);
  return true;
}

bool npy_read(const char *path, NpyArray *out, Diag *d) {
  memset(out, 0, sizeof *out);
  char *buf;
  size_t len;
  const char *why;
  if (!read_file(path, NPY_MAX_FILE_BYTES, &buf, &len, &why)) {
    report(d, "cannot read '%s': %s", path, why);
    return false;
  }
  size_t offset;
  if (!parse_header((const uint8_t *)buf, len, path, out, &offset, d)) {
    free(buf);
    memset(out, 0, sizeof *out);
    return false;
  }
  /* Reuse the file buffer: slide the data to its start (malloc alignment
   * suits every element type) rather than holding two copies at once. */
  memmove(buf, buf + offset, out->nbytes);
  out->data = xrealloc(buf, out->nbytes ? out->nbytes : 1);
  return true;
}

/* Checks that a caller's array is self-consistent before it is written or
 * converted; returns its element count. */
static bool check_array(const NpyArray *a, uint64_t *elements, const char **why) {
  char descr[8];
  if (!descr_of(a->dtype, descr)) {
    *why = "the array has no valid dtype";
    return false;
  }
  if (a->rank > ORION_MAX_RANK) {
    *why = "the array's rank is above the limit";
    return false;
  }
  bool empty = false;
  for (uint32_t i = 0; i < a->rank; i++) {
    if (a->dims[i] < 0) {
      *why = "the array has a negative dimension";
      return false;
    }
    empty = empty || a->dims[i] == 0;
  }
  /* An empty array is valid whatever its other dimensions, so the product
   * is only formed (and checked for overflow) when no dimension is zero. */
  uint64_t n = empty ? 0 : 1;
  for (uint32_t i = 0; i < a->rank && !empty; i++) {
    uint64_t dim = (uint64_t)a->dims[i];
    if (n > UINT64_MAX / dim) {
      *why = "the array's element count overflows";
      return false;
    }
    n *= dim;
  }
  size_t esize = orion_dtype_size(a->dtype);
  if (n > SIZE_MAX / esize || n * esize != a->nbytes) {
    *why = "the array's byte size does not match its shape and dtype";
    return false;
  }
  if (a->nbytes && !a->data) {
    *why = "the array has no data";
    return false;
  }
  *elements = n;
  return true;
}

/* The header dict exactly as numpy's _write_array_header spells it: keys
 * sorted, repr() values, a trailing ", " before '}', growth spaces, then
 * spaces and '\n' up to the next 64-byte boundary (a full 64 spaces when it
 * already lands on one, as numpy's padding formula does). */
static void header_text(StrBuf *sb, const NpyArray *a) {
  char descr[8];
  descr_of(a->dtype, descr); /* checked by check_array */
  sb_printf(sb, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
  for (uint32_t i = 0; i < a->rank; i++) sb_printf(sb, i ? ", %lld" : "%lld", (long long)a->dims[i]);
  if (a->rank == 1) sb_putc(sb, ','); /* Python's one-element tuple */
  sb_puts(sb, "), }");
  if (a->rank > 0) {
    char digits[24];
    int n = snprintf(digits, sizeof digits, "%lld", (long long)a->dims[0]);
    for (int i = n; i < NPY_GROWTH_DIGITS; i++) sb_putc(sb, ' ');
  }
  size_t pad = NPY_ALIGN - (NPY_PREAMBLE + sb->len + 1) % NPY_ALIGN;
  for (size_t i = 0; i < pad; i++) sb_putc(sb, ' ');
  sb_putc(sb, '\n');
}

bool npy_encode(const NpyArray *a, const char *name, uint8_t **bytes, size_t *len, Diag *d) {
  *bytes = NULL;
  *len = 0;
  uint64_t elements;
  const char *why;
  if (!check_array(a, &elements, &why)) {
    report(d, "cannot write '%s': %s", name, why);
    return false;
  }
  StrBuf h;
  sb_init(&h);
  header_text(&h, a);
  /* At most five 19-digit dimensions: the header is far below version 1.0's
   * 65535-byte limit, so version 2.0 is never needed. */
  size_t total = NPY_PREAMBLE + h.len + a->nbytes;
  uint8_t *out = xmalloc(total);
  static const uint8_t magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  memcpy(out, magic, sizeof magic);
  out[8] = (uint8_t)(h.len & 0xff);
  out[9] = (uint8_t)(h.len >> 8);
  memcpy(out + NPY_PREAMBLE, h.data, h.len);
  if (a->nbytes) memcpy(out + NPY_PREAMBLE + h.len, a->data, a->nbytes);
  sb_free(&h);
  *bytes = out;
  *len = total;
  return true;
}

bool npy_write(const char *path, const NpyArray *a, Diag *d) {
  uint8_t *bytes;
  size_t len;
  if (!npy_encode(a, path, &bytes, &len, d)) return false;
  const char *why;
  bool ok = write_file_atomic(path, bytes, len, &why);
  if (!ok) report(d, "cannot write '%s': %s", path, why);
  free(bytes);
  return ok;
}

bool npy_convert(const NpyArray *in, OrionDType to, NpyArray *out, Diag *d) {
  memset(out, 0, sizeof *out);
  uint64_t elements;
  const char *why;
  if (!check_array(in, &elements, &why)) {
    report(d, "cannot convert the array: %s", why);
    return false;
  }
  bool same = in->dtype == to;
  bool narrow = in->dtype == ORION_DT_FP32 && to == ORION_DT_FP16;
  bool widen = in->dtype == ORION_DT_FP16 && to == ORION_DT_FP32;
  if (!same && !narrow && !widen) {
    report(d, "cannot convert %s data to %s", orion_dtype_name(in->dtype), orion_dtype_name(to));
    return false;
  }
  size_t n = (size_t)elements; /* check_array bounded elements * size by SIZE_MAX */
  if (n > SIZE_MAX / orion_dtype_size(to)) {
    report(d, "cannot convert the array: the %s result would not fit in memory", orion_dtype_name(to));
    return false;
  }
  out->dtype = to;
  out->rank = in->rank;
  memcpy(out->dims, in->dims, sizeof out->dims);
  out->nbytes = n * orion_dtype_size(to);
  out->data = xmalloc(out->nbytes ? out->nbytes : 1);
  if (same) {
    if (in->nbytes) memcpy(out->data, in->data, in->nbytes);
  } else if (narrow) {
    fp16_from_float_array(out->data, in->data, n); /* round to nearest even, overflow to inf */
  } else {
    fp16_to_float_array(out->data, in->data, n); /* exact: fp32 holds every fp16 */
  }
  return true;
}

void npy_free(NpyArray *a) {
  if (!a) return;
  free(a->data);
  memset(a, 0, sizeof *a);
}
