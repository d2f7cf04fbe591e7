/*
 * "did you mean ...?": the candidate nearest to a misspelt name, for every
 * place that reports an unknown name (ops and values in .oir, command-line
 * options). Close enough to be a typo means at most one edit per three
 * characters of the name, so a wholly different word gets no suggestion.
 */
#include "orion/support.h"

#include <string.h>

/* Names longer than this are not compared (nobody misspells them by a few letters). */
#define SUGGEST_MAX_LEN 64

/* Insertions, deletions, substitutions and swaps of two neighbours ("bais"
 * for "bias" is one edit): the optimal string alignment distance. */
unsigned edit_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > SUGGEST_MAX_LEN || lb > SUGGEST_MAX_LEN) return UINT32_MAX;
  unsigned rows[3][SUGGEST_MAX_LEN + 1]; /* the rows for i - 2, i - 1 and i */
  unsigned *before = rows[0], *prev = rows[1], *cur = rows[2];
  for (size_t j = 0; j <= lb; j++) prev[j] = (unsigned)j;
  for (size_t i = 1; i <= la; i++) {
    cur[0] = (unsigned)i;
    for (size_t j = 1; j <= lb; j++) {
      unsigned best = prev[j - 1] + (a[i - 1] != b[j - 1]);
      if (prev[j] + 1 < best) best = prev[j] + 1;
      if (cur[j - 1] + 1 < best) best = cur[j - 1] + 1;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && before[j - 2] + 1 < best)
        best = before[j - 2] + 1;
      cur[j] = best;
    }
    unsigned *t = before;
    before = prev;
    prev = cur;
    cur = t;
  }
  return prev[lb];
}

void suggestion_init(Suggestion *s, const char *name) {
  *s = (Suggestion){.name = name, .best = NULL, .limit = (unsigned)strlen(name) / 3 + 1};
}

void suggestion_consider(Suggestion *s, const char *candidate) {
  if (!candidate || !strcmp(candidate, s->name)) return;
  unsigned d = edit_distance(s->name, candidate);
  if (d < s->limit) {
    s->limit = d;
    s->best = candidate;
  }
}
