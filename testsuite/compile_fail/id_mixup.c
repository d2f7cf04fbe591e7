/*
 * Compile-fail cases for the id types of orion/ir.h, run by
 * testsuite/cli/compile_fail.sh. Without MIXUP this file compiles cleanly
 * with -Wall -Wextra -Werror (the control: the includes and flags are right,
 * so a failure below can only be the mix-up). With -DMIXUP=N, case N passes
 * one kind of id where another is expected, and the compiler must reject
 * exactly the line marked "MIXUP N" with an error naming both types, which
 * the marker lists after "expects".
 */
#include "orion/ir.h"

#ifndef MIXUP
#define MIXUP 0
#endif

void id_mixup_cases(IrModule *m, IrFuncId f);

void id_mixup_cases(IrModule *m, IrFuncId f) {
  IrType t = {.dtype = DT_FP16, .rank = 1, .dims = {4}};
  IrValueId x = ir_func_add_input(m, f, "x", &t, (SrcSpan){0});
  IrOpId op = ir_op_new(m, f, OP_RELU, &x, 1, 1, NULL, (SrcSpan){0});
  IrValueId y = ir_op(m, op)->results[0];
  IrUse use = {IR_NO_OP, 0};
  (void)y;
  (void)use;
#if MIXUP == 1
  ir_op_erase(m, y); /* MIXUP 1 expects IrOpId IrValueId: a value id for an op id */
#elif MIXUP == 2
  (void)ir_value(m, op); /* MIXUP 2 expects IrValueId IrOpId: an op id for a value id */
#elif MIXUP == 3
  ir_func_add_output(m, f, "y", op, (SrcSpan){0}); /* MIXUP 3 expects IrValueId IrOpId: an op as an output */
#elif MIXUP == 4
  use.op = y; /* MIXUP 4 expects IrOpId IrValueId: a value as a use's op */
#elif MIXUP == 5
  (void)ir_id_eq(x, op); /* MIXUP 5 expects IrValueId IrOpId: comparing a value id with an op id */
#elif MIXUP == 6
  (void)ir_op(m, 1); /* MIXUP 6 expects IrOpId int: a bare index for an op id */
#else
  ir_func_add_output(m, f, "y", y, (SrcSpan){0});
  use.op = op;
  (void)ir_id_eq(x, y);
  (void)ir_op(m, ir_op_id(1));
#endif
}
