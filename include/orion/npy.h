/*
 * numpy .npy tensors for the runtime's tools: orion-run reads a program's
 * inputs from .npy files and writes its outputs as .npy files.
 *
 * Reading validates the header with the weight importer's parser
 * (weights_parse_npy), so the compiler and the runtime accept exactly the
 * same files; the data is copied out into a buffer owned by the array.
 * Writing produces the version 1.0 header byte for byte as numpy >= 1.24
 * does, so files written here compare equal to numpy's own.
 */
#ifndef ORION_NPY_H
#define ORION_NPY_H

#include "orion/dtype.h"
#include "orion/support.h"

/* A dense row-major little-endian tensor (fp16 as IEEE binary16 bits). */
typedef struct NpyArray {
  OrionDType dtype;
  uint32_t rank; /* 0 for a scalar */
  int64_t dims[ORION_MAX_RANK];
  void *data;    /* malloc'd by npy_read/npy_convert; never NULL after success */
  size_t nbytes; /* elements * orion_dtype_size(dtype) */
} NpyArray;

/* Reads a whole .npy file. Supported dtypes: f2 -> fp16, f4 -> fp32,
 * i4 -> int32, i1 -> int8, u1 -> uint8, b1 -> bool. Errors are reported
 * without a location: "cannot read 'x.npy': <reason>", "'x.npy' is not a
 * valid .npy file: <parser message>", "'x.npy' holds float64 data; write fp32
 * or fp16", "'x.npy' holds int64 data; write int32". On failure *out is
 * zeroed (npy_free on it is harmless). */
bool npy_read(const char *path, NpyArray *out, Diag *d);

/* The same on bytes in memory; name is the file name used in messages. */
bool npy_read_bytes(const uint8_t *data, size_t len, const char *name, NpyArray *out, Diag *d);

/* Writes a as a version 1.0 .npy file, atomically (write_file_atomic).
 * Reports "cannot write 'x.npy': <reason>"; an array whose dtype, shape and
 * nbytes disagree is reported as "cannot write 'x.npy': <what is wrong>". */
bool npy_write(const char *path, const NpyArray *a, Diag *d);

/* The bytes npy_write writes (header and data) in a malloc'd buffer; used by
 * npy_write and by the fuzz target to check that reading what was written
 * gives back the same array. Reports like npy_write, naming `name`. */
bool npy_encode(const NpyArray *a, const char *name, uint8_t **bytes, size_t *len, Diag *d);

/* Converts in to dtype `to` into a new array *out: fp32 -> fp16 (round to
 * nearest even, overflow to inf), fp16 -> fp32 (exact), same dtype copies.
 * Anything else reports "cannot convert <from> data to <to>". */
bool npy_convert(const NpyArray *in, OrionDType to, NpyArray *out, Diag *d);

/* Frees the data and zeroes the array. */
void npy_free(NpyArray *a);

#endif
