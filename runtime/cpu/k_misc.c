/*
 * The other kernels: indices of extremes (reduce_argmax/argmin, topk),
 * pooling, quantize/dequantize and lstm.
 */
#include "cpu_internal.h"
#include "orion/op_semantics.h"

#include <math.h>

#include "cpu_math.h"

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

/* A copy of the n bytes at p. */
static void *dup_job(const void *p, size_t n) { return memcpy(xmalloc(n), p, n); }

/* reduce_argmax / reduce_argmin(x, axis?=-1, keep_dims?=false,
 * output_dtype?="int32"): int32 indices. */
bool bind_argreduce(Ctx *x, int code, Val *out, uint32_t nout, void **bound) {
  (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, SHARED_x, &ok);
  double axis_d = scalar_arg(x, SHARED_axis, -1, &ok);
  bool keep = scalar_arg(x, SHARED_arg_keep_dims, 0, &ok) != 0;
  const char *odt = string_arg(x, SHARED_arg_output_dtype, "int32", &ok);
  uint32_t ax = 0;
  if (!ok) return false;
  if (a->st == ST_STR) return op_fail(x, "argument 'x' must be a tensor");
  if (strcmp(odt, "int32")) return op_fail(x, "output_dtype '%s' is not supported (only int32)", odt);
  if (out->dt != MIL_DT_INT32) return op_fail(x, "returns int32, but the result is declared %s", mil_dtype_name(out->dt));
  if (!norm_axis(x, to_index(axis_d), a->rank, &ax)) return false;
  if (a->dims[ax] == 0) return op_fail(x, "dimension %u is empty", ax);
  if (a->dims[ax] > INT32_MAX) return op_fail(x, "dimension %u is too long for int32 indices", ax);
  int64_t dims[MIL_MAX_RANK] = {0};
  uint32_t rank = 0;
  for (uint32_t i = 0; i < a->rank; i++)
    if (i != ax || keep) dims[rank++] = i == ax ? 1 : a->dims[i];
  if (!expect_shape(x, out, dims, rank)) return false;
  ArgJob j = {.a = a, .o = out, .len = a->dims[ax], .post = elements(a->dims + ax + 1, a->rank - ax - 1),
              .want_max = code == 1};
  *bound = dup_job(&j, sizeof j);
  return true;
}

bool k_argreduce(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  const ArgJob *j = x->c->bound[x->si];
  par_for(x->c, out->n, (GRAIN + j->len - 1) / j->len, arg_task, (void *)(uintptr_t)j);
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

bool bind_topk(Ctx *x, int code, Val *out, uint32_t nout, void **bound) {
  (void)code;
  bool ok = true;
  const Val *a = req_arg(x, MIL_ARG_TOPK_x, &ok);
  double kd = scalar_arg(x, MIL_ARG_TOPK_k, 1, &ok), axis_d = scalar_arg(x, MIL_ARG_TOPK_axis, -1, &ok);
  bool asc = scalar_arg(x, MIL_ARG_TOPK_ascending, 0, &ok) != 0;
  bool ret_ind = scalar_arg(x, MIL_ARG_TOPK_return_indices, 1, &ok) != 0;
  (void)scalar_arg(x, MIL_ARG_TOPK_sort, 1, &ok);
  const char *idt = string_arg(x, MIL_ARG_TOPK_output_indices_dtype, "int32", &ok);
  uint32_t ax = 0;
  if (!ok || !copy_from(x, a) || !norm_axis(x, to_index(axis_d), a->rank, &ax)) return false;
  if (!ret_ind) return op_fail(x, "return_indices = false is not supported");
  if (nout != 2) return op_fail(x, "must have two results (values and indices)");
  int64_t k = to_index(kd);
  if (k < 1 || k > a->dims[ax] || a->dims[ax] > INT32_MAX)
    return op_fail(x, "k %g is out of range for dimension %u of size %lld", kd, ax, (long long)a->dims[ax]);
  int64_t dims[MIL_MAX_RANK];
  memcpy(dims, a->dims, sizeof dims);
  dims[ax] = k;
  if (!expect_shape(x, &out[0], dims, a->rank) || !expect_shape(x, &out[1], dims, a->rank) ||
      !same_class(x, a, &out[0]))
    return false;
  MilDType it = mil_dtype_from_name(idt, strlen(idt));
  if (it != MIL_DT_INT32 && it != MIL_DT_UINT16) return op_fail(x, "output_indices_dtype must be int32 or uint16, not '%s'", idt);
  if (out[1].dt != it) return op_fail(x, "the indices are %s, but the result is declared %s", idt, mil_dtype_name(out[1].dt));
  if (it == MIL_DT_UINT16 && a->dims[ax] > 65536) return op_fail(x, "dimension %u is too long for uint16 indices", ax);
  TopkJob j = {.a = a, .vo = &out[0], .io = &out[1], .len = a->dims[ax], .post = elements(a->dims + ax + 1, a->rank - ax - 1),
               .k = k, .asc = asc};
  *bound = dup_job(&j, sizeof j);
  return true;
}

bool k_topk(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  const TopkJob *j = x->c->bound[x->si];
  int64_t lines = out[0].n / j->k, per = j->k * j->len + 1;
  par_for(x->c, lines, (GRAIN + per - 1) / per, topk_task, (void *)(uintptr_t)j);
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

bool bind_pool(Ctx *x, int code, Val *out, uint32_t nout, void **bound) {
  (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, SHARED_x, &ok);
  if (!ok) return false;
  if (a->st != ST_F32 || a->rank < 3 || a->rank > 5)
    return op_fail(x, "x must be an fp16 or fp32 tensor of rank 3, 4 or 5 (a 1-D, 2-D or 3-D pool)");
  uint32_t S = a->rank - 2, lead = 3 - S, n;
  PoolJob j = {.a = a, .o = out, .avg = code == 1, .D = {1, 1, 1}, .K = {1, 1, 1}, .st = {1, 1, 1}};
  int64_t tmp[6] = {0};
  if (!ints_arg(x, SHARED_kernel_sizes, tmp, 3, &n, &ok) ||
      n != S) return ok ? op_fail(x, "kernel_sizes needs %u entries", S) : false;
  memcpy(j.K + lead, tmp, S * sizeof(int64_t));
  if (ints_arg(x, SHARED_strides, tmp, 3, &n, &ok) && n == S) memcpy(j.st + lead, tmp, S * sizeof(int64_t));
  else if (ok && n) return op_fail(x, "strides needs %u entries", S);
  const char *pt = string_arg(x, SHARED_pad_type, NULL, &ok);
  bool has_pad = ints_arg(x, SHARED_pad, tmp, 6, &n, &ok);
  bool ceil_mode = scalar_arg(x, SHARED_ceil_mode, 0, &ok) != 0;
  j.exclude = scalar_arg(x, MIL_ARG_AVG_POOL_exclude_padding_from_average, 0, &ok) != 0;
  if (!ok) return false;
  if (!pt) return op_fail(x, "missing argument '%s'", mil_arg_name(SHARED_pad_type));
  bool custom = !strcmp(pt, "custom"), same = !strcmp(pt, "same"), lower = !strcmp(pt, "same_lower");
  if (!custom && !same && !lower && strcmp(pt, "valid")) return op_fail(x, "unknown pad_type '%s'", pt);
  if (custom && (!has_pad || n != 2 * S)) return op_fail(x, "pad_type custom needs pad with %u entries", 2 * S);
  if (ceil_mode && (same || lower)) return op_fail(x, "ceil_mode needs pad_type valid or custom");
  for (uint32_t i = 0; i < 3; i++) {
    if (i >= lead) j.D[i] = a->dims[2 + i - lead];
    if (j.K[i] < 1 || j.st[i] < 1) return op_fail(x, "kernel_sizes and strides must be positive");
    if (i < lead) continue;
    uint32_t si = i - lead;
    if (custom) {
      if (tmp[2 * si] < 0 || tmp[2 * si + 1] < 0 || tmp[2 * si] > INT32_MAX || tmp[2 * si + 1] > INT32_MAX)
        return op_fail(x, "pad entries must not be negative");
      if (ceil_mode && tmp[2 * si] != tmp[2 * si + 1]) return op_fail(x, "ceil_mode needs symmetric padding");
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
    if (span < 0) return op_fail(x, "the kernel is larger than the padded input");
    j.OD[i] = (ceil_mode ? (span + j.st[i] - 1) / j.st[i] : span / j.st[i]) + 1;
    /* PyTorch's rule: the last window must start inside x or its leading padding */
    if (ceil_mode && (j.OD[i] - 1) * j.st[i] >= j.D[i] + j.before[i]) j.OD[i]--;
    if (i >= lead) dims[2 + i - lead] = j.OD[i];
  }
  if (!expect_shape(x, out, dims, a->rank)) return false;
  *bound = dup_job(&j, sizeof j);
  return true;
}

bool k_pool(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  const PoolJob *j = x->c->bound[x->si];
  if (out->n == 0) return true;
  int64_t items = j->a->dims[0] * j->a->dims[1];
  int64_t per = out->n / items * j->K[0] * j->K[1] * j->K[2] + 1;
  par_for(x->c, items, (GRAIN + per - 1) / per, pool_task, (void *)(uintptr_t)j);
  return true;
}

/* ---- quantize and dequantize (iOS17) ---- */

/* A per-axis parameter (scale or zero_point): a scalar, or a vector of the
 * elements of x's dimension `axis` (which must then be given). */
static bool qparam(Ctx *x, MilArgId id, const Val *p, const Val *a, bool has_axis, uint32_t axis) {
  const char *name = mil_arg_name(id);
  if (p->st == ST_STR) return op_fail(x, "argument '%s' must be a tensor", name);
  if (p->rank == 0 || (p->rank == 1 && p->n == 1 && !has_axis)) return true;
  if (!has_axis) return op_fail(x, "%s must be a scalar when axis is not given", name);
  if (p->rank != 1 || p->n != a->dims[axis])
    return op_fail(x, "%s must be a scalar or a vector of the %lld elements of dimension %u", name, (long long)a->dims[axis], axis);
  return true;
}

/* quantize(input, scale, zero_point?, axis?, output_dtype):
 * clip(round(input / scale) + zero_point) into int8 or uint8, rounding half
 * to even (NumPy's around, which coremltools uses). The quotient is taken in
 * double (coremltools divides in the input's dtype; a difference needs a
 * quotient within an fp16 ulp of a half-integer). NaN is an error.
 * dequantize(input, scale, zero_point?, axis?): scale * (input - zero_point). */
typedef struct QuantJob {
  const Val *a, *sc, *zp;
  bool de;          /* dequantize */
  double qlo, qhi;  /* the quantized type's range */
  int64_t post, len; /* the axis's length, and the elements after it (1 and 1: no axis) */
} QuantJob;

bool bind_quant(Ctx *x, int code, Val *out, uint32_t nout, void **bound) {
  (void)nout;
  bool ok = true, de = code == 1;
  const Val *a = req_arg(x, SHARED_input, &ok);
  const Val *sc = req_arg(x, SHARED_scale, &ok);
  const Val *zp = opt_arg(x, SHARED_zero_point, &ok);
  double axis_d = scalar_arg(x, SHARED_quant_axis, 0, &ok);
  bool has_axis = find_arg(x, SHARED_quant_axis) != NULL;
  const char *odt = de ? NULL : string_arg(x, MIL_ARG_QUANTIZE_output_dtype, NULL, &ok);
  if (!ok) return false;
  if (!de && !odt) return op_fail(x, "missing argument '%s'", mil_arg_name(MIL_ARG_QUANTIZE_output_dtype));
  if (a->st == ST_STR) return op_fail(x, "argument 'input' must be a tensor");
  uint32_t axis = 0;
  if (has_axis && !norm_axis(x, to_index(axis_d), a->rank, &axis)) return false;
  if (!qparam(x, SHARED_scale, sc, a, has_axis, axis) ||
      (zp && !qparam(x, SHARED_zero_point, zp, a, has_axis, axis))) return false;
  MilDType q = de ? a->dt : mil_dtype_from_name(odt, strlen(odt));
  if (q != MIL_DT_INT8 && q != MIL_DT_UINT8)
    return op_fail(x, de ? "input must be int8 or uint8, not %s" : "output_dtype must be int8 or uint8, not '%s'",
                de ? mil_dtype_name(a->dt) : odt);
  if (!de && !is_float(a->dt)) return op_fail(x, "input must be fp16 or fp32, not %s", mil_dtype_name(a->dt));
  if (zp && zp->dt != q) return op_fail(x, "zero_point is %s but the quantized type is %s", mil_dtype_name(zp->dt), mil_dtype_name(q));
  if (!is_float(sc->dt)) return op_fail(x, "scale must be fp16 or fp32");
  if (de ? out->dt != sc->dt : out->dt != q)
    return op_fail(x, "the result is declared %s but the op returns %s", mil_dtype_name(out->dt),
                mil_dtype_name(de ? sc->dt : q));
  if (!de && a->dt != sc->dt) return op_fail(x, "scale is %s but input is %s", mil_dtype_name(sc->dt), mil_dtype_name(a->dt));
  if (!expect_shape(x, out, a->dims, a->rank)) return false;
  QuantJob j = {.a = a, .sc = sc, .zp = zp, .de = de, .qlo = q == MIL_DT_INT8 ? -128 : 0, .qhi = q == MIL_DT_INT8 ? 127 : 255,
                .post = has_axis ? elements(a->dims + axis + 1, a->rank - axis - 1) : 1, .len = has_axis ? a->dims[axis] : 1};
  *bound = dup_job(&j, sizeof j);
  return true;
}

bool k_quant(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  const QuantJob *j = x->c->bound[x->si];
  const Val *a = j->a, *sc = j->sc, *zp = j->zp;
  bool de = j->de;
  double qlo = j->qlo, qhi = j->qhi;
  int64_t post = j->post, len = j->len;
  for (int64_t i = 0; i < out->n; i++) {
    int64_t k = (i / post) % len;
    double s = ld(sc, sc->n == 1 ? 0 : k), z = zp ? ld(zp, zp->n == 1 ? 0 : k) : 0, v = ld(a, i);
    if (de) {
      st(out, i, s * (v - z));
      continue;
    }
    double r = nearbyint(v / s) + z; /* the default rounding mode: half to even */
    if (isnan(r)) return op_fail(x, "element %lld quantizes to NaN (input %g, scale %g)", (long long)i, v, s);
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

static bool act_arg(Ctx *x, MilArgId id, const char *dflt, int *out) {
  bool ok = true;
  const char *s = string_arg(x, id, dflt, &ok);
  if (!ok) return false;
  if (!strcmp(s, "sigmoid")) *out = ACT_SIGMOID;
  else if (!strcmp(s, "tanh")) *out = ACT_TANH;
  else if (!strcmp(s, "relu")) *out = ACT_RELU;
  else if (!strcmp(s, "linear")) *out = ACT_LINEAR;
  else return op_fail(x, "%s '%s' is not supported (sigmoid, tanh, relu or linear)", mil_arg_name(id), s);
  return true;
}

/* lstm(x [s, b, I], initial_h [b, H], initial_c [b, H], weight_ih [4H, I],
 * weight_hh [4H, H], bias? [4H], peephole? [3H], direction?, output_sequence?,
 * recurrent_activation?, cell_activation?, activation?): forward direction,
 * no clip. The state is carried in fp32 from step to step (results are
 * rounded in ANE mode once, after the op). Results: the hidden states of
 * every step [s, b, H] (output_sequence) or of the last [1, b, H], and the
 * last h and c [b, H]. */
/* An lstm as bound: the step job (its state pointers set as it runs) and the rest of the shape. */
typedef struct LstmBound {
  LstmJob j;
  const Val *h0, *c0;
  int64_t S;
  bool seq; /* output_sequence */
} LstmBound;

bool bind_lstm(Ctx *x, int code, Val *out, uint32_t nout, void **bound) {
  (void)code;
  bool ok = true;
  const Val *xs = req_arg(x, MIL_ARG_LSTM_x, &ok);
  const Val *h0 = req_arg(x, MIL_ARG_LSTM_initial_h, &ok);
  const Val *c0 = req_arg(x, MIL_ARG_LSTM_initial_c, &ok);
  const Val *wih = req_arg(x, MIL_ARG_LSTM_weight_ih, &ok), *whh = req_arg(x, MIL_ARG_LSTM_weight_hh, &ok);
  const Val *b = opt_arg(x, MIL_ARG_LSTM_bias, &ok), *peep = opt_arg(x, MIL_ARG_LSTM_peephole, &ok);
  const char *dir = string_arg(x, MIL_ARG_LSTM_direction, "forward", &ok);
  bool seq = scalar_arg(x, MIL_ARG_LSTM_output_sequence, 0, &ok) != 0;
  LstmJob j = {.x = xs, .wih = wih, .whh = whh, .b = b, .peep = peep};
  if (!ok || !act_arg(x, MIL_ARG_LSTM_recurrent_activation, "sigmoid", &j.ra) ||
      !act_arg(x, MIL_ARG_LSTM_cell_activation, "tanh", &j.ca) ||
      !act_arg(x, MIL_ARG_LSTM_activation, "tanh", &j.ha))
    return false;
  if (strcmp(dir, "forward"))
    return op_fail(x, "direction '%s' is not supported yet (only forward)", dir);
  if (find_arg(x, MIL_ARG_LSTM_clip)) return op_fail(x, "clip is not supported yet");
  if (nout != 3) return op_fail(x, "must have three results (the output, h and c)");
  const Val *all[7] = {xs, h0, c0, wih, whh, b, peep};
  for (int k = 0; k < 7; k++)
    if (all[k] && (all[k]->st == ST_STR || !is_float(all[k]->dt)))
      return op_fail(x, "x, the states, weights, bias and peephole must be fp16 or fp32");
  if (xs->rank != 3 || whh->rank != 2 || wih->rank != 2)
    return op_fail(x, "x must have rank 3 and the weights rank 2");
  int64_t S = xs->dims[0], B = xs->dims[1], NI = xs->dims[2], H = whh->dims[1];
  if (whh->dims[0] != 4 * H || wih->dims[0] != 4 * H || wih->dims[1] != NI)
    return op_fail(x, "weight_ih must be [4H, %lld] and weight_hh [4H, H] (H = %lld)", (long long)NI, (long long)H);
  if ((b && (b->rank != 1 || b->n != 4 * H)) || (peep && (peep->rank != 1 || peep->n != 3 * H)))
    return op_fail(x, "bias must have 4H = %lld elements and peephole 3H = %lld", (long long)(4 * H), (long long)(3 * H));
  int64_t sd[2] = {B, H};
  if (h0->rank != 2 || h0->dims[0] != B || h0->dims[1] != H || c0->rank != 2 || c0->dims[0] != B || c0->dims[1] != H)
    return op_fail(x, "initial_h and initial_c must be [%lld, %lld]", (long long)B, (long long)H);
  if (S < 1) return op_fail(x, "the sequence is empty");
  int64_t od[3] = {seq ? S : 1, B, H};
  if (!expect_shape(x, &out[0], od, 3) || !expect_shape(x, &out[1], sd, 2) || !expect_shape(x, &out[2], sd, 2)) return false;
  for (int k = 0; k < 3; k++)
    if (out[k].st != ST_F32) return op_fail(x, "result %d must be fp16 or fp32", k);
  j.B = B, j.NI = NI, j.H = H;
  LstmBound lb = {.j = j, .h0 = h0, .c0 = c0, .S = S, .seq = seq};
  *bound = dup_job(&lb, sizeof lb);
  return true;
}

bool k_lstm(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  const LstmBound *lb = x->c->bound[x->si];
  LstmJob j = lb->j;
  const Val *h0 = lb->h0, *c0 = lb->c0;
  int64_t S = lb->S, NI = j.NI, H = j.H;
  bool seq = lb->seq;
  j.c = fp(&out[2]);
  int64_t n = j.B * H;
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
