/*
 * libFuzzer target for the weight-file header parsers.
 *
 * Every input goes to both parsers: as a safetensors file it is looked up
 * under the fixed key "w" and under the first key of its header (so that
 * mutations reach the per-tensor checks, not only the missing-key path), and
 * as a .npy file. Beyond memory safety, each success is checked against the
 * promises of weights.h: the data lies inside the input, the rank is within
 * the limit and the byte count matches the shape; each failure leaves a
 * non-empty, terminated message.
 */
#include "orion/weight_file.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_result(bool ok, const WeightInfo *wi, const char *err, size_t errlen, size_t size) {
  if (!ok) {
    if (err[0] == 0 || memchr(err, 0, errlen) == NULL) abort();
    return;
  }
  if (wi->rank > ORION_MAX_RANK || wi->dtype >= ORION_DT_COUNT) abort();
  uint64_t elements = 1;
  for (uint32_t i = 0; i < wi->rank; i++) {
    if (wi->dims[i] < 0) abort();
    elements *= (uint64_t)wi->dims[i]; /* cannot wrap: the parser checked */
  }
  if (elements * weight_file_dtype_size(wi->dtype) != wi->nbytes) abort();
  if (wi->data_offset > size || wi->nbytes > size - wi->data_offset) abort();
}

/* The first key of the header's JSON object, copied (or NULL). */
static char *first_key(const uint8_t *data, size_t size) {
  if (size < 8) return NULL;
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | data[i];
  if (hlen == 0 || hlen > size - 8) return NULL;
  /* A NUL-terminated copy, for the same reason the parser makes one. */
  char *text = calloc(1, (size_t)hlen + 8);
  if (!text) return NULL;
  memcpy(text, data + 8, (size_t)hlen);
  cJSON *root = cJSON_ParseWithLength(text, (size_t)hlen);
  free(text);
  char *key = NULL;
  if (root && cJSON_IsObject(root) && root->child && root->child->string) {
    size_t n = strlen(root->child->string);
    key = malloc(n + 1);
    if (key) memcpy(key, root->child->string, n + 1);
  }
  cJSON_Delete(root);
  return key;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  WeightInfo wi;
  char err[256];

  memset(err, 0, sizeof err);
  bool ok = weights_parse_safetensors(data, size, "w", &wi, err, sizeof err);
  check_result(ok, &wi, err, sizeof err, size);

  char *key = first_key(data, size);
  if (key) {
    memset(err, 0, sizeof err);
    ok = weights_parse_safetensors(data, size, key, &wi, err, sizeof err);
    check_result(ok, &wi, err, sizeof err, size);
    free(key);
  }

  memset(err, 0, sizeof err);
  ok = weights_parse_npy(data, size, &wi, err, sizeof err);
  check_result(ok, &wi, err, sizeof err, size);
  return 0;
}
