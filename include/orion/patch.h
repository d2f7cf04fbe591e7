/*
 * Delta patching: replacing the bytes of named weights in a compiled
 * package's weights/weight.bin in place — same MIL text, same blob layout and
 * offsets, no compiler run — crash-safely. See docs/package-format.md
 * ("Weight updates") for the journal and the recovery rules. Part of the
 * package I/O library (pkgio/): the runtime's loader finishes an interrupted
 * patch with package_recover before it reads a package.
 */
#ifndef ORION_PATCH_H
#define ORION_PATCH_H

#include "orion/manifest.h"
#include "orion/weight_file.h"

/* One new tensor for a weight of the package. */
typedef struct PatchTensor {
  const char *name;    /* the weight's .oir name in the manifest (its MIL name is accepted too) */
  const char *origin;  /* where the data came from, for messages ("new.safetensors", "memory") */
  OrionDType dtype;
  uint32_t rank;
  int64_t dims[ORION_MAX_RANK];
  const void *data;    /* little-endian, row-major; any alignment */
  uint64_t nbytes;
} PatchTensor;

/* What a patch did (filled when PatchOptions.stats is set). */
typedef struct PatchStats {
  uint32_t tensors;        /* weights named by the patch */
  uint32_t regions;        /* blobs whose bytes changed */
  uint64_t bytes_changed;  /* their data bytes */
  bool shadow;             /* the whole file was rewritten (most of it changed) */
  uint64_t generation;     /* the package's weights generation afterwards */
  double validate_ms, commit_ms;
} PatchStats;

typedef struct PatchOptions {
  bool clamp_fp16;   /* clamp values beyond fp16's range (warning) instead of failing */
  PatchStats *stats; /* optional */
  /* For a disposable working copy (orion-run train's): the new bytes are
   * written in place and the manifest replaced by a rename, with no journal
   * and nothing synced. A crash may leave a package that fails its
   * checksums (never one that verifies with a mix); the checks are the same. */
  bool unsynced;
} PatchOptions;

/* Checks every tensor against the manifest (name, shape, dtype kind, NaN,
 * fp16 range, weights that share storage) and, only if all pass, commits the
 * new bytes so that a crash at any instant leaves the old or the new weights.
 * Finishes an interrupted earlier patch first. Nothing is written on error. */
bool package_patch(const char *path, const PatchTensor *t, uint32_t n, const PatchOptions *opt, Diag *d);

/* For a package whose weight file its owner changed in place (a training
 * run's working copy, written back by orion_commit_weights): every blob's checksum is computed again and, if any
 * differs from the manifest's, the manifest is replaced (by rename) with the
 * new checksums and the next WeightsGeneration. Nothing is synced (as
 * PatchOptions.unsynced) and the data is not checked: the writer guarded it.
 * *nchanged (may be NULL) gets the number of blobs whose checksum changed. */
bool package_refresh_checksums(const char *path, uint32_t *nchanged, Diag *d);

/* Completes a patch that was interrupted after it committed (rolls it
 * forward), or removes the leftovers of one that had not. *did_recover (may
 * be NULL) tells whether a committed patch was completed. */
bool package_recover(const char *path, bool *did_recover, Diag *d);

/* Told each leftover file that recovery removed (its path). */
typedef struct PatchRemovedHook {
  void (*fn)(void *ctx, const char *path);
  void *ctx;
} PatchRemovedHook;

/* package_recover, telling `removed` (may be NULL) what it removed. */
bool package_recover_reporting(const char *path, bool *did_recover, const PatchRemovedHook *removed, Diag *d);

/* Whether `data` is a well-formed journal whose checksum matches (what
 * recovery trusts; exposed for the fuzz target). */
bool patch_journal_valid(const uint8_t *data, size_t len);

/* Whether the package holds an unfinished patch's journal. */
bool package_has_journal(const char *path);

/* A set of tensors read from files, mapped until patch_set_free. */
typedef struct PatchSet {
  PatchTensor *tensors;
  uint32_t n, cap;
  struct PatchMapping *maps;
  uint32_t nmaps;
} PatchSet;

/* Adds every tensor of a safetensors file (named by its keys). */
bool patch_set_add_safetensors(PatchSet *s, const char *file, Diag *d);
/* Adds one tensor from a .npy file under the given weight name. */
bool patch_set_add_npy(PatchSet *s, const char *name, const char *file, Diag *d);
void patch_set_free(PatchSet *s);

/* Testing: the patcher kills itself (SIGKILL) when it reaches durable step
 * number N (1-based), counting every write, sync, rename and unlink, when the
 * environment variable ORION_PATCH_FAULT_AT=N is set. */
#define PATCH_FAULT_ENV "ORION_PATCH_FAULT_AT"

#endif
