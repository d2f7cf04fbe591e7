/*
 * Weight materialization: the bytes of one param in its IR dtype.
 *
 * A param's source is either an initializer (zeros, ones, fill, normal,
 * uniform, rope tables) or a tensor in a safetensors or .npy file. This file
 * is the entry, the output and its problems, the slices large weights are
 * made in on every core, and the initializers that are one value; the
 * random initializers are weights_random.c's, the file tensors
 * weights_file_data.c's. Initializers are computed in double and rounded
 * once to the dtype.
 *
 * The compiler runs this on every weight of a model (GPT-2 small: 124M
 * values), so conversions go a chunk at a time through tight loops: convert
 * a chunk, then scan its output for the rare special value (NaN, or
 * infinity where a finite value was expected) with a branch-free loop, and
 * only then look closer. Problems are collected while converting and
 * reported once per param at its location: NaN is always an error, a value
 * beyond fp16's range is an error unless the caller asked to clamp.
 */
#include "weights_data_internal.h"

#include "orion/fp16.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FP16_MAX_BITS 0x7BFFu

/* ---- the output and its problems ----------------------------------------- */

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
void weights_describe_source(StrBuf *sb, const IrParamSource *src) {
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
  case SRC_ROPE_COS:
  case SRC_ROPE_SIN:
    sb_puts(sb, src->kind == SRC_ROPE_COS ? "rope_cos(theta=" : "rope_sin(theta=");
    put_number(sb, src->a, false);
    sb_putc(sb, ')');
    break;
  }
}

void weights_note_nan(WeightOut *o, uint64_t i) {
  if (!o->nan) {
    o->nan = true;
    o->nan_at = i;
  }
}

/* A finite value (or an infinity where fp16 needs a finite one) that the
 * dtype cannot hold. Returns the fp16 bits to store when clamping. */
uint16_t weights_note_over(WeightOut *o, uint64_t i, double v, bool as_float) {
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
bool weights_report_problems(WeightOut *o) {
  if (!o->nan && !o->over && !o->clamped) return true;
  const IrValue *p = o->param;
  StrBuf what;
  sb_init(&what);
  weights_describe_source(&what, &p->src);
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
static void store_doubles(WeightOut *o, uint64_t at, const double *v, size_t k) {
  if (o->dtype == DT_FP16) {
    uint16_t *h = (uint16_t *)o->data + at;
    for (size_t i = 0; i < k; i++) {
      h[i] = fp16_from_double(v[i]);
      if ((h[i] & FP16_EXP_MASK) != FP16_EXP_MASK) continue;
      if (isnan(v[i])) weights_note_nan(o, at + i);
      else h[i] = weights_note_over(o, at + i, v[i], false);
    }
  } else {
    float *f = (float *)o->data + at;
    for (size_t i = 0; i < k; i++) {
      f[i] = (float)v[i];
      if (isfinite(f[i])) continue;
      if (isnan(v[i])) weights_note_nan(o, at + i);
      else weights_note_over(o, at + i, v[i], false);
    }
  }
}

/* ---- work in slices ----------------------------------------------------------- */

/* Large weights are made a slice at a time by every core: a slice is small
 * enough that the threads end together and that finished bytes reach the
 * caller's progress early. Each slice is claimed before it is written. */
#define SLICE (64 * (uint64_t)CHUNK)
/* Below this many elements threads cost more than they save. */
#define PARALLEL_MIN_ELEMENTS (1u << 20)
#define MAX_THREADS 16

/* What the threads making one weight share. */
typedef struct SliceShared {
  WeightSliceFn *fn;
  const void *arg;
  uint64_t nslices;
  _Atomic uint64_t next;       /* the next slice to take */
  _Atomic unsigned char *done; /* per slice */
  uint64_t prefix;             /* slices known done from the start (the progress thread's) */
} SliceShared;

typedef struct SliceTask {
  WeightOut out; /* a private copy: its findings are merged afterwards */
  SliceShared *shared;
} SliceTask;

static void *slice_task(void *arg) {
  SliceTask *t = arg;
  SliceShared *sh = t->shared;
  size_t esize = ir_dtype_size(t->out.dtype);
  for (;;) {
    uint64_t s = atomic_fetch_add_explicit(&sh->next, 1, memory_order_relaxed);
    if (s >= sh->nslices) break;
    uint64_t end = (s + 1) * SLICE < t->out.n ? (s + 1) * SLICE : t->out.n;
    if (t->out.claim) t->out.claim(t->out.progress_ctx, (size_t)end * esize);
    sh->fn(&t->out, s * SLICE, end, sh->arg);
    /* Release: whoever sees the flag sees the slice's bytes. */
    atomic_store_explicit(&sh->done[s], 1, memory_order_release);
    if (!t->out.progress) continue;
    uint64_t before = sh->prefix;
    while (sh->prefix < sh->nslices && atomic_load_explicit(&sh->done[sh->prefix], memory_order_acquire)) sh->prefix++;
    if (sh->prefix > before) {
      uint64_t n = sh->prefix * SLICE < t->out.n ? sh->prefix * SLICE : t->out.n;
      t->out.progress(t->out.progress_ctx, (size_t)n * esize);
    }
  }
  return NULL;
}

/* Runs fn over all of o's elements, a slice at a time on every core for a
 * large weight, then merges what the threads noted into o, keeping the
 * first index of each problem (each thread's first is its smallest: it takes
 * slices in order). */
void weights_run_slices(WeightOut *o, WeightSliceFn *fn, const void *arg) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  uint64_t nthreads = o->n < PARALLEL_MIN_ELEMENTS || cores < 2 ? 1 : (uint64_t)(cores < MAX_THREADS ? cores : MAX_THREADS);
  SliceShared sh = {.fn = fn, .arg = arg, .nslices = (o->n + SLICE - 1) / SLICE};
  atomic_init(&sh.next, 0);
  void *done = xcalloc(sh.nslices ? sh.nslices : 1, sizeof *sh.done);
  sh.done = done;
  SliceTask tasks[MAX_THREADS];
  pthread_t threads[MAX_THREADS];
  uint64_t started = 0;
  for (uint64_t i = 0; i < nthreads; i++) {
    tasks[i].out = *o;
    tasks[i].shared = &sh;
    if (i > 0) tasks[i].out.progress = NULL; /* progress is reported by the calling thread only */
    if (i > 0 && pthread_create(&threads[i], NULL, slice_task, &tasks[i]) == 0) started |= 1ull << i;
  }
  slice_task(&tasks[0]); /* also takes the slices of any thread that could not be made */
  for (uint64_t i = 1; i < nthreads; i++)
    if (started & (1ull << i)) pthread_join(threads[i], NULL);
  /* The calling thread reports only the slices it saw done; when the others
   * finished last (which depends on scheduling), the end is reported here,
   * so the last report is always the whole weight. */
  if (o->progress && sh.prefix < sh.nslices) o->progress(o->progress_ctx, (size_t)o->n * ir_dtype_size(o->dtype));
  free(done);
  for (uint64_t i = 0; i < nthreads; i++) {
    const WeightOut *t = &tasks[i].out;
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

static bool fill_value(WeightOut *o, double v) {
  uint8_t *p = o->data;
  if (o->n == 0) return true;
  switch (o->dtype) {
  case DT_FP16:
  case DT_FP32:
    store_doubles(o, 0, &v, 1);
    if (o->clamped) o->clamped = o->n; /* every element is the clamped value */
    replicate(p, ir_dtype_size(o->dtype), o->n);
    return weights_report_problems(o);
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
    weights_describe_source(&what, &o->param->src);
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

static bool materialize_init(WeightOut *o) {
  const IrParamSource *src = &o->param->src;
  switch (src->kind) {
  case SRC_ZEROS:
    memset(o->data, 0, (size_t)o->n * ir_dtype_size(o->dtype)); /* 0 bits are 0 in every dtype */
    return true;
  case SRC_ONES: return fill_value(o, 1.0);
  case SRC_FILL: return fill_value(o, src->a);
  case SRC_ROPE_COS:
  case SRC_ROPE_SIN:
    weights_rope_table(src->kind == SRC_ROPE_SIN, src->a, &o->param->type, o->data);
    return true;
  default: break;
  }
  if (o->dtype != DT_FP16 && o->dtype != DT_FP32) {
    diag_error(o->d, o->param->loc, "weight '%s' is %s, but %s initializes only fp16 and fp32 weights",
               o->param->name, ir_dtype_name(o->dtype), src->kind == SRC_NORMAL ? "normal" : "uniform");
    return false;
  }
  return weights_make_random(o);
}

/* ---- entry ---------------------------------------------------------------------- */

/* The param's element count and byte size, or false after reporting. */
static bool param_size(IrModule *m, IrValueId param, Diag *d, uint64_t *n, size_t *size) {
  const IrValue *p = ir_value(m, param);
  if (p->kind != VK_PARAM || p->dead) ice("weights_materialize on '%s', which is not a live param", p->name);
  IrDType dt = p->type.dtype;
  if (dt <= DT_INVALID || dt >= DT_COUNT) ice("param '%s' has no dtype", p->name);
  *n = ir_type_elements(&p->type);
  if (*n > IR_MAX_ELEMENTS) {
    diag_error(d, p->loc, "weight '%s' has %llu elements, more than the limit of 2^31", p->name,
               (unsigned long long)*n);
    return false;
  }
  *size = (size_t)*n * ir_dtype_size(dt);
  return true;
}

bool weights_materialize_into(IrModule *m, IrValueId param, const WeightLoadOptions *opt, Diag *d, void *dst,
                              size_t nbytes) {
  uint64_t n;
  size_t size;
  if (!param_size(m, param, d, &n, &size)) return false;
  const IrValue *p = ir_value(m, param);
  if (size != nbytes) ice("weight '%s' needs %zu bytes, not %zu", p->name, size, nbytes);
  WeightOut o = {.param = p, .d = d, .dtype = p->type.dtype, .clamp = opt && opt->clamp_fp16, .n = n, .data = dst,
           .progress = opt ? opt->progress : NULL, .progress_ctx = opt ? opt->progress_ctx : NULL,
           .claim = opt ? opt->claim : NULL};
  bool file = p->src.kind == SRC_SAFETENSORS || p->src.kind == SRC_NPY;
  bool random = p->src.kind == SRC_NORMAL || p->src.kind == SRC_UNIFORM;
  /* Float weights, random or converted, claim as they go; the rest now. */
  if (o.claim && !((file || random) && (o.dtype == DT_FP16 || o.dtype == DT_FP32))) o.claim(o.progress_ctx, size);
  return file ? weights_read_file(&o, m) : materialize_init(&o);
}

void *weights_materialize(IrModule *m, IrValueId param, const WeightLoadOptions *opt, Diag *d, size_t *nbytes) {
  uint64_t n;
  size_t size;
  if (!param_size(m, param, d, &n, &size)) return NULL;
  void *data = try_malloc(size);
  if (!data) {
    const IrValue *p = ir_value(m, param);
    diag_error(d, p->loc, "weight '%s' (%zu bytes) does not fit in memory", p->name, size);
    return NULL;
  }
  if (!weights_materialize_into(m, param, opt, d, data, size)) {
    free(data);
    return NULL;
  }
  *nbytes = size;
  return data;
}
