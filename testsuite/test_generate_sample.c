/*
 * The sampler (runtime/generate/sample.c): against the numpy reference of
 * testsuite/generate/sample_fixture.json (make_sample_fixture.py: the same
 * filters with numpy's sorts and the same xoshiro256** stream): kept ids
 * and every draw exactly, probabilities within 1e-12 relative (exp may
 * differ from numpy's in the last bit). Properties: top-k 1 is greedy, ties
 * go to the lowest id, probabilities sum to 1, min-p's threshold, the
 * repeat penalty's two signs and its window; and a count of comparisons
 * showing that top-k and top-p select rather than sort (V = 50257).
 *
 * Needs ORION_SOURCE_ROOT (meson sets it).
 */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "orion/sample.h"
#include "orion/support.h"

static cJSON *load_fixture(void) { return load_json_fixture("testsuite/generate/sample_fixture.json"); }

static const cJSON *item(const cJSON *obj, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  cr_assert_not_null(v, "fixture has no '%s'", key);
  return v;
}

static double num(const cJSON *obj, const char *key) { return item(obj, key)->valuedouble; }

Test(sample, rng_matches_reference) {
  cJSON *f = load_fixture();
  OrionRng r;
  orion_rng_seed(&r, (uint64_t)num(f, "rng_seed"));
  const cJSON *v;
  cJSON_ArrayForEach(v, item(f, "rng_first")) {
    uint64_t want = strtoull(v->valuestring, NULL, 10);
    cr_assert_eq(orion_rng_next(&r), want);
  }
  cJSON_Delete(f);
}

Test(sample, fixture_cases) {
  cJSON *f = load_fixture();
  const cJSON *c;
  int ncase = 0;
  cJSON_ArrayForEach(c, item(f, "cases")) {
    const cJSON *o = item(c, "options");
    OrionSamplerOptions so = {.temperature = num(o, "temperature"),
                              .top_k = (uint32_t)num(o, "top_k"),
                              .top_p = num(o, "top_p"),
                              .min_p = num(o, "min_p"),
                              .repeat_penalty = num(o, "repeat_penalty"),
                              .repeat_last_n = (uint32_t)num(o, "repeat_last_n"),
                              .seed = (uint64_t)num(o, "seed")};
    uint32_t v = (uint32_t)cJSON_GetArraySize(item(c, "logits"));
    float *logits = xcalloc(v, sizeof *logits);
    size_t nh = (size_t)cJSON_GetArraySize(item(c, "history"));
    int32_t *hist = xcalloc(nh, sizeof *hist);
    for (uint32_t i = 0; i < v; i++) logits[i] = (float)cJSON_GetArrayItem(item(c, "logits"), (int)i)->valuedouble;
    for (size_t i = 0; i < nh; i++) hist[i] = cJSON_GetArrayItem(item(c, "history"), (int)i)->valueint;
    OrionSampler *s = orion_sampler_new(&so, v);
    const int32_t *ids;
    const double *probs;
    uint32_t n;
    orion_sampler_distribution(s, logits, hist, nh, &ids, &probs, &n);
    const cJSON *want_ids = item(c, "ids"), *want_p = item(c, "probs");
    cr_assert_eq(n, (uint32_t)cJSON_GetArraySize(want_ids), "case %d: %u ids kept, numpy keeps %d", ncase, n,
                 cJSON_GetArraySize(want_ids));
    for (uint32_t i = 0; i < n; i++) {
      cr_assert_eq(ids[i], cJSON_GetArrayItem(want_ids, (int)i)->valueint, "case %d id %u", ncase, i);
      double p = cJSON_GetArrayItem(want_p, (int)i)->valuedouble;
      cr_assert(fabs(probs[i] - p) <= 1e-12 * p, "case %d: p[%d] = %.17g, numpy %.17g", ncase, ids[i], probs[i], p);
    }
    int k = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, item(c, "draws")) {
      int32_t got = orion_sampler_sample(s, logits, hist, nh);
      cr_assert_eq(got, d->valueint, "case %d draw %d: %d, numpy %d", ncase, k, got, d->valueint);
      k++;
    }
    orion_sampler_free(s);
    free(logits), free(hist);
    ncase++;
  }
  cr_assert_eq(ncase, 12);
  cJSON_Delete(f);
}

static OrionSamplerOptions plain(void) {
  return (OrionSamplerOptions){.temperature = 1.0, .top_p = 1.0, .repeat_penalty = 1.0, .repeat_last_n = 64};
}

Test(sample, greedy_ties_go_to_the_lowest_id) {
  float logits[6] = {0.5f, 2.0f, -1.0f, 2.0f, 2.0f, 1.0f};
  OrionSamplerOptions o = plain();
  o.temperature = 0;
  OrionSampler *s = orion_sampler_new(&o, 6);
  cr_assert_eq(orion_sampler_sample(s, logits, NULL, 0), 1);
  orion_sampler_free(s);
  /* top-k 1 at any temperature is the same argmax, the same tie rule */
  o = plain(), o.top_k = 1, o.temperature = 1.7, o.seed = 99;
  s = orion_sampler_new(&o, 6);
  for (int i = 0; i < 20; i++) cr_assert_eq(orion_sampler_sample(s, logits, NULL, 0), 1);
  orion_sampler_free(s);
}

Test(sample, top_k_one_is_greedy_on_random_logits) {
  enum { V = 1000 };
  float *logits = xcalloc(V, sizeof *logits);
  OrionRng r;
  orion_rng_seed(&r, 7);
  OrionSamplerOptions g = plain(), k1 = plain();
  g.temperature = 0, k1.top_k = 1, k1.temperature = 0.9;
  OrionSampler *sg = orion_sampler_new(&g, V), *sk = orion_sampler_new(&k1, V);
  for (int t = 0; t < 50; t++) {
    for (int i = 0; i < V; i++) logits[i] = (float)(orion_rng_uniform(&r) * 20 - 10);
    cr_assert_eq(orion_sampler_sample(sg, logits, NULL, 0), orion_sampler_sample(sk, logits, NULL, 0));
  }
  orion_sampler_free(sg), orion_sampler_free(sk);
  free(logits);
}

Test(sample, probabilities_are_renormalised) {
  enum { V = 500 };
  float logits[V];
  OrionRng r;
  orion_rng_seed(&r, 3);
  for (int i = 0; i < V; i++) logits[i] = (float)(orion_rng_uniform(&r) * 8);
  OrionSamplerOptions cases[4] = {plain(), plain(), plain(), plain()};
  cases[1].top_k = 17, cases[2].top_p = 0.6, cases[3].min_p = 0.3, cases[3].temperature = 0.5;
  for (int c = 0; c < 4; c++) {
    OrionSampler *s = orion_sampler_new(&cases[c], V);
    const int32_t *ids;
    const double *p;
    uint32_t n;
    orion_sampler_distribution(s, logits, NULL, 0, &ids, &p, &n);
    double sum = 0;
    for (uint32_t i = 0; i < n; i++) {
      sum += p[i];
      cr_assert(i == 0 || ids[i] > ids[i - 1]);
    }
    cr_assert(fabs(sum - 1.0) < 1e-12, "case %d sums to %.17g", c, sum);
    if (c == 1) cr_assert_eq(n, 17);
    if (c == 0) cr_assert_eq(n, V);
    /* the kept ids' relative probabilities are the softmax's */
    double ratio = exp(((double)logits[ids[n - 1]] - (double)logits[ids[0]]) / cases[c].temperature);
    cr_assert(fabs(p[n - 1] / p[0] - ratio) <= 1e-12 * ratio);
    orion_sampler_free(s);
  }
}

Test(sample, min_p_threshold) {
  /* weights relative to the best: 1, e^-1, e^-2, e^-3 (0.368, 0.135, 0.050) */
  float logits[4] = {0.0f, -1.0f, -2.0f, -3.0f};
  OrionSamplerOptions o = plain();
  o.min_p = 0.1;
  OrionSampler *s = orion_sampler_new(&o, 4);
  const int32_t *ids;
  const double *p;
  uint32_t n;
  orion_sampler_distribution(s, logits, NULL, 0, &ids, &p, &n);
  cr_assert_eq(n, 3);
  cr_assert_eq(ids[2], 2);
  double z = 1 + exp(-1.0) + exp(-2.0);
  cr_assert(fabs(p[0] - 1 / z) < 1e-15);
  orion_sampler_free(s);
}

Test(sample, repeat_penalty_divides_positive_and_multiplies_negative) {
  float logits[4] = {2.0f, -1.0f, 1.0f, 0.5f};
  OrionSamplerOptions o = plain();
  o.repeat_penalty = 2.0, o.repeat_last_n = 3;
  OrionSampler *s = orion_sampler_new(&o, 4);
  /* id 0 is outside the last 3; ids 1 and 2 penalised once each though repeated */
  int32_t hist[5] = {0, 2, 1, 2, 1};
  const int32_t *ids;
  const double *p;
  uint32_t n;
  orion_sampler_distribution(s, logits, hist, 5, &ids, &p, &n);
  cr_assert_eq(n, 4);
  double w[4] = {exp(2.0), exp(-2.0), exp(0.5), exp(0.5)}, z = w[0] + w[1] + w[2] + w[3];
  for (int i = 0; i < 4; i++) cr_assert(fabs(p[i] - w[i] / z) < 1e-15, "p[%d] = %.17g", i, p[i]);
  orion_sampler_free(s);
  /* greedy sees penalised logits too: with id 0 penalised, id 2 wins */
  o.temperature = 0, o.repeat_penalty = 4.0, o.repeat_last_n = 64;
  s = orion_sampler_new(&o, 4);
  int32_t h2[1] = {0};
  cr_assert_eq(orion_sampler_sample(s, logits, h2, 1), 2);
  orion_sampler_free(s);
}

Test(sample, same_seed_same_ids) {
  enum { V = 2000 };
  float *logits = xcalloc(V, sizeof *logits);
  for (int i = 0; i < V; i++) logits[i] = (float)sin(i * 0.37) * 4;
  OrionSamplerOptions o = orion_sampler_defaults();
  o.seed = 42;
  OrionSampler *a = orion_sampler_new(&o, V), *b = orion_sampler_new(&o, V);
  o.seed = 43;
  OrionSampler *c = orion_sampler_new(&o, V);
  int differ = 0;
  for (int i = 0; i < 100; i++) {
    int32_t x = orion_sampler_sample(a, logits, NULL, 0), y = orion_sampler_sample(b, logits, NULL, 0);
    cr_assert_eq(x, y);
    differ += x != orion_sampler_sample(c, logits, NULL, 0);
  }
  cr_assert_gt(differ, 0);
  orion_sampler_free(a), orion_sampler_free(b), orion_sampler_free(c);
  free(logits);
}

/* A full sort of V = 50257 makes about V log2 V = 785,000 comparisons;
 * quickselect makes a few V. The bound, 6 V per token, is deterministic
 * (the data and the pivots are). */
Test(sample, selection_not_sort) {
  enum { V = 50257 };
  float *logits = xcalloc(V, sizeof *logits);
  OrionRng r;
  orion_rng_seed(&r, 2024);
  OrionSamplerOptions cases[3] = {orion_sampler_defaults(), plain(), plain()};
  cases[1].top_p = 0.9;               /* top-p over the whole vocabulary */
  cases[2].top_k = 25000, cases[2].top_p = 0.5;
  for (int c = 0; c < 3; c++) {
    OrionSampler *s = orion_sampler_new(&cases[c], V);
    for (int t = 0; t < 4; t++) {
      for (int i = 0; i < V; i++) logits[i] = (float)(orion_rng_uniform(&r) * 30 - 15);
      uint64_t before = orion_sampler_comparisons(s);
      (void)orion_sampler_sample(s, logits, NULL, 0);
      uint64_t used = orion_sampler_comparisons(s) - before;
      cr_assert_gt(used, 0);
      cr_assert_lt(used, 6ull * V, "case %d token %d: %llu comparisons", c, t, (unsigned long long)used);
    }
    orion_sampler_free(s);
  }
  free(logits);
}
