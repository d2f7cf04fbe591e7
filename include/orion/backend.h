/*
 * The backend interface: one table of functions that every backend
 * implements (the CPU reference backend, the test-only checking backend,
 * the ANE backend on macOS), and a registry that selects one by name. A
 * caller opens a backend once (it owns its threads, its BLAS settings or its
 * device client), prepares functions of programs that orion_open() loaded,
 * runs them on tensors the caller owns, updates their weights in one call,
 * reads their profile and releases them. See docs/architecture.md.
 *
 * The shape follows ggml's backend interface in llama.cpp: the vtable is
 * plain data (OrionBackendVtable), a backend's own state hangs off an opaque
 * pointer, and everything above the interface (orion-run, training,
 * generation) sees only OrionBackend and OrionExec.
 *
 * Errors are reported through the caller's Diag, at MIL statements where a
 * statement is to blame (the Diag must have the SourceSet the program was
 * opened with).
 */
#ifndef ORION_BACKEND_H
#define ORION_BACKEND_H

#include "orion/runtime.h"

/* A dense row-major tensor at the API boundary, owned by the caller.
 * Element storage by dtype: MIL_DT_FP16 uint16_t (IEEE binary16 bits),
 * MIL_DT_FP32 float, MIL_DT_INT32 int32_t, MIL_DT_BOOL bool; data aligned
 * for that type. */
typedef struct OrionTensor {
  MilDType dtype;
  uint32_t rank;
  int64_t dims[MIL_MAX_RANK];
  void *data;
} OrionTensor;

/* How a function's float results are rounded (the CPU backend's numerics,
 * orion/cpu.h): ANE = fp16 storage, every fp16 result rounded to fp16 after
 * its op, overflow to +-inf, as on the device; FP32 = float results in fp32. */
typedef enum OrionNumerics { ORION_NUMERICS_ANE, ORION_NUMERICS_FP32 } OrionNumerics;

/* What a backend can do; callers ask before relying on a feature. */
typedef struct OrionBackendCaps {
  bool numerics_fp32;            /* ORION_NUMERICS_FP32 is available (ANE numerics always are) */
  bool profiling;                /* per-statement times (OrionPrepareOptions.profile) */
  bool check_finite;             /* stop at the first inf or NaN (OrionPrepareOptions.check_finite) */
  uint32_t update_strategies;    /* bit (1u << s) for each OrionReloadStrategy s it carries out */
  bool inputs_may_alias_outputs; /* an input's buffer may also be an output's */
  bool weights_in_place;         /* reads weights from the loaded program's mapping (no copy on the device) */
  /* Runs on the CPU a statement its device refuses by a rule the constraint
   * table places there (the ane backend's partition): orion_ane_check with
   * cpu_placement says what it accepts (orion-run does so). */
  bool places_refused_on_cpu;
} OrionBackendCaps;

typedef struct OrionBackendOptions {
  /* Threads the backend runs programs on, the caller's included. 0: the
   * environment variable ORION_CPU_THREADS if set, else the online cores.
   * A device backend may ignore it. */
  uint32_t threads;
  /* A device backend's per-process limits (the ane backend's compile budget
   * and resident-program cap, docs/ane-backend.md), 1 to 1000000; 0: the
   * environment's (ORION_ANE_COMPILE_BUDGET, ORION_ANE_RESIDENT_CAP) if set,
   * else the constraint table's (rule ANE005). A value past 1000000 is an
   * error at open. Others ignore them. */
  uint32_t compile_budget;
  uint32_t resident_cap;
} OrionBackendOptions;

typedef struct OrionPrepareOptions {
  OrionNumerics numerics;
  bool check_finite; /* needs caps.check_finite */
  bool profile;      /* needs caps.profiling */
  /* A device backend's buffers exactly the tensors' size, not padded to the
   * device's documented minimum (the ane backend's minimum surface):
   * orion-run probe measures the device, not orion's padding. Others ignore it. */
  bool exact_surfaces;
  /* A backend that places refused statements on the CPU (caps.
   * places_refused_on_cpu) hands them to its device instead, to be refused
   * there, and joins no short device run to the CPU (its cost model): only
   * what the device cannot hold at all (the ane backend: int32 and bool
   * values) runs on the CPU. orion-run probe measures what the device
   * accepts, and orion-run --no-ane-checks leaves the device to judge.
   * Others ignore it. */
  bool keep_refused_on_device;
} OrionPrepareOptions;

/* One statement's accumulated time (OrionPrepareOptions.profile). */
typedef struct OrionStmtTime {
  uint32_t stmt;    /* index into the MilFunc's statements */
  const char *op;   /* the op, e.g. "linear" */
  const char *name; /* its first result */
  SrcSpan loc;      /* the op in the MIL file */
  uint64_t runs;    /* how many times it ran */
  double ms;        /* milliseconds in total */
} OrionStmtTime;

/* The table a backend implements. `impl` is the backend's state (from
 * open), `exec` a prepared function's (from prepare). Every entry is
 * required of a backend that is available; one that lacks a feature says so
 * in caps, and the calls above the vtable refuse to ask for it. A backend
 * that is not available on this platform (ane off macOS) fills in only
 * name, description and available. */
typedef struct OrionBackendVtable {
  const char *name;        /* what --backend= selects, e.g. "cpu" */
  const char *description; /* one line for --help and listings */
  /* Whether this build on this machine can open the backend; when not,
   * writes the reason into why: a clause that names the backend ("the ane
   * backend is only available on macOS ..."), no final period. */
  bool (*available)(char *why, size_t len);
  void *(*open)(const OrionBackendOptions *opt, Diag *d);
  void (*close)(void *impl);
  OrionBackendCaps (*caps)(const void *impl);
  /* Checks every statement of function fn, reporting each one the backend
   * cannot run at its location; true when it can run them all. */
  bool (*supports)(void *impl, const OrionProgram *p, uint32_t fn, Diag *d);
  /* Prepares function fn of p (p outlives the result): every check that
   * does not depend on the inputs' values is done here, not at run. */
  void *(*prepare)(void *impl, OrionProgram *p, uint32_t fn, const OrionPrepareOptions *opt, Diag *d);
  /* Runs on caller-owned tensors: `in` and `out` in orion_input()/
   * orion_output() order, each of exactly the declared dtype and shape. */
  bool (*run)(void *exec, const OrionTensor *in, const OrionTensor *out, Diag *d);
  /* After the program's weights changed (orion_reload_weights moved its
   * weight pointers; the previous mapping is still valid during this call),
   * makes the prepared function use the new values. */
  bool (*weights_changed)(void *exec, Diag *d);
  uint32_t (*profile_count)(const void *exec);
  const OrionStmtTime *(*profile_stmt)(const void *exec, uint32_t i);
  void (*profile_reset)(void *exec);
  void (*release)(void *exec);
  /* Optional (NULL: nothing to say): one line on what the opened backend
   * found, for orion-run -v, e.g. the ane backend's framework and the
   * selector variants it bound. */
  void (*describe)(const void *impl, char *out, size_t len);
  /* Optional (NULL: nothing to say): one line on what the opened backend
   * has used so far, for orion-run -v after a run, e.g. the ane backend's
   * program cache (hits, misses, compiles, evictions) and compile budget. */
  void (*usage)(const void *impl, char *out, size_t len);
  /* Optional (NULL: nothing to say): one line on the device the opened
   * backend found and how it asked, for orion-run -v, e.g. the ane
   * backend's ANE architecture and the selector that gave it. */
  void (*device)(const void *impl, char *out, size_t len);
  /* Optional (NULL: the backend compiles nothing): how many compiles the
   * opened backend has asked its device for so far, retries and the
   * weight-update self-test's included (the ane backend's compile budget
   * use), so that a caller can tell what an operation cost (orion-run patch -v). */
  uint64_t (*compiles)(const void *impl);
} OrionBackendVtable;

/* ---- the registry ---- */

/* The backends of the registry, built in or not, in a fixed order ("cpu"
 * first: the default). */
uint32_t orion_backend_registry_count(void);
const OrionBackendVtable *orion_backend_registry_get(uint32_t i);
/* The backend called name, NULL if the registry has none. */
const OrionBackendVtable *orion_backend_find(const char *name);
/* "cpu, check": the names of the backends available here, comma-separated
 * (the caller frees the string). */
char *orion_backend_available_names(void);

/* ---- using a backend ---- */

typedef struct OrionBackend OrionBackend;
typedef struct OrionExec OrionExec;

/* Opens the backend called name (opt NULL: defaults). An unknown name, or a
 * backend not available on this platform, is an error that says why and
 * lists the backends available here. */
OrionBackend *orion_backend_open(const char *name, const OrionBackendOptions *opt, Diag *d);
/* Opens a backend from a table that is not in the registry (an
 * out-of-tree backend, or a test's). */
OrionBackend *orion_backend_open_vtable(const OrionBackendVtable *vt, const OrionBackendOptions *opt, Diag *d);
/* Releases every function still prepared, then the backend; NULL is fine. */
void orion_backend_close(OrionBackend *b);
const char *orion_backend_name(const OrionBackend *b);
OrionBackendCaps orion_backend_caps(const OrionBackend *b);
/* The backend's describe line into out; false (out empty) when it has none. */
bool orion_backend_describe(const OrionBackend *b, char *out, size_t len);
/* The backend's usage line into out; false (out empty) when it has none. */
bool orion_backend_usage(const OrionBackend *b, char *out, size_t len);
/* The backend's device line into out; false (out empty) when it has none. */
bool orion_backend_device(const OrionBackend *b, char *out, size_t len);

/* The backend's compiles so far (0 for one that compiles nothing). */
uint64_t orion_backend_compiles(const OrionBackend *b);
/* The strategy orion_backend_update_weights with ORION_RELOAD_AUTO uses on
 * b now: the ane backend's self-test choice once there is one, else
 * recompile; REMAP on a backend that reads weights in place. */
OrionReloadStrategy orion_backend_auto_strategy(const OrionBackend *b);
/* "reload-files", "patch-data", "recompile", "inputs", "remap", "auto". */
const char *orion_reload_strategy_name(OrionReloadStrategy s);
bool orion_backend_supports(OrionBackend *b, const OrionProgram *p, uint32_t fn, Diag *d);
/* Checks the options against the backend's caps, then prepares. */
OrionExec *orion_backend_prepare(OrionBackend *b, OrionProgram *p, uint32_t fn, const OrionPrepareOptions *opt,
                                 Diag *d);
/* Checks the number, dtype and shape of every tensor against the
 * function's declaration (an error names the tensor), then runs. */
bool orion_exec_run(OrionExec *e, const OrionTensor *in, const OrionTensor *out, Diag *d);
/* The same, into freshly allocated outputs (free each with
 * orion_tensor_free); on failure every output is left zeroed. */
bool orion_exec_run_alloc(OrionExec *e, const OrionTensor *in, OrionTensor *out, Diag *d);
OrionProgram *orion_exec_program(const OrionExec *e);
uint32_t orion_exec_function(const OrionExec *e);
uint32_t orion_exec_profile_count(const OrionExec *e);
const OrionStmtTime *orion_exec_profile_stmt(const OrionExec *e, uint32_t i);
void orion_exec_profile_reset(OrionExec *e);
/* Releases a prepared function; NULL is fine. */
void orion_exec_release(OrionExec *e);

/* Updates the weights of program p, which a patch changed in place, in
 * every function of p prepared on b — as one operation: the program's
 * weight files are mapped again (orion_reload_weights with opt), every
 * prepared function is moved to the new values while the old mapping still
 * holds, and only then is the old mapping released. opt->reload must be a
 * strategy in caps.update_strategies (AUTO: the backend's best). *changed
 * (may be NULL) tells whether the weights were new. On failure the program
 * and its prepared functions keep the old weights. */
bool orion_backend_update_weights(OrionBackend *b, OrionProgram *p, const OrionOpenOptions *opt, bool *changed,
                                  Diag *d);

/* Writes new fp32 values into the weights of program p (opened with
 * writable_weights) and tells every function of p prepared on b, as one
 * call: orion_write_weights (every value checked first: nothing is written
 * unless all are finite and fit the weight's dtype; then converted into the
 * program's weight data), then each prepared function's weights_changed.
 * No file is remapped, no manifest read, no checksum computed: a training
 * step's update. orion_commit_weights makes the package verify again. A
 * backend that fails to take the values up leaves that function unusable
 * (the old values are gone): the error says so. */
bool orion_backend_write_weights(OrionBackend *b, OrionProgram *p, const OrionWeightValues *v, uint32_t n, Diag *d);

/* Bytes of one element of a dtype at the boundary (fp16, fp32, int32,
 * bool); 0 otherwise. */
size_t orion_tensor_dtype_size(MilDType t);
/* Frees data that orion_exec_run_alloc allocated and zeroes t; NULL is fine. */
void orion_tensor_free(OrionTensor *t);

/* The built-in backends' tables (for the registry and the tests). */
extern const OrionBackendVtable orion_backend_cpu;
extern const OrionBackendVtable orion_backend_check;
extern const OrionBackendVtable orion_backend_ane;

#endif
