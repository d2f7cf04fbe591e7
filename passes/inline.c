/*
 * inline: expands every `call f(...) as NAME` into the caller.
 *
 * The callee's params, consts and op results are copied with names prefixed
 * by the instance path ("h0.w", "h0.mlp.w" for nested calls), so each call
 * has its own weights: random initializers get a seed derived from the
 * instance path, and "{scope}" in a safetensors key becomes the path. A
 * function left without callers is deleted. Runs until no call is left
 * (recursion was rejected by the verifier).
 */
#include <stdlib.h>
#include <string.h>

#include "orion/passes.h"
#include "pass_util.h"

static const char *substitute_scope(IrModule *m, const char *key, const char *scope) {
  const char *at = strstr(key, "{scope}");
  if (!at) return key;
  return arena_printf(&m->arena, "%.*s%s%s", (int)(at - key), key, scope, at + 7);
}

typedef struct Inliner {
  IrModule *m;
  Diag *d;
  StrMap names; /* names defined in the caller */
  IrValueId *map; /* callee value -> caller value */
} Inliner;

static const char *prefixed(Inliner *in, IrOpId call, const char *inst, const char *name, SrcSpan loc) {
  const char *full = arena_printf(&in->m->arena, "%s.%s", inst, name);
  if (strlen(full) > IR_MAX_NAME) {
    diag_error(in->d, ir_op(in->m, call)->loc, "inlining as '%s' makes the name '%s' longer than %d characters", inst,
               full, IR_MAX_NAME);
    return NULL;
  }
  if (strmap_get(&in->names, full)) {
    diag_error(in->d, ir_op(in->m, call)->loc, "inlining '%s' as '%s' would define '%s', which '%s' already defines",
               ir_func(in->m, ir_op(in->m, call)->callee)->name, inst, full,
               ir_func(in->m, ir_op(in->m, call)->func)->name);
    diag_note(in->d, loc, "'%s' comes from this definition", name);
    return NULL;
  }
  return full;
}

static void define(Inliner *in, IrValueId v) { strmap_put(&in->names, ir_value(in->m, v)->name, v); }

static bool inline_call(Inliner *in, IrOpId call) {
  IrModule *m = in->m;
  IrFuncId caller = ir_op(m, call)->func, callee = ir_op(m, call)->callee;
  const char *inst = ir_op(m, call)->instance;
  if (ir_func(m, caller)->nops + ir_func(m, callee)->nops > IR_MAX_OPS_PER_FUNC) {
    diag_error(in->d, ir_op(m, call)->loc, "inlining '%s' makes '%s' larger than %u ops", ir_func(m, callee)->name,
               ir_func(m, caller)->name, IR_MAX_OPS_PER_FUNC);
    return false;
  }
  for (uint32_t i = 0; i < ir_func(m, callee)->ninputs; i++)
    in->map[ir_func(m, callee)->inputs[i]] = ir_op(m, call)->inputs[i];
  for (uint32_t i = 0; i < ir_func(m, callee)->ndecls; i++) {
    IrValueId src = ir_func(m, callee)->decls[i];
    IrValue sv = *ir_value(m, src);
    const char *name = prefixed(in, call, inst, sv.name, sv.loc);
    if (!name) return false;
    IrValueId nv;
    if (sv.kind == VK_PARAM) {
      IrParamSource s = sv.src;
      if (s.kind == SRC_NORMAL || s.kind == SRC_UNIFORM) s.seed = ir_derive_seed(s.seed, inst);
      if (s.kind == SRC_SAFETENSORS) s.key = substitute_scope(m, s.key, inst);
      nv = ir_param_new(m, caller, name, &sv.type, &s, sv.loc);
    } else {
      nv = ir_const_new(m, caller, name, &sv.type, sv.data, sv.ndata, sv.loc);
    }
    in->map[src] = nv;
    define(in, nv);
  }
  IR_FOR_EACH_OP(m, callee, op) {
    IrOp so = *ir_op(m, op);
    IrValueId inputs[256];
    const char *names[256];
    if (so.ninputs > 256 || so.nresults > 256) ice("op with more than 256 operands reached inlining");
    for (uint32_t i = 0; i < so.ninputs; i++) inputs[i] = in->map[so.inputs[i]];
    for (uint32_t i = 0; i < so.nresults; i++) {
      IrValue *r = ir_value(m, so.results[i]);
      if (!(names[i] = prefixed(in, call, inst, r->name, r->loc))) return false;
    }
    IrOpId nop = ir_op_new(m, caller, so.kind, inputs, so.ninputs, so.nresults, names, so.loc);
    ir_op_move_before(m, nop, call);
    for (uint32_t i = 0; i < so.nattrs; i++) ir_op_set_attr(m, nop, so.attrs[i].name, &so.attrs[i].val, so.attrs[i].loc);
    if (so.kind == OP_CALL) {
      ir_op(m, nop)->callee = so.callee;
      ir_op(m, nop)->instance = arena_printf(&m->arena, "%s.%s", inst, so.instance);
      ir_func(m, so.callee)->ncallers++;
    }
    for (uint32_t i = 0; i < so.nresults; i++) {
      IrValueId r = ir_op(m, nop)->results[i];
      ir_value(m, r)->type = ir_value(m, so.results[i])->type;
      ir_value(m, r)->loc = ir_value(m, so.results[i])->loc;
      in->map[so.results[i]] = r;
      define(in, r);
    }
  }
  for (uint32_t i = 0; i < ir_op(m, call)->nresults; i++)
    ir_replace_all_uses(m, ir_op(m, call)->results[i], in->map[ir_func(m, callee)->outputs[i].value]);
  ir_op_erase(m, call);
  ir_func(m, callee)->ncallers--;
  return true;
}

bool pass_inline(IrModule *m, PassCtx *ctx) {
  Diag *d = ctx->d;
  bool *was_callee = xcalloc(m->nfuncs, sizeof *was_callee);
  for (IrFuncId f = 1; f < m->nfuncs; f++) was_callee[f] = m->funcs[f].ncallers > 0;
  /* Only entry functions are expanded: a callee's own calls are expanded as
   * copies inside its callers, so nested instance paths compose ("h0.mlp")
   * whatever order the functions appear in. */
  for (IrFuncId f = 1; f < m->nfuncs; f++) {
    if (m->funcs[f].dead || was_callee[f]) continue;
    Inliner in = {.m = m, .d = d};
    strmap_init(&in.names);
    for (IrValueId v = 1; v < m->nvalues; v++)
      if (m->values[v].func == f && !m->values[v].dead) define(&in, v);
    bool changed = true;
    while (changed) {
      changed = false;
      IR_FOR_EACH_OP(m, f, op) {
        if (ir_op(m, op)->kind != OP_CALL) continue;
        in.map = xcalloc(m->nvalues, sizeof *in.map);
        bool ok = inline_call(&in, op);
        free(in.map);
        if (!ok) {
          strmap_free(&in.names);
          free(was_callee);
          return false;
        }
        changed = true;
        ctx->changed = true;
        break; /* the op list changed under us: rescan */
      }
    }
    strmap_free(&in.names);
  }
  for (IrFuncId f = 1; f < m->nfuncs; f++)
    if (was_callee[f] && !m->funcs[f].dead) pass_delete_func(m, f);
  free(was_callee);
  return true;
}
