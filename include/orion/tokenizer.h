/*
 * Tokenizers for text generation and for preparing training data: one
 * opaque handle over several kinds, chosen from what a path holds.
 *
 *   - GPT-2 byte-level BPE: a directory (or a file inside it) with Hugging
 *     Face's `vocab.json` + `merges.txt`, or OpenAI's `encoder.json` +
 *     `vocab.bpe`. Pre-tokenized with GPT-2's regex (PCRE2, Unicode classes).
 *   - SentencePiece: a `tokenizer.model` file (or a directory holding one),
 *     through libsentencepiece (llama family).
 *
 * Ids are int32. Errors go through the caller's Diag (no location, or the
 * tokenizer file's name in the message). See docs/tokenizers.md.
 */
#ifndef ORION_TOKENIZER_H
#define ORION_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "orion/support.h"

typedef struct OrionTokenizer OrionTokenizer;

typedef enum OrionTokenizerKind {
  ORION_TOKENIZER_BPE,           /* GPT-2 byte-level BPE */
  ORION_TOKENIZER_SENTENCEPIECE, /* a SentencePiece model */
} OrionTokenizerKind;

/* Opens the tokenizer at path (a directory or one of its files). NULL
 * after reporting why (missing files, malformed JSON/merges, ...). */
OrionTokenizer *orion_tokenizer_open(const char *path, Diag *d);
void orion_tokenizer_free(OrionTokenizer *t);

OrionTokenizerKind orion_tokenizer_kind(const OrionTokenizer *t);
/* Number of ids (the largest id + 1). */
uint32_t orion_tokenizer_vocab_size(const OrionTokenizer *t);
/* Special ids, -1 when the tokenizer has none. GPT-2: eos = bos =
 * <|endoftext|>; SentencePiece: the model's bos/eos. */
int32_t orion_tokenizer_bos(const OrionTokenizer *t);
int32_t orion_tokenizer_eos(const OrionTokenizer *t);
/* Whether a prompt is encoded with bos in front (SentencePiece llama
 * models: yes; GPT-2: no). orion_tokenizer_encode does not add it. */
bool orion_tokenizer_adds_bos(const OrionTokenizer *t);

/* Encodes len bytes of text (any bytes: invalid UTF-8 is encoded as its
 * raw bytes, never replaced or dropped; docs/tokenizers.md) into a malloc'd
 * array *ids of *n ids. decode(encode(x)) == x for valid UTF-8 (for BPE,
 * for any bytes). */
bool orion_tokenizer_encode(const OrionTokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n, Diag *d);

/* Flags of orion_tokenizer_encode_flags. */
enum {
  /* Special tokens written in the text (GPT-2's "<|endoftext|>") become
   * their ids. Without it (orion_tokenizer_encode) they are ordinary text,
   * as in the npm package gpt-3-encoder. */
  ORION_ENCODE_SPECIAL = 1,
};
bool orion_tokenizer_encode_flags(const OrionTokenizer *t, const char *text, size_t len, unsigned flags, int32_t **ids,
                                  size_t *n, Diag *d);

/* Writes the bytes of ids[0..n) into a malloc'd *text of *len bytes (NUL
 * terminated). An id out of range is an error naming it. */
bool orion_tokenizer_decode(const OrionTokenizer *t, const int32_t *ids, size_t n, char **text, size_t *len, Diag *d);

/* The bytes one id stands for, for streaming: a pointer into the
 * tokenizer valid until orion_tokenizer_free, *len set; NULL for an id out
 * of range. A piece may end inside a UTF-8 character; OrionTextStream
 * below holds such bytes back until the character is complete. For
 * SentencePiece the leading-space marker is already a space, except at the
 * start of a text (decode drops it there, as SentencePiece does). */
const char *orion_tokenizer_piece(const OrionTokenizer *t, int32_t id, size_t *len);

/* Streaming output: feed ids one by one, get the text that is complete
 * (whole UTF-8 characters), and the rest at the end. */
typedef struct OrionTextStream {
  const OrionTokenizer *tok;
  size_t emitted;   /* ids fed so far */
  bool started;     /* an id that is text has been fed (not only control ids) */
  char pending[8];  /* bytes of an unfinished UTF-8 character */
  size_t npending;
} OrionTextStream;
void orion_text_stream_init(OrionTextStream *s, const OrionTokenizer *t);
/* Writes what id completes into out (at most cap bytes; returns the count,
 * or (size_t)-1 for an id out of range). cap >= 64 + the longest piece is
 * always enough. */
size_t orion_text_stream_push(OrionTextStream *s, int32_t id, char *out, size_t cap);
/* Flushes held-back bytes (an unfinished character at the end) as they are. */
size_t orion_text_stream_finish(OrionTextStream *s, char *out, size_t cap);

/* ---- learning a byte-level BPE (orion-tokenize train) ----
 *
 * Learns merges from the texts (the encoder's own GPT-2 pre-tokenizer
 * splits them into words first, so encode meets the words the merges were
 * learned on; merges never cross a word) until the vocabulary holds
 * vocab_size ids: 256 byte tokens, the merges, and <|endoftext|> last.
 * Writes dir/vocab.json and dir/merges.txt (Hugging Face's format, which
 * orion_tokenizer_open reads back), atomically. Deterministic: the same
 * texts give the same files (ties broken by the pair's byte order). */
typedef struct OrionBpeTrainOptions {
  uint32_t vocab_size;         /* >= 257 */
  uint32_t min_frequency;      /* a pair seen fewer times is never merged (default 2) */
  bool progress;               /* a line on stderr every few thousand merges */
} OrionBpeTrainOptions;
bool orion_bpe_train(const char *const *texts, const size_t *lens, size_t ntexts, const OrionBpeTrainOptions *opt,
                     const char *dir, Diag *d);

#endif
