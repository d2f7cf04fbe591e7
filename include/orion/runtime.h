/*
 * The runtime's public API, so far its program loader: orion_open() takes a
 * compiled `.anepkg` package, or a bare directory holding `model.mil` and its
 * weight files (the layout inside Apple's compiled `.mlmodelc`, without a
 * manifest), and returns a loaded program: the parsed MIL of every function,
 * every BLOBFILE weight resolved to verified bytes in a read-only mapping of
 * its weight file, and the description of each function's inputs and outputs.
 * Nothing is executed yet. See docs/runtime-api.md.
 *
 * Errors are reported through the caller's Diag, which must have a SourceSet
 * (diag_init(d, &sources)): the MIL reader registers each file there and the
 * loader's messages point at MIL statements by file:line:col. Keep that set
 * alive as long as the program is used to report about MIL locations.
 */
#ifndef ORION_RUNTIME_H
#define ORION_RUNTIME_H

#include "orion/mil_reader.h"
#include "orion/values_fit.h"

typedef struct OrionProgram OrionProgram;

/* How a loaded program takes new weights after its package was patched
 * (orion_reload_weights). The CPU backend reads weights from memory and
 * remaps; the ANE bakes them into its compiled program, so its backend
 * reloads the compiled program from the patched files (the reference
 * system's unload -> patch -> reload), or patches the compiled program's
 * data, or compiles again where a device refuses those, or — for programs
 * compiled with their weights as inputs, like LoRA adapters — binds new
 * buffers and reloads nothing. Which works on an OS build is disputed; the
 * ane backend's self-test picks (docs/ane-backend.md). */
typedef enum OrionReloadStrategy {
  ORION_RELOAD_AUTO,         /* the backend's best: REMAP on the CPU; on the ANE the self-test's choice */
  ORION_RELOAD_REMAP,        /* map the patched weight file again; backends read weights in place */
  ORION_RELOAD_RELOAD_FILES, /* ANE: unload and load the compiled program from the patched package */
  ORION_RELOAD_RECOMPILE,    /* ANE: compile the package's MIL with the patched weights again */
  ORION_RELOAD_INPUTS,       /* weights compiled as inputs: the caller binds new buffers */
  ORION_RELOAD_PATCH_DATA,   /* ANE: write the new weights into the compiled program's data and load it, no compile */
} OrionReloadStrategy;

typedef struct OrionOpenOptions {
  /* Verify a package's checksums (MIL files, weight file, each weight's data)
   * before loading. Ignored for bare directories, which have none. */
  bool verify_checksums;
  OrionReloadStrategy reload; /* what orion_reload_weights does (AUTO by default) */
  /* Map the weight files writable (privately: the file changes only at
   * orion_commit_weights), so that orion_write_weights can store new values
   * into them (a training run's working copy). */
  bool writable_weights;
} OrionOpenOptions;

/* The defaults orion_open() uses when given NULL options. */
#define ORION_OPEN_OPTIONS_DEFAULT ((OrionOpenOptions){.verify_checksums = true, .reload = ORION_RELOAD_AUTO})

/* A function input or output. */
typedef struct OrionTensorInfo {
  const char *name;     /* package: the .oir name; bare directory: the MIL name */
  const char *mil_name; /* the MIL parameter or returned variable */
  MilDType dtype;
  uint32_t rank;
  int64_t dims[MIL_MAX_RANK]; /* -1 for an unknown dimension ('?') */
  uint32_t binding;           /* ANE surface index: ASCII order of MIL names, inputs and outputs apart */
  uint64_t bytes;             /* elements x dtype size; 0 if a dimension is unknown */
  uint64_t surface_bytes;     /* package: from the manifest; bare directory: 0 (not known) */
} OrionTensorInfo;

/* A BLOBFILE literal of a statement (a `const` val, or an attribute of a
 * constexpr_* op), resolved and verified. */
typedef struct OrionWeight {
  const char *name;   /* the statement's first result */
  const char *attr;   /* the attribute holding the BLOBFILE ("val" for const) */
  uint32_t stmt;      /* index of the statement in its MilFunc */
  MilDType dtype;     /* the declared element type */
  const void *data;   /* inside the read-only mapping; valid until orion_close */
  uint64_t size;      /* bytes: elements x dtype size */
} OrionWeight;

/* Opens and verifies `path` (options NULL = ORION_OPEN_OPTIONS_DEFAULT).
 * Returns NULL after reporting every problem found through d. */
OrionProgram *orion_open(const char *path, const OrionOpenOptions *opt, Diag *d);
/* Unmaps the weight files and frees everything; NULL is fine. */
void orion_close(OrionProgram *p);

/* Functions: the manifest's for a package (in manifest order), the MIL
 * program's for a bare directory (in text order). Indices are < count. */
uint32_t orion_function_count(const OrionProgram *p);
const char *orion_function_name(const OrionProgram *p, uint32_t fn);
/* The index of the function called name, UINT32_MAX if there is none. */
uint32_t orion_function_find(const OrionProgram *p, const char *name);
/* The parsed MIL function (for a package, `main` of its MIL file). */
const MilFunc *orion_function_mil(const OrionProgram *p, uint32_t fn);
/* True when an input or output has an unknown dimension ('?'): loading
 * succeeds, preparing execution will refuse it. */
bool orion_function_has_dynamic_shapes(const OrionProgram *p, uint32_t fn);

/* Inputs and outputs, in manifest order for a package (declared .oir order),
 * in MIL parameter / return order for a bare directory. */
uint32_t orion_input_count(const OrionProgram *p, uint32_t fn);
const OrionTensorInfo *orion_input(const OrionProgram *p, uint32_t fn, uint32_t i);
uint32_t orion_output_count(const OrionProgram *p, uint32_t fn);
const OrionTensorInfo *orion_output(const OrionProgram *p, uint32_t fn, uint32_t i);

/* The BLOBFILE weights of a function, in statement order. */
uint32_t orion_weight_count(const OrionProgram *p, uint32_t fn);
const OrionWeight *orion_weight(const OrionProgram *p, uint32_t fn, uint32_t i);

/* ---- weight updates ----
 *
 * A package's weights can be replaced in place (orion-run patch, or
 * package_patch in orion/patch.h) while a program is loaded. Reloading maps
 * the weight file again and moves every OrionWeight's data pointer to the new
 * bytes; the MIL is not read or parsed again, and the function descriptions
 * stay as they are. A backend then picks the new values up (for the CPU
 * backend, cpu_reload_weights). The previous mapping stays valid, so that a
 * backend still reading it is never left pointing at unmapped memory, until
 * orion_release_retired_weights, the next reload, or orion_close; or the
 * reload is undone (orion_reload_weights_undo). orion_backend_update_weights
 * (orion/backend.h) does all of it as one call.
 *
 * Backends that cannot read weights from memory (the ANE bakes them into its
 * compiled program) implement the same call by unloading and loading the
 * program again from the patched files, or by recompiling, or — for programs
 * compiled with weights as inputs — by binding the new buffers; the caller
 * sees one operation either way. */

/* The manifest's WeightsGeneration as last loaded (0 for a bare directory). */
uint64_t orion_weights_generation(const OrionProgram *p);
/* A count that changes whenever the bytes an OrionWeight's data points at
 * may have changed through this program: each orion_write_weights, each
 * reload that moved the weights and each undo. (A backend that keeps a
 * converted copy of a weight for several prepared functions converts it
 * once per version.) */
uint64_t orion_weights_version(const OrionProgram *p);

/* Reloads the weights if the package's generation changed since open (or
 * since the last reload); for a bare directory, always. opt->reload selects
 * the strategy: this runtime (the CPU backend) carries out AUTO and REMAP;
 * RELOAD_FILES and RECOMPILE need the ANE backend (macOS) and are reported as
 * such here; INPUTS reloads nothing (changed stays false). *changed (may be
 * NULL) tells whether anything was reloaded. Completes an interrupted
 * update first. Every weight file is mapped and checked before anything
 * changes. Fails, leaving the program as it was, if the MIL or the blob
 * layout changed (a recompile: open the package again) or, with
 * opt->verify_checksums, a checksum does not match. */
bool orion_reload_weights(OrionProgram *p, const OrionOpenOptions *opt, bool *changed, Diag *d);
/* Unmaps what the last reload replaced (its data pointers become invalid). */
void orion_release_retired_weights(OrionProgram *p);
/* Puts back the weights (and the manifest) the last reload replaced, if
 * they are still held; false when there is nothing to undo. */
bool orion_reload_weights_undo(OrionProgram *p);

/* ---- weights written in place ----
 *
 * For a program opened with writable_weights: new fp32 values converted
 * straight into the program's weight data (its mapping of the weight file,
 * which every function naming the same blob reads), with no file written,
 * no manifest read and no checksum computed, as a training step needs. The
 * backend is then told (orion_backend_write_weights in orion/backend.h does
 * both). The package on disk keeps its old weights until
 * orion_commit_weights. */
typedef struct OrionWeightValues {
  uint32_t fn, weight;  /* orion_weight(p, fn, weight): an fp16 or fp32 weight */
  const float *values;  /* as many as the weight has elements */
  const char *label;    /* for messages (NULL: the weight's MIL name) */
  OrionValuesFit *fit;  /* NULL, or the count of these values' misfits made as they were produced */
} OrionWeightValues;

/* Checks every value first (finite; for fp16 weights, within fp16's range,
 * |x| < 65520) and writes nothing unless all pass; then converts each set
 * (fp16: round to nearest even, vectorised) into its weight's data. Fails
 * for a program not opened with writable_weights. A set with a `fit`
 * (orion/values_fit.h) is checked by its count instead of a pass over its
 * values: the count must be of exactly these values for this weight's limit
 * and not taken up before, else nothing is written; every fit given is
 * taken up (its `values` cleared) whether the write succeeds or not. */
bool orion_write_weights(OrionProgram *p, const OrionWeightValues *v, uint32_t n, Diag *d);
/* Puts what orion_write_weights wrote into the weight file (not synced)
 * and makes the manifest match (the changed blobs' checksums, the next
 * generation: package_refresh_checksums), so that the package verifies with
 * the new weights; nothing to do when nothing was written. */
bool orion_commit_weights(OrionProgram *p, Diag *d);

/* ---- resident programs ----
 *
 * A cache of loaded packages keyed by content (the manifest's MIL and weight
 * checksums, target, compiler), bounded like the ANE's resident programs
 * (about 100-128 per process), evicting the least recently used program that
 * is not held. Acquiring a package whose content is already loaded, under
 * any path, returns the loaded program; a patched package (new weights
 * checksum) is a new program. Programs belong to the cache: release them,
 * never orion_close them. */

#define ORION_DEFAULT_RESIDENT_PROGRAMS 100

typedef struct OrionProgramCache OrionProgramCache;
typedef struct OrionProgramCacheStats {
  uint64_t hits, misses, evictions;
  uint32_t resident;
} OrionProgramCacheStats;

/* capacity 0 = ORION_DEFAULT_RESIDENT_PROGRAMS. */
OrionProgramCache *orion_program_cache_new(uint32_t capacity);
/* Closes every program; NULL is fine. */
void orion_program_cache_free(OrionProgramCache *c);
/* The loaded program for the package at path (opened on a miss); NULL after
 * reporting, also when every resident program is held. */
OrionProgram *orion_program_cache_acquire(OrionProgramCache *c, const char *path, const OrionOpenOptions *opt,
                                          Diag *d);
void orion_program_cache_release(OrionProgramCache *c, OrionProgram *p);
OrionProgramCacheStats orion_program_cache_stats(const OrionProgramCache *c);

#endif
