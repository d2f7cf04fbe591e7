/*
 * The tokenizer handle: which kind a path holds, the accessors every kind
 * shares, decoding, and the text stream that holds back unfinished UTF-8.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "text_internal.h"

void tok_ids_push(TokIds *v, int32_t id) { tok_ids_append(v, &id, 1); }

void tok_ids_append(TokIds *v, const int32_t *ids, size_t n) {
  if (v->len + n > v->cap) {
    size_t cap = v->cap ? v->cap : 64;
    while (cap < v->len + n) cap *= 2;
    v->data = xrealloc(v->data, cap * sizeof(int32_t));
    v->cap = cap;
  }
  if (n) memcpy(v->data + v->len, ids, n * sizeof(int32_t));
  v->len += n;
}

/* ---- opening: what the path holds ------------------------------------------ */

static bool ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), m = strlen(tail);
  return n >= m && strcmp(s + n - m, tail) == 0;
}

static bool is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static char *join(const char *dir, size_t dir_len, const char *name) {
  StrBuf sb;
  sb_init(&sb);
  sb_putn(&sb, dir, dir_len);
  if (dir_len && dir[dir_len - 1] != '/') sb_putc(&sb, '/');
  sb_puts(&sb, name);
  return sb.data;
}

static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

/* The BPE file pairs, by the names Hugging Face and OpenAI give them. */
static const char *const BPE_FILES[][2] = {{"vocab.json", "merges.txt"}, {"encoder.json", "vocab.bpe"}};

static bool open_sentencepiece(OrionTokenizer *t, const char *model, Diag *d) {
#ifdef ORION_HAVE_SENTENCEPIECE
  return tok_sentencepiece_open(t, model, d);
#else
  (void)t;
  diag_error(d, (SrcSpan){0}, "%s: SentencePiece tokenizers need libsentencepiece (not built in)", model);
  return false;
#endif
}

static bool open_in_dir(OrionTokenizer *t, const char *path, const char *dir, size_t dir_len, Diag *d) {
  for (size_t k = 0; k < sizeof BPE_FILES / sizeof BPE_FILES[0]; k++) {
    char *vocab = join(dir, dir_len, BPE_FILES[k][0]), *merges = join(dir, dir_len, BPE_FILES[k][1]);
    bool have_vocab = is_file(vocab), have_merges = is_file(merges);
    bool ok = false;
    if (have_vocab && have_merges) ok = tok_bpe_open(t, vocab, merges, d);
    else if (have_vocab || have_merges)
      diag_error(d, (SrcSpan){0}, "%s: %s has no %s beside it", path, have_vocab ? BPE_FILES[k][0] : BPE_FILES[k][1],
                 have_vocab ? BPE_FILES[k][1] : BPE_FILES[k][0]);
    free(vocab);
    free(merges);
    if (have_vocab || have_merges) return ok;
  }
  char *model = join(dir, dir_len, "tokenizer.model");
  bool have_model = is_file(model), ok = have_model && open_sentencepiece(t, model, d);
  free(model);
  if (!have_model)
    diag_error(d, (SrcSpan){0},
               "%s: no tokenizer here (looked for vocab.json + merges.txt, encoder.json + vocab.bpe, tokenizer.model)",
               path);
  return ok;
}

static bool open_path(OrionTokenizer *t, const char *path, Diag *d) {
  struct stat st;
  if (stat(path, &st) != 0) {
    diag_error(d, (SrcSpan){0}, "cannot open tokenizer %s: %s", path, strerror(errno));
    return false;
  }
  if (S_ISDIR(st.st_mode)) return open_in_dir(t, path, path, strlen(path), d);
  const char *base = base_name(path);
  if (ends_with(base, ".model")) return open_sentencepiece(t, path, d);
  for (size_t k = 0; k < sizeof BPE_FILES / sizeof BPE_FILES[0]; k++)
    if (strcmp(base, BPE_FILES[k][0]) == 0 || strcmp(base, BPE_FILES[k][1]) == 0)
      return open_in_dir(t, path, path, (size_t)(base - path), d);
  diag_error(d, (SrcSpan){0},
             "%s: not a tokenizer file (vocab.json, merges.txt, encoder.json, vocab.bpe or a SentencePiece .model)",
             path);
  return false;
}

OrionTokenizer *orion_tokenizer_open(const char *path, Diag *d) {
  OrionTokenizer *t = xcalloc(1, sizeof(OrionTokenizer));
  if (!open_path(t, path, d)) {
    free(t);
    return NULL;
  }
  return t;
}

OrionTokenizer *orion_tokenizer_open_bpe_memory(const char *vocab_name, const char *vocab, size_t vocab_len,
                                                const char *merges_name, const char *merges, size_t merges_len,
                                                Diag *d) {
  OrionTokenizer *t = xcalloc(1, sizeof(OrionTokenizer));
  if (!tok_bpe_open_memory(t, vocab_name, vocab, vocab_len, merges_name, merges, merges_len, d)) {
    free(t);
    return NULL;
  }
  return t;
}

void orion_tokenizer_free(OrionTokenizer *t) {
  if (!t) return;
  if (t->ops && t->ops->free_impl) t->ops->free_impl(t->impl);
  free(t);
}

/* ---- accessors -------------------------------------------------------------- */

OrionTokenizerKind orion_tokenizer_kind(const OrionTokenizer *t) { return t->kind; }
uint32_t orion_tokenizer_vocab_size(const OrionTokenizer *t) { return t->vocab_size; }
int32_t orion_tokenizer_bos(const OrionTokenizer *t) { return t->bos; }
int32_t orion_tokenizer_eos(const OrionTokenizer *t) { return t->eos; }
bool orion_tokenizer_adds_bos(const OrionTokenizer *t) { return t->adds_bos; }

const char *orion_tokenizer_piece(const OrionTokenizer *t, int32_t id, size_t *len) {
  return t->ops->piece(t, id, len);
}

/* ---- encode and decode --------------------------------------------------------- */

bool orion_tokenizer_encode_flags(const OrionTokenizer *t, const char *text, size_t len, unsigned flags, int32_t **ids,
                                  size_t *n, Diag *d) {
  TokIds out = {0};
  if (!t->ops->encode(t, text, len, flags, &out, d)) {
    free(out.data);
    *ids = NULL;
    *n = 0;
    return false;
  }
  if (!out.data) out.data = xmalloc(sizeof(int32_t)); /* an empty text: still an array to free */
  *ids = out.data;
  *n = out.len;
  return true;
}

bool orion_tokenizer_encode(const OrionTokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n, Diag *d) {
  return orion_tokenizer_encode_flags(t, text, len, 0, ids, n, d);
}

static bool report_bad_id(const OrionTokenizer *t, int32_t id, Diag *d) {
  if (id < 0 || (uint32_t)id >= t->vocab_size)
    diag_error(d, (SrcSpan){0}, "id %d is out of range (the vocabulary has ids 0..%u)", id, t->vocab_size - 1);
  else
    diag_error(d, (SrcSpan){0}, "id %d stands for no token in the vocabulary", id);
  return false;
}

bool orion_tokenizer_decode(const OrionTokenizer *t, const int32_t *ids, size_t n, char **text, size_t *len, Diag *d) {
  StrBuf sb;
  sb_init(&sb);
  bool ok = true;
  if (t->ops->decode) {
    ok = t->ops->decode(t, ids, n, &sb, d);
  } else {
    for (size_t i = 0; i < n && ok; i++) {
      size_t plen;
      const char *p = t->ops->piece(t, ids[i], &plen);
      if (!p) ok = report_bad_id(t, ids[i], d);
      else sb_putn(&sb, p, plen);
    }
  }
  if (!ok) {
    sb_free(&sb);
    *text = NULL;
    *len = 0;
    return false;
  }
  if (!sb.data) sb_putn(&sb, "", 0); /* an empty text: still a string to free */
  *text = sb.data;
  *len = sb.len;
  return true;
}

/* ---- streaming ----------------------------------------------------------------- */

void orion_text_stream_init(OrionTextStream *s, const OrionTokenizer *t) {
  memset(s, 0, sizeof *s);
  s->tok = t;
}

/* How many bytes at the end of s[0, n) are the start of a UTF-8 character
 * still missing bytes (0 when the text ends on a whole character or on
 * bytes that can never become one, which are let through as they are). */
static size_t unfinished_tail(const unsigned char *s, size_t n) {
  for (size_t back = 1; back <= 3 && back <= n; back++) {
    unsigned char c = s[n - back];
    if ((c & 0xc0) == 0x80) continue; /* a continuation byte: look further back */
    size_t need = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
    if (c >= 0xf5) need = 0;
    return need > back ? back : 0;
  }
  return 0;
}

static size_t stream_emit(OrionTextStream *s, const char *piece, size_t plen, char *out, size_t cap) {
  if (s->npending + plen > cap) return (size_t)-1;
  memcpy(out, s->pending, s->npending);
  memcpy(out + s->npending, piece, plen);
  size_t total = s->npending + plen;
  size_t keep = unfinished_tail((const unsigned char *)out, total);
  memcpy(s->pending, out + total - keep, keep);
  s->npending = keep;
  return total - keep;
}

size_t orion_text_stream_push(OrionTextStream *s, int32_t id, char *out, size_t cap) {
  const TokOps *ops = s->tok->ops;
  size_t plen;
  /* Until the first id that is text, a kind may spell a piece differently
   * (SentencePiece: no word-start space at the very start). */
  const char *piece = !s->started && ops->piece_at_start ? ops->piece_at_start(s->tok, id, &plen)
                                                         : ops->piece(s->tok, id, &plen);
  if (!piece) return (size_t)-1;
  if (!(ops->is_control && ops->is_control(s->tok, id))) s->started = true;
  s->emitted++;
  return stream_emit(s, piece, plen, out, cap);
}

size_t orion_text_stream_finish(OrionTextStream *s, char *out, size_t cap) {
  size_t n = s->npending <= cap ? s->npending : cap;
  memcpy(out, s->pending, n);
  s->npending = 0;
  return n;
}
