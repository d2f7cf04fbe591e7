/*
 * libFuzzer target for the weight-set inputs of orion-run patch (and of
 * orion-run --adapter, which reads its LoRA adapter the same way):
 * patch_set_add_safetensors and patch_set_add_npy on a file holding the
 * input. Any bytes must give tensors or an error that says why, never a
 * crash, a hang or a leak; a tensor read must have a rank within the limit,
 * non-negative dimensions, exactly elements * dtype-size readable bytes and
 * a name and origin. A failed add may keep the tensors it added before the
 * bad one (patch.h does not say otherwise; the tools stop at the error): the
 * set must be as sound after it as after a good one.
 */
#define _XOPEN_SOURCE 700 /* mkdtemp */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "orion/patch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64], file[96];

static void remove_dir(void) { remove_tree(dir); }

static void check_set(const PatchSet *s) {
  for (uint32_t i = 0; i < s->n; i++) {
    const PatchTensor *t = &s->tensors[i];
    if (!t->name || !t->origin || t->rank > ORION_MAX_RANK || t->dtype >= ORION_DT_COUNT) abort();
    uint64_t elements = 1;
    for (uint32_t r = 0; r < t->rank; r++) {
      if (t->dims[r] < 0) abort();
      elements *= (uint64_t)t->dims[r];
    }
    if (elements * weight_file_dtype_size(t->dtype) != t->nbytes) abort();
    volatile uint8_t sum = 0; /* every byte readable: ASan checks the mapping's extent */
    for (uint64_t b = 0; b < t->nbytes; b++) sum = (uint8_t)(sum + ((const uint8_t *)t->data)[b]);
    (void)sum;
  }
}

static void add(PatchSet *s, bool npy) {
  StrBuf diags;
  sb_init(&diags);
  Diag d;
  diag_init(&d, NULL);
  d.capture = &diags;
  bool ok = npy ? patch_set_add_npy(s, "w", file, &d) : patch_set_add_safetensors(s, file, &d);
  if (ok ? d.nerrors != 0 : !diags.len) abort();
  check_set(s);
  sb_free(&diags);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (1u << 20)) return 0;
  if (!file[0]) {
    snprintf(dir, sizeof dir, "/tmp/fuzz-patch-set-XXXXXX");
    if (!mkdtemp(dir)) abort();
    atexit(remove_dir);
    snprintf(file, sizeof file, "%s/w", dir);
  }
  FILE *f = fopen(file, "wb");
  if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) abort();
  PatchSet s = {0};
  add(&s, false);
  add(&s, true);
  patch_set_free(&s);
  return 0;
}
