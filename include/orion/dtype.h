/*
 * Element types of the file formats: one enum for MIL text, the weight file
 * (weight.bin), the manifest, safetensors and .npy, so that no two of them
 * are converted through their names. Each format's own spelling or code of a
 * dtype comes from one table (pkgio/dtype.c); a format without a spelling
 * for a dtype simply has none. The IR's dtypes (IrDType) are a subset, mapped
 * by ir_dtype_to_orion / ir_dtype_from_orion.
 *
 * Part of the package I/O library (pkgio/), which both the compiler and the
 * runtime link.
 */
#ifndef ORION_DTYPE_H
#define ORION_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The order of the first 21 is MIL's (MilDType is this enum); never
 * renumbered, since values are compared and stored as they are. */
typedef enum OrionDType {
  ORION_DT_NONE = 0, /* not a valid dtype */
  ORION_DT_BOOL,
  ORION_DT_STRING,
  ORION_DT_FP16,
  ORION_DT_FP32,
  ORION_DT_FP64,
  ORION_DT_BF16,
  ORION_DT_INT4,
  ORION_DT_INT8,
  ORION_DT_INT16,
  ORION_DT_INT32,
  ORION_DT_INT64,
  ORION_DT_UINT1,
  ORION_DT_UINT2,
  ORION_DT_UINT3,
  ORION_DT_UINT4,
  ORION_DT_UINT6,
  ORION_DT_UINT8,
  ORION_DT_UINT16,
  ORION_DT_UINT32,
  ORION_DT_UINT64,
  /* Only weight.bin has these (MIL text does not spell them). */
  ORION_DT_FP8E4M3FN,
  ORION_DT_FP8E5M2,
  ORION_DT_COUNT
} OrionDType;

/* The first dtype that MIL text has no spelling for. */
#define ORION_DT_MIL_END ORION_DT_FP8E4M3FN

/* Most dimensions of a tensor in a package, a weight file or a .npy file (the
 * IR's IR_MAX_RANK); input beyond it is rejected, never truncated. */
#define ORION_MAX_RANK 5
/* Most elements of one tensor (2^31: indexes stay in int32 range on every
 * backend; the IR's IR_MAX_ELEMENTS). */
#define ORION_MAX_ELEMENTS (1ull << 31)

/* "fp16", "uint4", "fp8e4m3fn", ...; "none" for ORION_DT_NONE or an
 * out-of-range value. */
const char *orion_dtype_name(OrionDType t);
/* The dtype spelled by the n bytes at s (any dtype here); ORION_DT_NONE if
 * none is. */
OrionDType orion_dtype_from_name(const char *s, size_t n);
/* Bytes per element; 0 for sub-byte types, string and none. */
size_t orion_dtype_size(OrionDType t);
/* Bits per element (4 for int4); 0 for string and none. */
uint32_t orion_dtype_bits(OrionDType t);
bool orion_dtype_is_float(OrionDType t);    /* fp16 fp32 fp64 bf16 fp8* */
bool orion_dtype_is_int(OrionDType t);      /* int* and uint* */
bool orion_dtype_is_unsigned(OrionDType t); /* uint* */

/* weight.bin's BlobDataType code (orion/blob.h); 0 if the file has none. */
uint32_t orion_dtype_blob_code(OrionDType t);
OrionDType orion_dtype_from_blob_code(uint32_t code); /* ORION_DT_NONE if unknown */

/* The safetensors spelling ("F16", "I64", ...) of the dtypes orion reads from
 * weight files, or NULL. */
const char *orion_dtype_safetensors_name(OrionDType t);
OrionDType orion_dtype_from_safetensors_name(const char *s); /* ORION_DT_NONE if not one */

/* The numpy type code without its byte-order character ("f2", "b1"), or NULL. */
const char *orion_dtype_npy_code(OrionDType t);
OrionDType orion_dtype_from_npy_code(const char *code); /* ORION_DT_NONE if not one */

#endif
