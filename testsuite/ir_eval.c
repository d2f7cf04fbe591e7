/*
 * The reference evaluator of the graph IR (see ir_eval.h).
 *
 * One function per op (family), each a direct transcription of the op's
 * definition in docs/language.md section 9, with loops over multi-indices.
 * Every op computes its own result shape; eval_op compares it with the
 * inferred type in the IR. This file: tensors, the evaluation state and its
 * messages, params, calls and functions; the op families are in the files
 * ir_eval_internal.h lists.
 */
#include "ir_eval_internal.h"
#include "ir_eval_loss.h"

#include <stdarg.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "orion/fp16.h"
#include "orion/op_semantics.h"
#include "orion/frontend.h"
#include "orion/passes.h"
#include "orion/weights.h"

/* ---- tensors and indices ---- */

int64_t ev_count_of(const IrType *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) n *= t->dims[i];
  return n;
}

EvalTensor ev_tensor_new(const IrType *t) {
  EvalTensor r = {.type = *t};
  r.data = xcalloc((size_t)ev_count_of(t), sizeof *r.data);
  return r;
}

EvalTensor ev_tensor_dup(const EvalTensor *t) {
  EvalTensor r = ev_tensor_new(&t->type);
  memcpy(r.data, t->data, sizeof *r.data * (size_t)ev_count_of(&t->type));
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
int64_t ev_offset_of(const IrType *t, const int64_t *idx) {
  int64_t off = 0;
  for (int i = 0; i < t->rank; i++) off = off * t->dims[i] + idx[i];
  return off;
}

/* Steps idx (all zeros at the start) to the next multi-index of t in
 * row-major order; false after the last one. A scalar has one index. */
bool ev_next_index(int64_t *idx, const IrType *t) {
  for (int i = t->rank - 1; i >= 0; i--) {
    if (++idx[i] < t->dims[i]) return true;
    idx[i] = 0;
  }
  return false;
}

/* Offset into `in` of the element that NumPy broadcasting maps to index
 * `idx` of `out`: dims aligned at the right, size-1 dims stay at 0. */
int64_t ev_offset_bcast(const IrType *in, const IrType *out, const int64_t *idx) {
  int64_t off = 0;
  int shift = out->rank - in->rank;
  for (int i = 0; i < in->rank; i++) off = off * in->dims[i] + (in->dims[i] == 1 ? 0 : idx[i + shift]);
  return off;
}

/* NumPy's broadcast shape of a and b (dtype left as is); false if none. */
bool ev_bcast_shape(const IrType *a, const IrType *b, IrType *out) {
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

void ev_type_text(const IrType *t, char *buf, size_t n) {
  StrBuf sb;
  sb_init(&sb);
  ir_type_print(&sb, t);
  snprintf(buf, n, "%s", sb.data ? sb.data : "");
  sb_free(&sb);
}

/* Range of whole numbers a dtype holds; false for float dtypes. */
bool ev_int_range(IrDType t, double *lo, double *hi) {
  switch (t) {
  case DT_INT32: *lo = -2147483648.0; *hi = 2147483647.0; return true;
  case DT_INT8: *lo = -128; *hi = 127; return true;
  case DT_UINT8: *lo = 0; *hi = 255; return true;
  case DT_BOOL: *lo = 0; *hi = 1; return true;
  default: return false;
  }
}

/* ---- evaluation state and errors ---- */

bool ev_fail(Ev *e, const char *fmt, ...) {
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
int64_t ev_attr_int(Ev *e, const char *name, int64_t dflt) { return ir_attr_int(e->m, e->op, name, dflt); }
double ev_attr_float(Ev *e, const char *name, double dflt) { return ir_attr_float(e->m, e->op, name, dflt); }
bool ev_attr_bool(Ev *e, const char *name, bool dflt) { return ir_attr_bool(e->m, e->op, name, dflt); }
const char *ev_attr_str(Ev *e, const char *name, const char *dflt) { return ir_attr_str(e->m, e->op, name, dflt); }
/* A list attribute; -1 if absent. At most max entries are read. */
int ev_attr_ints(Ev *e, const char *name, int64_t *out, int max) {
  int n = ir_attr_ints(e->m, e->op, name, out, max);
  return n > max ? max : n;
}

/* Normalizes an axis against a rank (negative counts from the end). */
bool ev_norm_axis(Ev *e, int64_t axis, int rank, int *out) {
  *out = 0;
  if (axis < -rank || axis >= rank) return ev_fail(e, "axis %lld out of range for rank %d", (long long)axis, rank);
  *out = (int)(axis < 0 ? axis + rank : axis);
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
    *out = ev_tensor_new(&v->type);
    if (nbytes != (size_t)ev_count_of(&v->type) * ir_dtype_size(v->type.dtype)) {
      ok = ev_fail(e, "param '%s': %zu bytes for %s", v->name, nbytes, ir_dtype_name(v->type.dtype));
    } else {
      bytes_to_doubles(v->type.dtype, bytes, out->data, ev_count_of(&v->type));
    }
  } else {
    ev_fail(e, "param '%s' cannot be loaded: %s", v->name, msgs.data ? msgs.data : "?");
  }
  free(bytes);
  sb_free(&msgs);
  srcset_free(&ss);
  return ok;
}

static EvalTensor load_const(IrModule *m, IrValueId c) {
  const IrValue *v = ir_value(m, c);
  EvalTensor t = ev_tensor_new(&v->type);
  for (int64_t i = 0; i < ev_count_of(&v->type); i++) t.data[i] = v->data[v->ndata == 1 ? 0 : i];
  return t;
}

/* Values of an integer or bool dtype must be whole numbers in its range. */
static bool check_values(Ev *e, const EvalTensor *t, const char *what) {
  double lo, hi;
  if (!ev_int_range(t->type.dtype, &lo, &hi)) return true;
  for (int64_t i = 0; i < ev_count_of(&t->type); i++) {
    double v = t->data[i];
    if (!(v >= lo && v <= hi) || v != trunc(v))
      return ev_fail(e, "%s: element %lld is %g, not a value of %s", what, (long long)i, v, ir_dtype_name(t->type.dtype));
  }
  return true;
}

static bool eval_call(Ev *e, IrOpId op, const EvalTensor *in, const char *path, int depth, EvalTensor *outs) {
  IrOp *o = ir_op(e->m, op);
  IrFuncId callee = o->callee;
  if (depth + 1 >= IR_MAX_CALL_DEPTH) return ev_fail(e, "calls nest deeper than %d", IR_MAX_CALL_DEPTH);
  if (o->ninputs != ir_func(e->m, callee)->ninputs || o->nresults != ir_func(e->m, callee)->noutputs)
    return ev_fail(e, "call does not match '%s'", ir_func(e->m, callee)->name);
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
  case OP_CONV: ok = ev_op_conv(e, in, nin, res); break;
  case OP_LINEAR: ok = ev_op_linear(e, in, nin, res); break;
  case OP_MATMUL: ok = ev_op_matmul(e, &in[0], &in[1], res); break;
  case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: case OP_POW: case OP_MAXIMUM: case OP_MINIMUM:
    ok = ev_op_binary(e, k, in, res);
    break;
  case OP_RELU: case OP_TANH: case OP_SIGMOID: case OP_SILU: case OP_GELU: case OP_EXP: case OP_LOG: case OP_SQRT:
  case OP_RSQRT: case OP_NEG: case OP_ABS: case OP_IDENTITY:
    ok = ev_op_unary(e, k, &in[0], res);
    break;
  case OP_SOFTMAX: ok = ev_op_softmax(e, &in[0], res); break;
  case OP_REDUCE_SUM: case OP_REDUCE_MEAN: case OP_REDUCE_MAX: ok = ev_op_reduce(e, k, &in[0], res); break;
  case OP_RESHAPE: ok = ev_op_reshape(e, &in[0], res); break;
  case OP_TRANSPOSE: ok = ev_op_transpose(e, &in[0], res); break;
  case OP_SLICE: ok = ev_op_slice(e, &in[0], res); break;
  case OP_SPLIT: ok = ev_op_split(e, &in[0], res, nres); break;
  case OP_CONCAT: ok = ev_op_concat(e, in, nin, res); break;
  case OP_CAST: ok = ev_op_cast(e, &in[0], res); break;
  case OP_LAYER_NORM: case OP_RMS_NORM: ok = ev_op_norm(e, k, in, nin, res); break;
  case OP_CLIP: ok = ev_op_clip(e, &in[0], res); break;
  case OP_SELECT: ok = ev_op_select(e, in, res); break;
  case OP_GATHER: ok = ev_op_gather(e, &in[0], &in[1], res); break;
  case OP_SDPA: ok = ev_op_sdpa(e, in, nin, res); break;
  case OP_CROSS_ENTROPY: { char why[512]; ok = eval_cross_entropy(e->m, op, in, res, why, sizeof why) || ev_fail(e, "%s", why); break; }
  case OP_CALL: ok = eval_call(e, op, in, path, depth, res); break;
  default: return ev_fail(e, "no evaluation rule for op kind %d", (int)k);
  }
  if (!ok) return false;
  /* Cross-check with shape inference, and keep integer results integral. */
  for (uint32_t i = 0; i < nres; i++) {
    const IrType *want = &ir_value(e->m, ir_op(e->m, op)->results[i])->type;
    if (!ir_type_equal(want, &res[i].type)) {
      char a[96], b[96];
      ev_type_text(&res[i].type, a, sizeof a);
      ev_type_text(want, b, sizeof b);
      return ev_fail(e, "result %u: the evaluator computes %s but the IR has %s", i, a, b);
    }
    /* int32 results saturate, as the CPU backend stores them */
    if (res[i].type.dtype == DT_INT32)
      for (int64_t j = 0; j < ev_count_of(&res[i].type); j++) {
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
      if (inputs && inputs[i].data) ev_type_text(&inputs[i].type, a, sizeof a);
      ev_type_text(&v->type, b, sizeof b);
      ok = ev_fail(e, "input %u ('%s') is %s but must be %s", i + 1, v->name, a, b);
      break;
    }
    ok = check_values(e, &inputs[i], v->name);
    vals[ir_func(m, f)->inputs[i].id] = ev_tensor_dup(&inputs[i]);
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
      ok = ev_fail(e, "more than %d operands or results", MAX_RESULTS);
      break;
    }
    for (uint32_t i = 0; ok && i < o->ninputs; i++) {
      if (o->inputs[i].id >= nvals || !vals[o->inputs[i].id].data)
        ok = ev_fail(e, "operand %u ('%s') has no value yet", i + 1, ir_value(m, o->inputs[i])->name);
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
      ok = ev_fail(e, "output '%s' has no value", ir_func(m, f)->outputs[i].name);
    else outputs[i] = ev_tensor_dup(&vals[v.id]);
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
