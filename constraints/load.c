/*
 * Loading a constraint table for the compiler's tools: the table library's
 * parser (constraints/table.c) with every 'fixed_by' checked against the
 * pass registry, which the table library itself cannot see (it links no
 * compiler code, for the runtime's sake).
 */
#include <stdlib.h>

#include "orion/constraints.h"
#include "orion/passes.h"

static bool registered_pass(const char *name) { return pass_lookup(name) != NULL; }

ConstraintTable *constraints_load(const char *name, const char *json, size_t len, Diag *d) {
  return constraints_parse(name, json, len, registered_pass, d);
}

ConstraintTable *constraints_load_file(const char *path, Diag *d) {
  char *text;
  size_t len;
  const char *err;
  if (!read_file(path, CONSTRAINTS_MAX_BYTES, &text, &len, &err)) {
    diag_error(d, (SrcSpan){0}, "cannot read the constraint table '%s': %s", path, err);
    return NULL;
  }
  ConstraintTable *t = constraints_load(path, text, len, d);
  free(text);
  return t;
}

ConstraintTable *constraints_builtin(Diag *d) {
  size_t len;
  const char *text = constraints_builtin_text(&len);
  return constraints_load("ane_constraints.json", text, len, d);
}

