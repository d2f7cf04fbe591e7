/* The constraint tests' shared helpers (constraints_check.c). */
#ifndef ORION_TEST_CONSTRAINTS_CHECK_H
#define ORION_TEST_CONSTRAINTS_CHECK_H

#include "orion/constraints.h"

/* The shipped table (asserts that it loads). */
ConstraintTable *builtin(void);
/* s with the first `from` replaced by `to` (heap). */
char *subst(const char *s, const char *from, const char *to);
/* Whether the n bytes at s contain needle. */
bool has(const char *s, size_t n, const char *needle);

#endif
