/*
 * Loss ops of the reference evaluator (see ir_eval_loss.h), each a direct
 * transcription of its definition in docs/language.md section 9.
 */
#include "ir_eval_loss.h"

#include <math.h>

/* "[1, 2]": the multi-index of flat element i of a tensor of type t. */
static void position_text(const IrType *t, int64_t i, char *buf, size_t n) {
  int64_t idx[IR_MAX_RANK];
  for (int d = t->rank - 1; d >= 0; d--) {
    idx[d] = i % t->dims[d];
    i /= t->dims[d];
  }
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int d = 0; d < t->rank && k < n; d++) k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? ", " : "", (long long)idx[d]);
  if (k < n) snprintf(buf + k, n - k, "]");
}

bool eval_cross_entropy(IrModule *m, IrOpId op, const EvalTensor *in, EvalTensor *out, char *msg, size_t msglen) {
  const EvalTensor *x = &in[0], *t = &in[1];
  int64_t classes = x->type.dims[x->type.rank - 1], positions = 1;
  for (int d = 0; d < t->type.rank; d++) positions *= t->type.dims[d];
  bool has_ignore = ir_op_attr(m, op, "ignore_index") != NULL;
  int64_t ignore = ir_attr_int(m, op, "ignore_index", 0);
  double total = 0;
  int64_t counted = 0;
  for (int64_t p = 0; p < positions; p++) {
    int64_t target = (int64_t)t->data[p];
    if (has_ignore && target == ignore) continue;
    if (target < 0 || target >= classes) {
      char pos[96];
      position_text(&t->type, p, pos, sizeof pos);
      snprintf(msg, msglen, "target %lld at position %s is out of range for %lld classes", (long long)target, pos,
               (long long)classes);
      return false;
    }
    const double *row = x->data + p * classes;
    double mx = -INFINITY;
    for (int64_t c = 0; c < classes; c++) mx = fmax(mx, row[c]);
    double sum = 0;
    for (int64_t c = 0; c < classes; c++) sum += exp(row[c] - mx);
    total += log(sum) - (row[target] - mx);
    counted++;
  }
  out->type = (IrType){.dtype = DT_FP32, .rank = 0};
  out->data = xcalloc(1, sizeof *out->data);
  out->data[0] = total / (double)counted;
  return true;
}
