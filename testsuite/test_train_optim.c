/*
 * Tests of the training runtime's optimizers, schedule, clipping,
 * accumulation and loss scaling (runtime/train/) against PyTorch: the
 * trajectories and scale sequences of testsuite/train/optim_fixture.json,
 * made by make_optim_fixture.py with torch.optim.AdamW / SGD,
 * clip_grad_norm_ and GradScaler's update rule. Plus hand-computed values,
 * the fp16 guard's refusals and every configuration error's text.
 *
 * Tolerances (fp32 arithmetic in the same order as PyTorch's; PyTorch's
 * vectorized kernels fuse some multiply-adds, so single roundings differ):
 * each param element within 1e-6 relative of PyTorch's, or 1e-7 absolute
 * (an ulp of values near 1) where a value passes near 0 (measured: all
 * within 1e-6 relative or 5e-8 absolute); learning rates within 1e-12
 * relative (both double); clip norms within 1e-6 relative; loss scales
 * exactly.
 *
 * Needs ORION_SOURCE_ROOT (meson sets it).
 */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "orion/fp16.h"
#include "orion/train_optim.h"

#define PARAM_REL_TOL 1e-6
#define PARAM_ABS_TOL 1e-7
#define LR_REL_TOL 1e-12
#define NORM_REL_TOL 1e-6

/* ---- fixture ------------------------------------------------------------- */

static cJSON *load_fixture(void) { return load_json_fixture("testsuite/train/optim_fixture.json"); }

static const cJSON *item(const cJSON *obj, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  cr_assert_not_null(v, "fixture has no '%s'", key);
  return v;
}

static double num(const cJSON *obj, const char *key) {
  const cJSON *v = item(obj, key);
  cr_assert(cJSON_IsNumber(v), "'%s' is not a number", key);
  return v->valuedouble;
}

static bool has(const cJSON *obj, const char *key) { return cJSON_GetObjectItemCaseSensitive(obj, key) != NULL; }

static void floats_of(const cJSON *list, float *out, size_t n) {
  cr_assert_eq((size_t)cJSON_GetArraySize(list), n);
  size_t i = 0;
  const cJSON *v;
  cJSON_ArrayForEach(v, list) out[i++] = (float)v->valuedouble; /* fp32 values, exact as doubles */
}

typedef struct Case {
  TrainParam *params;
  size_t n;
} Case;

static Case make_params(const cJSON *c) {
  const cJSON *list = item(c, "params");
  Case k = {.n = (size_t)cJSON_GetArraySize(list)};
  k.params = calloc(k.n, sizeof *k.params);
  size_t i = 0;
  const cJSON *p;
  cJSON_ArrayForEach(p, list) {
    TrainParam *tp = &k.params[i++];
    tp->name = item(p, "name")->valuestring;
    tp->count = 1;
    const cJSON *d;
    cJSON_ArrayForEach(d, item(p, "shape")) {
      tp->dims[tp->rank++] = (int64_t)d->valuedouble;
      tp->count *= (size_t)d->valuedouble;
    }
    tp->value = calloc(tp->count, sizeof(float));
    tp->grad = calloc(tp->count, sizeof(float));
    floats_of(item(p, "init"), tp->value, tp->count);
  }
  return k;
}

static void free_params(Case *k) {
  for (size_t i = 0; i < k->n; i++) {
    free(k->params[i].value);
    free(k->params[i].grad);
  }
  free(k->params);
}

static TrainOptimizerConfig config_of(const cJSON *c) {
  bool adamw = strcmp(item(c, "optimizer")->valuestring, "adamw") == 0;
  TrainOptimizerConfig cfg = train_optimizer_defaults(adamw ? TRAIN_OPT_ADAMW : TRAIN_OPT_SGD);
  cfg.weight_decay = num(c, "weight_decay");
  if (adamw) {
    cfg.beta1 = num(c, "beta1");
    cfg.beta2 = num(c, "beta2");
    cfg.eps = num(c, "eps");
  } else {
    cfg.momentum = num(c, "momentum");
    cfg.dampening = num(c, "dampening");
    cfg.nesterov = cJSON_IsTrue(item(c, "nesterov"));
  }
  return cfg;
}

static TrainSchedule schedule_of(const cJSON *c) {
  return (TrainSchedule){
      .kind = strcmp(item(c, "schedule")->valuestring, "cosine") == 0 ? TRAIN_SCHEDULE_COSINE : TRAIN_SCHEDULE_CONSTANT,
      .lr = num(c, "lr"),
      .min_lr = num(c, "min_lr"),
      .warmup = (uint64_t)num(c, "warmup"),
      .steps = (uint64_t)num(c, "steps_total")};
}

static bool in_list(const cJSON *list, int s) {
  const cJSON *v;
  cJSON_ArrayForEach(v, list) if ((int)v->valuedouble == s) return true;
  return false;
}

static void expect_close(float got, float want, const char *what) {
  double err = fabs((double)got - (double)want);
  cr_assert(err <= PARAM_REL_TOL * fabs((double)want) || err <= PARAM_ABS_TOL, "%s: %.9g, PyTorch %.9g", what,
            (double)got, (double)want);
}

/* The training loop's order for one step: accumulate (sum, then mean),
 * unscale and check, skip or clip and update. */
static void run_case(const cJSON *c) {
  const char *name = item(c, "name")->valuestring;
  Case k = make_params(c);
  TrainOptimizerConfig cfg = config_of(c);
  Diag d;
  SourceSet src;
  srcset_init(&src);
  diag_init(&d, &src);
  TrainOptimizer *opt = train_optimizer_new(&cfg, k.params, k.n, &d);
  cr_assert_not_null(opt);
  TrainSchedule sch = schedule_of(c);
  uint32_t accum = has(c, "accum") ? (uint32_t)num(c, "accum") : 1;
  double clip = num(c, "clip");
  bool scaled = has(c, "loss_scale");
  TrainLossScaler scaler;
  if (scaled) {
    TrainLossScaleConfig lc = train_loss_scale_defaults();
    const cJSON *ls = item(c, "loss_scale");
    if (has(ls, "init_scale")) lc.init_scale = num(ls, "init_scale");
    if (has(ls, "growth_interval")) lc.growth_interval = (uint32_t)num(ls, "growth_interval");
    cr_assert(train_loss_scaler_init(&scaler, &lc, &d));
  }
  const cJSON *grads = item(c, "grads");
  const cJSON *traj = item(c, "trajectory");
  float *micro = calloc(64, sizeof(float));
  float *want = calloc(64, sizeof(float));
  int s = 0;
  const cJSON *rec;
  cJSON_ArrayForEach(rec, traj) {
    s++;
    double lr = train_schedule_lr(&sch, (uint64_t)s);
    cr_assert(fabs(lr - num(rec, "lr")) <= LR_REL_TOL * fabs(num(rec, "lr")), "%s step %d: lr %.17g, want %.17g",
              name, s, lr, num(rec, "lr"));
    train_grads_zero(k.params, k.n);
    const cJSON *step_grads = cJSON_GetArrayItem(grads, s - 1);
    for (uint32_t m = 0; m < accum; m++) {
      const cJSON *mg = cJSON_GetArrayItem(step_grads, (int)m);
      for (size_t i = 0; i < k.n; i++) {
        floats_of(cJSON_GetArrayItem(mg, (int)i), micro, k.params[i].count);
        if (scaled) {
          for (size_t e = 0; e < k.params[i].count; e++) micro[e] *= scaler.scale;
          if (in_list(item(c, "nonfinite_steps"), s) && i == 1 && m == 0) micro[2] = INFINITY;
        }
        train_grad_add(&k.params[i], micro);
      }
    }
    train_grads_mean(k.params, k.n, accum);
    bool skipped = false;
    if (scaled) {
      cr_assert_eq((double)scaler.scale, num(rec, "scale"), "%s step %d: scale %g", name, s, (double)scaler.scale);
      skipped = !train_grads_unscale(k.params, k.n, scaler.scale);
      train_loss_scaler_update(&scaler, skipped);
      cr_assert_eq(skipped, cJSON_IsTrue(item(rec, "skipped")), "%s step %d", name, s);
    }
    if (!skipped) {
      if (clip > 0) {
        double norm = train_grads_clip(k.params, k.n, clip);
        cr_assert(fabs(norm - num(rec, "norm")) <= NORM_REL_TOL * num(rec, "norm"), "%s step %d: norm %.9g, want %.9g",
                  name, s, norm, num(rec, "norm"));
      }
      train_optimizer_step(opt, k.params, k.n, lr);
    }
    for (size_t i = 0; i < k.n; i++) {
      floats_of(cJSON_GetArrayItem(item(rec, "params"), (int)i), want, k.params[i].count);
      for (size_t e = 0; e < k.params[i].count; e++) {
        char what[128];
        snprintf(what, sizeof what, "%s step %d %s[%zu]", name, s, k.params[i].name, e);
        expect_close(k.params[i].value[e], want[e], what);
      }
    }
  }
  cr_assert_eq(s, 20);
  if (scaled) cr_assert_eq(scaler.skipped, 3);
  free(micro);
  free(want);
  train_optimizer_free(opt);
  free_params(&k);
  srcset_free(&src);
}

static const cJSON *find_case(const cJSON *fx, const char *list, const char *name) {
  const cJSON *c;
  cJSON_ArrayForEach(c, item(fx, list)) if (strcmp(item(c, "name")->valuestring, name) == 0) return c;
  cr_assert_fail("no case %s", name);
  return NULL;
}

#define PYTORCH_CASE(id)                                                 \
  Test(train_optim, id##_matches_pytorch) {                              \
    cJSON *fx = load_fixture();                                          \
    run_case(find_case(fx, "optimizer_cases", #id));                     \
    cJSON_Delete(fx);                                                    \
  }

PYTORCH_CASE(adamw_warmup_cosine_clip)
PYTORCH_CASE(adamw_constant)
PYTORCH_CASE(adamw_accum3)
PYTORCH_CASE(adamw_loss_scale)
PYTORCH_CASE(sgd_plain)
PYTORCH_CASE(sgd_momentum_warmup_clip)
PYTORCH_CASE(sgd_nesterov_cosine)
PYTORCH_CASE(sgd_dampening)

Test(train_optim, loss_scale_sequences_match_gradscaler) {
  cJSON *fx = load_fixture();
  /* The defaults are PyTorch's, read from GradScaler's signature. */
  TrainLossScaleConfig def = train_loss_scale_defaults();
  const cJSON *pd = item(fx, "scaler_defaults");
  cr_assert_eq(def.init_scale, num(pd, "init_scale"));
  cr_assert_eq(def.growth_factor, num(pd, "growth_factor"));
  cr_assert_eq(def.backoff_factor, num(pd, "backoff_factor"));
  cr_assert_eq((double)def.growth_interval, num(pd, "growth_interval"));
  const cJSON *c;
  cJSON_ArrayForEach(c, item(fx, "scaler_cases")) {
    TrainLossScaleConfig cfg = {.init_scale = num(c, "init_scale"),
                                .growth_factor = num(c, "growth_factor"),
                                .backoff_factor = num(c, "backoff_factor"),
                                .growth_interval = (uint32_t)num(c, "growth_interval")};
    TrainLossScaler s;
    cr_assert(train_loss_scaler_init(&s, &cfg, NULL));
    const char *pattern = item(c, "pattern")->valuestring;
    uint64_t skips = 0;
    for (size_t i = 0; pattern[i]; i++) {
      skips += pattern[i] == 'x';
      train_loss_scaler_update(&s, pattern[i] == 'x');
      double want = cJSON_GetArrayItem(item(c, "scales"), (int)i)->valuedouble;
      cr_assert_eq((double)s.scale, want, "%s after %zu: %g, want %g", item(c, "name")->valuestring, i + 1,
                   (double)s.scale, want);
    }
    cr_assert_eq(s.skipped, skips);
  }
  cJSON_Delete(fx);
}

/* ---- hand-computed values ------------------------------------------------- */

Test(train_optim, schedule_warmup_and_cosine_values) {
  TrainSchedule warm = {.kind = TRAIN_SCHEDULE_CONSTANT, .lr = 1.0, .warmup = 4, .steps = 100};
  cr_assert_eq(train_schedule_lr(&warm, 1), 0.25);
  cr_assert_eq(train_schedule_lr(&warm, 2), 0.5);
  cr_assert_eq(train_schedule_lr(&warm, 4), 1.0);
  cr_assert_eq(train_schedule_lr(&warm, 5), 1.0);
  cr_assert_eq(train_schedule_lr(&warm, 1000), 1.0);
  TrainSchedule cos_ = {.kind = TRAIN_SCHEDULE_COSINE, .lr = 1.0, .min_lr = 0.1, .warmup = 0, .steps = 10};
  cr_assert_float_eq(train_schedule_lr(&cos_, 5), 0.55, 1e-15); /* halfway: the mean of lr and min_lr */
  cr_assert_eq(train_schedule_lr(&cos_, 10), 0.1);
  cr_assert_eq(train_schedule_lr(&cos_, 11), 0.1);
  cr_assert_float_eq(train_schedule_lr(&cos_, 1), 0.1 + 0.9 * 0.5 * (1 + cos(3.14159265358979323846 / 10)), 1e-15);
  TrainSchedule both = {.kind = TRAIN_SCHEDULE_COSINE, .lr = 2.0, .min_lr = 0.0, .warmup = 2, .steps = 6};
  cr_assert_eq(train_schedule_lr(&both, 1), 1.0);
  cr_assert_eq(train_schedule_lr(&both, 2), 2.0);
  cr_assert_float_eq(train_schedule_lr(&both, 4), 1.0, 1e-15);
  cr_assert_eq(train_schedule_lr(&both, 6), 0.0);
}

static TrainParam param_of(float *value, float *grad, size_t count, uint32_t rank) {
  TrainParam p = {.name = "p", .rank = rank, .value = value, .grad = grad, .count = count};
  p.dims[0] = (int64_t)count;
  if (rank == 2) {
    p.dims[0] = 1;
    p.dims[1] = (int64_t)count;
  }
  return p;
}

Test(train_optim, clipping_uses_the_global_norm_and_pytorch_epsilon) {
  float v[4] = {0}, g1[2] = {3, 0}, g2[2] = {0, 4}, w[2] = {0};
  TrainParam ps[2] = {param_of(v, g1, 2, 1), param_of(w, g2, 2, 2)};
  cr_assert_eq(train_grads_global_norm(ps, 2), 5.0);
  cr_assert_eq(train_grads_clip(ps, 2, 10.0), 5.0);
  cr_assert_eq(g1[0], 3.0f); /* below the limit: untouched */
  cr_assert_eq(train_grads_clip(ps, 2, 1.0), 5.0);
  float coef = (1.0f / (5.0f + 1e-6f)) * 1.0f;
  cr_assert_eq(g1[0], 3.0f * coef);
  cr_assert_eq(g2[1], 4.0f * coef);
  cr_assert(g1[0] < 0.6f); /* the 1e-6 keeps the clipped norm just below the limit */
  /* max_norm <= 0 only measures. */
  g1[0] = 30;
  cr_assert_float_eq(train_grads_clip(ps, 2, 0), sqrt(900.0 + 16.0 * (double)coef * (double)coef), 1e-6);
  cr_assert_eq(g1[0], 30.0f);
}

Test(train_optim, accumulation_sums_then_takes_the_mean) {
  float v[3] = {0}, g[3] = {9, 9, 9};
  TrainParam p = param_of(v, g, 3, 1);
  train_grads_zero(&p, 1);
  cr_assert_eq(g[0], 0.0f);
  const float a[3] = {1, 2, 3}, b[3] = {0.5f, -2, 6}, c[3] = {1.5f, 3, 0};
  train_grad_add(&p, a);
  train_grad_add(&p, b);
  train_grad_add(&p, c);
  train_grads_mean(&p, 1, 3);
  cr_assert_eq(g[0], 1.0f);
  cr_assert_eq(g[1], 1.0f);
  cr_assert_eq(g[2], 3.0f);
  train_grads_mean(&p, 1, 1); /* K = 1: unchanged */
  cr_assert_eq(g[2], 3.0f);
}

Test(train_optim, weight_decay_by_rank_unless_overridden) {
  float v[1], g[1];
  TrainParam vec = param_of(v, g, 1, 1), mat = param_of(v, g, 1, 2);
  cr_assert_not(train_param_decays(&vec));
  cr_assert(train_param_decays(&mat));
  vec.decay = TRAIN_DECAY_ON;
  mat.decay = TRAIN_DECAY_OFF;
  cr_assert(train_param_decays(&vec));
  cr_assert_not(train_param_decays(&mat));
  TrainParam scalar = param_of(v, g, 1, 0);
  cr_assert_not(train_param_decays(&scalar));
}

Test(train_optim, adamw_first_step_by_hand) {
  /* Step 1: m = 0.1 g, v = 0.001 g^2, bias-corrected m/sqrt(v) = sign(g),
   * so p = p (1 - lr wd) - lr g / (|g| + eps). */
  float v[2] = {1.0f, -2.0f}, g[2] = {0.5f, -4.0f};
  TrainParam p = param_of(v, g, 2, 2);
  TrainOptimizerConfig cfg = train_optimizer_defaults(TRAIN_OPT_ADAMW);
  cr_assert_eq(cfg.weight_decay, 0.01);
  TrainOptimizer *opt = train_optimizer_new(&cfg, &p, 1, NULL);
  train_optimizer_step(opt, &p, 1, 0.1);
  cr_assert_float_eq(v[0], 1.0 * (1 - 0.1 * 0.01) - 0.1, 1e-6);
  cr_assert_float_eq(v[1], -2.0 * (1 - 0.1 * 0.01) + 0.1, 1e-6);
  cr_assert_eq(train_optimizer_steps(opt), 1);
  cr_assert_eq(train_optimizer_slots(opt), 2);
  cr_assert_float_eq(train_optimizer_slot(opt, 0, 0)[1], -0.4f, 1e-7);
  cr_assert_float_eq(train_optimizer_slot(opt, 0, 1)[1], 0.016f, 1e-8);
  cr_assert_null(train_optimizer_slot(opt, 0, 2));
  cr_assert_null(train_optimizer_slot(opt, 1, 0));
  train_optimizer_free(opt);
}

Test(train_optim, sgd_momentum_buffer_starts_as_the_first_gradient) {
  float v[1] = {1.0f}, g[1] = {2.0f};
  TrainParam p = param_of(v, g, 1, 1);
  TrainOptimizerConfig cfg = train_optimizer_defaults(TRAIN_OPT_SGD);
  cfg.momentum = 0.9;
  TrainOptimizer *opt = train_optimizer_new(&cfg, &p, 1, NULL);
  cr_assert_eq(train_optimizer_slots(opt), 1);
  cr_assert_not(train_optimizer_has_state(opt));
  train_optimizer_step(opt, &p, 1, 0.1);
  cr_assert_eq(train_optimizer_slot(opt, 0, 0)[0], 2.0f); /* not 0.9 * 0 + 2 * (1 - 0) scaled */
  cr_assert_float_eq(v[0], 0.8f, 1e-7);
  train_optimizer_step(opt, &p, 1, 0.1);
  cr_assert_float_eq(train_optimizer_slot(opt, 0, 0)[0], 3.8f, 1e-6);
  cr_assert_float_eq(v[0], 0.42f, 1e-6);
  train_optimizer_free(opt);
  TrainOptimizerConfig plain = train_optimizer_defaults(TRAIN_OPT_SGD);
  opt = train_optimizer_new(&plain, &p, 1, NULL);
  cr_assert_eq(train_optimizer_slots(opt), 0);
  train_optimizer_free(opt);
}

/* A run split in two, with the optimizer's state carried over as a
 * checkpoint would, ends bit-identical to the uninterrupted one. */
static void run_split(TrainOptimizerKind kind) {
  enum { N = 7, STEPS = 12 };
  float a[N], b[N], g[N];
  for (int i = 0; i < N; i++) a[i] = b[i] = 0.1f * (float)i - 0.3f;
  TrainParam pa = param_of(a, g, N, 2), pb = param_of(b, g, N, 2);
  TrainOptimizerConfig cfg = train_optimizer_defaults(kind);
  cfg.momentum = kind == TRAIN_OPT_SGD ? 0.9 : 0;
  TrainOptimizer *whole = train_optimizer_new(&cfg, &pa, 1, NULL);
  TrainOptimizer *first = train_optimizer_new(&cfg, &pb, 1, NULL);
  TrainOptimizer *second = NULL;
  for (int s = 1; s <= STEPS; s++) {
    for (int i = 0; i < N; i++) g[i] = sinf((float)(s * N + i));
    train_optimizer_step(whole, &pa, 1, 0.01);
    if (s == 6) {
      second = train_optimizer_new(&cfg, &pb, 1, NULL);
      for (uint32_t k = 0; k < train_optimizer_slots(first); k++)
        memcpy(train_optimizer_slot(second, 0, k), train_optimizer_slot(first, 0, k), sizeof(float) * N);
      train_optimizer_restore(second, train_optimizer_steps(first), train_optimizer_has_state(first));
      train_optimizer_free(first);
      first = NULL;
    }
    train_optimizer_step(second ? second : first, &pb, 1, 0.01);
  }
  cr_assert_arr_eq(a, b, sizeof a);
  cr_assert_eq(train_optimizer_steps(second), STEPS);
  train_optimizer_free(whole);
  train_optimizer_free(second);
}

Test(train_optim, restored_state_continues_bit_identically) {
  run_split(TRAIN_OPT_ADAMW);
  run_split(TRAIN_OPT_SGD);
}

/* ---- configuration errors --------------------------------------------------- */

Test(train_optim, invalid_configurations_are_refused_with_the_reason) {
  Capture c;
  capture_init(&c, "orion-run");
  TrainOptimizerConfig a = train_optimizer_defaults(TRAIN_OPT_ADAMW);
  a.beta1 = 1.0;
  cr_assert_null(train_optimizer_new(&a, NULL, 0, &c.d));
  a = train_optimizer_defaults(TRAIN_OPT_ADAMW);
  a.eps = 0;
  cr_assert_null(train_optimizer_new(&a, NULL, 0, &c.d));
  TrainOptimizerConfig s = train_optimizer_defaults(TRAIN_OPT_SGD);
  s.nesterov = true;
  cr_assert_null(train_optimizer_new(&s, NULL, 0, &c.d));
  s = train_optimizer_defaults(TRAIN_OPT_SGD);
  s.weight_decay = -1;
  cr_assert_null(train_optimizer_new(&s, NULL, 0, &c.d));
  TrainLossScaleConfig l = train_loss_scale_defaults();
  l.backoff_factor = 1.0;
  TrainLossScaler sc;
  cr_assert_not(train_loss_scaler_init(&sc, &l, &c.d));
  l = train_loss_scale_defaults();
  l.init_scale = 1e39; /* infinite in fp32 */
  cr_assert_not(train_loss_scaler_init(&sc, &l, &c.d));
  l = train_loss_scale_defaults();
  l.growth_interval = 0;
  cr_assert_not(train_loss_scaler_init(&sc, &l, &c.d));
  cr_assert_str_eq(captured(&c), "orion-run: error: optimizer: beta1 must be in [0, 1)\n"
                                 "orion-run: error: optimizer: eps must be finite and > 0\n"
                                 "orion-run: error: optimizer: nesterov momentum needs a momentum > 0 and dampening 0\n"
                                 "orion-run: error: optimizer: weight decay must be finite and >= 0\n"
                                 "orion-run: error: loss scaling: the backoff factor must be in (0, 1)\n"
                                 "orion-run: error: loss scaling: the initial scale must be finite (in fp32) and > 0\n"
                                 "orion-run: error: loss scaling: the growth interval must be at least 1\n");
  capture_free(&c);
}

/* ---- unscaling and the fp16 guard -------------------------------------------- */

Test(train_optim, unscale_multiplies_and_finds_nonfinite_values_in_one_pass) {
  float v[3] = {0}, g[3] = {1024, -512, 2};
  TrainParam p = param_of(v, g, 3, 1);
  cr_assert(train_grads_unscale(&p, 1, 1024.0f));
  cr_assert_eq(g[0], 1.0f);
  cr_assert_eq(g[1], -0.5f);
  cr_assert_eq(g[2], 1.0f / 512);
  g[1] = NAN;
  cr_assert_not(train_grads_unscale(&p, 1, 2.0f));
  g[1] = -INFINITY;
  cr_assert_not(train_grads_unscale(&p, 1, 2.0f));
  g[1] = 3.0e38f; /* finite, but 2 * 3e38 overflows fp32: non-finite after unscaling */
  cr_assert_not(train_grads_unscale(&p, 1, 0.5f));
}

Test(train_optim, fp16_guard_converts_finite_weights_and_refuses_the_rest) {
  float ok[5] = {1.0f, -65504.0f, 65519.0f, 1e-8f, 0.0f};
  uint16_t out[5];
  TrainFp16Check check;
  cr_assert(train_fp16_convert_checked("w", ok, 5, out, &check, NULL));
  cr_assert_eq(out[0], fp16_from_float(1.0f));
  cr_assert_eq(fp16_to_float(out[1]), -65504.0f);
  cr_assert_eq(fp16_to_float(out[2]), 65504.0f); /* rounds down to the largest finite value */
  cr_assert_eq(out[3], 0);
  cr_assert_eq(check.flushed, 1); /* 1e-8 becomes 0: counted, not an error */
  cr_assert_eq(check.overflow + check.nonfinite, 0);

  /* Every finite fp32 below the limit converts as the reference rounding does. */
  enum { N = 4096 };
  static float many[N];
  static uint16_t conv[N];
  uint32_t bits = 12345;
  for (int i = 0; i < N; i++) {
    bits = bits * 1664525u + 1013904223u;
    float f = (float)((int32_t)bits) * 0x1p-31f * 70000.0f * ((i % 3 == 0) ? 1e-6f : 1.0f);
    many[i] = fabsf(f) < 65520.0f ? f : 0.5f * f;
  }
  cr_assert(train_fp16_convert_checked("many", many, N, conv, &check, NULL));
  for (int i = 0; i < N; i++) cr_assert_eq(conv[i], fp16_from_float_reference(many[i]), "%g", (double)many[i]);

  float bad[5] = {1.0f, 65520.0f, NAN, -INFINITY, -1e6f};
  uint16_t guard[5] = {0xAAAA, 0xAAAA, 0xAAAA, 0xAAAA, 0xAAAA};
  Capture c;
  capture_init(&c, "orion-run");
  cr_assert_not(train_fp16_convert_checked("layers.0.wq", bad, 5, guard, &check, &c.d));
  for (int i = 0; i < 5; i++) cr_assert_eq(guard[i], 0xAAAA, "element %d was written", i);
  cr_assert_eq(check.overflow, 2);
  cr_assert_eq(check.nonfinite, 2);
  cr_assert_eq(check.first_bad, 1);
  cr_assert_str_eq(captured(&c), "orion-run: error: param 'layers.0.wq': 4 of 5 values do not fit fp16 (element 1 is "
                                 "65520); the weights were not written\n");
  capture_free(&c);
}
