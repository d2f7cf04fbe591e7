/*
 * The IR verifier: infers and checks every op's types (callees before
 * callers), and checks the structure passes must preserve: operands defined
 * before use in the same function, use lists matching operands, outputs
 * present. Run after building and, under --verify-each, after every pass.
 */
#include <stdlib.h>
#include <string.h>

#include "orion/ir.h"

typedef struct Verifier {
  IrModule *m;
  Diag *d;
  uint8_t *state; /* per function: 0 unvisited, 1 in progress, 2 done */
  uint32_t *height; /* per function: longest chain of calls below it */
  uint32_t *position; /* per value: 1 + index of the defining op in its function, 0 = not yet defined */
  /* One flag per operand slot and per output slot, set for each use that a
   * use list records: checking an operand is then O(1), not O(uses), so a
   * value used a million times does not make verification quadratic. */
  uint64_t *op_slots;   /* per op: index of its first operand slot */
  uint64_t *out_slots;  /* per function: index of its first output slot */
  uint8_t *recorded;
  bool ok;
} Verifier;

static uint64_t use_slot(Verifier *vf, IrValueId v, IrUse u) {
  return !ir_id_is_none(u.op) ? vf->op_slots[u.op.id] + u.index : vf->out_slots[ir_value(vf->m, v)->func] + u.index;
}

static bool has_use(Verifier *vf, IrValueId v, IrOpId op, uint32_t index) {
  return vf->recorded[use_slot(vf, v, (IrUse){.op = op, .index = index})];
}

static void verify_func(Verifier *vf, IrFuncId f);

/* Operands must be live values of this function defined earlier. */
static bool check_operands(Verifier *vf, IrFuncId f, IrOpId id) {
  IrModule *m = vf->m;
  IrOp *op = ir_op(m, id);
  for (uint32_t i = 0; i < op->ninputs; i++) {
    IrValueId v = op->inputs[i];
    IrValue *val = ir_value(m, v);
    if (ir_id_is_none(v) || val->dead || val->func != f) {
      diag_error(vf->d, op->loc, "verifier: operand %u of '%s' is %s", i + 1, ir_op_info(op->kind)->name,
                 ir_id_is_none(v) ? "missing" : val->dead ? "a deleted value" : "a value of another function");
      return false;
    }
    if (val->kind == VK_RESULT && !vf->position[v.id]) {
      diag_error(vf->d, op->loc, "verifier: operand '%s' of '%s' is used before it is defined", val->name,
                 ir_op_info(op->kind)->name);
      return false;
    }
    if (!has_use(vf, v, id, i)) {
      diag_error(vf->d, op->loc, "verifier: the use list of '%s' lacks operand %u of '%s'", val->name, i + 1,
                 ir_op_info(op->kind)->name);
      return false;
    }
  }
  return true;
}

/* Callees are verified before their callers, so calls see their output types;
 * the call height is computed on the way back, whatever the file order. */
static void verify_func(Verifier *vf, IrFuncId f) {
  IrModule *m = vf->m;
  if (vf->state[f] == 2) return;
  vf->state[f] = 1;
  IR_FOR_EACH_OP(m, f, op) {
    IrOp *o = ir_op(m, op);
    if (o->kind != OP_CALL) continue;
    if (vf->state[o->callee] == 1) {
      diag_error(vf->d, o->loc, "recursive call of '%s'; recursion cannot be inlined", ir_func(m, o->callee)->name);
      vf->ok = false;
      continue;
    }
    verify_func(vf, o->callee);
    uint32_t h = vf->height[o->callee] + 1;
    if (h > IR_MAX_CALL_DEPTH && vf->height[o->callee] <= IR_MAX_CALL_DEPTH) {
      diag_error(vf->d, o->loc, "calls nested too deeply (limit is %d)", IR_MAX_CALL_DEPTH);
      vf->ok = false;
    }
    if (h > vf->height[f]) vf->height[f] = h;
  }
  IR_FOR_EACH_OP(m, f, op) {
    if (diag_should_stop(vf->d)) break;
    IrOp *o = ir_op(m, op);
    if (o->dead || o->func != f) {
      diag_error(vf->d, o->loc, "verifier: a deleted op is still linked into '%s'", ir_func(m, f)->name);
      vf->ok = false;
      break;
    }
    if (!check_operands(vf, f, op) || !ir_infer_op(m, op, vf->d)) vf->ok = false;
    for (uint32_t i = 0; i < o->nresults; i++) vf->position[ir_op(m, op)->results[i].id] = 1;
  }
  IrFunc *fn = ir_func(m, f);
  if (!fn->has_return && fn->noutputs == 0) {
    diag_error(vf->d, fn->loc, "function '%s' has no outputs", fn->name);
    vf->ok = false;
  }
  for (uint32_t i = 0; i < fn->noutputs && vf->ok; i++) {
    IrOutput *out = &fn->outputs[i];
    IrValueId v = out->value;
    if (ir_id_is_none(v) || ir_value(m, v)->dead || ir_value(m, v)->func != f || !has_use(vf, v, IR_NO_OP, i)) {
      diag_error(vf->d, out->loc, "verifier: output '%s' of '%s' does not name a live value with a use", out->name,
                 fn->name);
      vf->ok = false;
      continue;
    }
    const IrType *t = &ir_value(m, v)->type;
    if (out->type.dtype == DT_INVALID) {
      out->type = *t;
    } else if (!ir_type_equal(&out->type, t)) {
      StrBuf was, now;
      sb_init(&was);
      sb_init(&now);
      ir_type_print(&was, &out->type);
      ir_type_print(&now, t);
      diag_error(vf->d, out->loc, "verifier: output '%s' of '%s' changed type from %s to %s", out->name, fn->name,
                 was.data, now.data);
      sb_free(&was);
      sb_free(&now);
      vf->ok = false;
    }
  }
  vf->state[f] = 2;
}

bool ir_verify(IrModule *m, Diag *d) {
  Verifier vf = {.m = m, .d = d, .ok = true};
  vf.state = xcalloc(m->nfuncs, 1);
  vf.height = xcalloc(m->nfuncs, sizeof *vf.height);
  vf.position = xcalloc(m->nvalues, sizeof *vf.position);
  vf.op_slots = xcalloc(m->nops, sizeof *vf.op_slots);
  vf.out_slots = xcalloc(m->nfuncs, sizeof *vf.out_slots);
  uint64_t nslots = 0;
  for (IrOpId op = ir_op_id(1); op.id < m->nops; op.id++) vf.op_slots[op.id] = nslots, nslots += ir_op(m, op)->ninputs;
  for (IrFuncId f = 1; f < m->nfuncs; f++) vf.out_slots[f] = nslots, nslots += m->funcs[f].noutputs;
  vf.recorded = xcalloc(nslots, 1);
  /* Every use recorded must be an operand or output that names the value,
   * recorded once; the first bad one is reported. */
  for (uint32_t i = 1; i < m->nvalues; i++) {
    IrValueId v = ir_value_id(i);
    IrValue *val = ir_value(m, v);
    if (val->dead) continue;
    for (uint32_t k = 0; k < val->nuses; k++) {
      IrUse u = val->uses[k];
      bool good = !ir_id_is_none(u.op)
                      ? (!ir_op(m, u.op)->dead && u.index < ir_op(m, u.op)->ninputs &&
                         ir_id_eq(ir_op(m, u.op)->inputs[u.index], v))
                      : (u.index < ir_func(m, val->func)->noutputs &&
                         ir_id_eq(ir_func(m, val->func)->outputs[u.index].value, v));
      bool twice = good && vf.recorded[use_slot(&vf, v, u)];
      if (good && !twice) {
        vf.recorded[use_slot(&vf, v, u)] = 1;
      } else if (vf.ok) {
        diag_error(d, val->loc, "verifier: the use list of '%s' names a use %s", val->name,
                   twice ? "twice" : "that does not exist");
        vf.ok = false;
      }
    }
  }
  for (IrFuncId f = 1; f < m->nfuncs && !diag_should_stop(d); f++)
    if (!m->funcs[f].dead) verify_func(&vf, f);
  free(vf.state);
  free(vf.height);
  free(vf.position);
  free(vf.op_slots);
  free(vf.out_slots);
  free(vf.recorded);
  return vf.ok && !diag_should_stop(d);
}
