/*
 * The file formats' one dtype table (orion/dtype.h): each format's spelling
 * or code of each dtype, the MIL reader's view of it, and the IR's mapping.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "orion/blob.h"
#include "orion/dtype.h"
#include "orion/ir.h"
#include "orion/mil_reader.h"
#include "orion/weight_file.h"

static const struct {
  OrionDType t;
  const char *name;
  size_t size;
  uint32_t bits;
} all[] = {
    {ORION_DT_BOOL, "bool", 1, 8},         {ORION_DT_STRING, "string", 0, 0},   {ORION_DT_FP16, "fp16", 2, 16},
    {ORION_DT_FP32, "fp32", 4, 32},        {ORION_DT_FP64, "fp64", 8, 64},      {ORION_DT_BF16, "bf16", 2, 16},
    {ORION_DT_INT4, "int4", 0, 4},         {ORION_DT_INT8, "int8", 1, 8},       {ORION_DT_INT16, "int16", 2, 16},
    {ORION_DT_INT32, "int32", 4, 32},      {ORION_DT_INT64, "int64", 8, 64},    {ORION_DT_UINT1, "uint1", 0, 1},
    {ORION_DT_UINT2, "uint2", 0, 2},       {ORION_DT_UINT3, "uint3", 0, 3},     {ORION_DT_UINT4, "uint4", 0, 4},
    {ORION_DT_UINT6, "uint6", 0, 6},       {ORION_DT_UINT8, "uint8", 1, 8},     {ORION_DT_UINT16, "uint16", 2, 16},
    {ORION_DT_UINT32, "uint32", 4, 32},    {ORION_DT_UINT64, "uint64", 8, 64},  {ORION_DT_FP8E4M3FN, "fp8e4m3fn", 1, 8},
    {ORION_DT_FP8E5M2, "fp8e5m2", 1, 8},
};
#define NALL (sizeof all / sizeof all[0])

Test(dtype, names_sizes_and_bits_of_every_dtype) {
  cr_assert_eq(NALL, ORION_DT_COUNT - 1);
  for (size_t i = 0; i < NALL; i++) {
    cr_assert_str_eq(orion_dtype_name(all[i].t), all[i].name);
    cr_assert_eq(orion_dtype_from_name(all[i].name, strlen(all[i].name)), all[i].t, "%s", all[i].name);
    cr_assert_eq(orion_dtype_size(all[i].t), all[i].size, "%s", all[i].name);
    cr_assert_eq(orion_dtype_bits(all[i].t), all[i].bits, "%s", all[i].name);
  }
  cr_assert_str_eq(orion_dtype_name(ORION_DT_NONE), "none");
  cr_assert_str_eq(orion_dtype_name(ORION_DT_COUNT), "none");
  cr_assert_str_eq(orion_dtype_name((OrionDType)-1), "none");
  cr_assert_eq(orion_dtype_from_name("none", 4), ORION_DT_NONE);
  cr_assert_eq(orion_dtype_from_name("fp1", 3), ORION_DT_NONE);
  cr_assert_eq(orion_dtype_from_name("fp16x", 4), ORION_DT_FP16); /* a length, not a C string */
  cr_assert_eq(orion_dtype_size(ORION_DT_COUNT), 0);
}

Test(dtype, kinds) {
  static const OrionDType floats[] = {ORION_DT_FP16, ORION_DT_FP32, ORION_DT_FP64, ORION_DT_BF16, ORION_DT_FP8E4M3FN,
                                      ORION_DT_FP8E5M2};
  for (size_t i = 0; i < NALL; i++) {
    OrionDType t = all[i].t;
    bool is_float = false;
    for (size_t k = 0; k < sizeof floats / sizeof floats[0]; k++) is_float |= floats[k] == t;
    bool is_uint = strncmp(all[i].name, "uint", 4) == 0, is_int = is_uint || strncmp(all[i].name, "int", 3) == 0;
    cr_assert_eq(orion_dtype_is_float(t), is_float, "%s", all[i].name);
    cr_assert_eq(orion_dtype_is_int(t), is_int, "%s", all[i].name);
    cr_assert_eq(orion_dtype_is_unsigned(t), is_uint, "%s", all[i].name);
  }
  cr_assert_not(orion_dtype_is_float(ORION_DT_NONE));
  cr_assert_not(orion_dtype_is_int(ORION_DT_COUNT));
}

/* Apple's BlobDataType numbering (MIL spec §2.2), through the table both ways. */
Test(dtype, blob_codes) {
  static const struct {
    OrionDType t;
    uint32_t code;
  } codes[] = {{ORION_DT_FP16, 1},  {ORION_DT_FP32, 2},   {ORION_DT_UINT8, 3},  {ORION_DT_INT8, 4},
               {ORION_DT_BF16, 5},  {ORION_DT_INT16, 6},  {ORION_DT_UINT16, 7}, {ORION_DT_INT4, 8},
               {ORION_DT_UINT1, 9}, {ORION_DT_UINT2, 10}, {ORION_DT_UINT4, 11}, {ORION_DT_UINT3, 12},
               {ORION_DT_UINT6, 13}, {ORION_DT_INT32, 14}, {ORION_DT_UINT32, 15}, {ORION_DT_FP8E4M3FN, 16},
               {ORION_DT_FP8E5M2, 17}};
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
    cr_assert_eq(orion_dtype_blob_code(codes[i].t), codes[i].code, "%s", orion_dtype_name(codes[i].t));
    cr_assert_eq(orion_dtype_from_blob_code(codes[i].code), codes[i].t, "code %u", codes[i].code);
    cr_assert_str_eq(blob_dtype_name(codes[i].code), orion_dtype_name(codes[i].t));
    cr_assert_eq(blob_dtype_size(codes[i].code), orion_dtype_size(codes[i].t));
  }
  static const OrionDType none[] = {ORION_DT_NONE, ORION_DT_BOOL, ORION_DT_STRING, ORION_DT_FP64, ORION_DT_INT64,
                                    ORION_DT_UINT64};
  for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) cr_assert_eq(orion_dtype_blob_code(none[i]), 0);
  cr_assert_eq(orion_dtype_from_blob_code(0), ORION_DT_NONE);
  cr_assert_eq(orion_dtype_from_blob_code(18), ORION_DT_NONE);
  cr_assert_eq(orion_dtype_from_blob_code(UINT32_MAX), ORION_DT_NONE);
}

Test(dtype, safetensors_and_npy_spellings) {
  static const struct {
    OrionDType t;
    const char *st, *npy;
  } files[] = {{ORION_DT_FP16, "F16", "f2"},  {ORION_DT_FP32, "F32", "f4"}, {ORION_DT_BF16, "BF16", NULL},
               {ORION_DT_FP64, "F64", "f8"},  {ORION_DT_INT32, "I32", "i4"}, {ORION_DT_INT64, "I64", "i8"},
               {ORION_DT_INT8, "I8", "i1"},   {ORION_DT_UINT8, "U8", "u1"}, {ORION_DT_BOOL, "BOOL", "b1"}};
  size_t with_name = 0, with_code = 0;
  for (size_t i = 0; i < NALL; i++) {
    with_name += orion_dtype_safetensors_name(all[i].t) != NULL;
    with_code += orion_dtype_npy_code(all[i].t) != NULL;
  }
  cr_assert_eq(with_name, 9);
  cr_assert_eq(with_code, 8);
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    cr_assert_str_eq(orion_dtype_safetensors_name(files[i].t), files[i].st);
    cr_assert_eq(orion_dtype_from_safetensors_name(files[i].st), files[i].t);
    cr_assert_str_eq(weight_file_dtype_name(files[i].t), files[i].st);
    cr_assert_eq(weight_file_dtype_size(files[i].t), orion_dtype_size(files[i].t));
    if (files[i].npy) {
      cr_assert_str_eq(orion_dtype_npy_code(files[i].t), files[i].npy);
      cr_assert_eq(orion_dtype_from_npy_code(files[i].npy), files[i].t);
    } else {
      cr_assert_null(orion_dtype_npy_code(files[i].t));
    }
  }
  cr_assert_eq(orion_dtype_from_safetensors_name("F8_E4M3"), ORION_DT_NONE);
  cr_assert_eq(orion_dtype_from_safetensors_name("f16"), ORION_DT_NONE);
  cr_assert_eq(orion_dtype_from_npy_code("<f2"), ORION_DT_NONE); /* without the byte order */
  cr_assert_str_eq(weight_file_dtype_name(ORION_DT_INT16), "<invalid>");
  cr_assert_eq(weight_file_dtype_size(ORION_DT_INT16), 0);
}

/* MilDType is this enum: the same values, and MIL text spells all but the fp8s. */
Test(dtype, mil_view) {
  cr_assert_eq(MIL_DT_COUNT, ORION_DT_MIL_END);
  cr_assert_eq(MIL_DT_FP16, ORION_DT_FP16);
  cr_assert_eq(MIL_DT_UINT64, ORION_DT_UINT64);
  for (int t = MIL_DT_NONE + 1; t < MIL_DT_COUNT; t++)
    cr_assert_str_eq(mil_dtype_name((MilDType)t), orion_dtype_name((OrionDType)t));
  cr_assert_eq(orion_dtype_from_name("fp8e5m2", 7), ORION_DT_FP8E5M2);
  cr_assert_eq(mil_dtype_from_name("fp8e5m2", 7), MIL_DT_NONE);
  cr_assert_str_eq(mil_dtype_name(ORION_DT_FP8E4M3FN), "none");
  cr_assert_not(mil_dtype_is_float(ORION_DT_FP8E4M3FN));
}

/* The IR's dtypes are a subset, spelled and sized the same. */
Test(dtype, ir_mapping) {
  for (int i = DT_FP16; i < DT_COUNT; i++) {
    IrDType t = (IrDType)i;
    OrionDType o = ir_dtype_to_orion(t);
    cr_assert_neq(o, ORION_DT_NONE, "%s", ir_dtype_name(t));
    cr_assert_str_eq(ir_dtype_name(t), orion_dtype_name(o));
    cr_assert_eq(ir_dtype_size(t), orion_dtype_size(o));
    cr_assert_eq(ir_dtype_from_orion(o), t);
  }
  cr_assert_eq(ir_dtype_to_orion(DT_INVALID), ORION_DT_NONE);
  cr_assert_eq(ir_dtype_to_orion(DT_COUNT), ORION_DT_NONE);
  cr_assert_eq(ir_dtype_from_orion(ORION_DT_NONE), DT_INVALID);
  cr_assert_eq(ir_dtype_from_orion(ORION_DT_BF16), DT_INVALID);
  cr_assert_eq(ir_dtype_from_orion(ORION_DT_INT64), DT_INVALID);
  cr_assert_eq(ir_dtype_from_orion(ORION_DT_COUNT), DT_INVALID);
}
