/*
 * The ane backend's per-process limits: a compile budget and a cap on
 * resident (loaded) programs, tracked so that the limit is met with a clear
 * refusal instead of the ANE compiler failing silently. Their values come
 * from the constraint table (rule ANE005's figures), overridden by the
 * caller's options or the environment. Pure C; see docs/ane-backend.md.
 */
#ifndef ORION_ANE_BUDGET_H
#define ORION_ANE_BUDGET_H

#include <stdatomic.h>
#include <stdint.h>

#include "orion/constraint_table.h"
#include "orion/support.h"

#define ANE_COMPILE_BUDGET_ENV "ORION_ANE_COMPILE_BUDGET"
#define ANE_RESIDENT_CAP_ENV "ORION_ANE_RESIDENT_CAP"
#define ANE_LIMITS_RULE "ANE005"
#define ANE_FIGURE_COMPILES "compiles_per_process"
#define ANE_FIGURE_RESIDENT "resident_programs"
/* Largest value either limit may be set to (a typo guard, far above any report). */
#define ANE_LIMIT_MAX 1000000u

/* getenv's shape, so that tests give their own environment. */
typedef const char *AneGetenv(const char *name);

typedef struct AneLimit {
  uint64_t value;
  char origin[96]; /* "constraint ANE005 (compiles_per_process)", "ORION_ANE_COMPILE_BUDGET", "the caller's option" */
} AneLimit;

typedef struct AneLimits {
  AneLimit compile_budget, resident_cap;
} AneLimits;

typedef struct AneLimitOptions {
  uint64_t compile_budget, resident_cap; /* 0: not set */
} AneLimitOptions;

/* The limits: the caller's option, else the environment (through env;
 * NULL: none), else the table's figure. A malformed or out-of-range
 * environment value, or a table without the figures, is an error. */
bool ane_limits_resolve(const ConstraintTable *t, const AneLimitOptions *opt, AneGetenv *env, AneLimits *out,
                        Diag *d);

typedef struct AneBudget {
  AneLimit limit;
  uint64_t used;     /* compiles this budget let through to the device */
  /* The compiles of every budget that shares this counter: the device's
   * limit is per process, and one process may open several backends
   * (orion-run patch --verify does). NULL: this budget alone. */
  _Atomic uint64_t *process_used;
  uint64_t reserved; /* set aside (the weight-update self-test's) and not yet used */
  char reserved_for[64]; /* who set it aside, for messages */
} AneBudget;

void ane_budget_init(AneBudget *b, const AneLimit *limit);
/* Counts b's compiles also in *process_used, and checks b's limit against
 * that count: what every budget sharing it has let through. */
void ane_budget_share(AneBudget *b, _Atomic uint64_t *process_used);
/* The compiles b's limit is checked against: the shared count, else b's own. */
uint64_t ane_budget_process_used(const AneBudget *b);
/* Sets n compiles aside for `who`; false (after reporting) if the budget
 * cannot afford them. */
bool ane_budget_reserve(AneBudget *b, uint64_t n, const char *who, Diag *d);
/* Gives back what is left of a reservation. */
void ane_budget_unreserve(AneBudget *b, uint64_t n);
/* Counts one compile of `what` before the device is asked; from_reserve
 * draws on a reservation (and fails when it is spent, rather than reach
 * into the rest). False (after reporting the limit, its value, where
 * it came from and what to do) when the budget is spent. */
bool ane_budget_charge(AneBudget *b, bool from_reserve, const char *what, Diag *d);
/* The reference's needs_restart: no compile is left outside reservations. */
bool ane_budget_needs_restart(const AneBudget *b);

#endif
