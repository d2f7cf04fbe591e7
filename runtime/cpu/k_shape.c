/*
 * Shape ops, which copy 4-byte elements whatever their class: views and
 * copies, transpose, slicing, split, concat, gather, expand_dims, squeeze,
 * stack, tile, pad, shape, range_1d, gather_along_axis.
 */
#include "cpu_internal.h"

#include <math.h>

/* ---- shape ops (4-byte elements whatever the class) ---- */

static uint32_t *u32(const Val *v) { return v->p; }

/* Shape ops copy elements as they are: the result must hold the same class. */
bool same_class(Ctx *x, const Val *a, const Val *out) {
  if (a->st == out->st || (a->st == ST_H16 && out->st == ST_F32)) return true;
  return op_fail(x, "the operand is %s but the result is declared %s", mil_dtype_name(a->dt), mil_dtype_name(out->dt));
}

/* A view: reshape and identity of the same dtype point at their operand
 * (the slot's src, set by the plan). */
bool bind_view(Ctx *x, int code, Val *out, uint32_t nout, void **bound) {
  (void)code, (void)nout, (void)bound;
  const Val *a = &x->vals[x->c->slots[x->c->base[x->si]].src];
  if (a->n != out->n) return op_fail(x, "reshapes %lld elements into %lld", (long long)a->n, (long long)out->n);
  return true;
}

bool k_view(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  const Val *a = &x->vals[x->c->slots[x->c->base[x->si]].src];
  out->p = a->p;
  out->st = a->st;
  return true;
}

/* reshape or identity into another dtype (not planned as a view). */
bool k_copy(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok);
  if (!ok) return false;
  if (a->n != out->n) return op_fail(x, "reshapes %lld elements into %lld", (long long)a->n, (long long)out->n);
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

bool k_transpose(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok);
  int64_t perm[MIL_MAX_RANK];
  uint32_t n;
  ints_arg(x, "perm", perm, MIL_MAX_RANK, &n, &ok);
  if (!ok) return false;
  if (n != a->rank) return op_fail(x, "perm has %u entries for rank %u", n, a->rank);
  int64_t st_[MIL_MAX_RANK], dims[MIL_MAX_RANK];
  bool seen[MIL_MAX_RANK] = {false};
  TrJob j = {.a = u32(a), .o = u32(out)};
  strides_of(a->dims, a->rank, st_);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t p = 0;
    if (!norm_axis(x, perm[i], a->rank, &p)) return false;
    if (seen[p]) return op_fail(x, "perm is not a permutation");
    seen[p] = true;
    dims[i] = a->dims[p];
    j.ist[i] = st_[p];
  }
  if (!expect_shape(x, out, dims, n) || !same_class(x, a, out)) return false;
  if (out->n == 0) return true;
  if (a->st == ST_H16) return op_fail(x, "fp16 weights are not transposed in place"); /* the plan prevents this */
  memcpy(j.dims, dims, sizeof dims);
  strides_of(dims, n, j.ost);
  int64_t *strides[2] = {j.ist, j.ost};
  j.r = collapse_dims(n, j.dims, strides, 2);
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
bool k_slice(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok);
  int64_t beg[MIL_MAX_RANK], end[MIL_MAX_RANK], str[MIL_MAX_RANK], bm[MIL_MAX_RANK], em[MIL_MAX_RANK],
      sm[MIL_MAX_RANK];
  uint32_t nb, ne, ns, nbm, nem, nsm;
  if (!find_arg(x->s, "begin") || !find_arg(x->s, "end")) return op_fail(x, "needs begin and end");
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
    return op_fail(x, "begin, end, stride and masks need %u entries each", r);
  int64_t st_[MIL_MAX_RANK], start[MIL_MAX_RANK], step[MIL_MAX_RANK], cnt[MIL_MAX_RANK], dims[MIL_MAX_RANK] = {0};
  uint32_t rank = 0;
  strides_of(a->dims, r, st_);
  for (uint32_t i = 0; i < r; i++) {
    int64_t D = a->dims[i], s = has_stride ? str[i] : 1, b = beg[i], e = end[i];
    if (s == 0) return op_fail(x, "stride 0 in dimension %u", i);
    if (has_sm && sm[i]) {
      b = b < 0 ? b + D : b;
      if (b < 0 || b >= D) return op_fail(x, "squeezed index %lld is out of range in dimension %u", (long long)beg[i], i);
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
  if (a->st == ST_H16) return op_fail(x, "fp16 weights are not sliced in place"); /* the plan prevents this */
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
bool k_slice_size(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok);
  int64_t beg[MIL_MAX_RANK], size[MIL_MAX_RANK], dims[MIL_MAX_RANK], st_[MIL_MAX_RANK];
  uint32_t nb, ns;
  if (ok && (!find_arg(x->s, "begin") || !find_arg(x->s, "size"))) return op_fail(x, "needs begin and size");
  ints_arg(x, "begin", beg, MIL_MAX_RANK, &nb, &ok);
  ints_arg(x, "size", size, MIL_MAX_RANK, &ns, &ok);
  if (!ok) return false;
  if (a->st == ST_STR) return op_fail(x, "argument 'x' must be a tensor");
  uint32_t r = a->rank;
  if (nb != r || ns != r) return op_fail(x, "begin and size need %u entries each (they have %u and %u)", r, nb, ns);
  for (uint32_t i = 0; i < r; i++) {
    int64_t D = a->dims[i], b = beg[i] < 0 && beg[i] >= -D ? beg[i] + D : beg[i];
    if (b < 0 || b > D)
      return op_fail(x, "begin %lld is out of range for dimension %u of size %lld", (long long)beg[i], i, (long long)D);
    if (size[i] == -1) size[i] = D - b;
    if (size[i] < 0 || size[i] > D - b)
      return op_fail(x, "size %lld from begin %lld does not fit dimension %u of size %lld", (long long)size[i],
                  (long long)beg[i], i, (long long)D);
    beg[i] = b;
    dims[i] = size[i];
  }
  if (!expect_shape(x, out, dims, r) || !same_class(x, a, out)) return false;
  if (a->st == ST_H16) return op_fail(x, "fp16 weights are not sliced in place"); /* the plan prevents this */
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

bool k_split(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok);
  double axis_d = scalar_arg(x, "axis", 0, &ok);
  if (!find_arg(x->s, "axis")) return op_fail(x, "missing argument 'axis'");
  uint32_t ax = 0;
  if (!ok || !norm_axis(x, to_index(axis_d), a->rank, &ax)) return false;
  int64_t sizes_buf[64];
  uint32_t ns;
  bool has_sizes = ints_arg(x, "split_sizes", sizes_buf, 64, &ns, &ok);
  double num = scalar_arg(x, "num_splits", 0, &ok);
  if (!ok) return false;
  if (!has_sizes) {
    if (num != nout || nout > 64 || a->dims[ax] % nout) return op_fail(x, "cannot split dimension %u evenly %u ways", ax, nout);
    for (uint32_t k = 0; k < nout; k++) sizes_buf[k] = a->dims[ax] / nout;
    ns = nout;
  }
  int64_t total = 0;
  for (uint32_t k = 0; k < ns; k++) total += sizes_buf[k];
  if (ns != nout || total != a->dims[ax]) return op_fail(x, "the split sizes do not match the %u results and dimension %u", nout, ax);
  int64_t pre = elements(a->dims, ax), len = a->dims[ax], post = elements(a->dims + ax + 1, a->rank - ax - 1), at = 0;
  for (uint32_t k = 0; k < nout; k++) {
    int64_t dims[MIL_MAX_RANK] = {0};
    memcpy(dims, a->dims, sizeof dims);
    dims[ax] = sizes_buf[k];
    if (!expect_shape(x, &out[k], dims, a->rank) || !same_class(x, a, &out[k])) return false;
    if (a->st == ST_H16) return op_fail(x, "fp16 weights are not split in place");
    SplitJob j = {.a = u32(a), .o = u32(&out[k]), .chunk = sizes_buf[k] * post, .stride = len * post, .at = at * post};
    if (j.chunk > 0) par_for(x->c, pre, (GRAIN + j.chunk - 1) / j.chunk, split_task, &j);
    at += sizes_buf[k];
  }
  return true;
}

bool k_concat(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const MilArg *va = find_arg(x->s, "values");
  if (!va || va->nitems == 0) return op_fail(x, "missing argument 'values'");
  double axis_d = scalar_arg(x, "axis", 0, &ok);
  bool inter = scalar_arg(x, "interleave", 0, &ok) != 0;
  if (!find_arg(x->s, "axis")) return op_fail(x, "missing argument 'axis'");
  if (!ok) return false;
  uint32_t nv = va->nitems;
  const Val *v0 = arg_item(x, va, 0);
  uint32_t ax = 0;
  if (!norm_axis(x, to_index(axis_d), v0->rank, &ax)) return false;
  int64_t dims[MIL_MAX_RANK];
  memcpy(dims, v0->dims, sizeof dims);
  dims[ax] = 0;
  for (uint32_t j = 0; j < nv; j++) {
    const Val *v = arg_item(x, va, j);
    bool same = v->rank == v0->rank;
    for (uint32_t i = 0; same && i < v0->rank; i++)
      same = i == ax ? !inter || v->dims[i] == v0->dims[i] : v->dims[i] == v0->dims[i];
    if (!same) return op_fail(x, "value %u does not match the shape of the first value", j);
    if (v->st != out->st) return op_fail(x, "value %u is %s but the result is declared %s", j, mil_dtype_name(v->dt), mil_dtype_name(out->dt));
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
        while (at >= arg_item(x, va, j)->dims[ax]) at -= arg_item(x, va, j++)->dims[ax];
      const Val *v = arg_item(x, va, j);
      int64_t jl = v->dims[ax];
      memcpy(u32(out) + (p * len + k) * post, u32(v) + (p * jl + at) * post, (size_t)post * 4);
    }
  return true;
}

/* gather along axis: out[pre, j..., post] = x[pre, indices[j...], post]. */
bool k_gather(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok), *ind = req_arg(x, "indices", &ok);
  double axis_d = scalar_arg(x, "axis", 0, &ok), bd = scalar_arg(x, "batch_dims", 0, &ok);
  uint32_t ax = 0;
  if (!ok || !norm_axis(x, to_index(axis_d), a->rank, &ax)) return false;
  if (bd != 0) return op_fail(x, "batch_dims other than 0 are not supported yet");
  if (a->rank + ind->rank - 1 > MIL_MAX_RANK) return op_fail(x, "the result has too many dimensions");
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
        return op_fail(x, "index %g is out of range for dimension %u of size %lld", ld(ind, j), ax, (long long)len);
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
bool copy_from(Ctx *x, const Val *a) {
  if (a->st == ST_H16) return op_fail(x, "fp16 weights are not copied in place"); /* the plan prevents this */
  if (a->st == ST_STR) return op_fail(x, "argument 'x' must be a tensor");
  return true;
}

/* expand_dims(x, axes): size-1 dims inserted at the sorted positions axes
 * name in the result (negative ones count from the result's end). */
bool k_expand_dims(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok);
  int64_t axes[MIL_MAX_RANK];
  uint32_t n;
  bool given = ints_arg(x, "axes", axes, MIL_MAX_RANK, &n, &ok);
  if (!ok) return false;
  if (!given || n == 0) return op_fail(x, "missing argument 'axes'");
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
  memcpy(out->p, a->p, (size_t)a->n * 4);
  return true;
}

/* squeeze(x, axes?): removes the listed size-1 dims (a listed dim of
 * another size stays, as coremltools does); without axes, every size-1 dim. */
bool k_squeeze(Ctx *x, int code, Val *out, uint32_t nout) {
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
bool k_stack(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const MilArg *va = find_arg(x->s, "values");
  if (!va || va->nitems == 0) return op_fail(x, "missing argument 'values'");
  if (!find_arg(x->s, "axis")) return op_fail(x, "missing argument 'axis'");
  double axis_d = scalar_arg(x, "axis", 0, &ok);
  if (!ok) return false;
  const Val *v0 = arg_item(x, va, 0);
  uint32_t nv = va->nitems, ax = 0;
  if (v0->rank + 1 > MIL_MAX_RANK) return op_fail(x, "the result has too many dimensions");
  if (!norm_axis(x, to_index(axis_d), v0->rank + 1, &ax)) return false;
  for (uint32_t j = 0; j < nv; j++) {
    const Val *v = arg_item(x, va, j);
    bool same = v->rank == v0->rank && v->st != ST_STR && v->st != ST_H16;
    for (uint32_t i = 0; same && i < v0->rank; i++) same = v->dims[i] == v0->dims[i];
    if (!same) return op_fail(x, "value %u does not have the shape of the first value", j);
    if (v->st != out->st) return op_fail(x, "value %u is %s but the result is declared %s", j, mil_dtype_name(v->dt), mil_dtype_name(out->dt));
  }
  int64_t dims[MIL_MAX_RANK];
  for (uint32_t i = 0, k = 0; i <= v0->rank; i++) dims[i] = i == ax ? nv : v0->dims[k++];
  if (!expect_shape(x, out, dims, v0->rank + 1)) return false;
  int64_t pre = elements(v0->dims, ax), post = elements(v0->dims + ax, v0->rank - ax);
  for (int64_t p = 0; p < pre; p++)
    for (uint32_t j = 0; j < nv; j++)
      memcpy(u32(out) + (p * nv + j) * post, u32(arg_item(x, va, j)) + p * post, (size_t)post * 4);
  return true;
}

/* tile(x, reps): the result's element at index i is x's at i mod x.shape. */
bool k_tile(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok);
  int64_t reps[MIL_MAX_RANK];
  uint32_t n;
  bool given = ints_arg(x, "reps", reps, MIL_MAX_RANK, &n, &ok);
  if (!ok) return false;
  if (!given) return op_fail(x, "missing argument 'reps'");
  if (!copy_from(x, a)) return false;
  if (n != a->rank) return op_fail(x, "reps has %u entries for rank %u", n, a->rank);
  int64_t dims[MIL_MAX_RANK], ist[MIL_MAX_RANK];
  for (uint32_t i = 0; i < n; i++) {
    if (reps[i] < 1 || reps[i] > INT32_MAX) return op_fail(x, "reps entries must be positive (entry %u is %lld)", i, (long long)reps[i]);
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
bool k_pad(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok);
  int64_t pads[2 * MIL_MAX_RANK];
  uint32_t n;
  bool given = ints_arg(x, "pad", pads, 2 * MIL_MAX_RANK, &n, &ok);
  const char *ms = string_arg(x, "mode", "constant", &ok);
  double cval = scalar_arg(x, "constant_val", 0, &ok);
  if (!ok) return false;
  if (!given) return op_fail(x, "missing argument 'pad'");
  if (!copy_from(x, a)) return false;
  int mode = !strcmp(ms, "constant") ? PAD_CONSTANT : !strcmp(ms, "reflect") ? PAD_REFLECT
             : !strcmp(ms, "replicate") ? PAD_REPLICATE : -1;
  if (mode < 0) return op_fail(x, "unknown mode '%s' (constant, reflect or replicate)", ms);
  if (n % 2 || n / 2 > a->rank) return op_fail(x, "pad needs an even number of entries, at most %u", 2 * a->rank);
  int64_t before[MIL_MAX_RANK] = {0}, dims[MIL_MAX_RANK];
  uint32_t first = a->rank - n / 2;
  for (uint32_t i = 0; i < a->rank; i++) {
    dims[i] = a->dims[i];
    if (i < first) continue;
    int64_t b = pads[2 * (i - first)], e = pads[2 * (i - first) + 1];
    if (b < 0 || e < 0 || b > INT32_MAX || e > INT32_MAX) return op_fail(x, "pad entries must not be negative");
    if (mode == PAD_REFLECT && (b >= a->dims[i] || e >= a->dims[i]))
      return op_fail(x, "reflect padding of dimension %u needs pads below its size %lld", i, (long long)a->dims[i]);
    if (mode == PAD_REPLICATE && a->dims[i] == 0 && b + e > 0)
      return op_fail(x, "replicate padding of the empty dimension %u", i);
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
bool k_shape(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok);
  if (!ok) return false;
  if (a->st == ST_STR) return op_fail(x, "argument 'x' must be a tensor");
  if (out->dt != MIL_DT_INT32) return op_fail(x, "returns int32, but the result is declared %s", mil_dtype_name(out->dt));
  int64_t dims[1] = {a->rank};
  if (!expect_shape(x, out, dims, 1)) return false;
  for (uint32_t i = 0; i < a->rank; i++) st(out, i, (double)a->dims[i]);
  return true;
}

/* range_1d(end, start, step): start, start + step, ... up to end
 * (excluded), ceil((end - start) / step) elements as NumPy's arange. The
 * declared length must match, as the shape is fixed at prepare. */
bool k_range(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  if (!find_arg(x->s, "start") || !find_arg(x->s, "end") || !find_arg(x->s, "step"))
    return op_fail(x, "needs start, end and step");
  double s0 = scalar_arg(x, "start", 0, &ok), e = scalar_arg(x, "end", 0, &ok), sp = scalar_arg(x, "step", 0, &ok);
  if (!ok) return false;
  if (!(sp != 0) || !isfinite(s0) || !isfinite(e) || !isfinite(sp))
    return op_fail(x, "start, end and step must be finite and step not 0");
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
bool k_gather_axis(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, "x", &ok), *ind = req_arg(x, "indices", &ok);
  double axis_d = scalar_arg(x, "axis", 0, &ok);
  uint32_t ax = 0;
  if (!ok || !copy_from(x, a) || !norm_axis(x, to_index(axis_d), a->rank, &ax)) return false;
  if (ind->st != ST_I32 || ind->dt == MIL_DT_BOOL) return op_fail(x, "indices must be integers");
  bool same = ind->rank == a->rank;
  for (uint32_t i = 0; same && i < a->rank; i++) same = i == ax || ind->dims[i] == a->dims[i];
  if (!same) return op_fail(x, "indices must have the rank of x and its dims except at axis %u", ax);
  if (!expect_shape(x, out, ind->dims, ind->rank) || !same_class(x, a, out)) return false;
  int64_t len = a->dims[ax], post = elements(a->dims + ax + 1, a->rank - ax - 1), il = ind->dims[ax];
  bool wrap = x->c->f->ios < 17;
  for (int64_t i = 0; i < out->n; i++) {
    int64_t k = ((const int32_t *)ind->p)[i];
    if (k < 0 && wrap) k += len;
    if (k < 0 || k >= len)
      return op_fail(x, "index %lld is out of range for dimension %u of size %lld", (long long)((const int32_t *)ind->p)[i], ax,
                  (long long)len);
    int64_t p = i / (il * post), q = i % post;
    u32(out)[i] = u32(a)[(p * len + k) * post + q];
  }
  return true;
}
