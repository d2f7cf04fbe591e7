/*
 * libFuzzer target for the ane backend's cached weight-update choice
 * (runtime/ane/ane_update_cache.h), a file in the user's cache directory
 * that anything may have written: any bytes are accepted or rejected
 * without a crash or a read out of bounds; an accepted file is one
 * ane_update_cache_format writes, byte for byte, and flipping any byte of it
 * makes it rejected (the checksum covers the rest).
 */
#include <stdlib.h>
#include <string.h>

#include "ane_update_cache.h"
#include "ane_update.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > ANE_UPDATE_CACHE_MAX_BYTES) return 0;
  char *copy = malloc(size ? size : 1);
  memcpy(copy, data, size);
  OrionReloadStrategy s;
  if (!ane_update_cache_parse(copy, size, "25F84", "h16", &s)) {
    StrBuf again;
    sb_init(&again);
    ane_update_cache_format("25F84", "h16", ane_update_strategy_name(s), &again);
    if (again.len != size || memcmp(again.data, copy, size)) abort();
    sb_free(&again);
    for (size_t i = 0; i < size; i++) {
      copy[i] ^= 0x5a;
      if (!ane_update_cache_parse(copy, size, "25F84", "h16", &s)) abort();
      copy[i] ^= 0x5a;
    }
  }
  free(copy);
  return 0;
}
