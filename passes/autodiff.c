/*
 * Reverse-mode differentiation: the sweep (see include/orion/autodiff.h and
 * docs/training.md). Activity analysis marks the values on a path from a
 * trainable param to `loss`; only those get adjoints. F is copied into F.fwd;
 * F.bwd is built by walking F's ops backwards and calling each active op's
 * gradient rule (passes/grad_rules*.c), which pulls the forward values it
 * reads into the backward on demand: params and consts are declared again,
 * F's inputs become backward inputs, op results become saved values (a
 * forward output feeding a backward input).
 */
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff_internal.h"
#include "pass_util.h"

/* A gather's adjoint handed out by rows: table param p, indexed by F input i. */
typedef struct RowAdjoint {
  IrValueId param, indices, adjoint;
} RowAdjoint;

struct AdCtx {
  IrModule *m;
  Diag *d;
  IrFuncId f, fwd, bwd;
  const char *fwd_name, *bwd_name;
  uint32_t nvalues; /* F's values all have ids below this */
  bool *active;     /* per F value */
  IrValueId *adj;    /* per F value: its adjoint in F.bwd */
  IrValueId *primal; /* per F value: the same value in F.bwd */
  IrValueId *fwd_of; /* per F value: its copy in F.fwd */
  IrValueId *saved;  /* F values saved, in order */
  uint32_t nsaved, cap_saved;
  AdBwdInput *inputs;
  uint32_t ninputs, cap_inputs;
  const bool *recompute; /* per F value: made again in the backward instead of saved (NULL: none) */
  IrOpId op; /* the forward op whose rule runs */
  const char *base; /* names of the values a rule makes */
  bool gather_rows;  /* AutodiffOptions.gather_rows */
  RowAdjoint *rows;  /* gathers whose adjoint goes out by rows */
  uint32_t nrows, cap_rows;
};

static const char *type_text(IrModule *m, const IrType *t) {
  StrBuf sb;
  sb_init(&sb);
  ir_type_print(&sb, t);
  const char *s = arena_strndup(&m->arena, sb.data, sb.len);
  sb_free(&sb);
  return s;
}

/* ---- what rules see ---- */

IrModule *ad_module(AdCtx *c) { return c->m; }
IrOpId ad_op(AdCtx *c) { return c->op; }
uint32_t ad_nin(AdCtx *c) { return ir_op(c->m, c->op)->ninputs; }
uint32_t ad_nres(AdCtx *c) { return ir_op(c->m, c->op)->nresults; }
IrValueId ad_in(AdCtx *c, uint32_t i) { return ir_op(c->m, c->op)->inputs[i]; }
IrType ad_in_type(AdCtx *c, uint32_t i) { return ir_value(c->m, ad_in(c, i))->type; }
IrType ad_res_type(AdCtx *c, uint32_t i) { return ir_value(c->m, ir_op(c->m, c->op)->results[i])->type; }
IrType ad_type(AdCtx *c, IrValueId v) { return ir_value(c->m, v)->type; }

bool ad_fail(AdCtx *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_vreport(c->d, DIAG_ERROR, ir_op(c->m, c->op)->loc, fmt, ap);
  va_end(ap);
  return false;
}

static void add_bwd_input(AdCtx *c, IrValueId fv, AdInputSource from, uint32_t index, const char *source,
                          const char *name) {
  IrValue *v = ir_value(c->m, fv);
  IrType t = v->type;
  IrValueId bv = ir_func_add_input(c->m, c->bwd, ir_unique_name(c->m, c->bwd, name), &t, v->loc);
  xgrow((void **)&c->inputs, sizeof *c->inputs, &c->cap_inputs, c->ninputs + 1);
  c->inputs[c->ninputs++] = (AdBwdInput){ir_value(c->m, bv)->name, from, index, source, t,
                                         ir_type_elements(&t) * ir_dtype_size(t.dtype)};
  c->primal[fv.id] = bv;
}

static IrValueId primal(AdCtx *c, IrValueId fv);

/* The op defining fv, again in the backward, on the backward's copies of its operands. */
static void recompute(AdCtx *c, IrValueId fv) {
  IrModule *m = c->m;
  IrOpId def = ir_value(m, fv)->def;
  uint32_t n = ir_op(m, def)->ninputs;
  IrValueId in[IR_MAX_OPERANDS];
  for (uint32_t i = 0; i < n; i++) in[i] = primal(c, ir_op(m, def)->inputs[i]);
  const char *name = ir_unique_name(m, c->bwd, ir_value(m, fv)->name);
  IrOp o = *ir_op(m, def);
  IrOpId op = ir_op_new(m, c->bwd, o.kind, in, n, 1, &name, o.loc);
  for (uint32_t i = 0; i < o.nattrs; i++) ir_op_set_attr(m, op, o.attrs[i].name, &o.attrs[i].val, o.attrs[i].loc);
  ir_infer_op(m, op, c->d);
  c->primal[fv.id] = ir_op(m, op)->results[0];
}

/* The forward value fv as the backward reads it. */
static IrValueId primal(AdCtx *c, IrValueId fv) {
  if (!ir_id_is_none(c->primal[fv.id])) return c->primal[fv.id];
  IrValue v = *ir_value(c->m, fv);
  switch (v.kind) {
  case VK_PARAM: {
    IrValueId p = ir_param_new(c->m, c->bwd, v.name, &v.type, &v.src, v.loc);
    ir_value(c->m, p)->frozen = v.frozen;
    c->primal[fv.id] = p;
    break;
  }
  case VK_CONST:
    c->primal[fv.id] = ir_const_new(c->m, c->bwd, ir_unique_name(c->m, c->bwd, v.name), &v.type, v.data, v.ndata, v.loc);
    break;
  case VK_INPUT: {
    IrFunc *f = ir_func(c->m, c->f);
    uint32_t i = 0;
    while (!ir_id_eq(f->inputs[i], fv)) i++;
    add_bwd_input(c, fv, AD_FROM_FWD_INPUT, i, v.name, v.name);
    break;
  }
  case VK_RESULT: {
    if (c->recompute && c->recompute[fv.id]) {
      recompute(c, fv);
      break;
    }
    xgrow((void **)&c->saved, sizeof *c->saved, &c->cap_saved, c->nsaved + 1);
    c->saved[c->nsaved++] = fv;
    const char *out = arena_printf(&c->m->arena, "saved.%s", v.name);
    add_bwd_input(c, fv, AD_FROM_FWD_OUTPUT, c->nsaved, out, v.name); /* output 0 is the loss */
    break;
  }
  }
  return c->primal[fv.id];
}

IrValueId ad_x(AdCtx *c, uint32_t i) { return primal(c, ad_in(c, i)); }
IrValueId ad_y(AdCtx *c, uint32_t i) { return primal(c, ir_op(c->m, c->op)->results[i]); }
bool ad_needs(AdCtx *c, uint32_t i) { return c->active[ad_in(c, i).id]; }
bool ad_has_gy(AdCtx *c, uint32_t i) { return !ir_id_is_none(c->adj[ir_op(c->m, c->op)->results[i].id]); }

IrValueId ad_gy(AdCtx *c, uint32_t i) {
  IrValueId r = ir_op(c->m, c->op)->results[i];
  if (!ir_id_is_none(c->adj[r.id])) return c->adj[r.id];
  IrType t = ir_value(c->m, r)->type;
  return ad_zeros(c, &t);
}

static void accumulate(AdCtx *c, IrValueId fv, IrValueId g) {
  if (ir_id_is_none(c->adj[fv.id])) c->adj[fv.id] = g;
  else c->adj[fv.id] = ad_op2(c, OP_ADD, c->adj[fv.id], g); /* fan-out: the adjoints of every use add up */
}

void ad_give(AdCtx *c, uint32_t i, IrValueId g) {
  IrValueId fv = ad_in(c, i);
  if (!c->active[fv.id]) return;
  IrType want = ir_value(c->m, fv)->type, got = ad_type(c, g);
  if (!ir_type_equal(&want, &got)) {
    /* a rule's bug, not the user's: say so plainly */
    diag_error(c->d, ir_op(c->m, c->op)->loc, "internal compiler error: the '%s' gradient rule gave operand %u %s, expected %s",
               ir_op_info(ir_op(c->m, c->op)->kind)->name, i + 1, type_text(c->m, &got), type_text(c->m, &want));
    return;
  }
  accumulate(c, fv, g);
}

/* The current op is a gather along axis 0 of a trainable param by an input
 * of F, and the caller asked for such gradients by rows. */
bool ad_gather_by_rows(AdCtx *c) {
  IrModule *m = c->m;
  IrOp *o = ir_op(m, c->op);
  if (!c->gather_rows || o->kind != OP_GATHER) return false;
  IrValue *table = ir_value(m, o->inputs[0]), *idx = ir_value(m, o->inputs[1]);
  int64_t axis = ir_attr_int(m, c->op, "axis", 0);
  if (axis < 0) axis += table->type.rank;
  return axis == 0 && table->kind == VK_PARAM && c->active[o->inputs[0].id] && idx->kind == VK_INPUT;
}

void ad_give_rows(AdCtx *c, IrValueId g) {
  IrOp *o = ir_op(c->m, c->op);
  xgrow((void **)&c->rows, sizeof *c->rows, &c->cap_rows, c->nrows + 1);
  c->rows[c->nrows++] = (RowAdjoint){o->inputs[0], o->inputs[1], g};
}

/* ---- builders ---- */

IrOpId ad_begin(AdCtx *c, IrOpKind k, const IrValueId *in, uint32_t n, uint32_t nres) {
  const char *names[IR_MAX_OPERANDS];
  for (uint32_t i = 0; i < nres; i++) names[i] = ir_unique_name(c->m, c->bwd, c->base);
  return ir_op_new(c->m, c->bwd, k, in, n, nres, names, ir_op(c->m, c->op)->loc);
}

IrValueId ad_end(AdCtx *c, IrOpId op) {
  ir_infer_op(c->m, op, c->d); /* a failure is a rule's bug; it is reported and the verifier stops later */
  return ir_op(c->m, op)->results[0];
}

IrValueId ad_const(AdCtx *c, const IrType *t, const double *data, uint64_t n) {
  return ir_const_new(c->m, c->bwd, ir_unique_name(c->m, c->bwd, c->base), t, data, n, ir_op(c->m, c->op)->loc);
}

/* ---- the sweep ---- */

bool ad_param_trainable(const AutodiffOptions *o, const IrValue *p) {
  if (p->kind != VK_PARAM || p->frozen || !ir_dtype_is_float(p->type.dtype)) return false;
  if (!o) return true;
  if (o->wrt_lora_inputs) return false; /* LoRA training: the base weights stay as they are */
  bool listed = o->ntrainable == 0;
  for (uint32_t i = 0; i < o->ntrainable && !listed; i++) listed = fnmatch(o->trainable[i], p->name, 0) == 0;
  for (uint32_t i = 0; i < o->nfrozen && listed; i++) listed = fnmatch(o->frozen[i], p->name, 0) != 0;
  return listed;
}

static bool find_loss(IrModule *m, IrFuncId f, Diag *d, IrValueId *loss, SrcSpan *at) {
  IrFunc *fn = ir_func(m, f);
  for (uint32_t i = 0; i < fn->noutputs; i++) {
    if (strcmp(fn->outputs[i].name, "loss") != 0) continue;
    IrType t = ir_value(m, fn->outputs[i].value)->type;
    if (t.rank != 0 || t.dtype != DT_FP32) {
      diag_error(d, fn->outputs[i].loc, "output 'loss' of '%s' is %s, but training needs a scalar fp32 loss (fp32[])",
                 fn->name, type_text(m, &t));
      return false;
    }
    *loss = fn->outputs[i].value;
    *at = fn->outputs[i].loc;
    return true;
  }
  diag_error(d, fn->has_return ? fn->return_loc : fn->loc,
             "function '%s' has no output named 'loss' (training differentiates a scalar fp32 output 'loss')", fn->name);
  return false;
}

bool ad_is_lora_input(const IrValue *v) {
  size_t n = strlen(v->name);
  return v->kind == VK_INPUT && ir_dtype_is_float(v->type.dtype) && n > 7 &&
         (!strcmp(v->name + n - 7, ".lora_A") || !strcmp(v->name + n - 7, ".lora_B"));
}

/* Is input v of F one the gradients are taken with respect to? */
static bool input_trains(const AutodiffOptions *o, const IrValue *v) {
  return o && o->wrt_lora_inputs && ad_is_lora_input(v);
}

/* active = reached from a trainable param (or adapter input) and reaching the loss. */
static bool analyse(AdCtx *c, const AutodiffOptions *o, IrValueId loss, SrcSpan loss_loc) {
  IrModule *m = c->m;
  IrFunc *fn = ir_func(m, c->f);
  bool *varying = xcalloc(c->nvalues, sizeof *varying);
  bool *useful = xcalloc(c->nvalues, sizeof *useful);
  uint32_t ntrain = 0;
  for (uint32_t i = 0; i < fn->ndecls; i++)
    if (ad_param_trainable(o, ir_value(m, fn->decls[i]))) varying[fn->decls[i].id] = true, ntrain++;
  for (uint32_t i = 0; i < fn->ninputs; i++)
    if (input_trains(o, ir_value(m, fn->inputs[i]))) varying[fn->inputs[i].id] = true, ntrain++;
  IR_FOR_EACH_OP(m, c->f, op) {
    IrOp *p = ir_op(m, op);
    bool any = false;
    for (uint32_t i = 0; i < p->ninputs; i++) any = any || varying[p->inputs[i].id];
    for (uint32_t i = 0; i < p->nresults; i++) varying[p->results[i].id] = any;
  }
  useful[loss.id] = true;
  for (IrOpId op = fn->last; !ir_id_is_none(op); op = ir_op(m, op)->prev) {
    IrOp *p = ir_op(m, op);
    bool any = false;
    for (uint32_t i = 0; i < p->nresults; i++) any = any || useful[p->results[i].id];
    if (any)
      for (uint32_t i = 0; i < p->ninputs; i++) useful[p->inputs[i].id] = true;
  }
  for (uint32_t v = 1; v < c->nvalues; v++) c->active[v] = varying[v] && useful[v];
  free(varying);
  free(useful);
  if (ntrain == 0 && o && o->wrt_lora_inputs) {
    diag_error(c->d, fn->loc, "function '%s' has no LoRA adapter input to train (inputs '*.lora_A' / '*.lora_B', "
               "which orionc --lora=PATTERN:RANK makes)", fn->name);
    return false;
  }
  if (ntrain == 0) {
    diag_error(c->d, fn->loc, "function '%s' has no trainable param (every param is frozen, not float, or excluded by "
               "--trainable/--frozen)", fn->name);
    return false;
  }
  if (!c->active[loss.id]) {
    diag_error(c->d, loss_loc, "'loss' of '%s' does not depend on any trainable %s", fn->name,
               o && o->wrt_lora_inputs ? "adapter input" : "param");
    return false;
  }
  /* In program order, the first op that cannot carry a gradient to the loss. */
  IR_FOR_EACH_OP(m, c->f, op) {
    IrOp *p = ir_op(m, op);
    for (uint32_t i = 0; i < p->nresults; i++) {
      IrValue *r = ir_value(m, p->results[i]);
      if (!c->active[p->results[i].id]) continue;
      c->op = op;
      const GradRule *rule = grad_rule(p->kind);
      if (p->kind == OP_CALL)
        return ad_fail(c, "'call' of '%s' is on a path to 'loss': differentiate the inlined module",
                       ir_func(m, p->callee)->name);
      if (!rule->fn || !ir_dtype_is_float(r->type.dtype)) {
        const char *what = p->kind == OP_CAST ? arena_printf(&m->arena, "'cast' to %s", ir_dtype_name(r->type.dtype))
                                              : arena_printf(&m->arena, "'%s' on %s", ir_op_info(p->kind)->name,
                                                             ir_dtype_name(r->type.dtype));
        return ad_fail(c, "%s is not differentiable, but its result '%s' is on a path from a trainable param to 'loss'",
                       what, r->name);
      }
    }
  }
  return true;
}

/* F.fwd: a copy of F (names kept) whose outputs are set after the sweep. */
static void copy_forward(AdCtx *c) {
  IrModule *m = c->m;
  IrFunc fn = *ir_func(m, c->f);
  for (uint32_t i = 0; i < fn.ninputs; i++) {
    IrValue v = *ir_value(m, ir_func(m, c->f)->inputs[i]);
    c->fwd_of[ir_func(m, c->f)->inputs[i].id] = ir_func_add_input(m, c->fwd, v.name, &v.type, v.loc);
  }
  for (uint32_t i = 0; i < fn.ndecls; i++) {
    IrValueId id = ir_func(m, c->f)->decls[i];
    IrValue v = *ir_value(m, id);
    IrValueId nv = v.kind == VK_PARAM ? ir_param_new(m, c->fwd, v.name, &v.type, &v.src, v.loc)
                                      : ir_const_new(m, c->fwd, v.name, &v.type, v.data, v.ndata, v.loc);
    ir_value(m, nv)->frozen = v.frozen;
    c->fwd_of[id.id] = nv;
  }
  IR_FOR_EACH_OP(m, c->f, op) {
    IrOp o = *ir_op(m, op);
    IrValueId in[IR_MAX_OPERANDS];
    const char *names[IR_MAX_OPERANDS];
    for (uint32_t i = 0; i < o.ninputs; i++) in[i] = c->fwd_of[o.inputs[i].id];
    for (uint32_t i = 0; i < o.nresults; i++) names[i] = ir_value(m, o.results[i])->name;
    IrOpId n = ir_op_new(m, c->fwd, o.kind, in, o.ninputs, o.nresults, names, o.loc);
    for (uint32_t i = 0; i < o.nattrs; i++) ir_op_set_attr(m, n, o.attrs[i].name, &o.attrs[i].val, o.attrs[i].loc);
    for (uint32_t i = 0; i < o.nresults; i++) c->fwd_of[o.results[i].id] = ir_op(m, n)->results[i];
  }
}

/* Ops whose results nothing uses, last first, then unused decls. */
static void erase_dead(IrModule *m, IrFuncId f) {
  for (IrOpId op = ir_func(m, f)->last; !ir_id_is_none(op);) {
    IrOpId prev = ir_op(m, op)->prev;
    bool used = false;
    for (uint32_t i = 0; i < ir_op(m, op)->nresults; i++) used = used || ir_value(m, ir_op(m, op)->results[i])->nuses;
    if (!used) ir_op_erase(m, op);
    op = prev;
  }
  ir_erase_unused_decls(m, f);
}

static bool sweep(AdCtx *c, IrValueId loss) {
  IrModule *m = c->m;
  IrValueId scale = IR_NO_VALUE;
  {
    IrType t = {.dtype = DT_FP32, .rank = 0};
    scale = ir_func_add_input(m, c->bwd, "loss_scale", &t, ir_func(m, c->f)->loc);
    xgrow((void **)&c->inputs, sizeof *c->inputs, &c->cap_inputs, c->ninputs + 1);
    c->inputs[c->ninputs++] = (AdBwdInput){"loss_scale", AD_FROM_LOSS_SCALE, 0, "", t, 4};
  }
  c->adj[loss.id] = scale; /* the seed: the gradients come out multiplied by the loss scale */
  for (IrOpId op = ir_func(m, c->f)->last; !ir_id_is_none(op); op = ir_op(m, op)->prev) {
    IrOp *p = ir_op(m, op);
    bool any = false;
    for (uint32_t i = 0; i < p->nresults; i++) any = any || (c->active[p->results[i].id] && !ir_id_is_none(c->adj[p->results[i].id]));
    if (!any) continue;
    c->op = op;
    c->base = arena_printf(&m->arena, "d.%s", ir_value(m, p->results[0])->name);
    uint32_t before = c->d->nerrors;
    if (!grad_rule(p->kind)->fn(c) || c->d->nerrors != before) return false; /* a rule's bug reported by a builder */
  }
  return true;
}

static void finish(AdCtx *c, IrValueId loss, const AutodiffOptions *o, AdContract *out) {
  IrModule *m = c->m;
  IrFunc *fn = ir_func(m, c->f);
  uint32_t ndecls = fn->ndecls;
  uint32_t nin = fn->ninputs;
  AdGradOutput *grads = arena_alloc(&m->arena, sizeof *grads * (ndecls + nin ? ndecls + nin : 1));
  uint32_t ngrads = 0;
  for (uint32_t i = 0; i < ndecls; i++) {
    IrValueId p = ir_func(m, c->f)->decls[i];
    if (!ad_param_trainable(o, ir_value(m, p))) continue;
    IrType t = ir_value(m, p)->type;
    const char *pname = ir_value(m, p)->name;
    c->base = arena_printf(&m->arena, "grad.%s", pname);
    IrValueId g = c->adj[p.id];
    t.dtype = DT_FP32;
    bool by_rows = false;
    for (uint32_t k = 0; k < c->nrows && !by_rows; k++) by_rows = ir_id_eq(c->rows[k].param, p);
    /* Read only by gathers whose adjoints go out by rows (an untied
     * embedding): its gradient is those rows alone, no [rows, dim] zeros. */
    if (ir_id_is_none(g) && by_rows) continue;
    if (ir_id_is_none(g)) g = ad_zeros(c, &t); /* a trainable param the loss does not read */
    else if (ad_type(c, g).dtype != DT_FP32) g = ad_cast(c, g, DT_FP32);
    const char *name = arena_printf(&m->arena, "grad.%s", pname);
    ir_func_add_output(m, c->bwd, name, g, ir_value(m, p)->loc);
    grads[ngrads++] = (AdGradOutput){name, pname, t, false};
  }
  for (uint32_t i = 0; i < nin; i++) {
    IrValueId v = ir_func(m, c->f)->inputs[i];
    if (!input_trains(o, ir_value(m, v))) continue;
    IrType t = ir_value(m, v)->type;
    const char *vname = ir_value(m, v)->name;
    c->base = arena_printf(&m->arena, "grad.%s", vname);
    IrValueId g = c->adj[v.id];
    t.dtype = DT_FP32;
    if (ir_id_is_none(g)) g = ad_zeros(c, &t); /* an adapter the loss does not read */
    else if (ad_type(c, g).dtype != DT_FP32) g = ad_cast(c, g, DT_FP32);
    const char *name = arena_printf(&m->arena, "grad.%s", vname);
    ir_func_add_output(m, c->bwd, name, g, ir_value(m, v)->loc);
    grads[ngrads++] = (AdGradOutput){name, vname, t, true};
  }
  AdRowGradOutput *rows = arena_alloc(&m->arena, sizeof *rows * (c->nrows ? c->nrows : 1));
  for (uint32_t i = 0; i < c->nrows; i++) {
    const RowAdjoint *r = &c->rows[i];
    const char *pname = ir_value(m, r->param)->name;
    uint32_t earlier = 0;
    for (uint32_t k = 0; k < i; k++) earlier += ir_id_eq(c->rows[k].param, r->param);
    const char *name = earlier ? arena_printf(&m->arena, "rows.%s.%u", pname, earlier) : arena_printf(&m->arena, "rows.%s", pname);
    c->base = name;
    IrValueId g = r->adjoint;
    if (ad_type(c, g).dtype != DT_FP32) g = ad_cast(c, g, DT_FP32);
    ir_func_add_output(m, c->bwd, name, g, ir_value(m, r->param)->loc);
    uint32_t index = 0;
    while (!ir_id_eq(ir_func(m, c->f)->inputs[index], r->indices)) index++;
    rows[i] = (AdRowGradOutput){name, pname, ir_value(m, r->indices)->name, index, ad_type(c, g)};
  }
  ir_func_add_output(m, c->fwd, "loss", c->fwd_of[loss.id], ir_func(m, c->f)->return_loc);
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < c->nsaved; i++) {
    IrValue *v = ir_value(m, c->saved[i]);
    bytes += ir_type_elements(&v->type) * ir_dtype_size(v->type.dtype);
    ir_func_add_output(m, c->fwd, arena_printf(&m->arena, "saved.%s", v->name), c->fwd_of[c->saved[i].id], v->loc);
  }
  erase_dead(m, c->fwd);
  erase_dead(m, c->bwd);
  AdBwdInput *inputs = arena_memdup(&m->arena, c->inputs, sizeof *c->inputs * c->ninputs);
  *out = (AdContract){.fwd = c->fwd, .bwd = c->bwd, .inputs = inputs, .ninputs = c->ninputs, .grads = grads,
                      .ngrads = ngrads, .rows = rows, .nrows = c->nrows, .nsaved = c->nsaved, .saved_bytes = bytes};
}

/* Ops whose result is as cheap to make again as to keep: element-wise, one result. */
static bool cheap(IrOpKind k) {
  switch (k) {
  case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: case OP_POW: case OP_MAXIMUM: case OP_MINIMUM:
  case OP_RELU: case OP_TANH: case OP_SIGMOID: case OP_SILU: case OP_GELU: case OP_EXP: case OP_LOG:
  case OP_SQRT: case OP_RSQRT: case OP_NEG: case OP_ABS: case OP_CLIP: case OP_CAST: case OP_IDENTITY:
  case OP_RESHAPE:
    return true;
  default: return false;
  }
}

/* Values the backward can make again by cheap ops from what it has anyway
 * (params, consts, inputs, the values it saves), so that saving them is not
 * needed: making them again only drops saved bytes, never adds any. Marked in
 * program order, so a chain of cheap ops (exp(w * w)) goes back to its start. */
static bool *plan_recompute(AdCtx *c) {
  IrModule *m = c->m;
  bool *saved = xcalloc(c->nvalues, sizeof *saved), *again = xcalloc(c->nvalues, sizeof *again);
  for (uint32_t i = 0; i < c->nsaved; i++) saved[c->saved[i].id] = true;
  IR_FOR_EACH_OP(m, c->f, op) {
    IrOp *o = ir_op(m, op);
    bool ok = cheap(o->kind);
    for (uint32_t j = 0; j < o->ninputs && ok; j++) {
      IrValueId u = o->inputs[j];
      ok = ir_value(m, u)->kind != VK_RESULT || saved[u.id] || again[u.id];
    }
    if (ok) again[o->results[0].id] = true;
  }
  free(saved);
  return again;
}

/* F.fwd and F.bwd, from scratch. */
static bool build(AdCtx *c, IrValueId loss) {
  IrModule *m = c->m;
  IrFuncId f = c->f;
  SrcSpan loc = ir_func(m, f)->loc;
  memset(c->adj, 0, sizeof *c->adj * c->nvalues);
  memset(c->primal, 0, sizeof *c->primal * c->nvalues);
  memset(c->fwd_of, 0, sizeof *c->fwd_of * c->nvalues);
  c->nsaved = c->ninputs = c->nrows = 0;
  c->fwd = ir_func_new(m, c->fwd_name, loc);
  c->bwd = ir_func_new(m, c->bwd_name, loc);
  copy_forward(c);
  /* F's params first, under their own names: the backward shares them */
  for (uint32_t i = 0; i < ir_func(m, f)->ndecls; i++)
    if (ir_value(m, ir_func(m, f)->decls[i])->kind == VK_PARAM) primal(c, ir_func(m, f)->decls[i]);
  return sweep(c, loss);
}

bool ad_differentiate(IrModule *m, IrFuncId f, const AutodiffOptions *o, Diag *d, AdContract *out) {
  memset(out, 0, sizeof *out);
  IrValueId loss = IR_NO_VALUE;
  SrcSpan loss_loc;
  if (!find_loss(m, f, d, &loss, &loss_loc)) return false;
  const char *name = ir_func(m, f)->name;
  const char *fwd_name = arena_printf(&m->arena, "%s.fwd", name), *bwd_name = arena_printf(&m->arena, "%s.bwd", name);
  if (ir_func_lookup(m, fwd_name) || ir_func_lookup(m, bwd_name)) {
    diag_error(d, ir_func(m, f)->loc, "cannot differentiate '%s': the module already has a function '%s' or '%s'", name,
               fwd_name, bwd_name);
    return false;
  }
  AdCtx c = {.m = m, .d = d, .f = f, .nvalues = m->nvalues, .fwd_name = fwd_name, .bwd_name = bwd_name,
             .gather_rows = o && o->gather_rows};
  c.active = xcalloc(c.nvalues, sizeof *c.active);
  c.adj = xcalloc(c.nvalues, sizeof *c.adj);
  c.primal = xcalloc(c.nvalues, sizeof *c.primal);
  c.fwd_of = xcalloc(c.nvalues, sizeof *c.fwd_of);
  bool *again = NULL;
  bool ok = analyse(&c, o, loss, loss_loc) && build(&c, loss);
  if (ok && !(o && o->save_elementwise)) {
    /* a first sweep tells what would be saved; the second makes the cheap ones again instead */
    again = plan_recompute(&c);
    pass_delete_func(m, c.fwd);
    pass_delete_func(m, c.bwd);
    c.recompute = again;
    ok = build(&c, loss);
  }
  if (ok) {
    finish(&c, loss, o, out);
    ok = ir_verify(m, d);
  }
  free(again);
  free(c.active);
  free(c.adj);
  free(c.primal);
  free(c.fwd_of);
  free(c.saved);
  free(c.inputs);
  free(c.rows);
  return ok;
}
