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
 *
 * This file: the initializers and the generator's builds; the file sources
 * (safetensors, npy), the NaN and range checks and the file problems are in
 * test_weights_files.c; the shared helpers in weights_check.c.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "orion/fp16.h"
#include "orion/weights.h"
#include "weights_check.h"

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
