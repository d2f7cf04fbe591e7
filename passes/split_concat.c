/*
 * split-concat: the ANE compiler rejects concat (constraint ANE001), so a
 * concat never reaches MIL when its uses allow another form:
 *  - feeding linear, matmul or conv along the contracted axis (features,
 *    inner dimension, input channels): a sum of products over the parts, with
 *    the weight sliced to match (the slices of a constant weight are folded
 *    by the ANE compiler);
 *  - feeding element-wise ops: the op is applied to each part and the concat
 *    moves below it (the other operand of a binary op is sliced to match),
 *    until it meets a use of the first kind.
 *  - returned as a function output: its parts become separate outputs,
 *    recorded as a group that the caller reassembles (IrOutputGroup).
 *  - feeding an op that maps the concatenated axis to one axis of its
 *    result (a transpose; a reshape that keeps that axis whole; a
 *    reduction over other axes; a 2-D matmul along a free axis, the rows of
 *    x or the columns of y): the op is applied to each part and the concat
 *    moves below it, along that axis. The backward of a model meets these:
 *    the adjoint of a split (GPT-2's fused qkv) goes through the reshape to
 *    rows and the weight gradient's product, and ends as an output group.
 *  - once nothing moves: a concat along the last axis that a reshape would
 *    merge with the axes before it (RoPE's halves going back to [B, T, C] in
 *    the backward) becomes a sum of products of its parts with constant
 *    placement matrices, when the axis is short (MAX_PLACEMENT_WIDTH).
 * A concat that reaches any other op stays; split_concat_blocker() says
 * why, in the words of the constraint checker's ANE001 finding.
 */
#include <stdlib.h>
#include <string.h>

#include "orion/passes.h"
#include "pass_util.h"

typedef struct Concat {
  IrOpId op;
  IrValueId out;
  int axis; /* normalized */
  uint32_t n;
  IrValueId parts[IR_MAX_OPERANDS]; /* every op is within the limit (ir_op_new) */
  int64_t begin[IR_MAX_OPERANDS]; /* offset of each part along the axis */
} Concat;

static void read_concat(IrModule *m, IrOpId op, Concat *c) {
  IrOp *o = ir_op(m, op);
  c->op = op;
  c->out = o->results[0];
  int rank = ir_value(m, c->out)->type.rank;
  int64_t axis = ir_attr_int(m, op, "axis", 0);
  c->axis = (int)(axis < 0 ? axis + rank : axis);
  c->n = o->ninputs;
  int64_t off = 0;
  for (uint32_t i = 0; i < c->n; i++) {
    c->parts[i] = o->inputs[i];
    c->begin[i] = off;
    off += ir_value(m, o->inputs[i])->type.dims[c->axis];
  }
}

/* slice(v) taking [begin, begin+len) of `axis` and all of the other dims. */
static IrValueId slice_of(IrModule *m, IrOpId anchor, IrValueId v, int axis, int64_t begin, int64_t len,
                          const char *base) {
  const IrType vt = ir_value(m, v)->type, *t = &vt; /* a copy: creating ops moves values */
  int64_t b[IR_MAX_RANK], e[IR_MAX_RANK];
  for (int i = 0; i < t->rank; i++) {
    b[i] = i == axis ? begin : 0;
    e[i] = i == axis ? begin + len : t->dims[i];
  }
  IrValueId s = pass_op1(m, anchor, OP_SLICE, (IrValueId[]){v}, 1, base);
  pass_set_ints(m, s, "begin", b, (uint32_t)t->rank);
  pass_set_ints(m, s, "end", e, (uint32_t)t->rank);
  return s;
}

static int64_t part_len(IrModule *m, const Concat *c, uint32_t k) { return ir_value(m, c->parts[k])->type.dims[c->axis]; }

static void copy_attrs(IrModule *m, IrOpId from, IrOpId to) {
  for (uint32_t i = 0; i < ir_op(m, from)->nattrs; i++)
    ir_op_set_attr(m, to, ir_op(m, from)->attrs[i].name, &ir_op(m, from)->attrs[i].val, ir_op(m, from)->attrs[i].loc);
  pass_reinfer(m, to);
}

/* How a product (linear, matmul, conv) taking the concat as operand `index`
 * splits: the other operand, sliced along `wslice_axis`. */
typedef struct ProductPlan {
  uint32_t other;
  int wslice_axis;
} ProductPlan;

/* Why the product `use` cannot become a sum over the parts (NULL if it can). */
static const char *plan_product(IrModule *m, const Concat *c, IrOpId use, uint32_t index, ProductPlan *p) {
  IrOp *u = ir_op(m, use);
  int rank = ir_value(m, c->out)->type.rank;
  if (u->kind == OP_LINEAR) {
    if (index != 0) return "takes it as the weight";
    if (c->axis != rank - 1) return "contracts the last axis, not the concatenated one";
    *p = (ProductPlan){1, 1};
    return NULL;
  }
  if (u->kind == OP_CONV) {
    if (index != 0) return "takes it as the weight";
    if (c->axis != 1) return "contracts the channels (axis 1), not the concatenated axis";
    if (ir_attr_int(m, use, "groups", 1) != 1) return "is a grouped conv";
    *p = (ProductPlan){1, 1};
    return NULL;
  }
  bool tx = ir_attr_bool(m, use, "transpose_x", false), ty = ir_attr_bool(m, use, "transpose_y", false);
  int other_rank = ir_value(m, u->inputs[1 - index])->type.rank;
  if (ir_id_eq(u->inputs[0], u->inputs[1])) return "multiplies it by itself";
  if (rank < 2 || other_rank < 2) return "multiplies a vector";
  int contracted = index == 0 ? (tx ? rank - 2 : rank - 1) : (ty ? rank - 1 : rank - 2);
  if (c->axis != contracted) return "does not contract the concatenated axis";
  *p = (ProductPlan){1 - index, index == 0 ? (ty ? other_rank - 1 : other_rank - 2) : (tx ? other_rank - 2 : other_rank - 1)};
  return NULL;
}

static bool is_product(IrOpKind k) { return k == OP_LINEAR || k == OP_MATMUL || k == OP_CONV; }

/* Sum over parts of op(part_k, weight slice_k); the bias (if any) is added once. */
static bool split_product(IrModule *m, const Concat *c, IrOpId use, uint32_t index) {
  ProductPlan plan;
  if (!is_product(ir_op(m, use)->kind) || plan_product(m, c, use, index, &plan)) return false;
  /* u dangles once ops are created below: read everything first. */
  IrOp *u = ir_op(m, use);
  IrOpKind kind = u->kind;
  IrValueId out = u->results[0];
  uint32_t other = plan.other;
  IrValueId w = u->inputs[other], bias = u->ninputs == 3 ? u->inputs[2] : IR_NO_VALUE;
  IrValueId sum = IR_NO_VALUE;
  for (uint32_t k = 0; k < c->n; k++) {
    const char *nm = arena_printf(&m->arena, "%s_part%u", ir_value(m, out)->name, k);
    IrValueId ws = slice_of(m, use, w, plan.wslice_axis, c->begin[k], part_len(m, c, k),
                            arena_printf(&m->arena, "%s_w", nm));
    IrValueId ins[3];
    ins[index] = c->parts[k];
    ins[other] = ws;
    uint32_t nin = 2;
    if (k == 0 && !ir_id_is_none(bias)) ins[nin++] = bias;
    IrValueId p = pass_op1(m, use, kind, ins, nin, nm);
    copy_attrs(m, use, ir_value(m, p)->def);
    sum = !ir_id_is_none(sum) ? pass_op1(m, use, OP_ADD, (IrValueId[]){sum, p}, 2, pass_name(m, out, "sum")) : p;
  }
  pass_replace_op(m, use, out, sum);
  return true;
}

static bool is_unary_elementwise(IrOpKind k) {
  switch (k) {
  case OP_RELU: case OP_TANH: case OP_SIGMOID: case OP_SILU: case OP_GELU: case OP_EXP: case OP_LOG: case OP_SQRT:
  case OP_RSQRT: case OP_NEG: case OP_ABS: case OP_IDENTITY: case OP_CAST: case OP_CLIP:
    return true;
  default:
    return false;
  }
}

static bool is_binary_elementwise(IrOpKind k) {
  switch (k) {
  case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: case OP_POW: case OP_MAXIMUM: case OP_MINIMUM:
    return true;
  default:
    return false;
  }
}

/* Why the element-wise op `use` cannot be applied part by part (NULL if it can). */
static const char *plan_distribute(IrModule *m, const Concat *c, IrOpId use) {
  IrOp *u = ir_op(m, use);
  const IrType *ot = &ir_value(m, u->results[0])->type, *ct = &ir_value(m, c->out)->type;
  /* The result must have the concat's extent along the axis: a concat that
   * the other operand broadcasts (extent 1 against n) cannot be split. */
  int shift = ot->rank - ct->rank;
  if (c->axis + shift >= ot->rank || ot->dims[c->axis + shift] != ct->dims[c->axis])
    return "broadcasts it along the concatenated axis";
  /* The concat operand must not be broadcast to a higher rank, and parts pair with parts only once. */
  if (u->ninputs == 2 && ct->rank != ot->rank) return "broadcasts it to a higher rank";
  if (u->ninputs == 2 && ir_id_eq(u->inputs[0], u->inputs[1])) return "takes it as both operands";
  return NULL;
}

/* op(concat(parts), y) -> concat(op(part_k, y_k)), y sliced where it is not broadcast. */
static bool distribute(IrModule *m, const Concat *c, IrOpId use, uint32_t index) {
  IrOp *u = ir_op(m, use);
  if (!is_unary_elementwise(u->kind) && !is_binary_elementwise(u->kind)) return false;
  if (plan_distribute(m, c, use)) return false;
  IrValueId out = u->results[0];
  const IrType out_type = ir_value(m, out)->type, *ot = &out_type; /* a copy: creating ops moves values */
  /* u dangles once ops are created below: read everything first. */
  IrOpKind kind = u->kind;
  uint32_t ninputs = u->ninputs;
  IrValueId other = ninputs == 2 ? u->inputs[1 - index] : IR_NO_VALUE;
  IrValueId parts[IR_MAX_OPERANDS];
  for (uint32_t k = 0; k < c->n; k++) {
    IrValueId ins[2];
    ins[index] = c->parts[k];
    if (ninputs == 2) {
      IrValueId y = other;
      const IrType y_type = ir_value(m, y)->type, *yt = &y_type;
      int yaxis = c->axis - (ot->rank - yt->rank); /* right-aligned broadcasting */
      bool broadcast = yaxis < 0 || yt->dims[yaxis] == 1;
      ins[1 - index] = broadcast ? y
                                 : slice_of(m, use, y, yaxis, c->begin[k], part_len(m, c, k),
                                            arena_printf(&m->arena, "%s_part%u_y", ir_value(m, out)->name, k));
    }
    parts[k] = pass_op1(m, use, kind, ins, ninputs, arena_printf(&m->arena, "%s_part%u", ir_value(m, out)->name, k));
    copy_attrs(m, use, ir_value(m, parts[k])->def);
  }
  IrValueId cat = pass_op1(m, use, OP_CONCAT, parts, c->n, pass_name(m, out, "cat"));
  pass_set_int(m, cat, "axis", c->axis);
  pass_replace_op(m, use, out, cat);
  return true;
}

/* How a reshape carries the concatenated axis: to axis `axis` of its
 * result (of `dims`), whole. */
typedef struct ReshapePlan {
  int axis, rank;
  int64_t dims[IR_MAX_RANK];
} ReshapePlan;

/* Whether the reshape `use` keeps the concatenated axis whole: it regroups
 * only the axes before it (keeping their product) and those after it, as
 * [B, T, 3C] -> [B*T, 3C] does, so each part is a range of the same axis. */
static bool plan_reshape(IrModule *m, const Concat *c, IrOpId use, ReshapePlan *p) {
  const IrType in = ir_value(m, c->out)->type, out = ir_value(m, ir_op(m, use)->results[0])->type;
  int64_t outer = 1;
  for (int i = 0; i < c->axis; i++) outer *= in.dims[i];
  int64_t pre = 1;
  for (int b = 0; b < out.rank && pre <= outer; pre *= out.dims[b], b++) {
    if (pre != outer || out.dims[b] != in.dims[c->axis]) continue;
    *p = (ReshapePlan){.axis = b, .rank = out.rank};
    memcpy(p->dims, out.dims, sizeof out.dims);
    return true;
  }
  return false;
}

/* The axis of a 2-D matmul's result that a concat along a free axis of its
 * operand `index` becomes (the rows of x, the columns of y), or -1: the
 * weight gradient xT . g of a linear layer, as its rule makes it, whose g is
 * the split's adjoint. (Batched products, with their broadcasting, and
 * linear, which the backward does not emit, keep the concat.) */
static int free_product_axis(IrModule *m, const Concat *c, IrOpId use, uint32_t index) {
  IrOp *u = ir_op(m, use);
  if (u->kind != OP_MATMUL || ir_id_eq(u->inputs[0], u->inputs[1])) return -1;
  if (ir_value(m, c->out)->type.rank != 2 || ir_value(m, u->inputs[1 - index])->type.rank != 2) return -1;
  bool tx = ir_attr_bool(m, use, "transpose_x", false), ty = ir_attr_bool(m, use, "transpose_y", false);
  if (index == 0 && c->axis == (tx ? 1 : 0)) return 0;
  if (index == 1 && c->axis == (ty ? 0 : 1)) return 1;
  return -1;
}

/* The axis of a reduction's result that the concatenated axis becomes, or
 * -1 if it reduces that axis (or every axis). */
static int reduce_axis(IrModule *m, const Concat *c, IrOpId use) {
  IrOpKind k = ir_op(m, use)->kind;
  if (k != OP_REDUCE_SUM && k != OP_REDUCE_MEAN && k != OP_REDUCE_MAX) return -1;
  int rank = ir_value(m, c->out)->type.rank;
  int64_t axes[IR_MAX_RANK + 1];
  int n = ir_attr_ints(m, use, "axes", axes, IR_MAX_RANK + 1);
  if (n <= 0) return -1;
  int below = 0;
  for (int i = 0; i < n; i++) {
    int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (a == c->axis) return -1;
    below += a < c->axis;
  }
  return ir_attr_bool(m, use, "keep_dims", false) ? c->axis : c->axis - below;
}

/* The axis of `use`'s result that carries the concat's parts when the op is
 * applied to each part, or -1; *rp is set for a reshape. */
static int carried_axis(IrModule *m, const Concat *c, IrOpId use, uint32_t index, ReshapePlan *rp, bool *reshape) {
  IrOp *u = ir_op(m, use);
  *reshape = false;
  if (u->kind == OP_TRANSPOSE) {
    int rank = ir_value(m, c->out)->type.rank;
    int64_t perm[IR_MAX_RANK];
    if (ir_attr_ints(m, use, "perm", perm, IR_MAX_RANK) != rank) return -1;
    for (int i = 0; i < rank; i++)
      if ((perm[i] < 0 ? perm[i] + rank : perm[i]) == c->axis) return i;
    return -1;
  }
  if (u->kind == OP_RESHAPE) {
    *reshape = plan_reshape(m, c, use, rp);
    return *reshape ? rp->axis : -1;
  }
  if (u->kind == OP_MATMUL) return free_product_axis(m, c, use, index);
  return reduce_axis(m, c, use);
}

/* op(concat(parts), ...) -> concat(op(part_k, ...)) along the carried axis. */
static bool carry(IrModule *m, const Concat *c, IrOpId use, uint32_t index) {
  ReshapePlan rp;
  bool reshape;
  int axis = carried_axis(m, c, use, index, &rp, &reshape);
  if (axis < 0) return false;
  /* u dangles once ops are created below: read everything first. */
  IrOp *u = ir_op(m, use);
  IrOpKind kind = u->kind;
  IrValueId out = u->results[0], ins[3];
  uint32_t nin = u->ninputs;
  if (nin > 3) return false;
  memcpy(ins, u->inputs, sizeof *ins * nin);
  IrValueId parts[IR_MAX_OPERANDS];
  for (uint32_t k = 0; k < c->n; k++) {
    ins[index] = c->parts[k];
    parts[k] = pass_op1(m, use, kind, ins, nin, arena_printf(&m->arena, "%s_part%u", ir_value(m, out)->name, k));
    copy_attrs(m, use, ir_value(m, parts[k])->def);
    if (reshape) {
      rp.dims[rp.axis] = part_len(m, c, k);
      pass_set_ints(m, parts[k], "shape", rp.dims, (uint32_t)rp.rank);
    }
  }
  IrValueId cat = pass_op1(m, use, OP_CONCAT, parts, c->n, pass_name(m, out, "cat"));
  pass_set_int(m, cat, "axis", axis);
  pass_replace_op(m, use, out, cat);
  return true;
}

/* slice(concat(parts)) taking a range inside one part is a slice of that
 * part (what slicing a weight in split_product leaves when the weight is
 * itself a concat). */
typedef struct SlicePlan {
  uint32_t part;
  int64_t begin[IR_MAX_RANK], end[IR_MAX_RANK], stride[IR_MAX_RANK]; /* of the slice of that part */
} SlicePlan;

/* Whether the slice `use` takes a range inside one part, and which. */
static bool plan_slice(IrModule *m, const Concat *c, IrOpId use, SlicePlan *p) {
  const IrType ct = ir_value(m, c->out)->type;
  int64_t b[IR_MAX_RANK], e[IR_MAX_RANK];
  for (int i = 0; i < IR_MAX_RANK; i++) p->stride[i] = 1;
  ir_attr_ints(m, use, "begin", b, IR_MAX_RANK);
  ir_attr_ints(m, use, "end", e, IR_MAX_RANK);
  ir_attr_ints(m, use, "stride", p->stride, IR_MAX_RANK);
  int a = c->axis;
  int64_t n = ct.dims[a];
  int64_t lo = b[a] < 0 ? b[a] + n : b[a], hi = e[a] < 0 ? e[a] + n : e[a];
  lo = lo < 0 ? 0 : lo > n ? n : lo;
  hi = hi < 0 ? 0 : hi > n ? n : hi;
  if (p->stride[a] != 1) return false;
  for (uint32_t k = 0; k < c->n; k++) {
    int64_t pb = c->begin[k], pe = pb + part_len(m, c, k);
    if (lo < pb || hi > pe) continue;
    p->part = k;
    for (int i = 0; i < ct.rank; i++) {
      p->begin[i] = i == a ? lo - pb : b[i];
      p->end[i] = i == a ? hi - pb : e[i];
    }
    return true;
  }
  return false;
}

static bool slice_of_part(IrModule *m, const Concat *c, IrOpId use) {
  SlicePlan plan;
  if (ir_op(m, use)->kind != OP_SLICE || !plan_slice(m, c, use, &plan)) return false;
  IrValueId out = ir_op(m, use)->results[0];
  uint32_t rank = (uint32_t)ir_value(m, c->out)->type.rank;
  IrValueId r = pass_op1(m, use, OP_SLICE, (IrValueId[]){c->parts[plan.part]}, 1, pass_name(m, out, "of_part"));
  pass_set_ints(m, r, "begin", plan.begin, rank);
  pass_set_ints(m, r, "stride", plan.stride, rank);
  pass_set_ints(m, r, "end", plan.end, rank);
  pass_replace_op(m, use, out, r);
  return true;
}

/* A concat returned as output i becomes its parts as outputs i, i+1, ...
 * named "<output>.<k>", recorded as a group so the caller can reassemble
 * it (the manifest lists the group). */
static void split_output(IrModule *m, const Concat *c, IrFuncId f, uint32_t index) {
  IrFunc *fn = ir_func(m, f);
  const char *name = fn->outputs[index].name;
  SrcSpan loc = fn->outputs[index].loc;
  IrType whole = ir_value(m, c->out)->type;
  for (uint32_t k = 0; k < c->n; k++) {
    const char *part = arena_printf(&m->arena, "%s.%u", name, k);
    if (k == 0) {
      ir_func_set_output(m, f, index, c->parts[0]);
      fn = ir_func(m, f);
      fn->outputs[index].name = part;
    } else {
      ir_func_insert_output(m, f, index + k, part, c->parts[k], loc);
      fn = ir_func(m, f);
    }
    fn->outputs[index + k].type = ir_value(m, c->parts[k])->type; /* the interface changes here, on purpose */
  }
  xgrow((void **)&fn->groups, sizeof *fn->groups, &fn->cap_groups, fn->ngroups + 1);
  fn->groups[fn->ngroups++] = (IrOutputGroup){name, c->axis, index, c->n, whole};
}

/* Why one use stops split-concat from taking the concat apart (NULL if it
 * does not): the same decisions sweep() makes, in words. */
static const char *use_blocker(IrModule *m, const Concat *c, IrUse use) {
  if (ir_id_is_none(use.op)) return NULL; /* an output: split into outputs */
  IrOp *u = ir_op(m, use.op);
  ProductPlan plan;
  if (is_product(u->kind)) return plan_product(m, c, use.op, use.index, &plan);
  if (is_unary_elementwise(u->kind) || is_binary_elementwise(u->kind)) return plan_distribute(m, c, use.op);
  ReshapePlan rp;
  bool reshape;
  if (carried_axis(m, c, use.op, use.index, &rp, &reshape) >= 0) return NULL;
  SlicePlan slice;
  if (u->kind == OP_SLICE)
    return plan_slice(m, c, use.op, &slice) ? NULL : "takes a range across its parts, or strides along the concatenated axis";
  return "is neither element-wise nor a linear, matmul or conv over the concatenated axis";
}

bool split_concat_blocker(IrModule *m, IrOpId op, StrBuf *why) {
  if (ir_op(m, op)->kind != OP_CONCAT) return false;
  Concat c;
  read_concat(m, op, &c);
  const IrValue *r = ir_value(m, c.out);
  for (uint32_t i = 0; i < r->nuses; i++) {
    const char *reason = use_blocker(m, &c, r->uses[i]);
    if (!reason) continue;
    const IrOp *u = ir_op(m, r->uses[i].op);
    sb_printf(why, "its use by %s '%s' %s", ir_op_info(u->kind)->name,
              u->nresults ? ir_value(m, u->results[0])->name : "?", reason);
    return true;
  }
  return false;
}

/* One sweep; distributing creates new concats further down, so the pass
 * sweeps again until a sweep changes nothing. */
static bool sweep(IrModule *m, PassCtx *ctx) {
  bool changed = false;
  PASS_FOR_EACH_OP(m, f, op) {
    if (ir_op(m, op)->kind != OP_CONCAT) continue;
    Concat c;
    read_concat(m, op, &c);
    /* Each use is rewritten on its own; uses change under us, so take one at a time. */
    bool progress = true;
    while (progress) {
      progress = false;
      IrValue *r = ir_value(m, c.out);
      for (uint32_t i = 0; i < r->nuses; i++) {
        IrUse use = r->uses[i];
        if (ir_id_is_none(use.op)) {
          split_output(m, &c, f, use.index);
          progress = changed = true;
          break;
        }
        if (slice_of_part(m, &c, use.op) || split_product(m, &c, use.op, use.index) ||
            distribute(m, &c, use.op, use.index) || carry(m, &c, use.op, use.index)) {
          progress = changed = true;
          break;
        }
      }
    }
    if (!ir_value(m, c.out)->nuses) {
      ir_op_erase(m, op);
      changed = true;
    }
  }
  (void)ctx;
  return changed;
}

/* The widest concat placed by products: each element of the result costs
 * one multiply-add per element of the axis. */
#define MAX_PLACEMENT_WIDTH 256

/* concat(parts) along the last axis -> the sum of part_k . E_k, where E_k
 * [len_k, n] puts column i of part k at column begin_k + i; for a concat
 * that a reshape merges with the axes before it (nothing else can move it). Parts that are zeros (the
 * padding a slice's gradient adds) are left out of the sum. */
static bool place_by_products(IrModule *m, IrFuncId f, const Concat *c) {
  const IrType t = ir_value(m, c->out)->type;
  int64_t n = t.dims[c->axis];
  if (t.rank < 2 || c->axis != t.rank - 1 || n > MAX_PLACEMENT_WIDTH || !ir_dtype_is_float(t.dtype)) return false;
  const IrValue *r = ir_value(m, c->out);
  bool merged = false; /* by a reshape whose last axis is the concatenated one times the axes before it */
  for (uint32_t i = 0; i < r->nuses && !merged; i++) {
    if (ir_id_is_none(r->uses[i].op) || ir_op(m, r->uses[i].op)->kind != OP_RESHAPE) continue;
    const IrType *o = &ir_value(m, ir_op(m, r->uses[i].op)->results[0])->type;
    merged = o->rank >= 1 && o->dims[o->rank - 1] > n && o->dims[o->rank - 1] % n == 0;
  }
  if (!merged) return false;
  SrcSpan loc = ir_op(m, c->op)->loc;
  const char *base = ir_value(m, c->out)->name;
  IrValueId sum = IR_NO_VALUE;
  for (uint32_t k = 0; k < c->n; k++) {
    bool last = k + 1 == c->n && ir_id_is_none(sum);
    if (!last && pass_is_const_splat(m, c->parts[k], 0.0)) continue;
    int64_t len = part_len(m, c, k);
    double *place = xcalloc((size_t)(len * n), sizeof *place);
    for (int64_t i = 0; i < len; i++) place[i * n + c->begin[k] + i] = 1.0;
    IrType et = {.dtype = t.dtype, .rank = 2, .dims = {len, n}};
    IrValueId e = pass_const(m, f, arena_printf(&m->arena, "%s_place%u", base, k), &et, place, (uint64_t)(len * n), loc);
    free(place);
    IrValueId p = pass_op1(m, c->op, OP_MATMUL, (IrValueId[]){c->parts[k], e}, 2,
                           arena_printf(&m->arena, "%s_part%u", base, k));
    sum = ir_id_is_none(sum) ? p : pass_op1(m, c->op, OP_ADD, (IrValueId[]){sum, p}, 2, pass_name(m, c->out, "sum"));
  }
  pass_replace_op(m, c->op, c->out, sum);
  return true;
}

static bool place_stuck(IrModule *m) {
  bool changed = false;
  PASS_FOR_EACH_OP(m, f, op) {
    if (ir_op(m, op)->kind != OP_CONCAT) continue;
    Concat c;
    read_concat(m, op, &c);
    changed = place_by_products(m, f, &c) || changed;
  }
  return changed;
}

/* Each sweep moves concats strictly down the graph, so this ends. */
#define MAX_SWEEPS 64

bool pass_split_concat(IrModule *m, PassCtx *ctx) {
  for (int i = 0; i < MAX_SWEEPS && sweep(m, ctx); i++) ctx->changed = true;
  if (place_stuck(m)) ctx->changed = true;
  return true;
}
