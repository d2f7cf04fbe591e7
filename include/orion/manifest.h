/*
 * Reading a .anepkg package: its Manifest.plist (an XML property list
 * describing the functions, their inputs, outputs and weights, with
 * checksums) and checking the files against it. Part of the package I/O
 * library (pkgio/), which the runtime and the compiler both link; writing a
 * package is the compiler's (orion/package.h). See docs/package-format.md.
 */
#ifndef ORION_MANIFEST_H
#define ORION_MANIFEST_H

#include "orion/dtype.h"
#include "orion/support.h"

/* The format the compiler writes, and the oldest the readers still take.
 * Format 2 records each weight's checksum as XXH3-64 ("XXH3"), format 1 as
 * XXH64 ("XXH64"); everything else is the same (docs/package-format.md). */
#define PACKAGE_FORMAT_VERSION 2
#define PACKAGE_FORMAT_OLDEST 1
#define PACKAGE_MANIFEST "Manifest.plist"
#define PACKAGE_WEIGHTS "weights/weight.bin"

typedef struct PkgTensor {
  char *name, *mil_name;
  OrionDType dtype;
  uint32_t rank;
  int64_t dims[ORION_MAX_RANK];
  uint32_t binding;       /* inputs/outputs */
  uint64_t bytes;         /* data bytes (elements * dtype size) */
  uint64_t surface_bytes; /* inputs/outputs */
  uint64_t offset;        /* weights: metadata record offset */
  char checksum[17];      /* weights: of the data, by the format's algorithm (package_weight_checksum) */
} PkgTensor;

/* An output the compiler split into parts (outputs of the function) that the
 * caller concatenates along `axis`. */
typedef struct PkgGroup {
  char *name;
  uint32_t axis;
  char **parts;
  uint32_t nparts;
} PkgGroup;

typedef struct PkgFunction {
  char *name, *mil_file;
  char mil_xxh64[17];
  uint64_t surface_bytes;
  PkgTensor *inputs, *outputs, *weights;
  uint32_t ninputs, noutputs, nweights;
  PkgGroup *groups;
  uint32_t ngroups;
} PkgFunction;

/* The training contract (optional key Training, docs/package-format.md): how
 * the forward and backward programs of a package connect. */
typedef enum PkgTrainSource {
  PKG_TRAIN_FROM_OUTPUT,     /* a forward output, by name */
  PKG_TRAIN_FROM_INPUT,      /* a forward input, by name (the same batch's data) */
  PKG_TRAIN_FROM_LOSS_SCALE, /* the runtime's loss scale, an fp32 scalar */
} PkgTrainSource;

/* Where an entry of the training contract is in the manifest's text, for
 * messages: its element's line and column; 0, 0 when the manifest was not read
 * from a file (package_parse_manifest, or a contract being written). */
typedef struct PkgPos {
  uint32_t line, col;
} PkgPos;

typedef struct PkgTrainInput {
  char *input; /* a backward input */
  PkgTrainSource from;
  char *name; /* the forward output or input; NULL for the loss scale */
  PkgPos at;  /* its <dict> */
} PkgTrainInput;

typedef struct PkgTrainGradient {
  char *output; /* a backward output (fp32, the param's shape) */
  char *param;  /* the trainable param it is the gradient of, or the adapter input (`input`) */
  bool input;   /* param names a forward input, a LoRA adapter ("Input" instead of "Param") */
  PkgPos at;    /* its <dict> */
} PkgTrainGradient;

/* A LoRA-adapted layer whose adapter inputs MODULE.lora_A [rank, in] and
 * MODULE.lora_B [out, rank] train (orionc --train --lora; docs/lora.md). */
typedef struct PkgTrainAdapter {
  char *module;
  uint32_t rank;
  double alpha; /* the layer computes y + alpha/rank * (x A^T) B^T */
  PkgPos at;
} PkgTrainAdapter;
/* Rows of a param's gradient that the training loop adds in (optional key
 * RowGradients): the backward output holds, for every position j of the
 * forward input `indices` (int32), a row that belongs to the param's row
 * indices[j]. The gradient of an embedding, which the ANE cannot scatter. */
typedef struct PkgTrainRows {
  char *output;  /* a backward output: fp32, indices' shape + the param's row shape */
  char *param;   /* a trainable param (rank >= 1) */
  char *indices; /* a forward input, int32 */
  PkgPos at;
} PkgTrainRows;

typedef struct PkgTraining {
  char *forward, *backward, *loss;
  PkgTrainInput *inputs; /* one per backward input */
  uint32_t ninputs;
  PkgTrainGradient *gradients; /* one per trainable param */
  uint32_t ngradients;
  PkgTrainRows *rows; /* added into the params' gradients by the loop */
  uint32_t nrows;
  char **params; /* the trainable params (weights of the forward, by .oir name) */
  uint32_t nparams;
  uint64_t vocabulary;  /* token ids of a `tokens` input lie in [0, vocabulary); 0: no such input */
  uint64_t saved_bytes; /* bytes of the forward outputs the backward reads */
  /* LoRA training (Adapters): every param frozen, nparams 0, and one gradient
   * per adapter input instead. */
  PkgTrainAdapter *adapters;
  uint32_t nadapters;
  /* Positions: the Training <dict>, the values of Forward, Backward, Loss and
   * SavedBytes, and each TrainableParams string (params_at: NULL, or nparams). */
  PkgPos at, forward_at, backward_at, loss_at, saved_bytes_at;
  PkgPos *params_at;
} PkgTraining;

typedef struct Package {
  char *path;
  uint32_t format_version;
  char *compiler_version, *target, *program_version, *source_name;
  char *chip; /* Chip (optional: orionc --chip), or NULL */
  char source_sha256[65], weights_layout_xxh64[17];
  uint64_t weights_size, weights_generation, min_surface_bytes;
  PkgFunction *functions;
  uint32_t nfunctions;
  bool lint_checked;
  uint32_t lint_errors, lint_warnings;
  char **compile_args; /* CompileArguments (optional in the manifest) */
  uint32_t ncompile_args;
  PkgTraining *training; /* Training (optional), or NULL */
} Package;

/* The checksum a manifest of format `version` records for a weight's data:
 * XXH64 (seed 0) in format 1, XXH3-64 from format 2 on; and the key it is
 * stored under ("XXH64", "XXH3"), as 16 lowercase hex digits. */
uint64_t package_weight_checksum(uint32_t version, const void *data, size_t len);
const char *package_weight_checksum_key(uint32_t version);
/* The same in lowercase ("xxh64", "xxh3"), as orion-inspect names it. */
const char *package_weight_checksum_name(uint32_t version);

/* The function called name, or NULL. */
const PkgFunction *package_function(const Package *pkg, const char *name);
/* f's output group called name (an output split-concat split into parts), or
 * NULL. A training contract names such an output by its group. */
const PkgGroup *package_output_group(const PkgFunction *f, const char *name);
/* Checks a training contract against the package's functions (names exist,
 * shapes and dtypes agree, one gradient per trainable param, the saved
 * bytes); "manifest: Training: ..." messages after `where`. The reader does
 * this; the compiler does it before writing a package. */
bool package_training_check(const Package *pkg, const PkgTraining *t, const char *where, Diag *d);
/* The bytes of the forward outputs that feed backward inputs (each once). */
uint64_t package_training_saved_bytes(const Package *pkg, const PkgTraining *t);
void package_training_free(PkgTraining *t);

/* Parses manifest text (`name` is used in messages); what package_read uses. */
bool package_parse_manifest(const char *text, size_t len, const char *name, Package *pkg, Diag *d);
/* Reads and validates Manifest.plist (structure, types, ranges). Errors are
 * "path: message" lines through d. */
bool package_read(const char *path, Package *pkg, Diag *d);
/* Checks the files against the manifest: MIL and weight checksums, the blob
 * file's records for every weight (dtype, size). */
bool package_verify(const Package *pkg, Diag *d);
/* package_verify for a package verified before as `before` (read from the
 * same path), of which only the weights could have changed: the MIL files,
 * the layout and the weights whose checksums differ from before are checked,
 * the others were. */
bool package_verify_since(const Package *pkg, const Package *before, Diag *d);
void package_free(Package *pkg);

#endif
