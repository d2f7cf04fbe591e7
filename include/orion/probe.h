/*
 * Hardware probes (orion-run probe): small programs written as bare model
 * directories (model.mil, no weights) in a private temporary directory,
 * opened with orion_open and prepared and run on any OrionBackend, to
 * measure what the constraint table's per-chip figures come from: the
 * newest MIL dialect accepted, the smallest surface accepted, the largest channel count, whether concat and
 * gelu are accepted, the SRAM cliff, the dispatch overhead and the compile
 * budget. A rejection is a prepare or run that fails (or gives a wrong
 * result); its error text is kept. Every probe is bounded in sizes, program
 * count and runs. The report becomes JSON in the table's format
 * (orion_probe_report_json). See docs/ane-backend.md, "Validating on a Mac".
 */
#ifndef ORION_PROBE_H
#define ORION_PROBE_H

#include "orion/backend.h"
#include "orion/constraint_table.h"

typedef enum OrionProbeKind {
  ORION_PROBE_DIALECT,  /* first: a dialect the device refuses would fail every other probe */
  ORION_PROBE_CHANNELS, /* runs before the surface probe, which stays below its limit */
  ORION_PROBE_SURFACE,
  ORION_PROBE_CONCAT,
  ORION_PROBE_GELU,
  ORION_PROBE_SRAM,
  ORION_PROBE_DISPATCH,
  ORION_PROBE_COMPILES, /* last: it may use up the process's budget */
  ORION_PROBE_COUNT
} OrionProbeKind;

/* "dialect", "channels", "surface", "concat", "gelu", "sram", "dispatch", "compiles". */
const char *orion_probe_name(OrionProbeKind k);
/* The kind called name; false if none. */
bool orion_probe_from_name(const char *name, OrionProbeKind *out);

/* Every probe's program is [1, C, 1, PROBE_WIDTH] fp16 (channel-first, the
 * ANE's layout; a width of 32 satisfies every reported width rule), so a
 * surface is C x 64 bytes. */
#define ORION_PROBE_WIDTH 32u

typedef struct OrionProbeOptions {
  unsigned only;            /* bits 1u << OrionProbeKind; 0: every probe */
  /* The MIL dialect of the programs; if the dialect probe finds the
   * device refuses it, the newest one it accepts. */
  MilTarget target;
  uint32_t max_compiles;    /* the compile-budget probe stops here (0: 200) */
  uint64_t max_surface_bytes; /* the surface search's top (0: 1 MiB) */
  uint64_t max_channels;    /* the channel search's top (0: 262144) */
  uint64_t max_working_set; /* the SRAM series' largest working set (0: 96 MiB) */
  /* The smallest surface the device takes when the surface probe does not
   * run (the table's figure; 0: none known): the SRAM series starts at the
   * first size whose surfaces reach it, as a smaller one is refused. */
  uint64_t min_surface_bytes;
  uint32_t repeats;         /* timed runs per SRAM point, best kept (0: 5) */
  uint32_t dispatch_runs;   /* timed runs of the dispatch probe (0: 100) */
  /* Milliseconds to wait after a rejected program before the next: a failed
   * compile restarts the ANE's compile service, and a compile sent while it
   * restarts fails for that reason alone (peers report ~15 s). 0: none. */
  uint32_t pace_ms;
  const char *temp_parent;  /* where the private directory is made (NULL: $TMPDIR, else /tmp) */
  /* One line of progress (no newline), or NULL. */
  void (*progress)(void *ctx, const char *line);
  void *progress_ctx;
  bool verbose; /* progress for every program, not only every probe */
} OrionProbeOptions;

/* One program tried by a search. */
typedef struct OrionProbeAttempt {
  uint64_t size; /* channels */
  bool accepted;
  char *error;   /* NULL when accepted */
} OrionProbeAttempt;

/* A bounded search for a limit: doubling (or halving) from a start, then
 * bisection between the last accepted and the first rejected size. */
typedef struct OrionProbeSearch {
  bool ran;
  bool found;      /* both an accepted and a rejected size were seen */
  bool all_accepted;     /* every size up to the cap was accepted (channels) */
  bool none;       /* no size in the range was accepted */
  uint64_t accepted; /* channels: the largest accepted; surface: the smallest accepted */
  uint64_t rejected; /* the neighbour that was rejected (when found) */
  uint64_t lo, hi;   /* the range searched, in channels */
  char *error;       /* the error at the boundary (when found or none) */
  OrionProbeAttempt *attempts;
  uint32_t nattempts;
} OrionProbeSearch;

/* The same relu program in each dialect (ios16 and ios17 are program(1.0),
 * ios18 program(1.3)). */
typedef struct OrionProbeDialects {
  bool ran;
  bool accepted[CONSTRAINT_TARGET_COUNT]; /* indexed by MilTarget */
  char *error[CONSTRAINT_TARGET_COUNT];
  bool found;       /* one was accepted */
  MilTarget newest; /* the newest accepted (when found) */
} OrionProbeDialects;

typedef struct OrionProbeAcceptance {
  bool ran, accepted;
  const char *rule; /* "ANE001" */
  char *error;
} OrionProbeAcceptance;

typedef struct OrionProbePoint {
  uint64_t n;                 /* matmul of two [1, 1, n, n] */
  uint64_t working_set_bytes; /* both inputs and the output, fp16 */
  double flops;               /* 2 n^3 */
  double best_ms;
  double ns_per_flop;
} OrionProbePoint;

typedef struct OrionProbeSram {
  bool ran;
  OrionProbePoint *points;
  uint32_t npoints;
  bool knee_found;
  uint64_t knee_bytes; /* the largest working set before time per FLOP rose by 30% over its best so far */
  char *error;         /* a size that failed ends the series */
} OrionProbeSram;

typedef struct OrionProbeDispatch {
  bool ran, ok;
  uint32_t runs;
  uint64_t channels;
  double best_ms, median_ms;
  char *error;
} OrionProbeDispatch;

typedef struct OrionProbeCompiles {
  bool ran;
  uint32_t cap;
  bool failed;          /* a compile failed (or computed a wrong result) before the cap */
  uint32_t budget;      /* programs prepared in this process before that failure (every probe's) */
  uint32_t this_probe;  /* of them, prepared by this probe (and kept loaded) */
  char *error;
} OrionProbeCompiles;

typedef struct OrionProbeReport {
  char *backend;
  MilTarget target; /* the dialect the probes after the dialect probe used */
  OrionProbeDialects dialects;
  OrionProbeSearch channels, surface;
  OrionProbeAcceptance concat, gelu;
  OrionProbeSram sram;
  OrionProbeDispatch dispatch;
  OrionProbeCompiles compiles;
  uint32_t prepared; /* programs prepared successfully by every probe */
} OrionProbeReport;

/* Runs the selected probes on b. False (after reporting through d) only when
 * the probes could not run at all (no temporary directory); rejections are
 * results, kept in the report. Free the report with orion_probe_report_free. */
bool orion_probe_run(OrionBackend *b, const OrionProbeOptions *opt, OrionProbeReport *r, Diag *d);
void orion_probe_report_free(OrionProbeReport *r);

/* What the report says in the constraint table's format: an object
 * {"chips": {chip: ENTRY}, "probe": {...the measurements...}}, ENTRY a
 * complete chip entry of constraints/ane_constraints.json (the figures the
 * probes found, the table's own entry for the rest, or the target's defaults
 * for a chip the table lacks), "probe" everything measured. `version` and
 * `date` go into the sources. The caller frees the text. */
char *orion_probe_report_json(const OrionProbeReport *r, const ConstraintTable *table, const char *chip,
                              const char *version, const char *date);
/* The human summary, one line per probe that ran. */
void orion_probe_report_summary(const OrionProbeReport *r, StrBuf *out);

#endif
