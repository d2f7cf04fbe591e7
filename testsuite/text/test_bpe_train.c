/*
 * Tests of the BPE trainer (orion_bpe_train, runtime/text/bpe_train.c): its
 * files on our corpus are byte-identical to those of the reference trainer
 * (testsuite/text/bpe_train_ref.py, committed in
 * testsuite/text/fixtures/sp_bpe_train/), the same texts give the same files,
 * words never cross texts, the exact file conventions on tiny inputs
 * (GPT-2's byte order, the escapes, '#version: 0.2', <|endoftext|> last),
 * min_frequency, each error's exact message, and that the trainer splits
 * words exactly as the encoder does (one pre-tokenizer, pretokenize.c).
 *
 * Needs ORION_SOURCE_ROOT (meson sets it).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "helpers.h"
#include "orion/tokenizer.h"
#include "text_internal.h"

static char dir[64];

static void make_dir(void) { test_dir_make(dir, sizeof dir, "bpe-train"); }
static void remove_dir(void) { test_dir_remove(dir); }

TestSuite(bpe_train, .init = make_dir, .fini = remove_dir);

static char *in_dir(const char *sub, const char *name) {
  StrBuf sb = {0};
  sb_printf(&sb, "%s/%s/%s", dir, sub, name);
  return sb.data;
}

/* Trains on the texts into dir/sub; the captured messages must be empty. */
static void train(const char *const *texts, const size_t *lens, size_t n, uint32_t vocab, uint32_t min_freq,
                  const char *sub) {
  Capture c;
  capture_init(&c, "orion-tokenize");
  StrBuf out = {0};
  sb_printf(&out, "%s/%s", dir, sub);
  OrionBpeTrainOptions opt = {.vocab_size = vocab, .min_frequency = min_freq};
  cr_assert(orion_bpe_train(texts, lens, n, &opt, out.data, &c.d), "%s", captured(&c));
  cr_assert_str_eq(captured(&c), "");
  free(out.data);
  capture_free(&c);
}

static void assert_same_file(const char *got_path, const char *want_path) {
  size_t got_len, want_len;
  char *got = slurp(got_path, &got_len), *want = slurp(want_path, &want_len);
  size_t i = 0;
  while (i < got_len && i < want_len && got[i] == want[i]) i++;
  cr_assert(got_len == want_len && i == got_len, "%s differs from %s at byte %zu (%zu vs %zu bytes)", got_path,
            want_path, i, got_len, want_len);
  free(got);
  free(want);
}

/* The reference's corpus and arguments (testsuite/meson.build runs the
 * reference with the same: --vocab-size 500, min frequency 2). */
static const char *const corpus[] = {"sp_code.txt", "sp_edges.txt", "sp_invalid.txt", "sp_mixed.txt", "sp_prose.txt"};
#define NCORPUS (sizeof corpus / sizeof *corpus)

static void load_corpus(char **texts, size_t *lens) {
  const char *root = getenv("ORION_SOURCE_ROOT");
  cr_assert_not_null(root);
  for (size_t i = 0; i < NCORPUS; i++) {
    StrBuf p = {0};
    sb_printf(&p, "%s/testsuite/text/corpus/%s", root, corpus[i]);
    texts[i] = slurp(p.data, &lens[i]);
    free(p.data);
  }
}

static void assert_same_as_fixture(const char *sub, const char *fixture) {
  for (int f = 0; f < 2; f++) {
    const char *name = f ? "merges.txt" : "vocab.json";
    StrBuf want = {0};
    sb_printf(&want, "%s/testsuite/text/fixtures/%s/%s", getenv("ORION_SOURCE_ROOT"), fixture, name);
    char *got = in_dir(sub, name);
    assert_same_file(got, want.data);
    free(got);
    free(want.data);
  }
}

Test(bpe_train, files_match_the_reference_trainer) {
  char *texts[NCORPUS];
  size_t lens[NCORPUS];
  load_corpus(texts, lens);
  train((const char *const *)texts, lens, NCORPUS, 500, 2, "a");
  assert_same_as_fixture("a", "sp_bpe_train");
  /* Again into another directory: the same bytes. */
  train((const char *const *)texts, lens, NCORPUS, 500, 2, "b");
  assert_same_as_fixture("b", "sp_bpe_train");
  for (size_t i = 0; i < NCORPUS; i++) free(texts[i]);
}

/* Every pair seen once may merge: many ties, and every odd space, format
 * character and invalid byte of sp_edges.txt pre-tokenized as the reference
 * does (its hand matcher, not PCRE2), or the words, so the files, differ. */
Test(bpe_train, edge_characters_to_the_last_merge_match_the_reference_trainer) {
  char *texts[NCORPUS];
  size_t lens[NCORPUS];
  load_corpus(texts, lens);
  train((const char *const *)&texts[1], &lens[1], 1, 100000, 1, "e");
  assert_same_as_fixture("e", "sp_bpe_train_edges");
  for (size_t i = 0; i < NCORPUS; i++) free(texts[i]);
}

Test(bpe_train, no_merges_gives_the_byte_alphabet_and_endoftext) {
  const char *text = "ab ab ab";
  size_t len = strlen(text);
  train(&text, &len, 1, 257, 2, "t");
  size_t n;
  char *path = in_dir("t", "merges.txt");
  char *merges = slurp(path, &n);
  cr_assert_str_eq(merges, "#version: 0.2\n");
  free(merges);
  free(path);
  path = in_dir("t", "vocab.json");
  char *vocab = slurp(path, &n);
  /* GPT-2's order: '!' first, '"' and '\' escaped, the space as 'Ġ' (U+0120, id 220). */
  const char *head = "{\"!\": 0, \"\\\"\": 1, \"#\": 2, ";
  cr_assert(strncmp(vocab, head, strlen(head)) == 0, "%.40s", vocab);
  cr_assert_not_null(strstr(vocab, ", \"\\\\\": 59, "));
  cr_assert_not_null(strstr(vocab, ", \"\xC4\xA0\": 220, "));
  cr_assert_not_null(strstr(vocab, ", \"\xC4\x80\": 188, ")); /* byte 0 */
  const char *tail = ", \"<|endoftext|>\": 256}\n";
  cr_assert(n > strlen(tail) && strcmp(vocab + n - strlen(tail), tail) == 0, "%s", vocab + n - 40);
  free(vocab);
  free(path);
}

Test(bpe_train, merges_the_most_frequent_pair_and_breaks_ties_by_bytes) {
  /* Words: "ab" x3, " ab" x... : GPT-2 splits "ab ab ab" into "ab", " ab", " ab".
   * Pairs: (a,b) 3, (Ġ,a) 2. Then (Ġ,ab) 2. Then nothing is left. */
  const char *text = "ab ab ab";
  size_t len = strlen(text);
  train(&text, &len, 1, 1000, 2, "m");
  size_t n;
  char *path = in_dir("m", "merges.txt");
  char *merges = slurp(path, &n);
  cr_assert_str_eq(merges, "#version: 0.2\na b\n\xC4\xA0 ab\n");
  free(merges);
  free(path);
  path = in_dir("m", "vocab.json");
  char *vocab = slurp(path, &n);
  cr_assert_not_null(strstr(vocab, ", \"ab\": 256, \"\xC4\xA0" "ab\": 257, \"<|endoftext|>\": 258}\n"), "%s",
                     vocab + n - 60);
  free(vocab);
  free(path);

  /* A tie: "xy" and "yx" twice each (the commas are words of their own);
   * (x,y) sorts first. With min
   * frequency 3, nothing is merged. */
  const char *tie = "xy,yx,xy,yx";
  len = strlen(tie);
  train(&tie, &len, 1, 258, 1, "tie");
  path = in_dir("tie", "merges.txt");
  merges = slurp(path, &n);
  cr_assert_str_eq(merges, "#version: 0.2\nx y\n");
  free(merges);
  free(path);
  train(&tie, &len, 1, 1000, 3, "none");
  path = in_dir("none", "merges.txt");
  merges = slurp(path, &n);
  cr_assert_str_eq(merges, "#version: 0.2\n");
  free(merges);
  free(path);
}

Test(bpe_train, words_never_cross_texts) {
  /* "q" ends one text and "z" starts the next: no (q,z) pair. */
  const char *texts[] = {"q", "z", "q", "z"};
  size_t lens[] = {1, 1, 1, 1};
  train(texts, lens, 4, 1000, 1, "x");
  size_t n;
  char *path = in_dir("x", "merges.txt");
  char *merges = slurp(path, &n);
  cr_assert_str_eq(merges, "#version: 0.2\n");
  free(merges);
  free(path);
}

Test(bpe_train, invalid_bytes_are_words_of_their_own) {
  /* "\xff\xfe" twice: one word of two bytes, merged; never with 'a'. */
  const char *text = "a\xff\xfe" "a\xff\xfe";
  size_t len = 6;
  train(&text, &len, 1, 1000, 2, "inv");
  size_t n;
  char *path = in_dir("inv", "merges.txt");
  char *merges = slurp(path, &n);
  /* 0xFF is printable in GPT-2's map (ÿ), 0xFE too (þ). */
  cr_assert_str_eq(merges, "#version: 0.2\n\xC3\xBF \xC3\xBE\n");
  free(merges);
  free(path);
}

Test(bpe_train, errors_are_reported_exactly) {
  Capture c;
  capture_init(&c, "orion-tokenize");
  const char *text = "x";
  size_t len = 1;
  OrionBpeTrainOptions opt = {.vocab_size = 256, .min_frequency = 2};
  cr_assert_not(orion_bpe_train(&text, &len, 1, &opt, dir, &c.d));
  cr_assert_str_eq(captured(&c),
                   "orion-tokenize: error: vocabulary size 256 is too small: at least 257 (256 bytes and "
                   "<|endoftext|>)\n");
  c.text.len = 0;
  opt.vocab_size = 300;
  StrBuf missing = {0};
  sb_printf(&missing, "%s/no/such", dir);
  cr_assert_not(orion_bpe_train(&text, &len, 1, &opt, missing.data, &c.d));
  StrBuf want = {0};
  sb_printf(&want, "orion-tokenize: error: cannot create directory '%s': No such file or directory\n", missing.data);
  cr_assert_str_eq(captured(&c), want.data);
  free(want.data);
  free(missing.data);
  capture_free(&c);
}

/* ---- the trainer's words are the encoder's ---- */

typedef struct Words {
  const char **at;
  size_t *len;
  size_t n, cap;
} Words;

static bool collect_word(void *ctx, const char *word, size_t len) {
  Words *w = ctx;
  if (w->n == w->cap) {
    w->cap = w->cap ? w->cap * 2 : 256;
    w->at = realloc(w->at, w->cap * sizeof *w->at);
    w->len = realloc(w->len, w->cap * sizeof *w->len);
  }
  w->at[w->n] = word;
  w->len[w->n++] = len;
  return true;
}

/* The encoder's pre-tokenized words of text (pointers into it). */
static Words encoder_words(const char *text, size_t len) {
  Capture c;
  capture_init(&c, "orion-tokenize");
  pcre2_code *re = pretok_compile(&c.d);
  cr_assert_not_null(re, "%s", captured(&c));
  PretokMatcher m;
  pretok_matcher_init(&m, re);
  Words w = {0};
  cr_assert(pretok_split(&m, text, len, collect_word, &w, &c.d), "%s", captured(&c));
  pretok_matcher_free(&m);
  pcre2_code_free(re);
  capture_free(&c);
  return w;
}

/* The corpus files with the awkward characters: every kind of space (U+0085,
 * U+180E and U+FEFF among them, where PCRE2's \s and ECMAScript's differ),
 * format characters, emoji sequences, contractions, invalid bytes. */
static const char *const awkward[] = {"sp_edges.txt", "sp_invalid.txt", "invalid_utf8.txt", "whitespace.txt",
                                      "emoji.txt",    "contractions.txt", "letters.txt",    "digits.txt",
                                      "code.txt",     "sp_mixed.txt"};

/* Trained with min frequency 1 and no vocabulary limit, every word of the
 * trainer is merged into one token. So the encoder on the same text gives
 * one id per word of its own pre-tokenizer, that word's bytes, only if no
 * trainer word is a part of an encoder word; and training on the encoder's
 * words as separate texts (words never cross texts) gives the same files
 * only if no trainer word spans two encoder words. */
Test(bpe_train, the_trainer_splits_words_as_the_encoder_does) {
  const char *root = getenv("ORION_SOURCE_ROOT");
  cr_assert_not_null(root);
  for (size_t f = 0; f < sizeof awkward / sizeof *awkward; f++) {
    StrBuf p = {0};
    sb_printf(&p, "%s/testsuite/text/corpus/%s", root, awkward[f]);
    size_t len;
    char *text = slurp(p.data, &len);
    free(p.data);
    Words w = encoder_words(text, len);
    cr_assert_gt(w.n, 0);

    const char *whole = text;
    train(&whole, &len, 1, 1u << 20, 1, "whole");
    Capture c;
    capture_init(&c, "orion-tokenize");
    char *tok_dir = in_dir("whole", "");
    OrionTokenizer *t = orion_tokenizer_open(tok_dir, &c.d);
    cr_assert_not_null(t, "%s", captured(&c));
    int32_t *ids;
    size_t nids;
    cr_assert(orion_tokenizer_encode(t, text, len, &ids, &nids, &c.d), "%s", captured(&c));
    cr_assert_eq(nids, w.n, "%s: %zu ids for %zu words", awkward[f], nids, w.n);
    for (size_t i = 0; i < nids; i++) {
      size_t plen;
      const char *piece = orion_tokenizer_piece(t, ids[i], &plen);
      cr_assert(piece && plen == w.len[i] && memcmp(piece, w.at[i], plen) == 0,
                "%s: word %zu (byte %zu, %zu bytes) is not one token", awkward[f], i, (size_t)(w.at[i] - text),
                w.len[i]);
    }
    free(ids);
    orion_tokenizer_free(t);
    free(tok_dir);
    capture_free(&c);

    train(w.at, w.len, w.n, 1u << 20, 1, "words");
    for (int k = 0; k < 2; k++) {
      const char *name = k ? "merges.txt" : "vocab.json";
      char *got = in_dir("words", name), *want = in_dir("whole", name);
      assert_same_file(got, want);
      free(got);
      free(want);
    }
    free(w.at);
    free(w.len);
    free(text);
  }
}
