/*
 * The compile pipeline as one library call: .oir source (a file or text) or
 * an IR module in, a package (or the text of --emit) out. orionc is a thin
 * driver over it; `orion-run patch --verify` recompiles through it; the
 * training compiler and the model converter build an IrModule and call
 * orion_compile_module. See docs/compile-api.md.
 *
 * The pipeline: parse and verify -> inline -> weight overrides and source
 * check -> the pass pipeline -> the constraint check -> MIL and weights ->
 * the package (through the compile cache when one is given). Diagnostics go
 * through the caller's Diag; nothing is printed otherwise, no environment
 * variable is read and no process-wide state is changed (pass plugins are
 * loaded by the caller, orion_compile_load_plugins).
 */
#ifndef ORION_COMPILE_H
#define ORION_COMPILE_H

#include "orion/autodiff.h"
#include "orion/constraints.h"
#include "orion/package.h"
#include "orion/passes.h"

/* What a compile produces. */
typedef enum OrionCompileEmit {
  ORION_EMIT_PACKAGE, /* the package at out_package */
  ORION_EMIT_OIR,     /* result->text: the canonical .oir (see inline_calls, legalize) */
  ORION_EMIT_MIL,     /* result->text: the MIL of every function (weights laid out in memory) */
  ORION_EMIT_NONE,    /* check only: passes and constraints, nothing written */
  ORION_EMIT_DOT,     /* result->text: a Graphviz drawing after the passes */
} OrionCompileEmit;

/* One weight taken from another file than its source (orionc --weights-override / --weight-override). */
typedef struct OrionWeightOverride {
  const char *name; /* the weight (inlined name) for a .npy file; NULL: every key of a .safetensors file */
  const char *file;
} OrionWeightOverride;

/* Observers of a compile's progress (all optional). */
typedef struct OrionCompileHooks {
  void *ctx;
  void (*progress)(void *ctx, const char *message);      /* orionc -v */
  void (*phase)(void *ctx, const char *name, double ms); /* a phase ended (orionc --time) */
  void (*timing)(void *ctx, const char *detail);         /* a breakdown line of the last phase */
  /* The temporary directory the package is being written into (beside
   * out_package), and NULL once it is gone again, for a caller that wants
   * to know (orion_compile_cleanup removes it; a driver that only wants it
   * gone on SIGINT/SIGTERM has temp_cleanup_on_signals, orion/temporaries.h). */
  void (*temp_dir)(void *ctx, const char *path);
  /* Called right before that directory is made (then temp_dir follows, with
   * NULL if it could not be made): a driver holding a lock from one to the
   * other never misses a directory that exists (optional). */
  void (*temp_dir_begin)(void *ctx);
} OrionCompileHooks;

/* Every option of orionc that affects the result. The arrays are the
 * caller's and must outlive the call. orion_compile_options_init sets the
 * defaults (orionc's with no options). */
typedef struct OrionCompileOptions {
  OrionCompileEmit emit;
  bool inline_calls; /* ORION_EMIT_OIR: after expanding calls */
  bool legalize;     /* ORION_EMIT_OIR: after the pass pipeline */
  bool summary;      /* result->summary: functions, inputs, outputs, weights, op counts */
  bool summary_json; /* result->summary as one JSON object (orionc --summary --json) */

  MilTarget target;
  bool target_given; /* false: the chip's newest dialect, or ios18 without a chip */
  const char *chip;  /* an ANE generation of the constraint table ("m4"), or NULL */

  /* The pipeline (-O0/-O1 or --passes), --print-after, --verify-each,
   * --time-passes, and the pass options (--lora, --fp16-range-guard). The
   * target's SRAM budget and minimum surface are filled in by the compile. */
  PassManagerOptions passes;
  const char *const *plugins; /* the pass plugins loaded, by path: part of the cache key */
  uint32_t nplugins;

  const ConstraintTable *constraints; /* NULL: the built-in table */
  bool no_lint;                       /* skip the constraint check */
  const char *const *allow;           /* constraint ids whose violations are warnings */
  uint32_t nallow;
  bool report_notes;                  /* report the check's notes too (orionc -v) */

  bool check_weights; /* open the files that params name (needed when weights are written) */
  bool clamp_fp16;    /* clamp weights beyond fp16's range (a warning) instead of failing */
  bool no_dedup;      /* one blob per weight, even equal ones */
  const OrionWeightOverride *overrides;
  uint32_t noverrides;

  const char *cache_dir;    /* the compile cache, or NULL for none */
  uint64_t cache_max_bytes; /* its size limit (default COMPILE_CACHE_DEFAULT_MAX_BYTES) */

  /* Recorded in the manifest (CompileArguments): the options in orionc's
   * spelling that recompile the same program (orion_compile_args_parse
   * builds them); `orion-run patch --verify` replays them. */
  const char *const *compile_args;
  uint32_t ncompile_args;
  /* orion_compile_module: the source's name and text for the manifest (the
   * text is hashed; "" if NULL). The other entries take them from the input. */
  const char *source_name;
  const char *source_text;
  size_t source_len;

  /* The training contract recorded in the package (manifest Training), or
   * NULL (orionc --train-contract FILE.json reads one). Not with `train`. */
  const PkgTraining *training;
  /* orionc --train[=FUNC]: differentiate the entry function's `loss`
   * (ad_differentiate) and write a training package of its forward and
   * backward with the contract made from it (docs/training.md, "orionc
   * --train"). train_function names the entry, or NULL: the one entry with
   * an output `loss`. autodiff holds the --trainable/--frozen globs; each
   * must match a float param of the entry (an error otherwise). */
  bool train;
  const char *train_function;
  AutodiffOptions autodiff;

  OrionCompileHooks hooks;
} OrionCompileOptions;

typedef enum OrionCompileStatus {
  ORION_COMPILE_OK,
  ORION_COMPILE_INPUT_ERROR,   /* the program (or its weights) has errors: orionc exits 1 */
  ORION_COMPILE_OPTIONS_ERROR, /* an option is wrong (an unknown pass, constraint id, ...): orionc exits 2 */
} OrionCompileStatus;

typedef struct OrionCompileResult {
  OrionCompileStatus status;
  StrBuf text;     /* the emitted text (ORION_EMIT_OIR, _MIL, _DOT) */
  StrBuf summary;  /* with options.summary */
  PackageStats stats;
  bool from_cache; /* the package was copied from the compile cache */
  uint32_t lint_errors, lint_warnings; /* the constraint check's (errors only when allowed) */
} OrionCompileResult;

void orion_compile_options_init(OrionCompileOptions *o);
void orion_compile_result_free(OrionCompileResult *r);

/* Checks the chip against the constraint table and sets the target from it
 * when none was given. false: `err` says why (a usage error), or, when
 * empty, d does. The compile entries do this too. */
bool orion_compile_options_resolve(OrionCompileOptions *o, Diag *d, char *err, size_t errlen);

/* Loads pass plugins into the process-wide pass registry (once per process:
 * a second load of the same passes fails to register them). */
bool orion_compile_load_plugins(const char *const *paths, uint32_t n, Diag *d);

/* Compiles the .oir file at `path` ("-" reads standard input). With
 * ORION_EMIT_PACKAGE the package is written atomically to out_package (NULL
 * otherwise): on failure nothing new is left there. Returns result->status
 * == ORION_COMPILE_OK; result is always filled and is freed by the caller.
 * Messages carry file:line:col; d->sources, when NULL, is set to a set
 * owned by the call for its duration. */
bool orion_compile_file(const char *path, const OrionCompileOptions *o, const char *out_package,
                        OrionCompileResult *result, Diag *d);
/* The same for source text; `name` names it in messages and the manifest. */
bool orion_compile_text(const char *name, const char *text, size_t len, const OrionCompileOptions *o,
                        const char *out_package, OrionCompileResult *result, Diag *d);
/* The same from verified IR (built by the caller, e.g. from a model file);
 * m is changed in place and stays the caller's. d->sources must be the set
 * that m's spans refer to (NULL when m has none). */
bool orion_compile_module(IrModule *m, const OrionCompileOptions *o, const char *out_package,
                          OrionCompileResult *result, Diag *d);

/* ---- orionc's spelling of the options that shape the package ---- */

#define ORION_COMPILE_MAX_ARGS 128
#define ORION_COMPILE_MAX_LORA 32
#define ORION_COMPILE_MAX_PLUGINS 16
#define ORION_COMPILE_MAX_ALLOW 32
#define ORION_COMPILE_MAX_OVERRIDES 64
#define ORION_COMPILE_MAX_GLOBS 64

/* Options parsed from arguments, with the storage they point into; the
 * arguments themselves are referenced, not copied (they must outlive it). */
typedef struct OrionCompileArgs {
  OrionCompileOptions options;
  const char *compile_args[ORION_COMPILE_MAX_ARGS]; /* recorded: files with absolute paths */
  LoraSpec lora[ORION_COMPILE_MAX_LORA];
  char *lora_patterns[ORION_COMPILE_MAX_LORA];
  const char *plugins[ORION_COMPILE_MAX_PLUGINS];
  const char *allow[ORION_COMPILE_MAX_ALLOW];
  OrionWeightOverride overrides[ORION_COMPILE_MAX_OVERRIDES];
  char *override_names[ORION_COMPILE_MAX_OVERRIDES];
  const char *trainable[ORION_COMPILE_MAX_GLOBS]; /* --trainable=GLOB */
  const char *frozen[ORION_COMPILE_MAX_GLOBS];    /* --frozen=GLOB */
  const char *gather_grad;                        /* --gather-grad=FORM as given, or NULL */
} OrionCompileArgs;

typedef enum OrionArgStatus {
  ORION_ARG_NOT_MINE, /* not an option that shapes the package: the driver's */
  ORION_ARG_TAKEN,
  ORION_ARG_INVALID, /* err says why, in orionc's words */
} OrionArgStatus;

void orion_compile_args_init(OrionCompileArgs *a);
void orion_compile_args_free(OrionCompileArgs *a);
/* One argument: --target=, --chip=, -O0/-O1, --passes=, --lora=,
 * --fp16-range-guard, --load-pass=, --allow=, --no-lint, --no-dedup,
 * --clamp-fp16, --weights-override=, --weight-override=, --train,
 * --train=FUNC, --trainable=GLOB, --frozen=GLOB. Each taken one is
 * recorded in options.compile_args. */
OrionArgStatus orion_compile_args_parse(OrionCompileArgs *a, const char *arg, char *err, size_t errlen);

/* ---- training contracts ---- */

/* Reads orionc --train-contract FILE.json (docs/training.md, "The training
 * contract"): {"forward", "backward", "loss", "vocabulary"?,
 * "backward_inputs": [{"input", "from": "output"|"input"|"loss_scale",
 * "name"?}], "gradients": [{"output", "param"}], "trainable": [names]}.
 * Free the result with package_training_free. */
bool orion_train_contract_read_json(const char *path, PkgTraining **out, Diag *d);

/* ---- cleanup of an interrupted compile ---- */

/* Removes the temporary package directory that a compile reported through
 * hooks.temp_dir and has not removed yet (NULL: nothing), safely while the
 * compile still runs: it is renamed out of the writer's way first, so a
 * package being put in place is either complete or not put there at all.
 * Its marker goes too (orion/temporaries.h). Not async-signal-safe. orionc
 * itself no longer needs it: temp_cleanup_on_signals removes every
 * temporary the process has registered, this one included. */
void orion_compile_cleanup(const char *temp_dir);

#endif
