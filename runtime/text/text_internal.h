/*
 * What the tokenizer kinds share (runtime/text/): the handle every kind
 * fills in, and each kind's open function. tokenizer.c owns the handle and
 * the public accessors; a kind owns its impl and the operations below.
 */
#ifndef ORION_TEXT_INTERNAL_H
#define ORION_TEXT_INTERNAL_H

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>

#include "orion/tokenizer.h"

/* A growable array of ids, the output of a kind's encode. */
typedef struct TokIds {
  int32_t *data;
  size_t len, cap;
} TokIds;
void tok_ids_push(TokIds *v, int32_t id);
void tok_ids_append(TokIds *v, const int32_t *ids, size_t n);

typedef struct TokOps {
  /* Appends the ids of text to out; false after reporting through d. */
  bool (*encode)(const OrionTokenizer *t, const char *text, size_t len, unsigned flags, TokIds *out, Diag *d);
  /* The bytes of one id (NULL when it has none), see orion_tokenizer_piece. */
  const char *(*piece)(const OrionTokenizer *t, int32_t id, size_t *len);
  /* Optional (NULL: piece): the bytes of id as the first text of a
   * stream, after nothing but control ids (SentencePiece drops the space
   * its normalizer put in front of the text). */
  const char *(*piece_at_start)(const OrionTokenizer *t, int32_t id, size_t *len);
  /* Optional (NULL: never): an id that stands for no text, after which a
   * stream is still at its start (SentencePiece's bos, eos, pad). */
  bool (*is_control)(const OrionTokenizer *t, int32_t id);
  /* Optional: a decode that is not the concatenation of the pieces
   * (SentencePiece drops the leading space of a text). NULL: concatenate. */
  bool (*decode)(const OrionTokenizer *t, const int32_t *ids, size_t n, StrBuf *out, Diag *d);
  void (*free_impl)(void *impl);
} TokOps;

struct OrionTokenizer {
  OrionTokenizerKind kind;
  const TokOps *ops;
  void *impl;
  uint32_t vocab_size;
  int32_t bos, eos;
  bool adds_bos;
  size_t longest_piece; /* bytes, for OrionTextStream's buffer size */
};

/* Fills t (ops, impl, sizes, specials) from a BPE's files; false after
 * reporting. vocab is vocab.json or encoder.json, merges merges.txt or vocab.bpe. */
bool tok_bpe_open(OrionTokenizer *t, const char *vocab_path, const char *merges_path, Diag *d);

/* The same from the files' contents in memory (the fuzz target and the
 * tests; the names are what messages say). */
bool tok_bpe_open_memory(OrionTokenizer *t, const char *vocab_name, const char *vocab, size_t vocab_len,
                         const char *merges_name, const char *merges, size_t merges_len, Diag *d);

/* GPT-2's pre-tokenizer (pretokenize.c): the one regex, \s and treatment
 * of invalid UTF-8 of both the encoder and the trainer. */
pcre2_code *pretok_compile(Diag *d); /* NULL after reporting */

/* One caller's matching state (PCRE2 match data and JIT stack): a compiled
 * regex may be shared by threads, a matcher may not. */
typedef struct PretokMatcher {
  const pcre2_code *re;
  pcre2_match_data *md;
  pcre2_match_context *mc;
  pcre2_jit_stack *js;
} PretokMatcher;
void pretok_matcher_init(PretokMatcher *m, const pcre2_code *re);
void pretok_matcher_free(PretokMatcher *m);

/* Called with each word in order; false stops the split (and makes it
 * return false: the callee has reported). */
typedef bool (*PretokWordFn)(void *ctx, const char *word, size_t len);
/* Splits text[0, len) into words: each match of the regex, and each run of
 * bytes no match covers (invalid UTF-8) as one word. The words are adjacent
 * and cover the text. False after a PCRE2 failure reported through d, or
 * when word returns false. */
bool pretok_split(PretokMatcher *m, const char *text, size_t len, PretokWordFn word, void *ctx, Diag *d);

/* SentencePiece (runtime/text/sentencepiece*.cc), built only with
 * ORION_HAVE_SENTENCEPIECE. */
bool tok_sentencepiece_open(OrionTokenizer *t, const char *model_path, Diag *d);

/* Opens a BPE from files in memory: the fuzz target's and the tests' way in. */
OrionTokenizer *orion_tokenizer_open_bpe_memory(const char *vocab_name, const char *vocab, size_t vocab_len,
                                                const char *merges_name, const char *merges, size_t merges_len,
                                                Diag *d);

#endif
