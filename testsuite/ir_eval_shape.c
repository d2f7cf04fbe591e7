/*
 * The reference evaluator's shape ops: reshape, transpose, slice, split,
 * concat, gather (ir_eval_internal.h).
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

/* ---- shape ops ---- */

bool ev_op_reshape(Ev *e, const EvalTensor *x, EvalTensor *out) {
  int64_t shape[IR_MAX_RANK + 1];
  int n = ir_attr_ints(e->m, e->op, "shape", shape, IR_MAX_RANK + 1);
  if (n < 0 || n > IR_MAX_RANK) return ev_fail(e, "bad 'shape'");
  IrType t = {.dtype = x->type.dtype, .rank = (uint8_t)n};
  int infer_at = -1;
  int64_t known = 1;
  for (int i = 0; i < n; i++) {
    if (shape[i] == -1) {
      infer_at = i;
      continue;
    }
    t.dims[i] = shape[i] == 0 ? x->type.dims[i] : shape[i]; /* 0 copies x's size at i */
    known *= t.dims[i];
  }
  if (infer_at >= 0) t.dims[infer_at] = ev_count_of(&x->type) / known;
  if (ev_count_of(&t) != ev_count_of(&x->type)) return ev_fail(e, "element counts differ");
  *out = ev_tensor_new(&t);
  memcpy(out->data, x->data, sizeof *out->data * (size_t)ev_count_of(&t));
  return true;
}

bool ev_op_transpose(Ev *e, const EvalTensor *x, EvalTensor *out) {
  int64_t perm[IR_MAX_RANK];
  int n = ev_attr_ints(e, "perm", perm, IR_MAX_RANK);
  if (n != x->type.rank) return ev_fail(e, "'perm' does not match the rank");
  int p[IR_MAX_RANK];
  IrType t = {.dtype = x->type.dtype, .rank = x->type.rank};
  for (int i = 0; i < n; i++) {
    if (!ev_norm_axis(e, perm[i], n, &p[i])) return false;
    t.dims[i] = x->type.dims[p[i]];
  }
  *out = ev_tensor_new(&t);
  int64_t idx[IR_MAX_RANK] = {0}, src[IR_MAX_RANK];
  int64_t i = 0;
  do {
    for (int d = 0; d < n; d++) src[p[d]] = idx[d]; /* result dim d is x's dim perm[d] */
    out->data[i++] = x->data[ev_offset_of(&x->type, src)];
  } while (ev_next_index(idx, &t));
  return true;
}

/* slice: x[begin:end:stride] per dimension, Python semantics, stride > 0. */
bool ev_op_slice(Ev *e, const EvalTensor *x, EvalTensor *out) {
  const IrType *xt = &x->type;
  int64_t begin[IR_MAX_RANK], end[IR_MAX_RANK], stride[IR_MAX_RANK] = {1, 1, 1, 1, 1};
  if (ev_attr_ints(e, "begin", begin, IR_MAX_RANK) != xt->rank || ev_attr_ints(e, "end", end, IR_MAX_RANK) != xt->rank)
    return ev_fail(e, "'begin'/'end' do not match the rank");
  ev_attr_ints(e, "stride", stride, IR_MAX_RANK);
  IrType t = *xt;
  int64_t b[IR_MAX_RANK];
  for (int i = 0; i < xt->rank; i++) {
    int64_t n = xt->dims[i], s = stride[i];
    if (s <= 0) return ev_fail(e, "stride %lld is not positive", (long long)s);
    int64_t lo = begin[i] < 0 ? begin[i] + n : begin[i], hi = end[i] < 0 ? end[i] + n : end[i];
    lo = lo < 0 ? 0 : lo > n ? n : lo;
    hi = hi < 0 ? 0 : hi > n ? n : hi;
    if (hi <= lo) return ev_fail(e, "empty slice of dimension %d", i);
    b[i] = lo;
    t.dims[i] = (hi - lo + s - 1) / s; /* ceil((hi - lo) / s) */
  }
  *out = ev_tensor_new(&t);
  int64_t idx[IR_MAX_RANK] = {0}, src[IR_MAX_RANK];
  int64_t i = 0;
  do {
    for (int d = 0; d < xt->rank; d++) src[d] = b[d] + idx[d] * stride[d];
    out->data[i++] = x->data[ev_offset_of(xt, src)];
  } while (ev_next_index(idx, &t));
  return true;
}

bool ev_op_split(Ev *e, const EvalTensor *x, EvalTensor *outs, uint32_t nres) {
  const IrType *xt = &x->type;
  int axis;
  if (!ev_norm_axis(e, ev_attr_int(e, "axis", 0), xt->rank, &axis)) return false;
  int64_t sizes[MAX_RESULTS];
  int ns = ev_attr_ints(e, "split_sizes", sizes, MAX_RESULTS);
  if (ns < 0) {
    int64_t n = ev_attr_int(e, "num_splits", 0);
    if (n <= 0 || n > MAX_RESULTS || xt->dims[axis] % n) return ev_fail(e, "bad 'num_splits'");
    ns = (int)n;
    for (int i = 0; i < ns; i++) sizes[i] = xt->dims[axis] / n;
  }
  if ((uint32_t)ns != nres) return ev_fail(e, "%d parts but %u results", ns, nres);
  int64_t start = 0;
  for (int p = 0; p < ns; p++) {
    IrType t = *xt;
    t.dims[axis] = sizes[p];
    outs[p] = ev_tensor_new(&t);
    int64_t idx[IR_MAX_RANK] = {0}, src[IR_MAX_RANK];
    int64_t i = 0;
    do {
      memcpy(src, idx, sizeof src);
      src[axis] += start;
      outs[p].data[i++] = x->data[ev_offset_of(xt, src)];
    } while (ev_next_index(idx, &t));
    start += sizes[p];
  }
  if (start != xt->dims[axis]) return ev_fail(e, "'split_sizes' do not add up to the axis size");
  return true;
}

bool ev_op_concat(Ev *e, const EvalTensor *in, uint32_t nin, EvalTensor *out) {
  int axis;
  if (!ev_norm_axis(e, ev_attr_int(e, "axis", 0), in[0].type.rank, &axis)) return false;
  IrType t = in[0].type;
  for (uint32_t k = 1; k < nin; k++) t.dims[axis] += in[k].type.dims[axis];
  *out = ev_tensor_new(&t);
  int64_t idx[IR_MAX_RANK] = {0}, src[IR_MAX_RANK];
  int64_t i = 0;
  do {
    memcpy(src, idx, sizeof src);
    uint32_t k = 0; /* the operand that holds position idx[axis] */
    while (src[axis] >= in[k].type.dims[axis]) src[axis] -= in[k++].type.dims[axis];
    out->data[i++] = in[k].data[ev_offset_of(&in[k].type, src)];
  } while (ev_next_index(idx, &t));
  return true;
}

/* gather: result[pre, j..., post] = x[pre, indices[j...], post]. */
bool ev_op_gather(Ev *e, const EvalTensor *x, const EvalTensor *ind, EvalTensor *out) {
  const IrType *xt = &x->type, *it = &ind->type;
  int axis;
  if (!ev_norm_axis(e, ev_attr_int(e, "axis", 0), xt->rank, &axis)) return false;
  IrType t = {.dtype = xt->dtype};
  for (int i = 0; i < axis; i++) t.dims[t.rank++] = xt->dims[i];
  for (int i = 0; i < it->rank; i++) t.dims[t.rank++] = it->dims[i];
  for (int i = axis + 1; i < xt->rank; i++) t.dims[t.rank++] = xt->dims[i];
  *out = ev_tensor_new(&t);
  int64_t idx[2 * IR_MAX_RANK] = {0}, src[IR_MAX_RANK];
  int64_t i = 0;
  do {
    int64_t j = (int64_t)ind->data[ev_offset_of(it, idx + axis)];
    if (j < 0 || j >= xt->dims[axis])
      return ev_fail(e, "index %lld out of range for dimension %d of size %lld", (long long)j, axis,
                  (long long)xt->dims[axis]);
    for (int d = 0; d < axis; d++) src[d] = idx[d];
    src[axis] = j;
    for (int d = axis + 1; d < xt->rank; d++) src[d] = idx[d - 1 + it->rank];
    out->data[i++] = x->data[ev_offset_of(xt, src)];
  } while (ev_next_index(idx, &t));
  return true;
}
