/*
 * The sampler (orion/sample.h). Work arrays of V entries are allocated once
 * per sampler. The selections order candidates by (key descending, id
 * ascending), a strict total order, so ties never make a result depend on
 * the partition's path; testsuite/generate/make_sample_fixture.py computes
 * the same thing with numpy's sorts.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "orion/sample.h"
#include "orion/support.h"

/* The state: four outputs of support's SplitMix64 from the seed. */
void orion_rng_seed(OrionRng *r, uint64_t seed) {
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t orion_rng_next(OrionRng *r) {
  uint64_t *s = r->s, result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0], s[3] ^= s[1], s[1] ^= s[2], s[0] ^= s[3];
  s[2] ^= t, s[3] = rotl(s[3], 45);
  return result;
}

double orion_rng_uniform(OrionRng *r) { return (double)(orion_rng_next(r) >> 11) * 0x1p-53; }

OrionSamplerOptions orion_sampler_defaults(void) {
  return (OrionSamplerOptions){.temperature = 0.8, .top_k = 40, .top_p = 0.95, .min_p = 0.05,
                               .repeat_penalty = 1.0, .repeat_last_n = 64, .seed = 0};
}

struct OrionSampler {
  OrionSamplerOptions o;
  OrionRng rng;
  uint32_t vocab;
  double *key;       /* per id: the scaled logit, then its weight exp(x - max) */
  int32_t *cand;     /* the candidate ids, in selection order */
  uint32_t *stamp;   /* per id: the call that last penalized it, or marked it kept */
  uint32_t call;
  int32_t *ids;      /* the result, ascending */
  double *probs;
  uint64_t comparisons;
};

OrionSampler *orion_sampler_new(const OrionSamplerOptions *opt, uint32_t vocab) {
  OrionSampler *s = xcalloc(1, sizeof *s);
  s->o = *opt, s->vocab = vocab;
  orion_rng_seed(&s->rng, opt->seed);
  s->key = xcalloc(vocab, sizeof *s->key);
  s->cand = xcalloc(vocab, sizeof *s->cand);
  s->stamp = xcalloc(vocab, sizeof *s->stamp);
  s->ids = xcalloc(vocab, sizeof *s->ids);
  s->probs = xcalloc(vocab, sizeof *s->probs);
  return s;
}

void orion_sampler_free(OrionSampler *s) {
  if (!s) return;
  free(s->key), free(s->cand), free(s->stamp), free(s->ids), free(s->probs);
  free(s);
}

uint64_t orion_sampler_comparisons(const OrionSampler *s) { return s->comparisons; }

/* a comes before b: the larger key, or on equal keys the lower id. */
static inline bool before(OrionSampler *s, int32_t a, int32_t b) {
  s->comparisons++;
  return s->key[a] > s->key[b] || (s->key[a] == s->key[b] && a < b);
}

static inline void swap_ids(int32_t *a, int32_t *b) {
  int32_t t = *a;
  *a = *b, *b = t;
}

/* Partitions c[lo, hi) (hi - lo >= 2) around the median of its first,
 * middle and last: returns the pivot's final index m, with c[lo, m) before
 * it and c(m, hi) after it. */
static uint32_t partition(OrionSampler *s, int32_t *c, uint32_t lo, uint32_t hi) {
  uint32_t mid = lo + (hi - lo) / 2, last = hi - 1;
  if (before(s, c[mid], c[lo])) swap_ids(&c[mid], &c[lo]);
  if (before(s, c[last], c[lo])) swap_ids(&c[last], &c[lo]);
  if (before(s, c[last], c[mid])) swap_ids(&c[last], &c[mid]);
  swap_ids(&c[mid], &c[last]); /* the median is the pivot, kept at the end */
  int32_t pivot = c[last];
  uint32_t store = lo;
  for (uint32_t i = lo; i < last; i++)
    if (before(s, c[i], pivot)) swap_ids(&c[i], &c[store++]);
  swap_ids(&c[store], &c[last]);
  return store;
}

/* Rearranges c[0, n) so that c[0, k) are its k first (quickselect). */
static void select_first_k(OrionSampler *s, int32_t *c, uint32_t n, uint32_t k) {
  uint32_t lo = 0, hi = n;
  while (hi - lo > 1) {
    uint32_t m = partition(s, c, lo, hi);
    if (m == k || m + 1 == k) return;
    if (k < m) hi = m;
    else lo = m + 1;
  }
}

/* The fewest first candidates whose weights (key) reach target: rearranges
 * c[0, n) so that they are c[0, m) and returns m. The same partitions as
 * select_first_k, each side's sum deciding where the boundary is. */
static uint32_t select_mass(OrionSampler *s, int32_t *c, uint32_t n, double target) {
  uint32_t lo = 0, hi = n; /* the answer m is in (lo, hi] */
  double acc = 0;          /* the weight of c[0, lo) */
  while (hi - lo > 1) {
    uint32_t m = partition(s, c, lo, hi);
    double left = 0;
    for (uint32_t i = lo; i < m; i++) left += s->key[c[i]];
    if (m > lo && acc + left >= target) hi = m;
    else if (acc + left + s->key[c[m]] >= target) return m + 1;
    else acc += left + s->key[c[m]], lo = m + 1;
  }
  return hi;
}

static void penalize(OrionSampler *s, const int32_t *history, size_t nhistory) {
  size_t n = s->o.repeat_last_n < nhistory ? s->o.repeat_last_n : nhistory;
  double r = s->o.repeat_penalty;
  for (size_t i = nhistory - n; i < nhistory; i++) {
    int32_t id = history[i];
    if (id < 0 || (uint32_t)id >= s->vocab || s->stamp[id] == s->call) continue; /* each id once */
    s->stamp[id] = s->call;
    s->key[id] = s->key[id] > 0 ? s->key[id] / r : s->key[id] * r;
  }
}

void orion_sampler_distribution(OrionSampler *s, const float *logits, const int32_t *history, size_t nhistory,
                                const int32_t **ids, const double **probs, uint32_t *count) {
  const uint32_t v = s->vocab;
  s->call += 2; /* two stamps per call: penalized (call), kept (call + 1) */
  if (s->call < 2) { /* wrapped: old stamps could collide */
    memset(s->stamp, 0, v * sizeof *s->stamp);
    s->call = 2;
  }
  for (uint32_t i = 0; i < v; i++) s->key[i] = (double)logits[i];
  if (s->o.repeat_penalty != 1.0 && nhistory) penalize(s, history, nhistory);
  *ids = s->ids, *probs = s->probs;
  if (s->o.temperature <= 0) {
    uint32_t best = 0;
    for (uint32_t i = 1; i < v; i++)
      if (s->key[i] > s->key[best]) best = i;
    s->ids[0] = (int32_t)best, s->probs[0] = 1.0, *count = 1;
    return;
  }
  double max = -(double)INFINITY;
  for (uint32_t i = 0; i < v; i++) {
    s->key[i] /= s->o.temperature;
    s->cand[i] = (int32_t)i;
    if (s->key[i] > max) max = s->key[i];
  }
  uint32_t n = v;
  if (s->o.top_k > 0 && s->o.top_k < n) select_first_k(s, s->cand, n, s->o.top_k), n = s->o.top_k;
  double total = 0;
  for (uint32_t i = 0; i < n; i++) total += s->key[s->cand[i]] = exp(s->key[s->cand[i]] - max);
  if (s->o.top_p < 1.0) n = select_mass(s, s->cand, n, s->o.top_p * total);
  /* min-p: the most probable id has weight exp(0) = 1, so p_i / p_max is the weight itself. */
  uint32_t kept_mark = s->call + 1;
  for (uint32_t i = 0; i < n; i++)
    if (s->key[s->cand[i]] >= s->o.min_p) s->stamp[s->cand[i]] = kept_mark;
  uint32_t m = 0;
  double sum = 0;
  for (uint32_t i = 0; i < v; i++)
    if (s->stamp[i] == kept_mark) s->ids[m] = (int32_t)i, sum += s->probs[m++] = s->key[i];
  for (uint32_t i = 0; i < m; i++) s->probs[i] /= sum;
  *count = m;
}

int32_t orion_sampler_sample(OrionSampler *s, const float *logits, const int32_t *history, size_t nhistory) {
  const int32_t *ids;
  const double *probs;
  uint32_t n;
  orion_sampler_distribution(s, logits, history, nhistory, &ids, &probs, &n);
  if (n == 1 && s->o.temperature <= 0) return ids[0];
  double u = orion_rng_uniform(&s->rng), cum = 0;
  for (uint32_t i = 0; i + 1 < n; i++)
    if (u < (cum += probs[i])) return ids[i];
  return ids[n - 1];
}
