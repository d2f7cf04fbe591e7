/*
 * The training loop's state (internal to runtime/train/loop*.c).
 */
#ifndef ORION_TRAIN_LOOP_INTERNAL_H
#define ORION_TRAIN_LOOP_INTERNAL_H

#include "orion/train_loop.h"
#include "orion/weight_file.h"

typedef struct ParamInfo {
  OrionDType dtype; /* of the program's weight: fp16 or fp32 */
  uint32_t grad_out; /* the backward output holding its gradient */
} ParamInfo;

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
  OrionWeightValues *writes; /* per param: its forward weight, written from its master each step */
  uint32_t nparams;
  TrainData *data, *eval;
  TrainOptimizer *opt;
  TrainLossScaler scaler;
} Loop;

bool loop_setup(Loop *L, const OrionTrainOptions *o, Diag *d);
void loop_teardown(Loop *L);
bool loop_copy_package(const Package *pkg, const char *work_dir, char **out, Diag *d);
void loop_tensor_alloc(OrionTensor *t, const OrionTensorInfo *info);

#endif
