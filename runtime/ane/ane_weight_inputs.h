/*
 * A function's MIL with its weights as inputs (the `inputs` weight-update
 * strategy, docs/ane-backend.md): every fp16 or fp32 BLOBFILE `const` becomes a
 * function input of its own, so that a weight update is a write into that
 * input's surface, with no compile and no unload (an fp32 weight stays an
 * fp32 input, converted at its fp16 surface like every fp32 input, as the
 * device's compiler converts an fp32 const). Shape and int consts stay
 * (they are inline literals, never BLOBFILE). The input of weight `W` is
 * named ANE_WEIGHT_INPUT_PREFIX "W" (every reference renamed), which keeps
 * the names apart from the function's own and lets a reader of the MIL (the
 * Linux stand-in) tell a weight input from any other.
 *
 * The ANE takes dynamic weights through matmul (and elementwise ops), not
 * conv: a conv whose weight is an input compiles but ignores it on one
 * report, crashes the compiler service at batch >= 2 on another (peers.md
 * §4.6), and no constraint of the table covers it; MIL's linear and norms
 * take their weights as consts only. So a function with such a weight (or
 * one made from it, as lower-linear's reshape for its 1x1 conv) is refused
 * here, unless the conv is 1x1 and AneWeightInputsOptions.convs_as_matmul
 * has it written as a matmul (ane_conv_matmul.h), as is a weight that is neither fp16 nor fp32 (a weight input is an
 * fp16 surface) or one inside a constexpr_* op; the caller keeps the
 * function's consts baked and recompiles on a change.
 *
 * Pure C over the MIL reader's structures: the statements are copied from
 * the text they were read from, as ane_partition_mil does.
 */
#ifndef ORION_ANE_WEIGHT_INPUTS_H
#define ORION_ANE_WEIGHT_INPUTS_H

#include "orion/mil_reader.h"

#define ANE_WEIGHT_INPUT_PREFIX "orion_weight__"

typedef struct AneWeightInput {
  uint32_t stmt;    /* the const statement of the function */
  const char *name; /* its result (orion_weight's name) */
  char *input;      /* the input's MIL name: ANE_WEIGHT_INPUT_PREFIX name */
  MilType type;     /* an fp16 or fp32 tensor */
  uint64_t bytes;   /* its bytes on its surface (fp16) */
} AneWeightInput;

typedef struct AneWeightInputs {
  AneWeightInput *w; /* in statement order */
  uint32_t n;
} AneWeightInputs;

/* Appends f of prog (read from text) as a MIL program of one function, of
 * f's name and opset, whose inputs are f's own followed by one per weight,
 * and fills out with the weights. False, writing into why a clause naming
 * the weight and the reason, when a weight cannot be an input; nothing is
 * then appended and out is empty. A function without weights gives n 0. */
bool ane_weight_inputs_mil(const MilProgram *prog, const MilFunc *f, const char *text, AneWeightInputs *out,
                           StrBuf *mil, char *why, size_t len);

typedef struct AneWeightInputsOptions {
  /* A 1x1 conv whose weight is (or is made from) a weight is written as the
   * equivalent matmul (ane_conv_matmul.h: reshapes around a matmul, a bias
   * as an add) instead of refusing the function; other convs are refused
   * as without. The backend sets it; ane_weight_inputs_mil does not. */
  bool convs_as_matmul;
} AneWeightInputsOptions;

/* ane_weight_inputs_mil under opt (NULL: the defaults, every option off). */
bool ane_weight_inputs_mil_with(const AneWeightInputsOptions *opt, const MilProgram *prog, const MilFunc *f,
                                const char *text, AneWeightInputs *out, StrBuf *mil, char *why, size_t len);
void ane_weight_inputs_free(AneWeightInputs *w);

#endif
