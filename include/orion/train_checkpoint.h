/*
 * Training checkpoints (runtime/train/checkpoint.c): everything a training
 * run needs to continue exactly where it stopped, written so that a kill at
 * any instant leaves either the previous checkpoint or the new one, both
 * verifiable, and never one that loads as valid but holds something else.
 *
 * A checkpoint directory (CHECKPOINT_DIR/step-000000123/) holds
 *   weights.safetensors      the fp32 master weights, by param name
 *   state-SLOT.safetensors   one per optimizer state slot (AdamW: m, v; SGD
 *                            with momentum: momentum), by param name
 *   manifest.json            step, data position, RNG state, loss scale,
 *                            optimizer and its hyper-parameters, the package
 *                            it belongs to, and the size and checksum of every
 *                            file (and of itself)
 * and CHECKPOINT_DIR/latest is a symbolic link to the newest one. The layout,
 * the write order and the guarantees are in docs/training.md.
 */
#ifndef ORION_TRAIN_CHECKPOINT_H
#define ORION_TRAIN_CHECKPOINT_H

#include "orion/dtype.h"
#include "orion/support.h"

#define ORION_CKPT_FORMAT_VERSION 1
/* At most this many optimizer state slots, and this many bytes of each opaque
 * state (data position, RNG): they live in the manifest. */
#define ORION_CKPT_MAX_SLOTS 4
#define ORION_CKPT_MAX_BLOB (1u << 20)
#define ORION_CKPT_MAX_HYPER 32

/* One fp32 tensor by param name; `data` holds the product of dims. */
typedef struct OrionCkptTensor {
  const char *name;
  uint32_t rank;
  int64_t dims[ORION_MAX_RANK];
  float *data;
} OrionCkptTensor;

/* A named optimizer hyper-parameter ("lr", "beta1", ...), a finite number. */
typedef struct OrionCkptHyper {
  const char *name;
  double value;
} OrionCkptHyper;

/* Dynamic loss scaling's state. */
typedef struct OrionCkptLossScale {
  double scale;          /* the current scale (1 in fp32 numerics) */
  uint64_t good_steps;   /* finite steps since the scale last changed */
  uint64_t skipped_steps; /* steps skipped for non-finite gradients so far */
} OrionCkptLossScale;

/* What a checkpoint holds. The writer reads it; the reader fills one whose
 * every pointer it owns (orion_ckpt_free). */
typedef struct OrionCheckpoint {
  uint64_t step; /* optimizer steps done (the next is step + 1) */
  /* Identity of the package the weights belong to, e.g. its manifest's
   * checksum: a plain string of 1 to 128 printable characters. */
  const char *package_id;
  const uint8_t *data_position; /* opaque, from the data module */
  size_t data_position_len;
  const uint8_t *rng_state; /* opaque */
  size_t rng_state_len;
  OrionCkptLossScale loss_scale;
  const char *optimizer; /* "adamw", "sgd": a name of [a-z0-9_] */
  OrionCkptHyper hyper[ORION_CKPT_MAX_HYPER];
  uint32_t nhyper;
  OrionCkptTensor *weights; /* fp32 master weights */
  uint32_t nweights;
  /* Optimizer state: slot s has one tensor per weight, of that weight's
   * shape, at state[s][i] for weights[i]. Slot names are [a-z0-9_]. */
  const char *slot_names[ORION_CKPT_MAX_SLOTS];
  float **state[ORION_CKPT_MAX_SLOTS];
  uint32_t nslots;
} OrionCheckpoint;

typedef struct OrionCkptWriteOptions {
  /* Keep the newest `keep` checkpoints of the directory, this one included,
   * and remove older ones once this one is durable; 0 keeps all. */
  uint32_t keep;
  /* For tests: called before each durable step of the write (making a
   * directory or file, each write of up to write_chunk bytes,
   * fsync, rename, symlink, removal), n counting from 1. A kill-injection
   * test kills the process there. NULL: none. */
  void (*before_step)(void *ctx, uint64_t n, const char *what);
  void *hook_ctx;
  size_t write_chunk; /* largest write(2); 0: ORION_CKPT_WRITE_CHUNK */
} OrionCkptWriteOptions;

#define ORION_CKPT_WRITE_CHUNK (4u << 20)

/* Writes checkpoint `c` into `dir` (made if missing) as step-NNNNNNNNN/ and
 * points dir/latest at it, holding an exclusive flock on dir throughout (two
 * writers take turns): all files into a temporary directory beside it,
 * each fsync'd, the directory fsync'd and renamed into place (an existing
 * checkpoint of the same step is swapped out atomically), dir fsync'd, then
 * latest replaced by a rename, then older checkpoints beyond `keep` removed.
 * Leftovers of an interrupted write are removed first. *written (if not
 * NULL) gets the new checkpoint's path (free it). Errors name the file and
 * the system's reason; a write that fails before its checkpoint is renamed
 * into place leaves nothing, one that fails after it (moving latest) leaves
 * that checkpoint, complete, and latest on the previous one. */
bool orion_ckpt_write(const char *dir, const OrionCheckpoint *c, const OrionCkptWriteOptions *o, char **written,
                      Diag *d);

/* Reads a checkpoint: `path` is a checkpoint (holding manifest.json) or a
 * directory of them (its `latest` is followed). Every file's size and
 * checksum and the manifest's own are verified, and every tensor's name,
 * dtype and shape; with expected_package_id not NULL, the checkpoint must
 * belong to that package. Any problem is an error naming the file and what
 * is wrong, and nothing is returned: a partial or corrupted checkpoint never
 * loads. On success `out` owns everything (orion_ckpt_free). */
bool orion_ckpt_load(const char *path, const char *expected_package_id, OrionCheckpoint *out, Diag *d);
void orion_ckpt_free(OrionCheckpoint *c);

/* Writes fp32 tensors by name as a safetensors file (atomically, the same
 * layout as a checkpoint's weights.safetensors): orion-run train --export,
 * which orion-run patch accepts. */
bool orion_train_export_safetensors(const char *path, const OrionCkptTensor *t, uint32_t n, Diag *d);

/* One trained LoRA adapter for orion_train_export_adapter: the layer
 * `module`, its rank and alpha, and the fp32 values of A [rank, in] and
 * B [out, rank]. */
typedef struct OrionAdapterExport {
  const char *module;
  uint32_t rank;
  double alpha;
  const float *a;
  const int64_t *a_dims; /* 2 */
  const float *b;
  const int64_t *b_dims; /* 2 */
} OrionAdapterExport;

/* orion-run train --lora --export-adapter DIR: a PEFT-style adapter
 * directory (made if missing): adapter_model.safetensors, F32 tensors
 * "base_model.model.MODULE.lora_A.weight" / ".lora_B.weight", then
 * adapter_config.json (peft_type LORA, r, lora_alpha, target_modules, and
 * rank_pattern / alpha_pattern for the layers whose rank or alpha differ
 * from the first's). Each file is written atomically, the config last. */
bool orion_train_export_adapter(const char *dir, const OrionAdapterExport *a, uint32_t n, Diag *d);

/* Elements of a tensor (the product of its dims). */
uint64_t orion_ckpt_tensor_count(const OrionCkptTensor *t);

#endif
