/*
 * The training runtime's CPU-side pieces (library orion_train, runtime/train/):
 * the token data feeder, the optimizers on fp32 master weights (AdamW, SGD),
 * the learning-rate schedule, gradient clipping and accumulation, and dynamic
 * loss scaling for fp16 with the guard on the master -> fp16 conversion.
 * docs/training.md ("Runtime: data, optimizers, loss scaling") gives the
 * formulas and defaults; testsuite/make_optim_fixture.py checks them against
 * PyTorch.
 *
 * Nothing here owns a param: the caller (the training loop) owns the master
 * weights and gradients and passes them as TrainParam lists. No process-wide
 * state; every object is independent.
 */
#ifndef ORION_TRAIN_OPTIM_H
#define ORION_TRAIN_OPTIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "orion/dtype.h"
#include "orion/support.h"
#include "orion/values_fit.h"

/* ---- data (runtime/train/data.c) ---------------------------------------- */

typedef struct TrainDataOptions {
  int64_t batch;  /* B: rows of tokens/targets, >= 1 */
  int64_t seq;    /* T: tokens per row, >= 1 */
  int64_t vocab;  /* token ids must lie in [0, vocab); >= 1 */
  bool shuffle;   /* permute the windows once per epoch */
  uint64_t seed;  /* the shuffle's seed */
} TrainDataOptions;

/* Where the feeder is: everything a checkpoint needs to continue the same
 * sequence of batches. The permutation of epoch e is a function of (seed, e)
 * alone, so the RNG state is the seed and the epoch (rows / windows). */
typedef struct TrainDataPosition {
  uint64_t batches; /* batches handed out so far (the next one is number batches + 1) */
  uint64_t seed;
  uint64_t windows; /* W when saved: a resume on other data or another T is refused */
  uint32_t shuffle; /* 0 or 1 */
} TrainDataPosition;

/* Bytes of an encoded TrainDataPosition (little-endian, versioned). */
#define TRAIN_DATA_POSITION_BYTES 32

typedef struct TrainData TrainData;

/* Opens token data: a 1-D .npy of any integer dtype (name ending in .npy) or
 * raw little-endian uint16 (any other name, llama2.c's and llm.c's .bin).
 * Every token is checked against [0, vocab) here, once. Errors:
 *   "'F': token 50 at position 17 is outside the vocabulary [0, 50)"
 *   "'F' has 5 tokens: windows of 5 tokens and the target after them need at least 6"
 *   "'F' holds a rank-2 array; token data must be 1-D"
 *   "'F' holds fp32 data; token data must be integers"
 *   "'F' has an odd number of bytes (21); a .bin token file is uint16"
 * (the position is the 0-based index in the file), plus the .npy parser's
 * and the file system's messages. On failure *out is NULL. */
bool train_data_open(const char *path, const TrainDataOptions *opt, TrainData **out, Diag *d);
void train_data_free(TrainData *data);

int64_t train_data_length(const TrainData *data);  /* tokens in the file */
int64_t train_data_windows(const TrainData *data); /* W = floor((length - 1) / T) */

/* The window that row `row` (0-based, counted over all batches: row =
 * batch_index * B + b) reads: row mod W, or with shuffle perm_e[row mod W]
 * for epoch e = row / W. */
int64_t train_data_window_of_row(TrainData *data, uint64_t row);

/* Fills tokens and targets (int32 [B, T] each) with batch `batch_index`
 * (0-based; step s of a run without accumulation is batch s - 1). Does not
 * move the position. */
void train_data_batch(TrainData *data, uint64_t batch_index, int32_t *tokens, int32_t *targets);
/* The next batch, advancing the position by one. */
void train_data_next(TrainData *data, int32_t *tokens, int32_t *targets);

/* Gradient accumulation: micro-batch k (0-based, < accum) of optimizer step
 * `step` (1-based) is batch (step - 1) * accum + k. */
uint64_t train_data_step_batch(uint64_t step, uint32_t accum, uint32_t k);

TrainDataPosition train_data_position(const TrainData *data);
/* Continues from a saved position; refuses one saved with another seed,
 * shuffle setting or window count. */
bool train_data_seek(TrainData *data, const TrainDataPosition *pos, Diag *d);
void train_data_position_encode(const TrainDataPosition *pos, uint8_t out[TRAIN_DATA_POSITION_BYTES]);
/* False for bytes that are not an encoded position (wrong version or flags). */
bool train_data_position_decode(const uint8_t in[TRAIN_DATA_POSITION_BYTES], TrainDataPosition *pos);

/* The shuffle's generator (splitmix64, Steele et al. 2014), exposed so the
 * tests and the fixture script agree on it: returns the next value and
 * advances *state. */
uint64_t train_splitmix64(uint64_t *state);
/* Fills perm[0..n) with the permutation of epoch `epoch` (see docs/training.md). */
void train_shuffle_permutation(uint64_t seed, uint64_t epoch, int64_t *perm, int64_t n);

/* ---- params, gradients, clipping, accumulation (runtime/train/optim.c) ---- */

/* Whether a param is decayed: by default those of rank >= 2 (matrices,
 * embeddings), not biases, norm gains or scalars. */
typedef enum TrainDecay { TRAIN_DECAY_DEFAULT = 0, TRAIN_DECAY_ON, TRAIN_DECAY_OFF } TrainDecay;

typedef struct TrainParam {
  const char *name;
  uint32_t rank;
  int64_t dims[ORION_MAX_RANK];
  float *value; /* fp32 master weights, count elements */
  float *grad;  /* its gradient, count elements */
  size_t count;
  TrainDecay decay;
} TrainParam;

bool train_param_decays(const TrainParam *p);

/* Sets every gradient to 0 (before the first micro-batch of a step). */
void train_grads_zero(TrainParam *params, size_t n);
/* grad += micro (one micro-batch's gradient of the param, count elements). */
void train_grad_add(TrainParam *p, const float *micro);
/* grad /= accum for every param: the mean over the step's micro-batches. */
void train_grads_mean(TrainParam *params, size_t n, uint32_t accum);

/* The global L2 norm of all gradients as clip_grad_norm_ computes it (each
 * tensor's norm, then the norm of the norms; summed in double here), and the
 * clipping: every gradient *= min(1, max_norm / (norm + 1e-6)) in fp32.
 * Returns the norm before clipping. max_norm <= 0 only measures. */
double train_grads_global_norm(const TrainParam *params, size_t n);
double train_grads_clip(TrainParam *params, size_t n, double max_norm);
/* train_grads_clip with the norm already measured (train_grads_unscale_norm). */
double train_grads_clip_measured(TrainParam *params, size_t n, double max_norm, double norm);

/* ---- optimizers (runtime/train/optim.c) --------------------------------- */

typedef enum TrainOptimizerKind { TRAIN_OPT_ADAMW = 0, TRAIN_OPT_SGD } TrainOptimizerKind;

typedef struct TrainOptimizerConfig {
  TrainOptimizerKind kind;
  double beta1, beta2, eps; /* AdamW */
  double weight_decay;      /* decoupled (AdamW) or added to the gradient (SGD) */
  double momentum;          /* SGD; 0: plain SGD */
  double dampening;         /* SGD */
  bool nesterov;            /* SGD, needs momentum > 0 and dampening 0 */
} TrainOptimizerConfig;

/* PyTorch's defaults: AdamW betas (0.9, 0.999), eps 1e-8, weight decay 0.01;
 * SGD momentum 0, dampening 0, weight decay 0. */
TrainOptimizerConfig train_optimizer_defaults(TrainOptimizerKind kind);

typedef struct TrainOptimizer TrainOptimizer;

/* State for n params of the given element counts (AdamW: exp_avg and
 * exp_avg_sq, SGD with momentum: one buffer). NULL with a message for an
 * invalid config ("beta1 must be in [0, 1)", ...). */
TrainOptimizer *train_optimizer_new(const TrainOptimizerConfig *cfg, const TrainParam *params, size_t n, Diag *d);
void train_optimizer_free(TrainOptimizer *opt);

/* One update of every param from its grad with learning rate lr. The params
 * must be the list (same order and counts) the optimizer was made for. */
void train_optimizer_step(TrainOptimizer *opt, TrainParam *params, size_t n, double lr);
/* What the separate unscale and clip passes would multiply every gradient
 * by, applied instead as the optimizer reads each gradient: first unscale,
 * then clip, each an fp32 multiply (1: none), so the same bits. */
typedef struct TrainGradScale {
  float unscale; /* 1 / loss scale, as train_grads_unscale multiplies */
  float clip;    /* train_grads_clip_measured's coefficient */
} TrainGradScale;

/* The factors for a loss scale (1: none) and, with max_norm > 0, clipping at
 * max_norm given the unscaled gradients' norm (train_grads_measure_unscaled). */
TrainGradScale train_grad_scale(float loss_scale, double max_norm, double norm);

/* train_optimizer_step that reads each gradient times *gs (NULL: as it is;
 * the gradients are not written) and also counts, as each new value is
 * made, those of param i that do not fit its program weight: fit[i].limit is
 * set by the caller (orion_fit_limit of the weight's type); values, count
 * and unfit are filled, for orion_write_weights to take up instead of a
 * check pass over the values (orion/values_fit.h). */
void train_optimizer_step_counted(TrainOptimizer *opt, TrainParam *params, size_t n, double lr,
                                  const TrainGradScale *gs, OrionValuesFit *fit);

/* Optimizer steps taken (PyTorch's state['step']). */
uint64_t train_optimizer_steps(const TrainOptimizer *opt);
/* The state buffers, for checkpoints: slots per param (AdamW 2: exp_avg,
 * exp_avg_sq; SGD 1 with momentum, else 0), each count floats of param i.
 * SGD's buffer starts as a copy of the first gradient (PyTorch's first-step
 * rule), so a saved state also records whether it exists. */
uint32_t train_optimizer_slots(const TrainOptimizer *opt);
float *train_optimizer_slot(TrainOptimizer *opt, size_t param, uint32_t slot);
bool train_optimizer_has_state(const TrainOptimizer *opt);
/* Restores a checkpoint's step count (and, for SGD, that the buffers hold
 * state); the caller copies the slots back with train_optimizer_slot. */
void train_optimizer_restore(TrainOptimizer *opt, uint64_t steps, bool has_state);

/* ---- learning-rate schedule (runtime/train/schedule.c) ------------------ */

typedef enum TrainScheduleKind { TRAIN_SCHEDULE_CONSTANT = 0, TRAIN_SCHEDULE_COSINE } TrainScheduleKind;

typedef struct TrainSchedule {
  TrainScheduleKind kind;
  double lr;        /* peak learning rate */
  double min_lr;    /* cosine's floor (default 0) */
  uint64_t warmup;  /* K: steps 1..K ramp linearly, lr * s / K */
  uint64_t steps;   /* N: the run's optimizer steps (cosine reaches min_lr at step N) */
} TrainSchedule;

/* The learning rate of optimizer step s (1-based). */
double train_schedule_lr(const TrainSchedule *sch, uint64_t step);

/* ---- loss scaling for fp16 (runtime/train/loss_scale.c) ----------------- */

typedef struct TrainLossScaleConfig {
  double init_scale;        /* 65536 */
  double growth_factor;     /* 2 */
  double backoff_factor;    /* 0.5 */
  uint32_t growth_interval; /* 2000 */
} TrainLossScaleConfig;

/* PyTorch GradScaler's defaults. */
TrainLossScaleConfig train_loss_scale_defaults(void);

/* The scaler's state (a checkpoint saves all of it). scale is fp32 as in
 * GradScaler. */
typedef struct TrainLossScaler {
  TrainLossScaleConfig cfg;
  float scale;
  uint32_t growth_tracker; /* finite steps since the last change */
  uint64_t skipped;        /* steps skipped for non-finite gradients */
} TrainLossScaler;

/* False with a message for an invalid config (a scale that is not finite
 * and positive, growth_factor <= 1, backoff outside (0, 1), interval 0). */
bool train_loss_scaler_init(TrainLossScaler *s, const TrainLossScaleConfig *cfg, Diag *d);

/* Unscales every gradient (grad *= 1 / scale in fp32) and looks for
 * non-finite values in the same pass. Returns true when all are finite. */
bool train_grads_unscale(TrainParam *params, size_t n, float scale);
/* The same pass measuring the global norm of the unscaled gradients too
 * (train_grads_global_norm's value; *norm may be NULL): one read of every
 * gradient instead of two. */
bool train_grads_unscale_norm(TrainParam *params, size_t n, float scale, double *norm);
/* train_grads_unscale_norm's result and norm without writing the gradients
 * (a read-only pass): the optimizer then unscales as it reads them
 * (train_grad_scale, train_optimizer_step_counted). */
bool train_grads_measure_unscaled(const TrainParam *params, size_t n, float scale, double *norm);

/* After a step: found_nonfinite halves (backoff) the scale, resets the
 * tracker and counts a skipped step; otherwise growth_interval finite steps
 * in a row grow it (if the grown scale is finite), as GradScaler.update. */
void train_loss_scaler_update(TrainLossScaler *s, bool found_nonfinite);

/* ---- the fp32 master -> fp16 guard (runtime/train/loss_scale.c) --------- */

typedef struct TrainFp16Check {
  size_t nonfinite;      /* NaN or infinite masters */
  size_t overflow;       /* finite masters that round beyond 65504 */
  size_t flushed;        /* nonzero masters that become (signed) zero: reported, not an error */
  size_t first_bad;      /* index of the first nonfinite or overflowing element */
  float first_bad_value;
} TrainFp16Check;

/* Checks that n fp32 masters convert to finite fp16 and, if all do, converts
 * them (round to nearest even) into dst. Otherwise writes nothing into dst
 * and reports "param 'NAME': K of N values do not fit fp16 (element I is V);
 * the weights were not written". Never clamps. check (may be NULL) gets the
 * counts either way. */
bool train_fp16_convert_checked(const char *name, const float *src, size_t n, uint16_t *dst, TrainFp16Check *check,
                                Diag *d);

#endif
