/*
 * const-fold: small sub-graphs of constants are computed at compile time.
 * Element-wise unary and binary ops (with broadcasting), reshape and identity
 * whose operands are all consts become a const, its values rounded to the
 * result dtype as the op would store them. Large results stay ops (a folded
 * const is written inline or into the weight file).
 */
#include <math.h>
#include <stdlib.h>

#include "orion/passes.h"
#include "pass_util.h"

/* Largest result folded. */
#define MAX_FOLD_ELEMENTS (1u << 16)

static double elem(const IrValue *v, uint64_t i) { return v->data[v->ndata == 1 ? 0 : i]; }

/* Index into an operand of a broadcast binary op for result element i. */
static uint64_t broadcast_index(const IrType *out, const IrType *in, uint64_t i) {
  uint64_t idx = 0, stride = 1;
  for (int d = out->rank - 1, k = in->rank - 1; d >= 0; d--, k--) {
    uint64_t coord = i % (uint64_t)out->dims[d];
    i /= (uint64_t)out->dims[d];
    if (k < 0) continue;
    if (in->dims[k] != 1) idx += coord * stride;
    stride *= (uint64_t)in->dims[k];
  }
  return idx;
}

static bool unary(IrOpKind k, double x, double *y) {
  switch (k) {
  case OP_NEG: *y = -x; return true;
  case OP_ABS: *y = fabs(x); return true;
  case OP_RELU: *y = x > 0 ? x : 0; return true;
  case OP_EXP: *y = exp(x); return true;
  case OP_SQRT: *y = sqrt(x); return true;
  case OP_TANH: *y = tanh(x); return true;
  case OP_SIGMOID: *y = 1.0 / (1.0 + exp(-x)); return true;
  case OP_IDENTITY: case OP_RESHAPE: *y = x; return true;
  default: return false;
  }
}

static bool binary(IrOpKind k, double a, double b, double *y) {
  switch (k) {
  case OP_ADD: *y = a + b; return true;
  case OP_SUB: *y = a - b; return true;
  case OP_MUL: *y = a * b; return true;
  case OP_DIV: *y = a / b; return true;
  case OP_POW: *y = pow(a, b); return true;
  case OP_MAXIMUM: *y = a > b ? a : b; return true;
  case OP_MINIMUM: *y = a < b ? a : b; return true;
  default: return false;
  }
}

static bool fold(IrModule *m, IrOpId op) {
  IrOp *o = ir_op(m, op);
  if (o->nresults != 1 || o->ninputs == 0 || o->ninputs > 2) return false;
  for (uint32_t i = 0; i < o->ninputs; i++)
    if (ir_value(m, o->inputs[i])->kind != VK_CONST) return false;
  IrValueId r = o->results[0];
  IrType t = ir_value(m, r)->type;
  uint64_t n = ir_type_elements(&t);
  if (n > MAX_FOLD_ELEMENTS) return false;
  double probe;
  if (o->ninputs == 1 ? !unary(o->kind, 0, &probe) : !binary(o->kind, 0, 1, &probe)) return false;
  /* A splat stays a splat when every operand is one. */
  bool splat = true;
  for (uint32_t i = 0; i < o->ninputs; i++) splat &= ir_value(m, o->inputs[i])->ndata == 1;
  uint64_t count = splat ? 1 : n;
  double *data = xmalloc(sizeof *data * (size_t)count);
  for (uint64_t i = 0; i < count; i++) {
    double y = 0;
    if (o->ninputs == 1) {
      unary(o->kind, elem(ir_value(m, o->inputs[0]), i), &y);
    } else {
      const IrValue *a = ir_value(m, o->inputs[0]), *b = ir_value(m, o->inputs[1]);
      double av = a->ndata == 1 ? a->data[0] : a->data[broadcast_index(&t, &a->type, i)];
      double bv = b->ndata == 1 ? b->data[0] : b->data[broadcast_index(&t, &b->type, i)];
      binary(o->kind, av, bv, &y);
    }
    data[i] = pass_round_to_dtype(y, t.dtype);
  }
  IrValueId c = pass_const(m, o->func, pass_name(m, r, "folded"), &t, data, count, o->loc);
  free(data);
  pass_replace_op(m, op, r, c);
  return true;
}

bool pass_const_fold(IrModule *m, PassCtx *ctx) {
  PASS_FOR_EACH_OP(m, f, op) {
    if (fold(m, op)) ctx->changed = true;
  }
  return true;
}
