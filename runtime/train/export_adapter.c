/*
 * orion-run train --lora --export-adapter DIR: the trained adapters as a
 * PEFT adapter directory, which orion-run --adapter and PEFT's
 * PeftModel.from_pretrained both read (docs/lora.md, "Training adapters").
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint_internal.h"

static bool write_or_report(const char *dir, const char *file, const void *data, size_t len, Diag *d) {
  StrBuf path;
  sb_init(&path);
  sb_printf(&path, "%s/%s", dir, file);
  const char *err;
  bool ok = write_file_atomic(path.data, data, len, &err);
  if (!ok) diag_error(d, (SrcSpan){0}, "cannot write '%s': %s", path.data, err);
  sb_free(&path);
  return ok;
}

static bool write_weights(const char *dir, const OrionAdapterExport *a, uint32_t n, Diag *d) {
  OrionCkptTensor *t = xcalloc(2 * n + 1, sizeof *t);
  char **keys = xcalloc(2 * n + 1, sizeof *keys);
  for (uint32_t i = 0; i < 2 * n; i++) {
    const OrionAdapterExport *e = &a[i / 2];
    bool is_a = i % 2 == 0;
    StrBuf key;
    sb_init(&key);
    sb_printf(&key, "base_model.model.%s.lora_%c.weight", e->module, is_a ? 'A' : 'B');
    keys[i] = key.data;
    t[i] = (OrionCkptTensor){.name = keys[i], .rank = 2, .data = (float *)(uintptr_t)(is_a ? e->a : e->b)};
    memcpy(t[i].dims, is_a ? e->a_dims : e->b_dims, 2 * sizeof(int64_t));
  }
  StrBuf out;
  sb_init(&out);
  ckpt_safetensors_header(t, 2 * n, &out);
  for (uint32_t i = 0; i < 2 * n; i++)
    sb_putn(&out, (const char *)t[i].data, (size_t)orion_ckpt_tensor_count(&t[i]) * sizeof(float));
  bool ok = write_or_report(dir, "adapter_model.safetensors", out.data, out.len, d);
  sb_free(&out);
  for (uint32_t i = 0; i < 2 * n; i++) free(keys[i]);
  free(keys);
  free(t);
  return ok;
}

/* PEFT's LoraConfig fields, with the defaults of what orion computes: no
 * dropout, no bias, plain (not rs-) LoRA scaling alpha / r. */
static char *config_json(const OrionAdapterExport *a, uint32_t n) {
  cJSON *c = cJSON_CreateObject();
  cJSON_AddStringToObject(c, "peft_type", "LORA");
  cJSON_AddStringToObject(c, "task_type", "CAUSAL_LM");
  cJSON_AddNullToObject(c, "base_model_name_or_path");
  cJSON_AddNumberToObject(c, "r", n ? a[0].rank : 0);
  cJSON_AddNumberToObject(c, "lora_alpha", n ? a[0].alpha : 0);
  cJSON_AddNumberToObject(c, "lora_dropout", 0);
  cJSON_AddStringToObject(c, "bias", "none");
  cJSON_AddBoolToObject(c, "fan_in_fan_out", false);
  cJSON_AddBoolToObject(c, "use_rslora", false);
  cJSON_AddBoolToObject(c, "inference_mode", true);
  cJSON *targets = cJSON_AddArrayToObject(c, "target_modules");
  cJSON *ranks = cJSON_AddObjectToObject(c, "rank_pattern");
  cJSON *alphas = cJSON_AddObjectToObject(c, "alpha_pattern");
  for (uint32_t i = 0; i < n; i++) {
    cJSON_AddItemToArray(targets, cJSON_CreateString(a[i].module));
    if (a[i].rank != a[0].rank) cJSON_AddNumberToObject(ranks, a[i].module, a[i].rank);
    if (a[i].alpha != a[0].alpha) cJSON_AddNumberToObject(alphas, a[i].module, a[i].alpha);
  }
  char *text = cJSON_Print(c);
  cJSON_Delete(c);
  return text;
}

bool orion_train_export_adapter(const char *dir, const OrionAdapterExport *a, uint32_t n, Diag *d) {
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
    diag_error(d, (SrcSpan){0}, "cannot make the adapter directory '%s': %s", dir, strerror(errno));
    return false;
  }
  if (!write_weights(dir, a, n, d)) return false;
  char *json = config_json(a, n);
  StrBuf text;
  sb_init(&text);
  sb_printf(&text, "%s\n", json);
  cJSON_free(json);
  bool ok = write_or_report(dir, "adapter_config.json", text.data, text.len, d);
  sb_free(&text);
  return ok;
}
