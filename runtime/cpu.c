/*
 * The CPU reference backend, first increment: an interpreter of one MIL
 * function as orion_open() loaded it (see orion/cpu.h for the API and the
 * numerics, and the MIL spec §3 for each op's semantics).
 *
 * How it works. cpu_prepare gives every value of the function (parameters,
 * then each statement's results in order) a slot number, checks that each op
 * is in the kernel table below and that every type is a fixed-shape tensor of
 * a dtype the interpreter holds, and converts each `const` (inline literal or
 * verified BLOBFILE weight) once. cpu_run fills the parameter slots from the
 * caller's tensors, then runs the statements in order: each result is
 * allocated with its declared shape, computed by its kernel, and rounded to
 * its dtype under the numerics mode. Outputs are converted back to the API's
 * element storage.
 *
 * Storage. Every value is held as an array of doubles, whatever its dtype.
 * That keeps one kernel per op for fp16, fp32, int32 and bool alike; since
 * each float result is rounded to fp32 (or fp16) as soon as its op finishes,
 * the values are exactly those an fp32-storage interpreter holds, and the
 * arithmetic inside an op (products, sums, transcendental functions) is at
 * least as precise as fp32. A later increment replaces this with planned
 * fp32/fp16 buffers for speed.
 *
 * Linear algebra. matmul, linear and the 1x1 / groups 1 / stride 1 /
 * unpadded conv (what lower-linear produces) run on OpenBLAS's sgemm: the
 * operands are converted to float (exactly, since every float value held is
 * an fp32 or fp16 value), the products are accumulated in fp32, and the
 * result is rounded to its dtype like every other op's. Float consts that are
 * operands of these ops get a float copy once, at prepare time. Other convs
 * and integer operands keep the plain loops.
 *
 * Shapes. Result shapes are taken from the MIL's declared result types (the
 * program was verified when it was emitted); each kernel checks that its
 * operands agree with them and reports at the statement otherwise, so a
 * hand-written program with a wrong declaration fails cleanly.
 */
#include "orion/cpu.h"

#include <cblas.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "orion/fp16.h"

/* One value: a dense row-major tensor held as doubles (see above), or a
 * string scalar (pad_type, mode, dtype arguments). */
typedef struct Val {
  MilDType dt;
  uint32_t rank;
  int64_t dims[MIL_MAX_RANK];
  int64_t n;
  double *d;
  const char *str;
  bool owned; /* d belongs to this slot (results, inputs, converted literals) */
  float *f;   /* prepared consts only: d as floats, owned with d (see fview) */
} Val;

typedef struct Ctx Ctx;
/* A kernel computes the results of statement x->s into out[0..nout), which
 * arrive allocated with their declared shapes. `code` selects a variant. */
typedef bool (*Kernel)(Ctx *x, int code, Val *out, uint32_t nout);

typedef struct OpEntry {
  const char *name;
  Kernel fn;
  int code;
} OpEntry;

struct CpuProgram {
  OrionProgram *prog;
  uint32_t fn;
  const MilFunc *f;
  CpuNumerics mode;
  uint32_t nslots;
  uint32_t *base;        /* per statement: the slot of its first result */
  const OpEntry **ops;   /* per statement: its kernel (NULL for const) */
  Val *consts;           /* nslots entries; const results filled, owned here */
  uint32_t nin, nout;
  uint32_t *in_param;    /* per API input: the MIL parameter index */
  uint32_t *out_slot;    /* per API output: the slot returned */
};

/* The state of one run while a statement executes. Literal operands are
 * converted into tmp and freed after the statement. */
#define MAX_TMP 16
struct Ctx {
  const CpuProgram *c;
  Val *slots;
  Diag *d;
  const MilStmt *s;
  Val tmp[MAX_TMP];
  uint32_t ntmp;
};

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

size_t cpu_dtype_size(MilDType t) {
  switch (t) {
  case MIL_DT_FP16: return 2;
  case MIL_DT_FP32: return 4;
  case MIL_DT_INT32: return 4;
  case MIL_DT_BOOL: return sizeof(bool);
  default: return 0;
  }
}

static void val_alloc(Val *v, const MilType *t) {
  memset(v, 0, sizeof *v);
  v->dt = t->dtype;
  v->rank = t->rank;
  memcpy(v->dims, t->dims, sizeof v->dims);
  v->n = elements(t->dims, t->rank);
  v->d = xcalloc(v->n ? (size_t)v->n : 1, sizeof(double));
  v->owned = true;
}

static void val_free(Val *v) {
  if (v->owned) {
    free(v->d);
    free(v->f);
  }
  memset(v, 0, sizeof *v);
}

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

/* Converts an inline literal to a value (shared by const statements and
 * literal operands). A one-element payload splats. */
static bool literal_val(const MilLiteral *l, Val *v, const char **why) {
  const MilType *t = &l->type;
  memset(v, 0, sizeof *v);
  if (t->kind != MIL_TYPE_TENSOR) return *why = "is not a tensor", false;
  if (t->dtype == MIL_DT_STRING) {
    if (l->payload != MIL_PAYLOAD_INLINE || l->count != 1 || !l->strings) return *why = "is not one string", false;
    v->dt = MIL_DT_STRING;
    v->str = l->strings[0];
    return true;
  }
  if (!dtype_held(t->dtype)) return *why = "has an element type the CPU backend does not hold", false;
  for (uint32_t i = 0; i < t->rank; i++)
    if (t->dims[i] < 0) return *why = "has an unknown dimension", false;
  if (l->payload != MIL_PAYLOAD_INLINE) return *why = "has no inline data", false;
  val_alloc(v, t);
  if (l->count != (uint64_t)v->n && l->count != 1) {
    val_free(v);
    return *why = "has the wrong number of elements", false;
  }
  for (int64_t i = 0; i < v->n; i++) {
    uint64_t k = l->count == 1 ? 0 : (uint64_t)i;
    v->d[i] = l->floats ? l->floats[k] : l->ints ? (double)l->ints[k] : l->bools ? (l->bools[k] ? 1.0 : 0.0) : 0.0;
  }
  return true;
}

/* Converts a verified BLOBFILE weight; memcpy per element, as the mapping
 * gives no alignment guarantee we rely on. */
static void weight_val(const OrionWeight *w, const MilType *t, Val *v) {
  val_alloc(v, t);
  const unsigned char *p = w->data;
  for (int64_t i = 0; i < v->n; i++) {
    switch (w->dtype) {
    case MIL_DT_FP16: {
      uint16_t h;
      memcpy(&h, p + 2 * i, 2);
      v->d[i] = (double)fp16_to_float(h);
      break;
    }
    case MIL_DT_FP32: {
      float f;
      memcpy(&f, p + 4 * i, 4);
      v->d[i] = (double)f;
      break;
    }
    case MIL_DT_INT32: {
      int32_t k;
      memcpy(&k, p + 4 * i, 4);
      v->d[i] = k;
      break;
    }
    case MIL_DT_INT8: v->d[i] = (int8_t)p[i]; break;
    default: v->d[i] = p[i]; break; /* uint8 */
    }
  }
}

/* Rounds a freshly computed result to what its dtype holds under the mode. */
static void round_result(const CpuProgram *c, Val *v) {
  if (v->dt == MIL_DT_FP16 && c->mode == CPU_NUMERICS_ANE) {
    for (int64_t i = 0; i < v->n; i++) v->d[i] = (double)fp16_to_float(fp16_from_float((float)v->d[i]));
  } else if (v->dt == MIL_DT_FP16 || v->dt == MIL_DT_FP32) {
    for (int64_t i = 0; i < v->n; i++) v->d[i] = (double)(float)v->d[i];
  } else if (v->dt == MIL_DT_BOOL) {
    for (int64_t i = 0; i < v->n; i++) v->d[i] = v->d[i] != 0;
  }
}

/* ---- operands ---- */

static const MilArg *find_arg(const MilStmt *s, const char *name) {
  for (uint32_t i = 0; i < s->nargs; i++)
    if (!strcmp(s->args[i].name, name)) return &s->args[i];
  return NULL;
}

static const Val *operand(Ctx *x, const MilOperand *o) {
  if (o->kind == MIL_OPERAND_NAME) {
    uint32_t slot = o->def_stmt == MIL_DEF_PARAM ? o->def_index : x->c->base[o->def_stmt] + o->def_index;
    return &x->slots[slot];
  }
  if (x->ntmp == MAX_TMP) return fail(x, "too many literal operands"), NULL;
  const char *why;
  Val *v = &x->tmp[x->ntmp];
  if (!literal_val(o->literal, v, &why)) return fail(x, "a literal operand %s", why), NULL;
  x->ntmp++;
  return v;
}

/* The value of argument `name`, NULL when absent (no error: optional). */
static const Val *opt_arg(Ctx *x, const char *name, bool *ok) {
  const MilArg *a = find_arg(x->s, name);
  if (!a) return NULL;
  if (a->is_list || a->nitems != 1) {
    *ok = fail(x, "argument '%s' must be a single value", name);
    return NULL;
  }
  const Val *v = operand(x, &a->items[0]);
  if (!v) *ok = false;
  return v;
}

static const Val *req_arg(Ctx *x, const char *name, bool *ok) {
  if (!find_arg(x->s, name)) {
    *ok = fail(x, "missing argument '%s'", name);
    return NULL;
  }
  return opt_arg(x, name, ok);
}

/* A numeric scalar argument (default dflt when absent). */
/* Doubles from MIL constants or inputs may be huge or NaN; casting those to an integer is undefined,
 * so they saturate (NaN to the most negative value), which every caller then rejects as out of range. */
static int64_t to_index(double d) {
  if (!(d >= -9.2e18)) return INT64_MIN;
  if (d >= 9.2e18) return INT64_MAX;
  return (int64_t)d;
}

static double scalar_arg(Ctx *x, const char *name, double dflt, bool *ok) {
  const Val *v = opt_arg(x, name, ok);
  if (!v) return dflt;
  if (v->dt == MIL_DT_STRING || v->n != 1) {
    *ok = fail(x, "argument '%s' must be a scalar", name);
    return dflt;
  }
  return v->d[0];
}

static const char *string_arg(Ctx *x, const char *name, const char *dflt, bool *ok) {
  const Val *v = opt_arg(x, name, ok);
  if (!v) return dflt;
  if (v->dt != MIL_DT_STRING) {
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
  if (v->dt == MIL_DT_STRING || v->n > (int64_t)max) {
    *ok = fail(x, "argument '%s' must be a list of at most %u integers", name, max);
    return false;
  }
  for (int64_t i = 0; i < v->n; i++) buf[i] = to_index(v->d[i]);
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
  int64_t st[MIL_MAX_RANK];
  strides_of(in->dims, in->rank, st);
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
    bst[i] = d == 1 ? 0 : st[i - lead];
  }
  return true;
}

/* ---- element-wise ---- */

enum { U_RELU, U_TANH, U_SIGMOID, U_SILU, U_GELU, U_EXP, U_LOG, U_SQRT, U_RSQRT, U_ABS, U_IDENTITY, U_CLIP };

static bool k_unary(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok);
  double eps = 0, lo = 0, hi = 0;
  int gelu = 0; /* 0 exact, 1 tanh, 2 sigmoid */
  if (code == U_LOG) eps = scalar_arg(x, "epsilon", a && a->dt == MIL_DT_FP16 ? 0.0 : 1e-45, &ok);
  if (code == U_RSQRT) eps = scalar_arg(x, "epsilon", a && a->dt == MIL_DT_FP16 ? 0.0 : 1e-12, &ok);
  if (code == U_CLIP) {
    lo = scalar_arg(x, "alpha", 0, &ok);
    hi = scalar_arg(x, "beta", 0, &ok);
    if (ok && (!find_arg(x->s, "alpha") || !find_arg(x->s, "beta"))) return fail(x, "needs both alpha and beta");
  }
  if (code == U_GELU) {
    const char *m = string_arg(x, "mode", "EXACT", &ok);
    if (!ok) return false;
    if (!strcmp(m, "TANH_APPROXIMATION")) gelu = 1;
    else if (!strcmp(m, "SIGMOID_APPROXIMATION")) gelu = 2;
    else if (strcmp(m, "EXACT")) return fail(x, "unknown mode '%s'", m);
  }
  if (!ok) return false;
  if (!expect_shape(x, out, a->dims, a->rank)) return false;
  for (int64_t i = 0; i < out->n; i++) {
    double v = a->d[i], r;
    switch (code) {
    case U_RELU: r = v > 0 ? v : 0; break;
    case U_TANH: r = tanh(v); break;
    case U_SIGMOID: r = 1 / (1 + exp(-v)); break;
    case U_SILU: r = v / (1 + exp(-v)); break;
    case U_GELU:
      r = gelu == 0 ? 0.5 * v * (1 + erf(v / sqrt(2.0)))
          : gelu == 1 ? 0.5 * v * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (v + 0.044715 * v * v * v)))
                      : v / (1 + exp(-1.702 * v));
      break;
    case U_EXP: r = exp(v); break;
    case U_LOG: r = log(v + eps); break;
    case U_SQRT: r = sqrt(v); break;
    case U_RSQRT: r = 1 / sqrt(v + eps); break;
    case U_ABS: r = fabs(v); break;
    case U_CLIP: r = fmin(fmax(v, lo), hi); break;
    default: r = v; break; /* identity */
    }
    out->d[i] = r;
  }
  return true;
}

enum { B_ADD, B_SUB, B_MUL, B_DIV, B_POW, B_MAX, B_MIN };

static bool k_binary(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok), *b = req_arg(x, "y", &ok);
  if (!ok) return false;
  int64_t sa[MIL_MAX_RANK], sb[MIL_MAX_RANK];
  if (!bcast_strides(x, a, out, sa) || !bcast_strides(x, b, out, sb)) return false;
  bool integer = out->dt == MIL_DT_INT32;
  for (int64_t i = 0; i < out->n; i++) {
    double u = a->d[offset_at(i, out->dims, out->rank, sa)], v = b->d[offset_at(i, out->dims, out->rank, sb)], r;
    switch (code) {
    case B_ADD: r = u + v; break;
    case B_SUB: r = u - v; break;
    case B_MUL: r = u * v; break;
    case B_DIV: r = integer ? (v == 0 ? 0 : trunc(u / v)) : u / v; break;
    case B_POW: r = pow(u, v); break;
    case B_MAX: r = isnan(u) || isnan(v) ? (double)NAN : fmax(u, v); break;
    default: r = isnan(u) || isnan(v) ? (double)NAN : fmin(u, v); break;
    }
    out->d[i] = r;
  }
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
    out->d[i] = c->d[offset_at(i, out->dims, out->rank, sc)] != 0 ? a->d[offset_at(i, out->dims, out->rank, sa)]
                                                                  : b->d[offset_at(i, out->dims, out->rank, sb)];
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
  for (int64_t i = 0; i < out->n; i++) {
    double v = a->d[i];
    switch (t) {
    case MIL_DT_INT32:
      /* NumPy astype truncates toward zero; NaN and out-of-range values are left undefined there, an error here. */
      if (isnan(v) || trunc(v) < -2147483648.0 || trunc(v) > 2147483647.0)
        return fail(x, "cast of %g to int32 is out of range", v);
      out->d[i] = trunc(v);
      break;
    case MIL_DT_BOOL: out->d[i] = v != 0; break;
    /* Converting is what the op is for: fp16 rounds in every mode. */
    case MIL_DT_FP16: out->d[i] = (double)fp16_to_float(fp16_from_double(v)); break;
    default: out->d[i] = (double)(float)v; break;
    }
  }
  return true;
}

/* ---- reductions and normalizations ---- */

static bool k_softmax(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok);
  double axis_d = scalar_arg(x, "axis", -1, &ok);
  uint32_t ax = 0;
  if (!ok || !norm_axis(x, to_index(axis_d), a->rank, &ax) || !expect_shape(x, out, a->dims, a->rank)) return false;
  int64_t pre = elements(a->dims, ax), len = a->dims[ax], post = elements(a->dims + ax + 1, a->rank - ax - 1);
  for (int64_t p = 0; p < pre; p++)
    for (int64_t q = 0; q < post; q++) {
      const double *in = a->d + p * len * post + q;
      double *o = out->d + p * len * post + q;
      double mx = -HUGE_VAL, sum = 0;
      for (int64_t k = 0; k < len; k++) mx = fmax(mx, in[k * post]);
      for (int64_t k = 0; k < len; k++) sum += o[k * post] = exp(in[k * post] - mx);
      for (int64_t k = 0; k < len; k++) o[k * post] /= sum;
    }
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

static bool k_reduce(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)nout;
  bool ok = true, mask[MIL_MAX_RANK];
  const Val *a = req_arg(x, "x", &ok);
  bool keep = scalar_arg(x, "keep_dims", 0, &ok) != 0;
  if (!ok || !axes_mask(x, a, mask, &ok)) return false;
  int64_t dims[MIL_MAX_RANK] = {0}, kept[MIL_MAX_RANK] = {0}, count = 1;
  uint32_t rank = 0, nk = 0;
  for (uint32_t i = 0; i < a->rank; i++) {
    if (!mask[i]) kept[nk++] = a->dims[i];
    else count *= a->dims[i];
    if (!mask[i] || keep) dims[rank++] = mask[i] ? 1 : a->dims[i];
  }
  if (!expect_shape(x, out, dims, rank)) return false;
  /* Strides that map an input position to its output element (0 on reduced dims). */
  int64_t kst[MIL_MAX_RANK], st[MIL_MAX_RANK];
  strides_of(kept, nk, kst);
  for (uint32_t i = 0, k = 0; i < a->rank; i++) st[i] = mask[i] ? 0 : kst[k++];
  for (int64_t i = 0; i < out->n; i++) out->d[i] = code == R_MAX ? -HUGE_VAL : 0;
  for (int64_t i = 0; i < a->n; i++) {
    double *o = &out->d[offset_at(i, a->dims, a->rank, st)];
    *o = code == R_MAX ? (isnan(*o) || isnan(a->d[i]) ? (double)NAN : fmax(*o, a->d[i])) : *o + a->d[i];
  }
  if (code == R_MEAN)
    for (int64_t i = 0; i < out->n; i++) {
      out->d[i] /= (double)count;
      if (out->dt == MIL_DT_INT32) out->d[i] = trunc(out->d[i]);
    }
  return true;
}

/* layer_norm: mean and biased variance jointly over `axes`; gamma and beta
 * are indexed by the position within the normalized dims taken in the order
 * `axes` lists them. */
static bool k_layer_norm(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok), *g = opt_arg(x, "gamma", &ok), *b = opt_arg(x, "beta", &ok);
  double eps = scalar_arg(x, "epsilon", 1e-5, &ok);
  int64_t axes[MIL_MAX_RANK];
  uint32_t n;
  bool given = ints_arg(x, "axes", axes, MIL_MAX_RANK, &n, &ok);
  if (!ok || !expect_shape(x, out, a->dims, a->rank)) return false;
  uint32_t ax[MIL_MAX_RANK], nax = 0, outer[MIL_MAX_RANK], nouter = 0;
  bool in_axes[MIL_MAX_RANK] = {false};
  if (!given)
    for (uint32_t i = 0; i < a->rank; i++) axes[n++] = i;
  for (uint32_t i = 0; i < n; i++) {
    if (!norm_axis(x, axes[i], a->rank, &ax[nax])) return false;
    if (in_axes[ax[nax]]) return fail(x, "axis %lld is listed twice", (long long)axes[i]);
    in_axes[ax[nax++]] = true;
  }
  for (uint32_t i = 0; i < a->rank; i++)
    if (!in_axes[i]) outer[nouter++] = i;
  int64_t st[MIL_MAX_RANK], idims[MIL_MAX_RANK], ist[MIL_MAX_RANK], odims[MIL_MAX_RANK], ost[MIL_MAX_RANK];
  strides_of(a->dims, a->rank, st);
  for (uint32_t i = 0; i < nax; i++) idims[i] = a->dims[ax[i]], ist[i] = st[ax[i]];
  for (uint32_t i = 0; i < nouter; i++) odims[i] = a->dims[outer[i]], ost[i] = st[outer[i]];
  int64_t inner = elements(idims, nax), nout_el = elements(odims, nouter);
  if ((g && g->n != inner) || (b && b->n != inner))
    return fail(x, "gamma and beta must have the %lld elements of the normalized dims", (long long)inner);
  for (int64_t o = 0; o < nout_el; o++) {
    int64_t base = offset_at(o, odims, nouter, ost);
    double mean = 0, var = 0;
    for (int64_t k = 0; k < inner; k++) mean += a->d[base + offset_at(k, idims, nax, ist)];
    mean /= (double)inner;
    for (int64_t k = 0; k < inner; k++) {
      double dv = a->d[base + offset_at(k, idims, nax, ist)] - mean;
      var += dv * dv;
    }
    var /= (double)inner;
    double inv = 1 / sqrt(var + eps);
    for (int64_t k = 0; k < inner; k++) {
      int64_t off = base + offset_at(k, idims, nax, ist);
      out->d[off] = (a->d[off] - mean) * inv * (g ? g->d[k] : 1) + (b ? b->d[k] : 0);
    }
  }
  return true;
}

/* ---- shape ops ---- */

static bool k_reshape(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok);
  req_arg(x, "shape", &ok);
  if (!ok) return false;
  if (a->n != out->n) return fail(x, "reshapes %lld elements into %lld", (long long)a->n, (long long)out->n);
  memcpy(out->d, a->d, (size_t)a->n * sizeof(double));
  return true;
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
  int64_t st[MIL_MAX_RANK], pst[MIL_MAX_RANK], dims[MIL_MAX_RANK];
  bool seen[MIL_MAX_RANK] = {false};
  strides_of(a->dims, a->rank, st);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t p = 0;
    if (!norm_axis(x, perm[i], a->rank, &p)) return false;
    if (seen[p]) return fail(x, "perm is not a permutation");
    seen[p] = true;
    dims[i] = a->dims[p];
    pst[i] = st[p];
  }
  if (!expect_shape(x, out, dims, n)) return false;
  for (int64_t i = 0; i < out->n; i++) out->d[i] = a->d[offset_at(i, out->dims, out->rank, pst)];
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
  int64_t st[MIL_MAX_RANK], start[MIL_MAX_RANK], step[MIL_MAX_RANK], cnt[MIL_MAX_RANK], dims[MIL_MAX_RANK] = {0};
  uint32_t rank = 0;
  strides_of(a->dims, r, st);
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
  if (!expect_shape(x, out, dims, rank)) return false;
  int64_t base = 0, sst[MIL_MAX_RANK];
  for (uint32_t i = 0; i < r; i++) base += start[i] * st[i], sst[i] = step[i] * st[i];
  for (int64_t i = 0; i < out->n; i++) out->d[i] = a->d[base + offset_at(i, cnt, r, sst)];
  return true;
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
    if (!expect_shape(x, &out[k], dims, a->rank)) return false;
    int64_t chunk = sizes_buf[k] * post;
    for (int64_t p = 0; p < pre; p++)
      memcpy(out[k].d + p * chunk, a->d + p * len * post + at * post, (size_t)chunk * sizeof(double));
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
  const Val **v = xcalloc(nv, sizeof *v);
  for (uint32_t j = 0; ok && j < nv; j++) ok = (v[j] = operand(x, &va->items[j])) != NULL;
  uint32_t ax = 0;
  ok = ok && norm_axis(x, to_index(axis_d), v[0]->rank, &ax);
  int64_t dims[MIL_MAX_RANK];
  if (ok) {
    memcpy(dims, v[0]->dims, sizeof dims);
    dims[ax] = 0;
    for (uint32_t j = 0; ok && j < nv; j++) {
      bool same = v[j]->rank == v[0]->rank;
      for (uint32_t i = 0; same && i < v[0]->rank; i++)
        same = i == ax ? !inter || v[j]->dims[i] == v[0]->dims[i] : v[j]->dims[i] == v[0]->dims[i];
      if (!same) ok = fail(x, "value %u does not match the shape of the first value", j);
      dims[ax] += v[j]->dims[ax];
    }
  }
  ok = ok && expect_shape(x, out, dims, v[0]->rank);
  if (ok) {
    int64_t pre = elements(dims, ax), len = dims[ax], post = elements(dims + ax + 1, v[0]->rank - ax - 1);
    for (int64_t p = 0; p < pre; p++)
      for (int64_t k = 0; k < len; k++) {
        uint32_t j = 0;
        int64_t at = k;
        if (inter) j = (uint32_t)(k % nv), at = k / nv;
        else
          while (at >= v[j]->dims[ax]) at -= v[j++]->dims[ax];
        int64_t jl = v[j]->dims[ax];
        memcpy(out->d + (p * len + k) * post, v[j]->d + (p * jl + at) * post, (size_t)post * sizeof(double));
      }
  }
  free(v);
  return ok;
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
  if (!expect_shape(x, out, dims, rank)) return false;
  int64_t pre = elements(a->dims, ax), len = a->dims[ax], post = elements(a->dims + ax + 1, a->rank - ax - 1);
  /* iOS15/16 wrap negative indices; from iOS17 they are out of bounds. */
  bool wrap = x->c->f->ios < 17;
  for (int64_t p = 0; p < pre; p++)
    for (int64_t j = 0; j < ind->n; j++) {
      int64_t k = to_index(ind->d[j]);
      if (k < 0 && wrap) k += len;
      if (k < 0 || k >= len)
        return fail(x, "index %g is out of range for dimension %u of size %lld", ind->d[j], ax,
                    (long long)len);
      memcpy(out->d + (p * ind->n + j) * post, a->d + (p * len + k) * post, (size_t)post * sizeof(double));
    }
  return true;
}

/* ---- linear algebra ---- */

static bool is_float(MilDType t) { return t == MIL_DT_FP16 || t == MIL_DT_FP32; }

static float *falloc(int64_t n) { return xmalloc((size_t)(n > 0 ? n : 1) * sizeof(float)); }

static void to_float(const double *src, float *dst, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = (float)src[i];
}

static void to_double(const float *src, double *dst, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = (double)src[i];
}

/* v's elements as floats: the prepared copy of a const, else converted into
 * a new buffer *scratch (which the caller frees). */
static const float *fview(const Val *v, float **scratch) {
  if (v->f) return v->f;
  *scratch = falloc(v->n);
  to_float(v->d, *scratch, v->n);
  return *scratch;
}

/* C[M, N] = A[M, K] * B[K, N] (+ bias[n] on every row when bias is set) in
 * fp32, row-major; ta/tb mean the operand is stored transposed, with leading
 * dimensions lda/ldb. The result goes to dst as doubles. */
static void sgemm_to(const float *A, bool ta, int64_t lda, const float *B, bool tb, int64_t ldb, int64_t M,
                     int64_t N, int64_t K, const double *bias, bool bias_per_row, float *C, double *dst) {
  if (M == 0 || N == 0) return;
  float beta = 0;
  if (bias) {
    for (int64_t m = 0; m < M; m++)
      for (int64_t n = 0; n < N; n++) C[m * N + n] = (float)bias[bias_per_row ? m : n];
    beta = 1;
  } else if (K == 0) {
    memset(C, 0, (size_t)(M * N) * sizeof(float));
  }
  if (K > 0)
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (blasint)M,
                (blasint)N, (blasint)K, 1.0f, A, (blasint)(lda > 0 ? lda : 1), B, (blasint)(ldb > 0 ? ldb : 1), beta,
                C, (blasint)N);
  to_double(C, dst, M * N);
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
  uint32_t ra = a->rank > 2 ? a->rank - 2 : 0, rb = b->rank > 2 ? b->rank - 2 : 0, rbat = ra > rb ? ra : rb;
  int64_t bdims[MIL_MAX_RANK], sa[MIL_MAX_RANK], sb[MIL_MAX_RANK];
  for (uint32_t i = 0; i < rbat; i++) {
    int64_t da = i + ra >= rbat ? a->dims[i + ra - rbat] : 1, db = i + rb >= rbat ? b->dims[i + rb - rbat] : 1;
    if (da != db && da != 1 && db != 1) return fail(x, "batch dimensions %lld and %lld do not broadcast", (long long)da, (long long)db);
    bdims[i] = da > db ? da : db;
    if (da == 0 || db == 0) bdims[i] = 0;
    sa[i] = da == 1 ? 0 : ast[i + ra - rbat];
    sb[i] = db == 1 ? 0 : bst[i + rb - rbat];
  }
  int64_t dims[MIL_MAX_RANK];
  uint32_t rank = rbat;
  memcpy(dims, bdims, sizeof(int64_t) * rbat);
  if (a->rank > 1) dims[rank++] = M;
  if (b->rank > 1) dims[rank++] = N;
  if (!expect_shape(x, out, dims, rank)) return false;
  int64_t nb = elements(bdims, rbat);
  if (is_float(out->dt) && is_float(a->dt) && is_float(b->dt)) {
    /* Each batch's x is [M, K] row-major (a rank-1 x is one row), or [K, M]
     * when transposed; y is [K, N] (a rank-1 y one column), or [N, K]. */
    float *sa_f = NULL, *sb_f = NULL, *c_f = falloc(M * N);
    const float *fa = fview(a, &sa_f), *fb = fview(b, &sb_f);
    bool ta = tx, tb = ty;
    int64_t lda = a->rank == 1 ? K : tx ? ak_st : am_st, ldb = b->rank == 1 ? 1 : ty ? bn_st : bk_st;
    for (int64_t t = 0; t < nb; t++)
      sgemm_to(fa + offset_at(t, bdims, rbat, sa), ta, lda, fb + offset_at(t, bdims, rbat, sb), tb, ldb, M, N, K,
               NULL, false, c_f, out->d + t * M * N);
    free(sa_f);
    free(sb_f);
    free(c_f);
    return true;
  }
  for (int64_t t = 0; t < nb; t++) {
    const double *pa = a->d + offset_at(t, bdims, rbat, sa), *pb = b->d + offset_at(t, bdims, rbat, sb);
    double *po = out->d + t * M * N;
    for (int64_t m = 0; m < M; m++)
      for (int64_t n = 0; n < N; n++) {
        double s = 0;
        for (int64_t k = 0; k < K; k++) s += pa[m * am_st + k * ak_st] * pb[k * bk_st + n * bn_st];
        po[m * N + n] = s;
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
  if (is_float(out->dt) && is_float(a->dt) && is_float(w->dt)) {
    float *sa_f = NULL, *sw_f = NULL, *c_f = falloc(rows * dout);
    const float *fa = fview(a, &sa_f), *fw = fview(w, &sw_f);
    sgemm_to(fa, false, din, fw, true, din, rows, dout, din, b ? b->d : NULL, false, c_f, out->d);
    free(sa_f);
    free(sw_f);
    free(c_f);
    return true;
  }
  for (int64_t r = 0; r < rows; r++)
    for (int64_t o = 0; o < dout; o++) {
      double s = b ? b->d[o] : 0;
      for (int64_t k = 0; k < din; k++) s += a->d[r * din + k] * w->d[o * din + k];
      out->d[r * dout + o] = s;
    }
  return true;
}

/* conv with 1 or 2 spatial dims (a 1-D conv is a 2-D one of height 1). */
static bool k_conv(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok), *w = req_arg(x, "weight", &ok), *b = opt_arg(x, "bias", &ok);
  if (!ok) return false;
  if (a->rank < 3 || a->rank > 4 || w->rank != a->rank)
    return fail(x, "only 1-D and 2-D convolutions are supported (x and weight of rank 3 or 4)");
  uint32_t S = a->rank - 2;
  int64_t str[2] = {1, 1}, dil[2] = {1, 1}, tmp[4] = {0};
  uint32_t n;
  if (ints_arg(x, "strides", tmp, 2, &n, &ok) && n == S) memcpy(str, tmp, S * sizeof(int64_t));
  else if (ok && n) return fail(x, "strides needs %u entries", S);
  if (ints_arg(x, "dilations", tmp, 2, &n, &ok) && n == S) memcpy(dil, tmp, S * sizeof(int64_t));
  else if (ok && n) return fail(x, "dilations needs %u entries", S);
  int64_t groups = to_index(scalar_arg(x, "groups", 1, &ok));
  const char *pt = string_arg(x, "pad_type", "valid", &ok);
  bool has_pad = ints_arg(x, "pad", tmp, 4, &n, &ok);
  if (!ok) return false;
  int64_t N = a->dims[0], C = a->dims[1], O = w->dims[0], CG = w->dims[1];
  int64_t D[2] = {S == 2 ? a->dims[2] : 1, a->dims[a->rank - 1]}, Kd[2] = {S == 2 ? w->dims[2] : 1, w->dims[w->rank - 1]};
  int64_t st2[2] = {S == 2 ? str[0] : 1, str[S - 1]}, dl2[2] = {S == 2 ? dil[0] : 1, dil[S - 1]};
  int64_t before[2] = {0, 0}, total[2] = {0, 0};
  if (groups < 1 || C % groups || O % groups || CG != C / groups)
    return fail(x, "groups %lld does not fit %lld input channels and a weight of %lld per group", (long long)groups,
                (long long)C, (long long)CG);
  if (b && b->n != O) return fail(x, "bias must have %lld elements", (long long)O);
  for (uint32_t i = 0; i < 2; i++) {
    if (st2[i] < 1 || dl2[i] < 1) return fail(x, "strides and dilations must be positive");
    int64_t ek = (Kd[i] - 1) * dl2[i] + 1;
    uint32_t si = S == 2 ? i : 0; /* index into the MIL pad list */
    if (!strcmp(pt, "valid")) continue;
    if (!strcmp(pt, "custom")) {
      if (!has_pad || n != 2 * S) return fail(x, "pad_type custom needs pad with %u entries", 2 * S);
      if (S == 1 && i == 0) continue;
      before[i] = tmp[2 * si], total[i] = tmp[2 * si] + tmp[2 * si + 1];
    } else if (!strcmp(pt, "same") || !strcmp(pt, "same_lower")) {
      int64_t outd = (D[i] + st2[i] - 1) / st2[i], p = outd * st2[i] - D[i] + ek - st2[i];
      total[i] = p > 0 ? p : 0;
      before[i] = !strcmp(pt, "same") ? total[i] / 2 : total[i] - total[i] / 2;
    } else {
      return fail(x, "unknown pad_type '%s'", pt);
    }
  }
  int64_t OD[2];
  for (uint32_t i = 0; i < 2; i++) OD[i] = (D[i] + total[i] - ((Kd[i] - 1) * dl2[i] + 1)) / st2[i] + 1;
  int64_t dims[4] = {N, O, OD[0], OD[1]};
  if (S == 1) dims[2] = OD[1];
  if (!expect_shape(x, out, dims, a->rank)) return false;
  int64_t OG = O / groups;
  if (groups == 1 && Kd[0] == 1 && Kd[1] == 1 && st2[0] == 1 && st2[1] == 1 && total[0] == 0 && total[1] == 0 &&
      is_float(out->dt) && is_float(a->dt) && is_float(w->dt)) {
    /* A pointwise conv: per batch item, out[O, P] = weight[O, C] * x[C, P]. */
    int64_t P = D[0] * D[1];
    float *sa_f = NULL, *sw_f = NULL, *c_f = falloc(O * P);
    const float *fa = fview(a, &sa_f), *fw = fview(w, &sw_f);
    for (int64_t nn = 0; nn < N; nn++)
      sgemm_to(fw, false, C, fa + nn * C * P, false, P, O, P, C, b ? b->d : NULL, true, c_f, out->d + nn * O * P);
    free(sa_f);
    free(sw_f);
    free(c_f);
    return true;
  }
  for (int64_t nn = 0; nn < N; nn++)
    for (int64_t o = 0; o < O; o++) {
      int64_t g = o / OG;
      for (int64_t oy = 0; oy < OD[0]; oy++)
        for (int64_t ox = 0; ox < OD[1]; ox++) {
          double s = b ? b->d[o] : 0;
          for (int64_t c = 0; c < CG; c++)
            for (int64_t ky = 0; ky < Kd[0]; ky++) {
              int64_t iy = oy * st2[0] - before[0] + ky * dl2[0];
              if (iy < 0 || iy >= D[0]) continue;
              for (int64_t kx = 0; kx < Kd[1]; kx++) {
                int64_t ix = ox * st2[1] - before[1] + kx * dl2[1];
                if (ix < 0 || ix >= D[1]) continue;
                s += a->d[((nn * C + g * CG + c) * D[0] + iy) * D[1] + ix] * w->d[((o * CG + c) * Kd[0] + ky) * Kd[1] + kx];
              }
            }
          out->d[((nn * O + o) * OD[0] + oy) * OD[1] + ox] = s;
        }
    }
  return true;
}

/* ---- the op table ---- */

static const OpEntry op_table[] = {
    {"identity", k_unary, U_IDENTITY},
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
    {"select", k_select, 0},
    {"cast", k_cast, 0},
    {"softmax", k_softmax, 0},
    {"reduce_sum", k_reduce, R_SUM},
    {"reduce_mean", k_reduce, R_MEAN},
    {"reduce_max", k_reduce, R_MAX},
    {"layer_norm", k_layer_norm, 0},
    {"reshape", k_reshape, 0},
    {"transpose", k_transpose, 0},
    {"slice_by_index", k_slice, 0},
    {"split", k_split, 0},
    {"concat", k_concat, 0},
    {"gather", k_gather, 0},
    {"matmul", k_matmul, 0},
    {"linear", k_linear, 0},
    {"conv", k_conv, 0},
};

static const OpEntry *find_op(const char *name) {
  for (size_t i = 0; i < sizeof op_table / sizeof op_table[0]; i++)
    if (!strcmp(op_table[i].name, name)) return &op_table[i];
  return NULL;
}

/* ---- preparing ---- */

static bool check_type(Diag *d, const MilType *t, SrcSpan loc, const char *what, const char *name, bool allow_string) {
  if (t->kind != MIL_TYPE_TENSOR || !(dtype_held(t->dtype) || (allow_string && t->dtype == MIL_DT_STRING))) {
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

static bool prepare_const(CpuProgram *c, uint32_t si, Diag *d) {
  const MilStmt *s = &c->f->stmts[si];
  const MilAttr *val = mil_find_attr(s->attrs, s->nattrs, "val");
  Val *v = &c->consts[c->base[si]];
  if (!val || s->nresults != 1) {
    diag_error(d, s->loc, "const without a val");
    return false;
  }
  if (val->value->payload == MIL_PAYLOAD_BLOB) {
    for (uint32_t i = 0; i < orion_weight_count(c->prog, c->fn); i++) {
      const OrionWeight *w = orion_weight(c->prog, c->fn, i);
      if (w->stmt == si && !strcmp(w->attr, "val")) {
        weight_val(w, &val->value->type, v);
        v->dt = s->results[0].type.dtype;
        return true;
      }
    }
    diag_error(d, s->loc, "const '%s': its BLOBFILE was not loaded", s->results[0].name);
    return false;
  }
  const char *why;
  if (!literal_val(val->value, v, &why)) {
    diag_error(d, s->loc, "const '%s' %s", s->results[0].name, why);
    return false;
  }
  return true;
}

CpuProgram *cpu_prepare(OrionProgram *p, uint32_t fn, CpuNumerics mode, Diag *d) {
  CpuProgram *c = xcalloc(1, sizeof *c);
  c->prog = p;
  c->fn = fn;
  c->f = orion_function_mil(p, fn);
  c->mode = mode;
  const MilFunc *f = c->f;
  bool ok = true;
  if (orion_function_has_dynamic_shapes(p, fn)) {
    diag_error(d, f->loc, "function '%s' has flexible shapes; programs with flexible shapes are not supported",
               f->name);
    ok = false;
  }
  c->base = xcalloc(f->nstmts ? f->nstmts : 1, sizeof *c->base);
  c->ops = xcalloc(f->nstmts ? f->nstmts : 1, sizeof *c->ops);
  c->nslots = f->nparams;
  for (uint32_t i = 0; i < f->nstmts; i++) {
    c->base[i] = c->nslots;
    c->nslots += f->stmts[i].nresults;
  }
  c->consts = xcalloc(c->nslots ? c->nslots : 1, sizeof *c->consts);
  for (uint32_t i = 0; ok && i < f->nparams; i++)
    ok = check_type(d, &f->params[i].type, f->params[i].loc, "input", f->params[i].name, false);
  for (uint32_t i = 0; i < f->nstmts; i++) {
    const MilStmt *s = &f->stmts[i];
    bool is_const = !strcmp(s->op, "const");
    if (!is_const && !(c->ops[i] = find_op(s->op))) {
      diag_error(d, s->op_loc, "op '%s' is not supported by the CPU backend", s->op);
      ok = false;
      continue;
    }
    bool types_ok = true;
    for (uint32_t k = 0; types_ok && k < s->nresults; k++)
      types_ok = check_type(d, &s->results[k].type, s->results[k].loc, "value", s->results[k].name, is_const);
    ok = ok && types_ok && (!is_const || prepare_const(c, i, d));
  }
  /* Float copies of the consts that feed sgemm (see fview). */
  for (uint32_t i = 0; ok && i < f->nstmts; i++) {
    const MilStmt *s = &f->stmts[i];
    if (!c->ops[i] || (c->ops[i]->fn != k_matmul && c->ops[i]->fn != k_linear && c->ops[i]->fn != k_conv)) continue;
    for (uint32_t k = 0; k < s->nargs; k++)
      for (uint32_t j = 0; j < s->args[k].nitems; j++) {
        const MilOperand *o = &s->args[k].items[j];
        if (o->kind != MIL_OPERAND_NAME || o->def_stmt == MIL_DEF_PARAM || c->ops[o->def_stmt]) continue;
        Val *v = &c->consts[c->base[o->def_stmt] + o->def_index];
        if (!is_float(v->dt) || v->f || !v->d) continue;
        v->f = falloc(v->n);
        to_float(v->d, v->f, v->n);
      }
  }
  c->nin = orion_input_count(p, fn);
  c->nout = orion_output_count(p, fn);
  c->in_param = xcalloc(c->nin + 1, sizeof *c->in_param);
  c->out_slot = xcalloc(c->nout + 1, sizeof *c->out_slot);
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
  }
  if (!ok) {
    cpu_free(c);
    return NULL;
  }
  return c;
}

void cpu_free(CpuProgram *c) {
  if (!c) return;
  for (uint32_t i = 0; i < c->nslots; i++) val_free(&c->consts[i]);
  free(c->consts);
  free(c->base);
  free(c->ops);
  free(c->in_param);
  free(c->out_slot);
  free(c);
}

/* ---- running ---- */

static bool input_val(const CpuProgram *c, uint32_t i, const CpuTensor *t, Val *v, Diag *d) {
  const MilVar *pv = &c->f->params[c->in_param[i]];
  const MilType *ty = &pv->type;
  bool same = t->dtype == ty->dtype && t->rank == ty->rank && (t->data || !elements(ty->dims, ty->rank));
  for (uint32_t k = 0; same && k < ty->rank; k++) same = t->dims[k] == ty->dims[k];
  if (!same) {
    StrBuf sb;
    sb_init(&sb);
    mil_type_print(ty, &sb);
    diag_error(d, pv->loc, "input %u ('%s') must be %s with data", i, pv->name, sb.data);
    sb_free(&sb);
    return false;
  }
  val_alloc(v, ty);
  for (int64_t k = 0; k < v->n; k++) {
    switch (t->dtype) {
    case MIL_DT_FP16: v->d[k] = (double)fp16_to_float(((const uint16_t *)t->data)[k]); break;
    case MIL_DT_FP32: v->d[k] = (double)((const float *)t->data)[k]; break;
    case MIL_DT_INT32: v->d[k] = ((const int32_t *)t->data)[k]; break;
    default: v->d[k] = ((const bool *)t->data)[k] ? 1 : 0; break;
    }
  }
  return true;
}

static void output_tensor(const Val *v, CpuTensor *t) {
  t->dtype = v->dt;
  t->rank = v->rank;
  memcpy(t->dims, v->dims, sizeof t->dims);
  size_t es = cpu_dtype_size(v->dt);
  t->data = xcalloc(v->n ? (size_t)v->n : 1, es);
  for (int64_t k = 0; k < v->n; k++) {
    switch (v->dt) {
    case MIL_DT_FP16: ((uint16_t *)t->data)[k] = fp16_from_double(v->d[k]); break;
    case MIL_DT_FP32: ((float *)t->data)[k] = (float)v->d[k]; break;
    case MIL_DT_INT32: ((int32_t *)t->data)[k] = (int32_t)fmax(fmin(to_index(v->d[k]), 2147483647.0), -2147483648.0); break;
    default: ((bool *)t->data)[k] = v->d[k] != 0; break;
    }
  }
}

bool cpu_run(CpuProgram *c, const CpuTensor *inputs, CpuTensor *outputs, Diag *d) {
  const MilFunc *f = c->f;
  for (uint32_t i = 0; i < c->nout; i++) memset(&outputs[i], 0, sizeof outputs[i]);
  Val *slots = xcalloc(c->nslots ? c->nslots : 1, sizeof *slots);
  bool ok = true;
  for (uint32_t i = 0; ok && i < c->nin; i++) ok = input_val(c, i, &inputs[i], &slots[c->in_param[i]], d);
  Ctx x = {.c = c, .slots = slots, .d = d};
  for (uint32_t si = 0; ok && si < f->nstmts; si++) {
    const MilStmt *s = &f->stmts[si];
    Val *out = &slots[c->base[si]];
    if (!c->ops[si]) { /* const: share the prepared value */
      out[0] = c->consts[c->base[si]];
      out[0].owned = false;
      continue;
    }
    for (uint32_t k = 0; k < s->nresults; k++) val_alloc(&out[k], &s->results[k].type);
    x.s = s;
    x.ntmp = 0;
    ok = c->ops[si]->fn(&x, c->ops[si]->code, out, s->nresults);
    for (uint32_t k = 0; ok && k < s->nresults; k++) round_result(c, &out[k]);
    for (uint32_t k = 0; k < x.ntmp; k++) val_free(&x.tmp[k]);
  }
  for (uint32_t i = 0; ok && i < c->nout; i++) output_tensor(&slots[c->out_slot[i]], &outputs[i]);
  for (uint32_t i = 0; i < c->nslots; i++) val_free(&slots[i]);
  free(slots);
  return ok;
}

void cpu_tensor_free(CpuTensor *t) {
  if (!t) return;
  free(t->data);
  memset(t, 0, sizeof *t);
}
