/*
 * orionc --train: the compiler's differentiation (ad_differentiate) turned
 * into a training package. The entry function is differentiated, only its
 * forward and backward stay in the module (they share the params, so the
 * package's one weight file serves both), and the AD contract becomes the
 * manifest's training contract (PkgTraining). docs/training.md, "orionc --train".
 */
#define _XOPEN_SOURCE 700 /* fnmatch */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "compile_internal.h"

static bool has_loss_output(const IrFunc *fn) {
  for (uint32_t i = 0; i < fn->noutputs; i++)
    if (!strcmp(fn->outputs[i].name, "loss")) return true;
  return false;
}

/* The function named by --train=FUNC, or else the one entry with an output
 * `loss`; a module with a single entry gives that one (ad_differentiate
 * then says what its outputs lack). 0 after reporting why not. */
static IrFuncId choose_entry(IrModule *m, const char *name, Diag *d) {
  if (name) {
    IrFuncId f = ir_func_lookup(m, name);
    if (!f || ir_func(m, f)->dead) {
      diag_error(d, (SrcSpan){0}, "--train=%s: the module has no function '%s' to differentiate", name, name);
      return 0;
    }
    return f;
  }
  IrFuncId found = 0, only = 0;
  uint32_t nfound = 0, nentries = 0;
  StrBuf names;
  sb_init(&names);
  for (IrFuncId f = 1; f < m->nfuncs; f++) {
    IrFunc *fn = ir_func(m, f);
    if (fn->dead) continue;
    nentries++;
    only = f;
    if (!has_loss_output(fn)) continue;
    sb_printf(&names, "%s'%s'", nfound ? ", " : "", fn->name);
    found = f;
    nfound++;
  }
  IrFuncId f = nfound == 1 ? found : nfound == 0 && nentries == 1 ? only : 0;
  if (nfound > 1)
    diag_error(d, (SrcSpan){0}, "several functions have an output 'loss' (%s): choose one with --train=FUNC",
               names.data);
  else if (!f)
    diag_error(d, (SrcSpan){0},
               "no function has an output named 'loss' (training differentiates a scalar fp32 output 'loss')");
  sb_free(&names);
  return f;
}

/* A glob that matches no float param of f is a mistake (a misspelt
 * --frozen would silently train what it meant to freeze). */
static bool check_globs(IrModule *m, IrFuncId f, const char *const *globs, uint32_t n, const char *option, Diag *d) {
  IrFunc *fn = ir_func(m, f);
  bool ok = true;
  for (uint32_t g = 0; g < n; g++) {
    bool matched = false;
    for (uint32_t i = 0; i < fn->ndecls && !matched; i++) {
      IrValue *v = ir_value(m, fn->decls[i]);
      matched = v->kind == VK_PARAM && ir_dtype_is_float(v->type.dtype) && !fnmatch(globs[g], v->name, 0);
    }
    if (!matched) {
      diag_error(d, (SrcSpan){0}, "%s='%s' matches no float param of '%s'", option, globs[g], fn->name);
      ok = false;
    }
  }
  return ok;
}

/* The values `tokens` may pass through on its way to a gather's indices. */
static bool is_index_view(IrOpKind k) {
  return k == OP_RESHAPE || k == OP_IDENTITY || k == OP_CAST;
}

/* The rows of the table a gather indexes by v (or by a view of it); 0: none. */
static uint64_t rows_gathered_by(IrModule *m, IrValueId v, uint32_t depth) {
  IrValue *val = ir_value(m, v);
  for (uint32_t u = 0; u < val->nuses && depth < 8; u++) {
    const IrUse *use = &val->uses[u];
    if (ir_id_is_none(use->op)) continue;
    IrOp *op = ir_op(m, use->op);
    if (op->dead) continue;
    if (op->kind == OP_GATHER && use->index == 1) {
      const IrType *table = &ir_value(m, op->inputs[0])->type;
      int64_t axis = ir_attr_int(m, use->op, "axis", 0);
      if (axis < 0) axis += table->rank;
      if (axis >= 0 && (uint32_t)axis < table->rank && table->dims[axis] > 0) return (uint64_t)table->dims[axis];
    } else if (is_index_view(op->kind)) {
      uint64_t rows = rows_gathered_by(m, op->results[0], depth + 1);
      if (rows) return rows;
    }
  }
  return 0;
}

/* Vocabulary: the row count of the table `tokens` is gathered from. */
static bool find_vocabulary(IrModule *m, IrFuncId fwd, uint64_t *vocabulary, Diag *d) {
  *vocabulary = 0;
  IrFunc *fn = ir_func(m, fwd);
  for (uint32_t i = 0; i < fn->ninputs; i++) {
    IrValue *in = ir_value(m, fn->inputs[i]);
    if (strcmp(in->name, "tokens")) continue;
    *vocabulary = rows_gathered_by(m, fn->inputs[i], 0);
    if (*vocabulary) return true;
    diag_error(d, in->loc,
               "the input 'tokens' is not the indices of a gather, so the vocabulary (the row count of the table it "
               "indexes, which the training data's ids must stay below) is unknown");
    return false;
  }
  return true;
}

static PkgTraining *contract_of(IrModule *m, const AdContract *ac, const LoraLayers *lora, uint64_t vocabulary) {
  PkgTraining *t = xcalloc(1, sizeof *t);
  t->forward = xstrdup(ir_func(m, ac->fwd)->name);
  t->backward = xstrdup(ir_func(m, ac->bwd)->name);
  t->loss = xstrdup("loss");
  t->vocabulary = vocabulary;
  t->saved_bytes = ac->saved_bytes;
  t->inputs = xcalloc(ac->ninputs + 1, sizeof *t->inputs);
  for (uint32_t i = 0; i < ac->ninputs; i++) {
    const AdBwdInput *in = &ac->inputs[i];
    PkgTrainInput *pi = &t->inputs[t->ninputs++];
    pi->input = xstrdup(in->name);
    pi->from = in->from == AD_FROM_LOSS_SCALE   ? PKG_TRAIN_FROM_LOSS_SCALE
               : in->from == AD_FROM_FWD_OUTPUT ? PKG_TRAIN_FROM_OUTPUT
                                                : PKG_TRAIN_FROM_INPUT;
    pi->name = in->from == AD_FROM_LOSS_SCALE ? NULL : xstrdup(in->source);
  }
  t->gradients = xcalloc(ac->ngrads + 1, sizeof *t->gradients);
  t->params = xcalloc(ac->ngrads + 1, sizeof *t->params);
  for (uint32_t i = 0; i < ac->ngrads; i++) {
    const AdGradOutput *g = &ac->grads[i];
    t->gradients[t->ngradients++] = (PkgTrainGradient){.output = xstrdup(g->output), .param = xstrdup(g->param), .input = g->input};
    if (!g->input) t->params[t->nparams++] = xstrdup(g->param);
  }
  if (lora) {
    t->adapters = xcalloc(lora->n + 1, sizeof *t->adapters);
    for (uint32_t i = 0; i < lora->n; i++)
      t->adapters[t->nadapters++] = (PkgTrainAdapter){
          .module = xstrdup(lora->layers[i].module), .rank = lora->layers[i].rank, .alpha = lora->layers[i].alpha};;
  }
  t->params = xrealloc(t->params, (t->nparams + ac->nrows + 1) * sizeof *t->params);
  for (uint32_t i = 0; i < ac->nrows; i++) { /* a param whose gradient is its rows alone trains too */
    bool listed = false;
    for (uint32_t k = 0; k < t->nparams && !listed; k++) listed = !strcmp(t->params[k], ac->rows[i].param);
    if (!listed) t->params[t->nparams++] = xstrdup(ac->rows[i].param);
  }
  t->rows = xcalloc(ac->nrows + 1, sizeof *t->rows);
  for (uint32_t i = 0; i < ac->nrows; i++)
    t->rows[t->nrows++] = (PkgTrainRows){.output = xstrdup(ac->rows[i].output), .param = xstrdup(ac->rows[i].param),
                                         .indices = xstrdup(ac->rows[i].indices)};
  return t;
}

/* Float params of f that do not train under o (for --summary). */
static uint32_t count_frozen(IrModule *m, IrFuncId f, const AutodiffOptions *o) {
  IrFunc *fn = ir_func(m, f);
  uint32_t n = 0;
  for (uint32_t i = 0; i < fn->ndecls; i++) {
    IrValue *v = ir_value(m, fn->decls[i]);
    n += v->kind == VK_PARAM && ir_dtype_is_float(v->type.dtype) && !ad_param_trainable(o, v);
  }
  return n;
}

/* Every package is legalized with gelu-tanh (passes_legalize), so its
 * forward computes exact gelu in the tanh form, up to 5e-4 from erf's: the
 * gradient must be that form's, or it is about 1e-3 off what the forward
 * computes (docs/training.md, "Testing"). The ops are those gelu-tanh makes
 * of either mode: the forward's values do not change. */
static void gelu_as_compiled(IrModule *m, IrFuncId f) {
  for (IrOpId op = ir_func(m, f)->first; !ir_id_is_none(op); op = ir_op(m, op)->next)
    if (ir_op(m, op)->kind == OP_GELU && strcmp(ir_attr_str(m, op, "mode", "exact"), "tanh"))
      ir_op_set_attr_str(m, op, "mode", "tanh");
}

bool compile_train(IrModule *m, const OrionCompileOptions *o, const LoraLayers *lora, Diag *d, CompileTraining *out) {
  *out = (CompileTraining){0};
  IrFuncId f = choose_entry(m, o->train_function, d);
  if (!f) return false;
  bool globs = check_globs(m, f, o->autodiff.trainable, o->autodiff.ntrainable, "--trainable", d);
  globs = check_globs(m, f, o->autodiff.frozen, o->autodiff.nfrozen, "--frozen", d) && globs;
  if (!globs) return false;
  AutodiffOptions ao = o->autodiff;
  ao.wrt_lora_inputs = lora != NULL;
  uint32_t frozen = count_frozen(m, f, &ao);
  gelu_as_compiled(m, f);
  AdContract ac;
  if (!ad_differentiate(m, f, &ao, d, &ac)) return false;
  /* The package is the training one: the entry and any other entry go. */
  for (IrFuncId g = 1; g < m->nfuncs; g++)
    if (!ir_func(m, g)->dead && g != ac.fwd && g != ac.bwd) pass_delete_func(m, g);
  uint64_t vocabulary;
  if (!find_vocabulary(m, ac.fwd, &vocabulary, d)) return false;
  out->contract = contract_of(m, &ac, lora, vocabulary);
  out->nsaved = ac.nsaved;
  out->saved_bytes = ac.saved_bytes;
  out->trained = out->contract->nparams; /* the adapters' gradients are not params' */
  out->frozen = frozen;
  return true;
}
