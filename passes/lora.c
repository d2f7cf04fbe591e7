/*
 * lora (with orionc --lora=PATTERN:RANK[:ALPHA]): LoRA adapters as program
 * inputs. The ANE bakes weights into the compiled program, so an adapter that
 * is a weight would need a recompile per adapter; as inputs, adapters are
 * swapped by binding other buffers. Each linear layer whose constant weight
 * matches a pattern becomes
 *
 *   y = linear(x, W, b) + (alpha / rank) * matmul(matmul(x, A^T), B^T)
 *
 * with A [rank, Cin] and B [Cout, rank] new fp16 inputs (with lora_any_float,
 * for training, of the layer's dtype: fp32 layers get fp32 adapters) named
 * "<module>.lora_A" and "<module>.lora_B", where <module> is the weight's
 * name without ".weight" — PEFT's layout and naming (lora_A.weight is
 * [r, in], lora_B.weight is [out, r]), so an adapter file binds as it is.
 * Zero adapters add exact zeros: the base model's outputs. io-legalize then
 * orders and sizes the new inputs like all others.
 */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "orion/passes.h"
#include "pass_util.h"

/* The module name PEFT uses for a weight: its name without ".weight". */
static const char *module_name(IrModule *m, const char *weight) {
  size_t n = strlen(weight);
  if (n > 7 && !strcmp(weight + n - 7, ".weight")) n -= 7;
  return arena_printf(&m->arena, "%.*s", (int)n, weight);
}

static const LoraSpec *matching_spec(const PassOptions *o, const char *weight, const char *module) {
  for (uint32_t i = 0; i < o->nlora; i++)
    if (fnmatch(o->lora[i].pattern, weight, 0) == 0 || fnmatch(o->lora[i].pattern, module, 0) == 0) return &o->lora[i];
  return NULL;
}

bool pass_lora(IrModule *m, PassCtx *ctx) {
  const PassOptions *o = ctx->opt;
  if (!o || !o->nlora) return true;
  uint32_t *used = xcalloc(o->nlora, sizeof *used);
  bool ok = true;
  PASS_FOR_EACH_OP(m, f, op) {
    IrOp *op_ = ir_op(m, op);
    if (op_->kind != OP_LINEAR) continue;
    IrValueId x = op_->inputs[0], w = op_->inputs[1], out = op_->results[0];
    SrcSpan loc = op_->loc;
    IrValue *wv = ir_value(m, w);
    /* Only weights: an adapter on an activation would not be a LoRA. */
    if (wv->kind != VK_PARAM || wv->type.rank != 2) continue;
    const char *wname = wv->name, *module = module_name(m, wname);
    const LoraSpec *spec = matching_spec(o, wname, module);
    if (!spec) continue;
    used[spec - o->lora]++;
    const IrType xt = ir_value(m, x)->type;
    int64_t cout = wv->type.dims[0], cin = wv->type.dims[1];
    bool float_ok = xt.dtype == DT_FP16 || (o->lora_any_float && xt.dtype == DT_FP32);
    if (!float_ok) {
      diag_error(ctx->d, loc, "--lora: layer '%s' computes in %s; adapters as inputs need fp16 (the ANE's I/O type)",
                 module, ir_dtype_name(xt.dtype));
      ok = false;
      continue;
    }
    const char *a_name = arena_printf(&m->arena, "%s.lora_A", module);
    const char *b_name = arena_printf(&m->arena, "%s.lora_B", module);
    if (!ir_id_is_none(ir_func_find_value(m, f, a_name)) || !ir_id_is_none(ir_func_find_value(m, f, b_name))) {
      diag_error(ctx->d, loc, "--lora: layer '%s' already has adapter inputs (two patterns, or the names are taken)",
                 module);
      ok = false;
      continue;
    }
    IrType at = {.dtype = xt.dtype, .rank = 2, .dims = {spec->rank, cin}};
    IrType bt = {.dtype = xt.dtype, .rank = 2, .dims = {cout, spec->rank}};
    IrValueId a = ir_func_add_input(m, f, a_name, &at, loc);
    IrValueId b = ir_func_add_input(m, f, b_name, &bt, loc);
    /* The adapter path needs only x: it goes before the linear; the sum after it. */
    IrValueId down = pass_op1(m, op, OP_MATMUL, (IrValueId[]){x, a}, 2, pass_name(m, out, "lora_down"));
    pass_set_bool(m, down, "transpose_y", true);
    IrValueId up = pass_op1(m, op, OP_MATMUL, (IrValueId[]){down, b}, 2, pass_name(m, out, "lora_up"));
    pass_set_bool(m, up, "transpose_y", true);
    IrValueId scale = pass_scalar_const(m, f, pass_name(m, out, "lora_scale"), xt.dtype, spec->alpha / spec->rank, loc);
    IrValueId scaled = pass_op1(m, op, OP_MUL, (IrValueId[]){up, scale}, 2, pass_name(m, out, "lora_scaled"));
    IrOpId next = ir_op(m, op)->next;
    const char *sum_name = ir_unique_name(m, f, pass_name(m, out, "lora"));
    IrOpId add = ir_op_new(m, f, OP_ADD, (IrValueId[]){out, scaled}, 2, 1, &sum_name, loc);
    if (!ir_id_is_none(next)) ir_op_move_before(m, add, next); /* else it was appended, after the linear */
    pass_reinfer(m, add);
    IrValueId sum = ir_op(m, add)->results[0];
    /* Every user of the linear's result, outputs included, now reads the sum. */
    pass_replace_uses_except(m, f, out, sum, add);
    ctx->changed = true;
    if (o->lora_layers) {
      LoraLayers *rec = o->lora_layers;
      xgrow((void **)&rec->layers, sizeof *rec->layers, &rec->cap, rec->n + 1);
      rec->layers[rec->n++] = (LoraLayer){module, spec->rank, spec->alpha};
    }
  }
  for (uint32_t i = 0; i < o->nlora; i++)
    if (!used[i]) {
      diag_error(ctx->d, (SrcSpan){0}, "--lora: pattern '%s' matches no linear layer with a constant weight",
                 o->lora[i].pattern);
      ok = false;
    }
  free(used);
  return ok;
}
