/*
 * The ane backend's compile budget and resident-program cap
 * (runtime/ane/ane_budget.h): the figures of constraint ANE005 in the
 * table, the options and environment that override them, the exact
 * refusals, reservations; and the table's "figures" field itself.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "ane_budget.h"

static ConstraintTable *table_from(const char *json, StrBuf *msgs) {
  Diag d;
  diag_init(&d, NULL);
  d.capture = msgs;
  d.program = "t";
  return constraints_parse("t.json", json, strlen(json), NULL, &d);
}

static ConstraintTable *builtin(void) {
  size_t len;
  const char *text = constraints_builtin_text(&len);
  Diag d;
  diag_init(&d, NULL);
  ConstraintTable *t = constraints_parse("builtin", text, len, NULL, &d);
  cr_assert_not_null(t);
  return t;
}

/* The builtin text with the first `from` replaced by `to` (heap). */
static char *builtin_with(const char *from, const char *to) {
  size_t len;
  const char *text = constraints_builtin_text(&len);
  char *s = xmalloc(len + 1);
  memcpy(s, text, len);
  s[len] = '\0';
  char *p = strstr(s, from);
  cr_assert_not_null(p, "'%s' not in the table", from);
  size_t n = len - strlen(from) + strlen(to) + 1;
  char *r = xmalloc(n);
  snprintf(r, n, "%.*s%s%s", (int)(p - s), s, to, p + strlen(from));
  free(s);
  return r;
}

/* A fake environment: "NAME=value" pairs. */
static const char *const *fake_env;
static const char *env_lookup(const char *name) {
  for (const char *const *e = fake_env; e && *e; e++)
    if (!strncmp(*e, name, strlen(name)) && (*e)[strlen(name)] == '=') return *e + strlen(name) + 1;
  return NULL;
}

static bool resolve(const ConstraintTable *t, const AneLimitOptions *opt, const char *const *env, AneLimits *out,
                    StrBuf *msgs) {
  fake_env = env;
  Diag d;
  diag_init(&d, NULL);
  d.capture = msgs;
  d.program = "t";
  return ane_limits_resolve(t, opt, env_lookup, out, &d);
}

Test(table, ane005_states_the_figures_the_runtime_tracks) {
  ConstraintTable *t = builtin();
  const Constraint *c = constraints_find(t, "ANE005");
  cr_assert_eq(c->nfigures, 2);
  cr_assert_str_eq(c->figures[0].name, "compiles_per_process");
  cr_assert_eq(c->figures[0].value, 119);
  cr_assert_eq(constraint_figure(c, "resident_programs")->value, 128);
  cr_assert_null(constraint_figure(c, "nothing"));
  cr_assert_eq(constraints_find(t, "ANE001")->nfigures, 0);
  constraints_free(t);
}

static void figures_refused(const char *figures, const char *want) {
  char *json = builtin_with("\"figures\": {\"compiles_per_process\": 119, \"resident_programs\": 128}", figures);
  StrBuf msgs;
  sb_init(&msgs);
  cr_assert_null(table_from(json, &msgs));
  cr_assert_str_eq(msgs.data, want);
  sb_free(&msgs);
  free(json);
}

Test(table, malformed_figures_are_named) {
  figures_refused("\"figures\": {}",
                  "t: error: t.json: constraint ANE005: 'figures' must be a non-empty object of positive integers\n");
  figures_refused("\"figures\": {\"Compiles\": 1}",
                  "t: error: t.json: constraint ANE005: figure name 'Compiles' must be lowercase words joined by '_' "
                  "(at most 48 characters)\n");
  figures_refused("\"figures\": {\"compiles\": 1.5}",
                  "t: error: t.json: constraint ANE005: figure 'compiles' must be a positive integer\n");
  figures_refused("\"figures\": {\"a\": 1, \"a\": 2}",
                  "t: error: t.json: constraint ANE005: figure 'a' listed twice\n");
}

Test(limits, come_from_the_table_by_default) {
  ConstraintTable *t = builtin();
  AneLimits l;
  StrBuf msgs;
  sb_init(&msgs);
  cr_assert(resolve(t, NULL, NULL, &l, &msgs));
  cr_assert_eq(l.compile_budget.value, 119);
  cr_assert_str_eq(l.compile_budget.origin, "constraint ANE005 (compiles_per_process)");
  cr_assert_eq(l.resident_cap.value, 128);
  cr_assert_str_eq(l.resident_cap.origin, "constraint ANE005 (resident_programs)");
  cr_assert_null(msgs.data);
  constraints_free(t);
}

Test(limits, the_environment_overrides_the_table_and_an_option_overrides_both) {
  ConstraintTable *t = builtin();
  AneLimits l;
  StrBuf msgs;
  sb_init(&msgs);
  const char *env[] = {"ORION_ANE_COMPILE_BUDGET=200", "ORION_ANE_RESIDENT_CAP=55", NULL};
  cr_assert(resolve(t, NULL, env, &l, &msgs));
  cr_assert_eq(l.compile_budget.value, 200);
  cr_assert_str_eq(l.compile_budget.origin, "ORION_ANE_COMPILE_BUDGET");
  cr_assert_eq(l.resident_cap.value, 55);
  cr_assert_str_eq(l.resident_cap.origin, "ORION_ANE_RESIDENT_CAP");
  AneLimitOptions opt = {.compile_budget = 7};
  cr_assert(resolve(t, &opt, env, &l, &msgs));
  cr_assert_eq(l.compile_budget.value, 7);
  cr_assert_str_eq(l.compile_budget.origin, "the caller's option");
  cr_assert_eq(l.resident_cap.value, 55);
  constraints_free(t);
}

Test(limits, an_option_past_the_maximum_is_a_clear_error) {
  ConstraintTable *t = builtin();
  AneLimits l;
  StrBuf msgs;
  sb_init(&msgs);
  AneLimitOptions opt = {.compile_budget = 1000001, .resident_cap = 1000000};
  cr_assert_not(resolve(t, &opt, NULL, &l, &msgs));
  cr_assert_str_eq(msgs.data, "t: error: the ane backend cannot use a compile budget of 1000001: it must be a whole "
                              "number from 1 to 1000000\n");
  sb_free(&msgs);
  sb_init(&msgs);
  opt = (AneLimitOptions){.resident_cap = 4000000000u};
  cr_assert_not(resolve(t, &opt, NULL, &l, &msgs));
  cr_assert_str_eq(msgs.data, "t: error: the ane backend cannot use a resident-program cap of 4000000000: it must be "
                              "a whole number from 1 to 1000000\n");
  sb_free(&msgs);
  constraints_free(t);
}

static void bad_env(const char *setting, const char *want) {
  ConstraintTable *t = builtin();
  AneLimits l;
  StrBuf msgs;
  sb_init(&msgs);
  const char *env[] = {setting, NULL};
  cr_assert_not(resolve(t, NULL, env, &l, &msgs));
  cr_assert_str_eq(msgs.data, want);
  sb_free(&msgs);
  constraints_free(t);
}

Test(limits, a_bad_environment_value_is_a_clear_error) {
  bad_env("ORION_ANE_COMPILE_BUDGET=lots",
          "t: error: the ane backend cannot use ORION_ANE_COMPILE_BUDGET='lots': it must be a whole number from 1 to "
          "1000000\n");
  bad_env("ORION_ANE_COMPILE_BUDGET=0",
          "t: error: the ane backend cannot use ORION_ANE_COMPILE_BUDGET='0': it must be a whole number from 1 to "
          "1000000\n");
  bad_env("ORION_ANE_RESIDENT_CAP=12x",
          "t: error: the ane backend cannot use ORION_ANE_RESIDENT_CAP='12x': it must be a whole number from 1 to "
          "1000000\n");
  bad_env("ORION_ANE_RESIDENT_CAP=-3",
          "t: error: the ane backend cannot use ORION_ANE_RESIDENT_CAP='-3': it must be a whole number from 1 to "
          "1000000\n");
  bad_env("ORION_ANE_RESIDENT_CAP=",
          "t: error: the ane backend cannot use ORION_ANE_RESIDENT_CAP='': it must be a whole number from 1 to "
          "1000000\n");
  bad_env("ORION_ANE_COMPILE_BUDGET=99999999999999999999999",
          "t: error: the ane backend cannot use ORION_ANE_COMPILE_BUDGET='99999999999999999999999': it must be a "
          "whole number from 1 to 1000000\n");
}

Test(limits, a_table_without_the_figures_is_an_error) {
  char *json = builtin_with(",\n      \"figures\": {\"compiles_per_process\": 119, \"resident_programs\": 128}", "");
  StrBuf msgs;
  sb_init(&msgs);
  ConstraintTable *t = table_from(json, &msgs);
  cr_assert_not_null(t, "%s", msgs.data);
  AneLimits l;
  cr_assert_not(resolve(t, NULL, NULL, &l, &msgs));
  cr_assert_str_eq(msgs.data,
                   "t: error: the constraint table gives no 'compiles_per_process' for ANE005: the ane backend's "
                   "limits cannot be set\n"
                   "t: error: the constraint table gives no 'resident_programs' for ANE005: the ane backend's limits "
                   "cannot be set\n");
  sb_free(&msgs);
  constraints_free(t);
  free(json);
}

static AneBudget budget_of(uint64_t n) {
  AneLimit limit = {.value = n};
  snprintf(limit.origin, sizeof limit.origin, "constraint ANE005 (compiles_per_process)");
  AneBudget b;
  ane_budget_init(&b, &limit);
  return b;
}

static bool charge(AneBudget *b, bool from_reserve, StrBuf *msgs) {
  Diag d;
  diag_init(&d, NULL);
  d.capture = msgs;
  d.program = "t";
  return ane_budget_charge(b, from_reserve, "'attn'", &d);
}

Test(budget, the_compile_past_the_budget_is_refused_with_the_limit_and_the_remedy) {
  AneBudget b = budget_of(2);
  StrBuf msgs;
  sb_init(&msgs);
  cr_assert(charge(&b, false, &msgs));
  cr_assert_not(ane_budget_needs_restart(&b));
  cr_assert(charge(&b, false, &msgs));
  cr_assert(ane_budget_needs_restart(&b));
  cr_assert_not(charge(&b, false, &msgs));
  cr_assert_eq(b.used, 2);
  cr_assert_str_eq(msgs.data,
                   "t: error: the ane backend will not compile 'attn': this process has used 2 of its compile budget "
                   "of 2 (from constraint ANE005 (compiles_per_process)), past which the ANE compiler fails silently "
                   "(ANE005); restart the process to get a new budget, or set ORION_ANE_COMPILE_BUDGET if this "
                   "device is known to take more\n");
  sb_free(&msgs);
}

Test(budget, a_reservation_is_kept_from_ordinary_compiles_and_never_exceeded) {
  AneBudget b = budget_of(3);
  StrBuf msgs;
  sb_init(&msgs);
  Diag d;
  diag_init(&d, NULL);
  d.capture = &msgs;
  d.program = "t";
  cr_assert(ane_budget_reserve(&b, 2, "the weight-update self-test", &d));
  cr_assert(charge(&b, false, &msgs));
  cr_assert_not(charge(&b, false, &msgs)); /* the last two are set aside */
  cr_assert(strstr(msgs.data, "used 1 of its compile budget of 3 (from constraint ANE005 (compiles_per_process), 2 "
                              "more set aside for the weight-update self-test)"),
            "%s", msgs.data);
  msgs.len = 0;
  cr_assert(charge(&b, true, &msgs));
  cr_assert(charge(&b, true, &msgs));
  cr_assert_not(charge(&b, true, &msgs));
  cr_assert_str_eq(msgs.data, "t: error: the ane backend will not compile 'attn': the compiles set aside for it are "
                              "spent, and the rest of the compile budget of 3 (from constraint ANE005 "
                              "(compiles_per_process)) is kept for the process\n");
  msgs.len = 0;
  cr_assert_not(ane_budget_reserve(&b, 1, "the weight-update self-test", &d));
  cr_assert_str_eq(msgs.data, "t: error: the ane backend cannot set 1 compiles aside for the weight-update self-test: "
                              "this process has used 3 of its compile budget of 3 (from constraint ANE005 "
                              "(compiles_per_process)) and 0 are already set aside; restart the process to get a new "
                              "budget\n");
  sb_free(&msgs);
}

Test(budget, what_is_left_of_a_reservation_goes_back) {
  AneBudget b = budget_of(5);
  Diag d;
  diag_init(&d, NULL);
  cr_assert(ane_budget_reserve(&b, 4, "x", &d));
  cr_assert(ane_budget_needs_restart(&b) == false);
  ane_budget_unreserve(&b, 4);
  cr_assert_eq(b.reserved, 0);
  ane_budget_unreserve(&b, 1);
  cr_assert_eq(b.reserved, 0);
}

/* Budgets that share a count (every ane backend of a process shares one:
 * the device's limit is per process) are each checked against it, and each
 * keeps its own count of what it let through. */
Test(budget, budgets_sharing_the_process_count_are_checked_against_it) {
  _Atomic uint64_t process = 0;
  AneBudget a = budget_of(3), b = budget_of(3);
  ane_budget_share(&a, &process);
  ane_budget_share(&b, &process);
  StrBuf msgs;
  sb_init(&msgs);
  cr_assert(charge(&a, false, &msgs));
  cr_assert(charge(&a, false, &msgs));
  cr_assert(charge(&b, false, &msgs));
  cr_assert(ane_budget_needs_restart(&a), "the other budget's compile counts too");
  cr_assert_not(charge(&a, false, &msgs));
  cr_assert_eq(a.used, 2);
  cr_assert_eq(b.used, 1);
  cr_assert_eq(ane_budget_process_used(&b), 3);
  cr_assert_str_eq(msgs.data,
                   "t: error: the ane backend will not compile 'attn': this process has used 3 of its compile budget "
                   "of 3 (from constraint ANE005 (compiles_per_process)), past which the ANE compiler fails silently "
                   "(ANE005); restart the process to get a new budget, or set ORION_ANE_COMPILE_BUDGET if this "
                   "device is known to take more\n");
  sb_free(&msgs);
}
