/*
 * The constraint table library on its own: this test links only it (and
 * what it needs: support, pkgio, cJSON), as the runtime may, so it also
 * proves that the loader needs no frontend, passes or backend code.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "orion/constraint_table.h"

static ConstraintTable *parse_builtin(ConstraintPassExists *pass_exists, StrBuf *messages) {
  Diag d;
  diag_init(&d, NULL);
  d.capture = messages;
  d.program = "test";
  size_t len;
  const char *text = constraints_builtin_text(&len);
  return constraints_parse("ane_constraints.json", text, len, pass_exists, &d);
}

Test(constraint_table, builtin_parses_without_a_pass_registry) {
  StrBuf sb;
  sb_init(&sb);
  ConstraintTable *t = parse_builtin(NULL, &sb);
  cr_assert_not_null(t, "%s", sb.data);
  cr_assert_eq(sb.len, 0);
  cr_assert_eq(t->nrules, 20);
  const Constraint *c = constraints_find(t, "ANE001");
  cr_assert_not_null(c);
  cr_assert_str_eq(c->name, "no-concat");
  cr_assert_str_eq(c->fixed_by, "split-concat");
  cr_assert(constraint_has_op(c, OP_CONCAT));
  cr_assert_not(constraint_has_op(c, OP_MATMUL));
  const Constraint *linear = constraints_find(t, "ANE015");
  cr_assert(constraint_has_op(linear, OP_LINEAR) && constraint_has_op(linear, OP_MATMUL));
  cr_assert_eq(constraints_target(t, MIL_IOS18)->min_surface_bytes, 49152);
  cr_assert_str_eq(constraints_target(t, MIL_IOS18)->program_version, "1.3");
  constraints_free(t);
  sb_free(&sb);
}

static char asked[8][32];
static int nasked;

static bool knows_all_but_gelu_tanh(const char *name) {
  if (nasked < 8) snprintf(asked[nasked++], sizeof asked[0], "%s", name);
  return strcmp(name, "gelu-tanh") != 0;
}

Test(constraint_table, fixed_by_is_checked_by_the_callers_registry) {
  StrBuf sb;
  sb_init(&sb);
  nasked = 0;
  ConstraintTable *t = parse_builtin(knows_all_but_gelu_tanh, &sb);
  cr_assert_null(t);
  cr_assert_str_eq(sb.data,
                   "test: error: ane_constraints.json: constraint ANE010: unknown pass 'gelu-tanh' in 'fixed_by'\n");
  /* Every rule's pass is asked about once, in table order. */
  static const char *const passes[] = {"split-concat", "decompose-attention", "gelu-tanh", "split-conv-bias",
                                       "lower-linear"};
  cr_assert_eq(nasked, 5);
  for (int i = 0; i < 5; i++) cr_assert_str_eq(asked[i], passes[i]);
  sb_free(&sb);
}
