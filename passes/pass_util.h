/*
 * Small helpers shared by passes: making consts and ops next to an anchor op.
 * Internal to passes/.
 */
#ifndef ORION_PASS_UTIL_H
#define ORION_PASS_UTIL_H

#include "orion/ir.h"

/* A scalar const named after `base` (made unique) of dtype dt. */
IrValueId pass_scalar_const(IrModule *m, IrFuncId f, const char *base, IrDType dt, double v, SrcSpan loc);
/* A const of the given type and data (n == 1 splats). */
IrValueId pass_const(IrModule *m, IrFuncId f, const char *base, const IrType *t, const double *data, uint64_t n,
                     SrcSpan loc);
/* Creates an op with one result named after `base` (made unique), placed
 * before `anchor`, and returns its result. */
IrValueId pass_op1(IrModule *m, IrOpId anchor, IrOpKind kind, const IrValueId *inputs, uint32_t n, const char *base);
/* Replaces every use of `old` (the result of `op`) by `repl`, erases op and
 * gives repl old's name, so a lowered op's result keeps the user's name. */
void pass_replace_op(IrModule *m, IrOpId op, IrValueId old, IrValueId repl);
/* "<name of v>_<suffix>", for readable generated names. */
const char *pass_name(IrModule *m, IrValueId v, const char *suffix);

#endif
