/*
 * Dynamic loss scaling for fp16 gradients and the guard on the fp32 master ->
 * fp16 weight conversion (include/orion/train_optim.h).
 *
 * The scale follows PyTorch's GradScaler (its _amp_update_scale_ kernel) in
 * fp32, so a run sees the same scale sequence as a PyTorch one. Nothing here
 * clamps or zeroes a value: a non-finite gradient skips the step and is
 * counted, a weight that would not fit fp16 is refused and reported.
 */
#include "orion/train_optim.h"

#include <math.h>
#include <string.h>

#include "orion/weight_file.h"

TrainLossScaleConfig train_loss_scale_defaults(void) {
  return (TrainLossScaleConfig){.init_scale = 65536.0, .growth_factor = 2.0, .backoff_factor = 0.5,
                                .growth_interval = 2000};
}

bool train_loss_scaler_init(TrainLossScaler *s, const TrainLossScaleConfig *cfg, Diag *d) {
  memset(s, 0, sizeof *s);
  const char *bad = NULL;
  if (!(cfg->init_scale > 0) || !isfinite((float)cfg->init_scale))
    bad = "the initial scale must be finite (in fp32) and > 0";
  else if (!(cfg->growth_factor > 1) || !isfinite(cfg->growth_factor)) bad = "the growth factor must be finite and > 1";
  else if (!(cfg->backoff_factor > 0 && cfg->backoff_factor < 1)) bad = "the backoff factor must be in (0, 1)";
  else if (cfg->growth_interval == 0) bad = "the growth interval must be at least 1";
  if (bad) {
    diag_error(d, (SrcSpan){0}, "loss scaling: %s", bad);
    return false;
  }
  s->cfg = *cfg;
  s->scale = (float)cfg->init_scale;
  return true;
}

bool train_grads_unscale(TrainParam *params, size_t n, float scale) {
  return train_grads_unscale_norm(params, n, scale, NULL);
}

void train_loss_scaler_update(TrainLossScaler *s, bool found_nonfinite) {
  if (found_nonfinite) {
    s->scale = (float)((double)s->scale * s->cfg.backoff_factor);
    s->growth_tracker = 0;
    s->skipped++;
    return;
  }
  uint32_t successful = s->growth_tracker + 1;
  if (successful == s->cfg.growth_interval) {
    float grown = (float)((double)s->scale * s->cfg.growth_factor);
    if (isfinite(grown)) s->scale = grown;
    s->growth_tracker = 0;
  } else {
    s->growth_tracker = successful;
  }
}

bool train_fp16_convert_checked(const char *name, const float *src, size_t n, uint16_t *dst, TrainFp16Check *check,
                                Diag *d) {
  TrainFp16Check c = {0};
  /* Values at or beyond 65520 round to infinity in fp16 (65504 is the
   * largest finite one, the next step would be 65536). The counting loop
   * has no branch, so the compiler vectorizes it (it runs on every weight
   * every training step); the first bad element is looked for only when
   * there is one. */
  const float limit = 65520.0f;
  size_t bad = 0, flushed = 0;
  for (size_t e = 0; e < n; e++) {
    float a = fabsf(src[e]);
    bad += !(a < limit); /* NaN, infinities and overflow */
    /* Below half the smallest subnormal (2^-25) fp16 has only zero. */
    flushed += a != 0.0f && a <= 0x1p-25f;
  }
  c.flushed = flushed;
  bool found = bad != 0;
  if (found) {
    for (size_t e = 0; e < n; e++) {
      bool nonfinite = !isfinite(src[e]);
      c.nonfinite += nonfinite;
      c.overflow += !nonfinite && fabsf(src[e]) >= limit;
    }
    for (c.first_bad = 0; fabsf(src[c.first_bad]) < limit; c.first_bad++) {
    }
    c.first_bad_value = src[c.first_bad];
  }
  if (check) *check = c;
  if (found) {
    diag_error(d, (SrcSpan){0},
               "param '%s': %zu of %zu values do not fit fp16 (element %zu is %g); the weights were not written", name,
               c.nonfinite + c.overflow, n, c.first_bad, (double)c.first_bad_value);
    return false;
  }
  /* pkgio's vectorized conversion: round to nearest even, as fp16_from_float. */
  weights_convert_floats(src, ORION_DT_FP32, n, ORION_DT_FP16, dst);
  return true;
}
