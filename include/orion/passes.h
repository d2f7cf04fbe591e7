/*
 * Passes over the graph IR. Each pass lives in its own file under passes/
 * and has this one signature: it rewrites the module in place, reports
 * problems through the diagnostics, and returns false on error.
 */
#ifndef ORION_PASSES_H
#define ORION_PASSES_H

#include "orion/ir.h"

typedef bool (*PassFn)(IrModule *m, Diag *d);

/* inline: expands every call into its caller (passes/inline.c). */
bool pass_inline(IrModule *m, Diag *d);
/* decompose-attention: sdpa -> matmul, scale, mask, softmax, matmul. */
bool pass_decompose_attention(IrModule *m, Diag *d);
/* lower-rms-norm: rms_norm -> mul, reduce_mean, add, rsqrt, mul. */
bool pass_lower_rms_norm(IrModule *m, Diag *d);
/* lower-neg: neg(x) -> mul(x, -1). */
bool pass_lower_neg(IrModule *m, Diag *d);

/* The legalization every program gets before MIL emission (inline, then the
 * lowerings above), verified at the end. The full pass manager comes later. */
bool passes_legalize(IrModule *m, Diag *d);

#endif
