/*
 * Loading a GPT-2 byte-level BPE: vocab.json (or encoder.json), a JSON
 * object from token to id, and merges.txt (or vocab.bpe), one merge "A B"
 * a line by rank, after an optional "#version" line. Tokens are written in
 * GPT-2's printable stand-ins for bytes; they are turned back into bytes
 * here, so that the encoder works on bytes only.
 */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "bpe_internal.h"

/* ---- GPT-2's bytes_to_unicode, undone ---------------------------------- */

/* The printable bytes stand for themselves; the others (controls, space,
 * 0x7f-0xa0, 0xad) become U+0100.. in byte order. Fills the byte of each
 * code point below 0x144 (-1 for one that stands for none). */
static void stand_in_bytes(int16_t byte_of[0x144]) {
  for (int cp = 0; cp < 0x144; cp++) byte_of[cp] = -1;
  int next = 0x100;
  for (int b = 0; b < 256; b++) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    byte_of[printable ? b : next++] = (int16_t)b;
  }
}

/* One UTF-8 character at s (n > 0 bytes left): its code point and length,
 * or -1 and length 1 for a byte that starts no valid character. */
static int32_t utf8_char(const unsigned char *s, size_t n, size_t *len) {
  *len = 1;
  if (s[0] < 0x80) return s[0];
  size_t need = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 ? 2 : 0;
  if (need == 0 || s[0] > 0xf4 || n < need) return -1;
  int32_t cp = s[0] & (0x3f >> (need - 1));
  for (size_t i = 1; i < need; i++) {
    if ((s[i] & 0xc0) != 0x80) return -1;
    cp = (cp << 6) | (s[i] & 0x3f);
  }
  if ((need == 3 && cp < 0x800) || (need == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
    return -1;
  *len = need;
  return cp;
}

/* A token as written in the files -> its bytes. A character that is no
 * stand-in (a literal space in an added token, say) stands for its own
 * UTF-8 bytes. */
static void token_bytes(const int16_t byte_of[0x144], const char *s, size_t n, StrBuf *out) {
  out->len = 0;
  for (size_t i = 0; i < n;) {
    size_t clen;
    int32_t cp = utf8_char((const unsigned char *)s + i, n - i, &clen);
    if (cp >= 0 && cp < 0x144 && byte_of[cp] >= 0) sb_putc(out, (char)byte_of[cp]);
    else sb_putn(out, s + i, clen);
    i += clen;
  }
}

/* ---- hash maps ------------------------------------------------------------ */

static uint32_t hash_bytes(const char *s, size_t n) {
  uint64_t h = fnv1a64(s, n, FNV1A64_INIT);
  return (uint32_t)(h ^ (h >> 32));
}

static uint32_t hash_pair(uint64_t key) {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdull;
  key ^= key >> 33;
  return (uint32_t)key;
}

static uint32_t table_size(uint32_t count) {
  uint32_t cap = 16;
  while (cap < count * 2u) cap *= 2;
  return cap;
}

int32_t bpe_piece_id(const Bpe *b, const char *bytes, size_t len) {
  for (uint32_t i = hash_bytes(bytes, len) & b->piece_mask;; i = (i + 1) & b->piece_mask) {
    uint32_t slot = b->piece_slots[i];
    if (slot == 0) return -1;
    uint32_t id = slot - 1;
    if (b->piece_len[id] == len && memcmp(b->bytes + b->piece_off[id], bytes, len) == 0) return (int32_t)id;
  }
}

uint32_t bpe_merge_rank(const Bpe *b, int32_t left, int32_t right, int32_t *merged) {
  uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
  for (uint32_t i = hash_pair(key) & b->merge_mask;; i = (i + 1) & b->merge_mask) {
    if (b->merge_keys[i] == UINT64_MAX) return UINT32_MAX;
    if (b->merge_keys[i] == key) {
      *merged = b->merge_id[i];
      return b->merge_rank[i];
    }
  }
}

/* ---- positions for messages ------------------------------------------------ */

static void line_col(const char *text, size_t off, uint32_t *line, uint32_t *col) {
  *line = 1;
  size_t start = 0;
  for (size_t i = 0; i < off; i++)
    if (text[i] == '\n') {
      (*line)++;
      start = i + 1;
    }
  *col = (uint32_t)(off - start + 1);
}

/* ---- vocab.json ------------------------------------------------------------- */

static bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static bool load_vocab(Bpe *b, const char *name, const char *json, size_t len, Diag *d) {
  if (len > BPE_MAX_FILE_BYTES) {
    diag_error(d, (SrcSpan){0}, "%s: the file is too large (limit is %u bytes)", name, BPE_MAX_FILE_BYTES);
    return false;
  }
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, false);
  if (root && end) { /* cJSON stops after the first value: anything but space after it is an error */
    while ((size_t)(end - json) < len && is_json_space(*end)) end++;
    if ((size_t)(end - json) < len) {
      cJSON_Delete(root);
      root = NULL;
    }
  }
  if (!root) {
    uint32_t line, col;
    size_t off = end && end >= json && (size_t)(end - json) <= len ? (size_t)(end - json) : 0;
    line_col(json, off, &line, &col);
    diag_report_line(d, DIAG_ERROR, name, line, col, "malformed JSON");
    return false;
  }
  bool ok = true;
  if (!cJSON_IsObject(root)) {
    diag_error(d, (SrcSpan){0}, "%s: the top level must be an object from token to id", name);
    ok = false;
  }
  uint32_t count = 0;
  size_t total = 0;
  int32_t max_id = -1;
  for (const cJSON *e = ok ? root->child : NULL; e; e = e->next) {
    double v = e->valuedouble;
    /* the range first: converting a double out of range (1e300, NaN) to an integer is undefined */
    if (!cJSON_IsNumber(e) || !(v >= 0 && v < (double)BPE_MAX_IDS) || v != (double)(uint32_t)v) {
      diag_error(d, (SrcSpan){0}, "%s: the id of token \"%s\" is not an integer in 0..%u", name, e->string,
                 BPE_MAX_IDS - 1);
      ok = false;
      break;
    }
    if ((int32_t)v > max_id) max_id = (int32_t)v;
    count++;
    total += strlen(e->string);
  }
  if (ok && count == 0) {
    diag_error(d, (SrcSpan){0}, "%s: the vocabulary is empty", name);
    ok = false;
  }
  if (ok && total >= UINT32_MAX) {
    diag_error(d, (SrcSpan){0}, "%s: the tokens are too long (limit is %u bytes)", name, UINT32_MAX - 1);
    ok = false;
  }
  if (!ok) {
    cJSON_Delete(root);
    return false;
  }
  b->nids = (uint32_t)max_id + 1;
  b->bytes = xmalloc(total + 1);
  b->piece_off = xcalloc(b->nids, sizeof(uint32_t));
  b->piece_len = xmalloc(b->nids * sizeof(uint32_t));
  for (uint32_t i = 0; i < b->nids; i++) b->piece_len[i] = UINT32_MAX;
  uint32_t cap = table_size(count);
  b->piece_slots = xcalloc(cap, sizeof(uint32_t));
  b->piece_mask = cap - 1;
  int16_t byte_of[0x144];
  stand_in_bytes(byte_of);
  StrBuf piece;
  sb_init(&piece);
  size_t used = 0;
  for (const cJSON *e = root->child; e && ok; e = e->next) {
    uint32_t id = (uint32_t)e->valuedouble;
    if (b->piece_len[id] != UINT32_MAX) {
      diag_error(d, (SrcSpan){0}, "%s: id %u is given to two tokens (\"%s\" and another before it)", name, id,
                 e->string);
      ok = false;
      break;
    }
    token_bytes(byte_of, e->string, strlen(e->string), &piece);
    if (piece.len) memcpy(b->bytes + used, piece.data, piece.len); /* never longer than the token as written */
    b->piece_off[id] = (uint32_t)used;
    b->piece_len[id] = (uint32_t)piece.len;
    used += piece.len;
    /* Two tokens with the same bytes (possible only through characters that
     * are no stand-ins): the first is the one encode gives. */
    if (bpe_piece_id(b, piece.data ? piece.data : "", piece.len) >= 0) continue;
    uint32_t i = hash_bytes(piece.data ? piece.data : "", piece.len) & b->piece_mask;
    while (b->piece_slots[i]) i = (i + 1) & b->piece_mask;
    b->piece_slots[i] = id + 1;
  }
  sb_free(&piece);
  cJSON_Delete(root);
  if (!ok) return false;
  for (int c = 0; c < 256; c++) {
    char byte = (char)c;
    b->byte_id[c] = bpe_piece_id(b, &byte, 1);
  }
  b->endoftext = bpe_piece_id(b, BPE_ENDOFTEXT, strlen(BPE_ENDOFTEXT));
  return true;
}

/* ---- merges.txt -------------------------------------------------------------- */

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

/* The id of the token text[start, end) of a merges file line, -1 after reporting. */
static int32_t merge_token(const Bpe *b, const int16_t byte_of[0x144], const char *name, const char *text,
                           size_t start, size_t end, uint32_t line, size_t line_start, StrBuf *piece, Diag *d) {
  token_bytes(byte_of, text + start, end - start, piece);
  int32_t id = bpe_piece_id(b, piece->data ? piece->data : "", piece->len);
  if (id < 0)
    diag_report_line(d, DIAG_ERROR, name, line, (uint32_t)(start - line_start + 1), "'%.*s' is not in the vocabulary",
                     (int)(end - start), text + start);
  return id;
}

static bool load_merges(Bpe *b, const char *name, const char *text, size_t len, Diag *d) {
  if (len > BPE_MAX_FILE_BYTES) {
    diag_error(d, (SrcSpan){0}, "%s: the file is too large (limit is %u bytes)", name, BPE_MAX_FILE_BYTES);
    return false;
  }
  uint32_t lines = 1;
  for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
  uint32_t cap = table_size(lines);
  b->merge_keys = xmalloc(cap * sizeof(uint64_t));
  b->merge_rank = xmalloc(cap * sizeof(uint32_t));
  b->merge_id = xmalloc(cap * sizeof(int32_t));
  b->merge_mask = cap - 1;
  for (uint32_t i = 0; i < cap; i++) b->merge_keys[i] = UINT64_MAX;
  int16_t byte_of[0x144];
  stand_in_bytes(byte_of);
  StrBuf piece;
  sb_init(&piece);
  bool ok = true;
  uint32_t line = 0;
  for (size_t pos = 0; pos < len && ok;) {
    size_t line_start = pos, line_end = pos;
    while (line_end < len && text[line_end] != '\n') line_end++;
    pos = line_end + 1;
    line++;
    if (line == 1 && line_end - line_start >= 8 && memcmp(text + line_start, "#version", 8) == 0) continue;
    /* The line's words: exactly two */
    size_t word[3][2], nwords = 0;
    for (size_t i = line_start; i < line_end;) {
      while (i < line_end && is_space(text[i])) i++;
      if (i == line_end) break;
      size_t s = i;
      while (i < line_end && !is_space(text[i])) i++;
      if (nwords < 3) {
        word[nwords][0] = s;
        word[nwords][1] = i;
      }
      nwords++;
    }
    if (nwords == 0) continue;
    if (nwords != 2) {
      diag_report_line(d, DIAG_ERROR, name, line, nwords > 2 ? (uint32_t)(word[2][0] - line_start + 1) : 1,
                       "a merge is two tokens separated by a space");
      ok = false;
      break;
    }
    int32_t left = merge_token(b, byte_of, name, text, word[0][0], word[0][1], line, line_start, &piece, d);
    int32_t right = left < 0 ? -1 : merge_token(b, byte_of, name, text, word[1][0], word[1][1], line, line_start, &piece, d);
    if (right < 0) {
      ok = false;
      break;
    }
    StrBuf both;
    sb_init(&both);
    sb_putn(&both, b->bytes + b->piece_off[left], b->piece_len[left]);
    sb_putn(&both, b->bytes + b->piece_off[right], b->piece_len[right]);
    int32_t merged = bpe_piece_id(b, both.data, both.len);
    sb_free(&both);
    if (merged < 0) {
      diag_report_line(d, DIAG_ERROR, name, line, 1, "the merge of '%.*s' and '%.*s' is not in the vocabulary",
                       (int)(word[0][1] - word[0][0]), text + word[0][0], (int)(word[1][1] - word[1][0]),
                       text + word[1][0]);
      ok = false;
      break;
    }
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    uint32_t i = hash_pair(key) & b->merge_mask;
    while (b->merge_keys[i] != UINT64_MAX && b->merge_keys[i] != key) i = (i + 1) & b->merge_mask;
    if (b->merge_keys[i] == key) continue; /* a merge given twice keeps its first rank */
    b->merge_keys[i] = key;
    b->merge_rank[i] = b->nmerges++;
    b->merge_id[i] = merged;
  }
  sb_free(&piece);
  return ok;
}

/* ---- opening ------------------------------------------------------------------- */

void bpe_free(void *impl) {
  Bpe *b = impl;
  if (!b) return;
  free(b->bytes);
  free(b->piece_off);
  free(b->piece_len);
  free(b->piece_slots);
  free(b->merge_keys);
  free(b->merge_rank);
  free(b->merge_id);
  pcre2_code_free(b->pretokenizer);
  free(b);
}

bool tok_bpe_open_memory(OrionTokenizer *t, const char *vocab_name, const char *vocab, size_t vocab_len,
                         const char *merges_name, const char *merges, size_t merges_len, Diag *d) {
  Bpe *b = xcalloc(1, sizeof(Bpe));
  if (!load_vocab(b, vocab_name, vocab, vocab_len, d) || !load_merges(b, merges_name, merges, merges_len, d) ||
      !(b->pretokenizer = pretok_compile(d))) {
    bpe_free(b);
    return false;
  }
  t->kind = ORION_TOKENIZER_BPE;
  t->ops = &bpe_ops;
  t->impl = b;
  t->vocab_size = b->nids;
  t->bos = t->eos = b->endoftext;
  t->adds_bos = false;
  t->longest_piece = 0;
  for (uint32_t id = 0; id < b->nids; id++)
    if (b->piece_len[id] != UINT32_MAX && b->piece_len[id] > t->longest_piece) t->longest_piece = b->piece_len[id];
  return true;
}

bool tok_bpe_open(OrionTokenizer *t, const char *vocab_path, const char *merges_path, Diag *d) {
  char *vocab = NULL, *merges = NULL;
  size_t vocab_len = 0, merges_len = 0;
  const char *err = NULL;
  bool ok = false;
  if (!read_file(vocab_path, BPE_MAX_FILE_BYTES, &vocab, &vocab_len, &err))
    diag_error(d, (SrcSpan){0}, "cannot read %s: %s", vocab_path, err);
  else if (!read_file(merges_path, BPE_MAX_FILE_BYTES, &merges, &merges_len, &err))
    diag_error(d, (SrcSpan){0}, "cannot read %s: %s", merges_path, err);
  else
    ok = tok_bpe_open_memory(t, vocab_path, vocab, vocab_len, merges_path, merges, merges_len, d);
  free(vocab);
  free(merges);
  return ok;
}
