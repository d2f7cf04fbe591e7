/*
 * Where a Hugging Face model's tensors are: one model.safetensors, or shards
 * named by model.safetensors.index.json's weight_map. Each tensor the .oir
 * will read is probed here (shape, float dtype), so a model that does not
 * match its config.json is refused by the converter, naming the tensor,
 * rather than by the compiler later.
 */
#include "hf_import.h"

#include "orion/weight_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SINGLE_FILE "model.safetensors"
#define INDEX_FILE "model.safetensors.index.json"
#define INDEX_MAX_BYTES (64u << 20)

static char *join(const char *dir, const char *file) {
  size_t n = strlen(dir) + strlen(file) + 2;
  char *s = xmalloc(n);
  snprintf(s, n, "%s/%s", dir, file);
  return s;
}

static bool file_exists(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f) fclose(f);
  return f != NULL;
}

bool hf_tensors_open(HfTensors *t, const char *dir, char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  t->dir = xstrdup(dir);
  char *single = join(dir, SINGLE_FILE), *index = join(dir, INDEX_FILE);
  bool ok = true;
  if (!file_exists(single) && file_exists(index)) {
    char *text;
    size_t len;
    const char *why;
    if (!read_file(index, INDEX_MAX_BYTES, &text, &len, &why)) {
      ok = hf_fail(err, errlen, "%s: %s", INDEX_FILE, why);
    } else {
      t->index = cJSON_ParseWithLength(text, len);
      free(text);
      t->weight_map = t->index ? cJSON_GetObjectItemCaseSensitive(t->index, "weight_map") : NULL;
      if (!t->index) ok = hf_fail(err, errlen, "%s: malformed JSON", INDEX_FILE);
      else if (!cJSON_IsObject(t->weight_map)) ok = hf_fail(err, errlen, "%s: no 'weight_map' object", INDEX_FILE);
    }
  } else if (!file_exists(single)) {
    ok = hf_fail(err, errlen, "%s holds neither %s nor %s", dir, SINGLE_FILE, INDEX_FILE);
  }
  free(single);
  free(index);
  if (!ok) hf_tensors_close(t);
  return ok;
}

void hf_tensors_close(HfTensors *t) {
  cJSON_Delete(t->index);
  free(t->dir);
  memset(t, 0, sizeof *t);
}

/* The file a key is in, by the index (NULL: not listed), or the one file. */
static const char *file_of(HfTensors *t, const char *key) {
  if (!t->index) return SINGLE_FILE;
  const cJSON *f = cJSON_GetObjectItemCaseSensitive(t->weight_map, key);
  return cJSON_IsString(f) ? f->valuestring : NULL;
}

static bool probe(HfTensors *t, const char *file, const char *key, WeightInfo *info, char *err, size_t errlen) {
  char *path = join(t->dir, file);
  bool ok = weights_probe_safetensors(path, key, info, err, errlen);
  free(path);
  return ok;
}

bool hf_tensor_exists(HfTensors *t, const char *key) {
  const char *file = file_of(t, key);
  if (!file) return false;
  if (t->index) return true;
  WeightInfo info;
  char err[256];
  return probe(t, file, key, &info, err, sizeof err);
}

static void put_dims(char *buf, size_t n, uint32_t rank, const int64_t *dims) {
  size_t at = (size_t)snprintf(buf, n, "[");
  for (uint32_t i = 0; i < rank && at < n; i++) at += (size_t)snprintf(buf + at, n - at, "%s%lld", i ? "," : "", (long long)dims[i]);
  if (at < n) snprintf(buf + at, n - at, "]");
}

const char *hf_tensor_file(HfTensors *t, const char *key, uint32_t rank, const int64_t *dims, char *err,
                           size_t errlen) {
  const char *file = file_of(t, key);
  if (!file) {
    hf_fail(err, errlen, "the tensor '%s' is missing (%s names no file for it)", key, INDEX_FILE);
    return NULL;
  }
  WeightInfo info;
  char why[512];
  if (!probe(t, file, key, &info, why, sizeof why)) {
    if (strstr(why, "no tensor named"))
      hf_fail(err, errlen, "the tensor '%s' is missing from %s", key, file);
    else
      hf_fail(err, errlen, "%s: %s", file, why);
    return NULL;
  }
  bool same = info.rank == rank;
  for (uint32_t i = 0; same && i < rank; i++) same = info.dims[i] == dims[i];
  if (!same) {
    char got[128], want[128];
    put_dims(got, sizeof got, info.rank, info.dims);
    put_dims(want, sizeof want, rank, dims);
    hf_fail(err, errlen, "the tensor '%s' in %s has the shape %s, but config.json makes it %s", key, file, got, want);
    return NULL;
  }
  if (info.dtype != ORION_DT_FP16 && info.dtype != ORION_DT_FP32 && info.dtype != ORION_DT_BF16 &&
      info.dtype != ORION_DT_FP64) {
    hf_fail(err, errlen, "the tensor '%s' in %s is %s, not a float dtype", key, file,
            weight_file_dtype_name(info.dtype));
    return NULL;
  }
  return file;
}
