/*
 * io-legalize: checks the function interface against the ANE's I/O rules.
 * The device binds input and output surfaces in ASCII order of their MIL
 * names, not in declared order (constraints ANE003, ANE019): when the two
 * differ, a note says so (the package manifest records the binding order
 * and runtimes bind through it). Inputs and outputs whose names differ only
 * in case are an error, since reports disagree on whether the order is
 * case-sensitive. Surface sizes (uniform, at least the minimum) are computed
 * when the package is written.
 */
#include <ctype.h>
#include <string.h>

#include "orion/passes.h"
#include "pass_util.h"

static bool same_ignoring_case(const char *a, const char *b) {
  for (; *a && *b; a++, b++)
    if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return false;
  return *a == *b;
}

static void check(IrModule *m, IrFuncId f, PassCtx *ctx, bool outputs) {
  IrFunc *fn = ir_func(m, f);
  uint32_t n = outputs ? fn->noutputs : fn->ninputs;
  const char *names[256];
  if (n > 256) return;
  for (uint32_t i = 0; i < n; i++) names[i] = outputs ? fn->outputs[i].name : ir_value(m, fn->inputs[i])->name;
  bool sorted = true;
  for (uint32_t i = 0; i + 1 < n; i++) sorted &= strcmp(names[i], names[i + 1]) < 0;
  for (uint32_t i = 0; i < n; i++)
    for (uint32_t j = i + 1; j < n; j++)
      if (strcmp(names[i], names[j]) && same_ignoring_case(names[i], names[j]))
        diag_error(ctx->d, fn->loc, "%s '%s' and '%s' of '%s' differ only in case; the ANE's binding order for them is not known",
                   outputs ? "outputs" : "inputs", names[i], names[j], fn->name);
  if (!sorted)
    diag_note(ctx->d, fn->loc, "the %s of '%s' bind in alphabetical order on the ANE, not in declared order; the package manifest records the order [%s]",
              outputs ? "outputs" : "inputs", fn->name, outputs ? "ANE003" : "ANE019");
}

bool pass_io_legalize(IrModule *m, PassCtx *ctx) {
  uint32_t before = ctx->d->nerrors;
  for (IrFuncId f = 1; f < m->nfuncs; f++) {
    if (m->funcs[f].dead) continue;
    check(m, f, ctx, false);
    check(m, f, ctx, true);
  }
  return ctx->d->nerrors == before;
}
