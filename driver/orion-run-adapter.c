/*
 * orion-run --adapter: binds a LoRA adapter (safetensors, PEFT naming) to the
 * inputs that `orionc --lora` gave a program. PEFT stores
 * "base_model.model.<module>.lora_A.weight" [r, in] and "...lora_B.weight"
 * [out, r]; the program's inputs are "<module>.lora_A" and "<module>.lora_B"
 * in the same layout, so binding is a lookup (exact, or by the module name's
 * tail: orion_lora_match) and a conversion to fp16 (or to fp32, for the
 * fp32 adapters of a model trained with orionc --train --lora).
 * LoRA inputs the adapter does not cover get zeros: the base model.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "orion-run.h"
#include "orion/fp16.h"
#include "orion/lora_names.h"

static bool to_fp16(const PatchTensor *t, uint16_t *out, uint64_t n, Diag *d) {
  for (uint64_t i = 0; i < n; i++) {
    const uint8_t *p = (const uint8_t *)t->data;
    float v;
    switch (t->dtype) {
    case ORION_DT_FP16: {
      memcpy(&out[i], p + 2 * i, 2);
      v = fp16_to_float(out[i]);
      break;
    }
    case ORION_DT_BF16: {
      uint16_t b;
      memcpy(&b, p + 2 * i, 2);
      v = bf16_to_float(b);
      out[i] = fp16_from_float(v);
      break;
    }
    case ORION_DT_FP32: {
      memcpy(&v, p + 4 * i, 4);
      out[i] = fp16_from_float(v);
      break;
    }
    default: {
      double x;
      memcpy(&x, p + 8 * i, 8);
      v = (float)x;
      out[i] = fp16_from_double(x);
      break;
    }
    }
    if ((out[i] & 0x7C00u) == 0x7C00u) {
      diag_error(d, (SrcSpan){0}, "%s: adapter tensor '%s' has %s at index %llu, which fp16 cannot hold", t->origin,
                 t->name, isnan(v) ? "NaN" : "a value", (unsigned long long)i);
      return false;
    }
  }
  return true;
}

/* The input a key's name is for (orion_lora_match over the function's inputs); nin when none. */
static uint32_t find_lora_input(OrionProgram *p, uint32_t fn, const char *name) {
  uint32_t nin = orion_input_count(p, fn);
  const char **names = xcalloc(nin + 1, sizeof *names);
  for (uint32_t i = 0; i < nin; i++) names[i] = orion_input(p, fn, i)->name;
  uint32_t i = orion_lora_match(name, names, nin);
  free(names);
  return i;
}

bool orion_run_bind_adapter(OrionProgram *p, uint32_t fn, const char *file, CpuTensor *inputs, bool *bound, Diag *d) {
  PatchSet set = {0};
  bool ok = patch_set_add_safetensors(&set, file, d);
  uint32_t nin = orion_input_count(p, fn);
  for (uint32_t k = 0; ok && k < set.n; k++) {
    const PatchTensor *t = &set.tensors[k];
    char *name = orion_lora_key_name(t->name);
    uint32_t i = find_lora_input(p, fn, name);
    if (i == nin || !orion_lora_is_input(orion_input(p, fn, i)->name)) {
      diag_error(d, (SrcSpan){0}, "%s: adapter tensor '%s' has no LoRA input '%s' in the program (compile with "
                 "orionc --lora=PATTERN:RANK for the layers it adapts)", file, t->name, name);
      ok = false;
    } else if (bound[i]) {
      diag_error(d, (SrcSpan){0}, "%s: input '%s' is given twice (by '%s' and before)", file,
                 orion_input(p, fn, i)->name, t->name);
      ok = false;
    } else {
      const OrionTensorInfo *info = orion_input(p, fn, i);
      bool same = t->rank == info->rank && orion_dtype_is_float(t->dtype); /* fp16, fp32, bf16, fp64 */
      for (uint32_t r = 0; same && r < t->rank; r++) same = t->dims[r] == info->dims[r];
      if (!same) {
        StrBuf got, want;
        sb_init(&got);
        sb_init(&want);
        for (uint32_t r = 0; r < t->rank; r++) sb_printf(&got, "%s%lld", r ? "," : "", (long long)t->dims[r]);
        for (uint32_t r = 0; r < info->rank; r++) sb_printf(&want, "%s%lld", r ? "," : "", (long long)info->dims[r]);
        diag_error(d, (SrcSpan){0}, "%s: adapter tensor '%s' is %s[%s], but input '%s' is %s[%s]%s", file, t->name,
                   weight_file_dtype_name(t->dtype), got.data, info->name,
                   info->dtype == MIL_DT_FP32 ? "fp32" : "fp16", want.data,
                   t->rank == 2 && info->rank == 2 ? " (a different rank r needs a compile with that rank)" : "");
        sb_free(&got);
        sb_free(&want);
        ok = false;
      } else if (info->dtype == MIL_DT_FP32) {
        /* an fp32 layer's adapters (orionc --train --lora on an fp32 model): widened or rounded to fp32 */
        uint64_t n = info->bytes / 4;
        float *data = xmalloc(n ? (size_t)info->bytes : 4);
        weights_convert_floats(t->data, t->dtype, (size_t)n, ORION_DT_FP32, data);
        bool finite = true;
        for (uint64_t e = 0; e < n && finite; e++) finite = isfinite(data[e]);
        if (finite) {
          inputs[i] = (CpuTensor){.dtype = MIL_DT_FP32, .rank = info->rank, .data = data};
          memcpy(inputs[i].dims, info->dims, sizeof(int64_t) * info->rank);
          bound[i] = true;
        } else {
          diag_error(d, (SrcSpan){0}, "%s: adapter tensor '%s' has a value fp32 cannot hold", file, t->name);
          free(data);
          ok = false;
        }
      } else {
        uint64_t n = info->bytes / 2;
        uint16_t *data = xmalloc(n ? (size_t)info->bytes : 2);
        if (to_fp16(t, data, n, d)) {
          inputs[i] = (CpuTensor){.dtype = MIL_DT_FP16, .rank = info->rank, .data = data};
          memcpy(inputs[i].dims, info->dims, sizeof(int64_t) * info->rank);
          bound[i] = true;
        } else {
          free(data);
          ok = false;
        }
      }
    }
    free(name);
  }
  patch_set_free(&set);
  return ok;
}

void orion_run_zero_lora_inputs(OrionProgram *p, uint32_t fn, CpuTensor *inputs, bool *bound) {
  for (uint32_t i = 0; i < orion_input_count(p, fn); i++) {
    const OrionTensorInfo *info = orion_input(p, fn, i);
    if (bound[i] || !orion_lora_is_input(info->name)) continue;
    inputs[i] = (CpuTensor){.dtype = info->dtype, .rank = info->rank, .data = xcalloc(info->bytes ? info->bytes : 1, 1)};
    memcpy(inputs[i].dims, info->dims, sizeof(int64_t) * info->rank);
    bound[i] = true;
  }
}
