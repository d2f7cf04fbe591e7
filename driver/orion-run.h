/*
 * The parts of orion-run that live in their own files: the `patch`, `plot`,
 * `train`, `generate` and `probe` subcommands and the check behind patch --verify.
 */
#ifndef ORION_RUN_H
#define ORION_RUN_H

#include "orion/backend.h"
#include "orion/cpu.h"
#include "orion/patch.h"

/* A subcommand's diagnostics: on stderr as `program`, quoting the sources
 * read through `sources`. Opened once its options are parsed, closed on every
 * way out; d stays where it is (it points at sources). */
typedef struct RunDiag {
  SourceSet sources;
  Diag d;
} RunDiag;

static inline void run_diag_open(RunDiag *r, const char *program) {
  srcset_init(&r->sources);
  diag_init(&r->d, &r->sources);
  r->d.program = program;
}

static inline void run_diag_close(RunDiag *r) { srcset_free(&r->sources); }

/* --ane-compile-budget N, --ane-resident-cap N (orion-run and every
 * subcommand that opens a backend: patch, train, generate): the value of
 * `option` into *out, a whole number from 1 to 1000000; -1 to go on, or the
 * usage error's exit status. */
int orion_run_take_ane_limit(const char *program, const char *option, const char *v, uint32_t *out);

/* The two options' CliOption entries in a subcommand's table (cli_options.h),
 * their ids the subcommand's; orion-run's own have the long help. */
#define ORION_RUN_ANE_LIMIT_OPTIONS(budget_id, cap_id)                                                               \
  {budget_id, 0, "ane-compile-budget", CLI_VALUE, 0, " N", "as orion-run's", "a count from 1 to 1000000"},           \
  {cap_id, 0, "ane-resident-cap", CLI_VALUE, 0, " N", "as orion-run's", "a count from 1 to 1000000"}

/* --profile's report to stderr: "orion-run: WHAT of RUNS runs, ...", every op
 * kind of the n entries and the 10 slowest statements at their place in the
 * MIL (orion-run-profile.c); a MIL file under the directory ran_at (a working
 * copy, or NULL) is shown under shown_as instead (the package it copies). */
void orion_run_print_profile(const char *what, const OrionStmtTime *entries, uint32_t n, SourceSet *sources,
                             uint64_t runs, const char *ran_at, const char *shown_as);

/* `orion-run patch ...` (argv[0] is "patch"); returns the exit status. */
int orion_run_patch(int argc, char **argv);
/* `orion-run plot LOG.jsonl -o FILE.svg` (argv[0] is "plot"): the loss curve. */
int orion_run_plot(int argc, char **argv);
/* `orion-run train PACKAGE --data FILE --steps N --lr LR ...` (argv[0] is "train"). */
int orion_run_train(int argc, char **argv);
/* `orion-run probe [--backend ane] [--chip NAME] [-o FILE] ...` (argv[0] is "probe"). */
int orion_run_probe(int argc, char **argv);
/* `orion-run generate PACKAGE --tokenizer PATH --prompt TEXT ...` (argv[0] is "generate"). */
int orion_run_generate(int argc, char **argv);

/* Compiles the package's source again with the new weights (the files given
 * to the patch: safetensors, or .npy under npy_names[i] when not NULL) and
 * checks that the patched package has the same MIL text and weight bytes and
 * computes bit-identical outputs on random inputs. Messages name the
 * package `shown` (orion-run patch verifies a patched copy of the package it
 * was given, so that a failure leaves that package as it was). */
bool orion_run_verify_patch(const char *package, const char *shown, const char *source, const char *const *files,
                            const char *const *npy_names, uint32_t nfiles, bool verbose, Diag *d);

/* The probe input of patch --verify: deterministic small random values (valid
 * token ids, moderate activations) for input `info`, from *state (start at 1);
 * t->data is allocated (free it). */
void orion_run_fill_probe_input(CpuTensor *t, const OrionTensorInfo *info, uint64_t *state);

/* orion-run patch --backend B, B not cpu (orion-run-patch-backend.c): the
 * package opened and every function prepared on B before the patch, then
 * its weights updated by B's strategy (orion_backend_update_weights). */
typedef struct PatchOnBackend {
  OrionBackend *backend;
  OrionProgram *program;
  OrionExec **execs; /* one per function */
  uint32_t nexecs;
} PatchOnBackend;
bool patch_backend_open(PatchOnBackend *pb, const char *backend, const OrionBackendOptions *options,
                        const char *package, Diag *d);
/* After the package's files were patched. -v: the strategy and the compiles it took. */
bool patch_backend_update(PatchOnBackend *pb, bool verbose, Diag *d);
/* --verify: every updated function's outputs on the probe input against a
 * fresh open, compile and run of the patched package on a new instance of
 * the same backend, bit for bit. */
bool patch_backend_verify(PatchOnBackend *pb, const char *package, const char *backend,
                          const OrionBackendOptions *options, Diag *d);
void patch_backend_close(PatchOnBackend *pb);

/* LoRA adapters as inputs (orion-run --adapter; the names' rules in
 * orion/lora_names.h). Binds the tensors of a PEFT-style safetensors adapter to function fn's LoRA
 * inputs (allocating inputs[i].data, marking bound[i]); every tensor must find
 * its input with the same shape. */
bool orion_run_bind_adapter(OrionProgram *p, uint32_t fn, const char *file, CpuTensor *inputs, bool *bound, Diag *d);
/* Zeros for the LoRA inputs still unbound: the base model's outputs. */
void orion_run_zero_lora_inputs(OrionProgram *p, uint32_t fn, CpuTensor *inputs, bool *bound);

/* orion-run --json: what a run did (orion-run-json.c). */
typedef struct OrionRunReport {
  const char *program, *function, *backend;
  bool numerics_fp32;
  uint32_t runs;
  double total_ms, best_ms;
  const CpuTensor *outputs; /* as computed */
  const char *const *output_names, *const *output_files;
  uint32_t noutputs;
  const OrionExec *exec; /* with --profile: its statement times; else NULL */
  SourceSet *sources;
} OrionRunReport;
/* The report as one JSON object; free() it. */
char *orion_run_report_json(const OrionRunReport *r);

/* The outputs of function `function` of package `program` (names[i] the
 * name of outputs[i], *n of them) with each of its manifest's OutputGroups
 * joined into one output named as the group (in an arena string), in place
 * of its first part; the other parts are freed and dropped. A bare directory
 * has none. False after reporting a group that does not fit its parts. */
bool orion_run_join_output_groups(const char *program, const char *function, OrionTensor *outputs,
                                  const char **names, uint32_t *n, Arena *arena, Diag *d);

#endif
