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

#endif
