/*
 * The ANE constraint table (constraints/ane_constraints.json, embedded at
 * build time) and its loader: the rules ANE001.. with their category,
 * severity, checks, ops and fixing pass, the per-target parameters and the
 * chips. A library of its own (orion_constraint_table, constraints/table.c)
 * that needs no compiler code, so that the runtime can key its ANE failure
 * simulation on the same ids; the checkers and reporters built on it are in
 * orion/constraints.h. See docs/constraints.md.
 */
#ifndef ORION_CONSTRAINT_TABLE_H
#define ORION_CONSTRAINT_TABLE_H

#include "orion/ir.h" /* IrOpKind (ops.def), a header-only use */
#include "orion/mil_target.h"
#include "orion/support.h"

/* Limits of a table: input beyond them is an error, never truncated. */
#define CONSTRAINTS_MAX_BYTES (1u << 20) /* size of the JSON text */
#define CONSTRAINTS_MAX_RULES 999u       /* ANE001..ANE999 */
#define CONSTRAINTS_MAX_TEXT 4096u       /* bytes in one string field */
#define CONSTRAINTS_SCHEMA_VERSION 1u

typedef enum ConstraintCategory {
  CAT_COMPILE_FAILURE,   /* the ANE compiler rejects the program */
  CAT_EVAL_FAILURE,      /* it compiles, evaluation fails */
  CAT_SILENT_WRONG_DATA, /* it runs and gives wrong (or stale) results */
  CAT_COMPILER_LEVEL,    /* MIL the ANE's parser rejects although MIL allows it */
  CAT_PERFORMANCE,
  CAT_NUMERIC,
  CAT_CRASH,
  CAT_COUNT
} ConstraintCategory;

/* How a rule can be checked (bits of Constraint.checks). */
enum {
  CHECK_STATIC_IR = 1u << 0,      /* from the graph IR */
  CHECK_STATIC_PACKAGE = 1u << 1, /* from a written package (manifest, MIL, weights) */
  CHECK_RUNTIME = 1u << 2,        /* only when the program runs */
  CHECK_ADVISORY = 1u << 3,       /* not checkable: documented only */
};

/* A number a rule states (the table's optional "figures" of a rule), e.g.
 * ANE005's compiles_per_process: what the runtime tracks instead of finding
 * the limit by failure. */
typedef struct ConstraintFigure {
  const char *name; /* lowercase words joined by '_': "compiles_per_process" */
  uint64_t value;
} ConstraintFigure;

#define CONSTRAINTS_MAX_FIGURES 8u /* per rule */

typedef struct Constraint {
  const char *id;      /* "ANE001" */
  uint32_t number;     /* 1 */
  const char *name;    /* "no-concat": lowercase words joined by '-' */
  const char *summary; /* one line */
  ConstraintCategory category;
  DiagLevel severity;  /* of a violation that reaches the device */
  unsigned checks;     /* CHECK_* */
  const IrOpKind *ops; /* ops the rule concerns (may be none) */
  uint32_t nops;
  const char *symptom;
  const char *workaround;
  const char *fixed_by; /* the pass that fixes it, or NULL */
  const char *source;
  bool disputed;
  const char *dispute_note; /* set iff disputed */
  const char *notes;        /* other caveats, or NULL */
  const ConstraintFigure *figures; /* in table order (may be none) */
  uint32_t nfigures;
  /* The table's "placement": "cpu": a statement that breaks this rule runs
   * on the CPU in the ane backend's partition, so the backend accepts it
   * (docs/ane-backend.md); false for a rule about the whole program or the
   * surfaces, which placement cannot mend. */
  bool placed_on_cpu;
} Constraint;

/* Per-target parameters (the table's "parameters" section documents each). */
typedef enum ConstraintParamId {
  PARAM_PROGRAM_VERSION, /* string: "1.0" / "1.3" */
  PARAM_OPSET,           /* string: "ios18" */
  PARAM_MIN_SURFACE_BYTES,
  PARAM_SRAM_BUDGET_BYTES,
  PARAM_MAX_TENSOR_DIM,
  PARAM_COUNT
} ConstraintParamId;

typedef struct ConstraintParam {
  const char *name; /* "min_surface_bytes" */
  const char *description;
  const char *unit; /* "bytes", "elements" or "" */
  const char *rule; /* id of the rule it belongs to, or NULL */
  const char *source;
  bool disputed;
  const char *dispute_note; /* set iff disputed */
} ConstraintParam;

typedef struct ConstraintTarget {
  MilTarget target;
  const char *chip; /* the chip whose numbers these are (constraints_chip_target), or NULL */
  const char *program_version;
  const char *opset;
  uint64_t min_surface_bytes;
  uint64_t sram_budget_bytes;
  uint64_t max_tensor_dim;
} ConstraintTarget;

#define CONSTRAINT_TARGET_COUNT 3 /* MIL_IOS16..MIL_IOS18 */

/* One fact about a chip, with where it comes from. An inherited value is the
 * default of the chip's target, kept because no report gives a figure for
 * this chip (the source says so). */
typedef struct ConstraintChipValue {
  uint64_t value; /* the number (unused for the target) */
  bool inherited;
  const char *source;
  bool disputed;
  const char *dispute_note; /* set iff disputed */
} ConstraintChipValue;

/* An ANE generation: the newest dialect it takes and its own numbers, where
 * they differ from the targets' defaults (the table's "chips" section). */
typedef struct ConstraintChip {
  const char *name;        /* "m1" */
  const char *description; /* "M1 / M1 Pro / Max / Ultra (H13)" */
  MilTarget target;        /* the newest target it supports (its "target" entry, documented by `dialect`) */
  ConstraintChipValue dialect, min_surface_bytes, sram_budget_bytes, max_tensor_dim;
} ConstraintChip;

#define CONSTRAINTS_MAX_CHIPS 32u

typedef struct ConstraintTable {
  Arena arena; /* owns everything below */
  uint32_t schema_version;
  const char *description;
  Constraint *rules; /* in table order */
  uint32_t nrules;
  ConstraintParam params[PARAM_COUNT];
  ConstraintTarget targets[CONSTRAINT_TARGET_COUNT]; /* indexed by MilTarget */
  ConstraintChip *chips; /* in table order */
  uint32_t nchips;
} ConstraintTable;

/* Whether a pass of this name exists (the passes' registry knows). */
typedef bool ConstraintPassExists(const char *name);

/* Parses and validates a table; NULL after reporting every problem through d
 * as "NAME: message" (NAME is used in messages only). A 'fixed_by' must name
 * a pass that pass_exists knows; with pass_exists NULL (the runtime, which
 * links no passes) any well-formed name is taken. The compiler's tools load
 * tables with constraints_load (orion/constraints.h), which checks against
 * the pass registry. */
ConstraintTable *constraints_parse(const char *name, const char *json, size_t len, ConstraintPassExists *pass_exists,
                                   Diag *d);
/* The text of the table shipped with orion (embedded at build time). */
const char *constraints_builtin_text(size_t *len);
void constraints_free(ConstraintTable *t);

const Constraint *constraints_find(const ConstraintTable *t, const char *id); /* NULL if none */
const ConstraintTarget *constraints_target(const ConstraintTable *t, MilTarget target);
const ConstraintChip *constraints_chip(const ConstraintTable *t, const char *name); /* NULL if none */
/* "m1, m2, m3, m4 or m5", for messages. */
void constraints_chip_names(const ConstraintTable *t, StrBuf *out);
/* The data a program for `target` on `chip` is checked and planned with: the
 * target's dialect, the chip's minimum surface, SRAM budget and dimension limit. */
ConstraintTarget constraints_chip_target(const ConstraintTable *t, const ConstraintChip *chip, MilTarget target);
const char *constraint_category_name(ConstraintCategory c); /* "compile-failure" */
const char *constraint_severity_name(DiagLevel level);      /* "error", "warning", "note" */
bool constraint_severity_from_name(const char *s, DiagLevel *out);
/* "static-ir, runtime" */
void constraint_checks_print(unsigned checks, StrBuf *out);
bool constraint_has_op(const Constraint *c, IrOpKind op);
/* The rule's figure of that name; NULL if it states none. */
const ConstraintFigure *constraint_figure(const Constraint *c, const char *name);
/* The .oir name of an op the table can name ("concat"), as ir_op_info
 * gives it but without IR code; NULL for one ops.def does not spell. */
const char *constraint_op_name(IrOpKind op);

#endif
