/*
 * sram-annotate: estimates the on-chip working set of every op (the bytes of
 * its operands and results, which must be resident while it runs) and each
 * function's peak and attaches them to the IR (printed as comments). Past
 * the target's SRAM budget (about 32 MiB) the ANE spills and throughput drops
 * by about 30%: the constraint check reports such ops (ANE016) with the same
 * estimate, passes_op_working_set().
 */
#include "orion/passes.h"
#include "pass_util.h"

static uint64_t bytes_of(IrModule *m, IrValueId v) {
  const IrType *t = &ir_value(m, v)->type;
  return ir_type_elements(t) * ir_dtype_size(t->dtype);
}

uint64_t passes_op_working_set(IrModule *m, IrOpId op) {
  IrOp *o = ir_op(m, op);
  /* Ops on constants only (a weight's reshape or slice) are folded by the ANE compiler. */
  bool constant = true;
  for (uint32_t i = 0; i < o->ninputs; i++) constant &= pass_is_constant(m, o->inputs[i]);
  if (constant) return 0;
  uint64_t ws = 0;
  /* A gather reads only the rows it picks (as many bytes as it writes), not its whole table. */
  for (uint32_t i = o->kind == OP_GATHER ? 1 : 0; i < o->ninputs; i++) ws += bytes_of(m, o->inputs[i]);
  if (o->kind == OP_GATHER) ws += bytes_of(m, o->results[0]);
  for (uint32_t i = 0; i < o->nresults; i++) ws += bytes_of(m, o->results[i]);
  return ws;
}

/* Reports nothing: an op over the budget is the constraint check's finding
 * (ANE016), made from the same estimate, so that it is reported once, at the
 * rule's severity, and --allow and --severity apply to it. */
bool pass_sram_annotate(IrModule *m, PassCtx *ctx) {
  for (IrFuncId f = 1; f < m->nfuncs; f++) {
    if (m->funcs[f].dead) continue;
    uint64_t peak = 0;
    IR_FOR_EACH_OP(m, f, op) {
      IrOp *o = ir_op(m, op);
      uint64_t ws = passes_op_working_set(m, op);
      if (o->sram_bytes != ws) ctx->changed = true;
      o->sram_bytes = ws;
      peak = ws > peak ? ws : peak;
    }
    ir_func(m, f)->sram_peak = peak;
  }
  return true;
}
