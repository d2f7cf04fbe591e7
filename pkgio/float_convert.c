/*
 * Float data of weight files (fp16, bf16, fp32, fp64) converted to fp16 or
 * fp32: what the compiler's weight import and the patcher both do to file
 * tensors, with the same single round-to-nearest-even.
 *
 * The compiler runs this on every weight of a model, so a conversion goes a
 * chunk at a time through loops the vectorizer takes; its callers scan the
 * output for the rare special value afterwards.
 */
#include "orion/weight_file.h"

#include "orion/fp16.h"

#include <stdint.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "float_convert.c reads little-endian file data as it is: a big-endian host needs byte swaps"
#endif

/* Elements per step: the staging buffer stays in the L1 cache. */
#define CHUNK 4096

/* Element i of float file data as a double (exact: every source float type
 * widens exactly). Only for messages, off the fast path. */
double weight_file_float_value(const void *data, OrionDType t, uint64_t i) {
  const uint8_t *src = data;
  switch (t) {
  case ORION_DT_FP16: {
    uint16_t h;
    memcpy(&h, src + 2 * i, 2);
    return (double)fp16_to_float(h);
  }
  case ORION_DT_BF16: {
    uint16_t b;
    memcpy(&b, src + 2 * i, 2);
    return (double)bf16_to_float(b);
  }
  case ORION_DT_FP32: {
    float f;
    memcpy(&f, src + 4 * i, 4);
    return (double)f;
  }
  default: {
    double d;
    memcpy(&d, src + 8 * i, 8);
    return d;
  }
  }
}

static bool aligned_to(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

/* bf16 is the upper half of an fp32, so widening is a shift (what
 * bf16_to_float does), written here so that the loop vectorizes. */
static void widen_bf16(float *dst, const uint8_t *src, size_t k) {
  for (size_t i = 0; i < k; i++) {
    uint32_t u = (uint32_t)src[2 * i] << 16 | (uint32_t)src[2 * i + 1] << 24;
    memcpy(&dst[i], &u, sizeof u);
  }
}

/* Elements at .. at+k-1 (k <= CHUNK) of float file data of dtype t, rounded
 * once to fp16 (F16 is copied). */
static void fp16_chunk_convert(uint16_t *out, const uint8_t *src, OrionDType t, uint64_t at, size_t k) {
  float stage[CHUNK];
  switch (t) {
  case ORION_DT_FP16: memcpy(out + at, src + 2 * at, k * 2); break;
  case ORION_DT_FP32: {
    const uint8_t *p = src + 4 * at;
    /* Safetensors data need not be 4-byte aligned; float loads must be. */
    const float *f = aligned_to(p, sizeof(float)) ? (const float *)(const void *)p : stage;
    if (f == stage) memcpy(stage, p, k * sizeof(float));
    fp16_from_float_array(out + at, f, k);
    break;
  }
  case ORION_DT_BF16:
    widen_bf16(stage, src + 2 * at, k);
    fp16_from_float_array(out + at, stage, k);
    break;
  default: /* ORION_DT_FP64 */
    for (size_t i = 0; i < k; i++) {
      double d;
      memcpy(&d, src + 8 * (at + i), sizeof d);
      out[at + i] = fp16_from_double(d);
    }
    break;
  }
}

/* The same into fp32 (F32 is copied). */
static void fp32_chunk_convert(float *out, const uint8_t *src, OrionDType t, uint64_t at, size_t k) {
  uint16_t stage[CHUNK];
  switch (t) {
  case ORION_DT_FP32: memcpy(out + at, src + 4 * at, k * 4); break;
  case ORION_DT_FP16: {
    const uint8_t *p = src + 2 * at;
    const uint16_t *h = aligned_to(p, sizeof(uint16_t)) ? (const uint16_t *)(const void *)p : stage;
    if (h == stage) memcpy(stage, p, k * sizeof(uint16_t));
    fp16_to_float_array(out + at, h, k);
    break;
  }
  case ORION_DT_BF16: widen_bf16(out + at, src + 2 * at, k); break;
  default: /* ORION_DT_FP64: C's conversion rounds to nearest even */
    for (size_t i = 0; i < k; i++) {
      double d;
      memcpy(&d, src + 8 * (at + i), sizeof d);
      out[at + i] = (float)d;
    }
    break;
  }
}

void weights_convert_floats(const void *src, OrionDType t, uint64_t n, OrionDType to, void *dst) {
  for (uint64_t at = 0; at < n; at += CHUNK) {
    size_t k = n - at < CHUNK ? (size_t)(n - at) : CHUNK;
    if (to == ORION_DT_FP16) fp16_chunk_convert(dst, src, t, at, k);
    else fp32_chunk_convert(dst, src, t, at, k);
  }
}
