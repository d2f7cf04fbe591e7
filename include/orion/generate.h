/*
 * Text generation on token ids: a package in the generation program contract
 * (docs/generation.md: `prefill_T` buckets and one `decode`) prepared on a
 * backend, with the KV cache and the mask owned here, allocated once and
 * bound to every decode run as they are (a step writes one row per layer
 * and head into them, never copies the cache).
 *
 *   OrionGen *g = orion_gen_open("model.anepkg", NULL, &d);
 *   orion_gen_prefill(g, prompt, n, &d);         // logits of the next token
 *   next = pick(orion_gen_logits(g));            // e.g. orion_sampler_sample
 *   orion_gen_step(g, next, &d);                 // feeds it, logits again
 *
 * Policies: a prompt longer than the largest bucket and a step past the
 * cache's last slot are errors (no sliding window); see docs/generation.md.
 * Sampling is apart, in orion/sample.h.
 */
#ifndef ORION_GENERATE_H
#define ORION_GENERATE_H

#include "orion/backend.h"
#include "orion/manifest.h"

typedef struct OrionGen OrionGen;

typedef struct OrionGenOptions {
  const char *backend_name; /* NULL: "cpu" (ignored when backend is given) */
  OrionBackend *backend;    /* a backend the caller opened and keeps (NULL: open backend_name) */
  OrionBackendOptions backend_options;
  OrionNumerics numerics;   /* ORION_NUMERICS_ANE by default (zero) */
} OrionGenOptions;

/* Where an entry's logits are: its output `logits`, or the parts of the
 * output group `logits` (the compiler's split-concat splits a classifier
 * tiled with concat into parts along the vocabulary; the manifest's
 * OutputGroups say so), in the group's order. */
#define ORION_GEN_MAX_LOGIT_PARTS 64
typedef struct OrionGenLogits {
  uint32_t nparts;
  uint32_t output[ORION_GEN_MAX_LOGIT_PARTS]; /* output indices */
  uint32_t width[ORION_GEN_MAX_LOGIT_PARTS];  /* vocabulary columns of each */
} OrionGenLogits;

#define ORION_GEN_MAX_BUCKETS 16

/* The shape the contract check found. */
typedef struct OrionGenShape {
  uint32_t layers, kv_heads, head_dim, context, vocab;
  MilDType dtype;                                /* D: the cache's, the mask's and kv's dtype */
  uint32_t nbuckets;
  uint32_t buckets[ORION_GEN_MAX_BUCKETS];       /* the prefill lengths T, ascending */
  uint32_t bucket_fn[ORION_GEN_MAX_BUCKETS];     /* and their functions */
  OrionGenLogits bucket_logits[ORION_GEN_MAX_BUCKETS];
  uint32_t decode_fn;
  OrionGenLogits decode_logits;
} OrionGenShape;

/* Checks that p follows the contract (every name, dtype and shape, and that
 * the entries agree with each other); the first problem is an error that
 * names what is missing or wrong. manifest (NULL: none, a bare directory)
 * is the package's, for its output groups. */
bool orion_gen_check_contract(const OrionProgram *p, const Package *manifest, OrionGenShape *shape, Diag *d);

/* Opens the package at path (its checksums verified) and prepares it. */
OrionGen *orion_gen_open(const char *path, const OrionGenOptions *opt, Diag *d);
/* The same on a program the caller opened (and closes after the OrionGen);
 * package is the path it was opened from, whose manifest tells the output
 * groups (NULL: none). */
OrionGen *orion_gen_open_program(OrionProgram *p, const char *package, const OrionGenOptions *opt, Diag *d);
void orion_gen_close(OrionGen *g);

const OrionGenShape *orion_gen_shape(const OrionGen *g);
/* Tokens in the cache: the next token's position. */
uint32_t orion_gen_position(const OrionGen *g);

/* Starts again (orion_gen_reset), runs the smallest bucket that holds the n
 * ids, fills the cache and the mask from its kv outputs, and leaves the
 * logits of the token after the prompt. */
bool orion_gen_prefill(OrionGen *g, const int32_t *ids, uint32_t n, Diag *d);
/* Runs decode on token at the current position, writes its keys and values
 * into the cache, and leaves the logits of the token after it. */
bool orion_gen_step(OrionGen *g, int32_t token, Diag *d);
/* The vocab logits of the next token (after a prefill or a step; valid
 * until the next call). */
const float *orion_gen_logits(const OrionGen *g);
/* Empties the cache (every mask slot back to -30000): a new prompt. */
void orion_gen_reset(OrionGen *g);

typedef struct OrionGenTimings {
  uint32_t prompt_tokens; /* fed by the last prefill */
  uint32_t prefill_bucket;
  double prefill_ms;      /* the prefill run and the cache fill */
  uint32_t decode_steps;  /* steps since the last prefill */
  double decode_ms;       /* their runs and cache writes */
} OrionGenTimings;
OrionGenTimings orion_gen_timings(const OrionGen *g);

/* For the tests: decode's bound input buffers (in its input order), which
 * stay the same for the OrionGen's life. */
const OrionTensor *orion_gen_decode_inputs(const OrionGen *g, uint32_t *n);

/* ---- stop strings ----
 *
 * Text arrives piece by piece; a stop string may span pieces. The matcher
 * passes on every byte that can no longer be the start of a stop string and
 * holds back the rest, so that the stop string itself (and anything after
 * it) is never passed on. */
typedef struct OrionStopMatcher {
  const char *const *stops;
  size_t nstops;
  StrBuf held;     /* bytes that may begin a stop string */
  int found;       /* index of the stop string found, -1 before */
} OrionStopMatcher;
void orion_stop_init(OrionStopMatcher *m, const char *const *stops, size_t nstops);
void orion_stop_free(OrionStopMatcher *m);
/* Appends len bytes of text; appends to out what is now safe to show.
 * True once a stop string has been found (its index in m->found): what
 * precedes it has been passed on, the rest is dropped; further text is
 * ignored. */
bool orion_stop_push(OrionStopMatcher *m, const char *text, size_t len, StrBuf *out);
/* The end of the text: passes on what is held back. */
void orion_stop_finish(OrionStopMatcher *m, StrBuf *out);

#endif
