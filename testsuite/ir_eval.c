/*
 * The reference evaluator of the graph IR (see ir_eval.h).
 *
 * One function per op (family), each a direct transcription of the op's
 * definition in docs/language.md section 9, with loops over multi-indices.
 * Every op computes its own result shape; eval_op compares it with the
 * inferred type in the IR.
 */
#include "ir_eval.h"
#include "ir_eval_loss.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "orion/fp16.h"
#include "orion/op_semantics.h"
#include "orion/frontend.h"
#include "orion/passes.h"
#include "orion/weights.h"

#define MAX_RESULTS IR_MAX_OPERANDS

/* ---- tensors and indices ---- */

static int64_t count_of(const IrType *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) n *= t->dims[i];
  return n;
}

static EvalTensor tensor_new(const IrType *t) {
  EvalTensor r = {.type = *t};
  r.data = xcalloc((size_t)count_of(t), sizeof *r.data);
  return r;
}

static EvalTensor tensor_dup(const EvalTensor *t) {
  EvalTensor r = tensor_new(&t->type);
  memcpy(r.data, t->data, sizeof *r.data * (size_t)count_of(&t->type));
  return r;
}

void eval_tensor_free(EvalTensor *t) {
  if (!t) return;
  free(t->data);
  t->data = NULL;
}

void eval_tensors_free(EvalTensor *ts, uint32_t n) {
  if (!ts) return;
  for (uint32_t i = 0; i < n; i++) eval_tensor_free(&ts[i]);
  free(ts);
}

/* Row-major flat offset of a multi-index. */
static int64_t offset_of(const IrType *t, const int64_t *idx) {
  int64_t off = 0;
  for (int i = 0; i < t->rank; i++) off = off * t->dims[i] + idx[i];
  return off;
}

/* Steps idx (all zeros at the start) to the next multi-index of t in
 * row-major order; false after the last one. A scalar has one index. */
static bool next_index(int64_t *idx, const IrType *t) {
  for (int i = t->rank - 1; i >= 0; i--) {
    if (++idx[i] < t->dims[i]) return true;
    idx[i] = 0;
  }
  return false;
}

/* Offset into `in` of the element that NumPy broadcasting maps to index
 * `idx` of `out`: dims aligned at the right, size-1 dims stay at 0. */
static int64_t offset_bcast(const IrType *in, const IrType *out, const int64_t *idx) {
  int64_t off = 0;
  int shift = out->rank - in->rank;
  for (int i = 0; i < in->rank; i++) off = off * in->dims[i] + (in->dims[i] == 1 ? 0 : idx[i + shift]);
  return off;
}

/* NumPy's broadcast shape of a and b (dtype left as is); false if none. */
static bool bcast_shape(const IrType *a, const IrType *b, IrType *out) {
  int r = a->rank > b->rank ? a->rank : b->rank;
  out->rank = (uint8_t)r;
  for (int i = 0; i < r; i++) {
    int ia = i - (r - a->rank), ib = i - (r - b->rank);
    int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
    if (da != db && da != 1 && db != 1) return false;
    out->dims[i] = da == 1 ? db : da;
  }
  return true;
}

static void type_text(const IrType *t, char *buf, size_t n) {
  StrBuf sb;
  sb_init(&sb);
  ir_type_print(&sb, t);
  snprintf(buf, n, "%s", sb.data ? sb.data : "");
  sb_free(&sb);
}

/* ---- evaluation state and errors ---- */

typedef struct Ev {
  IrModule *m;
  char *err;
  size_t errlen;
  bool failed;
  IrOpId op;        /* op being evaluated (for messages), 0 outside ops */
  const char *func; /* function being evaluated */
} Ev;

static bool fail(Ev *e, const char *fmt, ...) ORION_PRINTF(2, 3);
static bool fail(Ev *e, const char *fmt, ...) {
  if (e->failed) return false; /* keep the first message */
  e->failed = true;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (!e->err || !e->errlen) return false;
  if (!ir_id_is_none(e->op)) {
    IrOp *o = ir_op(e->m, e->op);
    const char *opname = o->kind == OP_CALL ? "call" : ir_op_info(o->kind)->name;
    const char *res = o->nresults ? ir_value(e->m, o->results[0])->name : "?";
    snprintf(e->err, e->errlen, "in '%s', '%s' (result '%s'): %s", e->func, opname, res, msg);
  } else {
    snprintf(e->err, e->errlen, "in '%s': %s", e->func ? e->func : "?", msg);
  }
  return false;
}

/* Attribute shorthands for the current op. */
static int64_t attr_int(Ev *e, const char *name, int64_t dflt) { return ir_attr_int(e->m, e->op, name, dflt); }
static double attr_float(Ev *e, const char *name, double dflt) { return ir_attr_float(e->m, e->op, name, dflt); }
static bool attr_bool(Ev *e, const char *name, bool dflt) { return ir_attr_bool(e->m, e->op, name, dflt); }
static const char *attr_str(Ev *e, const char *name, const char *dflt) { return ir_attr_str(e->m, e->op, name, dflt); }
/* A list attribute; -1 if absent. At most max entries are read. */
static int attr_ints(Ev *e, const char *name, int64_t *out, int max) {
  int n = ir_attr_ints(e->m, e->op, name, out, max);
  return n > max ? max : n;
}

/* Normalizes an axis against a rank (negative counts from the end). */
static bool norm_axis(Ev *e, int64_t axis, int rank, int *out) {
  *out = 0;
  if (axis < -rank || axis >= rank) return fail(e, "axis %lld out of range for rank %d", (long long)axis, rank);
  *out = (int)(axis < 0 ? axis + rank : axis);
  return true;
}

/* ---- elementwise ops ---- */

/* Each element-wise op's scalar function is orion/op_semantics.h's, the
 * folder's and the CPU backend's. */
static double binary_value(IrOpKind k, double a, double b) {
  switch (k) {
  case OP_ADD: return a + b;
  case OP_SUB: return a - b;
  case OP_MUL: return a * b;
  case OP_DIV: return a / b;
  case OP_POW: return op_sem_pow(a, b);
  case OP_MAXIMUM: return op_sem_maximum(a, b);
  case OP_MINIMUM: return op_sem_minimum(a, b);
  default: ice("binary_value: op %d", (int)k);
  }
}

/* add sub mul div pow maximum minimum: NumPy broadcasting. */
static bool op_binary(Ev *e, IrOpKind k, const EvalTensor *in, EvalTensor *out) {
  IrType t = {.dtype = in[0].type.dtype};
  if (!bcast_shape(&in[0].type, &in[1].type, &t)) return fail(e, "operands do not broadcast");
  *out = tensor_new(&t);
  int64_t idx[IR_MAX_RANK] = {0};
  int64_t i = 0;
  do {
    double a = in[0].data[offset_bcast(&in[0].type, &t, idx)];
    double b = in[1].data[offset_bcast(&in[1].type, &t, idx)];
    out->data[i++] = binary_value(k, a, b);
  } while (next_index(idx, &t));
  return true;
}

/* A float attribute as the emitted program holds it: a const of x's dtype. */
static double attr_as(Ev *e, const char *name, double dflt, IrDType dt) {
  double v = attr_float(e, name, dflt);
  if (dt == DT_FP16) return (double)fp16_to_float(fp16_from_double(v));
  if (dt == DT_FP32) return (double)(float)v;
  return v;
}

static bool op_unary(Ev *e, IrOpKind k, const EvalTensor *x, EvalTensor *out) {
  *out = tensor_new(&x->type);
  double eps = 0;
  bool tanh_mode = false;
  if (k == OP_LOG || k == OP_RSQRT) eps = attr_as(e, "epsilon", 0.0, x->type.dtype);
  if (k == OP_GELU) {
    const char *mode = attr_str(e, "mode", "exact");
    if (!strcmp(mode, "tanh")) tanh_mode = true;
    else if (strcmp(mode, "exact")) return fail(e, "unknown gelu mode '%s'", mode);
  }
  for (int64_t i = 0; i < count_of(&x->type); i++) {
    double v = x->data[i], y;
    switch (k) {
    case OP_RELU: y = op_sem_relu(v); break;
    case OP_TANH: y = op_sem_tanh(v); break;
    case OP_SIGMOID: y = op_sem_sigmoid(v); break;
    case OP_SILU: y = op_sem_silu(v); break;
    case OP_GELU: y = tanh_mode ? op_sem_gelu_tanh(v) : op_sem_gelu_exact(v); break;
    case OP_EXP: y = op_sem_exp(v); break;
    case OP_LOG: y = op_sem_log(v, eps); break;
    case OP_SQRT: y = sqrt(v); break;
    case OP_RSQRT: y = op_sem_rsqrt(v, eps); break;
    case OP_NEG: y = -v; break;
    case OP_ABS: y = fabs(v); break;
    case OP_IDENTITY: y = v; break;
    default: ice("op_unary: op %d", (int)k);
    }
    out->data[i] = y;
  }
  return true;
}

static bool op_clip(Ev *e, const EvalTensor *x, EvalTensor *out) {
  double lo = attr_as(e, "min", 0, x->type.dtype), hi = attr_as(e, "max", 0, x->type.dtype);
  *out = tensor_new(&x->type);
  for (int64_t i = 0; i < count_of(&x->type); i++) out->data[i] = op_sem_clip(x->data[i], lo, hi);
  return true;
}

/* select(cond, a, b): cond ? a : b, all three broadcast together. */
static bool op_select(Ev *e, const EvalTensor *in, EvalTensor *out) {
  IrType ab = {0}, t = {0};
  if (!bcast_shape(&in[1].type, &in[2].type, &ab) || !bcast_shape(&in[0].type, &ab, &t))
    return fail(e, "operands do not broadcast");
  t.dtype = in[1].type.dtype;
  *out = tensor_new(&t);
  int64_t idx[IR_MAX_RANK] = {0};
  int64_t i = 0;
  do {
    bool c = in[0].data[offset_bcast(&in[0].type, &t, idx)] != 0;
    const EvalTensor *src = c ? &in[1] : &in[2];
    out->data[i++] = src->data[offset_bcast(&src->type, &t, idx)];
  } while (next_index(idx, &t));
  return true;
}

/* Range of whole numbers a dtype holds; false for float dtypes. */
static bool int_range(IrDType t, double *lo, double *hi) {
  switch (t) {
  case DT_INT32: *lo = -2147483648.0; *hi = 2147483647.0; return true;
  case DT_INT8: *lo = -128; *hi = 127; return true;
  case DT_UINT8: *lo = 0; *hi = 255; return true;
  case DT_BOOL: *lo = 0; *hi = 1; return true;
  default: return false;
  }
}

/* cast, NumPy astype semantics: float -> integer truncates toward zero (NaN
 * or out of range is an error); -> bool is != 0; -> fp16/fp32 rounds to the
 * dtype (nearest even), the one place the evaluator rounds: converting is
 * what the op is for. */
static bool op_cast(Ev *e, const EvalTensor *x, EvalTensor *out) {
  const char *name = attr_str(e, "dtype", "");
  IrDType to = ir_dtype_from_name(name);
  if (to == DT_INVALID) return fail(e, "unknown dtype '%s'", name);
  IrType t = x->type;
  t.dtype = to;
  *out = tensor_new(&t);
  for (int64_t i = 0; i < count_of(&t); i++) {
    double v = x->data[i], lo, hi;
    if (to == DT_BOOL) {
      out->data[i] = v != 0 ? 1.0 : 0.0;
    } else if (int_range(to, &lo, &hi)) {
      if (isnan(v)) return fail(e, "cast of NaN to %s (element %lld)", name, (long long)i);
      double tv = trunc(v);
      if (tv < lo || tv > hi)
        return fail(e, "cast of %g to %s is out of range (element %lld)", v, name, (long long)i);
      out->data[i] = tv + 0.0; /* +0.0 turns -0 into 0 */
    } else if (to == DT_FP16) {
      out->data[i] = (double)fp16_to_float(fp16_from_double(v));
    } else if (to == DT_FP32) {
      out->data[i] = (double)(float)v;
    } else {
      return fail(e, "cast to %s", name);
    }
  }
  return true;
}

/* ---- reductions and normalizations ---- */

/* Which axes of rank-r x an "axes" list names; `dflt_last` picks the last
 * axis when the attribute is absent (norms), else every axis (reductions). */
static bool axes_mask(Ev *e, int r, bool dflt_last, bool *mask, int *order, int *norder) {
  int64_t axes[IR_MAX_RANK];
  int n = attr_ints(e, "axes", axes, IR_MAX_RANK);
  for (int i = 0; i < IR_MAX_RANK; i++) mask[i] = false;
  *norder = 0;
  if (n < 0) {
    if (dflt_last) {
      mask[r - 1] = true;
      order[(*norder)++] = r - 1;
    } else {
      for (int i = 0; i < r; i++) {
        mask[i] = true;
        order[(*norder)++] = i;
      }
    }
    return true;
  }
  if (n == 0) return fail(e, "empty 'axes'");
  for (int i = 0; i < n; i++) {
    int a;
    if (!norm_axis(e, axes[i], r, &a)) return false;
    if (mask[a]) return fail(e, "axis %d listed twice", a);
    mask[a] = true;
    order[(*norder)++] = a;
  }
  return true;
}

static bool op_reduce(Ev *e, IrOpKind k, const EvalTensor *x, EvalTensor *out) {
  const IrType *xt = &x->type;
  bool mask[IR_MAX_RANK];
  int order[IR_MAX_RANK], norder;
  if (!axes_mask(e, xt->rank, false, mask, order, &norder)) return false;
  bool keep = attr_bool(e, "keep_dims", false);
  /* kept: x's shape with reduced dims set to 1 (the accumulator layout) */
  IrType kept = *xt, t = {.dtype = xt->dtype};
  int64_t nreduced = 1;
  for (int i = 0; i < xt->rank; i++) {
    if (mask[i]) {
      kept.dims[i] = 1;
      nreduced *= xt->dims[i];
      if (keep) t.dims[t.rank++] = 1;
    } else {
      t.dims[t.rank++] = xt->dims[i];
    }
  }
  *out = tensor_new(&t); /* same element order as `kept` */
  int64_t nout = count_of(&t);
  for (int64_t i = 0; i < nout; i++) out->data[i] = k == OP_REDUCE_MAX ? -HUGE_VAL : 0.0;
  int64_t idx[IR_MAX_RANK] = {0};
  int64_t i = 0;
  do {
    double v = x->data[i++];
    double *acc = &out->data[offset_bcast(&kept, xt, idx)];
    if (k == OP_REDUCE_MAX) {
      *acc = op_sem_maximum(*acc, v);
    } else {
      *acc += v;
    }
  } while (next_index(idx, xt));
  if (k == OP_REDUCE_MEAN)
    for (int64_t j = 0; j < nout; j++) {
      out->data[j] /= (double)nreduced;
      if (xt->dtype == DT_INT32) out->data[j] = trunc(out->data[j]) + 0.0; /* integer mean: toward zero */
    }
  return true;
}

static bool op_softmax(Ev *e, const EvalTensor *x, EvalTensor *out) {
  const IrType *t = &x->type;
  int axis;
  if (!norm_axis(e, attr_int(e, "axis", -1), t->rank, &axis)) return false;
  int64_t outer = 1, n = t->dims[axis], inner = 1;
  for (int i = 0; i < axis; i++) outer *= t->dims[i];
  for (int i = axis + 1; i < t->rank; i++) inner *= t->dims[i];
  *out = tensor_new(t);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      const double *xs = x->data + o * n * inner + in;
      double *ys = out->data + o * n * inner + in;
      double mx = -HUGE_VAL, sum = 0;
      for (int64_t j = 0; j < n; j++) mx = xs[j * inner] > mx ? xs[j * inner] : mx;
      for (int64_t j = 0; j < n; j++) sum += exp(xs[j * inner] - mx);
      for (int64_t j = 0; j < n; j++) ys[j * inner] = exp(xs[j * inner] - mx) / sum;
    }
  return true;
}

/* layer_norm(x, gamma?, beta?) and rms_norm(x, gamma?) over `axes`
 * (default [-1]); gamma and beta are indexed by the normalized dims in the
 * order `axes` lists them. */
static bool op_norm(Ev *e, IrOpKind k, const EvalTensor *in, uint32_t nin, EvalTensor *out) {
  const EvalTensor *x = &in[0], *gamma = nin > 1 ? &in[1] : NULL, *beta = nin > 2 ? &in[2] : NULL;
  const IrType *xt = &x->type;
  if (xt->rank == 0) return fail(e, "operand is a scalar");
  bool mask[IR_MAX_RANK];
  int order[IR_MAX_RANK], norder;
  if (!axes_mask(e, xt->rank, true, mask, order, &norder)) return false;
  double eps = attr_float(e, "epsilon", 1e-5);
  /* outer: x with normalized dims set to 1; inner: x with the others set to 1. */
  IrType outer = *xt, inner = *xt;
  for (int i = 0; i < xt->rank; i++) {
    if (mask[i]) outer.dims[i] = 1;
    else inner.dims[i] = 1;
  }
  IrType gt = {.dtype = xt->dtype, .rank = (uint8_t)norder};
  for (int j = 0; j < norder; j++) gt.dims[j] = xt->dims[order[j]];
  for (uint32_t i = 1; i < nin; i++)
    if (!ir_type_equal(&in[i].type, &gt)) return fail(e, "gamma/beta do not have the normalized shape");
  double count = (double)count_of(&inner);
  *out = tensor_new(xt);
  int64_t o[IR_MAX_RANK] = {0};
  do {
    int64_t n[IR_MAX_RANK] = {0}, full[IR_MAX_RANK];
    double mean = 0, var = 0, ms = 0;
    do {
      for (int i = 0; i < xt->rank; i++) full[i] = o[i] + n[i];
      double v = x->data[offset_of(xt, full)];
      mean += v;
      ms += v * v;
    } while (next_index(n, &inner));
    mean /= count;
    ms /= count;
    do {
      for (int i = 0; i < xt->rank; i++) full[i] = o[i] + n[i];
      double d = x->data[offset_of(xt, full)] - mean;
      var += d * d;
    } while (next_index(n, &inner));
    var /= count; /* biased */
    do {
      for (int i = 0; i < xt->rank; i++) full[i] = o[i] + n[i];
      int64_t g = 0; /* index into gamma/beta: normalized dims in `axes` order */
      for (int j = 0; j < norder; j++) g = g * xt->dims[order[j]] + full[order[j]];
      double v = x->data[offset_of(xt, full)], y;
      if (k == OP_LAYER_NORM) {
        y = (v - mean) / sqrt(var + eps);
        if (gamma) y *= gamma->data[g];
        if (beta) y += beta->data[g];
      } else {
        y = v / sqrt(ms + eps);
        if (gamma) y *= gamma->data[g];
      }
      out->data[offset_of(xt, full)] = y;
    } while (next_index(n, &inner));
  } while (next_index(o, &outer));
  return true;
}

/* ---- shape ops ---- */

static bool op_reshape(Ev *e, const EvalTensor *x, EvalTensor *out) {
  int64_t shape[IR_MAX_RANK + 1];
  int n = ir_attr_ints(e->m, e->op, "shape", shape, IR_MAX_RANK + 1);
  if (n < 0 || n > IR_MAX_RANK) return fail(e, "bad 'shape'");
  IrType t = {.dtype = x->type.dtype, .rank = (uint8_t)n};
  int infer_at = -1;
  int64_t known = 1;
  for (int i = 0; i < n; i++) {
    if (shape[i] == -1) {
      infer_at = i;
      continue;
    }
    t.dims[i] = shape[i] == 0 ? x->type.dims[i] : shape[i]; /* 0 copies x's size at i */
    known *= t.dims[i];
  }
  if (infer_at >= 0) t.dims[infer_at] = count_of(&x->type) / known;
  if (count_of(&t) != count_of(&x->type)) return fail(e, "element counts differ");
  *out = tensor_new(&t);
  memcpy(out->data, x->data, sizeof *out->data * (size_t)count_of(&t));
  return true;
}

static bool op_transpose(Ev *e, const EvalTensor *x, EvalTensor *out) {
  int64_t perm[IR_MAX_RANK];
  int n = attr_ints(e, "perm", perm, IR_MAX_RANK);
  if (n != x->type.rank) return fail(e, "'perm' does not match the rank");
  int p[IR_MAX_RANK];
  IrType t = {.dtype = x->type.dtype, .rank = x->type.rank};
  for (int i = 0; i < n; i++) {
    if (!norm_axis(e, perm[i], n, &p[i])) return false;
    t.dims[i] = x->type.dims[p[i]];
  }
  *out = tensor_new(&t);
  int64_t idx[IR_MAX_RANK] = {0}, src[IR_MAX_RANK];
  int64_t i = 0;
  do {
    for (int d = 0; d < n; d++) src[p[d]] = idx[d]; /* result dim d is x's dim perm[d] */
    out->data[i++] = x->data[offset_of(&x->type, src)];
  } while (next_index(idx, &t));
  return true;
}

/* slice: x[begin:end:stride] per dimension, Python semantics, stride > 0. */
static bool op_slice(Ev *e, const EvalTensor *x, EvalTensor *out) {
  const IrType *xt = &x->type;
  int64_t begin[IR_MAX_RANK], end[IR_MAX_RANK], stride[IR_MAX_RANK] = {1, 1, 1, 1, 1};
  if (attr_ints(e, "begin", begin, IR_MAX_RANK) != xt->rank || attr_ints(e, "end", end, IR_MAX_RANK) != xt->rank)
    return fail(e, "'begin'/'end' do not match the rank");
  attr_ints(e, "stride", stride, IR_MAX_RANK);
  IrType t = *xt;
  int64_t b[IR_MAX_RANK];
  for (int i = 0; i < xt->rank; i++) {
    int64_t n = xt->dims[i], s = stride[i];
    if (s <= 0) return fail(e, "stride %lld is not positive", (long long)s);
    int64_t lo = begin[i] < 0 ? begin[i] + n : begin[i], hi = end[i] < 0 ? end[i] + n : end[i];
    lo = lo < 0 ? 0 : lo > n ? n : lo;
    hi = hi < 0 ? 0 : hi > n ? n : hi;
    if (hi <= lo) return fail(e, "empty slice of dimension %d", i);
    b[i] = lo;
    t.dims[i] = (hi - lo + s - 1) / s; /* ceil((hi - lo) / s) */
  }
  *out = tensor_new(&t);
  int64_t idx[IR_MAX_RANK] = {0}, src[IR_MAX_RANK];
  int64_t i = 0;
  do {
    for (int d = 0; d < xt->rank; d++) src[d] = b[d] + idx[d] * stride[d];
    out->data[i++] = x->data[offset_of(xt, src)];
  } while (next_index(idx, &t));
  return true;
}

static bool op_split(Ev *e, const EvalTensor *x, EvalTensor *outs, uint32_t nres) {
  const IrType *xt = &x->type;
  int axis;
  if (!norm_axis(e, attr_int(e, "axis", 0), xt->rank, &axis)) return false;
  int64_t sizes[MAX_RESULTS];
  int ns = attr_ints(e, "split_sizes", sizes, MAX_RESULTS);
  if (ns < 0) {
    int64_t n = attr_int(e, "num_splits", 0);
    if (n <= 0 || n > MAX_RESULTS || xt->dims[axis] % n) return fail(e, "bad 'num_splits'");
    ns = (int)n;
    for (int i = 0; i < ns; i++) sizes[i] = xt->dims[axis] / n;
  }
  if ((uint32_t)ns != nres) return fail(e, "%d parts but %u results", ns, nres);
  int64_t start = 0;
  for (int p = 0; p < ns; p++) {
    IrType t = *xt;
    t.dims[axis] = sizes[p];
    outs[p] = tensor_new(&t);
    int64_t idx[IR_MAX_RANK] = {0}, src[IR_MAX_RANK];
    int64_t i = 0;
    do {
      memcpy(src, idx, sizeof src);
      src[axis] += start;
      outs[p].data[i++] = x->data[offset_of(xt, src)];
    } while (next_index(idx, &t));
    start += sizes[p];
  }
  if (start != xt->dims[axis]) return fail(e, "'split_sizes' do not add up to the axis size");
  return true;
}

static bool op_concat(Ev *e, const EvalTensor *in, uint32_t nin, EvalTensor *out) {
  int axis;
  if (!norm_axis(e, attr_int(e, "axis", 0), in[0].type.rank, &axis)) return false;
  IrType t = in[0].type;
  for (uint32_t k = 1; k < nin; k++) t.dims[axis] += in[k].type.dims[axis];
  *out = tensor_new(&t);
  int64_t idx[IR_MAX_RANK] = {0}, src[IR_MAX_RANK];
  int64_t i = 0;
  do {
    memcpy(src, idx, sizeof src);
    uint32_t k = 0; /* the operand that holds position idx[axis] */
    while (src[axis] >= in[k].type.dims[axis]) src[axis] -= in[k++].type.dims[axis];
    out->data[i++] = in[k].data[offset_of(&in[k].type, src)];
  } while (next_index(idx, &t));
  return true;
}

/* gather: result[pre, j..., post] = x[pre, indices[j...], post]. */
static bool op_gather(Ev *e, const EvalTensor *x, const EvalTensor *ind, EvalTensor *out) {
  const IrType *xt = &x->type, *it = &ind->type;
  int axis;
  if (!norm_axis(e, attr_int(e, "axis", 0), xt->rank, &axis)) return false;
  IrType t = {.dtype = xt->dtype};
  for (int i = 0; i < axis; i++) t.dims[t.rank++] = xt->dims[i];
  for (int i = 0; i < it->rank; i++) t.dims[t.rank++] = it->dims[i];
  for (int i = axis + 1; i < xt->rank; i++) t.dims[t.rank++] = xt->dims[i];
  *out = tensor_new(&t);
  int64_t idx[2 * IR_MAX_RANK] = {0}, src[IR_MAX_RANK];
  int64_t i = 0;
  do {
    int64_t j = (int64_t)ind->data[offset_of(it, idx + axis)];
    if (j < 0 || j >= xt->dims[axis])
      return fail(e, "index %lld out of range for dimension %d of size %lld", (long long)j, axis,
                  (long long)xt->dims[axis]);
    for (int d = 0; d < axis; d++) src[d] = idx[d];
    src[axis] = j;
    for (int d = axis + 1; d < xt->rank; d++) src[d] = idx[d - 1 + it->rank];
    out->data[i++] = x->data[offset_of(xt, src)];
  } while (next_index(idx, &t));
  return true;
}

/* ---- linear algebra ---- */

/* matmul with NumPy semantics: transpose flags swap the last two dims, a
 * rank-1 x is [1, K] and a rank-1 y is [K, 1] (dims dropped from the result),
 * batch dims broadcast. */
static bool op_matmul(Ev *e, const EvalTensor *x, const EvalTensor *y, EvalTensor *out) {
  bool tx = attr_bool(e, "transpose_x", false), ty = attr_bool(e, "transpose_y", false);
  IrType a = x->type, b = y->type;
  bool a1 = a.rank == 1, b1 = b.rank == 1;
  if ((a1 && tx) || (b1 && ty)) return fail(e, "transpose of a rank-1 operand");
  if (a1) a = (IrType){.rank = 2, .dims = {1, x->type.dims[0]}}; /* same data, [1, K] */
  if (b1) b = (IrType){.rank = 2, .dims = {y->type.dims[0], 1}}; /* same data, [K, 1] */
  int ar = a.rank, br = b.rank;
  /* x(i, k) is a[.., i, k], or a[.., k, i] when transposed; likewise y(k, j). */
  int64_t M = tx ? a.dims[ar - 1] : a.dims[ar - 2], K = tx ? a.dims[ar - 2] : a.dims[ar - 1];
  int64_t K2 = ty ? b.dims[br - 1] : b.dims[br - 2], N = ty ? b.dims[br - 2] : b.dims[br - 1];
  if (K != K2) return fail(e, "inner sizes differ (%lld vs %lld)", (long long)K, (long long)K2);
  int64_t a_i = tx ? 1 : a.dims[ar - 1], a_k = tx ? a.dims[ar - 1] : 1; /* strides inside a's matrix */
  int64_t b_k = ty ? 1 : b.dims[br - 1], b_j = ty ? b.dims[br - 1] : 1;
  IrType abatch = {.rank = (uint8_t)(ar - 2)}, bbatch = {.rank = (uint8_t)(br - 2)}, batch = {0};
  memcpy(abatch.dims, a.dims, sizeof(int64_t) * (size_t)abatch.rank);
  memcpy(bbatch.dims, b.dims, sizeof(int64_t) * (size_t)bbatch.rank);
  if (!bcast_shape(&abatch, &bbatch, &batch)) return fail(e, "batch dims do not broadcast");
  IrType t = batch;
  t.dtype = x->type.dtype;
  if (!a1) t.dims[t.rank++] = M;
  if (!b1) t.dims[t.rank++] = N;
  *out = tensor_new(&t);
  int64_t amat = a.dims[ar - 2] * a.dims[ar - 1], bmat = b.dims[br - 2] * b.dims[br - 1];
  int64_t idx[IR_MAX_RANK] = {0};
  int64_t bi = 0;
  do {
    const double *A = x->data + offset_bcast(&abatch, &batch, idx) * amat;
    const double *B = y->data + offset_bcast(&bbatch, &batch, idx) * bmat;
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        double s = 0;
        for (int64_t k = 0; k < K; k++) s += A[i * a_i + k * a_k] * B[k * b_k + j * b_j];
        out->data[(bi * M + i) * N + j] = s;
      }
    bi++;
  } while (next_index(idx, &batch));
  return true;
}

/* linear: y[..., o] = sum_i x[..., i] * w[o, i] + b[o]. */
static bool op_linear(Ev *e, const EvalTensor *in, uint32_t nin, EvalTensor *out) {
  const EvalTensor *x = &in[0], *w = &in[1], *bias = nin > 2 ? &in[2] : NULL;
  int r = x->type.rank;
  int64_t I = x->type.dims[r - 1], O = w->type.dims[0];
  if (w->type.rank != 2 || w->type.dims[1] != I) return fail(e, "weight shape does not fit");
  IrType t = x->type;
  t.dims[r - 1] = O;
  *out = tensor_new(&t);
  int64_t rows = count_of(&x->type) / I;
  for (int64_t n = 0; n < rows; n++)
    for (int64_t o = 0; o < O; o++) {
      double s = 0;
      for (int64_t i = 0; i < I; i++) s += x->data[n * I + i] * w->data[o * I + i];
      out->data[n * O + o] = s + (bias ? bias->data[o] : 0.0);
    }
  return true;
}

/* conv: cross-correlation over 1 to 3 spatial dims with strides, dilations,
 * padding (valid/same/same_lower/custom) and groups. */
static bool op_conv(Ev *e, const EvalTensor *in, uint32_t nin, EvalTensor *out) {
  const EvalTensor *x = &in[0], *w = &in[1], *bias = nin > 2 ? &in[2] : NULL;
  const IrType *xt = &x->type, *wt = &w->type;
  int sp = xt->rank - 2;
  if (sp < 1 || sp > 3 || wt->rank != xt->rank) return fail(e, "bad ranks");
  int64_t N = xt->dims[0], Cin = xt->dims[1], Cout = wt->dims[0], G = attr_int(e, "groups", 1);
  if (G <= 0 || Cin % G || Cout % G || wt->dims[1] * G != Cin) return fail(e, "bad groups");
  int64_t cin_g = Cin / G, cout_g = Cout / G;
  int64_t strides[3] = {1, 1, 1}, dil[3] = {1, 1, 1}, pad[6] = {0};
  attr_ints(e, "strides", strides, 3);
  attr_ints(e, "dilations", dil, 3);
  attr_ints(e, "pad", pad, 6);
  const char *pad_type = attr_str(e, "pad_type", ir_op_attr(e->m, e->op, "pad") ? "custom" : "valid");
  IrType t = {.dtype = xt->dtype, .rank = xt->rank, .dims = {N, Cout}};
  IrType ospace = {.rank = (uint8_t)sp}, kspace = {.rank = (uint8_t)sp};
  int64_t before[3];
  for (int i = 0; i < sp; i++) {
    int64_t D = xt->dims[2 + i], Kd = wt->dims[2 + i], s = strides[i], ek = (Kd - 1) * dil[i] + 1, total;
    if (!strcmp(pad_type, "valid")) {
      total = before[i] = 0;
    } else if (!strcmp(pad_type, "custom")) {
      before[i] = pad[2 * i];
      total = pad[2 * i] + pad[2 * i + 1];
    } else if (!strcmp(pad_type, "same") || !strcmp(pad_type, "same_lower")) {
      total = s * ((D + s - 1) / s) - D + ek - s; /* so that the result is ceil(D / s) */
      if (total < 0) total = 0;
      /* same: the odd extra after (floor(P/2) before); same_lower: before */
      before[i] = !strcmp(pad_type, "same") ? total / 2 : total - total / 2;
    } else {
      return fail(e, "unknown pad_type '%s'", pad_type);
    }
    if (D + total < ek) return fail(e, "kernel larger than the padded input");
    t.dims[2 + i] = (D + total - ek) / s + 1;
    ospace.dims[i] = t.dims[2 + i];
    kspace.dims[i] = Kd;
  }
  *out = tensor_new(&t);
  int64_t xi[IR_MAX_RANK], wi[IR_MAX_RANK], oi[IR_MAX_RANK];
  for (int64_t n = 0; n < N; n++)
    for (int64_t co = 0; co < Cout; co++) {
      int64_t g = co / cout_g;
      int64_t o[3] = {0};
      do {
        double sum = 0;
        for (int64_t ci = 0; ci < cin_g; ci++) {
          int64_t k[3] = {0};
          do {
            bool inside = true;
            xi[0] = n;
            xi[1] = g * cin_g + ci;
            wi[0] = co;
            wi[1] = ci;
            for (int d = 0; d < sp; d++) {
              int64_t p = o[d] * strides[d] - before[d] + k[d] * dil[d];
              inside = inside && p >= 0 && p < xt->dims[2 + d]; /* padding reads zeros */
              xi[2 + d] = p;
              wi[2 + d] = k[d];
            }
            if (inside) sum += x->data[offset_of(xt, xi)] * w->data[offset_of(wt, wi)];
          } while (next_index(k, &kspace));
        }
        oi[0] = n;
        oi[1] = co;
        for (int d = 0; d < sp; d++) oi[2 + d] = o[d];
        out->data[offset_of(&t, oi)] = sum + (bias ? bias->data[co] : 0.0);
      } while (next_index(o, &ospace));
    }
  return true;
}

/* sdpa: softmax(q k^T * scale + mask) v per batch; bool mask false -> -inf,
 * float mask added; causal allows key j for query i iff j <= i + (S - L). */
static bool op_sdpa(Ev *e, const EvalTensor *in, uint32_t nin, EvalTensor *out) {
  const EvalTensor *q = &in[0], *k = &in[1], *v = &in[2], *mask = nin > 3 ? &in[3] : NULL;
  int r = q->type.rank;
  int64_t L = q->type.dims[r - 2], E = q->type.dims[r - 1], S = k->type.dims[r - 2], Dv = v->type.dims[r - 1];
  double scale = attr_float(e, "scale", 1.0 / sqrt((double)E));
  bool causal = attr_bool(e, "causal", false);
  if (k->type.dims[r - 1] != E || v->type.dims[r - 2] != S) return fail(e, "q/k/v shapes do not fit");
  if (causal && L > S) return fail(e, "causal with L > S");
  IrType scores_t = q->type;
  scores_t.dims[r - 1] = S;
  IrType t = q->type;
  t.dims[r - 1] = Dv;
  *out = tensor_new(&t);
  int64_t nbatch = count_of(&q->type) / (L * E);
  double *p = xcalloc((size_t)S, sizeof *p);
  int64_t sidx[IR_MAX_RANK] = {0}; /* index into the scores, for the mask */
  for (int64_t b = 0; b < nbatch; b++)
    for (int64_t i = 0; i < L; i++) {
      /* the batch part of sidx: b in row-major over dims 0..r-3 */
      int64_t rest = b;
      for (int d = r - 3; d >= 0; d--) {
        sidx[d] = rest % q->type.dims[d];
        rest /= q->type.dims[d];
      }
      sidx[r - 2] = i;
      double mx = -HUGE_VAL, sum = 0;
      for (int64_t j = 0; j < S; j++) {
        double s = 0;
        for (int64_t c = 0; c < E; c++) s += q->data[(b * L + i) * E + c] * k->data[(b * S + j) * E + c];
        s *= scale;
        if (mask) {
          sidx[r - 1] = j;
          double mv = mask->data[offset_bcast(&mask->type, &scores_t, sidx)];
          if (mask->type.dtype == DT_BOOL) s = mv != 0 ? s : -HUGE_VAL;
          else s += mv;
        }
        if (causal && j > i + (S - L)) s = -HUGE_VAL;
        p[j] = s;
        mx = s > mx ? s : mx;
      }
      for (int64_t j = 0; j < S; j++) sum += exp(p[j] - mx);
      for (int64_t j = 0; j < S; j++) p[j] = exp(p[j] - mx) / sum;
      for (int64_t c = 0; c < Dv; c++) {
        double acc = 0;
        for (int64_t j = 0; j < S; j++) acc += p[j] * v->data[(b * S + j) * Dv + c];
        out->data[(b * L + i) * Dv + c] = acc;
      }
    }
  free(p);
  return true;
}

/* ---- functions, params, calls ---- */

static bool eval_func(Ev *e, IrFuncId f, const EvalTensor *inputs, const char *path, int depth, EvalTensor *outputs);

/* Converts materialized param bytes to doubles. */
static void bytes_to_doubles(IrDType dt, const uint8_t *bytes, double *out, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    switch (dt) {
    case DT_FP16: {
      uint16_t h;
      memcpy(&h, bytes + 2 * i, 2);
      out[i] = (double)fp16_to_float(h);
      break;
    }
    case DT_FP32: {
      float f;
      memcpy(&f, bytes + 4 * i, 4);
      out[i] = (double)f;
      break;
    }
    case DT_INT32: {
      int32_t v;
      memcpy(&v, bytes + 4 * i, 4);
      out[i] = (double)v;
      break;
    }
    case DT_INT8: out[i] = (double)(int8_t)bytes[i]; break;
    case DT_UINT8: out[i] = (double)bytes[i]; break;
    case DT_BOOL: out[i] = bytes[i] ? 1.0 : 0.0; break;
    default: ice("bytes_to_doubles: dtype %d", (int)dt);
    }
  }
}

/* A param's values. Under an instance path (a callee reached through calls)
 * the source is the one inlining would give it: seeds derived from the path,
 * "{scope}" in a safetensors key replaced by the path. The param's source is
 * swapped for that one while weights_materialize runs and restored after. */
static bool load_param(Ev *e, IrValueId p, const char *path, EvalTensor *out) {
  IrValue *v = ir_value(e->m, p);
  IrParamSource saved = v->src;
  char key[1024];
  if (path) {
    if (v->src.kind == SRC_NORMAL || v->src.kind == SRC_UNIFORM) v->src.seed = ir_derive_seed(v->src.seed, path);
    const char *at = v->src.kind == SRC_SAFETENSORS && v->src.key ? strstr(v->src.key, "{scope}") : NULL;
    if (at) {
      snprintf(key, sizeof key, "%.*s%s%s", (int)(at - v->src.key), v->src.key, path, at + 7);
      v->src.key = key;
    }
  }
  SourceSet ss;
  srcset_init(&ss);
  StrBuf msgs;
  sb_init(&msgs);
  Diag d;
  diag_init(&d, &ss);
  d.capture = &msgs;
  WeightLoadOptions opt = {.clamp_fp16 = false};
  size_t nbytes = 0;
  uint8_t *bytes = weights_materialize(e->m, p, &opt, &d, &nbytes);
  v = ir_value(e->m, p);
  v->src = saved;
  bool ok = bytes != NULL;
  if (ok) {
    *out = tensor_new(&v->type);
    if (nbytes != (size_t)count_of(&v->type) * ir_dtype_size(v->type.dtype)) {
      ok = fail(e, "param '%s': %zu bytes for %s", v->name, nbytes, ir_dtype_name(v->type.dtype));
    } else {
      bytes_to_doubles(v->type.dtype, bytes, out->data, count_of(&v->type));
    }
  } else {
    fail(e, "param '%s' cannot be loaded: %s", v->name, msgs.data ? msgs.data : "?");
  }
  free(bytes);
  sb_free(&msgs);
  srcset_free(&ss);
  return ok;
}

static EvalTensor load_const(IrModule *m, IrValueId c) {
  const IrValue *v = ir_value(m, c);
  EvalTensor t = tensor_new(&v->type);
  for (int64_t i = 0; i < count_of(&v->type); i++) t.data[i] = v->data[v->ndata == 1 ? 0 : i];
  return t;
}

/* Values of an integer or bool dtype must be whole numbers in its range. */
static bool check_values(Ev *e, const EvalTensor *t, const char *what) {
  double lo, hi;
  if (!int_range(t->type.dtype, &lo, &hi)) return true;
  for (int64_t i = 0; i < count_of(&t->type); i++) {
    double v = t->data[i];
    if (!(v >= lo && v <= hi) || v != trunc(v))
      return fail(e, "%s: element %lld is %g, not a value of %s", what, (long long)i, v, ir_dtype_name(t->type.dtype));
  }
  return true;
}

static bool eval_call(Ev *e, IrOpId op, const EvalTensor *in, const char *path, int depth, EvalTensor *outs) {
  IrOp *o = ir_op(e->m, op);
  IrFuncId callee = o->callee;
  if (depth + 1 >= IR_MAX_CALL_DEPTH) return fail(e, "calls nest deeper than %d", IR_MAX_CALL_DEPTH);
  if (o->ninputs != ir_func(e->m, callee)->ninputs || o->nresults != ir_func(e->m, callee)->noutputs)
    return fail(e, "call does not match '%s'", ir_func(e->m, callee)->name);
  /* the instance path: "h0", then "h0.mlp" one call further down */
  size_t len = (path ? strlen(path) + 1 : 0) + strlen(o->instance) + 1;
  char *sub = xmalloc(len);
  snprintf(sub, len, "%s%s%s", path ? path : "", path ? "." : "", o->instance);
  Ev inner = {.m = e->m, .err = e->err, .errlen = e->errlen};
  bool ok = eval_func(&inner, callee, in, sub, depth + 1, outs);
  free(sub);
  if (!ok) e->failed = true; /* the callee wrote the message */
  return ok;
}

/* Evaluates one op into res[0..nresults). */
static bool eval_op(Ev *e, IrOpId op, const EvalTensor *in, const char *path, int depth, EvalTensor *res) {
  IrOp *o = ir_op(e->m, op);
  IrOpKind k = o->kind;
  uint32_t nin = o->ninputs, nres = o->nresults;
  bool ok;
  switch (k) {
  case OP_CONV: ok = op_conv(e, in, nin, res); break;
  case OP_LINEAR: ok = op_linear(e, in, nin, res); break;
  case OP_MATMUL: ok = op_matmul(e, &in[0], &in[1], res); break;
  case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: case OP_POW: case OP_MAXIMUM: case OP_MINIMUM:
    ok = op_binary(e, k, in, res);
    break;
  case OP_RELU: case OP_TANH: case OP_SIGMOID: case OP_SILU: case OP_GELU: case OP_EXP: case OP_LOG: case OP_SQRT:
  case OP_RSQRT: case OP_NEG: case OP_ABS: case OP_IDENTITY:
    ok = op_unary(e, k, &in[0], res);
    break;
  case OP_SOFTMAX: ok = op_softmax(e, &in[0], res); break;
  case OP_REDUCE_SUM: case OP_REDUCE_MEAN: case OP_REDUCE_MAX: ok = op_reduce(e, k, &in[0], res); break;
  case OP_RESHAPE: ok = op_reshape(e, &in[0], res); break;
  case OP_TRANSPOSE: ok = op_transpose(e, &in[0], res); break;
  case OP_SLICE: ok = op_slice(e, &in[0], res); break;
  case OP_SPLIT: ok = op_split(e, &in[0], res, nres); break;
  case OP_CONCAT: ok = op_concat(e, in, nin, res); break;
  case OP_CAST: ok = op_cast(e, &in[0], res); break;
  case OP_LAYER_NORM: case OP_RMS_NORM: ok = op_norm(e, k, in, nin, res); break;
  case OP_CLIP: ok = op_clip(e, &in[0], res); break;
  case OP_SELECT: ok = op_select(e, in, res); break;
  case OP_GATHER: ok = op_gather(e, &in[0], &in[1], res); break;
  case OP_SDPA: ok = op_sdpa(e, in, nin, res); break;
  case OP_CROSS_ENTROPY: { char why[512]; ok = eval_cross_entropy(e->m, op, in, res, why, sizeof why) || fail(e, "%s", why); break; }
  case OP_CALL: ok = eval_call(e, op, in, path, depth, res); break;
  default: return fail(e, "no evaluation rule for op kind %d", (int)k);
  }
  if (!ok) return false;
  /* Cross-check with shape inference, and keep integer results integral. */
  for (uint32_t i = 0; i < nres; i++) {
    const IrType *want = &ir_value(e->m, ir_op(e->m, op)->results[i])->type;
    if (!ir_type_equal(want, &res[i].type)) {
      char a[96], b[96];
      type_text(&res[i].type, a, sizeof a);
      type_text(want, b, sizeof b);
      return fail(e, "result %u: the evaluator computes %s but the IR has %s", i, a, b);
    }
    /* int32 results saturate, as the CPU backend stores them */
    if (res[i].type.dtype == DT_INT32)
      for (int64_t j = 0; j < count_of(&res[i].type); j++) {
        double *v = &res[i].data[j];
        if (*v > 2147483647.0) *v = 2147483647.0;
        else if (*v < -2147483648.0) *v = -2147483648.0;
      }
    if (!check_values(e, &res[i], "result")) return false;
  }
  return true;
}

static bool eval_func(Ev *e, IrFuncId f, const EvalTensor *inputs, const char *path, int depth, EvalTensor *outputs) {
  IrModule *m = e->m;
  e->func = ir_func(m, f)->name;
  e->op = IR_NO_OP;
  EvalTensor *vals = xcalloc(m->nvalues, sizeof *vals); /* by value id; data NULL: not computed */
  uint32_t nvals = m->nvalues;
  bool ok = true;
  for (uint32_t i = 0; ok && i < ir_func(m, f)->ninputs; i++) {
    IrValue *v = ir_value(m, ir_func(m, f)->inputs[i]);
    if (!inputs || !inputs[i].data || !ir_type_equal(&inputs[i].type, &v->type)) {
      char a[96] = "(none)", b[96];
      if (inputs && inputs[i].data) type_text(&inputs[i].type, a, sizeof a);
      type_text(&v->type, b, sizeof b);
      ok = fail(e, "input %u ('%s') is %s but must be %s", i + 1, v->name, a, b);
      break;
    }
    ok = check_values(e, &inputs[i], v->name);
    vals[ir_func(m, f)->inputs[i].id] = tensor_dup(&inputs[i]);
  }
  for (uint32_t i = 0; ok && i < ir_func(m, f)->ndecls; i++) {
    IrValueId d = ir_func(m, f)->decls[i];
    if (ir_value(m, d)->dead) continue;
    if (ir_value(m, d)->kind == VK_PARAM) ok = load_param(e, d, path, &vals[d.id]);
    else vals[d.id] = load_const(m, d);
  }
  EvalTensor *in = xcalloc(MAX_RESULTS, sizeof *in), *res = xcalloc(MAX_RESULTS, sizeof *res);
  for (IrOpId op = ok ? ir_func(m, f)->first : IR_NO_OP; !ir_id_is_none(op); op = ir_op(m, op)->next) {
    IrOp *o = ir_op(m, op);
    e->op = op;
    if (o->ninputs > MAX_RESULTS || o->nresults > MAX_RESULTS) {
      ok = fail(e, "more than %d operands or results", MAX_RESULTS);
      break;
    }
    for (uint32_t i = 0; ok && i < o->ninputs; i++) {
      if (o->inputs[i].id >= nvals || !vals[o->inputs[i].id].data)
        ok = fail(e, "operand %u ('%s') has no value yet", i + 1, ir_value(m, o->inputs[i])->name);
      else
        in[i] = vals[o->inputs[i].id];
    }
    if (!ok) break;
    memset(res, 0, sizeof(EvalTensor) * o->nresults);
    ok = eval_op(e, op, in, path, depth, res);
    e->func = ir_func(m, f)->name; /* a call may have changed it */
    e->op = op;
    o = ir_op(m, op);
    for (uint32_t i = 0; i < o->nresults; i++) {
      if (ok) vals[o->results[i].id] = res[i];
      else eval_tensor_free(&res[i]);
    }
    if (!ok) break;
  }
  free(in);
  free(res);
  e->op = IR_NO_OP;
  uint32_t nout = ir_func(m, f)->noutputs;
  for (uint32_t i = 0; i < nout; i++) outputs[i] = (EvalTensor){0};
  for (uint32_t i = 0; ok && i < nout; i++) {
    IrValueId v = ir_func(m, f)->outputs[i].value;
    if (ir_id_is_none(v) || v.id >= nvals || !vals[v.id].data)
      ok = fail(e, "output '%s' has no value", ir_func(m, f)->outputs[i].name);
    else outputs[i] = tensor_dup(&vals[v.id]);
  }
  if (!ok)
    for (uint32_t i = 0; i < nout; i++) eval_tensor_free(&outputs[i]);
  for (uint32_t i = 0; i < nvals; i++) eval_tensor_free(&vals[i]);
  free(vals);
  return ok;
}

bool ir_eval(IrModule *m, IrFuncId f, const EvalTensor *inputs, EvalTensor **outputs, char *err, size_t errlen) {
  *outputs = NULL;
  if (err && errlen) err[0] = 0;
  Ev e = {.m = m, .err = err, .errlen = errlen};
  if (!f || f >= m->nfuncs || ir_func(m, f)->dead) {
    snprintf(err, errlen, "no such function (id %u)", f);
    return false;
  }
  uint32_t n = ir_func(m, f)->noutputs;
  EvalTensor *outs = xcalloc(n ? n : 1, sizeof *outs);
  if (!eval_func(&e, f, inputs, NULL, 0, outs)) {
    free(outs);
    return false;
  }
  *outputs = outs;
  return true;
}

/* ---- random inputs and comparison ---- */

static double uniform01(uint64_t *state) { return (double)(splitmix64(state) >> 11) * 0x1p-53; }

EvalTensor eval_random_ints(const IrType *t, uint64_t seed, int64_t low, int64_t high) {
  EvalTensor r = tensor_new(t);
  uint64_t s = seed ^ 0x5851f42d4c957f2dull;
  uint64_t span = high > low ? (uint64_t)(high - low) : 1;
  for (int64_t i = 0; i < count_of(t); i++) r.data[i] = (double)(low + (int64_t)(splitmix64(&s) % span));
  return r;
}

EvalTensor eval_random_input(const IrType *t, uint64_t seed) {
  switch (t->dtype) {
  case DT_INT32: case DT_INT8: return eval_random_ints(t, seed, -8, 9);
  case DT_UINT8: return eval_random_ints(t, seed, 0, 17);
  case DT_BOOL: return eval_random_ints(t, seed, 0, 2);
  default: break;
  }
  EvalTensor r = tensor_new(t);
  uint64_t s = seed ^ 0x2545f4914f6cdd1dull;
  for (int64_t i = 0; i < count_of(t); i++) {
    double v = -2.0 + 4.0 * uniform01(&s);
    r.data[i] = t->dtype == DT_FP16 ? (double)fp16_to_float(fp16_from_double(v)) : (double)(float)v;
  }
  return r;
}

/* |x - y|, with NaN == NaN and equal infinities 0, NaN against a number inf. */
static double elem_diff(double x, double y) {
  if (isnan(x) || isnan(y)) return isnan(x) && isnan(y) ? 0.0 : HUGE_VAL;
  if (x == y) return 0.0;
  return fabs(x - y);
}

double eval_max_abs_diff(const EvalTensor *a, const EvalTensor *b) {
  if (!ir_type_equal(&a->type, &b->type)) return HUGE_VAL;
  double worst = 0;
  for (int64_t i = 0; i < count_of(&a->type); i++) {
    double d = elem_diff(a->data[i], b->data[i]);
    if (d > worst) worst = d;
  }
  return worst;
}

/* ---- before/after checks ---- */

static IrModule *parse_text(const char *name, const char *text, char *err, size_t errlen) {
  SourceSet ss;
  srcset_init(&ss);
  StrBuf msgs;
  sb_init(&msgs);
  Diag d;
  diag_init(&d, &ss);
  d.capture = &msgs;
  IrModule *m = oir_parse_string(name, text, strlen(text), &d);
  if (!m) snprintf(err, errlen, "the program does not parse:\n%s", msgs.data ? msgs.data : "");
  sb_free(&msgs);
  srcset_free(&ss);
  return m;
}

static bool compare_func(IrModule *before, IrModule *after, IrFuncId fb, uint64_t seed, double tol,
                         const EvalIntRange *ranges, double *worst, char *err, size_t errlen) {
  const char *name = ir_func(before, fb)->name;
  IrFuncId fa = ir_func_lookup(after, name);
  if (!fa) {
    snprintf(err, errlen, "function '%s' is gone after the passes", name);
    return false;
  }
  uint32_t nin = ir_func(before, fb)->ninputs;
  if (ir_func(after, fa)->ninputs != nin || ir_func(after, fa)->noutputs != ir_func(before, fb)->noutputs) {
    snprintf(err, errlen, "the signature of '%s' changed", name);
    return false;
  }
  EvalTensor *inputs = xcalloc(nin ? nin : 1, sizeof *inputs);
  bool ok = true;
  for (uint32_t i = 0; ok && i < nin; i++) {
    const IrValue *v = ir_value(before, ir_func(before, fb)->inputs[i]);
    if (!ir_type_equal(&v->type, &ir_value(after, ir_func(after, fa)->inputs[i])->type)) {
      snprintf(err, errlen, "input '%s' of '%s' changed type", v->name, name);
      ok = false;
      break;
    }
    uint64_t s = seed ^ (0x9e3779b97f4a7c15ull * (i + 1));
    const EvalIntRange *r = ranges;
    while (r && r->input && strcmp(r->input, v->name)) r++;
    inputs[i] = r && r->input ? eval_random_ints(&v->type, s, r->low, r->high) : eval_random_input(&v->type, s);
  }
  EvalTensor *ob = NULL, *oa = NULL;
  uint32_t nout = ir_func(before, fb)->noutputs;
  char msg[1024];
  if (ok && !ir_eval(before, fb, inputs, &ob, msg, sizeof msg)) {
    snprintf(err, errlen, "evaluating '%s' before the passes failed: %s", name, msg);
    ok = false;
  }
  if (ok && !ir_eval(after, fa, inputs, &oa, msg, sizeof msg)) {
    snprintf(err, errlen, "evaluating '%s' after the passes failed: %s", name, msg);
    ok = false;
  }
  for (uint32_t i = 0; ok && i < nout; i++) {
    const char *oname = ir_func(before, fb)->outputs[i].name;
    if (strcmp(oname, ir_func(after, fa)->outputs[i].name)) {
      snprintf(err, errlen, "output %u of '%s' was '%s' and is '%s' after the passes", i + 1, name, oname,
               ir_func(after, fa)->outputs[i].name);
      ok = false;
      break;
    }
    for (int64_t k = 0; k < count_of(&ob[i].type); k++)
      if (!isfinite(ob[i].data[k])) {
        snprintf(err, errlen, "output '%s' of '%s' is %g at element %lld before the passes: the check would prove "
                 "nothing (keep the program finite)", oname, name, ob[i].data[k], (long long)k);
        ok = false;
        break;
      }
    if (!ok) break;
    double d = eval_max_abs_diff(&ob[i], &oa[i]);
    if (d > *worst) *worst = d;
    if (!(d <= tol)) {
      char tb[96], ta[96];
      type_text(&ob[i].type, tb, sizeof tb);
      type_text(&oa[i].type, ta, sizeof ta);
      if (!ir_type_equal(&ob[i].type, &oa[i].type)) {
        snprintf(err, errlen, "output '%s' of '%s' is %s before the passes and %s after", oname, name, tb, ta);
      } else {
        int64_t at = 0; /* the element with the largest difference */
        for (int64_t k = 0; k < count_of(&ob[i].type); k++)
          if (elem_diff(ob[i].data[k], oa[i].data[k]) > elem_diff(ob[i].data[at], oa[i].data[at])) at = k;
        snprintf(err, errlen, "output '%s' of '%s' (%s) differs by %g > %g; worst at element %lld: %.17g before, "
                 "%.17g after (seed %llu)", oname, name, tb, d, tol, (long long)at, ob[i].data[at], oa[i].data[at],
                 (unsigned long long)seed);
      }
      ok = false;
    }
  }
  eval_tensors_free(ob, ob ? nout : 0);
  eval_tensors_free(oa, oa ? nout : 0);
  eval_tensors_free(inputs, nin);
  return ok;
}

bool eval_pass_preserves(const char *oir_text, const char *passes, uint64_t seed, double tol,
                         const EvalIntRange *ranges, double *max_diff, char *err, size_t errlen) {
  PassManagerOptions o = {.verify_each = true};
  if (passes_pipeline(passes)) o.pipeline = passes;
  else o.passes = passes;
  return eval_pass_preserves_opts(oir_text, &o, seed, tol, ranges, max_diff, err, errlen);
}

bool eval_pass_preserves_opts(const char *oir_text, const PassManagerOptions *opts, uint64_t seed, double tol,
                              const EvalIntRange *ranges, double *max_diff, char *err, size_t errlen) {
  const char *passes = opts->passes ? opts->passes : opts->pipeline ? opts->pipeline : "O1";
  double worst = 0;
  if (max_diff) *max_diff = 0;
  err[0] = 0;
  IrModule *before = parse_text("before.oir", oir_text, err, errlen);
  if (!before) return false;
  IrModule *after = parse_text("after.oir", oir_text, err, errlen);
  bool ok = after != NULL;
  if (ok) {
    SourceSet ss;
    srcset_init(&ss);
    StrBuf msgs;
    sb_init(&msgs);
    Diag d;
    diag_init(&d, &ss);
    d.capture = &msgs;
    if (!passes_run(after, opts, &d)) {
      snprintf(err, errlen, "passes '%s' failed:\n%s", passes, msgs.data ? msgs.data : "");
      ok = false;
    }
    sb_free(&msgs);
    srcset_free(&ss);
  }
  uint32_t checked = 0;
  for (IrFuncId f = 1; ok && f < before->nfuncs; f++) {
    if (ir_func(before, f)->dead || ir_func(before, f)->ncallers) continue; /* entries only */
    ok = compare_func(before, after, f, seed, tol, ranges, &worst, err, errlen);
    checked++;
  }
  if (ok && !checked) {
    snprintf(err, errlen, "the program has no entry function");
    ok = false;
  }
  if (max_diff) *max_diff = worst;
  ir_module_free(before);
  if (after) ir_module_free(after);
  return ok;
}
