/*
 * The CPU reference backend: an interpreter of one MIL function as
 * orion_open() loaded it (see orion/cpu.h for the API and the numerics, and
 * the MIL spec §3 for each op's semantics), planned once and then run
 * without allocating.
 *
 * Values. Every value of the function (parameters, each statement's
 * results, and each literal operand, which becomes a const of its own) has
 * a slot. A slot's elements are stored by class: fp16 and fp32 values as
 * float (ST_F32; an fp16-declared value holds fp16 values in ANE mode),
 * int32 and bool values as int32_t (ST_I32; bool 0 or 1), and fp16 weights
 * that only feed the weight operand of linear or conv, read in place from
 * the weight file as fp16 bits (ST_H16, see "Linear algebra"). Strings
 * (pad_type, mode, dtype arguments) are held as they are. Shape ops copy
 * 4-byte elements whatever the class.
 *
 * The plan (cpu_prepare). Each slot is one of: a parameter (fp32/int32
 * inputs point at the caller's buffer; fp16/bool inputs are converted into
 * a planned buffer), a const (converted once at prepare, or a pointer into
 * the weight mapping when the stored form matches: fp32 and int32 always,
 * fp16 for ST_H16), a view (reshape and identity of the same dtype: the
 * slot points at its source's elements), or a result with a planned buffer.
 * Planned buffers are slices of one arena: walking the statements in order,
 * each statement's results get the lowest offset that overlaps no value
 * still alive (a value lives from its statement to its last use, through
 * any views of it; function outputs to the end), then values whose last use
 * was that statement are released. A statement's results never share memory
 * with its operands, so kernels need not handle aliasing.
 *
 * Running (cpu_run_into). Parameter slots are pointed at the inputs, result
 * slots at the arena or, for an fp32/int32 output computed by an op, at the
 * caller's output buffer; then each statement's kernel runs and, in ANE
 * mode, its fp16-declared results are rounded to fp16 (F16C when the CPU has
 * it). Kernels check their operands against the declared result shapes
 * (the program was verified when it was emitted, but a hand-written one may
 * be wrong) and report at the statement.
 *
 * Threads. A pool started at prepare (one thread per core, the caller's
 * included) runs the element-wise, softmax, reduction, transpose, split,
 * matrix-product, argmax, topk, pooling and lstm kernels split into pieces; workers spin briefly between
 * pieces of one run and sleep on a condition variable otherwise. Pieces have
 * a size fixed by the problem, not by the thread count, so the results are
 * the same with any number of threads.
 *
 * Linear algebra. matmul, linear and the 1x1 / groups 1 / stride 1 /
 * unpadded conv (what lower-linear produces) run on OpenBLAS's sgemm, one
 * call per piece, OpenBLAS single-threaded (measured: splitting over our
 * pool beats OpenBLAS's own threads on this work, and the two would fight
 * over the cores). A piece of linear or conv is a panel of 128 output
 * channels; an ST_H16 weight panel is converted to float into the thread's
 * scratch right before its sgemm, so fp16 weights are never held as fp32
 * (half the memory traffic of fp32 weights, and no copy of the weights).
 * A piece of matmul is one matrix of the batch. Integer operands and other
 * convs use plain loops.
 *
 * Fusion (planned at prepare, none with check_finite, which must see every
 * result). A linear layer as lower-linear writes it -- transpose [B, P, K]
 * to [B, K, P], reshape, 1x1 conv, add of a bias, reshape, transpose back to
 * [B, P, O] -- runs as one fused linear at the conv's statement: each piece
 * multiplies rows of the untransposed x by a weight panel straight into the
 * final [B, P, O] layout, then adds the bias (in ANE mode rounding to fp16
 * before and after, as the add would), so neither transpose is made and
 * the bias is added while the piece is in cache. The other statements are
 * elided (they never run; their results get no buffer, and the final
 * transpose's result is planned from the conv's statement on). Each element
 * is computed by the same operations in the same order as unfused, so the
 * results are the same bits (tested).
 *
 * Runs of consecutive float unary and arithmetic binary ops whose results
 * have one shape (views and consts between them allowed; layer norm's
 * centring and scaling, gelu's nine ops) run as one group: the pool cuts
 * the shape into tiles of GROUP_TILE elements and takes each tile through
 * every member in order (rounding each fp16 result in ANE mode), one
 * synchronisation instead of one per op. A member result read only by later
 * members lives in a per-thread tile buffer, never in memory; the others
 * (and everything the members read) stay alive, unshared, to the group's
 * end. With reductions over the last dim among them (layer norm's means and
 * variance), a group also holds ops on one value per row, and its tiles are
 * whole rows. Same bits as unfused (tested); the group's time is profiled at its
 * first statement. A group (or a single such op) right after a fused linear,
 * of its result's shape and reading nothing computed after it but that
 * result and its own members, is the linear's epilogue: each piece runs it
 * on its rows as soon as they are computed, on the core that has them in
 * cache (gelu after c_fc, the residual add after c_proj); its results are
 * planned from the linear's statement on.
 *
 * Attention (scaled_dot_product_attention) works one query row per piece, in
 * double, its scores in the thread's scratch; convolutions other than the
 * pointwise one (1-D, 2-D and 3-D alike, as 3-D) one output channel of one
 * batch item per piece. constexpr_* ops are evaluated at prepare (and again
 * by cpu_reload_weights) into consts. Options: check_finite scans each float
 * result after its rounding; profile reads the clock around each statement.
 *
 * Transcendental functions (exp, tanh, sigmoid, silu, gelu, softmax) use an
 * exp evaluated in double to about 1e-15 relative, so the float results are
 * those of the correctly rounded functions except in rare near-ties. That
 * exp, and every element-wise op's scalar function, is orion/op_semantics.h's
 * (shared with constant folding; docs/numerics.md).
 */
#include "orion/cpu.h"

#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_X86 1
#else
#define HAVE_X86 0
#endif

#include "orion/fp16.h"
#include "orion/op_semantics.h"

/* ---- values ---- */

enum { ST_NONE, ST_F32, ST_I32, ST_H16, ST_STR };

typedef struct Val {
  MilDType dt;
  uint8_t st;
  uint32_t rank;
  int64_t dims[MIL_MAX_RANK];
  int64_t n;
  void *p; /* n elements of the storage class; never written through for params and consts */
  const char *str;
} Val;

/* What a slot is in the plan. */
enum { SK_PARAM, SK_CONST, SK_STR, SK_VIEW, SK_RESULT };

typedef struct Slot {
  uint8_t kind;
  bool owned;     /* SK_CONST: p was allocated here */
  uint32_t src;   /* SK_VIEW: the slot viewed */
  int64_t off;    /* planned arena offset (SK_RESULT, converted params); -1 none */
  int32_t weight; /* SK_CONST from a BLOBFILE: its index in orion_weight(); -1 otherwise */
  uint32_t last;  /* planning: time of the last use */
  int32_t tile;   /* a result inside a fused group only: its tile buffer there (no planned buffer); -1 otherwise */
} Slot;

typedef struct Ctx Ctx;
/* A kernel computes the results of statement x->s into out[0..nout), whose
 * storage is ready with the declared shapes. `code` selects a variant. */
typedef bool (*Kernel)(Ctx *x, int code, Val *out, uint32_t nout);

typedef struct OpEntry {
  const char *name;
  Kernel fn;
  int code;
} OpEntry;

/* ---- the thread pool ---- */

typedef void (*TaskFn)(void *arg, int64_t lo, int64_t hi, uint32_t tid);

typedef struct Pool {
  uint32_t n; /* threads, the caller's included */
  pthread_t *th;
  pthread_mutex_t mu; /* guards the job's claim state below, and the sleep */
  pthread_cond_t cv;
  atomic_uint gen;      /* bumped for each job */
  atomic_uint sleepers; /* workers waiting on cv */
  atomic_bool quit;
  unsigned job;         /* the generation the fields below belong to */
  TaskFn fn;
  void *arg;
  int64_t items, chunk, next;
  atomic_llong done;    /* items finished */
} Pool;

typedef struct Worker {
  Pool *pool;
  uint32_t id;
} Worker;

/* How a statement runs once the plan has fused it with others (see
 * "Fusion" in the header comment): as itself, not at all (another
 * statement computes what is needed of it), or as a fused linear. */
enum { FZ_NONE, FZ_ELIDED, FZ_LINEAR, FZ_GROUP, FZ_MEMBER };

typedef struct Fused {
  uint8_t kind;
  bool round_mid, round_out; /* FZ_LINEAR: ANE rounding of the product, and of the result */
  uint32_t xs, bs, ys;       /* FZ_LINEAR: x [B, P, K] untransposed; bias [O] (UINT32_MAX none); result [B, P, O] */
  uint32_t end;              /* FZ_GROUP (its first statement), FZ_MEMBER (the others): the statement after the group */
  uint32_t gfirst;           /* FZ_LINEAR: the first statement of the group it runs as its epilogue (0: none) */
  int64_t rowlen;            /* FZ_GROUP: 0, or a row group's row length (see fuse_groups) */
  bool epi;                  /* a statement of a group run as a fused linear's epilogue (not on its own) */
} Fused;

struct CpuProgram {
  OrionProgram *prog;
  uint32_t fn;
  const MilFunc *f;
  CpuNumerics mode;
  uint32_t nslots;       /* params, statement results, then literal operands */
  uint32_t *base;        /* per statement: the slot of its first result */
  const OpEntry **ops;   /* per statement: its kernel (NULL for const) */
  uint32_t *argbase;     /* per statement: index into argstart of its first argument */
  uint32_t *argstart;    /* per argument: index into opslot of its first item */
  uint32_t *opslot;      /* per argument item: the slot it reads */
  Slot *slots;
  Val *vals;             /* the values: consts persist, the rest is set each run */
  unsigned char *arena;  /* planned buffers */
  size_t arena_bytes;
  uint32_t nin, nout;
  uint32_t *in_param;    /* per API input: the MIL parameter index */
  uint32_t *out_slot;    /* per API output: the slot returned */
  uint32_t *out_root;    /* per API output: that slot with views followed */
  bool *out_direct;      /* per API output: written by its op into the caller's buffer */
  Pool pool;
  Worker *workers;
  float **scratch;       /* per thread: panel of converted fp16 weights, or sdpa's scores */
  int64_t scratch_floats;
  bool check_finite;
  bool unfused;          /* CpuOptions.unfused: plan no fusion */
  CpuStmtTime *prof;     /* profiling: one entry per timed statement, NULL when off */
  uint32_t nprof;
  uint32_t *prof_of;     /* per statement: its entry in prof, UINT32_MAX for none */
  Fused *fz;             /* per statement: how it runs (all FZ_NONE when nothing is fused) */
  uint32_t ntiles;       /* tile buffers the largest fused group needs */
  int64_t tile_floats;   /* the size of one */
  float **tiles;         /* per thread: ntiles tile buffers of tile_floats floats */
};

/* The state of one statement's execution. */
struct Ctx {
  const CpuProgram *c;
  Val *vals;
  Diag *d;
  const MilStmt *s;
  uint32_t si;
};

#define SPIN_ROUNDS 20000

static void cpu_relax(void) {
#if HAVE_X86
  _mm_pause();
#endif
}

/* Claims the next piece of job g; false when g is over or has none left.
 * Pieces are claimed, not assigned: a thread the system has descheduled
 * holds up only a piece it took, and the caller does whatever is left. */
static bool claim(Pool *p, unsigned g, int64_t *lo, int64_t *hi, TaskFn *fn, void **arg) {
  pthread_mutex_lock(&p->mu);
  bool ok = p->job == g && p->next < p->items;
  if (ok) {
    *lo = p->next;
    *hi = p->next + p->chunk < p->items ? p->next + p->chunk : p->items;
    p->next = *hi;
    *fn = p->fn;
    *arg = p->arg;
  }
  pthread_mutex_unlock(&p->mu);
  return ok;
}

static void work_on(Pool *p, unsigned g, uint32_t tid) {
  int64_t lo, hi;
  TaskFn fn;
  void *arg;
  while (claim(p, g, &lo, &hi, &fn, &arg)) {
    fn(arg, lo, hi, tid);
    atomic_fetch_add(&p->done, hi - lo);
  }
}

static void *worker_main(void *arg) {
  Worker *w = arg;
  Pool *p = w->pool;
  unsigned seen = 0;
  for (;;) {
    unsigned g = atomic_load(&p->gen);
    for (int k = 0; g == seen && k < SPIN_ROUNDS; k++) {
      cpu_relax();
      g = atomic_load(&p->gen);
    }
    if (g == seen) {
      pthread_mutex_lock(&p->mu);
      atomic_fetch_add(&p->sleepers, 1);
      while ((g = atomic_load(&p->gen)) == seen) pthread_cond_wait(&p->cv, &p->mu);
      atomic_fetch_sub(&p->sleepers, 1);
      pthread_mutex_unlock(&p->mu);
    }
    seen = g;
    if (atomic_load(&p->quit)) break;
    work_on(p, g, w->id);
  }
  return NULL;
}

/* Runs fn over [0, items) in pieces of `chunk` items (the last may be
 * shorter), on the caller and the pool's threads; the pieces depend only on
 * items and chunk, so the results do not depend on the thread count. */
static void par_for(const CpuProgram *c, int64_t items, int64_t chunk, TaskFn fn, void *arg) {
  Pool *p = (Pool *)(uintptr_t)&c->pool; /* the pool's state changes; the program's plan does not */
  if (chunk < 1) chunk = 1;
  if (items <= 0) return;
  if (p->n <= 1 || items <= chunk) {
    for (int64_t lo = 0; lo < items; lo += chunk) fn(arg, lo, lo + chunk < items ? lo + chunk : items, 0);
    return;
  }
  pthread_mutex_lock(&p->mu);
  unsigned g = p->job + 1;
  p->job = g;
  p->fn = fn;
  p->arg = arg;
  p->items = items;
  p->chunk = chunk;
  p->next = 0;
  atomic_store(&p->done, 0);
  pthread_mutex_unlock(&p->mu);
  atomic_store(&p->gen, g);
  if (atomic_load(&p->sleepers) > 0) {
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
  }
  work_on(p, g, 0);
  for (int k = 0; atomic_load(&p->done) < items; k++) {
    if (k < SPIN_ROUNDS) cpu_relax();
    else sched_yield(); /* the piece's thread may be waiting for a core */
  }
}

static void pool_start(CpuProgram *c, uint32_t n) {
  Pool *p = &c->pool;
  p->n = n;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  atomic_init(&p->gen, 0);
  atomic_init(&p->sleepers, 0);
  atomic_init(&p->quit, false);
  atomic_init(&p->done, 0);
  p->th = xcalloc(n, sizeof *p->th);
  c->workers = xcalloc(n, sizeof *c->workers);
  for (uint32_t i = 1; i < n; i++) {
    c->workers[i] = (Worker){p, i};
    if (pthread_create(&p->th[i], NULL, worker_main, &c->workers[i]) != 0) {
      p->n = i; /* run with the threads we got */
      break;
    }
  }
}

static void pool_stop(CpuProgram *c) {
  Pool *p = &c->pool;
  if (!p->th) return;
  atomic_store(&p->quit, true);
  pthread_mutex_lock(&p->mu);
  atomic_fetch_add(&p->gen, 1);
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  for (uint32_t i = 1; i < p->n; i++) pthread_join(p->th[i], NULL);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
  free(p->th);
  free(c->workers);
  p->th = NULL;
}

/* ---- fp16 conversions (F16C when the CPU has it) ---- */

static bool have_f16c;

#if HAVE_X86
__attribute__((target("avx,f16c"))) static void h2f_f16c(float *d, const uint16_t *s, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(s + i))));
  for (; i < n; i++) d[i] = _cvtsh_ss(s[i]);
}

/* Each float to the nearest fp16 value (ties to even, overflow to inf): the
 * hardware conversion rounds as fp16_from_float does. */
__attribute__((target("avx,f16c"))) static void round16_f16c(float *p, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(p + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(p + i), _MM_FROUND_TO_NEAREST_INT)));
  for (; i < n; i++) p[i] = _cvtsh_ss(_cvtss_sh(p[i], _MM_FROUND_TO_NEAREST_INT));
}
#endif

/* n fp16 values at s (any alignment) to floats. */
static void h2f(float *d, const void *s, int64_t n) {
#if HAVE_X86
  if (have_f16c && ((uintptr_t)s & 1) == 0) {
    h2f_f16c(d, s, n);
    return;
  }
#endif
  const unsigned char *b = s;
  for (int64_t i = 0; i < n; i++) {
    uint16_t h;
    memcpy(&h, b + 2 * i, 2);
    d[i] = fp16_to_float(h);
  }
}

static void round16(float *p, int64_t n) {
#if HAVE_X86
  if (have_f16c) {
    round16_f16c(p, n);
    return;
  }
#endif
  for (int64_t i = 0; i < n; i++) p[i] = fp16_to_float(fp16_from_float(p[i]));
}

/* ---- small helpers ---- */

static bool fail(Ctx *x, const char *fmt, ...) ORION_PRINTF(2, 3);
static bool fail(Ctx *x, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  StrBuf sb;
  sb_init(&sb);
  sb_vprintf(&sb, fmt, ap);
  va_end(ap);
  diag_error(x->d, x->s->op_loc, "%s: %s", x->s->op, sb.data);
  sb_free(&sb);
  return false;
}

static int64_t elements(const int64_t *dims, uint32_t rank) {
  int64_t n = 1;
  for (uint32_t i = 0; i < rank; i++) n *= dims[i];
  return n;
}

static void strides_of(const int64_t *dims, uint32_t rank, int64_t *st) {
  int64_t s = 1;
  for (uint32_t i = rank; i-- > 0;) {
    st[i] = s;
    s *= dims[i];
  }
}

/* The offset, in a tensor with per-dimension strides st (aligned with the
 * dims of `shape`), of the element at row-major position flat of shape. */
static int64_t offset_at(int64_t flat, const int64_t *dims, uint32_t rank, const int64_t *st) {
  int64_t off = 0;
  for (uint32_t i = rank; i-- > 0;) {
    off += (flat % dims[i]) * st[i];
    flat /= dims[i];
  }
  return off;
}

static bool dtype_held(MilDType t) {
  return t == MIL_DT_FP16 || t == MIL_DT_FP32 || t == MIL_DT_INT32 || t == MIL_DT_BOOL;
}

static bool is_float(MilDType t) { return t == MIL_DT_FP16 || t == MIL_DT_FP32; }

/* Consts may also hold the small integer types that constexpr_* ops take
 * (quantized data, zero points), stored as int32 like int32 values. */
static bool dtype_const_ok(MilDType t) {
  return dtype_held(t) || t == MIL_DT_INT8 || t == MIL_DT_UINT8 || t == MIL_DT_INT16 || t == MIL_DT_UINT16;
}

size_t cpu_dtype_size(MilDType t) {
  switch (t) {
  case MIL_DT_FP16: return 2;
  case MIL_DT_FP32: return 4;
  case MIL_DT_INT32: return 4;
  case MIL_DT_BOOL: return sizeof(bool);
  default: return 0;
  }
}

/* Doubles from MIL constants or inputs may be huge or NaN; casting those to an integer is undefined,
 * so they saturate (NaN to the most negative value), which every caller then rejects as out of range. */
static int64_t to_index(double d) {
  if (!(d >= -9.2e18)) return INT64_MIN;
  if (d >= 9.2e18) return INT64_MAX;
  return (int64_t)d;
}

static int32_t sat32(double v) {
  if (!(v >= -2147483648.0)) return INT32_MIN;
  if (v >= 2147483647.0) return INT32_MAX;
  return (int32_t)v;
}

/* Element i of v as a double (the slow paths' access). */
static double ld(const Val *v, int64_t i) {
  switch (v->st) {
  case ST_F32: return (double)((const float *)v->p)[i];
  case ST_I32: return ((const int32_t *)v->p)[i];
  case ST_H16: {
    uint16_t h;
    memcpy(&h, (const unsigned char *)v->p + 2 * i, 2);
    return (double)fp16_to_float(h);
  }
  default: return 0;
  }
}

/* Stores r as element i of result v: one rounding to float, or to an
 * integer (int32 saturates, bool is r != 0). */
static void st(Val *v, int64_t i, double r) {
  if (v->st == ST_F32) ((float *)v->p)[i] = (float)r;
  else if (v->dt == MIL_DT_BOOL) ((int32_t *)v->p)[i] = r != 0;
  else ((int32_t *)v->p)[i] = sat32(r);
}

static float *fp(const Val *v) { return v->p; }

static void shape_str(const int64_t *dims, uint32_t rank, char *buf, size_t len) {
  size_t u = (size_t)snprintf(buf, len, "[");
  for (uint32_t i = 0; i < rank && u < len; i++)
    u += (size_t)snprintf(buf + u, len - u, "%s%lld", i ? ", " : "", (long long)dims[i]);
  if (u < len) snprintf(buf + u, len - u, "]");
}

/* Checks a computed shape against the declared one of result v. */
static bool expect_shape(Ctx *x, const Val *v, const int64_t *dims, uint32_t rank) {
  bool same = rank == v->rank;
  for (uint32_t i = 0; same && i < rank; i++) same = dims[i] == v->dims[i];
  if (same) return true;
  char a[128], b[128];
  shape_str(dims, rank, a, sizeof a);
  shape_str(v->dims, v->rank, b, sizeof b);
  return fail(x, "the result shape is %s but the statement declares %s", a, b);
}

static uint8_t storage_of(MilDType t) { return is_float(t) ? ST_F32 : t == MIL_DT_STRING ? ST_STR : ST_I32; }

static void val_shape(Val *v, const MilType *t) {
  memset(v, 0, sizeof *v);
  v->dt = t->dtype;
  v->st = storage_of(t->dtype);
  v->rank = t->rank;
  memcpy(v->dims, t->dims, sizeof v->dims);
  v->n = elements(t->dims, t->rank);
}

static void *alloc_elems(int64_t n, size_t es) { return xcalloc(n > 0 ? (size_t)n : 1, es); }

/* Converts an inline literal to an owned value (const statements and
 * literal operands). A one-element payload splats. */
static bool literal_val(const MilLiteral *l, Val *v, const char **why) {
  const MilType *t = &l->type;
  memset(v, 0, sizeof *v);
  if (t->kind != MIL_TYPE_TENSOR) return *why = "is not a tensor", false;
  if (t->dtype == MIL_DT_STRING) {
    if (l->payload != MIL_PAYLOAD_INLINE || l->count != 1 || !l->strings) return *why = "is not one string", false;
    v->dt = MIL_DT_STRING;
    v->st = ST_STR;
    v->str = l->strings[0];
    return true;
  }
  if (!dtype_const_ok(t->dtype)) return *why = "has an element type the CPU backend does not hold", false;
  for (uint32_t i = 0; i < t->rank; i++)
    if (t->dims[i] < 0) return *why = "has an unknown dimension", false;
  if (l->payload != MIL_PAYLOAD_INLINE) return *why = "has no inline data", false;
  val_shape(v, t);
  if (l->count != (uint64_t)v->n && l->count != 1) return *why = "has the wrong number of elements", false;
  v->p = alloc_elems(v->n, 4);
  for (int64_t i = 0; i < v->n; i++) {
    uint64_t k = l->count == 1 ? 0 : (uint64_t)i;
    st(v, i, l->floats ? l->floats[k] : l->ints ? (double)l->ints[k] : l->bools ? (l->bools[k] ? 1.0 : 0.0) : 0.0);
  }
  return true;
}

/* ---- operands ---- */

static const MilArg *find_arg(const MilStmt *s, const char *name) {
  for (uint32_t i = 0; i < s->nargs; i++)
    if (!strcmp(s->args[i].name, name)) return &s->args[i];
  return NULL;
}

/* The value of item j of argument a of the current statement. */
static const Val *item(Ctx *x, const MilArg *a, uint32_t j) {
  const CpuProgram *c = x->c;
  uint32_t k = (uint32_t)(a - x->s->args);
  return &x->vals[c->opslot[c->argstart[c->argbase[x->si] + k] + j]];
}

/* The slot read by single-item argument `name` of statement si, UINT32_MAX if none. */
static uint32_t arg_slot(const CpuProgram *c, uint32_t si, const char *name) {
  const MilStmt *s = &c->f->stmts[si];
  const MilArg *a = find_arg(s, name);
  if (!a || a->is_list || a->nitems != 1) return UINT32_MAX;
  return c->opslot[c->argstart[c->argbase[si] + (uint32_t)(a - s->args)]];
}

/* The value of argument `name`, NULL when absent (no error: optional). */
static const Val *opt_arg(Ctx *x, const char *name, bool *ok) {
  const MilArg *a = find_arg(x->s, name);
  if (!a) return NULL;
  if (a->is_list || a->nitems != 1) {
    *ok = fail(x, "argument '%s' must be a single value", name);
    return NULL;
  }
  return item(x, a, 0);
}

static const Val *req_arg(Ctx *x, const char *name, bool *ok) {
  if (!find_arg(x->s, name)) {
    *ok = fail(x, "missing argument '%s'", name);
    return NULL;
  }
  return opt_arg(x, name, ok);
}

/* A numeric scalar argument (default dflt when absent). */
static double scalar_arg(Ctx *x, const char *name, double dflt, bool *ok) {
  const Val *v = opt_arg(x, name, ok);
  if (!v) return dflt;
  if (v->st == ST_STR || v->n != 1) {
    *ok = fail(x, "argument '%s' must be a scalar", name);
    return dflt;
  }
  return ld(v, 0);
}

static const char *string_arg(Ctx *x, const char *name, const char *dflt, bool *ok) {
  const Val *v = opt_arg(x, name, ok);
  if (!v) return dflt;
  if (v->st != ST_STR) {
    *ok = fail(x, "argument '%s' must be a string", name);
    return dflt;
  }
  return v->str;
}

/* An integer list argument; *n = 0 and false returned when absent. */
static bool ints_arg(Ctx *x, const char *name, int64_t *buf, uint32_t max, uint32_t *n, bool *ok) {
  *n = 0;
  const Val *v = opt_arg(x, name, ok);
  if (!v) return false;
  if (v->st == ST_STR || v->n > (int64_t)max) {
    *ok = fail(x, "argument '%s' must be a list of at most %u integers", name, max);
    return false;
  }
  for (int64_t i = 0; i < v->n; i++) buf[i] = to_index(ld(v, i));
  *n = (uint32_t)v->n;
  return true;
}

static bool norm_axis(Ctx *x, int64_t axis, uint32_t rank, uint32_t *out) {
  int64_t a = axis < 0 ? axis + (int64_t)rank : axis;
  if (a < 0 || a >= (int64_t)rank) return fail(x, "axis %lld is out of range for rank %u", (long long)axis, rank);
  *out = (uint32_t)a;
  return true;
}

/* Strides of `in` broadcast to the shape of `out` (NumPy rules: aligned at
 * the right, size-1 dims stretch with stride 0). */
static bool bcast_strides(Ctx *x, const Val *in, const Val *out, int64_t *bst) {
  if (in->rank > out->rank) return fail(x, "an operand of rank %u does not broadcast to rank %u", in->rank, out->rank);
  int64_t st_[MIL_MAX_RANK];
  strides_of(in->dims, in->rank, st_);
  uint32_t lead = out->rank - in->rank;
  for (uint32_t i = 0; i < out->rank; i++) {
    if (i < lead) {
      bst[i] = 0;
      continue;
    }
    int64_t d = in->dims[i - lead];
    if (d != out->dims[i] && d != 1) {
      char a[128], b[128];
      shape_str(in->dims, in->rank, a, sizeof a);
      shape_str(out->dims, out->rank, b, sizeof b);
      return fail(x, "an operand of shape %s does not broadcast to %s", a, b);
    }
    bst[i] = d == 1 ? 0 : st_[i - lead];
  }
  return true;
}

/* ---- exp and friends in double (see the header comment) ---- */

/* The one definition, shared with the folder and the evaluator. */
static inline double exp_d(double x) { return op_sem_exp(x); }
static inline double tanh_d(double v) { return op_sem_tanh(v); }

/* The same functions four doubles at a time (AVX2 and FMA, when the CPU
 * has them; chosen once at prepare). The fused multiply-adds make the
 * doubles differ from exp_d's in the last bits, far below float's
 * precision; each element is computed the same way whatever thread runs it. */
static bool have_avx2;

#if HAVE_X86
#define AVX2 __attribute__((target("avx2,fma")))

AVX2 static inline __m256d exp4(__m256d x) {
  const __m256d shift = _mm256_set1_pd(0x1.8p52);
  __m256d nan = _mm256_cmp_pd(x, x, _CMP_UNORD_Q);
  __m256d xc = _mm256_min_pd(_mm256_max_pd(x, _mm256_set1_pd(-708.0)), _mm256_set1_pd(708.0));
  __m256d t = _mm256_fmadd_pd(xc, _mm256_set1_pd(1.4426950408889634), shift);
  __m256d k = _mm256_sub_pd(t, shift);
  __m256d r = _mm256_fnmadd_pd(k, _mm256_set1_pd(0x1.62e42feep-1), xc);
  r = _mm256_fnmadd_pd(k, _mm256_set1_pd(0x1.a39ef35793c76p-33), r);
  __m256d p = _mm256_set1_pd(1.0 / 39916800);
  static const double c[] = {1.0 / 3628800, 1.0 / 362880, 1.0 / 40320, 1.0 / 5040, 1.0 / 720, 1.0 / 120,
                             1.0 / 24,      1.0 / 6,      0.5,          1.0,          1.0};
  for (int i = 0; i < 11; i++) p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(c[i]));
  __m256i kb = _mm256_sub_epi64(_mm256_castpd_si256(t), _mm256_castpd_si256(shift));
  __m256d scale = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(kb, _mm256_set1_epi64x(1023)), 52));
  return _mm256_blendv_pd(_mm256_mul_pd(p, scale), x, nan);
}

AVX2 static inline __m256d tanh4(__m256d v) {
  const __m256d sign = _mm256_set1_pd(-0.0);
  __m256d a = _mm256_andnot_pd(sign, v);
  __m256d e = exp4(_mm256_mul_pd(a, _mm256_set1_pd(-2.0)));
  __m256d one = _mm256_set1_pd(1.0);
  __m256d big = _mm256_div_pd(_mm256_sub_pd(one, e), _mm256_add_pd(one, e));
  __m256d a2 = _mm256_mul_pd(a, a);
  __m256d small = _mm256_fmadd_pd(_mm256_mul_pd(a, a2), _mm256_fmadd_pd(a2, _mm256_set1_pd(2.0 / 15), _mm256_set1_pd(-1.0 / 3)), a);
  __m256d r = _mm256_blendv_pd(big, small, _mm256_cmp_pd(a, _mm256_set1_pd(1e-3), _CMP_LT_OQ));
  r = _mm256_or_pd(r, _mm256_and_pd(v, sign));
  return _mm256_blendv_pd(r, v, _mm256_cmp_pd(v, v, _CMP_UNORD_Q));
}

enum { V_TANH, V_EXP, V_GELU_TANH };

/* o[i] = f(a[i]) for i < n - n % 4; returns how many were done. */
AVX2 static int64_t unary_avx2(int f, const float *a, float *o, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    __m256d v = _mm256_cvtps_pd(_mm_loadu_ps(a + i)), r;
    if (f == V_TANH) r = tanh4(v);
    else if (f == V_EXP) r = exp4(v);
    else {
      __m256d v3 = _mm256_mul_pd(_mm256_mul_pd(v, v), v);
      __m256d in = _mm256_mul_pd(_mm256_set1_pd(0.7978845608028654), _mm256_fmadd_pd(v3, _mm256_set1_pd(0.044715), v));
      r = _mm256_mul_pd(_mm256_mul_pd(_mm256_set1_pd(0.5), v), _mm256_add_pd(_mm256_set1_pd(1.0), tanh4(in)));
    }
    _mm_storeu_ps(o + i, _mm256_cvtpd_ps(r));
  }
  return i;
}

/* softmax of one contiguous row given its max: sum of exps in double, then
 * each exp over the sum, rounded once. Rows of up to SOFT_KEEP elements keep
 * their exps (on the stack) for the second pass; longer ones compute them
 * again, the same values. */
#define SOFT_KEEP 2048
AVX2 static void softmax_row_avx2(const float *in, float *o, int64_t len, double mx) {
  __m256d m = _mm256_set1_pd(mx), acc = _mm256_setzero_pd();
  double keep[SOFT_KEEP];
  bool kept = len <= SOFT_KEEP;
  int64_t k = 0;
  /* exp4 clamps its argument to -708 from below: four arguments there or
   * lower (a masked score) give exp4(-708) without computing it. */
  const __m256d lim = _mm256_set1_pd(-708.0), floor_e = exp4(lim);
  for (; k + 4 <= len; k += 4) {
    __m256d d = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(in + k)), m);
    __m256d e = _mm256_movemask_pd(_mm256_cmp_pd(d, lim, _CMP_NLE_UQ)) ? exp4(d) : floor_e;
    if (kept) _mm256_storeu_pd(keep + k, e);
    acc = _mm256_add_pd(acc, e);
  }
  double part[4];
  _mm256_storeu_pd(part, acc);
  double sum = (part[0] + part[1]) + (part[2] + part[3]);
  for (int64_t q = k; q < len; q++) sum += exp_d((double)in[q] - mx);
  __m256d sv = _mm256_set1_pd(sum);
  for (k = 0; k + 4 <= len; k += 4) {
    __m256d e = kept ? _mm256_loadu_pd(keep + k) : exp4(_mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(in + k)), m));
    _mm_storeu_ps(o + k, _mm256_cvtpd_ps(_mm256_div_pd(e, sv)));
  }
  for (; k < len; k++) o[k] = (float)(exp_d((double)in[k] - mx) / sum);
}
#endif

/* ---- element-wise ---- */

enum { U_RELU, U_TANH, U_SIGMOID, U_SILU, U_GELU, U_EXP, U_LOG, U_SQRT, U_RSQRT, U_ABS, U_IDENTITY, U_CLIP, U_NOT, U_FLOOR };

typedef struct UnaryJob {
  int code, gelu;
  double eps, lo, hi;
  const Val *a;
  Val *o;
} UnaryJob;

/* The scalar meaning of each op is orion/op_semantics.h's. */
static double unary_one(const UnaryJob *j, double v) {
  switch (j->code) {
  case U_RELU: return op_sem_relu(v);
  case U_TANH: return op_sem_tanh(v);
  case U_SIGMOID: return op_sem_sigmoid(v);
  case U_SILU: return op_sem_silu(v);
  case U_GELU: return j->gelu == 0 ? op_sem_gelu_exact(v) : j->gelu == 1 ? op_sem_gelu_tanh(v) : op_sem_gelu_sigmoid(v);
  case U_EXP: return op_sem_exp(v);
  case U_LOG: return op_sem_log(v, j->eps);
  case U_SQRT: return sqrt(v);
  case U_RSQRT: return op_sem_rsqrt(v, j->eps);
  case U_ABS: return fabs(v);
  case U_CLIP: return op_sem_clip(v, j->lo, j->hi);
  case U_NOT: return v == 0;
  case U_FLOOR: return floor(v);
  default: return v; /* identity */
  }
}

/* o[i] = f(a[i]) for i < n, float to float. */
static void unary_f32(const UnaryJob *j, const float *restrict a, float *restrict o, int64_t n) {
  switch (j->code) {
  case U_RELU:
    for (int64_t i = 0; i < n; i++) o[i] = a[i] <= 0 ? 0.0f : a[i]; /* NaN stays NaN, -0 is +0 */
    return;
  case U_ABS:
    for (int64_t i = 0; i < n; i++) o[i] = fabsf(a[i]);
    return;
  case U_TANH:
  case U_EXP: {
    int64_t i = 0;
#if HAVE_X86
    if (have_avx2) i += unary_avx2(j->code == U_TANH ? V_TANH : V_EXP, a, o, n);
#endif
    for (; i < n; i++) o[i] = (float)(j->code == U_TANH ? tanh_d((double)a[i]) : exp_d((double)a[i]));
    return;
  }
  default: {
    int64_t i = 0;
#if HAVE_X86
    if (have_avx2 && j->code == U_GELU && j->gelu == 1) i += unary_avx2(V_GELU_TANH, a, o, n);
#endif
    for (; i < n; i++) o[i] = (float)unary_one(j, (double)a[i]);
    return;
  }
  }
}

static void unary_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  (void)tid;
  const UnaryJob *j = arg;
  if (j->a->st == ST_F32 && j->o->st == ST_F32) {
    unary_f32(j, fp(j->a) + lo, fp(j->o) + lo, hi - lo);
    return;
  }
  for (int64_t i = lo; i < hi; i++) st(j->o, i, unary_one(j, ld(j->a, i)));
}

#define GRAIN 16384

/* Reads and checks a unary op's operands into *jp (false: reported). */
static bool unary_setup(Ctx *x, int code, Val *out, UnaryJob *jp) {
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok);
  UnaryJob j = {.code = code, .a = a, .o = out};
  if (code == U_LOG) j.eps = scalar_arg(x, "epsilon", a && a->dt == MIL_DT_FP16 ? 0.0 : 1e-45, &ok);
  if (code == U_RSQRT) j.eps = scalar_arg(x, "epsilon", a && a->dt == MIL_DT_FP16 ? 0.0 : 1e-12, &ok);
  if (code == U_CLIP) {
    j.lo = scalar_arg(x, "alpha", 0, &ok);
    j.hi = scalar_arg(x, "beta", 0, &ok);
    if (ok && (!find_arg(x->s, "alpha") || !find_arg(x->s, "beta"))) return fail(x, "needs both alpha and beta");
  }
  if (code == U_GELU) {
    const char *m = string_arg(x, "mode", "EXACT", &ok);
    if (!ok) return false;
    if (!strcmp(m, "TANH_APPROXIMATION")) j.gelu = 1;
    else if (!strcmp(m, "SIGMOID_APPROXIMATION")) j.gelu = 2;
    else if (strcmp(m, "EXACT")) return fail(x, "unknown mode '%s'", m);
  }
  if (!ok) return false;
  if (a->st == ST_STR) return fail(x, "argument 'x' must be a tensor");
  if (code == U_NOT && (a->dt != MIL_DT_BOOL || out->dt != MIL_DT_BOOL))
    return fail(x, "takes and returns bool, not %s and %s", mil_dtype_name(a->dt), mil_dtype_name(out->dt));
  if (!expect_shape(x, out, a->dims, a->rank)) return false;
  *jp = j;
  return true;
}

static bool k_unary(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)nout;
  UnaryJob j;
  if (!unary_setup(x, code, out, &j)) return false;
  par_for(x->c, out->n, GRAIN, unary_task, &j);
  return true;
}

enum { B_ADD, B_SUB, B_MUL, B_DIV, B_POW, B_MAX, B_MIN, B_FDIV, /* comparisons, bool results: */ B_EQ, B_NE, B_LT, B_LE, B_GT,
       B_GE, /* bool operands and results: */ B_AND, B_OR, B_XOR };

static bool is_compare(int code) { return code >= B_EQ && code <= B_GE; }
static bool is_logical(int code) { return code >= B_AND; }

/* One broadcast element-wise op over a collapsed shape: rows of `inner`
 * output elements, operand a (b) advancing by sa (sb) along a row and
 * starting at the offset its outer strides give. */
typedef struct BinJob {
  int code;
  const Val *a, *b;
  Val *o;
  uint32_t nouter;
  int64_t odims[MIL_MAX_RANK], ast[MIL_MAX_RANK], bst[MIL_MAX_RANK];
  int64_t inner, sa, sb, chunks;
} BinJob;

#define BIN_CHUNK 4096

static double bin_one(int code, double u, double v, bool integer) {
  switch (code) {
  case B_ADD: return u + v;
  case B_SUB: return u - v;
  case B_MUL: return u * v;
  case B_DIV: return integer ? (v == 0 ? 0 : trunc(u / v)) : u / v;
  case B_POW: return pow(u, v);
  case B_MAX: return op_sem_maximum(u, v);
  case B_MIN: return op_sem_minimum(u, v);
  /* floor_div rounds toward -inf. The double quotient of two floats is never
   * rounded across an integer, so its floor is the exact one. Integer x // 0
   * is 0, as integer real_div. */
  case B_FDIV: return integer ? (v == 0 ? 0 : floor(u / v)) : floor(u / v);
  /* IEEE comparisons, as NumPy's: NaN is unequal to everything. */
  case B_EQ: return u == v;
  case B_NE: return u != v;
  case B_LT: return u < v;
  case B_LE: return u <= v;
  case B_GT: return u > v;
  case B_GE: return u >= v;
  case B_AND: return u != 0 && v != 0;
  case B_OR: return u != 0 || v != 0;
  default: return (u != 0) != (v != 0); /* xor */
  }
}

/* A comparison of float rows into bool (0/1 int32) results. */
#define CMP_LOOP(OP)                                                                                                   \
  for (int64_t i = 0; i < n; i++) o[i] = a[i * sa] OP b[i * sb]

static void cmp_row(int code, const float *restrict a, int64_t sa, const float *restrict b, int64_t sb,
                    int32_t *restrict o, int64_t n) {
  switch (code) {
  case B_EQ: CMP_LOOP(==); break;
  case B_NE: CMP_LOOP(!=); break;
  case B_LT: CMP_LOOP(<); break;
  case B_LE: CMP_LOOP(<=); break;
  case B_GT: CMP_LOOP(>); break;
  default: CMP_LOOP(>=); break;
  }
}

/* A float row; the loops for the common strides are written out so the
 * compiler vectorizes them. Float +, -, *, / round exactly as the double
 * operation rounded to float would. */
#define BIN_LOOP(EXPR)                                                                                                 \
  do {                                                                                                                 \
    if (sa == 1 && sb == 1)                                                                                            \
      for (int64_t i = 0; i < n; i++) {                                                                                \
        float u = a[i], v = b[i];                                                                                      \
        o[i] = (EXPR);                                                                                                 \
      }                                                                                                                \
    else if (sa == 1 && sb == 0) {                                                                                     \
      float v = b[0];                                                                                                  \
      for (int64_t i = 0; i < n; i++) {                                                                                \
        float u = a[i];                                                                                                \
        o[i] = (EXPR);                                                                                                 \
      }                                                                                                                \
    } else if (sa == 0 && sb == 1) {                                                                                   \
      float u = a[0];                                                                                                  \
      for (int64_t i = 0; i < n; i++) {                                                                                \
        float v = b[i];                                                                                                \
        o[i] = (EXPR);                                                                                                 \
      }                                                                                                                \
    } else                                                                                                             \
      for (int64_t i = 0; i < n; i++) {                                                                                \
        float u = a[i * sa], v = b[i * sb];                                                                            \
        o[i] = (EXPR);                                                                                                 \
      }                                                                                                                \
  } while (0)

#define BIN_ROW_BODY                                                                                                   \
  switch (code) {                                                                                                      \
  case B_ADD: BIN_LOOP(u + v); break;                                                                                  \
  case B_SUB: BIN_LOOP(u - v); break;                                                                                  \
  case B_MUL: BIN_LOOP(u * v); break;                                                                                  \
  case B_DIV: BIN_LOOP(u / v); break;                                                                                  \
  case B_FDIV: BIN_LOOP((float)floor((double)u / (double)v)); break;                                                   \
  case B_POW: BIN_LOOP((float)pow((double)u, (double)v)); break;                                                       \
  case B_MAX: BIN_LOOP(u != u || v != v ? NAN : u > v ? u : u < v ? v : signbit(u) ? v : u); break;                   \
  default: BIN_LOOP(u != u || v != v ? NAN : u < v ? u : u > v ? v : signbit(u) ? u : v); break;                      \
  }

#if HAVE_X86
/* The same loops compiled for AVX2 (eight floats at a time; each element
 * still one IEEE operation, so the same results), chosen when the CPU has it. */
AVX2 static void bin_row_avx2(int code, const float *restrict a, int64_t sa, const float *restrict b, int64_t sb,
                              float *restrict o, int64_t n) {
  BIN_ROW_BODY
}
#endif

static void bin_row(int code, const float *restrict a, int64_t sa, const float *restrict b, int64_t sb,
                    float *restrict o, int64_t n) {
#if HAVE_X86
  if (have_avx2) {
    bin_row_avx2(code, a, sa, b, sb, o, n);
    return;
  }
#endif
  BIN_ROW_BODY
}

static void bin_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  (void)tid;
  const BinJob *j = arg;
  bool fast = j->a->st == ST_F32 && j->b->st == ST_F32 && j->o->st == ST_F32;
  bool integer = j->o->dt == MIL_DT_INT32;
  for (int64_t it = lo; it < hi; it++) {
    int64_t row = it / j->chunks, c0 = (it % j->chunks) * BIN_CHUNK;
    int64_t n = j->inner - c0 < BIN_CHUNK ? j->inner - c0 : BIN_CHUNK;
    int64_t oa = offset_at(row, j->odims, j->nouter, j->ast) + c0 * j->sa;
    int64_t ob = offset_at(row, j->odims, j->nouter, j->bst) + c0 * j->sb;
    int64_t oo = row * j->inner + c0;
    if (fast) {
      bin_row(j->code, fp(j->a) + oa, j->sa, fp(j->b) + ob, j->sb, fp(j->o) + oo, n);
      continue;
    }
    if (is_compare(j->code) && j->a->st == ST_F32 && j->b->st == ST_F32) {
      cmp_row(j->code, fp(j->a) + oa, j->sa, fp(j->b) + ob, j->sb, (int32_t *)j->o->p + oo, n);
      continue;
    }
    for (int64_t i = 0; i < n; i++)
      st(j->o, oo + i, bin_one(j->code, ld(j->a, oa + i * j->sa), ld(j->b, ob + i * j->sb), integer));
  }
}

/* Drops size-1 dims and merges neighbours that every operand walks
 * contiguously; dims/strides are replaced, the new rank returned. */
static uint32_t collapse(uint32_t rank, int64_t *dims, int64_t **strides, uint32_t nops) {
  uint32_t r = 0;
  for (uint32_t i = 0; i < rank; i++) {
    if (dims[i] == 1) continue;
    bool merge = r > 0;
    for (uint32_t k = 0; merge && k < nops; k++) merge = strides[k][r - 1] == strides[k][i] * dims[i];
    if (merge) {
      dims[r - 1] *= dims[i];
      for (uint32_t k = 0; k < nops; k++) strides[k][r - 1] = strides[k][i];
    } else {
      dims[r] = dims[i];
      for (uint32_t k = 0; k < nops; k++) strides[k][r] = strides[k][i];
      r++;
    }
  }
  return r;
}

/* Output elements [e0, e1) of a float binary op (a fused group's tile): the
 * same rows as bin_task's, cut where the range cuts them. Element k of
 * operand a is at pa[k - a0] (a0 is 0 for a planned value; a value held in
 * a tile buffer starting at element a0 is shaped as the result), the same
 * for b; the result's element e at po[e - o0]. */
static void bin_range(const BinJob *j, int64_t e0, int64_t e1, const float *pa, int64_t a0, const float *pb,
                      int64_t b0, float *po, int64_t o0) {
  while (e0 < e1) {
    int64_t row = e0 / j->inner, c0 = e0 % j->inner;
    int64_t n = j->inner - c0 < e1 - e0 ? j->inner - c0 : e1 - e0;
    int64_t oa = offset_at(row, j->odims, j->nouter, j->ast) + c0 * j->sa;
    int64_t ob = offset_at(row, j->odims, j->nouter, j->bst) + c0 * j->sb;
    bin_row(j->code, pa + (oa - a0), j->sa, pb + (ob - b0), j->sb, po + (e0 - o0), n);
    e0 += n;
  }
}

/* Reads and checks a binary op's operands into *jp; false when reported, or
 * (with *jp's o NULL) when the result is empty. */
static bool bin_setup(Ctx *x, int code, Val *out, BinJob *jp) {
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok), *b = req_arg(x, "y", &ok);
  if (!ok) return false;
  if (a->st == ST_STR || b->st == ST_STR) return fail(x, "operands must be tensors");
  if (is_compare(code) && out->dt != MIL_DT_BOOL)
    return fail(x, "returns bool, but the result is declared %s", mil_dtype_name(out->dt));
  if (is_logical(code) && (a->dt != MIL_DT_BOOL || b->dt != MIL_DT_BOOL || out->dt != MIL_DT_BOOL))
    return fail(x, "takes and returns bool, not %s and %s into %s", mil_dtype_name(a->dt), mil_dtype_name(b->dt),
                mil_dtype_name(out->dt));
  if (!is_compare(code) && !is_logical(code) && out->dt == MIL_DT_BOOL)
    return fail(x, "does not return bool");
  BinJob j = {.code = code, .a = a, .b = b, .o = out};
  if (!bcast_strides(x, a, out, j.ast) || !bcast_strides(x, b, out, j.bst)) return false;
  if (out->n == 0) {
    jp->o = NULL;
    return true;
  }
  memcpy(j.odims, out->dims, sizeof j.odims);
  int64_t *strides[2] = {j.ast, j.bst};
  uint32_t r = collapse(out->rank, j.odims, strides, 2);
  if (r == 0) j.odims[r] = 1, j.ast[r] = j.bst[r] = 0, r = 1;
  j.nouter = r - 1;
  j.inner = j.odims[r - 1];
  j.sa = j.ast[r - 1];
  j.sb = j.bst[r - 1];
  j.chunks = (j.inner + BIN_CHUNK - 1) / BIN_CHUNK;
  *jp = j;
  return true;
}

static bool k_binary(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)nout;
  BinJob j;
  if (!bin_setup(x, code, out, &j)) return false;
  if (!j.o) return true;
  int64_t items = elements(j.odims, j.nouter) * j.chunks;
  int64_t per = j.inner < BIN_CHUNK ? j.inner : BIN_CHUNK;
  par_for(x->c, items, (GRAIN + per - 1) / per, bin_task, &j);
  return true;
}

static bool k_select(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *c = req_arg(x, "cond", &ok), *a = req_arg(x, "a", &ok), *b = req_arg(x, "b", &ok);
  if (!ok) return false;
  int64_t sc[MIL_MAX_RANK], sa[MIL_MAX_RANK], sb[MIL_MAX_RANK];
  if (!bcast_strides(x, c, out, sc) || !bcast_strides(x, a, out, sa) || !bcast_strides(x, b, out, sb)) return false;
  for (int64_t i = 0; i < out->n; i++)
    st(out, i,
       ld(c, offset_at(i, out->dims, out->rank, sc)) != 0 ? ld(a, offset_at(i, out->dims, out->rank, sa))
                                                          : ld(b, offset_at(i, out->dims, out->rank, sb)));
  return true;
}

static bool k_cast(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok);
  const char *to = string_arg(x, "dtype", NULL, &ok);
  if (!ok) return false;
  if (!to) return fail(x, "missing argument 'dtype'");
  MilDType t = mil_dtype_from_name(to, strlen(to));
  if (t != out->dt) return fail(x, "casts to '%s' but the result is declared %s", to, mil_dtype_name(out->dt));
  if (!expect_shape(x, out, a->dims, a->rank)) return false;
  double lo = -2147483648.0, hi = 2147483647.0;
  if (t == MIL_DT_INT8) lo = -128, hi = 127;
  if (t == MIL_DT_UINT8) lo = 0, hi = 255;
  if (t == MIL_DT_INT16) lo = -32768, hi = 32767;
  if (t == MIL_DT_UINT16) lo = 0, hi = 65535;
  for (int64_t i = 0; i < out->n; i++) {
    double v = ld(a, i);
    switch (t) {
    case MIL_DT_INT32:
    case MIL_DT_INT8:
    case MIL_DT_UINT8:
    case MIL_DT_INT16:
    case MIL_DT_UINT16:
      /* NumPy astype truncates toward zero; NaN and out-of-range values are left undefined (or wrap) there, an
       * error here. */
      if (isnan(v) || trunc(v) < lo || trunc(v) > hi) return fail(x, "cast of %g to %s is out of range", v, to);
      st(out, i, trunc(v));
      break;
    case MIL_DT_BOOL: st(out, i, v != 0); break;
    /* Converting is what the op is for: fp16 rounds in every mode. */
    case MIL_DT_FP16: st(out, i, (double)fp16_to_float(fp16_from_double(v))); break;
    default: st(out, i, v); break;
    }
  }
  return true;
}

/* ---- reductions and normalizations ---- */

/* softmax over lines of `len` elements `post` apart; a line is one item. */
typedef struct SoftJob {
  const Val *a;
  Val *o;
  int64_t len, post;
} SoftJob;

static void softmax_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  (void)tid;
  const SoftJob *j = arg;
  int64_t len = j->len, post = j->post;
  for (int64_t line = lo; line < hi; line++) {
    int64_t base = (line / post) * len * post + line % post;
    if (j->a->st == ST_F32 && j->o->st == ST_F32) {
      const float *in = fp(j->a) + base;
      float *o = fp(j->o) + base;
      float mx = -INFINITY;
      bool nan = false;
      for (int64_t k = 0; k < len; k++) {
        float v = in[k * post];
        nan |= v != v;
        mx = v > mx ? v : mx;
      }
      if (nan) mx = NAN; /* as fmax would not: a NaN makes the whole line NaN */
#if HAVE_X86
      if (have_avx2 && post == 1) {
        softmax_row_avx2(in, o, len, (double)mx);
        continue;
      }
#endif
      double sum = 0;
      for (int64_t k = 0; k < len; k++) sum += exp_d((double)in[k * post] - (double)mx);
      /* Each exp again rather than kept: the result is the double quotient rounded once. */
      for (int64_t k = 0; k < len; k++) o[k * post] = (float)(exp_d((double)in[k * post] - (double)mx) / sum);
      continue;
    }
    double mx = -HUGE_VAL, sum = 0;
    for (int64_t k = 0; k < len; k++) mx = fmax(mx, ld(j->a, base + k * post));
    for (int64_t k = 0; k < len; k++) sum += exp_d(ld(j->a, base + k * post) - mx);
    for (int64_t k = 0; k < len; k++) st(j->o, base + k * post, exp_d(ld(j->a, base + k * post) - mx) / sum);
  }
}

static bool k_softmax(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok);
  double axis_d = scalar_arg(x, "axis", -1, &ok);
  uint32_t ax = 0;
  if (!ok || !norm_axis(x, to_index(axis_d), a->rank, &ax) || !expect_shape(x, out, a->dims, a->rank)) return false;
  SoftJob j = {.a = a, .o = out, .len = a->dims[ax], .post = elements(a->dims + ax + 1, a->rank - ax - 1)};
  int64_t lines = elements(a->dims, ax) * j.post;
  if (j.len == 0 || lines == 0) return true;
  par_for(x->c, lines, (GRAIN + j.len - 1) / j.len, softmax_task, &j);
  return true;
}

/* Reads the `axes` argument (default: all) into a per-dimension mask. */
static bool axes_mask(Ctx *x, const Val *a, bool *mask, bool *ok) {
  int64_t axes[MIL_MAX_RANK];
  uint32_t n;
  bool given = ints_arg(x, "axes", axes, MIL_MAX_RANK, &n, ok);
  if (!*ok) return false;
  for (uint32_t i = 0; i < a->rank; i++) mask[i] = !given;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t ax = 0;
    if (!norm_axis(x, axes[i], a->rank, &ax)) return *ok = false;
    mask[ax] = true;
  }
  return true;
}

enum { R_SUM, R_MEAN, R_MAX };

/* A reduction of contiguous trailing blocks: output element i reduces
 * input elements [i * count, (i + 1) * count). */
typedef struct RedJob {
  int code;
  const Val *a;
  Val *o;
  int64_t count;
} RedJob;

/* The sum of n floats in double: four running sums (elements k mod 4), so
 * that the additions need not wait for each other, added pairwise, then the
 * last n mod 4 elements in order. */
static double sum_d(const float *p, int64_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) {
    s0 += (double)p[k];
    s1 += (double)p[k + 1];
    s2 += (double)p[k + 2];
    s3 += (double)p[k + 3];
  }
  double r = (s0 + s1) + (s2 + s3);
  for (; k < n; k++) r += (double)p[k];
  return r;
}

static double reduce_fin(int code, const Val *o, double r, int64_t count) {
  if (code != R_MEAN) return r;
  r /= (double)count;
  return o->dt == MIL_DT_INT32 ? trunc(r) : r;
}

static void reduce_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  (void)tid;
  const RedJob *j = arg;
  int64_t cnt = j->count;
  for (int64_t i = lo; i < hi; i++) {
    double r = j->code == R_MAX ? -HUGE_VAL : 0;
    if (j->a->st == ST_F32) {
      const float *in = fp(j->a) + i * cnt;
      if (j->code == R_MAX)
        for (int64_t k = 0; k < cnt; k++) r = op_sem_maximum(r, (double)in[k]);
      else
        r = sum_d(in, cnt);
    } else {
      for (int64_t k = 0; k < cnt; k++) {
        double v = ld(j->a, i * cnt + k);
        r = j->code == R_MAX ? op_sem_maximum(r, v) : r + v;
      }
    }
    st(j->o, i, reduce_fin(j->code, j->o, r, cnt));
  }
}

/* The rows of a trailing reduction (a fused group's tile): output element
 * i of [r0, r1) from input row i, as reduce_task computes it. */
static void reduce_rows(const RedJob *j, const float *in, float *o, int64_t n) {
  int64_t cnt = j->count;
  for (int64_t i = 0; i < n; i++) {
    const float *row = in + i * cnt;
    double r = j->code == R_MAX ? -HUGE_VAL : 0;
    if (j->code == R_MAX)
      for (int64_t k = 0; k < cnt; k++) r = op_sem_maximum(r, (double)row[k]);
    else
      r = sum_d(row, cnt);
    o[i] = (float)reduce_fin(j->code, j->o, r, cnt);
  }
}

/* Reads and checks a reduction; *jp's o is NULL unless it reduces trailing dims. */
static bool reduce_setup(Ctx *x, int code, Val *out, RedJob *jp) {
  bool ok = true, mask[MIL_MAX_RANK];
  const Val *a = req_arg(x, "x", &ok);
  bool keep = scalar_arg(x, "keep_dims", 0, &ok) != 0;
  if (!ok || !axes_mask(x, a, mask, &ok)) return false;
  int64_t dims[MIL_MAX_RANK] = {0}, count = 1;
  uint32_t rank = 0;
  bool trailing = true; /* the reduced dims (of size > 1) come after every kept dim (of size > 1) */
  bool seen_reduced = false;
  for (uint32_t i = 0; i < a->rank; i++) {
    if (mask[i]) count *= a->dims[i];
    if (!mask[i] || keep) dims[rank++] = mask[i] ? 1 : a->dims[i];
    if (a->dims[i] != 1) {
      if (mask[i]) seen_reduced = true;
      else if (seen_reduced) trailing = false;
    }
  }
  if (!expect_shape(x, out, dims, rank)) return false;
  *jp = (RedJob){.code = code, .a = a, .o = trailing && count > 0 ? out : NULL, .count = count};
  return true;
}

static bool k_reduce(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)nout;
  RedJob j;
  if (!reduce_setup(x, code, out, &j)) return false;
  if (j.o) {
    par_for(x->c, out->n, (GRAIN + j.count - 1) / j.count, reduce_task, &j);
    return true;
  }
  const Val *a = j.a;
  int64_t count = j.count;
  bool ok = true, mask[MIL_MAX_RANK];
  if (!axes_mask(x, a, mask, &ok)) return false;
  int64_t kept[MIL_MAX_RANK] = {0};
  uint32_t nk = 0;
  for (uint32_t i = 0; i < a->rank; i++)
    if (!mask[i]) kept[nk++] = a->dims[i];
  /* General axes: accumulate in input order into doubles, one output at a
   * time (a plain loop: rare in compiled programs). */
  int64_t kst[MIL_MAX_RANK], st_[MIL_MAX_RANK], ist[MIL_MAX_RANK], rdims[MIL_MAX_RANK], rst[MIL_MAX_RANK];
  uint32_t nr = 0;
  strides_of(kept, nk, kst);
  strides_of(a->dims, a->rank, ist);
  for (uint32_t i = 0, k = 0; i < a->rank; i++) {
    st_[i] = mask[i] ? 0 : kst[k++];
    if (mask[i]) rdims[nr] = a->dims[i], rst[nr++] = ist[i];
  }
  int64_t kist[MIL_MAX_RANK];
  for (uint32_t i = 0, k = 0; i < a->rank; i++)
    if (!mask[i]) kist[k++] = ist[i];
  (void)st_;
  for (int64_t o = 0; o < out->n; o++) {
    int64_t base = offset_at(o, kept, nk, kist);
    double r = code == R_MAX ? -HUGE_VAL : 0;
    for (int64_t k = 0; k < count; k++) {
      double v = ld(a, base + offset_at(k, rdims, nr, rst));
      r = code == R_MAX ? op_sem_maximum(r, v) : r + v;
    }
    st(out, o, reduce_fin(code, out, r, count));
  }
  return true;
}

/* layer_norm: mean and biased variance jointly over `axes`; gamma and beta
 * are indexed by the position within the normalized dims taken in the order
 * `axes` lists them. One item is one normalized group. */
typedef struct NormJob {
  const Val *a, *g, *b;
  Val *o;
  double eps;
  uint32_t nax, nouter;
  int64_t idims[MIL_MAX_RANK], ist[MIL_MAX_RANK], odims[MIL_MAX_RANK], ost[MIL_MAX_RANK];
  int64_t inner;
  bool contiguous; /* the normalized dims are the trailing ones, in order */
} NormJob;

static void norm_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  (void)tid;
  const NormJob *j = arg;
  int64_t inner = j->inner;
  for (int64_t o = lo; o < hi; o++) {
    int64_t base = offset_at(o, j->odims, j->nouter, j->ost);
#define AT(k) (j->contiguous ? base + (k) : base + offset_at((k), j->idims, j->nax, j->ist))
    double mean = 0, var = 0;
    for (int64_t k = 0; k < inner; k++) mean += ld(j->a, AT(k));
    mean /= (double)inner;
    for (int64_t k = 0; k < inner; k++) {
      double dv = ld(j->a, AT(k)) - mean;
      var += dv * dv;
    }
    var /= (double)inner;
    double inv = 1 / sqrt(var + j->eps);
    for (int64_t k = 0; k < inner; k++) {
      int64_t off = AT(k);
      st(j->o, off, (ld(j->a, off) - mean) * inv * (j->g ? ld(j->g, k) : 1) + (j->b ? ld(j->b, k) : 0));
    }
#undef AT
  }
}

static bool k_layer_norm(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok), *g = opt_arg(x, "gamma", &ok), *b = opt_arg(x, "beta", &ok);
  NormJob j = {.a = a, .g = g, .b = b, .o = out};
  j.eps = scalar_arg(x, "epsilon", 1e-5, &ok);
  int64_t axes[MIL_MAX_RANK];
  uint32_t n;
  bool given = ints_arg(x, "axes", axes, MIL_MAX_RANK, &n, &ok);
  if (!ok || !expect_shape(x, out, a->dims, a->rank)) return false;
  uint32_t ax[MIL_MAX_RANK], outer[MIL_MAX_RANK];
  bool in_axes[MIL_MAX_RANK] = {false};
  if (!given)
    for (uint32_t i = 0; i < a->rank; i++) axes[n++] = i;
  for (uint32_t i = 0; i < n; i++) {
    if (!norm_axis(x, axes[i], a->rank, &ax[j.nax])) return false;
    if (in_axes[ax[j.nax]]) return fail(x, "axis %lld is listed twice", (long long)axes[i]);
    in_axes[ax[j.nax++]] = true;
  }
  for (uint32_t i = 0; i < a->rank; i++)
    if (!in_axes[i]) outer[j.nouter++] = i;
  int64_t st_[MIL_MAX_RANK];
  strides_of(a->dims, a->rank, st_);
  j.contiguous = true;
  for (uint32_t i = 0; i < j.nax; i++) {
    j.idims[i] = a->dims[ax[i]], j.ist[i] = st_[ax[i]];
    j.contiguous = j.contiguous && ax[i] == a->rank - j.nax + i;
  }
  for (uint32_t i = 0; i < j.nouter; i++) j.odims[i] = a->dims[outer[i]], j.ost[i] = st_[outer[i]];
  j.inner = elements(j.idims, j.nax);
  if ((g && g->n != j.inner) || (b && b->n != j.inner))
    return fail(x, "gamma and beta must have the %lld elements of the normalized dims", (long long)j.inner);
  if (j.inner == 0) return true;
  par_for(x->c, elements(j.odims, j.nouter), (GRAIN + j.inner - 1) / j.inner, norm_task, &j);
  return true;
}

/* ---- shape ops (4-byte elements whatever the class) ---- */

static uint32_t *u32(const Val *v) { return v->p; }

/* Shape ops copy elements as they are: the result must hold the same class. */
static bool same_class(Ctx *x, const Val *a, const Val *out) {
  if (a->st == out->st || (a->st == ST_H16 && out->st == ST_F32)) return true;
  return fail(x, "the operand is %s but the result is declared %s", mil_dtype_name(a->dt), mil_dtype_name(out->dt));
}

/* A view: reshape and identity of the same dtype point at their operand. */
static bool k_view(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok);
  if (!ok) return false;
  if (a->n != out->n) return fail(x, "reshapes %lld elements into %lld", (long long)a->n, (long long)out->n);
  out->p = a->p;
  out->st = a->st;
  return true;
}

/* reshape or identity into another dtype (not planned as a view). */
static bool k_copy(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok);
  if (!ok) return false;
  if (a->n != out->n) return fail(x, "reshapes %lld elements into %lld", (long long)a->n, (long long)out->n);
  for (int64_t i = 0; i < out->n; i++) st(out, i, ld(a, i));
  return true;
}

/* A transpose over a collapsed shape: the output's last dim, and the output
 * dim `k` that walks the input contiguously, are copied in 32 x 32 tiles;
 * one item is one tile row band of one outer index. */
typedef struct TrJob {
  const uint32_t *a;
  uint32_t *o;
  uint32_t r, k;
  int64_t dims[MIL_MAX_RANK], ist[MIL_MAX_RANK], ost[MIL_MAX_RANK];
  int64_t odims[MIL_MAX_RANK], oist[MIL_MAX_RANK], oost[MIL_MAX_RANK];
  uint32_t nouter;
  int64_t bands;
} TrJob;

#define TILE 32

static void transpose_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  (void)tid;
  const TrJob *j = arg;
  int64_t nl = j->dims[j->r - 1], nk = j->dims[j->k];
  int64_t sl = j->ist[j->r - 1], ok_ = j->ost[j->k];
  for (int64_t it = lo; it < hi; it++) {
    int64_t outer = it / j->bands, k0 = (it % j->bands) * TILE;
    const uint32_t *a = j->a + offset_at(outer, j->odims, j->nouter, j->oist);
    uint32_t *o = j->o + offset_at(outer, j->odims, j->nouter, j->oost);
    int64_t k1 = k0 + TILE < nk ? k0 + TILE : nk;
    for (int64_t l0 = 0; l0 < nl; l0 += TILE) {
      int64_t l1 = l0 + TILE < nl ? l0 + TILE : nl;
      for (int64_t kk = k0; kk < k1; kk++)
        for (int64_t l = l0; l < l1; l++) o[kk * ok_ + l] = a[kk + l * sl];
    }
  }
}

/* Rows of the output's last dim, contiguous in the input too. */
static void rowcopy_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  (void)tid;
  const TrJob *j = arg;
  int64_t len = j->dims[j->r - 1];
  for (int64_t row = lo; row < hi; row++)
    memcpy(j->o + row * len, j->a + offset_at(row, j->dims, j->r - 1, j->ist), (size_t)len * 4);
}

static bool k_transpose(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok);
  int64_t perm[MIL_MAX_RANK];
  uint32_t n;
  ints_arg(x, "perm", perm, MIL_MAX_RANK, &n, &ok);
  if (!ok) return false;
  if (n != a->rank) return fail(x, "perm has %u entries for rank %u", n, a->rank);
  int64_t st_[MIL_MAX_RANK], dims[MIL_MAX_RANK];
  bool seen[MIL_MAX_RANK] = {false};
  TrJob j = {.a = u32(a), .o = u32(out)};
  strides_of(a->dims, a->rank, st_);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t p = 0;
    if (!norm_axis(x, perm[i], a->rank, &p)) return false;
    if (seen[p]) return fail(x, "perm is not a permutation");
    seen[p] = true;
    dims[i] = a->dims[p];
    j.ist[i] = st_[p];
  }
  if (!expect_shape(x, out, dims, n) || !same_class(x, a, out)) return false;
  if (out->n == 0) return true;
  if (a->st == ST_H16) return fail(x, "fp16 weights are not transposed in place"); /* the plan prevents this */
  memcpy(j.dims, dims, sizeof dims);
  strides_of(dims, n, j.ost);
  int64_t *strides[2] = {j.ist, j.ost};
  j.r = collapse(n, j.dims, strides, 2);
  if (j.r == 0) j.dims[0] = 1, j.ist[0] = j.ost[0] = 1, j.r = 1;
  if (j.ist[j.r - 1] == 1) {
    par_for(x->c, out->n / j.dims[j.r - 1], (GRAIN + j.dims[j.r - 1] - 1) / j.dims[j.r - 1], rowcopy_task, &j);
    return true;
  }
  j.k = 0;
  while (j.k < j.r && j.ist[j.k] != 1) j.k++;
  if (j.k == j.r) { /* no dim walks the input contiguously (cannot happen after collapsing); element by element */
    for (int64_t i = 0; i < out->n; i++) j.o[i] = j.a[offset_at(i, j.dims, j.r, j.ist)];
    return true;
  }
  for (uint32_t i = 0; i < j.r - 1; i++)
    if (i != j.k) j.odims[j.nouter] = j.dims[i], j.oist[j.nouter] = j.ist[i], j.oost[j.nouter++] = j.ost[i];
  j.bands = (j.dims[j.k] + TILE - 1) / TILE;
  int64_t items = elements(j.odims, j.nouter) * j.bands;
  par_for(x->c, items, (GRAIN + TILE * j.dims[j.r - 1] - 1) / (TILE * j.dims[j.r - 1]), transpose_task, &j);
  return true;
}

/* slice_by_index with Python slice semantics per dimension. */
static bool k_slice(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok);
  int64_t beg[MIL_MAX_RANK], end[MIL_MAX_RANK], str[MIL_MAX_RANK], bm[MIL_MAX_RANK], em[MIL_MAX_RANK],
      sm[MIL_MAX_RANK];
  uint32_t nb, ne, ns, nbm, nem, nsm;
  if (!find_arg(x->s, "begin") || !find_arg(x->s, "end")) return fail(x, "needs begin and end");
  ints_arg(x, "begin", beg, MIL_MAX_RANK, &nb, &ok);
  ints_arg(x, "end", end, MIL_MAX_RANK, &ne, &ok);
  bool has_stride = ints_arg(x, "stride", str, MIL_MAX_RANK, &ns, &ok);
  bool has_bm = ints_arg(x, "begin_mask", bm, MIL_MAX_RANK, &nbm, &ok);
  bool has_em = ints_arg(x, "end_mask", em, MIL_MAX_RANK, &nem, &ok);
  bool has_sm = ints_arg(x, "squeeze_mask", sm, MIL_MAX_RANK, &nsm, &ok);
  if (!ok) return false;
  uint32_t r = a->rank;
  if (nb != r || ne != r || (has_stride && ns != r) || (has_bm && nbm != r) || (has_em && nem != r) ||
      (has_sm && nsm != r))
    return fail(x, "begin, end, stride and masks need %u entries each", r);
  int64_t st_[MIL_MAX_RANK], start[MIL_MAX_RANK], step[MIL_MAX_RANK], cnt[MIL_MAX_RANK], dims[MIL_MAX_RANK] = {0};
  uint32_t rank = 0;
  strides_of(a->dims, r, st_);
  for (uint32_t i = 0; i < r; i++) {
    int64_t D = a->dims[i], s = has_stride ? str[i] : 1, b = beg[i], e = end[i];
    if (s == 0) return fail(x, "stride 0 in dimension %u", i);
    if (has_sm && sm[i]) {
      b = b < 0 ? b + D : b;
      if (b < 0 || b >= D) return fail(x, "squeezed index %lld is out of range in dimension %u", (long long)beg[i], i);
      start[i] = b, step[i] = 1, cnt[i] = 1;
      continue;
    }
    if (s > 0) {
      b = has_bm && bm[i] ? 0 : b < 0 ? (b + D < 0 ? 0 : b + D) : (b > D ? D : b);
      e = has_em && em[i] ? D : e < 0 ? (e + D < 0 ? 0 : e + D) : (e > D ? D : e);
      cnt[i] = e > b ? (e - b + s - 1) / s : 0;
    } else {
      b = has_bm && bm[i] ? D - 1 : b < 0 ? (b + D < -1 ? -1 : b + D) : (b > D - 1 ? D - 1 : b);
      e = has_em && em[i] ? -1 : e < 0 ? (e + D < -1 ? -1 : e + D) : (e > D - 1 ? D - 1 : e);
      cnt[i] = b > e ? (b - e + (-s) - 1) / (-s) : 0;
    }
    start[i] = b, step[i] = s;
    dims[rank++] = cnt[i];
  }
  if (!expect_shape(x, out, dims, rank) || !same_class(x, a, out)) return false;
  if (a->st == ST_H16) return fail(x, "fp16 weights are not sliced in place"); /* the plan prevents this */
  int64_t base = 0, sst[MIL_MAX_RANK];
  for (uint32_t i = 0; i < r; i++) base += start[i] * st_[i], sst[i] = step[i] * st_[i];
  const uint32_t *in = u32(a);
  uint32_t *o = u32(out);
  if (r > 0 && sst[r - 1] == 1) { /* whole rows at a time */
    int64_t len = cnt[r - 1], rows = len ? out->n / len : 0;
    for (int64_t i = 0; i < rows; i++) memcpy(o + i * len, in + base + offset_at(i, cnt, r - 1, sst), (size_t)len * 4);
    return true;
  }
  for (int64_t i = 0; i < out->n; i++) o[i] = in[base + offset_at(i, cnt, r, sst)];
  return true;
}

/* slice_by_size: x[begin[i] : begin[i] + size[i]] per dimension; a negative
 * begin counts from the end, size -1 takes the rest. begin and size may be
 * runtime values, so a slice out of range is an error at run time. */
static bool k_slice_size(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok);
  int64_t beg[MIL_MAX_RANK], size[MIL_MAX_RANK], dims[MIL_MAX_RANK], st_[MIL_MAX_RANK];
  uint32_t nb, ns;
  if (ok && (!find_arg(x->s, "begin") || !find_arg(x->s, "size"))) return fail(x, "needs begin and size");
  ints_arg(x, "begin", beg, MIL_MAX_RANK, &nb, &ok);
  ints_arg(x, "size", size, MIL_MAX_RANK, &ns, &ok);
  if (!ok) return false;
  if (a->st == ST_STR) return fail(x, "argument 'x' must be a tensor");
  uint32_t r = a->rank;
  if (nb != r || ns != r) return fail(x, "begin and size need %u entries each (they have %u and %u)", r, nb, ns);
  for (uint32_t i = 0; i < r; i++) {
    int64_t D = a->dims[i], b = beg[i] < 0 && beg[i] >= -D ? beg[i] + D : beg[i];
    if (b < 0 || b > D)
      return fail(x, "begin %lld is out of range for dimension %u of size %lld", (long long)beg[i], i, (long long)D);
    if (size[i] == -1) size[i] = D - b;
    if (size[i] < 0 || size[i] > D - b)
      return fail(x, "size %lld from begin %lld does not fit dimension %u of size %lld", (long long)size[i],
                  (long long)beg[i], i, (long long)D);
    beg[i] = b;
    dims[i] = size[i];
  }
  if (!expect_shape(x, out, dims, r) || !same_class(x, a, out)) return false;
  if (a->st == ST_H16) return fail(x, "fp16 weights are not sliced in place"); /* the plan prevents this */
  strides_of(a->dims, r, st_);
  int64_t base = 0;
  for (uint32_t i = 0; i < r; i++) base += beg[i] * st_[i];
  const uint32_t *in = u32(a);
  uint32_t *o = u32(out);
  if (r == 0) {
    o[0] = in[0];
    return true;
  }
  int64_t len = dims[r - 1], rows = len ? out->n / len : 0;
  for (int64_t i = 0; i < rows; i++) memcpy(o + i * len, in + base + offset_at(i, dims, r - 1, st_), (size_t)len * 4);
  return true;
}

/* One result of split: `chunk` elements of each of the input's outer rows
 * (`stride` apart, from element `at`); one item is one row. */
typedef struct SplitJob {
  const uint32_t *a;
  uint32_t *o;
  int64_t chunk, stride, at;
} SplitJob;

static void split_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  (void)tid;
  const SplitJob *j = arg;
  for (int64_t p = lo; p < hi; p++) memcpy(j->o + p * j->chunk, j->a + p * j->stride + j->at, (size_t)j->chunk * 4);
}

static bool k_split(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok);
  double axis_d = scalar_arg(x, "axis", 0, &ok);
  if (!find_arg(x->s, "axis")) return fail(x, "missing argument 'axis'");
  uint32_t ax = 0;
  if (!ok || !norm_axis(x, to_index(axis_d), a->rank, &ax)) return false;
  int64_t sizes_buf[64];
  uint32_t ns;
  bool has_sizes = ints_arg(x, "split_sizes", sizes_buf, 64, &ns, &ok);
  double num = scalar_arg(x, "num_splits", 0, &ok);
  if (!ok) return false;
  if (!has_sizes) {
    if (num != nout || nout > 64 || a->dims[ax] % nout) return fail(x, "cannot split dimension %u evenly %u ways", ax, nout);
    for (uint32_t k = 0; k < nout; k++) sizes_buf[k] = a->dims[ax] / nout;
    ns = nout;
  }
  int64_t total = 0;
  for (uint32_t k = 0; k < ns; k++) total += sizes_buf[k];
  if (ns != nout || total != a->dims[ax]) return fail(x, "the split sizes do not match the %u results and dimension %u", nout, ax);
  int64_t pre = elements(a->dims, ax), len = a->dims[ax], post = elements(a->dims + ax + 1, a->rank - ax - 1), at = 0;
  for (uint32_t k = 0; k < nout; k++) {
    int64_t dims[MIL_MAX_RANK] = {0};
    memcpy(dims, a->dims, sizeof dims);
    dims[ax] = sizes_buf[k];
    if (!expect_shape(x, &out[k], dims, a->rank) || !same_class(x, a, &out[k])) return false;
    if (a->st == ST_H16) return fail(x, "fp16 weights are not split in place");
    SplitJob j = {.a = u32(a), .o = u32(&out[k]), .chunk = sizes_buf[k] * post, .stride = len * post, .at = at * post};
    if (j.chunk > 0) par_for(x->c, pre, (GRAIN + j.chunk - 1) / j.chunk, split_task, &j);
    at += sizes_buf[k];
  }
  return true;
}

static bool k_concat(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const MilArg *va = find_arg(x->s, "values");
  if (!va || va->nitems == 0) return fail(x, "missing argument 'values'");
  double axis_d = scalar_arg(x, "axis", 0, &ok);
  bool inter = scalar_arg(x, "interleave", 0, &ok) != 0;
  if (!find_arg(x->s, "axis")) return fail(x, "missing argument 'axis'");
  if (!ok) return false;
  uint32_t nv = va->nitems;
  const Val *v0 = item(x, va, 0);
  uint32_t ax = 0;
  if (!norm_axis(x, to_index(axis_d), v0->rank, &ax)) return false;
  int64_t dims[MIL_MAX_RANK];
  memcpy(dims, v0->dims, sizeof dims);
  dims[ax] = 0;
  for (uint32_t j = 0; j < nv; j++) {
    const Val *v = item(x, va, j);
    bool same = v->rank == v0->rank;
    for (uint32_t i = 0; same && i < v0->rank; i++)
      same = i == ax ? !inter || v->dims[i] == v0->dims[i] : v->dims[i] == v0->dims[i];
    if (!same) return fail(x, "value %u does not match the shape of the first value", j);
    if (v->st != out->st) return fail(x, "value %u is %s but the result is declared %s", j, mil_dtype_name(v->dt), mil_dtype_name(out->dt));
    dims[ax] += v->dims[ax];
  }
  if (!expect_shape(x, out, dims, v0->rank)) return false;
  int64_t pre = elements(dims, ax), len = dims[ax], post = elements(dims + ax + 1, v0->rank - ax - 1);
  for (int64_t p = 0; p < pre; p++)
    for (int64_t k = 0; k < len; k++) {
      uint32_t j = 0;
      int64_t at = k;
      if (inter) j = (uint32_t)(k % nv), at = k / nv;
      else
        while (at >= item(x, va, j)->dims[ax]) at -= item(x, va, j++)->dims[ax];
      const Val *v = item(x, va, j);
      int64_t jl = v->dims[ax];
      memcpy(u32(out) + (p * len + k) * post, u32(v) + (p * jl + at) * post, (size_t)post * 4);
    }
  return true;
}

/* gather along axis: out[pre, j..., post] = x[pre, indices[j...], post]. */
static bool k_gather(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok), *ind = req_arg(x, "indices", &ok);
  double axis_d = scalar_arg(x, "axis", 0, &ok), bd = scalar_arg(x, "batch_dims", 0, &ok);
  uint32_t ax = 0;
  if (!ok || !norm_axis(x, to_index(axis_d), a->rank, &ax)) return false;
  if (bd != 0) return fail(x, "batch_dims other than 0 are not supported yet");
  if (a->rank + ind->rank - 1 > MIL_MAX_RANK) return fail(x, "the result has too many dimensions");
  int64_t dims[MIL_MAX_RANK];
  uint32_t rank = 0;
  for (uint32_t i = 0; i < ax; i++) dims[rank++] = a->dims[i];
  for (uint32_t i = 0; i < ind->rank; i++) dims[rank++] = ind->dims[i];
  for (uint32_t i = ax + 1; i < a->rank; i++) dims[rank++] = a->dims[i];
  if (!expect_shape(x, out, dims, rank) || !same_class(x, a, out)) return false;
  int64_t pre = elements(a->dims, ax), len = a->dims[ax], post = elements(a->dims + ax + 1, a->rank - ax - 1);
  /* iOS15/16 wrap negative indices; from iOS17 they are out of bounds. */
  bool wrap = x->c->f->ios < 17;
  for (int64_t p = 0; p < pre; p++)
    for (int64_t j = 0; j < ind->n; j++) {
      int64_t k = to_index(ld(ind, j));
      if (k < 0 && wrap) k += len;
      if (k < 0 || k >= len)
        return fail(x, "index %g is out of range for dimension %u of size %lld", ld(ind, j), ax, (long long)len);
      if (a->st == ST_H16)
        for (int64_t q = 0; q < post; q++) st(out, (p * ind->n + j) * post + q, ld(a, (p * len + k) * post + q));
      else
        memcpy(u32(out) + (p * ind->n + j) * post, u32(a) + (p * len + k) * post, (size_t)post * 4);
    }
  return true;
}

/* ---- more shape ops: expand_dims, squeeze, stack, tile, pad, shape, range_1d, gather_along_axis ---- */

/* Copies n elements from a (from element ai) to out (from oi); the plan
 * gives these ops no fp16 weight (ST_H16 only feeds linear and conv). */
static bool copy_from(Ctx *x, const Val *a) {
  if (a->st == ST_H16) return fail(x, "fp16 weights are not copied in place"); /* the plan prevents this */
  if (a->st == ST_STR) return fail(x, "argument 'x' must be a tensor");
  return true;
}

/* expand_dims(x, axes): size-1 dims inserted at the sorted positions axes
 * name in the result (negative ones count from the result's end). */
static bool k_expand_dims(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok);
  int64_t axes[MIL_MAX_RANK];
  uint32_t n;
  bool given = ints_arg(x, "axes", axes, MIL_MAX_RANK, &n, &ok);
  if (!ok) return false;
  if (!given || n == 0) return fail(x, "missing argument 'axes'");
  if (!copy_from(x, a)) return false;
  uint32_t rank = a->rank + n;
  if (rank > MIL_MAX_RANK) return fail(x, "the result has too many dimensions");
  bool ins[MIL_MAX_RANK] = {false};
  for (uint32_t i = 0; i < n; i++) {
    uint32_t p = 0;
    if (!norm_axis(x, axes[i], rank, &p)) return false;
    if (ins[p]) return fail(x, "axis %lld is listed twice", (long long)axes[i]);
    ins[p] = true;
  }
  int64_t dims[MIL_MAX_RANK];
  for (uint32_t i = 0, k = 0; i < rank; i++) dims[i] = ins[i] ? 1 : a->dims[k++];
  if (!expect_shape(x, out, dims, rank) || !same_class(x, a, out)) return false;
  memcpy(out->p, a->p, (size_t)a->n * 4);
  return true;
}

/* squeeze(x, axes?): removes the listed size-1 dims (a listed dim of
 * another size stays, as coremltools does); without axes, every size-1 dim. */
static bool k_squeeze(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok);
  int64_t axes[MIL_MAX_RANK];
  uint32_t n;
  bool given = ints_arg(x, "axes", axes, MIL_MAX_RANK, &n, &ok);
  if (!ok || !copy_from(x, a)) return false;
  bool drop[MIL_MAX_RANK] = {false};
  for (uint32_t i = 0; i < a->rank; i++) drop[i] = !given && a->dims[i] == 1;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t p = 0;
    if (!norm_axis(x, axes[i], a->rank, &p)) return false;
    drop[p] = a->dims[p] == 1;
  }
  int64_t dims[MIL_MAX_RANK] = {0};
  uint32_t rank = 0;
  for (uint32_t i = 0; i < a->rank; i++)
    if (!drop[i]) dims[rank++] = a->dims[i];
  if (!expect_shape(x, out, dims, rank) || !same_class(x, a, out)) return false;
  memcpy(out->p, a->p, (size_t)a->n * 4);
  return true;
}

/* stack(values, axis): a new dim of size N at axis (in [-(r+1), r]). */
static bool k_stack(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const MilArg *va = find_arg(x->s, "values");
  if (!va || va->nitems == 0) return fail(x, "missing argument 'values'");
  if (!find_arg(x->s, "axis")) return fail(x, "missing argument 'axis'");
  double axis_d = scalar_arg(x, "axis", 0, &ok);
  if (!ok) return false;
  const Val *v0 = item(x, va, 0);
  uint32_t nv = va->nitems, ax = 0;
  if (v0->rank + 1 > MIL_MAX_RANK) return fail(x, "the result has too many dimensions");
  if (!norm_axis(x, to_index(axis_d), v0->rank + 1, &ax)) return false;
  for (uint32_t j = 0; j < nv; j++) {
    const Val *v = item(x, va, j);
    bool same = v->rank == v0->rank && v->st != ST_STR && v->st != ST_H16;
    for (uint32_t i = 0; same && i < v0->rank; i++) same = v->dims[i] == v0->dims[i];
    if (!same) return fail(x, "value %u does not have the shape of the first value", j);
    if (v->st != out->st) return fail(x, "value %u is %s but the result is declared %s", j, mil_dtype_name(v->dt), mil_dtype_name(out->dt));
  }
  int64_t dims[MIL_MAX_RANK];
  for (uint32_t i = 0, k = 0; i <= v0->rank; i++) dims[i] = i == ax ? nv : v0->dims[k++];
  if (!expect_shape(x, out, dims, v0->rank + 1)) return false;
  int64_t pre = elements(v0->dims, ax), post = elements(v0->dims + ax, v0->rank - ax);
  for (int64_t p = 0; p < pre; p++)
    for (uint32_t j = 0; j < nv; j++)
      memcpy(u32(out) + (p * nv + j) * post, u32(item(x, va, j)) + p * post, (size_t)post * 4);
  return true;
}

/* tile(x, reps): the result's element at index i is x's at i mod x.shape. */
static bool k_tile(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok);
  int64_t reps[MIL_MAX_RANK];
  uint32_t n;
  bool given = ints_arg(x, "reps", reps, MIL_MAX_RANK, &n, &ok);
  if (!ok) return false;
  if (!given) return fail(x, "missing argument 'reps'");
  if (!copy_from(x, a)) return false;
  if (n != a->rank) return fail(x, "reps has %u entries for rank %u", n, a->rank);
  int64_t dims[MIL_MAX_RANK], ist[MIL_MAX_RANK];
  for (uint32_t i = 0; i < n; i++) {
    if (reps[i] < 1 || reps[i] > INT32_MAX) return fail(x, "reps entries must be positive (entry %u is %lld)", i, (long long)reps[i]);
    dims[i] = a->dims[i] * reps[i];
  }
  if (!expect_shape(x, out, dims, n) || !same_class(x, a, out)) return false;
  strides_of(a->dims, n, ist);
  const uint32_t *in = u32(a);
  uint32_t *o = u32(out);
  for (int64_t i = 0; i < out->n; i++) {
    int64_t rem = i, off = 0;
    for (uint32_t d = n; d-- > 0;) {
      off += (rem % dims[d]) % a->dims[d] * ist[d];
      rem /= dims[d];
    }
    o[i] = in[off];
  }
  return true;
}

/* The source index along one padded dim of size D for position p (which is
 * `before` past the start) in each mode; -1 for the constant. */
enum { PAD_CONSTANT, PAD_REFLECT, PAD_REPLICATE };

static int64_t pad_source(int mode, int64_t p, int64_t D) {
  if (p >= 0 && p < D) return p;
  if (mode == PAD_CONSTANT) return -1;
  if (mode == PAD_REPLICATE) return p < 0 ? 0 : D - 1;
  return p < 0 ? -p : 2 * (D - 1) - p; /* reflect: the edge is not repeated; pad < D is checked */
}

/* pad(x, pad, mode?, constant_val?): pad[2i], pad[2i+1] elements before and
 * after the i-th of the last len(pad)/2 dims. */
static bool k_pad(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok);
  int64_t pads[2 * MIL_MAX_RANK];
  uint32_t n;
  bool given = ints_arg(x, "pad", pads, 2 * MIL_MAX_RANK, &n, &ok);
  const char *ms = string_arg(x, "mode", "constant", &ok);
  double cval = scalar_arg(x, "constant_val", 0, &ok);
  if (!ok) return false;
  if (!given) return fail(x, "missing argument 'pad'");
  if (!copy_from(x, a)) return false;
  int mode = !strcmp(ms, "constant") ? PAD_CONSTANT : !strcmp(ms, "reflect") ? PAD_REFLECT
             : !strcmp(ms, "replicate") ? PAD_REPLICATE : -1;
  if (mode < 0) return fail(x, "unknown mode '%s' (constant, reflect or replicate)", ms);
  if (n % 2 || n / 2 > a->rank) return fail(x, "pad needs an even number of entries, at most %u", 2 * a->rank);
  int64_t before[MIL_MAX_RANK] = {0}, dims[MIL_MAX_RANK];
  uint32_t first = a->rank - n / 2;
  for (uint32_t i = 0; i < a->rank; i++) {
    dims[i] = a->dims[i];
    if (i < first) continue;
    int64_t b = pads[2 * (i - first)], e = pads[2 * (i - first) + 1];
    if (b < 0 || e < 0 || b > INT32_MAX || e > INT32_MAX) return fail(x, "pad entries must not be negative");
    if (mode == PAD_REFLECT && (b >= a->dims[i] || e >= a->dims[i]))
      return fail(x, "reflect padding of dimension %u needs pads below its size %lld", i, (long long)a->dims[i]);
    if (mode == PAD_REPLICATE && a->dims[i] == 0 && b + e > 0)
      return fail(x, "replicate padding of the empty dimension %u", i);
    before[i] = b;
    dims[i] += b + e;
  }
  if (!expect_shape(x, out, dims, a->rank) || !same_class(x, a, out)) return false;
  int64_t ist[MIL_MAX_RANK];
  strides_of(a->dims, a->rank, ist);
  for (int64_t i = 0; i < out->n; i++) {
    int64_t rem = i, off = 0;
    bool inside = true;
    for (uint32_t d = a->rank; d-- > 0;) {
      int64_t s = pad_source(mode, rem % dims[d] - before[d], a->dims[d]);
      rem /= dims[d];
      if (s < 0) inside = false;
      else off += s * ist[d];
    }
    if (inside) u32(out)[i] = u32(a)[off];
    else st(out, i, cval);
  }
  return true;
}

/* shape(x): x's dims as an int32 vector. */
static bool k_shape(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok);
  if (!ok) return false;
  if (a->st == ST_STR) return fail(x, "argument 'x' must be a tensor");
  if (out->dt != MIL_DT_INT32) return fail(x, "returns int32, but the result is declared %s", mil_dtype_name(out->dt));
  int64_t dims[1] = {a->rank};
  if (!expect_shape(x, out, dims, 1)) return false;
  for (uint32_t i = 0; i < a->rank; i++) st(out, i, (double)a->dims[i]);
  return true;
}

/* range_1d(end, start, step): start, start + step, ... up to end
 * (excluded), ceil((end - start) / step) elements as NumPy's arange. The
 * declared length must match, as the shape is fixed at prepare. */
static bool k_range(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  if (!find_arg(x->s, "start") || !find_arg(x->s, "end") || !find_arg(x->s, "step"))
    return fail(x, "needs start, end and step");
  double s0 = scalar_arg(x, "start", 0, &ok), e = scalar_arg(x, "end", 0, &ok), sp = scalar_arg(x, "step", 0, &ok);
  if (!ok) return false;
  if (!(sp != 0) || !isfinite(s0) || !isfinite(e) || !isfinite(sp))
    return fail(x, "start, end and step must be finite and step not 0");
  double cnt = ceil((e - s0) / sp);
  int64_t len = cnt > 0 ? to_index(cnt) : 0;
  int64_t dims[1] = {len};
  if (!expect_shape(x, out, dims, 1)) return false;
  for (int64_t i = 0; i < len; i++) st(out, i, s0 + (double)i * sp);
  return true;
}

/* gather_along_axis(x, indices, axis?=0): torch.gather, out[..., j, ...] =
 * x[..., indices[..., j, ...], ...]; indices has x's rank and its dims
 * except at axis. Negative indices wrap before iOS17, as in gather. */
static bool k_gather_axis(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok), *ind = req_arg(x, "indices", &ok);
  double axis_d = scalar_arg(x, "axis", 0, &ok);
  uint32_t ax = 0;
  if (!ok || !copy_from(x, a) || !norm_axis(x, to_index(axis_d), a->rank, &ax)) return false;
  if (ind->st != ST_I32 || ind->dt == MIL_DT_BOOL) return fail(x, "indices must be integers");
  bool same = ind->rank == a->rank;
  for (uint32_t i = 0; same && i < a->rank; i++) same = i == ax || ind->dims[i] == a->dims[i];
  if (!same) return fail(x, "indices must have the rank of x and its dims except at axis %u", ax);
  if (!expect_shape(x, out, ind->dims, ind->rank) || !same_class(x, a, out)) return false;
  int64_t len = a->dims[ax], post = elements(a->dims + ax + 1, a->rank - ax - 1), il = ind->dims[ax];
  bool wrap = x->c->f->ios < 17;
  for (int64_t i = 0; i < out->n; i++) {
    int64_t k = ((const int32_t *)ind->p)[i];
    if (k < 0 && wrap) k += len;
    if (k < 0 || k >= len)
      return fail(x, "index %lld is out of range for dimension %u of size %lld", (long long)((const int32_t *)ind->p)[i], ax,
                  (long long)len);
    int64_t p = i / (il * post), q = i % post;
    u32(out)[i] = u32(a)[(p * len + k) * post + q];
  }
  return true;
}

/* ---- indices of extremes: reduce_argmax, reduce_argmin, topk ---- */

/* An order of two elements for argmax (want_max) or argmin, as NumPy's:
 * NaN beats everything (the first NaN wins), and ties keep the first. */
static bool beats(double v, double best, bool want_max) {
  if (isnan(best)) return false;
  if (isnan(v)) return true;
  return want_max ? v > best : v < best;
}

typedef struct ArgJob {
  const Val *a;
  Val *o;
  int64_t len, post;
  bool want_max;
} ArgJob;

static void arg_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  (void)tid;
  const ArgJob *j = arg;
  for (int64_t i = lo; i < hi; i++) {
    int64_t base = i / j->post * j->len * j->post + i % j->post, best = 0;
    double bv = ld(j->a, base);
    for (int64_t k = 1; k < j->len; k++) {
      double v = ld(j->a, base + k * j->post);
      if (beats(v, bv, j->want_max)) bv = v, best = k;
    }
    ((int32_t *)j->o->p)[i] = (int32_t)best;
  }
}

/* reduce_argmax / reduce_argmin(x, axis?=-1, keep_dims?=false,
 * output_dtype?="int32"): int32 indices. */
static bool k_argreduce(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok);
  double axis_d = scalar_arg(x, "axis", -1, &ok);
  bool keep = scalar_arg(x, "keep_dims", 0, &ok) != 0;
  const char *odt = string_arg(x, "output_dtype", "int32", &ok);
  uint32_t ax = 0;
  if (!ok) return false;
  if (a->st == ST_STR) return fail(x, "argument 'x' must be a tensor");
  if (strcmp(odt, "int32")) return fail(x, "output_dtype '%s' is not supported (only int32)", odt);
  if (out->dt != MIL_DT_INT32) return fail(x, "returns int32, but the result is declared %s", mil_dtype_name(out->dt));
  if (!norm_axis(x, to_index(axis_d), a->rank, &ax)) return false;
  if (a->dims[ax] == 0) return fail(x, "dimension %u is empty", ax);
  if (a->dims[ax] > INT32_MAX) return fail(x, "dimension %u is too long for int32 indices", ax);
  int64_t dims[MIL_MAX_RANK] = {0};
  uint32_t rank = 0;
  for (uint32_t i = 0; i < a->rank; i++)
    if (i != ax || keep) dims[rank++] = i == ax ? 1 : a->dims[i];
  if (!expect_shape(x, out, dims, rank)) return false;
  ArgJob j = {.a = a, .o = out, .len = a->dims[ax], .post = elements(a->dims + ax + 1, a->rank - ax - 1),
              .want_max = code == 1};
  par_for(x->c, out->n, (GRAIN + j.len - 1) / j.len, arg_task, &j);
  return true;
}

/* topk(x, k?=1, axis?=-1, ascending?=false, sort?=true, return_indices?=true):
 * the k largest (smallest when ascending) along axis and their int32
 * indices, in order; equal values keep their order (a stable sort), NaN
 * counts as the largest. sort=false returns the same (sorted) order, which
 * is one of the orders it allows. */
typedef struct TopkJob {
  const Val *a;
  Val *vo, *io;
  int64_t len, post, k;
  bool asc;
} TopkJob;

/* The order topk lists elements in: (value, index) pairs by value (NaN
 * first, as the largest; the smallest first when ascending), then index. */
static bool topk_before(double va, int64_t ia, double vb, int64_t ib, bool want_max) {
  bool na = isnan(va), nb = isnan(vb);
  if (na != nb) return na;
  if (!na && va != vb) return want_max ? va > vb : va < vb;
  return ia < ib;
}

static void topk_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  (void)tid;
  const TopkJob *j = arg;
  for (int64_t i = lo; i < hi; i++) {
    int64_t pre = i / j->post, q = i % j->post, base = pre * j->len * j->post + q;
    /* Rank r is the first element, in topk's strict order, after rank r - 1:
     * O(k len) and no scratch (k is small in decoders). */
    int64_t prev = -1;
    double pv = 0;
    for (int64_t r = 0; r < j->k; r++) {
      int64_t best = -1;
      double bv = 0;
      for (int64_t m = 0; m < j->len; m++) {
        double v = ld(j->a, base + m * j->post);
        if (prev >= 0 && !topk_before(pv, prev, v, m, !j->asc)) continue;
        if (best < 0 || topk_before(v, m, bv, best, !j->asc)) best = m, bv = v;
      }
      int64_t o = (pre * j->k + r) * j->post + q;
      ((int32_t *)j->io->p)[o] = (int32_t)best;
      st(j->vo, o, bv);
      prev = best, pv = bv;
    }
  }
}

static bool k_topk(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok);
  double kd = scalar_arg(x, "k", 1, &ok), axis_d = scalar_arg(x, "axis", -1, &ok);
  bool asc = scalar_arg(x, "ascending", 0, &ok) != 0;
  bool ret_ind = scalar_arg(x, "return_indices", 1, &ok) != 0;
  (void)scalar_arg(x, "sort", 1, &ok);
  const char *idt = string_arg(x, "output_indices_dtype", "int32", &ok);
  uint32_t ax = 0;
  if (!ok || !copy_from(x, a) || !norm_axis(x, to_index(axis_d), a->rank, &ax)) return false;
  if (!ret_ind) return fail(x, "return_indices = false is not supported");
  if (nout != 2) return fail(x, "must have two results (values and indices)");
  int64_t k = to_index(kd);
  if (k < 1 || k > a->dims[ax] || a->dims[ax] > INT32_MAX)
    return fail(x, "k %g is out of range for dimension %u of size %lld", kd, ax, (long long)a->dims[ax]);
  int64_t dims[MIL_MAX_RANK];
  memcpy(dims, a->dims, sizeof dims);
  dims[ax] = k;
  if (!expect_shape(x, &out[0], dims, a->rank) || !expect_shape(x, &out[1], dims, a->rank) ||
      !same_class(x, a, &out[0]))
    return false;
  MilDType it = mil_dtype_from_name(idt, strlen(idt));
  if (it != MIL_DT_INT32 && it != MIL_DT_UINT16) return fail(x, "output_indices_dtype must be int32 or uint16, not '%s'", idt);
  if (out[1].dt != it) return fail(x, "the indices are %s, but the result is declared %s", idt, mil_dtype_name(out[1].dt));
  if (it == MIL_DT_UINT16 && a->dims[ax] > 65536) return fail(x, "dimension %u is too long for uint16 indices", ax);
  TopkJob j = {.a = a, .vo = &out[0], .io = &out[1], .len = a->dims[ax], .post = elements(a->dims + ax + 1, a->rank - ax - 1),
               .k = k, .asc = asc};
  int64_t lines = out[0].n / k, per = k * j.len + 1;
  par_for(x->c, lines, (GRAIN + per - 1) / per, topk_task, &j);
  return true;
}

/* ---- pooling ---- */

/* max_pool / avg_pool over 1, 2 or 3 spatial dims, all as 3-D (as conv).
 * One item is one channel of one batch item. avg_pool divides by the
 * window's elements inside x and its explicit padding (the part of a
 * ceil_mode window beyond the padding never counts), or with
 * exclude_padding_from_average by those inside x only. */
typedef struct PoolJob {
  const Val *a;
  Val *o;
  bool avg, exclude;
  int64_t D[3], K[3], OD[3], st[3], before[3], after[3];
} PoolJob;

static void pool_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  (void)tid;
  const PoolJob *j = arg;
  const int64_t *D = j->D, *K = j->K, *OD = j->OD;
  int64_t in_sz = D[0] * D[1] * D[2], out_sz = OD[0] * OD[1] * OD[2];
  for (int64_t it = lo; it < hi; it++)
    for (int64_t oz = 0; oz < OD[0]; oz++)
      for (int64_t oy = 0; oy < OD[1]; oy++)
        for (int64_t ox = 0; ox < OD[2]; ox++) {
          int64_t o[3] = {oz, oy, ox}, lo_[3], hi_[3], cnt = 1;
          for (int d = 0; d < 3; d++) {
            int64_t s = o[d] * j->st[d] - j->before[d], e = s + K[d];
            int64_t ps = s < -j->before[d] ? -j->before[d] : s, pe = e > D[d] + j->after[d] ? D[d] + j->after[d] : e;
            lo_[d] = s < 0 ? 0 : s;
            hi_[d] = e > D[d] ? D[d] : e;
            cnt *= j->exclude ? (hi_[d] > lo_[d] ? hi_[d] - lo_[d] : 0) : (pe > ps ? pe - ps : 0);
          }
          double r = j->avg ? 0 : -HUGE_VAL;
          for (int64_t z = lo_[0]; z < hi_[0]; z++)
            for (int64_t y = lo_[1]; y < hi_[1]; y++)
              for (int64_t xx = lo_[2]; xx < hi_[2]; xx++) {
                double v = ld(j->a, it * in_sz + (z * D[1] + y) * D[2] + xx);
                if (j->avg) r += v;
                else r = op_sem_maximum(r, v);
              }
          if (j->avg) r = cnt > 0 ? r / (double)cnt : 0;
          st(j->o, it * out_sz + (oz * OD[1] + oy) * OD[2] + ox, r);
        }
}

static bool k_pool(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok);
  if (!ok) return false;
  if (a->st != ST_F32 || a->rank < 3 || a->rank > 5)
    return fail(x, "x must be an fp16 or fp32 tensor of rank 3, 4 or 5 (a 1-D, 2-D or 3-D pool)");
  uint32_t S = a->rank - 2, lead = 3 - S, n;
  PoolJob j = {.a = a, .o = out, .avg = code == 1, .D = {1, 1, 1}, .K = {1, 1, 1}, .st = {1, 1, 1}};
  int64_t tmp[6] = {0};
  if (!ints_arg(x, "kernel_sizes", tmp, 3, &n, &ok) || n != S) return ok ? fail(x, "kernel_sizes needs %u entries", S) : false;
  memcpy(j.K + lead, tmp, S * sizeof(int64_t));
  if (ints_arg(x, "strides", tmp, 3, &n, &ok) && n == S) memcpy(j.st + lead, tmp, S * sizeof(int64_t));
  else if (ok && n) return fail(x, "strides needs %u entries", S);
  const char *pt = string_arg(x, "pad_type", NULL, &ok);
  bool has_pad = ints_arg(x, "pad", tmp, 6, &n, &ok);
  bool ceil_mode = scalar_arg(x, "ceil_mode", 0, &ok) != 0;
  j.exclude = scalar_arg(x, "exclude_padding_from_average", 0, &ok) != 0;
  if (!ok) return false;
  if (!pt) return fail(x, "missing argument 'pad_type'");
  bool custom = !strcmp(pt, "custom"), same = !strcmp(pt, "same"), lower = !strcmp(pt, "same_lower");
  if (!custom && !same && !lower && strcmp(pt, "valid")) return fail(x, "unknown pad_type '%s'", pt);
  if (custom && (!has_pad || n != 2 * S)) return fail(x, "pad_type custom needs pad with %u entries", 2 * S);
  if (ceil_mode && (same || lower)) return fail(x, "ceil_mode needs pad_type valid or custom");
  for (uint32_t i = 0; i < 3; i++) {
    if (i >= lead) j.D[i] = a->dims[2 + i - lead];
    if (j.K[i] < 1 || j.st[i] < 1) return fail(x, "kernel_sizes and strides must be positive");
    if (i < lead) continue;
    uint32_t si = i - lead;
    if (custom) {
      if (tmp[2 * si] < 0 || tmp[2 * si + 1] < 0 || tmp[2 * si] > INT32_MAX || tmp[2 * si + 1] > INT32_MAX)
        return fail(x, "pad entries must not be negative");
      if (ceil_mode && tmp[2 * si] != tmp[2 * si + 1]) return fail(x, "ceil_mode needs symmetric padding");
      j.before[i] = tmp[2 * si], j.after[i] = tmp[2 * si + 1];
    } else if (same || lower) {
      int64_t outd = (j.D[i] + j.st[i] - 1) / j.st[i], p = outd * j.st[i] - j.D[i] + j.K[i] - j.st[i];
      p = p > 0 ? p : 0;
      j.before[i] = same ? p / 2 : p - p / 2;
      j.after[i] = p - j.before[i];
    }
  }
  int64_t dims[5] = {a->dims[0], a->dims[1]};
  for (uint32_t i = 0; i < 3; i++) {
    int64_t span = j.D[i] + j.before[i] + j.after[i] - j.K[i];
    if (span < 0) return fail(x, "the kernel is larger than the padded input");
    j.OD[i] = (ceil_mode ? (span + j.st[i] - 1) / j.st[i] : span / j.st[i]) + 1;
    /* PyTorch's rule: the last window must start inside x or its leading padding */
    if (ceil_mode && (j.OD[i] - 1) * j.st[i] >= j.D[i] + j.before[i]) j.OD[i]--;
    if (i >= lead) dims[2 + i - lead] = j.OD[i];
  }
  if (!expect_shape(x, out, dims, a->rank)) return false;
  if (out->n == 0) return true;
  int64_t per = out->n / (a->dims[0] * a->dims[1]) * j.K[0] * j.K[1] * j.K[2] + 1;
  par_for(x->c, a->dims[0] * a->dims[1], (GRAIN + per - 1) / per, pool_task, &j);
  return true;
}

/* ---- quantize and dequantize (iOS17) ---- */

/* A per-axis parameter (scale or zero_point): a scalar, or a vector of the
 * elements of x's dimension `axis` (which must then be given). */
static bool qparam(Ctx *x, const char *name, const Val *p, const Val *a, bool has_axis, uint32_t axis) {
  if (p->st == ST_STR) return fail(x, "argument '%s' must be a tensor", name);
  if (p->rank == 0 || (p->rank == 1 && p->n == 1 && !has_axis)) return true;
  if (!has_axis) return fail(x, "%s must be a scalar when axis is not given", name);
  if (p->rank != 1 || p->n != a->dims[axis])
    return fail(x, "%s must be a scalar or a vector of the %lld elements of dimension %u", name, (long long)a->dims[axis], axis);
  return true;
}

/* quantize(input, scale, zero_point?, axis?, output_dtype):
 * clip(round(input / scale) + zero_point) into int8 or uint8, rounding half
 * to even (NumPy's around, which coremltools uses). The quotient is taken in
 * double (coremltools divides in the input's dtype; a difference needs a
 * quotient within an fp16 ulp of a half-integer). NaN is an error.
 * dequantize(input, scale, zero_point?, axis?): scale * (input - zero_point). */
static bool k_quant(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)nout;
  bool ok = true, de = code == 1;
  const Val *a = req_arg(x, "input", &ok), *sc = req_arg(x, "scale", &ok), *zp = opt_arg(x, "zero_point", &ok);
  double axis_d = scalar_arg(x, "axis", 0, &ok);
  bool has_axis = find_arg(x->s, "axis") != NULL;
  const char *odt = de ? NULL : string_arg(x, "output_dtype", NULL, &ok);
  if (!ok) return false;
  if (!de && !odt) return fail(x, "missing argument 'output_dtype'");
  if (a->st == ST_STR) return fail(x, "argument 'input' must be a tensor");
  uint32_t axis = 0;
  if (has_axis && !norm_axis(x, to_index(axis_d), a->rank, &axis)) return false;
  if (!qparam(x, "scale", sc, a, has_axis, axis) || (zp && !qparam(x, "zero_point", zp, a, has_axis, axis))) return false;
  MilDType q = de ? a->dt : mil_dtype_from_name(odt, strlen(odt));
  if (q != MIL_DT_INT8 && q != MIL_DT_UINT8)
    return fail(x, de ? "input must be int8 or uint8, not %s" : "output_dtype must be int8 or uint8, not '%s'",
                de ? mil_dtype_name(a->dt) : odt);
  if (!de && !is_float(a->dt)) return fail(x, "input must be fp16 or fp32, not %s", mil_dtype_name(a->dt));
  if (zp && zp->dt != q) return fail(x, "zero_point is %s but the quantized type is %s", mil_dtype_name(zp->dt), mil_dtype_name(q));
  if (!is_float(sc->dt)) return fail(x, "scale must be fp16 or fp32");
  if (de ? out->dt != sc->dt : out->dt != q)
    return fail(x, "the result is declared %s but the op returns %s", mil_dtype_name(out->dt),
                mil_dtype_name(de ? sc->dt : q));
  if (!de && a->dt != sc->dt) return fail(x, "scale is %s but input is %s", mil_dtype_name(sc->dt), mil_dtype_name(a->dt));
  if (!expect_shape(x, out, a->dims, a->rank)) return false;
  double qlo = q == MIL_DT_INT8 ? -128 : 0, qhi = q == MIL_DT_INT8 ? 127 : 255;
  int64_t post = has_axis ? elements(a->dims + axis + 1, a->rank - axis - 1) : 1, len = has_axis ? a->dims[axis] : 1;
  for (int64_t i = 0; i < out->n; i++) {
    int64_t k = (i / post) % len;
    double s = ld(sc, sc->n == 1 ? 0 : k), z = zp ? ld(zp, zp->n == 1 ? 0 : k) : 0, v = ld(a, i);
    if (de) {
      st(out, i, s * (v - z));
      continue;
    }
    double r = nearbyint(v / s) + z; /* the default rounding mode: half to even */
    if (isnan(r)) return fail(x, "element %lld quantizes to NaN (input %g, scale %g)", (long long)i, v, s);
    st(out, i, r < qlo ? qlo : r > qhi ? qhi : r);
  }
  return true;
}

/* ---- lstm ---- */

/* One LSTM step, one item per (batch row, hidden unit): the four gate sums
 * (weights in the ifoz order: input, forget, output, cell) in double, then
 * c and h of that unit. h is read from hp (the previous step's, a separate
 * buffer) and written to hn; c belongs to the item, updated in place. */
enum { ACT_SIGMOID, ACT_TANH, ACT_RELU, ACT_LINEAR };

typedef struct LstmJob {
  const Val *x, *wih, *whh, *b, *peep;
  const float *hp;
  float *hn, *c;
  int64_t B, NI, H, t;
  int ra, ca, ha; /* recurrent, cell and output activations */
} LstmJob;

static double lstm_act(int a, double v) {
  switch (a) {
  case ACT_SIGMOID: return 1 / (1 + exp_d(-v));
  case ACT_TANH: return tanh_d(v);
  case ACT_RELU: return v > 0 ? v : 0;
  default: return v;
  }
}

static void lstm_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  (void)tid;
  const LstmJob *j = arg;
  int64_t H = j->H, NI = j->NI;
  for (int64_t it = lo; it < hi; it++) {
    int64_t bb = it / H, u = it % H;
    int64_t xo = (j->t * j->B + bb) * NI;
    double g[4];
    for (int k = 0; k < 4; k++) {
      int64_t row = k * H + u;
      double s = j->b ? ld(j->b, row) : 0;
      for (int64_t i = 0; i < NI; i++) s += ld(j->wih, row * NI + i) * ld(j->x, xo + i);
      for (int64_t m = 0; m < H; m++) s += ld(j->whh, row * H + m) * (double)j->hp[bb * H + m];
      g[k] = s;
    }
    double c0 = (double)j->c[it];
    double pi = j->peep ? ld(j->peep, u) : 0, pf = j->peep ? ld(j->peep, H + u) : 0, po = j->peep ? ld(j->peep, 2 * H + u) : 0;
    double ig = lstm_act(j->ra, g[0] + pi * c0), fg = lstm_act(j->ra, g[1] + pf * c0), z = lstm_act(j->ca, g[3]);
    double c1 = fg * c0 + ig * z;
    double og = lstm_act(j->ra, g[2] + po * c1);
    j->c[it] = (float)c1;
    j->hn[it] = (float)(og * lstm_act(j->ha, c1));
  }
}

static bool act_arg(Ctx *x, const char *name, const char *dflt, int *out) {
  bool ok = true;
  const char *s = string_arg(x, name, dflt, &ok);
  if (!ok) return false;
  if (!strcmp(s, "sigmoid")) *out = ACT_SIGMOID;
  else if (!strcmp(s, "tanh")) *out = ACT_TANH;
  else if (!strcmp(s, "relu")) *out = ACT_RELU;
  else if (!strcmp(s, "linear")) *out = ACT_LINEAR;
  else return fail(x, "%s '%s' is not supported (sigmoid, tanh, relu or linear)", name, s);
  return true;
}

/* lstm(x [s, b, I], initial_h [b, H], initial_c [b, H], weight_ih [4H, I],
 * weight_hh [4H, H], bias? [4H], peephole? [3H], direction?, output_sequence?,
 * recurrent_activation?, cell_activation?, activation?): forward direction,
 * no clip. The state is carried in fp32 from step to step (results are
 * rounded in ANE mode once, after the op). Results: the hidden states of
 * every step [s, b, H] (output_sequence) or of the last [1, b, H], and the
 * last h and c [b, H]. */
static bool k_lstm(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code;
  bool ok = true;
  const Val *xs = req_arg(x, "x", &ok), *h0 = req_arg(x, "initial_h", &ok), *c0 = req_arg(x, "initial_c", &ok);
  const Val *wih = req_arg(x, "weight_ih", &ok), *whh = req_arg(x, "weight_hh", &ok);
  const Val *b = opt_arg(x, "bias", &ok), *peep = opt_arg(x, "peephole", &ok);
  const char *dir = string_arg(x, "direction", "forward", &ok);
  bool seq = scalar_arg(x, "output_sequence", 0, &ok) != 0;
  LstmJob j = {.x = xs, .wih = wih, .whh = whh, .b = b, .peep = peep};
  if (!ok || !act_arg(x, "recurrent_activation", "sigmoid", &j.ra) || !act_arg(x, "cell_activation", "tanh", &j.ca) ||
      !act_arg(x, "activation", "tanh", &j.ha))
    return false;
  if (strcmp(dir, "forward"))
    return fail(x, "direction '%s' is not supported yet (only forward)", dir);
  if (find_arg(x->s, "clip")) return fail(x, "clip is not supported yet");
  if (nout != 3) return fail(x, "must have three results (the output, h and c)");
  const Val *all[7] = {xs, h0, c0, wih, whh, b, peep};
  for (int k = 0; k < 7; k++)
    if (all[k] && (all[k]->st == ST_STR || !is_float(all[k]->dt)))
      return fail(x, "x, the states, weights, bias and peephole must be fp16 or fp32");
  if (xs->rank != 3 || whh->rank != 2 || wih->rank != 2)
    return fail(x, "x must have rank 3 and the weights rank 2");
  int64_t S = xs->dims[0], B = xs->dims[1], NI = xs->dims[2], H = whh->dims[1];
  if (whh->dims[0] != 4 * H || wih->dims[0] != 4 * H || wih->dims[1] != NI)
    return fail(x, "weight_ih must be [4H, %lld] and weight_hh [4H, H] (H = %lld)", (long long)NI, (long long)H);
  if ((b && (b->rank != 1 || b->n != 4 * H)) || (peep && (peep->rank != 1 || peep->n != 3 * H)))
    return fail(x, "bias must have 4H = %lld elements and peephole 3H = %lld", (long long)(4 * H), (long long)(3 * H));
  int64_t sd[2] = {B, H};
  if (h0->rank != 2 || h0->dims[0] != B || h0->dims[1] != H || c0->rank != 2 || c0->dims[0] != B || c0->dims[1] != H)
    return fail(x, "initial_h and initial_c must be [%lld, %lld]", (long long)B, (long long)H);
  if (S < 1) return fail(x, "the sequence is empty");
  int64_t od[3] = {seq ? S : 1, B, H};
  if (!expect_shape(x, &out[0], od, 3) || !expect_shape(x, &out[1], sd, 2) || !expect_shape(x, &out[2], sd, 2)) return false;
  for (int k = 0; k < 3; k++)
    if (out[k].st != ST_F32) return fail(x, "result %d must be fp16 or fp32", k);
  j.B = B, j.NI = NI, j.H = H, j.c = fp(&out[2]);
  int64_t n = B * H;
  for (int64_t i = 0; i < n; i++) j.c[i] = (float)ld(c0, i), fp(&out[1])[i] = (float)ld(h0, i);
  /* h ping-pongs: with output_sequence each step writes its row of out[0];
   * otherwise between out[0] and out[1]. Step 0 reads initial_h, copied into out[1]. */
  const float *prev = fp(&out[1]);
  int64_t per = 4 * (NI + H) + 1;
  for (int64_t t = 0; t < S; t++) {
    float *next = seq ? fp(&out[0]) + t * n : t % 2 == 0 ? fp(&out[0]) : fp(&out[1]);
    j.t = t, j.hp = prev, j.hn = next;
    par_for(x->c, n, (GRAIN + per - 1) / per, lstm_task, &j);
    prev = next;
  }
  if (prev != fp(&out[1])) memcpy(fp(&out[1]), prev, (size_t)n * sizeof(float));
  if (!seq && prev != fp(&out[0])) memcpy(fp(&out[0]), prev, (size_t)n * sizeof(float));
  return true;
}

/* ---- linear algebra ---- */

#define PANEL 128  /* output channels per piece of linear / conv */
#define ROWS 512   /* rows (or columns) of the other operand per piece */

/* C[M, N] = op(A)[M, K] * op(B)[K, N] + beta * C, row-major, fp32, OpenBLAS
 * single-threaded (the pool runs the pieces). */
static void sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                  int64_t ldb, float beta, float *C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    if (beta == 0)
      for (int64_t m = 0; m < M; m++) memset(C + m * ldc, 0, (size_t)N * sizeof(float));
    return;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (blasint)M, (blasint)N,
              (blasint)K, 1.0f, A, (blasint)(lda > 0 ? lda : 1), B, (blasint)(ldb > 0 ? ldb : 1), beta, C,
              (blasint)(ldc > 0 ? ldc : 1));
}

/* The row stride of a weight panel converted into the scratch: K, plus 16
 * floats when K floats are a multiple of 2 KiB (rows that far apart fall in
 * the same cache sets and slow OpenBLAS's transposed packing by 15%). */
static int64_t panel_ld(int64_t K) { return K % 512 == 0 ? K + 16 : K; }

/* Rows [r0, r0 + nr) of a [*, K] weight as floats, rows *ld apart: in place
 * for ST_F32, converted into the thread's scratch for ST_H16. */
static const float *weight_rows(const CpuProgram *c, const Val *w, int64_t r0, int64_t nr, int64_t K, uint32_t tid,
                                int64_t *ld) {
  if (w->st == ST_F32) {
    *ld = K;
    return fp(w) + r0 * K;
  }
  float *s = c->scratch[tid];
  *ld = panel_ld(K);
  for (int64_t r = 0; r < nr; r++) h2f(s + r * *ld, (const uint16_t *)w->p + (r0 + r) * K, K);
  return s;
}

struct GroupJob;
static void epilogue_row(const struct GroupJob *g, float *tiles, int64_t e0, int64_t n);

/* linear and pointwise conv: out = W x (+ bias) with W [O, K]. For linear
 * x is [rows, K] and out [rows, O] (conv: false); for conv, per batch item,
 * x is [K, P] and out [O, P] (conv: true). Pieces: batch item x panel of O
 * x block of rows / P. */
typedef struct WJob {
  const CpuProgram *c;
  bool conv;
  const Val *x, *w, *b;
  Val *o;
  int64_t O, K, R; /* R: rows (linear) or P (conv) */
  int64_t panels, blocks;
  /* A fused linear's epilogue (linear layout only; b is then NULL): each
   * piece's products rounded to fp16 (round_mid), then post[o] added, then
   * rounded to fp16 again (round_out), as the unfused statements would. */
  const float *post;
  bool round_mid, round_out;
  const struct GroupJob *epi; /* a fused linear's epilogue group, run on each row of each piece */
} WJob;

static void wgemm_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  const WJob *j = arg;
  for (int64_t it = lo; it < hi; it++) {
    int64_t nn = it / (j->panels * j->blocks), rem = it % (j->panels * j->blocks);
    int64_t o0 = (rem / j->blocks) * PANEL, r0 = (rem % j->blocks) * ROWS;
    int64_t no = j->O - o0 < PANEL ? j->O - o0 : PANEL, nr = j->R - r0 < ROWS ? j->R - r0 : ROWS;
    int64_t ldw;
    const float *W = weight_rows(j->c, j->w, o0, no, j->K, tid, &ldw);
    float beta = j->b ? 1.0f : 0.0f;
    if (!j->conv) {
      float *C = fp(j->o) + r0 * j->O + o0;
      if (j->b)
        for (int64_t r = 0; r < nr; r++)
          for (int64_t o = 0; o < no; o++) C[r * j->O + o] = (float)ld(j->b, o0 + o);
      sgemm(false, true, nr, no, j->K, fp(j->x) + r0 * j->K, j->K, W, ldw, beta, C, j->O);
      if (j->round_mid || j->post || j->round_out || j->epi)
        for (int64_t r = 0; r < nr; r++) {
          float *restrict row = C + r * j->O;
          if (j->round_mid) round16(row, no);
          if (j->post)
            for (int64_t o = 0; o < no; o++) row[o] += j->post[o0 + o];
          if (j->round_out) round16(row, no);
          if (j->epi) epilogue_row(j->epi, j->c->tiles ? j->c->tiles[tid] : NULL, (r0 + r) * j->O + o0, no);
        }
    } else {
      float *C = fp(j->o) + nn * j->O * j->R + o0 * j->R + r0;
      if (j->b)
        for (int64_t o = 0; o < no; o++) {
          float bv = (float)ld(j->b, o0 + o);
          for (int64_t r = 0; r < nr; r++) C[o * j->R + r] = bv;
        }
      sgemm(false, false, no, nr, j->K, W, ldw, fp(j->x) + nn * j->K * j->R + r0, j->R, beta, C, j->R);
    }
  }
}

static void wgemm(Ctx *x, WJob *j, int64_t batch) {
  j->c = x->c;
  j->panels = (j->O + PANEL - 1) / PANEL;
  j->blocks = (j->R + ROWS - 1) / ROWS;
  if (j->O == 0 || j->R == 0) return;
  par_for(x->c, batch * j->panels * j->blocks, 1, wgemm_task, j);
}

/* matmul of float operands: one piece is a block of rows of one matrix of the batch. */
typedef struct MmJob {
  const Val *a, *b;
  Val *o;
  bool ta, tb;
  int64_t M, N, K, lda, ldb, blocks;
  uint32_t rbat;
  int64_t bdims[MIL_MAX_RANK], sa[MIL_MAX_RANK], sb[MIL_MAX_RANK];
} MmJob;

static void matmul_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  (void)tid;
  const MmJob *j = arg;
  for (int64_t it = lo; it < hi; it++) {
    int64_t t = it / j->blocks, m0 = (it % j->blocks) * ROWS, nm = j->M - m0 < ROWS ? j->M - m0 : ROWS;
    const float *A = fp(j->a) + offset_at(t, j->bdims, j->rbat, j->sa);
    const float *B = fp(j->b) + offset_at(t, j->bdims, j->rbat, j->sb);
    /* Rows m0.. of op(A): row offset m0 * lda untransposed, column offset m0 transposed. */
    sgemm(j->ta, j->tb, nm, j->N, j->K, A + (j->ta ? m0 : m0 * j->lda), j->lda, B, j->ldb, 0.0f,
          fp(j->o) + t * j->M * j->N + m0 * j->N, j->N);
  }
}

static bool k_matmul(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok), *b = req_arg(x, "y", &ok);
  bool tx = scalar_arg(x, "transpose_x", 0, &ok) != 0, ty = scalar_arg(x, "transpose_y", 0, &ok) != 0;
  if (!ok) return false;
  if (a->rank == 0 || b->rank == 0) return fail(x, "operands must have rank 1 or more");
  if ((tx && a->rank == 1) || (ty && b->rank == 1)) return fail(x, "a transpose flag is set on a rank-1 operand");
  /* Logical matrices: x is [.., M, K], y is [.., K, N], as strides into the data. */
  int64_t ast[MIL_MAX_RANK], bst[MIL_MAX_RANK];
  strides_of(a->dims, a->rank, ast);
  strides_of(b->dims, b->rank, bst);
  int64_t M, K, N, K2, am_st, ak_st, bk_st, bn_st;
  if (a->rank == 1) M = 1, K = a->dims[0], am_st = 0, ak_st = 1;
  else if (!tx) M = a->dims[a->rank - 2], K = a->dims[a->rank - 1], am_st = ast[a->rank - 2], ak_st = 1;
  else M = a->dims[a->rank - 1], K = a->dims[a->rank - 2], am_st = 1, ak_st = ast[a->rank - 2];
  if (b->rank == 1) K2 = b->dims[0], N = 1, bk_st = 1, bn_st = 0;
  else if (!ty) K2 = b->dims[b->rank - 2], N = b->dims[b->rank - 1], bk_st = bst[b->rank - 2], bn_st = 1;
  else K2 = b->dims[b->rank - 1], N = b->dims[b->rank - 2], bk_st = 1, bn_st = bst[b->rank - 2];
  if (K != K2) return fail(x, "the inner dimensions differ (%lld and %lld)", (long long)K, (long long)K2);
  /* Batch dims broadcast like element-wise operands. */
  MmJob j = {.a = a, .b = b, .o = out, .ta = tx, .tb = ty, .M = M, .N = N, .K = K};
  uint32_t ra = a->rank > 2 ? a->rank - 2 : 0, rb = b->rank > 2 ? b->rank - 2 : 0, rbat = ra > rb ? ra : rb;
  for (uint32_t i = 0; i < rbat; i++) {
    int64_t da = i + ra >= rbat ? a->dims[i + ra - rbat] : 1, db = i + rb >= rbat ? b->dims[i + rb - rbat] : 1;
    if (da != db && da != 1 && db != 1) return fail(x, "batch dimensions %lld and %lld do not broadcast", (long long)da, (long long)db);
    j.bdims[i] = da > db ? da : db;
    if (da == 0 || db == 0) j.bdims[i] = 0;
    j.sa[i] = da == 1 ? 0 : ast[i + ra - rbat];
    j.sb[i] = db == 1 ? 0 : bst[i + rb - rbat];
  }
  j.rbat = rbat;
  int64_t dims[MIL_MAX_RANK];
  uint32_t rank = rbat;
  memcpy(dims, j.bdims, sizeof(int64_t) * rbat);
  if (a->rank > 1) dims[rank++] = M;
  if (b->rank > 1) dims[rank++] = N;
  if (!expect_shape(x, out, dims, rank)) return false;
  int64_t nb = elements(j.bdims, rbat);
  if (out->st == ST_F32 && a->st == ST_F32 && b->st == ST_F32) {
    /* Each batch's x is [M, K] row-major (a rank-1 x is one row), or [K, M]
     * when transposed; y is [K, N] (a rank-1 y one column), or [N, K]. */
    j.lda = a->rank == 1 ? K : tx ? ak_st : am_st;
    j.ldb = b->rank == 1 ? 1 : ty ? bn_st : bk_st;
    j.blocks = (M + ROWS - 1) / ROWS;
    if (M == 0 || N == 0) return true;
    par_for(x->c, nb * j.blocks, 1, matmul_task, &j);
    return true;
  }
  for (int64_t t = 0; t < nb; t++) {
    int64_t pa = offset_at(t, j.bdims, rbat, j.sa), pb = offset_at(t, j.bdims, rbat, j.sb), po = t * M * N;
    for (int64_t m = 0; m < M; m++)
      for (int64_t n = 0; n < N; n++) {
        double s = 0;
        for (int64_t k = 0; k < K; k++) s += ld(a, pa + m * am_st + k * ak_st) * ld(b, pb + k * bk_st + n * bn_st);
        st(out, po + m * N + n, s);
      }
  }
  return true;
}

static bool k_linear(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok), *w = req_arg(x, "weight", &ok), *b = opt_arg(x, "bias", &ok);
  if (!ok) return false;
  if (a->rank < 1 || w->rank != 2 || w->dims[1] != a->dims[a->rank - 1])
    return fail(x, "weight must be [D_out, D_in] with D_in the last dimension of x");
  int64_t din = w->dims[1], dout = w->dims[0];
  if (b && b->n != dout) return fail(x, "bias must have D_out = %lld elements", (long long)dout);
  int64_t dims[MIL_MAX_RANK];
  memcpy(dims, a->dims, sizeof dims);
  dims[a->rank - 1] = dout;
  if (!expect_shape(x, out, dims, a->rank)) return false;
  int64_t rows = din ? a->n / din : elements(a->dims, a->rank - 1);
  if (out->st == ST_F32 && a->st == ST_F32 && (w->st == ST_F32 || w->st == ST_H16) && (!b || b->st != ST_STR)) {
    WJob j = {.conv = false, .x = a, .w = w, .b = b, .o = out, .O = dout, .K = din, .R = rows};
    wgemm(x, &j, 1);
    return true;
  }
  for (int64_t r = 0; r < rows; r++)
    for (int64_t o = 0; o < dout; o++) {
      double s = b ? ld(b, o) : 0;
      for (int64_t k = 0; k < din; k++) s += ld(a, r * din + k) * ld(w, o * din + k);
      st(out, r * dout + o, s);
    }
  return true;
}

/* scaled_dot_product_attention (iOS18): softmax(Q K^T / sqrt(E) + M) V over
 * the last two dims (batch dims equal). A bool mask keeps a score where it is
 * true (-inf elsewhere), a float mask is added. One item is one query row,
 * computed in double with its scores in the thread's scratch (planned at
 * prepare) and rounded once; a row whose every score is masked is NaN, as
 * softmax over nothing but -inf is. */
typedef struct SdpaJob {
  const CpuProgram *c;
  const Val *q, *k, *v, *m;
  Val *o;
  int64_t L, S, E, EV;
  double scale;
  uint32_t srank;                                    /* the scores' rank (q's) */
  int64_t sdims[MIL_MAX_RANK], mst[MIL_MAX_RANK];    /* the scores' shape; the mask's strides in it */
} SdpaJob;

static void sdpa_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  const SdpaJob *j = arg;
  double *sc = (double *)(void *)j->c->scratch[tid];
  int64_t S = j->S, E = j->E, EV = j->EV;
  bool mbool = j->m && j->m->dt == MIL_DT_BOOL;
  for (int64_t row = lo; row < hi; row++) {
    int64_t b = row / j->L;
    const float *q = fp(j->q) + row * E, *k = fp(j->k) + b * S * E, *v = fp(j->v) + b * S * EV;
    double mx = -HUGE_VAL;
    bool nan = false;
    for (int64_t s = 0; s < S; s++) {
      double dot = 0;
      for (int64_t e = 0; e < E; e++) dot += (double)q[e] * (double)k[s * E + e];
      double t = dot * j->scale;
      if (j->m) {
        double mv = ld(j->m, offset_at(row * S + s, j->sdims, j->srank, j->mst));
        t = mbool ? (mv != 0 ? t : -HUGE_VAL) : t + mv;
      }
      sc[s] = t;
      nan |= isnan(t);
      mx = t > mx ? t : mx;
    }
    if (nan || mx == -HUGE_VAL || mx == HUGE_VAL) mx = NAN; /* the whole row is NaN */
    double sum = 0;
    for (int64_t s = 0; s < S; s++) sum += sc[s] = sc[s] == -HUGE_VAL && mx == mx ? 0 : exp_d(sc[s] - mx);
    for (int64_t ev = 0; ev < EV; ev++) {
      double acc = 0;
      for (int64_t s = 0; s < S; s++) acc += sc[s] * (double)v[s * EV + ev];
      st(j->o, row * EV + ev, acc / sum);
    }
  }
}

static bool k_sdpa(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *q = req_arg(x, "query", &ok), *k = req_arg(x, "key", &ok), *v = req_arg(x, "value", &ok);
  const Val *m = opt_arg(x, "attn_mask", &ok);
  if (!ok) return false;
  if (q->st != ST_F32 || k->st != ST_F32 || v->st != ST_F32 || out->st != ST_F32)
    return fail(x, "query, key, value and the result must be fp16 or fp32");
  uint32_t r = q->rank;
  if (r < 3 || k->rank != r || v->rank != r)
    return fail(x, "query, key and value must have the same rank, 3 or more (they have %u, %u and %u)", q->rank,
                k->rank, v->rank);
  for (uint32_t i = 0; i + 2 < r; i++)
    if (k->dims[i] != q->dims[i] || v->dims[i] != q->dims[i])
      return fail(x, "query, key and value differ in batch dimension %u", i);
  SdpaJob j = {.c = x->c, .q = q, .k = k, .v = v, .m = m, .o = out, .L = q->dims[r - 2], .S = k->dims[r - 2],
               .E = q->dims[r - 1], .EV = v->dims[r - 1], .srank = r};
  if (k->dims[r - 1] != j.E) return fail(x, "key has %lld features per row but query %lld", (long long)k->dims[r - 1], (long long)j.E);
  if (v->dims[r - 2] != j.S) return fail(x, "value has %lld rows but key %lld", (long long)v->dims[r - 2], (long long)j.S);
  int64_t dims[MIL_MAX_RANK];
  memcpy(dims, q->dims, sizeof dims);
  dims[r - 1] = j.EV;
  if (!expect_shape(x, out, dims, r)) return false;
  if (m) {
    if (m->st == ST_STR || (m->dt != MIL_DT_BOOL && !is_float(m->dt))) return fail(x, "attn_mask must be bool, fp16 or fp32");
    Val sv = {.rank = r};
    memcpy(sv.dims, q->dims, sizeof sv.dims);
    sv.dims[r - 1] = j.S;
    if (!bcast_strides(x, m, &sv, j.mst)) return false;
    memcpy(j.sdims, sv.dims, sizeof j.sdims);
  }
  j.scale = j.E > 0 ? 1 / sqrt((double)j.E) : 1;
  if (2 * j.S > x->c->scratch_floats) return fail(x, "no scratch planned for %lld keys", (long long)j.S); /* prepare plans it */
  int64_t rows = j.EV ? out->n / j.EV : 0; /* batch x L query rows */
  int64_t per = j.S * (j.E + j.EV) + 1;
  par_for(x->c, rows, (GRAIN + per - 1) / per, sdpa_task, &j);
  return true;
}

/* conv with 1, 2 or 3 spatial dims, all as 3-D ones (a 2-D conv has depth 1,
 * a 1-D one depth and height 1). Outside the pointwise case, one item is one
 * output channel of one batch item, summed in double in a fixed order. */
typedef struct ConvJob {
  const Val *a, *w, *b;
  Val *o;
  int64_t C, O, CG, OG;
  int64_t D[3], K[3], OD[3], st[3], dl[3], before[3];
} ConvJob;

static void conv_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  (void)tid;
  const ConvJob *j = arg;
  const int64_t *D = j->D, *K = j->K, *OD = j->OD;
  for (int64_t it = lo; it < hi; it++) {
    int64_t nn = it / j->O, o = it % j->O, g = o / j->OG;
    for (int64_t oz = 0; oz < OD[0]; oz++)
      for (int64_t oy = 0; oy < OD[1]; oy++)
        for (int64_t ox = 0; ox < OD[2]; ox++) {
          double s = j->b ? ld(j->b, o) : 0;
          for (int64_t c = 0; c < j->CG; c++)
            for (int64_t kz = 0; kz < K[0]; kz++) {
              int64_t iz = oz * j->st[0] - j->before[0] + kz * j->dl[0];
              if (iz < 0 || iz >= D[0]) continue;
              for (int64_t ky = 0; ky < K[1]; ky++) {
                int64_t iy = oy * j->st[1] - j->before[1] + ky * j->dl[1];
                if (iy < 0 || iy >= D[1]) continue;
                int64_t ibase = (((nn * j->C + g * j->CG + c) * D[0] + iz) * D[1] + iy) * D[2];
                int64_t wbase = (((o * j->CG + c) * K[0] + kz) * K[1] + ky) * K[2];
                for (int64_t kx = 0; kx < K[2]; kx++) {
                  int64_t ix = ox * j->st[2] - j->before[2] + kx * j->dl[2];
                  if (ix < 0 || ix >= D[2]) continue;
                  s += ld(j->a, ibase + ix) * ld(j->w, wbase + kx);
                }
              }
            }
          st(j->o, (((nn * j->O + o) * OD[0] + oz) * OD[1] + oy) * OD[2] + ox, s);
        }
  }
}

static bool k_conv(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok), *w = req_arg(x, "weight", &ok), *b = opt_arg(x, "bias", &ok);
  if (!ok) return false;
  if (a->rank < 3 || a->rank > 5 || w->rank != a->rank)
    return fail(x, "x and weight must both have rank 3, 4 or 5 (a 1-D, 2-D or 3-D convolution)");
  uint32_t S = a->rank - 2, lead = 3 - S; /* spatial dims, and the unit dims put before them */
  ConvJob j = {.a = a, .w = w, .b = b, .o = out, .D = {1, 1, 1}, .K = {1, 1, 1}, .st = {1, 1, 1}, .dl = {1, 1, 1}};
  int64_t tmp[6] = {0}, total[3] = {0, 0, 0};
  uint32_t n;
  if (ints_arg(x, "strides", tmp, 3, &n, &ok) && n == S) memcpy(j.st + lead, tmp, S * sizeof(int64_t));
  else if (ok && n) return fail(x, "strides needs %u entries", S);
  if (ints_arg(x, "dilations", tmp, 3, &n, &ok) && n == S) memcpy(j.dl + lead, tmp, S * sizeof(int64_t));
  else if (ok && n) return fail(x, "dilations needs %u entries", S);
  int64_t groups = to_index(scalar_arg(x, "groups", 1, &ok));
  const char *pt = string_arg(x, "pad_type", "valid", &ok);
  bool has_pad = ints_arg(x, "pad", tmp, 6, &n, &ok);
  if (!ok) return false;
  int64_t N = a->dims[0], C = a->dims[1], O = w->dims[0], CG = w->dims[1];
  for (uint32_t i = 0; i < S; i++) j.D[lead + i] = a->dims[2 + i], j.K[lead + i] = w->dims[2 + i];
  if (groups < 1 || C % groups || O % groups || CG != C / groups)
    return fail(x, "groups %lld does not fit %lld input channels and a weight of %lld per group", (long long)groups,
                (long long)C, (long long)CG);
  if (b && b->n != O) return fail(x, "bias must have %lld elements", (long long)O);
  bool custom = !strcmp(pt, "custom"), same = !strcmp(pt, "same"), lower = !strcmp(pt, "same_lower");
  if (!custom && !same && !lower && strcmp(pt, "valid")) return fail(x, "unknown pad_type '%s'", pt);
  if (custom && (!has_pad || n != 2 * S)) return fail(x, "pad_type custom needs pad with %u entries", 2 * S);
  for (uint32_t i = 0; i < 3; i++) {
    if (j.st[i] < 1 || j.dl[i] < 1) return fail(x, "strides and dilations must be positive");
    int64_t ek = (j.K[i] - 1) * j.dl[i] + 1;
    if (i < lead) continue;
    uint32_t si = i - lead; /* index into the MIL pad list */
    if (custom) {
      if (tmp[2 * si] < 0 || tmp[2 * si + 1] < 0) return fail(x, "pad entries must not be negative");
      j.before[i] = tmp[2 * si], total[i] = tmp[2 * si] + tmp[2 * si + 1];
    } else if (same || lower) {
      int64_t outd = (j.D[i] + j.st[i] - 1) / j.st[i], p = outd * j.st[i] - j.D[i] + ek - j.st[i];
      total[i] = p > 0 ? p : 0;
      j.before[i] = same ? total[i] / 2 : total[i] - total[i] / 2;
    }
  }
  int64_t dims[5] = {N, O};
  for (uint32_t i = 0; i < 3; i++) {
    j.OD[i] = (j.D[i] + total[i] - ((j.K[i] - 1) * j.dl[i] + 1)) / j.st[i] + 1;
    if (i >= lead) dims[2 + i - lead] = j.OD[i];
  }
  if (!expect_shape(x, out, dims, a->rank)) return false;
  bool pointwise = true;
  for (uint32_t i = 0; i < 3; i++) pointwise = pointwise && j.K[i] == 1 && j.st[i] == 1 && total[i] == 0;
  if (groups == 1 && pointwise && out->st == ST_F32 && a->st == ST_F32 && (w->st == ST_F32 || w->st == ST_H16) &&
      (!b || b->st != ST_STR)) {
    /* A pointwise conv: per batch item, out[O, P] = weight[O, C] * x[C, P]. */
    WJob wj = {.conv = true, .x = a, .w = w, .b = b, .o = out, .O = O, .K = C, .R = j.D[0] * j.D[1] * j.D[2]};
    wgemm(x, &wj, N);
    return true;
  }
  if (out->n == 0) return true;
  j.C = C, j.O = O, j.CG = CG, j.OG = O / groups;
  int64_t per = out->n / (N * O) * CG * j.K[0] * j.K[1] * j.K[2] + 1;
  par_for(x->c, N * O, (GRAIN + per - 1) / per, conv_task, &j);
  return true;
}


/* ---- the op table ---- */

static const OpEntry op_table[] = {
    {"identity", k_copy, 0},
    {"relu", k_unary, U_RELU},
    {"tanh", k_unary, U_TANH},
    {"sigmoid", k_unary, U_SIGMOID},
    {"silu", k_unary, U_SILU},
    {"gelu", k_unary, U_GELU},
    {"exp", k_unary, U_EXP},
    {"log", k_unary, U_LOG},
    {"sqrt", k_unary, U_SQRT},
    {"rsqrt", k_unary, U_RSQRT},
    {"abs", k_unary, U_ABS},
    {"clip", k_unary, U_CLIP},
    {"add", k_binary, B_ADD},
    {"sub", k_binary, B_SUB},
    {"mul", k_binary, B_MUL},
    {"real_div", k_binary, B_DIV},
    {"pow", k_binary, B_POW},
    {"maximum", k_binary, B_MAX},
    {"minimum", k_binary, B_MIN},
    {"equal", k_binary, B_EQ},
    {"not_equal", k_binary, B_NE},
    {"less", k_binary, B_LT},
    {"less_equal", k_binary, B_LE},
    {"greater", k_binary, B_GT},
    {"greater_equal", k_binary, B_GE},
    {"logical_and", k_binary, B_AND},
    {"logical_or", k_binary, B_OR},
    {"logical_xor", k_binary, B_XOR},
    {"logical_not", k_unary, U_NOT},
    {"floor", k_unary, U_FLOOR},
    {"floor_div", k_binary, B_FDIV},
    {"select", k_select, 0},
    {"cast", k_cast, 0},
    {"softmax", k_softmax, 0},
    {"reduce_sum", k_reduce, R_SUM},
    {"reduce_mean", k_reduce, R_MEAN},
    {"reduce_max", k_reduce, R_MAX},
    {"layer_norm", k_layer_norm, 0},
    {"reshape", k_copy, 0},
    {"transpose", k_transpose, 0},
    {"slice_by_index", k_slice, 0},
    {"slice_by_size", k_slice_size, 0},
    {"split", k_split, 0},
    {"concat", k_concat, 0},
    {"gather", k_gather, 0},
    {"gather_along_axis", k_gather_axis, 0},
    {"expand_dims", k_expand_dims, 0},
    {"squeeze", k_squeeze, 0},
    {"stack", k_stack, 0},
    {"tile", k_tile, 0},
    {"pad", k_pad, 0},
    {"shape", k_shape, 0},
    {"range_1d", k_range, 0},
    {"reduce_argmax", k_argreduce, 1},
    {"reduce_argmin", k_argreduce, 0},
    {"topk", k_topk, 0},
    {"max_pool", k_pool, 0},
    {"avg_pool", k_pool, 1},
    {"quantize", k_quant, 0},
    {"dequantize", k_quant, 1},
    {"lstm", k_lstm, 0},
    {"matmul", k_matmul, 0},
    {"scaled_dot_product_attention", k_sdpa, 0},
    {"linear", k_linear, 0},
    {"conv", k_conv, 0},
};

static const OpEntry view_entry = {"view", k_view, 0};

/* A fused element-wise group (see "Fusion" in the header comment): the
 * statements x->si .. end - 1, every member a float unary or binary op with
 * a result of one shape, run tile by tile: each tile of GROUP_TILE elements
 * goes through every member in statement order (and, in ANE mode, each
 * member's fp16 result is rounded) while it is in cache. A result used only
 * inside the group lives in one of the thread's tile buffers, never in
 * memory. Views among the statements are set first. */
#define GROUP_MAX 32
#define GROUP_TILE 2048

typedef struct GroupJob GroupJob;
enum { GM_UNARY, GM_BINARY, GM_REDUCE };

/* A row group's rows per tile: about GROUP_TILE elements, a multiple of 4
 * (a unary member one per row then splits into the vectors of 4 it would
 * unfused). */
static int64_t tile_rows(int64_t L) {
  int64_t r = GROUP_TILE / L / 4 * 4;
  return r > 4 ? r : 4;
}

struct GroupJob {
  const CpuProgram *c;
  uint32_t n;
  int64_t L;     /* a row group: the rows' length (1: an element group) */
  int64_t units; /* elements (an element group) or rows */
  int64_t per;   /* units per tile */
  uint8_t kind[GROUP_MAX];
  bool round[GROUP_MAX];
  bool ro[GROUP_MAX], ra[GROUP_MAX], rb[GROUP_MAX];    /* a row group: the result, x, y are one per row */
  int64_t on[GROUP_MAX], an[GROUP_MAX], bn[GROUP_MAX]; /* their elements */
  int32_t ta[GROUP_MAX], tb[GROUP_MAX], to[GROUP_MAX]; /* tile buffers of the operands and result, -1: planned */
  UnaryJob u[GROUP_MAX];
  BinJob b[GROUP_MAX];
  RedJob r[GROUP_MAX];
};

/* Units [u0, u1) (elements, or whole rows) of every member, in order; tiles:
 * the thread's tile buffers, c->tile_floats apart. */
static void group_range(const GroupJob *g, float *tiles, int64_t u0, int64_t u1) {
  int64_t tf = g->c->tile_floats;
  for (uint32_t m = 0; m < g->n; m++) {
    int64_t so = g->ro[m] ? 1 : g->L, sa = g->ra[m] ? 1 : g->L, sb = g->rb[m] ? 1 : g->L; /* elements per unit */
    Val *ov = g->kind[m] == GM_BINARY ? g->b[m].o : g->kind[m] == GM_UNARY ? g->u[m].o : g->r[m].o;
    float *o = g->to[m] >= 0 ? tiles + g->to[m] * tf : fp(ov) + u0 * so;
    if (g->kind[m] == GM_BINARY) {
      const BinJob *j = &g->b[m];
      bool ia = g->ta[m] >= 0, ib = g->tb[m] >= 0;
      bin_range(j, u0 * so, u1 * so, ia ? tiles + g->ta[m] * tf : fp(j->a), ia ? u0 * sa : 0,
                ib ? tiles + g->tb[m] * tf : fp(j->b), ib ? u0 * sb : 0, o, u0 * so);
    } else {
      const Val *av = g->kind[m] == GM_UNARY ? g->u[m].a : g->r[m].a;
      const float *a = g->ta[m] >= 0 ? tiles + g->ta[m] * tf : fp(av) + u0 * sa;
      if (g->kind[m] == GM_UNARY) unary_f32(&g->u[m], a, o, (u1 - u0) * so);
      else reduce_rows(&g->r[m], a, o, u1 - u0);
    }
    if (g->round[m]) round16(o, (u1 - u0) * so);
  }
}

static void epilogue_row(const GroupJob *g, float *tiles, int64_t e0, int64_t n) { group_range(g, tiles, e0, e0 + n); }

static void group_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  const GroupJob *g = arg;
  float *tiles = g->c->tiles ? g->c->tiles[tid] : NULL;
  for (int64_t t = lo; t < hi; t++)
    group_range(g, tiles, t * g->per, (t + 1) * g->per < g->units ? (t + 1) * g->per : g->units);
}

/* Sets the views and reads and checks the members of group [first, end) into *g. */
static bool group_setup(Ctx *x, uint32_t first, uint32_t end, GroupJob *g) {
  const CpuProgram *c = x->c;
  int64_t L = c->fz[first].rowlen ? c->fz[first].rowlen : 1;
  *g = (GroupJob){.c = c, .n = 0, .L = L};
  for (uint32_t si = first; si < end; si++) {
    const OpEntry *e = c->ops[si];
    if (!e) continue; /* a const */
    Val *out = &x->vals[c->base[si]];
    x->s = &c->f->stmts[si];
    x->si = si;
    if (e == &view_entry) {
      if (!k_view(x, 0, out, 1)) return false;
      continue;
    }
    uint32_t m = g->n++;
    g->kind[m] = e->fn == k_binary ? GM_BINARY : e->fn == k_unary ? GM_UNARY : GM_REDUCE;
    g->round[m] = c->mode == CPU_NUMERICS_ANE && out->dt == MIL_DT_FP16;
    uint32_t xs = arg_slot(c, si, "x"), ys = g->kind[m] == GM_BINARY ? arg_slot(c, si, "y") : UINT32_MAX;
    g->to[m] = c->slots[c->base[si]].tile;
    g->ta[m] = c->slots[xs].tile;
    g->tb[m] = ys == UINT32_MAX ? -1 : c->slots[ys].tile;
    /* the plan gave every member a result of the group's shape, or (a row group) one per row */
    int64_t full = g->kind[m] == GM_REDUCE ? x->vals[xs].n : out->n;
    if (full / L > g->units) g->units = full / L;
    g->on[m] = out->n;
    g->an[m] = x->vals[xs].n;
    g->bn[m] = ys == UINT32_MAX ? 0 : x->vals[ys].n;
    bool ok = g->kind[m] == GM_BINARY  ? bin_setup(x, e->code, out, &g->b[m])
              : g->kind[m] == GM_UNARY ? unary_setup(x, e->code, out, &g->u[m])
                                       : reduce_setup(x, e->code, out, &g->r[m]);
    if (!ok) return false;
    if (g->kind[m] == GM_REDUCE && !g->r[m].o) return fail(x, "a fused reduction must reduce the last dim"); /* the plan prevents this */
  }
  for (uint32_t m = 0; m < g->n; m++) { /* an operand or result not of the group's shape is one per row */
    g->ro[m] = L > 1 && g->on[m] != g->units * L;
    g->ra[m] = L > 1 && g->an[m] != g->units * L;
    g->rb[m] = L > 1 && g->bn[m] != g->units * L;
  }
  g->per = L > 1 ? tile_rows(L) : GROUP_TILE;
  return true;
}

static bool k_group(Ctx *x, uint32_t end) {
  GroupJob g;
  if (!group_setup(x, x->si, end, &g)) return false;
  par_for(x->c, (g.units + g.per - 1) / g.per, 1, group_task, &g);
  return true;
}

/* A fused linear (see "Fusion" in the header comment): the pointwise conv of
 * statement x->s computed from the untransposed x [B, P, K] straight into the
 * transposed result [B, P, O], the bias added (and the ANE roundings done)
 * piece by piece, then the element-wise group that follows (if the plan
 * made it the epilogue) run on each row of the piece while it is in cache;
 * the plan checked the shapes and the conv's arguments. */
static bool k_fused_linear(Ctx *x, const Fused *f) {
  bool ok = true;
  const Val *w = req_arg(x, "weight", &ok);
  if (!ok) return false;
  const Val *a = &x->vals[f->xs], *b = f->bs == UINT32_MAX ? NULL : &x->vals[f->bs];
  Val *y = &x->vals[f->ys];
  if ((w->st != ST_F32 && w->st != ST_H16) || a->st != ST_F32 || y->st != ST_F32 || (b && b->st != ST_F32))
    return fail(x, "a fused linear needs float operands"); /* the plan prevents this */
  WJob j = {.conv = false, .x = a, .w = w, .o = y, .O = y->dims[2], .K = a->dims[2], .R = a->dims[0] * a->dims[1],
            .post = b ? fp(b) : NULL, .round_mid = f->round_mid, .round_out = f->round_out};
  GroupJob g;
  if (f->gfirst) {
    uint32_t si = x->si;
    const MilStmt *s = x->s;
    if (!group_setup(x, f->gfirst, x->c->fz[f->gfirst].end, &g)) return false;
    x->si = si, x->s = s;
    j.epi = &g;
  }
  wgemm(x, &j, 1);
  return true;
}

static const OpEntry *find_op(const char *name) {
  for (size_t i = 0; i < sizeof op_table / sizeof op_table[0]; i++)
    if (!strcmp(op_table[i].name, name)) return &op_table[i];
  return NULL;
}

/* ---- preparing ---- */

static bool check_type(Diag *d, const MilType *t, SrcSpan loc, const char *what, const char *name, bool allow_string) {
  /* allow_string: a const's result, which may also be a small integer type */
  if (t->kind != MIL_TYPE_TENSOR ||
      !(dtype_held(t->dtype) || (allow_string && (t->dtype == MIL_DT_STRING || dtype_const_ok(t->dtype))))) {
    StrBuf sb;
    sb_init(&sb);
    mil_type_print(t, &sb);
    diag_error(d, loc, "%s '%s' has type %s, which the CPU backend does not support", what, name, sb.data);
    sb_free(&sb);
    return false;
  }
  for (uint32_t i = 0; i < t->rank; i++)
    if (t->dims[i] < 0) {
      diag_error(d, loc, "%s '%s' has an unknown dimension; programs with flexible shapes are not supported", what,
                 name);
      return false;
    }
  return true;
}

static void const_release(CpuProgram *c, uint32_t slot) {
  if (c->slots[slot].owned) free(c->vals[slot].p);
  c->slots[slot].owned = false;
  c->vals[slot].p = NULL;
}

/* An owned buffer of the const's n elements of `es` bytes, kept if it has one. */
static void *const_owned(CpuProgram *c, uint32_t slot, size_t es) {
  Val *v = &c->vals[slot];
  if (!c->slots[slot].owned) {
    v->p = alloc_elems(v->n, es);
    c->slots[slot].owned = true;
  }
  return v->p;
}

/* (Re)reads BLOBFILE const `slot` from its verified weight: in place when the
 * stored form matches the slot's storage and alignment, else converted into
 * an owned buffer. */
static void const_from_weight(CpuProgram *c, uint32_t slot, const OrionWeight *w) {
  Val *v = &c->vals[slot];
  uintptr_t at = (uintptr_t)w->data;
  bool direct = (v->st == ST_H16 && w->dtype == MIL_DT_FP16 && at % 2 == 0) ||
                (v->st == ST_F32 && w->dtype == MIL_DT_FP32 && at % 4 == 0) ||
                (v->st == ST_I32 && v->dt == MIL_DT_INT32 && w->dtype == MIL_DT_INT32 && at % 4 == 0);
  if (direct) {
    const_release(c, slot);
    v->p = (void *)at; /* never written through: consts are operands only */
    return;
  }
  if (v->st == ST_H16) {
    memcpy(const_owned(c, slot, 2), w->data, (size_t)v->n * 2);
    return;
  }
  const_owned(c, slot, 4);
  const unsigned char *p = w->data;
  if (v->st == ST_F32 && w->dtype == MIL_DT_FP16) {
    h2f(v->p, p, v->n);
    return;
  }
  for (int64_t i = 0; i < v->n; i++) {
    double e;
    switch (w->dtype) {
    case MIL_DT_FP16: {
      uint16_t h;
      memcpy(&h, p + 2 * i, 2);
      e = (double)fp16_to_float(h);
      break;
    }
    case MIL_DT_FP32: {
      float f;
      memcpy(&f, p + 4 * i, 4);
      e = (double)f;
      break;
    }
    case MIL_DT_INT32: {
      int32_t k;
      memcpy(&k, p + 4 * i, 4);
      e = k;
      break;
    }
    case MIL_DT_INT8: e = (int8_t)p[i]; break;
    default: e = p[i]; break; /* uint8 */
    }
    st(v, i, e);
  }
}

/* Converts const statement si into its slot (BLOBFILE weights later, once
 * their storage is decided). */
static bool prepare_const(CpuProgram *c, uint32_t si, Diag *d) {
  const MilStmt *s = &c->f->stmts[si];
  const MilAttr *val = mil_find_attr(s->attrs, s->nattrs, "val");
  uint32_t slot = c->base[si];
  c->slots[slot].kind = SK_CONST;
  if (!val || s->nresults != 1) {
    diag_error(d, s->loc, "const without a val");
    return false;
  }
  if (val->value->payload == MIL_PAYLOAD_BLOB) {
    for (uint32_t i = 0; i < orion_weight_count(c->prog, c->fn); i++) {
      const OrionWeight *w = orion_weight(c->prog, c->fn, i);
      if (w->stmt == si && !strcmp(w->attr, "val")) {
        c->slots[slot].weight = (int32_t)i;
        return true;
      }
    }
    diag_error(d, s->loc, "const '%s': its BLOBFILE was not loaded", s->results[0].name);
    return false;
  }
  const char *why;
  Val *v = &c->vals[slot];
  if (!literal_val(val->value, v, &why)) {
    diag_error(d, s->loc, "const '%s' %s", s->results[0].name, why);
    return false;
  }
  c->slots[slot].owned = v->st != ST_STR;
  if (v->st == ST_STR) c->slots[slot].kind = SK_STR;
  return true;
}

/* ---- constexpr_* ops: evaluated at prepare (and on reload) like consts ----
 *
 * Their inputs are constants, written as attributes (the iOS16/17 form, with
 * a BLOBFILE for the data) or as arguments naming consts or literals (the
 * iOS18 form). Each result is computed in double and rounded once to its
 * declared dtype, as the op defines it (NumPy's astype to the scale's dtype). */

typedef struct CxIn {
  MilDType dt;
  uint32_t rank;
  int64_t dims[MIL_MAX_RANK];
  int64_t n;
  const Val *v;          /* a const's value (an argument), or */
  const MilLiteral *lit; /* an inline attribute, or */
  const OrionWeight *w;  /* a BLOBFILE attribute */
  const char *str;       /* a string, whichever form */
} CxIn;

static double cx_ld(const CxIn *in, int64_t i) {
  if (in->v) return ld(in->v, i);
  if (in->lit) {
    const MilLiteral *l = in->lit;
    uint64_t k = l->count == 1 ? 0 : (uint64_t)i;
    return l->floats ? l->floats[k] : l->ints ? (double)l->ints[k] : l->bools ? (l->bools[k] ? 1.0 : 0.0) : 0.0;
  }
  const unsigned char *p = in->w->data;
  switch (in->w->dtype) {
  case MIL_DT_FP16: {
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    return (double)fp16_to_float(h);
  }
  case MIL_DT_FP32: {
    float f;
    memcpy(&f, p + 4 * i, 4);
    return (double)f;
  }
  case MIL_DT_INT32: {
    int32_t k;
    memcpy(&k, p + 4 * i, 4);
    return k;
  }
  case MIL_DT_INT8: return (int8_t)p[i];
  default: return p[i]; /* uint8 */
  }
}

/* Input `name` of constexpr statement x->s: an argument (which must be a
 * const) or an attribute. False (reported when required) if absent or bad. */
static bool cx_input(Ctx *x, const char *name, bool required, CxIn *in) {
  const CpuProgram *c = x->c;
  memset(in, 0, sizeof *in);
  const MilArg *a = find_arg(x->s, name);
  if (a) {
    if (a->is_list || a->nitems != 1) return fail(x, "argument '%s' must be a single value", name);
    uint32_t slot = c->opslot[c->argstart[c->argbase[x->si] + (uint32_t)(a - x->s->args)]];
    uint8_t kind = c->slots[slot].kind;
    if (kind != SK_CONST && kind != SK_STR) return fail(x, "argument '%s' must be a constant", name);
    const Val *v = &c->vals[slot];
    if (kind == SK_STR) in->str = v->str;
    else in->v = v;
    in->dt = v->dt, in->rank = v->rank, in->n = v->n;
    memcpy(in->dims, v->dims, sizeof in->dims);
    return true;
  }
  const MilAttr *at = mil_find_attr(x->s->attrs, x->s->nattrs, name);
  if (!at || !at->value) return required ? fail(x, "missing input '%s'", name) : false;
  const MilLiteral *l = at->value;
  const MilType *t = &l->type;
  if (t->kind != MIL_TYPE_TENSOR) return fail(x, "input '%s' is not a tensor", name);
  in->dt = t->dtype, in->rank = t->rank, in->n = elements(t->dims, t->rank);
  memcpy(in->dims, t->dims, sizeof in->dims);
  if (l->payload == MIL_PAYLOAD_BLOB) {
    for (uint32_t i = 0; i < orion_weight_count(c->prog, c->fn); i++) {
      const OrionWeight *w = orion_weight(c->prog, c->fn, i);
      if (w->stmt == x->si && !strcmp(w->attr, name)) in->w = w;
    }
    if (!in->w) return fail(x, "the BLOBFILE of input '%s' was not loaded", name);
    return true;
  }
  if (l->payload != MIL_PAYLOAD_INLINE) return fail(x, "input '%s' has no value", name);
  if (t->dtype == MIL_DT_STRING) {
    if (l->count != 1 || !l->strings) return fail(x, "input '%s' must be one string", name);
    in->str = l->strings[0];
    return true;
  }
  /* uint32: the `shape` of constexpr_lut_to_dense / sparse_to_dense (read as doubles, exact) */
  if (!dtype_const_ok(t->dtype) && t->dtype != MIL_DT_UINT32)
    return fail(x, "input '%s' has the unsupported element type %s", name, mil_dtype_name(t->dtype));
  if (l->count != (uint64_t)in->n && l->count != 1) return fail(x, "input '%s' has the wrong number of elements", name);
  in->lit = l;
  return true;
}

static bool cx_numeric(Ctx *x, const char *name, const CxIn *in) {
  if (in->str) return fail(x, "input '%s' must be a tensor, not a string", name);
  return true;
}

/* Stores r as element i of the constexpr result v, rounded to its dtype. */
static void cx_st(Val *v, int64_t i, double r) {
  st(v, i, v->dt == MIL_DT_FP16 ? (double)fp16_to_float(fp16_from_double(r)) : r);
}

/* The element of a per-axis parameter p (a scalar, or a vector along `axis`)
 * for element i of a tensor of dims. */
static int64_t along(const CxIn *p, int64_t i, const int64_t *dims, uint32_t rank, uint32_t axis) {
  if (p->n == 1) return 0;
  return (i / elements(dims + axis + 1, rank - axis - 1)) % dims[axis];
}

/* constexpr_affine_dequantize (iOS16): scale * (quantized_data - zero_point),
 * scale and zero_point scalars or vectors along axis. */
static bool cx_affine(Ctx *x, Val *out) {
  CxIn q, zp, sc, ax;
  if (!cx_input(x, "quantized_data", true, &q) || !cx_input(x, "zero_point", true, &zp) ||
      !cx_input(x, "scale", true, &sc) || !cx_input(x, "axis", true, &ax) || !cx_numeric(x, "quantized_data", &q) ||
      !cx_numeric(x, "zero_point", &zp) || !cx_numeric(x, "scale", &sc) || !cx_numeric(x, "axis", &ax))
    return false;
  if (q.dt != MIL_DT_INT8 && q.dt != MIL_DT_UINT8)
    return fail(x, "quantized_data must be int8 or uint8, not %s", mil_dtype_name(q.dt));
  if (sc.dt != out->dt) return fail(x, "scale is %s but the result is declared %s", mil_dtype_name(sc.dt), mil_dtype_name(out->dt));
  if (ax.n != 1) return fail(x, "axis must be a scalar");
  uint32_t axis = 0;
  if (!norm_axis(x, to_index(cx_ld(&ax, 0)), q.rank, &axis) || !expect_shape(x, out, q.dims, q.rank)) return false;
  const CxIn *p[2] = {&sc, &zp};
  for (int k = 0; k < 2; k++)
    if (p[k]->rank > 1 || (p[k]->rank == 1 && p[k]->n != q.dims[axis]))
      return fail(x, "%s must be a scalar or a vector of the %lld elements of dimension %u", k ? "zero_point" : "scale",
                  (long long)q.dims[axis], axis);
  for (int64_t i = 0; i < out->n; i++) {
    double zv = cx_ld(&zp, along(&zp, i, q.dims, q.rank, axis)), sv = cx_ld(&sc, along(&sc, i, q.dims, q.rank, axis));
    cx_st(out, i, sv * (cx_ld(&q, i) - zv));
  }
  return true;
}

/* constexpr_cast (iOS16): source_val converted to output_dtype. */
static bool cx_cast(Ctx *x, Val *out) {
  CxIn src, to;
  if (!cx_input(x, "source_val", true, &src) || !cx_input(x, "output_dtype", true, &to) ||
      !cx_numeric(x, "source_val", &src))
    return false;
  if (!to.str) return fail(x, "output_dtype must be a string");
  if (mil_dtype_from_name(to.str, strlen(to.str)) != out->dt)
    return fail(x, "casts to '%s' but the result is declared %s", to.str, mil_dtype_name(out->dt));
  if (!expect_shape(x, out, src.dims, src.rank)) return false;
  for (int64_t i = 0; i < out->n; i++) cx_st(out, i, cx_ld(&src, i));
  return true;
}

/* constexpr_blockwise_shift_scale (iOS18): scale * (data - offset), scale and
 * offset of data's rank with each dim dividing data's: one value per block. */
static bool cx_blockwise(Ctx *x, Val *out) {
  CxIn data, sc, off;
  if (!cx_input(x, "data", true, &data) || !cx_input(x, "scale", true, &sc) || !cx_numeric(x, "data", &data) ||
      !cx_numeric(x, "scale", &sc))
    return false;
  bool has_off = find_arg(x->s, "offset") || mil_find_attr(x->s->attrs, x->s->nattrs, "offset");
  if (has_off && (!cx_input(x, "offset", true, &off) || !cx_numeric(x, "offset", &off))) return false;
  if (sc.dt != out->dt) return fail(x, "scale is %s but the result is declared %s", mil_dtype_name(sc.dt), mil_dtype_name(out->dt));
  if (!expect_shape(x, out, data.dims, data.rank)) return false;
  int64_t blk[MIL_MAX_RANK], sst[MIL_MAX_RANK];
  if (sc.rank != data.rank || (has_off && (off.rank != sc.rank || off.n != sc.n)))
    return fail(x, "scale (and offset) must have the rank of data, %u", data.rank);
  for (uint32_t i = 0; i < data.rank; i++) {
    if (sc.dims[i] < 1 || data.dims[i] % sc.dims[i] || (has_off && off.dims[i] != sc.dims[i]))
      return fail(x, "dimension %u of scale (%lld) does not divide data's (%lld)", i, (long long)sc.dims[i],
                  (long long)data.dims[i]);
    blk[i] = data.dims[i] / sc.dims[i];
  }
  strides_of(sc.dims, sc.rank, sst);
  for (int64_t i = 0; i < out->n; i++) {
    int64_t rem = i, k = 0;
    for (uint32_t d = data.rank; d-- > 0;) {
      k += (rem % data.dims[d]) / blk[d] * sst[d];
      rem /= data.dims[d];
    }
    cx_st(out, i, cx_ld(&sc, k) * (cx_ld(&data, i) - (has_off ? cx_ld(&off, k) : 0)));
  }
  return true;
}

/* The `shape` input of the iOS16 lut/sparse ops: it must be the declared shape. */
static bool cx_shape(Ctx *x, const CxIn *shp, const Val *out) {
  if (shp->dt != MIL_DT_UINT32 && shp->dt != MIL_DT_INT32) return fail(x, "shape must be uint32");
  if (shp->rank != 1 || shp->n != out->rank) return fail(x, "shape has %lld entries but the result has rank %u", (long long)shp->n, out->rank);
  for (uint32_t i = 0; i < out->rank; i++)
    if (cx_ld(shp, i) != (double)out->dims[i]) return fail(x, "shape does not match the declared result shape");
  return true;
}

/* Bit p of packed bytes (least significant bit first, as coremltools packs). */
static int cx_bit(const CxIn *in, int64_t p) { return ((int)cx_ld(in, p / 8) >> (p % 8)) & 1; }

/* constexpr_lut_to_dense (iOS16): indices, uint8 [M], pack one n-bit index
 * per element (n = log2 of the lut's size, 1, 2, 4, 6 or 8; LSB first, an
 * index may straddle two bytes) into lut, a vector; the result has `shape`. */
static bool cx_lut(Ctx *x, Val *out) {
  CxIn ind, lut, shp;
  bool has_shape = find_arg(x->s, "shape") || mil_find_attr(x->s->attrs, x->s->nattrs, "shape");
  if (!has_shape) return fail(x, "the iOS18 form (no shape; vector_axis) is not supported yet");
  if (!cx_input(x, "indices", true, &ind) || !cx_input(x, "lut", true, &lut) || !cx_input(x, "shape", true, &shp) ||
      !cx_numeric(x, "indices", &ind) || !cx_numeric(x, "lut", &lut) || !cx_numeric(x, "shape", &shp) || !cx_shape(x, &shp, out))
    return false;
  if (ind.dt != MIL_DT_UINT8 || ind.rank != 1) return fail(x, "indices must be a uint8 vector");
  if (lut.dt != out->dt) return fail(x, "lut is %s but the result is declared %s", mil_dtype_name(lut.dt), mil_dtype_name(out->dt));
  int nbits = 0;
  while (nbits < 9 && ((int64_t)1 << nbits) != lut.n) nbits++;
  if (lut.rank != 1 || (nbits != 1 && nbits != 2 && nbits != 4 && nbits != 6 && nbits != 8))
    return fail(x, "lut must be a vector of 2, 4, 16, 64 or 256 entries (it has %lld)", (long long)lut.n);
  if (ind.n != (out->n * nbits + 7) / 8)
    return fail(x, "indices has %lld bytes; %lld %d-bit indices need %lld", (long long)ind.n, (long long)out->n, nbits,
                (long long)((out->n * nbits + 7) / 8));
  for (int64_t i = 0; i < out->n; i++) {
    int64_t k = 0;
    for (int b = 0; b < nbits; b++) k |= (int64_t)cx_bit(&ind, i * nbits + b) << b;
    cx_st(out, i, cx_ld(&lut, k));
  }
  return true;
}

/* constexpr_sparse_to_dense (iOS16): bit i of mask (uint8 [ceil(n/8)], LSB
 * first) set takes the next value of nonzero_data, clear gives 0. */
static bool cx_sparse(Ctx *x, Val *out) {
  CxIn nz, mask, shp;
  bool has_shape = find_arg(x->s, "shape") || mil_find_attr(x->s->attrs, x->s->nattrs, "shape");
  if (!has_shape) return fail(x, "the iOS18 form (a uint1 mask of the result's shape) is not supported yet");
  if (!cx_input(x, "nonzero_data", true, &nz) || !cx_input(x, "mask", true, &mask) || !cx_input(x, "shape", true, &shp) ||
      !cx_numeric(x, "nonzero_data", &nz) || !cx_numeric(x, "mask", &mask) || !cx_numeric(x, "shape", &shp) ||
      !cx_shape(x, &shp, out))
    return false;
  if (mask.dt != MIL_DT_UINT8 || mask.rank != 1) return fail(x, "mask must be a uint8 vector");
  if (nz.dt != out->dt || nz.rank != 1)
    return fail(x, "nonzero_data must be a vector of the result's dtype %s", mil_dtype_name(out->dt));
  if (mask.n != (out->n + 7) / 8)
    return fail(x, "mask has %lld bytes; %lld elements need %lld", (long long)mask.n, (long long)out->n, (long long)((out->n + 7) / 8));
  int64_t set = 0;
  for (int64_t p = 0; p < mask.n * 8; p++) {
    if (!cx_bit(&mask, p)) continue;
    if (p >= out->n) return fail(x, "mask has bit %lld set, past the %lld elements", (long long)p, (long long)out->n);
    set++;
  }
  if (set != nz.n) return fail(x, "mask has %lld bits set but nonzero_data has %lld values", (long long)set, (long long)nz.n);
  for (int64_t i = 0, k = 0; i < out->n; i++) cx_st(out, i, cx_bit(&mask, i) ? cx_ld(&nz, k++) : 0);
  return true;
}

typedef bool (*CxFn)(Ctx *x, Val *out);

static const struct {
  const char *name;
  CxFn fn;
} cx_table[] = {
    {"constexpr_affine_dequantize", cx_affine},
    {"constexpr_cast", cx_cast},
    {"constexpr_blockwise_shift_scale", cx_blockwise},
    {"constexpr_lut_to_dense", cx_lut},
    {"constexpr_sparse_to_dense", cx_sparse},
};

static CxFn find_cx(const char *name) {
  for (size_t i = 0; i < sizeof cx_table / sizeof cx_table[0]; i++)
    if (!strcmp(cx_table[i].name, name)) return cx_table[i].fn;
  return NULL;
}

/* Evaluates every constexpr statement, in order (one may use another's result). */
static bool eval_constexprs(CpuProgram *c, Diag *d) {
  bool ok = true;
  for (uint32_t si = 0; si < c->f->nstmts; si++) {
    const MilStmt *s = &c->f->stmts[si];
    if (c->ops[si] || strncmp(s->op, "constexpr_", 10)) continue;
    uint32_t slot = c->base[si];
    const_owned(c, slot, 4);
    Ctx x = {.c = c, .vals = c->vals, .d = d, .s = s, .si = si};
    if (s->nresults != 1) ok = fail(&x, "must have one result");
    else ok = find_cx(s->op)(&x, &c->vals[slot]) && ok;
  }
  return ok;
}

static uint32_t root_of(const CpuProgram *c, uint32_t s) {
  while (c->slots[s].kind == SK_VIEW) s = c->slots[s].src;
  return s;
}

typedef struct Block {
  int64_t off, size;
  uint32_t slot;
} Block;

/* Lays out the planned buffers (see the header comment); returns the arena size. */
static size_t plan_buffers(CpuProgram *c) {
  const MilFunc *f = c->f;
  uint32_t nt = f->nstmts + 1, never = UINT32_MAX;
  for (uint32_t s = 0; s < c->nslots; s++) c->slots[s].last = 0, c->slots[s].off = -1;
  for (uint32_t si = 0; si < f->nstmts; si++) {
    for (uint32_t k = 0; k < f->stmts[si].nresults; k++) c->slots[c->base[si] + k].last = si + 1;
    if (c->fz[si].kind == FZ_ELIDED) continue; /* reads nothing */
    uint32_t a0 = c->argbase[si], a1 = c->argbase[si + 1];
    for (uint32_t i = c->argstart[a0]; i < c->argstart[a1]; i++) {
      uint32_t r = root_of(c, c->opslot[i]);
      if (c->slots[r].last < si + 1) c->slots[r].last = si + 1;
    }
    if (c->fz[si].kind == FZ_LINEAR) { /* and what the elided statements read */
      uint32_t r = root_of(c, c->fz[si].xs);
      if (c->slots[r].last < si + 1) c->slots[r].last = si + 1;
    }
    if (c->fz[si].kind == FZ_GROUP || c->fz[si].kind == FZ_MEMBER) {
      /* A group runs its members tile by tile: what any of them reads or
       * writes stays alive (unshared) until the group's last statement. */
      uint32_t end = c->fz[si].end;
      for (uint32_t k = 0; k < f->stmts[si].nresults; k++)
        if (c->slots[c->base[si] + k].last < end) c->slots[c->base[si] + k].last = end;
      for (uint32_t i = c->argstart[a0]; i < c->argstart[a1]; i++) {
        uint32_t r = root_of(c, c->opslot[i]);
        if (c->slots[r].last < end) c->slots[r].last = end;
      }
    }
  }
  for (uint32_t i = 0; i < c->nout; i++) c->slots[root_of(c, c->out_slot[i])].last = never;
  Block *live = xcalloc(c->nslots + 1, sizeof *live);
  uint32_t nlive = 0;
  int64_t end = 0;
  for (uint32_t t = 0; t < nt; t++) {
    uint32_t s0 = t == 0 ? 0 : c->base[t - 1], s1 = t == 0 ? f->nparams : c->base[t - 1] + f->stmts[t - 1].nresults;
    uint8_t fk = t == 0 ? FZ_NONE : c->fz[t - 1].kind;
    if (fk == FZ_ELIDED || (t > 0 && c->fz[t - 1].epi)) s1 = s0; /* never computed, or by a fused linear */
    if (fk == FZ_LINEAR) s0 = c->fz[t - 1].ys, s1 = s0 + 1; /* computes the later transpose's result instead */
    /* A fused linear's epilogue writes its group's results while the linear runs. */
    uint32_t e0 = fk == FZ_LINEAR && c->fz[t - 1].gfirst ? c->fz[t - 1].gfirst : 0;
    uint32_t e1 = e0 ? c->fz[e0].end : 0, extra = 0;
    for (uint32_t k = e0; k < e1; k++) extra += f->stmts[k].nresults;
    for (uint32_t q = 0, k = e0, kr = 0; q < (s1 - s0) + extra; q++) {
      uint32_t s = s0 + q;
      if (q >= s1 - s0) { /* the epilogue's results, statement by statement */
        while (kr >= f->stmts[k].nresults) k++, kr = 0;
        s = c->base[k] + kr++;
      }
      const Val *v = &c->vals[s];
      bool needs = (c->slots[s].kind == SK_RESULT && c->slots[s].tile < 0) ||
                   (c->slots[s].kind == SK_PARAM && (v->dt == MIL_DT_FP16 || v->dt == MIL_DT_BOOL));
      if (!needs) continue;
      int64_t size = ((v->n > 0 ? v->n : 1) * 4 + 63) / 64 * 64, cand = 0;
      uint32_t at = 0;
      for (; at < nlive; at++) {
        if (cand + size <= live[at].off) break;
        if (live[at].off + live[at].size > cand) cand = live[at].off + live[at].size;
      }
      memmove(&live[at + 1], &live[at], (nlive - at) * sizeof *live);
      live[at] = (Block){cand, size, s};
      nlive++;
      c->slots[s].off = cand;
      if (cand + size > end) end = cand + size;
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < nlive; i++)
      if (c->slots[live[i].slot].last > t) live[k++] = live[i];
    nlive = k;
  }
  free(live);
  return (size_t)end;
}

/* Which consts can stay fp16 in place: fp16 BLOBFILE weights whose every
 * use, through views, is the weight operand of linear or conv (which
 * converts panels as it goes). Small ones are converted (no gain). */
static void choose_fp16_weights(CpuProgram *c) {
  const MilFunc *f = c->f;
  uint8_t *use = xcalloc(c->nslots + 1, 1); /* bit 1: as a weight, bit 2: otherwise */
  for (uint32_t i = 0; i < c->nout; i++) use[c->out_slot[i]] |= 2;
  for (uint32_t si = f->nstmts; si-- > 0;) {
    const MilStmt *s = &f->stmts[si];
    if (!c->ops[si]) continue;
    bool wop = !strcmp(s->op, "linear") || !strcmp(s->op, "conv");
    for (uint32_t k = 0; k < s->nargs; k++)
      for (uint32_t j = 0; j < s->args[k].nitems; j++) {
        uint32_t slot = c->opslot[c->argstart[c->argbase[si] + k] + j];
        if (c->ops[si] == &view_entry) use[slot] |= use[c->base[si]];
        else use[slot] |= wop && !strcmp(s->args[k].name, "weight") ? 1 : 2;
      }
  }
  for (uint32_t s = 0; s < c->nslots; s++) {
    const Slot *sl = &c->slots[s];
    Val *v = &c->vals[s];
    if (sl->kind != SK_CONST || sl->weight < 0 || use[s] != 1 || v->dt != MIL_DT_FP16 || v->n < 4096 || v->rank < 2)
      continue;
    if (orion_weight(c->prog, c->fn, (uint32_t)sl->weight)->dtype != MIL_DT_FP16) continue;
    v->st = ST_H16;
    int64_t row = v->dims[0] ? v->n / v->dims[0] : 0;
    if (panel_ld(row) * PANEL > c->scratch_floats) c->scratch_floats = panel_ld(row) * PANEL;
  }
  free(use);
}

/* ---- fusion (see the header comment) ---- */


/* Whether argument `name` of statement si is a const of the n integers want
 * (or absent, when absent_ok). */
static bool const_ints_are(const CpuProgram *c, uint32_t si, const char *name, const int64_t *want, uint32_t n,
                           bool absent_ok) {
  if (!find_arg(&c->f->stmts[si], name)) return absent_ok;
  uint32_t s = arg_slot(c, si, name);
  if (s == UINT32_MAX) return false;
  s = root_of(c, s);
  const Val *v = &c->vals[s];
  if (c->slots[s].kind != SK_CONST || (v->st != ST_I32 && v->st != ST_F32) || v->n != (int64_t)n) return false;
  for (uint32_t i = 0; i < n; i++)
    if (ld(v, i) != (double)want[i]) return false;
  return true;
}

/* Whether transpose statement si swaps the last two dims of a rank-3 x. */
static bool swaps_last_two(const CpuProgram *c, uint32_t si) {
  static const int64_t swap[3] = {0, 2, 1}, neg[3] = {-3, -1, -2};
  uint32_t xs = arg_slot(c, si, "x");
  return c->ops[si] && !strcmp(c->f->stmts[si].op, "transpose") && xs != UINT32_MAX && c->vals[xs].rank == 3 &&
         (const_ints_are(c, si, "perm", swap, 3, false) || const_ints_are(c, si, "perm", neg, 3, false));
}

static bool same_dims(const Val *v, const int64_t *dims, uint32_t rank) {
  if (v->rank != rank) return false;
  for (uint32_t i = 0; i < rank; i++)
    if (v->dims[i] != dims[i]) return false;
  return true;
}

/* Fuses conv statement si if it is a linear layer as lower-linear writes it:
 *   t = transpose(x [B, P, K], perm [0, 2, 1]); v = reshape(t) [B, K, 1.., P];
 *   r = conv(v, weight [O, K, 1..]) (pointwise, groups 1, no bias);
 *   optionally a = add(r, bias viewed as [1, O, 1..]); then an optional
 *   reshape to [B, O, P] and y = transpose(.., perm [0, 2, 1]) [B, P, O],
 * every intermediate used once and of one float dtype with x and y. The conv
 * then computes y from x (k_fused_linear) and the others are elided. nuse
 * and user: per slot, its number of uses (outputs count) and its last user. */
static void fuse_linear(CpuProgram *c, uint32_t si, const uint32_t *nuse, const uint32_t *user,
                        const uint32_t *stmt_of) {
  const MilFunc *f = c->f;
  const MilStmt *s = &f->stmts[si];
  if (!c->ops[si] || strcmp(s->op, "conv") || s->nresults != 1 || find_arg(s, "bias")) return;
  uint32_t vs = arg_slot(c, si, "x"), ws = arg_slot(c, si, "weight"), rs = c->base[si];
  if (vs == UINT32_MAX || ws == UINT32_MAX || c->slots[vs].kind != SK_VIEW || nuse[vs] != 1) return;
  uint32_t ts = c->slots[vs].src, tst = stmt_of[ts];
  if (c->slots[ts].kind != SK_RESULT || nuse[ts] != 1 || tst == UINT32_MAX || !swaps_last_two(c, tst)) return;
  uint32_t xs = arg_slot(c, tst, "x");
  const Val *X = &c->vals[xs], *V = &c->vals[vs], *W = &c->vals[ws], *R = &c->vals[rs];
  MilDType dt = X->dt;
  if (X->st != ST_F32 || !is_float(dt) || c->vals[ts].dt != dt || V->dt != dt || R->dt != dt) return;
  int64_t B = X->dims[0], P = X->dims[1], K = X->dims[2], O = W->dims[0];
  uint32_t rank = V->rank, S = rank - 2;
  if (rank < 3 || rank > 5 || W->rank != rank || R->rank != rank || V->dims[0] != B || V->dims[1] != K ||
      W->dims[1] != K || R->dims[0] != B || R->dims[1] != O || elements(V->dims + 2, S) != P)
    return;
  for (uint32_t i = 2; i < rank; i++)
    if (W->dims[i] != 1 || R->dims[i] != V->dims[i]) return;
  static const int64_t ones[3] = {1, 1, 1}, zeros[6] = {0};
  if (!const_ints_are(c, si, "groups", ones, 1, true) || !const_ints_are(c, si, "strides", ones, S, true) ||
      !const_ints_are(c, si, "dilations", ones, S, true))
    return;
  const char *pt = "valid";
  if (find_arg(s, "pad_type")) {
    uint32_t ps = arg_slot(c, si, "pad_type");
    if (ps == UINT32_MAX || c->vals[ps].st != ST_STR) return;
    pt = c->vals[ps].str;
  }
  bool custom = !strcmp(pt, "custom");
  if (!custom && strcmp(pt, "valid") && strcmp(pt, "same") && strcmp(pt, "same_lower")) return;
  if (custom && !const_ints_are(c, si, "pad", zeros, 2 * S, false)) return; /* a unit kernel pads nothing otherwise */
  /* The result side: [add bias], [reshape to [B, O, P]], transpose. */
  uint32_t cur = rs, bs = UINT32_MAX, elided[4], ne = 0;
  if (nuse[cur] != 1 || user[cur] == UINT32_MAX) return;
  uint32_t u = user[cur];
  if (c->ops[u] && !strcmp(f->stmts[u].op, "add")) {
    uint32_t ax = arg_slot(c, u, "x"), ay = arg_slot(c, u, "y"), other = ax == cur ? ay : ax;
    if ((ax != cur && ay != cur) || other == UINT32_MAX) return;
    uint32_t br = root_of(c, other);
    const Val *bv = &c->vals[other];
    if (c->slots[br].kind != SK_CONST || c->vals[br].st != ST_F32 || c->vals[br].n != O || bv->rank > rank) return;
    for (uint32_t i = 0; i < rank; i++) {
      int64_t d = i + bv->rank >= rank ? bv->dims[i + bv->rank - rank] : 1;
      if (d != (i == 1 ? O : 1)) return;
    }
    cur = c->base[u];
    if (c->vals[cur].dt != dt || !same_dims(&c->vals[cur], R->dims, rank)) return;
    bs = br;
    elided[ne++] = u;
    if (nuse[cur] != 1 || (u = user[cur]) == UINT32_MAX) return;
  }
  if (c->ops[u] == &view_entry) {
    cur = c->base[u];
    int64_t d3[3] = {B, O, P};
    if (c->vals[cur].dt != dt || !same_dims(&c->vals[cur], d3, 3)) return;
    elided[ne++] = u;
    if (nuse[cur] != 1 || (u = user[cur]) == UINT32_MAX) return;
  }
  int64_t dy[3] = {B, P, O};
  if (!swaps_last_two(c, u) || arg_slot(c, u, "x") != cur || c->vals[c->base[u]].dt != dt ||
      !same_dims(&c->vals[c->base[u]], dy, 3))
    return;
  elided[ne++] = u;
  for (uint32_t i = 0; i < ne; i++) c->fz[elided[i]].kind = FZ_ELIDED;
  c->fz[tst].kind = c->fz[stmt_of[vs]].kind = FZ_ELIDED;
  bool ane16 = c->mode == CPU_NUMERICS_ANE && dt == MIL_DT_FP16;
  c->fz[si] = (Fused){.kind = FZ_LINEAR, .round_mid = ane16 && bs != UINT32_MAX, .round_out = ane16, .xs = xs,
                      .bs = bs, .ys = c->base[u]};
}

/* Whether statement si can be a member of an element-wise group: a float
 * unary op or float arithmetic binary op on float operands, not fused yet. */
static bool groupable(const CpuProgram *c, uint32_t si) {
  const OpEntry *e = c->ops[si];
  const MilStmt *s = &c->f->stmts[si];
  if (!e || c->fz[si].kind != FZ_NONE || s->nresults != 1 || c->vals[c->base[si]].st != ST_F32) return false;
  if (e->fn == k_unary ? e->code == U_NOT : e->fn != k_binary || is_compare(e->code) || is_logical(e->code))
    return false;
  const char *names[2] = {"x", "y"};
  for (uint32_t k = 0; k < (e->fn == k_binary ? 2u : 1u); k++) {
    uint32_t a = arg_slot(c, si, names[k]);
    if (a == UINT32_MAX || c->vals[a].st != ST_F32) return false;
  }
  return true;
}

/* The members of group [first, end) whose results are used only as the
 * operands of later members (not as outputs, not through views) live in
 * tile buffers: each gets the lowest one free when it is computed, freed
 * after its last reader (a result never shares its operands' buffer). */
static void assign_tiles(CpuProgram *c, uint32_t first, uint32_t end, const uint32_t *nuse) {
  const char *names[2] = {"x", "y"};
  uint32_t inner[GROUP_MAX], lastread[GROUP_MAX], nin = 0;
  for (uint32_t si = first; si < end; si++) {
    if (!c->ops[si] || c->ops[si] == &view_entry) continue;
    uint32_t r = c->base[si], reads = 0, lr = si;
    for (uint32_t k = si + 1; k < end; k++) {
      if (!c->ops[k] || c->ops[k] == &view_entry) continue;
      for (uint32_t q = 0; q < 2; q++)
        if (arg_slot(c, k, names[q]) == r) reads++, lr = k;
    }
    if (reads > 0 && reads == nuse[r]) inner[nin] = r, lastread[nin++] = lr;
  }
  bool busy[GROUP_MAX] = {false};
  for (uint32_t si = first; si < end; si++) {
    if (!c->ops[si] || c->ops[si] == &view_entry) continue;
    for (uint32_t i = 0; i < nin; i++)
      if (inner[i] == c->base[si]) {
        int32_t t = 0;
        while (busy[t]) t++;
        busy[t] = true;
        c->slots[inner[i]].tile = t;
        if ((uint32_t)t + 1 > c->ntiles) c->ntiles = (uint32_t)t + 1;
      }
    for (uint32_t i = 0; i < nin; i++)
      if (lastread[i] == si) busy[c->slots[inner[i]].tile] = false;
  }
}

/* Whether statement si is a reduction over the last dim of a float x
 * (keep_dims), which a row group can hold: its x's shape, and its own. */
static bool row_reduction(const CpuProgram *c, uint32_t si, const Val **in) {
  const OpEntry *e = c->ops[si];
  if (!e || e->fn != k_reduce || c->fz[si].kind != FZ_NONE || c->f->stmts[si].nresults != 1) return false;
  uint32_t xs = arg_slot(c, si, "x");
  if (xs == UINT32_MAX || c->vals[xs].st != ST_F32 || c->vals[c->base[si]].st != ST_F32) return false;
  const Val *a = &c->vals[xs], *o = &c->vals[c->base[si]];
  int64_t last[1] = {-1}, lastp[1] = {(int64_t)a->rank - 1}, one[1] = {1};
  if (a->rank < 1 || !(const_ints_are(c, si, "axes", last, 1, false) || const_ints_are(c, si, "axes", lastp, 1, false)) ||
      !const_ints_are(c, si, "keep_dims", one, 1, false) || o->rank != a->rank || a->dims[a->rank - 1] < 2)
    return false;
  for (uint32_t i = 0; i + 1 < a->rank; i++)
    if (o->dims[i] != a->dims[i]) return false;
  *in = a;
  return o->dims[a->rank - 1] == 1;
}

/* Groups runs of consecutive statements (views and consts between them
 * allowed, at most GROUP_MAX members, two or more): groupable ones with
 * results of one shape S (an element group, tiles of GROUP_TILE elements),
 * or, with at least one reduction over S's last dim among them, groupable
 * ones with results of shape S or of S's rows (S with last dim 1) and such
 * reductions (a row group, tiles of whole rows; its rows a multiple of 4
 * long). */
static void fuse_groups(CpuProgram *c, const uint32_t *nuse) {
  const MilFunc *f = c->f;
  for (uint32_t si = 0; si < f->nstmts;) {
    const Val *in = NULL;
    bool red = row_reduction(c, si, &in);
    if (!red && !groupable(c, si)) {
      si++;
      continue;
    }
    const Val *S = red ? in : &c->vals[c->base[si]];
    int64_t rdims[MIL_MAX_RANK];
    memcpy(rdims, S->dims, sizeof rdims);
    if (S->rank) rdims[S->rank - 1] = 1;
    bool rows_ok = S->rank > 0 && S->dims[S->rank - 1] > 1 && S->dims[S->rank - 1] % 4 == 0, rowwise = red;
    uint32_t last = si, members = 1;
    for (uint32_t k = si + 1; k < f->nstmts && members < GROUP_MAX; k++) {
      if (!c->ops[k] || (c->ops[k] == &view_entry && c->fz[k].kind == FZ_NONE)) continue;
      const Val *kin = NULL, *r = &c->vals[c->base[k]];
      bool kred = rows_ok && row_reduction(c, k, &kin) && same_dims(kin, S->dims, S->rank);
      bool kel = groupable(c, k) && (same_dims(r, S->dims, S->rank) || (rows_ok && same_dims(r, rdims, S->rank)));
      if (!kred && !kel) break;
      rowwise = rowwise || kred || !same_dims(r, S->dims, S->rank);
      last = k;
      members++;
    }
    if (rowwise && !rows_ok) { /* a lone reduction, or an element group of rows-shaped results */
      si++;
      continue;
    }
    if (members >= 2) {
      int64_t L = rowwise ? S->dims[S->rank - 1] : 0;
      c->fz[si] = (Fused){.kind = FZ_GROUP, .end = last + 1, .rowlen = L};
      for (uint32_t k = si + 1; k <= last; k++)
        if (c->ops[k]) c->fz[k] = (Fused){.kind = FZ_MEMBER, .end = last + 1};
      assign_tiles(c, si, last + 1, nuse);
      int64_t tf = L ? tile_rows(L) * L : GROUP_TILE;
      if (tf > c->tile_floats) c->tile_floats = tf;
    }
    si = last + 1;
  }
}

/* Makes the element-wise group right after fused linear si (only elided
 * statements and consts between them) its epilogue: the group must have
 * the linear's result shape, with a last dim a multiple of 4 (so that each
 * row segment of a piece splits into the same vectors of 4 as unfused),
 * and read nothing computed after the linear but the linear's result and
 * its own members' results. A single groupable statement makes a group. */
static void fuse_epilogue(CpuProgram *c, uint32_t si, const uint32_t *nuse, const uint32_t *stmt_of) {
  const MilFunc *f = c->f;
  const Val *y = &c->vals[c->fz[si].ys];
  if (y->dims[2] % 4) return;
  uint32_t g = si + 1;
  while (g < f->nstmts && (!c->ops[g] || c->fz[g].kind == FZ_ELIDED || c->ops[g] == &view_entry)) g++;
  if (g == f->nstmts || !same_dims(&c->vals[c->base[g]], y->dims, y->rank)) return;
  if (c->fz[g].kind == FZ_NONE && groupable(c, g)) c->fz[g] = (Fused){.kind = FZ_GROUP, .end = g + 1};
  if (c->fz[g].kind != FZ_GROUP || c->fz[g].rowlen) return; /* a row group needs whole rows */
  uint32_t end = c->fz[g].end;
  for (uint32_t k = g; k < end; k++) {
    if (!c->ops[k]) continue;
    for (uint32_t i = c->argstart[c->argbase[k]]; i < c->argstart[c->argbase[k + 1]]; i++) {
      /* ready when the linear runs: set before it (a view too: views between the linear and the group run
       * after it), or the linear's result, or made by the group's own statements (its views run first) */
      uint32_t a = c->opslot[i], sa = stmt_of[a];
      bool ok = a == c->fz[si].ys || c->slots[a].kind == SK_CONST || c->slots[a].kind == SK_STR ||
                sa == UINT32_MAX || sa < si || (sa >= g && sa < end);
      if (!ok) return;
    }
  }
  (void)nuse;
  for (uint32_t k = g; k < end; k++) c->fz[k].epi = true;
  c->fz[si].gfirst = g;
}

/* Plans the fusions (none when check_finite asks for every result, or the
 * caller asks for none). */
static void plan_fusion(CpuProgram *c) {
  const MilFunc *f = c->f;
  c->fz = xcalloc(f->nstmts + 1, sizeof *c->fz);
  if (c->check_finite || c->unfused) return;
  uint32_t *nuse = xcalloc(c->nslots + 1, sizeof *nuse), *user = xcalloc(c->nslots + 1, sizeof *user);
  uint32_t *stmt_of = xcalloc(c->nslots + 1, sizeof *stmt_of);
  for (uint32_t s = 0; s < c->nslots; s++) user[s] = stmt_of[s] = UINT32_MAX;
  for (uint32_t si = 0; si < f->nstmts; si++) {
    for (uint32_t k = 0; k < f->stmts[si].nresults; k++) stmt_of[c->base[si] + k] = si;
    for (uint32_t i = c->argstart[c->argbase[si]]; i < c->argstart[c->argbase[si + 1]]; i++) {
      nuse[c->opslot[i]]++;
      user[c->opslot[i]] = si;
    }
  }
  for (uint32_t i = 0; i < c->nout; i++) nuse[c->out_slot[i]]++, user[c->out_slot[i]] = UINT32_MAX;
  for (uint32_t si = 0; si < f->nstmts; si++) fuse_linear(c, si, nuse, user, stmt_of);
  fuse_groups(c, nuse);
  for (uint32_t si = 0; si < f->nstmts; si++)
    if (c->fz[si].kind == FZ_LINEAR) fuse_epilogue(c, si, nuse, stmt_of);
  free(nuse);
  free(user);
  free(stmt_of);
}

static uint32_t thread_count(const CpuOptions *o) {
  if (o->threads) return o->threads;
  const char *e = getenv("ORION_CPU_THREADS");
  if (e && *e) {
    long n = strtol(e, NULL, 10);
    if (n >= 1 && n <= 256) return (uint32_t)n;
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n >= 1 && n <= 256 ? (uint32_t)n : 1;
}

#if HAVE_X86
/* CPUID leaf 1, ECX bit 29. Asked directly: clang before 15 does not know
 * "f16c" as a __builtin_cpu_supports feature. */
static bool cpu_has_f16c(void) {
  unsigned a, b, c, d;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
}
#endif

bool cpu_supports(const OrionProgram *p, uint32_t fn, Diag *d) {
  const MilFunc *f = orion_function_mil(p, fn);
  bool ok = true;
  if (orion_function_has_dynamic_shapes(p, fn)) {
    diag_error(d, f->loc, "function '%s' has flexible shapes; programs with flexible shapes are not supported",
               f->name);
    ok = false;
  }
  for (uint32_t i = 0; i < f->nstmts; i++) {
    const MilStmt *s = &f->stmts[i];
    if (!strcmp(s->op, "const") || (!strncmp(s->op, "constexpr_", 10) && find_cx(s->op)) || find_op(s->op)) continue;
    diag_error(d, s->op_loc, "op '%s' is not supported by the CPU backend", s->op);
    ok = false;
  }
  return ok;
}

CpuProgram *cpu_prepare(OrionProgram *p, uint32_t fn, CpuNumerics mode, Diag *d) {
  CpuOptions o = {.numerics = mode, .threads = 0};
  return cpu_prepare_with(p, fn, &o, d);
}

CpuProgram *cpu_prepare_with(OrionProgram *p, uint32_t fn, const CpuOptions *opt, Diag *d) {
#if HAVE_X86
  have_f16c = cpu_has_f16c() && __builtin_cpu_supports("avx");
  have_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  CpuProgram *c = xcalloc(1, sizeof *c);
  c->prog = p;
  c->fn = fn;
  c->f = orion_function_mil(p, fn);
  c->mode = opt->numerics;
  c->check_finite = opt->check_finite;
  c->unfused = opt->unfused;
  const MilFunc *f = c->f;
  bool ok = true;
  if (orion_function_has_dynamic_shapes(p, fn)) {
    diag_error(d, f->loc, "function '%s' has flexible shapes; programs with flexible shapes are not supported",
               f->name);
    ok = false;
  }
  /* Slots: parameters, statement results, then one per literal operand. */
  uint32_t nargs = 0, nitems = 0, nlits = 0;
  c->base = xcalloc(f->nstmts + 1, sizeof *c->base);
  c->ops = xcalloc(f->nstmts + 1, sizeof *c->ops);
  c->argbase = xcalloc(f->nstmts + 1, sizeof *c->argbase);
  c->nslots = f->nparams;
  for (uint32_t i = 0; i < f->nstmts; i++) {
    const MilStmt *s = &f->stmts[i];
    c->base[i] = c->nslots;
    c->nslots += s->nresults;
    c->argbase[i] = nargs;
    nargs += s->nargs;
    for (uint32_t k = 0; k < s->nargs; k++) {
      nitems += s->args[k].nitems;
      for (uint32_t j = 0; j < s->args[k].nitems; j++) nlits += s->args[k].items[j].kind == MIL_OPERAND_LITERAL;
    }
  }
  c->argbase[f->nstmts] = nargs;
  c->argstart = xcalloc(nargs + 1, sizeof *c->argstart);
  c->opslot = xcalloc(nitems + 1, sizeof *c->opslot);
  uint32_t lit = c->nslots;
  c->nslots += nlits;
  c->slots = xcalloc(c->nslots + 1, sizeof *c->slots);
  c->vals = xcalloc(c->nslots + 1, sizeof *c->vals);
  for (uint32_t s = 0; s < c->nslots; s++) c->slots[s].weight = -1, c->slots[s].tile = -1;
  for (uint32_t i = 0; i < f->nparams; i++) {
    c->slots[i].kind = SK_PARAM;
    if (ok && (ok = check_type(d, &f->params[i].type, f->params[i].loc, "input", f->params[i].name, false)))
      val_shape(&c->vals[i], &f->params[i].type);
  }
  uint32_t a = 0, it = 0;
  for (uint32_t i = 0; i < f->nstmts; i++) {
    const MilStmt *s = &f->stmts[i];
    bool is_const = !strcmp(s->op, "const");
    bool types_ok = true;
    for (uint32_t k = 0; types_ok && k < s->nresults; k++) {
      /* quantize, cast and topk's indices may be int8/uint8/int16/uint16 (held as int32, like the small integer
       * consts; each op checks the declared dtype) */
      MilDType rdt = s->results[k].type.dtype;
      bool small_int = (!strcmp(s->op, "quantize") || !strcmp(s->op, "cast") || !strcmp(s->op, "topk")) &&
                       (rdt == MIL_DT_INT8 || rdt == MIL_DT_UINT8 || rdt == MIL_DT_INT16 || rdt == MIL_DT_UINT16);
      types_ok = check_type(d, &s->results[k].type, s->results[k].loc, "value", s->results[k].name, is_const || small_int);
      if (types_ok) val_shape(&c->vals[c->base[i] + k], &s->results[k].type);
      c->slots[c->base[i] + k].kind = SK_RESULT;
    }
    for (uint32_t k = 0; k < s->nargs; k++, a++) {
      c->argstart[a] = it;
      for (uint32_t j = 0; j < s->args[k].nitems; j++, it++) {
        const MilOperand *o = &s->args[k].items[j];
        if (o->kind == MIL_OPERAND_NAME) {
          c->opslot[it] = o->def_stmt == MIL_DEF_PARAM ? o->def_index : c->base[o->def_stmt] + o->def_index;
          continue;
        }
        const char *why;
        c->opslot[it] = lit;
        c->slots[lit].kind = SK_CONST;
        if (!literal_val(o->literal, &c->vals[lit], &why)) {
          diag_error(d, s->op_loc, "%s: a literal operand %s", s->op, why);
          ok = false;
        } else if (c->vals[lit].st == ST_STR) {
          c->slots[lit].kind = SK_STR;
        } else {
          c->slots[lit].owned = true;
        }
        lit++;
      }
    }
    if (is_const) {
      ok = ok && types_ok && prepare_const(c, i, d);
      continue;
    }
    if (!strncmp(s->op, "constexpr_", 10) && find_cx(s->op)) {
      c->slots[c->base[i]].kind = SK_CONST; /* evaluated once the consts are read */
      ok = ok && types_ok;
      continue;
    }
    if (!(c->ops[i] = find_op(s->op))) {
      diag_error(d, s->op_loc, "op '%s' is not supported by the CPU backend", s->op);
      ok = false;
      continue;
    }
    ok = ok && types_ok;
    /* reshape and identity of a named value of the same dtype are views. */
    const MilArg *xa = find_arg(s, "x");
    if (types_ok && (!strcmp(s->op, "reshape") || !strcmp(s->op, "identity")) && s->nresults == 1 && xa &&
        !xa->is_list && xa->nitems == 1 && xa->items[0].kind == MIL_OPERAND_NAME) {
      uint32_t src = c->opslot[c->argstart[a - s->nargs + (uint32_t)(xa - s->args)]];
      if (c->vals[src].dt == s->results[0].type.dtype) {
        c->ops[i] = &view_entry;
        c->slots[c->base[i]].kind = SK_VIEW;
        c->slots[c->base[i]].src = src;
      }
    }
  }
  c->argstart[nargs] = it;
  c->nin = orion_input_count(p, fn);
  c->nout = orion_output_count(p, fn);
  c->in_param = xcalloc(c->nin + 1, sizeof *c->in_param);
  c->out_slot = xcalloc(c->nout + 1, sizeof *c->out_slot);
  c->out_root = xcalloc(c->nout + 1, sizeof *c->out_root);
  c->out_direct = xcalloc(c->nout + 1, sizeof *c->out_direct);
  for (uint32_t i = 0; ok && i < c->nin; i++) {
    const char *name = orion_input(p, fn, i)->mil_name;
    uint32_t k = 0;
    while (k < f->nparams && strcmp(f->params[k].name, name)) k++;
    if (k == f->nparams) {
      diag_error(d, f->loc, "input '%s' is not a parameter of function '%s'", name, f->name);
      ok = false;
    }
    c->in_param[i] = k;
  }
  for (uint32_t i = 0; ok && i < c->nout; i++) {
    const char *name = orion_output(p, fn, i)->mil_name;
    uint32_t k = 0;
    while (k < f->nreturns && strcmp(f->returns[k].name, name)) k++;
    if (k == f->nreturns) {
      diag_error(d, f->loc, "output '%s' is not returned by function '%s'", name, f->name);
      ok = false;
      break;
    }
    const MilOperand *r = &f->returns[k];
    c->out_slot[i] = r->def_stmt == MIL_DEF_PARAM ? r->def_index : c->base[r->def_stmt] + r->def_index;
    if (!dtype_held(c->vals[c->out_slot[i]].dt)) { /* an int8 quantize result, or a const of a small type */
      diag_error(d, f->loc, "output '%s' is %s, which the CPU backend does not return", name,
                 mil_dtype_name(c->vals[c->out_slot[i]].dt));
      ok = false;
      break;
    }
  }
  if (!ok) {
    cpu_free(c);
    return NULL;
  }
  choose_fp16_weights(c);
  for (uint32_t s = 0; s < c->nslots; s++)
    if (c->slots[s].kind == SK_CONST && c->slots[s].weight >= 0)
      const_from_weight(c, s, orion_weight(p, fn, (uint32_t)c->slots[s].weight));
  if (!eval_constexprs(c, d)) {
    cpu_free(c);
    return NULL;
  }
  /* sdpa keeps one row of scores per thread, as doubles in the scratch. */
  for (uint32_t si = 0; si < f->nstmts; si++) {
    const MilArg *ka = find_arg(&f->stmts[si], "key");
    if (c->ops[si] && !strcmp(f->stmts[si].op, "scaled_dot_product_attention") && ka && ka->nitems == 1) {
      const Val *k = &c->vals[c->opslot[c->argstart[c->argbase[si] + (uint32_t)(ka - f->stmts[si].args)]]];
      int64_t need = k->rank >= 2 ? 2 * k->dims[k->rank - 2] : 0;
      if (need > c->scratch_floats) c->scratch_floats = need;
    }
  }
  for (uint32_t i = 0; i < c->nout; i++) {
    uint32_t r = root_of(c, c->out_slot[i]);
    c->out_root[i] = r;
    MilDType dt = c->vals[c->out_slot[i]].dt;
    c->out_direct[i] = c->slots[r].kind == SK_RESULT && (dt == MIL_DT_FP32 || dt == MIL_DT_INT32);
    for (uint32_t k = 0; k < i; k++)
      if (c->out_root[k] == r) c->out_direct[i] = c->out_direct[k] = false;
  }
  plan_fusion(c);
  c->arena_bytes = plan_buffers(c);
  c->arena = aligned_alloc(64, c->arena_bytes ? c->arena_bytes : 64);
  if (!c->arena) c->arena = xmalloc(c->arena_bytes ? c->arena_bytes : 64);
  if (opt->profile) {
    c->prof = xcalloc(f->nstmts + 1, sizeof *c->prof);
    c->prof_of = xcalloc(f->nstmts + 1, sizeof *c->prof_of);
    for (uint32_t si = 0; si < f->nstmts; si++) {
      const MilStmt *s = &f->stmts[si];
      c->prof_of[si] = c->ops[si] ? c->nprof : UINT32_MAX;
      if (c->ops[si])
        c->prof[c->nprof++] = (CpuStmtTime){.stmt = si, .op = s->op, .name = s->results[0].name, .loc = s->op_loc};
    }
  }
  openblas_set_num_threads(1);
  pool_start(c, thread_count(opt));
  if (c->ntiles) {
    c->tiles = xcalloc(c->pool.n, sizeof *c->tiles);
    for (uint32_t t = 0; t < c->pool.n; t++) c->tiles[t] = xmalloc((size_t)(c->ntiles * c->tile_floats) * sizeof(float));
  }
  c->scratch = xcalloc(c->pool.n, sizeof *c->scratch);
  for (uint32_t t = 0; c->scratch_floats && t < c->pool.n; t++)
    c->scratch[t] = xmalloc((size_t)c->scratch_floats * sizeof(float));
  return c;
}

uint32_t cpu_threads(const CpuProgram *c) { return c->pool.n; }
uint32_t cpu_profile_count(const CpuProgram *c) { return c->nprof; }
const CpuStmtTime *cpu_profile_stmt(const CpuProgram *c, uint32_t i) { return i < c->nprof ? &c->prof[i] : NULL; }

void cpu_profile_reset(CpuProgram *c) {
  for (uint32_t i = 0; i < c->nprof; i++) c->prof[i].runs = 0, c->prof[i].ms = 0;
}
size_t cpu_planned_bytes(const CpuProgram *c) { return c->arena_bytes; }

void cpu_free(CpuProgram *c) {
  if (!c) return;
  pool_stop(c);
  for (uint32_t i = 0; c->slots && i < c->nslots; i++)
    if (c->slots[i].owned) free(c->vals[i].p);
  if (c->scratch)
    for (uint32_t t = 0; t < c->pool.n; t++) free(c->scratch[t]);
  free(c->scratch);
  if (c->tiles)
    for (uint32_t t = 0; t < c->pool.n; t++) free(c->tiles[t]);
  free(c->tiles);
  free(c->arena);
  free(c->vals);
  free(c->slots);
  free(c->base);
  free(c->ops);
  free(c->argbase);
  free(c->argstart);
  free(c->opslot);
  free(c->in_param);
  free(c->out_slot);
  free(c->out_root);
  free(c->out_direct);
  free(c->prof);
  free(c->prof_of);
  free(c->fz);
  free(c);
}

/* ---- weight updates ---- */

bool cpu_reload_weights(CpuProgram *c, Diag *d) {
  bool ok = true;
  for (uint32_t s = 0; s < c->nslots; s++) {
    if (c->slots[s].kind != SK_CONST || c->slots[s].weight < 0) continue;
    const OrionWeight *w = orion_weight(c->prog, c->fn, (uint32_t)c->slots[s].weight);
    const Val *v = &c->vals[s];
    size_t es = w->dtype == MIL_DT_FP16 ? 2 : w->dtype == MIL_DT_INT8 || w->dtype == MIL_DT_UINT8 ? 1 : 4;
    if (w->size != (uint64_t)v->n * es || (v->st == ST_H16 && w->dtype != MIL_DT_FP16)) {
      diag_error(d, c->f->stmts[w->stmt].loc, "weight '%s' changed its size or type; reloading needs a new plan",
                 w->name);
      ok = false;
      continue;
    }
    const_from_weight(c, s, w);
  }
  return ok && eval_constexprs(c, d);
}

bool cpu_set_weight(CpuProgram *c, const char *const_name, MilDType dtype, const void *data, size_t bytes, Diag *d) {
  for (uint32_t s = 0; s < c->nslots; s++) {
    if (c->slots[s].kind != SK_CONST || c->slots[s].weight < 0) continue;
    const OrionWeight *w = orion_weight(c->prog, c->fn, (uint32_t)c->slots[s].weight);
    if (strcmp(w->name, const_name)) continue;
    Val *v = &c->vals[s];
    if (!is_float(v->dt)) {
      diag_error(d, (SrcSpan){0}, "weight '%s' is %s; only fp16 and fp32 weights can be set", const_name,
                 mil_dtype_name(v->dt));
      return false;
    }
    if (dtype != MIL_DT_FP16 && dtype != MIL_DT_FP32) {
      diag_error(d, (SrcSpan){0}, "weight '%s': data of type %s; give fp16 or fp32", const_name, mil_dtype_name(dtype));
      return false;
    }
    size_t es = dtype == MIL_DT_FP16 ? 2 : 4;
    if (bytes != (size_t)v->n * es) {
      diag_error(d, (SrcSpan){0}, "weight '%s' has %lld elements (%zu bytes of %s) but %zu bytes were given",
                 const_name, (long long)v->n, (size_t)v->n * es, mil_dtype_name(dtype), bytes);
      return false;
    }
    const unsigned char *p = data;
    if (v->st == ST_H16) {
      uint16_t *h = const_owned(c, s, 2);
      if (dtype == MIL_DT_FP16) memcpy(h, data, bytes);
      else
        for (int64_t i = 0; i < v->n; i++) {
          float f;
          memcpy(&f, p + 4 * i, 4);
          h[i] = fp16_from_float(f);
        }
      return true;
    }
    float *o = const_owned(c, s, 4);
    if (dtype == MIL_DT_FP16) {
      h2f(o, data, v->n);
      return true;
    }
    for (int64_t i = 0; i < v->n; i++) {
      float f;
      memcpy(&f, p + 4 * i, 4);
      o[i] = v->dt == MIL_DT_FP16 ? fp16_to_float(fp16_from_float(f)) : f;
    }
    return true;
  }
  for (uint32_t i = 0; i < orion_weight_count(c->prog, c->fn); i++) {
    const OrionWeight *w = orion_weight(c->prog, c->fn, i);
    if (!strcmp(w->name, const_name)) {
      /* its value is computed from this data at prepare; setting the result alone would be overwritten on reload */
      diag_error(d, (SrcSpan){0}, "weight '%s' is the '%s' of a %s; it can be reloaded but not set", const_name, w->attr,
                 c->f->stmts[w->stmt].op);
      return false;
    }
  }
  diag_error(d, (SrcSpan){0}, "function '%s' has no BLOBFILE weight '%s'", c->f->name, const_name);
  return false;
}

/* ---- running ---- */

static bool tensor_matches(const CpuTensor *t, const MilType *ty) {
  bool same = t->dtype == ty->dtype && t->rank == ty->rank && (t->data || !elements(ty->dims, ty->rank));
  for (uint32_t k = 0; same && k < ty->rank; k++) same = t->dims[k] == ty->dims[k];
  return same;
}

static void type_error(Diag *d, SrcSpan loc, const char *what, uint32_t i, const char *name, const MilType *ty) {
  StrBuf sb;
  sb_init(&sb);
  mil_type_print(ty, &sb);
  diag_error(d, loc, "%s %u ('%s') must be %s with data", what, i, name, sb.data);
  sb_free(&sb);
}

static void round_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  (void)tid;
  round16((float *)arg + lo, hi - lo);
}

static void output_convert(const Val *v, const CpuTensor *t) {
  size_t n = (size_t)v->n;
  switch (t->dtype) {
  case MIL_DT_FP32:
    for (size_t k = 0; k < n; k++) ((float *)t->data)[k] = (float)ld(v, (int64_t)k);
    break;
  case MIL_DT_FP16:
    if (v->st == ST_H16) memcpy(t->data, v->p, n * 2);
    else
      for (size_t k = 0; k < n; k++) ((uint16_t *)t->data)[k] = fp16_from_float((float)ld(v, (int64_t)k));
    break;
  case MIL_DT_INT32:
    for (size_t k = 0; k < n; k++) ((int32_t *)t->data)[k] = sat32(ld(v, (int64_t)k));
    break;
  default:
    for (size_t k = 0; k < n; k++) ((bool *)t->data)[k] = ld(v, (int64_t)k) != 0;
    break;
  }
}

/* check_finite: the first element of a float value that is inf or NaN, -1 if none. */
static int64_t first_nonfinite(const Val *v) {
  if (v->st != ST_F32) return -1;
  const float *p = fp(v);
  for (int64_t i = 0; i < v->n; i++)
    if (!isfinite(p[i])) return i;
  return -1;
}

static void describe_nonfinite(StrBuf *sb, const Val *v, int64_t at) {
  float e = fp(v)[at];
  sb_printf(sb, "is %s at element %lld (index [", isnan(e) ? "NaN" : e > 0 ? "inf" : "-inf", (long long)at);
  int64_t idx[MIL_MAX_RANK], rem = at;
  for (uint32_t i = v->rank; i-- > 0;) {
    idx[i] = v->dims[i] ? rem % v->dims[i] : 0;
    rem = v->dims[i] ? rem / v->dims[i] : 0;
  }
  for (uint32_t i = 0; i < v->rank; i++) sb_printf(sb, "%s%lld", i ? ", " : "", (long long)idx[i]);
  sb_printf(sb, "]), the first non-finite value of the run");
}

bool cpu_run_into(CpuProgram *c, const CpuTensor *inputs, const CpuTensor *outputs, Diag *d) {
  const MilFunc *f = c->f;
  bool ok = true;
  for (uint32_t i = 0; i < c->nin; i++) {
    const MilVar *pv = &f->params[c->in_param[i]];
    if (!tensor_matches(&inputs[i], &pv->type)) {
      type_error(d, pv->loc, "input", i, pv->name, &pv->type);
      ok = false;
    }
  }
  for (uint32_t i = 0; i < c->nout; i++) {
    const Val *v = &c->vals[c->out_slot[i]];
    MilType ty = {.kind = MIL_TYPE_TENSOR, .dtype = v->dt, .rank = v->rank};
    memcpy(ty.dims, v->dims, sizeof ty.dims);
    if (!tensor_matches(&outputs[i], &ty)) {
      type_error(d, f->loc, "output", i, orion_output(c->prog, c->fn, i)->mil_name, &ty);
      ok = false;
    }
  }
  if (!ok) return false;
  /* Point every planned value at its buffer, the inputs at the caller's data. */
  for (uint32_t s = 0; s < c->nslots; s++)
    if (c->slots[s].off >= 0) c->vals[s].p = c->arena + c->slots[s].off;
  for (uint32_t i = 0; i < c->nin; i++) {
    Val *v = &c->vals[c->in_param[i]];
    const CpuTensor *t = &inputs[i];
    if (v->dt == MIL_DT_FP32 || v->dt == MIL_DT_INT32) v->p = t->data;
    else if (v->dt == MIL_DT_FP16) h2f(v->p, t->data, v->n);
    else
      for (int64_t k = 0; k < v->n; k++) ((int32_t *)v->p)[k] = ((const bool *)t->data)[k] ? 1 : 0;
  }
  for (uint32_t i = 0; i < c->nout; i++)
    if (c->out_direct[i]) c->vals[c->out_root[i]].p = outputs[i].data;
  for (uint32_t i = 0; c->check_finite && i < c->nin; i++) {
    const MilVar *pv = &f->params[c->in_param[i]];
    int64_t at = first_nonfinite(&c->vals[c->in_param[i]]);
    if (at < 0) continue;
    StrBuf sb;
    sb_init(&sb);
    describe_nonfinite(&sb, &c->vals[c->in_param[i]], at);
    diag_error(d, pv->loc, "input '%s' %s", pv->name, sb.data);
    sb_free(&sb);
    ok = false;
  }
  Ctx x = {.c = c, .vals = c->vals, .d = d};
  for (uint32_t si = 0; ok && si < f->nstmts; si++) {
    const MilStmt *s = &f->stmts[si];
    uint8_t fk = c->fz[si].kind;
    if (!c->ops[si] || fk == FZ_ELIDED || fk == FZ_MEMBER || c->fz[si].epi) continue; /* const: prepared; others: fused */
    Val *out = &c->vals[c->base[si]];
    x.s = s;
    x.si = si;
    struct timespec t0;
    if (c->prof) clock_gettime(CLOCK_MONOTONIC, &t0);
    bool fused = fk != FZ_NONE; /* rounds what it computes */
    ok = fk == FZ_LINEAR  ? k_fused_linear(&x, &c->fz[si])
         : fk == FZ_GROUP ? k_group(&x, c->fz[si].end)
                          : c->ops[si]->fn(&x, c->ops[si]->code, out, s->nresults);
    if (ok && !fused && c->mode == CPU_NUMERICS_ANE && c->ops[si] != &view_entry)
      for (uint32_t k = 0; k < s->nresults; k++)
        if (out[k].dt == MIL_DT_FP16 && out[k].st == ST_F32) par_for(c, out[k].n, 4 * GRAIN, round_task, out[k].p);
    if (c->prof) {
      struct timespec t1;
      clock_gettime(CLOCK_MONOTONIC, &t1);
      CpuStmtTime *e = &c->prof[c->prof_of[si]];
      e->runs++;
      e->ms += (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    }
    /* A view shows its operand's elements, which were checked where they were made. */
    for (uint32_t k = 0; ok && c->check_finite && c->ops[si] != &view_entry && k < s->nresults; k++) {
      int64_t at = first_nonfinite(&out[k]);
      if (at < 0) continue;
      StrBuf sb;
      sb_init(&sb);
      describe_nonfinite(&sb, &out[k], at);
      ok = fail(&x, "result '%s' %s", s->results[k].name, sb.data);
      sb_free(&sb);
    }
  }
  for (uint32_t i = 0; ok && i < c->nout; i++)
    if (!c->out_direct[i]) output_convert(&c->vals[c->out_slot[i]], &outputs[i]);
  return ok;
}

bool cpu_run(CpuProgram *c, const CpuTensor *inputs, CpuTensor *outputs, Diag *d) {
  for (uint32_t i = 0; i < c->nout; i++) {
    const Val *v = &c->vals[c->out_slot[i]];
    outputs[i] = (CpuTensor){.dtype = v->dt, .rank = v->rank};
    memcpy(outputs[i].dims, v->dims, sizeof outputs[i].dims);
    outputs[i].data = alloc_elems(v->n, cpu_dtype_size(v->dt));
  }
  if (cpu_run_into(c, inputs, outputs, d)) return true;
  for (uint32_t i = 0; i < c->nout; i++) cpu_tensor_free(&outputs[i]);
  return false;
}

void cpu_tensor_free(CpuTensor *t) {
  if (!t) return;
  free(t->data);
  memset(t, 0, sizeof *t);
}
