/*
 * Reverse-mode differentiation over the graph IR (docs/training.md).
 *
 * ad_differentiate takes a verified, inlined module and one function F whose
 * outputs include a scalar fp32 `loss`, and adds two functions to the module:
 *
 *   F.fwd  F's computation, returning `loss` first and then every value the
 *          backward reads ("saved" values, outputs `saved.NAME`), in the order
 *          the backward first asks for them;
 *   F.bwd  inputs: `loss_scale` (fp32 scalar, the seed of the reverse sweep),
 *          then the saved values and the inputs of F the rules read, in the
 *          order they were first needed; outputs: `grad.PARAM` (fp32, the
 *          param's shape), one per trainable param in declaration order; its
 *          params are F's own (the backward reads W, never a copy of W^T).
 *          With wrt_lora_inputs the outputs are `grad.INPUT`, one per LoRA
 *          adapter input of F in input order, and no param trains.
 *
 * The gradients are loss_scale * d loss / d param. The contract says where
 * each backward input comes from and which param each gradient belongs to;
 * it lives in the module's arena (freed with the module).
 *
 * Gradient rules are one per op family, in one table indexed by IrOpKind
 * (passes/grad_rules.c); every op of ops.def has a row, either a rule or an
 * explicit "not differentiable".
 */
#ifndef ORION_AUTODIFF_H
#define ORION_AUTODIFF_H

#include "orion/ir.h"

/* Which params train: all float params of F that are not `frozen param`,
 * and, when `trainable` globs are given, that match at least one of them,
 * and that match none of the `frozen` globs (fnmatch(3) patterns on the
 * param's name, as the driver's --trainable=GLOB / --frozen=GLOB give them). */
typedef struct AutodiffOptions {
  const char *const *trainable;
  uint32_t ntrainable;
  const char *const *frozen;
  uint32_t nfrozen;
  /* Save every value the backward reads. By default a value made by a cheap
   * element-wise op (or a reshape) from values the backward has anyway is made
   * again in the backward instead, which only lowers the saved bytes. */
  bool save_elementwise;
  /* LoRA training (orionc --train --lora): differentiate with respect to the
   * function's adapter inputs (names ending ".lora_A" / ".lora_B", made by the
   * lora pass) instead of its params, which are then all frozen. */
  bool wrt_lora_inputs;
  /* A gather along axis 0 of a trainable param by indices that are an input
   * of F (an embedding) hands its adjoint out as a backward output
   * (AdContract.rows) instead of adding it into the param's gradient by a
   * one-hot matmul (vocabulary x tokens x dim): the caller adds its rows at
   * the indices it fed. orionc --train sets it. */
  bool gather_rows;
} AutodiffOptions;

/* Is param p (a VK_PARAM value) trained under these options? o may be NULL. */
bool ad_param_trainable(const AutodiffOptions *o, const IrValue *p);
/* Is v a LoRA adapter input of a function (an input named "*.lora_A" or "*.lora_B")? */
bool ad_is_lora_input(const IrValue *v);

typedef enum AdInputSource {
  AD_FROM_LOSS_SCALE, /* the caller's loss scale (fp32 scalar) */
  AD_FROM_FWD_OUTPUT, /* output number `index` of F.fwd */
  AD_FROM_FWD_INPUT   /* input number `index` of F.fwd (the same as F's) */
} AdInputSource;

/* One input of F.bwd, parallel to its IrFunc.inputs. */
typedef struct AdBwdInput {
  const char *name;   /* the backward input's name */
  AdInputSource from;
  uint32_t index;     /* the forward output or input it is fed from */
  const char *source; /* that forward output's or input's name ("" for the loss scale) */
  IrType type;
  uint64_t bytes;
} AdBwdInput;

/* One output of F.bwd, parallel to its IrFunc.outputs. */
typedef struct AdGradOutput {
  const char *output; /* "grad.PARAM" */
  const char *param;  /* the param's name (in F, F.fwd and F.bwd alike), or the input's */
  IrType type;        /* fp32, the param's shape */
  bool input;         /* param names an input of F (a LoRA adapter: wrt_lora_inputs) */
} AdGradOutput;

/* One output of F.bwd that holds rows of a param's gradient: the param's
 * gradient is its AdGradOutput (none when only such gathers read it) plus,
 * for every position j of F's input
 * `indices`, row j of this output added into row indices[j]. */
typedef struct AdRowGradOutput {
  const char *output;  /* "rows.PARAM" ("rows.PARAM.1", ... for later gathers of the same param) */
  const char *param;
  const char *indices; /* the F input (int32) that indexed the rows */
  uint32_t index;      /* its input number in F and F.fwd */
  IrType type;         /* fp32, indices' shape + the param's row shape */
} AdRowGradOutput;

typedef struct AdContract {
  IrFuncId fwd, bwd;
  AdBwdInput *inputs;
  uint32_t ninputs;
  AdGradOutput *grads;
  uint32_t ngrads;
  AdRowGradOutput *rows; /* with AutodiffOptions.gather_rows: after the grads in F.bwd's outputs */
  uint32_t nrows;
  uint32_t nsaved;      /* forward outputs after `loss` */
  uint64_t saved_bytes; /* their bytes: what the forward keeps for the backward */
} AdContract;

/* Differentiates `loss` of f. On success adds F.fwd and F.bwd (verified) and
 * fills *out. On failure reports through d (a missing or non-scalar loss, no
 * trainable param, a non-differentiable op on a path from a trainable param to
 * the loss) and returns false; the module may then hold partial functions and
 * should be discarded. */
bool ad_differentiate(IrModule *m, IrFuncId f, const AutodiffOptions *o, Diag *d, AdContract *out);

/* The gradient rule table, for tests and docs: the rule's family name, or
 * NULL when op kind k has no row (a bug the test suite catches); *differentiable
 * tells an explicit "not differentiable" row from a rule. */
const char *ad_rule_family(IrOpKind k, bool *differentiable);

#endif
