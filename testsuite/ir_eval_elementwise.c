/*
 * The reference evaluator's element-wise ops (with NumPy broadcasting),
 * reductions, softmax and the normalizations (ir_eval_internal.h).
 */
#include "ir_eval_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "orion/fp16.h"
#include "orion/op_semantics.h"
#include "orion/frontend.h"
#include "orion/passes.h"
#include "orion/weights.h"

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
bool ev_op_binary(Ev *e, IrOpKind k, const EvalTensor *in, EvalTensor *out) {
  IrType t = {.dtype = in[0].type.dtype};
  if (!ev_bcast_shape(&in[0].type, &in[1].type, &t)) return ev_fail(e, "operands do not broadcast");
  *out = ev_tensor_new(&t);
  int64_t idx[IR_MAX_RANK] = {0};
  int64_t i = 0;
  do {
    double a = in[0].data[ev_offset_bcast(&in[0].type, &t, idx)];
    double b = in[1].data[ev_offset_bcast(&in[1].type, &t, idx)];
    out->data[i++] = binary_value(k, a, b);
  } while (ev_next_index(idx, &t));
  return true;
}

/* A float attribute as the emitted program holds it: a const of x's dtype. */
static double attr_as(Ev *e, const char *name, double dflt, IrDType dt) {
  double v = ev_attr_float(e, name, dflt);
  if (dt == DT_FP16) return (double)fp16_to_float(fp16_from_double(v));
  if (dt == DT_FP32) return (double)(float)v;
  return v;
}

bool ev_op_unary(Ev *e, IrOpKind k, const EvalTensor *x, EvalTensor *out) {
  *out = ev_tensor_new(&x->type);
  double eps = 0;
  bool tanh_mode = false;
  if (k == OP_LOG || k == OP_RSQRT) eps = attr_as(e, "epsilon", 0.0, x->type.dtype);
  if (k == OP_GELU) {
    const char *mode = ev_attr_str(e, "mode", "exact");
    if (!strcmp(mode, "tanh")) tanh_mode = true;
    else if (strcmp(mode, "exact")) return ev_fail(e, "unknown gelu mode '%s'", mode);
  }
  for (int64_t i = 0; i < ev_count_of(&x->type); i++) {
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

bool ev_op_clip(Ev *e, const EvalTensor *x, EvalTensor *out) {
  double lo = attr_as(e, "min", 0, x->type.dtype), hi = attr_as(e, "max", 0, x->type.dtype);
  *out = ev_tensor_new(&x->type);
  for (int64_t i = 0; i < ev_count_of(&x->type); i++) out->data[i] = op_sem_clip(x->data[i], lo, hi);
  return true;
}

/* select(cond, a, b): cond ? a : b, all three broadcast together. */
bool ev_op_select(Ev *e, const EvalTensor *in, EvalTensor *out) {
  IrType ab = {0}, t = {0};
  if (!ev_bcast_shape(&in[1].type, &in[2].type, &ab) || !ev_bcast_shape(&in[0].type, &ab, &t))
    return ev_fail(e, "operands do not broadcast");
  t.dtype = in[1].type.dtype;
  *out = ev_tensor_new(&t);
  int64_t idx[IR_MAX_RANK] = {0};
  int64_t i = 0;
  do {
    bool c = in[0].data[ev_offset_bcast(&in[0].type, &t, idx)] != 0;
    const EvalTensor *src = c ? &in[1] : &in[2];
    out->data[i++] = src->data[ev_offset_bcast(&src->type, &t, idx)];
  } while (ev_next_index(idx, &t));
  return true;
}

/* cast, NumPy astype semantics: float -> integer truncates toward zero (NaN
 * or out of range is an error); -> bool is != 0; -> fp16/fp32 rounds to the
 * dtype (nearest even), the one place the evaluator rounds: converting is
 * what the op is for. */
bool ev_op_cast(Ev *e, const EvalTensor *x, EvalTensor *out) {
  const char *name = ev_attr_str(e, "dtype", "");
  IrDType to = ir_dtype_from_name(name);
  if (to == DT_INVALID) return ev_fail(e, "unknown dtype '%s'", name);
  IrType t = x->type;
  t.dtype = to;
  *out = ev_tensor_new(&t);
  for (int64_t i = 0; i < ev_count_of(&t); i++) {
    double v = x->data[i], lo, hi;
    if (to == DT_BOOL) {
      out->data[i] = v != 0 ? 1.0 : 0.0;
    } else if (ev_int_range(to, &lo, &hi)) {
      if (isnan(v)) return ev_fail(e, "cast of NaN to %s (element %lld)", name, (long long)i);
      double tv = trunc(v);
      if (tv < lo || tv > hi)
        return ev_fail(e, "cast of %g to %s is out of range (element %lld)", v, name, (long long)i);
      out->data[i] = tv + 0.0; /* +0.0 turns -0 into 0 */
    } else if (to == DT_FP16) {
      out->data[i] = (double)fp16_to_float(fp16_from_double(v));
    } else if (to == DT_FP32) {
      out->data[i] = (double)(float)v;
    } else {
      return ev_fail(e, "cast to %s", name);
    }
  }
  return true;
}

/* ---- reductions and normalizations ---- */

/* Which axes of rank-r x an "axes" list names; `dflt_last` picks the last
 * axis when the attribute is absent (norms), else every axis (reductions). */
static bool axes_mask(Ev *e, int r, bool dflt_last, bool *mask, int *order, int *norder) {
  int64_t axes[IR_MAX_RANK];
  int n = ev_attr_ints(e, "axes", axes, IR_MAX_RANK);
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
  if (n == 0) return ev_fail(e, "empty 'axes'");
  for (int i = 0; i < n; i++) {
    int a;
    if (!ev_norm_axis(e, axes[i], r, &a)) return false;
    if (mask[a]) return ev_fail(e, "axis %d listed twice", a);
    mask[a] = true;
    order[(*norder)++] = a;
  }
  return true;
}

bool ev_op_reduce(Ev *e, IrOpKind k, const EvalTensor *x, EvalTensor *out) {
  const IrType *xt = &x->type;
  bool mask[IR_MAX_RANK];
  int order[IR_MAX_RANK], norder;
  if (!axes_mask(e, xt->rank, false, mask, order, &norder)) return false;
  bool keep = ev_attr_bool(e, "keep_dims", false);
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
  *out = ev_tensor_new(&t); /* same element order as `kept` */
  int64_t nout = ev_count_of(&t);
  for (int64_t i = 0; i < nout; i++) out->data[i] = k == OP_REDUCE_MAX ? -HUGE_VAL : 0.0;
  int64_t idx[IR_MAX_RANK] = {0};
  int64_t i = 0;
  do {
    double v = x->data[i++];
    double *acc = &out->data[ev_offset_bcast(&kept, xt, idx)];
    if (k == OP_REDUCE_MAX) {
      *acc = op_sem_maximum(*acc, v);
    } else {
      *acc += v;
    }
  } while (ev_next_index(idx, xt));
  if (k == OP_REDUCE_MEAN)
    for (int64_t j = 0; j < nout; j++) {
      out->data[j] /= (double)nreduced;
      if (xt->dtype == DT_INT32) out->data[j] = trunc(out->data[j]) + 0.0; /* integer mean: toward zero */
    }
  return true;
}

bool ev_op_softmax(Ev *e, const EvalTensor *x, EvalTensor *out) {
  const IrType *t = &x->type;
  int axis;
  if (!ev_norm_axis(e, ev_attr_int(e, "axis", -1), t->rank, &axis)) return false;
  int64_t outer = 1, n = t->dims[axis], inner = 1;
  for (int i = 0; i < axis; i++) outer *= t->dims[i];
  for (int i = axis + 1; i < t->rank; i++) inner *= t->dims[i];
  *out = ev_tensor_new(t);
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
bool ev_op_norm(Ev *e, IrOpKind k, const EvalTensor *in, uint32_t nin, EvalTensor *out) {
  const EvalTensor *x = &in[0], *gamma = nin > 1 ? &in[1] : NULL, *beta = nin > 2 ? &in[2] : NULL;
  const IrType *xt = &x->type;
  if (xt->rank == 0) return ev_fail(e, "operand is a scalar");
  bool mask[IR_MAX_RANK];
  int order[IR_MAX_RANK], norder;
  if (!axes_mask(e, xt->rank, true, mask, order, &norder)) return false;
  double eps = ev_attr_float(e, "epsilon", 1e-5);
  /* outer: x with normalized dims set to 1; inner: x with the others set to 1. */
  IrType outer = *xt, inner = *xt;
  for (int i = 0; i < xt->rank; i++) {
    if (mask[i]) outer.dims[i] = 1;
    else inner.dims[i] = 1;
  }
  IrType gt = {.dtype = xt->dtype, .rank = (uint8_t)norder};
  for (int j = 0; j < norder; j++) gt.dims[j] = xt->dims[order[j]];
  for (uint32_t i = 1; i < nin; i++)
    if (!ir_type_equal(&in[i].type, &gt)) return ev_fail(e, "gamma/beta do not have the normalized shape");
  double count = (double)ev_count_of(&inner);
  *out = ev_tensor_new(xt);
  int64_t o[IR_MAX_RANK] = {0};
  do {
    int64_t n[IR_MAX_RANK] = {0}, full[IR_MAX_RANK];
    double mean = 0, var = 0, ms = 0;
    do {
      for (int i = 0; i < xt->rank; i++) full[i] = o[i] + n[i];
      double v = x->data[ev_offset_of(xt, full)];
      mean += v;
      ms += v * v;
    } while (ev_next_index(n, &inner));
    mean /= count;
    ms /= count;
    do {
      for (int i = 0; i < xt->rank; i++) full[i] = o[i] + n[i];
      double d = x->data[ev_offset_of(xt, full)] - mean;
      var += d * d;
    } while (ev_next_index(n, &inner));
    var /= count; /* biased */
    do {
      for (int i = 0; i < xt->rank; i++) full[i] = o[i] + n[i];
      int64_t g = 0; /* index into gamma/beta: normalized dims in `axes` order */
      for (int j = 0; j < norder; j++) g = g * xt->dims[order[j]] + full[order[j]];
      double v = x->data[ev_offset_of(xt, full)], y;
      if (k == OP_LAYER_NORM) {
        y = (v - mean) / sqrt(var + eps);
        if (gamma) y *= gamma->data[g];
        if (beta) y += beta->data[g];
      } else {
        y = v / sqrt(ms + eps);
        if (gamma) y *= gamma->data[g];
      }
      out->data[ev_offset_of(xt, full)] = y;
    } while (ev_next_index(n, &inner));
  } while (ev_next_index(o, &outer));
  return true;
}
