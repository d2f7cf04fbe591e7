/*
 * MIL text emission: one verified, legalized IR function -> model.mil text
 * in Apple's format (see the MIL spec §1.11 for the canonical form).
 */
#ifndef ORION_MIL_H
#define ORION_MIL_H

#include "orion/blob_writer.h"
#include "orion/ir.h"
#include "orion/mil_target.h"

/* Supplies the bytes of a param in its IR dtype (malloc'd; the emitter frees
 * them); NULL after reporting an error. */
typedef void *(*MilParamLoader)(void *ctx, IrModule *m, IrValueId param, size_t *nbytes);
/* Optional, used for params instead of a MilParamLoader: puts the param's
 * bytes into `blobs` itself (for example materialized straight into a mapped
 * weight file through blob_writer_stage), setting its record offset and byte
 * count; returns false after reporting. ctx is MilEmitOptions.load_ctx. */
typedef bool (*MilParamAdder)(void *ctx, IrModule *m, IrValueId param, BlobWriter *blobs, BlobDType dtype,
                              uint64_t *offset, size_t *nbytes);

/* One function input or output as bound on the device. */
typedef struct MilBinding {
  const char *ir_name;  /* the .oir name (input name, or output name) */
  const char *mil_name; /* the name in the MIL text */
  IrType type;
  uint32_t binding; /* index in ASCII order of MIL names (inputs and outputs counted separately) */
  uint64_t bytes;   /* the tensor's data bytes */
} MilBinding;

/* A weight placed in the blob file. */
typedef struct MilWeight {
  const char *ir_name;
  const char *mil_name;
  IrType type;
  uint64_t offset; /* of the metadata record */
  uint64_t nbytes;
} MilWeight;

typedef struct MilFunction {
  const char *name;
  MilBinding *inputs, *outputs;
  uint32_t ninputs, noutputs;
  MilWeight *weights;
  uint32_t nweights;
  const IrOutputGroup *groups; /* outputs split into parts (indices into outputs) */
  uint32_t ngroups;
  uint64_t surface_bytes;     /* of every input and output (the binding table's) */
  uint64_t min_surface_bytes; /* the minimum that surface_bytes was computed for */
} MilFunction;

typedef struct MilEmitOptions {
  MilTarget target;
  const char *weight_path; /* in the MIL text; default "@model_path/weights/weight.bin" */
  MilParamLoader load_param;
  MilParamAdder add_param; /* optional; see above */
  void *load_ctx;
  double *blob_ms; /* optional: time spent laying out blobs is added here */
  uint64_t min_surface_bytes; /* the target's minimum I/O surface (0: io-legalize's default) */
} MilEmitOptions;

/* Emits a complete program holding function f. Weights (params, and float
 * consts of 10 or more elements) go to `blobs`; the text is appended to out;
 * info (if not NULL) receives the binding and weight tables, allocated in
 * the module's arena. Inputs and outputs are named, ordered and sized as f's
 * binding table says (io-legalize; computed by the same function and
 * attached to f if f has none; a stale table, or one computed for another
 * minimum surface, is an internal error). Reports unsupported constructs and
 * returns false. */
bool mil_emit_program(IrModule *m, IrFuncId f, const MilEmitOptions *opt, BlobWriter *blobs, StrBuf *out,
                      MilFunction *info, Diag *d);

#endif
