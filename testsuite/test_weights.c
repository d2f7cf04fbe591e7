/*
 * Tests of weight-file header import (safetensors, .npy) and of the check of
 * params against the files they name.
 *
 * Files are built byte by byte in memory, so each test states exactly what
 * the parser sees; the weights_check_sources tests write them into a fresh
 * directory under /tmp and compare the captured diagnostics text.
 */
#include "orion/weights.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ERR_LEN 512

typedef struct Bytes {
  uint8_t *data;
  size_t len;
} Bytes;

static void put_le(uint8_t *p, uint64_t v, int nbytes) {
  for (int i = 0; i < nbytes; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* A safetensors file whose header length field says `hlen` (the real JSON
 * length when hlen is UINT64_MAX), followed by data_len bytes of data. */
static Bytes safetensors_raw(uint64_t hlen, const char *json, size_t data_len) {
  size_t jlen = strlen(json);
  Bytes b = {.len = 8 + jlen + data_len};
  b.data = calloc(1, b.len + 1);
  cr_assert_not_null(b.data);
  put_le(b.data, hlen == UINT64_MAX ? jlen : hlen, 8);
  memcpy(b.data + 8, json, jlen);
  for (size_t i = 0; i < data_len; i++) b.data[8 + jlen + i] = (uint8_t)i;
  return b;
}

static Bytes safetensors(const char *json, size_t data_len) { return safetensors_raw(UINT64_MAX, json, data_len); }

/* A .npy file of the given major version: the dict padded with spaces and a
 * newline so that the data starts at a multiple of 64, as numpy writes it. */
static Bytes npy(int major, const char *dict, size_t data_len) {
  size_t preamble = major == 1 ? 10 : 12;
  size_t dlen = strlen(dict);
  size_t hlen = dlen + 1;
  hlen += (64 - (preamble + hlen) % 64) % 64;
  Bytes b = {.len = preamble + hlen + data_len};
  b.data = calloc(1, b.len + 1);
  cr_assert_not_null(b.data);
  memcpy(b.data, "\x93NUMPY", 6);
  b.data[6] = (uint8_t)major;
  b.data[7] = 0;
  put_le(b.data + 8, hlen, major == 1 ? 2 : 4);
  memcpy(b.data + preamble, dict, dlen);
  memset(b.data + preamble + dlen, ' ', hlen - dlen - 1);
  b.data[preamble + hlen - 1] = '\n';
  return b;
}

/* Literal bytes (which may contain NULs). */
static Bytes raw(const char *bytes, size_t len) {
  Bytes b = {.data = malloc(len + 1), .len = len};
  cr_assert_not_null(b.data);
  memcpy(b.data, bytes, len);
  return b;
}

/* Parses and expects failure with exactly `expected`. */
static void expect_safetensors_error(Bytes b, const char *key, const char *expected) {
  WeightInfo wi;
  char err[ERR_LEN] = "";
  cr_assert_not(weights_parse_safetensors(b.data, b.len, key, &wi, err, sizeof err), "parsed, expected: %s", expected);
  cr_assert_str_eq(err, expected);
  free(b.data);
}

static void expect_npy_error(Bytes b, const char *expected) {
  WeightInfo wi;
  char err[ERR_LEN] = "";
  cr_assert_not(weights_parse_npy(b.data, b.len, &wi, err, sizeof err), "parsed, expected: %s", expected);
  cr_assert_str_eq(err, expected);
  free(b.data);
}

static WeightInfo parse_safetensors_ok(Bytes b, const char *key) {
  WeightInfo wi;
  char err[ERR_LEN] = "";
  bool ok = weights_parse_safetensors(b.data, b.len, key, &wi, err, sizeof err);
  cr_assert(ok, "unexpected error: %s", err);
  return wi;
}

static WeightInfo parse_npy_ok(Bytes b) {
  WeightInfo wi;
  char err[ERR_LEN] = "";
  bool ok = weights_parse_npy(b.data, b.len, &wi, err, sizeof err);
  cr_assert(ok, "unexpected error: %s", err);
  return wi;
}

/* ---- dtypes -------------------------------------------------------------- */

Test(weights_dtype, names_and_sizes) {
  static const struct {
    OrionDType t;
    const char *name;
    size_t size;
  } cases[] = {{ORION_DT_FP16, "F16", 2}, {ORION_DT_FP32, "F32", 4}, {ORION_DT_BF16, "BF16", 2},
               {ORION_DT_INT32, "I32", 4}, {ORION_DT_INT8, "I8", 1}, {ORION_DT_UINT8, "U8", 1},
               {ORION_DT_BOOL, "BOOL", 1}, {ORION_DT_FP64, "F64", 8}, {ORION_DT_INT64, "I64", 8}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cr_assert_str_eq(weight_file_dtype_name(cases[i].t), cases[i].name);
    cr_assert_eq(weight_file_dtype_size(cases[i].t), cases[i].size);
  }
  cr_assert_str_eq(weight_file_dtype_name(ORION_DT_COUNT), "<invalid>");
  cr_assert_eq(weight_file_dtype_size(ORION_DT_COUNT), 0);
}

Test(weights_dtype, loadable) {
  OrionDType floats[] = {ORION_DT_FP16, ORION_DT_FP32, ORION_DT_BF16, ORION_DT_FP64};
  for (size_t i = 0; i < 4; i++) {
    cr_assert(weights_dtype_loadable(floats[i], DT_FP16));
    cr_assert(weights_dtype_loadable(floats[i], DT_FP32));
    cr_assert_not(weights_dtype_loadable(floats[i], DT_INT32));
    cr_assert_not(weights_dtype_loadable(floats[i], DT_BOOL));
  }
  cr_assert(weights_dtype_loadable(ORION_DT_INT32, DT_INT32));
  cr_assert(weights_dtype_loadable(ORION_DT_INT64, DT_INT32));
  cr_assert(weights_dtype_loadable(ORION_DT_INT8, DT_INT8));
  cr_assert(weights_dtype_loadable(ORION_DT_UINT8, DT_UINT8));
  cr_assert(weights_dtype_loadable(ORION_DT_BOOL, DT_BOOL));
  cr_assert_not(weights_dtype_loadable(ORION_DT_INT32, DT_FP16));
  cr_assert_not(weights_dtype_loadable(ORION_DT_INT8, DT_UINT8));
  cr_assert_not(weights_dtype_loadable(ORION_DT_UINT8, DT_INT8));
  cr_assert_not(weights_dtype_loadable(ORION_DT_BOOL, DT_UINT8));
  cr_assert_not(weights_dtype_loadable(ORION_DT_INT64, DT_INT8));
  cr_assert_not(weights_dtype_loadable(ORION_DT_FP32, DT_INVALID));
  cr_assert_not(weights_dtype_loadable(ORION_DT_COUNT, DT_FP32));
}

/* ---- safetensors: valid files ------------------------------------------ */

#define TWO_TENSORS                                                              \
  "{\"__metadata__\":{\"format\":\"pt\"},"                                       \
  "\"a\":{\"dtype\":\"F16\",\"shape\":[2,3],\"data_offsets\":[0,12]},"            \
  "\"b\":{\"dtype\":\"I32\",\"shape\":[4],\"data_offsets\":[12,28]}}"

Test(safetensors, two_tensors) {
  Bytes b = safetensors(TWO_TENSORS, 28);
  uint64_t n = strlen(TWO_TENSORS);
  WeightInfo a = parse_safetensors_ok(b, "a");
  cr_assert_eq(a.dtype, ORION_DT_FP16);
  cr_assert_eq(a.rank, 2);
  cr_assert_eq(a.dims[0], 2);
  cr_assert_eq(a.dims[1], 3);
  cr_assert_eq(a.data_offset, 8 + n + 0);
  cr_assert_eq(a.nbytes, 12);
  WeightInfo w = parse_safetensors_ok(b, "b");
  cr_assert_eq(w.dtype, ORION_DT_INT32);
  cr_assert_eq(w.rank, 1);
  cr_assert_eq(w.dims[0], 4);
  cr_assert_eq(w.data_offset, 8 + n + 12);
  cr_assert_eq(w.nbytes, 16);
  free(b.data);
}

Test(safetensors, every_dtype) {
  static const struct {
    const char *name;
    OrionDType t;
    size_t size;
  } cases[] = {{"F16", ORION_DT_FP16, 2}, {"F32", ORION_DT_FP32, 4}, {"BF16", ORION_DT_BF16, 2},
               {"I32", ORION_DT_INT32, 4}, {"I8", ORION_DT_INT8, 1}, {"U8", ORION_DT_UINT8, 1},
               {"BOOL", ORION_DT_BOOL, 1}, {"F64", ORION_DT_FP64, 8}, {"I64", ORION_DT_INT64, 8}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char json[128];
    snprintf(json, sizeof json, "{\"w\":{\"dtype\":\"%s\",\"shape\":[3],\"data_offsets\":[0,%zu]}}", cases[i].name,
             3 * cases[i].size);
    Bytes b = safetensors(json, 3 * cases[i].size);
    WeightInfo wi = parse_safetensors_ok(b, "w");
    cr_assert_eq(wi.dtype, cases[i].t, "%s", cases[i].name);
    cr_assert_eq(wi.nbytes, 3 * cases[i].size);
    free(b.data);
  }
}

Test(safetensors, scalar_empty_and_padding) {
  /* Writers pad the header with spaces; a scalar has shape []; a tensor with
   * a zero extent holds no bytes; offsets need not be in order. */
  const char *json = "{\"z\":{\"dtype\":\"F32\",\"shape\":[0,7],\"data_offsets\":[4,4]},"
                     "\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}      ";
  Bytes b = safetensors(json, 4);
  WeightInfo s = parse_safetensors_ok(b, "s");
  cr_assert_eq(s.rank, 0);
  cr_assert_eq(s.nbytes, 4);
  cr_assert_eq(s.data_offset, 8 + strlen(json));
  WeightInfo z = parse_safetensors_ok(b, "z");
  cr_assert_eq(z.rank, 2);
  cr_assert_eq(z.dims[0], 0);
  cr_assert_eq(z.dims[1], 7);
  cr_assert_eq(z.nbytes, 0);
  cr_assert_eq(z.data_offset, 8 + strlen(json) + 4);
  free(b.data);
}

Test(safetensors, rank_five_and_trailing_data) {
  /* Data after the last tensor is not ours to judge. */
  Bytes b = safetensors("{\"w\":{\"dtype\":\"U8\",\"shape\":[1,2,1,2,1],\"data_offsets\":[0,4]}}", 10);
  WeightInfo wi = parse_safetensors_ok(b, "w");
  cr_assert_eq(wi.rank, 5);
  cr_assert_eq(wi.dims[3], 2);
  cr_assert_eq(wi.nbytes, 4);
  free(b.data);
}

/* ---- safetensors: rejections -------------------------------------------- */

Test(safetensors, too_short) {
  expect_safetensors_error(raw("\x10\0\0\0\0", 5), "w", "file too short for a safetensors header (5 bytes)");
  expect_safetensors_error(raw("", 0), "w", "file too short for a safetensors header (0 bytes)");
}

Test(safetensors, header_length_past_end) {
  expect_safetensors_error(safetensors_raw(1000, "{}", 0), "w",
                           "safetensors header length 1000 exceeds the file size (10 bytes)");
  expect_safetensors_error(safetensors_raw(UINT64_MAX - 1, "{}", 0), "w",
                           "safetensors header length 18446744073709551614 exceeds the file size (10 bytes)");
}

Test(safetensors, header_length_over_limit) {
  /* The header must fit the file for the limit to matter: 100 MB of zeros
   * (calloc'd, so untouched pages cost nothing). */
  size_t len = 8 + 100000001;
  uint8_t *big = calloc(1, len);
  cr_assert_not_null(big);
  put_le(big, 100000001, 8);
  WeightInfo wi;
  char err[ERR_LEN];
  cr_assert_not(weights_parse_safetensors(big, len, "w", &wi, err, sizeof err));
  cr_assert_str_eq(err, "safetensors header length 100000001 exceeds the limit of 100000000 bytes");
  free(big);
}

Test(safetensors, bad_json) {
  expect_safetensors_error(safetensors("{\"w\":", 0), "w", "safetensors header is not valid JSON (error near byte 12)");
  expect_safetensors_error(safetensors("{\"w\":{\"dtype\":\"F16\",}}", 0), "w",
                           "safetensors header is not valid JSON (error near byte 29)");
  expect_safetensors_error(safetensors("", 0), "w", "safetensors header is not valid JSON (error near byte 8)");
  expect_safetensors_error(safetensors("{} x", 0), "w",
                           "safetensors header has trailing bytes after the JSON (at byte 11)");
  expect_safetensors_error(safetensors("[1,2]", 0), "w", "safetensors header is not a JSON object");
  expect_safetensors_error(safetensors("{\"w\x01\":{}}", 0), "w",
                           "safetensors header has a control character (0x01) at byte 11");
  /* The header length takes in the first data byte, a NUL. */
  expect_safetensors_error(safetensors_raw(3, "{}", 1), "w",
                           "safetensors header has a control character (0x00) at byte 10");
}

Test(safetensors, missing_key) {
  expect_safetensors_error(safetensors(TWO_TENSORS, 28), "c", "no tensor named 'c' in the file (it holds 'a', 'b')");
  /* The metadata entry is not a tensor. */
  expect_safetensors_error(safetensors(TWO_TENSORS, 28), "__metadata__",
                           "no tensor named '__metadata__' in the file (it holds 'a', 'b')");
  expect_safetensors_error(safetensors("{\"__metadata__\":{}}", 0), "w",
                           "no tensor named 'w' in the file (it holds no tensors)");
  expect_safetensors_error(safetensors("{\"a\":1,\"b\":2,\"c\":3,\"d\":4,\"e\":5}", 0), "w",
                           "no tensor named 'w' in the file (it holds 5 tensors)");
  /* Key matching is exact: no case folding. */
  expect_safetensors_error(safetensors("{\"W\":{}}", 0), "w", "no tensor named 'w' in the file (it holds 'W')");
}

Test(safetensors, duplicate_key) {
  expect_safetensors_error(safetensors("{\"w\":{},\"w\":{}}", 0), "w", "tensor 'w' appears twice in the header");
}

Test(safetensors, malformed_entry) {
  expect_safetensors_error(safetensors("{\"w\":[]}", 0), "w", "header entry of tensor 'w' is not an object");
  expect_safetensors_error(safetensors("{\"w\":{\"shape\":[],\"data_offsets\":[0,0]}}", 0), "w",
                           "tensor 'w' has no \"dtype\" string");
  expect_safetensors_error(safetensors("{\"w\":{\"dtype\":7,\"shape\":[],\"data_offsets\":[0,0]}}", 0), "w",
                           "tensor 'w' has no \"dtype\" string");
  expect_safetensors_error(safetensors("{\"w\":{\"dtype\":\"F16\",\"data_offsets\":[0,0]}}", 0), "w",
                           "tensor 'w' has no \"shape\" array");
  expect_safetensors_error(safetensors("{\"w\":{\"dtype\":\"F16\",\"shape\":3,\"data_offsets\":[0,0]}}", 0), "w",
                           "tensor 'w' has no \"shape\" array");
  expect_safetensors_error(safetensors("{\"w\":{\"dtype\":\"F16\",\"shape\":[]}}", 0), "w",
                           "tensor 'w' has no \"data_offsets\" array");
}

Test(safetensors, bad_dtype) {
  expect_safetensors_error(safetensors("{\"w\":{\"dtype\":\"F8_E4M3\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1),
                           "w", "tensor 'w' has unsupported dtype 'F8_E4M3'");
  expect_safetensors_error(safetensors("{\"w\":{\"dtype\":\"f16\",\"shape\":[1],\"data_offsets\":[0,2]}}", 2), "w",
                           "tensor 'w' has unsupported dtype 'f16'");
}

#define ENTRY(dtype, shape, offsets) \
  "{\"w\":{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":" offsets "}}"

Test(safetensors, bad_shape) {
  expect_safetensors_error(safetensors(ENTRY("F16", "[-1,2]", "[0,4]"), 4), "w",
                           "tensor 'w' has invalid dimension -1 at axis 0 (expected a non-negative integer)");
  expect_safetensors_error(safetensors(ENTRY("F16", "[2,2.5]", "[0,10]"), 10), "w",
                           "tensor 'w' has invalid dimension 2.5 at axis 1 (expected a non-negative integer)");
  expect_safetensors_error(safetensors(ENTRY("F16", "[1e300]", "[0,2]"), 2), "w",
                           "tensor 'w' has dimension 1e+300 at axis 0, above the limit of 2^53");
  expect_safetensors_error(safetensors(ENTRY("F16", "[18014398509481984]", "[0,2]"), 2), "w",
                           "tensor 'w' has dimension 18014398509481984 at axis 0, above the limit of 2^53");
  expect_safetensors_error(safetensors(ENTRY("F16", "[\"3\"]", "[0,6]"), 6), "w",
                           "tensor 'w' has a string at axis 0 of its shape (expected a non-negative integer)");
  expect_safetensors_error(safetensors(ENTRY("F16", "[[3]]", "[0,6]"), 6), "w",
                           "tensor 'w' has an array at axis 0 of its shape (expected a non-negative integer)");
  expect_safetensors_error(safetensors(ENTRY("F16", "[null]", "[0,6]"), 6), "w",
                           "tensor 'w' has null at axis 0 of its shape (expected a non-negative integer)");
}

Test(safetensors, rank_over_limit) {
  expect_safetensors_error(safetensors(ENTRY("F16", "[1,1,1,1,1,1]", "[0,2]"), 2), "w",
                           "tensor 'w' has rank 6, more than the limit of 5");
}

Test(safetensors, element_count_overflow) {
  expect_safetensors_error(safetensors(ENTRY("F16", "[4294967296,4294967296]", "[0,2]"), 2), "w",
                           "element count of tensor 'w' overflows");
  /* Elements fit but bytes do not. */
  expect_safetensors_error(safetensors(ENTRY("F64", "[4294967296,1073741824]", "[0,2]"), 2), "w",
                           "tensor 'w' has 2 bytes of data but its shape holds 4611686018427387904 elements of 8 bytes");
}

Test(safetensors, bad_offsets) {
  const char *two = "tensor 'w' needs \"data_offsets\" of two non-negative integers";
  expect_safetensors_error(safetensors(ENTRY("U8", "[2]", "[0]"), 2), "w", two);
  expect_safetensors_error(safetensors(ENTRY("U8", "[2]", "[0,1,2]"), 2), "w", two);
  expect_safetensors_error(safetensors(ENTRY("U8", "[2]", "[-2,0]"), 2), "w", two);
  expect_safetensors_error(safetensors(ENTRY("U8", "[2]", "[0,1.5]"), 2), "w", two);
  expect_safetensors_error(safetensors(ENTRY("U8", "[2]", "[\"0\",2]"), 2), "w", two);
  expect_safetensors_error(safetensors(ENTRY("U8", "[2]", "[4,2]"), 8), "w",
                           "tensor 'w' has data_offsets [4, 2] that end before they begin");
}

Test(safetensors, offsets_out_of_file) {
  expect_safetensors_error(safetensors(ENTRY("F16", "[2]", "[0,4]"), 3), "w",
                           "tensor 'w' has data_offsets [0, 4] past the end of the data (3 bytes)");
  expect_safetensors_error(safetensors(ENTRY("F16", "[2]", "[9007199254740988,9007199254740992]"), 3), "w",
                           "tensor 'w' has data_offsets [9007199254740988, 9007199254740992] past the end of the "
                           "data (3 bytes)");
}

Test(safetensors, size_shape_mismatch) {
  expect_safetensors_error(safetensors(ENTRY("F16", "[2,3]", "[0,10]"), 10), "w",
                           "tensor 'w' has 10 bytes of data but its shape holds 6 elements of 2 bytes");
  expect_safetensors_error(safetensors(ENTRY("F32", "[]", "[0,0]"), 0), "w",
                           "tensor 'w' has 0 bytes of data but its shape holds 1 elements of 4 bytes");
}

Test(safetensors, hostile_names_are_sanitized) {
  /* A tab is valid JSON whitespace only outside strings; inside a name cJSON
   * keeps it, and the message must not carry it raw. */
  char longname[200];
  memset(longname, 'x', sizeof longname - 1);
  longname[sizeof longname - 1] = 0;
  char json[400];
  snprintf(json, sizeof json, "{\"a\tb\":{},\"%s\":{}}", longname);
  Bytes b = safetensors(json, 0);
  WeightInfo wi;
  char err[ERR_LEN];
  cr_assert_not(weights_parse_safetensors(b.data, b.len, "w", &wi, err, sizeof err));
  char expected[300];
  snprintf(expected, sizeof expected, "no tensor named 'w' in the file (it holds 'a?b', '%.64s...')", longname);
  cr_assert_str_eq(err, expected);
  free(b.data);
}

Test(safetensors, small_error_buffer) {
  Bytes b = safetensors(TWO_TENSORS, 28);
  WeightInfo wi;
  char err[8];
  cr_assert_not(weights_parse_safetensors(b.data, b.len, "zzz", &wi, err, sizeof err));
  cr_assert_str_eq(err, "no tens");
  cr_assert_not(weights_parse_safetensors(b.data, b.len, "zzz", &wi, NULL, 0));
  free(b.data);
}

/* ---- npy: valid files ---------------------------------------------------- */

Test(npy, v1_two_d) {
  Bytes b = npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24);
  WeightInfo wi = parse_npy_ok(b);
  cr_assert_eq(wi.dtype, ORION_DT_FP32);
  cr_assert_eq(wi.rank, 2);
  cr_assert_eq(wi.dims[0], 2);
  cr_assert_eq(wi.dims[1], 3);
  cr_assert_eq(wi.data_offset, 128);
  cr_assert_eq(wi.nbytes, 24);
  free(b.data);
}

Test(npy, v1_scalar) {
  Bytes b = npy(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (), }", 8);
  WeightInfo wi = parse_npy_ok(b);
  cr_assert_eq(wi.dtype, ORION_DT_FP64);
  cr_assert_eq(wi.rank, 0);
  cr_assert_eq(wi.nbytes, 8);
  cr_assert_eq(wi.data_offset, 128);
  free(b.data);
}

Test(npy, v1_one_d) {
  Bytes b = npy(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (5,), }", 5);
  WeightInfo wi = parse_npy_ok(b);
  cr_assert_eq(wi.dtype, ORION_DT_UINT8);
  cr_assert_eq(wi.rank, 1);
  cr_assert_eq(wi.dims[0], 5);
  cr_assert_eq(wi.nbytes, 5);
  free(b.data);
}

Test(npy, v2_and_v3) {
  Bytes b = npy(2, "{'descr': '<f2', 'fortran_order': False, 'shape': (3, 4), }", 24);
  WeightInfo wi = parse_npy_ok(b);
  cr_assert_eq(wi.dtype, ORION_DT_FP16);
  cr_assert_eq(wi.rank, 2);
  cr_assert_eq(wi.dims[1], 4);
  cr_assert_eq(wi.data_offset, 128);
  cr_assert_eq(wi.nbytes, 24);
  free(b.data);
  b = npy(3, "{'descr': '<i4', 'fortran_order': False, 'shape': (7,), }", 28);
  wi = parse_npy_ok(b);
  cr_assert_eq(wi.dtype, ORION_DT_INT32);
  cr_assert_eq(wi.nbytes, 28);
  free(b.data);
}

Test(npy, v2_long_header) {
  /* A header longer than 64 KiB is why version 2 exists. */
  size_t pad = 70000;
  char *dict = malloc(pad + 100);
  cr_assert_not_null(dict);
  int n = sprintf(dict, "{'descr': '<i8', 'fortran_order': False, 'shape': (2,),");
  memset(dict + n, ' ', pad);
  strcpy(dict + n + pad, "}");
  Bytes b = npy(2, dict, 16);
  WeightInfo wi = parse_npy_ok(b);
  cr_assert_eq(wi.dtype, ORION_DT_INT64);
  cr_assert_eq(wi.data_offset % 64, 0);
  cr_assert_eq(wi.data_offset + 16, b.len);
  free(dict);
  free(b.data);
}

Test(npy, dict_variants) {
  /* Any key order, double quotes, no trailing comma, Python 2 long suffix,
   * tight spacing. */
  Bytes b = npy(1, "{\"shape\": (2L, 3L), \"fortran_order\": False, \"descr\": \"<i4\"}", 24);
  WeightInfo wi = parse_npy_ok(b);
  cr_assert_eq(wi.dtype, ORION_DT_INT32);
  cr_assert_eq(wi.dims[0], 2);
  cr_assert_eq(wi.dims[1], 3);
  free(b.data);
  b = npy(1, "{'descr':'|b1','fortran_order':False,'shape':(1,2,1,2,1,)}", 4);
  wi = parse_npy_ok(b);
  cr_assert_eq(wi.dtype, ORION_DT_BOOL);
  cr_assert_eq(wi.rank, 5);
  free(b.data);
}

Test(npy, one_byte_types_any_order) {
  static const struct {
    const char *descr;
    OrionDType t;
  } cases[] = {{"|i1", ORION_DT_INT8}, {"<i1", ORION_DT_INT8}, {"=i1", ORION_DT_INT8}, {">i1", ORION_DT_INT8},
               {"|u1", ORION_DT_UINT8}, {"=u1", ORION_DT_UINT8}, {"|b1", ORION_DT_BOOL}, {"<b1", ORION_DT_BOOL}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char dict[100];
    snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (3,), }", cases[i].descr);
    Bytes b = npy(1, dict, 3);
    WeightInfo wi = parse_npy_ok(b);
    cr_assert_eq(wi.dtype, cases[i].t, "%s", cases[i].descr);
    free(b.data);
  }
}

Test(npy, fortran_order_without_effect) {
  /* With at most one axis longer than 1, column-major is the same layout. */
  Bytes b = npy(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (1, 6, 1), }", 24);
  WeightInfo wi = parse_npy_ok(b);
  cr_assert_eq(wi.rank, 3);
  free(b.data);
}

Test(npy, empty_array) {
  Bytes b = npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 5), }", 0);
  WeightInfo wi = parse_npy_ok(b);
  cr_assert_eq(wi.nbytes, 0);
  cr_assert_eq(wi.data_offset, b.len);
  free(b.data);
}

/* ---- npy: rejections ----------------------------------------------------- */

#define NPY_DICT(descr, fortran, shape) "{'descr': '" descr "', 'fortran_order': " fortran ", 'shape': " shape ", }"

Test(npy, bad_magic) {
  expect_npy_error(raw("", 0), "not a .npy file (it is empty)");
  expect_npy_error(raw("\x93NUMPX\x01\x00\x10\x00", 10), "not a .npy file (bad magic)");
  expect_npy_error(raw("PK\x03\x04", 4), "not a .npy file (bad magic)");
  expect_npy_error(raw("\x93NUM", 4), "truncated .npy header");
}

Test(npy, truncated_header) {
  expect_npy_error(raw("\x93NUMPY\x01", 7), "truncated .npy header");
  expect_npy_error(raw("\x93NUMPY\x01\x00\x76", 9), "truncated .npy header");
  expect_npy_error(raw("\x93NUMPY\x02\x00\x76\x00\x00", 11), "truncated .npy header");
  expect_npy_error(raw("\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', ", 28),
                   "truncated .npy header: it claims 118 bytes but the file has 18 after the preamble");
  expect_npy_error(raw("\x93NUMPY\x02\x00\xff\xff\xff\xff{}", 14),
                   "truncated .npy header: it claims 4294967295 bytes but the file has 2 after the preamble");
  /* The dict itself cut short inside the declared length. */
  expect_npy_error(raw("\x93NUMPY\x01\x00\x09\x00{'descr':", 19),
                   "malformed .npy header at byte 19: expected a quoted string");
}

Test(npy, bad_version) {
  expect_npy_error(raw("\x93NUMPY\x04\x00\x02\x00{}", 12), "unsupported .npy version 4.0");
  expect_npy_error(raw("\x93NUMPY\x01\x01\x02\x00{}", 12), "unsupported .npy version 1.1");
  expect_npy_error(raw("\x93NUMPY\x00\x00\x02\x00{}", 12), "unsupported .npy version 0.0");
}

Test(npy, big_endian) {
  expect_npy_error(npy(1, NPY_DICT(">f4", "False", "(2, 3)"), 24), "big-endian .npy data is not supported");
  expect_npy_error(npy(1, NPY_DICT(">i8", "False", "(2,)"), 16), "big-endian .npy data is not supported");
}

Test(npy, fortran_order) {
  expect_npy_error(npy(1, NPY_DICT("<f4", "True", "(2, 3)"), 24), "fortran-order .npy data is not supported");
}

Test(npy, short_and_long_data) {
  expect_npy_error(npy(1, NPY_DICT("<f4", "False", "(2, 3)"), 20),
                   ".npy data is truncated: the shape needs 24 bytes but the file has 20");
  expect_npy_error(npy(1, NPY_DICT("<f8", "False", "()"), 0),
                   ".npy data is truncated: the shape needs 8 bytes but the file has 0");
  expect_npy_error(npy(1, NPY_DICT("<f4", "False", "(2, 3)"), 28), ".npy file has 4 unexpected bytes after the data");
}

Test(npy, unknown_descr) {
  expect_npy_error(npy(1, NPY_DICT("<c8", "False", "(2,)"), 16), "unsupported .npy dtype '<c8'");
  expect_npy_error(npy(1, NPY_DICT("|f4", "False", "(2,)"), 8), "unsupported .npy dtype '|f4'");
  expect_npy_error(npy(1, NPY_DICT("=f4", "False", "(2,)"), 8), "unsupported .npy dtype '=f4'");
  expect_npy_error(npy(1, NPY_DICT("<u4", "False", "(2,)"), 8), "unsupported .npy dtype '<u4'");
  expect_npy_error(npy(1, NPY_DICT("O", "False", "(2,)"), 8), "unsupported .npy dtype 'O'");
  expect_npy_error(npy(1, NPY_DICT("", "False", "(2,)"), 8), "unsupported .npy dtype ''");
  expect_npy_error(npy(1, "{'descr': [('x', '<f4')], 'fortran_order': False, 'shape': (2,), }", 8),
                   "structured .npy dtypes are not supported");
}

/* The training data reader's variant: every integer width numpy writes,
 * no floats; everything else as weights_parse_npy. */
Test(npy, integers_variant) {
  static const struct {
    const char *descr;
    OrionDType t;
  } ints[] = {{"|i1", ORION_DT_INT8},  {"|u1", ORION_DT_UINT8},  {"<i2", ORION_DT_INT16}, {"<u2", ORION_DT_UINT16},
              {"<i4", ORION_DT_INT32}, {"<u4", ORION_DT_UINT32}, {"<i8", ORION_DT_INT64}, {"<u8", ORION_DT_UINT64}};
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
    char dict[128];
    snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (3,), }", ints[i].descr);
    size_t width = orion_dtype_size(ints[i].t);
    Bytes b = npy(1, dict, 3 * width);
    WeightInfo wi;
    char err[ERR_LEN] = "";
    cr_assert(weights_parse_npy_integers(b.data, b.len, &wi, err, sizeof err), "%s: %s", ints[i].descr, err);
    cr_assert_eq(wi.dtype, ints[i].t, "%s", ints[i].descr);
    cr_assert_eq(wi.nbytes, 3 * width);
    free(b.data);
  }
  const char *refused[][2] = {{"<f4", "unsupported .npy dtype '<f4'"},
                              {"|b1", "unsupported .npy dtype '|b1'"},
                              {">u2", "big-endian .npy data is not supported"},
                              {"|u2", "unsupported .npy dtype '|u2'"}};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    char dict[128];
    snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (2,), }", refused[i][0]);
    Bytes b = npy(1, dict, 8);
    WeightInfo wi;
    char err[ERR_LEN] = "";
    cr_assert_not(weights_parse_npy_integers(b.data, b.len, &wi, err, sizeof err), "%s parsed", refused[i][0]);
    cr_assert_str_eq(err, refused[i][1]);
    free(b.data);
  }
}

Test(npy, keys) {
  expect_npy_error(npy(1, "{'descr': '<f4', 'shape': (2,), }", 8), ".npy header has no 'fortran_order'");
  expect_npy_error(npy(1, "{'fortran_order': False, 'shape': (2,), }", 8), ".npy header has no 'descr'");
  expect_npy_error(npy(1, "{'descr': '<f4', 'fortran_order': False}", 8), ".npy header has no 'shape'");
  expect_npy_error(npy(1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8),
                   "duplicate key 'descr' in .npy header at byte 27");
  expect_npy_error(npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}", 8),
                   "unexpected key 'extra' in .npy header at byte 66");
}

Test(npy, malformed_dict) {
  expect_npy_error(npy(1, "('descr', '<f4')", 0), "malformed .npy header at byte 10: expected '{'");
  expect_npy_error(npy(1, "{'descr' '<f4'}", 0), "malformed .npy header at byte 19: expected ':' after a key");
  expect_npy_error(npy(1, "{'descr': '<f4' 'shape': ()}", 0), "malformed .npy header at byte 26: expected ',' or '}'");
  expect_npy_error(npy(1, "{'descr': '<f\\x34'}", 0),
                   "malformed .npy header at byte 23: expected a plain quoted string");
  expect_npy_error(npy(1, "{'fortran_order': false}", 0), "malformed .npy header at byte 28: expected True or False");
  expect_npy_error(npy(1, "{'fortran_order': Trueish}", 0),
                   "malformed .npy header at byte 28: expected True or False");
  expect_npy_error(npy(1, "{'shape': [2, 3]}", 0), "malformed .npy header at byte 20: expected a shape tuple");
  expect_npy_error(npy(1, "{'shape': (2 3)}", 0),
                   "malformed .npy header at byte 23: expected ',' or ')' in the shape");
  expect_npy_error(npy(1, "{'shape': (2x,)}", 0),
                   "malformed .npy header at byte 22: expected ',' or ')' after a dimension");
  expect_npy_error(npy(1, "{'shape': (,)}", 0), "malformed .npy header at byte 21: expected a dimension");
  expect_npy_error(npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (5), }", 20),
                   "malformed .npy header at byte 63: expected a ',' after the only dimension");
  expect_npy_error(npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), } x", 20),
                   "unexpected bytes after the .npy header dict at byte 68");
}

Test(npy, bad_dimensions) {
  expect_npy_error(npy(1, NPY_DICT("<f4", "False", "(2, -3)"), 0), "negative dimension in .npy shape at byte 64");
  expect_npy_error(npy(1, NPY_DICT("<f4", "False", "(99999999999999999999,)"), 0),
                   "dimension too large in .npy shape at byte 61");
  expect_npy_error(npy(1, NPY_DICT("<f4", "False", "(1, 1, 1, 1, 1, 1)"), 0),
                   ".npy array has rank above the limit of 5");
  expect_npy_error(npy(1, NPY_DICT("<f4", "False", "(4294967296, 4294967296)"), 0),
                   "element count of .npy array overflows");
  expect_npy_error(npy(1, NPY_DICT("<f8", "False", "(4294967296, 1073741824)"), 0),
                   "element count of .npy array overflows");
}

/* ---- files ------------------------------------------------------------------ */

/* A fresh directory under /tmp, removed with its files after each test. */
typedef struct TempDir {
  char path[64];
} TempDir;

static TempDir tmp;

static void tmp_setup(void) {
  strcpy(tmp.path, "/tmp/orion-weights-XXXXXX");
  cr_assert_not_null(mkdtemp(tmp.path));
}

static void tmp_teardown(void) {
  DIR *dir = opendir(tmp.path);
  if (!dir) return;
  struct dirent *e;
  while ((e = readdir(dir))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", tmp.path, e->d_name);
    if (remove(p) != 0) rmdir(p);
  }
  closedir(dir);
  rmdir(tmp.path);
}

static void write_in_tmp(const char *name, Bytes b) {
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s/%s", tmp.path, name);
  FILE *f = fopen(p, "wb");
  cr_assert_not_null(f);
  cr_assert_eq(fwrite(b.data, 1, b.len, f), b.len);
  cr_assert_eq(fclose(f), 0);
  free(b.data);
}

static const char *tmp_file(const char *name) {
  static char p[PATH_MAX];
  snprintf(p, sizeof p, "%s/%s", tmp.path, name);
  return p;
}

Test(probe, files, .init = tmp_setup, .fini = tmp_teardown) {
  write_in_tmp("m.safetensors", safetensors(TWO_TENSORS, 28));
  write_in_tmp("w.npy", npy(1, NPY_DICT("<f4", "False", "(2, 3)"), 24));
  write_in_tmp("empty.npy", raw("", 0));
  WeightInfo wi;
  char err[ERR_LEN];
  cr_assert(weights_probe_safetensors(tmp_file("m.safetensors"), "b", &wi, err, sizeof err), "%s", err);
  cr_assert_eq(wi.dtype, ORION_DT_INT32);
  cr_assert_eq(wi.data_offset, 8 + strlen(TWO_TENSORS) + 12);
  cr_assert(weights_probe_npy(tmp_file("w.npy"), &wi, err, sizeof err), "%s", err);
  cr_assert_eq(wi.nbytes, 24);
  cr_assert_not(weights_probe_npy(tmp_file("empty.npy"), &wi, err, sizeof err));
  cr_assert_str_eq(err, "not a .npy file (it is empty)");
  cr_assert_not(weights_probe_npy("/nonexistent/x.npy", &wi, err, sizeof err));
  cr_assert_str_eq(err, "cannot open '/nonexistent/x.npy': No such file or directory");
  cr_assert_not(weights_probe_safetensors("/nonexistent/x.safetensors", "w", &wi, err, sizeof err));
  cr_assert_str_eq(err, "cannot open '/nonexistent/x.safetensors': No such file or directory");
  cr_assert_not(weights_probe_npy(tmp.path, &wi, err, sizeof err));
  char expected[ERR_LEN];
  snprintf(expected, sizeof expected, "'%s' is not a regular file", tmp.path);
  cr_assert_str_eq(err, expected);
}

/* ---- weights_check_sources ----------------------------------------------- */

typedef struct CheckRun {
  IrModule *m;
  IrFuncId f;
  StrBuf cap;
  Diag d;
} CheckRun;

static void check_begin(CheckRun *r) {
  r->m = ir_module_new();
  r->m->base_dir = tmp.path;
  r->f = ir_func_new(r->m, "main", (SrcSpan){0});
  sb_init(&r->cap);
  diag_init(&r->d, NULL);
  r->d.capture = &r->cap;
}

static IrValueId add_param(CheckRun *r, const char *name, IrDType dt, uint8_t rank, const int64_t *dims,
                           IrParamSourceKind kind, const char *path, const char *key) {
  IrType t = {.dtype = dt, .rank = rank};
  for (uint8_t i = 0; i < rank; i++) t.dims[i] = dims[i];
  IrParamSource src = {.kind = kind, .path = path, .key = key};
  return ir_param_new(r->m, r->f, name, &t, &src, (SrcSpan){0});
}

/* Runs the check; expects success exactly when no text is expected. */
static void check_expect(CheckRun *r, const char *expected) {
  bool ok = weights_check_sources(r->m, &r->d);
  const char *got = r->cap.data ? r->cap.data : "";
  cr_assert_str_eq(got, expected);
  cr_assert_eq(ok, expected[0] == 0);
  sb_free(&r->cap);
  ir_module_free(r->m);
}

static const int64_t dims_2x3[] = {2, 3}, dims_3x2[] = {3, 2}, dims_4[] = {4};

TestSuite(check, .init = tmp_setup, .fini = tmp_teardown);

Test(check, good_files_are_silent) {
  write_in_tmp("model.safetensors", safetensors(TWO_TENSORS, 28));
  write_in_tmp("w.npy", npy(1, NPY_DICT("<f4", "False", "(2, 3)"), 24));
  CheckRun r;
  check_begin(&r);
  add_param(&r, "a", DT_FP32, 2, dims_2x3, SRC_SAFETENSORS, "model.safetensors", "a"); /* F16 -> fp32 */
  add_param(&r, "b", DT_INT32, 1, dims_4, SRC_SAFETENSORS, "model.safetensors", "b");
  add_param(&r, "c", DT_FP16, 2, dims_2x3, SRC_NPY, "w.npy", NULL);
  char abs_path[PATH_MAX];
  snprintf(abs_path, sizeof abs_path, "%s/w.npy", tmp.path);
  add_param(&r, "d", DT_FP32, 2, dims_2x3, SRC_NPY, abs_path, NULL);
  add_param(&r, "z", DT_FP32, 2, dims_2x3, SRC_ZEROS, NULL, NULL); /* not a file: skipped */
  check_expect(&r, "");
}

Test(check, missing_file) {
  CheckRun r;
  check_begin(&r);
  add_param(&r, "w", DT_FP16, 2, dims_2x3, SRC_SAFETENSORS, "missing.safetensors", "w");
  check_expect(&r, "orionc: error: cannot read weights for 'w': cannot open 'missing.safetensors': No such file or "
                   "directory\n");
}

Test(check, dead_params_are_skipped) {
  CheckRun r;
  check_begin(&r);
  IrValueId v = add_param(&r, "w", DT_FP16, 2, dims_2x3, SRC_NPY, "missing.npy", NULL);
  ir_decl_erase(r.m, v);
  check_expect(&r, "");
}

Test(check, wrong_shape) {
  write_in_tmp("model.safetensors", safetensors(TWO_TENSORS, 28));
  write_in_tmp("w.npy", npy(1, NPY_DICT("<f4", "False", "(2, 3)"), 24));
  CheckRun r;
  check_begin(&r);
  add_param(&r, "w", DT_FP16, 2, dims_3x2, SRC_SAFETENSORS, "model.safetensors", "a");
  add_param(&r, "v", DT_FP32, 1, dims_4, SRC_NPY, "w.npy", NULL);
  add_param(&r, "s", DT_FP32, 0, NULL, SRC_NPY, "w.npy", NULL);
  check_expect(&r, "orionc: error: shape mismatch for 'w': declared fp16[3,2] but 'model.safetensors' holds 'a' as "
                   "[2,3]\n"
                   "orionc: error: shape mismatch for 'v': declared fp32[4] but 'w.npy' holds [2,3]\n"
                   "orionc: error: shape mismatch for 's': declared fp32[] but 'w.npy' holds [2,3]\n");
}

Test(check, wrong_dtype) {
  write_in_tmp("model.safetensors", safetensors(TWO_TENSORS, 28));
  write_in_tmp("w.npy", npy(1, NPY_DICT("<f4", "False", "(2, 3)"), 24));
  CheckRun r;
  check_begin(&r);
  add_param(&r, "w", DT_INT32, 2, dims_2x3, SRC_SAFETENSORS, "model.safetensors", "a");
  add_param(&r, "v", DT_FP16, 1, dims_4, SRC_SAFETENSORS, "model.safetensors", "b");
  add_param(&r, "u", DT_UINT8, 2, dims_2x3, SRC_NPY, "w.npy", NULL);
  check_expect(&r, "orionc: error: dtype mismatch for 'w': declared int32 but 'a' in 'model.safetensors' is F16\n"
                   "orionc: error: dtype mismatch for 'v': declared fp16 but 'b' in 'model.safetensors' is I32\n"
                   "orionc: error: dtype mismatch for 'u': declared uint8 but 'w.npy' is F32\n");
}

Test(check, wrong_shape_and_dtype) {
  write_in_tmp("w.npy", npy(1, NPY_DICT("<i4", "False", "(2, 3)"), 24));
  CheckRun r;
  check_begin(&r);
  add_param(&r, "w", DT_FP16, 2, dims_3x2, SRC_NPY, "w.npy", NULL);
  check_expect(&r, "orionc: error: shape mismatch for 'w': declared fp16[3,2] but 'w.npy' holds [2,3]\n"
                   "orionc: error: dtype mismatch for 'w': declared fp16 but 'w.npy' is I32\n");
}

Test(check, missing_key) {
  write_in_tmp("model.safetensors", safetensors(TWO_TENSORS, 28));
  CheckRun r;
  check_begin(&r);
  add_param(&r, "w", DT_FP16, 2, dims_2x3, SRC_SAFETENSORS, "model.safetensors", "wte.weight");
  check_expect(&r, "orionc: error: cannot read weights for 'w' from 'model.safetensors': no tensor named 'wte.weight' "
                   "in the file (it holds 'a', 'b')\n");
}

Test(check, unreadable_files) {
  write_in_tmp("bad.npy", raw("PK\x03\x04", 4));
  char sub[PATH_MAX];
  snprintf(sub, sizeof sub, "%s/sub.npy", tmp.path);
  cr_assert_eq(mkdir(sub, 0700), 0);
  CheckRun r;
  check_begin(&r);
  add_param(&r, "a", DT_FP16, 2, dims_2x3, SRC_NPY, "bad.npy", NULL);
  add_param(&r, "b", DT_FP16, 2, dims_2x3, SRC_NPY, "sub.npy", NULL);
  check_expect(&r, "orionc: error: cannot read weights for 'a' from 'bad.npy': not a .npy file (bad magic)\n"
                   "orionc: error: cannot read weights for 'b': 'sub.npy' is not a regular file\n");
}

Test(check, base_dir_with_trailing_slash) {
  write_in_tmp("w.npy", npy(1, NPY_DICT("<f4", "False", "(2, 3)"), 24));
  char base[PATH_MAX];
  snprintf(base, sizeof base, "%s/", tmp.path);
  CheckRun r;
  check_begin(&r);
  r.m->base_dir = base;
  add_param(&r, "w", DT_FP32, 2, dims_2x3, SRC_NPY, "w.npy", NULL);
  check_expect(&r, "");
}

Test(check, stops_at_error_limit) {
  CheckRun r;
  check_begin(&r);
  r.d.error_limit = 2;
  add_param(&r, "a", DT_FP16, 1, dims_4, SRC_NPY, "a.npy", NULL);
  add_param(&r, "b", DT_FP16, 1, dims_4, SRC_NPY, "b.npy", NULL);
  add_param(&r, "c", DT_FP16, 1, dims_4, SRC_NPY, "c.npy", NULL);
  check_expect(&r, "orionc: error: cannot read weights for 'a': cannot open 'a.npy': No such file or directory\n"
                   "orionc: error: cannot read weights for 'b': cannot open 'b.npy': No such file or directory\n"
                   "orionc: fatal error: too many errors emitted, stopping now (limit is 2; see -ferror-limit)\n");
}
