/*
 * lower-cross-entropy: MIL has no loss op, so cross_entropy(logits, targets)
 * is written out in fp32 (docs/numerics.md, "cross_entropy"):
 *
 *   x     = cast(logits, fp32)                       (fp16 logits only)
 *   sh    = x - reduce_max(x, last axis)             every sh <= 0, the max is 0
 *   lse   = log(reduce_sum(exp(sh), last axis))      the sum is >= 1: no log of 0
 *   t     = gather(classes, targets)                 classes = [0, 1, ..., C-1]
 *   picked= gather(flat(sh), flat(t) + [0, C, 2C, ...])
 *   loss  = sum(lse - picked) / N
 *
 * The gather from `classes` is the identity on valid targets; it is there
 * because the CPU backend's gather stops with the position of an index
 * outside [0, C), which a gather from the flattened logits would not see
 * (target C of row 0 would pick row 1's first class). With ignore_index the
 * ignored positions are masked out by select (their target replaced by 0
 * before the gathers) and the mean divides by the count of the others, so a
 * batch with every position ignored gives 0 / 0 = NaN, as PyTorch does.
 */
#include <stdlib.h>

#include "orion/passes.h"
#include "pass_util.h"

typedef struct Lowering {
  IrModule *m;
  IrOpId op;
  IrFuncId f;
  SrcSpan loc;
  IrValueId out; /* the loss; new names derive from it */
} Lowering;

static IrValueId op1(Lowering *l, IrOpKind k, IrValueId a, const char *suffix) {
  return pass_op1(l->m, l->op, k, (IrValueId[]){a}, 1, pass_name(l->m, l->out, suffix));
}

static IrValueId op2(Lowering *l, IrOpKind k, IrValueId a, IrValueId b, const char *suffix) {
  return pass_op1(l->m, l->op, k, (IrValueId[]){a, b}, 2, pass_name(l->m, l->out, suffix));
}

static IrValueId reshape(Lowering *l, IrValueId a, const int64_t *shape, int rank, const char *suffix) {
  IrValueId r = op1(l, OP_RESHAPE, a, suffix);
  pass_set_ints(l->m, r, "shape", shape, (uint32_t)rank);
  return r;
}

/* A rank-1 int32 const [0, step, 2 step, ...] of n elements. */
static IrValueId ramp(Lowering *l, int64_t n, int64_t step, const char *suffix) {
  double *data = xcalloc((size_t)n, sizeof *data);
  for (int64_t i = 0; i < n; i++) data[i] = (double)(i * step);
  IrType t = {.dtype = DT_INT32, .rank = 1, .dims = {n}};
  IrValueId v = pass_const(l->m, l->f, pass_name(l->m, l->out, suffix), &t, data, (uint64_t)n, l->loc);
  free(data);
  return v;
}

static void lower(IrModule *m, IrOpId op) {
  IrOp *o = ir_op(m, op);
  Lowering l = {.m = m, .op = op, .f = o->func, .loc = o->loc, .out = o->results[0]};
  IrValueId logits = o->inputs[0], targets = o->inputs[1];
  bool has_ignore = ir_op_attr(m, op, "ignore_index") != NULL;
  int64_t ignore = ir_attr_int(m, op, "ignore_index", 0);
  IrType lt = ir_value(m, logits)->type;
  int64_t classes = lt.dims[lt.rank - 1], positions = 1;
  for (int i = 0; i + 1 < lt.rank; i++) positions *= lt.dims[i];
  int64_t last = lt.rank - 1, flat_n[1] = {positions}, flat_nc[1] = {positions * classes};

  IrValueId x = logits;
  if (lt.dtype != DT_FP32) {
    x = op1(&l, OP_CAST, logits, "fp32");
    ir_op_set_attr_str(m, ir_value(m, x)->def, "dtype", "fp32");
    pass_reinfer(m, ir_value(m, x)->def);
  }
  IrValueId mx = op1(&l, OP_REDUCE_MAX, x, "max");
  pass_set_ints(m, mx, "axes", &last, 1);
  pass_set_bool(m, mx, "keep_dims", true);
  IrValueId sh = op2(&l, OP_SUB, x, mx, "shifted");
  IrValueId ex = op1(&l, OP_EXP, sh, "exp");
  IrValueId se = op1(&l, OP_REDUCE_SUM, ex, "sumexp");
  pass_set_ints(m, se, "axes", &last, 1);
  IrValueId lse = op1(&l, OP_LOG, se, "lse");

  IrValueId keep = IR_NO_VALUE, t = targets;
  if (has_ignore) {
    /* targets - ignore_index is 0 exactly where they are equal (int32
     * subtraction saturates, never to 0), and a cast to bool is != 0. */
    IrValueId ign = pass_scalar_const(m, l.f, pass_name(m, l.out, "ignore_index"), DT_INT32, (double)ignore, l.loc);
    IrValueId diff = op2(&l, OP_SUB, targets, ign, "ignore_diff");
    keep = op1(&l, OP_CAST, diff, "keep");
    ir_op_set_attr_str(m, ir_value(m, keep)->def, "dtype", "bool");
    pass_reinfer(m, ir_value(m, keep)->def);
    IrValueId zero = pass_scalar_const(m, l.f, pass_name(m, l.out, "class0"), DT_INT32, 0, l.loc);
    t = pass_op1(m, op, OP_SELECT, (IrValueId[]){keep, targets, zero}, 3, pass_name(m, l.out, "targets_kept"));
  }
  IrValueId checked = op2(&l, OP_GATHER, ramp(&l, classes, 1, "classes"), t, "targets_checked");
  IrValueId flat_t = reshape(&l, checked, flat_n, 1, "targets_flat");
  IrValueId index = op2(&l, OP_ADD, flat_t, ramp(&l, positions, classes, "row_offsets"), "pick_index");
  IrValueId flat_sh = reshape(&l, sh, flat_nc, 1, "shifted_flat");
  IrValueId picked = op2(&l, OP_GATHER, flat_sh, index, "picked");
  IrValueId flat_lse = reshape(&l, lse, flat_n, 1, "lse_flat");
  IrValueId each = op2(&l, OP_SUB, flat_lse, picked, "each");

  IrValueId count;
  if (has_ignore) {
    IrValueId flat_keep = reshape(&l, keep, flat_n, 1, "keep_flat");
    IrValueId zero = pass_scalar_const(m, l.f, pass_name(m, l.out, "zero"), DT_FP32, 0, l.loc);
    each = pass_op1(m, op, OP_SELECT, (IrValueId[]){flat_keep, each, zero}, 3, pass_name(m, l.out, "each_kept"));
    IrValueId ones = op1(&l, OP_CAST, flat_keep, "counted");
    ir_op_set_attr_str(m, ir_value(m, ones)->def, "dtype", "fp32");
    pass_reinfer(m, ir_value(m, ones)->def);
    count = op1(&l, OP_REDUCE_SUM, ones, "count");
  } else {
    count = pass_scalar_const(m, l.f, pass_name(m, l.out, "count"), DT_FP32, (double)positions, l.loc);
  }
  IrValueId total = op1(&l, OP_REDUCE_SUM, each, "total");
  IrValueId loss = op2(&l, OP_DIV, total, count, "mean");
  pass_replace_op(m, op, l.out, loss);
}

bool pass_lower_cross_entropy(IrModule *m, PassCtx *ctx) {
  for (IrFuncId f = 1; f < m->nfuncs; f++) {
    if (m->funcs[f].dead) continue;
    for (IrOpId op = ir_func(m, f)->first, next; !ir_id_is_none(op); op = next) {
      next = ir_op(m, op)->next;
      if (ir_op(m, op)->kind == OP_CROSS_ENTROPY) {
        lower(m, op);
        ctx->changed = true;
      }
    }
  }
  return true;
}
