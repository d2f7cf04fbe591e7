/*
 * Gradient rules of the layers: softmax, matmul, linear, conv, gather
 * (a scatter-add through a one-hot matmul), layer_norm, rms_norm and sdpa
 * (see grad_rules.c for the table). The backward reads weights as they are,
 * with matmul's transpose flags, never a transposed copy.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff_internal.h"

static int64_t product(const int64_t *dims, int from, int to) {
  int64_t n = 1;
  for (int i = from; i < to; i++) n *= dims[i];
  return n;
}

/* dx = y (g - sum(g y)) along the axis. */
bool grad_softmax(AdCtx *c) {
  IrType x = ad_in_type(c, 0);
  int64_t axis = ir_attr_int(ad_module(c), ad_op(c), "axis", -1);
  if (axis < 0) axis += x.rank;
  IrValueId g = ad_gy(c, 0), y = ad_y(c, 0);
  IrValueId s = ad_reduce(c, OP_REDUCE_SUM, ad_op2(c, OP_MUL, g, y), &axis, 1, true);
  ad_give(c, 0, ad_op2(c, OP_MUL, y, ad_op2(c, OP_SUB, g, s)));
  return true;
}

/* z = op(x) op(y) with op a transpose when flagged: dop(x) = g op(y)^T and
 * dop(y) = op(x)^T g, written with flags on x and y themselves; rank-1
 * operands are made [1, K] / [K, 1] first, broadcast batch dims summed. */
bool grad_matmul(AdCtx *c) {
  IrModule *m = ad_module(c);
  bool tx = ir_attr_bool(m, ad_op(c), "transpose_x", false), ty = ir_attr_bool(m, ad_op(c), "transpose_y", false);
  IrType xt = ad_in_type(c, 0), yt = ad_in_type(c, 1), zt = ad_res_type(c, 0);
  IrValueId x = ad_x(c, 0), y = ad_x(c, 1), g = ad_gy(c, 0);
  if (xt.rank == 1 || yt.rank == 1) {
    int64_t gd[IR_MAX_RANK];
    int gr = 0;
    int64_t M = xt.rank == 1 ? 1 : xt.dims[xt.rank - (tx ? 1 : 2)];
    int64_t N = yt.rank == 1 ? 1 : yt.dims[yt.rank - (ty ? 2 : 1)];
    int xr = xt.rank < 2 ? 2 : xt.rank, yr = yt.rank < 2 ? 2 : yt.rank;
    int nbatch = (xr > yr ? xr : yr) - 2; /* z's leading dims are the broadcast batch */
    for (int i = 0; i < nbatch; i++) gd[gr++] = zt.dims[i];
    gd[gr++] = M;
    gd[gr++] = N;
    g = ad_reshape(c, g, gr, gd);
    if (xt.rank == 1) x = ad_reshape(c, x, 2, (int64_t[]){1, xt.dims[0]});
    if (yt.rank == 1) y = ad_reshape(c, y, 2, (int64_t[]){yt.dims[0], 1});
  }
  if (ad_needs(c, 0)) {
    IrValueId d = tx ? ad_matmul(c, y, g, ty, true) : ad_matmul(c, g, y, false, !ty);
    IrType dt = ad_type(c, d);
    IrType x2 = {.dtype = xt.dtype, .rank = 2, .dims = {1, xt.dims[0]}};
    if (!ir_type_equal(&dt, xt.rank == 1 ? &x2 : &xt)) d = ad_unbroadcast(c, d, xt.rank == 1 ? &x2 : &xt);
    if (xt.rank == 1) d = ad_reshape(c, d, 1, xt.dims);
    ad_give(c, 0, d);
  }
  if (ad_needs(c, 1)) {
    IrValueId d = ty ? ad_matmul(c, g, x, true, tx) : ad_matmul(c, x, g, !tx, false);
    IrType dt = ad_type(c, d);
    IrType y2 = {.dtype = yt.dtype, .rank = 2, .dims = {yt.dims[0], 1}};
    if (!ir_type_equal(&dt, yt.rank == 1 ? &y2 : &yt)) d = ad_unbroadcast(c, d, yt.rank == 1 ? &y2 : &yt);
    if (yt.rank == 1) d = ad_reshape(c, d, 1, yt.dims);
    ad_give(c, 1, d);
  }
  return true;
}

/* y = x W^T + b: dx = g W, dW = g^T x over every row, db = sum of g's rows. */
bool grad_linear(AdCtx *c) {
  IrType xt = ad_in_type(c, 0), wt = ad_in_type(c, 1);
  IrValueId g = ad_gy(c, 0);
  int64_t out = wt.dims[0], in = wt.dims[1], rows = product(xt.dims, 0, xt.rank - 1);
  if (ad_needs(c, 0)) {
    IrValueId d = ad_matmul(c, g, ad_x(c, 1), false, false);
    ad_give(c, 0, ad_reshape(c, d, xt.rank, xt.dims));
  }
  if (ad_needs(c, 1)) {
    IrValueId g2 = ad_reshape(c, g, 2, (int64_t[]){rows, out});
    IrValueId x2 = ad_reshape(c, ad_x(c, 0), 2, (int64_t[]){rows, in});
    ad_give(c, 1, ad_matmul(c, g2, x2, true, false));
  }
  if (ad_nin(c) > 2 && ad_needs(c, 2)) {
    IrValueId g2 = ad_reshape(c, g, 2, (int64_t[]){rows, out});
    ad_give(c, 2, ad_reduce(c, OP_REDUCE_SUM, g2, (int64_t[]){0}, 1, false));
  }
  return true;
}

/* The padding before each spatial dimension and the padded size, as infer.c
 * and the reference evaluator read pad_type. */
typedef struct ConvGeom {
  int sp;
  int64_t strides[IR_MAX_RANK], dil[IR_MAX_RANK], before[IR_MAX_RANK], padded[IR_MAX_RANK];
  bool padding;
} ConvGeom;

static void conv_geom(AdCtx *c, const IrType *xt, const IrType *wt, ConvGeom *cg) {
  IrModule *m = ad_module(c);
  memset(cg, 0, sizeof *cg);
  cg->sp = xt->rank - 2;
  int64_t pad[2 * IR_MAX_RANK] = {0};
  for (int i = 0; i < IR_MAX_RANK; i++) cg->strides[i] = cg->dil[i] = 1;
  ir_attr_ints(m, ad_op(c), "strides", cg->strides, IR_MAX_RANK);
  ir_attr_ints(m, ad_op(c), "dilations", cg->dil, IR_MAX_RANK);
  ir_attr_ints(m, ad_op(c), "pad", pad, 2 * IR_MAX_RANK);
  const char *type = ir_attr_str(m, ad_op(c), "pad_type", ir_op_attr(m, ad_op(c), "pad") ? "custom" : "valid");
  for (int i = 0; i < cg->sp; i++) {
    int64_t d = xt->dims[2 + i], s = cg->strides[i], ek = (wt->dims[2 + i] - 1) * cg->dil[i] + 1, total = 0;
    if (strcmp(type, "custom") == 0) {
      cg->before[i] = pad[2 * i];
      total = pad[2 * i] + pad[2 * i + 1];
    } else if (strcmp(type, "same") == 0 || strcmp(type, "same_lower") == 0) {
      total = s * ((d + s - 1) / s) - d + ek - s;
      if (total < 0) total = 0;
      cg->before[i] = strcmp(type, "same") == 0 ? total / 2 : total - total / 2;
    }
    cg->padded[i] = d + total;
    cg->padding = cg->padding || total > 0;
  }
}

/* dW from its pieces per kernel position (row-major over the kernel's
 * positions, each [Cout, Cin/G, 1, ...]), concatenated axis by axis. */
static IrValueId assemble_kernel(AdCtx *c, IrValueId *pieces, uint32_t n, const IrType *wt) {
  int sp = wt->rank - 2;
  for (int axis = wt->rank - 1; axis >= 2 && sp > 0; axis--) {
    uint32_t k = (uint32_t)wt->dims[axis], out = 0;
    for (uint32_t i = 0; i < n; i += k) pieces[out++] = ad_concat(c, pieces + i, k, axis);
    n = out;
  }
  return pieces[0];
}

/* conv(x, W) is, per kernel position p, a matmul of W[:, :, p] over the
 * channels (per group) with the strided slice of the padded x that p sees.
 * So dW[:, :, p] = sum over N of g x_p^T, and dx is the sum over p of
 * W[:, :, p]^T g put back where the slice came from, minus the padding.
 * 1x1 kernels with stride 1 and no padding are the single position. */
bool grad_conv(AdCtx *c) {
  IrModule *m = ad_module(c);
  IrType xt = ad_in_type(c, 0), wt = ad_in_type(c, 1), yt = ad_res_type(c, 0);
  ConvGeom cg;
  conv_geom(c, &xt, &wt, &cg);
  int sp = cg.sp;
  int64_t G = ir_attr_int(m, ad_op(c), "groups", 1);
  int64_t N = xt.dims[0], cin = xt.dims[1], cout = wt.dims[0], S = product(yt.dims, 2, yt.rank);
  uint32_t npos = (uint32_t)product(wt.dims, 2, wt.rank);
  bool need_x = ad_needs(c, 0), need_w = ad_needs(c, 1);
  IrValueId g = ad_reshape(c, ad_gy(c, 0), 4, (int64_t[]){N, G, cout / G, S});
  IrValueId xp = IR_NO_VALUE, w = IR_NO_VALUE, dxp = IR_NO_VALUE;
  if (need_w) {
    xp = ad_x(c, 0);
    for (int i = 0; i < sp && cg.padding; i++) xp = ad_unslice(c, xp, 2 + i, cg.before[i], 1, cg.padded[i]);
  }
  if (need_x) w = ad_x(c, 1);
  IrValueId *pieces = xmalloc(sizeof *pieces * npos);
  int64_t pos[IR_MAX_RANK] = {0};
  for (uint32_t p = 0; p < npos; p++) {
    int64_t begin[IR_MAX_RANK] = {0}, end[IR_MAX_RANK], stride[IR_MAX_RANK] = {1, 1, 1, 1, 1};
    int64_t ydims[IR_MAX_RANK] = {N, cin};
    for (int i = 0; i < sp; i++) ydims[2 + i] = yt.dims[2 + i];
    if (need_w) {
      end[0] = N;
      end[1] = cin;
      for (int i = 0; i < sp; i++) {
        begin[2 + i] = pos[i] * cg.dil[i];
        end[2 + i] = begin[2 + i] + (yt.dims[2 + i] - 1) * cg.strides[i] + 1;
        stride[2 + i] = cg.strides[i];
      }
      IrValueId xs = npos == 1 && !cg.padding && S == product(xt.dims, 2, xt.rank) ? xp : ad_slice(c, xp, begin, end, stride);
      xs = ad_reshape(c, xs, 4, (int64_t[]){N, G, cin / G, S});
      IrValueId d = ad_reduce(c, OP_REDUCE_SUM, ad_matmul(c, g, xs, false, true), (int64_t[]){0}, 1, false);
      int64_t pd[IR_MAX_RANK] = {cout, cin / G, 1, 1, 1};
      pieces[p] = ad_reshape(c, d, wt.rank, pd);
    }
    if (need_x) {
      int64_t wb[IR_MAX_RANK] = {0}, we[IR_MAX_RANK] = {cout, cin / G};
      for (int i = 0; i < sp; i++) wb[2 + i] = pos[i], we[2 + i] = pos[i] + 1;
      IrValueId wk = npos == 1 ? w : ad_slice(c, w, wb, we, NULL);
      wk = ad_reshape(c, wk, 3, (int64_t[]){G, cout / G, cin / G});
      IrValueId d = ad_reshape(c, ad_matmul(c, wk, g, true, false), xt.rank, ydims); /* [N, Cin, O...] */
      for (int i = 0; i < sp; i++) {
        int64_t at = pos[i] * cg.dil[i], size = cg.padded[i];
        if (at == 0 && cg.strides[i] == 1 && yt.dims[2 + i] == size) continue;
        d = ad_unslice(c, d, 2 + i, at, cg.strides[i], size);
        if (ir_id_is_none(d)) {
          free(pieces);
          return ad_fail(c, "'conv' with strides is differentiable up to 2 spatial dimensions only");
        }
      }
      dxp = ir_id_is_none(dxp) ? d : ad_op2(c, OP_ADD, dxp, d);
    }
    for (int i = sp - 1; i >= 0; i--) /* the next kernel position, row-major */
      if (++pos[i] < wt.dims[2 + i]) break;
      else pos[i] = 0;
  }
  if (need_x) {
    if (cg.padding) {
      int64_t b[IR_MAX_RANK] = {0}, e[IR_MAX_RANK] = {N, cin};
      for (int i = 0; i < sp; i++) b[2 + i] = cg.before[i], e[2 + i] = cg.before[i] + xt.dims[2 + i];
      dxp = ad_slice(c, dxp, b, e, NULL);
    }
    ad_give(c, 0, dxp);
  }
  if (need_w) ad_give(c, 1, assemble_kernel(c, pieces, npos, &wt));
  free(pieces);
  if (ad_nin(c) > 2 && ad_needs(c, 2)) {
    int64_t axes[IR_MAX_RANK];
    int n = 0;
    for (int i = 0; i < yt.rank; i++)
      if (i != 1) axes[n++] = i;
    ad_give(c, 2, ad_reduce(c, OP_REDUCE_SUM, ad_gy(c, 0), axes, n, false));
  }
  return true;
}

/* The table's rows picked by the indices, summed back: with the indices
 * flattened to n, one_hot[V, n] = (index == row), and d table = one_hot
 * times the adjoint as [pre, n, post]. The IR has no comparison: "index ==
 * row" is "index - row is not non-zero". An embedding (a param's rows by an
 * input's ids) may instead hand its adjoint out for the caller to add by
 * rows, O(tokens x dim) rather than O(vocabulary x tokens x dim). */
bool grad_gather(AdCtx *c) {
  if (!ad_needs(c, 0)) return true;
  if (ad_gather_by_rows(c)) {
    ad_give_rows(c, ad_gy(c, 0));
    return true;
  }
  IrModule *m = ad_module(c);
  IrType xt = ad_in_type(c, 0), it = ad_in_type(c, 1);
  int axis = (int)ir_attr_int(m, ad_op(c), "axis", 0);
  if (axis < 0) axis += xt.rank;
  int64_t V = xt.dims[axis], n = product(it.dims, 0, it.rank);
  int64_t pre = product(xt.dims, 0, axis), post = product(xt.dims, axis + 1, xt.rank);
  IrValueId idx = ad_reshape(c, ad_x(c, 1), 2, (int64_t[]){1, n});
  double *rows = xmalloc(sizeof *rows * (size_t)V);
  for (int64_t i = 0; i < V; i++) rows[i] = (double)i;
  IrType rt = {.dtype = DT_INT32, .rank = 2, .dims = {V, 1}};
  IrValueId row = ad_const(c, &rt, rows, (uint64_t)V);
  free(rows);
  IrValueId other = ad_nonzero(c, ad_op2(c, OP_SUB, idx, row)); /* [V, n] */
  IrValueId one_hot = ad_select(c, other, ad_scalar(c, xt.dtype, 0.0), ad_scalar(c, xt.dtype, 1.0));
  IrValueId g = ad_reshape(c, ad_gy(c, 0), 3, (int64_t[]){pre, n, post});
  IrValueId d = ad_matmul(c, one_hot, g, false, false); /* [pre, V, post] */
  ad_give(c, 0, ad_reshape(c, d, xt.rank, xt.dims));
  return true;
}

/* x - mean and 1 / sqrt(var + eps) over the normalized axes, recomputed from
 * x (cheaper to keep than the normalized tensor). */
static IrValueId normalized(AdCtx *c, IrValueId x, const int64_t *axes, int n, bool center, IrValueId *rstd) {
  double eps = ir_attr_float(ad_module(c), ad_op(c), "epsilon", 1e-5);
  if (center) x = ad_op2(c, OP_SUB, x, ad_reduce(c, OP_REDUCE_MEAN, x, axes, n, true));
  IrValueId var = ad_reduce(c, OP_REDUCE_MEAN, ad_op2(c, OP_MUL, x, x), axes, n, true);
  IrOpId op = ad_begin(c, OP_RSQRT, &var, 1, 1);
  ir_op_set_attr_float(ad_module(c), op, "epsilon", eps);
  *rstd = ad_end(c, op);
  return ad_op2(c, OP_MUL, x, *rstd);
}

/* gamma's layout is the normalized axes in the order `axes` lists them; in
 * x's layout it is those axes ascending, size 1 elsewhere. */
typedef struct NormAxes {
  int64_t axes[IR_MAX_RANK]; /* ascending */
  int n;
  int64_t listed[IR_MAX_RANK]; /* as written, normalized */
  int64_t to_x[IR_MAX_RANK];   /* perm: gamma -> ascending order */
  int64_t to_gamma[IR_MAX_RANK];
  int64_t others[IR_MAX_RANK]; /* axes not normalized */
  int nothers;
} NormAxes;

static void norm_axes(AdCtx *c, int r, NormAxes *a) {
  int64_t listed[IR_MAX_RANK + 1];
  int n = ir_attr_ints(ad_module(c), ad_op(c), "axes", listed, IR_MAX_RANK + 1);
  if (n < 0) listed[0] = r - 1, n = 1;
  memset(a, 0, sizeof *a);
  a->n = n;
  bool mask[IR_MAX_RANK] = {false};
  for (int i = 0; i < n; i++) {
    a->listed[i] = listed[i] < 0 ? listed[i] + r : listed[i];
    mask[a->listed[i]] = true;
  }
  for (int i = 0, j = 0; i < r; i++)
    if (mask[i]) a->axes[j++] = i;
    else a->others[a->nothers++] = i;
  /* to_x[j]: the position in `listed` of the j-th smallest axis */
  for (int j = 0; j < n; j++)
    for (int i = 0; i < n; i++)
      if (a->listed[i] == a->axes[j]) a->to_x[j] = i;
  for (int j = 0; j < n; j++) a->to_gamma[a->to_x[j]] = j;
}

static IrValueId gamma_in_x_layout(AdCtx *c, IrValueId gamma, const IrType *x, const NormAxes *a) {
  IrValueId t = ad_transpose(c, gamma, a->to_x, a->n);
  int64_t dims[IR_MAX_RANK];
  for (int i = 0; i < x->rank; i++) dims[i] = 1;
  for (int j = 0; j < a->n; j++) dims[a->axes[j]] = x->dims[a->axes[j]];
  return ad_reshape(c, t, x->rank, dims);
}

static IrValueId to_gamma_layout(AdCtx *c, IrValueId v, const IrType *x, const NormAxes *a) {
  v = ad_reduce(c, OP_REDUCE_SUM, v, a->others, a->nothers, false);
  int64_t dims[IR_MAX_RANK];
  for (int j = 0; j < a->n; j++) dims[j] = x->dims[a->axes[j]];
  v = ad_reshape(c, v, a->n, dims);
  return ad_transpose(c, v, a->to_gamma, a->n);
}

/* xhat = normalized x, dxhat = g gamma:
 * layer_norm: dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat));
 * rms_norm:   dx = rstd (dxhat - xhat mean(dxhat xhat));
 * d gamma = sum of g xhat, d beta = sum of g, over the other axes. */
static bool grad_norm(AdCtx *c, bool center) {
  IrType xt = ad_in_type(c, 0);
  NormAxes a;
  norm_axes(c, xt.rank, &a);
  IrValueId g = ad_gy(c, 0), rstd;
  IrValueId xhat = normalized(c, ad_x(c, 0), a.axes, a.n, center, &rstd);
  if (ad_needs(c, 0)) {
    IrValueId dxhat = ad_nin(c) > 1 ? ad_op2(c, OP_MUL, g, gamma_in_x_layout(c, ad_x(c, 1), &xt, &a)) : g;
    IrValueId proj = ad_reduce(c, OP_REDUCE_MEAN, ad_op2(c, OP_MUL, dxhat, xhat), a.axes, a.n, true);
    IrValueId d = ad_op2(c, OP_SUB, dxhat, ad_op2(c, OP_MUL, xhat, proj));
    if (center) d = ad_op2(c, OP_SUB, d, ad_reduce(c, OP_REDUCE_MEAN, dxhat, a.axes, a.n, true));
    ad_give(c, 0, ad_op2(c, OP_MUL, d, rstd));
  }
  if (ad_nin(c) > 1 && ad_needs(c, 1)) ad_give(c, 1, to_gamma_layout(c, ad_op2(c, OP_MUL, g, xhat), &xt, &a));
  if (ad_nin(c) > 2 && ad_needs(c, 2)) ad_give(c, 2, to_gamma_layout(c, g, &xt, &a));
  return true;
}

bool grad_layer_norm(AdCtx *c) { return grad_norm(c, true); }
bool grad_rms_norm(AdCtx *c) { return grad_norm(c, false); }

/* o = P v with P = softmax(q k^T scale + mask), recomputed from q and k:
 * dv = P^T g, dP = g v^T, ds = P (dP - sum(dP P)), dq = ds k scale,
 * dk = ds^T q scale, a float mask gets ds. Masked scores get the most
 * negative finite value of the dtype, whose exp is 0 as -inf's is. */
bool grad_sdpa(AdCtx *c) {
  IrModule *m = ad_module(c);
  IrType qt = ad_in_type(c, 0), kt = ad_in_type(c, 1);
  int r = qt.rank;
  int64_t L = qt.dims[r - 2], E = qt.dims[r - 1], S = kt.dims[r - 2];
  double scale = ir_attr_float(m, ad_op(c), "scale", 1.0 / sqrt((double)E));
  bool causal = ir_attr_bool(m, ad_op(c), "causal", false);
  IrDType dt = qt.dtype;
  double lowest = dt == DT_FP16 ? -65504.0 : -3.4028234663852886e38;
  IrValueId q = ad_x(c, 0), k = ad_x(c, 1), v = ad_x(c, 2), g = ad_gy(c, 0);
  IrValueId sc = ad_scalar(c, dt, scale);
  IrValueId s = ad_op2(c, OP_MUL, ad_matmul(c, q, k, false, true), sc);
  bool has_mask = ad_nin(c) > 3;
  IrType mt = has_mask ? ad_in_type(c, 3) : qt;
  if (has_mask) {
    IrValueId mask = ad_x(c, 3);
    s = mt.dtype == DT_BOOL ? ad_select(c, mask, s, ad_scalar(c, dt, lowest)) : ad_op2(c, OP_ADD, s, mask);
  }
  if (causal) {
    double *keep = xmalloc(sizeof *keep * (size_t)(L * S));
    for (int64_t i = 0; i < L; i++)
      for (int64_t j = 0; j < S; j++) keep[i * S + j] = j <= i + (S - L);
    IrType kt2 = {.dtype = DT_BOOL, .rank = 2, .dims = {L, S}};
    IrValueId km = ad_const(c, &kt2, keep, (uint64_t)(L * S));
    free(keep);
    s = ad_select(c, km, s, ad_scalar(c, dt, lowest));
  }
  IrOpId sm = ad_begin(c, OP_SOFTMAX, &s, 1, 1);
  ir_op_set_attr_int(m, sm, "axis", -1);
  IrValueId p = ad_end(c, sm);
  if (ad_needs(c, 2)) ad_give(c, 2, ad_matmul(c, p, g, true, false));
  bool want_scores = ad_needs(c, 0) || ad_needs(c, 1) || (has_mask && ad_needs(c, 3));
  if (!want_scores) return true;
  IrValueId dp = ad_matmul(c, g, v, false, true);
  int64_t last = r - 1;
  IrValueId dot = ad_reduce(c, OP_REDUCE_SUM, ad_op2(c, OP_MUL, dp, p), &last, 1, true);
  IrValueId ds = ad_op2(c, OP_MUL, p, ad_op2(c, OP_SUB, dp, dot));
  if (has_mask && ad_needs(c, 3)) ad_give(c, 3, ad_unbroadcast(c, ds, &mt));
  IrValueId dss = ad_op2(c, OP_MUL, ds, sc);
  if (ad_needs(c, 0)) ad_give(c, 0, ad_matmul(c, dss, k, false, false));
  if (ad_needs(c, 1)) ad_give(c, 1, ad_matmul(c, dss, q, true, false));
  return true;
}
