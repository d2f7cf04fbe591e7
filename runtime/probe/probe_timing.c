/*
 * The timing probes: the SRAM cliff (time per FLOP of a matmul as its
 * working set grows) and the dispatch overhead (the best time of a program
 * that does almost nothing). Figures only: nothing here is asserted on, and
 * on a loaded machine they say little.
 */
#include "probe_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Time per FLOP must rise this much over its best so far to count as the cliff. */
#define KNEE_RISE 1.3

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

void probe_sram(ProbeSession *s, uint64_t min_surface_bytes, OrionProbeSram *out) {
  out->ran = true;
  /* n = 64 x 2^(k/2), rounded to a multiple of 32: two points per doubling of n. */
  for (uint32_t k = 0;; k++) {
    uint64_t n = (uint64_t)(64.0 * pow(2.0, k / 2.0) / 32.0 + 0.5) * 32;
    uint64_t ws = 3 * n * n * 2;
    if (ws > s->opt.max_working_set) break;
    if (n * n * 2 < min_surface_bytes) continue; /* each operand's surface below the device's minimum */
    char *mil = probe_mil_text(s->opt.target, PROBE_OP_MATMUL, n, 0, 0);
    char *err = NULL;
    ProbeProgram *pp = probe_program_open(s, mil, 1.0f / 64, &err);
    free(mil);
    double best = HUGE_VAL, ms;
    bool ok = pp && probe_program_run(pp, NULL, &err); /* the first run is not timed: it may load */
    for (uint32_t r = 0; ok && r < s->opt.repeats; r++) {
      ok = probe_program_run(pp, &ms, &err);
      if (ok && ms < best) best = ms;
    }
    probe_program_close(pp);
    if (!ok) {
      StrBuf sb;
      sb_init(&sb);
      sb_printf(&sb, "matmul of [1, 1, %llu, %llu]: %s", (unsigned long long)n, (unsigned long long)n, err);
      free(err);
      out->error = sb.data;
      break;
    }
    double flops = 2.0 * (double)n * (double)n * (double)n;
    out->points = xrealloc(out->points, sizeof *out->points * (out->npoints + 1));
    out->points[out->npoints++] = (OrionProbePoint){
        .n = n, .working_set_bytes = ws, .flops = flops, .best_ms = best, .ns_per_flop = best * 1e6 / flops};
    probe_say(s, true, "  sram: n %llu, working set %llu bytes: %.4g ms", (unsigned long long)n,
              (unsigned long long)ws, best);
  }
  /* The cliff: the first point whose time per FLOP is well above the best
   * of the smaller ones (which fall at first, while the dispatch dominates). */
  double best = HUGE_VAL;
  for (uint32_t i = 0; i < out->npoints; i++) {
    double v = out->points[i].ns_per_flop;
    if (i > 0 && v > KNEE_RISE * best) {
      out->knee_found = true;
      out->knee_bytes = out->points[i - 1].working_set_bytes;
      break;
    }
    if (v < best) best = v;
  }
}

void probe_dispatch(ProbeSession *s, uint64_t channels, OrionProbeDispatch *out) {
  out->ran = true;
  out->channels = channels;
  char *mil = probe_mil_text(s->opt.target, PROBE_OP_RELU, channels, ORION_PROBE_WIDTH, 0);
  ProbeProgram *pp = probe_program_open(s, mil, 0.25f, &out->error);
  free(mil);
  double *times = xcalloc(s->opt.dispatch_runs, sizeof *times);
  bool ok = pp && probe_program_run(pp, NULL, &out->error);
  uint32_t n = 0;
  for (; ok && n < s->opt.dispatch_runs; n++) ok = probe_program_run(pp, &times[n], &out->error);
  probe_program_close(pp);
  out->ok = ok;
  out->runs = n;
  if (ok && n) {
    qsort(times, n, sizeof *times, cmp_double);
    out->best_ms = times[0];
    out->median_ms = n % 2 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
  }
  free(times);
}
