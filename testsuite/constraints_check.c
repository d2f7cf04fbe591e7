/* What the constraint tests share (test_constraints*.c). */
#include "constraints_check.h"

#include <criterion/criterion.h>
#include <string.h>

ConstraintTable *builtin(void) {
  StrBuf sb;
  sb_init(&sb);
  Diag d;
  diag_init(&d, NULL);
  d.capture = &sb;
  ConstraintTable *t = constraints_builtin(&d);
  cr_assert_not_null(t, "the shipped table does not load:\n%s", sb.data);
  sb_free(&sb);
  return t;
}

/* s with the first `from` replaced by `to` (heap). */
char *subst(const char *s, const char *from, const char *to) {
  const char *p = strstr(s, from);
  cr_assert_not_null(p, "'%s' not found in:\n%s", from, s);
  size_t n = strlen(s) - strlen(from) + strlen(to) + 1;
  char *r = xmalloc(n);
  snprintf(r, n, "%.*s%s%s", (int)(p - s), s, to, p + strlen(from));
  return r;
}

/* Whether the n bytes at s contain needle. */
bool has(const char *s, size_t n, const char *needle) {
  size_t k = strlen(needle);
  for (size_t i = 0; i + k <= n; i++)
    if (!memcmp(s + i, needle, k)) return true;
  return false;
}
