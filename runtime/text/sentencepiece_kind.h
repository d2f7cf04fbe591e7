/*
 * The SentencePiece tokenizer kind: a C interface over libsentencepiece
 * (runtime/text/sentencepiece.cc, the project's only C++ file), so that the
 * tokenizer library (orion_tokenizer_open on a `.model` path) needs no C++.
 * Nothing here throws: every C++ exception is caught at this boundary and
 * becomes an error message in the caller's buffer (err, errlen bytes,
 * always NUL terminated when errlen > 0).
 *
 * Built only when meson finds libsentencepiece; then ORION_HAVE_SENTENCEPIECE
 * is defined for the text library. See docs/tokenizers.md ("SentencePiece").
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
 * is the model's unk surface (" \u2047 " by default), as decode writes them.
 * Use sp_model_piece_at_start for the first piece of a text that is not a
 * control piece: with both, the pieces of ids concatenate to decode(ids),
 * apart from byte pieces that do not form UTF-8 (decode writes U+FFFD). */
const char *sp_model_piece(const SpModel *m, int32_t id, size_t *len);
/* The same for the first piece of a text that is not a control piece (only
 * control pieces before it): a normal piece loses its leading space when the
 * model's normalizer adds one in front or removes extra whitespace
 * (add_dummy_prefix or remove_extra_whitespaces, which decode undoes there);
 * the unknown piece and byte pieces are as sp_model_piece gives them. */
const char *sp_model_piece_at_start(const SpModel *m, int32_t id, size_t *len);
/* Whether id is a control piece (bos, eos, pad): empty, and a text is still
 * at its start after it. False for an id out of range. */
bool sp_model_is_control(const SpModel *m, int32_t id);

uint32_t sp_model_vocab_size(const SpModel *m);
/* Special ids, -1 when the model has none. */
int32_t sp_model_bos(const SpModel *m);
int32_t sp_model_eos(const SpModel *m);
int32_t sp_model_unk(const SpModel *m);
#ifdef __cplusplus
}
#endif

#endif
