/* What the built-in backends share with the tests, not with library users. */
#ifndef ORION_BACKEND_INTERNAL_H
#define ORION_BACKEND_INTERNAL_H

#include "orion/backend.h"

/* The checking backend's comparison: true when every output of function fn
 * has the same bits in both runs; otherwise reports the first element that
 * differs (output, index, both values). */
bool check_outputs_identical(const OrionProgram *p, uint32_t fn, const OrionTensor *fused, const OrionTensor *unfused,
                             Diag *d);

#endif
