/*
 * The partition's cost model (ane_partition_cost.h).
 */
#include "ane_partition_cost.h"

#include <string.h>

AneCostModel ane_cost_model(const ConstraintTable *t) {
  AneCostModel m = {.dispatch_flops = ANE_DISPATCH_OVERHEAD_FLOPS_DEFAULT};
  for (uint32_t i = 0; t && i < t->nrules; i++) {
    const ConstraintFigure *fig = constraint_figure(&t->rules[i], ANE_DISPATCH_OVERHEAD_FIGURE);
    if (fig) {
      m.dispatch_flops = fig->value;
      break;
    }
  }
  return m;
}

static uint64_t elements(const MilType *t) {
  if (!t || t->kind != MIL_TYPE_TENSOR) return t ? 1 : 0;
  uint64_t n = mil_type_elements(t);
  return n == UINT64_MAX ? 0 : n;
}

static uint64_t saturating_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

static const MilType *arg_type(const MilFunc *f, const MilStmt *st, const char *name) {
  const MilArg *a = mil_find_arg(st, name);
  return a && a->nitems ? mil_operand_type(f, &a->items[0]) : NULL;
}

/* Extent of dimension k of t counted from the end (0: the last), 0 if unknown. */
static uint64_t dim_from_end(const MilType *t, uint32_t k) {
  if (!t || t->kind != MIL_TYPE_TENSOR || t->rank <= k || t->dims[t->rank - 1 - k] < 0) return 0;
  return (uint64_t)t->dims[t->rank - 1 - k];
}

/* Whether a bool argument is the literal or const true (a matmul's transpose flags). */
static bool flag_set(const MilFunc *f, const MilStmt *st, const char *name) {
  const MilArg *a = mil_find_arg(st, name);
  if (!a || !a->nitems) return false;
  const MilOperand *o = &a->items[0];
  const MilLiteral *l = o->kind == MIL_OPERAND_LITERAL ? o->literal : NULL;
  if (!l && o->def_stmt < f->nstmts) {
    const MilAttr *val = mil_find_attr(f->stmts[o->def_stmt].attrs, f->stmts[o->def_stmt].nattrs, "val");
    l = val ? val->value : NULL;
  }
  return l && l->payload == MIL_PAYLOAD_INLINE && l->value.kind == MIL_ELEM_BOOL && l->value.b;
}

static const char *const data_movement[] = {"const",         "reshape",       "transpose", "slice_by_index",
                                            "slice_by_size", "squeeze",       "expand_dims", "identity"};

uint64_t ane_stmt_flops(const MilFunc *f, uint32_t s) {
  const MilStmt *st = &f->stmts[s];
  for (size_t i = 0; i < sizeof data_movement / sizeof *data_movement; i++)
    if (!strcmp(st->op, data_movement[i])) return 0;
  uint64_t out = st->nresults ? elements(&st->results[0].type) : 0;
  if (!strcmp(st->op, "matmul")) {
    const MilType *x = arg_type(f, st, "x");
    return saturating_mul(2 * out, dim_from_end(x, flag_set(f, st, "transpose_x") ? 1 : 0));
  }
  if (!strcmp(st->op, "linear")) return saturating_mul(2 * out, dim_from_end(arg_type(f, st, "x"), 0));
  if (!strcmp(st->op, "conv")) {
    const MilType *w = arg_type(f, st, "weight");
    uint64_t per_channel = w && w->kind == MIL_TYPE_TENSOR && w->rank && w->dims[0] > 0
                               ? elements(w) / (uint64_t)w->dims[0]
                               : 0;
    return saturating_mul(2 * out, per_channel);
  }
  if (!strcmp(st->op, "scaled_dot_product_attention")) {
    /* query [.., L, E] times key [.., S, E], then the weights [.., L, S] times value [.., S, Ev] */
    const MilType *k = arg_type(f, st, "key");
    uint64_t s_len = dim_from_end(k, 1), e = dim_from_end(arg_type(f, st, "query"), 0);
    uint64_t l_len = dim_from_end(st->nresults ? &st->results[0].type : NULL, 1);
    uint64_t scores = l_len ? saturating_mul(out / l_len, s_len) : 0; /* batch x L x S, when Ev = E */
    return saturating_mul(2, saturating_mul(scores, e) + saturating_mul(out, s_len));
  }
  uint64_t most = out;
  for (uint32_t r = 1; r < st->nresults; r++) {
    uint64_t n = elements(&st->results[r].type);
    most = n > most ? n : most;
  }
  for (uint32_t a = 0; a < st->nargs; a++)
    for (uint32_t i = 0; i < st->args[a].nitems; i++) {
      uint64_t n = elements(mil_operand_type(f, &st->args[a].items[i]));
      most = n > most ? n : most;
    }
  return most;
}

uint64_t ane_segment_flops(const MilFunc *f, const AneSegment *g) {
  uint64_t n = 0;
  for (uint32_t i = 0; i < g->nstmts; i++) {
    uint64_t s = ane_stmt_flops(f, g->stmts[i]);
    n = n + s < n ? UINT64_MAX : n + s;
  }
  return n;
}

uint64_t ane_segment_copy_bytes(const MilFunc *f, const AneSegment *g) {
  uint64_t n = 0;
  for (uint32_t i = 0; i < g->ninputs; i++) n += 2 * elements(ane_value_type(f, &g->inputs[i]));
  for (uint32_t i = 0; i < g->noutputs; i++) n += 2 * elements(ane_value_type(f, &g->outputs[i]));
  return n;
}

bool ane_segment_pays(const MilFunc *f, const AneSegment *g, const AneCostModel *cost) {
  uint64_t copies = ane_segment_copy_bytes(f, g);
  uint64_t crossings = copies + cost->dispatch_flops < copies ? UINT64_MAX : copies + cost->dispatch_flops;
  return ane_segment_flops(f, g) >= crossings;
}
