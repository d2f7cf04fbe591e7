/*
 * GPT-2's pre-tokenizer, the one both the encoder (bpe.c) and the trainer
 * (bpe_train.c) split text with, so that a BPE learned by orion-tokenize
 * train meets at encode time exactly the words it was trained on. See
 * docs/tokenizers.md ("Pre-tokenizer", "Invalid UTF-8").
 */
#include "text_internal.h"

/* GPT-2's pattern, with \s spelt out as ECMAScript defines it (the npm
 * reference runs on JavaScript): tab, LF, VT, FF, CR, the Zs spaces, U+2028,
 * U+2029 and U+FEFF. PCRE2's Unicode \s also takes U+0085 and U+180E and not
 * U+FEFF. */
#define SP "\\t\\n\\x{0b}\\f\\r\\p{Zs}\\x{2028}\\x{2029}\\x{feff}"
static const char PRETOKENIZER[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" SP "\\p{L}\\p{N}]+|[" SP
                                   "]+(?![^" SP "])|[" SP "]+";

pcre2_code *pretok_compile(Diag *d) {
  int err;
  PCRE2_SIZE at;
  /* MATCH_INVALID_UTF: bytes that are no UTF-8 never match (no crash, no
   * error); pretok_split gives them as words of their own. */
  pcre2_code *re = pcre2_compile((PCRE2_SPTR)PRETOKENIZER, PCRE2_ZERO_TERMINATED,
                                 PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &at, NULL);
  if (!re) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    diag_error(d, (SrcSpan){0}, "cannot compile the pre-tokenizer's regex (PCRE2: %s at %zu)", (const char *)msg,
               (size_t)at);
    return NULL;
  }
  (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* without JIT it is slower, not wrong */
  return re;
}

void pretok_matcher_init(PretokMatcher *m, const pcre2_code *re) {
  m->re = re;
  m->md = pcre2_match_data_create_from_pattern(re, NULL);
  m->mc = pcre2_match_context_create(NULL);
  /* A JIT stack of the matcher's own: the default 32 KiB is the machine's
   * stack, and a shared one would not be thread-safe. */
  m->js = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
  if (!m->md || !m->mc || !m->js) ice("out of memory in PCRE2");
  pcre2_jit_stack_assign(m->mc, NULL, m->js);
}

void pretok_matcher_free(PretokMatcher *m) {
  pcre2_jit_stack_free(m->js);
  pcre2_match_context_free(m->mc);
  pcre2_match_data_free(m->md);
}

bool pretok_split(PretokMatcher *m, const char *text, size_t len, PretokWordFn word, void *ctx, Diag *d) {
  size_t pos = 0;
  while (pos < len) {
    int rc = pcre2_match(m->re, (PCRE2_SPTR)text, len, pos, 0, m->md, m->mc);
    size_t start = len, end = len;
    if (rc >= 0) {
      PCRE2_SIZE *ov = pcre2_get_ovector_pointer(m->md);
      start = ov[0];
      end = ov[1];
    } else if (rc != PCRE2_ERROR_NOMATCH) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      diag_error(d, (SrcSpan){0}, "the pre-tokenizer's regex failed at byte %zu (PCRE2: %s)", pos,
                 (const char *)msg);
      return false;
    }
    /* Only invalid bytes lie between two matches: every valid character
     * matches one of the branches. */
    if (start > pos && !word(ctx, text + pos, start - pos)) return false;
    if (end > start && !word(ctx, text + start, end - start)) return false;
    if (end <= pos) ice("the pre-tokenizer matched nothing at byte %zu", pos);
    pos = end;
  }
  return true;
}
