/*
 * A reference evaluator of the graph IR, for tests.
 *
 * It runs one function of a verified module on given inputs and returns its
 * outputs, computing every op in double precision by the plainest loops that
 * follow docs/language.md section 9 (and frontend/infer.c for shapes and
 * attribute defaults). It is written for clarity, not speed: use tiny shapes.
 *
 * Numbers: every tensor is held as doubles, whatever its dtype. Inputs are
 * taken as given; params are materialized by weights_materialize (so fp16
 * params are rounded to fp16, as the package stores them); consts are taken
 * as written (their stored doubles, not rounded); the float attributes of
 * log, rsqrt (epsilon) and clip (min, max) are rounded to x's dtype, as the
 * emitted program holds them. Each element-wise op's scalar function is
 * orion/op_semantics.h's (docs/numerics.md), the one the folder and the CPU
 * backend use. Float results are never rounded to fp16/fp32: the reference
 * is "exact", compare with a tolerance (or round with op_sem_store_fp16/32
 * for the bits a backend stores, as test_op_semantics.c does).
 * The one exception is `cast` to fp16/fp32, which rounds to the dtype as
 * NumPy's astype does (converting is what the op is for; cast-fusion folds
 * casts of consts the same way). Integer dtypes hold whole numbers; bool
 * holds 0 or 1.
 *
 * Calls are evaluated by recursing into the callee with the semantics of
 * inlining (docs/language.md section 8): the callee's `normal`/`uniform`
 * params get the seed derived from the instance path (ir_derive_seed), and
 * "{scope}" in safetensors keys becomes the path, so a module evaluates to
 * the same outputs before and after the inline pass.
 *
 * Calls nest at most IR_MAX_CALL_DEPTH deep.
 *
 * The evaluator also recomputes every result shape from its own reading of
 * the op and fails if it differs from the type in the IR (a cross-check of
 * shape inference).
 *
 * Behaviour the language leaves open is reported as an evaluation error
 * rather than guessed: gather indices outside [0, size), cross_entropy
 * targets outside [0, C) that are not its ignore_index (ir_eval_loss.c),
 * casts of NaN or of values outside the range of an integer dtype (which the
 * CPU backend reports too). int32 results saturate to the int32 range, as the CPU
 * backend's; int32 reduce_mean truncates toward zero.
 */
#ifndef ORION_TEST_IR_EVAL_H
#define ORION_TEST_IR_EVAL_H

#include "orion/ir.h"
#include "orion/passes.h"

typedef struct EvalTensor {
  IrType type;
  double *data; /* ir_type_elements(&type) values, row-major; malloc'd */
} EvalTensor;

/* Evaluates function f of m (verified). `inputs` holds one tensor per input
 * of f, in order, each of exactly the input's type (NULL if f has none).
 * On success *outputs is a malloc'd array of f's noutputs tensors (free each
 * with eval_tensor_free, then the array with free). On failure returns false
 * with a message in err and *outputs NULL. */
bool ir_eval(IrModule *m, IrFuncId f, const EvalTensor *inputs, EvalTensor **outputs, char *err, size_t errlen);

void eval_tensor_free(EvalTensor *t);
/* Frees n tensors and the array itself (NULL is fine). */
void eval_tensors_free(EvalTensor *ts, uint32_t n);

/* A tensor of type t with deterministic random values from `seed`:
 * fp16/fp32 uniform in [-2, 2] (rounded to the dtype, so the values are
 * exactly what a backend would be given); int32 and int8 whole numbers in
 * [-8, 8]; uint8 in [0, 16]; bool 0 or 1. */
EvalTensor eval_random_input(const IrType *t, uint64_t seed);
/* Whole numbers uniform in [low, high) (high > low), e.g. gather indices. */
EvalTensor eval_random_ints(const IrType *t, uint64_t seed, int64_t low, int64_t high);

/* Largest |a[i] - b[i]|. Equal infinities and NaN against NaN count as 0;
 * a NaN against a number, or different types, give INFINITY. */
double eval_max_abs_diff(const EvalTensor *a, const EvalTensor *b);

/* ---- before/after checks of passes ---- */

/* The range of random whole numbers for one input (matched by name in every
 * entry function), [low, high). */
typedef struct EvalIntRange {
  const char *input;
  int64_t low, high;
} EvalIntRange;

/* Parses oir_text twice, runs `passes` (a pass list as for --passes=, or a
 * pipeline name "O0"/"O1") on one copy, then evaluates every entry function
 * (a function without callers) of the original and the same-named function of
 * the transformed module on the same random inputs (seeded by `seed` and the
 * input's position), and compares each output. `ranges` (NULL, or terminated
 * by an entry with input NULL) gives integer ranges for named inputs; other
 * inputs use eval_random_input. Returns true when every output differs by at
 * most tol; otherwise false with a readable message in err (which function,
 * output and difference, or what failed). `*max_diff`, if not NULL, receives
 * the largest difference seen. */
bool eval_pass_preserves(const char *oir_text, const char *passes, uint64_t seed, double tol,
                         const EvalIntRange *ranges, double *max_diff, char *err, size_t errlen);
/* The same with full pass-manager options (pass options such as
 * fp16_range_guard, verify_each, ...). */
bool eval_pass_preserves_opts(const char *oir_text, const PassManagerOptions *opts, uint64_t seed, double tol,
                              const EvalIntRange *ranges, double *max_diff, char *err, size_t errlen);

#endif
