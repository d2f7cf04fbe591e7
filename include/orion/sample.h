/*
 * Choosing the next token from a vector of logits: repeat penalty,
 * temperature (0 = greedy), top-k, top-p, min-p, then a draw from a seeded
 * generator of our own (xoshiro256**, seeded through SplitMix64), so the same
 * seed gives the same ids on every machine. O(V) per token: top-k and top-p
 * select by partitioning (quickselect), they never sort the vocabulary.
 * The exact definitions are in docs/generation.md ("Sampling").
 */
#ifndef ORION_SAMPLE_H
#define ORION_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

/* xoshiro256** (Blackman and Vigna), its state filled by four SplitMix64
 * outputs from the seed. */
typedef struct OrionRng {
  uint64_t s[4];
} OrionRng;
void orion_rng_seed(OrionRng *r, uint64_t seed);
uint64_t orion_rng_next(OrionRng *r);
/* (next >> 11) * 2^-53: a double in [0, 1). */
double orion_rng_uniform(OrionRng *r);

typedef struct OrionSamplerOptions {
  double temperature;      /* 0: greedy (argmax, ties to the lowest id); default 0.8 */
  uint32_t top_k;          /* keep the k highest logits; 0 = off; default 40 */
  double top_p;            /* keep the fewest most probable ids reaching p; 1 = off; default 0.95 */
  double min_p;            /* keep ids with p >= min_p * p_max; 0 = off; default 0.05 */
  double repeat_penalty;   /* logits of recent ids: > 0 divided by R, < 0 multiplied; 1 = off (default) */
  uint32_t repeat_last_n;  /* how many of the last ids the penalty looks at; default 64 */
  uint64_t seed;           /* default 0 */
} OrionSamplerOptions;

/* The defaults above (llama.cpp's). */
OrionSamplerOptions orion_sampler_defaults(void);

typedef struct OrionSampler OrionSampler;

/* A sampler for vocab-sized logits; false options are the caller's to check
 * (orion-run generate does: temperature >= 0, 0 <= p <= 1, R > 0). */
OrionSampler *orion_sampler_new(const OrionSamplerOptions *opt, uint32_t vocab);
void orion_sampler_free(OrionSampler *s);

/* The distribution the next token is drawn from, given the logits and the
 * ids so far (prompt and generated, oldest first; the penalty looks at the
 * last repeat_last_n): *n kept ids in ascending order and their
 * probabilities, which sum to 1. Valid until the next call. */
void orion_sampler_distribution(OrionSampler *s, const float *logits, const int32_t *history, size_t nhistory,
                                const int32_t **ids, const double **probs, uint32_t *n);
/* The next token: greedy, or one uniform draw u from the generator and the
 * first kept id (ascending) whose cumulative probability exceeds u. */
int32_t orion_sampler_sample(OrionSampler *s, const float *logits, const int32_t *history, size_t nhistory);

/* For the tests: the key comparisons made by the selections since the
 * sampler was made (shows that no sort of the vocabulary happens). */
uint64_t orion_sampler_comparisons(const OrionSampler *s);

#endif
