/*
 * What the training loop sets up before its first step: the working copy of
 * the package, the package identity, the tensors of the forward and backward
 * functions and their bindings, the fixed --input tensors and the fp32
 * master weights. The loop itself is loop.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loop_internal.h"
#include "orion/npy.h"
#include "orion/hash.h"

void orion_train_package_id(const Package *pkg, char out[24]) {
  StrBuf sb;
  sb_init(&sb);
  sb_printf(&sb, "source %s\nlayout %s\n", pkg->source_sha256, pkg->weights_layout_xxh64);
  for (uint32_t i = 0; i < pkg->nfunctions; i++) sb_printf(&sb, "mil %s %s\n", pkg->functions[i].name, pkg->functions[i].mil_xxh64);
  char hex[17];
  xxh64_hex(sb.data, sb.len, hex);
  snprintf(out, 24, "xxh64:%s", hex);
  sb_free(&sb);
}

static bool copy_file(const char *from, const char *to, const char **err) {
  char *data;
  size_t len;
  if (!read_file(from, SIZE_MAX / 2, &data, &len, err)) return false;
  int fd = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  bool ok = fd >= 0;
  for (size_t off = 0; ok && off < len;) {
    ssize_t w = write(fd, data + off, len - off);
    if (w < 0 && errno == EINTR) continue;
    ok = w > 0;
    if (ok) off += (size_t)w;
  }
  if (fd >= 0 && close(fd) != 0) ok = false;
  if (!ok) *err = strerror(errno);
  free(data);
  return ok;
}

/* The package's files (manifest, MIL files, weight file) into work_dir/NAME,
 * not synced: the copy is the run's scratch, checkpoints are its record. */
bool loop_copy_package(const Package *pkg, const char *work_dir, char **out, Diag *d) {
  /* The package's own name, as the last component of its path. */
  char *path = xstrdup(pkg->path);
  size_t n = strlen(path);
  while (n > 1 && path[n - 1] == '/') path[--n] = '\0';
  const char *slash = strrchr(path, '/');
  char *name = xstrdup(slash ? slash + 1 : path);
  free(path);
  if (!name[0] || !strcmp(name, ".") || !strcmp(name, "..")) { /* a path without a name of its own */
    free(name);
    name = xstrdup("package.anepkg");
  }
  StrBuf dst;
  sb_init(&dst);
  sb_printf(&dst, "%s/%s", work_dir, name);
  free(name);
  StrBuf a, b;
  sb_init(&a);
  sb_init(&b);
  const char *err = NULL;
  bool ok = mkdir(dst.data, 0755) == 0;
  if (!ok) err = strerror(errno);
  sb_printf(&b, "%s/weights", dst.data);
  if (ok && mkdir(b.data, 0755) != 0) ok = false, err = strerror(errno);
  for (uint32_t i = 0; ok && i <= pkg->nfunctions + 1; i++) {
    const char *rel = i < pkg->nfunctions ? pkg->functions[i].mil_file : i == pkg->nfunctions ? PACKAGE_WEIGHTS
                                                                                                : PACKAGE_MANIFEST;
    a.len = b.len = 0;
    sb_printf(&a, "%s/%s", pkg->path, rel);
    sb_printf(&b, "%s/%s", dst.data, rel);
    ok = copy_file(a.data, b.data, &err);
  }
  if (!ok) diag_error(d, (SrcSpan){0}, "cannot make the working copy '%s': %s", dst.data, err ? err : "unknown error");
  sb_free(&a);
  sb_free(&b);
  if (!ok) {
    sb_free(&dst);
    return false;
  }
  *out = dst.data;
  return true;
}

void loop_tensor_alloc(OrionTensor *t, const OrionTensorInfo *info) {
  t->dtype = info->dtype;
  t->rank = info->rank;
  size_t count = 1;
  for (uint32_t i = 0; i < info->rank; i++) t->dims[i] = info->dims[i], count *= (size_t)info->dims[i];
  size_t size = orion_tensor_dtype_size(info->dtype);
  t->data = xcalloc(count ? count : 1, size ? size : 1);
}

static bool is_int_batch(const OrionTensorInfo *t, int64_t *b, int64_t *s) {
  if (t->dtype != MIL_DT_INT32 || t->rank != 2) return false;
  *b = t->dims[0];
  *s = t->dims[1];
  return true;
}

uint32_t loop_input_index(const OrionProgram *p, uint32_t fn, const char *name) {
  for (uint32_t i = 0; i < orion_input_count(p, fn); i++)
    if (!strcmp(orion_input(p, fn, i)->name, name)) return i;
  return UINT32_MAX;
}

uint32_t loop_output_index(const OrionProgram *p, uint32_t fn, const char *name) {
  for (uint32_t i = 0; i < orion_output_count(p, fn); i++)
    if (!strcmp(orion_output(p, fn, i)->name, name)) return i;
  return UINT32_MAX;
}

/* With --lora, is the forward input `name` one of the adapters that train? */
static bool is_adapter_input(const Loop *L, const char *name) {
  if (!L->lora) return false;
  size_t n = strlen(name);
  for (uint32_t a = 0; a < L->contract->nadapters; a++) {
    const char *m = L->contract->adapters[a].module;
    size_t k = strlen(m);
    if (n == k + 7 && !strncmp(name, m, k) && (!strcmp(name + k, ".lora_A") || !strcmp(name + k, ".lora_B")))
      return true;
  }
  return false;
}

/* The forward's inputs: tokens and targets from the data, adapters (--lora) from their masters, the others from
 * --input files (each one, of exactly the input's dtype and shape). */
static bool bind_forward_inputs(Loop *L, const OrionTrainOptions *o, Diag *d) {
  const OrionProgram *p = L->prog;
  uint32_t n = orion_input_count(p, L->fwd);
  L->fwd_in = xcalloc(n + 1, sizeof *L->fwd_in);
  L->nfwd_in = n;
  L->tokens_in = loop_input_index(p, L->fwd, "tokens");
  L->targets_in = loop_input_index(p, L->fwd, "targets");
  if (L->tokens_in == UINT32_MAX || L->targets_in == UINT32_MAX ||
      !is_int_batch(orion_input(p, L->fwd, L->tokens_in), &L->batch, &L->seq)) {
    diag_error(d, (SrcSpan){0}, "'%s': the forward function '%s' needs the inputs 'tokens' and 'targets', int32 [B, T] "
               "each, that the training data feeds", o->package, L->contract->forward);
    return false;
  }
  int64_t b2, s2;
  if (!is_int_batch(orion_input(p, L->fwd, L->targets_in), &b2, &s2) || b2 != L->batch || s2 != L->seq) {
    diag_error(d, (SrcSpan){0}, "'%s': the forward input 'targets' must be int32 [%lld, %lld] like 'tokens'",
               o->package, (long long)L->batch, (long long)L->seq);
    return false;
  }
  for (uint32_t k = 0; k < o->ninputs; k++) {
    uint32_t i = loop_input_index(p, L->fwd, o->inputs[k].name);
    bool adapter = i != UINT32_MAX && is_adapter_input(L, orion_input(p, L->fwd, i)->name);
    if (i == UINT32_MAX || i == L->tokens_in || i == L->targets_in || adapter) {
      diag_error(d, (SrcSpan){0}, "--input %s: %s", o->inputs[k].name,
                 i == UINT32_MAX ? "the forward function has no such input"
                 : adapter       ? "this adapter input trains (its start values: --adapter FILE.safetensors)"
                                 : "this input comes from --data");
      return false;
    }
    if (L->fwd_in[i].data) {
      diag_error(d, (SrcSpan){0}, "--input %s is given twice", o->inputs[k].name);
      return false;
    }
    NpyArray a;
    if (!npy_read(o->inputs[k].file, &a, d)) return false;
    const OrionTensorInfo *info = orion_input(p, L->fwd, i);
    bool same = a.dtype == info->dtype && a.rank == info->rank;
    for (uint32_t r = 0; same && r < a.rank; r++) same = a.dims[r] == info->dims[r];
    if (!same) {
      diag_error(d, (SrcSpan){0}, "--input %s=%s: the array does not have the input's dtype and shape", o->inputs[k].name,
                 o->inputs[k].file);
      npy_free(&a);
      return false;
    }
    L->fwd_in[i] = (OrionTensor){.dtype = info->dtype, .rank = info->rank, .data = a.data};
    memcpy(L->fwd_in[i].dims, info->dims, sizeof info->dims);
  }
  for (uint32_t i = 0; i < n; i++) {
    if (L->fwd_in[i].data) continue;
    if (i != L->tokens_in && i != L->targets_in && !is_adapter_input(L, orion_input(p, L->fwd, i)->name)) {
      diag_error(d, (SrcSpan){0}, "the forward input '%s' needs a value: --input %s=FILE.npy",
                 orion_input(p, L->fwd, i)->name, orion_input(p, L->fwd, i)->name);
      return false;
    }
    loop_tensor_alloc(&L->fwd_in[i], orion_input(p, L->fwd, i));
  }
  return true;
}

/* The backward's inputs point at the forward's buffers (nothing is copied)
 * or at the loss scale. */
static bool bind_backward_inputs(Loop *L, Diag *d) {
  const OrionProgram *p = L->prog;
  uint32_t n = orion_input_count(p, L->bwd);
  L->bwd_in = xcalloc(n + 1, sizeof *L->bwd_in);
  L->nbwd_in = n;
  const PkgTraining *t = L->contract;
  for (uint32_t k = 0; k < t->ninputs; k++) {
    uint32_t i = loop_input_index(p, L->bwd, t->inputs[k].input);
    const OrionTensor *src = &L->scale_tensor;
    if (t->inputs[k].from == PKG_TRAIN_FROM_OUTPUT) {
      src = loop_output_tensor(L, false, t->inputs[k].name);
      if (!src) ice("the contract was checked against the manifest");
    }
    else if (t->inputs[k].from == PKG_TRAIN_FROM_INPUT) src = &L->fwd_in[loop_input_index(p, L->fwd, t->inputs[k].name)];
    if (i == UINT32_MAX) ice("the contract was checked against the manifest");
    L->bwd_in[i] = *src;
  }
  for (uint32_t i = 0; i < n; i++)
    if (!L->bwd_in[i].data) {
      diag_error(d, (SrcSpan){0}, "the backward input '%s' has no source", orion_input(p, L->bwd, i)->name);
      return false;
    }
  return true;
}

static const PkgTensor *manifest_weight(const PkgFunction *f, const char *name) {
  for (uint32_t i = 0; i < f->nweights; i++)
    if (!strcmp(f->weights[i].name, name)) return &f->weights[i];
  return NULL;
}

/* Each step writes a param's values into its blob: a blob that another
 * weight of the forward reads too (weights compiled from one source tensor
 * are stored once) would change that weight as well. */
static bool params_own_their_storage(const Loop *L, Diag *d) {
  for (uint32_t k = 0; k < L->nparams; k++) {
    const OrionWeight *mine = orion_weight(L->prog, L->fwd, L->writes[k].weight);
    for (uint32_t i = 0; i < orion_weight_count(L->prog, L->fwd); i++) {
      const OrionWeight *w = orion_weight(L->prog, L->fwd, i);
      if (i == L->writes[k].weight || w->data != mine->data) continue;
      diag_error(d, (SrcSpan){0}, "the trainable param '%s' shares its storage with the weight '%s' (they were "
                 "compiled from one source tensor), so training it would change both; compile with --no-dedup",
                 L->params[k].name, w->name);
      return false;
    }
  }
  return true;
}

/* The fp32 masters start as the package's weights (widened exactly). */
static bool init_params(Loop *L, Diag *d) {
  const PkgTraining *t = L->contract;
  const PkgFunction *f = package_function(&L->pkg, t->forward);
  L->nparams = t->nparams;
  L->params = xcalloc(t->nparams, sizeof *L->params);
  L->pinfo = xcalloc(t->nparams, sizeof *L->pinfo);
  L->writes = xcalloc(t->nparams, sizeof *L->writes);
  for (uint32_t k = 0; k < t->nparams; k++) {
    const PkgTensor *w = manifest_weight(f, t->params[k]);
    if (!w || (w->dtype != ORION_DT_FP16 && w->dtype != ORION_DT_FP32)) {
      diag_error(d, (SrcSpan){0}, "the trainable param '%s' is not an fp16 or fp32 weight", t->params[k]);
      return false;
    }
    const OrionWeight *ow = NULL;
    uint32_t wi = 0;
    for (; wi < orion_weight_count(L->prog, L->fwd); wi++)
      if (!strcmp(orion_weight(L->prog, L->fwd, wi)->name, w->mil_name)) {
        ow = orion_weight(L->prog, L->fwd, wi);
        break;
      }
    if (!ow) {
      diag_error(d, (SrcSpan){0}, "the trainable param '%s' (MIL '%s') has no BLOBFILE weight in the forward program",
                 t->params[k], w->mil_name);
      return false;
    }
    TrainParam *p = &L->params[k];
    ParamInfo *pi = &L->pinfo[k];
    p->name = t->params[k];
    p->rank = w->rank;
    memcpy(p->dims, w->dims, sizeof p->dims);
    p->count = (size_t)(w->bytes / orion_dtype_size(w->dtype));
    p->value = xcalloc(p->count ? p->count : 1, sizeof(float));
    p->grad = xcalloc(p->count ? p->count : 1, sizeof(float));
    pi->dtype = w->dtype;
    L->writes[k] = (OrionWeightValues){.fn = L->fwd, .weight = wi, .values = p->value, .label = p->name};
    weights_convert_floats(ow->data, w->dtype, p->count, ORION_DT_FP32, p->value);
    for (uint32_t g = 0; g < t->ngradients; g++)
      if (!strcmp(t->gradients[g].param, p->name)) {
        pi->grad = loop_output_tensor(L, true, t->gradients[g].output);
        if (!pi->grad) ice("the contract was checked against the manifest");
      }
  }
  return params_own_their_storage(L, d);
}

bool loop_setup(Loop *L, const OrionTrainOptions *o, Diag *d) {
  if (!package_read(o->package, &L->pkg, d)) return false;
  if (!L->pkg.training) {
    diag_error(d, (SrcSpan){0}, "'%s' has no training contract (Training in its manifest): compile the model with "
               "orionc --train, or give the forward and backward with orionc --train-contract FILE.json",
               o->package);
    return false;
  }
  L->contract = L->pkg.training;
  L->lora = L->contract->nadapters > 0;
  if (o->lora != L->lora) {
    if (o->lora)
      diag_error(d, (SrcSpan){0}, "'%s' has no adapter gradients (no Adapters in its training contract): train --lora "
                 "needs a package compiled with orionc --train --lora=PATTERN:RANK[:ALPHA]", o->package);
    else
      diag_error(d, (SrcSpan){0}, "'%s' trains LoRA adapters (orionc --train --lora), not its weights: use orion-run "
                 "train --lora", o->package);
    return false;
  }
  if (o->adapter_init && !o->lora) {
    diag_error(d, (SrcSpan){0}, "--adapter (the adapters' start values) goes with --lora");
    return false;
  }
  if (!L->lora ? o->export_adapter != NULL : o->export_path != NULL) {
    diag_error(d, (SrcSpan){0}, "%s", L->lora ? "--export writes trained weights; with --lora the adapters leave through "
               "--export-adapter DIR" : "--export-adapter DIR goes with --lora");
    return false;
  }
  orion_train_package_id(&L->pkg, L->package_id);
  if (!loop_copy_package(&L->pkg, o->work_dir, &L->work, d)) return false;
  OrionOpenOptions oo = ORION_OPEN_OPTIONS_DEFAULT;
  oo.writable_weights = true; /* the working copy: each step's weights are written into its mapping */
  L->prog = orion_open(L->work, &oo, d);
  if (!L->prog) return false;
  L->fwd = orion_function_find(L->prog, L->contract->forward);
  L->bwd = orion_function_find(L->prog, L->contract->backward);
  L->owns_backend = !o->opened_backend;
  L->backend = o->opened_backend ? o->opened_backend : orion_backend_open(o->backend ? o->backend : "cpu", &o->backend_options, d);
  if (!L->backend) return false;
  OrionPrepareOptions po = {.numerics = o->numerics, .profile = o->profile};
  L->fwd_exec = orion_backend_prepare(L->backend, L->prog, L->fwd, &po, d);
  L->bwd_exec = L->fwd_exec ? orion_backend_prepare(L->backend, L->prog, L->bwd, &po, d) : NULL;
  if (!L->bwd_exec) return false;
  uint32_t nout = orion_output_count(L->prog, L->fwd);
  L->fwd_out = xcalloc(nout, sizeof *L->fwd_out);
  for (uint32_t i = 0; i < nout; i++) loop_tensor_alloc(&L->fwd_out[i], orion_output(L->prog, L->fwd, i));
  L->loss_out = loop_output_index(L->prog, L->fwd, L->contract->loss);
  uint32_t nbo = orion_output_count(L->prog, L->bwd);
  L->bwd_out = xcalloc(nbo, sizeof *L->bwd_out);
  L->nbwd_out = nbo;
  for (uint32_t i = 0; i < nbo; i++) loop_tensor_alloc(&L->bwd_out[i], orion_output(L->prog, L->bwd, i));
  L->nfwd_out = nout;
  L->scale_tensor = (OrionTensor){.dtype = MIL_DT_FP32, .rank = 0, .data = &L->scale_value};
  if (!bind_forward_inputs(L, o, d) || !bind_backward_inputs(L, d)) return false;
  return (L->lora ? loop_lora_init(L, o, d) : init_params(L, d)) && loop_rows_setup(L, d);
}

void loop_teardown(Loop *L) {
  orion_exec_release(L->fwd_exec);
  orion_exec_release(L->bwd_exec);
  if (L->owns_backend) orion_backend_close(L->backend);
  orion_close(L->prog);
  for (uint32_t i = 0; i < L->nfwd_in; i++) free(L->fwd_in[i].data);
  for (uint32_t i = 0; i < L->nfwd_out; i++) free(L->fwd_out[i].data);
  for (uint32_t i = 0; i < L->nbwd_out; i++) free(L->bwd_out[i].data);
  loop_joins_free(&L->fwd_joins);
  loop_joins_free(&L->bwd_joins);
  free(L->fwd_in);
  free(L->fwd_out);
  free(L->bwd_in);
  free(L->bwd_out);
  for (uint32_t k = 0; k < L->nparams; k++) {
    free(L->params[k].value);
    free(L->params[k].grad);
  }
  free(L->params);
  free(L->pinfo);
  for (uint32_t k = 0; L->adapter_names && k < L->nparams; k++) free(L->adapter_names[k]);
  free(L->adapter_names);
  free(L->rows);
  free(L->writes);
  free(L->fits);
  train_data_free(L->data);
  train_data_free(L->eval);
  train_optimizer_free(L->opt);
  free(L->work);
  package_free(&L->pkg);
}
