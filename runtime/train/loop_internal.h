/*
 * The training loop's state (internal to runtime/train/loop*.c).
 */
#ifndef ORION_TRAIN_LOOP_INTERNAL_H
#define ORION_TRAIN_LOOP_INTERNAL_H

#include "orion/train_loop.h"
#include "orion/weight_file.h"

typedef struct ParamInfo {
  OrionDType dtype; /* of the program's weight: fp16 or fp32 */
  void *staged;     /* the converted values written into the weight file */
  uint32_t grad_out; /* the backward output holding its gradient */
} ParamInfo;

/* A row gradient of the contract, bound: rows[j] of backward output `out`
 * go to row ids[j] of param `param`, the ids being forward input `in`. */
typedef struct LoopRows {
  uint32_t param, out, in;
  int64_t width; /* floats per row */
} LoopRows;

typedef struct Loop {
  Package pkg; /* the user's package, as read */
  const PkgTraining *contract;
  char package_id[24];
  char *work; /* the working copy */
  OrionProgram *prog;
  uint32_t fwd, bwd;
  OrionBackend *backend;
  OrionExec *fwd_exec, *bwd_exec;
  OrionTensor *fwd_in, *fwd_out, *bwd_in, *bwd_out;
  uint32_t nfwd_in, nfwd_out, nbwd_in, nbwd_out;
  uint32_t tokens_in, targets_in, loss_out;
  int64_t batch, seq;
  OrionTensor scale_tensor;
  float scale_value;
  TrainParam *params;
  ParamInfo *pinfo;
  uint32_t nparams;
  LoopRows *rows;
  uint32_t nrows;
  TrainData *data, *eval;
  TrainOptimizer *opt;
  TrainLossScaler scaler;
} Loop;

bool loop_setup(Loop *L, const OrionTrainOptions *o, Diag *d);
void loop_teardown(Loop *L);
bool loop_copy_package(const Package *pkg, const char *work_dir, char **out, Diag *d);
/* The contract's row gradients bound to the params and tensors (after the
 * params are set up), and their rows added into the gradients after a backward. */
bool loop_rows_setup(Loop *L, Diag *d);
bool loop_rows_add(Loop *L, Diag *d);
void loop_tensor_alloc(OrionTensor *t, const OrionTensorInfo *info);

#endif
