/*
 * The one dtype table of the file formats (orion/dtype.h): every format's
 * spelling or code of a dtype is a column here, so converting between two
 * formats is two lookups in one row, never a detour through a name.
 */
#include "orion/dtype.h"

#include "orion/blob.h"

#include <string.h>

enum { F_FLOAT = 1, F_INT = 2, F_UNSIGNED = 4 };

typedef struct DTypeRow {
  const char *name;        /* MIL's spelling (and the manifest's, the IR's) */
  uint8_t bits;            /* per element; 0: no fixed width (string) */
  uint8_t flags;
  uint32_t blob;           /* weight.bin's code; 0: none */
  const char *safetensors; /* NULL: not read from weight files */
  const char *npy;         /* type code without byte order; NULL: none */
} DTypeRow;

static const DTypeRow rows[ORION_DT_COUNT] = {
    [ORION_DT_NONE] = {"none", 0, 0, 0, NULL, NULL},
    [ORION_DT_BOOL] = {"bool", 8, 0, 0, "BOOL", "b1"},
    [ORION_DT_STRING] = {"string", 0, 0, 0, NULL, NULL},
    [ORION_DT_FP16] = {"fp16", 16, F_FLOAT, BLOB_FP16, "F16", "f2"},
    [ORION_DT_FP32] = {"fp32", 32, F_FLOAT, BLOB_FP32, "F32", "f4"},
    [ORION_DT_FP64] = {"fp64", 64, F_FLOAT, 0, "F64", "f8"},
    [ORION_DT_BF16] = {"bf16", 16, F_FLOAT, BLOB_BF16, "BF16", NULL},
    [ORION_DT_INT4] = {"int4", 4, F_INT, BLOB_INT4, NULL, NULL},
    [ORION_DT_INT8] = {"int8", 8, F_INT, BLOB_INT8, "I8", "i1"},
    [ORION_DT_INT16] = {"int16", 16, F_INT, BLOB_INT16, NULL, NULL},
    [ORION_DT_INT32] = {"int32", 32, F_INT, BLOB_INT32, "I32", "i4"},
    [ORION_DT_INT64] = {"int64", 64, F_INT, 0, "I64", "i8"},
    [ORION_DT_UINT1] = {"uint1", 1, F_INT | F_UNSIGNED, BLOB_UINT1, NULL, NULL},
    [ORION_DT_UINT2] = {"uint2", 2, F_INT | F_UNSIGNED, BLOB_UINT2, NULL, NULL},
    [ORION_DT_UINT3] = {"uint3", 3, F_INT | F_UNSIGNED, BLOB_UINT3, NULL, NULL},
    [ORION_DT_UINT4] = {"uint4", 4, F_INT | F_UNSIGNED, BLOB_UINT4, NULL, NULL},
    [ORION_DT_UINT6] = {"uint6", 6, F_INT | F_UNSIGNED, BLOB_UINT6, NULL, NULL},
    [ORION_DT_UINT8] = {"uint8", 8, F_INT | F_UNSIGNED, BLOB_UINT8, "U8", "u1"},
    [ORION_DT_UINT16] = {"uint16", 16, F_INT | F_UNSIGNED, BLOB_UINT16, NULL, NULL},
    [ORION_DT_UINT32] = {"uint32", 32, F_INT | F_UNSIGNED, BLOB_UINT32, NULL, NULL},
    [ORION_DT_UINT64] = {"uint64", 64, F_INT | F_UNSIGNED, 0, NULL, NULL},
    [ORION_DT_FP8E4M3FN] = {"fp8e4m3fn", 8, F_FLOAT, BLOB_FP8E4M3FN, NULL, NULL},
    [ORION_DT_FP8E5M2] = {"fp8e5m2", 8, F_FLOAT, BLOB_FP8E5M2, NULL, NULL},
};

static const DTypeRow *row(OrionDType t) { return (unsigned)t < ORION_DT_COUNT ? &rows[t] : &rows[ORION_DT_NONE]; }

const char *orion_dtype_name(OrionDType t) { return row(t)->name; }

OrionDType orion_dtype_from_name(const char *s, size_t n) {
  for (int t = ORION_DT_NONE + 1; t < ORION_DT_COUNT; t++)
    if (strlen(rows[t].name) == n && memcmp(rows[t].name, s, n) == 0) return (OrionDType)t;
  return ORION_DT_NONE;
}

size_t orion_dtype_size(OrionDType t) { return row(t)->bits % 8 ? 0 : row(t)->bits / 8; }
uint32_t orion_dtype_bits(OrionDType t) { return row(t)->bits; }
bool orion_dtype_is_float(OrionDType t) { return row(t)->flags & F_FLOAT; }
bool orion_dtype_is_int(OrionDType t) { return row(t)->flags & F_INT; }
bool orion_dtype_is_unsigned(OrionDType t) { return row(t)->flags & F_UNSIGNED; }

uint32_t orion_dtype_blob_code(OrionDType t) { return row(t)->blob; }

OrionDType orion_dtype_from_blob_code(uint32_t code) {
  for (int t = ORION_DT_NONE + 1; code && t < ORION_DT_COUNT; t++)
    if (rows[t].blob == code) return (OrionDType)t;
  return ORION_DT_NONE;
}

const char *orion_dtype_safetensors_name(OrionDType t) { return row(t)->safetensors; }

OrionDType orion_dtype_from_safetensors_name(const char *s) {
  for (int t = ORION_DT_NONE + 1; t < ORION_DT_COUNT; t++)
    if (rows[t].safetensors && strcmp(rows[t].safetensors, s) == 0) return (OrionDType)t;
  return ORION_DT_NONE;
}

const char *orion_dtype_npy_code(OrionDType t) { return row(t)->npy; }

OrionDType orion_dtype_from_npy_code(const char *code) {
  for (int t = ORION_DT_NONE + 1; t < ORION_DT_COUNT; t++)
    if (rows[t].npy && strcmp(rows[t].npy, code) == 0) return (OrionDType)t;
  return ORION_DT_NONE;
}
