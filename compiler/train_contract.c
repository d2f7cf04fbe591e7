/*
 * orionc --train-contract FILE.json: a training contract written by hand (or
 * by a tool) for a package whose forward and backward functions are both in
 * the .oir source. The compiler records it in the manifest (Training), where
 * the reader checks it against the functions.
 */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "orion/compile.h"

static char *take_string(const cJSON *o, const char *key, const char *where, const char *path, bool *ok, Diag *d) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (*ok && (!cJSON_IsString(v) || !v->valuestring[0])) {
    diag_error(d, (SrcSpan){0}, "%s: %s needs '%s', a non-empty string", path, where, key);
    *ok = false;
  }
  return xstrdup(*ok ? v->valuestring : "");
}

static const cJSON *take_array(const cJSON *o, const char *key, const char *path, bool *ok, Diag *d) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (*ok && !cJSON_IsArray(v)) {
    diag_error(d, (SrcSpan){0}, "%s: the contract needs '%s', an array", path, key);
    *ok = false;
  }
  return *ok ? v : NULL;
}

bool orion_train_contract_read_json(const char *path, PkgTraining **out, Diag *d) {
  *out = NULL;
  char *text;
  size_t len;
  const char *err;
  if (!read_file(path, 16u << 20, &text, &len, &err)) {
    diag_error(d, (SrcSpan){0}, "cannot read the training contract '%s': %s", path, err);
    return false;
  }
  cJSON *root = cJSON_ParseWithLength(text, len);
  free(text);
  if (!cJSON_IsObject(root)) {
    diag_error(d, (SrcSpan){0}, "%s: the training contract is not a JSON object", path);
    cJSON_Delete(root);
    return false;
  }
  bool ok = true;
  PkgTraining *t = xcalloc(1, sizeof *t);
  t->forward = take_string(root, "forward", "the contract", path, &ok, d);
  t->backward = take_string(root, "backward", "the contract", path, &ok, d);
  t->loss = take_string(root, "loss", "the contract", path, &ok, d);
  const cJSON *voc = cJSON_GetObjectItemCaseSensitive(root, "vocabulary");
  if (ok && voc) {
    if (!cJSON_IsNumber(voc) || voc->valuedouble < 1 || voc->valuedouble > 2147483647.0 ||
        voc->valuedouble != (double)(int64_t)voc->valuedouble) {
      diag_error(d, (SrcSpan){0}, "%s: 'vocabulary' must be a whole number from 1", path);
      ok = false;
    } else {
      t->vocabulary = (uint64_t)voc->valuedouble;
    }
  }
  const cJSON *ins = take_array(root, "backward_inputs", path, &ok, d);
  const cJSON *grads = take_array(root, "gradients", path, &ok, d);
  const cJSON *params = take_array(root, "trainable", path, &ok, d);
  if (ok) {
    t->inputs = xcalloc((size_t)cJSON_GetArraySize(ins) + 1, sizeof *t->inputs);
    t->gradients = xcalloc((size_t)cJSON_GetArraySize(grads) + 1, sizeof *t->gradients);
    t->params = xcalloc((size_t)cJSON_GetArraySize(params) + 1, sizeof *t->params);
  }
  const cJSON *e;
  cJSON_ArrayForEach(e, ins) {
    if (!ok) break;
    PkgTrainInput *in = &t->inputs[t->ninputs++];
    in->input = take_string(e, "input", "a backward input", path, &ok, d);
    char *from = take_string(e, "from", "a backward input", path, &ok, d);
    if (!ok) {
      free(from);
      break;
    }
    if (!strcmp(from, "output")) in->from = PKG_TRAIN_FROM_OUTPUT;
    else if (!strcmp(from, "input")) in->from = PKG_TRAIN_FROM_INPUT;
    else if (!strcmp(from, "loss_scale")) in->from = PKG_TRAIN_FROM_LOSS_SCALE;
    else {
      diag_error(d, (SrcSpan){0}, "%s: 'from' of the backward input '%s' must be \"output\", \"input\" or "
                 "\"loss_scale\"", path, in->input);
      ok = false;
    }
    free(from);
    if (ok && in->from != PKG_TRAIN_FROM_LOSS_SCALE) in->name = take_string(e, "name", "a backward input", path, &ok, d);
  }
  cJSON_ArrayForEach(e, grads) {
    if (!ok) break;
    PkgTrainGradient *g = &t->gradients[t->ngradients++];
    g->output = take_string(e, "output", "a gradient", path, &ok, d);
    g->param = take_string(e, "param", "a gradient", path, &ok, d);
  }
  cJSON_ArrayForEach(e, params) {
    if (!ok) break;
    if (!cJSON_IsString(e) || !e->valuestring[0]) {
      diag_error(d, (SrcSpan){0}, "%s: 'trainable' holds the names of params (strings)", path);
      ok = false;
      break;
    }
    t->params[t->nparams++] = xstrdup(e->valuestring);
  }
  cJSON_Delete(root);
  if (!ok) {
    package_training_free(t);
    return false;
  }
  *out = t;
  return true;
}
