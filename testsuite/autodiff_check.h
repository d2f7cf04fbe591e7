/*
 * Checking reverse-mode gradients against central finite differences, for
 * the autodiff tests (testsuite/test_autodiff*.c).
 *
 * ad_check parses an .oir text, differentiates `main` (ad_differentiate),
 * then evaluates everything with the double-precision reference evaluator
 * (testsuite/ir_eval.c). Params become consts of known values first, in
 * main, main.fwd and main.bwd alike (by name): `uniform(low, high)` params
 * get values uniform in [low, high), `normal(mean, std)` ones mean + std *
 * uniform[-1, 1), `fill`/`zeros`/`ones` their value; all rounded to the
 * param's dtype and derived from the seed and the name. Inputs are
 * eval_random_input's (integer ranges from `ranges`).
 *
 * For every element of every trainable param it compares the gradient
 * output grad.NAME with (L(p + h) - L(p - h)) / 2h computed on main, and
 * requires |fd - grad| <= tol * max(1, |grad|). It also checks that the
 * forward's loss equals main's and that the gradients scale with loss_scale.
 */
#ifndef ORION_TEST_AUTODIFF_CHECK_H
#define ORION_TEST_AUTODIFF_CHECK_H

#include "ir_eval.h"
#include "orion/autodiff.h"

typedef struct AdCheck {
  const AutodiffOptions *options; /* NULL: every param trains */
  const EvalIntRange *ranges;     /* integer inputs (gather indices) */
  double h;                       /* 0: 1e-5 */
  double tol;                     /* 0: 1e-6 */
  uint64_t seed;                  /* of the inputs */
  /* Also run this pass pipeline ("O1", or a list as for --passes=) over a
   * second copy (after the params became consts) and require its backward's
   * gradients to equal the checked ones within tol. NULL: not. */
  const char *passes;
} AdCheck;

typedef struct AdCheckResult {
  bool ok;
  char err[2048];  /* what failed */
  double max_err;  /* largest |fd - grad| / max(1, |grad|) */
  uint32_t ngrads; /* gradients the backward returned */
  uint32_t nsaved; /* saved values in the contract */
  uint64_t saved_bytes;
  char grads[512]; /* the gradient outputs' names, comma-separated */
} AdCheckResult;

AdCheckResult ad_check(const char *oir, const AdCheck *opt);

/* The error text ad_differentiate reports for oir (main), or "" when it succeeds. */
const char *ad_error_of(const char *oir, const AutodiffOptions *o);

#endif
