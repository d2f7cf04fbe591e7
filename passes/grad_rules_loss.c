/*
 * Gradient rule of the losses: cross_entropy (see grad_rules.c for the
 * table and docs/language.md for the op).
 *
 * loss = sum over counted positions of (logsumexp(x) - x[t]) / count, so
 * dx = (softmax(x) - one_hot(t)) * keep / count * g, in fp32 whatever the
 * logits' dtype (the forward computes in fp32 too), cast back to it. keep is
 * 1 where the target is not ignore_index (1 everywhere without it) and count
 * their number; every position ignored gives 0/0 = NaN, as the loss itself.
 */
#include <stdlib.h>

#include "autodiff_internal.h"

/* 1 where t differs from `ignore`, else 0, in fp32 (t's shape). */
static IrValueId kept(AdCtx *c, IrValueId t, int64_t ignore) {
  IrValueId differs = ad_nonzero(c, ad_op2(c, OP_SUB, t, ad_scalar(c, DT_INT32, (double)ignore)));
  return ad_select(c, differs, ad_scalar(c, DT_FP32, 1.0), ad_scalar(c, DT_FP32, 0.0));
}

bool grad_cross_entropy(AdCtx *c) {
  if (!ad_needs(c, 0)) return true;
  IrModule *m = ad_module(c);
  IrType xt = ad_in_type(c, 0), tt = ad_in_type(c, 1);
  int64_t C = xt.dims[xt.rank - 1];
  int64_t positions = 1;
  for (int i = 0; i < tt.rank; i++) positions *= tt.dims[i];

  IrValueId x = ad_x(c, 0), t = ad_x(c, 1);
  if (xt.dtype != DT_FP32) x = ad_cast(c, x, DT_FP32);
  int64_t last = xt.rank - 1;
  IrOpId sm = ad_begin(c, OP_SOFTMAX, &x, 1, 1);
  ir_op_set_attr_int(m, sm, "axis", last);
  IrValueId p = ad_end(c, sm);

  /* one_hot(t): t[..., None] - [0, 1, ..., C-1] is 0 exactly at the target. */
  int64_t tcol[IR_MAX_RANK];
  for (int i = 0; i < tt.rank; i++) tcol[i] = tt.dims[i];
  tcol[tt.rank] = 1;
  IrValueId tc = ad_reshape(c, t, tt.rank + 1, tcol);
  double *classes = xmalloc(sizeof *classes * (size_t)C);
  for (int64_t i = 0; i < C; i++) classes[i] = (double)i;
  IrType ct = {.dtype = DT_INT32, .rank = 1, .dims = {C}};
  IrValueId cls = ad_const(c, &ct, classes, (uint64_t)C);
  free(classes);
  IrValueId other = ad_nonzero(c, ad_op2(c, OP_SUB, tc, cls));
  IrValueId one_hot = ad_select(c, other, ad_scalar(c, DT_FP32, 0.0), ad_scalar(c, DT_FP32, 1.0));
  IrValueId d = ad_op2(c, OP_SUB, p, one_hot);

  IrValueId scale; /* g / count: a scalar */
  if (ir_op_attr(m, ad_op(c), "ignore_index")) {
    IrValueId keep = kept(c, t, ir_attr_int(m, ad_op(c), "ignore_index", 0));
    int64_t all[IR_MAX_RANK];
    for (int i = 0; i < tt.rank; i++) all[i] = i;
    IrValueId count = tt.rank ? ad_reduce(c, OP_REDUCE_SUM, keep, all, tt.rank, false) : keep;
    d = ad_op2(c, OP_MUL, d, ad_reshape(c, keep, tt.rank + 1, tcol));
    scale = ad_op2(c, OP_DIV, ad_gy(c, 0), count);
  } else {
    scale = ad_op2(c, OP_DIV, ad_gy(c, 0), ad_scalar(c, DT_FP32, (double)positions));
  }
  d = ad_op2(c, OP_MUL, d, scale);
  if (xt.dtype != DT_FP32) d = ad_cast(c, d, xt.dtype);
  ad_give(c, 0, d);
  return true;
}
