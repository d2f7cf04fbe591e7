/*
 * Shape and dtype inference, one rule per op (MIL semantics, see
 * docs/language.md and the MIL spec §3). Each rule checks its operands and
 * attributes and computes the result types; every error names the op and,
 * for shape problems, the shapes involved.
 *
 * ORDER OPS: the switch in ir_infer_op covers every op of ops.def.
 */
#include <math.h>
#include <string.h>

#include "orion/ir.h"

typedef struct Infer {
  IrModule *m;
  IrOpId op;
  Diag *d;
  const char *opname;
  IrType in[8];   /* types of the first operands (concat checks the rest itself) */
  uint32_t nin;
  IrType out[1]; /* single-result ops fill out[0] */
} Infer;

static void type_str(const IrType *t, char *buf, size_t n) {
  StrBuf sb;
  sb_init(&sb);
  ir_type_print(&sb, t);
  snprintf(buf, n, "%s", sb.data);
  sb_free(&sb);
}

static void shape_str(const IrType *t, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < t->rank && k < n; i++) k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)t->dims[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
}

static bool fail(Infer *c, const char *fmt, ...) ORION_PRINTF(2, 3);
static bool fail(Infer *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_vreport(c->d, DIAG_ERROR, ir_op(c->m, c->op)->loc, fmt, ap);
  va_end(ap);
  return false;
}

/* The span of an attribute if given, else the op's: errors point at what is wrong. */
static bool fail_attr(Infer *c, const char *attr, const char *fmt, ...) ORION_PRINTF(3, 4);
static bool fail_attr(Infer *c, const char *attr, const char *fmt, ...) {
  const IrAttr *a = ir_op_attr(c->m, c->op, attr);
  va_list ap;
  va_start(ap, fmt);
  diag_vreport(c->d, DIAG_ERROR, a && a->loc.file ? a->loc : ir_op(c->m, c->op)->loc, fmt, ap);
  va_end(ap);
  return false;
}

static bool norm_axis(Infer *c, const char *attr, int64_t axis, int rank, int *out) {
  if (axis < -rank || axis >= rank) {
    if (rank == 0) return fail_attr(c, attr, "'%s' of '%s' is %lld but the operand is a scalar", attr, c->opname, (long long)axis);
    return fail_attr(c, attr, "'%s' of '%s' is %lld, out of range for rank %d (valid: %d to %d)", attr, c->opname,
                     (long long)axis, rank, -rank, rank - 1);
  }
  *out = (int)(axis < 0 ? axis + rank : axis);
  return true;
}

static bool check_elements(Infer *c, const IrType *t) {
  uint64_t n = 1;
  for (int i = 0; i < t->rank; i++)
    if (__builtin_mul_overflow(n, (uint64_t)t->dims[i], &n) || n > IR_MAX_ELEMENTS)
      return fail(c, "result of '%s' has too many elements (limit is %llu)", c->opname,
                  (unsigned long long)IR_MAX_ELEMENTS);
  return true;
}

static bool dtype_in_class(IrDType t, IrDTypeClass k) {
  switch (k) {
  case DTC_FLOAT: return ir_dtype_is_float(t);
  case DTC_NUM: return ir_dtype_is_float(t) || t == DT_INT32;
  case DTC_ANY: return true;
  }
  return false;
}

static const char *class_text(IrDTypeClass k) {
  return k == DTC_FLOAT ? "fp16 or fp32" : k == DTC_NUM ? "fp16, fp32 or int32" : "any dtype";
}

static bool check_dtype(Infer *c, uint32_t i) {
  IrDTypeClass k = ir_op_info(ir_op(c->m, c->op)->kind)->dtypes;
  if (dtype_in_class(c->in[i].dtype, k)) return true;
  return fail(c, "operand %u of '%s' has dtype %s; '%s' takes %s", i + 1, c->opname, ir_dtype_name(c->in[i].dtype),
              c->opname, class_text(k));
}

static bool same_dtype(Infer *c, uint32_t i, uint32_t j) {
  if (c->in[i].dtype == c->in[j].dtype) return true;
  return fail(c, "dtype mismatch in '%s': operand %u is %s but operand %u is %s (insert a cast)", c->opname, i + 1,
              ir_dtype_name(c->in[i].dtype), j + 1, ir_dtype_name(c->in[j].dtype));
}

/* NumPy broadcasting of a and b into out. */
static bool broadcast(const IrType *a, const IrType *b, IrType *out) {
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

static bool broadcast_or_fail(Infer *c, const IrType *a, const IrType *b, IrType *out) {
  if (broadcast(a, b, out)) return true;
  char sa[96], sb[96];
  shape_str(a, sa, sizeof sa);
  shape_str(b, sb, sizeof sb);
  return fail(c, "shape mismatch in '%s': %s and %s cannot be broadcast together", c->opname, sa, sb);
}

/* ---- rules ---- */

static bool infer_unary(Infer *c) {
  if (!check_dtype(c, 0)) return false;
  c->out[0] = c->in[0];
  return true;
}

static bool infer_binary(Infer *c) {
  if (!check_dtype(c, 0) || !check_dtype(c, 1) || !same_dtype(c, 0, 1)) return false;
  c->out[0].dtype = c->in[0].dtype;
  return broadcast_or_fail(c, &c->in[0], &c->in[1], &c->out[0]);
}

static bool infer_epsilon(Infer *c) {
  double eps = ir_attr_float(c->m, c->op, "epsilon", 0.0);
  if (!(eps >= 0) || isinf(eps)) return fail_attr(c, "epsilon", "'epsilon' of '%s' must be finite and not negative", c->opname);
  return infer_unary(c);
}

static bool infer_gelu(Infer *c) {
  const char *mode = ir_attr_str(c->m, c->op, "mode", "exact");
  if (strcmp(mode, "exact") && strcmp(mode, "tanh"))
    return fail_attr(c, "mode", "unknown gelu mode '%s' (expected \"exact\" or \"tanh\")", mode);
  return infer_unary(c);
}

static bool infer_softmax(Infer *c) {
  int axis;
  if (!check_dtype(c, 0) || !norm_axis(c, "axis", ir_attr_int(c->m, c->op, "axis", -1), c->in[0].rank, &axis))
    return false;
  c->out[0] = c->in[0];
  return true;
}

/* Reads a list attribute of ints; absent gives -1. */
static int get_ints(Infer *c, const char *name, int64_t *out, int max) {
  int n = ir_attr_ints(c->m, c->op, name, out, max);
  if (n > max) return fail_attr(c, name, "'%s' of '%s' has %d entries (limit is %d)", name, c->opname, n, max), -2;
  return n;
}

static bool infer_reduce(Infer *c) {
  if (!check_dtype(c, 0)) return false;
  const IrType *x = &c->in[0];
  bool reduced[IR_MAX_RANK] = {false};
  int64_t axes[IR_MAX_RANK];
  int n = get_ints(c, "axes", axes, IR_MAX_RANK);
  if (n == -2) return false;
  if (n < 0) {
    for (int i = 0; i < x->rank; i++) reduced[i] = true;
  } else {
    if (n == 0) return fail_attr(c, "axes", "'axes' of '%s' is empty; omit it to reduce every axis", c->opname);
    for (int i = 0; i < n; i++) {
      int a;
      if (!norm_axis(c, "axes", axes[i], x->rank, &a)) return false;
      if (reduced[a]) return fail_attr(c, "axes", "axis %d appears twice in 'axes' of '%s'", a, c->opname);
      reduced[a] = true;
    }
  }
  bool keep = ir_attr_bool(c->m, c->op, "keep_dims", false);
  c->out[0].dtype = x->dtype;
  c->out[0].rank = 0;
  for (int i = 0; i < x->rank; i++) {
    if (!reduced[i]) c->out[0].dims[c->out[0].rank++] = x->dims[i];
    else if (keep) c->out[0].dims[c->out[0].rank++] = 1;
  }
  return true;
}

static bool infer_reshape(Infer *c) {
  const IrType *x = &c->in[0];
  int64_t shape[IR_MAX_RANK + 1];
  int n = ir_attr_ints(c->m, c->op, "shape", shape, IR_MAX_RANK + 1);
  if (n < 0) return fail(c, "'reshape' requires the attribute 'shape'");
  if (n > IR_MAX_RANK) return fail_attr(c, "shape", "'reshape' to rank %d exceeds the limit of %d", n, IR_MAX_RANK);
  int infer_at = -1;
  uint64_t known = 1;
  IrType *o = &c->out[0];
  o->dtype = x->dtype;
  o->rank = (uint8_t)n;
  for (int i = 0; i < n; i++) {
    int64_t s = shape[i];
    if (s == -1) {
      if (infer_at >= 0) return fail_attr(c, "shape", "'shape' of 'reshape' has more than one -1");
      infer_at = i;
      continue;
    }
    if (s == 0) {
      if (i >= x->rank) return fail_attr(c, "shape", "'shape' entry %d of 'reshape' is 0 (copy) but the operand has rank %d", i, x->rank);
      s = x->dims[i];
    }
    if (s < 0) return fail_attr(c, "shape", "'shape' of 'reshape' has the invalid size %lld", (long long)s);
    if (__builtin_mul_overflow(known, (uint64_t)s, &known) || known > IR_MAX_ELEMENTS)
      return fail_attr(c, "shape", "'reshape' target has too many elements");
    o->dims[i] = s;
  }
  uint64_t total = ir_type_elements(x);
  if (infer_at >= 0) {
    if (total % known) {
      char sx[96];
      shape_str(x, sx, sizeof sx);
      return fail_attr(c, "shape", "cannot reshape %s (%llu elements): the other sizes multiply to %llu, which does not divide it",
                       sx, (unsigned long long)total, (unsigned long long)known);
    }
    o->dims[infer_at] = (int64_t)(total / known);
    known = total;
  }
  if (known != total) {
    char sx[96], so[96];
    shape_str(x, sx, sizeof sx);
    shape_str(o, so, sizeof so);
    return fail_attr(c, "shape", "cannot reshape %s (%llu elements) to %s (%llu elements)", sx, (unsigned long long)total,
                     so, (unsigned long long)known);
  }
  return true;
}

static bool infer_transpose(Infer *c) {
  const IrType *x = &c->in[0];
  int64_t perm[IR_MAX_RANK + 1];
  int n = ir_attr_ints(c->m, c->op, "perm", perm, IR_MAX_RANK + 1);
  if (n != x->rank) return fail_attr(c, "perm", "'perm' of 'transpose' has %d entries but the operand has rank %d", n, x->rank);
  bool seen[IR_MAX_RANK] = {false};
  c->out[0].dtype = x->dtype;
  c->out[0].rank = x->rank;
  for (int i = 0; i < n; i++) {
    int a;
    if (!norm_axis(c, "perm", perm[i], x->rank, &a)) return false;
    if (seen[a]) return fail_attr(c, "perm", "'perm' of 'transpose' is not a permutation: axis %d appears twice", a);
    seen[a] = true;
    c->out[0].dims[i] = x->dims[a];
  }
  return true;
}

static bool infer_slice(Infer *c) {
  const IrType *x = &c->in[0];
  int64_t begin[IR_MAX_RANK + 1], end[IR_MAX_RANK + 1], stride[IR_MAX_RANK + 1];
  int r = x->rank;
  int nb = ir_attr_ints(c->m, c->op, "begin", begin, IR_MAX_RANK + 1);
  int ne = ir_attr_ints(c->m, c->op, "end", end, IR_MAX_RANK + 1);
  int ns = ir_attr_ints(c->m, c->op, "stride", stride, IR_MAX_RANK + 1);
  if (nb != r) return fail_attr(c, "begin", "'begin' of 'slice' has %d entries but the operand has rank %d", nb, r);
  if (ne != r) return fail_attr(c, "end", "'end' of 'slice' has %d entries but the operand has rank %d", ne, r);
  if (ns >= 0 && ns != r) return fail_attr(c, "stride", "'stride' of 'slice' has %d entries but the operand has rank %d", ns, r);
  c->out[0].dtype = x->dtype;
  c->out[0].rank = x->rank;
  for (int i = 0; i < r; i++) {
    int64_t s = ns >= 0 ? stride[i] : 1, n = x->dims[i];
    if (s <= 0) return fail_attr(c, "stride", "'stride' of 'slice' must be positive (dimension %d has %lld)", i, (long long)s);
    /* Python semantics: negative counts from the end, then clamp. */
    int64_t b = begin[i] < 0 ? begin[i] + n : begin[i], e = end[i] < 0 ? end[i] + n : end[i];
    b = b < 0 ? 0 : b > n ? n : b;
    e = e < 0 ? 0 : e > n ? n : e;
    if (e <= b)
      return fail(c, "'slice' of dimension %d (size %lld) from %lld to %lld is empty", i, (long long)n,
                  (long long)begin[i], (long long)end[i]);
    c->out[0].dims[i] = (e - b + s - 1) / s;
  }
  return true;
}

static bool infer_concat(Infer *c) {
  IrOp *op = ir_op(c->m, c->op);
  const IrType *first = &ir_value(c->m, op->inputs[0])->type;
  int axis;
  if (!norm_axis(c, "axis", ir_attr_int(c->m, c->op, "axis", 0), first->rank, &axis)) return false;
  IrType o = *first;
  for (uint32_t i = 1; i < op->ninputs; i++) {
    const IrType *t = &ir_value(c->m, op->inputs[i])->type;
    if (t->dtype != first->dtype)
      return fail(c, "dtype mismatch in 'concat': operand 1 is %s but operand %u is %s", ir_dtype_name(first->dtype), i + 1,
                  ir_dtype_name(t->dtype));
    bool ok = t->rank == first->rank;
    for (int k = 0; ok && k < t->rank; k++) ok = k == axis || t->dims[k] == first->dims[k];
    if (!ok) {
      char s1[96], s2[96];
      shape_str(first, s1, sizeof s1);
      shape_str(t, s2, sizeof s2);
      return fail(c, "shape mismatch in 'concat' along axis %d: operand 1 is %s but operand %u is %s", axis, s1, i + 1, s2);
    }
    o.dims[axis] += t->dims[axis];
  }
  c->out[0] = o;
  return check_elements(c, &o);
}

static bool infer_split(Infer *c, IrType *outs, uint32_t nres) {
  const IrType *x = &c->in[0];
  int axis;
  if (!norm_axis(c, "axis", ir_attr_int(c->m, c->op, "axis", 0), x->rank, &axis)) return false;
  int64_t n = ir_attr_int(c->m, c->op, "num_splits", 0);
  bool has_n = ir_op_attr(c->m, c->op, "num_splits") != NULL;
  int64_t sizes[IR_MAX_OPERANDS];
  int ns = ir_attr_ints(c->m, c->op, "split_sizes", sizes, IR_MAX_OPERANDS);
  if (ns > IR_MAX_OPERANDS)
    return fail_attr(c, "split_sizes", "'split' into %d parts exceeds the limit of %d", ns, IR_MAX_OPERANDS);
  if (has_n == (ns >= 0)) return fail(c, "'split' needs exactly one of 'num_splits' and 'split_sizes'");
  int64_t dim = x->dims[axis];
  if (has_n) {
    if (n <= 0 || n > IR_MAX_OPERANDS)
      return fail_attr(c, "num_splits", "'num_splits' of 'split' must be from 1 to %d", IR_MAX_OPERANDS);
    if (dim % n)
      return fail_attr(c, "num_splits", "'split' cannot divide dimension %d of size %lld into %lld equal parts", axis,
                       (long long)dim, (long long)n);
    ns = (int)n;
    for (int i = 0; i < ns; i++) sizes[i] = dim / n;
  } else {
    int64_t sum = 0;
    for (int i = 0; i < ns; i++) {
      if (sizes[i] <= 0) return fail_attr(c, "split_sizes", "'split_sizes' of 'split' must be positive");
      sum += sizes[i];
    }
    if (sum != dim)
      return fail_attr(c, "split_sizes", "'split_sizes' of 'split' add up to %lld but dimension %d has size %lld",
                       (long long)sum, axis, (long long)dim);
  }
  if ((uint32_t)ns != nres)
    return fail(c, "'split' makes %d results but %u name%s given", ns, nres, nres == 1 ? " is" : "s are");
  for (int i = 0; i < ns; i++) {
    outs[i] = *x;
    outs[i].dims[axis] = sizes[i];
  }
  return true;
}

static bool infer_cast(Infer *c) {
  const char *name = ir_attr_str(c->m, c->op, "dtype", "");
  IrDType t = ir_dtype_from_name(name);
  if (t == DT_INVALID) return fail_attr(c, "dtype", "'cast' to unknown dtype '%s'", name);
  c->out[0] = c->in[0];
  c->out[0].dtype = t;
  return true;
}

/* Normalization axes: default the last one; gamma/beta have the normalized dims' shape. */
static bool infer_norm(Infer *c) {
  if (!check_dtype(c, 0)) return false;
  const IrType *x = &c->in[0];
  int64_t axes[IR_MAX_RANK];
  int n = get_ints(c, "axes", axes, IR_MAX_RANK);
  if (n == -2) return false;
  if (x->rank == 0) return fail(c, "'%s' needs an operand of rank 1 or more", c->opname);
  if (n < 0) {
    n = 1;
    axes[0] = -1;
  }
  if (n == 0) return fail_attr(c, "axes", "'axes' of '%s' is empty", c->opname);
  IrType norm = {.dtype = x->dtype, .rank = (uint8_t)n};
  bool seen[IR_MAX_RANK] = {false};
  for (int i = 0; i < n; i++) {
    int a;
    if (!norm_axis(c, "axes", axes[i], x->rank, &a)) return false;
    if (seen[a]) return fail_attr(c, "axes", "axis %d appears twice in 'axes' of '%s'", a, c->opname);
    seen[a] = true;
    norm.dims[i] = x->dims[a];
  }
  double eps = ir_attr_float(c->m, c->op, "epsilon", 1e-5);
  if (!(eps >= 0) || isinf(eps)) return fail_attr(c, "epsilon", "'epsilon' of '%s' must be finite and not negative", c->opname);
  static const char *const role[] = {"", "gamma", "beta"};
  for (uint32_t i = 1; i < c->nin; i++) {
    if (!same_dtype(c, 0, i)) return false;
    if (!ir_type_equal(&c->in[i], &norm)) {
      char want[96], got[96];
      shape_str(&norm, want, sizeof want);
      shape_str(&c->in[i], got, sizeof got);
      return fail(c, "shape mismatch in '%s': %s must have the normalized shape %s, not %s", c->opname, role[i], want, got);
    }
  }
  c->out[0] = *x;
  return true;
}

static bool infer_clip(Infer *c) {
  double lo = ir_attr_float(c->m, c->op, "min", 0), hi = ir_attr_float(c->m, c->op, "max", 0);
  if (isnan(lo) || isnan(hi) || !(lo < hi)) return fail(c, "'clip' needs min < max (got %g and %g)", lo, hi);
  return infer_unary(c);
}

static bool infer_select(Infer *c) {
  if (c->in[0].dtype != DT_BOOL)
    return fail(c, "the condition of 'select' must be bool, not %s", ir_dtype_name(c->in[0].dtype));
  if (!same_dtype(c, 1, 2)) return false;
  IrType ab = {.dtype = c->in[1].dtype};
  if (!broadcast_or_fail(c, &c->in[1], &c->in[2], &ab)) return false;
  IrType all = ab;
  if (!broadcast_or_fail(c, &c->in[0], &ab, &all)) return false;
  c->out[0] = all;
  c->out[0].dtype = c->in[1].dtype;
  return true;
}

static bool infer_gather(Infer *c) {
  const IrType *x = &c->in[0], *idx = &c->in[1];
  if (idx->dtype != DT_INT32) return fail(c, "the indices of 'gather' must be int32, not %s", ir_dtype_name(idx->dtype));
  if (x->rank == 0) return fail(c, "'gather' from a scalar");
  int axis;
  if (!norm_axis(c, "axis", ir_attr_int(c->m, c->op, "axis", 0), x->rank, &axis)) return false;
  int r = x->rank - 1 + idx->rank;
  if (r > IR_MAX_RANK) return fail(c, "result of 'gather' would have rank %d, over the limit of %d", r, IR_MAX_RANK);
  IrType *o = &c->out[0];
  o->dtype = x->dtype;
  o->rank = 0;
  for (int i = 0; i < axis; i++) o->dims[o->rank++] = x->dims[i];
  for (int i = 0; i < idx->rank; i++) o->dims[o->rank++] = idx->dims[i];
  for (int i = axis + 1; i < x->rank; i++) o->dims[o->rank++] = x->dims[i];
  return check_elements(c, o);
}

/* Mean loss over the positions of the leading shape; the class axis is the
 * logits' last. The result is always fp32: the loss is computed in fp32
 * whatever the logits' dtype (docs/numerics.md). */
static bool infer_cross_entropy(Infer *c) {
  const IrType *x = &c->in[0], *t = &c->in[1];
  if (!check_dtype(c, 0)) return false;
  if (x->rank == 0) return fail(c, "the logits of 'cross_entropy' must have rank 1 or more (the class axis is last)");
  if (t->dtype != DT_INT32)
    return fail(c, "the targets of 'cross_entropy' must be int32 class indices, not %s", ir_dtype_name(t->dtype));
  bool same = t->rank == x->rank - 1;
  for (int i = 0; same && i < t->rank; i++) same = t->dims[i] == x->dims[i];
  if (!same) {
    IrType lead = *x;
    lead.rank--;
    char st[96], sl[96], sx[96];
    shape_str(t, st, sizeof st);
    shape_str(&lead, sl, sizeof sl);
    shape_str(x, sx, sizeof sx);
    return fail(c, "shape mismatch in 'cross_entropy': targets %s must have the logits' shape without the class axis, "
                "%s (logits %s)", st, sl, sx);
  }
  int64_t ignore = ir_attr_int(c->m, c->op, "ignore_index", 0);
  if (ignore < INT32_MIN || ignore > INT32_MAX)
    return fail_attr(c, "ignore_index", "'ignore_index' of 'cross_entropy' is %lld, outside the int32 range of the targets",
                     (long long)ignore);
  c->out[0] = (IrType){.dtype = DT_FP32, .rank = 0};
  return true;
}

static bool infer_matmul(Infer *c) {
  if (!check_dtype(c, 0) || !check_dtype(c, 1) || !same_dtype(c, 0, 1)) return false;
  IrType a = c->in[0], b = c->in[1];
  bool ta = ir_attr_bool(c->m, c->op, "transpose_x", false), tb = ir_attr_bool(c->m, c->op, "transpose_y", false);
  if (a.rank == 0 || b.rank == 0) return fail(c, "'matmul' operands must have rank 1 or more");
  if ((ta && a.rank == 1) || (tb && b.rank == 1)) return fail(c, "'matmul' cannot transpose a rank-1 operand");
  bool a1 = a.rank == 1, b1 = b.rank == 1;
  if (a1) { a.rank = 2; a.dims[1] = a.dims[0]; a.dims[0] = 1; }
  if (b1) { b.rank = 2; b.dims[1] = 1; }
  if (ta) { int64_t t = a.dims[a.rank - 1]; a.dims[a.rank - 1] = a.dims[a.rank - 2]; a.dims[a.rank - 2] = t; }
  if (tb) { int64_t t = b.dims[b.rank - 1]; b.dims[b.rank - 1] = b.dims[b.rank - 2]; b.dims[b.rank - 2] = t; }
  if (a.dims[a.rank - 1] != b.dims[b.rank - 2]) {
    char sa[96], sb[96];
    shape_str(&c->in[0], sa, sizeof sa);
    shape_str(&c->in[1], sb, sizeof sb);
    return fail(c, "shape mismatch in 'matmul': %s%s times %s%s needs equal inner sizes (%lld vs %lld)", sa,
                ta ? " transposed" : "", sb, tb ? " transposed" : "", (long long)a.dims[a.rank - 1],
                (long long)b.dims[b.rank - 2]);
  }
  IrType ba = {.rank = (uint8_t)(a.rank - 2)}, bb = {.rank = (uint8_t)(b.rank - 2)}, batch;
  memcpy(ba.dims, a.dims, sizeof(int64_t) * ba.rank);
  memcpy(bb.dims, b.dims, sizeof(int64_t) * bb.rank);
  if (!broadcast(&ba, &bb, &batch)) {
    char sa[96], sb[96];
    shape_str(&c->in[0], sa, sizeof sa);
    shape_str(&c->in[1], sb, sizeof sb);
    return fail(c, "shape mismatch in 'matmul': the batch dimensions of %s and %s cannot be broadcast", sa, sb);
  }
  IrType *o = &c->out[0];
  o->dtype = c->in[0].dtype;
  o->rank = batch.rank;
  memcpy(o->dims, batch.dims, sizeof(int64_t) * batch.rank);
  if (!a1) o->dims[o->rank++] = a.dims[a.rank - 2];
  if (!b1) o->dims[o->rank++] = b.dims[b.rank - 1];
  return check_elements(c, o);
}

static bool infer_linear(Infer *c) {
  for (uint32_t i = 0; i < c->nin; i++)
    if (!check_dtype(c, i) || !same_dtype(c, 0, i)) return false;
  const IrType *x = &c->in[0], *w = &c->in[1];
  if (x->rank == 0) return fail(c, "'linear' needs an input of rank 1 or more");
  char sx[96], sw[96];
  shape_str(x, sx, sizeof sx);
  shape_str(w, sw, sizeof sw);
  if (w->rank != 2) return fail(c, "the weight of 'linear' must have rank 2 ([out, in]), not %s", sw);
  if (w->dims[1] != x->dims[x->rank - 1])
    return fail(c, "shape mismatch in 'linear': input %s has %lld features but the weight %s expects %lld", sx,
                (long long)x->dims[x->rank - 1], sw, (long long)w->dims[1]);
  if (c->nin == 3 && !(c->in[2].rank == 1 && c->in[2].dims[0] == w->dims[0])) {
    char sb[96];
    shape_str(&c->in[2], sb, sizeof sb);
    return fail(c, "shape mismatch in 'linear': the bias must be [%lld], not %s", (long long)w->dims[0], sb);
  }
  c->out[0] = *x;
  c->out[0].dims[x->rank - 1] = w->dims[0];
  return true;
}

static bool infer_conv(Infer *c) {
  for (uint32_t i = 0; i < c->nin; i++)
    if (!check_dtype(c, i) || !same_dtype(c, 0, i)) return false;
  const IrType *x = &c->in[0], *w = &c->in[1];
  char sx[96], sw[96];
  shape_str(x, sx, sizeof sx);
  shape_str(w, sw, sizeof sw);
  if (x->rank < 3) return fail(c, "the input of 'conv' must be [N, C, spatial...] with 1 to 3 spatial dimensions, not %s", sx);
  int sp = x->rank - 2;
  if (w->rank != x->rank)
    return fail(c, "shape mismatch in 'conv': the weight %s must have rank %d ([out, in/groups, kernel...]) for input %s", sw,
                x->rank, sx);
  int64_t groups = ir_attr_int(c->m, c->op, "groups", 1);
  if (groups <= 0) return fail_attr(c, "groups", "'groups' of 'conv' must be positive");
  int64_t cin = x->dims[1], cout = w->dims[0];
  if (cin % groups || cout % groups)
    return fail_attr(c, "groups", "'conv' with %lld groups needs input channels (%lld) and output channels (%lld) divisible by it",
                     (long long)groups, (long long)cin, (long long)cout);
  if (w->dims[1] * groups != cin)
    return fail(c, "shape mismatch in 'conv': input %s has %lld channels but the weight %s expects %lld (with %lld groups)", sx,
                (long long)cin, sw, (long long)(w->dims[1] * groups), (long long)groups);
  if (c->nin == 3 && !(c->in[2].rank == 1 && c->in[2].dims[0] == cout)) {
    char sb[96];
    shape_str(&c->in[2], sb, sizeof sb);
    return fail(c, "shape mismatch in 'conv': the bias must be [%lld], not %s", (long long)cout, sb);
  }
  int64_t strides[IR_MAX_RANK] = {1, 1, 1, 1, 1}, dil[IR_MAX_RANK] = {1, 1, 1, 1, 1}, pad[2 * IR_MAX_RANK] = {0};
  int n;
  if ((n = ir_attr_ints(c->m, c->op, "strides", strides, IR_MAX_RANK)) >= 0 && n != sp)
    return fail_attr(c, "strides", "'strides' of 'conv' needs %d entries, one per spatial dimension", sp);
  if ((n = ir_attr_ints(c->m, c->op, "dilations", dil, IR_MAX_RANK)) >= 0 && n != sp)
    return fail_attr(c, "dilations", "'dilations' of 'conv' needs %d entries, one per spatial dimension", sp);
  const char *pad_type = ir_attr_str(c->m, c->op, "pad_type", ir_op_attr(c->m, c->op, "pad") ? "custom" : "valid");
  bool custom = !strcmp(pad_type, "custom"), same = !strcmp(pad_type, "same"), same_lower = !strcmp(pad_type, "same_lower");
  if (!custom && !same && !same_lower && strcmp(pad_type, "valid"))
    return fail_attr(c, "pad_type", "unknown pad_type '%s' of 'conv' (expected valid, same, same_lower or custom)", pad_type);
  n = ir_attr_ints(c->m, c->op, "pad", pad, 2 * IR_MAX_RANK);
  if (n >= 0 && !custom) return fail_attr(c, "pad", "'pad' of 'conv' is only used with pad_type=\"custom\"");
  if (custom && n != 2 * sp)
    return fail_attr(c, "pad", "'pad' of 'conv' needs %d entries (before and after each spatial dimension)", 2 * sp);
  IrType *o = &c->out[0];
  o->dtype = x->dtype;
  o->rank = x->rank;
  o->dims[0] = x->dims[0];
  o->dims[1] = cout;
  for (int i = 0; i < sp; i++) {
    if (strides[i] <= 0 || dil[i] <= 0) return fail(c, "strides and dilations of 'conv' must be positive");
    int64_t d = x->dims[2 + i], k = w->dims[2 + i], ek = (k - 1) * dil[i] + 1, p = 0;
    if (custom) {
      if (pad[2 * i] < 0 || pad[2 * i + 1] < 0) return fail_attr(c, "pad", "'pad' of 'conv' must not be negative");
      p = pad[2 * i] + pad[2 * i + 1];
    } else if (same || same_lower) {
      int64_t s = strides[i], need = s * ((d + s - 1) / s) - d + ek - s;
      p = need > 0 ? need : 0;
    }
    int64_t out = (d + p - ek) / strides[i] + 1;
    if (d + p < ek)
      return fail(c, "'conv' kernel %s (dilated to %lld) is larger than the padded input dimension %d (%lld)", sw,
                  (long long)ek, 2 + i, (long long)(d + p));
    o->dims[2 + i] = out;
  }
  return true;
}

static bool infer_sdpa(Infer *c) {
  for (uint32_t i = 0; i < 3; i++)
    if (!check_dtype(c, i) || !same_dtype(c, 0, i)) return false;
  const IrType *q = &c->in[0], *k = &c->in[1], *v = &c->in[2];
  char sq[96], sk[96], sv[96];
  shape_str(q, sq, sizeof sq);
  shape_str(k, sk, sizeof sk);
  shape_str(v, sv, sizeof sv);
  if (q->rank < 3 || k->rank != q->rank || v->rank != q->rank)
    return fail(c, "'sdpa' needs query, key and value of equal rank, at least 3 ([batch..., len, dim]); got %s, %s and %s", sq, sk, sv);
  int r = q->rank;
  for (int i = 0; i < r - 2; i++)
    if (k->dims[i] != q->dims[i] || v->dims[i] != q->dims[i])
      return fail(c, "shape mismatch in 'sdpa': the batch dimensions of query %s, key %s and value %s differ", sq, sk, sv);
  if (k->dims[r - 1] != q->dims[r - 1])
    return fail(c, "shape mismatch in 'sdpa': query %s and key %s need the same last dimension", sq, sk);
  if (v->dims[r - 2] != k->dims[r - 2])
    return fail(c, "shape mismatch in 'sdpa': key %s and value %s need the same length (dimension %d)", sk, sv, r - 2);
  IrType scores = *q;
  scores.dims[r - 1] = k->dims[r - 2];
  if (c->nin == 4) {
    const IrType *mask = &c->in[3];
    if (mask->dtype != DT_BOOL && mask->dtype != q->dtype)
      return fail(c, "the mask of 'sdpa' must be bool or %s, not %s", ir_dtype_name(q->dtype), ir_dtype_name(mask->dtype));
    IrType b;
    if (!broadcast(mask, &scores, &b) || b.rank != scores.rank ||
        memcmp(b.dims, scores.dims, sizeof(int64_t) * scores.rank) != 0) {
      char sm[96], ss[96];
      shape_str(mask, sm, sizeof sm);
      shape_str(&scores, ss, sizeof ss);
      return fail(c, "shape mismatch in 'sdpa': the mask %s does not broadcast to the scores %s", sm, ss);
    }
  }
  if (ir_attr_bool(c->m, c->op, "causal", false) && q->dims[r - 2] > k->dims[r - 2])
    return fail(c, "causal 'sdpa' needs the query length (%lld) not above the key length (%lld)", (long long)q->dims[r - 2],
                (long long)k->dims[r - 2]);
  const IrAttr *scale = ir_op_attr(c->m, c->op, "scale");
  if (scale && !(scale->val.u.f > 0 && isfinite(scale->val.u.f)))
    return fail_attr(c, "scale", "'scale' of 'sdpa' must be positive and finite");
  c->out[0] = *q;
  c->out[0].dims[r - 1] = v->dims[r - 1];
  return check_elements(c, &c->out[0]);
}

static bool infer_call(Infer *c, IrType *outs, uint32_t nres) {
  IrOp *op = ir_op(c->m, c->op);
  IrFunc *callee = ir_func(c->m, op->callee);
  if (op->ninputs != callee->ninputs)
    return fail(c, "'%s' takes %u input%s but the call passes %u", callee->name, callee->ninputs, callee->ninputs == 1 ? "" : "s",
                op->ninputs);
  for (uint32_t i = 0; i < op->ninputs; i++) {
    const IrType *want = &ir_value(c->m, callee->inputs[i])->type, *got = &ir_value(c->m, op->inputs[i])->type;
    if (!ir_type_equal(want, got)) {
      char sw[96], sg[96];
      type_str(want, sw, sizeof sw);
      type_str(got, sg, sizeof sg);
      return fail(c, "argument %u of the call to '%s' is %s but the input '%s' is %s", i + 1, callee->name, sg,
                  ir_value(c->m, callee->inputs[i])->name, sw);
    }
  }
  if (nres != callee->noutputs)
    return fail(c, "'%s' returns %u output%s but the call names %u result%s", callee->name, callee->noutputs,
                callee->noutputs == 1 ? "" : "s", nres, nres == 1 ? "" : "s");
  for (uint32_t i = 0; i < nres; i++) {
    IrValueId v = callee->outputs[i].value;
    if (ir_id_is_none(v) || ir_value(c->m, v)->type.dtype == DT_INVALID) return false; /* callee already reported */
    outs[i] = ir_value(c->m, v)->type;
  }
  return true;
}

bool ir_infer_op(IrModule *m, IrOpId id, Diag *d) {
  IrOp *op = ir_op(m, id);
  Infer c = {.m = m, .op = id, .d = d, .opname = op->kind == OP_CALL ? "call" : ir_op_info(op->kind)->name};
  c.nin = op->ninputs < 8 ? op->ninputs : 8;
  for (uint32_t i = 0; i < op->ninputs; i++) {
    IrValue *v = ir_value(m, op->inputs[i]);
    if (v->type.dtype == DT_INVALID) return false; /* an earlier error */
    if (i < 8) c.in[i] = v->type;
  }
  if (op->nresults > IR_MAX_OPERANDS) return fail(&c, "too many results (limit is %d)", IR_MAX_OPERANDS);
  IrType outs[IR_MAX_OPERANDS];
  memset(outs, 0, sizeof(IrType) * (op->nresults ? op->nresults : 1));
  bool ok;
  switch (op->kind) {
  case OP_CONV: ok = infer_conv(&c); break;
  case OP_LINEAR: ok = infer_linear(&c); break;
  case OP_MATMUL: ok = infer_matmul(&c); break;
  case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: case OP_POW: case OP_MAXIMUM: case OP_MINIMUM:
    ok = infer_binary(&c);
    break;
  case OP_RELU: case OP_TANH: case OP_SIGMOID: case OP_SILU: case OP_EXP: case OP_SQRT: case OP_NEG: case OP_ABS:
  case OP_IDENTITY:
    ok = infer_unary(&c);
    break;
  case OP_GELU: ok = infer_gelu(&c); break;
  case OP_LOG: case OP_RSQRT: ok = infer_epsilon(&c); break;
  case OP_SOFTMAX: ok = infer_softmax(&c); break;
  case OP_REDUCE_SUM: case OP_REDUCE_MEAN: case OP_REDUCE_MAX: ok = infer_reduce(&c); break;
  case OP_RESHAPE: ok = infer_reshape(&c); break;
  case OP_TRANSPOSE: ok = infer_transpose(&c); break;
  case OP_SLICE: ok = infer_slice(&c); break;
  case OP_SPLIT: ok = infer_split(&c, outs, op->nresults); break;
  case OP_CONCAT: ok = infer_concat(&c); break;
  case OP_CAST: ok = infer_cast(&c); break;
  case OP_LAYER_NORM: case OP_RMS_NORM: ok = infer_norm(&c); break;
  case OP_CLIP: ok = infer_clip(&c); break;
  case OP_SELECT: ok = infer_select(&c); break;
  case OP_GATHER: ok = infer_gather(&c); break;
  case OP_SDPA: ok = infer_sdpa(&c); break;
  case OP_CROSS_ENTROPY: ok = infer_cross_entropy(&c); break;
  case OP_CALL: ok = infer_call(&c, outs, op->nresults); break;
  default: ice("no shape rule for op %d", (int)op->kind);
  }
  if (!ok) return false;
  if (op->kind != OP_SPLIT && op->kind != OP_CALL) outs[0] = c.out[0];
  op = ir_op(m, id);
  for (uint32_t i = 0; i < op->nresults; i++) {
    IrValue *r = ir_value(m, op->results[i]);
    /* Types the source spelled must agree; others (from earlier inference or
     * a pass) are recomputed, since a pass may reshape what feeds them. */
    if (r->type_declared && !ir_type_equal(&r->type, &outs[i])) {
      char want[96], got[96];
      type_str(&r->type, want, sizeof want);
      type_str(&outs[i], got, sizeof got);
      diag_error(d, r->loc, "type mismatch for '%s': declared %s but '%s' produces %s", r->name, want, c.opname, got);
      return false;
    }
    r->type = outs[i];
  }
  return true;
}
