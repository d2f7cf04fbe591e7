/*
 * The compile budget and the resident-program cap (ane_budget.h). Reports
 * put the limit at about 119 compiles per process, past which the ANE
 * compiler fails silently (constraint ANE005); the only remedy is a new
 * process, so the budget refuses the compile that would cross it and says so.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ane_budget.h"

/* One limit from the environment: a decimal integer 1..ANE_LIMIT_MAX. */
static bool env_limit(AneGetenv *env, const char *name, AneLimit *out, bool *set, Diag *d) {
  *set = false;
  const char *s = env ? env(name) : NULL;
  if (!s) return true;
  char *end = NULL;
  errno = 0;
  unsigned long long v = s[0] >= '0' && s[0] <= '9' ? strtoull(s, &end, 10) : 0;
  if (!end || *end || errno || v < 1 || v > ANE_LIMIT_MAX) {
    diag_error(d, (SrcSpan){0}, "the ane backend cannot use %s='%.32s%s': it must be a whole number from 1 to %u",
               name, s, strlen(s) > 32 ? "..." : "", ANE_LIMIT_MAX);
    return false;
  }
  out->value = v;
  snprintf(out->origin, sizeof out->origin, "%s", name);
  *set = true;
  return true;
}

static bool table_limit(const Constraint *rule, const char *figure, AneLimit *out, Diag *d) {
  const ConstraintFigure *f = rule ? constraint_figure(rule, figure) : NULL;
  if (!f) {
    diag_error(d, (SrcSpan){0}, "the constraint table gives no '%s' for %s: the ane backend's limits cannot be set",
               figure, ANE_LIMITS_RULE);
    return false;
  }
  out->value = f->value;
  snprintf(out->origin, sizeof out->origin, "constraint %s (%s)", ANE_LIMITS_RULE, figure);
  return true;
}

static bool resolve_one(const Constraint *rule, const char *figure, uint64_t option, AneGetenv *env,
                        const char *env_name, AneLimit *out, Diag *d) {
  AneLimit from_env = {0};
  bool env_set;
  /* A bad environment value is an error even when an option overrides it: it is a mistake either way. */
  if (!env_limit(env, env_name, &from_env, &env_set, d)) return false;
  if (option > ANE_LIMIT_MAX) {
    diag_error(d, (SrcSpan){0}, "the ane backend cannot use a %s of %llu: it must be a whole number from 1 to %u",
               !strcmp(figure, ANE_FIGURE_COMPILES) ? "compile budget" : "resident-program cap",
               (unsigned long long)option, ANE_LIMIT_MAX);
    return false;
  }
  if (option) {
    out->value = option;
    snprintf(out->origin, sizeof out->origin, "the caller's option");
    return true;
  }
  if (env_set) {
    *out = from_env;
    return true;
  }
  return table_limit(rule, figure, out, d);
}

bool ane_limits_resolve(const ConstraintTable *t, const AneLimitOptions *opt, AneGetenv *env, AneLimits *out,
                        Diag *d) {
  const Constraint *rule = t ? constraints_find(t, ANE_LIMITS_RULE) : NULL;
  AneLimitOptions none = {0};
  if (!opt) opt = &none;
  bool ok = resolve_one(rule, ANE_FIGURE_COMPILES, opt->compile_budget, env, ANE_COMPILE_BUDGET_ENV,
                        &out->compile_budget, d);
  ok &= resolve_one(rule, ANE_FIGURE_RESIDENT, opt->resident_cap, env, ANE_RESIDENT_CAP_ENV, &out->resident_cap, d);
  return ok;
}

void ane_budget_init(AneBudget *b, const AneLimit *limit) { *b = (AneBudget){.limit = *limit}; }

void ane_budget_share(AneBudget *b, _Atomic uint64_t *process_used) { b->process_used = process_used; }

uint64_t ane_budget_process_used(const AneBudget *b) { return b->process_used ? atomic_load(b->process_used) : b->used; }

/* One compile counted if the count stays under ceiling; a compare-and-swap, so
 * that backends in other threads cannot pass the limit together. */
static bool take_one(AneBudget *b, uint64_t ceiling) {
  if (!b->process_used) {
    if (b->used >= ceiling) return false;
  } else {
    uint64_t seen = atomic_load(b->process_used);
    do {
      if (seen >= ceiling) return false;
    } while (!atomic_compare_exchange_weak(b->process_used, &seen, seen + 1));
  }
  b->used++;
  return true;
}

static void refuse(const AneBudget *b, const char *what, Diag *d) {
  StrBuf held;
  sb_init(&held);
  if (b->reserved)
    sb_printf(&held, ", %llu more set aside for %s", (unsigned long long)b->reserved, b->reserved_for);
  diag_error(d, (SrcSpan){0},
             "the ane backend will not compile %s: this process has used %llu of its compile budget of %llu (from "
             "%s%s), past which the ANE compiler fails silently (%s); restart the process to get a new budget, or "
             "set %s if this device is known to take more",
             what, (unsigned long long)ane_budget_process_used(b), (unsigned long long)b->limit.value, b->limit.origin,
             held.data ? held.data : "", ANE_LIMITS_RULE, ANE_COMPILE_BUDGET_ENV);
  sb_free(&held);
}

bool ane_budget_reserve(AneBudget *b, uint64_t n, const char *who, Diag *d) {
  uint64_t used = ane_budget_process_used(b);
  if (used + b->reserved + n > b->limit.value) {
    diag_error(d, (SrcSpan){0},
               "the ane backend cannot set %llu compiles aside for %s: this process has used %llu of its compile "
               "budget of %llu (from %s) and %llu are already set aside; restart the process to get a new budget",
               (unsigned long long)n, who, (unsigned long long)used, (unsigned long long)b->limit.value,
               b->limit.origin, (unsigned long long)b->reserved);
    return false;
  }
  b->reserved += n;
  snprintf(b->reserved_for, sizeof b->reserved_for, "%s", who);
  return true;
}

void ane_budget_unreserve(AneBudget *b, uint64_t n) { b->reserved -= n < b->reserved ? n : b->reserved; }

bool ane_budget_charge(AneBudget *b, bool from_reserve, const char *what, Diag *d) {
  if (from_reserve) { /* a reservation never reaches into the rest of the budget */
    if (!b->reserved) {
      diag_error(d, (SrcSpan){0},
                 "the ane backend will not compile %s: the compiles set aside for it are spent, and the rest of the "
                 "compile budget of %llu (from %s) is kept for the process",
                 what, (unsigned long long)b->limit.value, b->limit.origin);
      return false;
    }
    b->reserved--;
    b->used++;
    if (b->process_used) atomic_fetch_add(b->process_used, 1);
    return true;
  }
  if (b->reserved >= b->limit.value || !take_one(b, b->limit.value - b->reserved)) {
    refuse(b, what, d);
    return false;
  }
  return true;
}

bool ane_budget_needs_restart(const AneBudget *b) { return ane_budget_process_used(b) + b->reserved >= b->limit.value; }
