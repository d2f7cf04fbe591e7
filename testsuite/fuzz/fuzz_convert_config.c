/*
 * libFuzzer target for orion-convert's config.json reader: any bytes give a
 * model it supports or a message that names config.json, never a crash, a
 * hang or a leak (the JSON itself is cJSON's; the checks of keys, types and
 * sizes are the converter's).
 */
#include <stdlib.h>
#include <string.h>

#include "orion/convert.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[1024];
  err[0] = 0;
  if (!convert_check_config("config.json", (const char *)data, size, err, sizeof err) &&
      strncmp(err, "config.json", 11) != 0)
    abort(); /* a refusal must say why, and where */
  return 0;
}
