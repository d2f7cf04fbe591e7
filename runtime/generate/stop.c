/*
 * Stop strings over streamed text (orion/generate.h): the held-back tail
 * is the longest suffix of the text so far that is a proper prefix of some
 * stop string, so at most the longest stop string's length minus one.
 */
#include <string.h>

#include "orion/generate.h"

void orion_stop_init(OrionStopMatcher *m, const char *const *stops, size_t nstops) {
  m->stops = stops, m->nstops = nstops, m->found = -1;
  sb_init(&m->held);
}

void orion_stop_free(OrionStopMatcher *m) { sb_free(&m->held); }

/* The length of the longest suffix of s[0, n) that begins some stop string
 * (and is shorter than it). */
static size_t pending_suffix(const OrionStopMatcher *m, const char *s, size_t n) {
  size_t best = 0;
  for (size_t k = 0; k < m->nstops; k++) {
    size_t sl = strlen(m->stops[k]);
    if (!sl) continue;
    for (size_t len = sl - 1 < n ? sl - 1 : n; len > best; len--)
      if (!memcmp(s + n - len, m->stops[k], len)) {
        best = len;
        break;
      }
  }
  return best;
}

bool orion_stop_push(OrionStopMatcher *m, const char *text, size_t len, StrBuf *out) {
  if (m->found >= 0) return true;
  sb_putn(&m->held, text, len);
  if (!m->held.len) return false;
  const char *s = m->held.data;
  size_t n = m->held.len, first = n;
  for (size_t k = 0; k < m->nstops; k++) {
    size_t sl = strlen(m->stops[k]);
    if (!sl || sl > n) continue;
    for (size_t i = 0; i + sl <= n && i < first; i++)
      if (!memcmp(s + i, m->stops[k], sl)) {
        first = i, m->found = (int)k;
        break;
      }
  }
  if (m->found >= 0) {
    sb_putn(out, s, first);
    m->held.len = 0;
    return true;
  }
  size_t keep = pending_suffix(m, s, n);
  sb_putn(out, s, n - keep);
  memmove(m->held.data, s + n - keep, keep);
  m->held.len = keep;
  return false;
}

void orion_stop_finish(OrionStopMatcher *m, StrBuf *out) {
  if (m->found < 0) sb_putn(out, m->held.data ? m->held.data : "", m->held.len);
  m->held.len = 0;
}
