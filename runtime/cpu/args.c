/*
 * Operands: a statement's arguments looked up by the MIL op table's ids and
 * read as values, scalars, strings and integer lists; axes and broadcasting.
 */
#include "cpu_internal.h"

/* Per statement, which of its arguments is each table argument of its op:
 * built once at prepare, so a look-up by id is an index. */
void arg_map(CpuProgram *c) {
  const MilFunc *f = c->f;
  uint32_t n = 0;
  c->mil = xcalloc(f->nstmts + 1, sizeof *c->mil);
  c->argposbase = xcalloc(f->nstmts + 1, sizeof *c->argposbase);
  for (uint32_t si = 0; si < f->nstmts; si++) {
    c->mil[si] = mil_op_find(f->stmts[si].op);
    c->argposbase[si] = n;
    n += c->mil[si] ? c->mil[si]->nargs : 0;
  }
  c->argpos = xcalloc(n + 1, sizeof *c->argpos);
  for (uint32_t i = 0; i < n; i++) c->argpos[i] = UINT32_MAX;
  for (uint32_t si = 0; si < f->nstmts; si++) {
    const MilOpInfo *op = c->mil[si];
    const MilStmt *s = &f->stmts[si];
    for (uint32_t k = 0; op && k < s->nargs; k++) {
      const MilArgSpec *a = mil_op_find_arg(op, s->args[k].name);
      if (a) c->argpos[c->argposbase[si] + (uint32_t)(a - mil_arg_info(op->first_arg))] = k;
    }
  }
}

/* Argument id of statement si, NULL when absent (or when its op has no
 * argument of that name). */
const MilArg *stmt_arg(const CpuProgram *c, uint32_t si, MilArgId id) {
  const MilOpInfo *op = c->mil[si];
  const MilArgSpec *a = mil_arg_info(id);
  if (!op || !a) return NULL;
  if (a->op != op->id && !(a = mil_op_find_arg(op, a->name))) return NULL; /* a shared binder's id */
  uint32_t k = c->argpos[c->argposbase[si] + (uint32_t)(a - mil_arg_info(op->first_arg))];
  return k == UINT32_MAX ? NULL : &c->f->stmts[si].args[k];
}

/* The value of item j of argument a of the current statement. */
const Val *arg_item(Ctx *x, const MilArg *a, uint32_t j) {
  const CpuProgram *c = x->c;
  uint32_t k = (uint32_t)(a - x->s->args);
  return &x->vals[c->opslot[c->argstart[c->argbase[x->si] + k] + j]];
}

/* The slot read by single-item argument id of statement si, UINT32_MAX if none. */
uint32_t arg_slot(const CpuProgram *c, uint32_t si, MilArgId id) {
  const MilStmt *s = &c->f->stmts[si];
  const MilArg *a = stmt_arg(c, si, id);
  if (!a || a->is_list || a->nitems != 1) return UINT32_MAX;
  return c->opslot[c->argstart[c->argbase[si] + (uint32_t)(a - s->args)]];
}

/* The value of argument id, NULL when absent (no error: optional). */
const Val *opt_arg(Ctx *x, MilArgId id, bool *ok) {
  const MilArg *a = find_arg(x, id);
  if (!a) return NULL;
  if (a->is_list || a->nitems != 1) {
    *ok = op_fail(x, "argument '%s' must be a single value", mil_arg_name(id));
    return NULL;
  }
  return arg_item(x, a, 0);
}

const Val *req_arg(Ctx *x, MilArgId id, bool *ok) {
  if (!find_arg(x, id)) {
    *ok = op_fail(x, "missing argument '%s'", mil_arg_name(id));
    return NULL;
  }
  return opt_arg(x, id, ok);
}

/* The value of a scalar, string or list argument: when binding, the const
 * it is (through views), or NULL after an error if it is computed. */
static const Val *setting_arg(Ctx *x, MilArgId id, bool *ok) {
  const Val *v = opt_arg(x, id, ok);
  if (!v || !x->binding) return v;
  uint32_t r = root_of(x->c, (uint32_t)(v - x->vals));
  if (x->c->slots[r].kind != SK_CONST && x->c->slots[r].kind != SK_STR) {
    *ok = op_fail(x, "argument '%s' must be a constant", mil_arg_name(id));
    return NULL;
  }
  x->setting[r] = true;
  return &x->vals[r];
}

/* A numeric scalar argument (default dflt when absent). */
double scalar_arg(Ctx *x, MilArgId id, double dflt, bool *ok) {
  const Val *v = setting_arg(x, id, ok);
  if (!v) return dflt;
  if (v->st == ST_STR || v->n != 1) {
    *ok = op_fail(x, "argument '%s' must be a scalar", mil_arg_name(id));
    return dflt;
  }
  return ld(v, 0);
}

const char *string_arg(Ctx *x, MilArgId id, const char *dflt, bool *ok) {
  const Val *v = setting_arg(x, id, ok);
  if (!v) return dflt;
  if (v->st != ST_STR) {
    *ok = op_fail(x, "argument '%s' must be a string", mil_arg_name(id));
    return dflt;
  }
  return v->str;
}

/* An integer list argument; *n = 0 and false returned when absent. */
bool ints_arg(Ctx *x, MilArgId id, int64_t *buf, uint32_t max, uint32_t *n, bool *ok) {
  return ints_of(x, id, setting_arg(x, id, ok), buf, max, n, ok);
}

/* The integers of value v (argument id, NULL when absent), as ints_arg. */
bool ints_of(Ctx *x, MilArgId id, const Val *v, int64_t *buf, uint32_t max, uint32_t *n, bool *ok) {
  *n = 0;
  if (!v) return false;
  if (v->st == ST_STR || v->n > (int64_t)max) {
    *ok = op_fail(x, "argument '%s' must be a list of at most %u integers", mil_arg_name(id), max);
    return false;
  }
  for (int64_t i = 0; i < v->n; i++) buf[i] = to_index(ld(v, i));
  *n = (uint32_t)v->n;
  return true;
}

/* v, or when binding and v is a const (through views), the const, whose
 * elements are set already; *is_const says which. */
const Val *const_or_run(Ctx *x, const Val *v, bool *is_const) {
  if (!v) return v;
  uint32_t r = root_of(x->c, (uint32_t)(v - x->vals));
  bool k = x->binding && (x->c->slots[r].kind == SK_CONST || x->c->slots[r].kind == SK_STR);
  if (!k) *is_const = false;
  return k ? &x->vals[r] : v;
}

bool norm_axis(Ctx *x, int64_t axis, uint32_t rank, uint32_t *out) {
  int64_t a = axis < 0 ? axis + (int64_t)rank : axis;
  if (a < 0 || a >= (int64_t)rank) return op_fail(x, "axis %lld is out of range for rank %u", (long long)axis, rank);
  *out = (uint32_t)a;
  return true;
}

/* Strides of `in` broadcast to the shape of `out` (NumPy rules: aligned at
 * the right, size-1 dims stretch with stride 0). */
bool bcast_strides(Ctx *x, const Val *in, const Val *out, int64_t *bst) {
  if (in->rank > out->rank) return op_fail(x, "an operand of rank %u does not broadcast to rank %u", in->rank, out->rank);
  int64_t st_[MIL_MAX_RANK];
  strides_of(in->dims, in->rank, st_);
  uint32_t lead = out->rank - in->rank;
  for (uint32_t i = 0; i < out->rank; i++) {
    if (i < lead) {
      bst[i] = 0;
      continue;
    }
    int64_t d = in->dims[i - lead];
    if (d != out->dims[i] && d != 1) {
      char a[128], b[128];
      shape_str(in->dims, in->rank, a, sizeof a);
      shape_str(out->dims, out->rank, b, sizeof b);
      return op_fail(x, "an operand of shape %s does not broadcast to %s", a, b);
    }
    bst[i] = d == 1 ? 0 : st_[i - lead];
  }
  return true;
}
