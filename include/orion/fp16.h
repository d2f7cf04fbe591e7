/*
 * Half-precision conversions (IEEE binary16 and bfloat16), bit-exact and
 * independent of the host's F16C support.
 */
#ifndef ORION_FP16_H
#define ORION_FP16_H

#include <stddef.h>
#include <stdint.h>

/* fp32 -> fp16, round to nearest even; overflow gives +-inf, NaN stays NaN (quiet). */
uint16_t fp16_from_float(float f);
/* The same by a slower, plainly written rounding (for tests of the fast path). */
uint16_t fp16_from_float_reference(float f);
/* double -> fp16 with a single rounding (no double rounding through fp32). */
uint16_t fp16_from_double(double d);
float fp16_to_float(uint16_t h);
/* bf16 <-> fp32 (round to nearest even). */
float bf16_to_float(uint16_t b);
uint16_t bf16_from_float(float f);
/* Largest finite fp16 value. */
#define FP16_MAX 65504.0

/* Bulk conversions. */
void fp16_from_float_array(uint16_t *dst, const float *src, size_t n);
/* The same bits, stored with streaming (non-temporal) stores where F16C is
 * there: for a large destination that is not read again soon (a training
 * step's weight data), whose lines need not be fetched to be overwritten. */
void fp16_from_float_array_streaming(uint16_t *dst, const float *src, size_t n);
void fp16_to_float_array(float *dst, const uint16_t *src, size_t n);

#endif
