/*
 * Weight files: the headers of safetensors and numpy .npy files, and the
 * conversion of their float data to fp16 or fp32. Part of the package I/O
 * library (pkgio/): the compiler imports weights with it, the patcher
 * (orion/patch.h) and the runtime's .npy reader use the same parsers, so all
 * accept exactly the same files.
 *
 * Probing reads and validates only the header (shape, dtype, where the data
 * lies); it never reads past the end of the file and rejects every offset,
 * size or shape that does not fit.
 */
#ifndef ORION_WEIGHT_FILE_H
#define ORION_WEIGHT_FILE_H

#include "orion/dtype.h"

/* The dtypes weight files hold are those with a safetensors spelling:
 * fp16 fp32 bf16 fp64 int8 uint8 int32 int64 bool. */
const char *weight_file_dtype_name(OrionDType t); /* "F16", "F32", ...; "<invalid>" for any other dtype */
size_t weight_file_dtype_size(OrionDType t);      /* 0 for a dtype weight files do not hold */

/* Element i of float file data (fp16, bf16, fp32 or fp64, little-endian) as a
 * double: exact, since each widens exactly. For messages and checks, not for
 * bulk conversion. */
double weight_file_float_value(const void *data, OrionDType t, uint64_t i);
/* n float values of file dtype t (fp16, bf16, fp32, fp64) into dst of dtype
 * `to`, ORION_DT_FP16 or ORION_DT_FP32, each rounded once to nearest even
 * (vectorized, a chunk at a time). No checks: NaN stays NaN, values beyond
 * the range become infinities; callers scan the result. */
void weights_convert_floats(const void *src, OrionDType t, uint64_t n, OrionDType to, void *dst);

typedef struct WeightInfo {
  OrionDType dtype;
  uint32_t rank;
  int64_t dims[ORION_MAX_RANK];
  uint64_t data_offset; /* absolute byte offset of the tensor's data in the file */
  uint64_t nbytes;      /* elements * dtype size */
} WeightInfo;

/* Header parsers over bytes in memory (the fuzz targets call these).
 * On failure they return false and write a lowercase message to err. */
bool weights_parse_safetensors(const uint8_t *data, size_t len, const char *key, WeightInfo *out, char *err,
                               size_t errlen);
bool weights_parse_npy(const uint8_t *data, size_t len, WeightInfo *out, char *err, size_t errlen);
/* The same for integer data of any width numpy writes (|i1 |u1 <i2 <u2 <i4
 * <u4 <i8 <u8, as ORION_DT_INT8 ... ORION_DT_UINT64) and nothing else
 * ("unsupported .npy dtype '<f4'"): the training data reader's token files. */
bool weights_parse_npy_integers(const uint8_t *data, size_t len, WeightInfo *out, char *err, size_t errlen);

/* The same on files (memory-mapped). */
bool weights_probe_safetensors(const char *path, const char *key, WeightInfo *out, char *err, size_t errlen);
bool weights_probe_npy(const char *path, WeightInfo *out, char *err, size_t errlen);

#endif
