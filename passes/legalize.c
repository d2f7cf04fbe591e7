/*
 * The fixed legalization pipeline run before MIL emission: what must happen
 * for the emitted program to be MIL at all. Each step is a pass of its own
 * file; the IR is verified after the pipeline (types of new ops inferred).
 */
#include "orion/passes.h"

bool passes_legalize(IrModule *m, Diag *d) {
  static const PassFn pipeline[] = {pass_inline, pass_decompose_attention, pass_lower_rms_norm, pass_lower_neg};
  for (size_t i = 0; i < sizeof pipeline / sizeof *pipeline; i++)
    if (!pipeline[i](m, d)) return false;
  return ir_verify(m, d);
}
