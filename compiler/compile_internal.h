/* Shared between the files of the compile library (not installed). */
#ifndef ORION_COMPILE_INTERNAL_H
#define ORION_COMPILE_INTERNAL_H

#include "orion/compile.h"

/* orionc --summary: functions, inputs, outputs, weights and op counts of m
 * (calls expanded), appended to out as text or as one JSON object. */
void compile_summary(IrModule *m, const char *input, bool json, StrBuf *out);

#endif
