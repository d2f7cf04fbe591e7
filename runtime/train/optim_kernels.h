/*
 * The optimizer's per-element passes (internal to runtime/train/): AdamW's
 * update and the gradients' unscale-check-and-measure pass, each one fused
 * pass over memory, AVX when the CPU has it (the same operations in the
 * same order as the scalar loops, so the same bits), and run in fixed
 * chunks over up to two threads.
 */
#ifndef ORION_TRAIN_OPTIM_KERNELS_H
#define ORION_TRAIN_OPTIM_KERNELS_H

#include <stdbool.h>
#include <stddef.h>

/* AdamW's scalars for one param, as adamw_param in optim.c rounds them;
 * each gradient is first multiplied by unscale, then by clip (fp32, each
 * rounded, as the separate passes did; a factor of 1 is skipped). */
typedef struct AdamwScalars {
  float decay, b1, one_minus_b1, b2, one_minus_b2, neg_step, bc2_sqrt, eps;
  float unscale, clip;
} AdamwScalars;

/* w, m, v updated in place from g over n elements; returns how many new w
 * have !(|w| < limit) (NaN, infinite, or beyond the target weight's range). */
size_t train_kernel_adamw(float *w, float *m, float *v, const float *g, size_t n, const AdamwScalars *s, float limit);

/* g *= inv (g is written only with store and inv != 1), and the sum of the
 * results' squares in double (in a fixed lane order); *finite false if any
 * result is NaN or infinite. */
void train_kernel_unscale_sq(float *g, size_t n, float inv, bool store, double *sq, bool *finite);

/* Elements per work item (parallel_for_two, orion/parallel.h): the split is
 * fixed, so sums do not depend on the number of threads. */
#define TRAIN_CHUNK ((size_t)1 << 20)

#endif
