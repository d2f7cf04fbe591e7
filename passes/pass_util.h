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
/* Infers an op's result types again, quietly (after its attributes changed). */
void pass_reinfer(IrModule *m, IrOpId op);
/* Sets an attribute on the op defining v and infers v's type again (pass_op1
 * inferred it before the attribute existed). */
void pass_set_ints(IrModule *m, IrValueId v, const char *name, const int64_t *vals, uint32_t n);
void pass_set_int(IrModule *m, IrValueId v, const char *name, int64_t val);
void pass_set_bool(IrModule *m, IrValueId v, const char *name, bool val);
/* "<name of v>_<suffix>", for readable generated names. */
const char *pass_name(IrModule *m, IrValueId v, const char *suffix);

/* Iterates the live ops of every live function; `next` is read before the
 * body runs, so the body may erase the current op. */
#define PASS_FOR_EACH_OP(m, f, op, next)                                  \
  for (IrFuncId f = 1; f < (m)->nfuncs; f++)                             \
    if (!(m)->funcs[f].dead)                                             \
      for (IrOpId op = ir_func((m), f)->first, next; op && ((next = ir_op((m), op)->next), 1); op = next)

/* True if v is known at compile time: a param, a const, or computed from
 * them only (a weight's slice or reshape), looking back a few ops. */
bool pass_is_constant(IrModule *m, IrValueId v);
/* True if v is a const whose every element equals x. */
bool pass_is_const_splat(IrModule *m, IrValueId v, double x);

/* A value as the dtype stores it: floats rounded, float -> int truncated
 * toward zero (saturating), -> bool is != 0. What cast and folding compute. */
double pass_round_to_dtype(double v, IrDType to);

#endif
