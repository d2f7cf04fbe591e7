/*
 * The SentencePiece tokenizer kind: a C interface over libsentencepiece
 * (runtime/text/sentencepiece.cc, the project's only C++ file), so that the
 * tokenizer library (orion_tokenizer_open on a `.model` path) needs no C++.
 * Nothing here throws: every C++ exception is caught at this boundary and
 * becomes an error message in the caller's buffer (err, errlen bytes,
 * always NUL terminated when errlen > 0).
 *
 * Built only when meson finds libsentencepiece; then ORION_HAVE_SENTENCEPIECE
 * is defined for the text library. See docs/tokenizers-sentencepiece-and-training.md.
 */
#ifndef ORION_SENTENCEPIECE_KIND_H
#define ORION_SENTENCEPIECE_KIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct SpModel SpModel;

/* Loads a serialized SentencePiece model (`tokenizer.model`). NULL with
 * "cannot load SentencePiece model 'PATH': WHY" in err. */
SpModel *sp_model_open(const char *path, char *err, size_t errlen);
void sp_model_free(SpModel *m);

/* Encodes len bytes as libsentencepiece does (its normalizer first: bytes
 * that are not UTF-8 become U+FFFD, so decode(encode(x)) == x only for
 * valid UTF-8 that the model's normalization leaves alone). *ids is
 * malloc'd (NULL when *n is 0). No bos/eos is added. */
bool sp_model_encode(const SpModel *m, const char *text, size_t len, int32_t **ids, size_t *n, char *err,
                     size_t errlen);
/* Decodes ids as libsentencepiece does into a malloc'd NUL-terminated
 * *text of *len bytes. An id out of range is "token id N is out of range
 * (vocabulary of V)". */
bool sp_model_decode(const SpModel *m, const int32_t *ids, size_t n, char **text, size_t *len, char *err,
                     size_t errlen);

/* The bytes of one id for streaming, valid until sp_model_free; NULL for an
 * id out of range. '▁' (U+2581) is a space; a byte-fallback piece <0xAB> is
 * that one byte; control pieces (bos, eos, pad) are empty; the unknown piece
 * is the model's unk surface (" \u2047 " by default), as decode writes it.
 * Concatenated, the pieces of ids are decode(ids), less a leading space
 * when sp_model_adds_dummy_prefix (decode drops it at the start of a text)
 * and apart from byte pieces that do not form UTF-8 (decode writes U+FFFD). */
const char *sp_model_piece(const SpModel *m, int32_t id, size_t *len);

uint32_t sp_model_vocab_size(const SpModel *m);
/* Special ids, -1 when the model has none. */
int32_t sp_model_bos(const SpModel *m);
int32_t sp_model_eos(const SpModel *m);
int32_t sp_model_unk(const SpModel *m);
/* The model's normalizer puts a space in front of the text
 * (add_dummy_prefix): the first piece's leading space is not the text's. */
bool sp_model_adds_dummy_prefix(const SpModel *m);

#ifdef __cplusplus
}
#endif

#endif
