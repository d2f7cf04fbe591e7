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
/* Every use of `old` (operands and function outputs) but those of op `keep`
 * now reads `repl`: for inserting an op after a value that consumes it. */
void pass_replace_uses_except(IrModule *m, IrFuncId f, IrValueId old, IrValueId repl, IrOpId keep);
/* Infers an op's result types again, quietly (after its attributes changed). */
void pass_reinfer(IrModule *m, IrOpId op);
/* Sets an attribute on the op defining v and infers v's type again (pass_op1
 * inferred it before the attribute existed). */
void pass_set_ints(IrModule *m, IrValueId v, const char *name, const int64_t *vals, uint32_t n);
void pass_set_int(IrModule *m, IrValueId v, const char *name, int64_t val);
void pass_set_bool(IrModule *m, IrValueId v, const char *name, bool val);
/* Deletes a function nobody calls any more, with everything it owns (the
 * calls it makes no longer count as callers of their callees). */
void pass_delete_func(IrModule *m, IrFuncId f);
/* "<name of v>_<suffix>", for readable generated names. */
const char *pass_name(IrModule *m, IrValueId v, const char *suffix);

/* Iterates the live ops of every live function over a snapshot taken when
 * the function's loop starts: the body may erase any op (erased ones are
 * skipped) and create new ones (not visited in this run; a fixed-point group
 * or the pass itself repeats). `break` leaves the current function. */
typedef struct PassSnapshot {
  IrOpId *ids;
  uint32_t n, i;
} PassSnapshot;
PassSnapshot pass_snapshot(IrModule *m, IrFuncId f);
void pass_snapshot_done(PassSnapshot *s);

#define PASS_FOR_EACH_OP(m, f, op)                                                            \
  for (IrFuncId f = 1; f < (m)->nfuncs; f++)                                                   \
    for (PassSnapshot snap_ = pass_snapshot((m), f); snap_.i <= snap_.n; pass_snapshot_done(&snap_)) \
      for (IrOpId op; snap_.i < snap_.n && ((op = snap_.ids[snap_.i++]), 1);)                  \
        if (!ir_op((m), op)->dead)

/* True if v is known at compile time: a param, a const, or computed from
 * them only (a weight's slice or reshape), looking back a few ops. */
bool pass_is_constant(IrModule *m, IrValueId v);
/* True if v is a const whose every element equals x. */
bool pass_is_const_splat(IrModule *m, IrValueId v, double x);

/* A computed value (a cast's or a folded op's, in double) as a result of
 * dtype `to` stores it (orion/op_semantics.h): fp16 through fp32, float ->
 * int truncated toward zero (saturating), -> bool is != 0. */
double pass_round_to_dtype(double v, IrDType to);
/* A const's stored double (or a float attribute written as a const of that
 * dtype) as the emitted program holds it: rounded once to fp16 or fp32, as
 * the MIL emitter writes it; other dtypes unchanged. */
double pass_const_value(double v, IrDType dt);

#endif
