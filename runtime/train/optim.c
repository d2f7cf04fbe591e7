/*
 * Optimizers on fp32 master weights, gradient accumulation and clipping
 * (include/orion/train_optim.h).
 *
 * Each update follows PyTorch's single-tensor implementation (the one it runs
 * on the CPU) operation by operation and in the same precision: fp32 tensor
 * arithmetic with scalars computed in double (Python floats) and rounded to
 * fp32 where PyTorch passes them to a tensor op. That keeps a trajectory
 * within a few ulps of PyTorch's, which testsuite/make_optim_fixture.py's
 * fixtures check, instead of drifting by a different order of operations.
 */
#include "orion/train_optim.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "optim_kernels.h"
#include "orion/parallel.h"

struct TrainOptimizer {
  TrainOptimizerConfig cfg;
  size_t nparams;
  size_t *counts;
  uint32_t slots;
  float **state; /* nparams * slots buffers */
  uint64_t steps;
  bool has_state; /* SGD: the momentum buffers have been initialised */
};

bool train_param_decays(const TrainParam *p) {
  if (p->decay == TRAIN_DECAY_ON) return true;
  if (p->decay == TRAIN_DECAY_OFF) return false;
  return p->rank >= 2;
}

void train_grads_zero(TrainParam *params, size_t n) {
  for (size_t i = 0; i < n; i++) memset(params[i].grad, 0, params[i].count * sizeof(float));
}

void train_grad_add(TrainParam *p, const float *micro) {
  float *g = p->grad;
  for (size_t k = 0; k < p->count; k++) g[k] += micro[k];
}

void train_grads_mean(TrainParam *params, size_t n, uint32_t accum) {
  if (accum <= 1) return;
  float k = (float)accum;
  for (size_t i = 0; i < n; i++) {
    float *g = params[i].grad;
    for (size_t e = 0; e < params[i].count; e++) g[e] /= k;
  }
}

/* Work items: each param cut into TRAIN_CHUNK-element pieces, in order. */
typedef struct Chunks {
  TrainParam *params;
  size_t *first; /* per param, its first item; first[n] is the number of items */
  size_t n;
} Chunks;

static Chunks chunks_of(TrainParam *params, size_t n) {
  Chunks c = {.params = params, .first = xcalloc(n + 1, sizeof *c.first), .n = n};
  for (size_t i = 0; i < n; i++) c.first[i + 1] = c.first[i] + (params[i].count + TRAIN_CHUNK - 1) / TRAIN_CHUNK;
  return c;
}

/* The param of item `item` and the piece's start and length. */
static TrainParam *chunk_at(const Chunks *c, size_t item, size_t *at, size_t *len) {
  size_t lo = 0, hi = c->n;
  while (hi - lo > 1) { /* the last param whose first item is <= item */
    size_t mid = (lo + hi) / 2;
    if (c->first[mid] <= item) lo = mid;
    else hi = mid;
  }
  while (c->first[lo + 1] <= item) lo++; /* past params of no elements */
  TrainParam *p = &c->params[lo];
  *at = (item - c->first[lo]) * TRAIN_CHUNK;
  *len = p->count - *at < TRAIN_CHUNK ? p->count - *at : TRAIN_CHUNK;
  return p;
}

typedef struct UnscaleJob {
  Chunks c;
  float inv;
  bool store;
  double *sq;
  bool *finite;
} UnscaleJob;

static void unscale_item(void *ctx, size_t item) {
  UnscaleJob *j = ctx;
  size_t at, len;
  TrainParam *p = chunk_at(&j->c, item, &at, &len);
  train_kernel_unscale_sq(p->grad + at, len, j->inv, j->store, &j->sq[item], &j->finite[item]);
}

/* GradScaler multiplies by the fp32 reciprocal (exact for the powers of
 * two the defaults produce). */
static float reciprocal(float scale) { return (float)(1.0 / (double)scale); }

static bool unscale_norm(TrainParam *params, size_t n, float scale, bool store, double *norm) {
  UnscaleJob j = {.c = chunks_of(params, n), .inv = reciprocal(scale), .store = store};
  size_t items = j.c.first[n];
  j.sq = xcalloc(items + 1, sizeof *j.sq);
  j.finite = xcalloc(items + 1, sizeof *j.finite);
  parallel_for_two(items, unscale_item, &j);
  bool finite = true;
  double total = 0;
  for (size_t i = 0; i < n; i++) {
    double sq = 0;
    for (size_t k = j.c.first[i]; k < j.c.first[i + 1]; k++) {
      sq += j.sq[k];
      finite = finite && j.finite[k];
    }
    /* clip_grad_norm_ takes each tensor's norm as an fp32 value, then the
     * norm of those. */
    double tn = (double)(float)sqrt(sq);
    total += tn * tn;
  }
  if (norm) *norm = sqrt(total);
  free(j.sq);
  free(j.finite);
  free(j.c.first);
  return finite;
}

bool train_grads_unscale_norm(TrainParam *params, size_t n, float scale, double *norm) {
  return unscale_norm(params, n, scale, true, norm);
}

bool train_grads_measure_unscaled(const TrainParam *params, size_t n, float scale, double *norm) {
  /* Without store the pass only reads the gradients. */
  return unscale_norm((TrainParam *)(uintptr_t)params, n, scale, false, norm);
}

double train_grads_global_norm(const TrainParam *params, size_t n) {
  double norm;
  /* With inv 1 the pass only reads the gradients. */
  train_grads_unscale_norm((TrainParam *)(uintptr_t)params, n, 1.0f, &norm);
  return norm;
}

double train_grads_clip(TrainParam *params, size_t n, double max_norm) {
  return train_grads_clip_measured(params, n, max_norm, train_grads_global_norm(params, n));
}

/* PyTorch: clip_coef = max_norm / (total_norm + 1e-6) on an fp32 tensor,
 * which Python evaluates as reciprocal(total_norm + 1e-6) * max_norm, then
 * clamped to 1 and always applied. */
static float clip_coef(double max_norm, double norm) {
  if (max_norm <= 0) return 1.0f;
  float denom = (float)norm + 1e-6f;
  float coef = (1.0f / denom) * (float)max_norm;
  return coef > 1.0f ? 1.0f : coef;
}

TrainGradScale train_grad_scale(float loss_scale, double max_norm, double norm) {
  return (TrainGradScale){.unscale = reciprocal(loss_scale), .clip = clip_coef(max_norm, norm)};
}

double train_grads_clip_measured(TrainParam *params, size_t n, double max_norm, double norm) {
  float coef = clip_coef(max_norm, norm);
  if (coef == 1.0f) return norm; /* multiplying by 1 changes nothing */
  for (size_t i = 0; i < n; i++) {
    float *g = params[i].grad;
    for (size_t e = 0; e < params[i].count; e++) g[e] *= coef;
  }
  return norm;
}

TrainOptimizerConfig train_optimizer_defaults(TrainOptimizerKind kind) {
  if (kind == TRAIN_OPT_SGD) return (TrainOptimizerConfig){.kind = TRAIN_OPT_SGD};
  return (TrainOptimizerConfig){.kind = TRAIN_OPT_ADAMW, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                                .weight_decay = 0.01};
}

static bool check_config(const TrainOptimizerConfig *c, Diag *d) {
  const char *bad = NULL;
  if (!(c->weight_decay >= 0) || !isfinite(c->weight_decay)) bad = "weight decay must be finite and >= 0";
  else if (c->kind == TRAIN_OPT_ADAMW) {
    if (!(c->beta1 >= 0 && c->beta1 < 1)) bad = "beta1 must be in [0, 1)";
    else if (!(c->beta2 >= 0 && c->beta2 < 1)) bad = "beta2 must be in [0, 1)";
    else if (!(c->eps > 0) || !isfinite(c->eps)) bad = "eps must be finite and > 0";
  } else if (c->kind == TRAIN_OPT_SGD) {
    if (!(c->momentum >= 0) || !isfinite(c->momentum)) bad = "momentum must be finite and >= 0";
    else if (!(c->dampening >= 0) || !isfinite(c->dampening)) bad = "dampening must be finite and >= 0";
    else if (c->nesterov && (c->momentum <= 0 || c->dampening != 0))
      bad = "nesterov momentum needs a momentum > 0 and dampening 0";
  } else {
    bad = "unknown optimizer";
  }
  if (bad) diag_error(d, (SrcSpan){0}, "optimizer: %s", bad);
  return bad == NULL;
}

TrainOptimizer *train_optimizer_new(const TrainOptimizerConfig *cfg, const TrainParam *params, size_t n, Diag *d) {
  if (!check_config(cfg, d)) return NULL;
  TrainOptimizer *opt = xcalloc(1, sizeof *opt);
  opt->cfg = *cfg;
  opt->nparams = n;
  opt->slots = cfg->kind == TRAIN_OPT_ADAMW ? 2 : cfg->momentum != 0 ? 1 : 0;
  opt->counts = xcalloc(n ? n : 1, sizeof *opt->counts);
  opt->state = xcalloc(n * opt->slots + 1, sizeof *opt->state);
  for (size_t i = 0; i < n; i++) {
    opt->counts[i] = params[i].count;
    for (uint32_t s = 0; s < opt->slots; s++)
      opt->state[i * opt->slots + s] = xcalloc(params[i].count ? params[i].count : 1, sizeof(float));
  }
  return opt;
}

void train_optimizer_free(TrainOptimizer *opt) {
  if (!opt) return;
  for (size_t i = 0; i < opt->nparams * opt->slots; i++) free(opt->state[i]);
  free(opt->state);
  free(opt->counts);
  free(opt);
}

/* torch.optim.AdamW (_single_tensor_adamw):
 *   p *= 1 - lr*wd;  m = m*b1 + (1-b1)*g;  v = v*b2 + (1-b2)*g*g;
 *   p += (-lr/bc1 * m) / (sqrt(v)/sqrt(bc2) + eps),  bc_i = 1 - b_i^t.
 * The scalars of one param, rounded to fp32 as PyTorch passes them. */
static AdamwScalars adamw_scalars(const TrainOptimizerConfig *c, const TrainParam *p, double lr, double bc1,
                                  double bc2_sqrt, TrainGradScale gs) {
  return (AdamwScalars){.decay = (float)(1.0 - lr * (train_param_decays(p) ? c->weight_decay : 0.0)),
                        .b1 = (float)c->beta1, .one_minus_b1 = (float)(1.0 - c->beta1), .b2 = (float)c->beta2,
                        .one_minus_b2 = (float)(1.0 - c->beta2), .neg_step = (float)-(lr / bc1),
                        .bc2_sqrt = (float)bc2_sqrt, .eps = (float)c->eps, .unscale = gs.unscale, .clip = gs.clip};
}

typedef struct AdamwJob {
  Chunks c;
  TrainOptimizer *opt;
  AdamwScalars *scalars; /* per param */
  const float *limits;   /* per param: the fit limit of its weight */
  size_t *unfit;         /* per item: new values beyond it */
} AdamwJob;

static void adamw_item(void *ctx, size_t item) {
  AdamwJob *j = ctx;
  size_t at, len;
  TrainParam *p = chunk_at(&j->c, item, &at, &len);
  size_t i = (size_t)(p - j->c.params);
  j->unfit[item] = train_kernel_adamw(p->value + at, j->opt->state[i * 2] + at, j->opt->state[i * 2 + 1] + at,
                                      p->grad + at, len, &j->scalars[i], j->limits[i]);
}

/* One pass over every param's four arrays, in chunks over up to two threads
 * (each element's arithmetic is the same whoever does it). unfit[i]: param
 * i's new values not below limits[i]. */
static void adamw_step(TrainOptimizer *opt, TrainParam *params, size_t n, double lr, TrainGradScale gs,
                       const float *limits, size_t *unfit) {
  const TrainOptimizerConfig *c = &opt->cfg;
  double t = (double)opt->steps;
  double bc1 = 1.0 - pow(c->beta1, t), bc2_sqrt = sqrt(1.0 - pow(c->beta2, t));
  AdamwJob j = {.c = chunks_of(params, n), .opt = opt, .scalars = xcalloc(n + 1, sizeof *j.scalars),
                .limits = limits};
  j.unfit = xcalloc(j.c.first[n] + 1, sizeof *j.unfit);
  for (size_t i = 0; i < n; i++) j.scalars[i] = adamw_scalars(c, &params[i], lr, bc1, bc2_sqrt, gs);
  parallel_for_two(j.c.first[n], adamw_item, &j);
  for (size_t i = 0; i < n; i++) {
    unfit[i] = 0;
    for (size_t k = j.c.first[i]; k < j.c.first[i + 1]; k++) unfit[i] += j.unfit[k];
  }
  free(j.unfit);
  free(j.scalars);
  free(j.c.first);
}

/* torch.optim.SGD (_single_tensor_sgd): g += wd*p; buf = g on the first step,
 * else buf = buf*momentum + (1-dampening)*g; g = nesterov ? g + momentum*buf
 * : buf; p += -lr*g. */
static size_t sgd_param(const TrainOptimizerConfig *c, TrainParam *p, float *buf, bool first, double lr,
                        TrainGradScale gs, float limit) {
  float wd = (float)(train_param_decays(p) ? c->weight_decay : 0.0);
  float mom = (float)c->momentum, keep = (float)(1.0 - c->dampening), neg_lr = (float)-lr;
  float *w = p->value;
  const float *g = p->grad;
  size_t unfit = 0;
  for (size_t e = 0; e < p->count; e++) {
    float ge = g[e];
    if (gs.unscale != 1.0f) ge = ge * gs.unscale;
    if (gs.clip != 1.0f) ge = ge * gs.clip;
    if (wd != 0) ge = ge + wd * w[e];
    if (buf) {
      float be = first ? ge : buf[e] * mom + keep * ge;
      buf[e] = be;
      ge = c->nesterov ? ge + mom * be : be;
    }
    w[e] = w[e] + neg_lr * ge;
    unfit += !(fabsf(w[e]) < limit);
  }
  return unfit;
}

/* limits[i]: param i's fit limit; unfit[i] gets the count. */
static void optimizer_step(TrainOptimizer *opt, TrainParam *params, size_t n, double lr, TrainGradScale gs,
                           const float *limits, size_t *unfit) {
  opt->steps++;
  const TrainOptimizerConfig *c = &opt->cfg;
  if (n > opt->nparams) n = opt->nparams;
  if (c->kind == TRAIN_OPT_ADAMW) {
    adamw_step(opt, params, n, lr, gs, limits, unfit);
  } else {
    for (size_t i = 0; i < n; i++)
      unfit[i] = sgd_param(c, &params[i], opt->slots ? opt->state[i] : NULL, !opt->has_state, lr, gs, limits[i]);
  }
  opt->has_state = true;
}

void train_optimizer_step(TrainOptimizer *opt, TrainParam *params, size_t n, double lr) {
  float *limits = xcalloc(n + 1, sizeof *limits);
  size_t *unfit = xcalloc(n + 1, sizeof *unfit);
  for (size_t i = 0; i < n; i++) limits[i] = INFINITY;
  optimizer_step(opt, params, n, lr, (TrainGradScale){1.0f, 1.0f}, limits, unfit);
  free(unfit);
  free(limits);
}

void train_optimizer_step_counted(TrainOptimizer *opt, TrainParam *params, size_t n, double lr,
                                  const TrainGradScale *gs, OrionValuesFit *fit) {
  float *limits = xcalloc(n + 1, sizeof *limits);
  size_t *unfit = xcalloc(n + 1, sizeof *unfit);
  for (size_t i = 0; i < n; i++) limits[i] = fit[i].limit;
  optimizer_step(opt, params, n, lr, gs ? *gs : (TrainGradScale){1.0f, 1.0f}, limits, unfit);
  /* A param past the optimizer's list was not updated, so not counted. */
  for (size_t i = 0; i < n; i++)
    fit[i] = i < opt->nparams ? (OrionValuesFit){.values = params[i].value, .count = params[i].count,
                                                 .limit = limits[i], .unfit = unfit[i]}
                              : (OrionValuesFit){.limit = limits[i]};
  free(unfit);
  free(limits);
}

uint64_t train_optimizer_steps(const TrainOptimizer *opt) { return opt->steps; }
uint32_t train_optimizer_slots(const TrainOptimizer *opt) { return opt->slots; }

float *train_optimizer_slot(TrainOptimizer *opt, size_t param, uint32_t slot) {
  if (param >= opt->nparams || slot >= opt->slots) return NULL;
  return opt->state[param * opt->slots + slot];
}

bool train_optimizer_has_state(const TrainOptimizer *opt) { return opt->has_state; }

void train_optimizer_restore(TrainOptimizer *opt, uint64_t steps, bool has_state) {
  opt->steps = steps;
  opt->has_state = has_state;
}
