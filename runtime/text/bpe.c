/*
 * GPT-2 byte-level BPE encoding: GPT-2's regex splits the text into words
 * (pretokenize.c, PCRE2), and each word's bytes are merged by rank. The
 * merge loop keeps the word's pairs in a heap (O(n log n) per word, where
 * the reference re-scans every pair after every merge), and a word seen
 * before in the same text is looked up in a cache. See docs/tokenizers.md.
 */
#include <stdlib.h>
#include <string.h>

#include "bpe_internal.h"

/* ---- the merge loop of one word ---------------------------------------------- */

typedef struct PairEntry {
  uint32_t rank;
  uint32_t pos; /* the left symbol */
  int32_t left, right, merged;
} PairEntry;

typedef struct Word {
  int32_t *id;
  uint32_t *next, *prev; /* UINT32_MAX: none */
  PairEntry *heap;
  uint32_t nheap, heap_cap;
} Word;

static bool entry_before(const PairEntry *a, const PairEntry *b) {
  return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(Word *w, PairEntry e) {
  if (w->nheap == w->heap_cap) xgrow((void **)&w->heap, sizeof(PairEntry), &w->heap_cap, w->nheap + 1);
  uint32_t i = w->nheap++;
  while (i > 0 && entry_before(&e, &w->heap[(i - 1) / 2])) {
    w->heap[i] = w->heap[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  w->heap[i] = e;
}

static PairEntry heap_pop(Word *w) {
  PairEntry top = w->heap[0], last = w->heap[--w->nheap];
  uint32_t i = 0;
  for (;;) {
    uint32_t c = 2 * i + 1;
    if (c >= w->nheap) break;
    if (c + 1 < w->nheap && entry_before(&w->heap[c + 1], &w->heap[c])) c++;
    if (!entry_before(&w->heap[c], &last)) break;
    w->heap[i] = w->heap[c];
    i = c;
  }
  if (w->nheap) w->heap[i] = last;
  return top;
}

static void push_pair(const Bpe *b, Word *w, uint32_t pos) {
  uint32_t r = w->next[pos];
  if (r == UINT32_MAX) return;
  int32_t merged;
  uint32_t rank = bpe_merge_rank(b, w->id[pos], w->id[r], &merged);
  if (rank != UINT32_MAX) heap_push(w, (PairEntry){rank, pos, w->id[pos], w->id[r], merged});
}

static bool entry_current(const Word *w, const PairEntry *e) {
  uint32_t r = w->next[e->pos];
  return w->id[e->pos] == e->left && r != UINT32_MAX && w->id[r] == e->right;
}

/* Merges the word's symbols (n byte ids in w->id) as the reference does:
 * the lowest-ranked pair, all its occurrences left to right, then again.
 * The occurrences of one rank are taken out of the heap together, so that
 * a pair made by one of them never overtakes the rest. Appends the ids. */
static void merge_word(const Bpe *b, Word *w, uint32_t n, TokIds *out) {
  for (uint32_t i = 0; i < n; i++) {
    w->prev[i] = i ? i - 1 : UINT32_MAX;
    w->next[i] = i + 1 < n ? i + 1 : UINT32_MAX;
  }
  w->nheap = 0;
  for (uint32_t i = 0; i + 1 < n; i++) push_pair(b, w, i);
  PairEntry *batch = NULL;
  uint32_t nbatch = 0, batch_cap = 0;
  while (w->nheap) {
    nbatch = 0;
    uint32_t rank = w->heap[0].rank;
    while (w->nheap && w->heap[0].rank == rank) {
      if (nbatch == batch_cap) xgrow((void **)&batch, sizeof(PairEntry), &batch_cap, nbatch + 1);
      batch[nbatch++] = heap_pop(w);
    }
    for (uint32_t k = 0; k < nbatch; k++) { /* in position order: the heap's order within a rank */
      const PairEntry *e = &batch[k];
      if (!entry_current(w, e)) continue;
      uint32_t r = w->next[e->pos];
      w->id[e->pos] = e->merged;
      w->next[e->pos] = w->next[r];
      if (w->next[r] != UINT32_MAX) w->prev[w->next[r]] = e->pos;
      w->id[r] = -1; /* gone: no entry naming it as left can match again */
      if (w->prev[e->pos] != UINT32_MAX) push_pair(b, w, w->prev[e->pos]);
      push_pair(b, w, e->pos);
    }
  }
  free(batch);
  for (uint32_t i = 0; i != UINT32_MAX && n; i = w->next[i]) tok_ids_push(out, w->id[i]);
}

/* ---- the word cache of one encode call ---------------------------------------- */

typedef struct CacheSlot {
  const char *word; /* into the text being encoded; NULL = empty */
  uint32_t len;
  uint32_t start, count; /* into WordCache.ids */
} CacheSlot;

typedef struct WordCache {
  CacheSlot *slots;
  uint32_t mask, used;
  TokIds ids;
} WordCache;

static uint32_t word_hash(const char *s, size_t n) {
  uint64_t h = fnv1a64(s, n, FNV1A64_INIT);
  return (uint32_t)(h ^ (h >> 32));
}

static CacheSlot *cache_find(WordCache *c, const char *word, uint32_t len) {
  for (uint32_t i = word_hash(word, len) & c->mask;; i = (i + 1) & c->mask) {
    CacheSlot *s = &c->slots[i];
    if (!s->word || (s->len == len && memcmp(s->word, word, len) == 0)) return s;
  }
}

static void cache_grow(WordCache *c) {
  CacheSlot *old = c->slots;
  uint32_t old_cap = c->mask + 1;
  c->mask = old_cap * 2 - 1;
  c->slots = xcalloc(old_cap * 2, sizeof(CacheSlot));
  for (uint32_t i = 0; i < old_cap; i++)
    if (old[i].word) *cache_find(c, old[i].word, old[i].len) = old[i];
  free(old);
}

/* ---- encode ---------------------------------------------------------------- */

typedef struct Encoder {
  const OrionTokenizer *t;
  const Bpe *b;
  Word w;
  uint32_t word_cap;
  WordCache cache;
  TokIds *out;
  Diag *d;
} Encoder;

/* Appends the ids of one pre-tokenized word to e->out (a PretokWordFn). */
static bool encode_word(void *ctx, const char *word, size_t len) {
  Encoder *e = ctx;
  TokIds *out = e->out;
  if (len > BPE_MAX_WORD_BYTES) {
    diag_error(e->d, (SrcSpan){0}, "a word of %zu bytes is over the tokenizer's limit of %u bytes", len,
               BPE_MAX_WORD_BYTES);
    return false;
  }
  CacheSlot *slot = cache_find(&e->cache, word, (uint32_t)len);
  if (slot->word) {
    tok_ids_append(out, e->cache.ids.data + slot->start, slot->count);
    return true;
  }
  uint32_t n = (uint32_t)len;
  if (n > e->word_cap) {
    e->word_cap = n;
    e->w.id = xrealloc(e->w.id, n * sizeof(int32_t));
    e->w.next = xrealloc(e->w.next, n * sizeof(uint32_t));
    e->w.prev = xrealloc(e->w.prev, n * sizeof(uint32_t));
  }
  for (uint32_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)word[i];
    if (e->b->byte_id[c] < 0) {
      diag_error(e->d, (SrcSpan){0}, "the byte 0x%02x has no token in the vocabulary (a byte-level BPE needs all 256)",
                 c);
      return false;
    }
    e->w.id[i] = e->b->byte_id[c];
  }
  size_t start = e->cache.ids.len;
  merge_word(e->b, &e->w, n, &e->cache.ids);
  size_t count = e->cache.ids.len - start;
  tok_ids_append(out, e->cache.ids.data + start, count);
  if (e->cache.ids.len > UINT32_MAX) return true; /* the cache is full: no more entries */
  *slot = (CacheSlot){word, (uint32_t)len, (uint32_t)start, (uint32_t)count};
  if (++e->cache.used * 2 > e->cache.mask) cache_grow(&e->cache);
  return true;
}

static bool bpe_encode(const OrionTokenizer *t, const char *text, size_t len, unsigned flags, TokIds *out, Diag *d) {
  const Bpe *b = t->impl;
  Encoder e = {.t = t, .b = b, .out = out, .d = d};
  e.cache.mask = 255;
  e.cache.slots = xcalloc(256, sizeof(CacheSlot));
  PretokMatcher m;
  pretok_matcher_init(&m, b->pretokenizer);
  bool ok = true;
  size_t pos = 0;
  size_t special_len = strlen(BPE_ENDOFTEXT);
  while (ok && pos < len) {
    size_t next = len;
    if ((flags & ORION_ENCODE_SPECIAL) && b->endoftext >= 0) {
      const char *hit = NULL;
      for (const char *p = text + pos; p + special_len <= text + len; p++) {
        p = memchr(p, '<', (size_t)(text + len - p));
        if (!p || p + special_len > text + len) break;
        if (memcmp(p, BPE_ENDOFTEXT, special_len) == 0) {
          hit = p;
          break;
        }
      }
      if (hit) next = (size_t)(hit - text);
    }
    ok = pretok_split(&m, text + pos, next - pos, encode_word, &e, d);
    if (ok && next < len) {
      tok_ids_push(out, b->endoftext);
      next += special_len;
    }
    pos = next;
  }
  pretok_matcher_free(&m);
  free(e.cache.slots);
  free(e.cache.ids.data);
  free(e.w.id);
  free(e.w.next);
  free(e.w.prev);
  free(e.w.heap);
  return ok;
}

static const char *bpe_piece(const OrionTokenizer *t, int32_t id, size_t *len) {
  const Bpe *b = t->impl;
  if (id < 0 || (uint32_t)id >= b->nids || b->piece_len[id] == UINT32_MAX) return NULL;
  *len = b->piece_len[id];
  return b->bytes + b->piece_off[id];
}

const TokOps bpe_ops = {
    .encode = bpe_encode,
    .piece = bpe_piece,
    .decode = NULL,
    .free_impl = bpe_free,
};
