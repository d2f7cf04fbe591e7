/*
 * Learning a GPT-2 byte-level BPE from text (orion_bpe_train, see
 * orion/tokenizer.h and docs/tokenizers.md).
 *
 * The texts are split into words by the encoder's own pre-tokenizer
 * (pretokenize.c: the same regex, \s and invalid UTF-8 handling, so the
 * encoder meets the words the merges were learned on), equal words are
 * counted once with their count, and merges are found
 * incrementally: each adjacent pair has a count and a list of the words it
 * occurs in; a max-heap with lazy deletion gives the most frequent pair; a
 * merge rewrites only the words on the pair's list and updates the counts of
 * the pairs it removes and creates. testsuite/text/bpe_train_ref.py is the
 * same algorithm written plainly; the files of both are byte-identical.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "text_internal.h"

#define ENDOFTEXT "<|endoftext|>"

static uint64_t hash_bytes(const void *data, size_t len) {
  const unsigned char *p = data;
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (size_t i = 0; i < len; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h ^ (h >> 29);
}

static uint64_t hash_u64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

/* ---- strings to indices (the words, and the tokens by their bytes) ---- */

typedef struct Bytes {
  unsigned char *data;
  uint32_t len;
} Bytes;

typedef struct StringIndex {
  Bytes *items;      /* index -> bytes (owned) */
  uint32_t count, cap;
  uint32_t *slots;   /* open addressing: index + 1, 0 = empty */
  size_t nslots;
} StringIndex;

static uint32_t *string_slot(const StringIndex *s, const void *data, size_t len) {
  size_t mask = s->nslots - 1;
  for (size_t i = hash_bytes(data, len) & mask;; i = (i + 1) & mask) {
    uint32_t v = s->slots[i];
    if (v == 0) return &s->slots[i];
    const Bytes *b = &s->items[v - 1];
    if (b->len == len && memcmp(b->data, data, len) == 0) return &s->slots[i];
  }
}

static void string_index_grow(StringIndex *s) {
  size_t nslots = s->nslots ? s->nslots * 2 : 1024;
  uint32_t *old = s->slots;
  size_t nold = s->nslots;
  s->slots = xcalloc(nslots, sizeof *s->slots);
  s->nslots = nslots;
  for (size_t i = 0; i < nold; i++)
    if (old[i]) *string_slot(s, s->items[old[i] - 1].data, s->items[old[i] - 1].len) = old[i];
  free(old);
}

/* The index of the bytes, added when new (*added set). */
static uint32_t string_intern(StringIndex *s, const void *data, size_t len, bool *added) {
  if ((size_t)(s->count + 1) * 2 > s->nslots) string_index_grow(s);
  uint32_t *slot = string_slot(s, data, len);
  *added = *slot == 0;
  if (*slot) return *slot - 1;
  if (s->count == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 1024;
    s->items = xrealloc(s->items, s->cap * sizeof *s->items);
  }
  Bytes *b = &s->items[s->count];
  b->data = xmalloc(len ? len : 1);
  memcpy(b->data, data, len);
  b->len = (uint32_t)len;
  *slot = ++s->count;
  return s->count - 1;
}

/* -1 when absent. */
static int64_t string_find(const StringIndex *s, const void *data, size_t len) {
  if (s->nslots == 0) return -1;
  uint32_t v = *string_slot(s, data, len);
  return v ? (int64_t)v - 1 : -1;
}

static void string_index_free(StringIndex *s) {
  for (uint32_t i = 0; i < s->count; i++) free(s->items[i].data);
  free(s->items);
  free(s->slots);
}

/* ---- pre-tokenization and word counts ---- */

typedef struct Word {
  uint32_t *symbols; /* token ids */
  uint32_t len;
  uint64_t count;
} Word;

typedef struct Trainer {
  StringIndex word_bytes; /* the distinct words */
  uint64_t *word_counts;
  uint32_t word_counts_cap;
  Word *words;
  uint32_t nwords;
  StringIndex tokens; /* id -> bytes; ids 0..255 are the bytes in GPT-2's order */
  Diag *d;
} Trainer;

/* Counts one pre-tokenized word (a PretokWordFn). */
static bool count_word(void *ctx, const char *data, size_t len) {
  Trainer *t = ctx;
  bool added;
  uint32_t i = string_intern(&t->word_bytes, data, len, &added);
  if (added) {
    if (i >= t->word_counts_cap) {
      t->word_counts_cap = t->word_counts_cap ? t->word_counts_cap * 2 : 1024;
      t->word_counts = xrealloc(t->word_counts, t->word_counts_cap * sizeof *t->word_counts);
    }
    t->word_counts[i] = 0;
  }
  t->word_counts[i]++;
  return true;
}

/* Each text on its own: words never cross texts. */
static bool count_words(Trainer *t, const char *const *texts, const size_t *lens, size_t ntexts) {
  pcre2_code *re = pretok_compile(t->d);
  if (!re) return false;
  PretokMatcher m;
  pretok_matcher_init(&m, re);
  bool ok = true;
  for (size_t k = 0; k < ntexts && ok; k++) ok = pretok_split(&m, texts[k], lens[k], count_word, t, t->d);
  pretok_matcher_free(&m);
  pcre2_code_free(re);
  return ok;
}

/* ---- GPT-2's byte <-> printable character mapping ---- */

/* The bytes in GPT-2's id order (bytes_to_unicode): the printable Latin-1
 * ones first, the rest after them, mapped to U+0100 upward. */
static void gpt2_byte_order(unsigned char order[256], uint32_t codepoint[256]) {
  bool printable[256] = {false};
  int n = 0;
  for (int b = 0; b < 256; b++) {
    printable[b] = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    if (printable[b]) {
      order[n++] = (unsigned char)b;
      codepoint[b] = (uint32_t)b;
    }
  }
  uint32_t extra = 256;
  for (int b = 0; b < 256; b++)
    if (!printable[b]) {
      order[n++] = (unsigned char)b;
      codepoint[b] = extra++;
    }
}

static void put_utf8(StrBuf *sb, uint32_t cp) {
  if (cp < 0x80) {
    sb_putc(sb, (char)cp);
  } else if (cp < 0x800) {
    sb_putc(sb, (char)(0xC0 | (cp >> 6)));
    sb_putc(sb, (char)(0x80 | (cp & 0x3F)));
  } else {
    sb_putc(sb, (char)(0xE0 | (cp >> 12)));
    sb_putc(sb, (char)(0x80 | ((cp >> 6) & 0x3F)));
    sb_putc(sb, (char)(0x80 | (cp & 0x3F)));
  }
}

/* A token's bytes as GPT-2 spells them; in_json escapes '"' and '\' as
 * json.dumps does (the mapping has no control characters to escape). */
static void put_mapped(StrBuf *sb, const Bytes *token, const uint32_t codepoint[256], bool in_json) {
  for (uint32_t i = 0; i < token->len; i++) {
    uint32_t cp = codepoint[token->data[i]];
    if (in_json && (cp == '"' || cp == '\\')) sb_putc(sb, '\\');
    put_utf8(sb, cp);
  }
}

/* ---- pairs: counts, the words they occur in, and the heap ---- */

typedef struct Pair {
  uint32_t left, right;
  int64_t count;
  uint32_t *words; /* words it occurred in (maybe no longer; maybe twice) */
  uint32_t nwords, capwords;
} Pair;

typedef struct HeapEntry {
  int64_t count; /* the pair's count when pushed: an upper bound of its count now */
  uint32_t pair;
} HeapEntry;

typedef struct Merger {
  Trainer *t;
  Pair *pairs;
  uint32_t npairs, cappairs;
  uint32_t *slots; /* open addressing over (left, right): pair index + 1 */
  size_t nslots;
  HeapEntry *heap;
  size_t nheap, capheap;
} Merger;

static uint32_t *pair_slot(const Merger *m, uint32_t left, uint32_t right) {
  size_t mask = m->nslots - 1;
  for (size_t i = hash_u64((uint64_t)left << 32 | right) & mask;; i = (i + 1) & mask) {
    uint32_t v = m->slots[i];
    if (v == 0 || (m->pairs[v - 1].left == left && m->pairs[v - 1].right == right)) return &m->slots[i];
  }
}

static uint32_t pair_get(Merger *m, uint32_t left, uint32_t right) {
  if ((size_t)(m->npairs + 1) * 2 > m->nslots) {
    size_t nold = m->nslots;
    uint32_t *old = m->slots;
    m->nslots = nold ? nold * 2 : 4096;
    m->slots = xcalloc(m->nslots, sizeof *m->slots);
    for (size_t i = 0; i < nold; i++)
      if (old[i]) *pair_slot(m, m->pairs[old[i] - 1].left, m->pairs[old[i] - 1].right) = old[i];
    free(old);
  }
  uint32_t *slot = pair_slot(m, left, right);
  if (*slot) return *slot - 1;
  if (m->npairs == m->cappairs) {
    m->cappairs = m->cappairs ? m->cappairs * 2 : 4096;
    m->pairs = xrealloc(m->pairs, m->cappairs * sizeof *m->pairs);
  }
  m->pairs[m->npairs] = (Pair){.left = left, .right = right};
  *slot = ++m->npairs;
  return m->npairs - 1;
}

/* The tie rule: of two pairs with the same count, the one whose left
 * token's bytes come first (memcmp order, a prefix before what extends it),
 * then the right token's. */
static int compare_bytes(const Bytes *a, const Bytes *b) {
  uint32_t n = a->len < b->len ? a->len : b->len;
  int c = memcmp(a->data, b->data, n);
  if (c) return c;
  return a->len < b->len ? -1 : a->len > b->len;
}

/* Whether heap entry a goes above b. */
static bool heap_before(const Merger *m, const HeapEntry *a, const HeapEntry *b) {
  if (a->count != b->count) return a->count > b->count;
  const Pair *pa = &m->pairs[a->pair], *pb = &m->pairs[b->pair];
  const Bytes *tok = m->t->tokens.items;
  int c = compare_bytes(&tok[pa->left], &tok[pb->left]);
  if (c == 0) c = compare_bytes(&tok[pa->right], &tok[pb->right]);
  return c < 0;
}

static void heap_push(Merger *m, uint32_t pair) {
  if (m->nheap == m->capheap) {
    m->capheap = m->capheap ? m->capheap * 2 : 4096;
    m->heap = xrealloc(m->heap, m->capheap * sizeof *m->heap);
  }
  size_t i = m->nheap++;
  HeapEntry e = {m->pairs[pair].count, pair};
  while (i > 0 && heap_before(m, &e, &m->heap[(i - 1) / 2])) {
    m->heap[i] = m->heap[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  m->heap[i] = e;
}

static HeapEntry heap_pop(Merger *m) {
  HeapEntry top = m->heap[0], last = m->heap[--m->nheap];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= m->nheap) break;
    if (c + 1 < m->nheap && heap_before(m, &m->heap[c + 1], &m->heap[c])) c++;
    if (!heap_before(m, &m->heap[c], &last)) break;
    m->heap[i] = m->heap[c];
    i = c;
  }
  if (m->nheap > 0) m->heap[i] = last;
  return top;
}

static void pair_add_word(Pair *p, uint32_t word) {
  if (p->nwords > 0 && p->words[p->nwords - 1] == word) return;
  if (p->nwords == p->capwords) {
    p->capwords = p->capwords ? p->capwords * 2 : 4;
    p->words = xrealloc(p->words, p->capwords * sizeof *p->words);
  }
  p->words[p->nwords++] = word;
}

/* Adds delta (the word's count, negated to remove) to every adjacent pair of
 * the word. A pair that grows learns the word and is pushed (a heap entry
 * must never be below its pair's count); duplicate entries are harmless, and
 * a run like "= = = =" pushes its pair once. */
static void count_pairs_of_word(Merger *m, uint32_t w, int64_t delta) {
  const Word *word = &m->t->words[w];
  for (uint32_t i = 0; i + 1 < word->len; i++) {
    uint32_t p = pair_get(m, word->symbols[i], word->symbols[i + 1]);
    m->pairs[p].count += delta;
    if (delta > 0) pair_add_word(&m->pairs[p], w);
  }
  if (delta > 0)
    for (uint32_t i = 0; i + 1 < word->len; i++)
      if (i == 0 || word->symbols[i] != word->symbols[i - 1] || word->symbols[i + 1] != word->symbols[i])
        heap_push(m, *pair_slot(m, word->symbols[i], word->symbols[i + 1]) - 1);
}

/* Replaces left,right by merged in the word, left to right without overlap. */
static void merge_in_word(Word *word, uint32_t left, uint32_t right, uint32_t merged) {
  uint32_t out = 0;
  for (uint32_t i = 0; i < word->len; i++) {
    if (i + 1 < word->len && word->symbols[i] == left && word->symbols[i + 1] == right) {
      word->symbols[out++] = merged;
      i++;
    } else {
      word->symbols[out++] = word->symbols[i];
    }
  }
  word->len = out;
}

static void merger_free(Merger *m) {
  for (uint32_t i = 0; i < m->npairs; i++) free(m->pairs[i].words);
  free(m->pairs);
  free(m->slots);
  free(m->heap);
}

/* ---- training ---- */

typedef struct Merge {
  uint32_t left, right;
} Merge;

/* Learns merges until the tokens (with <|endoftext|> to come) fill vocab_size. */
static Merge *learn_merges(Trainer *t, const OrionBpeTrainOptions *opt, uint32_t *nmerges) {
  Merger m = {.t = t};
  for (uint32_t w = 0; w < t->nwords; w++) count_pairs_of_word(&m, w, (int64_t)t->words[w].count);
  int64_t min_count = opt->min_frequency > 1 ? opt->min_frequency : 1;
  Merge *merges = NULL;
  uint32_t n = 0, cap = 0;
  StrBuf joined = {0};
  while (t->tokens.count < opt->vocab_size - 1 && m.nheap > 0) {
    HeapEntry top = heap_pop(&m);
    Pair *best = &m.pairs[top.pair];
    if (top.count != best->count) { /* stale: the count fell since */
      if (best->count > 0) heap_push(&m, top.pair);
      continue;
    }
    if (best->count < min_count) break;
    uint32_t left = best->left, right = best->right;
    const Bytes *lb = &t->tokens.items[left], *rb = &t->tokens.items[right];
    joined.len = 0;
    sb_putn(&joined, (const char *)lb->data, lb->len);
    sb_putn(&joined, (const char *)rb->data, rb->len);
    bool added;
    uint32_t merged = string_intern(&t->tokens, joined.data, joined.len, &added);
    if (n == cap) {
      cap = cap ? cap * 2 : 1024;
      merges = xrealloc(merges, cap * sizeof *merges);
    }
    merges[n++] = (Merge){left, right};
    /* The pair's word list may grow while we walk it: walk a copy. */
    best = &m.pairs[top.pair];
    uint32_t nwords = best->nwords, *words = best->words;
    best->words = NULL;
    best->nwords = best->capwords = 0;
    for (uint32_t k = 0; k < nwords; k++) {
      Word *word = &t->words[words[k]];
      bool present = false;
      for (uint32_t i = 0; i + 1 < word->len && !present; i++)
        present = word->symbols[i] == left && word->symbols[i + 1] == right;
      if (!present) continue;
      count_pairs_of_word(&m, words[k], -(int64_t)word->count);
      merge_in_word(word, left, right, merged);
      count_pairs_of_word(&m, words[k], (int64_t)word->count);
    }
    free(words);
    if (opt->progress && n % 2000 == 0)
      fprintf(stderr, "orion-tokenize train: %u merges, %u of %u ids\n", n, t->tokens.count + 1, opt->vocab_size);
  }
  free(joined.data);
  merger_free(&m);
  *nmerges = n;
  return merges;
}

static bool write_in(const char *dir, const char *name, const StrBuf *sb, Diag *d) {
  StrBuf path = {0};
  sb_printf(&path, "%s/%s", dir, name);
  const char *err;
  bool ok = write_file_atomic(path.data, sb->data ? sb->data : "", sb->len, &err);
  if (!ok) diag_error(d, (SrcSpan){0}, "cannot write '%s': %s", path.data, err);
  free(path.data);
  return ok;
}

static bool write_files(const Trainer *t, const Merge *merges, uint32_t nmerges, const char *dir, Diag *d) {
  unsigned char order[256];
  uint32_t codepoint[256];
  gpt2_byte_order(order, codepoint);
  StrBuf vocab = {0}, text = {0};
  sb_putc(&vocab, '{');
  for (uint32_t id = 0; id < t->tokens.count; id++) {
    sb_puts(&vocab, id ? ", \"" : "\"");
    put_mapped(&vocab, &t->tokens.items[id], codepoint, true);
    sb_printf(&vocab, "\": %u", id);
  }
  sb_printf(&vocab, ", \"" ENDOFTEXT "\": %u}\n", t->tokens.count);
  sb_puts(&text, "#version: 0.2\n");
  for (uint32_t i = 0; i < nmerges; i++) {
    put_mapped(&text, &t->tokens.items[merges[i].left], codepoint, false);
    sb_putc(&text, ' ');
    put_mapped(&text, &t->tokens.items[merges[i].right], codepoint, false);
    sb_putc(&text, '\n');
  }
  bool ok = write_in(dir, "vocab.json", &vocab, d) && write_in(dir, "merges.txt", &text, d);
  free(vocab.data);
  free(text.data);
  return ok;
}

bool orion_bpe_train(const char *const *texts, const size_t *lens, size_t ntexts, const OrionBpeTrainOptions *opt,
                     const char *dir, Diag *d) {
  if (opt->vocab_size < 257) {
    diag_error(d, (SrcSpan){0}, "vocabulary size %u is too small: at least 257 (256 bytes and " ENDOFTEXT ")",
               opt->vocab_size);
    return false;
  }
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    diag_error(d, (SrcSpan){0}, "cannot create directory '%s': %s", dir, strerror(errno));
    return false;
  }
  Trainer t = {.d = d};
  unsigned char order[256];
  uint32_t codepoint[256];
  gpt2_byte_order(order, codepoint);
  bool added;
  for (int i = 0; i < 256; i++) string_intern(&t.tokens, &order[i], 1, &added);
  bool ok = count_words(&t, texts, lens, ntexts);
  if (ok) {
    int64_t byte_id[256];
    for (int b = 0; b < 256; b++) {
      unsigned char c = (unsigned char)b;
      byte_id[b] = string_find(&t.tokens, &c, 1);
    }
    t.nwords = t.word_bytes.count;
    t.words = xcalloc(t.nwords ? t.nwords : 1, sizeof *t.words);
    for (uint32_t w = 0; w < t.nwords; w++) {
      const Bytes *b = &t.word_bytes.items[w];
      t.words[w].symbols = xmalloc(b->len * sizeof *t.words[w].symbols);
      for (uint32_t i = 0; i < b->len; i++) t.words[w].symbols[i] = (uint32_t)byte_id[b->data[i]];
      t.words[w].len = b->len;
      t.words[w].count = t.word_counts[w];
    }
    uint32_t nmerges;
    Merge *merges = learn_merges(&t, opt, &nmerges);
    ok = write_files(&t, merges, nmerges, dir, d);
    free(merges);
  }
  for (uint32_t w = 0; w < t.nwords; w++) free(t.words[w].symbols);
  free(t.words);
  free(t.word_counts);
  string_index_free(&t.word_bytes);
  string_index_free(&t.tokens);
  return ok;
}
