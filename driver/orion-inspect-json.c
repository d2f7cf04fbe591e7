/*
 * orion-inspect --json: the package as one JSON object, for scripts (the
 * same facts as the text report, under stable keys; docs/package-format.md).
 */
#include <cjson/cJSON.h>
#include <stdlib.h>

#include "orion-inspect.h"

static cJSON *shape(const PkgTensor *t) {
  cJSON *a = cJSON_CreateArray();
  for (uint32_t i = 0; i < t->rank; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)t->dims[i]));
  return a;
}

/* A weight's checksum is under the lowercase name of the manifest's key for
 * it (checksum_name: "xxh64" in format 1, "xxh3" from 2 on). */
static cJSON *tensor(const PkgTensor *t, bool binding, const char *checksum_name) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "name", t->name);
  if (binding) {
    cJSON_AddStringToObject(o, "mil_name", t->mil_name);
    cJSON_AddNumberToObject(o, "binding", t->binding);
    cJSON_AddNumberToObject(o, "surface_bytes", (double)t->surface_bytes);
  }
  cJSON_AddStringToObject(o, "dtype", orion_dtype_name(t->dtype));
  cJSON_AddItemToObject(o, "shape", shape(t));
  cJSON_AddNumberToObject(o, "bytes", (double)t->bytes);
  if (!binding) {
    cJSON_AddNumberToObject(o, "offset", (double)t->offset);
    cJSON_AddStringToObject(o, checksum_name, t->checksum);
  }
  return o;
}

/* Inputs and outputs in binding order, as the text report lists them. */
static cJSON *bindings(const PkgTensor *t, uint32_t n) {
  cJSON *a = cJSON_CreateArray();
  for (uint32_t b = 0; b < n; b++)
    for (uint32_t i = 0; i < n; i++)
      if (t[i].binding == b) cJSON_AddItemToArray(a, tensor(&t[i], true, NULL));
  return a;
}

static const char *const train_from[] = {"output", "input", "loss_scale"};

static cJSON *training(const PkgTraining *t) {
  if (!t) return cJSON_CreateNull();
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "forward", t->forward);
  cJSON_AddStringToObject(o, "backward", t->backward);
  cJSON_AddStringToObject(o, "loss", t->loss);
  if (t->vocabulary) cJSON_AddNumberToObject(o, "vocabulary", (double)t->vocabulary);
  else cJSON_AddNullToObject(o, "vocabulary");
  cJSON_AddNumberToObject(o, "saved_bytes", (double)t->saved_bytes);
  cJSON *ins = cJSON_AddArrayToObject(o, "backward_inputs");
  for (uint32_t i = 0; i < t->ninputs; i++) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "input", t->inputs[i].input);
    cJSON_AddStringToObject(e, "from", train_from[t->inputs[i].from]);
    if (t->inputs[i].name) cJSON_AddStringToObject(e, "name", t->inputs[i].name);
    cJSON_AddItemToArray(ins, e);
  }
  cJSON *gs = cJSON_AddArrayToObject(o, "gradients");
  for (uint32_t i = 0; i < t->ngradients; i++) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "output", t->gradients[i].output);
    cJSON_AddStringToObject(e, t->gradients[i].input ? "input" : "param", t->gradients[i].param);
    cJSON_AddItemToArray(gs, e);
  }
  if (t->nadapters) {
    cJSON *as = cJSON_AddArrayToObject(o, "adapters");
    for (uint32_t i = 0; i < t->nadapters; i++) {
      cJSON *e = cJSON_CreateObject();
      cJSON_AddStringToObject(e, "module", t->adapters[i].module);
      cJSON_AddNumberToObject(e, "rank", t->adapters[i].rank);
      cJSON_AddNumberToObject(e, "alpha", t->adapters[i].alpha);
      cJSON_AddItemToArray(as, e);
    }
  }
  cJSON *rs = cJSON_AddArrayToObject(o, "row_gradients");
  for (uint32_t i = 0; i < t->nrows; i++) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "output", t->rows[i].output);
    cJSON_AddStringToObject(e, "param", t->rows[i].param);
    cJSON_AddStringToObject(e, "indices", t->rows[i].indices);
    cJSON_AddItemToArray(rs, e);
  }
  cJSON *ps = cJSON_AddArrayToObject(o, "trainable");
  for (uint32_t i = 0; i < t->nparams; i++) cJSON_AddItemToArray(ps, cJSON_CreateString(t->params[i]));
  return o;
}

char *inspect_json(const Package *pkg, const char *path, bool pending_update, bool list_weights, bool verified) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "package", path);
  cJSON_AddNumberToObject(root, "format", pkg->format_version);
  cJSON_AddStringToObject(root, "compiler", pkg->compiler_version);
  cJSON_AddStringToObject(root, "target", pkg->target);
  cJSON_AddStringToObject(root, "program_version", pkg->program_version);
  cJSON_AddStringToObject(root, "source", pkg->source_name);
  if (pkg->chip) cJSON_AddStringToObject(root, "chip", pkg->chip);
  else cJSON_AddNullToObject(root, "chip");
  cJSON *w = cJSON_AddObjectToObject(root, "weights_file");
  cJSON_AddStringToObject(w, "path", PACKAGE_WEIGHTS);
  cJSON_AddNumberToObject(w, "bytes", (double)pkg->weights_size);
  cJSON_AddNumberToObject(w, "generation", (double)pkg->weights_generation);
  cJSON_AddBoolToObject(root, "pending_update", pending_update);
  cJSON_AddNumberToObject(root, "min_surface_bytes", (double)pkg->min_surface_bytes);
  cJSON *lint = cJSON_AddObjectToObject(root, "lint");
  cJSON_AddBoolToObject(lint, "checked", pkg->lint_checked);
  cJSON_AddNumberToObject(lint, "errors", pkg->lint_errors);
  cJSON_AddNumberToObject(lint, "warnings", pkg->lint_warnings);
  cJSON *fns = cJSON_AddArrayToObject(root, "functions");
  for (uint32_t i = 0; i < pkg->nfunctions; i++) {
    const PkgFunction *f = &pkg->functions[i];
    cJSON *fo = cJSON_CreateObject();
    cJSON_AddStringToObject(fo, "name", f->name);
    cJSON_AddStringToObject(fo, "mil_file", f->mil_file);
    cJSON_AddNumberToObject(fo, "surface_bytes", (double)f->surface_bytes);
    cJSON_AddItemToObject(fo, "inputs", bindings(f->inputs, f->ninputs));
    cJSON_AddItemToObject(fo, "outputs", bindings(f->outputs, f->noutputs));
    cJSON *groups = cJSON_AddArrayToObject(fo, "output_groups");
    for (uint32_t g = 0; g < f->ngroups; g++) {
      cJSON *go = cJSON_CreateObject();
      cJSON_AddStringToObject(go, "name", f->groups[g].name);
      cJSON *parts = cJSON_AddArrayToObject(go, "parts");
      for (uint32_t k = 0; k < f->groups[g].nparts; k++) cJSON_AddItemToArray(parts, cJSON_CreateString(f->groups[g].parts[k]));
      cJSON_AddNumberToObject(go, "axis", f->groups[g].axis);
      cJSON_AddItemToArray(groups, go);
    }
    uint64_t total = 0;
    for (uint32_t k = 0; k < f->nweights; k++) total += f->weights[k].bytes;
    cJSON_AddNumberToObject(fo, "weight_count", f->nweights);
    cJSON_AddNumberToObject(fo, "weight_bytes", (double)total);
    if (list_weights) {
      cJSON *ws = cJSON_AddArrayToObject(fo, "weights");
      const char *checksum = package_weight_checksum_name(pkg->format_version);
      for (uint32_t k = 0; k < f->nweights; k++) cJSON_AddItemToArray(ws, tensor(&f->weights[k], false, checksum));
    }
    cJSON_AddItemToArray(fns, fo);
  }
  cJSON_AddItemToObject(root, "training", training(pkg->training));
  cJSON_AddStringToObject(root, "checksums", verified ? "verified" : "failed");
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  if (!text) ice("out of memory writing JSON");
  return text;
}
