/*
 * The training loop behind `orion-run train` (runtime/train/loop.c, library
 * orion_train_loop): a package with a training contract (Training in its
 * manifest, orion/manifest.h) is trained on a working copy of itself. Per
 * optimizer step: batches from the token data feeder, the forward, the
 * backward with the current loss scale, accumulation, unscaling and the
 * finiteness check (a non-finite step is skipped and counted), clipping, the
 * optimizer on fp32 master weights, and the masters checked and converted
 * straight into the program's weight data (orion_backend_write_weights): no
 * compile, no file written; at checkpoints and at the end the working copy's
 * weight file and manifest are brought up to date (orion_commit_weights), so
 * the working copy verifies. Checkpoints,
 * the JSONL log, evaluation and the export are the training runtime's
 * (train_checkpoint.h, train_log.h). docs/training.md, "orion-run train".
 */
#ifndef ORION_TRAIN_LOOP_H
#define ORION_TRAIN_LOOP_H

#include "orion/backend.h"
#include "orion/manifest.h"
#include "orion/train_log.h"
#include "orion/train_optim.h"

/* One --input NAME=FILE.npy: a forward input that stays fixed. */
typedef struct OrionTrainInputFile {
  const char *name, *file;
} OrionTrainInputFile;

typedef struct OrionTrainOptions {
  const char *package;  /* the user's package: read, copied, never changed */
  const char *work_dir; /* an existing directory that receives the working copy */
  const char *backend;  /* "cpu" (NULL: the registry's default) */
  /* A backend the caller opened (and closes after the run, e.g. to read its
   * usage): the run uses it instead of opening `backend`. NULL: the run opens
   * and closes its own. */
  OrionBackend *opened_backend;
  OrionBackendOptions backend_options; /* for the backend the run opens (the ane backend's limits) */
  OrionNumerics numerics;
  const char *data;     /* token data: .npy of integers or uint16 .bin */
  uint64_t steps;       /* N, the last optimizer step (a resumed run continues to it) */
  TrainOptimizerConfig optimizer;
  TrainSchedule schedule; /* lr, min_lr, warmup, kind; steps is taken from `steps` */
  double clip_grad;       /* <= 0: off */
  uint32_t accum;         /* batches per optimizer step, >= 1 */
  uint64_t seed;
  bool shuffle;
  const OrionTrainInputFile *inputs;
  uint32_t ninputs;
  const char *log;            /* JSONL log, or NULL */
  const char *checkpoint_dir; /* or NULL */
  uint64_t checkpoint_every;  /* 0: only at the end (with checkpoint_dir) */
  uint64_t stop_after;        /* 0, or stop after this step with a checkpoint (an interruption to resume from) */
  const char *resume;         /* a checkpoint (or a directory of them), or NULL */
  const char *export_path;    /* FILE.safetensors of the trained fp32 weights, or NULL */
  /* LoRA (--lora): train the contract's adapter inputs instead of weights;
   * a package without Adapters is refused, and one with them needs it. */
  bool lora;
  const char *adapter_init;   /* --adapter FILE.safetensors: the adapters' start values (NULL: PEFT's init from seed) */
  const char *export_adapter; /* --export-adapter DIR: the PEFT adapter directory at the end, or NULL */
  const char *eval_data;      /* or NULL */
  uint64_t eval_every;        /* with eval_data; 0: only after the last step */
  /* Time every statement of the forward and the backward program (the
   * backend must offer profiling: caps.profiling); the report's profiles. */
  bool profile;
  /* Told each optimizer step as it is logged (progress lines). */
  void (*on_step)(void *ctx, const OrionTrainLogEntry *e, uint64_t total_steps);
  void *ctx;
} OrionTrainOptions;

/* Fills the defaults of orion-run train: AdamW, lr 3e-4, constant schedule,
 * accum 1, ane numerics, the cpu backend. */
void orion_train_options_init(OrionTrainOptions *o);

typedef struct OrionTrainReport {
  char *work_package;      /* where the working copy is (malloc'd; freed by orion_train_report_free) */
  uint64_t first_step;     /* 1, or the step after the resumed checkpoint */
  uint64_t steps_run;      /* optimizer steps of this run */
  uint64_t skipped;        /* steps skipped for non-finite gradients (with the resumed run's) */
  /* packages orion compiled after the start: always 0; a device backend
   * that recompiles to take up a weight write counts that in its own usage
   * line (orion-run train -v) */
  uint64_t compiles;
  uint64_t weight_updates; /* steps that wrote the weights (orion_backend_write_weights) */
  uint64_t tokens;         /* training tokens processed */
  double forward_ms, backward_ms, optimizer_ms, update_ms, total_ms; /* sums over the steps */
  double last_loss;
  bool has_eval;
  double last_eval_loss;
  float loss_scale; /* at the end */
  /* With OrionTrainOptions.profile: each program's statements and their
   * times summed over the run (the forward's include evaluation's runs);
   * op and name are copies the report owns, loc is in the Diag's sources. */
  OrionStmtTime *profile[2]; /* [0] the forward, [1] the backward */
  uint32_t nprofile[2];
  uint64_t profile_runs[2]; /* how many times each program ran */
} OrionTrainReport;

/* Runs the training; false after reporting. The report is filled as far as
 * the run got. */
bool orion_train_run(const OrionTrainOptions *o, OrionTrainReport *r, Diag *d);
void orion_train_report_free(OrionTrainReport *r);

/* The identity a checkpoint records for a package: XXH64 over its source
 * checksum, its weight layout and its MIL files (the same program, whatever
 * its weight values), as "xxh64:" and 16 hex digits. */
void orion_train_package_id(const Package *pkg, char out[24]);

#endif
