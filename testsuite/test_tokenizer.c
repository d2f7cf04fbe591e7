/*
 * The tokenizer library (runtime/text/): exact ids of hand-checked texts
 * with the tiny committed BPE (testsuite/text/tiny, make_tiny_bpe.py),
 * invalid UTF-8 kept as bytes, <|endoftext|> with and without
 * ORION_ENCODE_SPECIAL, exact messages for malformed files and bad ids,
 * and the text stream holding back unfinished UTF-8.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orion/tokenizer.h"
#include "text_internal.h"

static char *tiny_dir(void) {
  const char *root = getenv("ORION_SOURCE_ROOT");
  cr_assert(root, "ORION_SOURCE_ROOT is not set");
  StrBuf sb;
  sb_init(&sb);
  sb_printf(&sb, "%s/testsuite/text/tiny", root);
  return sb.data;
}

typedef struct Fixture {
  Diag d;
  StrBuf out;
  OrionTokenizer *t;
} Fixture;

static void setup(Fixture *f) {
  diag_init(&f->d, NULL);
  sb_init(&f->out);
  f->d.capture = &f->out;
  char *dir = tiny_dir();
  f->t = orion_tokenizer_open(dir, &f->d);
  free(dir);
  cr_assert(f->t, "%s", f->out.data ? f->out.data : "");
}

static void teardown(Fixture *f) {
  orion_tokenizer_free(f->t);
  sb_free(&f->out);
}

/* The ids of text, as "1 2 3" (flags: ORION_ENCODE_SPECIAL or 0). */
static char *encode_str(Fixture *f, const char *text, size_t len, unsigned flags) {
  int32_t *ids;
  size_t n;
  cr_assert(orion_tokenizer_encode_flags(f->t, text, len, flags, &ids, &n, &f->d), "%s", f->out.data);
  StrBuf sb;
  sb_init(&sb);
  sb_putn(&sb, "", 0);
  for (size_t i = 0; i < n; i++) sb_printf(&sb, "%s%d", i ? " " : "", ids[i]);
  /* every encode decodes back to its bytes */
  char *back;
  size_t blen;
  cr_assert(orion_tokenizer_decode(f->t, ids, n, &back, &blen, &f->d));
  cr_assert_eq(blen, len);
  cr_assert(memcmp(back, text, len) == 0);
  free(back);
  free(ids);
  return sb.data;
}

#define EXPECT_IDS(f, text, flags, expected)                                                                 \
  do {                                                                                                       \
    char *got_ = encode_str((f), (text), sizeof(text) - 1, (flags));                                         \
    cr_assert_str_eq(got_, (expected), "encoding \"%s\"", (text));                                           \
    free(got_);                                                                                              \
  } while (0)

Test(tokenizer, tiny_bpe_info) {
  Fixture f;
  setup(&f);
  cr_assert_eq(orion_tokenizer_kind(f.t), ORION_TOKENIZER_BPE);
  cr_assert_eq(orion_tokenizer_vocab_size(f.t), 270);
  cr_assert_eq(orion_tokenizer_bos(f.t), 269);
  cr_assert_eq(orion_tokenizer_eos(f.t), 269);
  cr_assert(!orion_tokenizer_adds_bos(f.t));
  teardown(&f);
}

Test(tokenizer, merges_by_rank) {
  Fixture f;
  setup(&f);
  EXPECT_IDS(&f, "the", 0, "116 257");     /* t he: no "t he" merge */
  EXPECT_IDS(&f, " the", 0, "258");        /* Ġ t -> Ġt, h e -> he, Ġt he */
  EXPECT_IDS(&f, "thing", 0, "116 104 262"); /* i n -> in, in g -> ing */
  EXPECT_IDS(&f, "aaaa", 0, "259 259");    /* every a a left to right, then no aa aa */
  EXPECT_IDS(&f, "aaaaa", 0, "259 260");   /* aa aa a: then aa a (rank 4) */
  /* b b (rank 10) everywhere first, though bb b (rank 9) appears after the first */
  EXPECT_IDS(&f, "bbbb", 0, "265 265");
  EXPECT_IDS(&f, "bbb", 0, "266");
  EXPECT_IDS(&f, "it's", 0, "105 116 264");  /* "it" "'s" */
  EXPECT_IDS(&f, "IT'S", 0, "73 84 39 83");  /* 'S is no contraction for the regex */
  EXPECT_IDS(&f, "\xc3\xa9", 0, "263");      /* é */
  EXPECT_IDS(&f, "\xe2\x82\xac", 0, "226 130 172"); /* € : no merge makes its first two bytes */
  EXPECT_IDS(&f, "", 0, "");
  teardown(&f);
}

Test(tokenizer, invalid_utf8_is_kept_as_bytes) {
  Fixture f;
  setup(&f);
  EXPECT_IDS(&f, "\xff", 0, "255");
  EXPECT_IDS(&f, "a\xff" "b", 0, "97 255 98");
  EXPECT_IDS(&f, " \xc3", 0, "32 195");          /* a cut é: the space is a word, the byte another */
  EXPECT_IDS(&f, "\xc3\xc3\xa9", 0, "195 263");
  EXPECT_IDS(&f, "x\x00y", 0, "120 0 121");      /* NUL is a character like any */
  teardown(&f);
}

Test(tokenizer, endoftext_only_with_the_flag) {
  Fixture f;
  setup(&f);
  EXPECT_IDS(&f, "a<|endoftext|>b", 0, "97 60 124 101 110 100 111 102 116 101 120 116 124 62 98");
  EXPECT_IDS(&f, "a<|endoftext|>b", ORION_ENCODE_SPECIAL, "97 269 98");
  EXPECT_IDS(&f, "<|endoftext|><|endoftext|> the", ORION_ENCODE_SPECIAL, "269 269 258");
  EXPECT_IDS(&f, "<|endoftext|", ORION_ENCODE_SPECIAL, "60 124 101 110 100 111 102 116 101 120 116 124");
  teardown(&f);
}

Test(tokenizer, decode_of_a_bad_id_names_it) {
  Fixture f;
  setup(&f);
  int32_t ids[] = {258, 270};
  char *text = (char *)1;
  size_t len = 1;
  cr_assert(!orion_tokenizer_decode(f.t, ids, 2, &text, &len, &f.d));
  cr_assert_null(text);
  cr_assert_str_eq(f.out.data, "orionc: error: id 270 is out of range (the vocabulary has ids 0..269)\n");
  f.out.len = 0;
  int32_t neg[] = {-1};
  cr_assert(!orion_tokenizer_decode(f.t, neg, 1, &text, &len, &f.d));
  cr_assert_str_eq(f.out.data, "orionc: error: id -1 is out of range (the vocabulary has ids 0..269)\n");
  size_t plen = 7;
  cr_assert_null(orion_tokenizer_piece(f.t, 270, &plen));
  const char *piece = orion_tokenizer_piece(f.t, 258, &plen);
  cr_assert_eq(plen, 4);
  cr_assert(memcmp(piece, " the", 4) == 0);
  teardown(&f);
}

Test(tokenizer, stream_holds_back_unfinished_utf8) {
  Fixture f;
  setup(&f);
  OrionTextStream s;
  orion_text_stream_init(&s, f.t);
  char out[128];
  cr_assert_eq(orion_text_stream_push(&s, 258, out, sizeof out), 4); /* " the" */
  cr_assert(memcmp(out, " the", 4) == 0);
  cr_assert_eq(orion_text_stream_push(&s, 195, out, sizeof out), 0); /* the first byte of é */
  cr_assert_eq(orion_text_stream_push(&s, 169, out, sizeof out), 2);
  cr_assert(memcmp(out, "\xc3\xa9", 2) == 0);
  cr_assert_eq(orion_text_stream_push(&s, 267, out, sizeof out), 0); /* E2 82: two of €'s three */
  cr_assert_eq(orion_text_stream_push(&s, 172, out, sizeof out), 3);
  cr_assert(memcmp(out, "\xe2\x82\xac", 3) == 0);
  cr_assert_eq(orion_text_stream_push(&s, 255, out, sizeof out), 1); /* never a character: let through */
  cr_assert_eq((unsigned char)out[0], 0xff);
  cr_assert_eq(orion_text_stream_push(&s, 97, out, sizeof out), 1);
  cr_assert_eq(orion_text_stream_push(&s, 240, out, sizeof out), 0); /* F0: a four-byte start, cut at the end */
  cr_assert_eq(orion_text_stream_push(&s, 270, out, sizeof out), (size_t)-1);
  cr_assert_eq(orion_text_stream_finish(&s, out, sizeof out), 1);
  cr_assert_eq((unsigned char)out[0], 0xf0);
  cr_assert_eq(orion_text_stream_finish(&s, out, sizeof out), 0);
  cr_assert_eq(s.emitted, 8);
  teardown(&f);
}

/* ---- malformed files: exact messages ---------------------------------------- */

static char *open_error(const char *vocab, const char *merges) {
  Diag d;
  StrBuf out;
  diag_init(&d, NULL);
  sb_init(&out);
  sb_putn(&out, "", 0);
  d.capture = &out;
  OrionTokenizer *t =
      orion_tokenizer_open_bpe_memory("vocab.json", vocab, strlen(vocab), "merges.txt", merges, strlen(merges), &d);
  cr_assert_null(t);
  return out.data;
}

#define EXPECT_OPEN_ERROR(vocab, merges, expected)  \
  do {                                              \
    char *got_ = open_error((vocab), (merges));     \
    cr_assert_str_eq(got_, (expected));             \
    free(got_);                                     \
  } while (0)

Test(tokenizer, malformed_vocab_json) {
  EXPECT_OPEN_ERROR("{\"a\": 0,\n \"b\" 1}", "", "vocab.json:2:6: error: malformed JSON\n");
  EXPECT_OPEN_ERROR("{\"a\": 0} x", "", "vocab.json:1:10: error: malformed JSON\n");
  EXPECT_OPEN_ERROR("[1, 2]", "", "orionc: error: vocab.json: the top level must be an object from token to id\n");
  EXPECT_OPEN_ERROR("{\"a\": 1.5}", "",
                    "orionc: error: vocab.json: the id of token \"a\" is not an integer in 0..16777215\n");
  EXPECT_OPEN_ERROR("{\"a\": -1}", "",
                    "orionc: error: vocab.json: the id of token \"a\" is not an integer in 0..16777215\n");
  EXPECT_OPEN_ERROR("{\"a\": \"0\"}", "",
                    "orionc: error: vocab.json: the id of token \"a\" is not an integer in 0..16777215\n");
  EXPECT_OPEN_ERROR("{\"a\": 16777216}", "",
                    "orionc: error: vocab.json: the id of token \"a\" is not an integer in 0..16777215\n");
  EXPECT_OPEN_ERROR("{\"a\": 1e300}", "",
                    "orionc: error: vocab.json: the id of token \"a\" is not an integer in 0..16777215\n");
  EXPECT_OPEN_ERROR("{}", "", "orionc: error: vocab.json: the vocabulary is empty\n");
  EXPECT_OPEN_ERROR("{\"a\": 0, \"b\": 0}", "",
                    "orionc: error: vocab.json: id 0 is given to two tokens (\"b\" and another before it)\n");
}

Test(tokenizer, malformed_merges_txt) {
  const char *vocab = "{\"a\": 0, \"b\": 1, \"ab\": 2, \"\\u0120\": 3}";
  EXPECT_OPEN_ERROR(vocab, "#version: 0.2\na b c\n", "merges.txt:2:5: error: a merge is two tokens separated by a space\n");
  EXPECT_OPEN_ERROR(vocab, "a b\nab\n", "merges.txt:2:1: error: a merge is two tokens separated by a space\n");
  EXPECT_OPEN_ERROR(vocab, "a b\n a  q\n", "merges.txt:2:5: error: 'q' is not in the vocabulary\n");
  EXPECT_OPEN_ERROR(vocab, "b a\n", "merges.txt:1:1: error: the merge of 'b' and 'a' is not in the vocabulary\n");
  /* a space in a token is written Ġ: a literal one would be two words */
  EXPECT_OPEN_ERROR(vocab, "\xc4\xa0 a\n", "merges.txt:1:1: error: the merge of '\xc4\xa0' and 'a' is not in the vocabulary\n");
}

Test(tokenizer, a_good_minimal_tokenizer_from_memory) {
  const char *vocab = "{\"a\": 0, \"b\": 1, \"ab\": 2}";
  Diag d;
  diag_init(&d, NULL);
  OrionTokenizer *t = orion_tokenizer_open_bpe_memory("v", vocab, strlen(vocab), "m", "a b\n\n", 5, &d);
  cr_assert(t);
  int32_t *ids;
  size_t n;
  cr_assert(orion_tokenizer_encode(t, "abab", 4, &ids, &n, &d));
  cr_assert_eq(n, 2);
  cr_assert_eq(ids[0], 2);
  cr_assert_eq(ids[1], 2);
  free(ids);
  /* a byte the vocabulary lacks is an error, never dropped */
  StrBuf out;
  sb_init(&out);
  d.capture = &out;
  cr_assert(!orion_tokenizer_encode(t, "abc", 3, &ids, &n, &d));
  cr_assert_str_eq(out.data,
                   "orionc: error: the byte 0x63 has no token in the vocabulary (a byte-level BPE needs all 256)\n");
  sb_free(&out);
  orion_tokenizer_free(t);
}

Test(tokenizer, a_word_over_the_limit_is_an_error) {
  Fixture f;
  setup(&f);
  size_t len = (16u << 20) + 1; /* BPE_MAX_WORD_BYTES + 1 letters: one word */
  char *text = malloc(len);
  memset(text, 'x', len);
  int32_t *ids;
  size_t n;
  cr_assert(!orion_tokenizer_encode(f.t, text, len, &ids, &n, &f.d));
  cr_assert_str_eq(f.out.data, "orionc: error: a word of 16777217 bytes is over the tokenizer's limit of 16777216 bytes\n");
  f.out.len = 0;
  text[len - 2] = ' '; /* two words, each within it */
  cr_assert(orion_tokenizer_encode(f.t, text, len, &ids, &n, &f.d));
  cr_assert_eq(n, len);
  free(ids);
  free(text);
  teardown(&f);
}

/* ---- opening by path ---------------------------------------------------------- */

static char *open_path_error(const char *path) {
  Diag d;
  StrBuf out;
  diag_init(&d, NULL);
  sb_init(&out);
  sb_putn(&out, "", 0);
  d.capture = &out;
  cr_assert_null(orion_tokenizer_open(path, &d));
  return out.data;
}

Test(tokenizer, paths) {
  char dir[] = "/tmp/orion-tok-XXXXXX";
  cr_assert(mkdtemp(dir));
  StrBuf p;
  sb_init(&p);
  sb_printf(&p, "%s/vocab.json", dir);
  FILE *fp = fopen(p.data, "w");
  fputs("{\"a\": 0}", fp);
  fclose(fp);
  char *got = open_path_error(dir);
  StrBuf want;
  sb_init(&want);
  sb_printf(&want, "orionc: error: %s: vocab.json has no merges.txt beside it\n", dir);
  cr_assert_str_eq(got, want.data);
  free(got);
  got = open_path_error(p.data); /* the file itself: the same, naming it */
  want.len = 0;
  sb_printf(&want, "orionc: error: %s: vocab.json has no merges.txt beside it\n", p.data);
  cr_assert_str_eq(got, want.data);
  free(got);
  unlink(p.data);
  want.len = 0;
  sb_printf(&want,
            "orionc: error: %s: no tokenizer here (looked for vocab.json + merges.txt, encoder.json + vocab.bpe, "
            "tokenizer.model)\n",
            dir);
  got = open_path_error(dir);
  cr_assert_str_eq(got, want.data);
  free(got);
  p.len = 0;
  sb_printf(&p, "%s/tokenizer.model", dir);
  fp = fopen(p.data, "w");
  fclose(fp);
#ifndef ORION_HAVE_SENTENCEPIECE
  want.len = 0;
  sb_printf(&want, "orionc: error: %s: SentencePiece tokenizers need libsentencepiece (not built in)\n", p.data);
  got = open_path_error(dir);
  cr_assert_str_eq(got, want.data);
  free(got);
#endif
  unlink(p.data);
  rmdir(dir);
  want.len = 0;
  sb_printf(&want, "orionc: error: cannot open tokenizer %s: No such file or directory\n", dir);
  got = open_path_error(dir);
  cr_assert_str_eq(got, want.data);
  free(got);
  sb_free(&p);
  sb_free(&want);
}

#ifdef ORION_HAVE_SENTENCEPIECE
/* A SentencePiece model through the handle: the text stream's pieces add up
 * to decode for every id sequence of a text (the start's space is dropped
 * once, after bos), and the handle's specials are the model's. */
Test(tokenizer, sentencepiece_stream_equals_decode) {
  const char *root = getenv("ORION_SOURCE_ROOT");
  cr_assert(root, "ORION_SOURCE_ROOT is not set");
  StrBuf path, err;
  sb_init(&path);
  sb_init(&err);
  sb_printf(&path, "%s/testsuite/text/fixtures/sp_bpe.model", root);
  Diag d;
  diag_init(&d, NULL);
  d.capture = &err;
  OrionTokenizer *t = orion_tokenizer_open(path.data, &d);
  cr_assert(t, "%s", err.data ? err.data : "");
  cr_assert_eq(orion_tokenizer_kind(t), ORION_TOKENIZER_SENTENCEPIECE);
  cr_assert_eq(orion_tokenizer_bos(t), 1);
  cr_assert_eq(orion_tokenizer_eos(t), 2);
  cr_assert(orion_tokenizer_adds_bos(t));
  const char *texts[] = {"Hello world, this is a test.", "  two leading spaces", "caf\xc3\xa9 na\xc3\xafve \xe2\x9c\x93",
                         "x", "line one\nline two\n"};
  for (size_t k = 0; k < sizeof texts / sizeof *texts; k++) {
    int32_t *ids = NULL;
    size_t n = 0;
    cr_assert(orion_tokenizer_encode(t, texts[k], strlen(texts[k]), &ids, &n, &d));
    for (int with_bos = 0; with_bos < 2; with_bos++) {
      int32_t *seq = malloc((n + 1) * sizeof *seq);
      size_t m = 0;
      if (with_bos) seq[m++] = orion_tokenizer_bos(t);
      memcpy(seq + m, ids, n * sizeof *ids);
      m += n;
      char *decoded = NULL;
      size_t dlen = 0;
      cr_assert(orion_tokenizer_decode(t, seq, m, &decoded, &dlen, &d));
      OrionTextStream s;
      orion_text_stream_init(&s, t);
      StrBuf streamed;
      sb_init(&streamed);
      char buf[4096];
      for (size_t i = 0; i < m; i++) {
        size_t got = orion_text_stream_push(&s, seq[i], buf, sizeof buf);
        cr_assert_neq(got, (size_t)-1);
        sb_putn(&streamed, buf, got);
      }
      sb_putn(&streamed, buf, orion_text_stream_finish(&s, buf, sizeof buf));
      cr_assert_eq(streamed.len, dlen, "text %zu (bos %d): streamed %zu bytes, decode %zu", k, with_bos,
                   streamed.len, dlen);
      cr_assert(memcmp(streamed.data ? streamed.data : "", decoded, dlen) == 0, "text %zu (bos %d)", k, with_bos);
      sb_free(&streamed);
      free(decoded);
      free(seq);
    }
    free(ids);
  }
  orion_tokenizer_free(t);
  sb_free(&path);
  sb_free(&err);
}
#endif
