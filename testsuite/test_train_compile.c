/*
 * orionc --train through the compile library (docs/training.md, "orionc
 * --train"): examples/train/tiny.oir compiled into a training package whose
 * backward, run on the CPU backend in fp32 numerics, gives the gradients of
 * the IR-level differentiation evaluated in double precision (ir_eval) on
 * the package's own weights; the contract the package records; frozen globs;
 * the choice of the entry; the refusals.
 */
#define _XOPEN_SOURCE 700

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir_eval.h"
#include "orion/backend.h"
#include "orion/compile.h"
#include "orion/frontend.h"
#include "orion/weights.h"

#define TINY ORION_SOURCE_ROOT "/examples/train/tiny.oir"

static char dir[] = "/tmp/orion-train-compile-XXXXXX";

static void setup(void) { cr_assert_not_null(mkdtemp(dir)); }
static void teardown(void) { remove_tree(dir); }

TestSuite(train_compile, .init = setup, .fini = teardown);

static const char *text_of(const StrBuf *sb) { return sb->data ? sb->data : ""; }

typedef struct Compiled {
  bool ok;
  OrionCompileStatus status;
  char *path;
  StrBuf msgs;
} Compiled;

/* Compiles an .oir file (or, with text, that text) with --train and the globs into dir/name. */
static Compiled compile_train(const char *oir, const char *text, const char *func, const char *const *frozen,
                              uint32_t nfrozen, const char *name) {
  Compiled c = {0};
  sb_init(&c.msgs);
  StrBuf p;
  sb_init(&p);
  sb_printf(&p, "%s/%s", dir, name);
  c.path = p.data;
  OrionCompileOptions o;
  orion_compile_options_init(&o);
  o.train = true;
  o.train_function = func;
  o.autodiff.frozen = frozen;
  o.autodiff.nfrozen = nfrozen;
  /* The one-hot form: the backward program holds each param's whole gradient,
   * which is what these tests compare (rows: test_train_rows.c). */
  o.autodiff.gather_rows = false;
  Diag d;
  diag_init(&d, NULL);
  d.capture = &c.msgs;
  d.suppress_warnings = true;
  OrionCompileResult r;
  c.ok = text ? orion_compile_text("model.oir", text, strlen(text), &o, c.path, &r, &d)
              : orion_compile_file(oir, &o, c.path, &r, &d);
  c.status = r.status;
  orion_compile_result_free(&r);
  return c;
}

static void compiled_free(Compiled *c) {
  free(c->path);
  sb_free(&c->msgs);
}

/* The reference: train/tiny.oir differentiated at the IR level, its params
 * replaced by consts holding the values the package writer stores (fp32). */
typedef struct Reference {
  IrModule *m;
  AdContract ct;
} Reference;

static void params_to_stored_consts(IrModule *m, IrFuncId f) {
  IrFunc *fn = ir_func(m, f);
  for (uint32_t i = 0; i < fn->ndecls; i++) {
    IrValue *v = ir_value(m, fn->decls[i]);
    if (v->kind != VK_PARAM) continue;
    cr_assert_eq(v->type.dtype, DT_FP32);
    Diag d;
    diag_init(&d, NULL);
    size_t nbytes;
    float *w = weights_materialize(m, fn->decls[i], &(WeightLoadOptions){0}, &d, &nbytes);
    cr_assert_not_null(w, "param %s", v->name);
    uint64_t n = ir_type_elements(&v->type);
    cr_assert_eq(nbytes, n * sizeof(float));
    double *vals = arena_alloc(&m->arena, sizeof *vals * n);
    for (uint64_t k = 0; k < n; k++) vals[k] = w[k];
    free(w);
    v->data = vals;
    v->ndata = n;
    v->kind = VK_CONST;
  }
}

static Reference reference(void) {
  Reference ref = {0};
  SourceSet sources;
  srcset_init(&sources);
  Diag d;
  diag_init(&d, &sources);
  ref.m = oir_parse_file(TINY, &d);
  cr_assert_not_null(ref.m);
  PassCtx ctx = {.d = &d};
  cr_assert(pass_inline(ref.m, &ctx));
  cr_assert(ad_differentiate(ref.m, ir_func_lookup(ref.m, "main"), NULL, &d, &ref.ct));
  params_to_stored_consts(ref.m, ref.ct.fwd);
  params_to_stored_consts(ref.m, ref.ct.bwd);
  srcset_free(&sources);
  return ref;
}

/* Token ids of a [2,8] batch: the same for ir_eval (double) and the backend (int32). */
static const int32_t tokens[16] = {1, 8, 11, 10, 5, 12, 15, 0, 3, 2, 13, 4, 7, 6, 1, 0};
static const int32_t targets[16] = {8, 11, 10, 5, 12, 15, 0, 3, 2, 13, 4, 7, 6, 1, 0, 3};

static EvalTensor eval_ints(const IrType *t, const int32_t *v) {
  EvalTensor e = {.type = *t, .data = xmalloc(sizeof(double) * 16)};
  cr_assert_eq(ir_type_elements(t), 16);
  for (int i = 0; i < 16; i++) e.data[i] = v[i];
  return e;
}

/* The gradients of the reference for loss scale 1, in the contract's order. */
static EvalTensor *reference_grads(Reference *ref) {
  IrFunc *fwd = ir_func(ref->m, ref->ct.fwd);
  cr_assert_eq(fwd->ninputs, 2);
  EvalTensor in[2];
  for (uint32_t i = 0; i < 2; i++) {
    IrValue *v = ir_value(ref->m, fwd->inputs[i]);
    in[i] = eval_ints(&v->type, strcmp(v->name, "tokens") ? targets : tokens);
  }
  EvalTensor *fo = NULL, *grads = NULL;
  char err[512];
  cr_assert(ir_eval(ref->m, ref->ct.fwd, in, &fo, err, sizeof err), "%s", err);
  EvalTensor *bi = xcalloc(ref->ct.ninputs, sizeof *bi);
  for (uint32_t i = 0; i < ref->ct.ninputs; i++) {
    const AdBwdInput *b = &ref->ct.inputs[i];
    uint64_t n = ir_type_elements(&b->type);
    bi[i] = (EvalTensor){.type = b->type, .data = xmalloc(sizeof(double) * n)};
    if (b->from == AD_FROM_LOSS_SCALE) bi[i].data[0] = 1;
    else memcpy(bi[i].data, (b->from == AD_FROM_FWD_OUTPUT ? fo : in)[b->index].data, sizeof(double) * n);
  }
  cr_assert(ir_eval(ref->m, ref->ct.bwd, bi, &grads, err, sizeof err), "%s", err);
  eval_tensors_free(bi, ref->ct.ninputs);
  eval_tensors_free(fo, fwd->noutputs);
  free(in[0].data);
  free(in[1].data);
  return grads;
}

static uint32_t find_tensor(const OrionProgram *p, uint32_t fn, bool output, const char *name) {
  uint32_t n = output ? orion_output_count(p, fn) : orion_input_count(p, fn);
  for (uint32_t i = 0; i < n; i++)
    if (!strcmp((output ? orion_output(p, fn, i) : orion_input(p, fn, i))->name, name)) return i;
  cr_assert_fail("%s has no %s '%s'", orion_function_name(p, fn), output ? "output" : "input", name);
  return 0;
}

static OrionTensor tensor_like(const OrionTensorInfo *t) {
  OrionTensor x = {.dtype = t->dtype, .rank = t->rank, .data = xcalloc(1, t->bytes ? t->bytes : 1)};
  memcpy(x.dims, t->dims, sizeof x.dims);
  return x;
}

static void tensors_free(OrionTensor *t, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) free(t[i].data);
  free(t);
}

/* Runs the package's forward, then its backward fed as its contract says
 * (loss scale 1), on the CPU backend in fp32 numerics; returns the backward's outputs. */
static OrionTensor *package_grads(const char *path, const Package *pkg, SourceSet *sources, OrionProgram **prog_out) {
  Diag d;
  diag_init(&d, sources);
  OrionProgram *p = orion_open(path, NULL, &d);
  cr_assert_not_null(p);
  const PkgTraining *t = pkg->training;
  uint32_t fwd = orion_function_find(p, t->forward), bwd = orion_function_find(p, t->backward);
  OrionBackend *b = orion_backend_open("cpu", NULL, &d);
  cr_assert_not_null(b);
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_FP32};
  OrionExec *fe = orion_backend_prepare(b, p, fwd, &po, &d), *be = orion_backend_prepare(b, p, bwd, &po, &d);
  cr_assert(fe && be);
  uint32_t nfi = orion_input_count(p, fwd), nfo = orion_output_count(p, fwd);
  uint32_t nbi = orion_input_count(p, bwd), nbo = orion_output_count(p, bwd);
  OrionTensor *fi = xcalloc(nfi, sizeof *fi), *fo = xcalloc(nfo, sizeof *fo);
  OrionTensor *bi = xcalloc(nbi, sizeof *bi), *bo = xcalloc(nbo, sizeof *bo);
  for (uint32_t i = 0; i < nfi; i++) {
    fi[i] = tensor_like(orion_input(p, fwd, i));
    memcpy(fi[i].data, strcmp(orion_input(p, fwd, i)->name, "tokens") ? targets : tokens, sizeof tokens);
  }
  for (uint32_t i = 0; i < nfo; i++) fo[i] = tensor_like(orion_output(p, fwd, i));
  cr_assert(orion_exec_run(fe, fi, fo, &d));
  for (uint32_t k = 0; k < t->ninputs; k++) {
    const PkgTrainInput *in = &t->inputs[k];
    uint32_t i = find_tensor(p, bwd, false, in->input);
    bi[i] = tensor_like(orion_input(p, bwd, i));
    if (in->from == PKG_TRAIN_FROM_LOSS_SCALE) *(float *)bi[i].data = 1;
    else if (in->from == PKG_TRAIN_FROM_OUTPUT)
      memcpy(bi[i].data, fo[find_tensor(p, fwd, true, in->name)].data, orion_input(p, bwd, i)->bytes);
    else memcpy(bi[i].data, fi[find_tensor(p, fwd, false, in->name)].data, orion_input(p, bwd, i)->bytes);
  }
  for (uint32_t i = 0; i < nbo; i++) bo[i] = tensor_like(orion_output(p, bwd, i));
  cr_assert(orion_exec_run(be, bi, bo, &d));
  orion_exec_release(fe);
  orion_exec_release(be);
  orion_backend_close(b);
  tensors_free(fi, nfi);
  tensors_free(fo, nfo);
  tensors_free(bi, nbi);
  *prog_out = p;
  return bo;
}

Test(train_compile, backward_gradients_match_the_ir_level_ad) {
  Compiled c = compile_train(TINY, NULL, NULL, NULL, 0, "tiny.anepkg");
  cr_assert(c.ok, "%s", text_of(&c.msgs));
  Package pkg;
  Diag d;
  diag_init(&d, NULL);
  cr_assert(package_read(c.path, &pkg, &d));
  cr_assert_not_null(pkg.training);
  Reference ref = reference();
  EvalTensor *want = reference_grads(&ref);
  OrionProgram *p;
  SourceSet sources; /* the program's MIL files, for its messages: until it is closed */
  srcset_init(&sources);
  OrionTensor *got = package_grads(c.path, &pkg, &sources, &p);
  uint32_t bwd = orion_function_find(p, pkg.training->backward);
  cr_assert_eq(ref.ct.ngrads, 6);
  cr_assert_eq(pkg.training->ngradients, 6);
  /* Within 1e-4 of the gradient's largest element: the program's fp32
   * rounding against double (measured at most 2e-7 of it). */
  for (uint32_t g = 0; g < ref.ct.ngrads; g++) {
    uint32_t i = find_tensor(p, bwd, true, ref.ct.grads[g].output);
    uint64_t n = ir_type_elements(&ref.ct.grads[g].type);
    cr_assert_eq(orion_output(p, bwd, i)->bytes, n * sizeof(float));
    const float *gv = got[i].data;
    double scale = 0;
    for (uint64_t k = 0; k < n; k++) scale = fmax(scale, fabs(want[g].data[k]));
    cr_assert_gt(scale, 1e-3, "%s is all but zero", ref.ct.grads[g].output);
    for (uint64_t k = 0; k < n; k++)
      cr_assert_leq(fabs((double)gv[k] - want[g].data[k]), 1e-4 * scale, "%s[%llu]: %.9g, want %.9g",
                    ref.ct.grads[g].output, (unsigned long long)k, (double)gv[k], want[g].data[k]);
  }
  tensors_free(got, orion_output_count(p, bwd));
  eval_tensors_free(want, ref.ct.ngrads);
  orion_close(p);
  srcset_free(&sources);
  ir_module_free(ref.m);
  package_free(&pkg);
  compiled_free(&c);
}

Test(train_compile, the_contract_in_the_manifest) {
  const char *frozen[] = {"ln.*"};
  Compiled c = compile_train(TINY, NULL, NULL, frozen, 1, "frozen.anepkg");
  cr_assert(c.ok, "%s", text_of(&c.msgs));
  Package pkg;
  Diag d;
  diag_init(&d, NULL);
  cr_assert(package_read(c.path, &pkg, &d));
  const PkgTraining *t = pkg.training;
  cr_assert_not_null(t);
  cr_assert_str_eq(t->forward, "main.fwd");
  cr_assert_str_eq(t->backward, "main.bwd");
  cr_assert_str_eq(t->loss, "loss");
  cr_assert_eq(t->vocabulary, 16);
  cr_assert_eq(pkg.nfunctions, 2);
  static const char *const params[] = {"wte", "fc.weight", "fc.bias", "head.weight"};
  cr_assert_eq(t->nparams, 4);
  cr_assert_eq(t->ngradients, 4);
  for (uint32_t i = 0; i < 4; i++) {
    cr_assert_str_eq(t->params[i], params[i]);
    cr_assert_str_eq(t->gradients[i].param, params[i]);
    char want[64];
    snprintf(want, sizeof want, "grad.%s", params[i]);
    cr_assert_str_eq(t->gradients[i].output, want);
  }
  cr_assert_eq(t->inputs[0].from, PKG_TRAIN_FROM_LOSS_SCALE);
  bool tokens_fed = false;
  for (uint32_t i = 0; i < t->ninputs; i++)
    tokens_fed |= t->inputs[i].from == PKG_TRAIN_FROM_INPUT && !strcmp(t->inputs[i].name, "tokens");
  cr_assert(tokens_fed, "the backward reads the forward's tokens (the gather's gradient)");
  cr_assert_eq(t->saved_bytes, package_training_saved_bytes(&pkg, t));
  package_free(&pkg);
  compiled_free(&c);
}

/* Two entries with a loss: the rule asks for --train=FUNC, which picks one. */
#define TWO_LOSSES                                                     \
  "func a(x: fp32[2,3], targets: int32[2]) {\n"                        \
  "  param w: fp32[3,3] = normal(seed=1, std=0.5);\n"                  \
  "  y = linear(x, w);\n"                                              \
  "  loss: fp32[] = cross_entropy(y, targets);\n"                      \
  "  return loss;\n"                                                   \
  "}\n"                                                                \
  "func b(x: fp32[2,3], targets: int32[2]) {\n"                        \
  "  param v: fp32[3,3] = normal(seed=2, std=0.5);\n"                  \
  "  y = linear(x, v);\n"                                              \
  "  loss: fp32[] = cross_entropy(y, targets);\n"                      \
  "  return loss;\n"                                                   \
  "}\n"

Test(train_compile, the_entry_is_chosen) {
  Compiled c = compile_train(NULL, TWO_LOSSES, NULL, NULL, 0, "two.anepkg");
  cr_assert_not(c.ok);
  cr_assert_eq(c.status, ORION_COMPILE_INPUT_ERROR);
  cr_assert_str_eq(text_of(&c.msgs),
                   "orionc: error: several functions have an output 'loss' ('a', 'b'): choose one with --train=FUNC\n");
  compiled_free(&c);
  c = compile_train(NULL, TWO_LOSSES, "b", NULL, 0, "b.anepkg");
  cr_assert(c.ok, "%s", text_of(&c.msgs));
  Package pkg;
  Diag d;
  diag_init(&d, NULL);
  cr_assert(package_read(c.path, &pkg, &d));
  cr_assert_eq(pkg.nfunctions, 2);
  cr_assert_str_eq(pkg.training->forward, "b.fwd");
  cr_assert_str_eq(pkg.training->params[0], "v");
  cr_assert_eq(pkg.training->vocabulary, 0, "no tokens input, no vocabulary");
  package_free(&pkg);
  compiled_free(&c);
  c = compile_train(NULL, TWO_LOSSES, "c", NULL, 0, "c.anepkg");
  cr_assert_str_eq(text_of(&c.msgs), "orionc: error: --train=c: the module has no function 'c' to differentiate\n");
  compiled_free(&c);
}

Test(train_compile, train_and_a_given_contract_are_an_options_error) {
  OrionCompileOptions o;
  orion_compile_options_init(&o);
  o.train = true;
  PkgTraining given = {0};
  o.training = &given;
  Diag d;
  StrBuf msgs;
  sb_init(&msgs);
  diag_init(&d, NULL);
  d.capture = &msgs;
  OrionCompileResult r;
  cr_assert_not(orion_compile_file(TINY, &o, "/nonexistent/x.anepkg", &r, &d));
  cr_assert_eq(r.status, ORION_COMPILE_OPTIONS_ERROR);
  cr_assert_str_eq(text_of(&msgs),
                   "orionc: error: --train makes the training contract; it cannot also be given (--train-contract)\n");
  orion_compile_result_free(&r);
  sb_free(&msgs);
}

Test(train_compile, train_args_are_recorded) {
  OrionCompileArgs a;
  orion_compile_args_init(&a);
  char err[256];
  cr_assert_eq(orion_compile_args_parse(&a, "--train=main", err, sizeof err), ORION_ARG_TAKEN);
  cr_assert_eq(orion_compile_args_parse(&a, "--frozen=ln.*", err, sizeof err), ORION_ARG_TAKEN);
  cr_assert_eq(orion_compile_args_parse(&a, "--trainable=*.weight", err, sizeof err), ORION_ARG_TAKEN);
  cr_assert(a.options.train);
  cr_assert_str_eq(a.options.train_function, "main");
  cr_assert_eq(a.options.autodiff.nfrozen, 1);
  cr_assert_str_eq(a.options.autodiff.frozen[0], "ln.*");
  cr_assert_eq(a.options.autodiff.ntrainable, 1);
  cr_assert_str_eq(a.options.autodiff.trainable[0], "*.weight");
  cr_assert_eq(a.options.ncompile_args, 3);
  cr_assert_str_eq(a.options.compile_args[1], "--frozen=ln.*");
  cr_assert_eq(orion_compile_args_parse(&a, "--frozen=", err, sizeof err), ORION_ARG_INVALID);
  cr_assert_str_eq(err, "--frozen needs a glob (a param name pattern, e.g. 'layers.*')");
  orion_compile_args_free(&a);
}

/* Exact gelu is compiled into its tanh form (gelu-tanh, in every package), so
 * its gradient is that form's too: tiny.oir with an exact gelu trains as with
 * gelu(mode="tanh"), to the rounding (the erf derivative differs by ~1e-3). */
Test(train_compile, exact_gelu_gradient_is_that_of_the_compiled_form) {
  char *text, *exact;
  size_t len;
  const char *err;
  cr_assert(read_file(TINY, 1 << 20, &text, &len, &err), "%s", err);
  const char *at = strstr(text, "gelu(h, mode=\"tanh\")");
  cr_assert_not_null(at);
  exact = xmalloc(len + 1);
  snprintf(exact, len + 1, "%.*sgelu(h)%s", (int)(at - text), text, at + strlen("gelu(h, mode=\"tanh\")"));
  Compiled ct = compile_train(NULL, text, NULL, NULL, 0, "tanh.anepkg");
  Compiled ce = compile_train(NULL, exact, NULL, NULL, 0, "exact.anepkg");
  cr_assert(ct.ok && ce.ok, "%s%s", text_of(&ct.msgs), text_of(&ce.msgs));
  Package pt, pe;
  Diag d;
  diag_init(&d, NULL);
  cr_assert(package_read(ct.path, &pt, &d) && package_read(ce.path, &pe, &d));
  SourceSet st, se;
  srcset_init(&st);
  srcset_init(&se);
  OrionProgram *prt, *pre;
  OrionTensor *gt = package_grads(ct.path, &pt, &st, &prt), *ge = package_grads(ce.path, &pe, &se, &pre);
  uint32_t bt = orion_function_find(prt, pt.training->backward), be = orion_function_find(pre, pe.training->backward);
  cr_assert_eq(pt.training->ngradients, 6);
  cr_assert_eq(pe.training->ngradients, 6);
  for (uint32_t g = 0; g < pt.training->ngradients; g++) {
    const char *name = pt.training->gradients[g].output;
    uint32_t it = find_tensor(prt, bt, true, name), ie = find_tensor(pre, be, true, name);
    uint64_t n = orion_output(prt, bt, it)->bytes / sizeof(float);
    cr_assert_eq(orion_output(pre, be, ie)->bytes, n * sizeof(float));
    const float *a = gt[it].data, *b = ge[ie].data;
    double scale = 0;
    for (uint64_t k = 0; k < n; k++) scale = fmax(scale, fabs((double)a[k]));
    /* the same ops in the same order: fp32 rounding at most (measured: equal) */
    for (uint64_t k = 0; k < n; k++)
      cr_assert_leq(fabs((double)a[k] - (double)b[k]), 1e-6 * scale, "%s[%llu]: tanh %.9g, exact %.9g", name,
                    (unsigned long long)k, (double)a[k], (double)b[k]);
  }
  tensors_free(gt, orion_output_count(prt, bt));
  tensors_free(ge, orion_output_count(pre, be));
  orion_close(prt);
  orion_close(pre);
  srcset_free(&st);
  srcset_free(&se);
  package_free(&pt);
  package_free(&pe);
  compiled_free(&ct);
  compiled_free(&ce);
  free(exact);
  free(text);
}
