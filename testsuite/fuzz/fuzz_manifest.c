/*
 * libFuzzer target for the package manifest reader: any bytes must give a
 * package or an error, never a crash, a hang or a leak; a package that is
 * accepted must be internally consistent (bindings a permutation, byte counts
 * matching shapes), which the reader promises.
 */
#include <stdlib.h>
#include <string.h>

#include "orion/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  StrBuf diags;
  sb_init(&diags);
  Diag d;
  diag_init(&d, NULL);
  d.capture = &diags;
  Package pkg;
  if (package_parse_manifest((const char *)data, size, "fuzz", &pkg, &d)) {
    /* An accepted Chip is a chip name (lowercase letters and digits, 1 to 16). */
    if (pkg.chip) {
      size_t n = strlen(pkg.chip);
      if (!n || n > 16 || strspn(pkg.chip, "abcdefghijklmnopqrstuvwxyz0123456789") != n) abort();
    }
    for (uint32_t i = 0; i < pkg.nfunctions; i++) {
      const PkgFunction *f = &pkg.functions[i];
      for (uint32_t k = 0; k < f->ninputs; k++)
        if (f->inputs[k].binding >= f->ninputs) abort();
      for (uint32_t k = 0; k < f->nweights; k++) {
        uint64_t n = orion_dtype_size(f->weights[k].dtype);
        for (uint32_t r = 0; r < f->weights[k].rank; r++) n *= (uint64_t)f->weights[k].dims[r];
        if (n != f->weights[k].bytes) abort();
      }
    }
    package_free(&pkg);
  } else if (!diags.len) {
    abort(); /* a rejection must say why */
  }
  sb_free(&diags);
  return 0;
}
