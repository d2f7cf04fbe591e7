/*
 * The training contract of a package (Manifest.plist's Training key): the
 * checks that tie it to the functions' signatures, shared by the manifest
 * reader and, through it, by the compiler before it writes a package.
 */
#include <stdlib.h>
#include <string.h>

#include "orion/manifest.h"

const PkgFunction *package_function(const Package *pkg, const char *name) {
  for (uint32_t i = 0; i < pkg->nfunctions; i++)
    if (!strcmp(pkg->functions[i].name, name)) return &pkg->functions[i];
  return NULL;
}

static const PkgTensor *find(const PkgTensor *t, uint32_t n, const char *name) {
  for (uint32_t i = 0; i < n; i++)
    if (!strcmp(t[i].name, name)) return &t[i];
  return NULL;
}

static void type_text(char *buf, size_t n, const PkgTensor *t) {
  size_t o = (size_t)snprintf(buf, n, "%s[", orion_dtype_name(t->dtype));
  for (uint32_t i = 0; i < t->rank && o < n; i++) o += (size_t)snprintf(buf + o, n - o, "%s%lld", i ? "," : "", (long long)t->dims[i]);
  if (o < n) snprintf(buf + o, n - o, "]");
}

static bool same_type(const PkgTensor *a, const PkgTensor *b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return false;
  for (uint32_t i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

static bool check_inputs(const PkgFunction *fwd, const PkgFunction *bwd, const PkgTraining *t, const char *where,
                         Diag *d) {
  char a[96], b[96];
  for (uint32_t i = 0; i < t->ninputs; i++) {
    const PkgTrainInput *in = &t->inputs[i];
    const PkgTensor *to = find(bwd->inputs, bwd->ninputs, in->input);
    if (!to) {
      diag_error(d, (SrcSpan){0}, "%s: manifest: Training: '%s' is not an input of the backward function '%s'", where,
                 in->input, bwd->name);
      return false;
    }
    for (uint32_t k = 0; k < i; k++)
      if (!strcmp(t->inputs[k].input, in->input)) {
        diag_error(d, (SrcSpan){0}, "%s: manifest: Training: the backward input '%s' has two sources", where, in->input);
        return false;
      }
    const PkgTensor *from = NULL;
    if (in->from == PKG_TRAIN_FROM_LOSS_SCALE) {
      if (to->dtype != ORION_DT_FP32 || to->rank != 0) {
        type_text(a, sizeof a, to);
        diag_error(d, (SrcSpan){0}, "%s: manifest: Training: the backward input '%s' takes the loss scale, an fp32[] "
                   "scalar, but is %s", where, in->input, a);
        return false;
      }
      continue;
    }
    bool out = in->from == PKG_TRAIN_FROM_OUTPUT;
    from = out ? find(fwd->outputs, fwd->noutputs, in->name) : find(fwd->inputs, fwd->ninputs, in->name);
    if (!from) {
      diag_error(d, (SrcSpan){0}, "%s: manifest: Training: the backward input '%s' comes from '%s', which is not an %s "
                 "of the forward function '%s'", where, in->input, in->name, out ? "output" : "input", fwd->name);
      return false;
    }
    if (!same_type(from, to)) {
      type_text(a, sizeof a, to);
      type_text(b, sizeof b, from);
      diag_error(d, (SrcSpan){0}, "%s: manifest: Training: the backward input '%s' is %s but the forward %s '%s' it "
                 "comes from is %s", where, in->input, a, out ? "output" : "input", in->name, b);
      return false;
    }
  }
  for (uint32_t k = 0; k < bwd->ninputs; k++) {
    bool fed = false;
    for (uint32_t i = 0; i < t->ninputs && !fed; i++) fed = !strcmp(t->inputs[i].input, bwd->inputs[k].name);
    if (!fed) {
      diag_error(d, (SrcSpan){0}, "%s: manifest: Training: the backward input '%s' has no source", where,
                 bwd->inputs[k].name);
      return false;
    }
  }
  return true;
}

static bool check_gradients(const PkgFunction *fwd, const PkgFunction *bwd, const PkgTraining *t, const char *where,
                            Diag *d) {
  char a[96], b[96];
  for (uint32_t p = 0; p < t->nparams; p++) {
    if (!find(fwd->weights, fwd->nweights, t->params[p])) {
      diag_error(d, (SrcSpan){0}, "%s: manifest: Training: the trainable param '%s' is not a weight of the forward "
                 "function '%s'", where, t->params[p], fwd->name);
      return false;
    }
    for (uint32_t k = 0; k < p; k++)
      if (!strcmp(t->params[k], t->params[p])) {
        diag_error(d, (SrcSpan){0}, "%s: manifest: Training: the trainable param '%s' is listed twice", where, t->params[p]);
        return false;
      }
  }
  for (uint32_t g = 0; g < t->ngradients; g++) {
    const PkgTrainGradient *gr = &t->gradients[g];
    const PkgTensor *out = find(bwd->outputs, bwd->noutputs, gr->output);
    if (!out) {
      diag_error(d, (SrcSpan){0}, "%s: manifest: Training: the gradient '%s' is not an output of the backward function "
                 "'%s'", where, gr->output, bwd->name);
      return false;
    }
    bool trainable = false;
    for (uint32_t p = 0; p < t->nparams && !trainable; p++) trainable = !strcmp(t->params[p], gr->param);
    if (!trainable) {
      diag_error(d, (SrcSpan){0}, "%s: manifest: Training: the gradient '%s' belongs to '%s', which is not a trainable "
                 "param", where, gr->output, gr->param);
      return false;
    }
    for (uint32_t k = 0; k < g; k++)
      if (!strcmp(t->gradients[k].param, gr->param)) {
        diag_error(d, (SrcSpan){0}, "%s: manifest: Training: the param '%s' has two gradients, '%s' and '%s'", where,
                   gr->param, t->gradients[k].output, gr->output);
        return false;
      }
    const PkgTensor *w = find(fwd->weights, fwd->nweights, gr->param);
    if (!w) continue; /* every trainable param is a weight: checked above */
    PkgTensor want = *w;
    want.dtype = ORION_DT_FP32;
    if (!same_type(out, &want)) {
      type_text(a, sizeof a, out);
      type_text(b, sizeof b, &want);
      diag_error(d, (SrcSpan){0}, "%s: manifest: Training: the gradient '%s' is %s but the param '%s' needs %s", where,
                 gr->output, a, gr->param, b);
      return false;
    }
  }
  for (uint32_t p = 0; p < t->nparams; p++) {
    bool has = false;
    for (uint32_t g = 0; g < t->ngradients && !has; g++) has = !strcmp(t->gradients[g].param, t->params[p]);
    if (!has) {
      diag_error(d, (SrcSpan){0}, "%s: manifest: Training: the trainable param '%s' has no gradient", where, t->params[p]);
      return false;
    }
  }
  return true;
}

/* A row gradient: a backward output of fp32[indices' dims + the param's row
 * dims], a trainable param, an int32 forward input; no output taken twice. */
static bool check_rows(const PkgFunction *fwd, const PkgFunction *bwd, const PkgTraining *t, const char *where,
                       Diag *d) {
  char a[96], b[96];
  for (uint32_t i = 0; i < t->nrows; i++) {
    const PkgTrainRows *r = &t->rows[i];
    const PkgTensor *out = find(bwd->outputs, bwd->noutputs, r->output);
    const PkgTensor *w = find(fwd->weights, fwd->nweights, r->param), *idx = find(fwd->inputs, fwd->ninputs, r->indices);
    bool trainable = false;
    for (uint32_t p = 0; p < t->nparams && !trainable; p++) trainable = !strcmp(t->params[p], r->param);
    bool twice = false; /* one output, one role */
    for (uint32_t k = 0; k < t->ngradients; k++) twice = twice || !strcmp(t->gradients[k].output, r->output);
    for (uint32_t k = 0; k < i; k++) twice = twice || !strcmp(t->rows[k].output, r->output);
    const char *bad = !out ? "is not an output of the backward function"
                      : twice ? "is the output of another gradient too"
                      : !trainable || !w || w->rank < 1 ? "belongs to no trainable param of rank 1 or more"
                      : !idx || idx->dtype != ORION_DT_INT32 ? "is indexed by no int32 input of the forward function"
                                                            : NULL;
    if (bad) {
      diag_error(d, (SrcSpan){0}, "%s: manifest: Training: the row gradient '%s' (rows of '%s' by '%s') %s", where,
                 r->output, r->param, r->indices, bad);
      return false;
    }
    PkgTensor want = *out;
    want.dtype = ORION_DT_FP32;
    want.rank = idx->rank + w->rank - 1;
    bool fits = want.rank <= ORION_MAX_RANK;
    for (uint32_t k = 0; fits && k < want.rank; k++) want.dims[k] = k < idx->rank ? idx->dims[k] : w->dims[k - idx->rank + 1];
    if (!fits || !same_type(out, &want)) {
      type_text(a, sizeof a, out);
      if (fits) type_text(b, sizeof b, &want);
      else snprintf(b, sizeof b, "more than %d dimensions", ORION_MAX_RANK);
      diag_error(d, (SrcSpan){0}, "%s: manifest: Training: the row gradient '%s' is %s but rows of '%s' by '%s' are %s",
                 where, r->output, a, r->param, r->indices, b);
      return false;
    }
  }
  return true;
}

uint64_t package_training_saved_bytes(const Package *pkg, const PkgTraining *t) {
  const PkgFunction *fwd = package_function(pkg, t->forward);
  uint64_t bytes = 0;
  for (uint32_t i = 0; fwd && i < t->ninputs; i++) {
    if (t->inputs[i].from != PKG_TRAIN_FROM_OUTPUT) continue;
    bool earlier = false;
    for (uint32_t k = 0; k < i && !earlier; k++)
      earlier = t->inputs[k].from == PKG_TRAIN_FROM_OUTPUT && !strcmp(t->inputs[k].name, t->inputs[i].name);
    const PkgTensor *o = find(fwd->outputs, fwd->noutputs, t->inputs[i].name);
    if (o && !earlier) bytes += o->bytes;
  }
  return bytes;
}

bool package_training_check(const Package *pkg, const PkgTraining *t, const char *where, Diag *d) {
  const PkgFunction *fwd = package_function(pkg, t->forward), *bwd = package_function(pkg, t->backward);
  const char *missing = !fwd ? t->forward : !bwd ? t->backward : NULL;
  if (missing) {
    diag_error(d, (SrcSpan){0}, "%s: manifest: Training: the %s function '%s' is not a function of the package", where,
               !fwd ? "forward" : "backward", missing);
    return false;
  }
  if (fwd == bwd) {
    diag_error(d, (SrcSpan){0}, "%s: manifest: Training: the forward and backward functions are both '%s'", where,
               fwd->name);
    return false;
  }
  const PkgTensor *loss = find(fwd->outputs, fwd->noutputs, t->loss);
  if (!loss) {
    diag_error(d, (SrcSpan){0}, "%s: manifest: Training: the loss '%s' is not an output of the forward function '%s'",
               where, t->loss, fwd->name);
    return false;
  }
  if (loss->dtype != ORION_DT_FP32 || loss->rank != 0) {
    char a[96];
    type_text(a, sizeof a, loss);
    diag_error(d, (SrcSpan){0}, "%s: manifest: Training: the loss '%s' is %s; it must be an fp32[] scalar", where,
               t->loss, a);
    return false;
  }
  if (t->nparams == 0) {
    diag_error(d, (SrcSpan){0}, "%s: manifest: Training: there are no trainable params", where);
    return false;
  }
  if (!check_inputs(fwd, bwd, t, where, d) || !check_gradients(fwd, bwd, t, where, d) || !check_rows(fwd, bwd, t, where, d))
    return false;
  bool has_tokens = find(fwd->inputs, fwd->ninputs, "tokens") != NULL;
  if (has_tokens && t->vocabulary == 0) {
    diag_error(d, (SrcSpan){0}, "%s: manifest: Training: the forward function has a 'tokens' input but the contract "
               "has no Vocabulary", where);
    return false;
  }
  uint64_t saved = package_training_saved_bytes(pkg, t);
  if (saved != t->saved_bytes) {
    diag_error(d, (SrcSpan){0}, "%s: manifest: Training: SavedBytes is %llu but the forward outputs the backward reads "
               "hold %llu bytes", where, (unsigned long long)t->saved_bytes, (unsigned long long)saved);
    return false;
  }
  return true;
}

void package_training_free(PkgTraining *t) {
  if (!t) return;
  free(t->forward);
  free(t->backward);
  free(t->loss);
  for (uint32_t i = 0; i < t->ninputs; i++) free(t->inputs[i].input), free(t->inputs[i].name);
  free(t->inputs);
  for (uint32_t i = 0; i < t->ngradients; i++) free(t->gradients[i].output), free(t->gradients[i].param);
  free(t->gradients);
  for (uint32_t i = 0; i < t->nrows; i++) free(t->rows[i].output), free(t->rows[i].param), free(t->rows[i].indices);
  free(t->rows);
  for (uint32_t i = 0; i < t->nparams; i++) free(t->params[i]);
  free(t->params);
  free(t);
}
