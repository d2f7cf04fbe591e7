/*
 * Shape ops, which copy 4-byte elements whatever their class: views and
 * copies, transpose, slicing, split, concat, stack, gather,
 * gather_along_axis (the others are in k_shape_more.c).
 *
 * Each op's binder checks its arguments at prepare. A few arguments may be
 * values computed when the program runs (here slice_by_index's begin and
 * end, slice_by_size's begin and size): when they are constants the op's
 * geometry is worked out (and checked) at prepare; otherwise its kernel
 * works it out from the bound values on each run, and an error is one of
 * that run.
 */
#include "cpu_internal.h"

#include <math.h>

/* ---- shape ops (4-byte elements whatever the class) ---- */

static uint32_t *u32(const Val *v) { return v->p; }

/* A copy of the n bytes at p. */
static void *dup_job(const void *p, size_t n) { return memcpy(xmalloc(n), p, n); }

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

/* The one operand x of ops that need nothing else bound. */
typedef struct OneJob {
  const Val *a;
} OneJob;

/* reshape or identity into another dtype (not planned as a view). */
bool bind_copy(Ctx *x, int code, Val *out, uint32_t nout, void **bound) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, SHARED_x, &ok);
  if (!ok) return false;
  if (a->n != out->n) return op_fail(x, "reshapes %lld elements into %lld", (long long)a->n, (long long)out->n);
  OneJob j = {a};
  *bound = dup_job(&j, sizeof j);
  return true;
}

bool k_copy(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  const Val *a = ((const OneJob *)x->c->bound[x->si])->a;
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

/* A transpose as bound: how it runs, and the job (its data pointers set as it runs). */
enum { TR_NONE, TR_ROWS, TR_ELEMENTS, TR_TILES };

typedef struct TransposeBound {
  const Val *a;
  int how;
  TrJob j;
} TransposeBound;

bool bind_transpose(Ctx *x, int code, Val *out, uint32_t nout, void **bound) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, MIL_ARG_TRANSPOSE_x, &ok);
  int64_t perm[MIL_MAX_RANK];
  uint32_t n;
  ints_arg(x, MIL_ARG_TRANSPOSE_perm, perm, MIL_MAX_RANK, &n, &ok);
  if (!ok) return false;
  if (n != a->rank) return op_fail(x, "perm has %u entries for rank %u", n, a->rank);
  int64_t st_[MIL_MAX_RANK], dims[MIL_MAX_RANK];
  bool seen[MIL_MAX_RANK] = {false};
  TransposeBound tb = {.a = a, .how = TR_NONE};
  TrJob *j = &tb.j;
  strides_of(a->dims, a->rank, st_);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t p = 0;
    if (!norm_axis(x, perm[i], a->rank, &p)) return false;
    if (seen[p]) return op_fail(x, "perm is not a permutation");
    seen[p] = true;
    dims[i] = a->dims[p];
    j->ist[i] = st_[p];
  }
  if (!expect_shape(x, out, dims, n) || !same_class(x, a, out)) return false;
  if (out->n > 0) {
    if (a->st == ST_H16) return op_fail(x, "fp16 weights are not transposed in place"); /* the plan prevents this */
    memcpy(j->dims, dims, sizeof dims);
    strides_of(dims, n, j->ost);
    int64_t *strides[2] = {j->ist, j->ost};
    j->r = collapse_dims(n, j->dims, strides, 2);
    if (j->r == 0) j->dims[0] = 1, j->ist[0] = j->ost[0] = 1, j->r = 1;
    if (j->ist[j->r - 1] == 1) {
      tb.how = TR_ROWS;
    } else {
      j->k = 0;
      while (j->k < j->r && j->ist[j->k] != 1) j->k++;
      if (j->k == j->r) { /* no dim walks the input contiguously (cannot happen after collapsing); element by element */
        tb.how = TR_ELEMENTS;
      } else {
        tb.how = TR_TILES;
        for (uint32_t i = 0; i < j->r - 1; i++)
          if (i != j->k) j->odims[j->nouter] = j->dims[i], j->oist[j->nouter] = j->ist[i], j->oost[j->nouter++] = j->ost[i];
        j->bands = (j->dims[j->k] + TILE - 1) / TILE;
      }
    }
  }
  *bound = dup_job(&tb, sizeof tb);
  return true;
}

bool k_transpose(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  const TransposeBound *tb = x->c->bound[x->si];
  if (tb->how == TR_NONE) return true;
  TrJob j = tb->j;
  j.a = u32(tb->a), j.o = u32(out);
  if (tb->how == TR_ROWS) {
    par_for(x->c, out->n / j.dims[j.r - 1], (GRAIN + j.dims[j.r - 1] - 1) / j.dims[j.r - 1], rowcopy_task, &j);
    return true;
  }
  if (tb->how == TR_ELEMENTS) {
    for (int64_t i = 0; i < out->n; i++) j.o[i] = j.a[offset_at(i, j.dims, j.r, j.ist)];
    return true;
  }
  int64_t items = elements(j.odims, j.nouter) * j.bands;
  par_for(x->c, items, (GRAIN + TILE * j.dims[j.r - 1] - 1) / (TILE * j.dims[j.r - 1]), transpose_task, &j);
  return true;
}

/* slice_by_index with Python slice semantics per dimension: begin and end
 * (maybe run-time values) and the constant stride and masks. */
typedef struct SliceJob {
  const Val *a, *begin, *end;
  bool has_stride, has_bm, has_em, has_sm;
  uint32_t ns, nbm, nem, nsm;
  int64_t str[MIL_MAX_RANK], bm[MIL_MAX_RANK], em[MIL_MAX_RANK], sm[MIL_MAX_RANK];
  bool ready; /* the geometry below is worked out */
  uint32_t r;
  int64_t base, sst[MIL_MAX_RANK], cnt[MIL_MAX_RANK];
} SliceJob;

static bool slice_geometry(Ctx *x, SliceJob *j, const Val *out) {
  bool ok = true;
  const Val *a = j->a;
  int64_t beg[MIL_MAX_RANK], end[MIL_MAX_RANK];
  uint32_t nb, ne;
  ints_of(x, MIL_ARG_SLICE_BY_INDEX_begin, j->begin, beg, MIL_MAX_RANK, &nb, &ok);
  ints_of(x, MIL_ARG_SLICE_BY_INDEX_end, j->end, end, MIL_MAX_RANK, &ne, &ok);
  if (!ok) return false;
  uint32_t r = a->rank;
  if (nb != r || ne != r || (j->has_stride && j->ns != r) || (j->has_bm && j->nbm != r) || (j->has_em && j->nem != r) ||
      (j->has_sm && j->nsm != r))
    return op_fail(x, "begin, end, stride and masks need %u entries each", r);
  int64_t st_[MIL_MAX_RANK], start[MIL_MAX_RANK], step[MIL_MAX_RANK], dims[MIL_MAX_RANK] = {0};
  int64_t *cnt = j->cnt;
  uint32_t rank = 0;
  strides_of(a->dims, r, st_);
  for (uint32_t i = 0; i < r; i++) {
    int64_t D = a->dims[i], s = j->has_stride ? j->str[i] : 1, b = beg[i], e = end[i];
    if (s == 0) return op_fail(x, "stride 0 in dimension %u", i);
    if (j->has_sm && j->sm[i]) {
      b = b < 0 ? b + D : b;
      if (b < 0 || b >= D) return op_fail(x, "squeezed index %lld is out of range in dimension %u", (long long)beg[i], i);
      start[i] = b, step[i] = 1, cnt[i] = 1;
      continue;
    }
    if (s > 0) {
      b = j->has_bm && j->bm[i] ? 0 : b < 0 ? (b + D < 0 ? 0 : b + D) : (b > D ? D : b);
      e = j->has_em && j->em[i] ? D : e < 0 ? (e + D < 0 ? 0 : e + D) : (e > D ? D : e);
      cnt[i] = e > b ? (e - b + s - 1) / s : 0;
    } else {
      b = j->has_bm && j->bm[i] ? D - 1 : b < 0 ? (b + D < -1 ? -1 : b + D) : (b > D - 1 ? D - 1 : b);
      e = j->has_em && j->em[i] ? -1 : e < 0 ? (e + D < -1 ? -1 : e + D) : (e > D - 1 ? D - 1 : e);
      cnt[i] = b > e ? (b - e + (-s) - 1) / (-s) : 0;
    }
    start[i] = b, step[i] = s;
    dims[rank++] = cnt[i];
  }
  if (!expect_shape(x, out, dims, rank) || !same_class(x, a, out)) return false;
  if (a->st == ST_H16) return op_fail(x, "fp16 weights are not sliced in place"); /* the plan prevents this */
  j->base = 0;
  for (uint32_t i = 0; i < r; i++) j->base += start[i] * st_[i], j->sst[i] = step[i] * st_[i];
  j->r = r;
  return true;
}

bool bind_slice(Ctx *x, int code, Val *out, uint32_t nout, void **bound) {
  (void)code, (void)nout;
  bool ok = true;
  SliceJob j = {.a = req_arg(x, MIL_ARG_SLICE_BY_INDEX_x, &ok)};
  if (!find_arg(x, MIL_ARG_SLICE_BY_INDEX_begin) ||
      !find_arg(x, MIL_ARG_SLICE_BY_INDEX_end)) return op_fail(x, "needs begin and end");
  j.begin = opt_arg(x, MIL_ARG_SLICE_BY_INDEX_begin, &ok);
  j.end = opt_arg(x, MIL_ARG_SLICE_BY_INDEX_end, &ok);
  j.has_stride = ints_arg(x, MIL_ARG_SLICE_BY_INDEX_stride, j.str, MIL_MAX_RANK, &j.ns, &ok);
  j.has_bm = ints_arg(x, MIL_ARG_SLICE_BY_INDEX_begin_mask, j.bm, MIL_MAX_RANK, &j.nbm, &ok);
  j.has_em = ints_arg(x, MIL_ARG_SLICE_BY_INDEX_end_mask, j.em, MIL_MAX_RANK, &j.nem, &ok);
  j.has_sm = ints_arg(x, MIL_ARG_SLICE_BY_INDEX_squeeze_mask, j.sm, MIL_MAX_RANK, &j.nsm, &ok);
  if (!ok) return false;
  bool consts = true;
  j.begin = const_or_run(x, j.begin, &consts);
  j.end = const_or_run(x, j.end, &consts);
  if (consts && !(j.ready = slice_geometry(x, &j, out))) return false;
  *bound = dup_job(&j, sizeof j);
  return true;
}

bool k_slice(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  const SliceJob *j = x->c->bound[x->si];
  SliceJob run;
  if (!j->ready) {
    run = *j;
    if (!slice_geometry(x, &run, out)) return false;
    j = &run;
  }
  uint32_t r = j->r;
  const uint32_t *in = u32(j->a);
  uint32_t *o = u32(out);
  if (r > 0 && j->sst[r - 1] == 1) { /* whole rows at a time */
    int64_t len = j->cnt[r - 1], rows = len ? out->n / len : 0;
    for (int64_t i = 0; i < rows; i++)
      memcpy(o + i * len, in + j->base + offset_at(i, j->cnt, r - 1, j->sst), (size_t)len * 4);
    return true;
  }
  for (int64_t i = 0; i < out->n; i++) o[i] = in[j->base + offset_at(i, j->cnt, r, j->sst)];
  return true;
}

/* slice_by_size: x[begin[i] : begin[i] + size[i]] per dimension; a negative
 * begin counts from the end, size -1 takes the rest. begin and size may be
 * runtime values, so a slice out of range may be an error at run time. */
typedef struct SliceSizeJob {
  const Val *a, *begin, *size;
  bool ready;
  int64_t base, dims[MIL_MAX_RANK], st[MIL_MAX_RANK];
} SliceSizeJob;

static bool slice_size_geometry(Ctx *x, SliceSizeJob *j, const Val *out) {
  bool ok = true;
  const Val *a = j->a;
  int64_t beg[MIL_MAX_RANK], size[MIL_MAX_RANK];
  uint32_t nb, ns;
  ints_of(x, MIL_ARG_SLICE_BY_SIZE_begin, j->begin, beg, MIL_MAX_RANK, &nb, &ok);
  ints_of(x, MIL_ARG_SLICE_BY_SIZE_size, j->size, size, MIL_MAX_RANK, &ns, &ok);
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
    j->dims[i] = size[i];
  }
  if (!expect_shape(x, out, j->dims, r) || !same_class(x, a, out)) return false;
  if (a->st == ST_H16) return op_fail(x, "fp16 weights are not sliced in place"); /* the plan prevents this */
  strides_of(a->dims, r, j->st);
  j->base = 0;
  for (uint32_t i = 0; i < r; i++) j->base += beg[i] * j->st[i];
  return true;
}

bool bind_slice_size(Ctx *x, int code, Val *out, uint32_t nout, void **bound) {
  (void)code, (void)nout;
  bool ok = true;
  SliceSizeJob j = {.a = req_arg(x, MIL_ARG_SLICE_BY_SIZE_x, &ok)};
  if (ok && (!find_arg(x, MIL_ARG_SLICE_BY_SIZE_begin) ||
      !find_arg(x, MIL_ARG_SLICE_BY_SIZE_size))) return op_fail(x, "needs begin and size");
  j.begin = opt_arg(x, MIL_ARG_SLICE_BY_SIZE_begin, &ok);
  j.size = opt_arg(x, MIL_ARG_SLICE_BY_SIZE_size, &ok);
  if (!ok) return false;
  bool consts = true;
  j.begin = const_or_run(x, j.begin, &consts);
  j.size = const_or_run(x, j.size, &consts);
  if (consts && !(j.ready = slice_size_geometry(x, &j, out))) return false;
  *bound = dup_job(&j, sizeof j);
  return true;
}

bool k_slice_size(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  const SliceSizeJob *j = x->c->bound[x->si];
  SliceSizeJob run;
  if (!j->ready) {
    run = *j;
    if (!slice_size_geometry(x, &run, out)) return false;
    j = &run;
  }
  uint32_t r = j->a->rank;
  const uint32_t *in = u32(j->a);
  uint32_t *o = u32(out);
  if (r == 0) {
    o[0] = in[0];
    return true;
  }
  int64_t len = j->dims[r - 1], rows = len ? out->n / len : 0;
  for (int64_t i = 0; i < rows; i++) memcpy(o + i * len, in + j->base + offset_at(i, j->dims, r - 1, j->st), (size_t)len * 4);
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

/* A split as bound: the input, its outer rows, and each result's piece of them. */
typedef struct SplitBound {
  const Val *a;
  int64_t pre;
  uint32_t n;
  SplitJob part[]; /* per result (data pointers set as it runs) */
} SplitBound;

bool bind_split(Ctx *x, int code, Val *out, uint32_t nout, void **bound) {
  (void)code;
  bool ok = true;
  const Val *a = req_arg(x, MIL_ARG_SPLIT_x, &ok);
  double axis_d = scalar_arg(x, MIL_ARG_SPLIT_axis, 0, &ok);
  if (!find_arg(x, MIL_ARG_SPLIT_axis)) return op_fail(x, "missing argument '%s'", mil_arg_name(MIL_ARG_SPLIT_axis));
  uint32_t ax = 0;
  if (!ok || !norm_axis(x, to_index(axis_d), a->rank, &ax)) return false;
  int64_t sizes_buf[64];
  uint32_t ns;
  bool has_sizes = ints_arg(x, MIL_ARG_SPLIT_split_sizes, sizes_buf, 64, &ns, &ok);
  double num = scalar_arg(x, MIL_ARG_SPLIT_num_splits, 0, &ok);
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
  SplitBound *sb = xcalloc(1, sizeof *sb + nout * sizeof sb->part[0]);
  *sb = (SplitBound){.a = a, .pre = pre, .n = nout};
  *bound = sb;
  for (uint32_t k = 0; k < nout; k++) {
    int64_t dims[MIL_MAX_RANK] = {0};
    memcpy(dims, a->dims, sizeof dims);
    dims[ax] = sizes_buf[k];
    if (!expect_shape(x, &out[k], dims, a->rank) || !same_class(x, a, &out[k])) return false;
    if (a->st == ST_H16) return op_fail(x, "fp16 weights are not split in place");
    sb->part[k] = (SplitJob){.chunk = sizes_buf[k] * post, .stride = len * post, .at = at * post};
    at += sizes_buf[k];
  }
  return true;
}

bool k_split(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  const SplitBound *sb = x->c->bound[x->si];
  for (uint32_t k = 0; k < sb->n; k++) {
    SplitJob j = sb->part[k];
    j.a = u32(sb->a), j.o = u32(&out[k]);
    if (j.chunk > 0) par_for(x->c, sb->pre, (GRAIN + j.chunk - 1) / j.chunk, split_task, &j);
  }
  return true;
}

/* concat and stack as bound: the values and the geometry. */
typedef struct JoinBound {
  bool inter;
  uint32_t ax, nv;
  int64_t pre, len, post;
  const Val *v[]; /* the values */
} JoinBound;

static JoinBound *join_values(Ctx *x, const MilArg *va) {
  JoinBound *jb = xcalloc(1, sizeof *jb + va->nitems * sizeof jb->v[0]);
  jb->nv = va->nitems;
  for (uint32_t j = 0; j < va->nitems; j++) jb->v[j] = arg_item(x, va, j);
  return jb;
}

bool bind_concat(Ctx *x, int code, Val *out, uint32_t nout, void **bound) {
  (void)code, (void)nout;
  bool ok = true;
  const MilArg *va = find_arg(x, MIL_ARG_CONCAT_values);
  if (!va || va->nitems == 0) return op_fail(x, "missing argument '%s'", mil_arg_name(MIL_ARG_CONCAT_values));
  double axis_d = scalar_arg(x, MIL_ARG_CONCAT_axis, 0, &ok);
  bool inter = scalar_arg(x, MIL_ARG_CONCAT_interleave, 0, &ok) != 0;
  if (!find_arg(x, MIL_ARG_CONCAT_axis)) return op_fail(x, "missing argument '%s'", mil_arg_name(MIL_ARG_CONCAT_axis));
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
  JoinBound *jb = join_values(x, va);
  jb->inter = inter, jb->ax = ax;
  jb->pre = elements(dims, ax), jb->len = dims[ax], jb->post = elements(dims + ax + 1, v0->rank - ax - 1);
  *bound = jb;
  return true;
}

bool k_concat(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  const JoinBound *jb = x->c->bound[x->si];
  int64_t pre = jb->pre, len = jb->len, post = jb->post;
  uint32_t nv = jb->nv, ax = jb->ax;
  for (int64_t p = 0; p < pre; p++)
    for (int64_t k = 0; k < len; k++) {
      uint32_t j = 0;
      int64_t at = k;
      if (jb->inter) j = (uint32_t)(k % nv), at = k / nv;
      else
        while (at >= jb->v[j]->dims[ax]) at -= jb->v[j++]->dims[ax];
      const Val *v = jb->v[j];
      int64_t jl = v->dims[ax];
      memcpy(u32(out) + (p * len + k) * post, u32(v) + (p * jl + at) * post, (size_t)post * 4);
    }
  return true;
}

/* gather and gather_along_axis as bound: x, the indices (read as the op runs) and the geometry. */
typedef struct GatherJob {
  const Val *a, *ind;
  uint32_t ax;
  int64_t pre, len, post, il;
  bool wrap; /* negative indices wrap (before iOS17) */
} GatherJob;

/* gather along axis: out[pre, j..., post] = x[pre, indices[j...], post]. */
bool bind_gather(Ctx *x, int code, Val *out, uint32_t nout, void **bound) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, MIL_ARG_GATHER_x, &ok), *ind = req_arg(x, MIL_ARG_GATHER_indices, &ok);
  double axis_d = scalar_arg(x, MIL_ARG_GATHER_axis, 0, &ok), bd = scalar_arg(x, MIL_ARG_GATHER_batch_dims, 0, &ok);
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
  /* iOS15/16 wrap negative indices; from iOS17 they are out of bounds. */
  GatherJob j = {.a = a, .ind = ind, .ax = ax, .pre = elements(a->dims, ax), .len = a->dims[ax],
                 .post = elements(a->dims + ax + 1, a->rank - ax - 1), .wrap = x->c->f->ios < 17};
  *bound = dup_job(&j, sizeof j);
  return true;
}

/* "[1, 2]": where flat element i of the indices is, so that an index out of
 * range names the position it came from (a token, a target). */
static void index_position(const Val *ind, int64_t i, char *buf, size_t len) {
  int64_t at[MIL_MAX_RANK];
  for (uint32_t d = ind->rank; d-- > 0;) {
    at[d] = i % ind->dims[d];
    i /= ind->dims[d];
  }
  shape_str(at, ind->rank, buf, len);
}

bool k_gather(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  const GatherJob *g = x->c->bound[x->si];
  const Val *a = g->a, *ind = g->ind;
  int64_t pre = g->pre, len = g->len, post = g->post;
  for (int64_t p = 0; p < pre; p++)
    for (int64_t j = 0; j < ind->n; j++) {
      int64_t k = to_index(ld(ind, j));
      if (k < 0 && g->wrap) k += len;
      if (k < 0 || k >= len) {
        char at[96];
        index_position(ind, j, at, sizeof at);
        return op_fail(x, "index %g is out of range for dimension %u of size %lld (indices element %s)", ld(ind, j),
                       g->ax, (long long)len, at);
      }
      if (a->st == ST_H16)
        for (int64_t q = 0; q < post; q++) st(out, (p * ind->n + j) * post + q, ld(a, (p * len + k) * post + q));
      else
        memcpy(u32(out) + (p * ind->n + j) * post, u32(a) + (p * len + k) * post, (size_t)post * 4);
    }
  return true;
}

/* stack(values, axis): a new dim of size N at axis (in [-(r+1), r]). */
bool bind_stack(Ctx *x, int code, Val *out, uint32_t nout, void **bound) {
  (void)code, (void)nout;
  bool ok = true;
  const MilArg *va = find_arg(x, MIL_ARG_STACK_values);
  if (!va || va->nitems == 0) return op_fail(x, "missing argument '%s'", mil_arg_name(MIL_ARG_STACK_values));
  if (!find_arg(x, MIL_ARG_STACK_axis)) return op_fail(x, "missing argument '%s'", mil_arg_name(MIL_ARG_STACK_axis));
  double axis_d = scalar_arg(x, MIL_ARG_STACK_axis, 0, &ok);
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
  JoinBound *jb = join_values(x, va);
  jb->ax = ax, jb->pre = elements(v0->dims, ax), jb->post = elements(v0->dims + ax, v0->rank - ax);
  *bound = jb;
  return true;
}

bool k_stack(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  const JoinBound *jb = x->c->bound[x->si];
  int64_t pre = jb->pre, post = jb->post;
  uint32_t nv = jb->nv;
  for (int64_t p = 0; p < pre; p++)
    for (uint32_t j = 0; j < nv; j++) memcpy(u32(out) + (p * nv + j) * post, u32(jb->v[j]) + p * post, (size_t)post * 4);
  return true;
}

/* gather_along_axis(x, indices, axis?=0): torch.gather, out[..., j, ...] =
 * x[..., indices[..., j, ...], ...]; indices has x's rank and its dims
 * except at axis. Negative indices wrap before iOS17, as in gather. */
bool bind_gather_axis(Ctx *x, int code, Val *out, uint32_t nout, void **bound) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, MIL_ARG_GATHER_ALONG_AXIS_x, &ok);
  const Val *ind = req_arg(x, MIL_ARG_GATHER_ALONG_AXIS_indices, &ok);
  double axis_d = scalar_arg(x, MIL_ARG_GATHER_ALONG_AXIS_axis, 0, &ok);
  uint32_t ax = 0;
  if (!ok || !copy_from(x, a) || !norm_axis(x, to_index(axis_d), a->rank, &ax)) return false;
  if (ind->st != ST_I32 || ind->dt == MIL_DT_BOOL) return op_fail(x, "indices must be integers");
  bool same = ind->rank == a->rank;
  for (uint32_t i = 0; same && i < a->rank; i++) same = i == ax || ind->dims[i] == a->dims[i];
  if (!same) return op_fail(x, "indices must have the rank of x and its dims except at axis %u", ax);
  if (!expect_shape(x, out, ind->dims, ind->rank) || !same_class(x, a, out)) return false;
  GatherJob j = {.a = a, .ind = ind, .ax = ax, .len = a->dims[ax], .post = elements(a->dims + ax + 1, a->rank - ax - 1),
                 .il = ind->dims[ax], .wrap = x->c->f->ios < 17};
  *bound = dup_job(&j, sizeof j);
  return true;
}

bool k_gather_axis(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  const GatherJob *g = x->c->bound[x->si];
  const Val *a = g->a, *ind = g->ind;
  int64_t len = g->len, post = g->post, il = g->il;
  for (int64_t i = 0; i < out->n; i++) {
    int64_t k = ((const int32_t *)ind->p)[i];
    if (k < 0 && g->wrap) k += len;
    if (k < 0 || k >= len) {
      char at[96];
      index_position(ind, i, at, sizeof at);
      return op_fail(x, "index %lld is out of range for dimension %u of size %lld (indices element %s)",
                     (long long)((const int32_t *)ind->p)[i], g->ax, (long long)len, at);
    }
    int64_t p = i / (il * post), q = i % post;
    u32(out)[i] = u32(a)[(p * len + k) * post + q];
  }
  return true;
}
