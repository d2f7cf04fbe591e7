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
#include <stdlib.h>
#include <string.h>

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

double train_grads_global_norm(const TrainParam *params, size_t n) {
  double total = 0;
  for (size_t i = 0; i < n; i++) {
    double sq = 0;
    const float *g = params[i].grad;
    for (size_t e = 0; e < params[i].count; e++) sq += (double)g[e] * (double)g[e];
    /* clip_grad_norm_ takes each tensor's norm as an fp32 value, then the
     * norm of those. */
    double norm = (double)(float)sqrt(sq);
    total += norm * norm;
  }
  return sqrt(total);
}

double train_grads_clip(TrainParam *params, size_t n, double max_norm) {
  double norm = train_grads_global_norm(params, n);
  if (max_norm <= 0) return norm;
  /* PyTorch: clip_coef = max_norm / (total_norm + 1e-6) on an fp32 tensor,
   * which Python evaluates as reciprocal(total_norm + 1e-6) * max_norm, then
   * clamped to 1 and always applied. */
  float denom = (float)norm + 1e-6f;
  float coef = (1.0f / denom) * (float)max_norm;
  if (coef > 1.0f) coef = 1.0f;
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
 *   p += (-lr/bc1 * m) / (sqrt(v)/sqrt(bc2) + eps),  bc_i = 1 - b_i^t. */
static void adamw_param(const TrainOptimizerConfig *c, TrainParam *p, float *m, float *v, double lr, double bc1,
                        double bc2_sqrt) {
  float decay = (float)(1.0 - lr * (train_param_decays(p) ? c->weight_decay : 0.0));
  float b1 = (float)c->beta1, one_minus_b1 = (float)(1.0 - c->beta1);
  float b2 = (float)c->beta2, one_minus_b2 = (float)(1.0 - c->beta2);
  float neg_step = (float)-(lr / bc1), bc2s = (float)bc2_sqrt, eps = (float)c->eps;
  float *w = p->value;
  const float *g = p->grad;
  for (size_t e = 0; e < p->count; e++) {
    float pe = w[e] * decay;
    float me = m[e] * b1 + one_minus_b1 * g[e];
    float ve = v[e] * b2 + one_minus_b2 * g[e] * g[e];
    float denom = sqrtf(ve) / bc2s + eps;
    m[e] = me;
    v[e] = ve;
    w[e] = pe + (neg_step * me) / denom;
  }
}

/* torch.optim.SGD (_single_tensor_sgd): g += wd*p; buf = g on the first step,
 * else buf = buf*momentum + (1-dampening)*g; g = nesterov ? g + momentum*buf
 * : buf; p += -lr*g. */
static void sgd_param(const TrainOptimizerConfig *c, TrainParam *p, float *buf, bool first, double lr) {
  float wd = (float)(train_param_decays(p) ? c->weight_decay : 0.0);
  float mom = (float)c->momentum, keep = (float)(1.0 - c->dampening), neg_lr = (float)-lr;
  float *w = p->value;
  const float *g = p->grad;
  for (size_t e = 0; e < p->count; e++) {
    float ge = wd != 0 ? g[e] + wd * w[e] : g[e];
    if (buf) {
      float be = first ? ge : buf[e] * mom + keep * ge;
      buf[e] = be;
      ge = c->nesterov ? ge + mom * be : be;
    }
    w[e] = w[e] + neg_lr * ge;
  }
}

void train_optimizer_step(TrainOptimizer *opt, TrainParam *params, size_t n, double lr) {
  opt->steps++;
  const TrainOptimizerConfig *c = &opt->cfg;
  if (c->kind == TRAIN_OPT_ADAMW) {
    double t = (double)opt->steps;
    double bc1 = 1.0 - pow(c->beta1, t), bc2_sqrt = sqrt(1.0 - pow(c->beta2, t));
    for (size_t i = 0; i < n && i < opt->nparams; i++)
      adamw_param(c, &params[i], opt->state[i * 2], opt->state[i * 2 + 1], lr, bc1, bc2_sqrt);
  } else {
    for (size_t i = 0; i < n && i < opt->nparams; i++)
      sgd_param(c, &params[i], opt->slots ? opt->state[i] : NULL, !opt->has_state, lr);
  }
  opt->has_state = true;
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
