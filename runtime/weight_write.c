/*
 * Weights written in place (orion_write_weights, orion_commit_weights in
 * orion/runtime.h): a training step's fp32 masters converted straight into
 * the program's writable (private) mapping of its weight file. The cost is
 * one check and one conversion pass over the values; the file, the manifest
 * and the checksums are left to orion_commit_weights, which a run calls
 * where the package must verify (a checkpoint, the end), not every step.
 */
#include "orion/runtime.h"
#include "loader_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "orion/fp16.h"
#include "orion/parallel.h"
#include "orion/patch.h"

/* Values at or beyond 65520 round to infinity in fp16 (65504 is the
 * largest finite one, the next step would be 65536). */
#define FP16_LIMIT 65520.0f

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

static void check_item(void *ctx, size_t item) {
  WriteJob *j = ctx;
  size_t at, len;
  uint32_t k = item_at(j, item, &at, &len);
  bool fp16 = orion_weight(j->p, j->v[k].fn, j->v[k].weight)->dtype == MIL_DT_FP16;
  j->bad[item] = count_bad(j->v[k].values + at, len, fp16 ? FP16_LIMIT : INFINITY);
}

static void convert_item(void *ctx, size_t item) {
  WriteJob *j = ctx;
  size_t at, len;
  uint32_t k = item_at(j, item, &at, &len);
  const OrionWeight *w = orion_weight(j->p, j->v[k].fn, j->v[k].weight);
  uint8_t *dst = orion_weight_data_writable(j->p, j->v[k].fn, j->v[k].weight);
  if (w->dtype == MIL_DT_FP16) fp16_from_float_array((uint16_t *)(void *)dst + at, j->v[k].values + at, len);
  else memcpy(dst + at * sizeof(float), j->v[k].values + at, len * sizeof(float));
}

bool orion_write_weights(OrionProgram *p, const OrionWeightValues *v, uint32_t n, Diag *d) {
  if (n && !orion_weight_data_writable(p, v[0].fn, v[0].weight)) {
    diag_error(d, (SrcSpan){0}, "'%s' was not opened with writable weights (OrionOpenOptions.writable_weights)",
               orion_program_path(p));
    return false;
  }
  WriteJob j = {.p = p, .v = v, .n = n, .first = xcalloc(n + 1, sizeof *j.first)};
  for (uint32_t k = 0; k < n; k++) {
    const OrionWeight *w = target(p, &v[k], d);
    if (!w) {
      free(j.first);
      return false;
    }
    j.first[k + 1] = j.first[k] + (elements(w) + CHUNK - 1) / CHUNK;
  }
  /* Everything is checked before the first byte changes; both passes are
   * memory-bound, so they run on two cores. */
  j.bad = xcalloc(j.first[n] + 1, sizeof *j.bad);
  parallel_for_two(j.first[n], check_item, &j);
  bool ok = true;
  for (uint32_t k = 0; ok && k < n; k++) {
    size_t bad = 0;
    for (size_t i = j.first[k]; i < j.first[k + 1]; i++) bad += j.bad[i];
    if (!bad) continue;
    const OrionWeight *w = orion_weight(p, v[k].fn, v[k].weight);
    bool fp16 = w->dtype == MIL_DT_FP16;
    size_t first = 0;
    while (fabsf(v[k].values[first]) < (fp16 ? FP16_LIMIT : INFINITY)) first++;
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
