/*
 * The pieces of the checkpoint format both the writer and the reader use:
 * the checksum (the one place it is called), names, the safetensors header.
 */
#include "checkpoint_internal.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

/* The only calls of the checksum library in the checkpoint code. */
void ckpt_hash_init(CkptHash *h) { h->state = xxh64_state_new(); }
void ckpt_hash_update(CkptHash *h, const void *data, size_t n) { XXH64_update(h->state, data, n); }
void ckpt_hash_hex(CkptHash *h, char hex[17]) {
  hash64_hex(XXH64_digest(h->state), hex);
  XXH64_freeState(h->state);
  h->state = NULL;
}
void ckpt_hash_discard(CkptHash *h) {
  XXH64_freeState(h->state);
  h->state = NULL;
}

void ckpt_slot_file(const char *slot, char *buf, size_t n) { snprintf(buf, n, "state-%s.safetensors", slot); }

bool ckpt_plain_name(const char *s) {
  size_t n = s ? strlen(s) : 0;
  if (n == 0 || n > CKPT_MAX_NAME) return false;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_')) return false;
  return true;
}

bool ckpt_valid_id(const char *s) {
  size_t n = s ? strlen(s) : 0;
  if (n == 0 || n > CKPT_MAX_ID) return false;
  for (size_t i = 0; i < n; i++)
    if (s[i] < 0x20 || s[i] > 0x7e) return false;
  return true;
}

void ckpt_safetensors_header(const OrionCkptTensor *t, uint32_t n, StrBuf *out) {
  cJSON *root = cJSON_CreateObject();
  uint64_t at = 0;
  for (uint32_t i = 0; i < n; i++) {
    cJSON *e = cJSON_AddObjectToObject(root, t[i].name);
    cJSON_AddStringToObject(e, "dtype", "F32");
    cJSON *shape = cJSON_AddArrayToObject(e, "shape");
    for (uint32_t k = 0; k < t[i].rank; k++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t[i].dims[k]));
    uint64_t bytes = orion_ckpt_tensor_count(&t[i]) * sizeof(float);
    cJSON *offsets = cJSON_AddArrayToObject(e, "data_offsets");
    cJSON_AddItemToArray(offsets, cJSON_CreateNumber((double)at));
    cJSON_AddItemToArray(offsets, cJSON_CreateNumber((double)(at + bytes)));
    at += bytes;
  }
  char *json = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  size_t len = strlen(json), padded = (len + 7) & ~(size_t)7;
  uint8_t le[8];
  for (int i = 0; i < 8; i++) le[i] = (uint8_t)((uint64_t)padded >> (8 * i));
  sb_putn(out, (const char *)le, 8);
  sb_puts(out, json);
  for (size_t i = len; i < padded; i++) sb_putc(out, ' ');
  cJSON_free(json);
}

uint64_t orion_ckpt_tensor_count(const OrionCkptTensor *t) {
  uint64_t n = 1;
  for (uint32_t k = 0; k < t->rank; k++) n *= (uint64_t)t->dims[k];
  return n;
}
