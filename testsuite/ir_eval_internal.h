/*
 * Inside the reference evaluator (ir_eval.c and its op files; the interface
 * is ir_eval.h): the evaluation state, the tensor and index helpers, and
 * the op families, each file one concern:
 *   ir_eval.c             tensors, state and messages, params, calls, functions
 *   ir_eval_elementwise.c element-wise ops, reductions, normalizations
 *   ir_eval_shape.c       reshape, transpose, slice, split, concat, gather
 *   ir_eval_linalg.c      matmul, linear, conv, sdpa
 *   ir_eval_loss.c        cross_entropy
 *   ir_eval_check.c       random inputs, comparison, before/after checks of passes
 */
#ifndef ORION_TEST_IR_EVAL_INTERNAL_H
#define ORION_TEST_IR_EVAL_INTERNAL_H

#include "ir_eval.h"

#define MAX_RESULTS IR_MAX_OPERANDS

typedef struct Ev {
  IrModule *m;
  char *err;
  size_t errlen;
  bool failed;
  IrOpId op;        /* op being evaluated (for messages), 0 outside ops */
  const char *func; /* function being evaluated */
} Ev;

/* ---- tensors and indices ---- */

/* Elements of t; a new zeroed tensor of type t; a copy. */
int64_t ev_count_of(const IrType *t);
EvalTensor ev_tensor_new(const IrType *t);
EvalTensor ev_tensor_dup(const EvalTensor *t);
/* Row-major flat offset of a multi-index. */
int64_t ev_offset_of(const IrType *t, const int64_t *idx);
/* Steps idx to t's next multi-index in row-major order; false after the last. */
bool ev_next_index(int64_t *idx, const IrType *t);
/* Offset into `in` of the element NumPy broadcasting maps to index idx of `out`. */
int64_t ev_offset_bcast(const IrType *in, const IrType *out, const int64_t *idx);
/* NumPy's broadcast shape of a and b; false if none. */
bool ev_bcast_shape(const IrType *a, const IrType *b, IrType *out);
/* "fp32[2,3]" (for messages). */
void ev_type_text(const IrType *t, char *buf, size_t n);

/* Range of whole numbers a dtype holds; false for float dtypes. */
bool ev_int_range(IrDType t, double *lo, double *hi);

/* ---- messages and attributes of the op being evaluated ---- */

/* Records the first failure's message (with the op and function) and returns false. */
bool ev_fail(Ev *e, const char *fmt, ...) ORION_PRINTF(2, 3);
/* The current op's attributes; a list attribute: its length, -1 if absent. */
int64_t ev_attr_int(Ev *e, const char *name, int64_t dflt);
double ev_attr_float(Ev *e, const char *name, double dflt);
bool ev_attr_bool(Ev *e, const char *name, bool dflt);
const char *ev_attr_str(Ev *e, const char *name, const char *dflt);
int ev_attr_ints(Ev *e, const char *name, int64_t *out, int max);
/* Normalizes an axis against a rank (negative counts from the end). */
bool ev_norm_axis(Ev *e, int64_t axis, int rank, int *out);

/* ---- the op families: results into out (outs), false after ev_fail ---- */

bool ev_op_binary(Ev *e, IrOpKind k, const EvalTensor *in, EvalTensor *out);
bool ev_op_unary(Ev *e, IrOpKind k, const EvalTensor *x, EvalTensor *out);
bool ev_op_clip(Ev *e, const EvalTensor *x, EvalTensor *out);
bool ev_op_select(Ev *e, const EvalTensor *in, EvalTensor *out);
bool ev_op_cast(Ev *e, const EvalTensor *x, EvalTensor *out);
bool ev_op_reduce(Ev *e, IrOpKind k, const EvalTensor *x, EvalTensor *out);
bool ev_op_softmax(Ev *e, const EvalTensor *x, EvalTensor *out);
bool ev_op_norm(Ev *e, IrOpKind k, const EvalTensor *in, uint32_t nin, EvalTensor *out);
bool ev_op_reshape(Ev *e, const EvalTensor *x, EvalTensor *out);
bool ev_op_transpose(Ev *e, const EvalTensor *x, EvalTensor *out);
bool ev_op_slice(Ev *e, const EvalTensor *x, EvalTensor *out);
bool ev_op_split(Ev *e, const EvalTensor *x, EvalTensor *outs, uint32_t nres);
bool ev_op_concat(Ev *e, const EvalTensor *in, uint32_t nin, EvalTensor *out);
bool ev_op_gather(Ev *e, const EvalTensor *x, const EvalTensor *ind, EvalTensor *out);
bool ev_op_matmul(Ev *e, const EvalTensor *x, const EvalTensor *y, EvalTensor *out);
bool ev_op_linear(Ev *e, const EvalTensor *in, uint32_t nin, EvalTensor *out);
bool ev_op_conv(Ev *e, const EvalTensor *in, uint32_t nin, EvalTensor *out);
bool ev_op_sdpa(Ev *e, const EvalTensor *in, uint32_t nin, EvalTensor *out);

#endif
