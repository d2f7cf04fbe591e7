/*
 * The reference evaluator's loss ops (ir_eval.c calls them; see ir_eval.h for
 * the evaluator's conventions: tensors as doubles, results not rounded).
 */
#ifndef ORION_TEST_IR_EVAL_LOSS_H
#define ORION_TEST_IR_EVAL_LOSS_H

#include "ir_eval.h"

/* cross_entropy of op `op` on in[0] (logits) and in[1] (targets) into *out,
 * in double: the mean over the counted positions of
 * log(sum(exp(x - max))) - (x[target] - max). An out-of-range target fails
 * naming its position; every position ignored gives NaN (0 / 0). On failure
 * returns false with the reason in msg and *out untouched. */
bool eval_cross_entropy(IrModule *m, IrOpId op, const EvalTensor *in, EvalTensor *out, char *msg, size_t msglen);

#endif
