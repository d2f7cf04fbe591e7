/* Shared between the files of the compile library (not installed). */
#ifndef ORION_COMPILE_INTERNAL_H
#define ORION_COMPILE_INTERNAL_H

#include "orion/compile.h"

/* What orionc --train made (compiler/train.c). */
typedef struct CompileTraining {
  PkgTraining *contract; /* for the manifest; package_training_free */
  uint32_t nsaved;       /* forward outputs after `loss` */
  uint64_t saved_bytes;  /* their bytes */
  uint32_t trained, frozen; /* the entry's float params that train, and those that do not */
} CompileTraining;

/* Differentiates the entry (options.train_function, or the one with an
 * output `loss`), leaves only its forward and backward in m and makes the
 * contract. Errors through d. With `lora` (the layers the lora pass adapted
 * before, orionc --train --lora) the gradients are those of the adapter
 * inputs and the contract lists the adapters; NULL: of the params. */
bool compile_train(IrModule *m, const OrionCompileOptions *o, const LoraLayers *lora, Diag *d, CompileTraining *out);

/* orionc --summary: functions, inputs, outputs, weights and op counts of m
 * (calls expanded), and with `train` the training figures, appended to out
 * as text or as one JSON object. */
void compile_summary(IrModule *m, const char *input, const CompileTraining *train, bool json, StrBuf *out);

#endif
