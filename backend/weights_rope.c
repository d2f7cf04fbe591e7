/*
 * The rotary position tables of the rope_cos and rope_sin initializers: a
 * llama model's RoPE angles as a param, so that prefill slices rows 0..T-1
 * and decode gathers row `pos` from the same weight instead of taking the
 * tables as inputs the caller computes.
 */
#include "weights_internal.h"

#include "orion/fp16.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

void weights_rope_table(bool sine, double theta, const IrType *type, void *dst) {
  int64_t rows = type->dims[0], cols = type->dims[1], half = cols / 2;
  for (int64_t p = 0; p < rows; p++) {
    for (int64_t i = 0; i < cols; i++) {
      /* Hugging Face: inv_freq[j] = theta^(-2j/HD), emb = cat(freqs, freqs). */
      double angle = (double)p * pow(theta, -2.0 * (double)(i % half) / (double)cols);
      double v = sine ? sin(angle) : cos(angle);
      int64_t at = p * cols + i;
      if (type->dtype == DT_FP16) {
        uint16_t h = fp16_from_double(v);
        memcpy((uint8_t *)dst + at * 2, &h, sizeof h);
      } else {
        float f = (float)v;
        memcpy((uint8_t *)dst + at * 4, &f, sizeof f);
      }
    }
  }
}
