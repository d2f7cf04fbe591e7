/*
 * Tests of the runtime's .npy tensors (orion/npy.h): write/read round trips
 * over every dtype and every rank, numpy's exact header bytes, files built
 * byte by byte (header versions 1.0 and 2.0), every rejection with its exact
 * message, and the fp32 <-> fp16 conversions.
 *
 * Files go into a fresh directory under /tmp; diagnostics are captured as
 * text and compared whole, so each test states exactly what a user sees.
 */
#include "orion/npy.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "orion/fp16.h"

/* ---- fixtures ------------------------------------------------------------ */

static char dir[64];

static void make_dir(void) { test_dir_make(dir, sizeof dir, "npy"); }
static void remove_dir(void) { test_dir_remove(dir); }

TestSuite(npy, .init = make_dir, .fini = remove_dir);

static void path_in_dir(char *buf, size_t len, const char *name) { snprintf(buf, len, "%s/%s", dir, name); }

static void write_bytes(const char *path, const void *data, size_t len) {
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f);
  cr_assert_eq(fwrite(data, 1, len, f), len);
  cr_assert_eq(fclose(f), 0);
}

/* An array of the given dtype and shape filled with a byte pattern that is a
 * valid value of every dtype (bool bytes are 0/1). */
static NpyArray make_array(OrionDType t, uint32_t rank, const int64_t *dims) {
  NpyArray a = {.dtype = t, .rank = rank};
  size_t n = 1;
  for (uint32_t i = 0; i < rank; i++) {
    a.dims[i] = dims[i];
    n *= (size_t)dims[i];
  }
  a.nbytes = n * orion_dtype_size(t);
  a.data = malloc(a.nbytes ? a.nbytes : 1);
  cr_assert_not_null(a.data);
  uint8_t *p = a.data;
  for (size_t i = 0; i < a.nbytes; i++) p[i] = t == ORION_DT_BOOL ? (uint8_t)(i % 3 == 0) : (uint8_t)(i * 7 + 1);
  return a;
}

static void assert_same(const NpyArray *a, const NpyArray *b) {
  cr_assert_eq(a->dtype, b->dtype);
  cr_assert_eq(a->rank, b->rank);
  for (uint32_t i = 0; i < a->rank; i++) cr_assert_eq(a->dims[i], b->dims[i], "dim %u", i);
  cr_assert_eq(a->nbytes, b->nbytes);
  cr_assert_not_null(b->data);
  cr_assert_eq(memcmp(a->data, b->data, a->nbytes), 0);
}

/* Writes a, checks the file's layout (64-byte aligned data, '\n' before it)
 * and reads it back. */
static void round_trip(const NpyArray *a, const char *name) {
  char path[128];
  path_in_dir(path, sizeof path, name);
  Capture c;
  capture_init(&c, "orion-run");
  cr_assert(npy_write(path, a, &c.d), "%s", captured(&c));
  size_t len;
  uint8_t *file = (uint8_t *)slurp(path, &len);
  cr_assert_geq(len, 10 + a->nbytes);
  size_t header = len - a->nbytes;
  cr_assert_eq(header % 64, 0, "%s: header of %zu bytes", name, header);
  cr_assert_eq(file[header - 1], '\n');
  cr_assert_eq(file[8] | file[9] << 8, (int)(header - 10));
  free(file);
  NpyArray b;
  cr_assert(npy_read(path, &b, &c.d), "%s", captured(&c));
  assert_same(a, &b);
  cr_assert_eq(c.text.len, 0);
  npy_free(&b);
  capture_free(&c);
}

/* ---- writing ------------------------------------------------------------- */

/* The 128 bytes numpy >= 1.24 writes for np.zeros((2, 3), np.float16): the
 * dict, 20 spaces for the first axis to grow to 21 digits, 38 spaces to reach
 * the 64-byte boundary, '\n'. */
static const char numpy_f2_2x3_header[] =
    "\x93NUMPY\x01\x00"
    "\x76\x00" /* 118 */
    "{'descr': '<f2', 'fortran_order': False, 'shape': (2, 3), }"
    "          " /* 10 spaces */
    "          " /* 10 spaces */
    "          " /* 10 spaces */
    "          " /* 10 spaces */
    "          " /* 10 spaces */
    "        " /* 8 spaces: 58 in all */
    "\n";

Test(npy, header_matches_numpy_byte_for_byte) {
  cr_assert_eq(sizeof numpy_f2_2x3_header - 1, 128);
  int64_t dims[] = {2, 3};
  NpyArray a = make_array(ORION_DT_FP16, 2, dims);
  memset(a.data, 0, a.nbytes);
  Capture c;
  capture_init(&c, "orion-run");
  uint8_t *bytes;
  size_t len;
  cr_assert(npy_encode(&a, "x.npy", &bytes, &len, &c.d), "%s", captured(&c));
  cr_assert_eq(len, 128 + 12);
  cr_assert_eq(memcmp(bytes, numpy_f2_2x3_header, 128), 0, "got %.*s", 118, (const char *)bytes + 10);
  for (size_t i = 128; i < len; i++) cr_assert_eq(bytes[i], 0);

  /* The file holds the same bytes. */
  char path[128];
  path_in_dir(path, sizeof path, "x.npy");
  cr_assert(npy_write(path, &a, &c.d), "%s", captured(&c));
  size_t flen;
  uint8_t *file = (uint8_t *)slurp(path, &flen);
  cr_assert_eq(flen, len);
  cr_assert_eq(memcmp(file, bytes, len), 0);
  free(file);
  free(bytes);
  npy_free(&a);
  capture_free(&c);
}

/* Checks the dict text (without padding) and total header size of an encoding. */
static void assert_dict(const NpyArray *a, const char *dict, size_t header_len) {
  Capture c;
  capture_init(&c, "orion-run");
  uint8_t *bytes;
  size_t len;
  cr_assert(npy_encode(a, "x.npy", &bytes, &len, &c.d), "%s", captured(&c));
  cr_assert_eq(len, header_len + a->nbytes);
  cr_assert_eq(memcmp(bytes + 10, dict, strlen(dict)), 0, "got %.*s", (int)(header_len - 10), (const char *)bytes + 10);
  for (size_t i = 10 + strlen(dict); i < header_len - 1; i++) cr_assert_eq(bytes[i], ' ');
  cr_assert_eq(bytes[header_len - 1], '\n');
  free(bytes);
  capture_free(&c);
}

Test(npy, header_spellings) {
  NpyArray scalar = make_array(ORION_DT_FP32, 0, NULL);
  assert_dict(&scalar, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 128);
  npy_free(&scalar);
  int64_t five[] = {5};
  NpyArray vec = make_array(ORION_DT_UINT8, 1, five);
  assert_dict(&vec, "{'descr': '|u1', 'fortran_order': False, 'shape': (5,), }", 128);
  npy_free(&vec);
  int64_t big[] = {1, 2, 3, 4, 123456};
  NpyArray b = make_array(ORION_DT_BOOL, 5, big);
  assert_dict(&b, "{'descr': '|b1', 'fortran_order': False, 'shape': (1, 2, 3, 4, 123456), }", 128);
  npy_free(&b);
  int64_t i1[] = {3, 0};
  NpyArray e = make_array(ORION_DT_INT8, 2, i1);
  assert_dict(&e, "{'descr': '|i1', 'fortran_order': False, 'shape': (3, 0), }", 128);
  npy_free(&e);
  NpyArray i4 = make_array(ORION_DT_INT32, 1, five);
  assert_dict(&i4, "{'descr': '<i4', 'fortran_order': False, 'shape': (5,), }", 128);
  npy_free(&i4);
}

/* When dict, growth spaces and '\n' already end on a 64-byte boundary,
 * numpy's padding formula still adds a full 64 spaces. The dicts below are
 * 95, 96 and 97 bytes long with 20 growth spaces (first dimension 1), so the
 * unpadded headers are 126, 127 and 128 bytes. */
Test(npy, header_on_a_boundary_gets_64_more) {
  static const int64_t second[] = {1000000000, 10000000000, 100000000000};
  static const char *const dicts[] = {
      "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1000000000, 1000000000, 1000000000, 0), }",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 10000000000, 1000000000, 1000000000, 0), }",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 100000000000, 1000000000, 1000000000, 0), }",
  };
  static const size_t header_len[] = {128, 128, 192};
  for (int i = 0; i < 3; i++) {
    NpyArray a = {.dtype = ORION_DT_FP32, .rank = 5, .dims = {1, second[i], 1000000000, 1000000000, 0}};
    assert_dict(&a, dicts[i], header_len[i]);
  }
}

Test(npy, round_trip_every_dtype) {
  static const OrionDType types[] = {ORION_DT_FP16, ORION_DT_FP32, ORION_DT_INT32,
                                     ORION_DT_INT8, ORION_DT_UINT8, ORION_DT_BOOL};
  int64_t dims[] = {3, 4};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    NpyArray a = make_array(types[i], 2, dims);
    char name[32];
    snprintf(name, sizeof name, "%s.npy", orion_dtype_name(types[i]));
    round_trip(&a, name);
    npy_free(&a);
  }
}

Test(npy, round_trip_every_rank) {
  static const int64_t dims[] = {2, 3, 1, 4, 5};
  for (uint32_t rank = 0; rank <= ORION_MAX_RANK; rank++) {
    NpyArray a = make_array(ORION_DT_FP16, rank, dims);
    char name[32];
    snprintf(name, sizeof name, "rank%u.npy", rank);
    round_trip(&a, name);
    npy_free(&a);
  }
  /* Empty arrays too. */
  int64_t empty[] = {4, 0, 2};
  NpyArray e = make_array(ORION_DT_FP32, 3, empty);
  round_trip(&e, "empty.npy");
  npy_free(&e);
}

Test(npy, write_overwrites_atomically) {
  int64_t dims[] = {2};
  NpyArray a = make_array(ORION_DT_INT32, 1, dims);
  round_trip(&a, "same.npy");
  ((int32_t *)a.data)[1] = -7;
  round_trip(&a, "same.npy");
  npy_free(&a);
}

Test(npy, write_rejections) {
  Capture c;
  capture_init(&c, "orion-run");
  int64_t dims[] = {2, 3};
  NpyArray a = make_array(ORION_DT_FP32, 2, dims);
  a.nbytes -= 4;
  cr_assert_not(npy_write("/tmp/never.npy", &a, &c.d));
  a.nbytes += 4;
  a.dtype = ORION_DT_NONE;
  cr_assert_not(npy_write("/tmp/never.npy", &a, &c.d));
  a.dtype = ORION_DT_FP32;
  a.dims[1] = -3;
  cr_assert_not(npy_write("/tmp/never.npy", &a, &c.d));
  a.dims[0] = a.dims[1] = (int64_t)1 << 40;
  cr_assert_not(npy_write("/tmp/never.npy", &a, &c.d));
  a.dims[0] = 2;
  a.dims[1] = 3;
  cr_assert_not(npy_write("/nonexistent-dir/x.npy", &a, &c.d));
  cr_assert_str_eq(captured(&c),
                   "orion-run: error: cannot write '/tmp/never.npy': the array's byte size does not match its shape and "
                   "dtype\n"
                   "orion-run: error: cannot write '/tmp/never.npy': the array has no valid dtype\n"
                   "orion-run: error: cannot write '/tmp/never.npy': the array has a negative dimension\n"
                   "orion-run: error: cannot write '/tmp/never.npy': the array's element count overflows\n"
                   "orion-run: error: cannot write '/nonexistent-dir/x.npy': No such file or directory\n");
  cr_assert_eq(access("/tmp/never.npy", F_OK), -1);
  npy_free(&a);
  capture_free(&c);
}

/* ---- reading files built byte by byte --------------------------------- */

typedef struct Bytes {
  uint8_t *data;
  size_t len;
} Bytes;

/* A .npy file of version major.0 with the dict text as given (ended by '\n',
 * unpadded: the format does not require padding) and data_len data bytes
 * 0, 1, 2, ... */
static Bytes npy_file(unsigned major, const char *dict, size_t data_len) {
  size_t dlen = strlen(dict) + 1, pre = major == 1 ? 10 : 12;
  Bytes b = {.len = pre + dlen + data_len};
  b.data = malloc(b.len);
  cr_assert_not_null(b.data);
  memcpy(b.data, "\x93NUMPY", 6);
  b.data[6] = (uint8_t)major;
  b.data[7] = 0;
  for (size_t i = 0; i < pre - 8; i++) b.data[8 + i] = (uint8_t)(dlen >> (8 * i));
  memcpy(b.data + pre, dict, dlen - 1);
  b.data[pre + dlen - 1] = '\n';
  for (size_t i = 0; i < data_len; i++) b.data[pre + dlen + i] = (uint8_t)i;
  return b;
}

Test(npy, reads_version_1_and_2) {
  Capture c;
  capture_init(&c, "orion-run");
  for (unsigned major = 1; major <= 3; major++) {
    Bytes b = npy_file(major, "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 1, 3)}", 24);
    NpyArray a;
    cr_assert(npy_read_bytes(b.data, b.len, "x.npy", &a, &c.d), "%s", captured(&c));
    cr_assert_eq(a.dtype, ORION_DT_INT32);
    cr_assert_eq(a.rank, 3);
    cr_assert_eq(a.dims[0], 2);
    cr_assert_eq(a.dims[1], 1);
    cr_assert_eq(a.dims[2], 3);
    cr_assert_eq(a.nbytes, 24);
    for (size_t i = 0; i < 24; i++) cr_assert_eq(((uint8_t *)a.data)[i], i);
    npy_free(&a);
    cr_assert_null(a.data);
    free(b.data);
  }
  /* Through a file, with double quotes, no spaces and fortran order on a
   * shape where it does not change the layout. */
  Bytes b = npy_file(2, "{\"shape\":(1,4),\"fortran_order\":True,\"descr\":\"<f2\"}", 8);
  char path[128];
  path_in_dir(path, sizeof path, "v2.npy");
  write_bytes(path, b.data, b.len);
  NpyArray a;
  cr_assert(npy_read(path, &a, &c.d), "%s", captured(&c));
  cr_assert_eq(a.dtype, ORION_DT_FP16);
  cr_assert_eq(a.rank, 2);
  cr_assert_eq(a.nbytes, 8);
  cr_assert_eq(((uint16_t *)a.data)[3], 0x0706);
  npy_free(&a);
  free(b.data);
  cr_assert_eq(c.text.len, 0);
  capture_free(&c);
}

Test(npy, reads_every_dtype_code) {
  static const struct {
    const char *descr;
    OrionDType t;
  } codes[] = {{"<f2", ORION_DT_FP16}, {"<f4", ORION_DT_FP32}, {"<i4", ORION_DT_INT32}, {"|i1", ORION_DT_INT8},
               {"|u1", ORION_DT_UINT8}, {"|b1", ORION_DT_BOOL}, {"<u1", ORION_DT_UINT8}, {"<b1", ORION_DT_BOOL}};
  Capture c;
  capture_init(&c, "orion-run");
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
    char dict[128];
    snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (), }", codes[i].descr);
    Bytes b = npy_file(1, dict, orion_dtype_size(codes[i].t));
    NpyArray a;
    cr_assert(npy_read_bytes(b.data, b.len, "x.npy", &a, &c.d), "%s: %s", codes[i].descr, captured(&c));
    cr_assert_eq(a.dtype, codes[i].t, "%s", codes[i].descr);
    cr_assert_eq(a.rank, 0);
    cr_assert_eq(a.nbytes, orion_dtype_size(codes[i].t));
    npy_free(&a);
    free(b.data);
  }
  capture_free(&c);
}

/* Reads bytes that must be rejected with exactly `message`. */
static void assert_rejected(const uint8_t *data, size_t len, const char *message) {
  Capture c;
  capture_init(&c, "orion-run");
  NpyArray a;
  memset(&a, 0xab, sizeof a);
  cr_assert_not(npy_read_bytes(data, len, "x.npy", &a, &c.d));
  cr_assert_null(a.data);
  cr_assert_eq(a.nbytes, 0);
  cr_assert_eq(c.d.nerrors, 1);
  char want[512];
  snprintf(want, sizeof want, "orion-run: error: %s\n", message);
  cr_assert_str_eq(captured(&c), want);
  capture_free(&c);
}

static void assert_dict_rejected(unsigned major, const char *dict, size_t data_len, const char *message) {
  Bytes b = npy_file(major, dict, data_len);
  assert_rejected(b.data, b.len, message);
  free(b.data);
}

Test(npy, rejections) {
  assert_rejected((const uint8_t *)"", 0, "'x.npy' is not a valid .npy file: not a .npy file (it is empty)");
  assert_rejected((const uint8_t *)"\x93NUMPZ\x01\x00", 8, "'x.npy' is not a valid .npy file: not a .npy file (bad magic)");
  assert_rejected((const uint8_t *)"PK\x03\x04", 4, "'x.npy' is not a valid .npy file: not a .npy file (bad magic)");
  assert_rejected((const uint8_t *)"\x93NUM", 4, "'x.npy' is not a valid .npy file: truncated .npy header");
  assert_rejected((const uint8_t *)"\x93NUMPY\x01\x00\x40", 9, "'x.npy' is not a valid .npy file: truncated .npy header");
  assert_rejected((const uint8_t *)"\x93NUMPY\x01\x00\x40\x00{}", 12,
                  "'x.npy' is not a valid .npy file: truncated .npy header: it claims 64 bytes but the file has 2 after "
                  "the preamble");
  assert_rejected((const uint8_t *)"\x93NUMPY\x04\x00\x00\x00", 10,
                  "'x.npy' is not a valid .npy file: unsupported .npy version 4.0");
  assert_dict_rejected(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8,
                       "'x.npy' is not a valid .npy file: big-endian .npy data is not supported");
  assert_dict_rejected(1, "{'descr': '<f2', 'fortran_order': True, 'shape': (2, 3), }", 12,
                       "'x.npy' is not a valid .npy file: fortran-order .npy data is not supported");
  assert_dict_rejected(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", 16,
                       "'x.npy' holds float64 data; write fp32 or fp16");
  assert_dict_rejected(2, "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", 16,
                       "'x.npy' holds int64 data; write int32");
  assert_dict_rejected(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 20,
                       "'x.npy' is not a valid .npy file: .npy data is truncated: the shape needs 24 bytes but the file "
                       "has 20");
  assert_dict_rejected(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 27,
                       "'x.npy' is not a valid .npy file: .npy file has 3 unexpected bytes after the data");
  assert_dict_rejected(1, "{'descr': '<c8', 'fortran_order': False, 'shape': (), }", 8,
                       "'x.npy' is not a valid .npy file: unsupported .npy dtype '<c8'");
  assert_dict_rejected(1, "{'descr': '<f4', 'shape': (), }", 4,
                       "'x.npy' is not a valid .npy file: .npy header has no 'fortran_order'");
  assert_dict_rejected(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1), }", 4,
                       "'x.npy' is not a valid .npy file: .npy array has rank above the limit of 5");
}

Test(npy, file_rejections) {
  Capture c;
  capture_init(&c, "orion-run");
  NpyArray a;
  char path[128];
  path_in_dir(path, sizeof path, "missing.npy");
  cr_assert_not(npy_read(path, &a, &c.d));
  cr_assert_null(a.data);
  cr_assert_not(npy_read(dir, &a, &c.d));
  Bytes b = npy_file(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", 8);
  path_in_dir(path, sizeof path, "f8.npy");
  write_bytes(path, b.data, b.len);
  free(b.data);
  cr_assert_not(npy_read(path, &a, &c.d));
  char want[1024];
  snprintf(want, sizeof want,
           "orion-run: error: cannot read '%s/missing.npy': No such file or directory\n"
           "orion-run: error: cannot read '%s': is a directory\n"
           "orion-run: error: '%s/f8.npy' holds float64 data; write fp32 or fp16\n",
           dir, dir, dir);
  cr_assert_str_eq(captured(&c), want);
  npy_free(&a); /* harmless on a rejected array */
  capture_free(&c);
}

/* ---- conversion ---------------------------------------------------------- */

static uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

Test(npy, fp32_to_fp16_rounds_to_nearest_even) {
  const float in[] = {
      1.0f + 0x1p-11f,       /* halfway between 1 and 1 + 2^-10: even is 1 */
      1.0f + 3 * 0x1p-11f,   /* halfway between 0x3c01 and 0x3c02: even is 0x3c02 */
      1.0f + 0x1p-11f + 0x1p-20f, /* just above halfway: up */
      65504.0f,              /* largest finite */
      65519.99f,             /* below the midpoint to 65536: stays finite */
      65520.0f,              /* the midpoint: ties to even, which is inf */
      -1e6f,                 /* overflow to -inf */
      0x1p-25f,              /* half the smallest subnormal: ties to even, 0 */
      3 * 0x1p-26f,          /* above that: the smallest subnormal */
      -0.0f,
  };
  const uint16_t want[] = {0x3c00, 0x3c02, 0x3c01, 0x7bff, 0x7bff, 0x7c00, 0xfc00, 0x0000, 0x0001, 0x8000};
  int64_t n = sizeof in / sizeof in[0];
  NpyArray a = {.dtype = ORION_DT_FP32, .rank = 1, .dims = {n}, .data = malloc(sizeof in), .nbytes = sizeof in};
  cr_assert_not_null(a.data);
  memcpy(a.data, in, sizeof in);
  Capture c;
  capture_init(&c, "orion-run");
  NpyArray h;
  cr_assert(npy_convert(&a, ORION_DT_FP16, &h, &c.d), "%s", captured(&c));
  cr_assert_eq(h.dtype, ORION_DT_FP16);
  cr_assert_eq(h.rank, 1);
  cr_assert_eq(h.dims[0], n);
  cr_assert_eq(h.nbytes, (size_t)n * 2);
  for (int64_t i = 0; i < n; i++)
    cr_assert_eq(((uint16_t *)h.data)[i], want[i], "element %lld: got 0x%04x", (long long)i, ((uint16_t *)h.data)[i]);
  npy_free(&h);
  npy_free(&a);
  capture_free(&c);
}

Test(npy, fp16_to_fp32_is_exact) {
  /* Every fp16 bit pattern, as a 256 x 256 array. */
  NpyArray a = {.dtype = ORION_DT_FP16, .rank = 2, .dims = {256, 256}, .data = malloc(65536 * 2), .nbytes = 65536 * 2};
  cr_assert_not_null(a.data);
  for (uint32_t i = 0; i < 65536; i++) ((uint16_t *)a.data)[i] = (uint16_t)i;
  Capture c;
  capture_init(&c, "orion-run");
  NpyArray f;
  cr_assert(npy_convert(&a, ORION_DT_FP32, &f, &c.d), "%s", captured(&c));
  cr_assert_eq(f.dtype, ORION_DT_FP32);
  cr_assert_eq(f.nbytes, 65536 * 4);
  const float *v = f.data;
  cr_assert_eq(float_bits(v[0x3c00]), float_bits(1.0f));
  cr_assert_eq(float_bits(v[0x0001]), float_bits(0x1p-24f));
  cr_assert_eq(float_bits(v[0x7bff]), float_bits(65504.0f));
  cr_assert_eq(float_bits(v[0xc000]), float_bits(-2.0f));
  cr_assert_eq(float_bits(v[0x8000]), float_bits(-0.0f));
  cr_assert(isinf(v[0x7c00]) && v[0x7c00] > 0);
  cr_assert(isnan(v[0x7e00]));
  /* Exact: converting back gives every non-NaN pattern unchanged. */
  NpyArray back;
  cr_assert(npy_convert(&f, ORION_DT_FP16, &back, &c.d), "%s", captured(&c));
  for (uint32_t i = 0; i < 65536; i++) {
    if (isnan(v[i])) continue;
    cr_assert_eq(((uint16_t *)back.data)[i], i, "pattern 0x%04x", i);
  }
  npy_free(&back);
  npy_free(&f);
  npy_free(&a);
  capture_free(&c);
}

Test(npy, convert_same_dtype_copies_and_others_fail) {
  int64_t dims[] = {3};
  NpyArray a = make_array(ORION_DT_INT8, 1, dims);
  Capture c;
  capture_init(&c, "orion-run");
  NpyArray b;
  cr_assert(npy_convert(&a, ORION_DT_INT8, &b, &c.d), "%s", captured(&c));
  assert_same(&a, &b);
  cr_assert_neq(a.data, b.data);
  npy_free(&b);
  cr_assert_not(npy_convert(&a, ORION_DT_FP16, &b, &c.d));
  cr_assert_null(b.data);
  NpyArray i = make_array(ORION_DT_INT32, 1, dims);
  cr_assert_not(npy_convert(&i, ORION_DT_FP32, &b, &c.d));
  NpyArray f = make_array(ORION_DT_FP32, 1, dims);
  cr_assert_not(npy_convert(&f, ORION_DT_INT32, &b, &c.d));
  f.nbytes = 5;
  cr_assert_not(npy_convert(&f, ORION_DT_FP16, &b, &c.d));
  cr_assert_str_eq(captured(&c), "orion-run: error: cannot convert int8 data to fp16\n"
                                 "orion-run: error: cannot convert int32 data to fp32\n"
                                 "orion-run: error: cannot convert fp32 data to int32\n"
                                 "orion-run: error: cannot convert the array: the array's byte size does not match "
                                 "its shape and dtype\n");
  npy_free(&f);
  npy_free(&i);
  npy_free(&a);
  capture_free(&c);
}
