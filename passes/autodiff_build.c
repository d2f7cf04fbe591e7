/*
 * The builders gradient rules emit the backward with (autodiff_internal.h):
 * ordinary IR ops in F.bwd, each inferred as it is made, so that the backward
 * goes through the normal verifier and pass pipeline.
 */
#include <stdlib.h>
#include <string.h>

#include "autodiff_internal.h"

IrValueId ad_op1(AdCtx *c, IrOpKind k, IrValueId a) { return ad_end(c, ad_begin(c, k, &a, 1, 1)); }

IrValueId ad_op2(AdCtx *c, IrOpKind k, IrValueId a, IrValueId b) {
  IrValueId in[2] = {a, b};
  return ad_end(c, ad_begin(c, k, in, 2, 1));
}

IrValueId ad_scalar(AdCtx *c, IrDType dt, double v) {
  IrType t = {.dtype = dt, .rank = 0};
  return ad_const(c, &t, &v, 1);
}

IrValueId ad_zeros(AdCtx *c, const IrType *t) {
  double z = 0;
  return ad_const(c, t, &z, 1);
}

IrValueId ad_reshape(AdCtx *c, IrValueId x, int rank, const int64_t *dims) {
  IrType t = ad_type(c, x);
  if (t.rank == rank && memcmp(t.dims, dims, sizeof *dims * (size_t)rank) == 0) return x;
  IrOpId op = ad_begin(c, OP_RESHAPE, &x, 1, 1);
  ir_op_set_attr_ints(ad_module(c), op, "shape", dims, (uint32_t)rank);
  return ad_end(c, op);
}

IrValueId ad_transpose(AdCtx *c, IrValueId x, const int64_t *perm, int rank) {
  bool same = true;
  for (int i = 0; i < rank; i++) same = same && perm[i] == i;
  if (same) return x;
  IrOpId op = ad_begin(c, OP_TRANSPOSE, &x, 1, 1);
  ir_op_set_attr_ints(ad_module(c), op, "perm", perm, (uint32_t)rank);
  return ad_end(c, op);
}

IrValueId ad_reduce(AdCtx *c, IrOpKind k, IrValueId x, const int64_t *axes, int naxes, bool keep) {
  if (naxes == 0) return x;
  IrOpId op = ad_begin(c, k, &x, 1, 1);
  ir_op_set_attr_ints(ad_module(c), op, "axes", axes, (uint32_t)naxes);
  if (keep) ir_op_set_attr_bool(ad_module(c), op, "keep_dims", true);
  return ad_end(c, op);
}

IrValueId ad_matmul(AdCtx *c, IrValueId a, IrValueId b, bool ta, bool tb) {
  IrValueId in[2] = {a, b};
  IrOpId op = ad_begin(c, OP_MATMUL, in, 2, 1);
  if (ta) ir_op_set_attr_bool(ad_module(c), op, "transpose_x", true);
  if (tb) ir_op_set_attr_bool(ad_module(c), op, "transpose_y", true);
  return ad_end(c, op);
}

IrValueId ad_cast(AdCtx *c, IrValueId x, IrDType dt) {
  if (ad_type(c, x).dtype == dt) return x;
  IrOpId op = ad_begin(c, OP_CAST, &x, 1, 1);
  ir_op_set_attr_str(ad_module(c), op, "dtype", ir_dtype_name(dt));
  return ad_end(c, op);
}

IrValueId ad_select(AdCtx *c, IrValueId cond, IrValueId a, IrValueId b) {
  IrValueId in[3] = {cond, a, b};
  return ad_end(c, ad_begin(c, OP_SELECT, in, 3, 1));
}

IrValueId ad_nonzero(AdCtx *c, IrValueId x) { return ad_cast(c, x, DT_BOOL); }

IrValueId ad_concat(AdCtx *c, const IrValueId *parts, uint32_t n, int axis) {
  if (n == 1) return parts[0];
  IrOpId op = ad_begin(c, OP_CONCAT, parts, n, 1);
  ir_op_set_attr_int(ad_module(c), op, "axis", axis);
  return ad_end(c, op);
}

IrValueId ad_slice(AdCtx *c, IrValueId x, const int64_t *begin, const int64_t *end, const int64_t *stride) {
  IrType t = ad_type(c, x);
  IrOpId op = ad_begin(c, OP_SLICE, &x, 1, 1);
  ir_op_set_attr_ints(ad_module(c), op, "begin", begin, t.rank);
  ir_op_set_attr_ints(ad_module(c), op, "end", end, t.rank);
  if (stride) ir_op_set_attr_ints(ad_module(c), op, "stride", stride, t.rank);
  return ad_end(c, op);
}

IrValueId ad_unbroadcast(AdCtx *c, IrValueId g, const IrType *to) {
  IrType gt = ad_type(c, g);
  int lead = gt.rank - to->rank;
  int64_t axes[IR_MAX_RANK];
  int n = 0;
  for (int i = 0; i < gt.rank; i++)
    if (i < lead || (to->dims[i - lead] == 1 && gt.dims[i] != 1)) axes[n++] = i;
  g = ad_reduce(c, OP_REDUCE_SUM, g, axes, n, true);
  return ad_reshape(c, g, to->rank, to->dims);
}

IrValueId ad_expand(AdCtx *c, IrValueId g, const IrType *to) {
  IrType gt = ad_type(c, g);
  if (ir_type_equal(&gt, to)) return g;
  IrType zt = *to;
  zt.dtype = gt.dtype;
  return ad_op2(c, OP_ADD, g, ad_zeros(c, &zt)); /* broadcasting against a splat of zeros: the IR has no tile op */
}

/* g padded with zeros along `axis` to `size`: `before` zeros, then g, then the rest. */
static IrValueId pad_axis(AdCtx *c, IrValueId g, int axis, int64_t before, int64_t size) {
  IrType t = ad_type(c, g);
  int64_t after = size - before - t.dims[axis];
  IrValueId parts[3];
  uint32_t n = 0;
  if (before > 0) {
    IrType z = t;
    z.dims[axis] = before;
    parts[n++] = ad_zeros(c, &z);
  }
  parts[n++] = g;
  if (after > 0) {
    IrType z = t;
    z.dims[axis] = after;
    parts[n++] = ad_zeros(c, &z);
  }
  return ad_concat(c, parts, n, axis);
}

/* The elements of a strided slice back in place: each one followed by
 * stride - 1 zeros (a new axis after `axis`, concatenated and merged), cut
 * to what fits, then padded as a contiguous slice. */
static IrValueId unstride(AdCtx *c, IrValueId g, int axis, int64_t stride, int64_t room) {
  IrType t = ad_type(c, g);
  int64_t dims[IR_MAX_RANK];
  int r = t.rank;
  for (int i = 0, j = 0; i < r; i++) {
    dims[j++] = t.dims[i];
    if (i == axis) dims[j++] = 1;
  }
  IrValueId spread = ad_reshape(c, g, r + 1, dims);
  dims[axis + 1] = stride - 1;
  IrType zt = {.dtype = t.dtype, .rank = (uint8_t)(r + 1)};
  memcpy(zt.dims, dims, sizeof dims);
  IrValueId parts[2] = {spread, ad_zeros(c, &zt)};
  IrValueId joined = ad_concat(c, parts, 2, axis + 1);
  int64_t merged[IR_MAX_RANK];
  for (int i = 0; i < r; i++) merged[i] = i == axis ? t.dims[i] * stride : t.dims[i];
  IrValueId flat = ad_reshape(c, joined, r, merged);
  if (merged[axis] <= room) return flat;
  int64_t begin[IR_MAX_RANK] = {0}, end[IR_MAX_RANK];
  for (int i = 0; i < r; i++) end[i] = i == axis ? room : merged[i];
  return ad_slice(c, flat, begin, end, NULL);
}

IrValueId ad_unslice(AdCtx *c, IrValueId g, int axis, int64_t begin, int64_t stride, int64_t size) {
  IrType t = ad_type(c, g);
  if (stride > 1) {
    if (t.rank == IR_MAX_RANK) return IR_NO_VALUE; /* no room for the interleaving axis */
    g = unstride(c, g, axis, stride, size - begin);
  }
  return pad_axis(c, g, axis, begin, size);
}

int ad_axes_mask(AdCtx *c, const char *attr, int r, bool dflt_last, bool *mask) {
  int64_t axes[IR_MAX_RANK + 1];
  int n = ir_attr_ints(ad_module(c), ad_op(c), attr, axes, IR_MAX_RANK + 1);
  memset(mask, 0, sizeof *mask * (size_t)(r ? r : 1));
  if (n < 0) {
    if (dflt_last) {
      mask[r - 1] = true;
      return 1;
    }
    for (int i = 0; i < r; i++) mask[i] = true;
    return r;
  }
  for (int i = 0; i < n; i++) mask[axes[i] < 0 ? axes[i] + r : axes[i]] = true;
  return n;
}
