/*
 * The training loop's half of the row gradients (RowGradients of the
 * training contract): every step, the backward's rows of an embedding's
 * gradient are added into its param's gradient at the ids the forward was
 * fed (runtime/train/rows.c). The backward computes the rest of that
 * gradient (a tied classifier's part) as an ordinary output.
 */
#include <stdlib.h>
#include <string.h>

#include "loop_internal.h"
#include "orion/train_rows.h"

bool loop_rows_setup(Loop *L, Diag *d) {
  const PkgTraining *t = L->contract;
  L->rows = xcalloc(t->nrows + 1, sizeof *L->rows);
  L->nrows = t->nrows;
  for (uint32_t i = 0; i < t->nrows; i++) {
    LoopRows *r = &L->rows[i];
    r->param = UINT32_MAX;
    for (uint32_t k = 0; k < L->nparams; k++)
      if (!strcmp(L->params[k].name, t->rows[i].param)) r->param = k;
    r->out = loop_output_index(L->prog, L->bwd, t->rows[i].output);
    r->in = loop_input_index(L->prog, L->fwd, t->rows[i].indices);
    if (r->param == UINT32_MAX || r->out == UINT32_MAX || r->in == UINT32_MAX) {
      diag_error(d, (SrcSpan){0}, "the row gradient '%s' does not fit the programs (the contract was checked against "
                 "the manifest)", t->rows[i].output);
      return false;
    }
    const TrainParam *p = &L->params[r->param];
    r->width = p->dims[0] ? (int64_t)(p->count / (size_t)p->dims[0]) : 0;
  }
  return true;
}

bool loop_rows_add(Loop *L, Diag *d) {
  for (uint32_t i = 0; i < L->nrows; i++) {
    const LoopRows *r = &L->rows[i];
    TrainParam *p = &L->params[r->param];
    const OrionTensor *ids = &L->fwd_in[r->in];
    int64_t n = 1;
    for (uint32_t k = 0; k < ids->rank; k++) n *= ids->dims[k];
    int64_t bad = train_rows_add(p->grad, p->dims[0], r->width, ids->data, n, L->bwd_out[r->out].data);
    if (bad >= 0) {
      /* the data feeder keeps tokens in range; a fixed --input is not checked elsewhere */
      diag_error(d, (SrcSpan){0}, "the input '%s' holds %d at position %lld, outside the %lld rows of '%s' it indexes",
                 L->contract->rows[i].indices, (int)((const int32_t *)ids->data)[bad], (long long)bad,
                 (long long)p->dims[0], p->name);
      return false;
    }
  }
  return true;
}
