/*
 * const-fold: small sub-graphs of constants are computed at compile time.
 * Element-wise unary, binary and select ops (with broadcasting), reshape and
 * identity whose operands are all consts become a const. Each element is
 * what the op computes when it runs (orion/op_semantics.h, docs/numerics.md):
 * the operands as the emitted program holds them (rounded to their dtype),
 * the op's scalar function, the result stored in its dtype. Large results
 * stay ops (a folded const is written inline or into the weight file).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "orion/op_semantics.h"
#include "orion/passes.h"
#include "pass_util.h"

/* Largest result folded. */
#define MAX_FOLD_ELEMENTS (1u << 16)

/* Index into an operand of a broadcast op for result element i. */
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

/* An op's attributes, read once: float ones as the emitter writes them (a
 * const of the operand's dtype). */
typedef struct FoldAttrs {
  double eps, lo, hi;
  bool gelu_tanh;
} FoldAttrs;

static bool foldable(IrOpKind k, uint32_t ninputs) {
  switch (k) {
  case OP_NEG: case OP_ABS: case OP_RELU: case OP_EXP: case OP_SQRT: case OP_TANH: case OP_SIGMOID: case OP_SILU:
  case OP_GELU: case OP_LOG: case OP_RSQRT: case OP_CLIP: case OP_IDENTITY: case OP_RESHAPE:
    return ninputs == 1;
  case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: case OP_POW: case OP_MAXIMUM: case OP_MINIMUM:
    return ninputs == 2;
  case OP_SELECT: return ninputs == 3;
  default: return false;
  }
}

static double unary(IrOpKind k, const FoldAttrs *a, double x) {
  switch (k) {
  case OP_NEG: return -x;
  case OP_ABS: return fabs(x);
  case OP_RELU: return op_sem_relu(x);
  case OP_EXP: return op_sem_exp(x);
  case OP_SQRT: return sqrt(x);
  case OP_TANH: return op_sem_tanh(x);
  case OP_SIGMOID: return op_sem_sigmoid(x);
  case OP_SILU: return op_sem_silu(x);
  case OP_GELU: return a->gelu_tanh ? op_sem_gelu_tanh(x) : op_sem_gelu_exact(x);
  case OP_LOG: return op_sem_log(x, a->eps);
  case OP_RSQRT: return op_sem_rsqrt(x, a->eps);
  case OP_CLIP: return op_sem_clip(x, a->lo, a->hi);
  default: return x; /* identity, reshape */
  }
}

static double binary(IrOpKind k, double a, double b) {
  switch (k) {
  case OP_ADD: return a + b;
  case OP_SUB: return a - b;
  case OP_MUL: return a * b;
  case OP_DIV: return a / b;
  case OP_POW: return op_sem_pow(a, b);
  case OP_MAXIMUM: return op_sem_maximum(a, b);
  default: return op_sem_minimum(a, b);
  }
}

/* Operand j's element for result element i of type t, as the program holds it. */
static double operand(IrModule *m, const IrOp *o, uint32_t j, const IrType *t, uint64_t i) {
  const IrValue *v = ir_value(m, o->inputs[j]);
  double x = v->ndata == 1 ? v->data[0] : v->data[o->ninputs == 1 ? i : broadcast_index(t, &v->type, i)];
  return pass_const_value(x, v->type.dtype);
}

static bool fold(IrModule *m, IrOpId op) {
  IrOp *o = ir_op(m, op);
  if (o->nresults != 1 || !foldable(o->kind, o->ninputs)) return false;
  for (uint32_t i = 0; i < o->ninputs; i++)
    if (ir_value(m, o->inputs[i])->kind != VK_CONST) return false;
  IrValueId r = o->results[0];
  IrType t = ir_value(m, r)->type;
  uint64_t n = ir_type_elements(&t);
  if (n > MAX_FOLD_ELEMENTS) return false;
  IrDType in_dt = ir_value(m, o->inputs[0])->type.dtype;
  FoldAttrs at = {
      .eps = pass_const_value(ir_attr_float(m, op, "epsilon", 0.0), in_dt),
      .lo = pass_const_value(ir_attr_float(m, op, "min", 0.0), in_dt),
      .hi = pass_const_value(ir_attr_float(m, op, "max", 0.0), in_dt),
      .gelu_tanh = !strcmp(ir_attr_str(m, op, "mode", "exact"), "tanh"),
  };
  /* A splat stays a splat when every operand is one. */
  bool splat = true;
  for (uint32_t i = 0; i < o->ninputs; i++) splat &= ir_value(m, o->inputs[i])->ndata == 1;
  uint64_t count = splat ? 1 : n;
  double *data = xmalloc(sizeof *data * (size_t)count);
  for (uint64_t i = 0; i < count; i++) {
    double y;
    if (o->kind == OP_SELECT) y = operand(m, o, 0, &t, i) != 0 ? operand(m, o, 1, &t, i) : operand(m, o, 2, &t, i);
    else if (o->ninputs == 1) y = unary(o->kind, &at, operand(m, o, 0, &t, i));
    else y = binary(o->kind, operand(m, o, 0, &t, i), operand(m, o, 1, &t, i));
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
