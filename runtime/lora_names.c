/*
 * LoRA adapter tensor names against the program's adapter inputs
 * (include/orion/lora_names.h).
 */
#include "orion/lora_names.h"

#include <string.h>

#include "orion/support.h"

bool orion_lora_is_input(const char *name) {
  size_t n = strlen(name);
  return n > 7 && (!strcmp(name + n - 7, ".lora_A") || !strcmp(name + n - 7, ".lora_B"));
}

char *orion_lora_key_name(const char *key) {
  static const char *const prefixes[] = {"base_model.model.", "base_model."};
  for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
    if (!strncmp(key, prefixes[i], strlen(prefixes[i]))) {
      key += strlen(prefixes[i]);
      break;
    }
  char *s = xstrdup(key);
  size_t n = strlen(s);
  if (n > 7 && !strcmp(s + n - 7, ".weight")) s[n -= 7] = 0;
  if (n > 8 && !strcmp(s + n - 8, ".default")) s[n -= 8] = 0;
  return s;
}

uint32_t orion_lora_match(const char *name, const char *const *names, uint32_t n) {
  uint32_t found = n;
  size_t klen = strlen(name), best = 0;
  for (uint32_t i = 0; i < n; i++) {
    size_t len = strlen(names[i]);
    if (len == klen && !strcmp(names[i], name)) return i;
    /* two such names of one length would be equal */
    if (!orion_lora_is_input(names[i]) || len >= klen || name[klen - len - 1] != '.' || strcmp(name + klen - len, names[i]))
      continue;
    if (len > best) best = len, found = i;
  }
  return found;
}
