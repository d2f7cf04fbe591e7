/*
 * Weight materialization: the bytes of one param in its IR dtype.
 *
 * A param's source is either an initializer (zeros, ones, fill, normal,
 * uniform) or a tensor in a safetensors or .npy file. Initializers are
 * computed in double and rounded once to the dtype; the random ones use a
 * generator simple enough to redo in a few lines of numpy (docs/weights.md
 * spells it out). File tensors are memory-mapped, their header parsed again
 * from the mapping itself (so every offset used was checked against the bytes
 * actually mapped, whatever happened to the file since the check), and
 * converted to the param's dtype with a single round-to-nearest-even.
 *
 * The compiler runs this on every weight of a model (GPT-2 small: 124M
 * values), so conversions go a chunk at a time through tight loops: convert
 * a chunk, then scan its output for the rare special value (NaN, or
 * infinity where a finite value was expected) with a branch-free loop, and
 * only then look closer. Problems are collected while converting and
 * reported once per param at its location: NaN is always an error, a value
 * beyond fp16's range is an error unless the caller asked to clamp.
 */
#include "weights_internal.h"

#include "orion/fp16.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "weights_data.c copies little-endian file data as it is: a big-endian host needs byte swaps"
#endif

/* The generator's results are defined by separate roundings of each
 * operation; a fused multiply-add would change low bits (GCC in ISO C mode
 * does not fuse; clang does unless told). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* Elements per conversion step: the staging buffer and the output being
 * scanned stay in the L1 cache. Even, so that normal pairs never straddle. */
#define CHUNK 4096

/* Room for one header-parser message; longer ones are cut. */
#define WEIGHT_ERR_LEN 512

#define FP16_EXP_MASK 0x7C00u
#define FP16_MAX_BITS 0x7BFFu
#define FP32_EXP_MASK 0x7F800000u

/* 2*pi as a double, the same value as 2 * math.pi in Python. */
#define TWO_PI 6.283185307179586

/* ---- the output and its problems ----------------------------------------- */

typedef struct Out {
  const IrValue *param; /* stays valid: nothing here creates IR values */
  Diag *d;
  IrDType dtype;
  bool clamp; /* fp16 only: clamp out-of-range values instead of failing */
  uint64_t n; /* elements */
  void *data;
  /* Collected while converting, reported by finish(). */
  bool nan, over;
  uint64_t nan_at, over_at;
  double over_value;
  bool over_is_float; /* the value came from a float (not double) source: print it as one */
  uint64_t clamped;
} Out;

/* A number for a message: integers without exponent or ".0", others in the
 * shortest form that reads back as the same float (or double). */
static void put_number(StrBuf *sb, double v, bool as_float) {
  if (isnan(v)) {
    sb_puts(sb, "nan");
    return;
  }
  if (isinf(v)) {
    sb_puts(sb, v > 0 ? "inf" : "-inf");
    return;
  }
  char buf[40];
  if (v == floor(v) && fabs(v) < 1e15) {
    snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    int max_prec = as_float ? 9 : 17;
    for (int prec = 1; prec <= max_prec; prec++) {
      snprintf(buf, sizeof buf, "%.*g", prec, v);
      if (as_float ? (double)strtof(buf, NULL) == v : strtod(buf, NULL) == v) break;
    }
  }
  sb_puts(sb, buf);
}

/* How messages name where a weight came from: "'m.safetensors' ('wte')",
 * "'w.npy'", "normal(seed=1, mean=0, std=0.02)", "fill(0.5)". */
static void describe_source(StrBuf *sb, const IrParamSource *src) {
  switch (src->kind) {
  case SRC_ZEROS: sb_puts(sb, "zeros"); break;
  case SRC_ONES: sb_puts(sb, "ones"); break;
  case SRC_FILL:
    sb_puts(sb, "fill(");
    put_number(sb, src->a, false);
    sb_putc(sb, ')');
    break;
  case SRC_NORMAL:
  case SRC_UNIFORM:
    sb_printf(sb, "%s(seed=%llu, %s=", src->kind == SRC_NORMAL ? "normal" : "uniform",
              (unsigned long long)src->seed, src->kind == SRC_NORMAL ? "mean" : "low");
    put_number(sb, src->a, false);
    sb_puts(sb, src->kind == SRC_NORMAL ? ", std=" : ", high=");
    put_number(sb, src->b, false);
    sb_putc(sb, ')');
    break;
  case SRC_SAFETENSORS: sb_printf(sb, "'%s' ('%s')", src->path, src->key); break;
  case SRC_NPY: sb_printf(sb, "'%s'", src->path); break;
  }
}

static void note_nan(Out *o, uint64_t i) {
  if (!o->nan) {
    o->nan = true;
    o->nan_at = i;
  }
}

/* A finite value (or an infinity where fp16 needs a finite one) that the
 * dtype cannot hold. Returns the fp16 bits to store when clamping. */
static uint16_t note_over(Out *o, uint64_t i, double v, bool as_float) {
  if (o->dtype == DT_FP16 && o->clamp) {
    o->clamped++;
    return (uint16_t)((signbit(v) ? 0x8000u : 0) | FP16_MAX_BITS);
  }
  if (!o->over) {
    o->over = true;
    o->over_at = i;
    o->over_value = v;
    o->over_is_float = as_float;
  }
  return 0;
}

/* Reports what was collected; false if the weight is unusable. */
static bool finish(Out *o) {
  if (!o->nan && !o->over && !o->clamped) return true;
  const IrValue *p = o->param;
  StrBuf what;
  sb_init(&what);
  describe_source(&what, &p->src);
  if (o->nan)
    diag_error(o->d, p->loc, "weight '%s' from %s has NaN at index %llu", p->name, what.data,
               (unsigned long long)o->nan_at);
  if (o->over) {
    StrBuf v;
    sb_init(&v);
    put_number(&v, o->over_value, o->over_is_float);
    if (o->dtype == DT_FP16)
      diag_error(o->d, p->loc,
                 "weight '%s' from %s has the value %s at index %llu, beyond fp16's range (65504); pass "
                 "--clamp-fp16 to clamp",
                 p->name, what.data, v.data, (unsigned long long)o->over_at);
    else
      diag_error(o->d, p->loc, "weight '%s' from %s has the value %s at index %llu, beyond fp32's range (%.9g)",
                 p->name, what.data, v.data, (unsigned long long)o->over_at, (double)FLT_MAX);
    sb_free(&v);
  }
  bool ok = !o->nan && !o->over;
  if (ok)
    diag_warning(o->d, p->loc, "weight '%s' from %s: clamped %llu value%s beyond fp16's range to +-65504", p->name,
                 what.data, (unsigned long long)o->clamped, o->clamped == 1 ? "" : "s");
  sb_free(&what);
  return ok;
}

/* ---- rounding doubles (initializers) ---------------------------------------- */

/* Rounds k computed values to the float dtype, element `at` onwards. */
static void store_doubles(Out *o, uint64_t at, const double *v, size_t k) {
  if (o->dtype == DT_FP16) {
    uint16_t *h = (uint16_t *)o->data + at;
    for (size_t i = 0; i < k; i++) {
      h[i] = fp16_from_double(v[i]);
      if ((h[i] & FP16_EXP_MASK) != FP16_EXP_MASK) continue;
      if (isnan(v[i])) note_nan(o, at + i);
      else h[i] = note_over(o, at + i, v[i], false);
    }
  } else {
    float *f = (float *)o->data + at;
    for (size_t i = 0; i < k; i++) {
      f[i] = (float)v[i];
      if (isfinite(f[i])) continue;
      if (isnan(v[i])) note_nan(o, at + i);
      else note_over(o, at + i, v[i], false);
    }
  }
}

/* ---- initializers ------------------------------------------------------------ */

/* Copies the first element (size bytes) over the whole buffer by doubling. */
static void replicate(uint8_t *p, size_t size, uint64_t n) {
  size_t total = (size_t)n * size, done = size;
  while (done < total) {
    size_t step = done < total - done ? done : total - done;
    memcpy(p + done, p, step);
    done += step;
  }
}

static bool fill_value(Out *o, double v) {
  uint8_t *p = o->data;
  if (o->n == 0) return true;
  switch (o->dtype) {
  case DT_FP16:
  case DT_FP32:
    store_doubles(o, 0, &v, 1);
    if (o->clamped) o->clamped = o->n; /* every element is the clamped value */
    replicate(p, ir_dtype_size(o->dtype), o->n);
    return finish(o);
  default: break;
  }
  /* Integer dtypes hold the value exactly or not at all (the parser checks
   * this already; this guards modules built another way). */
  double lo = o->dtype == DT_INT32 ? -2147483648.0 : o->dtype == DT_INT8 ? -128 : 0;
  double hi = o->dtype == DT_INT32 ? 2147483647.0 : o->dtype == DT_INT8 ? 127 : o->dtype == DT_UINT8 ? 255 : 1;
  if (!(v >= lo && v <= hi && v == floor(v))) {
    StrBuf what, num;
    sb_init(&what);
    sb_init(&num);
    describe_source(&what, &o->param->src);
    put_number(&num, v, false);
    diag_error(o->d, o->param->loc, "weight '%s' from %s has the value %s, which %s cannot hold", o->param->name,
               what.data, num.data, ir_dtype_name(o->dtype));
    sb_free(&what);
    sb_free(&num);
    return false;
  }
  if (o->dtype == DT_INT32) {
    int32_t x = (int32_t)v;
    memcpy(p, &x, sizeof x);
    replicate(p, sizeof x, o->n);
  } else {
    memset(p, o->dtype == DT_INT8 ? (int)(uint8_t)(int8_t)v : (int)v, (size_t)o->n);
  }
  return true;
}

/* One uniform draw in [0, 1): the top 53 bits of a SplitMix64 output. */
static double next_unit(uint64_t *state) { return (double)(splitmix64(state) >> 11) * 0x1p-53; }

/* Generates elements [begin, end) of a random initializer; begin is a
 * multiple of CHUNK (so even), and the generator state for it is found by
 * jump-ahead: element i (uniform) or pair i/2 (normal) starts at draw i. */
static void gen_range(Out *o, uint64_t begin, uint64_t end) {
  const IrParamSource *src = &o->param->src;
  uint64_t state = src->seed + begin * SPLITMIX64_GAMMA;
  double v[CHUNK];
  for (uint64_t at = begin; at < end; at += CHUNK) {
    size_t k = end - at < CHUNK ? (size_t)(end - at) : CHUNK;
    if (src->kind == SRC_UNIFORM) {
      /* uniform(seed, low, high): low + (high - low) * u per element. */
      double low = src->a, span = src->b - src->a;
      for (size_t i = 0; i < k; i++) v[i] = low + span * next_unit(&state);
    } else {
      /* normal(seed, mean, std): Box-Muller on pairs of draws, z0 for even
       * elements and z1 for odd ones; an odd last element still draws a pair. */
      double mean = src->a, std = src->b;
      for (size_t i = 0; i < k; i += 2) {
        double u1 = 1.0 - next_unit(&state); /* in (0, 1]: log(u1) is finite */
        double u2 = next_unit(&state);
        double r = sqrt(-2.0 * log(u1));
        double t = TWO_PI * u2;
        v[i] = mean + std * (r * cos(t));
        if (i + 1 < k) v[i + 1] = mean + std * (r * sin(t));
      }
    }
    store_doubles(o, at, v, k);
  }
}

typedef struct GenTask {
  Out out; /* a private copy: its findings are merged afterwards */
  uint64_t begin, end;
} GenTask;

static void *gen_task(void *arg) {
  GenTask *t = arg;
  gen_range(&t->out, t->begin, t->end);
  return NULL;
}

/* Below this many elements threads cost more than they save. */
#define PARALLEL_MIN_ELEMENTS (1u << 20)
#define MAX_GEN_THREADS 16

/* Random initializers are the slowest weights to produce (hundreds of
 * millions of log/sin/cos for a GPT-2), so large ones are split over the
 * machine's cores; jump-ahead makes the result independent of the split. */
static bool gen_random(Out *o) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  uint64_t nthreads = o->n < PARALLEL_MIN_ELEMENTS || cores < 2 ? 1 : (uint64_t)(cores < MAX_GEN_THREADS ? cores : MAX_GEN_THREADS);
  GenTask tasks[MAX_GEN_THREADS];
  pthread_t threads[MAX_GEN_THREADS];
  uint64_t per = (o->n / nthreads + CHUNK - 1) / CHUNK * CHUNK;
  uint64_t started = 0;
  for (uint64_t i = 0; i < nthreads; i++) {
    tasks[i].out = *o;
    tasks[i].begin = i * per < o->n ? i * per : o->n;
    tasks[i].end = (i + 1) * per < o->n && i + 1 < nthreads ? (i + 1) * per : o->n;
    if (i == 0 || pthread_create(&threads[i], NULL, gen_task, &tasks[i]) != 0) continue;
    started |= 1ull << i;
  }
  gen_task(&tasks[0]);
  for (uint64_t i = 1; i < nthreads; i++) {
    if (started & (1ull << i)) pthread_join(threads[i], NULL);
    else gen_task(&tasks[i]); /* no thread could be made: do it here */
  }
  /* Merge what the ranges found, keeping the first index of each problem. */
  for (uint64_t i = 0; i < nthreads; i++) {
    const Out *t = &tasks[i].out;
    if (t->nan && (!o->nan || t->nan_at < o->nan_at)) {
      o->nan = true;
      o->nan_at = t->nan_at;
    }
    if (t->over && (!o->over || t->over_at < o->over_at)) {
      o->over = true;
      o->over_at = t->over_at;
      o->over_value = t->over_value;
      o->over_is_float = t->over_is_float;
    }
    o->clamped += t->clamped;
  }
  return finish(o);
}

static bool materialize_init(Out *o) {
  const IrParamSource *src = &o->param->src;
  switch (src->kind) {
  case SRC_ZEROS:
    memset(o->data, 0, (size_t)o->n * ir_dtype_size(o->dtype)); /* 0 bits are 0 in every dtype */
    return true;
  case SRC_ONES: return fill_value(o, 1.0);
  case SRC_FILL: return fill_value(o, src->a);
  default: break;
  }
  if (o->dtype != DT_FP16 && o->dtype != DT_FP32) {
    diag_error(o->d, o->param->loc, "weight '%s' is %s, but %s initializes only fp16 and fp32 weights",
               o->param->name, ir_dtype_name(o->dtype), src->kind == SRC_NORMAL ? "normal" : "uniform");
    return false;
  }
  return gen_random(o);
}

/* ---- file data: conversions ------------------------------------------------- */

/* Element i of float file data as a double (exact: every source float type
 * widens exactly). Only for messages, off the fast path. */
static double file_value(const uint8_t *src, WeightFileDType t, uint64_t i) {
  switch (t) {
  case WF_F16: {
    uint16_t h;
    memcpy(&h, src + 2 * i, 2);
    return (double)fp16_to_float(h);
  }
  case WF_BF16: {
    uint16_t b;
    memcpy(&b, src + 2 * i, 2);
    return (double)bf16_to_float(b);
  }
  case WF_F32: {
    float f;
    memcpy(&f, src + 4 * i, 4);
    return (double)f;
  }
  default: {
    double d;
    memcpy(&d, src + 8 * i, 8);
    return d;
  }
  }
}

/* Whether k fp16 values hold no NaN or infinity (the common case, no branches). */
static bool fp16_chunk_finite(const uint16_t *h, size_t k) {
  unsigned special = 0;
  for (size_t i = 0; i < k; i++) special |= (h[i] & FP16_EXP_MASK) == FP16_EXP_MASK;
  return !special;
}

static bool fp32_chunk_finite(const float *f, size_t k) {
  unsigned special = 0;
  for (size_t i = 0; i < k; i++) {
    uint32_t u;
    memcpy(&u, &f[i], sizeof u);
    special |= (u & FP32_EXP_MASK) == FP32_EXP_MASK;
  }
  return !special;
}

/* The slow path of a chunk of fp16 output with a NaN or infinity in it: a
 * NaN came from a NaN; an infinity from a value too large or an infinity. */
static void fp16_chunk_fix(Out *o, uint64_t at, size_t k, const uint8_t *src, WeightFileDType t) {
  uint16_t *h = (uint16_t *)o->data + at;
  for (size_t i = 0; i < k; i++) {
    if ((h[i] & FP16_EXP_MASK) != FP16_EXP_MASK) continue;
    if (h[i] & 0x3FFu) note_nan(o, at + i);
    else h[i] = note_over(o, at + i, file_value(src, t, at + i), t != WF_F64);
  }
}

/* The same for fp32 output: infinities in the file stay (fp32 holds them);
 * a finite F64 value that became one is out of range. */
static void fp32_chunk_fix(Out *o, uint64_t at, size_t k, const uint8_t *src, WeightFileDType t) {
  const float *f = (const float *)o->data + at;
  for (size_t i = 0; i < k; i++) {
    if (isnan(f[i])) note_nan(o, at + i);
    else if (isinf(f[i]) && t == WF_F64 && isfinite(file_value(src, t, at + i)))
      note_over(o, at + i, file_value(src, t, at + i), false);
  }
}

static size_t chunk_len(const Out *o, uint64_t at) { return o->n - at < CHUNK ? (size_t)(o->n - at) : CHUNK; }

static bool aligned_to(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

/* bf16 is the upper half of an fp32, so widening is a shift (what
 * bf16_to_float does), written here so that the loop vectorizes. */
static void widen_bf16(float *dst, const uint8_t *src, size_t k) {
  for (size_t i = 0; i < k; i++) {
    uint32_t u = (uint32_t)src[2 * i] << 16 | (uint32_t)src[2 * i + 1] << 24;
    memcpy(&dst[i], &u, sizeof u);
  }
}

static void to_fp16(Out *o, const uint8_t *src, WeightFileDType t) {
  uint16_t *out = o->data;
  float stage[CHUNK];
  if (t == WF_F16) memcpy(out, src, (size_t)o->n * 2);
  for (uint64_t at = 0; at < o->n; at += CHUNK) {
    size_t k = chunk_len(o, at);
    switch (t) {
    case WF_F16: break; /* copied above */
    case WF_F32: {
      const uint8_t *p = src + 4 * at;
      /* Safetensors data need not be 4-byte aligned; float loads must be. */
      const float *f = aligned_to(p, sizeof(float)) ? (const float *)(const void *)p : stage;
      if (f == stage) memcpy(stage, p, k * sizeof(float));
      fp16_from_float_array(out + at, f, k);
      break;
    }
    case WF_BF16:
      widen_bf16(stage, src + 2 * at, k);
      fp16_from_float_array(out + at, stage, k);
      break;
    default: /* WF_F64 */
      for (size_t i = 0; i < k; i++) {
        double d;
        memcpy(&d, src + 8 * (at + i), sizeof d);
        out[at + i] = fp16_from_double(d);
      }
      break;
    }
    if (!fp16_chunk_finite(out + at, k)) fp16_chunk_fix(o, at, k, src, t);
  }
}

static void to_fp32(Out *o, const uint8_t *src, WeightFileDType t) {
  float *out = o->data;
  uint16_t stage[CHUNK];
  if (t == WF_F32) memcpy(out, src, (size_t)o->n * 4);
  for (uint64_t at = 0; at < o->n; at += CHUNK) {
    size_t k = chunk_len(o, at);
    switch (t) {
    case WF_F32: break; /* copied above */
    case WF_F16: {
      const uint8_t *p = src + 2 * at;
      const uint16_t *h = aligned_to(p, sizeof(uint16_t)) ? (const uint16_t *)(const void *)p : stage;
      if (h == stage) memcpy(stage, p, k * sizeof(uint16_t));
      fp16_to_float_array(out + at, h, k);
      break;
    }
    case WF_BF16: widen_bf16(out + at, src + 2 * at, k); break;
    default: /* WF_F64: C's conversion rounds to nearest even */
      for (size_t i = 0; i < k; i++) {
        double d;
        memcpy(&d, src + 8 * (at + i), sizeof d);
        out[at + i] = (float)d;
      }
      break;
    }
    if (!fp32_chunk_finite(out + at, k)) fp32_chunk_fix(o, at, k, src, t);
  }
}

/* I64 -> int32: stops at the first value out of range. */
static bool narrow_i64(Out *o, const uint8_t *src) {
  int32_t *out = o->data;
  for (uint64_t i = 0; i < o->n; i++) {
    int64_t x;
    memcpy(&x, src + 8 * i, sizeof x);
    if (x < INT32_MIN || x > INT32_MAX) {
      StrBuf what;
      sb_init(&what);
      describe_source(&what, &o->param->src);
      diag_error(o->d, o->param->loc, "weight '%s' from %s has the value %lld at index %llu, outside int32",
                 o->param->name, what.data, (long long)x, (unsigned long long)i);
      sb_free(&what);
      return false;
    }
    out[i] = (int32_t)x;
  }
  return true;
}

static bool convert(Out *o, const uint8_t *src, WeightFileDType t) {
  switch (o->dtype) {
  case DT_FP16: to_fp16(o, src, t); return finish(o);
  case DT_FP32: to_fp32(o, src, t); return finish(o);
  case DT_INT32:
    if (t == WF_I64) return narrow_i64(o, src);
    memcpy(o->data, src, (size_t)o->n * 4);
    return true;
  case DT_BOOL: {
    /* Any nonzero byte is true, as numpy reads it; the output is 0 or 1. */
    uint8_t *out = o->data;
    for (uint64_t i = 0; i < o->n; i++) out[i] = src[i] != 0;
    return true;
  }
  default: /* int8, uint8: same bytes */
    memcpy(o->data, src, (size_t)o->n);
    return true;
  }
}

/* ---- file data: mapping ----------------------------------------------------- */

typedef struct Mapping {
  const uint8_t *data;
  size_t len;
  void *base; /* NULL for an empty file, which mmap cannot map */
} Mapping;

/* Maps `path` read-only; messages name `shown`, the path as written. */
static bool map_weights(const char *path, const char *shown, Mapping *mp, char *err, size_t errlen) {
  static const uint8_t empty[1];
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    snprintf(err, errlen, "cannot open '%s': %s", shown, strerror(errno));
    return false;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > SIZE_MAX) {
    snprintf(err, errlen, "'%s' is not a regular file that can be mapped", shown);
    close(fd);
    return false;
  }
  mp->len = (size_t)st.st_size;
  mp->base = NULL;
  mp->data = empty;
  if (mp->len > 0) {
    void *p = mmap(NULL, mp->len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      snprintf(err, errlen, "cannot map '%s': %s", shown, strerror(errno));
      close(fd);
      return false;
    }
    mp->base = p;
    mp->data = p;
  }
  close(fd); /* the mapping stays valid */
  return true;
}

static bool materialize_file(Out *o, IrModule *m) {
  const IrValue *p = o->param;
  const IrParamSource *src = &p->src;
  bool safetensors = src->kind == SRC_SAFETENSORS;
  if (!src->path || (safetensors && !src->key)) ice("param '%s' names a weight file without a path or key", p->name);

  char *resolved = weights_resolve_path(m, src->path);
  Mapping map;
  char err[WEIGHT_ERR_LEN];
  bool ok = weights_check_openable(o->d, p, resolved);
  if (ok && !map_weights(resolved, src->path, &map, err, sizeof err)) {
    diag_error(o->d, p->loc, "cannot read weights for '%s' from '%s': %s", p->name, src->path, err);
    ok = false;
  }
  free(resolved);
  if (!ok) return false;

  /* The header is read again from this mapping: the offsets come out
   * checked against the bytes in hand, not the file as it was earlier. */
  WeightInfo info;
  ok = safetensors ? weights_parse_safetensors(map.data, map.len, src->key, &info, err, sizeof err)
                   : weights_parse_npy(map.data, map.len, &info, err, sizeof err);
  if (!ok) diag_error(o->d, p->loc, "cannot read weights for '%s' from '%s': %s", p->name, src->path, err);
  else ok = weights_check_fits(o->d, p, &info);
  if (ok) {
    /* Equal shapes and the parser's size check make this hold; the
     * conversions read exactly n elements, so check it once here. */
    if (info.data_offset > map.len || info.nbytes > map.len - info.data_offset ||
        info.nbytes != o->n * weight_file_dtype_size(info.dtype))
      ice("tensor of param '%s' does not fit its mapping", p->name);
    const uint8_t *data = map.data + info.data_offset;
    if (map.base && info.nbytes) {
      /* Read-ahead: the tensor is read once, front to back. Advice only. */
      uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
      uintptr_t start = (uintptr_t)data & ~(page - 1);
      (void)posix_madvise((void *)start, (size_t)((uintptr_t)data + info.nbytes - start), POSIX_MADV_SEQUENTIAL);
    }
    ok = convert(o, data, info.dtype);
  }
  if (map.base) munmap(map.base, map.len);
  return ok;
}

/* ---- entry ---------------------------------------------------------------------- */

void *weights_materialize(IrModule *m, IrValueId param, const WeightLoadOptions *opt, Diag *d, size_t *nbytes) {
  const IrValue *p = ir_value(m, param);
  if (p->kind != VK_PARAM || p->dead) ice("weights_materialize on '%s', which is not a live param", p->name);
  IrDType dt = p->type.dtype;
  if (dt <= DT_INVALID || dt >= DT_COUNT) ice("param '%s' has no dtype", p->name);
  uint64_t n = ir_type_elements(&p->type);
  if (n > IR_MAX_ELEMENTS) {
    diag_error(d, p->loc, "weight '%s' has %llu elements, more than the limit of 2^31", p->name,
               (unsigned long long)n);
    return NULL;
  }
  Out o = {.param = p, .d = d, .dtype = dt, .clamp = opt && opt->clamp_fp16, .n = n};
  size_t size = (size_t)n * ir_dtype_size(dt);
  o.data = xmalloc(size);
  bool file = p->src.kind == SRC_SAFETENSORS || p->src.kind == SRC_NPY;
  bool ok = file ? materialize_file(&o, m) : materialize_init(&o);
  if (!ok) {
    free(o.data);
    return NULL;
  }
  *nbytes = size;
  return o.data;
}
