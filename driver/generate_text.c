/*
 * generate_text.h on the tokenizer library (orion/tokenizer.h): its
 * encoder and its streaming decoder (OrionTextStream holds back the bytes
 * of an unfinished UTF-8 character).
 */
#include <stdlib.h>
#include <string.h>

#include "generate_text.h"
#include "orion/tokenizer.h"

struct GenText {
  OrionTokenizer *tok;
  OrionTextStream stream;
  size_t cap; /* enough for any one push */
};

GenText *gen_text_open(const char *path, Diag *d) {
  OrionTokenizer *tok = orion_tokenizer_open(path, d);
  if (!tok) return NULL;
  GenText *t = xcalloc(1, sizeof *t);
  t->tok = tok;
  orion_text_stream_init(&t->stream, tok);
  for (uint32_t id = 0; id < orion_tokenizer_vocab_size(tok); id++) {
    size_t len = 0;
    if (orion_tokenizer_piece(tok, (int32_t)id, &len) && len > t->cap) t->cap = len;
  }
  t->cap += 64;
  return t;
}

void gen_text_free(GenText *t) {
  if (!t) return;
  orion_tokenizer_free(t->tok);
  free(t);
}

uint32_t gen_text_vocab(const GenText *t) { return orion_tokenizer_vocab_size(t->tok); }
int32_t gen_text_eos(const GenText *t) { return orion_tokenizer_eos(t->tok); }

bool gen_text_encode(const GenText *t, const char *text, size_t len, int32_t **ids, size_t *n, Diag *d) {
  int32_t *body;
  size_t nbody;
  if (!orion_tokenizer_encode(t->tok, text, len, &body, &nbody, d)) return false;
  int32_t bos = orion_tokenizer_bos(t->tok);
  if (!orion_tokenizer_adds_bos(t->tok) || bos < 0) {
    *ids = body, *n = nbody;
    return true;
  }
  *ids = xmalloc((nbody + 1) * sizeof **ids);
  (*ids)[0] = bos;
  if (nbody) memcpy(*ids + 1, body, nbody * sizeof *body);
  *n = nbody + 1;
  free(body);
  return true;
}

bool gen_text_push(GenText *t, int32_t id, StrBuf *out) {
  char *buf = xmalloc(t->cap);
  size_t n = orion_text_stream_push(&t->stream, id, buf, t->cap);
  if (n != (size_t)-1) sb_putn(out, buf, n);
  free(buf);
  return n != (size_t)-1;
}

void gen_text_finish(GenText *t, StrBuf *out) {
  char buf[64];
  size_t n = orion_text_stream_finish(&t->stream, buf, sizeof buf);
  sb_putn(out, buf, n);
}
