/*
 * The training loop's state (internal to runtime/train/loop*.c).
 */
#ifndef ORION_TRAIN_LOOP_INTERNAL_H
#define ORION_TRAIN_LOOP_INTERNAL_H

#include "orion/train_loop.h"
#include "orion/train_checkpoint.h"
#include "orion/weight_file.h"

typedef struct ParamInfo {
  OrionDType dtype; /* of the program's weight: fp16 or fp32 */
  OrionTensor *grad;       /* the backward output (or joined output group) holding its gradient */
  uint32_t input;          /* --lora: the forward input the adapter is bound as */
} ParamInfo;

/* An output group the contract names, joined into one buffer after each run (loop_groups.c). */
typedef struct LoopJoin {
  const PkgGroup *group;
  uint32_t *parts; /* the parts' output indices */
  OrionTensor whole;
} LoopJoin;

typedef struct LoopJoins {
  LoopJoin *at; /* room for every group of the function */
  uint32_t n;
} LoopJoins;

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
  bool owns_backend; /* false: the caller's (OrionTrainOptions.opened_backend) */
  OrionExec *fwd_exec, *bwd_exec;
  OrionTensor *fwd_in, *fwd_out, *bwd_in, *bwd_out;
  uint32_t nfwd_in, nfwd_out, nbwd_in, nbwd_out;
  uint32_t tokens_in, targets_in, loss_out;
  int64_t batch, seq;
  LoopJoins fwd_joins, bwd_joins;
  OrionTensor scale_tensor;
  float scale_value;
  TrainParam *params; /* the trained tensors: params, or with --lora the adapter inputs */
  ParamInfo *pinfo;
  OrionWeightValues *writes; /* per param: its forward weight, written from its master each step */
  OrionValuesFit *fits;      /* per param: the step's count of new values its weight cannot hold */
  uint32_t nparams;
  bool lora;            /* the contract's Adapters train, bound as inputs (runtime/train/lora.c) */
  char **adapter_names; /* --lora: params[k].name, owned */
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
/* Function fn's input or output by name; UINT32_MAX when it has none. */
uint32_t loop_input_index(const OrionProgram *p, uint32_t fn, const char *name);
uint32_t loop_output_index(const OrionProgram *p, uint32_t fn, const char *name);
/* The buffer of the forward's (or backward's) output `name`, or of its
 * output group `name`, joined into (registered to be joined after every
 * run); NULL if it is neither. */
OrionTensor *loop_output_tensor(Loop *L, bool backward, const char *name);
/* Joins every registered group of one function from its outputs. */
void loop_join_groups(const LoopJoins *js, const OrionTensor *outputs);
void loop_joins_free(LoopJoins *js);

/* --lora (runtime/train/lora.c): the masters of the adapter inputs, from
 * --adapter or PEFT's initialisation; the masters into the input buffers;
 * the PEFT adapter directory of --export-adapter. */
bool loop_lora_init(Loop *L, const OrionTrainOptions *o, Diag *d);
bool loop_lora_write(Loop *L, Diag *d);
bool loop_lora_export(Loop *L, const char *dir, Diag *d);

#endif
