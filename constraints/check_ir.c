/*
 * Checkers of the rules that can be decided from the graph IR. Each looks at
 * one function and reports through lint_emit at the op's (or the input's, or
 * the output's) source span. The ops a rule concerns come from the table
 * (Constraint.ops), so the table says which ops and the code says what is
 * wrong with them.
 *
 * They run on verified IR at any stage: before legalization a finding whose
 * fixing pass is about to run becomes a note (lint_emit decides), after it
 * whatever is left is reported at its severity.
 */
#include <string.h>

#include "lint_internal.h"
#include "orion/passes.h"

static const char *result_name(IrModule *m, const IrOp *o) {
  return o->nresults ? ir_value(m, o->results[0])->name : "(no result)";
}

static uint64_t value_bytes(IrModule *m, IrValueId v) {
  const IrType *t = &ir_value(m, v)->type;
  return ir_type_elements(t) * ir_dtype_size(t->dtype);
}

static const char *op_name(const IrOp *o) { return ir_op_info(o->kind)->name; }

/* An op that must not reach the ANE at all. */
static void forbid_ops(LintCtx *c, IrFuncId f, const char *why) {
  IrModule *m = c->m;
  IR_FOR_EACH_OP(m, f, op) {
    IrOp *o = ir_op(m, op);
    if (o->kind < OP_CALL && constraint_has_op(c->rule, o->kind))
      lint_emit(c, LINT_RULE_LEVEL, o->loc, NULL, ir_func(m, f)->name, "%s producing '%s' %s", op_name(o),
                result_name(m, o), why);
  }
}

/* ANE001: with split-concat's reason when it cannot take the concat apart
 * where it stands (before legalization: the use that will stop it). */
void check_ir_concat(LintCtx *c, IrFuncId f) {
  IrModule *m = c->m;
  IR_FOR_EACH_OP(m, f, op) {
    IrOp *o = ir_op(m, op);
    if (o->kind >= OP_CALL || !constraint_has_op(c->rule, o->kind)) continue;
    StrBuf why;
    sb_init(&why);
    if (o->kind == OP_CONCAT && split_concat_blocker(m, op, &why))
      lint_emit_unfixable(c, LINT_RULE_LEVEL, o->loc, NULL, ir_func(m, f)->name,
                "%s producing '%s' is rejected by the ANE compiler; split-concat cannot remove it: %s", op_name(o),
                result_name(m, o), why.data);
    else
      lint_emit(c, LINT_RULE_LEVEL, o->loc, NULL, ir_func(m, f)->name, "%s producing '%s' is rejected by the ANE compiler",
                op_name(o), result_name(m, o));
    sb_free(&why);
  }
}

/* ANE010 */
void check_ir_gelu(LintCtx *c, IrFuncId f) { forbid_ops(c, f, "is not an ANE op"); }

/* ANE006: an unmasked, non-causal attention is fine; a mask the device
 * would ignore is not. */
void check_ir_sdpa_mask(LintCtx *c, IrFuncId f) {
  IrModule *m = c->m;
  IR_FOR_EACH_OP(m, f, op) {
    IrOp *o = ir_op(m, op);
    if (o->kind >= OP_CALL || !constraint_has_op(c->rule, o->kind)) continue;
    bool masked = o->ninputs > 3, causal = ir_attr_bool(m, op, "causal", false);
    if (masked || causal)
      lint_emit(c, LINT_RULE_LEVEL, o->loc, NULL, ir_func(m, f)->name,
                "%s %s producing '%s' would run unmasked (the ANE's fused attention ignores masks)",
                masked ? "masked" : "causal", op_name(o), result_name(m, o));
  }
}

/* ANE013: the third operand of conv is its bias. */
void check_ir_conv_bias(LintCtx *c, IrFuncId f) {
  IrModule *m = c->m;
  IR_FOR_EACH_OP(m, f, op) {
    IrOp *o = ir_op(m, op);
    if (o->kind >= OP_CALL || !constraint_has_op(c->rule, o->kind) || o->ninputs < 3) continue;
    lint_emit(c, LINT_RULE_LEVEL, o->loc, NULL, ir_func(m, f)->name,
              "%s producing '%s' has a bias operand ('%s'), which the ANE path rejects", op_name(o), result_name(m, o),
              ir_value(m, o->inputs[2])->name);
  }
}

static bool is_constant(IrModule *m, IrValueId v) {
  IrValueKind k = ir_value(m, v)->kind;
  return k == VK_PARAM || k == VK_CONST;
}

/* ANE015: linear's weight is its second operand; a matmul may have the
 * constant on either side. */
void check_ir_const_matmul(LintCtx *c, IrFuncId f) {
  IrModule *m = c->m;
  IR_FOR_EACH_OP(m, f, op) {
    IrOp *o = ir_op(m, op);
    if (o->kind >= OP_CALL || !constraint_has_op(c->rule, o->kind) || o->ninputs < 2) continue;
    IrValueId w = IR_NO_VALUE;
    if (o->kind == OP_LINEAR) w = is_constant(m, o->inputs[1]) ? o->inputs[1] : IR_NO_VALUE;
    else w = is_constant(m, o->inputs[1]) ? o->inputs[1] : is_constant(m, o->inputs[0]) ? o->inputs[0] : IR_NO_VALUE;
    if (ir_id_is_none(w)) continue;
    lint_emit(c, LINT_RULE_LEVEL, o->loc, NULL, ir_func(m, f)->name,
              "%s producing '%s' multiplies by the constant '%s'; as a 1x1 conv it would run about 3x faster",
              op_name(o), result_name(m, o), ir_value(m, w)->name);
  }
}

/* ANE016: sram-annotate's estimate, computed again so that the finding is
 * the same before the pass runs and after (an op on constants only is 0). */
void check_ir_sram(LintCtx *c, IrFuncId f) {
  IrModule *m = c->m;
  uint64_t budget = c->target->sram_budget_bytes;
  IR_FOR_EACH_OP(m, f, op) {
    IrOp *o = ir_op(m, op);
    if (o->kind == OP_CALL) continue; /* its ops are checked in the callee */
    uint64_t ws = passes_op_working_set(m, op);
    if (ws <= budget) continue;
    StrBuf a, b;
    sb_init(&a);
    sb_init(&b);
    lint_put_size(&a, ws);
    lint_put_size(&b, budget);
    lint_emit(c, LINT_RULE_LEVEL, o->loc, NULL, ir_func(m, f)->name,
              "%s producing '%s' has a working set of about %s, over the %s SRAM budget of %s",
              op_name(o), result_name(m, o), a.data, b.data,
              c->target->chip ? c->target->chip : mil_target_name(c->target->target));
    sb_free(&a);
    sb_free(&b);
  }
}

/* Functions nothing calls are programs: their inputs and outputs are surfaces. */
static bool is_entry(IrModule *m, IrFuncId f) { return ir_func(m, f)->ncallers == 0; }

/* ANE004: the package writer pads small surfaces, so this is a warning
 * about the padding rather than a failure. */
void check_ir_min_surface(LintCtx *c, IrFuncId f) {
  IrModule *m = c->m;
  if (!is_entry(m, f)) return;
  IrFunc *fn = ir_func(m, f);
  uint64_t min = c->target->min_surface_bytes;
  const char *tname = c->target->chip ? c->target->chip : mil_target_name(c->target->target);
  for (uint32_t i = 0; i < fn->ninputs; i++) {
    IrValue *v = ir_value(m, fn->inputs[i]);
    uint64_t n = value_bytes(m, fn->inputs[i]);
    if (n < min)
      lint_emit(c, DIAG_WARNING, v->loc, NULL, fn->name,
                "input '%s' of '%s' has %llu bytes, below the %llu-byte minimum surface of %s; the package pads "
                "its surface",
                v->name, fn->name, (unsigned long long)n, (unsigned long long)min, tname);
  }
  for (uint32_t i = 0; i < fn->noutputs; i++) {
    uint64_t n = value_bytes(m, fn->outputs[i].value);
    if (n < min)
      lint_emit(c, DIAG_WARNING, fn->outputs[i].loc, NULL, fn->name,
                "output '%s' of '%s' has %llu bytes, below the %llu-byte minimum surface of %s; the package pads "
                "its surface",
                fn->outputs[i].name, fn->name, (unsigned long long)n, (unsigned long long)min, tname);
  }
}

/* ANE017: fp32 at the interface, and fp32 compute (one finding per
 * function, at its first fp32 op, rather than one per op). */
void check_ir_fp32(LintCtx *c, IrFuncId f) {
  IrModule *m = c->m;
  IrFunc *fn = ir_func(m, f);
  if (is_entry(m, f)) {
    for (uint32_t i = 0; i < fn->ninputs; i++) {
      IrValue *v = ir_value(m, fn->inputs[i]);
      if (v->type.dtype == DT_FP32)
        lint_emit(c, LINT_RULE_LEVEL, v->loc, NULL, fn->name,
                  "input '%s' of '%s' is fp32; the ANE computes in fp16 (values beyond 65504 overflow)", v->name,
                  fn->name);
    }
    for (uint32_t i = 0; i < fn->noutputs; i++)
      if (ir_value(m, fn->outputs[i].value)->type.dtype == DT_FP32)
        lint_emit(c, LINT_RULE_LEVEL, fn->outputs[i].loc, NULL, fn->name,
                  "output '%s' of '%s' is fp32; the ANE computes in fp16 (values beyond 65504 overflow)",
                  fn->outputs[i].name, fn->name);
  }
  uint32_t count = 0;
  IrOpId first = IR_NO_OP;
  IR_FOR_EACH_OP(m, f, op) {
    IrOp *o = ir_op(m, op);
    /* A cast is the conversion at the boundary that the workaround asks for. */
    if (o->kind == OP_CAST || o->kind == OP_CALL || !o->nresults) continue;
    if (ir_value(m, o->results[0])->type.dtype != DT_FP32) continue;
    if (!count++) first = op;
  }
  if (count) {
    IrOp *o = ir_op(m, first);
    lint_emit(c, LINT_RULE_LEVEL, o->loc, NULL, fn->name,
              "'%s' has %u fp32 op%s (the first produces '%s'); the ANE computes in fp16", fn->name, count,
              count == 1 ? "" : "s", result_name(m, o));
  }
}
