/*
 * More shape ops: expand_dims, squeeze, tile, pad, shape, range_1d (the
 * rest are in k_shape.c, whose comment says how their arguments are
 * bound). tile's reps, pad's pad and range_1d's start, end and step may be
 * run-time values.
 */
#include "cpu_internal.h"

#include <math.h>

static uint32_t *u32(const Val *v) { return v->p; }

/* A copy of the n bytes at p. */
static void *dup_job(const void *p, size_t n) { return memcpy(xmalloc(n), p, n); }

/* The one operand x of ops that need nothing else bound. */
typedef struct OneJob {
  const Val *a;
} OneJob;

/* Copies n elements from a (from element ai) to out (from oi); the plan
 * gives these ops no fp16 weight (ST_H16 only feeds linear and conv). */
bool copy_from(Ctx *x, const Val *a) {
  if (a->st == ST_H16) return op_fail(x, "fp16 weights are not copied in place"); /* the plan prevents this */
  if (a->st == ST_STR) return op_fail(x, "argument 'x' must be a tensor");
  return true;
}

/* expand_dims(x, axes): size-1 dims inserted at the sorted positions axes
 * name in the result (negative ones count from the result's end). */
bool bind_expand_dims(Ctx *x, int code, Val *out, uint32_t nout, void **bound) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, MIL_ARG_EXPAND_DIMS_x, &ok);
  int64_t axes[MIL_MAX_RANK];
  uint32_t n;
  bool given = ints_arg(x, MIL_ARG_EXPAND_DIMS_axes, axes, MIL_MAX_RANK, &n, &ok);
  if (!ok) return false;
  if (!given || n == 0) return op_fail(x, "missing argument '%s'", mil_arg_name(MIL_ARG_EXPAND_DIMS_axes));
  if (!copy_from(x, a)) return false;
  uint32_t rank = a->rank + n;
  if (rank > MIL_MAX_RANK) return op_fail(x, "the result has too many dimensions");
  bool ins[MIL_MAX_RANK] = {false};
  for (uint32_t i = 0; i < n; i++) {
    uint32_t p = 0;
    if (!norm_axis(x, axes[i], rank, &p)) return false;
    if (ins[p]) return op_fail(x, "axis %lld is listed twice", (long long)axes[i]);
    ins[p] = true;
  }
  int64_t dims[MIL_MAX_RANK];
  for (uint32_t i = 0, k = 0; i < rank; i++) dims[i] = ins[i] ? 1 : a->dims[k++];
  if (!expect_shape(x, out, dims, rank) || !same_class(x, a, out)) return false;
  OneJob j = {a};
  *bound = dup_job(&j, sizeof j);
  return true;
}

/* expand_dims and squeeze: the elements as they are. */
bool k_copy_elements(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  const Val *a = ((const OneJob *)x->c->bound[x->si])->a;
  memcpy(out->p, a->p, (size_t)a->n * 4);
  return true;
}

/* squeeze(x, axes?): removes the listed size-1 dims (a listed dim of
 * another size stays, as coremltools does); without axes, every size-1 dim. */
bool bind_squeeze(Ctx *x, int code, Val *out, uint32_t nout, void **bound) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, MIL_ARG_SQUEEZE_x, &ok);
  int64_t axes[MIL_MAX_RANK];
  uint32_t n;
  bool given = ints_arg(x, MIL_ARG_SQUEEZE_axes, axes, MIL_MAX_RANK, &n, &ok);
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
  OneJob j = {a};
  *bound = dup_job(&j, sizeof j);
  return true;
}

/* tile(x, reps): the result's element at index i is x's at i mod x.shape.
 * reps may be a run-time value. */
typedef struct TileJob {
  const Val *a, *reps;
  bool ready;
  int64_t dims[MIL_MAX_RANK], ist[MIL_MAX_RANK];
} TileJob;

static bool tile_geometry(Ctx *x, TileJob *j, const Val *out) {
  bool ok = true;
  const Val *a = j->a;
  int64_t reps[MIL_MAX_RANK];
  uint32_t n;
  ints_of(x, MIL_ARG_TILE_reps, j->reps, reps, MIL_MAX_RANK, &n, &ok);
  if (!ok) return false;
  if (n != a->rank) return op_fail(x, "reps has %u entries for rank %u", n, a->rank);
  for (uint32_t i = 0; i < n; i++) {
    if (reps[i] < 1 || reps[i] > INT32_MAX) return op_fail(x, "reps entries must be positive (entry %u is %lld)", i, (long long)reps[i]);
    j->dims[i] = a->dims[i] * reps[i];
  }
  if (!expect_shape(x, out, j->dims, n) || !same_class(x, a, out)) return false;
  strides_of(a->dims, n, j->ist);
  return true;
}

bool bind_tile(Ctx *x, int code, Val *out, uint32_t nout, void **bound) {
  (void)code, (void)nout;
  bool ok = true;
  TileJob j = {.a = req_arg(x, MIL_ARG_TILE_x, &ok)};
  j.reps = opt_arg(x, MIL_ARG_TILE_reps, &ok);
  if (!ok) return false;
  if (!j.reps) return op_fail(x, "missing argument '%s'", mil_arg_name(MIL_ARG_TILE_reps));
  if (!copy_from(x, j.a)) return false;
  bool consts = true;
  j.reps = const_or_run(x, j.reps, &consts);
  if (consts && !(j.ready = tile_geometry(x, &j, out))) return false;
  *bound = dup_job(&j, sizeof j);
  return true;
}

bool k_tile(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  const TileJob *j = x->c->bound[x->si];
  TileJob run;
  if (!j->ready) {
    run = *j;
    if (!tile_geometry(x, &run, out)) return false;
    j = &run;
  }
  const Val *a = j->a;
  const uint32_t *in = u32(a);
  uint32_t *o = u32(out);
  for (int64_t i = 0; i < out->n; i++) {
    int64_t rem = i, off = 0;
    for (uint32_t d = a->rank; d-- > 0;) {
      off += (rem % j->dims[d]) % a->dims[d] * j->ist[d];
      rem /= j->dims[d];
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
 * after the i-th of the last len(pad)/2 dims. pad may be a run-time value. */
typedef struct PadJob {
  const Val *a, *pad;
  int mode;
  double cval;
  bool ready;
  int64_t before[MIL_MAX_RANK], dims[MIL_MAX_RANK];
} PadJob;

static bool pad_geometry(Ctx *x, PadJob *j, const Val *out) {
  bool ok = true;
  const Val *a = j->a;
  int64_t pads[2 * MIL_MAX_RANK];
  uint32_t n;
  ints_of(x, MIL_ARG_PAD_pad, j->pad, pads, 2 * MIL_MAX_RANK, &n, &ok);
  if (!ok) return false;
  if (n % 2 || n / 2 > a->rank) return op_fail(x, "pad needs an even number of entries, at most %u", 2 * a->rank);
  uint32_t first = a->rank - n / 2;
  for (uint32_t i = 0; i < a->rank; i++) {
    j->dims[i] = a->dims[i];
    j->before[i] = 0;
    if (i < first) continue;
    int64_t b = pads[2 * (i - first)], e = pads[2 * (i - first) + 1];
    if (b < 0 || e < 0 || b > INT32_MAX || e > INT32_MAX) return op_fail(x, "pad entries must not be negative");
    if (j->mode == PAD_REFLECT && (b >= a->dims[i] || e >= a->dims[i]))
      return op_fail(x, "reflect padding of dimension %u needs pads below its size %lld", i, (long long)a->dims[i]);
    if (j->mode == PAD_REPLICATE && a->dims[i] == 0 && b + e > 0)
      return op_fail(x, "replicate padding of the empty dimension %u", i);
    j->before[i] = b;
    j->dims[i] += b + e;
  }
  return expect_shape(x, out, j->dims, a->rank) && same_class(x, a, out);
}

bool bind_pad(Ctx *x, int code, Val *out, uint32_t nout, void **bound) {
  (void)code, (void)nout;
  bool ok = true;
  PadJob j = {.a = req_arg(x, MIL_ARG_PAD_x, &ok)};
  j.pad = opt_arg(x, MIL_ARG_PAD_pad, &ok);
  const char *ms = string_arg(x, MIL_ARG_PAD_mode, "constant", &ok);
  j.cval = scalar_arg(x, MIL_ARG_PAD_constant_val, 0, &ok);
  if (!ok) return false;
  if (!j.pad) return op_fail(x, "missing argument '%s'", mil_arg_name(MIL_ARG_PAD_pad));
  if (!copy_from(x, j.a)) return false;
  j.mode = !strcmp(ms, "constant") ? PAD_CONSTANT : !strcmp(ms, "reflect") ? PAD_REFLECT
           : !strcmp(ms, "replicate") ? PAD_REPLICATE : -1;
  if (j.mode < 0) return op_fail(x, "unknown mode '%s' (constant, reflect or replicate)", ms);
  bool consts = true;
  j.pad = const_or_run(x, j.pad, &consts);
  if (consts && !(j.ready = pad_geometry(x, &j, out))) return false;
  *bound = dup_job(&j, sizeof j);
  return true;
}

bool k_pad(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  const PadJob *j = x->c->bound[x->si];
  PadJob run;
  if (!j->ready) {
    run = *j;
    if (!pad_geometry(x, &run, out)) return false;
    j = &run;
  }
  const Val *a = j->a;
  int64_t ist[MIL_MAX_RANK];
  strides_of(a->dims, a->rank, ist);
  for (int64_t i = 0; i < out->n; i++) {
    int64_t rem = i, off = 0;
    bool inside = true;
    for (uint32_t d = a->rank; d-- > 0;) {
      int64_t s = pad_source(j->mode, rem % j->dims[d] - j->before[d], a->dims[d]);
      rem /= j->dims[d];
      if (s < 0) inside = false;
      else off += s * ist[d];
    }
    if (inside) u32(out)[i] = u32(a)[off];
    else st(out, i, j->cval);
  }
  return true;
}

/* shape(x): x's dims as an int32 vector. */
bool bind_shape(Ctx *x, int code, Val *out, uint32_t nout, void **bound) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, MIL_ARG_SHAPE_x, &ok);
  if (!ok) return false;
  if (a->st == ST_STR) return op_fail(x, "argument 'x' must be a tensor");
  if (out->dt != MIL_DT_INT32) return op_fail(x, "returns int32, but the result is declared %s", mil_dtype_name(out->dt));
  int64_t dims[1] = {a->rank};
  if (!expect_shape(x, out, dims, 1)) return false;
  OneJob j = {a};
  *bound = dup_job(&j, sizeof j);
  return true;
}

bool k_shape(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  const Val *a = ((const OneJob *)x->c->bound[x->si])->a;
  for (uint32_t i = 0; i < a->rank; i++) st(out, i, (double)a->dims[i]);
  return true;
}

/* range_1d(end, start, step): start, start + step, ... up to end
 * (excluded), ceil((end - start) / step) elements as NumPy's arange. The
 * declared length must match, as the shape is fixed at prepare; start, end
 * and step may be run-time values. */
typedef struct RangeJob {
  const Val *start, *end, *step;
  bool ready;
  double s0, sp;
  int64_t len;
} RangeJob;

/* The scalar v (argument `name`). */
static double scalar_of(Ctx *x, MilArgId id, const Val *v, bool *ok) {
  if (v->st == ST_STR || v->n != 1) {
    *ok = op_fail(x, "argument '%s' must be a scalar", mil_arg_name(id));
    return 0;
  }
  return ld(v, 0);
}

static bool range_geometry(Ctx *x, RangeJob *j, const Val *out) {
  bool ok = true;
  double s0 = scalar_of(x, MIL_ARG_RANGE_1D_start, j->start, &ok), e = scalar_of(x, MIL_ARG_RANGE_1D_end, j->end, &ok),
         sp = scalar_of(x, MIL_ARG_RANGE_1D_step, j->step, &ok);
  if (!ok) return false;
  if (!(sp != 0) || !isfinite(s0) || !isfinite(e) || !isfinite(sp))
    return op_fail(x, "start, end and step must be finite and step not 0");
  double cnt = ceil((e - s0) / sp);
  j->len = cnt > 0 ? to_index(cnt) : 0;
  j->s0 = s0, j->sp = sp;
  int64_t dims[1] = {j->len};
  return expect_shape(x, out, dims, 1);
}

bool bind_range(Ctx *x, int code, Val *out, uint32_t nout, void **bound) {
  (void)code, (void)nout;
  bool ok = true;
  if (!find_arg(x, MIL_ARG_RANGE_1D_start) || !find_arg(x, MIL_ARG_RANGE_1D_end) || !find_arg(x, MIL_ARG_RANGE_1D_step))
    return op_fail(x, "needs start, end and step");
  RangeJob j = {.start = opt_arg(x, MIL_ARG_RANGE_1D_start, &ok),
                .end = opt_arg(x, MIL_ARG_RANGE_1D_end, &ok),
                .step = opt_arg(x, MIL_ARG_RANGE_1D_step, &ok)};
  if (!ok) return false;
  bool consts = true;
  j.start = const_or_run(x, j.start, &consts);
  j.end = const_or_run(x, j.end, &consts);
  j.step = const_or_run(x, j.step, &consts);
  if (consts && !(j.ready = range_geometry(x, &j, out))) return false;
  *bound = dup_job(&j, sizeof j);
  return true;
}

bool k_range(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  const RangeJob *j = x->c->bound[x->si];
  RangeJob run;
  if (!j->ready) {
    run = *j;
    if (!range_geometry(x, &run, out)) return false;
    j = &run;
  }
  for (int64_t i = 0; i < j->len; i++) st(out, i, j->s0 + (double)i * j->sp);
  return true;
}

