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
  /* Callee value -> caller value. Every entry a call reads is written by that
   * call first, so the map is reused without clearing: a call costs what it
   * copies, not the size of the module. */
  IrValueId *map;
  uint32_t cap_map;
} Inliner;

static const char *prefixed(Inliner *in, IrOpId call, const char *inst, const char *name, SrcSpan loc) {
  const char *full = arena_printf(&in->m->arena, "%s.%s", inst, name);
  if (strlen(full) > IR_MAX_NAME) {
    diag_error(in->d, ir_op(in->m, call)->loc, "inlining as '%s' makes the name '%s' longer than %d characters", inst,
               full, IR_MAX_NAME);
    return NULL;
  }
  if (!ir_id_is_none(ir_func_find_value(in->m, ir_op(in->m, call)->func, full))) {
    diag_error(in->d, ir_op(in->m, call)->loc, "inlining '%s' as '%s' would define '%s', which '%s' already defines",
               ir_func(in->m, ir_op(in->m, call)->callee)->name, inst, full,
               ir_func(in->m, ir_op(in->m, call)->func)->name);
    diag_note(in->d, loc, "'%s' comes from this definition", name);
    return NULL;
  }
  return full;
}

static bool inline_call(Inliner *in, IrOpId call) {
  IrModule *m = in->m;
  IrFuncId caller = ir_op(m, call)->func, callee = ir_op(m, call)->callee;
  const char *inst = ir_op(m, call)->instance;
  xgrow((void **)&in->map, sizeof *in->map, &in->cap_map, m->nvalues);
  for (uint32_t i = 0; i < ir_func(m, callee)->ninputs; i++)
    in->map[ir_func(m, callee)->inputs[i].id] = ir_op(m, call)->inputs[i];
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
      ir_value(m, nv)->frozen = sv.frozen;
    } else {
      nv = ir_const_new(m, caller, name, &sv.type, sv.data, sv.ndata, sv.loc);
    }
    in->map[src.id] = nv;
  }
  IR_FOR_EACH_OP(m, callee, op) {
    IrOp so = *ir_op(m, op);
    IrValueId inputs[IR_MAX_OPERANDS]; /* every op is within the limit (ir_op_new) */
    const char *names[IR_MAX_OPERANDS];
    for (uint32_t i = 0; i < so.ninputs; i++) inputs[i] = in->map[so.inputs[i].id];
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
      in->map[so.results[i].id] = r;
    }
  }
  for (uint32_t i = 0; i < ir_op(m, call)->nresults; i++)
    ir_replace_all_uses(m, ir_op(m, call)->results[i], in->map[ir_func(m, callee)->outputs[i].value.id]);
  ir_op_erase(m, call);
  ir_func(m, callee)->ncallers--;
  return true;
}

/* A function's size with its calls expanded, saturating just past the limits. */
typedef struct Expanded {
  uint64_t ops, decls;
} Expanded;

static Expanded expanded_size(IrModule *m, IrFuncId f, Expanded *memo, uint8_t *state) {
  if (state[f] == 2) return memo[f];
  Expanded e = {0, ir_func(m, f)->ndecls};
  if (state[f] == 1) return e; /* recursion: the verifier reports it */
  state[f] = 1;
  IR_FOR_EACH_OP(m, f, op) {
    if (ir_op(m, op)->kind != OP_CALL) {
      e.ops++;
      continue;
    }
    Expanded c = expanded_size(m, ir_op(m, op)->callee, memo, state);
    e.ops += c.ops;
    e.decls += c.decls;
    if (e.ops > IR_MAX_OPS_PER_FUNC) e.ops = IR_MAX_OPS_PER_FUNC + 1ull;
    if (e.decls > IR_MAX_DECLS_PER_FUNC) e.decls = IR_MAX_DECLS_PER_FUNC + 1ull;
  }
  state[f] = 2;
  return memo[f] = e;
}

/* Checks an entry's expanded size before anything is copied: calls nest 32
 * deep, so a few lines can ask for 2^32 ops, and that must be a prompt error,
 * not gigabytes of copies first. Reports at the call that crosses a limit. */
static bool check_expanded_size(IrModule *m, Diag *d, IrFuncId f, Expanded *memo, uint8_t *state) {
  Expanded e = {0, ir_func(m, f)->ndecls};
  IR_FOR_EACH_OP(m, f, op) {
    IrOp *o = ir_op(m, op);
    if (o->kind != OP_CALL) {
      e.ops++;
      continue;
    }
    Expanded c = expanded_size(m, o->callee, memo, state);
    e.ops += c.ops;
    e.decls += c.decls;
    if (e.ops > IR_MAX_OPS_PER_FUNC) {
      diag_error(d, o->loc, "inlining '%s' makes '%s' larger than %u ops", ir_func(m, o->callee)->name,
                 ir_func(m, f)->name, IR_MAX_OPS_PER_FUNC);
      return false;
    }
    if (e.decls > IR_MAX_DECLS_PER_FUNC) {
      diag_error(d, o->loc, "inlining '%s' gives '%s' more than %u params and consts", ir_func(m, o->callee)->name,
                 ir_func(m, f)->name, IR_MAX_DECLS_PER_FUNC);
      return false;
    }
  }
  return true;
}

bool pass_inline(IrModule *m, PassCtx *ctx) {
  Diag *d = ctx->d;
  bool *was_callee = xcalloc(m->nfuncs, sizeof *was_callee);
  for (IrFuncId f = 1; f < m->nfuncs; f++) was_callee[f] = m->funcs[f].ncallers > 0;
  /* Only entry functions are expanded: a callee's own calls are expanded as
   * copies inside its callers, so nested instance paths compose ("h0.mlp")
   * whatever order the functions appear in. */
  Expanded *memo = xcalloc(m->nfuncs, sizeof *memo);
  uint8_t *state = xcalloc(m->nfuncs, 1);
  bool fits = true;
  for (IrFuncId f = 1; f < m->nfuncs; f++)
    if (!m->funcs[f].dead && !was_callee[f]) fits = check_expanded_size(m, d, f, memo, state) && fits;
  free(memo);
  free(state);
  if (!fits) {
    free(was_callee);
    return false;
  }
  Inliner in = {.m = m, .d = d};
  for (IrFuncId f = 1; f < m->nfuncs; f++) {
    if (m->funcs[f].dead || was_callee[f]) continue;
    /* One walk in program order. A call's copy goes in its place, so the walk
     * goes on at the copy's first op and expands nested calls as it meets
     * them: each op is visited once, however deep and wide the calls. */
    for (IrOpId op = ir_func(m, f)->first; !ir_id_is_none(op);) {
      if (ir_op(m, op)->kind != OP_CALL) {
        op = ir_op(m, op)->next;
        continue;
      }
      IrOpId before = ir_op(m, op)->prev;
      if (!inline_call(&in, op)) {
        free(in.map);
        free(was_callee);
        return false;
      }
      ctx->changed = true;
      op = !ir_id_is_none(before) ? ir_op(m, before)->next : ir_func(m, f)->first;
    }
  }
  free(in.map);
  for (IrFuncId f = 1; f < m->nfuncs; f++)
    if (was_callee[f] && !m->funcs[f].dead) pass_delete_func(m, f);
  free(was_callee);
  return true;
}
