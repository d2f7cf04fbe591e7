/*
 * Helpers shared by passes (see pass_util.h).
 */
#include "pass_util.h"

#include <math.h>
#include <stdlib.h>

#include "orion/fp16.h"
#include "orion/op_semantics.h"

IrValueId pass_const(IrModule *m, IrFuncId f, const char *base, const IrType *t, const double *data, uint64_t n,
                     SrcSpan loc) {
  return ir_const_new(m, f, ir_unique_name(m, f, base), t, data, n, loc);
}

IrValueId pass_scalar_const(IrModule *m, IrFuncId f, const char *base, IrDType dt, double v, SrcSpan loc) {
  IrType t = {.dtype = dt, .rank = 0};
  return pass_const(m, f, base, &t, &v, 1, loc);
}

/* Infers an op's result types with the messages discarded: a failure shows
 * when the manager verifies after the pass. */
static void infer_quietly(IrModule *m, IrOpId op) {
  Diag quiet;
  StrBuf sink;
  sb_init(&sink);
  diag_init(&quiet, NULL);
  quiet.capture = &sink;
  ir_infer_op(m, op, &quiet);
  sb_free(&sink);
}

IrValueId pass_op1(IrModule *m, IrOpId anchor, IrOpKind kind, const IrValueId *inputs, uint32_t n, const char *base) {
  IrFuncId f = ir_op(m, anchor)->func;
  const char *name = ir_unique_name(m, f, base);
  IrOpId op = ir_op_new(m, f, kind, inputs, n, 1, &name, ir_op(m, anchor)->loc);
  ir_op_move_before(m, op, anchor);
  /* Later rewrites in the same pass read this result's type: infer it now. */
  infer_quietly(m, op);
  return ir_op(m, op)->results[0];
}

const char *pass_name(IrModule *m, IrValueId v, const char *suffix) {
  return arena_printf(&m->arena, "%s_%s", ir_value(m, v)->name, suffix);
}

void pass_replace_op(IrModule *m, IrOpId op, IrValueId old, IrValueId repl) {
  const char *name = ir_value(m, old)->name;
  SrcSpan loc = ir_value(m, old)->loc;
  ir_replace_all_uses(m, old, repl);
  ir_op_erase(m, op);
  ir_value(m, repl)->name = name;
  ir_value(m, repl)->loc = loc;
}

bool pass_is_const_splat(IrModule *m, IrValueId v, double x) {
  IrValue *val = ir_value(m, v);
  if (val->kind != VK_CONST) return false;
  for (uint64_t i = 0; i < val->ndata; i++)
    if (val->data[i] != x) return false;
  return true;
}

double pass_round_to_dtype(double v, IrDType to) {
  switch (to) {
  case DT_FP16: return op_sem_store_fp16(v);
  case DT_FP32: return op_sem_store_fp32(v);
  case DT_BOOL: return v != 0;
  case DT_INT32: return op_sem_sat_int32(v);
  case DT_INT8: return isfinite(v) ? fmax(fmin(trunc(v), 127.0), -128.0) : 0;
  case DT_UINT8: return isfinite(v) ? fmax(fmin(trunc(v), 255.0), 0.0) : 0;
  default: return v;
  }
}

double pass_const_value(double v, IrDType dt) {
  switch (dt) {
  case DT_FP16: return (double)fp16_to_float(fp16_from_double(v));
  case DT_FP32: return (double)(float)v;
  default: return v;
  }
}

static bool constant_at_depth(IrModule *m, IrValueId v, int depth) {
  IrValue *val = ir_value(m, v);
  if (val->kind == VK_PARAM || val->kind == VK_CONST) return true;
  if (val->kind != VK_RESULT || depth == 0) return false;
  IrOp *o = ir_op(m, val->def);
  if (o->ninputs == 0) return false;
  for (uint32_t i = 0; i < o->ninputs; i++)
    if (!constant_at_depth(m, o->inputs[i], depth - 1)) return false;
  return true;
}

bool pass_is_constant(IrModule *m, IrValueId v) { return constant_at_depth(m, v, 4); }

void pass_set_ints(IrModule *m, IrValueId v, const char *name, const int64_t *vals, uint32_t n) {
  IrOpId op = ir_value(m, v)->def;
  ir_op_set_attr_ints(m, op, name, vals, n);
  infer_quietly(m, op);
}

void pass_set_int(IrModule *m, IrValueId v, const char *name, int64_t val) {
  IrOpId op = ir_value(m, v)->def;
  ir_op_set_attr_int(m, op, name, val);
  infer_quietly(m, op);
}

void pass_set_bool(IrModule *m, IrValueId v, const char *name, bool val) {
  IrOpId op = ir_value(m, v)->def;
  ir_op_set_attr_bool(m, op, name, val);
  infer_quietly(m, op);
}

void pass_reinfer(IrModule *m, IrOpId op) { infer_quietly(m, op); }

PassSnapshot pass_snapshot(IrModule *m, IrFuncId f) {
  PassSnapshot s = {NULL, 0, 0};
  if (m->funcs[f].dead) return s;
  s.ids = xmalloc(sizeof *s.ids * (ir_func(m, f)->nops + 1));
  IR_FOR_EACH_OP(m, f, op) s.ids[s.n++] = op;
  return s;
}

void pass_snapshot_done(PassSnapshot *s) {
  free(s->ids);
  s->ids = NULL;
  s->i = s->n + 1; /* ends the loop */
}

void pass_replace_uses_except(IrModule *m, IrFuncId f, IrValueId old, IrValueId repl, IrOpId keep) {
  IrValue *ov = ir_value(m, old);
  for (uint32_t i = 0; i < ov->nuses;) {
    IrUse u = ov->uses[i];
    if (ir_id_eq(u.op, keep)) {
      i++;
      continue;
    }
    if (!ir_id_is_none(u.op)) ir_op_set_input(m, u.op, u.index, repl);
    else ir_func_set_output(m, f, u.index, repl);
    ov = ir_value(m, old); /* the use list changed (and may have moved) */
  }
}

void pass_delete_func(IrModule *m, IrFuncId f) {
  IrFunc *fn = ir_func(m, f);
  for (uint32_t i = 0; i < fn->noutputs; i++) ir_func_set_output(m, f, i, IR_NO_VALUE);
  while (!ir_id_is_none(fn->last)) {
    IrOpId op = fn->last;
    for (uint32_t i = 0; i < ir_op(m, op)->nresults; i++) ir_replace_all_uses(m, ir_op(m, op)->results[i], IR_NO_VALUE);
    if (ir_op(m, op)->kind == OP_CALL) ir_func(m, ir_op(m, op)->callee)->ncallers--;
    ir_op_erase(m, op);
    fn = ir_func(m, f);
  }
  /* The op results went with their ops; inputs and decls are the rest of f's
   * values (no scan of the module's values: deleting many callees stays linear). */
  for (uint32_t i = 0; i < fn->ninputs; i++) ir_value(m, fn->inputs[i])->dead = true;
  for (uint32_t i = 0; i < fn->ndecls; i++) ir_value(m, fn->decls[i])->dead = true;
  fn->ndecls = fn->ninputs = 0;
  fn->dead = true;
}
