/*
 * orion-run train --export: the trained fp32 weights as a safetensors file
 * by param name, with the checkpoint's header writer, so that the file is
 * one orion-run patch (and any safetensors reader) takes.
 */
#include <stdlib.h>
#include <string.h>

#include "checkpoint_internal.h"

bool orion_train_export_safetensors(const char *path, const OrionCkptTensor *t, uint32_t n, Diag *d) {
  StrBuf out;
  sb_init(&out);
  ckpt_safetensors_header(t, n, &out);
  for (uint32_t i = 0; i < n; i++) {
    size_t bytes = (size_t)orion_ckpt_tensor_count(&t[i]) * sizeof(float);
    sb_putn(&out, (const char *)t[i].data, bytes);
  }
  const char *err;
  bool ok = write_file_atomic(path, out.data, out.len, &err);
  if (!ok) diag_error(d, (SrcSpan){0}, "cannot write '%s': %s", path, err);
  sb_free(&out);
  return ok;
}
