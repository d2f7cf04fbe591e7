/*
 * The ANE rules that can be decided from MIL text and a package's manifest,
 * before anything runs: one registry (rule id -> checker -> what it reads)
 * shared by the linter (orion-lint on packages and .mil files,
 * orion/constraints.h) and the runtime's ANE failure simulation
 * (orion_ane_check, orion/ane_check.h). A library of its own
 * (orion_ane_rules, constraints/ane_rules.c and check_package.c) that needs
 * only support, mil, pkgio and the constraint table, so that the runtime can
 * link it without compiler code.
 *
 * The registry lists every rule of the table whose `check` includes
 * static-package or runtime: with a checker when the program decides it
 * (MIL alone, or the manifest's I/O table too), or with the reason it can
 * only be seen while the ANE runs. The test suite holds the registry and
 * the table to each other.
 */
#ifndef ORION_ANE_RULES_H
#define ORION_ANE_RULES_H

#include "orion/constraint_table.h"
#include "orion/mil_reader.h"

/* What a rule's checker reads. */
typedef enum AneRuleNeeds {
  ANE_RULE_MIL,      /* the MIL text (and the weight files it names) */
  ANE_RULE_MANIFEST, /* the manifest's I/O table: a bare MIL file or directory has none */
  ANE_RULE_AT_RUN,   /* nothing a program shows: only the device run decides it (no checker) */
} AneRuleNeeds;

/* An input or output as the manifest describes it. */
typedef struct AneRuleIo {
  const char *name;     /* the .oir name */
  const char *mil_name; /* the MIL parameter or returned variable */
  uint32_t binding;     /* the manifest's Binding */
  uint64_t surface_bytes;
} AneRuleIo;

/* One function to check: MIL statements, and for manifest rules its I/O. */
typedef struct AneRuleFunction {
  const char *name;          /* named in findings; NULL for none */
  const MilProgram *program; /* its program-level attributes are checked too (may be NULL) */
  const MilFunc *funcs;      /* the MIL functions of it that are checked */
  uint32_t nfuncs;
  const AneRuleIo *inputs, *outputs; /* used only with a manifest */
  uint32_t ninputs, noutputs;
} AneRuleFunction;

/* A finding's level is the rule's severity unless the checker knows better. */
#define ANE_RULE_LEVEL (-1)

typedef struct AneRuleFinding {
  const Constraint *rule;
  int level;            /* ANE_RULE_LEVEL or a DiagLevel */
  SrcSpan span;         /* into the input's sources; file 0: none, `path` names the file */
  const char *path;     /* the manifest, when span.file is 0 */
  const char *function; /* AneRuleFunction.name */
  const char *op;       /* the MIL op of a statement the rule forbids outright, else NULL */
  const char *message;  /* lowercase, no trailing period: the linter's words */
} AneRuleFinding;

typedef void AneRuleSink(void *ctx, const AneRuleFinding *f);
/* The bytes of a weight file named by a package-relative path, or NULL with
 * *err NULL to have the library read the file itself. */
typedef const uint8_t *AneRuleWeightFile(void *ctx, const char *relpath, size_t *len, const char **err);

typedef struct AneRuleInput {
  const ConstraintTable *table;
  const ConstraintTarget *target; /* the figures checked against (e.g. constraints_chip_target's) */
  SourceSet *sources;             /* the MIL spans point into it */
  const char *dir;                /* what @model_path stands for */
  const char *manifest_path;      /* NULL without a manifest: its rules are not run */
  const AneRuleFunction *functions;
  uint32_t nfunctions;
  AneRuleWeightFile *weight_file; /* NULL: weight files are read from dir */
  void *weight_ctx;
  AneRuleSink *sink; /* told every finding */
  void *sink_ctx;
  /* Rules the caller drops (the linter's --allow) are not run; NULL: none. */
  bool (*drops)(void *sink_ctx, const Constraint *rule);
} AneRuleInput;

/* Runs every checker of the registry (in rule order, each over every
 * function), skipping manifest rules without a manifest, rules the table
 * does not have and those the caller drops. */
void ane_rules_run(const AneRuleInput *in);

/* ---- the registry ---- */

uint32_t ane_rule_count(void);
const char *ane_rule_id(uint32_t i); /* NULL past the end */
AneRuleNeeds ane_rule_needs(uint32_t i);
/* For ANE_RULE_AT_RUN: why no program shows it ("counts the compiles of a process"). */
const char *ane_rule_at_run_reason(uint32_t i);
/* The registry entry of a rule id, UINT32_MAX if none. */
uint32_t ane_rule_find(const char *id);

/* "The ANE compiler rejects concat" as the tail of a sentence: the rule's
 * summary with a capitalised first word lowered ("the ANE compiler ..."),
 * an acronym or op name kept. */
void ane_rule_summary_lower(const Constraint *rule, StrBuf *out);

#endif
