/*
 * Internal to weight materialization, which three files share:
 * weights_data.c makes the output, collects the problems noted while filling
 * it and reports them once at the param, runs the slices every core fills a
 * large weight in, and writes the simple initializers; weights_random.c the
 * random ones (normal, uniform); weights_file_data.c converts file tensors.
 */
#ifndef ORION_WEIGHTS_DATA_INTERNAL_H
#define ORION_WEIGHTS_DATA_INTERNAL_H

#include "weights_internal.h"

/* Elements per conversion step: the staging buffer and the output being
 * scanned stay in the L1 cache. Even, so that normal pairs never straddle. */
#define CHUNK 4096

#define FP16_EXP_MASK 0x7C00u
#define FP32_EXP_MASK 0x7F800000u

/* The weight being made. */
typedef struct WeightOut {
  const IrValue *param; /* stays valid: nothing here creates IR values */
  Diag *d;
  IrDType dtype;
  bool clamp; /* fp16 only: clamp out-of-range values instead of failing */
  uint64_t n; /* elements */
  void *data;
  /* Collected while converting, reported by weights_report_problems(). */
  bool nan, over;
  uint64_t nan_at, over_at;
  double over_value;
  bool over_is_float; /* the value came from a float (not double) source: print it as one */
  uint64_t clamped;
  /* WeightLoadOptions.progress; set in the calling thread's copy only. */
  void (*progress)(void *ctx, size_t done);
  void *progress_ctx;
  void (*claim)(void *ctx, size_t end); /* WeightLoadOptions.claim, in every copy */
} WeightOut;

/* How messages name where a weight came from: "'m.safetensors' ('wte')",
 * "'w.npy'", "normal(seed=1, mean=0, std=0.02)", "fill(0.5)". */
void weights_describe_source(StrBuf *sb, const IrParamSource *src);
/* A NaN at element i (the first one noted is reported). */
void weights_note_nan(WeightOut *o, uint64_t i);
/* A finite value (or an infinity where fp16 needs a finite one) that the
 * dtype cannot hold, at element i. Returns the fp16 bits to store when clamping. */
uint16_t weights_note_over(WeightOut *o, uint64_t i, double v, bool as_float);
/* Reports what was noted; false if the weight is unusable. */
bool weights_report_problems(WeightOut *o);

/* Makes elements [begin, end) of o->data (begin a multiple of CHUNK),
 * noting problems in o. */
typedef void WeightSliceFn(WeightOut *o, uint64_t begin, uint64_t end, const void *arg);
/* Runs fn over all of o's elements, on every core for a large weight, and
 * merges what the threads noted into o (weights_data.c). */
void weights_run_slices(WeightOut *o, WeightSliceFn *fn, const void *arg);

/* A normal or uniform initializer into o (fp16 or fp32), reported (weights_random.c). */
bool weights_make_random(WeightOut *o);
/* The safetensors or .npy tensor of o's param into o, reported (weights_file_data.c). */
bool weights_read_file(WeightOut *o, IrModule *m);

#endif
