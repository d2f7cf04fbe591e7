/* Gradients against central finite differences (see autodiff_check.h). */
#include "autodiff_check.h"

#include <criterion/criterion.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orion/frontend.h"

typedef struct Session {
  SourceSet ss;
  StrBuf msgs;
  Diag d;
  IrModule *m;
} Session;

static void session_open(Session *s, const char *oir) {
  srcset_init(&s->ss);
  sb_init(&s->msgs);
  diag_init(&s->d, &s->ss);
  s->d.capture = &s->msgs;
  s->m = oir_parse_string("t.oir", oir, strlen(oir), &s->d);
}

static void session_close(Session *s) {
  if (s->m) ir_module_free(s->m);
  sb_free(&s->msgs);
  srcset_free(&s->ss);
}

static uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static uint64_t name_hash(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
  return h;
}

static double round_to(double v, IrDType dt) {
  if (dt == DT_FP32) return (double)(float)v;
  if (dt == DT_FP16) { /* nearest multiple of the fp16 spacing at v's binade (normal range) */
    int e;
    frexp(v, &e);
    double q = ldexp(1.0, e - 11);
    return nearbyint(v / q) * q;
  }
  return v;
}

/* The param's values as the check uses them (see the header). */
static double *param_values(const IrValue *v) {
  uint64_t n = ir_type_elements(&v->type);
  double *d = xmalloc(sizeof *d * n);
  uint64_t state = v->src.seed ^ name_hash(v->name);
  for (uint64_t i = 0; i < n; i++) {
    double u = (double)(mix(state + i) >> 11) * 0x1p-53;
    double x;
    switch (v->src.kind) {
    case SRC_UNIFORM: x = v->src.a + (v->src.b - v->src.a) * u; break;
    case SRC_NORMAL: x = v->src.a + v->src.b * (2 * u - 1); break;
    case SRC_FILL: x = v->src.a; break;
    case SRC_ONES: x = 1; break;
    default: x = 0; break;
    }
    d[i] = round_to(x, v->type.dtype);
  }
  return d;
}

/* Every param of f becomes a const holding the check's values. */
static void params_to_consts(IrModule *m, IrFuncId f) {
  IrFunc *fn = ir_func(m, f);
  for (uint32_t i = 0; i < fn->ndecls; i++) {
    IrValue *v = ir_value(m, fn->decls[i]);
    if (v->kind != VK_PARAM) continue;
    double *d = param_values(v);
    uint64_t n = ir_type_elements(&v->type);
    v->data = arena_memdup(&m->arena, d, sizeof *d * n);
    v->ndata = n;
    v->kind = VK_CONST;
    free(d);
  }
}

static bool fail(AdCheckResult *r, const char *fmt, ...) ORION_PRINTF(2, 3);
static bool fail(AdCheckResult *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->err, sizeof r->err, fmt, ap);
  va_end(ap);
  r->ok = false;
  return false;
}

static EvalTensor *make_inputs(IrModule *m, IrFuncId f, const AdCheck *opt) {
  IrFunc *fn = ir_func(m, f);
  EvalTensor *in = xcalloc(fn->ninputs ? fn->ninputs : 1, sizeof *in);
  for (uint32_t i = 0; i < fn->ninputs; i++) {
    IrValue *v = ir_value(m, fn->inputs[i]);
    const EvalIntRange *rg = NULL;
    for (const EvalIntRange *r = opt->ranges; r && r->input; r++)
      if (strcmp(r->input, v->name) == 0) rg = r;
    in[i] = rg ? eval_random_ints(&v->type, opt->seed + i, rg->low, rg->high) : eval_random_input(&v->type, opt->seed + i);
  }
  return in;
}

static bool eval_loss(IrModule *m, IrFuncId f, const EvalTensor *in, double *loss, AdCheckResult *r) {
  EvalTensor *out = NULL;
  char err[512];
  if (!ir_eval(m, f, in, &out, err, sizeof err)) return fail(r, "evaluating '%s': %s", ir_func(m, f)->name, err);
  IrFunc *fn = ir_func(m, f);
  uint32_t li = 0;
  while (strcmp(fn->outputs[li].name, "loss") != 0) li++;
  *loss = out[li].data[0];
  eval_tensors_free(out, fn->noutputs);
  return true;
}

/* The outputs of f as the caller sees them. split-concat turns an output
 * that is a concat into its parts, recorded as a group NAME whose parts are
 * named NAME.0, NAME.1, ..., each an output or itself a group. */
static const IrOutputGroup *group_named(IrFunc *fn, const char *name, size_t len) {
  for (uint32_t j = 0; j < fn->ngroups; j++)
    if (strlen(fn->groups[j].name) == len && strncmp(fn->groups[j].name, name, len) == 0) return &fn->groups[j];
  return NULL;
}

static EvalTensor build_output(IrFunc *fn, const EvalTensor *outs, const char *name) {
  const IrOutputGroup *g = group_named(fn, name, strlen(name));
  if (!g) {
    for (uint32_t i = 0; i < fn->noutputs; i++)
      if (strcmp(fn->outputs[i].name, name) == 0) {
        uint64_t n = ir_type_elements(&outs[i].type);
        EvalTensor t = {outs[i].type, xmalloc(sizeof(double) * n)};
        memcpy(t.data, outs[i].data, sizeof(double) * n);
        return t;
      }
    cr_assert_fail("no output or group '%s'", name);
  }
  EvalTensor whole = {g->type, xcalloc(ir_type_elements(&g->type), sizeof(double))};
  int64_t outer = 1, inner = 1, at = 0, total = g->type.dims[g->axis];
  for (int d = 0; d < g->axis; d++) outer *= g->type.dims[d];
  for (int d = g->axis + 1; d < g->type.rank; d++) inner *= g->type.dims[d];
  for (uint32_t p = 0; p < g->nparts; p++) {
    char part_name[600];
    snprintf(part_name, sizeof part_name, "%s.%u", name, p);
    EvalTensor part = build_output(fn, outs, part_name);
    int64_t len = part.type.dims[g->axis];
    for (int64_t o = 0; o < outer; o++)
      memcpy(whole.data + (o * total + at) * inner, part.data + o * len * inner, sizeof(double) * (size_t)(len * inner));
    at += len;
    eval_tensor_free(&part);
  }
  return whole;
}

/* Takes the evaluated outputs and returns them reassembled, *n of them. */
static EvalTensor *reassemble(IrModule *m, IrFuncId f, EvalTensor *outs, uint32_t *n) {
  IrFunc *fn = ir_func(m, f);
  EvalTensor *res = xcalloc(fn->noutputs ? fn->noutputs : 1, sizeof *res);
  const char *last = NULL;
  size_t last_len = 0;
  uint32_t k = 0;
  for (uint32_t i = 0; i < fn->noutputs; i++) {
    const char *name = fn->outputs[i].name;
    size_t len = strlen(name); /* the shortest prefix (at a dot) that is a group */
    for (size_t j = 1; j < strlen(name); j++)
      if (name[j] == '.' && group_named(fn, name, j)) {
        len = j;
        break;
      }
    if (last && len == last_len && strncmp(last, name, len) == 0) continue; /* a later part of the same group */
    char top[600];
    snprintf(top, sizeof top, "%.*s", (int)len, name);
    res[k++] = build_output(fn, outs, top);
    last = name;
    last_len = len;
  }
  eval_tensors_free(outs, fn->noutputs);
  *n = k;
  return res;
}

/* The backward's gradients for loss scale `scale`. */
static bool run_backward(IrModule *m, const AdContract *ct, const EvalTensor *in, double scale, EvalTensor **grads,
                         double *fwd_loss, AdCheckResult *r) {
  EvalTensor *fo = NULL;
  char err[512];
  if (!ir_eval(m, ct->fwd, in, &fo, err, sizeof err)) return fail(r, "evaluating the forward: %s", err);
  uint32_t nfo = 0;
  fo = reassemble(m, ct->fwd, fo, &nfo);
  *fwd_loss = fo[0].data[0];
  EvalTensor *bi = xcalloc(ct->ninputs, sizeof *bi);
  for (uint32_t i = 0; i < ct->ninputs; i++) {
    const AdBwdInput *b = &ct->inputs[i];
    const EvalTensor *src = b->from == AD_FROM_FWD_OUTPUT ? &fo[b->index] : b->from == AD_FROM_FWD_INPUT ? &in[b->index] : NULL;
    bi[i].type = b->type;
    uint64_t n = ir_type_elements(&b->type);
    bi[i].data = xmalloc(sizeof(double) * n);
    if (src) memcpy(bi[i].data, src->data, sizeof(double) * n);
    else bi[i].data[0] = scale;
  }
  bool ok = ir_eval(m, ct->bwd, bi, grads, err, sizeof err);
  eval_tensors_free(bi, ct->ninputs);
  eval_tensors_free(fo, nfo);
  if (!ok) return fail(r, "evaluating the backward: %s", err);
  uint32_t ng = 0;
  *grads = reassemble(m, ct->bwd, *grads, &ng);
  return true;
}

static bool check_grads(IrModule *m, IrFuncId f, const AdContract *ct, const EvalTensor *in, const EvalTensor *grads,
                        const AdCheck *opt, AdCheckResult *r) {
  double h = opt->h > 0 ? opt->h : 1e-5, tol = opt->tol > 0 ? opt->tol : 1e-6;
  for (uint32_t gi = 0; gi < ct->ngrads; gi++) {
    IrValueId p = ir_func_find_value(m, f, ct->grads[gi].param);
    IrValue *v = ir_value(m, p);
    for (uint64_t j = 0; j < v->ndata; j++) {
      double keep = v->data[j], lp, lm;
      v->data[j] = keep + h;
      bool ok = eval_loss(m, f, in, &lp, r);
      v->data[j] = keep - h;
      ok = ok && eval_loss(m, f, in, &lm, r);
      v->data[j] = keep;
      if (!ok) return false;
      double fd = (lp - lm) / (2 * h), g = grads[gi].data[j];
      double e = fabs(fd - g) / fmax(1.0, fabs(g));
      if (e > r->max_err) r->max_err = e;
      if (!(e <= tol))
        return fail(r, "%s[%llu]: backward %.12g, finite differences %.12g (error %.3g > %.3g)", ct->grads[gi].output,
                    (unsigned long long)j, g, fd, e, tol);
    }
  }
  return true;
}

/* The gradients of a second copy whose forward and backward went through opt->passes. */
static bool check_after_passes(const char *oir, const AdCheck *opt, const EvalTensor *want, AdCheckResult *r) {
  Session s;
  session_open(&s, oir);
  IrModule *m = s.m;
  AdContract ct;
  bool ok = m && ad_differentiate(m, ir_func_lookup(m, "main"), opt->options, &s.d, &ct);
  if (!ok) {
    session_close(&s);
    return fail(r, "the second copy does not differentiate");
  }
  params_to_consts(m, ir_func_lookup(m, "main"));
  params_to_consts(m, ct.fwd);
  params_to_consts(m, ct.bwd);
  uint32_t bwd_in = ir_func(m, ct.bwd)->ninputs;
  PassManagerOptions po = {0};
  if (strchr(opt->passes, ',') || !passes_pipeline(opt->passes)) po.passes = opt->passes;
  else po.pipeline = opt->passes;
  if (!passes_run(m, &po, &s.d)) ok = fail(r, "passes '%s' failed:\n%s", opt->passes, s.msgs.data ? s.msgs.data : "");
  else if (ir_func(m, ct.bwd)->ninputs != bwd_in)
    ok = fail(r, "passes '%s' changed the inputs of the backward", opt->passes); /* outputs may be split in parts */
  EvalTensor *in = make_inputs(m, ir_func_lookup(m, "main"), opt), *got = NULL;
  double lf = 0, tol = opt->tol > 0 ? opt->tol : 1e-6;
  ok = ok && run_backward(m, &ct, in, 1.0, &got, &lf, r);
  for (uint32_t i = 0; ok && i < ct.ngrads; i++)
    for (uint64_t j = 0; ok && j < ir_type_elements(&want[i].type); j++) {
      double e = fabs(got[i].data[j] - want[i].data[j]) / fmax(1.0, fabs(want[i].data[j]));
      if (!(e <= tol))
        ok = fail(r, "%s[%llu] after passes '%s': %.12g, before: %.12g", ct.grads[i].output, (unsigned long long)j,
                  opt->passes, got[i].data[j], want[i].data[j]);
    }
  eval_tensors_free(got, got ? ct.ngrads : 0);
  eval_tensors_free(in, ir_func(m, ir_func_lookup(m, "main"))->ninputs);
  session_close(&s);
  return ok;
}

AdCheckResult ad_check(const char *oir, const AdCheck *opt) {
  AdCheckResult r = {.ok = true};
  Session s;
  session_open(&s, oir);
  if (!s.m) {
    fail(&r, "does not parse:\n%s", s.msgs.data ? s.msgs.data : "");
    session_close(&s);
    return r;
  }
  IrModule *m = s.m;
  IrFuncId f = ir_func_lookup(m, "main");
  AdContract ct;
  if (!ad_differentiate(m, f, opt->options, &s.d, &ct)) {
    fail(&r, "ad_differentiate failed:\n%s", s.msgs.data ? s.msgs.data : "");
    session_close(&s);
    return r;
  }
  r.ngrads = ct.ngrads;
  r.nsaved = ct.nsaved;
  r.saved_bytes = ct.saved_bytes;
  for (uint32_t i = 0; i < ct.ngrads; i++) {
    size_t len = strlen(r.grads);
    snprintf(r.grads + len, sizeof r.grads - len, "%s%s", i ? "," : "", ct.grads[i].output);
  }
  params_to_consts(m, f);
  params_to_consts(m, ct.fwd);
  params_to_consts(m, ct.bwd);
  EvalTensor *in = make_inputs(m, f, opt);
  EvalTensor *g1 = NULL, *g2 = NULL;
  double l0 = 0, lf = 0, lf2 = 0;
  uint32_t ng = ir_func(m, ct.bwd)->noutputs;
  bool ok = eval_loss(m, f, in, &l0, &r) && run_backward(m, &ct, in, 1.0, &g1, &lf, &r) &&
            run_backward(m, &ct, in, 256.0, &g2, &lf2, &r);
  if (ok && lf != l0) ok = fail(&r, "the forward's loss %.17g differs from main's %.17g", lf, l0);
  for (uint32_t i = 0; ok && i < ng; i++)
    for (uint64_t j = 0; ok && j < ir_type_elements(&g1[i].type); j++)
      if (fabs(g2[i].data[j] - 256.0 * g1[i].data[j]) > 1e-9 * fmax(1.0, fabs(g2[i].data[j])))
        ok = fail(&r, "%s[%llu] does not scale with loss_scale: %.17g at 1, %.17g at 256", ct.grads[i].output,
                  (unsigned long long)j, g1[i].data[j], g2[i].data[j]);
  if (ok) ok = check_grads(m, f, &ct, in, g1, opt, &r);
  if (ok && opt->passes) check_after_passes(oir, opt, g1, &r);
  eval_tensors_free(g1, g1 ? ng : 0);
  eval_tensors_free(g2, g2 ? ng : 0);
  eval_tensors_free(in, ir_func(m, f)->ninputs);
  session_close(&s);
  return r;
}

const char *ad_error_of(const char *oir, const AutodiffOptions *o) {
  static char buf[1024];
  buf[0] = 0;
  Session s;
  session_open(&s, oir);
  if (!s.m) {
    snprintf(buf, sizeof buf, "parse: %s", s.msgs.data ? s.msgs.data : "");
  } else {
    AdContract ct;
    if (!ad_differentiate(s.m, ir_func_lookup(s.m, "main"), o, &s.d, &ct)) {
      const char *t = s.msgs.data ? s.msgs.data : "(no message)";
      const char *e = strstr(t, ": error: "); /* the first error, after any warnings */
      if (e) {
        while (e > t && e[-1] != '\n') e--;
        t = e;
      }
      size_t n = strcspn(t, "\n");
      snprintf(buf, sizeof buf, "%.*s", (int)n, t);
    }
  }
  session_close(&s);
  return buf;
}
