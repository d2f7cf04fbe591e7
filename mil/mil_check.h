/*
 * The reader's checks of op arguments against the MIL op table (internal to
 * the reader; mil_op_args.c).
 */
#ifndef ORION_MIL_CHECK_H
#define ORION_MIL_CHECK_H

#include "orion/mil_ops.h"

/* What the checks may look at: the function's parameters and the statements
 * built so far (operands defined later have no type yet and are not checked). */
typedef struct MilArgContext {
  Diag *d;
  const MilVar *params;
  uint32_t nparams;
  const MilStmt *stmts;
  uint32_t nbuilt;
  bool tolerant; /* report as warnings, and go on */
} MilArgContext;

/* Unknown argument names and arguments of the wrong kind, located at the
 * argument. False if a problem was reported as an error. */
bool mil_check_op_args(const MilArgContext *c, const MilOpInfo *op, const MilStmt *st);

#endif
