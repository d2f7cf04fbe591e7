/*
 * Gradient rules of reductions and shape ops: reduce_sum/mean/max, reshape,
 * transpose, slice, split, concat (see grad_rules.c for the table).
 */
#include <stdlib.h>
#include <string.h>

#include "autodiff_internal.h"

/* The result's adjoint with the reduced axes kept as size 1, so it broadcasts over x. */
static IrValueId kept(AdCtx *c, IrValueId g, const IrType *x, const bool *mask) {
  int64_t dims[IR_MAX_RANK];
  for (int i = 0; i < x->rank; i++) dims[i] = mask[i] ? 1 : x->dims[i];
  return ad_reshape(c, g, x->rank, dims);
}

bool grad_reduce(AdCtx *c) {
  IrModule *m = ad_module(c);
  IrOpKind k = ir_op(m, ad_op(c))->kind;
  IrType x = ad_in_type(c, 0);
  bool mask[IR_MAX_RANK];
  ad_axes_mask(c, "axes", x.rank, false, mask);
  IrValueId g = kept(c, ad_gy(c, 0), &x, mask);
  if (k == OP_REDUCE_SUM) {
    ad_give(c, 0, ad_expand(c, g, &x));
  } else if (k == OP_REDUCE_MEAN) {
    int64_t count = 1;
    for (int i = 0; i < x.rank; i++) count *= mask[i] ? x.dims[i] : 1;
    ad_give(c, 0, ad_expand(c, ad_op2(c, OP_MUL, g, ad_scalar(c, x.dtype, 1.0 / (double)count)), &x));
  } else { /* max: to every element equal to the maximum (ties share it fully) */
    IrValueId y = kept(c, ad_y(c, 0), &x, mask);
    IrValueId other = ad_nonzero(c, ad_op2(c, OP_SUB, ad_x(c, 0), y));
    ad_give(c, 0, ad_select(c, other, ad_scalar(c, x.dtype, 0.0), ad_expand(c, g, &x)));
  }
  return true;
}

bool grad_reshape(AdCtx *c) {
  IrType x = ad_in_type(c, 0);
  ad_give(c, 0, ad_reshape(c, ad_gy(c, 0), x.rank, x.dims));
  return true;
}

bool grad_transpose(AdCtx *c) {
  int64_t perm[IR_MAX_RANK], inv[IR_MAX_RANK];
  int r = ir_attr_ints(ad_module(c), ad_op(c), "perm", perm, IR_MAX_RANK);
  for (int i = 0; i < r; i++) inv[perm[i] < 0 ? perm[i] + r : perm[i]] = i;
  ad_give(c, 0, ad_transpose(c, ad_gy(c, 0), inv, r));
  return true;
}

bool grad_slice(AdCtx *c) {
  IrModule *m = ad_module(c);
  IrType x = ad_in_type(c, 0), y = ad_res_type(c, 0);
  int64_t begin[IR_MAX_RANK], stride[IR_MAX_RANK] = {1, 1, 1, 1, 1};
  ir_attr_ints(m, ad_op(c), "begin", begin, IR_MAX_RANK);
  ir_attr_ints(m, ad_op(c), "stride", stride, IR_MAX_RANK);
  IrValueId g = ad_gy(c, 0);
  for (int i = 0; i < x.rank; i++) {
    int64_t n = x.dims[i], lo = begin[i] < 0 ? begin[i] + n : begin[i];
    lo = lo < 0 ? 0 : lo > n ? n : lo;
    if (lo == 0 && y.dims[i] == n) continue; /* the whole axis */
    g = ad_unslice(c, g, i, lo, stride[i], n);
    if (ir_id_is_none(g)) return ad_fail(c, "'slice' with a stride is differentiable up to rank %d only", IR_MAX_RANK - 1);
  }
  ad_give(c, 0, g);
  return true;
}

bool grad_split(AdCtx *c) {
  IrModule *m = ad_module(c);
  IrType x = ad_in_type(c, 0);
  int axis = (int)ir_attr_int(m, ad_op(c), "axis", 0);
  if (axis < 0) axis += x.rank;
  uint32_t n = ad_nres(c);
  IrValueId *parts = xmalloc(sizeof *parts * n);
  for (uint32_t i = 0; i < n; i++) parts[i] = ad_gy(c, i); /* parts without an adjoint are zeros */
  ad_give(c, 0, ad_concat(c, parts, n, axis));
  free(parts);
  return true;
}

bool grad_concat(AdCtx *c) {
  IrModule *m = ad_module(c);
  IrType y = ad_res_type(c, 0);
  int axis = (int)ir_attr_int(m, ad_op(c), "axis", 0);
  if (axis < 0) axis += y.rank;
  IrValueId g = ad_gy(c, 0);
  int64_t at = 0;
  for (uint32_t i = 0; i < ad_nin(c); i++) {
    IrType t = ad_in_type(c, i);
    if (ad_needs(c, i)) {
      int64_t begin[IR_MAX_RANK] = {0}, end[IR_MAX_RANK];
      for (int d = 0; d < y.rank; d++) end[d] = y.dims[d];
      begin[axis] = at;
      end[axis] = at + t.dims[axis];
      ad_give(c, i, ad_slice(c, g, begin, end, NULL));
    }
    at += t.dims[axis];
  }
  return true;
}
