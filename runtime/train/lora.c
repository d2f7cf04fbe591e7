/*
 * orion-run train --lora: the trained tensors are a LoRA package's adapter
 * inputs (MODULE.lora_A, MODULE.lora_B; the contract's Adapters), not its
 * weights. Their fp32 masters start from an adapter file or PEFT's
 * initialisation, and after each optimizer step they are converted into the
 * forward's input buffers, which the backward reads too: the program and its
 * weights never change, so a step makes no weight update and no compile.
 * docs/lora.md, "Training adapters".
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loop_internal.h"
#include "orion/lora_names.h"
#include "orion/patch.h"

/* splitmix64: a small generator whose stream depends only on its seed. */
static uint64_t next_random(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* PEFT's default: lora_A as kaiming_uniform_(a = sqrt(5)), i.e. uniform in
 * [-1/sqrt(in), 1/sqrt(in)); lora_B zero, so the adapted model starts as the
 * base model. The stream of each tensor is seeded by --seed and its name
 * (FNV-1a), so adding an adapter does not change the others. */
static void peft_init(TrainParam *p, bool is_a, uint64_t seed) {
  if (!is_a) {
    memset(p->value, 0, p->count * sizeof(float));
    return;
  }
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char *c = p->name; *c; c++) h = (h ^ (uint8_t)*c) * 0x100000001b3ull;
  uint64_t state = seed ^ h;
  double bound = 1.0 / sqrt((double)p->dims[1]);
  for (size_t i = 0; i < p->count; i++) {
    double u = (double)(next_random(&state) >> 11) * 0x1.0p-53; /* [0, 1) */
    p->value[i] = (float)((2.0 * u - 1.0) * bound);
  }
}

/* --adapter FILE: every adapter input's start values, by name as orion-run
 * --adapter binds them (orion_lora_match; F16, BF16, F32 or F64, widened or
 * rounded to fp32); every tensor must be one of them
 * and every adapter input must be given. */
static bool load_adapter_file(Loop *L, const char *file, Diag *d) {
  PatchSet set = {0};
  bool ok = patch_set_add_safetensors(&set, file, d);
  bool *given = xcalloc(L->nparams + 1, sizeof *given);
  for (uint32_t k = 0; ok && k < set.n; k++) {
    const PatchTensor *t = &set.tensors[k];
    char *name = orion_lora_key_name(t->name);
    uint32_t p = orion_lora_match(name, (const char *const *)L->adapter_names, L->nparams);
    TrainParam *tp = p < L->nparams ? &L->params[p] : NULL;
    bool same = tp && t->rank == tp->rank && orion_dtype_is_float(t->dtype);
    for (uint32_t r = 0; same && r < t->rank; r++) same = t->dims[r] == tp->dims[r];
    if (!tp) {
      diag_error(d, (SrcSpan){0}, "--adapter %s: tensor '%s' is not an adapter input of this package ('%s')", file,
                 t->name, name);
      ok = false;
    } else if (!same) {
      diag_error(d, (SrcSpan){0}, "--adapter %s: tensor '%s' is not a float tensor of the shape [%lld, %lld] of the "
                 "input '%s'", file, t->name, (long long)tp->dims[0], (long long)tp->dims[1], tp->name);
      ok = false;
    } else if (given[p]) {
      diag_error(d, (SrcSpan){0}, "--adapter %s: the input '%s' is given twice", file, tp->name);
      ok = false;
    } else {
      given[p] = true;
      weights_convert_floats(t->data, t->dtype, tp->count, ORION_DT_FP32, tp->value);
      for (size_t i = 0; ok && i < tp->count; i++)
        if (!isfinite(tp->value[i])) {
          diag_error(d, (SrcSpan){0}, "--adapter %s: tensor '%s' has %g at index %zu", file, t->name,
                     (double)tp->value[i], i);
          ok = false;
        }
    }
    free(name);
  }
  for (uint32_t p = 0; ok && p < L->nparams; p++)
    if (!given[p]) {
      diag_error(d, (SrcSpan){0}, "--adapter %s: no tensor for the adapter input '%s' (key "
                 "'base_model.model.%s.weight')", file, L->params[p].name, L->params[p].name);
      ok = false;
    }
  free(given);
  patch_set_free(&set);
  return ok;
}

bool loop_lora_init(Loop *L, const OrionTrainOptions *o, Diag *d) {
  const PkgTraining *t = L->contract;
  L->nparams = 2 * t->nadapters;
  L->params = xcalloc(L->nparams + 1, sizeof *L->params);
  L->pinfo = xcalloc(L->nparams + 1, sizeof *L->pinfo);
  L->adapter_names = xcalloc(L->nparams + 1, sizeof *L->adapter_names);
  for (uint32_t k = 0; k < L->nparams; k++) {
    const PkgTrainAdapter *a = &t->adapters[k / 2];
    bool is_a = k % 2 == 0;
    StrBuf name;
    sb_init(&name);
    sb_printf(&name, "%s.lora_%c", a->module, is_a ? 'A' : 'B');
    L->adapter_names[k] = name.data;
    uint32_t in = loop_input_index(L->prog, L->fwd, name.data);
    const OrionTensorInfo *info = in == UINT32_MAX ? NULL : orion_input(L->prog, L->fwd, in);
    if (!info || (info->dtype != MIL_DT_FP16 && info->dtype != MIL_DT_FP32) || info->rank != 2) {
      diag_error(d, (SrcSpan){0}, "the adapter input '%s' is not an fp16 or fp32 matrix input of '%s'", name.data,
                 t->forward);
      return false;
    }
    TrainParam *p = &L->params[k];
    ParamInfo *pi = &L->pinfo[k];
    p->name = name.data;
    p->rank = 2;
    p->dims[0] = info->dims[0];
    p->dims[1] = info->dims[1];
    p->count = (size_t)(info->dims[0] * info->dims[1]);
    p->value = xcalloc(p->count ? p->count : 1, sizeof(float));
    p->grad = xcalloc(p->count ? p->count : 1, sizeof(float));
    pi->dtype = info->dtype == MIL_DT_FP16 ? ORION_DT_FP16 : ORION_DT_FP32;
    pi->input = in;
    pi->grad = NULL;
    for (uint32_t g = 0; g < t->ngradients; g++)
      if (t->gradients[g].input && !strcmp(t->gradients[g].param, p->name)) {
        pi->grad = loop_output_tensor(L, true, t->gradients[g].output);
      }
    if (!pi->grad) ice("the contract was checked: every adapter input has a gradient");
    if (!o->adapter_init) peft_init(p, is_a, o->seed);
  }
  return !o->adapter_init || load_adapter_file(L, o->adapter_init, d);
}

bool loop_lora_write(Loop *L, Diag *d) {
  for (uint32_t k = 0; k < L->nparams; k++) {
    const TrainParam *p = &L->params[k];
    void *dst = L->fwd_in[L->pinfo[k].input].data;
    if (L->pinfo[k].dtype == ORION_DT_FP16) {
      if (!train_fp16_convert_checked(p->name, p->value, p->count, dst, NULL, d)) return false;
      continue;
    }
    for (size_t i = 0; i < p->count; i++)
      if (!isfinite(p->value[i])) {
        diag_error(d, (SrcSpan){0}, "adapter '%s': element %zu is %g", p->name, i, (double)p->value[i]);
        return false;
      }
    memcpy(dst, p->value, p->count * sizeof(float));
  }
  return true;
}

bool loop_lora_export(Loop *L, const char *dir, Diag *d) {
  const PkgTraining *t = L->contract;
  OrionAdapterExport *a = xcalloc(t->nadapters + 1, sizeof *a);
  for (uint32_t i = 0; i < t->nadapters; i++)
    a[i] = (OrionAdapterExport){t->adapters[i].module, t->adapters[i].rank, t->adapters[i].alpha,
                                L->params[2 * i].value, L->params[2 * i].dims, L->params[2 * i + 1].value,
                                L->params[2 * i + 1].dims};
  bool ok = orion_train_export_adapter(dir, a, t->nadapters, d);
  free(a);
  return ok;
}
