/*
 * A stand-in for the tokenizer library (orion/tokenizer.h), for the tests of
 * orion-run generate's --tokenizer path only (testsuite/meson.build links it
 * into orion-run-stubtok, which is never installed). 61 ids to match
 * tiny_gen.oir: letters, space, '.', newline, the two bytes of "é" as two
 * ids (a piece that ends inside a character), "!", "th", "e ", and
 * <|endoftext|> (60). It opens only the path "stub-bytes".
 */
#include <stdlib.h>
#include <string.h>

#include "orion/tokenizer.h"

#define NPIECES 61
#define EOS 60

struct OrionTokenizer {
  char pieces[NPIECES][4];
};

OrionTokenizer *orion_tokenizer_open(const char *path, Diag *d) {
  if (strcmp(path, "stub-bytes")) {
    diag_error(d, (SrcSpan){0}, "the stub tokenizer opens only 'stub-bytes', not '%s'", path);
    return NULL;
  }
  OrionTokenizer *t = xcalloc(1, sizeof *t);
  for (int i = 0; i < 26; i++) t->pieces[i][0] = (char)('a' + i), t->pieces[26 + i][0] = (char)('A' + i);
  const char *rest[] = {" ", ".", "\n", "\xc3", "\xa9", "!", "th", "e "};
  for (int i = 0; i < 8; i++) strcpy(t->pieces[52 + i], rest[i]);
  return t;
}

void orion_tokenizer_free(OrionTokenizer *t) { free(t); }
OrionTokenizerKind orion_tokenizer_kind(const OrionTokenizer *t) { (void)t; return ORION_TOKENIZER_BPE; }
uint32_t orion_tokenizer_vocab_size(const OrionTokenizer *t) { (void)t; return NPIECES; }
int32_t orion_tokenizer_bos(const OrionTokenizer *t) { (void)t; return EOS; }
int32_t orion_tokenizer_eos(const OrionTokenizer *t) { (void)t; return EOS; }
bool orion_tokenizer_adds_bos(const OrionTokenizer *t) { (void)t; return false; }

/* Longest piece first at each byte. */
bool orion_tokenizer_encode(const OrionTokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n, Diag *d) {
  int32_t *v = xcalloc(len + 1, sizeof *v);
  size_t k = 0;
  for (size_t i = 0; i < len;) {
    int best = -1;
    size_t best_len = 0;
    for (int id = 0; id < EOS; id++) {
      size_t pl = strlen(t->pieces[id]);
      if (pl > best_len && pl <= len - i && !memcmp(text + i, t->pieces[id], pl)) best = id, best_len = pl;
    }
    if (best < 0) {
      diag_error(d, (SrcSpan){0}, "the stub tokenizer has no piece for byte 0x%02x", (unsigned char)text[i]);
      free(v);
      return false;
    }
    v[k++] = best, i += best_len;
  }
  *ids = v, *n = k;
  return true;
}

bool orion_tokenizer_decode(const OrionTokenizer *t, const int32_t *ids, size_t n, char **text, size_t *len, Diag *d) {
  StrBuf sb;
  sb_init(&sb);
  for (size_t i = 0; i < n; i++) {
    if (ids[i] < 0 || ids[i] >= NPIECES) {
      diag_error(d, (SrcSpan){0}, "id %d is out of range", ids[i]);
      sb_free(&sb);
      return false;
    }
    sb_puts(&sb, t->pieces[ids[i]]);
  }
  sb_putc(&sb, '\0');
  *text = sb.data, *len = sb.len - 1;
  return true;
}

const char *orion_tokenizer_piece(const OrionTokenizer *t, int32_t id, size_t *len) {
  if (id < 0 || id >= NPIECES) return NULL;
  *len = strlen(t->pieces[id]);
  return t->pieces[id];
}

void orion_text_stream_init(OrionTextStream *s, const OrionTokenizer *t) {
  memset(s, 0, sizeof *s);
  s->tok = t;
}

/* The bytes of an unfinished UTF-8 character at the end of b[0, n). */
static size_t unfinished(const char *b, size_t n) {
  for (size_t back = 1; back <= 3 && back <= n; back++) {
    unsigned char c = (unsigned char)b[n - back];
    if ((c & 0xc0) == 0x80) continue;
    size_t need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

size_t orion_text_stream_push(OrionTextStream *s, int32_t id, char *out, size_t cap) {
  size_t len;
  const char *p = orion_tokenizer_piece(s->tok, id, &len);
  if (!p || s->npending + len > cap) return (size_t)-1;
  s->emitted++;
  memcpy(out, s->pending, s->npending);
  memcpy(out + s->npending, p, len);
  size_t n = s->npending + len, hold = unfinished(out, n);
  memcpy(s->pending, out + n - hold, hold);
  s->npending = hold;
  return n - hold;
}

size_t orion_text_stream_finish(OrionTextStream *s, char *out, size_t cap) {
  size_t n = s->npending <= cap ? s->npending : cap;
  memcpy(out, s->pending, n);
  s->npending = 0;
  return n;
}
