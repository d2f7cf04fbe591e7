/*
 * Tests of weights_materialize: the bytes of a param in its dtype.
 *
 * Modules are built by hand with one param each. Initializer values are
 * checked against an independent implementation of the generator written
 * here from docs/weights.md (its own SplitMix64 and ziggurat, one scalar
 * double operation at a time, on the table of the fixture), compared bit for bit, and against a fixture
 * that the doc's numpy code wrote (weights_fixture.h), with every build of
 * the generator (portable, AVX2, AVX-512) that this CPU runs. The
 * documented worked example is checked against numbers computed outside C.
 * File weights are written byte by byte into a fresh
 * directory under /tmp, with expected fp16 bits spelled out by hand for the
 * rounding cases (ties, subnormals, single rounding from double), and every
 * diagnostic is compared as text.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "orion/fp16.h"
#include "orion/weights.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The generator is defined with separate roundings (see weights_data.c). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* ---- temporary directory and files ---------------------------------------- */

typedef struct TempDir {
  char path[64];
} TempDir;

static TempDir tmp;

static void tmp_setup(void) {
  strcpy(tmp.path, "/tmp/orion-wdata-XXXXXX");
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
    remove(p);
  }
  closedir(dir);
  rmdir(tmp.path);
}

static void put_le(uint8_t *p, uint64_t v, int nbytes) {
  for (int i = 0; i < nbytes; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void write_bytes(const char *name, const void *a, size_t alen, const void *b, size_t blen) {
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s/%s", tmp.path, name);
  FILE *f = fopen(p, "wb");
  cr_assert_not_null(f);
  cr_assert_eq(fwrite(a, 1, alen, f), alen);
  if (blen) cr_assert_eq(fwrite(b, 1, blen, f), blen);
  cr_assert_eq(fclose(f), 0);
}

/* A safetensors file holding one tensor `key` of the given dtype and shape
 * (a JSON list such as "[2,3]"). The header is padded with spaces so that
 * the data starts `misalign` bytes past a multiple of 8. */
static void write_safetensors(const char *name, const char *key, const char *dtype, const char *shape,
                              const void *data, size_t nbytes, size_t misalign) {
  char json[512];
  int jlen = snprintf(json, sizeof json, "{\"%s\":{\"dtype\":\"%s\",\"shape\":%s,\"data_offsets\":[0,%zu]}}", key,
                      dtype, shape, nbytes);
  cr_assert(jlen > 0 && (size_t)jlen < sizeof json - 16);
  size_t hlen = (size_t)jlen;
  while ((8 + hlen) % 8 != misalign) json[hlen++] = ' ';
  uint8_t *head = malloc(8 + hlen);
  cr_assert_not_null(head);
  put_le(head, hlen, 8);
  memcpy(head + 8, json, hlen);
  write_bytes(name, head, 8 + hlen, data, nbytes);
  free(head);
}

/* A version 1.0 .npy file with the data starting at a multiple of 64. */
static void write_npy(const char *name, const char *descr, const char *shape, const void *data, size_t nbytes) {
  char dict[256];
  int dlen = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
  cr_assert(dlen > 0 && (size_t)dlen < sizeof dict);
  size_t hlen = (size_t)dlen + 1;
  hlen += (64 - (10 + hlen) % 64) % 64;
  uint8_t *head = malloc(10 + hlen);
  cr_assert_not_null(head);
  memcpy(head, "\x93NUMPY\x01\x00", 8);
  put_le(head + 8, hlen, 2);
  memcpy(head + 10, dict, (size_t)dlen);
  memset(head + 10 + dlen, ' ', hlen - (size_t)dlen - 1);
  head[10 + hlen - 1] = '\n';
  write_bytes(name, head, 10 + hlen, data, nbytes);
  free(head);
}

/* ---- modules ---------------------------------------------------------------- */

typedef struct Run {
  IrModule *m;
  IrFuncId f;
  StrBuf cap;
  Diag d;
} Run;

static void run_begin(Run *r) {
  r->m = ir_module_new();
  r->m->base_dir = tmp.path;
  r->f = ir_func_new(r->m, "main", (SrcSpan){0});
  sb_init(&r->cap);
  diag_init(&r->d, NULL);
  r->d.capture = &r->cap;
}

static void run_end(Run *r) {
  ir_module_free(r->m);
  sb_free(&r->cap);
}

static const char *diags(const Run *r) { return r->cap.data ? r->cap.data : ""; }

static IrValueId add_param(Run *r, IrDType dt, uint8_t rank, const int64_t *dims, IrParamSource src) {
  IrType t = {.dtype = dt, .rank = rank};
  for (uint8_t i = 0; i < rank; i++) t.dims[i] = dims[i];
  return ir_param_new(r->m, r->f, "w", &t, &src, (SrcSpan){0});
}

static IrValueId add_vector(Run *r, IrDType dt, int64_t n, IrParamSource src) { return add_param(r, dt, 1, &n, src); }

/* Materializes and expects success with `expected_bytes` bytes and the given
 * diagnostics ("" for none). */
static void *load_ok(Run *r, IrValueId v, bool clamp, size_t expected_bytes, const char *expected_diags) {
  WeightLoadOptions opt = {.clamp_fp16 = clamp};
  size_t nbytes = 12345;
  void *data = weights_materialize(r->m, v, &opt, &r->d, &nbytes);
  cr_assert_not_null(data, "failed: %s", diags(r));
  cr_assert_eq(nbytes, expected_bytes);
  cr_assert_str_eq(diags(r), expected_diags);
  return data;
}

/* Materializes and expects failure with exactly these diagnostics. */
static void load_fails(Run *r, IrValueId v, bool clamp, const char *expected_diags) {
  WeightLoadOptions opt = {.clamp_fp16 = clamp};
  size_t nbytes = 12345;
  void *data = weights_materialize(r->m, v, &opt, &r->d, &nbytes);
  cr_assert_null(data);
  cr_assert_str_eq(diags(r), expected_diags);
  cr_assert(r->d.nerrors > 0);
}

static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* ---- the reference generator, from docs/weights.md ------------------------- */

static uint64_t ref_next(uint64_t *state) {
  *state += UINT64_C(0x9E3779B97F4A7C15);
  uint64_t z = *state;
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

static double ref_unit(uint64_t *state) { return ldexp((double)(ref_next(state) >> 11), -53); }

/* n values of uniform(seed, low, high) or normal(seed, mean, std), in double. */
static double *ref_uniform(uint64_t seed, double low, double high, size_t n) {
  double *v = malloc((n ? n : 1) * sizeof *v);
  cr_assert_not_null(v);
  uint64_t s = seed;
  for (size_t i = 0; i < n; i++) {
    double u = ref_unit(&s);
    v[i] = low + (high - low) * u;
  }
  return v;
}

/* The values the doc's numpy code computed (the ziggurat's table among them). */
typedef struct WeightsFixture {
  const char *name;
  IrParamSourceKind kind;
  uint64_t seed;
  double a, b;
  size_t count, first; /* elements first .. first+count-1 */
  const uint64_t *f64; /* the doubles' bits */
  const uint32_t *f32;
  const uint16_t *f16;
} WeightsFixture;

#include "weights_fixture.h"

static double bits_f64(uint64_t u) {
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

/* log(w) for w in (0, 1], exactly as docs/weights.md spells it out, with its
 * constants computed here the way the doc defines them. */
static double ref_log(double w) {
  int e;
  double m = 2.0 * frexp(w, &e);
  e -= 1;
  if (m > sqrt(2.0)) {
    m /= 2.0;
    e += 1;
  }
  double s = (m - 1.0) / (m + 1.0), s2 = s * s, h = 2.0 * s;
  double p = 1.0 / 19;
  for (int n = 8; n >= 1; n--) p = p * s2 + 1.0 / (2 * n + 1);
  return (double)e * log(2.0) + (h + h * (s2 * p));
}

/* One element of `normal`, from its draw z: the ziggurat of the doc, every
 * step on the scalar path (no first-try shortcut). */
static double ref_normal_element(uint64_t z) {
  const uint64_t *X = fixture_zig_x, *F = fixture_zig_f;
  const double r = bits_f64(X[1]);
  uint64_t state = z;
  for (;;) {
    unsigned layer = z & 1023;
    double x = ldexp((double)(z >> 11), -53) * bits_f64(X[layer]);
    double edge = bits_f64(X[layer]), inner = bits_f64(X[layer + 1]);
    if (!(x < inner)) {
      if (layer == 0) {
        double a, b;
        do {
          a = ref_log(1.0 - ref_unit(&state)) / r;
          b = ref_log(1.0 - ref_unit(&state));
        } while (!(-(b + b) > a * a));
        x = r - a;
      } else {
        double w = ref_unit(&state), chord = (edge - x) / (edge - inner);
        bool above_chord_convex = inner >= 1.0 && w > chord, below_chord_concave = edge <= 1.0 && w < chord;
        double lo = bits_f64(F[layer]), hi = bits_f64(F[layer + 1]);
        if (above_chord_convex ||
            (!below_chord_concave && !(ref_log(lo + w * (hi - lo)) < -0.5 * (x * x)))) {
          z = ref_next(&state);
          continue;
        }
      }
    }
    return (z >> 10) & 1 ? -x : x;
  }
}

static double *ref_normal(uint64_t seed, double mean, double std, size_t n) {
  double *v = malloc((n ? n : 1) * sizeof *v);
  cr_assert_not_null(v);
  uint64_t st = seed;
  for (size_t i = 0; i < n; i++) v[i] = mean + std * ref_normal_element(ref_next(&st));
  return v;
}

static void expect_fp32_equal(const float *got, const double *want, size_t n) {
  for (size_t i = 0; i < n; i++) {
    float w = (float)want[i];
    cr_assert_eq(f32_bits(got[i]), f32_bits(w), "element %zu: got %a, want %a", i, (double)got[i], (double)w);
  }
}

static void expect_fp16_equal(const uint16_t *got, const double *want, size_t n) {
  for (size_t i = 0; i < n; i++)
    cr_assert_eq(got[i], fp16_from_double(want[i]), "element %zu: got 0x%04x, want 0x%04x", i, got[i],
                 fp16_from_double(want[i]));
}

/* ---- initializers --------------------------------------------------------------- */

Test(init, zeros_and_ones_in_every_dtype, .init = tmp_setup, .fini = tmp_teardown) {
  static const struct {
    IrDType dt;
    size_t size;
    uint32_t one; /* little-endian bits of 1 */
  } cases[] = {{DT_FP16, 2, 0x3C00}, {DT_FP32, 4, 0x3F800000}, {DT_INT32, 4, 1},
               {DT_INT8, 1, 1},      {DT_UINT8, 1, 1},          {DT_BOOL, 1, 1}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    Run r;
    run_begin(&r);
    int64_t dims[2] = {3, 5};
    IrValueId z = add_param(&r, cases[c].dt, 2, dims, (IrParamSource){.kind = SRC_ZEROS});
    IrValueId o = add_param(&r, cases[c].dt, 2, dims, (IrParamSource){.kind = SRC_ONES});
    uint8_t *zb = load_ok(&r, z, false, 15 * cases[c].size, "");
    uint8_t *ob = load_ok(&r, o, false, 15 * cases[c].size, "");
    for (size_t i = 0; i < 15 * cases[c].size; i++) {
      cr_assert_eq(zb[i], 0);
      cr_assert_eq(ob[i], (uint8_t)(cases[c].one >> (8 * (i % cases[c].size))), "dtype %d byte %zu", cases[c].dt, i);
    }
    free(zb);
    free(ob);
    run_end(&r);
  }
}

Test(init, fill_rounds_once, .init = tmp_setup, .fini = tmp_teardown) {
  Run r;
  run_begin(&r);
  IrValueId a = add_vector(&r, DT_FP16, 3, (IrParamSource){.kind = SRC_FILL, .a = 0.1});
  IrValueId b = add_vector(&r, DT_FP32, 3, (IrParamSource){.kind = SRC_FILL, .a = 0.1});
  /* 1 + 2^-11 + 2^-40: through fp32 it would become the tie 1 + 2^-11 and
   * round to 1.0; rounded once from double it goes up to 1 + 2^-10. */
  IrValueId c = add_vector(&r, DT_FP16, 1, (IrParamSource){.kind = SRC_FILL, .a = 1.0 + 0x1p-11 + 0x1p-40});
  /* Just under 65520 rounds down to 65504: in range. */
  IrValueId e = add_vector(&r, DT_FP16, 2, (IrParamSource){.kind = SRC_FILL, .a = -65519.99});
  IrValueId i8 = add_vector(&r, DT_INT8, 3, (IrParamSource){.kind = SRC_FILL, .a = -3});
  IrValueId i32 = add_vector(&r, DT_INT32, 2, (IrParamSource){.kind = SRC_FILL, .a = -2147483648.0});
  IrValueId u8 = add_vector(&r, DT_UINT8, 2, (IrParamSource){.kind = SRC_FILL, .a = 255});
  uint16_t *ha = load_ok(&r, a, false, 6, "");
  for (int i = 0; i < 3; i++) cr_assert_eq(ha[i], 0x2E66);
  float *fb = load_ok(&r, b, false, 12, "");
  for (int i = 0; i < 3; i++) cr_assert_eq(f32_bits(fb[i]), f32_bits(0.1f));
  uint16_t *hc = load_ok(&r, c, false, 2, "");
  cr_assert_eq(hc[0], 0x3C01);
  uint16_t *he = load_ok(&r, e, false, 4, "");
  cr_assert_eq(he[0], 0xFBFF);
  cr_assert_eq(he[1], 0xFBFF);
  int8_t *b8 = load_ok(&r, i8, false, 3, "");
  for (int i = 0; i < 3; i++) cr_assert_eq(b8[i], -3);
  int32_t *b32 = load_ok(&r, i32, false, 8, "");
  cr_assert_eq(b32[0], INT32_MIN);
  cr_assert_eq(b32[1], INT32_MIN);
  uint8_t *bu = load_ok(&r, u8, false, 2, "");
  cr_assert_eq(bu[1], 255);
  free(ha), free(fb), free(hc), free(he), free(b8), free(b32), free(bu);
  run_end(&r);
}

Test(init, fill_out_of_range, .init = tmp_setup, .fini = tmp_teardown) {
  Run r;
  run_begin(&r);
  IrValueId v = add_vector(&r, DT_FP16, 4, (IrParamSource){.kind = SRC_FILL, .a = 70000});
  load_fails(&r, v, false,
             "orionc: error: weight 'w' from fill(70000) has the value 70000 at index 0, beyond fp16's range (65504); "
             "pass --clamp-fp16 to clamp\n");
  run_end(&r);

  run_begin(&r);
  v = add_vector(&r, DT_FP16, 4, (IrParamSource){.kind = SRC_FILL, .a = -65520});
  uint16_t *h = load_ok(&r, v, true, 8,
                        "orionc: warning: weight 'w' from fill(-65520): clamped 4 values beyond fp16's range to "
                        "+-65504\n");
  for (int i = 0; i < 4; i++) cr_assert_eq(h[i], 0xFBFF);
  free(h);
  run_end(&r);

  run_begin(&r);
  v = add_vector(&r, DT_INT8, 2, (IrParamSource){.kind = SRC_FILL, .a = 2.5});
  load_fails(&r, v, false, "orionc: error: weight 'w' from fill(2.5) has the value 2.5, which int8 cannot hold\n");
  run_end(&r);

  run_begin(&r);
  v = add_vector(&r, DT_FP32, 2, (IrParamSource){.kind = SRC_FILL, .a = 1e39});
  load_fails(&r, v, false,
             "orionc: error: weight 'w' from fill(1e+39) has the value 1e+39 at index 0, beyond fp32's range "
             "(3.40282347e+38)\n");
  run_end(&r);
}

Test(init, uniform_matches_reference, .init = tmp_setup, .fini = tmp_teardown) {
  Run r;
  run_begin(&r);
  /* Sizes across several conversion chunks, odd on purpose. */
  const size_t n = 10001;
  IrParamSource src = {.kind = SRC_UNIFORM, .seed = 12345, .a = -0.25, .b = 0.75};
  IrValueId a = add_vector(&r, DT_FP32, (int64_t)n, src);
  IrValueId b = add_vector(&r, DT_FP16, (int64_t)n, src);
  double *want = ref_uniform(12345, -0.25, 0.75, n);
  float *fa = load_ok(&r, a, false, n * 4, "");
  uint16_t *hb = load_ok(&r, b, false, n * 2, "");
  expect_fp32_equal(fa, want, n);
  expect_fp16_equal(hb, want, n);
  for (size_t i = 0; i < n; i++) cr_assert(fa[i] >= -0.25f && fa[i] <= 0.75f);
  free(want), free(fa), free(hb);
  run_end(&r);
}

Test(init, normal_matches_reference, .init = tmp_setup, .fini = tmp_teardown) {
  static const size_t sizes[] = {1, 2, 7, 4096, 4097, 12289};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    size_t n = sizes[s];
    Run r;
    run_begin(&r);
    IrParamSource src = {.kind = SRC_NORMAL, .seed = 140737488355327ull, .a = 0.5, .b = 0.02};
    int64_t dims[2] = {1, (int64_t)n};
    IrValueId a = add_param(&r, DT_FP32, 2, dims, src);
    IrValueId b = add_param(&r, DT_FP16, 2, dims, src);
    double *want = ref_normal(src.seed, 0.5, 0.02, n);
    float *fa = load_ok(&r, a, false, n * 4, "");
    uint16_t *hb = load_ok(&r, b, false, n * 2, "");
    expect_fp32_equal(fa, want, n);
    expect_fp16_equal(hb, want, n);
    free(want), free(fa), free(hb);
    run_end(&r);
  }
}

/* The worked example of docs/weights.md, computed in Python with numpy
 * (not with this code): seed 1. */
Test(init, documented_example, .init = tmp_setup, .fini = tmp_teardown) {
  uint64_t s = 1;
  cr_assert_eq(ref_next(&s), UINT64_C(0x910A2DEC89025CC1));
  cr_assert_eq(ref_next(&s), UINT64_C(0xBEEB8DA1658EEC67));
  Run r;
  run_begin(&r);
  IrValueId u = add_vector(&r, DT_FP32, 4, (IrParamSource){.kind = SRC_UNIFORM, .seed = 1, .a = -1, .b = 1});
  IrValueId uh = add_vector(&r, DT_FP16, 4, (IrParamSource){.kind = SRC_UNIFORM, .seed = 1, .a = -1, .b = 1});
  IrValueId z = add_vector(&r, DT_FP32, 4, (IrParamSource){.kind = SRC_NORMAL, .seed = 1, .a = 0, .b = 0.02});
  IrValueId zh = add_vector(&r, DT_FP16, 3, (IrParamSource){.kind = SRC_NORMAL, .seed = 1, .a = 0, .b = 0.02});
  uint32_t *fu = load_ok(&r, u, false, 16, "");
  uint16_t *hu = load_ok(&r, uh, false, 8, "");
  uint32_t *fz = load_ok(&r, z, false, 16, "");
  uint16_t *hz = load_ok(&r, zh, false, 6, "");
  static const uint32_t want_fu[4] = {0x3E08516F, 0x3EFBAE37, 0x3F712746, 0xBDE3E797};
  static const uint16_t want_hu[4] = {0x3043, 0x37DD, 0x3B89, 0xAF1F};
  static const uint32_t want_fz[4] = {0xBCCAF8AC, 0xBD189A20, 0xBD11613E, 0x3C91B3CF};
  static const uint16_t want_hz[3] = {0xA658, 0xA8C5, 0xA88B};
  for (int i = 0; i < 4; i++) {
    cr_assert_eq(fu[i], want_fu[i], "uniform %d", i);
    cr_assert_eq(hu[i], want_hu[i], "uniform fp16 %d", i);
    cr_assert_eq(fz[i], want_fz[i], "normal %d", i);
    if (i < 3) cr_assert_eq(hz[i], want_hz[i], "normal fp16 %d", i);
  }
  free(fu), free(hu), free(fz), free(hz);
  run_end(&r);
  /* The doubles of the normal example, before rounding, and element 29,
   * the first to retry (its first point was above the curve). */
  static const double want_z[4] = {-0.02477677950988747, -0.03725636177953721, -0.03549312934957709,
                                   0.01778593509680057};
  double got[30];
  weights_random_values(&(IrParamSource){.kind = SRC_NORMAL, .seed = 1, .a = 0, .b = 0.02}, 0, 30, got);
  for (int i = 0; i < 4; i++) cr_assert_eq(got[i], want_z[i], "normal double %d: %.17g", i, got[i]);
  cr_assert_eq(got[29], 0.03314580174459425, "normal double 29: %.17g", got[29]);
  cr_assert_eq(f32_bits((float)got[29]), 0x3D07C3E4);
  cr_assert_eq(fp16_from_double(got[29]), 0x283E);
}

Test(init, normal_out_of_fp16_range, .init = tmp_setup, .fini = tmp_teardown) {
  const size_t n = 5000;
  IrParamSource src = {.kind = SRC_NORMAL, .seed = 9, .a = 0, .b = 30000};
  double *want = ref_normal(9, 0, 30000, n);
  size_t first = n, count = 0;
  for (size_t i = 0; i < n; i++)
    if (fabs(want[i]) >= 65520) {
      if (first == n) first = i;
      count++;
    }
  cr_assert(count > 1 && first < n);
  char expected[512];
  char buf[40];
  for (int prec = 1; prec <= 17; prec++) { /* shortest round-trip form, as messages print it */
    snprintf(buf, sizeof buf, "%.*g", prec, want[first]);
    if (strtod(buf, NULL) == want[first]) break;
  }
  snprintf(expected, sizeof expected,
           "orionc: error: weight 'w' from normal(seed=9, mean=0, std=30000) has the value %s at index %zu, beyond "
           "fp16's range (65504); pass --clamp-fp16 to clamp\n",
           buf, first);
  Run r;
  run_begin(&r);
  IrValueId v = add_vector(&r, DT_FP16, (int64_t)n, src);
  load_fails(&r, v, false, expected);
  run_end(&r);

  snprintf(expected, sizeof expected,
           "orionc: warning: weight 'w' from normal(seed=9, mean=0, std=30000): clamped %zu values beyond fp16's "
           "range to +-65504\n",
           count);
  run_begin(&r);
  v = add_vector(&r, DT_FP16, (int64_t)n, src);
  uint16_t *h = load_ok(&r, v, true, n * 2, expected);
  for (size_t i = 0; i < n; i++) {
    uint16_t w = fabs(want[i]) >= 65520 ? (want[i] < 0 ? 0xFBFF : 0x7BFF) : fp16_from_double(want[i]);
    cr_assert_eq(h[i], w, "element %zu", i);
  }
  free(h);
  free(want);
  run_end(&r);
}

Test(init, empty_and_scalar, .init = tmp_setup, .fini = tmp_teardown) {
  Run r;
  run_begin(&r);
  IrValueId e = add_vector(&r, DT_FP16, 0, (IrParamSource){.kind = SRC_NORMAL, .seed = 1, .b = 1});
  IrValueId s = add_param(&r, DT_FP32, 0, NULL, (IrParamSource){.kind = SRC_UNIFORM, .seed = 1, .a = -1, .b = 1});
  void *eb = load_ok(&r, e, false, 0, "");
  uint32_t *sb = load_ok(&r, s, false, 4, "");
  cr_assert_eq(*sb, 0x3E08516F);
  free(eb), free(sb);
  run_end(&r);
}

/* ---- safetensors ------------------------------------------------------------- */

/* Rounding cases of fp32 -> fp16, with their expected bits worked out by hand. */
static const struct {
  uint32_t f32;
  uint16_t f16;
} f32_cases[] = {
    {0x3F800000, 0x3C00}, /* 1 */
    {0x3F801000, 0x3C00}, /* 1 + 2^-11: halfway between 1 and 1 + 2^-10, ties to even (down) */
    {0x3F803000, 0x3C02}, /* 1 + 3*2^-11: halfway, ties to even (up) */
    {0x3F801001, 0x3C01}, /* just above halfway: up */
    {0xBDCCCCCD, 0xAE66}, /* -0.1 */
    {0x33800000, 0x0001}, /* 2^-24: the smallest subnormal */
    {0x33C00000, 0x0002}, /* 3*2^-25: halfway between subnormals 1 and 2, ties to even (2) */
    {0x33000000, 0x0000}, /* 2^-25: halfway between 0 and 2^-24, ties to even (0) */
    {0x387FC000, 0x03FF}, /* the largest subnormal */
    {0x477FE000, 0x7BFF}, /* 65504 */
    {0x477FEFFF, 0x7BFF}, /* just under 65520 rounds down to 65504 */
    {0x80000000, 0x8000}, /* -0 */
};
#define NF32_CASES (sizeof f32_cases / sizeof f32_cases[0])

Test(safetensors, f32_to_fp16_aligned_and_not, .init = tmp_setup, .fini = tmp_teardown) {
  uint32_t data[NF32_CASES];
  for (size_t i = 0; i < NF32_CASES; i++) data[i] = f32_cases[i].f32;
  for (size_t misalign = 0; misalign < 4; misalign++) {
    write_safetensors("m.safetensors", "k", "F32", "[3,4]", data, sizeof data, misalign);
    Run r;
    run_begin(&r);
    int64_t dims[2] = {3, 4};
    IrValueId v =
        add_param(&r, DT_FP16, 2, dims, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "m.safetensors", .key = "k"});
    uint16_t *h = load_ok(&r, v, false, NF32_CASES * 2, "");
    for (size_t i = 0; i < NF32_CASES; i++)
      cr_assert_eq(h[i], f32_cases[i].f16, "misalign %zu, case %zu: got 0x%04x", misalign, i, h[i]);
    free(h);
    run_end(&r);
  }
}

Test(safetensors, f32_large_multi_chunk, .init = tmp_setup, .fini = tmp_teardown) {
  const size_t n = 3 * 4096 + 17;
  float *data = malloc(n * sizeof *data);
  cr_assert_not_null(data);
  for (size_t i = 0; i < n; i++) data[i] = (float)i * 0.5f - 3000.0f;
  write_safetensors("m.safetensors", "k", "F32", "[12305]", data, n * 4, 4);
  Run r;
  run_begin(&r);
  IrValueId a = add_vector(&r, DT_FP16, (int64_t)n, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "m.safetensors", .key = "k"});
  IrValueId b = add_vector(&r, DT_FP32, (int64_t)n, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "m.safetensors", .key = "k"});
  uint16_t *h = load_ok(&r, a, false, n * 2, "");
  float *f = load_ok(&r, b, false, n * 4, "");
  for (size_t i = 0; i < n; i++) {
    cr_assert_eq(h[i], fp16_from_double((double)data[i]), "element %zu", i);
    cr_assert_eq(f32_bits(f[i]), f32_bits(data[i]));
  }
  free(h), free(f), free(data);
  run_end(&r);
}

Test(safetensors, bf16_f16_f64, .init = tmp_setup, .fini = tmp_teardown) {
  /* BF16: 1.0, -2.5, the largest bf16 below 65520 in fp16 terms, a bf16 subnormal. */
  static const uint16_t bf[4] = {0x3F80, 0xC020, 0x477F, 0x0001};
  write_safetensors("bf.safetensors", "t", "BF16", "[4]", bf, sizeof bf, 3);
  static const uint16_t f16[3] = {0x3C00, 0x8001, 0x7BFF};
  write_safetensors("h.safetensors", "t", "F16", "[3]", f16, sizeof f16, 1);
  /* F64: single rounding case, 0.1, a value that rounds to fp32's largest. */
  static const double f64[3] = {1.0 + 0x1p-11 + 0x1p-40, 0.1, -65519.0};
  write_safetensors("d.safetensors", "t", "F64", "[3]", f64, sizeof f64, 5);

  Run r;
  run_begin(&r);
  IrParamSource sb = {.kind = SRC_SAFETENSORS, .path = "bf.safetensors", .key = "t"};
  IrParamSource sh = {.kind = SRC_SAFETENSORS, .path = "h.safetensors", .key = "t"};
  IrParamSource sd = {.kind = SRC_SAFETENSORS, .path = "d.safetensors", .key = "t"};
  uint32_t *bf32 = load_ok(&r, add_vector(&r, DT_FP32, 4, sb), false, 16, "");
  uint16_t *bf16h = load_ok(&r, add_vector(&r, DT_FP16, 4, sb), false, 8, "");
  uint16_t *hh = load_ok(&r, add_vector(&r, DT_FP16, 3, sh), false, 6, "");
  float *hf = load_ok(&r, add_vector(&r, DT_FP32, 3, sh), false, 12, "");
  uint16_t *dh = load_ok(&r, add_vector(&r, DT_FP16, 3, sd), false, 6, "");
  float *df = load_ok(&r, add_vector(&r, DT_FP32, 3, sd), false, 12, "");
  for (int i = 0; i < 4; i++) {
    cr_assert_eq(bf32[i], (uint32_t)bf[i] << 16, "bf16 %d", i);
    cr_assert_eq(f32_bits(bf16_to_float(bf[i])), bf32[i]);
  }
  /* 65280 is exact in fp16; the bf16 subnormal (about 9e-41) flushes to +0. */
  static const uint16_t want_bf16h[4] = {0x3C00, 0xC100, 0x7BF8, 0x0000};
  for (int i = 0; i < 4; i++) cr_assert_eq(bf16h[i], want_bf16h[i], "bf16 -> fp16 %d: 0x%04x", i, bf16h[i]);
  for (int i = 0; i < 3; i++) cr_assert_eq(hh[i], f16[i]);
  cr_assert_eq(f32_bits(hf[0]), 0x3F800000);
  cr_assert_eq(f32_bits(hf[1]), 0xB3800000); /* -2^-24 */
  cr_assert_eq(f32_bits(hf[2]), 0x477FE000);
  static const uint16_t want_dh[3] = {0x3C01, 0x2E66, 0xFBFF};
  for (int i = 0; i < 3; i++) cr_assert_eq(dh[i], want_dh[i], "f64 -> fp16 %d: 0x%04x", i, dh[i]);
  cr_assert_eq(f32_bits(df[0]), 0x3F801000); /* 1 + 2^-11 in fp32 */
  cr_assert_eq(f32_bits(df[1]), f32_bits(0.1f));
  cr_assert_eq(f32_bits(df[2]), f32_bits(-65519.0f));
  free(bf32), free(bf16h), free(hh), free(hf), free(dh), free(df);
  run_end(&r);
}

Test(safetensors, ints_and_bool, .init = tmp_setup, .fini = tmp_teardown) {
  static const int64_t i64[6] = {0, -1, 2147483647, INT32_MIN, 42, -7};
  static const int32_t i32[3] = {5, -6, INT32_MAX};
  static const uint8_t u8[3] = {0, 128, 255};
  static const uint8_t b[4] = {0, 1, 1, 0};
  write_safetensors("m64.safetensors", "k", "I64", "[2,3]", i64, sizeof i64, 7);
  write_safetensors("m32.safetensors", "k", "I32", "[3]", i32, sizeof i32, 2);
  write_safetensors("mu8.safetensors", "k", "U8", "[3]", u8, sizeof u8, 1);
  write_safetensors("mb.safetensors", "k", "BOOL", "[4]", b, sizeof b, 0);
  Run r;
  run_begin(&r);
  int64_t dims[2] = {2, 3};
  int32_t *a = load_ok(
      &r, add_param(&r, DT_INT32, 2, dims, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "m64.safetensors", .key = "k"}),
      false, 24, "");
  for (int i = 0; i < 6; i++) cr_assert_eq(a[i], (int32_t)i64[i]);
  int32_t *c = load_ok(
      &r, add_vector(&r, DT_INT32, 3, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "m32.safetensors", .key = "k"}),
      false, 12, "");
  cr_assert_eq(memcmp(c, i32, 12), 0);
  uint8_t *u = load_ok(
      &r, add_vector(&r, DT_UINT8, 3, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "mu8.safetensors", .key = "k"}),
      false, 3, "");
  cr_assert_eq(memcmp(u, u8, 3), 0);
  uint8_t *bb = load_ok(
      &r, add_vector(&r, DT_BOOL, 4, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "mb.safetensors", .key = "k"}),
      false, 4, "");
  cr_assert_eq(memcmp(bb, b, 4), 0);
  free(a), free(c), free(u), free(bb);
  run_end(&r);
}

Test(safetensors, i64_out_of_int32, .init = tmp_setup, .fini = tmp_teardown) {
  static const int64_t i64[6] = {0, 1, 2, 3, 4, 3000000000};
  write_safetensors("f.safetensors", "k", "I64", "[6]", i64, sizeof i64, 0);
  Run r;
  run_begin(&r);
  IrValueId v = add_vector(&r, DT_INT32, 6, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "f.safetensors", .key = "k"});
  load_fails(&r, v, false,
             "orionc: error: weight 'w' from 'f.safetensors' ('k') has the value 3000000000 at index 5, outside "
             "int32\n");
  run_end(&r);

  static const int64_t neg[2] = {-2147483649LL, 0};
  write_safetensors("g.safetensors", "k", "I64", "[2]", neg, sizeof neg, 0);
  run_begin(&r);
  v = add_vector(&r, DT_INT32, 2, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "g.safetensors", .key = "k"});
  load_fails(&r, v, false,
             "orionc: error: weight 'w' from 'g.safetensors' ('k') has the value -2147483649 at index 0, outside "
             "int32\n");
  run_end(&r);
}

/* ---- npy ------------------------------------------------------------------------ */

Test(npy, f4_to_fp16_and_small_ints, .init = tmp_setup, .fini = tmp_teardown) {
  uint32_t data[NF32_CASES];
  for (size_t i = 0; i < NF32_CASES; i++) data[i] = f32_cases[i].f32;
  write_npy("w.npy", "<f4", "(2, 6)", data, sizeof data);
  static const int8_t i8[5] = {-128, -1, 0, 1, 127};
  write_npy("i.npy", "|i1", "(5,)", i8, sizeof i8);
  static const uint8_t b1[4] = {0, 1, 2, 0}; /* numpy reads any nonzero byte as True */
  write_npy("b.npy", "|b1", "(4,)", b1, sizeof b1);
  Run r;
  run_begin(&r);
  int64_t dims[2] = {2, 6};
  uint16_t *h = load_ok(&r, add_param(&r, DT_FP16, 2, dims, (IrParamSource){.kind = SRC_NPY, .path = "w.npy"}),
                        false, NF32_CASES * 2, "");
  for (size_t i = 0; i < NF32_CASES; i++) cr_assert_eq(h[i], f32_cases[i].f16, "case %zu", i);
  int8_t *c = load_ok(&r, add_vector(&r, DT_INT8, 5, (IrParamSource){.kind = SRC_NPY, .path = "i.npy"}), false, 5, "");
  cr_assert_eq(memcmp(c, i8, 5), 0);
  uint8_t *bb = load_ok(&r, add_vector(&r, DT_BOOL, 4, (IrParamSource){.kind = SRC_NPY, .path = "b.npy"}), false, 4, "");
  static const uint8_t want_b[4] = {0, 1, 1, 0};
  cr_assert_eq(memcmp(bb, want_b, 4), 0);
  free(h), free(c), free(bb);
  run_end(&r);
}

Test(npy, absolute_path_and_scalar, .init = tmp_setup, .fini = tmp_teardown) {
  float one = 1.5f;
  write_npy("s.npy", "<f4", "()", &one, sizeof one);
  char abs[PATH_MAX];
  snprintf(abs, sizeof abs, "%s/s.npy", tmp.path);
  Run r;
  run_begin(&r);
  r.m->base_dir = "/nonexistent";
  uint16_t *h = load_ok(&r, add_param(&r, DT_FP16, 0, NULL, (IrParamSource){.kind = SRC_NPY, .path = abs}), false, 2, "");
  cr_assert_eq(*h, 0x3E00);
  free(h);
  run_end(&r);
}

/* ---- NaN and range ---------------------------------------------------------------- */

Test(checks, nan_is_an_error, .init = tmp_setup, .fini = tmp_teardown) {
  float data[20];
  for (int i = 0; i < 20; i++) data[i] = (float)i;
  data[17] = bits_f32(0x7FC00000);
  data[19] = bits_f32(0xFF800001); /* a signalling NaN later on */
  write_safetensors("model.safetensors", "key", "F32", "[20]", data, sizeof data, 0);
  write_npy("w.npy", "<f4", "(20,)", data, sizeof data);
  IrParamSource st = {.kind = SRC_SAFETENSORS, .path = "model.safetensors", .key = "key"};
  for (int clamp = 0; clamp < 2; clamp++) {
    Run r;
    run_begin(&r);
    load_fails(&r, add_vector(&r, DT_FP16, 20, st), clamp,
               "orionc: error: weight 'w' from 'model.safetensors' ('key') has NaN at index 17\n");
    run_end(&r);
  }
  Run r;
  run_begin(&r);
  load_fails(&r, add_vector(&r, DT_FP32, 20, st), false,
             "orionc: error: weight 'w' from 'model.safetensors' ('key') has NaN at index 17\n");
  run_end(&r);
  run_begin(&r);
  load_fails(&r, add_vector(&r, DT_FP16, 20, (IrParamSource){.kind = SRC_NPY, .path = "w.npy"}), false,
             "orionc: error: weight 'w' from 'w.npy' has NaN at index 17\n");
  run_end(&r);

  /* fp16 and bf16 NaNs, deep in a later chunk. */
  const size_t n = 9000;
  uint16_t *h = calloc(n, 2);
  cr_assert_not_null(h);
  h[8500] = 0xFE01;
  write_safetensors("h.safetensors", "k", "F16", "[9000]", h, n * 2, 0);
  h[8500] = 0;
  h[4100] = 0x7FC1;
  write_safetensors("b.safetensors", "k", "BF16", "[9000]", h, n * 2, 0);
  free(h);
  run_begin(&r);
  load_fails(&r, add_vector(&r, DT_FP32, (int64_t)n, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "h.safetensors", .key = "k"}),
             false, "orionc: error: weight 'w' from 'h.safetensors' ('k') has NaN at index 8500\n");
  run_end(&r);
  run_begin(&r);
  load_fails(&r, add_vector(&r, DT_FP16, (int64_t)n, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "b.safetensors", .key = "k"}),
             false, "orionc: error: weight 'w' from 'b.safetensors' ('k') has NaN at index 4100\n");
  run_end(&r);
}

/* A conversion large enough to run on several threads reports the first
 * problem of the whole tensor, whichever thread met it, and counts clamped
 * values over all of them. */
Test(checks, threaded_conversion_reports_the_first_problem, .init = tmp_setup, .fini = tmp_teardown) {
  const size_t n = 3u << 20;
  float *data = calloc(n, sizeof *data);
  cr_assert_not_null(data);
  data[2900000] = bits_f32(0x7FC00000);
  data[1500001] = bits_f32(0x7FC00000);
  data[2000000] = 1e6f;
  data[300] = -1e6f;
  data[n - 1] = 7e4f;
  write_safetensors("big.safetensors", "k", "F32", "[3145728]", data, n * 4, 0);
  data[2900000] = data[1500001] = 0;
  write_safetensors("over.safetensors", "k", "F32", "[3145728]", data, n * 4, 0);
  free(data);
  Run r;
  run_begin(&r);
  load_fails(&r, add_vector(&r, DT_FP16, (int64_t)n, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "big.safetensors", .key = "k"}),
             false,
             "orionc: error: weight 'w' from 'big.safetensors' ('k') has NaN at index 1500001\n"
             "orionc: error: weight 'w' from 'big.safetensors' ('k') has the value -1000000 at index 300, beyond "
             "fp16's range (65504); pass --clamp-fp16 to clamp\n");
  run_end(&r);
  run_begin(&r);
  load_fails(&r, add_vector(&r, DT_FP16, (int64_t)n, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "over.safetensors", .key = "k"}),
             false,
             "orionc: error: weight 'w' from 'over.safetensors' ('k') has the value -1000000 at index 300, beyond "
             "fp16's range (65504); pass --clamp-fp16 to clamp\n");
  run_end(&r);
  run_begin(&r);
  uint16_t *h = load_ok(&r, add_vector(&r, DT_FP16, (int64_t)n, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "over.safetensors", .key = "k"}),
                        true, n * 2,
                        "orionc: warning: weight 'w' from 'over.safetensors' ('k'): clamped 3 values beyond fp16's range "
                        "to +-65504\n");
  cr_assert_eq(h[300], 0xFBFF);
  cr_assert_eq(h[2000000], 0x7BFF);
  cr_assert_eq(h[n - 1], 0x7BFF);
  free(h);
  run_end(&r);
}

Test(checks, beyond_fp16_range, .init = tmp_setup, .fini = tmp_teardown) {
  float data[6] = {1, 2, 65519.0f, 70000.0f, -1e30f, 3};
  write_safetensors("model.safetensors", "key", "F32", "[6]", data, sizeof data, 0);
  IrParamSource st = {.kind = SRC_SAFETENSORS, .path = "model.safetensors", .key = "key"};
  Run r;
  run_begin(&r);
  load_fails(&r, add_vector(&r, DT_FP16, 6, st), false,
             "orionc: error: weight 'w' from 'model.safetensors' ('key') has the value 70000 at index 3, beyond "
             "fp16's range (65504); pass --clamp-fp16 to clamp\n");
  run_end(&r);

  run_begin(&r);
  uint16_t *h = load_ok(&r, add_vector(&r, DT_FP16, 6, st), true, 12,
                        "orionc: warning: weight 'w' from 'model.safetensors' ('key'): clamped 2 values beyond fp16's "
                        "range to +-65504\n");
  static const uint16_t want[6] = {0x3C00, 0x4000, 0x7BFF, 0x7BFF, 0xFBFF, 0x4200};
  for (int i = 0; i < 6; i++) cr_assert_eq(h[i], want[i], "element %d: 0x%04x", i, h[i]);
  cr_assert_eq(r.d.nwarnings, 1);
  free(h);
  /* The same file into fp32 is fine. */
  float *f = load_ok(&r, add_vector(&r, DT_FP32, 6, st), false, 24,
                     "orionc: warning: weight 'w' from 'model.safetensors' ('key'): clamped 2 values beyond fp16's "
                     "range to +-65504\n");
  cr_assert_eq(memcmp(f, data, sizeof data), 0);
  free(f);
  run_end(&r);

  /* A non-integral value prints in the shortest form that reads back as the float. */
  float frac[2] = {0, 70000.1f};
  write_safetensors("frac.safetensors", "k", "F32", "[2]", frac, sizeof frac, 0);
  run_begin(&r);
  load_fails(&r, add_vector(&r, DT_FP16, 2, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "frac.safetensors", .key = "k"}),
             false,
             "orionc: error: weight 'w' from 'frac.safetensors' ('k') has the value 70000.1 at index 1, beyond fp16's "
             "range (65504); pass --clamp-fp16 to clamp\n");
  run_end(&r);
}

Test(checks, infinities, .init = tmp_setup, .fini = tmp_teardown) {
  float data[4] = {1, bits_f32(0xFF800000), 2, bits_f32(0x7F800000)};
  write_safetensors("m.safetensors", "k", "F32", "[4]", data, sizeof data, 0);
  uint16_t h16[3] = {0, 0, 0x7C00};
  write_npy("h.npy", "<f2", "(3,)", h16, sizeof h16);
  IrParamSource st = {.kind = SRC_SAFETENSORS, .path = "m.safetensors", .key = "k"};
  Run r;
  run_begin(&r);
  load_fails(&r, add_vector(&r, DT_FP16, 4, st), false,
             "orionc: error: weight 'w' from 'm.safetensors' ('k') has the value -inf at index 1, beyond fp16's range "
             "(65504); pass --clamp-fp16 to clamp\n");
  run_end(&r);
  run_begin(&r);
  load_fails(&r, add_vector(&r, DT_FP16, 3, (IrParamSource){.kind = SRC_NPY, .path = "h.npy"}), false,
             "orionc: error: weight 'w' from 'h.npy' has the value inf at index 2, beyond fp16's range (65504); pass "
             "--clamp-fp16 to clamp\n");
  run_end(&r);
  run_begin(&r);
  uint16_t *h = load_ok(&r, add_vector(&r, DT_FP16, 4, st), true, 8,
                        "orionc: warning: weight 'w' from 'm.safetensors' ('k'): clamped 2 values beyond fp16's range "
                        "to +-65504\n");
  static const uint16_t want[4] = {0x3C00, 0xFBFF, 0x4000, 0x7BFF};
  for (int i = 0; i < 4; i++) cr_assert_eq(h[i], want[i]);
  free(h);
  run_end(&r);
  /* fp32 holds infinities as they are (e.g. attention masks). */
  run_begin(&r);
  float *f = load_ok(&r, add_vector(&r, DT_FP32, 4, st), false, 16, "");
  cr_assert_eq(memcmp(f, data, sizeof data), 0);
  free(f);
  run_end(&r);
}

Test(checks, f64_beyond_fp32_and_single_clamp, .init = tmp_setup, .fini = tmp_teardown) {
  static const double d[3] = {1, 1e39, -70000};
  write_safetensors("d.safetensors", "k", "F64", "[3]", d, sizeof d, 0);
  IrParamSource st = {.kind = SRC_SAFETENSORS, .path = "d.safetensors", .key = "k"};
  Run r;
  run_begin(&r);
  load_fails(&r, add_vector(&r, DT_FP32, 3, st), false,
             "orionc: error: weight 'w' from 'd.safetensors' ('k') has the value 1e+39 at index 1, beyond fp32's "
             "range (3.40282347e+38)\n");
  run_end(&r);
  run_begin(&r);
  uint16_t *h = load_ok(&r, add_vector(&r, DT_FP16, 3, st), true, 6,
                        "orionc: warning: weight 'w' from 'd.safetensors' ('k'): clamped 2 values beyond fp16's range "
                        "to +-65504\n");
  cr_assert_eq(h[1], 0x7BFF);
  cr_assert_eq(h[2], 0xFBFF);
  free(h);
  run_end(&r);
  static const double one[1] = {-65536};
  write_safetensors("one.safetensors", "k", "F64", "[1]", one, sizeof one, 0);
  run_begin(&r);
  h = load_ok(&r, add_vector(&r, DT_FP16, 1, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "one.safetensors", .key = "k"}),
              true, 2,
              "orionc: warning: weight 'w' from 'one.safetensors' ('k'): clamped 1 value beyond fp16's range to "
              "+-65504\n");
  cr_assert_eq(*h, 0xFBFF);
  free(h);
  run_end(&r);
}

/* ---- file problems ---------------------------------------------------------------- */

Test(files, missing_file_key_and_mismatches, .init = tmp_setup, .fini = tmp_teardown) {
  float data[4] = {1, 2, 3, 4};
  write_safetensors("m.safetensors", "k", "F32", "[2,2]", data, sizeof data, 0);
  Run r;
  run_begin(&r);
  load_fails(&r, add_vector(&r, DT_FP16, 4, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "nope.safetensors", .key = "k"}),
             false,
             "orionc: error: cannot read weights for 'w': cannot open 'nope.safetensors': No such file or directory\n");
  run_end(&r);
  run_begin(&r);
  load_fails(&r, add_vector(&r, DT_FP16, 4, (IrParamSource){.kind = SRC_NPY, .path = "nope.npy"}), false,
             "orionc: error: cannot read weights for 'w': cannot open 'nope.npy': No such file or directory\n");
  run_end(&r);
  run_begin(&r);
  load_fails(&r, add_vector(&r, DT_FP16, 4, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "m.safetensors", .key = "x"}),
             false, "orionc: error: cannot read weights for 'w' from 'm.safetensors': no tensor named 'x' in the file (it holds 'k')\n");
  run_end(&r);
  run_begin(&r);
  load_fails(&r, add_vector(&r, DT_FP16, 4, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "m.safetensors", .key = "k"}),
             false,
             "orionc: error: shape mismatch for 'w': declared fp16[4] but 'm.safetensors' holds 'k' as [2,2]\n");
  run_end(&r);
  run_begin(&r);
  int64_t dims[2] = {2, 2};
  load_fails(&r, add_param(&r, DT_INT32, 2, dims, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "m.safetensors", .key = "k"}),
             false, "orionc: error: dtype mismatch for 'w': declared int32 but 'k' in 'm.safetensors' is F32\n");
  run_end(&r);
  /* A directory, and a file that is not a .npy. */
  write_bytes("bad.npy", "hello", 5, NULL, 0);
  run_begin(&r);
  load_fails(&r, add_vector(&r, DT_FP16, 4, (IrParamSource){.kind = SRC_NPY, .path = "bad.npy"}), false,
             "orionc: error: cannot read weights for 'w' from 'bad.npy': not a .npy file (bad magic)\n");
  run_end(&r);
  run_begin(&r);
  r.m->base_dir = "/";
  load_fails(&r, add_vector(&r, DT_FP16, 4, (IrParamSource){.kind = SRC_NPY, .path = "tmp"}), false,
             "orionc: error: cannot read weights for 'w': 'tmp' is not a regular file\n");
  run_end(&r);
}

Test(files, empty_tensor, .init = tmp_setup, .fini = tmp_teardown) {
  write_safetensors("e.safetensors", "k", "F32", "[0,3]", NULL, 0, 0);
  Run r;
  run_begin(&r);
  int64_t dims[2] = {0, 3};
  void *p = load_ok(&r, add_param(&r, DT_FP16, 2, dims, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "e.safetensors", .key = "k"}),
                    false, 0, "");
  free(p);
  run_end(&r);
}

/* Large initializers are generated on several threads with jump-ahead; the
 * result must not depend on the split: compare with the single-stream
 * reference, and check that problems found in a later range are merged
 * (first index, total count) as if generated in one pass. */
Test(init, threaded_generation_matches_reference, .init = tmp_setup, .fini = tmp_teardown) {
  const size_t n = (3u << 20) + 4097; /* several threads' worth, not a multiple of anything */
  IrParamSource src = {.kind = SRC_NORMAL, .seed = 77, .a = 0, .b = 0.02};
  double *want = ref_normal(77, 0, 0.02, n);
  Run r;
  run_begin(&r);
  IrValueId v = add_vector(&r, DT_FP16, (int64_t)n, src);
  uint16_t *h = load_ok(&r, v, false, n * 2, "");
  expect_fp16_equal(h, want, n);
  free(h);
  free(want);
  run_end(&r);

  IrParamSource big = {.kind = SRC_UNIFORM, .seed = 5, .a = -70000, .b = 70000};
  want = ref_uniform(5, -70000, 70000, n);
  size_t count = 0;
  for (size_t i = 0; i < n; i++) count += fabs(want[i]) >= 65520;
  char expected[256];
  snprintf(expected, sizeof expected,
           "orionc: warning: weight 'w' from uniform(seed=5, low=-70000, high=70000): clamped %zu values beyond "
           "fp16's range to +-65504\n", count);
  run_begin(&r);
  v = add_vector(&r, DT_FP16, (int64_t)n, big);
  h = load_ok(&r, v, true, n * 2, expected);
  free(h);
  free(want);
  run_end(&r);
}

/* Progress: reported on the calling thread, growing, and every byte it
 * reports done already has its final value (a snapshot taken in the
 * callback equals the result). */
typedef struct Progress {
  uint8_t *dst;
  size_t size, last;
  int calls;
  uint8_t *snapshot; /* the reported prefix, as it was when reported */
} Progress;

static void on_progress(void *ctx, size_t done) {
  Progress *p = ctx;
  cr_assert_gt(done, p->last, "progress went from %zu to %zu", p->last, done);
  cr_assert_leq(done, p->size);
  memcpy(p->snapshot + p->last, p->dst + p->last, done - p->last);
  p->last = done;
  p->calls++;
}

/* Claims open the destination for writing: its pages start inaccessible
 * and each claim makes them writable up to the claimed end, so a write
 * before its claim ends the test with SIGSEGV. */
static pthread_mutex_t claim_mu = PTHREAD_MUTEX_INITIALIZER;
static size_t claimed;

static void on_claim(void *ctx, size_t end) {
  Progress *p = ctx;
  cr_assert_leq(end, p->size);
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  pthread_mutex_lock(&claim_mu);
  if (end > claimed) {
    claimed = end;
    cr_assert_eq(mprotect(p->dst, (end + page - 1) / page * page, PROT_READ | PROT_WRITE), 0);
  }
  pthread_mutex_unlock(&claim_mu);
}

/* reports: whether progress is reported at all (how often depends on the
 * threads' scheduling; that the last report is the whole weight does not). */
static void materialize_with_progress(Run *r, IrValueId v, size_t size, bool reports) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE), mapped = (size + page - 1) / page * page;
  uint8_t *dst = mmap(NULL, mapped, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), *snapshot = malloc(size);
  cr_assert_neq(dst, MAP_FAILED);
  Progress p = {.dst = dst, .size = size, .snapshot = snapshot};
  claimed = 0;
  WeightLoadOptions opt = {.progress = on_progress, .claim = on_claim, .progress_ctx = &p};
  cr_assert(weights_materialize_into(r->m, v, &opt, &r->d, dst, size), "%s", diags(r));
  if (reports) {
    cr_assert_geq(p.calls, 1);
    cr_assert_eq(p.last, size, "the last report is the whole weight (%zu of %zu)", p.last, size);
  } else {
    cr_assert_eq(p.calls, 0);
  }
  cr_assert_eq(claimed, size, "claimed %zu of %zu bytes", claimed, size);
  cr_assert_eq(memcmp(snapshot, dst, p.last), 0, "bytes changed after they were reported done");
  munmap(dst, mapped);
  free(snapshot);
}

Test(init, progress_reports_final_bytes, .init = tmp_setup, .fini = tmp_teardown) {
  const size_t n = (5u << 20) + 1001; /* twenty slices and a bit */
  Run r;
  run_begin(&r);
  IrValueId v = add_vector(&r, DT_FP16, (int64_t)n, (IrParamSource){.kind = SRC_NORMAL, .seed = 9, .b = 1});
  materialize_with_progress(&r, v, n * 2, true);
  IrValueId u = add_vector(&r, DT_FP32, (int64_t)n, (IrParamSource){.kind = SRC_UNIFORM, .seed = 9, .a = -1, .b = 1});
  materialize_with_progress(&r, u, n * 4, true);
  /* A conversion from a file reports too, up to the whole tensor. */
  const size_t m = 3u << 20;
  float *data = malloc(m * sizeof *data);
  for (size_t i = 0; i < m; i++) data[i] = (float)(i % 100000) * 0.25f;
  write_safetensors("p.safetensors", "k", "F32", "[3145728]", data, m * 4, 0);
  IrValueId w = add_vector(&r, DT_FP16, (int64_t)m, (IrParamSource){.kind = SRC_SAFETENSORS, .path = "p.safetensors", .key = "k"});
  materialize_with_progress(&r, w, m * 2, true);
  free(data);
  /* Zeros are written at once: claimed whole, no progress. */
  IrValueId z = add_vector(&r, DT_FP16, 100000, (IrParamSource){.kind = SRC_ZEROS});
  materialize_with_progress(&r, z, 200000, false);
  run_end(&r);
}

/* ---- the numpy fixture and the generator's builds ------------------------------ */

static const WeightsCodePath code_paths[] = {WEIGHTS_CODE_PORTABLE, WEIGHTS_CODE_AVX2, WEIGHTS_CODE_AVX512};
static const char *const code_path_names[] = {"portable", "AVX2", "AVX-512"};

static uint64_t f64_bits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

/* orion's copy of the ziggurat table is the one the doc's code computes. */
#include "../backend/ziggurat_table.h"

Test(init, ziggurat_table_matches_the_doc) {
  cr_assert_eq(sizeof zig_x / sizeof zig_x[0], sizeof fixture_zig_x / sizeof fixture_zig_x[0]);
  for (size_t i = 0; i < sizeof zig_x / sizeof zig_x[0]; i++) {
    cr_assert_eq(f64_bits(zig_x[i]), fixture_zig_x[i], "X[%zu]", i);
    cr_assert_eq(f64_bits(zig_f[i]), fixture_zig_f[i], "F[%zu]", i);
  }
}

/* Every build of the generator this CPU runs reproduces, bit for bit, what
 * the numpy code of the doc computed: the doubles, and their fp32 and fp16
 * roundings as materialized weights. */
Test(init, matches_numpy_fixture_with_every_build, .init = tmp_setup, .fini = tmp_teardown) {
  size_t ran = 0;
  for (size_t p = 0; p < sizeof code_paths / sizeof code_paths[0]; p++) {
    if (!weights_use_code_path(code_paths[p])) continue;
    ran++;
    for (size_t c = 0; c < sizeof weights_fixture / sizeof weights_fixture[0]; c++) {
      const WeightsFixture *fx = &weights_fixture[c];
      IrParamSource src = {.kind = fx->kind, .seed = fx->seed, .a = fx->a, .b = fx->b};
      double *v = malloc(fx->count * sizeof *v);
      cr_assert_not_null(v);
      weights_random_values(&src, fx->first, fx->count, v);
      for (size_t i = 0; i < fx->count; i++)
        cr_assert_eq(f64_bits(v[i]), fx->f64[i], "%s build, %s element %zu: %.17g", code_path_names[p], fx->name,
                     fx->first + i, v[i]);
      free(v);
      size_t n = fx->first + fx->count;
      Run r;
      run_begin(&r);
      IrValueId a = add_vector(&r, DT_FP32, (int64_t)n, src);
      IrValueId b = add_vector(&r, DT_FP16, (int64_t)n, src);
      uint32_t *fa = load_ok(&r, a, false, n * 4, "");
      uint16_t *hb = load_ok(&r, b, false, n * 2, "");
      for (size_t i = 0; i < fx->count; i++) {
        cr_assert_eq(fa[fx->first + i], fx->f32[i], "%s build, %s fp32 element %zu", code_path_names[p], fx->name,
                     fx->first + i);
        cr_assert_eq(hb[fx->first + i], fx->f16[i], "%s build, %s fp16 element %zu", code_path_names[p], fx->name,
                     fx->first + i);
      }
      free(fa), free(hb);
      run_end(&r);
    }
  }
  weights_use_code_path(WEIGHTS_CODE_AUTO);
  cr_assert(ran >= 1);
}

/* The builds agree with each other and with the scalar reference on many
 * values (several chunks, odd counts, starting mid-stream), on ranges that
 * reach fp16's subnormals and its overflow, and however a large tensor is
 * split over threads. */
Test(init, every_build_gives_the_same_bits, .init = tmp_setup, .fini = tmp_teardown) {
  const size_t n = 3 * 4096 + 7, first = 2 * 4096 - 6;
  static const IrParamSource sources[] = {
      {.kind = SRC_NORMAL, .seed = 3, .a = 0, .b = 1},
      {.kind = SRC_NORMAL, .seed = UINT64_MAX, .a = 1e-5, .b = 1e-5},
      {.kind = SRC_UNIFORM, .seed = 8, .a = -0x1p-13, .b = 0x1p-13}, /* subnormals and the smallest normals */
      {.kind = SRC_UNIFORM, .seed = 9, .a = 65000, .b = 66000},      /* around fp16's largest value */
  };
  double *want = malloc((first + n) * sizeof *want), *got = malloc(n * sizeof *got);
  cr_assert(want && got);
  for (size_t s = 0; s < sizeof sources / sizeof sources[0]; s++) {
    const IrParamSource *src = &sources[s];
    double *ref = src->kind == SRC_NORMAL ? ref_normal(src->seed, src->a, src->b, first + n)
                                          : ref_uniform(src->seed, src->a, src->b, first + n);
    for (size_t p = 0; p < sizeof code_paths / sizeof code_paths[0]; p++) {
      if (!weights_use_code_path(code_paths[p])) continue;
      weights_random_values(src, 0, first + n, want);
      weights_random_values(src, first, n, got);
      for (size_t i = 0; i < first + n; i++)
        cr_assert_eq(f64_bits(want[i]), f64_bits(ref[i]), "%s build, source %zu, element %zu: %.17g, want %.17g",
                     code_path_names[p], s, i, want[i], ref[i]);
      for (size_t i = 0; i < n; i++)
        cr_assert_eq(f64_bits(got[i]), f64_bits(ref[first + i]), "%s build, source %zu, from %zu, element %zu",
                     code_path_names[p], s, first, first + i);
      Run r;
      run_begin(&r);
      IrValueId h = add_vector(&r, DT_FP16, (int64_t)n, *src);
      IrValueId f = add_vector(&r, DT_FP32, (int64_t)n, *src);
      WeightLoadOptions opt = {.clamp_fp16 = true};
      size_t nbytes;
      uint16_t *hv = weights_materialize(r.m, h, &opt, &r.d, &nbytes);
      float *fv = weights_materialize(r.m, f, &opt, &r.d, &nbytes);
      cr_assert(hv && fv);
      for (size_t i = 0; i < n; i++) {
        uint16_t wh = fp16_from_double(ref[i]);
        if ((wh & 0x7FFF) == 0x7C00) wh = (uint16_t)((wh & 0x8000) | 0x7BFF); /* clamped */
        cr_assert_eq(hv[i], wh, "%s build, source %zu, fp16 element %zu", code_path_names[p], s, i);
        cr_assert_eq(f32_bits(fv[i]), f32_bits((float)ref[i]), "%s build, source %zu, fp32 element %zu",
                     code_path_names[p], s, i);
      }
      free(hv), free(fv);
      run_end(&r);
    }
    free(ref);
  }
  free(want), free(got);

  /* A tensor large enough for threads, with each build: the same bytes. */
  const size_t big = (2u << 20) + 3;
  IrParamSource src = {.kind = SRC_NORMAL, .seed = 77, .a = 0, .b = 0.02};
  uint16_t *first_bytes = NULL;
  for (size_t p = 0; p < sizeof code_paths / sizeof code_paths[0]; p++) {
    if (!weights_use_code_path(code_paths[p])) continue;
    Run r;
    run_begin(&r);
    IrValueId v = add_vector(&r, DT_FP16, (int64_t)big, src);
    uint16_t *h = load_ok(&r, v, false, big * 2, "");
    if (!first_bytes) first_bytes = h;
    else {
      cr_assert(memcmp(h, first_bytes, big * 2) == 0, "%s build differs", code_path_names[p]);
      free(h);
    }
    run_end(&r);
  }
  free(first_bytes);
  weights_use_code_path(WEIGHTS_CODE_AUTO);
}
