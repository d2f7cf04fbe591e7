/*
 * sram-annotate: estimates the on-chip working set of every op (the bytes of
 * its operands and results, which must be resident while it runs) and each
 * function's peak, attaches them to the IR (printed as comments), and warns
 * about ops over the target's SRAM budget: past about 32 MiB the ANE spills
 * and throughput drops by about 30% (constraint ANE016). The constraint
 * check makes the same estimate (passes_op_working_set); when it runs after
 * the passes it is the one that reports (PassOptions.sram_checked_later).
 */
#include "orion/passes.h"
#include "pass_util.h"

#define DEFAULT_SRAM_BYTES (32u << 20)

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

bool pass_sram_annotate(IrModule *m, PassCtx *ctx) {
  uint64_t budget = ctx->opt && ctx->opt->target_sram_bytes ? ctx->opt->target_sram_bytes : DEFAULT_SRAM_BYTES;
  /* When the constraint check runs after the passes it reports these ops
   * (ANE016, from the same estimate, at the rule's severity, subject to
   * --allow): warning here too would report each twice. */
  bool warn = !(ctx->opt && ctx->opt->sram_checked_later);
  for (IrFuncId f = 1; f < m->nfuncs; f++) {
    if (m->funcs[f].dead) continue;
    uint64_t peak = 0;
    IR_FOR_EACH_OP(m, f, op) {
      IrOp *o = ir_op(m, op);
      uint64_t ws = passes_op_working_set(m, op);
      if (o->sram_bytes != ws) ctx->changed = true;
      o->sram_bytes = ws;
      peak = ws > peak ? ws : peak;
      if (warn && ws > budget) {
        /* Whole MiB as before; a chip's budget (2,000,000 bytes on M1) with one decimal. */
        int decimals = budget % (1u << 20) ? 1 : 0;
        diag_warning(ctx->d, o->loc, "'%s' needs about %.1f MiB of on-chip memory, over the %.*f MiB SRAM budget [ANE016]",
                     ir_op_info(o->kind)->name, (double)ws / (1 << 20), decimals, (double)budget / (1 << 20));
        diag_note(ctx->d, o->loc, "tile it along the sequence or the channels, or split the program");
      }
    }
    ir_func(m, f)->sram_peak = peak;
  }
  return true;
}
