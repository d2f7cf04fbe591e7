/*
 * The training contract of a package (Manifest.plist's Training key): the
 * checks that tie it to the functions' signatures, shared by the manifest
 * reader and, through it, by the compiler before it writes a package.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "orion/manifest.h"

const PkgFunction *package_function(const Package *pkg, const char *name) {
  for (uint32_t i = 0; i < pkg->nfunctions; i++)
    if (!strcmp(pkg->functions[i].name, name)) return &pkg->functions[i];
  return NULL;
}

/* A refusal of the contract: at the entry's element of the manifest when it
 * was read from a file ("PATH:LINE:COL: error: manifest: Training: ..."),
 * else "WHERE: manifest: Training: ..." (a contract being written, or
 * manifest text). */
static void refuse(Diag *d, const char *where, PkgPos at, const char *fmt, ...) ORION_PRINTF(4, 5);
static void refuse(Diag *d, const char *where, PkgPos at, const char *fmt, ...) {
  StrBuf sb;
  sb_init(&sb);
  va_list ap;
  va_start(ap, fmt);
  sb_vprintf(&sb, fmt, ap);
  va_end(ap);
  if (at.line) diag_report_line(d, DIAG_ERROR, where, at.line, at.col, "manifest: Training: %s", sb.data);
  else diag_error(d, (SrcSpan){0}, "%s: manifest: Training: %s", where, sb.data);
  sb_free(&sb);
}

/* A trainable param's position (params_at is only there when read from a file). */
#define PARAM_AT(t, p) ((t)->params_at ? (t)->params_at[p] : (PkgPos){0})

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

const PkgGroup *package_output_group(const PkgFunction *f, const char *name) {
  for (uint32_t i = 0; i < f->ngroups; i++)
    if (!strcmp(f->groups[i].name, name)) return &f->groups[i];
  return NULL;
}

/* The whole of a group: its first part with the parts' extents along the
 * axis added up; false if the parts do not join (dtype, rank, other dims). */
static bool group_whole(const PkgFunction *f, const PkgGroup *g, PkgTensor *whole) {
  const PkgTensor *first = g->nparts ? find(f->outputs, f->noutputs, g->parts[0]) : NULL;
  if (!first || g->axis >= first->rank) return false;
  *whole = *first;
  whole->name = g->name;
  whole->dims[g->axis] = 0;
  whole->bytes = 0;
  for (uint32_t k = 0; k < g->nparts; k++) {
    const PkgTensor *t = find(f->outputs, f->noutputs, g->parts[k]);
    if (!t || t->dtype != first->dtype || t->rank != first->rank) return false;
    for (uint32_t r = 0; r < t->rank; r++)
      if (r != g->axis && t->dims[r] != first->dims[r]) return false;
    whole->dims[g->axis] += t->dims[g->axis];
    whole->bytes += t->bytes;
  }
  return true;
}

/* The output `name` of f, or the whole of f's output group `name` in
 * *whole (split-concat splits an output into a group of parts; the contract
 * keeps naming the value). NULL if neither; *bad when the group's parts do
 * not join. */
static const PkgTensor *output_or_group(const PkgFunction *f, const char *name, PkgTensor *whole, bool *bad) {
  *bad = false;
  const PkgTensor *t = find(f->outputs, f->noutputs, name);
  if (t) return t;
  const PkgGroup *g = package_output_group(f, name);
  if (!g) return NULL;
  if (group_whole(f, g, whole)) return whole;
  *bad = true;
  return NULL;
}

static bool group_refused(const PkgFunction *f, const char *name, PkgPos at, const char *where, Diag *d) {
  const PkgGroup *g = package_output_group(f, name);
  refuse(d, where, at, "the output group '%s' of the function '%s' has parts that do "
             "not join along axis %u", name, f->name, g->axis);
  return false;
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
      refuse(d, where, in->at, "'%s' is not an input of the backward function '%s'",
                 in->input, bwd->name);
      return false;
    }
    for (uint32_t k = 0; k < i; k++)
      if (!strcmp(t->inputs[k].input, in->input)) {
        refuse(d, where, in->at, "the backward input '%s' has two sources", in->input);
        return false;
      }
    const PkgTensor *from = NULL;
    if (in->from == PKG_TRAIN_FROM_LOSS_SCALE) {
      if (to->dtype != ORION_DT_FP32 || to->rank != 0) {
        type_text(a, sizeof a, to);
        refuse(d, where, in->at, "the backward input '%s' takes the loss scale, an fp32[] "
                   "scalar, but is %s", in->input, a);
        return false;
      }
      continue;
    }
    bool out = in->from == PKG_TRAIN_FROM_OUTPUT, bad = false;
    PkgTensor whole;
    from = out ? output_or_group(fwd, in->name, &whole, &bad) : find(fwd->inputs, fwd->ninputs, in->name);
    if (bad) return group_refused(fwd, in->name, in->at, where, d);
    if (!from) {
      refuse(d, where, in->at, "the backward input '%s' comes from '%s', which is not an %s "
                 "of the forward function '%s'", in->input, in->name, out ? "output" : "input", fwd->name);
      return false;
    }
    if (!same_type(from, to)) {
      type_text(a, sizeof a, to);
      type_text(b, sizeof b, from);
      refuse(d, where, in->at, "the backward input '%s' is %s but the forward %s '%s' it "
                 "comes from is %s", in->input, a, out ? "output" : "input", in->name, b);
      return false;
    }
  }
  for (uint32_t k = 0; k < bwd->ninputs; k++) {
    bool fed = false;
    for (uint32_t i = 0; i < t->ninputs && !fed; i++) fed = !strcmp(t->inputs[i].input, bwd->inputs[k].name);
    if (!fed) {
      refuse(d, where, t->at, "the backward input '%s' has no source",
                 bwd->inputs[k].name);
      return false;
    }
  }
  return true;
}

/* The tensor gradient g belongs to: a weight of the forward (a trainable
 * param) or, for LoRA training, one of its adapter inputs; NULL after
 * reporting why neither. */
static const PkgTensor *gradient_target(const PkgFunction *fwd, const PkgTraining *t, const PkgTrainGradient *gr,
                                        const char *where, Diag *d) {
  if (!gr->input) {
    bool trainable = false;
    for (uint32_t p = 0; p < t->nparams && !trainable; p++) trainable = !strcmp(t->params[p], gr->param);
    if (!trainable) {
      refuse(d, where, gr->at, "the gradient '%s' belongs to '%s', which is not a trainable "
                 "param", gr->output, gr->param);
      return NULL;
    }
    return find(fwd->weights, fwd->nweights, gr->param); /* every trainable param is a weight: checked before */
  }
  bool adapter = false;
  size_t n = strlen(gr->param);
  for (uint32_t a = 0; a < t->nadapters && !adapter; a++) {
    size_t m = strlen(t->adapters[a].module);
    adapter = n == m + 7 && !strncmp(gr->param, t->adapters[a].module, m) &&
              (!strcmp(gr->param + m, ".lora_A") || !strcmp(gr->param + m, ".lora_B"));
  }
  const PkgTensor *in = adapter ? find(fwd->inputs, fwd->ninputs, gr->param) : NULL;
  if (!in)
    refuse(d, where, gr->at, "the gradient '%s' belongs to '%s', which is not the lora_A or "
               "lora_B input of an adapter in Adapters", gr->output, gr->param);
  return in;
}

/* Each adapter: its two inputs, of the ranks it records (A [rank, in], B [out, rank]), each with a gradient. */
static bool check_adapters(const PkgFunction *fwd, const PkgTraining *t, const char *where, Diag *d) {
  for (uint32_t a = 0; a < t->nadapters; a++) {
    const PkgTrainAdapter *ad = &t->adapters[a];
    for (int which = 0; which < 2; which++) {
      char name[512];
      snprintf(name, sizeof name, "%s.lora_%c", ad->module, which ? 'B' : 'A');
      const PkgTensor *in = find(fwd->inputs, fwd->ninputs, name);
      if (!in || in->rank != 2 || in->dims[which ? 1 : 0] != (int64_t)ad->rank) {
        refuse(d, where, ad->at, "the adapter '%s' of rank %u needs the forward input '%s' "
                   "[%s]", ad->module, ad->rank, name, which ? "out, rank" : "rank, in");
        return false;
      }
      bool has = false;
      for (uint32_t g = 0; g < t->ngradients && !has; g++) has = t->gradients[g].input && !strcmp(t->gradients[g].param, name);
      if (!has) {
        refuse(d, where, ad->at, "the adapter input '%s' has no gradient", name);
        return false;
      }
    }
    for (uint32_t k = 0; k < a; k++)
      if (!strcmp(t->adapters[k].module, ad->module)) {
        refuse(d, where, ad->at, "the adapter '%s' is listed twice", ad->module);
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
      refuse(d, where, PARAM_AT(t, p), "the trainable param '%s' is not a weight of the forward "
                 "function '%s'", t->params[p], fwd->name);
      return false;
    }
    for (uint32_t k = 0; k < p; k++)
      if (!strcmp(t->params[k], t->params[p])) {
        refuse(d, where, PARAM_AT(t, p), "the trainable param '%s' is listed twice", t->params[p]);
        return false;
      }
  }
  for (uint32_t g = 0; g < t->ngradients; g++) {
    const PkgTrainGradient *gr = &t->gradients[g];
    PkgTensor whole;
    bool bad;
    const PkgTensor *out = output_or_group(bwd, gr->output, &whole, &bad);
    if (bad) return group_refused(bwd, gr->output, gr->at, where, d);
    if (!out) {
      refuse(d, where, gr->at, "the gradient '%s' is not an output of the backward function "
                 "'%s'", gr->output, bwd->name);
      return false;
    }
    const PkgTensor *w = gradient_target(fwd, t, gr, where, d);
    if (!w) return false;
    for (uint32_t k = 0; k < g; k++)
      if (!strcmp(t->gradients[k].param, gr->param)) {
        refuse(d, where, gr->at, "the %s '%s' has two gradients, '%s' and '%s'",
                   gr->input ? "adapter input" : "param", gr->param, t->gradients[k].output, gr->output);
        return false;
      }
    PkgTensor want = *w;
    want.dtype = ORION_DT_FP32;
    if (!same_type(out, &want)) {
      type_text(a, sizeof a, out);
      type_text(b, sizeof b, &want);
      refuse(d, where, gr->at, "the gradient '%s' is %s but the %s '%s' needs %s",
                 gr->output, a, gr->input ? "adapter input" : "param", gr->param, b);
      return false;
    }
  }
  for (uint32_t p = 0; p < t->nparams; p++) {
    bool has = false;
    for (uint32_t g = 0; g < t->ngradients && !has; g++) has = !t->gradients[g].input && !strcmp(t->gradients[g].param, t->params[p]);
    for (uint32_t r = 0; r < t->nrows && !has; r++) has = !strcmp(t->rows[r].param, t->params[p]); /* rows alone */
    if (!has) {
      refuse(d, where, PARAM_AT(t, p), "the trainable param '%s' has no gradient", t->params[p]);
      return false;
    }
  }
  return check_adapters(fwd, t, where, d);
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
      refuse(d, where, r->at, "the row gradient '%s' (rows of '%s' by '%s') %s",
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
      refuse(d, where, r->at, "the row gradient '%s' is %s but rows of '%s' by '%s' are %s", r->output, a, r->param, r->indices, b);
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
    PkgTensor whole;
    bool bad;
    const PkgTensor *o = output_or_group(fwd, t->inputs[i].name, &whole, &bad);
    if (o && !earlier) bytes += o->bytes;
  }
  return bytes;
}

bool package_training_check(const Package *pkg, const PkgTraining *t, const char *where, Diag *d) {
  const PkgFunction *fwd = package_function(pkg, t->forward), *bwd = package_function(pkg, t->backward);
  const char *missing = !fwd ? t->forward : !bwd ? t->backward : NULL;
  if (missing) {
    refuse(d, where, !fwd ? t->forward_at : t->backward_at, "the %s function '%s' is not a function of the package",
               !fwd ? "forward" : "backward", missing);
    return false;
  }
  if (fwd == bwd) {
    refuse(d, where, t->backward_at, "the forward and backward functions are both '%s'",
               fwd->name);
    return false;
  }
  const PkgTensor *loss = find(fwd->outputs, fwd->noutputs, t->loss);
  if (!loss) {
    refuse(d, where, t->loss_at, "the loss '%s' is not an output of the forward function '%s'", t->loss, fwd->name);
    return false;
  }
  if (loss->dtype != ORION_DT_FP32 || loss->rank != 0) {
    char a[96];
    type_text(a, sizeof a, loss);
    refuse(d, where, t->loss_at, "the loss '%s' is %s; it must be an fp32[] scalar",
               t->loss, a);
    return false;
  }
  if (t->nparams == 0 && t->nadapters == 0) {
    refuse(d, where, t->at, "there are no trainable params");
    return false;
  }
  if (t->nparams && t->nadapters) {
    refuse(d, where, t->at, "LoRA training (Adapters) freezes every param, but "
               "TrainableParams lists %u", t->nparams);
    return false;
  }
  if (!check_inputs(fwd, bwd, t, where, d) || !check_gradients(fwd, bwd, t, where, d) || !check_rows(fwd, bwd, t, where, d))
    return false;
  bool has_tokens = find(fwd->inputs, fwd->ninputs, "tokens") != NULL;
  if (has_tokens && t->vocabulary == 0) {
    refuse(d, where, t->at, "the forward function has a 'tokens' input but the contract "
               "has no Vocabulary");
    return false;
  }
  uint64_t saved = package_training_saved_bytes(pkg, t);
  if (saved != t->saved_bytes) {
    refuse(d, where, t->saved_bytes_at, "SavedBytes is %llu but the forward outputs the backward reads "
               "hold %llu bytes", (unsigned long long)t->saved_bytes, (unsigned long long)saved);
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
  free(t->params_at);
  for (uint32_t i = 0; i < t->nadapters; i++) free(t->adapters[i].module);
  free(t->adapters);
  free(t);
}
