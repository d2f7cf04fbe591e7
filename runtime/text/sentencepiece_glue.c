/*
 * The SentencePiece kind of the tokenizer handle: orion_tokenizer_open on a
 * `.model` fills an OrionTokenizer from sentencepiece_kind.h's C interface
 * over libsentencepiece (sentencepiece.cc). Built only with
 * ORION_HAVE_SENTENCEPIECE.
 */
#include <stdlib.h>
#include <string.h>

#include "sentencepiece_kind.h"
#include "text_internal.h"

static bool sp_encode(const OrionTokenizer *t, const char *text, size_t len, unsigned flags, TokIds *out, Diag *d) {
  (void)flags; /* SentencePiece has no special-token spelling in text */
  char err[512];
  int32_t *ids = NULL;
  size_t n = 0;
  if (!sp_model_encode(t->impl, text, len, &ids, &n, err, sizeof err)) {
    diag_error(d, (SrcSpan){0}, "%s", err);
    return false;
  }
  tok_ids_append(out, ids, n);
  free(ids);
  return true;
}

static const char *sp_piece(const OrionTokenizer *t, int32_t id, size_t *len) { return sp_model_piece(t->impl, id, len); }

static const char *sp_piece_at_start(const OrionTokenizer *t, int32_t id, size_t *len) {
  return sp_model_piece_at_start(t->impl, id, len);
}

static bool sp_is_control(const OrionTokenizer *t, int32_t id) { return sp_model_is_control(t->impl, id); }

/* libsentencepiece's own decode: it drops the start's space marker and
 * writes U+FFFD for byte pieces that are not UTF-8, which concatenating the
 * pieces would not. */
static bool sp_decode(const OrionTokenizer *t, const int32_t *ids, size_t n, StrBuf *out, Diag *d) {
  char err[512];
  char *text = NULL;
  size_t len = 0;
  if (!sp_model_decode(t->impl, ids, n, &text, &len, err, sizeof err)) {
    diag_error(d, (SrcSpan){0}, "%s", err);
    return false;
  }
  sb_putn(out, text, len);
  free(text);
  return true;
}

static void sp_free(void *impl) { sp_model_free(impl); }

static const TokOps sp_ops = {
    .encode = sp_encode,
    .piece = sp_piece,
    .piece_at_start = sp_piece_at_start,
    .is_control = sp_is_control,
    .decode = sp_decode,
    .free_impl = sp_free,
};

bool tok_sentencepiece_open(OrionTokenizer *t, const char *model_path, Diag *d) {
  char err[512];
  SpModel *m = sp_model_open(model_path, err, sizeof err);
  if (!m) {
    diag_error(d, (SrcSpan){0}, "%s", err);
    return false;
  }
  t->kind = ORION_TOKENIZER_SENTENCEPIECE;
  t->ops = &sp_ops;
  t->impl = m;
  t->vocab_size = sp_model_vocab_size(m);
  t->bos = sp_model_bos(m);
  t->eos = sp_model_eos(m);
  t->adds_bos = t->bos >= 0; /* llama's models want bos in front of a prompt */
  size_t longest = 0;
  for (uint32_t id = 0; id < t->vocab_size; id++) {
    size_t len = 0;
    if (sp_model_piece(m, (int32_t)id, &len) && len > longest) longest = len;
  }
  t->longest_piece = longest;
  return true;
}
