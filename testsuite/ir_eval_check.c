/*
 * What the tests do with the reference evaluator besides evaluating: seeded
 * random inputs, comparing results, and checking that a pass pipeline
 * preserves a program's outputs (ir_eval.h).
 */
#include "ir_eval_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "orion/fp16.h"
#include "orion/op_semantics.h"
#include "orion/frontend.h"
#include "orion/passes.h"
#include "orion/weights.h"

/* ---- random inputs and comparison ---- */

static double uniform01(uint64_t *state) { return (double)(splitmix64(state) >> 11) * 0x1p-53; }

EvalTensor eval_random_ints(const IrType *t, uint64_t seed, int64_t low, int64_t high) {
  EvalTensor r = ev_tensor_new(t);
  uint64_t s = seed ^ 0x5851f42d4c957f2dull;
  uint64_t span = high > low ? (uint64_t)(high - low) : 1;
  for (int64_t i = 0; i < ev_count_of(t); i++) r.data[i] = (double)(low + (int64_t)(splitmix64(&s) % span));
  return r;
}

EvalTensor eval_random_input(const IrType *t, uint64_t seed) {
  switch (t->dtype) {
  case DT_INT32: case DT_INT8: return eval_random_ints(t, seed, -8, 9);
  case DT_UINT8: return eval_random_ints(t, seed, 0, 17);
  case DT_BOOL: return eval_random_ints(t, seed, 0, 2);
  default: break;
  }
  EvalTensor r = ev_tensor_new(t);
  uint64_t s = seed ^ 0x2545f4914f6cdd1dull;
  for (int64_t i = 0; i < ev_count_of(t); i++) {
    double v = -2.0 + 4.0 * uniform01(&s);
    r.data[i] = t->dtype == DT_FP16 ? (double)fp16_to_float(fp16_from_double(v)) : (double)(float)v;
  }
  return r;
}

/* |x - y|, with NaN == NaN and equal infinities 0, NaN against a number inf. */
static double elem_diff(double x, double y) {
  if (isnan(x) || isnan(y)) return isnan(x) && isnan(y) ? 0.0 : HUGE_VAL;
  if (x == y) return 0.0;
  return fabs(x - y);
}

double eval_max_abs_diff(const EvalTensor *a, const EvalTensor *b) {
  if (!ir_type_equal(&a->type, &b->type)) return HUGE_VAL;
  double worst = 0;
  for (int64_t i = 0; i < ev_count_of(&a->type); i++) {
    double d = elem_diff(a->data[i], b->data[i]);
    if (d > worst) worst = d;
  }
  return worst;
}

/* ---- before/after checks ---- */

static IrModule *parse_text(const char *name, const char *text, char *err, size_t errlen) {
  SourceSet ss;
  srcset_init(&ss);
  StrBuf msgs;
  sb_init(&msgs);
  Diag d;
  diag_init(&d, &ss);
  d.capture = &msgs;
  IrModule *m = oir_parse_string(name, text, strlen(text), &d);
  if (!m) snprintf(err, errlen, "the program does not parse:\n%s", msgs.data ? msgs.data : "");
  sb_free(&msgs);
  srcset_free(&ss);
  return m;
}

static bool compare_func(IrModule *before, IrModule *after, IrFuncId fb, uint64_t seed, double tol,
                         const EvalIntRange *ranges, double *worst, char *err, size_t errlen) {
  const char *name = ir_func(before, fb)->name;
  IrFuncId fa = ir_func_lookup(after, name);
  if (!fa) {
    snprintf(err, errlen, "function '%s' is gone after the passes", name);
    return false;
  }
  uint32_t nin = ir_func(before, fb)->ninputs;
  if (ir_func(after, fa)->ninputs != nin || ir_func(after, fa)->noutputs != ir_func(before, fb)->noutputs) {
    snprintf(err, errlen, "the signature of '%s' changed", name);
    return false;
  }
  EvalTensor *inputs = xcalloc(nin ? nin : 1, sizeof *inputs);
  bool ok = true;
  for (uint32_t i = 0; ok && i < nin; i++) {
    const IrValue *v = ir_value(before, ir_func(before, fb)->inputs[i]);
    if (!ir_type_equal(&v->type, &ir_value(after, ir_func(after, fa)->inputs[i])->type)) {
      snprintf(err, errlen, "input '%s' of '%s' changed type", v->name, name);
      ok = false;
      break;
    }
    uint64_t s = seed ^ (0x9e3779b97f4a7c15ull * (i + 1));
    const EvalIntRange *r = ranges;
    while (r && r->input && strcmp(r->input, v->name)) r++;
    inputs[i] = r && r->input ? eval_random_ints(&v->type, s, r->low, r->high) : eval_random_input(&v->type, s);
  }
  EvalTensor *ob = NULL, *oa = NULL;
  uint32_t nout = ir_func(before, fb)->noutputs;
  char msg[1024];
  if (ok && !ir_eval(before, fb, inputs, &ob, msg, sizeof msg)) {
    snprintf(err, errlen, "evaluating '%s' before the passes failed: %s", name, msg);
    ok = false;
  }
  if (ok && !ir_eval(after, fa, inputs, &oa, msg, sizeof msg)) {
    snprintf(err, errlen, "evaluating '%s' after the passes failed: %s", name, msg);
    ok = false;
  }
  for (uint32_t i = 0; ok && i < nout; i++) {
    const char *oname = ir_func(before, fb)->outputs[i].name;
    if (strcmp(oname, ir_func(after, fa)->outputs[i].name)) {
      snprintf(err, errlen, "output %u of '%s' was '%s' and is '%s' after the passes", i + 1, name, oname,
               ir_func(after, fa)->outputs[i].name);
      ok = false;
      break;
    }
    for (int64_t k = 0; k < ev_count_of(&ob[i].type); k++)
      if (!isfinite(ob[i].data[k])) {
        snprintf(err, errlen, "output '%s' of '%s' is %g at element %lld before the passes: the check would prove "
                 "nothing (keep the program finite)", oname, name, ob[i].data[k], (long long)k);
        ok = false;
        break;
      }
    if (!ok) break;
    double d = eval_max_abs_diff(&ob[i], &oa[i]);
    if (d > *worst) *worst = d;
    if (!(d <= tol)) {
      char tb[96], ta[96];
      ev_type_text(&ob[i].type, tb, sizeof tb);
      ev_type_text(&oa[i].type, ta, sizeof ta);
      if (!ir_type_equal(&ob[i].type, &oa[i].type)) {
        snprintf(err, errlen, "output '%s' of '%s' is %s before the passes and %s after", oname, name, tb, ta);
      } else {
        int64_t at = 0; /* the element with the largest difference */
        for (int64_t k = 0; k < ev_count_of(&ob[i].type); k++)
          if (elem_diff(ob[i].data[k], oa[i].data[k]) > elem_diff(ob[i].data[at], oa[i].data[at])) at = k;
        snprintf(err, errlen, "output '%s' of '%s' (%s) differs by %g > %g; worst at element %lld: %.17g before, "
                 "%.17g after (seed %llu)", oname, name, tb, d, tol, (long long)at, ob[i].data[at], oa[i].data[at],
                 (unsigned long long)seed);
      }
      ok = false;
    }
  }
  eval_tensors_free(ob, ob ? nout : 0);
  eval_tensors_free(oa, oa ? nout : 0);
  eval_tensors_free(inputs, nin);
  return ok;
}

bool eval_pass_preserves(const char *oir_text, const char *passes, uint64_t seed, double tol,
                         const EvalIntRange *ranges, double *max_diff, char *err, size_t errlen) {
  PassManagerOptions o = {.verify_each = true};
  if (passes_pipeline(passes)) o.pipeline = passes;
  else o.passes = passes;
  return eval_pass_preserves_opts(oir_text, &o, seed, tol, ranges, max_diff, err, errlen);
}

bool eval_pass_preserves_opts(const char *oir_text, const PassManagerOptions *opts, uint64_t seed, double tol,
                              const EvalIntRange *ranges, double *max_diff, char *err, size_t errlen) {
  const char *passes = opts->passes ? opts->passes : opts->pipeline ? opts->pipeline : "O1";
  double worst = 0;
  if (max_diff) *max_diff = 0;
  err[0] = 0;
  IrModule *before = parse_text("before.oir", oir_text, err, errlen);
  if (!before) return false;
  IrModule *after = parse_text("after.oir", oir_text, err, errlen);
  bool ok = after != NULL;
  if (ok) {
    SourceSet ss;
    srcset_init(&ss);
    StrBuf msgs;
    sb_init(&msgs);
    Diag d;
    diag_init(&d, &ss);
    d.capture = &msgs;
    if (!passes_run(after, opts, &d)) {
      snprintf(err, errlen, "passes '%s' failed:\n%s", passes, msgs.data ? msgs.data : "");
      ok = false;
    }
    sb_free(&msgs);
    srcset_free(&ss);
  }
  uint32_t checked = 0;
  for (IrFuncId f = 1; ok && f < before->nfuncs; f++) {
    if (ir_func(before, f)->dead || ir_func(before, f)->ncallers) continue; /* entries only */
    ok = compare_func(before, after, f, seed, tol, ranges, &worst, err, errlen);
    checked++;
  }
  if (ok && !checked) {
    snprintf(err, errlen, "the program has no entry function");
    ok = false;
  }
  if (max_diff) *max_diff = worst;
  ir_module_free(before);
  if (after) ir_module_free(after);
  return ok;
}
