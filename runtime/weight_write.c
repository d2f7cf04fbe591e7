/*
 * Weights written in place (orion_write_weights, orion_commit_weights in
 * orion/runtime.h): a training step's fp32 masters converted straight into
 * the program's writable (private) mapping of its weight file. The cost is
 * one conversion pass over the values, and a check pass over those that
 * come without a count of their misfits (orion/values_fit.h: the training
 * optimizer counts as it computes); the file, the manifest and the
 * checksums are left to orion_commit_weights, which a run calls where the
 * package must verify (a checkpoint, the end), not every step.
 */
#include "orion/runtime.h"
#include "loader_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "orion/fp16.h"
#include "orion/parallel.h"
#include "orion/patch.h"

/* How many of n values are NaN, infinite or (fp16) round to infinity. */
static size_t count_bad_scalar(const float *x, size_t n, float limit) {
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += !(fabsf(x[i]) < limit);
  return bad;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* Eight at a time: |x| by clearing the sign, "not less than" (true for NaN)
 * as a lane mask, counted by popcount. GCC leaves the scalar loop scalar
 * (the size_t count of a float compare), at a third of memory's speed. */
__attribute__((target("avx,popcnt"))) static size_t count_bad_avx(const float *x, size_t n, float limit) {
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF)), lim = _mm256_set1_ps(limit);
  size_t bad = 0, i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + i), magnitude);
    bad += (size_t)_mm_popcnt_u32((unsigned)_mm256_movemask_ps(_mm256_cmp_ps(a, lim, _CMP_NLT_UQ)));
  }
  return bad + count_bad_scalar(x + i, n - i, limit);
}

static size_t count_bad(const float *x, size_t n, float limit) {
  if (__builtin_cpu_supports("avx") && __builtin_cpu_supports("popcnt")) return count_bad_avx(x, n, limit);
  return count_bad_scalar(x, n, limit);
}
#else
static size_t count_bad(const float *x, size_t n, float limit) { return count_bad_scalar(x, n, limit); }
#endif

static const char *label_of(const OrionWeightValues *v, const OrionWeight *w) { return v->label ? v->label : w->name; }

/* The weight a set names, or NULL after reporting why it cannot be written. */
static const OrionWeight *target(OrionProgram *p, const OrionWeightValues *v, Diag *d) {
  if (v->fn >= orion_function_count(p) || v->weight >= orion_weight_count(p, v->fn)) {
    diag_error(d, (SrcSpan){0}, "orion_write_weights: function %u has no weight %u", v->fn, v->weight);
    return NULL;
  }
  const OrionWeight *w = orion_weight(p, v->fn, v->weight);
  if (w->dtype != MIL_DT_FP16 && w->dtype != MIL_DT_FP32) {
    diag_error(d, (SrcSpan){0}, "weight '%s' is %s; only fp16 and fp32 weights are written from fp32 values",
               label_of(v, w), mil_dtype_name(w->dtype));
    return NULL;
  }
  return w;
}

/* Work items of a write: each set cut into CHUNK-element pieces. */
#define CHUNK ((size_t)1 << 20)

typedef struct WriteJob {
  OrionProgram *p;
  const OrionWeightValues *v;
  uint32_t n;
  size_t *first; /* per set, its first item; first[n] is the number of items */
  size_t *bad;   /* per item: values that do not fit */
} WriteJob;

static size_t elements(const OrionWeight *w) { return (size_t)(w->size / (w->dtype == MIL_DT_FP16 ? 2 : 4)); }

/* The set of item `item` and the piece's start and length. */
static uint32_t item_at(const WriteJob *j, size_t item, size_t *at, size_t *len) {
  uint32_t k = 0;
  while (j->first[k + 1] <= item) k++;
  size_t count = elements(orion_weight(j->p, j->v[k].fn, j->v[k].weight));
  *at = (item - j->first[k]) * CHUNK;
  *len = count - *at < CHUNK ? count - *at : CHUNK;
  return k;
}

static float limit_of(const OrionWeight *w) { return orion_fit_limit(w->dtype == MIL_DT_FP16); }

/* Sets with a count of their own were counted as they were made. */
static void check_item(void *ctx, size_t item) {
  WriteJob *j = ctx;
  size_t at, len;
  uint32_t k = item_at(j, item, &at, &len);
  if (j->v[k].fit) return;
  j->bad[item] = count_bad(j->v[k].values + at, len, limit_of(orion_weight(j->p, j->v[k].fn, j->v[k].weight)));
}

#if defined(__x86_64__) && defined(__GNUC__)
/* Streaming stores: the weight data is far larger than the caches and read
 * next by the program's run, not now, so its lines are not fetched first
 * only to be overwritten (a third less memory traffic than memcpy). */
__attribute__((target("avx"))) static void copy_streaming_avx(float *dst, const float *src, size_t n) {
  size_t i = 0;
  for (; i < n && ((uintptr_t)(dst + i) & 31); i++) dst[i] = src[i];
  for (; i + 8 <= n; i += 8) _mm256_stream_ps(dst + i, _mm256_loadu_ps(src + i));
  for (; i < n; i++) dst[i] = src[i];
  _mm_sfence(); /* ordered before the backend, perhaps on another thread, reads them */
}

static void copy_floats(float *dst, const float *src, size_t n) {
  if (__builtin_cpu_supports("avx")) copy_streaming_avx(dst, src, n);
  else memcpy(dst, src, n * sizeof(float));
}
#else
static void copy_floats(float *dst, const float *src, size_t n) { memcpy(dst, src, n * sizeof(float)); }
#endif

static void convert_item(void *ctx, size_t item) {
  WriteJob *j = ctx;
  size_t at, len;
  uint32_t k = item_at(j, item, &at, &len);
  const OrionWeight *w = orion_weight(j->p, j->v[k].fn, j->v[k].weight);
  uint8_t *dst = orion_weight_data_writable(j->p, j->v[k].fn, j->v[k].weight);
  if (w->dtype == MIL_DT_FP16) fp16_from_float_array_streaming((uint16_t *)(void *)dst + at, j->v[k].values + at, len);
  else copy_floats((float *)(void *)dst + at, j->v[k].values + at, len);
}

/* Whether set k's count is of its values, for its weight, and not taken up. */
static bool fit_is_of(const OrionWeightValues *v, const OrionWeight *w, Diag *d) {
  const OrionValuesFit *f = v->fit;
  if (f->values == v->values && f->count == elements(w) && f->limit == limit_of(w)) return true;
  diag_error(d, (SrcSpan){0}, "orion_write_weights: the count of misfits given for weight '%s' is not of its %zu "
             "values for |x| < %g (%s); nothing was written", label_of(v, w), elements(w), (double)limit_of(w),
             !f->values ? "it was taken up already, or nothing was counted" : "it counted other values");
  return false;
}

/* Every count given is used once, whatever the outcome. */
static void take_up_fits(const OrionWeightValues *v, uint32_t n) {
  for (uint32_t k = 0; k < n; k++)
    if (v[k].fit) v[k].fit->values = NULL;
}

static bool write_checked(OrionProgram *p, const OrionWeightValues *v, uint32_t n, Diag *d) {
  if (n && !orion_weight_data_writable(p, v[0].fn, v[0].weight)) {
    diag_error(d, (SrcSpan){0}, "'%s' was not opened with writable weights (OrionOpenOptions.writable_weights)",
               orion_program_path(p));
    return false;
  }
  WriteJob j = {.p = p, .v = v, .n = n, .first = xcalloc(n + 1, sizeof *j.first)};
  bool counted_all = true;
  for (uint32_t k = 0; k < n; k++) {
    const OrionWeight *w = target(p, &v[k], d);
    if (!w || (v[k].fit && !fit_is_of(&v[k], w, d))) {
      free(j.first);
      return false;
    }
    counted_all = counted_all && v[k].fit;
    j.first[k + 1] = j.first[k] + (elements(w) + CHUNK - 1) / CHUNK;
  }
  /* Everything is checked before the first byte changes; both passes are
   * memory-bound, so they run on two cores. */
  j.bad = xcalloc(j.first[n] + 1, sizeof *j.bad);
  if (!counted_all) parallel_for_two(j.first[n], check_item, &j);
  bool ok = true;
  for (uint32_t k = 0; ok && k < n; k++) {
    size_t bad = v[k].fit ? v[k].fit->unfit : 0;
    for (size_t i = j.first[k]; i < j.first[k + 1]; i++) bad += j.bad[i];
    if (!bad) continue;
    const OrionWeight *w = orion_weight(p, v[k].fn, v[k].weight);
    bool fp16 = w->dtype == MIL_DT_FP16;
    size_t first = 0;
    while (first + 1 < elements(w) && fabsf(v[k].values[first]) < limit_of(w)) first++;
    diag_error(d, (SrcSpan){0}, "weight '%s': %zu of %zu values are not finite%s (element %zu is %g); the weights "
               "were not written", label_of(&v[k], w), bad, elements(w), fp16 ? " in fp16" : "", first,
               (double)v[k].values[first]);
    ok = false;
  }
  if (ok) {
    parallel_for_two(j.first[n], convert_item, &j);
    for (uint32_t k = 0; k < n; k++) {
      const OrionWeight *w = orion_weight(p, v[k].fn, v[k].weight);
      orion_program_note_weight_written(p, orion_weight_data_writable(p, v[k].fn, v[k].weight), (size_t)w->size);
    }
  }
  free(j.bad);
  free(j.first);
  return ok;
}

bool orion_write_weights(OrionProgram *p, const OrionWeightValues *v, uint32_t n, Diag *d) {
  bool ok = write_checked(p, v, n, d);
  take_up_fits(v, n);
  return ok;
}

bool orion_commit_weights(OrionProgram *p, Diag *d) {
  if (!orion_program_weights_written(p)) return true;
  Package manifest = {0};
  if (!orion_program_write_back(p, d)) return false;
  if (orion_program_manifest(p)) {
    if (!package_refresh_checksums(orion_program_path(p), NULL, d)) return false;
    if (!package_read(orion_program_path(p), &manifest, d)) return false;
  }
  orion_program_weights_committed(p, &manifest);
  return true;
}
