/*
 * Whether fp32 values fit the weight they are written into, counted by the
 * pass that produced them (the training optimizer's kernels, while each new
 * value is in a register) and handed to orion_write_weights (orion/runtime.h)
 * with the values, so that the write need not read every value once more
 * only to check it. The write still refuses to change anything unless every
 * count is 0, with the same message as when it counts itself.
 *
 * A count belongs to exactly the values it counted: orion_write_weights
 * refuses one whose values, count or limit are not those of the set it
 * comes with, and takes each count up once (it clears `values`), so a count
 * left over from an earlier step cannot stand for values changed since.
 */
#ifndef ORION_VALUES_FIT_H
#define ORION_VALUES_FIT_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>

/* Values at or beyond 65520 round to infinity in fp16 (65504 is the largest
 * finite one; the next step would be 65536). */
#define ORION_FP16_FIT_LIMIT 65520.0f

/* |x| < limit fits: fp16 weights need ORION_FP16_FIT_LIMIT, fp32 weights
 * only finiteness (INFINITY). NaN never fits. */
static inline float orion_fit_limit(bool fp16) { return fp16 ? ORION_FP16_FIT_LIMIT : INFINITY; }

typedef struct OrionValuesFit {
  const float *values; /* the values counted (NULL: nothing counted, or taken up already) */
  size_t count;        /* how many */
  float limit;         /* set by the caller before counting: orion_fit_limit of the target weight */
  size_t unfit;        /* values with !(|x| < limit) */
} OrionValuesFit;

#endif
